package codec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestVideoMarkerStrengthAndSteadiness marks the same frame repeatedly: each marked frame meets the PSNR target,
// the mark is identical from frame to frame on static content (no flicker), and the frame-averaged analysis
// decodes the id.
func TestVideoMarkerStrengthAndSteadiness(t *testing.T) {
	c := testCodec(t)
	const w, h = 641, 361 // odd on purpose
	img := naturalImage(w, h, 5)
	host := make([]uint8, w*h)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			host[y*w+x] = img.Pix[y*img.Stride+4*x+1]
		}
	}
	var id ID
	id[0], id[31] = 0x5a, 0xa5
	m, err := c.NewVideoMarker(id, w, h, EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var prev []uint8
	for f := 0; f < 4; f++ {
		frame := append([]uint8(nil), host...)
		if err := m.Mark8(frame, w); err != nil {
			t.Fatal(err)
		}
		var sse float64
		for i := range frame {
			d := float64(frame[i]) - float64(host[i])
			sse += d * d
		}
		if psnr := 10 * math.Log10(255*255/(sse/float64(w*h))); psnr < DefaultVideoPSNR-0.5 || psnr > DefaultVideoPSNR+1.5 {
			t.Errorf("frame %d: PSNR %.2f dB, target %.0f", f, psnr, DefaultVideoPSNR)
		}
		if prev != nil {
			for i := range frame {
				if frame[i] != prev[i] {
					t.Fatalf("frame %d differs from the previous one at pixel %d on static content", f, i)
				}
			}
		}
		prev = frame
	}
	pl := LumaPlane{Pix: make([]float32, w*h), Width: w, Height: h, Stride: w}
	for i, v := range prev {
		pl.Pix[i] = float32(v)
	}
	d := c.CombineFrames([]FrameSoft{c.AnalyzeVideoLuma(pl)})
	if !d.Watermarked || *d.WatermarkID != id.String() {
		t.Errorf("marked frame not decoded: %+v", d)
	}
	if _, err := c.NewVideoMarker(id, 300, 100, EmbedOptions{}); err == nil {
		t.Error("a 100-pixel short side was accepted")
	}
}

// TestVideoMarkerSmallFrameStrength: a frame whose short side is under 256 pixels (less than one tile of 2-pixel
// waxels) is marked by default exactly as at SmallVideoPSNR, a 256-pixel one as at DefaultVideoPSNR, and the small
// frame's default mark is the stronger one (3 dB asked; rounding and clipping at black and white leave 1.5 on this
// synthetic frame, 2.4 on a real 320x240 clip after x264).
func TestVideoMarkerSmallFrameStrength(t *testing.T) {
	c := testCodec(t)
	mark := func(w, h int, psnr float64) (frame []uint8, got float64) {
		img := naturalImage(w, h, 7)
		host := make([]uint8, w*h)
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				host[y*w+x] = img.Pix[y*img.Stride+4*x+1]
			}
		}
		m, err := c.NewVideoMarker(ID{3}, w, h, EmbedOptions{PSNR: psnr})
		if err != nil {
			t.Fatal(err)
		}
		frame = append([]uint8(nil), host...)
		if err := m.Mark8(frame, w); err != nil {
			t.Fatal(err)
		}
		var sse float64
		for i := range frame {
			d := float64(frame[i]) - float64(host[i])
			sse += d * d
		}
		return frame, 10 * math.Log10(255*255/(sse/float64(w*h)))
	}
	for _, tc := range []struct {
		w, h int
		want float64
	}{{320, 240, SmallVideoPSNR}, {352, 255, SmallVideoPSNR}, {341, 256, DefaultVideoPSNR}} {
		def, _ := mark(tc.w, tc.h, 0)
		if at, _ := mark(tc.w, tc.h, tc.want); !slices.Equal(def, at) {
			t.Errorf("%dx%d: the default mark is not the one at %g dB", tc.w, tc.h, tc.want)
		}
	}
	_, small := mark(320, 240, 0)
	_, normal := mark(320, 240, DefaultVideoPSNR)
	if d := normal - small; d < 1 || d > 4 {
		t.Errorf("320x240: default mark at %.2f dB, at DefaultVideoPSNR %.2f dB: want 1 to 4 dB stronger", small, normal)
	}
}

// BenchmarkVideoMarker720p is the Go stage's cost per 1280×720 frame (8-bit).
func BenchmarkVideoMarker720p(b *testing.B) {
	c := testCodec(b)
	img := naturalImage(1280, 720, 3)
	frame := make([]uint8, 1280*720)
	for i := range frame {
		frame[i] = img.Pix[4*i+1]
	}
	m, err := c.NewVideoMarker(ID{1}, 1280, 720, EmbedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Mark8(frame, 1280); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckVideoSize: the minimum is half a tile of the mark covered, min(w, 256)·min(h, 256) ≥ 32768, the same
// for a size and its transpose; NewVideoMarker refuses what CheckVideoSize refuses, with ErrTooSmall and a message
// naming the size and the minimum.
func TestCheckVideoSize(t *testing.T) {
	c := testCodec(t)
	for _, tc := range []struct {
		w, h int
		ok   bool
	}{
		{176, 144, false}, {192, 160, false}, {240, 136, false}, {181, 181, false}, {127, 1000, false},
		{256, 128, true}, {182, 182, true}, {320, 144, true}, {256, 144, true}, {1920, 1080, true},
	} {
		for _, s := range [][2]int{{tc.w, tc.h}, {tc.h, tc.w}} {
			err := CheckVideoSize(s[0], s[1])
			_, merr := c.NewVideoMarker(ID{1}, s[0], s[1], EmbedOptions{})
			if tc.ok {
				if err != nil || merr != nil {
					t.Errorf("%dx%d refused: %v, %v", s[0], s[1], err, merr)
				}
				continue
			}
			size := fmt.Sprintf("%dx%d", s[0], s[1])
			for _, e := range []error{err, merr} {
				if !errors.Is(e, ErrTooSmall) || !strings.Contains(e.Error(), size) || !strings.Contains(e.Error(), "32768") {
					t.Errorf("%s: %v, want ErrTooSmall naming the size and the minimum", size, e)
				}
			}
		}
	}
}
