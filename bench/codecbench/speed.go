package codecbench

import (
	"image/jpeg"

	"bufio"
	"bytes"
	"context"
	"filigrane/codec/imageio"
	"filigrane/codec/markfile"
	"fmt"
	"image"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"filigrane/bench/attack"
	"filigrane/codec"
)

// Texture returns a deterministic photo-like image: smooth shading, edges of large shapes and fine grain, so
// that perceptual masking and synchronisation behave as on a photograph. Used when no corpus photo is large
// enough, by tests, and for the 40 MP memory probe.
func Texture(w, h int, seed uint64) *image.NRGBA {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	fx, fy := 2+rng.Float64()*3, 1.5+rng.Float64()*3
	sx, cy := make([]float64, w), make([]float64, h)
	for x := range sx {
		sx[x] = math.Sin(2 * math.Pi * fx * float64(x) / float64(w))
	}
	for y := range cy {
		cy[y] = math.Cos(2 * math.Pi * fy * float64(y) / float64(h))
	}
	// A few discs give sharp edges.
	type disc struct{ x, y, r2, v float64 }
	discs := make([]disc, 6)
	for i := range discs {
		r := (0.05 + 0.15*rng.Float64()) * float64(min(w, h))
		discs[i] = disc{rng.Float64() * float64(w), rng.Float64() * float64(h), r * r, 60 * (rng.Float64() - 0.5)}
	}
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			v := 115 + 55*sx[x]*cy[y] + 30*float64(x)/float64(w)
			for _, d := range discs {
				if dx, dy := float64(x)-d.x, float64(y)-d.y; dx*dx+dy*dy < d.r2 {
					v += d.v
				}
			}
			v += 6 * rng.NormFloat64()
			row[4*x] = clampByte(v + 18)
			row[4*x+1] = clampByte(v)
			row[4*x+2] = clampByte(v - 22)
			row[4*x+3] = 255
		}
	}
	return img
}

func clampByte(v float64) uint8 { return uint8(max(0, min(255, math.Round(v)))) }

// SpeedImage returns a w x h centre crop of the largest source that is big enough, preferring photos, or a
// Texture when none is.
func SpeedImage(sources []Source, w, h int) (*image.NRGBA, string) {
	var best *Source
	better := func(s, than *Source) bool {
		if than == nil {
			return true
		}
		if (s.Kind == "photo") != (than.Kind == "photo") {
			return s.Kind == "photo"
		}
		return s.Width*s.Height > than.Width*than.Height
	}
	for i := range sources {
		s := &sources[i]
		if s.Width >= w && s.Height >= h && better(s, best) {
			best = s
		}
	}
	if best != nil {
		if img, err := best.Load(); err == nil {
			m := toNRGBA(img)
			x0, y0 := (m.Bounds().Dx()-w)/2, (m.Bounds().Dy()-h)/2
			return attack.Crop(m, image.Rect(x0, y0, x0+w, y0+h)), "centre crop of " + best.Name
		}
	}
	return Texture(w, h, 1), "synthetic texture"
}

// measureSpeed times embed and detect at 1 MP and 12 MP, three runs each, one at a time, and keeps the median.
func measureSpeed(ctx context.Context, c *codec.Codec, opt codec.EmbedOptions, pick func(w, h int) (*image.NRGBA, string)) []SpeedResult {
	var out []SpeedResult
	for _, size := range []struct {
		label string
		w, h  int
	}{{"1 MP", 1155, 866}, {"12 MP", 4000, 3000}} {
		img, content := pick(size.w, size.h)
		var embeds, detects []float64
		id := codec.ID{0xA5, 0x5A}
		for run := 0; run < 3 && ctx.Err() == nil; run++ {
			t := time.Now()
			marked, _, err := c.Embed(img, id, opt)
			if err != nil {
				break
			}
			embeds = append(embeds, msSince(t))
			t = time.Now()
			c.Detect(marked)
			detects = append(detects, msSince(t))
		}
		if len(embeds) == 0 {
			continue
		}
		mp := float64(size.w*size.h) / 1e6
		r := SpeedResult{Label: size.label, Width: size.w, Height: size.h, Megapixels: mp, Runs: len(embeds),
			EmbedMs: median(embeds), DetectMs: median(detects), Content: content}
		r.EmbedMsPerMP, r.DetectMsPerMP = r.EmbedMs/mp, r.DetectMs/mp
		out = append(out, r)
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// MemoryResult is the peak memory of one operation on a large image, measured in a process of its own.
type MemoryResult struct {
	Op         string  `json:"op"`
	Width      int     `json:"width"`
	Height     int     `json:"height"`
	Megapixels float64 `json:"megapixels"`
	Ms         float64 `json:"ms"`
	// CPUMs is the process's user+system CPU time over the step. With GOMAXPROCS=1 it is the one-core cost of
	// the step (plus the garbage collector and the heap sampler), and other processes on a loaded machine
	// inflate it far less than the wall time Ms.
	CPUMs         float64 `json:"cpu_ms,omitempty"`
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`  // VmHWM after resetting it before the operation
	StartRSSBytes int64   `json:"start_rss_bytes"` // VmRSS before the operation (holds the input image)
	PeakHeapBytes uint64  `json:"peak_heap_bytes"` // highest sampled Go heap in use
	InputBytes    int64   `json:"input_bytes"`
	Note          string  `json:"note,omitempty"`
}

// MeasureMemory embeds into and then detects on a w x h synthetic image, then runs the service's whole path
// from a JPEG of it (decode, embed, verify, encode as JPEG and as PNG: "e2e-jpeg", "e2e-png") and, as the
// baseline measured in the same process, the same decode and encode without the mark ("reencode-jpeg",
// "reencode-png": what any service that re-saves the file pays), and reports the time and peak resident set
// size of each step. Run it in a fresh process (filigrane bench codec does), because the peak RSS counter covers the
// whole process; it is reset through /proc/self/clear_refs before each step where the kernel allows that.
func MeasureMemory(ctx context.Context, key []byte, psnr float64, w, h int) ([]MemoryResult, error) {
	c, err := codec.New(key)
	if err != nil {
		return nil, err
	}
	img := Texture(w, h, 40)
	// The end-to-end steps start from a camera-like JPEG (image/jpeg q90, 4:2:0) of the same image.
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, img, &jpeg.Options{Quality: 90}); err != nil {
		return nil, err
	}
	var out []MemoryResult
	var marked image.Image
	for _, op := range []string{"embed", "detect", "e2e-jpeg", "e2e-png", "reencode-jpeg", "reencode-png"} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		runtime.GC()
		debug.FreeOSMemory()
		note := ""
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			note = "peak RSS could not be reset; it covers the whole process so far"
		}
		start := procStatus("VmRSS")
		stop := make(chan struct{})
		var peak uint64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ms runtime.MemStats
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		t, cpu0 := time.Now(), cpuTime()
		var opErr error
		switch op {
		case "embed":
			marked, _, opErr = c.Embed(img, codec.ID{1, 2, 3}, codec.EmbedOptions{PSNR: psnr})
		case "detect":
			if marked == nil {
				opErr = fmt.Errorf("no marked image")
				break
			}
			img = nil // only the marked image stays alive during detection
			c.Detect(marked)
		case "e2e-jpeg", "e2e-png":
			marked = nil
			f := markfile.JPEG
			if op == "e2e-png" {
				f = markfile.PNG
			}
			var pic *imageio.Picture
			if pic, opErr = imageio.DecodeBytes(jpg.Bytes(), imageio.Limits{}); opErr == nil {
				_, opErr = markfile.Embed(ctx, c, pic, codec.ID{1, 2, 3}, f, codec.EmbedOptions{PSNR: psnr})
			}
		case "reencode-jpeg", "reencode-png":
			var pic *imageio.Picture
			if pic, opErr = imageio.DecodeBytes(jpg.Bytes(), imageio.Limits{}); opErr == nil {
				var enc bytes.Buffer
				if op == "reencode-png" {
					opErr = imageio.EncodePNG(&enc, pic.Image, pic.Metadata)
				} else {
					opErr = imageio.EncodeJPEG(&enc, pic.Image, markfile.JPEGQuality, pic.Metadata)
				}
			}
		}
		ms, cpuMs := msSince(t), float64(cpuTime()-cpu0)/float64(time.Millisecond)
		close(stop)
		wg.Wait()
		if opErr != nil {
			return out, fmt.Errorf("codecbench: %s at %dx%d: %w", op, w, h, opErr)
		}
		input := int64(w * h * 4)
		if strings.HasPrefix(op, "e2e") || strings.HasPrefix(op, "reencode") {
			input = int64(jpg.Len())
		}
		out = append(out, MemoryResult{Op: op, Width: w, Height: h, Megapixels: float64(w*h) / 1e6, Ms: ms, CPUMs: cpuMs,
			PeakRSSBytes: procStatus("VmHWM"), StartRSSBytes: start, PeakHeapBytes: peak, InputBytes: input, Note: note})
	}
	return out, nil
}

// cpuTime returns the user+system CPU time of this process so far; 0 where unavailable.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procStatus reads a "kB" field of /proc/self/status in bytes; 0 where unavailable.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v * 1024
			}
		}
	}
	return 0
}
