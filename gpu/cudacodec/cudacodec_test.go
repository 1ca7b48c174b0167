package cudacodec

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/codec/imageio"
	"filigrane/codec/pardeflate"
	"filigrane/gpu/cuda"
	"filigrane/internal/testimage"
)

// openDevice compiles the kernels on the first GPU, or skips the test with the reason when this machine has
// none (CI and development machines: the GPU path is exercised where `device` lends one).
func openDevice(t testing.TB) *Device {
	t.Helper()
	drv, err := cuda.Load(os.Getenv("FILIGRANE_CUDA_LIBRARY"))
	if err != nil {
		t.Skipf("no GPU here, GPU path not tested: %v", err)
	}
	if err := drv.Init(); err != nil {
		t.Skipf("no GPU here, GPU path not tested: %v", err)
	}
	dev, err := drv.Device(0)
	if err != nil {
		t.Skipf("no GPU here, GPU path not tested: %v", err)
	}
	c, err := drv.NewContext(dev)
	if err != nil {
		t.Fatalf("a GPU is present but its context cannot be created: %v", err)
	}
	t.Cleanup(func() { c.Destroy() })
	nv, err := cuda.LoadNVRTC(os.Getenv("FILIGRANE_NVRTC_LIBRARY"))
	if err != nil {
		t.Fatalf("a GPU is present but NVRTC is not: %v", err)
	}
	d, err := New(context.Background(), c, nv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

func testCodec(t testing.TB) *codec.Codec {
	c, err := codec.New([]byte("gpu-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compare counts the samples where a and b differ and the largest difference.
func compare(a, b *image.NRGBA) (diff int, maxDiff int) {
	for i := range a.Pix {
		d := int(a.Pix[i]) - int(b.Pix[i])
		if d != 0 {
			diff++
			maxDiff = max(maxDiff, max(d, -d))
		}
	}
	return diff, maxDiff
}

func TestEmbedMatchesCPU(t *testing.T) {
	d := openDevice(t)
	c := testCodec(t)
	ctx := context.Background()
	for _, size := range [][2]int{{640, 480}, {1500, 1100}, {4000, 3000}} {
		t.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(t *testing.T) {
			img := testimage.Regions(size[0], size[1], uint64(size[0]))
			id := codec.ID{7, 1, 2}
			want, wrep, err := c.Embed(img, id, codec.EmbedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, grep, err := c.EmbedOn(ctx, d, img, id, codec.EmbedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			diff, maxDiff := compare(want.(*image.NRGBA), got.(*image.NRGBA))
			t.Logf("CPU PSNR %.3f dB, GPU %.3f dB; %d of %d samples differ, by at most %d", wrep.PSNR, grep.PSNR,
				diff, len(img.Pix), maxDiff)
			if maxDiff > 1 {
				t.Errorf("GPU pixels differ from the CPU's by up to %d levels (want at most 1)", maxDiff)
			}
			if diff*1000 > len(img.Pix) {
				t.Errorf("%d of %d samples differ from the CPU's (want under 0.1%%)", diff, len(img.Pix))
			}
			det := c.Detect(got)
			if !det.Watermarked || *det.WatermarkID != id.String() {
				t.Fatalf("the CPU detector does not read the GPU's mark: %+v", det)
			}
			// The GPU detector reads both marks, and a JPEG copy, as the CPU does.
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, got, &jpeg.Options{Quality: 80}); err != nil {
				t.Fatal(err)
			}
			jpg, err := jpeg.Decode(&buf)
			if err != nil {
				t.Fatal(err)
			}
			for name, m := range map[string]image.Image{"cpu-marked": want, "gpu-marked": got, "jpeg-80": jpg} {
				gd, err := c.DetectOn(ctx, d, m)
				if err != nil {
					t.Fatal(err)
				}
				cd := c.Detect(m)
				if gd.Watermarked != cd.Watermarked || gd.Confidence-cd.Confidence > 1e-6 || cd.Confidence-gd.Confidence > 1e-6 {
					t.Errorf("%s: GPU detection %v (%.6f), CPU %v (%.6f)", name, gd.Watermarked, gd.Confidence,
						cd.Watermarked, cd.Confidence)
				}
				if !gd.Watermarked || *gd.WatermarkID != id.String() {
					t.Errorf("%s: GPU detector did not read the id", name)
				}
			}
		})
	}
}

func TestDetectUnmarkedAndRotated(t *testing.T) {
	d := openDevice(t)
	c := testCodec(t)
	ctx := context.Background()
	img := testimage.Regions(1200, 900, 3)
	gd, err := c.DetectOn(ctx, d, img)
	if err != nil {
		t.Fatal(err)
	}
	if gd.Watermarked {
		t.Fatalf("unmarked image reported marked: %+v", gd)
	}
	// Upside down: the pilot search on the device must find the dihedral transform.
	marked, _, err := c.EmbedOn(ctx, d, img, codec.ID{9}, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := marked.(*image.NRGBA)
	b := m.Bounds()
	flipped := image.NewNRGBA(b)
	for y := 0; y < b.Dy(); y++ {
		for x := 0; x < b.Dx(); x++ {
			copy(flipped.Pix[flipped.PixOffset(b.Dx()-1-x, b.Dy()-1-y):][:4], m.Pix[m.PixOffset(x, y):][:4])
		}
	}
	gd, err = c.DetectOn(ctx, d, flipped)
	if err != nil {
		t.Fatal(err)
	}
	if !gd.Watermarked || *gd.WatermarkID != (codec.ID{9}).String() {
		t.Fatalf("rotated by 180°: not read on the GPU: %+v", gd)
	}
}

// TestConcurrentJobsShareTheDevice runs several embeddings at once (one stream each) and checks each result is
// the one a lone run gives.
func TestConcurrentJobsShareTheDevice(t *testing.T) {
	d := openDevice(t)
	c := testCodec(t)
	ctx := context.Background()
	img := testimage.Regions(1024, 768, 5)
	want, _, err := c.EmbedOn(ctx, d, img, codec.ID{1}, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := c.EmbedOn(ctx, d, img, codec.ID{1}, codec.EmbedOptions{})
			if err != nil {
				errs <- err
				return
			}
			if diff, _ := compare(want.(*image.NRGBA), got.(*image.NRGBA)); diff != 0 {
				errs <- fmt.Errorf("job %d: %d samples differ from a lone run", i, diff)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// BenchmarkCodec12MP compares the codec core on one CPU core with the GPU path at 12 MP (the image already
// decoded, the result not encoded): `go test -run '^$' -bench Codec12MP -cpu 1 ./gpu/cudacodec`. Detection runs
// on the marked image (NRGBA: the device gets 4 bytes a pixel) and on a JPEG copy at quality 90 decoded to YCbCr
// (detect-jpeg: the device gets the luma plane, a byte a pixel), the usual input of a detection; on the GPU each
// also from page-locked memory (detect-pinned, detect-jpeg-pinned: where the node decodes a detection's input).
func BenchmarkCodec12MP(b *testing.B) {
	img := testimage.Regions(4000, 3000, 12)
	c := testCodec(b)
	ctx := context.Background()
	id := codec.ID{3}
	marked, _, err := c.Embed(img, id, codec.EmbedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// A detection's usual input: a JPEG copy, decoded to YCbCr (the luma plane is the detector's input).
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, marked, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	jpg, err := jpeg.Decode(&buf)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("embed/cpu", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := c.Embed(img, id, codec.EmbedOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("detect/cpu", func(b *testing.B) {
		for b.Loop() {
			if !c.Detect(marked).Watermarked {
				b.Fatal("not detected")
			}
		}
	})
	b.Run("detect-jpeg/cpu", func(b *testing.B) {
		for b.Loop() {
			if !c.Detect(jpg).Watermarked {
				b.Fatal("not detected")
			}
		}
	})
	d := openDevice(b)
	b.Run("embed/gpu", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := c.EmbedOn(ctx, d, img, id, codec.EmbedOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("detect/gpu", func(b *testing.B) {
		for b.Loop() {
			det, err := c.DetectOn(ctx, d, marked)
			if err != nil || !det.Watermarked {
				b.Fatal("not detected", err)
			}
		}
	})
	b.Run("detect-jpeg/gpu", func(b *testing.B) {
		for b.Loop() {
			det, err := c.DetectOn(ctx, d, jpg)
			if err != nil || !det.Watermarked {
				b.Fatal("not detected", err)
			}
		}
	})
	// The same inputs decoded into the device's page-locked memory (HostPixels), as the node's decoder does for
	// a detection on a GPU: Load sends them without staging.
	pinned, release := nrgbaIn(b, d, marked)
	defer release()
	pinnedJPEG, releaseJPEG := ycbcrIn(b, d, jpg.(*image.YCbCr))
	defer releaseJPEG()
	for _, tc := range []struct {
		name string
		in   image.Image
	}{{"detect-pinned/gpu", pinned}, {"detect-jpeg-pinned/gpu", pinnedJPEG}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				det, err := c.DetectOn(ctx, d, tc.in)
				if err != nil || !det.Watermarked {
					b.Fatal("not detected", err)
				}
			}
		})
	}
	_ = runtime.NumCPU
}

// TestPhaseTimes logs where the GPU path's time goes at 12 MP (per Surface call, work included), for the
// figures in bench/README.md: `go test -run PhaseTimes -v ./gpu/cudacodec` on a machine with a GPU. Each run is
// repeated (embed's host share varied 3x between H200 runs) and split three ways: wall time, the CPU time of
// the test's own thread (the job's goroutine is locked to it, so it is DetectOn's and the Surface calls' host
// work on that goroutine: copies, allocation, the codec's decisions) and the process's CPU time (the banded
// copies' goroutines, the garbage collector and the driver's threads besides), each for the whole run, its
// device calls and the rest ("host"). Host wall time well above host thread CPU is waiting, not work. The third
// run also times Grid's kernels one by one (each waited for, which adds a few waits to that run's Grid time).
func TestPhaseTimes(t *testing.T) {
	d := openDevice(t)
	c := testCodec(t)
	ctx := context.Background()
	img := testimage.Regions(4000, 3000, 12)
	marked, _, err := c.EmbedOn(ctx, d, img, codec.ID{3}, codec.EmbedOptions{}) // warm the pool
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, marked, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	jpg, err := jpeg.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	type spent struct{ wall, thread, process time.Duration }
	base := time.Now()
	now := func() spent { return spent{time.Since(base), threadCPU(), processCPU()} }
	sub := func(a, b spent) spent { return spent{a.wall - b.wall, a.thread - b.thread, a.process - b.process} }
	add := func(a, b spent) spent { return spent{a.wall + b.wall, a.thread + b.thread, a.process + b.process} }
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	for _, run := range []struct {
		name string
		f    func() error
	}{
		{"embed", func() error { _, _, err := c.EmbedOn(ctx, d, img, codec.ID{3}, codec.EmbedOptions{}); return err }},
		{"detect-nrgba", func() error { _, err := c.DetectOn(ctx, d, marked); return err }},
		{"detect-ycbcr", func() error { _, err := c.DetectOn(ctx, d, jpg); return err }},
	} {
		for rep := range 3 {
			calls := map[string]spent{}
			counts := map[string]int{}
			open := map[string]spent{}          // the start of the call under way, by name (calls do not nest)
			parts := map[string]time.Duration{} // a call's parts ("Grid.sample"), wall time
			d.traceStart = func(call string) { open[call] = now() }
			d.trace = func(call string, dur time.Duration) {
				if strings.Contains(call, ".") {
					parts[call] += dur
					return
				}
				calls[call] = add(calls[call], sub(now(), open[call]))
				counts[call]++
			}
			d.traceKernels = rep == 2 // the last run: Grid's kernels one at a time, each timed
			start := now()
			if err := run.f(); err != nil {
				t.Fatal(err)
			}
			total := sub(now(), start)
			d.trace, d.traceStart, d.traceKernels = nil, nil, false
			var device spent
			line := ""
			for _, k := range []string{"Load", "BlockStats", "SetMark", "MarkEnergy", "Analyse", "Grid", "PilotPeaks", "BlockScores", "ConvDecode", "Apply", "Read"} {
				if counts[k] > 0 {
					line += fmt.Sprintf(" %s %d× %.2f (CPU %.2f);", k, counts[k], ms(calls[k].wall), ms(calls[k].thread))
					device = add(device, calls[k])
				}
			}
			host := sub(total, device)
			t.Logf("%s #%d: %.2f ms in all = device calls %.2f + host %.2f; thread CPU %.2f = %.2f + %.2f; process CPU %.2f = %.2f + %.2f",
				run.name, rep+1, ms(total.wall), ms(device.wall), ms(host.wall), ms(total.thread), ms(device.thread),
				ms(host.thread), ms(total.process), ms(device.process), ms(host.process))
			t.Logf("%s #%d calls:%s", run.name, rep+1, line)
			if len(parts) > 0 {
				line = ""
				for _, k := range []string{"Load.staged", "PilotPeaks.kernel", "BlockScores.kernel", "ConvDecode.kernel"} {
					if v, ok := parts[k]; ok {
						line += fmt.Sprintf(" %s %.3f;", k, ms(v))
					}
				}
				t.Logf("%s #%d parts in ms:%s", run.name, rep+1, line)
				line = ""
				for _, k := range []string{"start", "sample", "residual", "boxRowsSq", "boxColsSq", "boxRowsCount", "boxColsCount", "normalise", "fold", "download"} {
					line += fmt.Sprintf(" %s %.3f;", k, ms(parts["Grid."+k]))
				}
				t.Logf("%s #%d calls: Grid's parts in ms (each kernel waited for):%s", run.name, rep+1, line)
			}
		}
	}
}

// TestPNGRowsMatchEncodePNG: a PNG written from the device's filtered rows is byte for byte the file
// imageio.EncodePNG writes (opaque and translucent images, with an RGB ICC profile).
func TestPNGRowsMatchEncodePNG(t *testing.T) {
	d := openDevice(t)
	icc := make([]byte, 132)
	copy(icc[16:], "RGB ")
	for _, tc := range []struct {
		name  string
		alpha bool
		icc   []byte
	}{{"opaque", false, nil}, {"translucent", true, nil}, {"opaque-icc", false, icc}} {
		img := testimage.Regions(1001, 603, 9)
		if !tc.alpha {
			for i := 3; i < len(img.Pix); i += 4 {
				img.Pix[i] = 255
			}
		}
		var want, got bytes.Buffer
		if err := imageio.EncodePNG(&want, img, imageio.Metadata{ICC: tc.icc}); err != nil {
			t.Fatal(err)
		}
		rows, alpha, err := d.FilterPNG(context.Background(), accel.Image{Pix: img.Pix, Width: 1001, Height: 603,
			Stride: img.Stride, Format: accel.NRGBA8})
		if err != nil {
			t.Fatal(err)
		}
		if alpha != tc.alpha {
			t.Fatalf("%s: alpha %v", tc.name, alpha)
		}
		if err := imageio.EncodePNGRows(&got, 1001, 603, alpha, rows, imageio.Metadata{ICC: tc.icc}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			t.Errorf("%s: %d bytes from the device's rows, %d from EncodePNG, not the same file", tc.name, got.Len(), want.Len())
		}
	}
}

// TestDeflatePNGMatchesPardeflate: the device's PNG image data is byte for byte pardeflate.Compress of its
// filtered rows (which TestPNGRowsMatchEncodePNG pins to image/png's), and the file written around it decodes to
// the source pixels: opaque, translucent, flat artwork (long matches), tiny, 12 MP, and eight images deflated
// at once on one device.
func TestDeflatePNGMatchesPardeflate(t *testing.T) {
	d := openDevice(t)
	ctx := context.Background()
	opaque := func(m *image.NRGBA) *image.NRGBA {
		for i := 3; i < len(m.Pix); i += 4 {
			m.Pix[i] = 255
		}
		return m
	}
	flat := image.NewNRGBA(image.Rect(0, 0, 1500, 900))
	for y := 0; y < 900; y++ {
		for x := 0; x < 1500; x++ {
			i := flat.PixOffset(x, y)
			v := uint8(40)
			if (x/100+y/60)%2 == 0 {
				v = 220
			}
			flat.Pix[i], flat.Pix[i+1], flat.Pix[i+2], flat.Pix[i+3] = v, v/2, 255-v, 255
		}
	}
	check := func(name string, img *image.NRGBA) error {
		a := accel.Image{Pix: img.Pix, Width: img.Rect.Dx(), Height: img.Rect.Dy(), Stride: img.Stride, Format: accel.NRGBA8}
		rows, alpha, err := d.FilterPNG(ctx, a)
		if err != nil {
			return err
		}
		start := time.Now()
		z, zalpha, err := d.DeflatePNG(ctx, a)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		took := time.Since(start)
		if zalpha != alpha {
			return fmt.Errorf("%s: alpha %v from DeflatePNG, %v from FilterPNG", name, zalpha, alpha)
		}
		want := pardeflate.Compress(rows)
		if !bytes.Equal(z, want) {
			at := 0
			for at < min(len(z), len(want)) && z[at] == want[at] {
				at++
			}
			return fmt.Errorf("%s: %d bytes from the device, %d from pardeflate.Compress, first difference at %d", name,
				len(z), len(want), at)
		}
		var file bytes.Buffer
		if err := imageio.EncodePNGZlib(&file, a.Width, a.Height, alpha, z, imageio.Metadata{}); err != nil {
			return err
		}
		back, err := imageio.DecodeBytes(file.Bytes(), imageio.Limits{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if m, ok := back.Image.(*image.NRGBA); !ok || !bytes.Equal(m.Pix, img.Pix) {
			return fmt.Errorf("%s: the file decodes to other pixels (%T)", name, back.Image)
		}
		t.Logf("%s: %d rows bytes -> %d (%.1f%%), DeflatePNG %.1f ms", name, len(rows), len(z),
			100*float64(len(z))/float64(len(rows)), took.Seconds()*1000)
		return nil
	}
	for _, tc := range []struct {
		name string
		img  *image.NRGBA
	}{
		{"opaque", opaque(testimage.Regions(1001, 603, 9))},
		{"translucent", testimage.Regions(1001, 603, 10)},
		{"flat", flat},
		{"1x1", opaque(testimage.Regions(1, 1, 11))},
		{"7x3", testimage.Regions(7, 3, 12)},
		{"12MP", opaque(testimage.Regions(4000, 3000, 13))},
	} {
		if err := check(tc.name, tc.img); err != nil {
			t.Error(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		img := opaque(testimage.Regions(1200+40*i, 800, uint64(20+i)))
		wg.Go(func() {
			if err := check(fmt.Sprintf("concurrent-%d", i), img); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestDeflatePhaseTimes logs where DeflatePNG's time goes at 12 MP, alone and with 16 images at once (then the
// deflate's own throughput in images per second): the filter pass (upload included), the match finder (with the
// histograms' download), the host's codes and headers, the encoding (with the stream's download).
func TestDeflatePhaseTimes(t *testing.T) {
	d := openDevice(t)
	ctx := context.Background()
	img := testimage.Regions(4000, 3000, 14)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 255
	}
	a := accel.Image{Pix: img.Pix, Width: 4000, Height: 3000, Stride: img.Stride, Format: accel.NRGBA8}
	var mu sync.Mutex
	calls := map[string]time.Duration{}
	for _, jobs := range []int{1, 1, 16, 16, 64} {
		if _, _, err := d.DeflatePNG(ctx, a); err != nil { // warm the pool
			t.Fatal(err)
		}
		clear(calls)
		d.trace = func(call string, dur time.Duration) { mu.Lock(); calls[call] += dur; mu.Unlock() }
		start := time.Now()
		var wg sync.WaitGroup
		for range jobs {
			wg.Go(func() {
				if _, _, err := d.DeflatePNG(ctx, a); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		total := time.Since(start)
		d.trace = nil
		line := ""
		for _, k := range []string{"filter", "tokens", "plans", "encode"} {
			line += fmt.Sprintf(" %s %.1f ms;", k, calls["DeflatePNG."+k].Seconds()*1000/float64(jobs))
		}
		t.Logf("%d at once: %.1f ms in all (%.1f images/s), per image:%s", jobs, total.Seconds()*1000,
			float64(jobs)/total.Seconds(), line)
	}
}

// threadCPU and processCPU are the CPU time of the calling thread and of the process (clock_gettime's
// CLOCK_THREAD_CPUTIME_ID and CLOCK_PROCESS_CPUTIME_ID: nanoseconds, where getrusage counts in scheduler ticks).
func threadCPU() time.Duration  { return cpuClock(3) }
func processCPU() time.Duration { return cpuClock(2) }

func cpuClock(id uintptr) time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, id, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// TestUploadRates logs the rates of a 12 MP Load's parts on this machine, for the figures in bench/README.md
// (where a detection's Load time goes): the staging copy (Go memory into the pinned buffer, copyBytes), the
// transfer from the pinned buffer alone, and whole Loads of an NRGBA image and of a luma plane, each the best
// of five. It checks nothing but that the calls succeed.
func TestUploadRates(t *testing.T) {
	d := openDevice(t)
	ctx := context.Background()
	const w, h = 4000, 3000
	src := make([]byte, w*h*4)
	for i := range src {
		src[i] = byte(i * 7)
	}
	a, err := d.takeArena(len(src), len(src))
	if err != nil {
		t.Fatal(err)
	}
	defer d.giveArena(a)
	hb := a.host.Bytes()
	best := func(name string, bytes int, f func() error) {
		t.Helper()
		var b time.Duration
		for i := range 5 {
			start := time.Now()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); i == 0 || el < b {
				b = el
			}
		}
		t.Logf("upload rates: %s: %.3f ms (%.1f GB/s)", name, b.Seconds()*1000, float64(bytes)/b.Seconds()/1e9)
	}
	best("staging copy, 48 MB", len(src), func() error { copyBytes(hb, src); return nil })
	best("transfer from pinned, 48 MB", len(src), func() error {
		if err := d.c.CopyRangeToDeviceAsync(a.dev, a.host, 0, len(src), a.stream); err != nil {
			return err
		}
		return a.stream.Synchronize(ctx)
	})
	best("transfer from pinned, 12 MB", len(src)/4, func() error {
		if err := d.c.CopyRangeToDeviceAsync(a.dev, a.host, 0, len(src)/4, a.stream); err != nil {
			return err
		}
		return a.stream.Synchronize(ctx)
	})
	for _, f := range []struct {
		name   string
		format accel.Format
		bpp    int
	}{{"Load NRGBA 12 MP", accel.NRGBA8, 4}, {"Load luma plane 12 MP", accel.Gray8, 1}} {
		img := accel.Image{Pix: src[:w*h*f.bpp], Stride: w * f.bpp, Width: w, Height: h, Format: f.format}
		best(f.name, w*h*f.bpp, func() error {
			s, err := d.Load(ctx, img)
			if err != nil {
				return err
			}
			return s.Close()
		})
	}
}
