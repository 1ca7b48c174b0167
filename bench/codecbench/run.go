// Package codecbench measures the image watermark codec: recovery of the exact id and bit accuracy under the
// attack suite of package attack, image quality (PSNR, SSIM) of the marked images, false positives on unmarked
// crops and rescales, embed and detect speed per megapixel, and peak memory at 40 MP. It writes the results as
// JSON, a Markdown report and a PNG bar chart.
package codecbench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"image"
	"image/draw"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"filigrane/bench/attack"
	"filigrane/bench/quality"
	"filigrane/codec"
)

// Source is one benchmark image, loaded on demand so that only the images in flight occupy memory.
type Source struct {
	Name   string
	Kind   string // corpus.KindPhoto, corpus.KindGraphic, ...; results are reported per kind and size class
	Width  int
	Height int
	Load   func() (image.Image, error)
}

// Config parameterises a run.
type Config struct {
	Key      []byte
	PSNR     float64 // embedding PSNR floor; 0 means codec.DefaultPSNR
	Strength float64 // perceptual embedding strength; 0 means codec.DefaultStrength
	// Perceptual runs butteraugli (marked vs original, and a JPEG q90 re-save vs original) on every image; it
	// needs quality.ButteraugliTool.
	Perceptual bool
	// PanelDir, if set, receives per image a PNG of its flattest region: original, marked, difference ×8.
	PanelDir       string
	Attacks        []attack.Attack
	FalsePositives int // number of unmarked probes (crops and rescales of the sources) to run the detector on
	Workers        int // images processed concurrently; 0 means 1
	Seed           uint64
	Speed          bool // time 1 MP and 12 MP embeds and detects one at a time
	// SpeedImage, if set, supplies the w x h images of the speed measurement and describes them; by default they
	// are cut from the largest source (photos preferred) or generated.
	SpeedImage func(w, h int) (*image.NRGBA, string)
	Log        io.Writer
}

// Report is everything a run measured; it is written out as report.json.
type Report struct {
	Started        time.Time        `json:"started"`
	Duration       string           `json:"duration"`
	Command        string           `json:"command,omitempty"`
	GoVersion      string           `json:"go_version"`
	CPUs           int              `json:"cpus"`
	Workers        int              `json:"workers"`
	Seed           uint64           `json:"seed"`
	TargetPSNR     float64          `json:"target_psnr"`
	Strength       float64          `json:"strength"`
	Images         []ImageResult    `json:"images"`
	Attacks        []AttackResult   `json:"attacks"`
	FalsePositives FalsePositives   `json:"false_positives"`
	Speed          []SpeedResult    `json:"speed,omitempty"`
	Memory         []MemoryResult   `json:"memory,omitempty"`
	Targets        []TargetCheck    `json:"targets,omitempty"`
	Errors         []string         `json:"errors,omitempty"`
	Build          string           `json:"build"` // VCS revision of the binary, "+dirty" when built from modified files
	Outcomes       []Outcome        `json:"outcomes"`
	raw            map[string][]hit // attack -> per-image outcomes, for aggregation
}

// ImageResult is the embedding outcome for one source image.
type ImageResult struct {
	Name       string  `json:"name"`
	Kind       string  `json:"kind"`
	Class      string  `json:"class"` // kind plus size class, the unit of aggregation
	Width      int     `json:"width"`
	Height     int     `json:"height"`
	Megapixels float64 `json:"megapixels"`
	PSNR       float64 `json:"psnr"`       // measured here on 8-bit RGB
	CodecPSNR  float64 `json:"codec_psnr"` // as reported by Embed
	SSIM       float64 `json:"ssim"`       // luma
	Strength   float64 `json:"strength"`   // as reported by Embed (lowered where the PSNR floor limited it)
	// Butteraugli of the marked image and of a JPEG q90 re-save (Go image/jpeg, 4:2:0), each against the original.
	Butteraugli       *quality.Butteraugli `json:"butteraugli,omitempty"`
	JPEG90Butteraugli *quality.Butteraugli `json:"jpeg90_butteraugli,omitempty"`
	JPEG90PSNR        float64              `json:"jpeg90_psnr,omitempty"`
	// FlatRMS is the RMS luma change (8-bit levels) over the flattest 10% of 32x32 blocks.
	FlatRMS  float64 `json:"flat_rms"`
	Panel    string  `json:"panel,omitempty"` // side-by-side PNG of the flattest region
	EmbedMs  float64 `json:"embed_ms"`
	DetectMs float64 `json:"detect_ms"` // clean image
	Error    string  `json:"error,omitempty"`
}

// AttackResult aggregates one attack over the images of one class.
type AttackResult struct {
	Attack     string  `json:"attack"`
	Detail     string  `json:"detail"`
	Class      string  `json:"class"`
	Images     int     `json:"images"`
	ExactRate  float64 `json:"exact_rate"`    // watermarked and the right id
	Detected   float64 `json:"detected_rate"` // watermarked at all
	WrongIDs   int     `json:"wrong_ids"`     // watermarked with another id: must stay 0
	BitAcc     float64 `json:"bit_accuracy"`  // sign of Soft against the true id; 0.5 when not synchronised
	Synced     float64 `json:"synced_rate"`   // Soft present
	Confidence float64 `json:"mean_confidence"`
	DetectMs   float64 `json:"mean_detect_ms"` // detector time on the attacked image
}

// FalsePositives is the detector's behaviour on unmarked probes.
type FalsePositives struct {
	Probes         int     `json:"probes"`
	Watermarked    int     `json:"watermarked"`
	MaxConfidence  float64 `json:"max_confidence"`
	MeanConfidence float64 `json:"mean_confidence"`
	Description    string  `json:"description"`
}

// SpeedResult is the median of a few sequential runs at one size.
type SpeedResult struct {
	Label         string  `json:"label"`
	Width         int     `json:"width"`
	Height        int     `json:"height"`
	Megapixels    float64 `json:"megapixels"`
	Runs          int     `json:"runs"`
	EmbedMs       float64 `json:"embed_ms"`
	DetectMs      float64 `json:"detect_ms"`
	EmbedMsPerMP  float64 `json:"embed_ms_per_mp"`
	DetectMsPerMP float64 `json:"detect_ms_per_mp"`
	Content       string  `json:"content"`
}

// Outcome is one detection of one attacked image, for looking into failures.
type Outcome struct {
	Image      string  `json:"image"`
	Attack     string  `json:"attack"`
	Exact      bool    `json:"exact"`
	Detected   bool    `json:"detected"`
	BitAcc     float64 `json:"bit_accuracy"`
	Confidence float64 `json:"confidence"`
}

// hit is one detection of one attacked image.
type hit struct {
	class      string
	exact      bool
	detected   bool
	wrong      bool
	bitAcc     float64
	synced     bool
	confidence float64
	detectMs   float64
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// Class is the aggregation unit of an image: its kind and whether it has at least 1 MP.
func Class(kind string, w, h int) string {
	if int64(w)*int64(h) >= 1_000_000 {
		return kind + ">=1MP"
	}
	return kind + "<1MP"
}

// Run embeds a mark into every source, runs every attack and the detector, probes false positives, and
// optionally measures speed. Errors on single images are recorded in the report, not fatal.
func Run(ctx context.Context, cfg Config, sources []Source) (*Report, error) {
	if cfg.PSNR == 0 {
		cfg.PSNR = codec.DefaultPSNR
	}
	if cfg.Strength == 0 {
		cfg.Strength = codec.DefaultStrength
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if len(cfg.Attacks) == 0 {
		cfg.Attacks = attack.Suite()
	}
	c, err := codec.New(cfg.Key)
	if err != nil {
		return nil, fmt.Errorf("codecbench: %w", err)
	}
	rep := &Report{Started: time.Now().UTC(), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		Workers: cfg.Workers, Seed: cfg.Seed, TargetPSNR: cfg.PSNR, Strength: cfg.Strength, raw: map[string][]hit{}, Build: buildRevision()}
	probesPer := 0
	if len(sources) > 0 && cfg.FalsePositives > 0 {
		probesPer = (cfg.FalsePositives + len(sources) - 1) / len(sources)
	}

	var (
		mu     sync.Mutex
		fp     []float64 // confidences of the unmarked probes
		fpHits int
		wg     sync.WaitGroup
		jobs   = make(chan int)
	)
	rep.Images = make([]ImageResult, len(sources))
	for w := 0; w < cfg.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				res, hits, conf, nfp := runImage(ctx, &cfg, c, sources[i], probesPer)
				mu.Lock()
				rep.Images[i] = res
				for name, h := range hits {
					rep.raw[name] = append(rep.raw[name], h)
					rep.Outcomes = append(rep.Outcomes, Outcome{Image: res.Name, Attack: name, Exact: h.exact,
						Detected: h.detected, BitAcc: h.bitAcc, Confidence: h.confidence})
				}
				fp = append(fp, conf...)
				fpHits += nfp
				if res.Error != "" {
					rep.Errors = append(rep.Errors, res.Name+": "+res.Error)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range sources {
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	sort.Slice(rep.Outcomes, func(i, j int) bool {
		if rep.Outcomes[i].Image != rep.Outcomes[j].Image {
			return rep.Outcomes[i].Image < rep.Outcomes[j].Image
		}
		return rep.Outcomes[i].Attack < rep.Outcomes[j].Attack
	})
	rep.aggregate(cfg.Attacks)
	rep.FalsePositives = FalsePositives{Probes: len(fp), Watermarked: fpHits,
		Description: "unmarked corpus images: random crops (30-100% per side) rescaled by 0.25-1.0x (at most 1024 px on the long side), a third of them also JPEG q75"}
	for _, v := range fp {
		rep.FalsePositives.MaxConfidence = math.Max(rep.FalsePositives.MaxConfidence, v)
		rep.FalsePositives.MeanConfidence += v / float64(len(fp))
	}

	if cfg.Speed {
		cfg.logf("speed: 1 MP and 12 MP, one at a time")
		pick := cfg.SpeedImage
		if pick == nil {
			pick = func(w, h int) (*image.NRGBA, string) { return SpeedImage(sources, w, h) }
		}
		rep.Speed = measureSpeed(ctx, c, codec.EmbedOptions{PSNR: cfg.PSNR, Strength: cfg.Strength}, pick)
	}
	rep.Duration = time.Since(rep.Started).Round(time.Second).String()
	return rep, nil
}

// buildRevision is the VCS revision the Go toolchain stamped into the binary, so a report names the codec it
// measured.
func buildRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "unknown", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "+dirty"
		}
	}
	return rev + dirty
}

// seedFor derives a per-image, per-purpose random stream so results do not depend on scheduling.
func seedFor(seed uint64, parts ...string) *rand.Rand {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// toNRGBA returns img as *image.NRGBA at the origin (the codec and the attacks work on 8-bit RGBA).
func toNRGBA(img image.Image) *image.NRGBA {
	if m, ok := img.(*image.NRGBA); ok && m.Rect.Min == (image.Point{}) {
		return m
	}
	b := img.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(dst, dst.Bounds(), img, b.Min, draw.Src)
	return dst
}

// bitAccuracy compares the signs of the soft payload bits with the id, most significant bit first.
func bitAccuracy(soft []float64, id codec.ID) float64 {
	n := min(len(soft), 256)
	if n == 0 {
		return 0.5
	}
	right := 0
	for i := 0; i < n; i++ {
		bit := id[i/8]>>(7-i%8)&1 == 1
		if (soft[i] > 0) == bit {
			right++
		}
	}
	return float64(right) / float64(n)
}

func runImage(ctx context.Context, cfg *Config, c *codec.Codec, src Source, probes int) (ImageResult, map[string]hit, []float64, int) {
	res := ImageResult{Name: src.Name, Kind: src.Kind, Width: src.Width, Height: src.Height}
	res.Class = Class(src.Kind, src.Width, src.Height)
	res.Megapixels = float64(src.Width) * float64(src.Height) / 1e6
	hits := map[string]hit{}
	img, err := src.Load()
	if err != nil {
		res.Error = "load: " + err.Error()
		return res, hits, nil, 0
	}
	orig := toNRGBA(img)
	id, _ := codec.IDFromJSON([]byte(fmt.Sprintf(`{"benchmark":%q}`, src.Name)))

	t0 := time.Now()
	markedImg, er, err := c.Embed(orig, id, codec.EmbedOptions{PSNR: cfg.PSNR, Strength: cfg.Strength})
	res.EmbedMs = msSince(t0)
	if err != nil {
		res.Error = "embed: " + err.Error()
		return res, hits, nil, 0
	}
	marked := toNRGBA(markedImg)
	res.CodecPSNR = finite(er.PSNR)
	res.PSNR = finite(quality.PSNR(orig, marked))
	res.SSIM = quality.SSIM(orig, marked)
	res.Strength = er.Strength
	var corner image.Point
	res.FlatRMS, corner = quality.FlatRMS(orig, marked)
	if err := perceptual(ctx, cfg, &res, orig, marked, corner); err != nil {
		res.Error = err.Error()
	}
	cfg.logf("%s: %dx%d embed %.0f ms, PSNR %.2f dB, SSIM %.4f, strength %.2f, flat RMS %.2f, butteraugli %v (JPEG q90 %v)",
		src.Name, src.Width, src.Height, res.EmbedMs, res.PSNR, res.SSIM, res.Strength, res.FlatRMS, res.Butteraugli,
		res.JPEG90Butteraugli)

	for _, a := range cfg.Attacks {
		if ctx.Err() != nil {
			return res, hits, nil, 0
		}
		attacked, err := a.Apply(marked, seedFor(cfg.Seed, src.Name, a.Name))
		if err != nil {
			res.Error = a.Name + ": " + err.Error()
			continue
		}
		t := time.Now()
		d := c.Detect(attacked)
		detectMs := msSince(t)
		if a.Name == "clean" {
			res.DetectMs = detectMs
		}
		h := hit{class: res.Class, detected: d.Watermarked, synced: d.Soft != nil, bitAcc: bitAccuracy(d.Soft, id),
			confidence: d.Confidence, detectMs: detectMs}
		if d.Watermarked {
			h.exact = d.WatermarkID != nil && *d.WatermarkID == id.String()
			h.wrong = !h.exact
		}
		hits[a.Name] = h
	}

	// False-positive probes from the unmarked original.
	var confs []float64
	fpHits := 0
	rng := seedFor(cfg.Seed, src.Name, "false-positive")
	for k := 0; k < probes && ctx.Err() == nil; k++ {
		p := attack.RandomCrop(orig, 0.3+0.7*rng.Float64(), rng)
		f := 0.25 + 0.75*rng.Float64()
		if long := float64(max(p.Bounds().Dx(), p.Bounds().Dy())) * f; long > 1024 {
			f *= 1024 / long
		}
		p = attack.Scale(p, f, attack.Bilinear)
		if k%3 == 2 {
			if j, err := attack.JPEG(p, 75); err == nil {
				p = j
			}
		}
		d := c.Detect(p)
		confs = append(confs, d.Confidence)
		if d.Watermarked {
			fpHits++
		}
	}
	cfg.logf("%s: %d attacks, %d unmarked probes done", src.Name, len(cfg.Attacks), len(confs))
	return res, hits, confs, fpHits
}

// perceptual measures butteraugli for the marked image and a JPEG q90 re-save, and writes the side-by-side panel
// of the flattest region.
func perceptual(ctx context.Context, cfg *Config, res *ImageResult, orig, marked *image.NRGBA, flat image.Point) error {
	if cfg.PanelDir != "" {
		const size = 192
		c := flat.Add(image.Pt(quality.FlatBlock/2-size/2, quality.FlatBlock/2-size/2))
		c.X = max(0, min(c.X, orig.Rect.Dx()-size))
		c.Y = max(0, min(c.Y, orig.Rect.Dy()-size))
		name := panelName(res.Name)
		if err := quality.WritePNG(filepath.Join(cfg.PanelDir, name), quality.SideBySide(orig, marked, c, size, 8)); err != nil {
			return err
		}
		res.Panel = name
	}
	if !cfg.Perceptual {
		return nil
	}
	b, err := quality.ButteraugliDistance(ctx, orig, marked)
	if err != nil {
		return err
	}
	res.Butteraugli = &b
	j, err := attack.JPEG(orig, 90)
	if err != nil {
		return fmt.Errorf("jpeg q90: %w", err)
	}
	j8 := toNRGBA(j)
	res.JPEG90PSNR = finite(quality.PSNR(orig, j8))
	jb, err := quality.ButteraugliDistance(ctx, orig, j8)
	if err != nil {
		return err
	}
	res.JPEG90Butteraugli = &jb
	return nil
}

// panelName turns an image's corpus path into a flat file name.
func panelName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '/' || r == '\\' || r == ' ' {
			r = '_'
		}
		b.WriteRune(r)
	}
	return b.String() + ".flat.png"
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func finite(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 999
	}
	return v
}

// aggregate fills rep.Attacks from the raw hits, per attack and class, in suite order.
func (r *Report) aggregate(attacks []attack.Attack) {
	for _, a := range attacks {
		byClass := map[string][]hit{}
		for _, h := range r.raw[a.Name] {
			byClass[h.class] = append(byClass[h.class], h)
		}
		classes := make([]string, 0, len(byClass))
		for k := range byClass {
			classes = append(classes, k)
		}
		sort.Strings(classes)
		for _, cl := range classes {
			hs := byClass[cl]
			ar := AttackResult{Attack: a.Name, Detail: a.Detail, Class: cl, Images: len(hs)}
			n := float64(len(hs))
			for _, h := range hs {
				ar.ExactRate += b2f(h.exact) / n
				ar.Detected += b2f(h.detected) / n
				ar.Synced += b2f(h.synced) / n
				ar.BitAcc += h.bitAcc / n
				ar.Confidence += h.confidence / n
				ar.DetectMs += h.detectMs / n
				if h.wrong {
					ar.WrongIDs++
				}
			}
			r.Attacks = append(r.Attacks, ar)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Lookup returns the result of an attack on a class.
func (r *Report) Lookup(attackName, class string) (AttackResult, bool) {
	for _, a := range r.Attacks {
		if a.Attack == attackName && a.Class == class {
			return a, true
		}
	}
	return AttackResult{}, false
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("codecbench: %w", err)
	}
	return nil
}
