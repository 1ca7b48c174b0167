package cudacodec

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"testing"
	"unsafe"

	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/internal/testimage"
)

// goBuffer stands in for page-locked memory in the pool's tests; it records being freed or abandoned.
type goBuffer struct {
	b                []byte
	freed, abandoned *int
}

func (g *goBuffer) Bytes() []byte { return g.b }
func (g *goBuffer) Free() error {
	*g.freed++
	g.b = nil
	return nil
}

func (g *goBuffer) Abandon() error {
	*g.abandoned++
	g.b = nil
	return nil
}

func goPool(t *testing.T) (p *pixelPool, allocs, freed, abandoned *int) {
	allocs, freed, abandoned = new(int), new(int), new(int)
	p = newPixelPool(func(n int) (pinnedBuffer, error) {
		*allocs++
		// Spare bytes past the buffer's end, so that a test can make a slice that runs past it.
		return &goBuffer{b: make([]byte, n, n+64), freed: freed, abandoned: abandoned}, nil
	})
	return p, allocs, freed, abandoned
}

func TestPixelPoolReusesWhatIsGivenBack(t *testing.T) {
	p, allocs, freed, _ := goPool(t)
	a, giveA := p.lend(1000)
	b, giveB := p.lend(4000)
	if len(a) != 1000 || len(b) != 4000 || *allocs != 2 {
		t.Fatalf("lent %d and %d bytes with %d allocations, want 1000, 4000 and 2", len(a), len(b), *allocs)
	}
	giveA()
	giveA() // a second call gives back nothing more
	giveB()
	if got := p.pooled(); got != 5000 {
		t.Fatalf("pooled %d bytes after both were given back, want 5000", got)
	}
	// The smallest idle buffer that holds the request: 1000 bytes for 900, 4000 for 2000.
	c, giveC := p.lend(900)
	d, giveD := p.lend(2000)
	if *allocs != 2 || &c[0] != &a[0] || &d[0] != &b[0] {
		t.Fatalf("%d allocations; reused the 1000-byte buffer for 900: %v, the 4000-byte one for 2000: %v",
			*allocs, &c[0] == &a[0], &d[0] == &b[0])
	}
	if len(c) != 900 || cap(c) != 900 {
		t.Fatalf("lent %d bytes (capacity %d) for 900", len(c), cap(c))
	}
	e, giveE := p.lend(5000) // nothing idle holds it
	if *allocs != 3 || len(e) != 5000 {
		t.Fatalf("%d allocations after a 5000-byte request, want 3", *allocs)
	}
	giveC()
	giveD()
	giveE()
	if *freed != 0 {
		t.Fatalf("%d buffers freed with room in the pool", *freed)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if *freed != 3 || p.pooled() != 0 {
		t.Fatalf("close freed %d of 3 buffers; %d bytes still pooled", *freed, p.pooled())
	}
}

func TestPixelPoolBoundsWhatItKeeps(t *testing.T) {
	p, _, freed, _ := goPool(t)
	p.maxIdle, p.maxIdleBytes = 2, 2500
	var gives []func()
	for range 4 {
		_, give := p.lend(1000)
		gives = append(gives, give)
	}
	for _, give := range gives {
		give()
	}
	// Two kept (the count bound), two freed; then the byte bound: a 1000-byte buffer more would pass 2500.
	if *freed != 2 || p.pooled() != 2000 {
		t.Fatalf("after 4 give-backs with room for 2: %d freed, %d bytes pooled; want 2 and 2000", *freed, p.pooled())
	}
	p.maxIdle = 10
	_, give := p.lend(3000)
	give()
	if *freed != 3 || p.pooled() != 2000 {
		t.Fatalf("a 3000-byte buffer given back over the 2500-byte bound: %d freed, %d pooled; want 3 and 2000",
			*freed, p.pooled())
	}
}

func TestPixelPoolKnowsWhatIsLent(t *testing.T) {
	p, _, freed, abandoned := goPool(t)
	pix, give := p.lend(4096)
	for _, tc := range []struct {
		name    string
		pix     []byte
		ok      bool
		wantOff int
	}{
		{"whole", pix, true, 0},
		{"rows from the middle", pix[1024:3072], true, 1024},
		{"the last byte", pix[4095:], true, 4095},
		{"Go memory", make([]byte, 100), false, 0},
		{"empty", pix[:0], false, 0},
	} {
		buf, off, ok := p.lentAt(tc.pix)
		if ok != tc.ok || off != tc.wantOff || (ok && &buf.Bytes()[off] != &tc.pix[0]) {
			t.Errorf("%s: lentAt gives offset %d, %v; want %d, %v", tc.name, off, ok, tc.wantOff, tc.ok)
		}
	}
	// A slice that starts in the buffer and runs past its end is not in it.
	if _, _, ok := p.lentAt(unsafe.Slice(&pix[4000], 100)); ok {
		t.Error("a slice running past the buffer's end was taken as lent")
	}
	p.close() // closed with the buffer lent: kept until given back, then abandoned (the context is gone)
	if _, _, ok := p.lentAt(pix); !ok || *abandoned+*freed != 0 {
		t.Errorf("a buffer still lent was let go when the pool closed (lent %v, %d freed, %d abandoned)", ok,
			*freed, *abandoned)
	}
	give()
	if _, _, ok := p.lentAt(pix); ok || *abandoned != 1 || *freed != 0 {
		t.Errorf("after giving it back: still lent %v, %d freed, %d abandoned (want false, 0, 1)", ok, *freed, *abandoned)
	}
	if b, _ := p.lend(10); b != nil {
		t.Error("a closed pool lent memory")
	}
}

func TestPixelPoolWithoutMemory(t *testing.T) {
	p := newPixelPool(func(int) (pinnedBuffer, error) { return nil, errors.New("no pinned memory") })
	if b, give := p.lend(100); b != nil {
		t.Fatalf("lent %d bytes it could not allocate", len(b))
	} else {
		give()
	}
	if b, _ := p.lend(0); b != nil {
		t.Fatal("lent memory for 0 bytes")
	}
}

// TestLoadFromHostPixels checks, on a GPU, that images decoded into the device's page-locked memory (HostPixels,
// sent without staging) give what the same images in Go memory give: the same mark from EmbedOn and the same
// detections from DetectOn, for an NRGBA image and a JPEG copy's luma plane.
func TestLoadFromHostPixels(t *testing.T) {
	d := openDevice(t)
	c := testCodec(t)
	ctx := context.Background()
	img := testimage.Regions(1200, 900, 5)
	id := codec.ID{7}
	want, _, err := c.EmbedOn(ctx, d, img, id, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pinned, release := nrgbaIn(t, d, img)
	defer release()
	got, _, err := c.EmbedOn(ctx, d, pinned, id, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, m := compare(got.(*image.NRGBA), want.(*image.NRGBA)); n != 0 {
		t.Fatalf("embedding from page-locked pixels differs in %d samples (at most %d levels)", n, m)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, want, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	jpg, err := jpeg.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	marked, releaseMarked := nrgbaIn(t, d, want)
	defer releaseMarked()
	luma, releaseLuma := ycbcrIn(t, d, jpg.(*image.YCbCr))
	defer releaseLuma()
	for _, tc := range []struct {
		name      string
		goMem, in image.Image
	}{{"NRGBA", want, marked}, {"JPEG luma", jpg, luma}} {
		a, err := c.DetectOn(ctx, d, tc.goMem)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.DetectOn(ctx, d, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Watermarked || !b.Watermarked || *b.WatermarkID != id.String() || a.Confidence != b.Confidence {
			t.Errorf("%s: from Go memory %+v, from page-locked memory %+v", tc.name, a, b)
		}
	}
}

// nrgbaIn copies img into page-locked memory lent by d, as a decoder writing there would.
func nrgbaIn(t testing.TB, d *Device, img image.Image) (*image.NRGBA, func()) {
	t.Helper()
	src := img.(*image.NRGBA)
	b := src.Bounds()
	pix, release := d.HostPixels(4 * b.Dx() * b.Dy())
	if pix == nil {
		t.Fatal("the device lent no page-locked memory")
	}
	m := &image.NRGBA{Pix: pix, Stride: 4 * b.Dx(), Rect: b}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		copy(m.Pix[m.PixOffset(b.Min.X, y):m.PixOffset(b.Max.X, y)], src.Pix[src.PixOffset(b.Min.X, y):])
	}
	return m, release
}

// ycbcrIn is src with its luma plane copied into page-locked memory lent by d (the plane detection loads).
func ycbcrIn(t testing.TB, d *Device, src *image.YCbCr) (*image.YCbCr, func()) {
	t.Helper()
	b := src.Bounds()
	pix, release := d.HostPixels(b.Dx() * b.Dy())
	if pix == nil {
		t.Fatal("the device lent no page-locked memory")
	}
	m := *src
	m.Y, m.YStride = pix, b.Dx()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		copy(m.Y[(y-b.Min.Y)*b.Dx():][:b.Dx()], src.Y[src.YOffset(b.Min.X, y):])
	}
	return &m, release
}

var _ accel.HostMemory = (*Device)(nil)
