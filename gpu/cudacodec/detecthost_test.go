package cudacodec

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"filigrane/codec"
	"filigrane/codec/accel"
	"filigrane/internal/testimage"
)

// TestDetectKernelsOnTheHost compiles the detector kernels' CUDA C as host C++ (testdata/cudahost.h; a block
// whose kernel has barriers runs as fibers phase by phase, in ascending or in descending thread order) and runs
// them on the inputs of real detections, recorded by codec.ProbeDetect: a marked 1.1 MP image, a copy rotated by
// 6° (lattice estimation, then refinement) and a JPEG copy at quality 60; and by codec.ProbeNominal on the
// unmarked image (its nominal grid and soft word). Grid's kernels (sample_grid to fold_tile, in Grid's launch
// shapes) run on the marked detections' refinement grids, on the grids they sampled above level 0 and on a wide
// grid that spans several of the kernels' chunks (both thread orders); block_scores on every refinement grid (both thread orders on the rotated one); conv_decode and conv_output on the recorded soft
// words and on words full of exact ties (all zero, small integers); pilot_dihedral, pilot_sums and pilot_peaks on a synthetic tile. The whitened grids, folds, block scores and
// info LLRs must be the codec's bit for bit. So a machine without a GPU checks that the kernels are the Go
// reference's transcription (TestDetectOnDeviceMatchesCPU checks the same on a GPU). It needs a C++17 compiler at
// test time only, and costs ~2.5 CPU-s (~0.65 of them the compiler's, ~0.7 the grids').
func TestDetectKernelsOnTheHost(t *testing.T) {
	// Grid's launch shapes (gridGeometry) are the kernels' own.
	for name, v := range map[string]int{"GRID_THREADS": gridThreads, "BOXC_COLS": boxColsPerBlock,
		"BOXC_MAXR": boxColsMaxRadius} {
		if def := fmt.Sprintf("#define %s %d\n", name, v); !strings.Contains(kernelSource, def) {
			t.Fatalf("kernelSource lacks %q", def)
		}
	}
	cxx, err := exec.LookPath("c++")
	if err != nil {
		t.Skipf("no C++ compiler to run the kernels on the host: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "codec.cu"), []byte(kernelSource+detectSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "detecthost")
	src, _ := filepath.Abs(filepath.Join("testdata", "detecthost.cpp"))
	inc, _ := filepath.Abs("testdata")
	args := []string{"-std=c++17", "-O1", "-ffp-contract=off", "-I", inc, "-I", dir, "-o", bin, src}
	if runtime.GOARCH == "amd64" {
		// cudahost.h's fibers return into other stacks: no shadow stack (a compiler may enable one by default).
		args = append(args, "-fcf-protection=none")
	}
	cmd := exec.Command(cxx, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling the kernels as C++: %v\n%s", err, out)
	}
	run := func(t *testing.T, work, mode string) {
		t.Helper()
		// A kernel that loops for ever (an index that never reaches its bound) fails in minutes, not at the test
		// timeout; barriers that do not match end the harness with an error (hostBlockFibers).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, bin, mode)
		c.Dir = work
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("kernels on the host: %v\n%s", err, out)
		}
	}

	// runGrid runs Grid's kernels on the host on g's plan over the pyramid level l and compares their whitened
	// grid and fold with the codec's.
	runGrid := func(t *testing.T, l codec.ProbePlane, g codec.GridProbe, maxY int, modes ...string) {
		work := t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "plan"), gridHostInput(l, g.Plan, maxY), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, mode := range modes {
			run(t, work, mode)
			sameGrid(t, work, g)
		}
	}

	c := testCodec(t)
	var probes []codec.DeviceProbe
	// A grid wider than the kernels' chunks of a row (SAMPLE_CHUNK coordinates, BOXR_CHUNK values) and taller
	// than box_cols' stage (BOXC_ROWS rows), with the threads in ascending and in descending order: a barrier
	// missing between a write and a read shows in one of the two. Its launches have at most 5 block rows, so the
	// kernels launched a block row per grid row walk the rows with a stride, as on a grid taller than CUDA's
	// 65535 block rows.
	t.Run("grid/wide", func(t *testing.T) {
		pr := c.ProbeNominal(testimage.Regions(4200, 300, 9))
		if len(pr.Grids) == 0 {
			t.Fatal("no grid recorded")
		}
		g := pr.Grids[0]
		if g.Plan.W <= 2048 || g.Plan.H <= 128 {
			t.Fatalf("a %dx%d grid", g.Plan.W, g.Plan.H)
		}
		runGrid(t, pr.Pyramid[g.Plan.Level], g, 5, "grid", "grid-reverse")
	})
	for _, tc := range detectImages(t, c) {
		var pr codec.DeviceProbe
		if tc.marked {
			var det codec.Detection
			if det, pr = c.ProbeDetect(tc.img); !det.Watermarked {
				t.Fatalf("%s: not detected", tc.name)
			}
		} else {
			// The unmarked image's grid and word at the nominal geometry, without the search (which tries every
			// geometry: over half of this test's CPU time).
			pr = c.ProbeNominal(tc.img)
		}
		probes = append(probes, pr)
		for i, g := range pr.Grids {
			// A marked detection's last grid (its refinement's: a sub-waxel geometry, rotated on the rotated copy)
			// and the grids sampled above the pyramid's level 0; the wide grid above covers the nominal geometry.
			// Each costs ~0.1 CPU-s; the others add little (the kernels' arithmetic depends on the plan, not on the
			// image's content).
			if !(tc.marked && i == len(pr.Grids)-1) && g.Plan.Level == 0 {
				continue
			}
			t.Run(fmt.Sprintf("grid/%s/%d", tc.name, i), func(t *testing.T) {
				runGrid(t, pr.Pyramid[g.Plan.Level], g, maxGridY, "grid")
			})
		}
		for i, b := range pr.Blocks {
			// The radius the detection asked for, with the codec's recorded scores, and, on the rotated copy's
			// grid (partial tile blocks on every side), the other radii the kernel takes, with the codec's
			// reference scores of the same grid.
			for r := 0; r <= maxScoreRadius; r++ {
				if r != b.Radius && tc.name != "rotated-6deg" {
					continue
				}
				want := b.Scores
				if r != b.Radius {
					want = c.BlockScoresReference(b.Plan, b.Val, b.OK, r)
				}
				t.Run(fmt.Sprintf("scores/%s/%d-r%d", tc.name, i, r), func(t *testing.T) {
					work := t.TempDir()
					p := b.Plan
					nbx := floorDiv(p.QX0+p.W-1, p.TileSide) + 1 - floorDiv(p.QX0, p.TileSide)
					nby := floorDiv(p.QY0+p.H-1, p.TileSide) + 1 - floorDiv(p.QY0, p.TileSide)
					var in []byte
					for _, v := range []int{p.W, p.H, p.QX0, p.QY0, floorDiv(p.QX0, p.TileSide), floorDiv(p.QY0, p.TileSide),
						nbx, nby, p.TileSide, r} {
						in = binary.LittleEndian.AppendUint32(in, uint32(int32(v)))
					}
					in = appendFloat32s(in, b.Val)
					for _, ok := range b.OK {
						in = append(in, boolByte(ok))
					}
					in = appendFloat32s(in, densePilot(pr.Pilot))
					if err := os.WriteFile(filepath.Join(work, "grid"), in, 0o644); err != nil {
						t.Fatal(err)
					}
					modes := []string{"scores"}
					if tc.name == "rotated-6deg" { // partial tile blocks on every side
						modes = append(modes, "scores-reverse")
					}
					for _, mode := range modes {
						run(t, work, mode)
						sameBits(t, readFloat64s(t, filepath.Join(work, "scores")), want)
					}
				})
			}
		}
	}
	// The pilot search's sums (pilot_dihedral, then pilot_sums) and their peaks (pilot_peaks) on a tile whose side is not a power of two and a
	// pilot longer than the kernel's staged chunk (PILOT_CHUNK), against the direct correlation in the kernel's
	// order. The codec correlates through FFTs, so its sums differ in the last bits; the search's choice of shift
	// is checked on a GPU (TestDetectOnDeviceMatchesCPU).
	for _, accKind := range []string{"normal", "small-integers"} { // the second with ties between shifts everywhere
		t.Run("pilot/"+accKind, func(t *testing.T) {
			const side, np = 40, 1100
			n := side * side
			rng := rand.New(rand.NewPCG(5, 6))
			pilot := make([]int32, np)
			sign := make([]float32, np)
			for i, u := range rng.Perm(n)[:np] {
				pilot[i], sign[i] = int32(u), float32(2*rng.IntN(2)-1)
			}
			index := make([]int32, 8*n)
			for d := range 8 {
				for u, k := range rng.Perm(n) {
					index[d*n+u] = int32(k)
				}
			}
			acc := make([]float64, n)
			for i := range acc {
				if accKind == "normal" {
					acc[i] = rng.NormFloat64()
				} else {
					acc[i] = float64(rng.IntN(3) - 1)
				}
			}
			want := make([]float64, 8*n)
			for d := range 8 {
				for sh := range n {
					sx, sy := sh%side, sh/side
					var sum float64
					for p, u := range pilot {
						x, y := (int(u)%side+sx)%side, (int(u)/side+sy)%side
						sum += float64(sign[p]) * acc[index[d*n+y*side+x]]
					}
					want[d*n+sh] = sum
				}
			}
			in := binary.LittleEndian.AppendUint32(nil, side)
			in = binary.LittleEndian.AppendUint32(in, np)
			in = appendInt32s(in, pilot)
			in = appendFloat32s(in, sign)
			in = appendInt32s(in, index)
			in = append(in, bytesOf(acc)...)
			work := t.TempDir()
			if err := os.WriteFile(filepath.Join(work, "pilot"), in, 0o644); err != nil {
				t.Fatal(err)
			}
			var sums [8][]float64
			for d := range sums {
				sums[d] = want[d*n : (d+1)*n]
			}
			var wantPeaks []float64
			for _, p := range codec.PilotPeaksReference(sums, side, 3.7) { // detecthost's PILOT_TEST_NORM
				wantPeaks = append(wantPeaks, float64(p.Index), p.Z, p.Left, p.Right, p.Up, p.Down)
			}
			for _, mode := range []string{"pilot", "pilot-reverse"} {
				run(t, work, mode)
				sameBits(t, readFloat64s(t, filepath.Join(work, "sums")), want)
				sameBits(t, readFloat64s(t, filepath.Join(work, "peaks")), wantPeaks)
			}
		})
	}
	// Decodes: every recorded soft word, and words of exact ties.
	conv := probes[0].Conv
	words := decodeWords(probes)
	want := map[string][]float64{}
	for name, llr := range words {
		want[name] = codec.ConvDecodeReference(llr)
	}
	for name, llr := range words {
		t.Run("decode/"+name, func(t *testing.T) {
			work := t.TempDir()
			var in []byte
			for _, v := range []int{len(llr) / 3, conv.Wrap, conv.K, int(conv.Generators[0]), int(conv.Generators[1]),
				int(conv.Generators[2])} {
				in = binary.LittleEndian.AppendUint32(in, uint32(int32(v)))
			}
			for _, v := range llr {
				in = binary.LittleEndian.AppendUint64(in, math.Float64bits(v))
			}
			if err := os.WriteFile(filepath.Join(work, "llr"), in, 0o644); err != nil {
				t.Fatal(err)
			}
			// The block's threads in ascending order, then, on the short words (the same code), descending: a
			// missing barrier between a write and a read of two threads has the reader run first in one of the two.
			modes := []string{"decode", "decode-reverse"}
			if len(llr) > 3*shortWordBits {
				modes = modes[:1]
			}
			for _, mode := range modes {
				run(t, work, mode)
				sameBits(t, readFloat64s(t, filepath.Join(work, "info")), want[name])
			}
		})
	}
}

type detectImage struct {
	name   string
	img    image.Image
	marked bool
}

// detectImages are the detector kernels' test images: a marked 1.1 MP image, a copy rotated by 6° (lattice
// estimation, then refinement), a JPEG copy at quality 60 and the unmarked image.
func detectImages(t testing.TB, c *codec.Codec) []detectImage {
	img := testimage.Regions(1200, 900, 21)
	marked, _, err := c.Embed(img, codec.ID{4, 2}, codec.EmbedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, marked, &jpeg.Options{Quality: 60}); err != nil {
		t.Fatal(err)
	}
	jpg, err := jpeg.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return []detectImage{
		{"marked", marked, true},
		{"rotated-6deg", rotated(marked.(*image.NRGBA), 6), true},
		{"jpeg-60", jpg, true},
		{"unmarked", img, false},
	}
}

// shortWordBits and tieWordBits are the info bits of the short words decodeWords makes: the trellis runs the
// same code whatever a word's length n (only the circular index depends on it), so the host harness spends its
// time on one whole word and otherwise on short ones.
const shortWordBits, tieWordBits = 64, 16

// decodeWords are the soft words the decoder kernel is checked on: the marked image's first recorded word whole,
// the unmarked image's first cut to shortWordBits, one of zeros and one of small integers (exact ties between
// paths everywhere).
func decodeWords(probes []codec.DeviceProbe) map[string][]float64 {
	cut := func(llr []float64, bits int) []float64 { return llr[:min(len(llr), 3*bits)] }
	words := map[string][]float64{}
	for i, pr := range probes {
		for j, d := range pr.Decodes {
			name := fmt.Sprintf("probe%d-%d", i, j)
			switch {
			case i == 0 && j == 0:
				words[name] = d.LLR
			case i == len(probes)-1: // the unmarked image's: values of another spread
				words[fmt.Sprintf("%s-cut%d", name, shortWordBits)] = cut(d.LLR, shortWordBits)
			}
		}
	}
	zero := make([]float64, 3*tieWordBits)
	small := make([]float64, 3*tieWordBits)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range small {
		small[i] = float64(rng.IntN(5) - 2)
	}
	words["zero"], words["small-integers"] = zero, small
	return words
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func readFloat64s(t *testing.T, path string) []float64 {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float64, len(raw)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return v
}

// sameBits fails unless got and want are the same float64s bit for bit (so +0 and -0 differ too).
func sameBits(t *testing.T, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			if bad < 5 {
				t.Errorf("value %d: %v (%#x), want %v (%#x)", i, got[i], math.Float64bits(got[i]), want[i],
					math.Float64bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d values differ", bad, len(got))
	}
}

// rotated is img turned by deg degrees about its centre (bilinear, the uncovered corners black), as a
// photo straightened in an editor.
func rotated(img *image.NRGBA, deg float64) *image.NRGBA {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := image.NewNRGBA(b)
	sin, cos := math.Sincos(deg * math.Pi / 180)
	cx, cy := float64(w-1)/2, float64(h-1)/2
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			dx, dy := float64(x)-cx, float64(y)-cy
			sx, sy := cos*dx+sin*dy+cx, -sin*dx+cos*dy+cy
			x0, y0 := int(math.Floor(sx)), int(math.Floor(sy))
			o := out.PixOffset(x, y)
			if x0 < 0 || y0 < 0 || x0+1 >= w || y0+1 >= h {
				out.Pix[o+3] = 255
				continue
			}
			fx, fy := sx-float64(x0), sy-float64(y0)
			for k := 0; k < 4; k++ {
				p := func(xx, yy int) float64 { return float64(img.Pix[img.PixOffset(xx, yy)+k]) }
				top := p(x0, y0) + fx*(p(x0+1, y0)-p(x0, y0))
				bot := p(x0, y0+1) + fx*(p(x0+1, y0+1)-p(x0, y0+1))
				out.Pix[o+k] = uint8(math.Round(top + fy*(bot-top)))
			}
		}
	}
	return out
}

// gridHostInput is detecthost's "plan" file for Grid's kernels on plan p over the pyramid level l, launched
// with at most maxY block rows.
func gridHostInput(l codec.ProbePlane, p *accel.GridPlan, maxY int) []byte {
	var in []byte
	ints := []int{l.W, l.H, p.W, p.H, p.QX0, p.QY0, p.TileSide, whitenRadius}
	for _, sh := range gridGeometryRows(p.W, p.H, p.TileSide, maxY) {
		ints = append(ints, int(sh.grid.X), int(sh.grid.Y), int(sh.block.X))
	}
	for _, v := range ints {
		in = binary.LittleEndian.AppendUint32(in, uint32(int32(v)))
	}
	for _, v := range append([]float64{p.M[0], p.M[2]}, p.Start...) {
		in = binary.LittleEndian.AppendUint64(in, math.Float64bits(v))
	}
	return appendFloat32s(in, l.Pix)
}

// sameGrid fails unless detecthost's whitened grid and fold in work are the codec's (g) bit for bit.
func sameGrid(t *testing.T, work string, g codec.GridProbe) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(work, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	val, ok := read("wval"), read("wok")
	if len(val) != 4*len(g.Val) || len(ok) != len(g.OK) {
		t.Fatalf("%d value bytes and %d flags, want %d waxels", len(val), len(ok), len(g.Val))
	}
	bad := 0
	for k := range g.Val {
		got := binary.LittleEndian.Uint32(val[4*k:])
		if got != math.Float32bits(g.Val[k]) || ok[k] != boolByte(g.OK[k]) {
			if bad < 5 {
				t.Errorf("waxel %d (%d, %d): %v (%#x) ok %d, want %v (%#x) ok %v", k, k%g.Plan.W, k/g.Plan.W,
					math.Float32frombits(got), got, ok[k], g.Val[k], math.Float32bits(g.Val[k]), g.OK[k])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d waxels differ", bad, len(g.Val))
	}
	sameBits(t, readFloat64s(t, filepath.Join(work, "acc")), g.Acc)
}
