package cudacodec

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"filigrane/codec/pardeflate"
)

// TestDeflateKernelsOnTheHost compiles the deflate kernels' CUDA C as host C++ (testdata/cudahost.h stands in
// for the CUDA qualifiers; a launch is a loop over the thread blocks) and runs them on rows of every kind the
// format meets: their histograms, Adler-32 parts and stream must be pardeflate's, byte for byte. So a machine
// without a GPU checks that the kernels are the Go reference's transcription (TestDeflatePNGMatchesPardeflate
// checks the same on a GPU). It needs a C++ compiler at test time only.
func TestDeflateKernelsOnTheHost(t *testing.T) {
	cxx, err := exec.LookPath("c++")
	if err != nil {
		t.Skipf("no C++ compiler to run the kernels on the host: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "codec.cu"), []byte(kernelSource+deflateSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "deflatehost")
	src, _ := filepath.Abs(filepath.Join("testdata", "deflatehost.cpp"))
	inc, _ := filepath.Abs("testdata")
	cmd := exec.Command(cxx, "-std=c++17", "-O1", "-I", inc, "-I", dir, "-o", bin, src)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling the kernels as C++: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	noisyRows := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			switch {
			case i < n/3:
				b[i] = byte(rng.IntN(9) - 4) // a marked photo's filtered rows
			case i < 2*n/3:
				b[i] = byte((i / 700) % 3) // flat artwork: long matches
			default:
				b[i] = byte(rng.Uint32()) // noise: literal blocks
			}
		}
		return b
	}
	for name, rows := range map[string][]byte{
		"mixed-1M":   noisyRows(1_000_003),
		"one-block":  noisyRows(pardeflate.SegmentSize * pardeflate.BlockSegments),
		"short":      noisyRows(37),
		"one-byte":   {9},
		"zeros-200k": make([]byte, 200_000),
	} {
		t.Run(name, func(t *testing.T) {
			work := t.TempDir()
			if err := os.WriteFile(filepath.Join(work, "rows"), rows, 0o644); err != nil {
				t.Fatal(err)
			}
			// First pass: the histograms, from which the host's plans are made as DeflatePNG makes them.
			run := func(size int, encode string) {
				t.Helper()
				c := exec.Command(bin, strconv.Itoa(size), encode)
				c.Dir = work
				if out, err := c.CombinedOutput(); err != nil {
					t.Fatalf("kernels on the host: %v\n%s", err, out)
				}
			}
			run(0, "0")
			raw, err := os.ReadFile(filepath.Join(work, "hist"))
			if err != nil {
				t.Fatal(err)
			}
			words := make([]uint32, len(raw)/4)
			for i := range words {
				words[i] = binary.LittleEndian.Uint32(raw[4*i:])
			}
			nb := pardeflate.Blocks(len(rows))
			hists, parts := words[:nb*pardeflate.BlockHistWords], words[nb*pardeflate.BlockHistWords:]
			plans, size, err := pardeflate.Plans(hists, len(rows))
			if err != nil {
				t.Fatal(err)
			}
			var pw []uint32
			for i := range plans {
				pw = plans[i].Words(pw)
			}
			var planBytes []byte
			for _, w := range pw {
				planBytes = binary.LittleEndian.AppendUint32(planBytes, w)
			}
			if err := os.WriteFile(filepath.Join(work, "plans"), planBytes, 0o644); err != nil {
				t.Fatal(err)
			}
			run(size, "1")
			out, err := os.ReadFile(filepath.Join(work, "out"))
			if err != nil {
				t.Fatal(err)
			}
			z := append(append([]byte{}, pardeflate.ZlibHeader...), out...)
			z = pardeflate.AppendTrailer(z, pardeflate.CombineAdler(parts, len(rows)))
			if want := pardeflate.Compress(rows); !bytes.Equal(z, want) {
				t.Fatalf("the kernels' stream (%d bytes) is not pardeflate.Compress's (%d bytes)", len(z), len(want))
			}
		})
	}
}

// TestDeflateCapacityHoldsIncompressibleRows: the device's output buffer holds the stream of rows that do not
// compress at all (random bytes: every block coded as literals), so DeflatePNG's fallback to the host, for a
// stream over the capacity, is for a case no input reaches.
func TestDeflateCapacityHoldsIncompressibleRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{1, 100, pardeflate.SegmentSize + 1, 3*pardeflate.SegmentSize*pardeflate.BlockSegments + 17} {
		rows := make([]byte, n)
		for i := range rows {
			rows[i] = byte(rng.Uint32())
		}
		z := pardeflate.Compress(rows)
		if data := len(z) - len(pardeflate.ZlibHeader) - 4; data > newDeflateLayout(n).outCap {
			t.Errorf("%d random bytes deflate to %d, over the device's capacity of %d", n, data, newDeflateLayout(n).outCap)
		}
	}
}
