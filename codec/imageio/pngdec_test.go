package imageio

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"reflect"
	"testing"
)

// testPNG describes a PNG file written chunk by chunk, so that tests control what encoders never write: each
// row's filter, where the zlib stream is split into IDAT chunks, empty IDATs, chunks in odd places.
type testPNG struct {
	w, h, ct   int
	plte, trns []byte // nil: no chunk
	filter     func(y int) byte
	// split cuts the zlib stream into IDAT chunks of these sizes (the rest in a last one); empty: one chunk.
	// A zero is an empty IDAT chunk.
	split []int
	// before are chunks (type and data) written after IHDR; after, between the last IDAT and IEND.
	before, after [][2]string
	// edit, when set, changes the filtered rows (the inflated stream) before compression.
	edit func(rows []byte) []byte
}

// paethRef is the Paeth predictor as the PNG specification writes it (section 9.4).
func paethRef(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := iabs(p-int(a)), iabs(p-int(b)), iabs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

// encode writes the file of raw (the unfiltered rows, samples(ct)·w bytes each).
func (p testPNG) encode(t testing.TB, raw []byte) []byte {
	bpp := samples(p.ct)
	n := bpp * p.w
	var rows []byte
	prev := make([]byte, n)
	for y := 0; y < p.h; y++ {
		cur := raw[y*n : (y+1)*n]
		ft := byte(0)
		if p.filter != nil {
			ft = p.filter(y)
		}
		rows = append(rows, ft)
		for i, v := range cur {
			var a, c byte
			if i >= bpp {
				a, c = cur[i-bpp], prev[i-bpp]
			}
			b := prev[i]
			switch ft {
			case 1:
				v -= a
			case 2:
				v -= b
			case 3:
				v -= byte((int(a) + int(b)) / 2)
			case 4:
				v -= paethRef(a, b, c)
			}
			rows = append(rows, v)
		}
		prev = cur
	}
	if p.edit != nil {
		rows = p.edit(rows)
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(p.w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(p.h))
	ihdr = append(ihdr, 8, byte(p.ct), 0, 0, 0)
	file := pngChunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr)
	for _, c := range p.before {
		file = pngChunk(file, c[0], []byte(c[1]))
	}
	if p.plte != nil {
		file = pngChunk(file, "PLTE", p.plte)
	}
	if p.trns != nil {
		file = pngChunk(file, "tRNS", p.trns)
	}
	zs := z.Bytes()
	for _, k := range p.split {
		k = min(k, len(zs))
		file = pngChunk(file, "IDAT", zs[:k])
		zs = zs[k:]
	}
	file = pngChunk(file, "IDAT", zs)
	for _, c := range p.after {
		file = pngChunk(file, c[0], []byte(c[1]))
	}
	return pngChunk(file, "IEND", nil)
}

// randomRaw is h rows of random samples for p; palette indexes run a little past the palette, which image/png
// maps to opaque black.
func (p testPNG) randomRaw(rng *rand.Rand) []byte {
	raw := make([]byte, samples(p.ct)*p.w*p.h)
	for i := range raw {
		raw[i] = byte(rng.UintN(256))
		if p.ct == 3 {
			raw[i] = byte(rng.UintN(uint(len(p.plte)/3 + 3)))
		}
		if p.ct == 0 && i%5 == 0 {
			raw[i] = 7 // some pixels equal to the tRNS grey of the tests
		}
	}
	return raw
}

// fastPNGVerdict is what checkFastPNG found.
type fastPNGVerdict int

const (
	pngDecoded fastPNGVerdict = iota
	pngRefused
	pngFellBack
)

// checkFastPNG decodes data with the fast decoder in both layouts and with image/png, and fails t unless they
// agree: decoded means image/png decodes the same pixels (the same image type, bytes and palette in the native
// layout; toNRGBA's bytes in the NRGBA layout), refused means image/png refuses too. It returns the verdict.
func checkFastPNG(t *testing.T, data []byte) fastPNGVerdict {
	t.Helper()
	ref, refErr := png.Decode(bytes.NewReader(data))
	verdict := pngFellBack
	for _, out := range []jpegOut{jpegNative, jpegNRGBA} {
		got, err := decodePNGFast(context.Background(), data, out, nil)
		switch {
		case errors.Is(err, errPNGFallback):
			continue
		case err != nil:
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("fast decoder: %v, not ErrCorrupt: %x", err, data)
			}
			if refErr == nil {
				t.Fatalf("fast decoder refuses (%v) what image/png decodes: %x", err, data)
			}
			verdict = pngRefused
			continue
		case refErr != nil:
			t.Fatalf("fast decoder decodes what image/png refuses (%v): %x", refErr, data)
		}
		verdict = pngDecoded
		if out == jpegNRGBA {
			want := toNRGBA(ref, ref.Bounds())
			g, ok := got.(*image.NRGBA)
			if !ok || g.Rect != want.Rect || g.Stride != want.Stride || !bytes.Equal(g.Pix, want.Pix) {
				t.Fatalf("NRGBA layout: got %T %v, want image/png+toNRGBA's pixels: %x", got, got.Bounds(), data)
			}
			continue
		}
		if reflect.TypeOf(got) != reflect.TypeOf(ref) {
			t.Fatalf("native layout: got %T, image/png gives %T: %x", got, ref, data)
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("native layout: %T differs from image/png's: %x", got, data)
		}
	}
	return verdict
}

// fastPNGCases are generated files of every colour type the fast decoder handles, with every filter, odd widths,
// tRNS, short palettes, split and empty IDAT chunks and ancillary chunks.
func fastPNGCases(t testing.TB) map[string][]byte {
	rng := rand.New(rand.NewPCG(24, 1))
	cases := map[string][]byte{}
	plte := func(n int) []byte {
		b := make([]byte, 3*n)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	for _, ct := range []int{0, 2, 3, 4, 6} {
		for _, w := range []int{1, 2, 3, 5, 8, 13, 17} {
			h := 1 + w%5 + 4
			for _, variant := range []string{"plain", "trns", "split"} {
				p := testPNG{w: w, h: h, ct: ct, filter: func(y int) byte { return byte((y + w) % 5) }}
				if ct == 3 {
					p.plte = plte(1 + (w*37)%256)
				}
				switch variant {
				case "trns":
					switch ct {
					case 0:
						p.trns = []byte{1, 7} // image/png compares the low byte only
					case 2:
						p.trns = []byte{0, 9, 0, 200, 0, 3}
					case 3:
						p.trns = plte(min(256, len(p.plte)/3+w%4))[:min(256, len(p.plte)/3+w%4)]
					default:
						continue
					}
				case "split":
					p.split = []int{0, 1, 0, 7, 3}
					p.before = [][2]string{{"tEXt", "Comment\x00generated"}, {"zzZZ", "private"}}
					p.after = [][2]string{{"IDAT", ""}, {"IDAT", "ignored after the stream"}, {"tIME", "1234567"}}
				}
				raw := p.randomRaw(rng)
				if ct == 2 && variant == "trns" {
					copy(raw[3*(w/2):], []byte{9, 200, 3}) // a pixel of the transparent colour
				}
				cases[fmt.Sprintf("ct%d/w%d/%s", ct, w, variant)] = p.encode(t, raw)
			}
		}
	}
	// A photo-like RGB image from this package's encoder (its filter choice) and image/png's RGBA and grey.
	var b bytes.Buffer
	if err := EncodePNG(&b, noisyPicture(61, 23, 12, 1), Metadata{}); err != nil {
		t.Fatal(err)
	}
	cases["EncodePNG rgb"] = b.Bytes()
	src := pattern(29, 11)
	src.Pix[3] = 10
	cases["image/png rgba"] = encodeWith(t, func(w *bytes.Buffer) error { return png.Encode(w, src) })
	gray := image.NewGray(image.Rect(0, 0, 19, 7))
	for i := range gray.Pix {
		gray.Pix[i] = byte(i * 13)
	}
	cases["image/png gray"] = encodeWith(t, func(w *bytes.Buffer) error { return png.Encode(w, gray) })
	return cases
}

// TestFastPNGMatchesImagePNG: every generated file decodes with the fast decoder to image/png's pixels, in
// image/png's layout and in NRGBA.
func TestFastPNGMatchesImagePNG(t *testing.T) {
	for name, data := range fastPNGCases(t) {
		t.Run(name, func(t *testing.T) {
			if v := checkFastPNG(t, data); v != pngDecoded {
				t.Fatalf("verdict %d, want decoded", v)
			}
		})
	}
}
