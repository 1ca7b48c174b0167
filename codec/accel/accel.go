// Package accel is the contract between the watermark codec and a device that runs the codec's per-pixel passes
// (a GPU, package gpu/cudacodec). The codec keeps every decision on the host: the mask's finishing steps, the gain
// and its correction, informed amplitudes, synchronisation decisions, the refinement fit and the frame checks. A
// device only computes, over whole images, the values the plans below define, with the same floating-point
// operations in the same order as the codec's CPU code (float32 products and sums, no fused multiply-add), so
// that both paths give the same mark. Two passes are optional (BlockScorer, ConvDecoder): a device that offers
// them takes the refinement's block scores and the soft decoder's trellis off the host.
//
// It holds types only: no device code, no codec parameters beyond what a plan carries, no state.
package accel

import "context"

// Format is the pixel format of an Image.
type Format int

// Formats a device loads.
const (
	// NRGBA8 is 8-bit non-premultiplied R, G, B, A (image.NRGBA's layout); its luma is
	// 0.299·R + 0.587·G + 0.114·B in float32, products rounded before the sums, summed left to right.
	NRGBA8 Format = iota + 1
	// Gray8 is an 8-bit luma plane (image.Gray, or the Y plane of image.YCbCr); its luma is the byte.
	Gray8
)

// Image is host pixels to load: Height rows of Width pixels, Stride bytes apart.
type Image struct {
	Pix                   []byte
	Width, Height, Stride int
	Format                Format
}

// Device loads images; it is safe for concurrent use (each Surface has its own stream and memory).
type Device interface {
	Load(ctx context.Context, img Image) (Surface, error)
}

// Surface is one image on a device: its pixels, its luma, the analysis plane and pyramid that Grid samples, and
// (for NRGBA8 images) an output copy that Apply writes. A Surface is used by one goroutine at a time; Close
// releases its device memory.
type Surface interface {
	// BlockStats returns, per block of bs×bs pixels on a bw×bh grid (the last row and column of blocks may be
	// cut by the image border), the mean Sobel gradient magnitude of the luma and the mean luma. Within a block,
	// sums run over rows, then columns, in order; the magnitude is float32(√float64(gx²+gy²)).
	BlockStats(ctx context.Context, bs, bw, bh int) (act, bg []float32, err error)
	// SetMark uploads the plan that defines the mark d(x, y) at unit gain.
	SetMark(ctx context.Context, p *MarkPlan) error
	// MarkEnergy returns, for each image row y with y%4 == 0 in order, Σ_x d(x, y)² at gain 1 (float64 sums).
	MarkEnergy(ctx context.Context) ([]float64, error)
	// Analyse sets the plane that Grid samples, the luma (gain 0) or max(0, min(255, luma + d(x, y) at gain)),
	// and builds its pyramid of levels (each level the 2×2 box average of the one before, 0.25·(((a+b)+c)+d),
	// sizes rounded down).
	Analyse(ctx context.Context, gain float32, levels int) error
	// Grid samples the analysis pyramid at every waxel centre of g (bilinear, as the codec's plane.at), whitens
	// the samples (8-neighbour residual, divided by the root of the 9×9 mean square plus 0.25, clipped to ±3)
	// and folds them into a tile accumulator. With cells it also returns the whitened grid.
	Grid(ctx context.Context, g *GridPlan, cells bool) (*GridResult, error)
	// PilotPeaks correlates the accumulator of the last Grid call, under each dihedral transform d of p, with the
	// pilot at every cyclic shift s, S[d][s] = Σ_u pilot[u]·acc[Index[d][(u+s) mod tile]], and returns each
	// transform's peak of S[d][s]/norm (PilotPeak), so that only the peaks leave the device.
	PilotPeaks(ctx context.Context, p *PilotPlan, norm float64) ([8]PilotPeak, error)
	// Apply writes the loaded image plus d(x, y) at gain to the output copy (the same amount added to R, G and
	// B, rounded half up and clamped to 0..255; pixels with alpha 0 untouched) and returns Σ of the squared
	// error of each row, in order. NRGBA8 surfaces only.
	Apply(ctx context.Context, gain float32) (rowSSE []int64, err error)
	// Read copies the output image to dst (Height rows of Width·4 bytes, Stride apart). NRGBA8 surfaces only.
	Read(ctx context.Context, dst []byte, stride int) error
	Close() error
}

// MarkPlan defines the mark at unit gain: d(x, y) = fine(x, y) + coarse(x, y), where
//
//	t(x, y)    = bilinear(Tile; Row0/Row1/RowF[y], Col0/Col1/ColF[x])   (top = t0[a] + f·(t0[b]−t0[a]), ...)
//	p          = max(−Cap, min(Cap, gain·t))
//	fine(x, y) = p · bilinear(Mask; MRow0/MRow1/MRowF[y], MCol0/MCol1/MColF[x])
//
// and coarse the same with CoarseTile, the C* columns and rows and the Coarse amplitudes (added only on rows with
// CRowOn[y] and where the interpolated amplitude is not 0). Row offsets are indices of the row's first element.
type MarkPlan struct {
	Width, Height int
	Cap           float32
	TileSide      int

	Tile         []float32
	Col0, Col1   []int32
	ColF         []float32
	Row0, Row1   []int32
	RowF         []float32
	Mask         []float32
	MCol0, MCol1 []int32
	MColF        []float32
	MRow0, MRow1 []int32
	MRowF        []float32
	CoarseTile   []float32 // nil: no coarse layer
	Coarse       []float32
	CCol0, CCol1 []int32
	CColF        []float32
	CRow0, CRow1 []int32
	CRowF        []float32
	CRowOn       []uint8
}

// GridPlan is where Grid samples: pyramid Level, and the waxel rectangle QX0..QX0+W, QY0..QY0+H whose centres map
// to level pixel coordinates by (x, y) = M·(q + 0.5) + (TX, TY). Row j starts at (Start[2j], Start[2j+1]) (the
// codec computes them) and each next waxel of the row is (M[0], M[2]) further, added in float64 as the codec does.
type GridPlan struct {
	Level    int
	M        [4]float64
	TX, TY   float64
	Start    []float64
	QX0, QY0 int
	W, H     int
	TileSide int
}

// GridResult is what Grid returns: the folded accumulator (TileSide² float64 sums over the grid, row-major
// order of the grid) and, when asked, the whitened grid (Val, with OK false where a waxel has no full
// neighbourhood inside the image).
type GridResult struct {
	Acc []float64
	Val []float32
	OK  []bool
}

// PilotPeak is one dihedral transform's peak of the pilot correlation z[s] = S[s]/norm (PilotPeaks): Index is
// the first shift s, in index order, of the largest z (an element that is not strictly greater than an earlier
// one does not replace it), Z its value, and Left, Right, Up and Down z at the shifts beside it (x-1, x+1, y-1,
// y+1 with s = y·TileSide + x, cyclic in the tile). Each z is the float64 quotient S[s]/norm.
type PilotPeak struct {
	Index                    int
	Z, Left, Right, Up, Down float64
}

// PilotPlan is the pilot and the dihedral index tables for PilotPeaks: Pilot lists the tile indices u with a
// pilot chip and Sign its value; Index[d][v] is the accumulator index of waxel v under transform d.
type PilotPlan struct {
	TileSide int
	Pilot    []int32
	Sign     []float32
	Index    [8][]int32
}

// PNGDeflater is what a device may offer besides the codec's passes: the whole image data of a PNG of an NRGBA8
// image. Its filter pass is image/png's (per row the filter type with the least sum of absolute values, ties
// broken up, Paeth, none, sub, average; RGB rows when every pixel is opaque, alpha false, else RGBA), then the
// filtered rows are deflated in package codec/pardeflate's format (byte for byte pardeflate.Compress of the
// rows), returned as the zlib stream for imageio.EncodePNGZlib.
type PNGDeflater interface {
	DeflatePNG(ctx context.Context, img Image) (z []byte, alpha bool, err error)
}

// BlockScorer is what a Surface may offer besides the codec's passes: the refinement's block scores of the
// whitened grid its last Grid call left on the device, so that grid need not be downloaded. The grid's tile-sized
// blocks are those it touches, block (bx, by) holding waxels bx·TileSide..(bx+1)·TileSide-1 (and the same in y)
// of the plan's waxel coordinates, from ⌊QX0/TileSide⌋ to ⌊(QX0+W-1)/TileSide⌋ (and the same in y), in
// row-major order. For each block the result holds 2+(2r+1)² float64 values: the power Σ float64(v·v) and the
// count n of the waxels with OK set that lie at least r from every side of the grid; then, for each offset
// (dy, dx) of -r..r (dy outer, dx inner), Σ float64(p·Val[k + dy·W + dx]) over those of them whose tile position
// (q mod TileSide) has a pilot chip p ≠ 0 (p's dense form from the PilotPlan). Products are float32, rounded
// before the conversion; every sum runs over the block's waxels rows first, then columns, in order.
type BlockScorer interface {
	BlockScores(ctx context.Context, p *PilotPlan, radius int) ([]float64, error)
}

// ConvPlan is a tail-biting convolutional code of rate 1/3: constraint length K (2^(K-1) trellis states), the
// three generators (bit K-1 the newest input), and Wrap, the steps a circular decoder runs before and after the
// block.
type ConvPlan struct {
	K          int
	Generators [3]uint32
	Wrap       int
}

// ConvDecoder is what a Surface may offer besides the codec's passes: the circular max-log BCJR decoder of the
// codec (codec/convcode.go convDecode), in float64 with its operations in its order (maxima taken with strict
// comparisons in state order, so ties pick the same state), so that the info-bit LLRs are the codec's exactly for
// finite inputs. llr holds one LLR per coded bit (positive means 1, 3 per info bit); the result one per info bit.
type ConvDecoder interface {
	ConvDecode(ctx context.Context, p ConvPlan, llr []float64) ([]float64, error)
}

// HostMemory is what a Device may offer besides loading: host memory it transfers from directly (page-locked),
// for a decoder to write an image's pixels into. Load of an Image whose rows lie packed (Stride = Width times the
// format's bytes) in such memory sends them to the device as they are, without first copying them into its own
// staging memory (at 12 MP of NRGBA, 48 MB: a third of a detection's time on a fast device).
type HostMemory interface {
	// HostPixels returns n bytes of such memory, or nil when the device has none to give (the caller then uses
	// its own memory: Load works from either). The bytes are the caller's until it calls release, once, after
	// its last use of them (Load has finished reading them when it returns); they hold whatever was there before.
	HostPixels(n int) (pix []byte, release func())
}
