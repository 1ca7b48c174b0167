package cudacodec

import (
	"context"
	"image"
	"math"
	"testing"

	"filigrane/codec"
	"filigrane/codec/accel"
)

// TestDetectOnDeviceMatchesCPU checks the detector's device passes on a GPU: for each grid the CPU's detections
// of detectImages sampled (codec.ProbeDetect), the device's Grid under the same plan must give the CPU's whitened
// grid and fold bit for bit; for each probed refinement step, the device's Grid under the same plan, then
// BlockScores at every radius it takes, must give the CPU's block scores (bit for bit where the whitened grids are equal, which they
// are when the kernels keep the codec's arithmetic), and ConvDecode the CPU's info LLRs bit for bit on every
// recorded soft word and on words of exact ties; and DetectOn, which uses both, must read what Detect reads.
func TestDetectOnDeviceMatchesCPU(t *testing.T) {
	d := openDevice(t)
	c := testCodec(t)
	ctx := context.Background()
	var probes []codec.DeviceProbe
	for _, tc := range detectImages(t, c) {
		t.Run(tc.name, func(t *testing.T) {
			want := c.Detect(tc.img)
			got, err := c.DetectOn(ctx, d, tc.img)
			if err != nil {
				t.Fatal(err)
			}
			if got.Watermarked != tc.marked || want.Watermarked != tc.marked ||
				(tc.marked && *got.WatermarkID != *want.WatermarkID) {
				t.Fatalf("DetectOn %+v, Detect %+v, want marked %v", got, want, tc.marked)
			}
			if math.Abs(got.Confidence-want.Confidence) > 1e-6 {
				t.Errorf("confidence on the device %.9f, on the CPU %.9f", got.Confidence, want.Confidence)
			}
			var soft float64
			for i := range got.Soft {
				soft = max(soft, math.Abs(got.Soft[i]-want.Soft[i]))
			}
			t.Logf("DetectOn reads %v with confidence %.6f (CPU %.6f); soft outputs differ by at most %g",
				got.Watermarked, got.Confidence, want.Confidence, soft)

			_, pr := c.ProbeDetect(tc.img)
			probes = append(probes, pr)
			m, ok := tc.img.(*image.NRGBA)
			if !ok {
				return // the probes' grids are checked on the NRGBA images
			}
			b := m.Bounds()
			s, err := d.Load(ctx, accel.Image{Pix: m.Pix, Width: b.Dx(), Height: b.Dy(), Stride: m.Stride,
				Format: accel.NRGBA8})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ds, ok := s.(detectSurface)
			if !ok {
				t.Fatalf("the detector passes did not load: %s", d.Compiler())
			}
			if err := s.Analyse(ctx, 0, len(ds.levels)); err != nil {
				t.Fatal(err)
			}
			for i, g := range pr.Grids {
				// Grid's kernels keep the codec's arithmetic (TestDetectKernelsOnTheHost runs them on the host):
				// the device's whitened grid and fold are the CPU's bit for bit, given the same pyramid.
				res, err := s.Grid(ctx, g.Plan, true)
				if err != nil {
					t.Fatal(err)
				}
				valDiff, accDiff := 0, 0
				for k := range res.Val {
					if res.OK[k] != g.OK[k] || math.Float32bits(res.Val[k]) != math.Float32bits(g.Val[k]) {
						valDiff++
					}
				}
				for k := range res.Acc {
					if math.Float64bits(res.Acc[k]) != math.Float64bits(g.Acc[k]) {
						accDiff++
					}
				}
				if valDiff > 0 || accDiff > 0 {
					t.Errorf("grid %d (%dx%d at level %d): the device's whitened grid differs from the CPU's at %d of %d "+
						"waxels, its fold at %d of %d sums", i, g.Plan.W, g.Plan.H, g.Plan.Level, valDiff, len(g.Val),
						accDiff, len(g.Acc))
				}
			}
			for i, bp := range pr.Blocks {
				res, err := s.Grid(ctx, bp.Plan, true)
				if err != nil {
					t.Fatal(err)
				}
				gridDiff := 0
				for k := range res.Val {
					if res.OK[k] != bp.OK[k] || math.Float32bits(res.Val[k]) != math.Float32bits(bp.Val[k]) {
						gridDiff++
					}
				}
				if gridDiff > 0 {
					// Another grid (a sampling or whitening kernel off by a last bit, which the kernels are meant
					// not to be): the scores can only be close; the grid's difference is reported but is not this
					// test's.
					t.Logf("probe %d: the device's whitened grid differs from the CPU's at %d of %d waxels", i, gridDiff,
						len(res.Val))
				}
				for r := 0; r <= maxScoreRadius; r++ {
					want := bp.Scores
					if r != bp.Radius {
						want = c.BlockScoresReference(bp.Plan, bp.Val, bp.OK, r)
					}
					scores, err := s.(accel.BlockScorer).BlockScores(ctx, pr.Pilot, r)
					if err != nil {
						t.Fatal(err)
					}
					if gridDiff == 0 {
						sameBits(t, scores, want)
						continue
					}
					if len(scores) != len(want) {
						t.Fatalf("probe %d, radius %d: %d scores, want %d", i, r, len(scores), len(want))
					}
					for k := range scores {
						if math.Abs(scores[k]-want[k]) > 1e-4*(1+math.Abs(want[k])) {
							t.Fatalf("probe %d, radius %d: score %d is %v on the device, %v on the CPU", i, r, k,
								scores[k], want[k])
						}
					}
				}
			}
		})
	}
	if len(probes) == 0 {
		return
	}
	s, err := d.Load(ctx, accel.Image{Pix: make([]byte, 64*64), Width: 64, Height: 64, Stride: 64, Format: accel.Gray8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, llr := range decodeWords(probes) {
		t.Run("decode/"+name, func(t *testing.T) {
			info, err := s.(accel.ConvDecoder).ConvDecode(ctx, probes[0].Conv, llr)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, info, codec.ConvDecodeReference(llr))
		})
	}
}
