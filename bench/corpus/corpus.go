// Package corpus fetches, caches and lists the real photographs and artwork that the codec benchmark runs on.
//
// The photos come from two Debian packages, which any Debian machine can download without credentials and whose
// contents do not change within a release: opencv-doc (the sample images of OpenCV's examples, under
// usr/share/doc/opencv-doc/examples/data) and mate-backgrounds (desktop wallpapers up to 5640x3172). Fetch runs
// `apt-get download` and `dpkg -x` into a cache directory once; Load lists the images found there with their
// sizes, read from the file headers. Smooth artwork comes from gnome-backgrounds (4096x4096 WebP wallpapers) and
// desktop-base (boot and login backgrounds of Debian's themes).
package corpus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"filigrane/codec/imageio"
)

// Packages are the Debian packages the corpus is extracted from. gnome-backgrounds and desktop-base supply
// smooth artwork (flat colours, gradients, soft shading: where a mark shows first).
var Packages = []string{"opencv-doc", "mate-backgrounds", "gnome-backgrounds", "desktop-base"}

// photoDirs are the directories, relative to the extraction root, that hold images.
var photoDirs = []string{
	"usr/share/doc/opencv-doc/examples/data",
	"usr/share/backgrounds",
	"usr/share/desktop-base",
	"usr/share/plymouth/themes",
}

// Photo is one image file of the corpus.
type Photo struct {
	Path   string `json:"path"`
	Name   string `json:"name"` // path relative to the extraction root
	Format string `json:"format"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Bytes  int64  `json:"bytes"`
}

// Pixels is Width*Height.
func (p Photo) Pixels() int64 { return int64(p.Width) * int64(p.Height) }

// DefaultCacheDir is $XDG_CACHE_HOME/filigrane/corpus, or ~/.cache/filigrane/corpus.
func DefaultCacheDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "filigrane", "corpus")
}

// root is where the packages are extracted.
func root(cacheDir string) string { return filepath.Join(cacheDir, "root") }

// Fetch downloads and extracts the packages into cacheDir unless that was already done (the marker file lists
// the packages extracted, so a cache made before a package was added gets just that one). Progress goes to log.
func Fetch(ctx context.Context, cacheDir string, log io.Writer) error {
	done := filepath.Join(cacheDir, ".extracted")
	have := map[string]bool{}
	if b, err := os.ReadFile(done); err == nil {
		for _, p := range strings.Fields(string(b)) {
			have[p] = true
		}
	}
	var missing []string
	for _, pkg := range Packages {
		if !have[pkg] {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	for _, pkg := range missing {
		matches, _ := filepath.Glob(filepath.Join(debs, pkg+"_*.deb"))
		if len(matches) == 0 {
			fmt.Fprintf(log, "corpus: downloading %s\n", pkg)
			cmd := exec.CommandContext(ctx, "apt-get", "download", pkg)
			cmd.Dir = debs
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("corpus: apt-get download %s: %v: %s", pkg, err, lastLines(out, 3))
			}
			matches, _ = filepath.Glob(filepath.Join(debs, pkg+"_*.deb"))
			if len(matches) == 0 {
				return fmt.Errorf("corpus: apt-get download %s produced no .deb", pkg)
			}
		}
		fmt.Fprintf(log, "corpus: extracting %s\n", filepath.Base(matches[0]))
		if out, err := exec.CommandContext(ctx, "dpkg", "-x", matches[0], root(cacheDir)).CombinedOutput(); err != nil {
			return fmt.Errorf("corpus: dpkg -x %s: %v: %s", matches[0], err, lastLines(out, 3))
		}
	}
	if err := os.WriteFile(done, []byte(strings.Join(Packages, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	return nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Load lists the images of an extracted corpus with at least minPixels pixels, sorted by name. Files that are
// not images, or whose headers do not parse, are skipped. Symlinks (packages link duplicates) are skipped too, so
// no photo counts twice.
func Load(ctx context.Context, cacheDir string, minPixels int64) ([]Photo, error) {
	var photos []Photo
	r := root(cacheDir)
	for _, dir := range photoDirs {
		err := filepath.WalkDir(filepath.Join(r, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if !d.Type().IsRegular() {
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".jpg", ".jpeg", ".png", ".webp", ".tif", ".tiff", ".bmp", ".ppm", ".pgm":
			default:
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			format, cfg, err := imageio.DecodeConfigBytes(data)
			if err != nil {
				return nil
			}
			if int64(cfg.Width)*int64(cfg.Height) < minPixels {
				return nil
			}
			name, _ := filepath.Rel(r, path)
			photos = append(photos, Photo{Path: path, Name: name, Format: format, Width: cfg.Width, Height: cfg.Height, Bytes: int64(len(data))})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("corpus: listing %s: %w", dir, err)
		}
	}
	if len(photos) == 0 {
		return nil, fmt.Errorf("corpus: no images of %d pixels or more under %s (run Fetch first)", minPixels, r)
	}
	sort.Slice(photos, func(i, j int) bool { return photos[i].Name < photos[j].Name })
	return photos, nil
}

// EnsureTool installs a Debian package with apt-get when the command it provides is not on the PATH (the
// benchmark's butteraugli tool), the way Fetch downloads the corpus.
func EnsureTool(ctx context.Context, command, pkg string, log io.Writer) error {
	if _, err := exec.LookPath(command); err == nil {
		return nil
	}
	fmt.Fprintf(log, "corpus: installing %s for %s\n", pkg, command)
	cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("corpus: apt-get install %s: %v: %s", pkg, err, lastLines(out, 3))
	}
	if _, err := exec.LookPath(command); err != nil {
		return fmt.Errorf("corpus: %s installed but %s not found: %w", pkg, command, err)
	}
	return nil
}

// Kind tells photographs from graphics (renders, paintings, screenshots of UI, charts, test patterns), which
// the report keeps apart because a mark hides far better in photographic texture. The corpus is fixed, so the
// list was made by looking at the images: everything under mate/desktop and mate/abstract is a render or a
// painting (abstract/Elephants* is a mirror-symmetric digital painting, not a photograph), mate/nature holds
// twelve photographs, and the OpenCV samples are sorted by name below.
func Kind(name string) string {
	base := strings.ToLower(filepath.Base(name))
	if strings.Contains(name, "backgrounds/gnome/") || strings.Contains(name, "share/desktop-base/") ||
		strings.Contains(name, "share/plymouth/") {
		return KindArt
	}
	if strings.Contains(name, "backgrounds/mate/desktop/") || strings.Contains(name, "backgrounds/mate/abstract/") {
		return KindGraphic
	}
	for _, g := range []string{"aloegt", "chessboard", "digits", "linuxlogo", "windowslogo", "gradient", "mask",
		"notes", "imagetext", "opencv-logo", "sudoku", "templ", "tmpl", "pic1", "pic2", "pic3", "pic4", "pic5",
		"pic6", "detect_blob", "ellipses", "ml.png", "blender_suzanne", "cards", "box.png", "blox", "graf",
		"text_", "left", "right", "board", "smarties", "starry_night", "chicky"} {
		if strings.HasPrefix(base, g) {
			return KindGraphic
		}
	}
	return KindPhoto
}

// Kinds of corpus image.
const (
	KindPhoto   = "photo"
	KindGraphic = "graphic"
	// KindArt is smooth artwork (gnome-backgrounds, desktop-base): flat colours and gradients.
	KindArt = "art"
)
