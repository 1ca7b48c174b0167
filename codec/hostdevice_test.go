package codec

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/jpeg"
	"math"
	"reflect"
	"slices"
	"testing"

	"filigrane/codec/accel"
	"filigrane/internal/testimage"
)

// hostDevice computes the detection passes of the accel contract with the codec's own CPU functions (luma,
// pyramid, sampling, whitening, folding, the pilot correlation of searchDihedral, and, when scorer and decoder
// are set, blockScores and convDecode for the optional passes), so that DetectOn's use of a device is tested
// here without a GPU: its results must be Detect's exactly. fail names an optional pass that returns an error.
type hostDevice struct {
	c               *Codec
	scorer, decoder bool
	fail            string
	calls           map[string]int
}

func (d *hostDevice) Load(_ context.Context, in accel.Image) (accel.Surface, error) {
	r := image.Rect(0, 0, in.Width, in.Height)
	var img image.Image
	if in.Format == accel.Gray8 {
		img = &image.Gray{Pix: in.Pix, Stride: in.Stride, Rect: r}
	} else {
		img = &image.NRGBA{Pix: in.Pix, Stride: in.Stride, Rect: r}
	}
	s := &hostSurface{d: d, y: lumaOf(img)}
	switch {
	case d.scorer && d.decoder:
		return &struct {
			*hostSurface
			hostScorer
			hostDecoder
		}{s, hostScorer{s}, hostDecoder{s}}, nil
	case d.scorer:
		return &struct {
			*hostSurface
			hostScorer
		}{s, hostScorer{s}}, nil
	case d.decoder:
		return &struct {
			*hostSurface
			hostDecoder
		}{s, hostDecoder{s}}, nil
	}
	return s, nil
}

type hostSurface struct {
	d    *hostDevice
	y    plane
	pyr  pyramid
	last waxelGrid // the whitened grid of the last Grid call
	acc  []float64
}

func (s *hostSurface) Analyse(_ context.Context, gain float32, levels int) error {
	if gain != 0 {
		return errors.New("host surface: detection only")
	}
	s.pyr = buildPyramid(s.y, 16)
	if len(s.pyr) != levels {
		return errors.New("host surface: levels")
	}
	return nil
}

func (s *hostSurface) Grid(_ context.Context, p *accel.GridPlan, cells bool) (*accel.GridResult, error) {
	g := waxelGrid{qx0: p.QX0, qy0: p.QY0, w: p.W, h: p.H, val: make([]float32, p.W*p.H), ok: make([]bool, p.W*p.H)}
	lp := s.pyr[p.Level]
	for j := 0; j < p.H; j++ {
		x, y := p.Start[2*j], p.Start[2*j+1]
		for i := 0; i < p.W; i++ {
			g.val[j*p.W+i], g.ok[j*p.W+i] = lp.at(x, y)
			x += p.M[0]
			y += p.M[2]
		}
	}
	s.last = whiten(g)
	s.acc, _ = fold(s.last)
	res := &accel.GridResult{Acc: s.acc}
	if cells {
		res.Val, res.OK = s.last.val, s.last.ok
	}
	return res, nil
}

func (s *hostSurface) PilotPeaks(_ context.Context, _ *accel.PilotPlan, norm float64) ([8]accel.PilotPeak, error) {
	var sums [8][]float64
	buf := make([]complex128, tileWaxels)
	for d := range dihedral { // searchDihedral's sums
		for u, k := range dihedralIndex(d) {
			buf[u] = complex(s.acc[k], 0)
		}
		fft2(buf, tileSide, tileSide, false)
		for i := range buf {
			buf[i] *= s.d.c.pilotFFT[i]
		}
		fft2(buf, tileSide, tileSide, true)
		sums[d] = make([]float64, tileWaxels)
		for i := range buf {
			sums[d][i] = real(buf[i]) / tileWaxels
		}
	}
	return pilotPeaks(sums, tileSide, norm), nil
}

func (s *hostSurface) BlockStats(context.Context, int, int, int) ([]float32, []float32, error) {
	return nil, nil, errors.New("host surface: detection only")
}
func (s *hostSurface) SetMark(context.Context, *accel.MarkPlan) error {
	return errors.New("detection only")
}
func (s *hostSurface) MarkEnergy(context.Context) ([]float64, error) {
	return nil, errors.New("detection only")
}
func (s *hostSurface) Apply(context.Context, float32) ([]int64, error) {
	return nil, errors.New("detection only")
}
func (s *hostSurface) Read(context.Context, []byte, int) error { return errors.New("detection only") }
func (s *hostSurface) Close() error                            { return nil }

type hostScorer struct{ s *hostSurface }

func (h hostScorer) BlockScores(_ context.Context, _ *accel.PilotPlan, radius int) ([]float64, error) {
	h.s.d.calls["BlockScores"]++
	if h.s.d.fail == "BlockScores" {
		return nil, errors.New("scorer failed")
	}
	return h.s.d.c.layout.blockScores(h.s.last, radius), nil
}

type hostDecoder struct{ s *hostSurface }

func (h hostDecoder) ConvDecode(_ context.Context, p accel.ConvPlan, llr []float64) ([]float64, error) {
	h.s.d.calls["ConvDecode"]++
	if h.s.d.fail == "ConvDecode" {
		return nil, errors.New("decoder failed")
	}
	if p.K != convK || p.Generators != convGenerators || p.Wrap != convWrap {
		return nil, errors.New("another code")
	}
	return convDecode(llr), nil
}

// TestDetectOnUsesOptionalPasses: DetectOn on a device with or without the optional passes gives Detect's
// result exactly (marked, rotated, JPEG-compressed and unmarked images), uses the passes when the Surface has
// them (a block scoring per refinement pass, a device decode per soft word), and reports a failing pass as
// ErrDevice.
func TestDetectOnUsesOptionalPasses(t *testing.T) {
	c := testCodec(t)
	ctx := context.Background()
	img := naturalImage(800, 640, 13) // small: the unmarked image runs every hypothesis four times
	id, _ := IDFromJSON([]byte(`{"device":"host"}`))
	marked, _, err := c.Embed(img, id, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		img    image.Image
		marked bool
	}{
		{"marked", marked, true},
		{"rotated-3deg", toNRGBA(attackRotate(marked, 3)), true},
		{"jpeg-70", attackJPEG(marked, 70), true},
		{"unmarked", img, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := c.Detect(tc.img)
			if want.Watermarked != tc.marked {
				t.Fatalf("Detect: watermarked %v, want %v", want.Watermarked, tc.marked)
			}
			opts := []struct{ scorer, decoder bool }{{false, false}, {true, false}, {false, true}, {true, true}}
			if tc.name != "marked" {
				// Each pass alone on the nominal image; the attacked and unmarked images (other search paths,
				// every hypothesis for the unmarked one) with both at once, to keep the test short: either pass
				// differing from the CPU's would change the detection compared below.
				opts = opts[3:]
			}
			for _, opt := range opts {
				dev := &hostDevice{c: c, scorer: opt.scorer, decoder: opt.decoder, calls: map[string]int{}}
				got, err := c.DetectOn(ctx, dev, tc.img)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("scorer %v, decoder %v: DetectOn %+v, Detect %+v", opt.scorer, opt.decoder, got, want)
				}
				if tc.marked && (opt.scorer != (dev.calls["BlockScores"] > 0) || opt.decoder != (dev.calls["ConvDecode"] > 0)) {
					t.Fatalf("scorer %v, decoder %v: calls %v", opt.scorer, opt.decoder, dev.calls)
				}
			}
		})
	}
	for _, pass := range []string{"BlockScores", "ConvDecode"} {
		dev := &hostDevice{c: c, scorer: true, decoder: true, fail: pass, calls: map[string]int{}}
		if _, err := c.DetectOn(ctx, dev, marked); !errors.Is(err, ErrDevice) {
			t.Errorf("%s failing: DetectOn returned %v, want ErrDevice", pass, err)
		}
	}
}

// TestDeviceDecodeKeepsOddWordsOnTheHost: a soft word with a NaN, an infinity or an LLR large enough to overflow
// a path metric is decoded on the host (the device's maxima would order a NaN differently), a normal one on the
// device; both give decodeSoft's result.
func TestDeviceDecodeKeepsOddWordsOnTheHost(t *testing.T) {
	c := testCodec(t)
	dev := &hostDevice{c: c, decoder: true, calls: map[string]int{}}
	s, err := dev.Load(context.Background(), accel.Image{Pix: make([]byte, 64*64), Width: 64, Height: 64, Stride: 64,
		Format: accel.Gray8})
	if err != nil {
		t.Fatal(err)
	}
	ds := &deviceSampler{ctx: context.Background(), c: c, s: s}
	word := func(v float64) []float64 {
		llr := make([]float64, codedBits)
		for i := range llr {
			llr[i] = float64(i%7) - 3
		}
		llr[5] = v
		return llr
	}
	for _, tc := range []struct {
		name   string
		v      float64
		device bool
	}{
		{"normal", 2.5, true},
		{"nan", math.NaN(), false},
		{"inf", math.Inf(1), false},
		{"huge", -1e305, false},
	} {
		before := dev.calls["ConvDecode"]
		got, want := ds.decode(word(tc.v)), decodeSoft(word(tc.v))
		if onDevice := dev.calls["ConvDecode"] > before; onDevice != tc.device {
			t.Errorf("%s: decoded on the device %v, want %v", tc.name, onDevice, tc.device)
		}
		if got.ok != want.ok || got.id != want.id || len(got.infoLLR) != len(want.infoLLR) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, want)
		}
	}
	if ds.err != nil {
		t.Fatal(ds.err)
	}
}

// BenchmarkDetectOnHost12MP measures what DetectOn of a marked 12 MP image costs the host outside the device's
// calls: a first detection on the host device records every device call's result, and the timed detections
// replay them (a device that answers at once), so ns/op is DetectOn's own work: plans, the pilot alignment, the
// refinement (fit only, or scores and fit), the decoding (frame check only, or trellis and frame check). Sub-
// benchmarks: two images (the codec's natural test picture, and internal/testimage's Regions, which
// gpu/cudacodec's TestPhaseTimes and BenchmarkCodec12MP detect on a device, as an NRGBA and as a quality-90
// JPEG's YCbCr), with both optional
// passes offered ("passes": the device path now) or neither ("host": the device path before them, which the
// H200's PhaseTimes figures measured). Its functions:
// go test ./codec/ -run x -bench DetectOnHost12MP -cpu 1 -cpuprofile cpu.out, then go tool pprof -top codec.test cpu.out.
func BenchmarkDetectOnHost12MP(b *testing.B) {
	c := testCodec(b)
	marked, _, err := c.Embed(naturalImage(4000, 3000, 77), ID{1}, EmbedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	gc, err := New([]byte("gpu-test-key-0123456789")) // gpu/cudacodec's testCodec
	if err != nil {
		b.Fatal(err)
	}
	phase, _, err := gc.Embed(testimage.Regions(4000, 3000, 12), ID{3}, EmbedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, phase, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	phaseJPEG, err := jpeg.Decode(&buf)
	if err != nil {
		b.Fatal(err)
	}
	for _, in := range []struct {
		name string
		c    *Codec
		img  image.Image
	}{{"natural", c, marked}, {"testimage-nrgba", gc, phase}, {"testimage-ycbcr", gc, phaseJPEG}} {
		for _, passes := range []bool{true, false} {
			name := in.name + "/host"
			if passes {
				name = in.name + "/passes"
			}
			b.Run(name, func(b *testing.B) {
				ctx := context.Background()
				dev := &replayDevice{dev: &hostDevice{c: in.c, scorer: passes, decoder: passes, calls: map[string]int{}},
					recording: true}
				want, err := in.c.DetectOn(ctx, dev, in.img)
				if err != nil || !want.Watermarked {
					b.Fatalf("DetectOn: %+v, %v", want, err)
				}
				dev.recording = false
				for b.Loop() {
					dev.next = 0
					if got, err := in.c.DetectOn(ctx, dev, in.img); err != nil || !reflect.DeepEqual(got, want) {
						b.Fatalf("replayed DetectOn: %+v, %v; recorded %+v", got, err, want)
					}
				}
			})
		}
	}
}

// replayDevice records the results of a device's calls (Load, every Surface pass, the optional ones included)
// while recording, then answers the same calls, in the same order, with copies of them.
type replayDevice struct {
	dev       accel.Device
	recording bool
	results   []any
	next      int
}

// call returns f's result while recording (and keeps it), else the next recorded result.
func (d *replayDevice) call(f func() (any, error)) (any, error) {
	if d.recording {
		v, err := f()
		if err != nil {
			return nil, err
		}
		d.results = append(d.results, v)
		return v, nil
	}
	if d.next == len(d.results) {
		return nil, errors.New("replay: more calls than recorded")
	}
	d.next++
	return d.results[d.next-1], nil
}

func (d *replayDevice) Load(ctx context.Context, in accel.Image) (accel.Surface, error) {
	s, err := d.call(func() (any, error) { return d.dev.Load(ctx, in) })
	if err != nil {
		return nil, err
	}
	rs := &replaySurface{Surface: s.(accel.Surface), d: d}
	if _, ok := rs.Surface.(accel.BlockScorer); ok {
		return replayPasses{rs}, nil
	}
	return rs, nil
}

// replaySurface replays the Surface calls; replayPasses adds both optional passes, offered when the recorded
// device's surface offers them.
type replaySurface struct {
	accel.Surface
	d *replayDevice
}

type replayPasses struct{ *replaySurface }

func (s *replaySurface) Analyse(ctx context.Context, gain float32, levels int) error {
	_, err := s.d.call(func() (any, error) { return nil, s.Surface.Analyse(ctx, gain, levels) })
	return err
}

func (s *replaySurface) Grid(ctx context.Context, p *accel.GridPlan, cells bool) (*accel.GridResult, error) {
	v, err := s.d.call(func() (any, error) { return s.Surface.Grid(ctx, p, cells) })
	if err != nil {
		return nil, err
	}
	r := v.(*accel.GridResult)
	return &accel.GridResult{Acc: slices.Clone(r.Acc), Val: slices.Clone(r.Val), OK: slices.Clone(r.OK)}, nil
}

func (s *replaySurface) PilotPeaks(ctx context.Context, p *accel.PilotPlan, norm float64) ([8]accel.PilotPeak, error) {
	v, err := s.d.call(func() (any, error) { return s.Surface.PilotPeaks(ctx, p, norm) })
	if err != nil {
		return [8]accel.PilotPeak{}, err
	}
	return v.([8]accel.PilotPeak), nil
}

func (s replayPasses) BlockScores(ctx context.Context, p *accel.PilotPlan, radius int) ([]float64, error) {
	v, err := s.d.call(func() (any, error) { return s.Surface.(accel.BlockScorer).BlockScores(ctx, p, radius) })
	if err != nil {
		return nil, err
	}
	return slices.Clone(v.([]float64)), nil
}

func (s replayPasses) ConvDecode(ctx context.Context, p accel.ConvPlan, llr []float64) ([]float64, error) {
	v, err := s.d.call(func() (any, error) { return s.Surface.(accel.ConvDecoder).ConvDecode(ctx, p, llr) })
	if err != nil {
		return nil, err
	}
	return slices.Clone(v.([]float64)), nil
}
