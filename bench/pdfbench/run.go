package pdfbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"filigrane/codec"
	"filigrane/codec/pdf"
)

// Config parameterises a run.
type Config struct {
	Key           []byte
	Strength      float64 // 0: pdf.DefaultStrength
	Overlay       string  // "" (the default rule), "tiles", "page-image" or "binary" (pdf.Options.Tiles, PageImage, Binary)
	PagesPerDoc   int     // marked pages per document (spread over the document)
	FPPagesPerDoc int     // unmarked pages per document for the false-positive count
	WorkDir       string
	Log           io.Writer
}

// Attack names, in report order.
var Attacks = []string{"as-written", "qpdf", "mutool-clean", "gs-pdfwrite", "cairo-pdf", "raster150-jpeg75",
	"extract-page", "screenshot-png", "screenshot-jpeg85"}

// Tally counts successes.
type Tally struct{ OK, N int }

func (t *Tally) add(ok bool) {
	t.N++
	if ok {
		t.OK++
	}
}

func (t Tally) String() string {
	if t.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%d/%d (%.0f%%)", t.OK, t.N, 100*float64(t.OK)/float64(t.N))
}

// Result is the outcome of a run.
type Result struct {
	Docs []DocResult
	// Per attack: document verdicts (full Detect: structure first), and per-page exact ids from the rendered
	// pages only (the visual layer), split by page class.
	DocExact   map[string]*Tally
	PageDense  map[string]*Tally // pages with ≥ 20% non-white area
	PageSparse map[string]*Tally // text-only and other sparse pages
	WrongIDs   int
	// False positives: unmarked pages and documents detected as marked.
	FPPages, FPPagesN, FPDocs, FPDocsN int
	// Speed.
	EmbedPagesPerSec           float64
	EmbedPagesPerCPUSec        float64
	DetectRenderPagesPerCPUSec float64
	EmbedDoc                   string
	EmbedPages                 int
	DetectIntactMs             float64
	DetectRenderPagesPerS      float64
	DetectRenderPages          int
	SizeRatioMax               float64
	SizeRatioMedian            float64
}

// DocResult is one document's row.
type DocResult struct {
	Name, Kind string
	Pages      int
	InBytes    int64
	OutBytes   int64
	EmbedMs    float64
	DensePages int
	Overlay    string            // how the overlay was drawn: "page images", "tiles" or "mixed"
	Rendered   map[string]string // attack → "ok/n" pages from rendering
	Err        string
}

// Run measures every document of docs.
func Run(ctx context.Context, cfg Config, docs []Doc) (*Result, error) {
	c, err := codec.New(cfg.Key)
	if err != nil {
		return nil, err
	}
	if cfg.PagesPerDoc == 0 {
		cfg.PagesPerDoc = 4
	}
	if cfg.FPPagesPerDoc == 0 {
		cfg.FPPagesPerDoc = 16
	}
	a := &pdf.Adapter{Codec: c}
	// On a shared, overloaded machine the renderer's 10 s page budget measures the load, not the mark:
	// FILIGRANE_PDF_BENCH_PAGE_TIMEOUT (a Go duration) raises it for the robustness run.
	if d, err := time.ParseDuration(os.Getenv("FILIGRANE_PDF_BENCH_PAGE_TIMEOUT")); err == nil && d > 0 {
		a.Limits.PageTimeout = d
	}
	res := &Result{DocExact: map[string]*Tally{}, PageDense: map[string]*Tally{}, PageSparse: map[string]*Tally{}}
	for _, at := range Attacks {
		res.DocExact[at], res.PageDense[at], res.PageSparse[at] = &Tally{}, &Tally{}, &Tally{}
	}
	var ratios []float64
	for _, d := range docs {
		dir := filepath.Join(cfg.WorkDir, strings.TrimSuffix(d.Name, ".pdf"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		dr := runDoc(ctx, a, c, cfg, d, dir, res)
		if dr.InBytes > 0 && dr.OutBytes > 0 {
			ratios = append(ratios, float64(dr.OutBytes)/float64(dr.InBytes))
		}
		res.Docs = append(res.Docs, dr)
		fmt.Fprintf(cfg.Log, "pdfbench: %s (%s) pages=%d dense=%d size %d→%d embed %.0f ms %v %s\n", d.Name, d.Kind,
			dr.Pages, dr.DensePages, dr.InBytes, dr.OutBytes, dr.EmbedMs, dr.Rendered, dr.Err)
		fpDoc(ctx, a, cfg, d, dir, res)
	}
	sort.Float64s(ratios)
	if len(ratios) > 0 {
		res.SizeRatioMax = ratios[len(ratios)-1]
		res.SizeRatioMedian = ratios[len(ratios)/2]
	}
	return res, nil
}

func runDoc(ctx context.Context, a *pdf.Adapter, c *codec.Codec, cfg Config, d Doc, dir string, res *Result) DocResult {
	dr := DocResult{Name: d.Name, Kind: d.Kind, Rendered: map[string]string{}}
	id := codec.ID(sha256.Sum256([]byte("pdfbench/" + d.Name)))
	idHex := id.String()
	info, err := a.Probe(ctx, d.Path)
	if err != nil {
		dr.Err = err.Error()
		return dr
	}
	sub := filepath.Join(dir, "orig.pdf")
	pages := spread(info.Pages, cfg.PagesPerDoc)
	if err := run(ctx, "qpdf", "--empty", "--pages", d.Path, joinInts(pages), "--", sub); err != nil {
		dr.Err = err.Error()
		return dr
	}
	st, _ := os.Stat(sub)
	dr.InBytes = st.Size()
	dr.Pages = len(pages)
	marked := filepath.Join(dir, "marked.pdf")
	t0 := time.Now()
	rep, err := a.Embed(ctx, sub, marked, id, pdf.Options{Strength: cfg.Strength, PageImage: cfg.Overlay == "page-image",
		Tiles: cfg.Overlay == "tiles", Binary: cfg.Overlay == "binary"})
	dr.EmbedMs = float64(time.Since(t0).Microseconds()) / 1000
	if err != nil {
		dr.Err = err.Error()
		return dr
	}
	dr.OutBytes = rep.OutBytes
	dr.Overlay = overlayOf(rep)
	// Page classes from the original rendering.
	dense := make([]bool, len(pages))
	origPages, err := renderGray(ctx, sub, 150)
	if err == nil {
		for i, g := range origPages {
			if i < len(dense) {
				dense[i] = nonWhite(g) >= 0.2
				if dense[i] {
					dr.DensePages++
				}
			}
		}
	}
	for _, at := range Attacks {
		file, pageIdx, err := attack(ctx, at, marked, dir, dense)
		if err != nil {
			dr.Rendered[at] = "error: " + err.Error()
			continue
		}
		if strings.HasPrefix(at, "screenshot") {
			img, err := decodeFile(file)
			if err != nil {
				dr.Rendered[at] = "error: " + err.Error()
				continue
			}
			det := c.Detect(img)
			ok := det.Watermarked && det.WatermarkID != nil && *det.WatermarkID == idHex
			if det.Watermarked && !ok {
				res.WrongIDs++
			}
			res.DocExact[at].add(ok)
			classTally(res, at, dense[pageIdx]).add(ok)
			dr.Rendered[at] = fmt.Sprint(b2i(ok), "/1")
			continue
		}
		full, err := a.Detect(ctx, file)
		if err != nil {
			dr.Rendered[at] = "error: " + err.Error()
			continue
		}
		okDoc := full.Watermarked && full.WatermarkID != nil && *full.WatermarkID == idHex
		if full.Watermarked && !okDoc {
			res.WrongIDs++
		}
		res.DocExact[at].add(okDoc)
		rend, err := a.DetectRendered(ctx, file)
		if err != nil {
			dr.Rendered[at] = "error: " + err.Error()
			continue
		}
		okN := 0
		for i, u := range rend.Units {
			ok := u.Watermarked && u.WatermarkID != nil && *u.WatermarkID == idHex
			if u.Watermarked && !ok {
				res.WrongIDs++
			}
			cls := false
			if pageIdx >= 0 {
				cls = dense[pageIdx]
			} else if i < len(dense) {
				cls = dense[i]
			}
			classTally(res, at, cls).add(ok)
			okN += b2i(ok)
		}
		dr.Rendered[at] = fmt.Sprintf("%d/%d", okN, len(rend.Units))
	}
	return dr
}

func classTally(res *Result, at string, dense bool) *Tally {
	if dense {
		return res.PageDense[at]
	}
	return res.PageSparse[at]
}

// fpDoc runs the rendered detector on unmarked pages of d (a different spread of pages than the marked set).
func fpDoc(ctx context.Context, a *pdf.Adapter, cfg Config, d Doc, dir string, res *Result) {
	info, err := a.Probe(ctx, d.Path)
	if err != nil {
		return
	}
	sub := filepath.Join(dir, "fp.pdf")
	if err := run(ctx, "qpdf", "--empty", "--pages", d.Path, joinInts(spread(info.Pages, cfg.FPPagesPerDoc)), "--", sub); err != nil {
		return
	}
	det, err := a.DetectRendered(ctx, sub)
	if err != nil {
		return
	}
	for _, u := range det.Units {
		res.FPPagesN++
		res.FPPages += b2i(u.Watermarked)
	}
	res.FPDocsN++
	res.FPDocs += b2i(det.Watermarked)
}

// attack writes the attacked version of marked and returns its path and, for single-page results, the index
// of the page it holds (else -1).
func attack(ctx context.Context, name, marked, dir string, dense []bool) (string, int, error) {
	out := filepath.Join(dir, name+".pdf")
	switch name {
	case "as-written":
		return marked, -1, nil
	case "qpdf":
		return out, -1, run(ctx, "qpdf", "--object-streams=generate", marked, out)
	case "mutool-clean":
		return out, -1, run(ctx, "mutool", "clean", "-gggz", marked, out)
	case "gs-pdfwrite":
		return out, -1, run(ctx, "gs", "-q", "-dNOPAUSE", "-dBATCH", "-dSAFER", "-sDEVICE=pdfwrite", "-o", out, marked)
	case "cairo-pdf":
		return out, -1, run(ctx, "pdftocairo", "-pdf", marked, out)
	case "raster150-jpeg75":
		return out, -1, rasterJPEG(ctx, marked, out, dir)
	case "extract-page":
		p := len(dense) // the last page of the sample
		return out, p - 1, run(ctx, "qpdf", "--empty", "--pages", marked, strconv.Itoa(p), "--", out)
	case "screenshot-png", "screenshot-jpeg85":
		// A screenshot of page 1 at 100% zoom: 96 pixels per inch, RGB.
		ppm := filepath.Join(dir, "shot.ppm")
		if err := run(ctx, "mutool", "draw", "-q", "-r", "96", "-o", ppm, marked, "1"); err != nil {
			return "", 0, err
		}
		img, err := decodeFile(ppm)
		if err != nil {
			return "", 0, err
		}
		var buf bytes.Buffer
		ext := ".png"
		if name == "screenshot-png" {
			err = png.Encode(&buf, img)
		} else {
			ext = ".jpg"
			err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85})
		}
		if err != nil {
			return "", 0, err
		}
		f := filepath.Join(dir, name+ext)
		return f, 0, os.WriteFile(f, buf.Bytes(), 0o644)
	}
	return "", 0, fmt.Errorf("unknown attack %q", name)
}

// rasterJPEG renders every page at 150 dpi, encodes it as JPEG quality 75 and rebuilds a PDF of those images
// with the original page sizes (what "print to image" workflows and scanners produce).
func rasterJPEG(ctx context.Context, src, dst, dir string) error {
	pattern := filepath.Join(dir, "r%d.ppm")
	if err := run(ctx, "mutool", "draw", "-q", "-r", "150", "-o", pattern, src); err != nil {
		return err
	}
	var jpgs []string
	var dims []types.Dim
	for i := 1; ; i++ {
		img, err := decodeFile(fmt.Sprintf(pattern, i))
		if os.IsNotExist(err) {
			break
		}
		if err != nil {
			return err
		}
		b := img.Bounds()
		dims = append(dims, types.Dim{Width: float64(b.Dx()) * 72 / 150, Height: float64(b.Dy()) * 72 / 150})
		f := filepath.Join(dir, fmt.Sprintf("r%d.jpg", i))
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 75}); err != nil {
			return err
		}
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			return err
		}
		jpgs = append(jpgs, f)
		os.Remove(fmt.Sprintf(pattern, i))
	}
	os.Remove(dst)
	for i, f := range jpgs {
		imp := pdfcpu.DefaultImportConfig()
		imp.PageDim = &types.Dim{Width: dims[i].Width, Height: dims[i].Height}
		imp.UserDim = true
		imp.Pos = types.Full
		if err := api.ImportImagesFile([]string{f}, dst, imp, nil); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, name string, args ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, lastLine(out))
	}
	return nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// spread picks n page numbers spread evenly over 1..pages.
func spread(pages, n int) []int {
	if n >= pages {
		out := make([]int, pages)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	out := make([]int, 0, n)
	for i := 0; i < n; i++ {
		p := 1 + i*(pages-1)/max(n-1, 1)
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// renderGray renders all pages of path with mutool as 8-bit gray images.
func renderGray(ctx context.Context, path string, dpi int) ([]*image.Gray, error) {
	cmd := exec.CommandContext(ctx, "mutool", "draw", "-q", "-r", strconv.Itoa(dpi), "-c", "gray", "-F", "pgm", "-o", "-", path)
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(bytes.NewReader(out))
	var pages []*image.Gray
	for {
		img, err := readPNM(br)
		if err == io.EOF {
			return pages, nil
		}
		if err != nil {
			return pages, err
		}
		g, ok := img.(*image.Gray)
		if !ok {
			return pages, fmt.Errorf("not gray")
		}
		pages = append(pages, g)
	}
}

func nonWhite(g *image.Gray) float64 {
	n := 0
	for _, v := range g.Pix {
		if v < 245 {
			n++
		}
	}
	return float64(n) / float64(len(g.Pix))
}

func decodeFile(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 'P' && (head[1] == '5' || head[1] == '6') {
		return readPNM(br)
	}
	img, _, err := image.Decode(br)
	return img, err
}

// readPNM reads one binary PGM (P5) or PPM (P6) image with maximum value 255.
func readPNM(br *bufio.Reader) (image.Image, error) {
	var magic string
	var w, h, maxv int
	if _, err := fmt.Fscan(br, &magic, &w, &h, &maxv); err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, io.EOF
		}
		return nil, err
	}
	if _, err := br.ReadByte(); err != nil {
		return nil, err
	}
	if maxv != 255 || w <= 0 || h <= 0 || w*h > 200<<20 {
		return nil, fmt.Errorf("unsupported PNM %s %dx%d/%d", magic, w, h, maxv)
	}
	switch magic {
	case "P5":
		g := image.NewGray(image.Rect(0, 0, w, h))
		_, err := io.ReadFull(br, g.Pix)
		return g, err
	case "P6":
		buf := make([]byte, 3*w*h)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, err
		}
		m := image.NewNRGBA(image.Rect(0, 0, w, h))
		for i := 0; i < w*h; i++ {
			m.Pix[4*i], m.Pix[4*i+1], m.Pix[4*i+2], m.Pix[4*i+3] = buf[3*i], buf[3*i+1], buf[3*i+2], 255
		}
		return m, nil
	}
	return nil, fmt.Errorf("unsupported PNM magic %q", magic)
}

// Visual writes the side-by-side comparison of one page at 150 dpi: original, marked, and their difference
// amplified 16× around mid-gray (darker: the mark darkened the page).
func Visual(ctx context.Context, orig, marked string, page int, out string) error {
	render := func(p string) (*image.Gray, error) {
		cmd := exec.CommandContext(ctx, "mutool", "draw", "-q", "-r", "150", "-c", "gray", "-F", "pgm", "-o", "-", p, strconv.Itoa(page))
		b, err := cmd.Output()
		if err != nil {
			return nil, err
		}
		img, err := readPNM(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return nil, err
		}
		return img.(*image.Gray), nil
	}
	a, err := render(orig)
	if err != nil {
		return err
	}
	b, err := render(marked)
	if err != nil {
		return err
	}
	// A band of 500 rows from the upper part of the page keeps the picture small enough to commit.
	y0 := a.Rect.Dy() / 8
	w, h := a.Rect.Dx(), min(500, a.Rect.Dy()-y0)
	const gap = 8
	canvas := image.NewGray(image.Rect(0, 0, 3*w+2*gap, h))
	for i := range canvas.Pix {
		canvas.Pix[i] = 160
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			ov, mv := a.GrayAt(x, y0+y), b.GrayAt(x, y0+y)
			canvas.SetGray(x, y, ov)
			canvas.SetGray(w+gap+x, y, mv)
			d := 128 + 16*(int(mv.Y)-int(ov.Y))
			canvas.SetGray(2*(w+gap)+x, y, color.Gray{Y: uint8(max(0, min(255, d)))})
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, canvas)
}

// overlayOf says how an embedding drew the overlay: on every page one page image, on every page tiles, or both.
func overlayOf(rep pdf.EmbedReport) string {
	images := 0
	for _, u := range rep.Units {
		if u.PageImage {
			images++
		}
	}
	switch images {
	case len(rep.Units):
		return "page images"
	case 0:
		return "tiles"
	}
	return "mixed"
}
