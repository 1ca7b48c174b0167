// Package pdfbench measures the PDF adapter (codec/pdf): recovery of the exact id after re-saves, printing to
// PDF, rasterisation to JPEG page images, page extraction and page screenshots; false positives on unmarked
// pages; output size; embed and detect speed; and a visual comparison of a marked page. It drives real tools
// (qpdf, mutool, Ghostscript, poppler) as the attacks, and shares no code with what it measures beyond the
// adapter's public API.
package pdfbench

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Packages are the Debian documentation packages the real PDFs come from.
var Packages = []string{"gnuplot-doc", "asymptote-doc", "libtasn1-doc", "bzip2-doc", "xfig-doc", "octave-doc"}

// Doc is one corpus PDF.
type Doc struct {
	Path string
	Name string
	Kind string // text, vector, image, scan (a fixed list by looking at the files; unknown files are "mixed")
}

// kinds classifies the corpus files by what their pages mostly hold.
var kinds = map[string]string{
	"libtasn1.pdf": "text", "manual.pdf": "text", "liboctave.pdf": "text", "asy-latex.pdf": "text",
	"gnuplot.pdf": "vector", "asymptote.pdf": "vector", "CAD.pdf": "vector", "asyRefCard.pdf": "text",
	"refcard-a4.pdf": "text", "xfig-howto.pdf": "image", "xfig_ref_en.pdf": "image", "octave.pdf": "text",
	"TeXShopAndAsymptote.pdf": "image",
	// From pdfcpu's test data (in the Go module cache once the module is downloaded).
	"jphysiol01396-0132.pdf": "scan", "HL1396.pdf": "scan", "mountain.pdf": "image", "CenterOfWhy.pdf": "image",
	"VectorApple.pdf": "vector", "pike-stanford.pdf": "slides", "Walden.pdf": "text", "RA_CI.pdf": "mixed",
}

// Fetch downloads and unpacks the packages into cacheDir once (apt-get download, dpkg -x).
func Fetch(ctx context.Context, cacheDir string, log io.Writer) error {
	done := filepath.Join(cacheDir, ".extracted")
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return err
	}
	for _, p := range Packages {
		if m, _ := filepath.Glob(filepath.Join(debs, p+"_*.deb")); len(m) > 0 {
			continue
		}
		fmt.Fprintf(log, "pdfbench: downloading %s\n", p)
		cmd := exec.CommandContext(ctx, "apt-get", "download", p)
		cmd.Dir = debs
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get download %s: %v: %s", p, err, out)
		}
	}
	m, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	for _, deb := range m {
		if out, err := exec.CommandContext(ctx, "dpkg", "-x", deb, filepath.Join(cacheDir, "root")).CombinedOutput(); err != nil {
			return fmt.Errorf("dpkg -x %s: %v: %s", deb, err, out)
		}
	}
	return os.WriteFile(done, nil, 0o644)
}

// Load lists the corpus PDFs under cacheDir (gzip-compressed ones are unpacked next to the cache) plus the
// listed files of extraDirs, one per distinct file name.
func Load(cacheDir string, extraDirs ...string) ([]Doc, error) {
	seen := map[string]bool{}
	var docs []Doc
	add := func(path string) {
		name := filepath.Base(path)
		if seen[name] {
			return
		}
		kind, ok := kinds[name]
		if !ok {
			return
		}
		seen[name] = true
		docs = append(docs, Doc{Path: path, Name: name, Kind: kind})
	}
	root := filepath.Join(cacheDir, "root", "usr", "share", "doc")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".pdf"):
			add(p)
		case strings.HasSuffix(p, ".pdf.gz"):
			out := filepath.Join(cacheDir, "unzipped", strings.TrimSuffix(filepath.Base(p), ".gz"))
			if _, err := os.Stat(out); err != nil {
				if err := gunzip(p, out); err != nil {
					return err
				}
			}
			add(out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, dir := range extraDirs {
		m, _ := filepath.Glob(filepath.Join(dir, "*.pdf"))
		for _, p := range m {
			add(p)
		}
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].Name < docs[j].Name })
	return docs, nil
}

func gunzip(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(zr, 256<<20)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
