package codec

import "math"

// jndPlane returns the per-pixel just-noticeable difference of a luma plane: luminance adaptation plus contrast
// masking combined NAMM-style (la + cm - 0.3·min(la, cm)), after Chou and Li (IEEE TCSVT 1995) in the form the
// research note (section 5.1) gives. bg is the 5×5 mean luminance; g is the larger absolute Sobel gradient,
// scaled so that a step edge of height h gives h. The running column sums keep the extra memory to a few rows,
// which matters for 40 MP images.
func jndPlane(y plane) plane {
	out := newPlane(y.w, y.h)
	lut := newJNDTables()
	const r = 2
	colSum := make([]float64, y.w)
	colCnt := 0
	top, bottom := 0, -1 // rows in colSum: [top, bottom]
	bg := make([]float32, y.w)
	for row := 0; row < y.h; row++ {
		for bottom < min(y.h-1, row+r) {
			bottom++
			src := y.pix[bottom*y.w : (bottom+1)*y.w]
			for x, v := range src {
				colSum[x] += float64(v)
			}
			colCnt++
		}
		for top < row-r {
			src := y.pix[top*y.w : (top+1)*y.w]
			for x, v := range src {
				colSum[x] -= float64(v)
			}
			top++
			colCnt--
		}
		// Horizontal running sum of the column sums.
		var s float64
		lo, hi := 0, -1
		for x := 0; x < y.w; x++ {
			for hi < min(y.w-1, x+r) {
				hi++
				s += colSum[hi]
			}
			for lo < x-r {
				s -= colSum[lo]
				lo++
			}
			bg[x] = float32(s / float64((hi-lo+1)*colCnt))
		}
		up := y.pix[max(row-1, 0)*y.w:]
		mid := y.pix[row*y.w:]
		down := y.pix[min(row+1, y.h-1)*y.w:]
		dst := out.pix[row*y.w : (row+1)*y.w]
		for x := range dst {
			xl, xr := max(x-1, 0), min(x+1, y.w-1)
			gx := (up[xr] - up[xl] + 2*(mid[xr]-mid[xl]) + down[xr] - down[xl]) / 4
			gy := (down[xl] - up[xl] + 2*(down[x]-up[x]) + down[xr] - up[xr]) / 4
			g := max(abs32(gx), abs32(gy))
			dst[x] = lut.jnd(bg[x], g)
		}
	}
	return out
}

// jndTables tabulate the two masking terms at 1/4-level steps: math.Pow per pixel would dominate the embed time
// of a 12 MP image.
type jndTables struct {
	la, cm [jndSteps + 1]float32
}

const (
	jndStepsPerLevel = 4
	jndSteps         = 255 * jndStepsPerLevel
)

func newJNDTables() *jndTables {
	t := &jndTables{}
	for i := range t.la {
		v := float32(i) / jndStepsPerLevel
		t.la[i] = luminanceMask(v)
		t.cm[i] = contrastMask(v)
	}
	return t
}

func (t *jndTables) jnd(bg, g float32) float32 {
	la := t.la[int(max(0, min(jndSteps, bg*jndStepsPerLevel+0.5)))]
	cm := t.cm[int(max(0, min(jndSteps, g*jndStepsPerLevel+0.5)))]
	return la + cm - 0.3*min(la, cm)
}

func luminanceMask(bg float32) float32 {
	if bg <= 127 {
		return 17*(1-float32(math.Sqrt(float64(bg)/127))) + 3
	}
	return 3.0/128*(bg-127) + 3
}

func contrastMask(g float32) float32 {
	g2 := float64(g) * float64(g)
	return float32(0.117 * 16 * math.Pow(float64(g), 2.4) / (g2 + 26*26))
}

// jnd is the direct formula, kept as the reference the tables are tested against.
func jnd(bg, g float32) float32 {
	var la float32
	if bg <= 127 {
		la = 17*(1-float32(math.Sqrt(float64(bg)/127))) + 3
	} else {
		la = 3.0/128*(bg-127) + 3
	}
	g2 := float64(g) * float64(g)
	cm := float32(0.117 * 16 * math.Pow(float64(g), 2.4) / (g2 + 26*26))
	return la + cm - 0.3*min(la, cm)
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}
