package imageio

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
	// interleave puts a tEXt chunk after each IDAT chunk but the last.
	interleave bool
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
		if p.interleave {
			file = pngChunk(file, "tEXt", []byte("a\x00b"))
		}
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

// BenchmarkDecodePNG12MP: a 12 MP photo-like RGB PNG (this package's encoder, as the service writes them, and
// image/png's default compression, as other software writes them) and a 12 MP RGBA one, decoded by DecodeBytes
// (the fast decoder, NRGBA) against image/png plus the conversion to NRGBA that DecodeBytes made before it, and
// by DecodeForAnalysis (image/png's layout) against image/png alone.
//
//	go test ./codec/imageio -run x -bench DecodePNG12MP -cpu 1 -benchtime 5x
func BenchmarkDecodePNG12MP(b *testing.B) {
	rgb := noisyPicture(4000, 3000, 12, 1)
	rgba := noisyPicture(4000, 3000, 12, 2)
	for i := 3; i < len(rgba.Pix); i += 4 {
		rgba.Pix[i] = byte(i / 4000)
	}
	files := map[string][]byte{
		"rgb-EncodePNG":  encodeWith(b, func(w *bytes.Buffer) error { return EncodePNG(w, rgb, Metadata{}) }),
		"rgb-image-png":  encodeWith(b, func(w *bytes.Buffer) error { return png.Encode(w, rgb) }),
		"rgba-EncodePNG": encodeWith(b, func(w *bytes.Buffer) error { return EncodePNG(w, rgba, Metadata{}) }),
	}
	for _, name := range []string{"rgb-EncodePNG", "rgb-image-png", "rgba-EncodePNG"} {
		data := files[name]
		b.Run(name+"/decode/fast", func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if _, err := DecodeBytes(data, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
		b.Run(name+"/decode/image-png", func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				m, err := png.Decode(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				toNRGBA(m, m.Bounds())
			}
			reportCPU(b, cpu)
		})
		b.Run(name+"/analysis/fast", func(b *testing.B) {
			buf := make([]byte, 4*4000*3000)
			alloc := func(n int) []byte { return buf }
			cpu := cpuTime()
			for b.Loop() {
				if _, _, err := DecodeForAnalysisInto(context.Background(), data, Limits{}, alloc); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
		b.Run(name+"/analysis/image-png", func(b *testing.B) {
			cpu := cpuTime()
			for b.Loop() {
				if _, err := png.Decode(bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// TestFastPNGRefusesWhatImagePNGRefuses: corrupt files (bad CRCs, truncation, too little or too much image
// data, bad filter types, chunks out of order, a bad zlib checksum) are refused with ErrCorrupt, as image/png
// refuses them, and through DecodeBytes and DecodeForAnalysis with the class image/png's error gets; files with
// oddities image/png accepts (bytes after IEND, chunks after the stream) are decoded.
func TestFastPNGRefusesWhatImagePNGRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 2))
	rgb := testPNG{w: 9, h: 6, ct: 2, filter: func(y int) byte { return byte(y % 5) }, split: []int{20, 0, 15}}
	raw := rgb.randomRaw(rng)
	good := rgb.encode(t, raw)
	pal := testPNG{w: 7, h: 5, ct: 3, plte: make([]byte, 3*4), trns: []byte{0, 128}}
	palRaw := pal.randomRaw(rng)
	rgbaRaw := make([]byte, 4*len(palRaw))
	with := func(p testPNG, change func(*testPNG)) testPNG { change(&p); return p }
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 0x40; return c }
	idat := bytes.Index(good, []byte("IDAT"))
	iend := bytes.Index(good, []byte("IEND"))
	for _, tc := range []struct {
		name string
		data []byte
		want fastPNGVerdict
	}{
		{"good", good, pngDecoded},
		{"bytes after IEND", append(bytes.Clone(good), "trailing junk"...), pngDecoded},
		{"bad CRC in IDAT data", flip(good, idat+6), pngRefused},
		{"bad CRC of IEND", flip(good, iend+5), pngRefused},
		{"truncated in IDAT", good[:idat+10], pngRefused},
		{"truncated before IEND", good[:iend-4], pngRefused},
		{"truncated in IEND's CRC", good[:len(good)-2], pngRefused},
		{"a row missing", rgb.encodeRows(t, raw, func(rows []byte) []byte { return rows[:len(rows)-28] }), pngRefused},
		{"a byte missing", rgb.encodeRows(t, raw, func(rows []byte) []byte { return rows[:len(rows)-1] }), pngRefused},
		{"a byte too many", rgb.encodeRows(t, raw, func(rows []byte) []byte { return append(rows, 0) }), pngRefused},
		{"filter type 5", rgb.encodeRows(t, raw, func(rows []byte) []byte { rows[28*3] = 5; return rows }), pngRefused},
		{"bad zlib checksum", badAdler(t, with(rgb, func(p *testPNG) { p.split = nil }).encode(t, raw)), pngRefused},
		{"no IDAT", with(rgb, func(p *testPNG) { p.split = nil }).withoutIDAT(t, raw), pngRefused},
		{"no PLTE", with(pal, func(p *testPNG) { p.plte, p.trns = nil, nil }).encode(t, palRaw), pngRefused},
		{"PLTE in a grey file", with(pal, func(p *testPNG) { p.ct, p.trns = 0, nil }).encode(t, palRaw), pngRefused},
		{"tRNS longer than 256", with(pal, func(p *testPNG) { p.trns = make([]byte, 257) }).encode(t, palRaw), pngRefused},
		{"tRNS of RGBA", with(pal, func(p *testPNG) { p.ct, p.plte, p.trns = 6, nil, make([]byte, 6) }).encode(t, rgbaRaw), pngRefused},
		{"tRNS of 4 bytes for grey", with(rgb, func(p *testPNG) { p.ct, p.trns = 0, make([]byte, 4) }).encode(t, raw), pngRefused},
		{"PLTE after IDAT", with(pal, func(p *testPNG) { p.after = [][2]string{{"PLTE", "abc"}} }).encode(t, palRaw), pngRefused},
		{"second IHDR", with(rgb, func(p *testPNG) { p.before = [][2]string{{"IHDR", "0123456789abc"}} }).encode(t, raw), pngRefused},
		{"text inside the stream's chunks", with(rgb, func(p *testPNG) { p.split = []int{10}; p.interleave = true }).encode(t, raw), pngRefused},
		{"text after the stream's chunks", with(rgb, func(p *testPNG) { p.after = [][2]string{{"tEXt", "a\x00b"}, {"IDAT", "x"}} }).encode(t, raw), pngDecoded},
		{"palette tRNS longer than PLTE", with(pal, func(p *testPNG) { p.trns = make([]byte, 9) }).encode(t, palRaw), pngDecoded},
		{"garbage after the stream inside its IDAT", garbageAfterStream(t, good), pngFellBack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v := checkFastPNG(t, tc.data); v != tc.want {
				t.Fatalf("verdict %d, want %d", v, tc.want)
			}
			_, refErr := png.Decode(bytes.NewReader(tc.data))
			_, err := DecodeBytes(tc.data, Limits{})
			_, _, aerr := DecodeForAnalysis(context.Background(), tc.data, Limits{})
			if refErr == nil {
				if err != nil || aerr != nil {
					t.Fatalf("DecodeBytes: %v, DecodeForAnalysis: %v; image/png decodes it", err, aerr)
				}
				return
			}
			want := classify("png", "decoding", refErr)
			for _, e := range []error{err, aerr} {
				if !errors.Is(e, ErrCorrupt) || !errors.Is(want, ErrCorrupt) {
					t.Fatalf("got %v, image/png's error classifies as %v", e, want)
				}
			}
		})
	}
}

// encodeRows is encode with the filtered rows changed by edit before compression.
func (p testPNG) encodeRows(t testing.TB, raw []byte, edit func([]byte) []byte) []byte {
	p.edit = edit
	return p.encode(t, raw)
}

// withoutIDAT is the file of p with its IDAT chunks left out.
func (p testPNG) withoutIDAT(t testing.TB, raw []byte) []byte {
	file := p.encode(t, raw)
	i := bytes.Index(file, []byte("IDAT")) - 4
	n := int(binary.BigEndian.Uint32(file[i:]))
	return append(file[:i:i], file[i+12+n:]...)
}

// badAdler changes the zlib checksum at the end of a file's only IDAT chunk and fixes the chunk's CRC.
func badAdler(t testing.TB, file []byte) []byte {
	file = bytes.Clone(file)
	i := bytes.Index(file, []byte("IDAT")) - 4
	n := int(binary.BigEndian.Uint32(file[i:]))
	if bytes.Contains(file[i+12+n:], []byte("IDAT")) {
		t.Fatal("badAdler wants one IDAT chunk")
	}
	file[i+8+n-1] ^= 1
	binary.BigEndian.PutUint32(file[i+8+n:], crc32.ChecksumIEEE(file[i+4:i+8+n]))
	return file
}

// garbageAfterStream appends bytes to the data of a file's last IDAT chunk, after the zlib stream: image/png
// takes them when its read-ahead swallowed them, which the fast decoder leaves to it.
func garbageAfterStream(t testing.TB, file []byte) []byte {
	i := bytes.LastIndex(file, []byte("IDAT")) - 4
	n := int(binary.BigEndian.Uint32(file[i:]))
	body := append(bytes.Clone(file[i+8:i+8+n]), "garbage"...)
	out := pngChunk(bytes.Clone(file[:i]), "IDAT", body)
	return append(out, file[i+12+n:]...)
}

// TestDecodeForAnalysisIntoUsesTheAllocatorsMemory: the image's pixels are the allocator's slice for every layout
// the fast decoder makes; a short slice or a nil allocator means memory of the decoder's own; a file refused at
// the header never calls the allocator; an interlaced file (image/png's) does not use its memory.
func TestDecodeForAnalysisIntoUsesTheAllocatorsMemory(t *testing.T) {
	cases := fastPNGCases(t)
	pix := func(img image.Image) []byte {
		switch m := img.(type) {
		case *image.Gray:
			return m.Pix
		case *image.RGBA:
			return m.Pix
		case *image.NRGBA:
			return m.Pix
		case *image.Paletted:
			return m.Pix
		}
		t.Fatalf("unexpected %T", img)
		return nil
	}
	for _, name := range []string{"ct0/w13/plain", "ct0/w13/trns", "ct2/w17/plain", "ct2/w5/trns", "ct3/w8/trns", "ct4/w3/split", "ct6/w17/split"} {
		data := cases[name]
		var given []byte
		calls := 0
		alloc := func(n int) []byte {
			calls++
			given = make([]byte, n+5) // longer than asked: the image takes the first n bytes
			for i := range given {
				given[i] = 0xA5 // not zeroed memory, as a pool's is
			}
			return given
		}
		img, _, err := DecodeForAnalysisInto(context.Background(), data, Limits{}, alloc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := pix(img)
		if calls != 1 || len(p) == 0 || &p[0] != &given[0] || cap(p) != len(p) {
			t.Fatalf("%s: %T's Pix (len %d, cap %d) is not the allocator's memory (%d calls)", name, img, len(p), cap(p), calls)
		}
		ref, _ := png.Decode(bytes.NewReader(data))
		if !reflect.DeepEqual(img, ref) {
			t.Fatalf("%s: the image in the allocator's memory differs from image/png's", name)
		}
		short, _, err := DecodeForAnalysisInto(context.Background(), data, Limits{}, func(n int) []byte { return make([]byte, n-1) })
		if err != nil || !reflect.DeepEqual(short, ref) {
			t.Fatalf("%s: with a short slice: %v", name, err)
		}
	}
	calls := 0
	count := func(n int) []byte { calls++; return make([]byte, n) }
	if _, _, err := DecodeForAnalysisInto(context.Background(), cases["ct2/w17/plain"], Limits{MaxPixels: 10}, count); !errors.Is(err, ErrTooManyPixels) || calls != 0 {
		t.Fatalf("over the pixel limit: %v, %d allocator calls", err, calls)
	}
	interlaced := encodeInterlaced(t, cases["ct6/w17/plain"])
	var given []byte
	img, _, err := DecodeForAnalysisInto(context.Background(), interlaced, Limits{}, func(n int) []byte { given = make([]byte, n); return given })
	if err != nil {
		t.Fatal(err)
	}
	if m := img.(*image.NRGBA); given != nil && &m.Pix[0] == &given[0] {
		t.Fatal("image/png's image uses the allocator's memory")
	}
}

// encodeInterlaced rewrites a PNG as Adam7-interlaced with image/png's decoder and the stdlib zlib (no filter).
func encodeInterlaced(t testing.TB, file []byte) []byte {
	img, err := png.Decode(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	m := toNRGBA(img, img.Bounds())
	w, h := m.Rect.Dx(), m.Rect.Dy()
	var rows []byte
	for _, p := range []struct{ x0, y0, dx, dy int }{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		for y := p.y0; y < h; y += p.dy {
			if p.x0 >= w {
				break
			}
			rows = append(rows, 0)
			for x := p.x0; x < w; x += p.dx {
				rows = append(rows, m.Pix[m.PixOffset(x, y):m.PixOffset(x, y)+4]...)
			}
		}
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(rows)
	zw.Close()
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, 8, 6, 0, 0, 1)
	out := pngChunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr)
	out = pngChunk(out, "IDAT", z.Bytes())
	return pngChunk(out, "IEND", nil)
}

// TestFastPNGCancel: a cancelled context stops the fast decoder with the context's error.
func TestFastPNGCancel(t *testing.T) {
	data := fastPNGCases(t)["ct2/w17/plain"]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := decodePNGFast(ctx, data, jpegNRGBA, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if _, _, err := DecodeForAnalysis(ctx, data, Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("DecodeForAnalysis: got %v, want context.Canceled", err)
	}
}

// FuzzFastPNG compares the fast decoder with image/png on arbitrary bytes (seeded with the files it handles and
// corrupt ones): it never panics, decodes only what image/png decodes, to the same pixels, and refuses only
// what image/png refuses.
func FuzzFastPNG(f *testing.F) {
	for _, data := range fastPNGCases(f) {
		if len(data) < 4096 {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if f, err := sniff(data); err != nil || f.name != "png" {
			return
		}
		if _, cfg, err := checkAll(data, Limits{MaxPixels: 1 << 16}); err != nil || cfg.Width*cfg.Height > 1<<16 {
			return
		}
		checkFastPNG(t, data)
	})
}
