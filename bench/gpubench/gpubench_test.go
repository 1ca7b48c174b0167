// Package gpubench measures the GPU codec path on a machine with an NVIDIA GPU (the `device` tool lends one):
// cold start, warm latency, memory per job, and a node's end-to-end image throughput (decode, embed, encode,
// read-back check: what an embed job does) with the codec on the GPU against the same machine on its CPUs.
// Without a GPU every test skips, saying so. Figures and commands: bench/README.md, "GPU".
package gpubench

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/codec/imageio"
	"filigrane/codec/markfile"
	"filigrane/gpu/cudacodec"
)

func open(t testing.TB) *cudacodec.Device {
	t.Helper()
	d, closeAll, err := cudacodec.Open(context.Background(), os.Getenv("FILIGRANE_CUDA_LIBRARY"),
		os.Getenv("FILIGRANE_NVRTC_LIBRARY"), 0)
	if err != nil {
		t.Skipf("no GPU here, nothing to measure: %v", err)
	}
	t.Cleanup(func() { closeAll() })
	return d
}

// photoJPEG is a 12 MP photo-like JPEG (texture, gradient, flat areas) at quality 90.
func photoJPEG(t testing.TB, w, h int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	const cell = 24
	gw, gh := w/cell+2, h/cell+2
	grid := make([]float64, gw*gh)
	for i := range grid {
		grid[i] = rng.Float64()
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			fx, fy := float64(x)/cell, float64(y)/cell
			x0, y0 := int(fx), int(fy)
			tx, ty := fx-float64(x0), fy-float64(y0)
			a := grid[y0*gw+x0] + tx*(grid[y0*gw+x0+1]-grid[y0*gw+x0])
			c := grid[(y0+1)*gw+x0] + tx*(grid[(y0+1)*gw+x0+1]-grid[(y0+1)*gw+x0])
			v := a + ty*(c-a)
			if y < h/3 {
				v = 0.5 + 0.2*float64(x)/float64(w)
			}
			n := float64(rng.IntN(16))
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(30+180*v+n), uint8(50+150*v+n), uint8(200-120*v+n), 255
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func newCodec(t testing.TB) *codec.Codec {
	c, err := codec.New([]byte("gpubench-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// embedJob is an embed job's work on one file: decode, embed (verified read-back, PNG out). Like a job, it
// runs under a deadline: the device waits then poll with the context instead of blocking in the driver.
func embedJob(ctx context.Context, c *codec.Codec, dev accel.Device, data []byte, id codec.ID) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	pic, err := imageio.DecodeBytesContext(ctx, data, imageio.Limits{})
	if err != nil {
		return err
	}
	_, err = markfile.EmbedOn(ctx, c, dev, pic, id, markfile.PNG, codec.EmbedOptions{})
	return err
}

// TestColdStartLatencyMemory logs the cold start (driver, context, NVRTC compile, module load), the warm
// latency of one 12 MP job on each path, and the memory a 12 MP job holds on the device and pinned on the host.
func TestColdStartLatencyMemory(t *testing.T) {
	start := time.Now()
	d := open(t)
	cold := time.Since(start)
	c := newCodec(t)
	ctx := context.Background()
	data := photoJPEG(t, 4000, 3000)
	for _, run := range []struct {
		name string
		dev  accel.Device
	}{{"cpu", nil}, {"gpu", d}} {
		if err := embedJob(ctx, c, run.dev, data, codec.ID{1}); err != nil { // warm-up
			t.Fatal(err)
		}
		begin := time.Now()
		if err := embedJob(ctx, c, run.dev, data, codec.ID{1}); err != nil {
			t.Fatal(err)
		}
		t.Logf("warm 12 MP embed job (decode JPEG, embed, encode PNG, verify) on %s: %.0f ms", run.name,
			time.Since(begin).Seconds()*1000)
	}
	dev, pinned := d.PooledBytes()
	t.Logf("cold start (driver, context, kernels compiled by %s and loaded): %.0f ms", d.Compiler(), cold.Seconds()*1000)
	t.Logf("memory per 12 MP job: %.0f MiB on the device, %.0f MiB pinned on the host", float64(dev)/(1<<20),
		float64(pinned)/(1<<20))
}

// BenchmarkNodeThroughput12MP runs embed jobs on 12 MP JPEGs with one worker per CPU, the codec on the CPU
// ("cpu") or on the GPU ("gpu"), and reports jobs per second: a node's end-to-end throughput on each path.
// `go test -run '^$' -bench NodeThroughput -benchtime 48x ./bench/gpubench` (b.N jobs in all).
func BenchmarkNodeThroughput12MP(b *testing.B) {
	d := open(b)
	c := newCodec(b)
	data := photoJPEG(b, 4000, 3000)
	workers := runtime.GOMAXPROCS(0)
	for _, run := range []struct {
		name string
		dev  accel.Device
	}{{"cpu", nil}, {"gpu", d}} {
		b.Run(fmt.Sprintf("%s-workers%d", run.name, workers), func(b *testing.B) {
			// A warm node: one job per worker at once first, so the device's pool holds the arenas that
			// many jobs at once need (a node keeps its device open while it is warm; the cold start is
			// TestColdStartLatencyMemory's figure).
			var warm sync.WaitGroup
			for range workers {
				warm.Go(func() {
					if err := embedJob(context.Background(), c, run.dev, data, codec.ID{2}); err != nil {
						b.Error(err)
					}
				})
			}
			warm.Wait()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			b.ResetTimer()
			start := time.Now()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						if err := embedJob(context.Background(), c, run.dev, data, codec.ID{2}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkJobGPU12MP is one 12 MP embed job at a time on the GPU path, for a CPU profile of what the host does
// around the GPU (`-cpuprofile`).
func BenchmarkJobGPU12MP(b *testing.B) {
	d := open(b)
	c := newCodec(b)
	data := photoJPEG(b, 4000, 3000)
	for b.Loop() {
		if err := embedJob(context.Background(), c, d, data, codec.ID{3}); err != nil {
			b.Fatal(err)
		}
	}
}
