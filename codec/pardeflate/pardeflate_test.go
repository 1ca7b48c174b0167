package pardeflate

import (
	"bytes"
	"compress/zlib"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"testing"
)

func inflate(t *testing.T, z []byte) []byte {
	t.Helper()
	r, err := zlib.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatalf("zlib header: %v", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("inflate: %v", err)
	}
	return out
}

// inputs are the shapes a deflater meets: nothing, one byte, noise, zeros, long runs, short repeats, PNG-like
// rows (a gradient with noise, filtered by the previous row), and sizes either side of a segment and a block.
func inputs() map[string][]byte {
	rng := rand.New(rand.NewPCG(3, 4))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	rows := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			if i%1201 == 0 {
				b[i] = 2
				continue
			}
			b[i] = byte(rng.IntN(9) - 4)
		}
		return b
	}
	repeat := func(n int, pat string) []byte { return bytes.Repeat([]byte(pat), n/len(pat)+1)[:n] }
	in := map[string][]byte{
		"empty":       {},
		"one":         {7},
		"three":       {1, 2, 3},
		"noise-1k":    noise(1000),
		"noise-200k":  noise(200_000),
		"zeros-300k":  make([]byte, 300_000),
		"runs":        repeat(150_000, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"),
		"text":        repeat(100_000, "the quick brown fox jumps over the lazy dog; "),
		"rows-1M":     rows(1_000_000),
		"seg":         rows(SegmentSize),
		"seg+1":       rows(SegmentSize + 1),
		"block":       rows(SegmentSize * BlockSegments),
		"block+3":     rows(SegmentSize*BlockSegments + 3),
		"block-1":     noise(SegmentSize*BlockSegments - 1),
		"two-symbols": repeat(70_000, "\x00\x01\x01\x00\x01\x00\x00\x00\x01\x01\x01\x01\x00"),
	}
	return in
}

func TestCompressRoundTrips(t *testing.T) {
	for name, data := range inputs() {
		t.Run(name, func(t *testing.T) {
			z := Compress(data)
			if got := inflate(t, z); !bytes.Equal(got, data) {
				t.Fatalf("inflated %d bytes, want the %d put in", len(got), len(data))
			}
			// zlib.Reader checks the Adler-32 at the end; check it here too, against the standard library's.
			if got, want := z[len(z)-4:], adler32.Checksum(data); uint32(got[0])<<24|uint32(got[1])<<16|uint32(got[2])<<8|uint32(got[3]) != want {
				t.Fatalf("trailer %x, want %08x", got, want)
			}
		})
	}
}

// TestBlocksAreIndependent checks the format's promise: every block starts on a byte boundary at its planned
// offset, and the blocks before the last end with a sync flush (00 00 ff ff).
func TestBlocksAreIndependent(t *testing.T) {
	data := inputs()["rows-1M"]
	n := len(data)
	nseg := Segments(n)
	tokens := make([]Token, nseg*SegmentSize)
	counts := make([]uint32, nseg)
	hists := make([]uint32, Blocks(n)*BlockHistWords)
	table := make([]uint16, 1<<HashBits)
	for s := 0; s < nseg; s++ {
		b := s / BlockSegments
		counts[s] = uint32(Tokenize(data[s*SegmentSize:min(n, (s+1)*SegmentSize)], table, tokens[s*SegmentSize:], hists[b*BlockHistWords:(b+1)*BlockHistWords]))
	}
	plans, size, err := Plans(hists, n)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, size)
	// Encode the blocks in reverse order: none may depend on another's having been written.
	for b := len(plans) - 1; b >= 0; b-- {
		EncodeBlock(&plans[b], b, data, tokens, counts, out)
	}
	for b, p := range plans[:len(plans)-1] {
		if got := out[p.Offset+p.Size-4 : p.Offset+p.Size]; !bytes.Equal(got, []byte{0, 0, 0xff, 0xff}) {
			t.Fatalf("block %d ends % x, want a sync flush", b, got)
		}
	}
	z := append(append([]byte{}, ZlibHeader...), out...)
	z = AppendTrailer(z, adler32.Checksum(data))
	if got := inflate(t, z); !bytes.Equal(got, data) {
		t.Fatal("blocks encoded out of order do not inflate to the input")
	}
	if !bytes.Equal(z, Compress(data)) {
		t.Fatal("the stream depends on the order the blocks were encoded in")
	}
}

func TestCodeLengthsAreLimitedAndComplete(t *testing.T) {
	// Fibonacci counts make the deepest unlimited Huffman tree.
	f := make([]uint32, 40)
	a, b := uint32(1), uint32(1)
	for i := range f {
		f[i] = a
		a, b = b, a+b
	}
	for _, limit := range []int{7, 15} {
		lens := codeLengths(f, limit)
		kraft := 0.0
		for _, l := range lens {
			if l == 0 || int(l) > limit {
				t.Fatalf("limit %d: a length of %d", limit, l)
			}
			kraft += 1 / float64(uint(1)<<l)
		}
		if kraft != 1 {
			t.Fatalf("limit %d: Kraft sum %v, want a complete code", limit, kraft)
		}
	}
	if lens := codeLengths(make([]uint32, 30), 15); lens[0] != 1 || lens[1] != 1 {
		t.Fatalf("no symbols used: lengths %v, want two codes of one bit", lens[:4])
	}
}

// BenchmarkPlans is the host's share of a device's deflate: the codes and headers of a 12 MP image's blocks
// (550 blocks of PNG-like rows).
func BenchmarkPlans(b *testing.B) {
	data := inputs()["rows-1M"]
	n := len(data)
	nseg := Segments(n)
	tokens := make([]Token, nseg*SegmentSize)
	hists := make([]uint32, Blocks(n)*BlockHistWords)
	table := make([]uint16, 1<<HashBits)
	for s := 0; s < nseg; s++ {
		bl := s / BlockSegments
		Tokenize(data[s*SegmentSize:min(n, (s+1)*SegmentSize)], table, tokens[s*SegmentSize:], hists[bl*BlockHistWords:(bl+1)*BlockHistWords])
	}
	for b.Loop() {
		if _, _, err := Plans(hists, n); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(Blocks(n)), "µs/block")
}

// FuzzCompress: any input comes back from the standard library's inflater with a correct Adler-32.
func FuzzCompress(f *testing.F) {
	for _, in := range inputs() {
		if len(in) < 4096 { // the fuzzer grows and minimises its inputs: large seeds stall it
			f.Add(in)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got := inflate(t, Compress(data)); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes in, %d out", len(data), len(got))
		}
	})
}
