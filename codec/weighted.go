package codec

// Pilot-weighted folding (maximum-ratio combining over regions of the image). fold gives every waxel the same
// weight, which is right when the mark survives evenly. After JPEG on flat artwork it does not: the coarse layer
// survives only in the blocks whose fill sits near a boundary of JPEG's DC quantiser (where the chip's block-mean
// change crosses it), and those are patches, not the whole image; elsewhere the whitened waxels are
// quantisation noise. weightedFold measures, per block of weightBlock² waxels, the mark amplitude μ (the pilot
// correlation per pilot chip) and the noise power, over the surrounding (2·weightReach+1)² blocks, and weights
// the block's waxels by μ/σ² (0 where μ ≤ 0): the blocks that carry the mark count, the others hardly do.
//
// The weights come from the pilot chips only, so on an unmarked image the data chips' correlations stay
// independent of them and the decoded word stays arbitrary: the false-positive bound counts decodes and is
// unchanged by how the soft word was made (docs/codec.md section 5). The pilot z-score of the weighted fold is
// biased upward (the weights favour blocks where the pilot correlated by chance) and is not used for any
// decision.
//
// Measured (bench/README.md, issue 11 sixth pass): on flat art after JPEG it raised the codeword correlation of
// a patchy coarse layer by up to 1.7×, while on photos, where the fine layer survives evenly in the texture,
// the noisy per-block weights cost 5-20%; so only the coarse hypothesis uses it.
const (
	weightBlock = 16 // waxels per block side
	weightReach = 1  // blocks of smoothing on each side
)

// weightedFold folds the whitened grid g (sampled under a map aligned to the tile, so that waxel q of the grid
// is tile waxel q mod tileSide) with per-block pilot weights; it returns nil when no block carries a mark.
func (l *layout) weightedFold(g waxelGrid) []float64 {
	if g.w == 0 {
		return nil
	}
	bx0, by0 := floorDiv(g.qx0, weightBlock), floorDiv(g.qy0, weightBlock)
	bw := floorDiv(g.qx0+g.w-1, weightBlock) - bx0 + 1
	bh := floorDiv(g.qy0+g.h-1, weightBlock) - by0 + 1
	cp := make([]float64, bw*bh) // pilot correlation
	pw := make([]float64, bw*bh) // power of all waxels
	np := make([]float64, bw*bh) // pilot chips
	nv := make([]float64, bw*bh) // valid waxels
	for j := range g.h {
		qy := g.qy0 + j
		prow := l.pilot[mod(qy, tileSide)*tileSide:][:tileSide]
		brow := (floorDiv(qy, weightBlock) - by0) * bw
		for i := range g.w {
			k := j*g.w + i
			if !g.ok[k] {
				continue
			}
			qx := g.qx0 + i
			b := brow + floorDiv(qx, weightBlock) - bx0
			v := float64(g.val[k])
			pw[b] += v * v
			nv[b]++
			if p := prow[mod(qx, tileSide)]; p != 0 {
				cp[b] += float64(p) * v
				np[b]++
			}
		}
	}
	w := make([]float64, bw*bh)
	any := false
	for by := range bh {
		for bx := range bw {
			var scp, spw, snp, snv float64
			for y := max(0, by-weightReach); y <= min(bh-1, by+weightReach); y++ {
				for x := max(0, bx-weightReach); x <= min(bw-1, bx+weightReach); x++ {
					scp += cp[y*bw+x]
					spw += pw[y*bw+x]
					snp += np[y*bw+x]
					snv += nv[y*bw+x]
				}
			}
			// Fewer than 16 pilot chips (a sliver at the border) estimate nothing.
			if snp < 16 || spw <= 0 {
				continue
			}
			if mu := scp / snp; mu > 0 {
				w[by*bw+bx] = mu / (spw / snv)
				any = true
			}
		}
	}
	if !any {
		return nil
	}
	acc := make([]float64, tileWaxels)
	for j := range g.h {
		qy := g.qy0 + j
		brow := (floorDiv(qy, weightBlock) - by0) * bw
		ty := mod(qy, tileSide) * tileSide
		for i := range g.w {
			k := j*g.w + i
			if g.ok[k] {
				qx := g.qx0 + i
				acc[ty+mod(qx, tileSide)] += w[brow+floorDiv(qx, weightBlock)-bx0] * float64(g.val[k])
			}
		}
	}
	return acc
}

// floorDiv is a/b rounded toward minus infinity (b > 0).
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
