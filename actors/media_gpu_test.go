package actors

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"testing"
	"time"
	"unsafe"

	"filigrane/actors/jobstate"
	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/internal/testimage"
	"filigrane/persistence/fsblobs"
)

// pixelDevice is a GPU whose kernels fail (as a device error does) and which lends Go memory as its page-locked
// pixels: it records what the decoder asked for, what Load was given and what came back.
type pixelDevice struct {
	lent            [][]byte
	released        int
	loadedFromLent  bool
	loadedStride    int
	releasedAtLoads int // buffers given back when Load ran
}

func (d *pixelDevice) HostPixels(n int) ([]byte, func()) {
	pix := make([]byte, n)
	d.lent = append(d.lent, pix)
	return pix, func() { d.released++ }
}

func (d *pixelDevice) Load(_ context.Context, img accel.Image) (accel.Surface, error) {
	for _, b := range d.lent {
		start := uintptr(unsafe.Pointer(&b[0]))
		p := uintptr(unsafe.Pointer(&img.Pix[0]))
		if p >= start && p-start+uintptr(img.Height*img.Stride) <= uintptr(len(b)) {
			d.loadedFromLent = true
		}
	}
	d.loadedStride, d.releasedAtLoads = img.Stride, d.released
	return nil, errors.New("kernel launch failed")
}

// oneGPU hands out dev and counts the work begun and ended on it.
type oneGPU struct {
	dev          accel.Device
	begun, ended int
}

func (g *oneGPU) Acquire(time.Time) (accel.Device, func(time.Time), bool) {
	g.begun++
	return g.dev, func(time.Time) { g.ended++ }, true
}

// TestDetectionDecodesIntoTheGPUsMemory checks that a detection asked of a GPU decodes the image into the
// device's page-locked memory (accel.HostMemory), loads it from there without a copy, gives the memory back
// when done, and, when the device then fails, still answers from the CPU with the same pixels.
func TestDetectionDecodesIntoTheGPUsMemory(t *testing.T) {
	blobs, err := fsblobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cdc, err := codec.New([]byte(codec.DevelopmentKey))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := codec.ID{5}
	marked, _, err := cdc.Embed(testimage.Regions(512, 384, 2), id, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, marked); err != nil {
		t.Fatal(err)
	}
	if _, err := blobs.Put(ctx, "inputs/org/marked.png", &b); err != nil {
		t.Fatal(err)
	}
	dev := &pixelDevice{}
	gpus := &oneGPU{dev: dev}
	m := Media{Blobs: blobs, Codec: cdc, Budget: NewDecodeBudget(0), GPUs: gpus}

	det, ran, perr := m.detectStoredOn(ctx, jobstate.AcceleratorGPU, "org", "inputs/org/marked.png", time.Second)
	if perr != nil {
		t.Fatal(perr)
	}
	if !det.Watermarked || *det.WatermarkID != id.String() || ran != jobstate.AcceleratorCPU {
		t.Fatalf("detection %+v on %s; want the id read on the CPU after the device failed", det, ran)
	}
	if len(dev.lent) != 1 || len(dev.lent[0]) != 4*512*384 {
		t.Fatalf("the decoder asked the device for %d buffers (%v), want one of %d bytes", len(dev.lent),
			lens(dev.lent), 4*512*384)
	}
	if !dev.loadedFromLent || dev.loadedStride != 4*512 || dev.releasedAtLoads != 0 {
		t.Fatalf("Load got the lent pixels %v (stride %d), with %d buffers given back; want true, %d, 0",
			dev.loadedFromLent, dev.loadedStride, dev.releasedAtLoads, 4*512)
	}
	if dev.released != 1 || gpus.begun != 1 || gpus.ended != 1 {
		t.Fatalf("after the detection: %d buffers given back, GPU work begun %d and ended %d times; want 1, 1, 1",
			dev.released, gpus.begun, gpus.ended)
	}
	// Nothing stays reserved (Acquire would wait for it, then fail: the timeout only bounds a failing run).
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	all, err := m.Budget.Acquire(wctx, m.Budget.Capacity())
	if err != nil {
		t.Fatal("decode memory still reserved after the detection:", err)
	}
	all()

	// Asked of the CPU, the device is neither taken nor lends memory.
	if _, ran, perr := m.detectStoredOn(ctx, jobstate.AcceleratorCPU, "org", "inputs/org/marked.png", time.Second); perr != nil || ran != jobstate.AcceleratorCPU || len(dev.lent) != 1 || gpus.begun != 1 {
		t.Fatalf("on the CPU: %v on %s, %d buffers lent, GPU taken %d times", perr, ran, len(dev.lent), gpus.begun)
	}
}

func lens(bs [][]byte) []int {
	var n []int
	for _, b := range bs {
		n = append(n, len(b))
	}
	return n
}
