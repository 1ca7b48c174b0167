// Package pngbench compares the PNG files of the two deflates the service writes: the CPU's (imageio.EncodePNG:
// Huffman coding alone, klauspost/compress level 1 or the standard library's BestSpeed, chosen from a sample)
// and the GPU's parallel stream (codec/pardeflate, byte for byte what gpu/cudacodec's kernels write), on
// marked corpus images. It runs on the CPU only: pardeflate.Compress is the GPU's output. Figures:
// bench/README.md, "GPU".
package pngbench

import (
	"bytes"
	"context"
	"image"
	"io"
	"os"
	"testing"

	"filigrane/bench/corpus"
	"filigrane/codec"
	"filigrane/codec/imageio"
	"filigrane/codec/imageio/imageiotest"
	"filigrane/codec/pardeflate"
)

// TestParallelDeflateSize marks every fourth corpus image of at least 0.25 MP and writes the 8-bit colour ones
// (what the GPU path deflates) both ways; the
// parallel stream's total must stay within 3% of EncodePNG's. `FILIGRANE_PNG_SIZE_BENCH=1 go test -run
// ParallelDeflateSize -v -timeout 30m ./bench/pngbench` (fetches the corpus on first use).
func TestParallelDeflateSize(t *testing.T) {
	if os.Getenv("FILIGRANE_PNG_SIZE_BENCH") != "1" {
		t.Skip("set FILIGRANE_PNG_SIZE_BENCH=1 to compare the PNG deflates on the corpus (minutes)")
	}
	ctx := context.Background()
	dir := corpus.DefaultCacheDir()
	if err := corpus.Fetch(ctx, dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	photos, err := corpus.Load(ctx, dir, 250_000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.New([]byte("pngbench-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	totals := map[string][2]int{}
	for i, p := range photos {
		if i%4 != 0 {
			continue
		}
		data, err := os.ReadFile(p.Path)
		if err != nil {
			t.Fatal(err)
		}
		pic, err := imageio.DecodeBytesContext(ctx, data, imageio.Limits{})
		if err != nil {
			continue
		}
		marked, _, err := c.Embed(pic.Image, codec.ID{1}, codec.EmbedOptions{})
		if err != nil {
			continue // too small to carry a mark
		}
		if _, ok := marked.(*image.NRGBA); !ok {
			continue // grey and 16-bit images are written by EncodePNG on every path
		}
		var file bytes.Buffer
		if err := imageio.EncodePNG(&file, marked, imageio.Metadata{}); err != nil {
			t.Fatal(err)
		}
		z, rows, err := imageiotest.PNGImageData(file.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		par := pardeflate.Compress(rows)
		kind := corpus.Kind(p.Name)
		tot := totals[kind]
		tot[0] += len(z)
		tot[1] += len(par)
		totals[kind] = tot
		t.Logf("%-70s %9d -> %9d (%+.1f%%)", p.Name, len(z), len(par), 100*(float64(len(par))/float64(len(z))-1))
	}
	var all [2]int
	for kind, tot := range totals {
		t.Logf("%s: EncodePNG %d bytes, parallel %d (%+.2f%%)", kind, tot[0], tot[1], 100*(float64(tot[1])/float64(tot[0])-1))
		all[0] += tot[0]
		all[1] += tot[1]
	}
	t.Logf("all: EncodePNG %d bytes, parallel %d (%+.2f%%)", all[0], all[1], 100*(float64(all[1])/float64(all[0])-1))
	if all[1] > all[0]*103/100 {
		t.Errorf("the parallel stream is %d bytes against EncodePNG's %d: over 3%% larger", all[1], all[0])
	}
}
