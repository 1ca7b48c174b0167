package quality

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
)

// ButteraugliTool is the command that computes butteraugli (Debian package libjxl-devtools). It prints the
// max-norm on its first line and the 3-norm on a line "3-norm: x".
const ButteraugliTool = "butteraugli_main"

// ErrNoButteraugli is returned when the butteraugli tool is not installed.
var ErrNoButteraugli = errors.New("quality: " + ButteraugliTool + " not found (Debian package libjxl-devtools)")

// Butteraugli is the perceptual distance of a distorted image from its reference (1.0 is about just noticeable).
type Butteraugli struct {
	Max   float64 `json:"max"`   // max-norm: the worst spot
	Norm3 float64 `json:"norm3"` // 3-norm over the whole image
}

var threeNorm = regexp.MustCompile(`(?m)^3-norm:\s*([0-9.eE+-]+)`)

// ButteraugliDistance writes both images as PNG into a temporary directory and runs the butteraugli tool on
// them.
func ButteraugliDistance(ctx context.Context, ref, dist *image.NRGBA) (Butteraugli, error) {
	tool, err := exec.LookPath(ButteraugliTool)
	if err != nil {
		return Butteraugli{}, ErrNoButteraugli
	}
	dir, err := os.MkdirTemp("", "butteraugli-")
	if err != nil {
		return Butteraugli{}, fmt.Errorf("quality: %w", err)
	}
	defer os.RemoveAll(dir)
	a, b := filepath.Join(dir, "ref.png"), filepath.Join(dir, "dist.png")
	for _, f := range []struct {
		path string
		img  *image.NRGBA
	}{{a, ref}, {b, dist}} {
		if err := writePNG(f.path, f.img); err != nil {
			return Butteraugli{}, err
		}
	}
	out, err := exec.CommandContext(ctx, tool, a, b).Output()
	if err != nil {
		return Butteraugli{}, fmt.Errorf("quality: %s: %w", ButteraugliTool, err)
	}
	return parseButteraugli(out)
}

func parseButteraugli(out []byte) (Butteraugli, error) {
	lines := bytes.SplitN(bytes.TrimSpace(out), []byte("\n"), 2)
	maxNorm, err := strconv.ParseFloat(string(bytes.TrimSpace(lines[0])), 64)
	if err != nil {
		return Butteraugli{}, fmt.Errorf("quality: butteraugli output %q: %w", lines[0], err)
	}
	m := threeNorm.FindSubmatch(out)
	if m == nil {
		return Butteraugli{}, fmt.Errorf("quality: butteraugli output without a 3-norm: %q", out)
	}
	n3, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return Butteraugli{}, fmt.Errorf("quality: butteraugli 3-norm %q: %w", m[1], err)
	}
	return Butteraugli{Max: maxNorm, Norm3: n3}, nil
}

func writePNG(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("quality: %w", err)
	}
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(f, img); err != nil {
		f.Close()
		return fmt.Errorf("quality: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("quality: %w", err)
	}
	return nil
}

// FlatBlock is the side of the blocks FlatRMS ranks by flatness.
const FlatBlock = 32

// FlatRMS returns the RMS luma change (8-bit levels) between a and b over the flattest tenth of the 32×32 blocks
// of a (ranked by the standard deviation of a's luma), and the top-left corner of the flattest block of all.
// This is where a mark shows first: on skies, walls and gradients.
func FlatRMS(a, b *image.NRGBA) (float64, image.Point) {
	r := a.Bounds()
	type block struct {
		x, y int
		std  float64
	}
	var blocks []block
	for y0 := 0; y0+FlatBlock <= r.Dy(); y0 += FlatBlock {
		for x0 := 0; x0+FlatBlock <= r.Dx(); x0 += FlatBlock {
			var s, ss float64
			for y := y0; y < y0+FlatBlock; y++ {
				for x := x0; x < x0+FlatBlock; x++ {
					v := luma(a, x, y)
					s += v
					ss += v * v
				}
			}
			const n = FlatBlock * FlatBlock
			blocks = append(blocks, block{x0, y0, math.Sqrt(math.Max(0, ss/n-(s/n)*(s/n)))})
		}
	}
	if len(blocks) == 0 {
		return 0, image.Point{}
	}
	sort.SliceStable(blocks, func(i, j int) bool { return blocks[i].std < blocks[j].std })
	k := max(1, len(blocks)/10)
	var se float64
	for _, bl := range blocks[:k] {
		for y := bl.y; y < bl.y+FlatBlock; y++ {
			for x := bl.x; x < bl.x+FlatBlock; x++ {
				d := luma(a, x, y) - luma(b, x, y)
				se += d * d
			}
		}
	}
	return math.Sqrt(se / float64(k*FlatBlock*FlatBlock)), image.Pt(r.Min.X+blocks[0].x, r.Min.Y+blocks[0].y)
}

func luma(m *image.NRGBA, x, y int) float64 {
	p := m.Pix[y*m.Stride+4*x:]
	return 0.299*float64(p[0]) + 0.587*float64(p[1]) + 0.114*float64(p[2])
}

// SideBySide returns a panel of the size×size region at corner (clipped to the image) in three columns: the
// original, the marked image, and the luma difference amplified by gain around mid-grey, so that a reviewer can
// see what changed where the image is flattest.
func SideBySide(orig, marked *image.NRGBA, corner image.Point, size int, gain float64) *image.NRGBA {
	r := image.Rectangle{Min: corner, Max: corner.Add(image.Pt(size, size))}.Intersect(orig.Bounds())
	w, h := r.Dx(), r.Dy()
	const gap = 8
	out := image.NewNRGBA(image.Rect(0, 0, 3*w+2*gap, h))
	for i := range out.Pix {
		out.Pix[i] = 255
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			po, pm := orig.NRGBAAt(r.Min.X+x, r.Min.Y+y), marked.NRGBAAt(r.Min.X+x, r.Min.Y+y)
			po.A, pm.A = 255, 255
			out.SetNRGBA(x, y, po)
			out.SetNRGBA(w+gap+x, y, pm)
			d := 128 + gain*(luma(marked, r.Min.X+x, r.Min.Y+y)-luma(orig, r.Min.X+x, r.Min.Y+y))
			v := uint8(math.Max(0, math.Min(255, math.Round(d))))
			out.SetNRGBA(2*(w+gap)+x, y, color.NRGBA{v, v, v, 255})
		}
	}
	return out
}

// WritePNG writes img as a PNG file.
func WritePNG(path string, img image.Image) error { return writePNG(path, img) }
