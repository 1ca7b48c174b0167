package cudacodec

// kernelSource is the CUDA C of the codec's per-pixel passes, compiled at run time by NVRTC with --fmad=false:
// each kernel does the float32 and float64 operations of the codec's Go code (package codec, files named in the
// comments) in the same order, so results agree bit for bit where the order of a sum is kept (everything but the
// float64 row sums of mark_energy, which the codec adds in another order: a last-bit difference in the gain at
// most). Work that the Go code does sequentially along a row or a column (the waxel sampling's coordinates, the box
// filter's running sums) stays sequential for the same reason, in one thread per row or column, while the rest of
// the block does the loads and the independent arithmetic around it (sample_grid, box_rows, box_cols).
// TestDetectKernelsOnTheHost runs the grid kernels as host C++ on real detections' grids and compares.
const kernelSource = `
typedef unsigned char u8;

extern "C" __global__ void luma_nrgba(const u8* pix, int w, int h, int stride, float* y)
{
	// luma.go lumaRow: lumaR*R + lumaG*G + lumaB*B in float32.
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= w) return;
	for (int row = blockIdx.y; row < h; row += gridDim.y) {
		const u8* p = pix + (size_t)row * stride + 4 * x;
		y[(size_t)row * w + x] = 0.299f * (float)p[0] + 0.587f * (float)p[1] + 0.114f * (float)p[2];
	}
}

extern "C" __global__ void luma_gray(const u8* pix, int w, int h, int stride, float* y)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= w) return;
	for (int row = blockIdx.y; row < h; row += gridDim.y) y[(size_t)row * w + x] = (float)pix[(size_t)row * stride + x];
}

extern "C" __global__ void copy_rows(const u8* src, u8* dst, int rowBytes, int h, int stride)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= rowBytes) return;
	for (int row = blockIdx.y; row < h; row += gridDim.y) dst[(size_t)row * stride + x] = src[(size_t)row * stride + x];
}

extern "C" __global__ void block_stats(const float* y, int w, int h, int bs, int bw, int bh, float* act, float* bg)
{
	// jnd.go blockStats: Sobel magnitude and luma summed over the block's rows, then columns.
	int k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= bw * bh) return;
	int bx = k % bw, by = k / bw;
	float a = 0.0f, s = 0.0f, n = 0.0f;
	int rowEnd = min(h, (by + 1) * bs), xEnd = min(w, (bx + 1) * bs);
	for (int row = by * bs; row < rowEnd; row++) {
		const float* up = y + (size_t)max(row - 1, 0) * w;
		const float* mid = y + (size_t)row * w;
		const float* down = y + (size_t)min(row + 1, h - 1) * w;
		for (int x = bx * bs; x < xEnd; x++) {
			int xl = max(x - 1, 0), xr = min(x + 1, w - 1);
			float gx = (up[xr] - up[xl] + 2.0f * (mid[xr] - mid[xl]) + down[xr] - down[xl]) / 8.0f;
			float gy = (down[xl] - up[xl] + 2.0f * (down[x] - up[x]) + down[xr] - up[xr]) / 8.0f;
			a += (float)sqrt((double)(gx * gx + gy * gy));
			s += mid[x];
			n += 1.0f;
		}
	}
	act[k] = a / n;
	bg[k] = s / n;
}

struct MarkPlan {
	const float* tile; const int* col0; const int* col1; const float* colf;
	const int* row0; const int* row1; const float* rowf;
	const float* mask; const int* mcol0; const int* mcol1; const float* mcolf;
	const int* mrow0; const int* mrow1; const float* mrowf;
	const float* ctile; const float* coarse; const int* ccol0; const int* ccol1; const float* ccolf;
	const int* crow0; const int* crow1; const float* crowf; const u8* crowon;
	float cap; int hasCoarse;
};

__device__ __forceinline__ float lerp2(const float* r0, const float* r1, int a, int b, float fx, float fy)
{
	float top = r0[a] + fx * (r0[b] - r0[a]);
	float bot = r1[a] + fx * (r1[b] - r1[a]);
	return top + fy * (bot - top);
}

// mark_at is embed.go renderer.row for one pixel.
__device__ __forceinline__ float mark_at(const MarkPlan* p, int x, int y, float gain)
{
	int a = p->col0[x], b = p->col1[x];
	float t = lerp2(p->tile + p->row0[y], p->tile + p->row1[y], a, b, p->colf[x], p->rowf[y]);
	float q = gain * t;
	q = fmaxf(-p->cap, fminf(p->cap, q));
	int ma = p->mcol0[x], mb = p->mcol1[x];
	float thr = lerp2(p->mask + p->mrow0[y], p->mask + p->mrow1[y], ma, mb, p->mcolf[x], p->mrowf[y]);
	float out = q * thr;
	if (p->hasCoarse && p->crowon[y]) {
		float c = lerp2(p->coarse + p->mrow0[y], p->coarse + p->mrow1[y], ma, mb, p->mcolf[x], p->mrowf[y]);
		if (c != 0.0f) {
			int ca = p->ccol0[x], cb = p->ccol1[x];
			// The still-image coarse layer is nearest-waxel: its plan weights ccolf/crowf are 0 or 1
			// (codec renderer.coarseRowGeom), and the same lerp picks one waxel as the CPU does.
			float ct = lerp2(p->ctile + p->crow0[y], p->ctile + p->crow1[y], ca, cb, p->ccolf[x], p->crowf[y]);
			float cq = gain * ct;
			cq = fmaxf(-p->cap, fminf(p->cap, cq));
			out += cq * c;
		}
	}
	return out;
}

extern "C" __global__ void mark_energy(const MarkPlan* p, int w, double* rowSums)
{
	// One block per row y = 4·blockIdx.x: Σ d² at gain 1 (embed.go renderer.energy).
	__shared__ double part[256];
	int y = 4 * blockIdx.x;
	double s = 0.0;
	for (int x = threadIdx.x; x < w; x += blockDim.x) {
		double v = (double)mark_at(p, x, y, 1.0f);
		s += v * v;
	}
	part[threadIdx.x] = s;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0) rowSums[blockIdx.x] = part[0];
}

extern "C" __global__ void mark_luma(const MarkPlan* p, const float* luma, float* out, int w, int h, float gain)
{
	// informed.go informedAmplitudes: max(0, min(255, luma + d)).
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= w) return;
	for (int y = blockIdx.y; y < h; y += gridDim.y) {
		size_t i = (size_t)y * w + x;
		out[i] = fmaxf(0.0f, fminf(255.0f, luma[i] + mark_at(p, x, y, gain)));
	}
}

extern "C" __global__ void apply_nrgba(const MarkPlan* p, const u8* src, u8* dst, int w, int stride, float gain, long long* rowSSE)
{
	// raster.go applyDelta8: one block per row.
	__shared__ long long part[256];
	int y = blockIdx.x;
	const u8* s = src + (size_t)y * stride;
	u8* d = dst + (size_t)y * stride;
	long long e2 = 0;
	for (int x = threadIdx.x; x < w; x += blockDim.x) {
		int i = 4 * x;
		if (s[i + 3] == 0) continue;
		float add = mark_at(p, x, y, gain);
		for (int k = 0; k < 3; k++) {
			float v = (float)s[i + k] + add;
			u8 o;
			if (v <= 0.0f) o = 0;
			else if (v >= 255.0f) o = 255;
			else o = (u8)(v + 0.5f);
			d[i + k] = o;
			long long e = (long long)o - (long long)s[i + k];
			e2 += e * e;
		}
	}
	part[threadIdx.x] = e2;
	__syncthreads();
	for (int k = blockDim.x / 2; k > 0; k >>= 1) {
		if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
		__syncthreads();
	}
	if (threadIdx.x == 0) rowSSE[y] = part[0];
}

extern "C" __global__ void half_plane(const float* src, int sw, float* dst, int dw, int dh)
{
	// plane.go half.
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= dw) return;
	for (int y = blockIdx.y; y < dh; y += gridDim.y) {
		const float* a = src + (size_t)(2 * y) * sw;
		const float* b = src + (size_t)(2 * y + 1) * sw;
		dst[(size_t)y * dw + x] = 0.25f * (a[2 * x] + a[2 * x + 1] + b[2 * x] + b[2 * x + 1]);
	}
}

// The grid kernels' shapes (surface.go gridGeometry launches them so): sample_grid and box_rows take one block of
// GRID_THREADS threads a row, box_cols one block of GRID_THREADS threads (more than a warp) a group of BOXC_COLS
// columns, staging BOXC_ROWS output rows at a time, with a radius of at most BOXC_MAXR.
#define GRID_THREADS 128
#define SAMPLE_CHUNK 1024
#define BOXR_CHUNK 2048
#define BOXC_COLS 16
#define BOXC_ROWS 128
#define BOXC_MAXR 8

extern "C" __global__ void sample_grid(const float* __restrict__ lp, int lw, int lh, const double* __restrict__ start,
	double m0, double m2, int gw, int gh, float* __restrict__ val, u8* __restrict__ ok)
{
	// grid.go sampleGrid, one thread block per grid row j. The Go code accumulates a row's coordinates (x += m0,
	// y += m2 from the row's start); a float64 sum in another order would round differently, so thread 0 keeps
	// that running sum, SAMPLE_CHUNK coordinates at a time into shared memory (two adds each, no memory reads),
	// and then every thread of the block samples the chunk's waxels (the loads, whose latency was the cost).
	__shared__ double cx[SAMPLE_CHUNK], cy[SAMPLE_CHUNK];
	int j = blockIdx.x;
	double x = start[2 * j], y = start[2 * j + 1];
	double xmax = (double)(lw - 1), ymax = (double)(lh - 1);
	for (int c0 = 0; c0 < gw; c0 += SAMPLE_CHUNK) {
		int n = min(SAMPLE_CHUNK, gw - c0);
		if (threadIdx.x == 0) {
			for (int i = 0; i < n; i++) {
				cx[i] = x;
				cy[i] = y;
				x += m0;
				y += m2;
			}
		}
		__syncthreads();
		for (int i = threadIdx.x; i < n; i += blockDim.x) {
			size_t k = (size_t)j * gw + c0 + i;
			double px = cx[i], py = cy[i];
			if (px < 0.0 || py < 0.0 || px > xmax || py > ymax) {
				val[k] = 0.0f;
				ok[k] = 0;
				continue;
			}
			int x0 = (int)px, y0 = (int)py;
			float fx = (float)(px - (double)x0), fy = (float)(py - (double)y0);
			int x1 = min(x0 + 1, lw - 1), y1 = min(y0 + 1, lh - 1);
			const float* r0 = lp + (size_t)y0 * lw;
			const float* r1 = lp + (size_t)y1 * lw;
			float top = r0[x0] + fx * (r0[x1] - r0[x0]);
			float bot = r1[x0] + fx * (r1[x1] - r1[x0]);
			val[k] = top + fy * (bot - top);
			ok[k] = 1;
		}
		__syncthreads(); // the chunk read before thread 0 writes the next
	}
}

extern "C" __global__ void whiten_residual(const float* val, const u8* ok, int gw, int gh, float* res, u8* rok,
	float* sq, float* cnt)
{
	// grid.go whiten, first loop: waxel minus the mean of its 8 neighbours.
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= gw) return;
	for (int j = blockIdx.y; j < gh; j += gridDim.y) {
		size_t k = (size_t)j * gw + i;
		res[k] = 0.0f;
		rok[k] = 0;
		sq[k] = 0.0f;
		cnt[k] = 0.0f;
		if (i < 1 || j < 1 || i >= gw - 1 || j >= gh - 1) continue;
		if (!(ok[k] && ok[k - 1] && ok[k + 1] && ok[k - gw] && ok[k + gw] && ok[k - gw - 1] && ok[k - gw + 1] &&
			ok[k + gw - 1] && ok[k + gw + 1])) continue;
		float n = val[k - 1] + val[k + 1] + val[k - gw] + val[k + gw] + val[k - gw - 1] + val[k - gw + 1] +
			val[k + gw - 1] + val[k + gw + 1];
		float r = val[k] - n / 8.0f;
		res[k] = r;
		rok[k] = 1;
		sq[k] = r * r;
		cnt[k] = 1.0f;
	}
}

extern "C" __global__ void box_rows(const float* __restrict__ in, float* __restrict__ out, double* __restrict__ prefix,
	int w, int h, int r)
{
	// plane.go boxLine, one thread block per row y. The float64 prefix sum is the Go code's, one add after the
	// other (a parallel scan would round differently): thread 0 runs it from a chunk of the row that the block
	// loads into shared memory, writing the row's prefix (w+1 values) to global memory; then every thread
	// computes outputs from it (the block's global writes before a barrier are visible to the block after it).
	__shared__ float row[BOXR_CHUNK];
	int y = blockIdx.x;
	const float* src = in + (size_t)y * w;
	float* dst = out + (size_t)y * w;
	double* pre = prefix + (size_t)y * (w + 1);
	double s = 0.0;
	if (threadIdx.x == 0) pre[0] = 0.0;
	for (int c0 = 0; c0 < w; c0 += BOXR_CHUNK) {
		int n = min(BOXR_CHUNK, w - c0);
		for (int i = threadIdx.x; i < n; i += blockDim.x) row[i] = src[c0 + i];
		__syncthreads();
		if (threadIdx.x == 0) {
			for (int i = 0; i < n; i++) {
				s += (double)row[i];
				pre[c0 + i + 1] = s;
			}
		}
		__syncthreads(); // the chunk summed before it is overwritten; the prefix written before it is read
	}
	double inv = 1.0 / (double)(2 * r + 1);
	for (int i = threadIdx.x; i < w; i += blockDim.x) {
		int lo = i - r, hi = i + r + 1;
		if (lo >= 0 && hi <= w) {
			dst[i] = (float)((pre[hi] - pre[lo]) * inv);
			continue;
		}
		lo = max(lo, 0);
		hi = min(hi, w);
		dst[i] = (float)((pre[hi] - pre[lo]) / (double)(hi - lo));
	}
}

// box_cols_stage loads into buf the rows of tmp that box_cols' columns x0.. need for output rows [y0, y0 +
// BOXC_ROWS): from y0 - r - 1 (the first row a step subtracts) to y0 + BOXC_ROWS + r (the last it adds), clipped
// to the plane; buf's row 0 is tmp's row max(0, y0 - r - 1). Threads t0, t0 + 1, ... of the block load.
__device__ __forceinline__ void box_cols_stage(const float* __restrict__ tmp, float (*buf)[BOXC_COLS], int w, int h,
	int r, int x0, int y0, int t0)
{
	int a = max(0, y0 - r - 1), b = min(h, y0 + BOXC_ROWS + r);
	int cols = min(BOXC_COLS, w - x0);
	for (int e = (int)threadIdx.x - t0; e < (b - a) * BOXC_COLS; e += (int)blockDim.x - t0) {
		int rr = e / BOXC_COLS, cc = e % BOXC_COLS;
		if (cc < cols) buf[rr][cc] = tmp[(size_t)(a + rr) * w + x0 + cc];
	}
}

extern "C" __global__ void box_cols(const float* __restrict__ tmp, float* __restrict__ out, int w, int h, int r)
{
	// plane.go boxBlur's vertical pass: thread c < BOXC_COLS of block b keeps column x = BOXC_COLS·b + c's float32
	// running sum, adding and subtracting rows in the Go code's order. The block stages the rows those sums read in
	// shared memory, BOXC_ROWS output rows at a time, double-buffered: while the first BOXC_COLS threads (in warp
	// 0) run the sums over one stage, the threads of the other warps load the next (r <= BOXC_MAXR).
	__shared__ float stage[2][BOXC_ROWS + 2 * BOXC_MAXR + 1][BOXC_COLS];
	int x0 = blockIdx.x * BOXC_COLS;
	int c = threadIdx.x;
	int x = x0 + c;
	float sum = 0.0f;
	int top = 0, bottom = -1;
	int stages = (h + BOXC_ROWS - 1) / BOXC_ROWS;
	box_cols_stage(tmp, stage[0], w, h, r, x0, 0, 0);
	__syncthreads();
	for (int st = 0; st < stages; st++) {
		int y0 = st * BOXC_ROWS;
		if (threadIdx.x >= 32) {
			if (st + 1 < stages) box_cols_stage(tmp, stage[(st + 1) & 1], w, h, r, x0, y0 + BOXC_ROWS, 32);
		} else if (c < BOXC_COLS && x < w) {
			float (*buf)[BOXC_COLS] = stage[st & 1];
			int a = max(0, y0 - r - 1);
			int y1 = min(h, y0 + BOXC_ROWS);
			// Rows ys..ye-1 are inside the column (their window has all 2r+1 rows): each adds one row and
			// subtracts one, the loop without branches so that its shared loads run ahead of the sum; the rows
			// before and after take the general loop. The operations, and their order, are the same.
			int ys = max(y0, r + 1), ye = max(ys, min(y1, h - r));
			float full = 1.0f / (float)(2 * r + 1);
			for (int y = y0; y < y1; y++) {
				if (y == ys && ys < ye) {
#pragma unroll 4
					for (; y < ye; y++) {
						sum += buf[y + r - a][c];
						sum -= buf[y - r - 1 - a][c];
						out[(size_t)y * w + x] = sum * full;
					}
					bottom = ye - 1 + r;
					top = ye - 1 - r;
					if (y == y1) break;
				}
				while (bottom < min(h - 1, y + r)) {
					bottom++;
					sum += buf[bottom - a][c];
				}
				while (top < y - r) {
					sum -= buf[top - a][c];
					top++;
				}
				float inv = 1.0f / (float)(bottom - top + 1);
				out[(size_t)y * w + x] = sum * inv;
			}
		}
		__syncthreads(); // this stage's sums done before its buffer is loaded again; the next stage loaded
	}
}

extern "C" __global__ void whiten_normalise(const float* res, const u8* rok, const float* msq, const float* mcnt,
	int n, float* val, u8* ok)
{
	// grid.go whiten, last loop.
	int k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= n) return;
	if (!rok[k]) {
		val[k] = 0.0f;
		ok[k] = 0;
		return;
	}
	float ms = msq[k] / fmaxf(mcnt[k], 1e-6f);
	float x = res[k] / (float)sqrt((double)ms + 0.25);
	val[k] = fmaxf(-3.0f, fminf(3.0f, x));
	ok[k] = 1;
}

extern "C" __global__ void fold_tile(const float* __restrict__ val, const u8* __restrict__ ok, int gw, int gh, int qx0,
	int qy0, int side, double* __restrict__ acc)
{
	// grid.go fold: one thread per tile waxel, adding its grid waxels in the Go code's order (rows, then columns).
	// The loop is branch-free, adding +0.0 where the Go code skips a waxel (as block_scores does: a sum that
	// starts at +0.0 never becomes -0.0, and s + 0.0 is s for every other s), so that the loads of successive
	// waxels need not wait for each other's flags.
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	if (t >= side * side) return;
	int tx = t % side, ty = t / side;
	int j0 = ((ty - qy0) % side + side) % side;
	int i0 = ((tx - qx0) % side + side) % side;
	double s = 0.0;
	for (int j = j0; j < gh; j += side) {
		const float* vrow = val + (size_t)j * gw;
		const u8* orow = ok + (size_t)j * gw;
		for (int i = i0; i < gw; i += side) {
			float v = vrow[i];
			s += orow[i] ? (double)v : 0.0;
		}
	}
	acc[t] = s;
}

extern "C" __global__ void pilot_dihedral(const double* acc, const int* index, int n, double* accd)
{
	// accd[d][u] = acc[Index[d][u]]: the accumulator under each dihedral transform, gathered once so that
	// pilot_sums reads it in order (a transposing transform's Index scatters a warp's reads over 32 lines).
	int u = blockIdx.x * blockDim.x + threadIdx.x;
	if (u >= n) return;
	size_t o = (size_t)blockIdx.y * n + u;
	accd[o] = acc[index[o]];
}

#define PILOT_CHUNK 1024

extern "C" __global__ void pilot_sums(const double* accd, const int* pilot, const float* sign, int np, int side,
	double* sums)
{
	// sync.go searchDihedral, as a direct cyclic correlation: sums[d][s] = Σ_p sign[p]·accd[d][pilot[p] + s] (tile
	// coordinates added modulo the side), over the pilot's chips in order. The block stages the chips' coordinates
	// and signs in shared memory, a chunk at a time, so the loop reads them once a block (a broadcast) and wraps
	// coordinates with a comparison: it divided by the side four times a chip before, most of its time.
	__shared__ int cx[PILOT_CHUNK], cy[PILOT_CHUNK];
	__shared__ float cs[PILOT_CHUNK];
	int s = blockIdx.x * blockDim.x + threadIdx.x;
	int d = blockIdx.y;
	int n = side * side;
	bool live = s < n;
	int sx = live ? s % side : 0, sy = live ? s / side : 0;
	const double* a = accd + (size_t)d * n;
	double t = 0.0;
	for (int p0 = 0; p0 < np; p0 += PILOT_CHUNK) {
		int m = min(PILOT_CHUNK, np - p0);
		__syncthreads(); // the last chunk read before it is overwritten
		for (int i = threadIdx.x; i < m; i += blockDim.x) {
			int u = pilot[p0 + i];
			cx[i] = u % side;
			cy[i] = u / side;
			cs[i] = sign[p0 + i];
		}
		__syncthreads();
		if (!live) continue;
		for (int i = 0; i < m; i++) {
			int y = cy[i] + sy, x = cx[i] + sx;
			if (y >= side) y -= side;
			if (x >= side) x -= side;
			t += (double)cs[i] * a[y * side + x];
		}
	}
	if (live) sums[(size_t)d * n + s] = t;
}

#define PEAK_THREADS 256

extern "C" __global__ void pilot_peaks(const double* sums, int side, double norm, double* out)
{
	// sync.go pilotPeaks, one block of PEAK_THREADS threads a transform d (blockIdx.x): z[s] = sums[d][s]/norm and
	// the first largest z in index order. Thread t scans its run of consecutive shifts in order (an element
	// replaces the run's best only when strictly greater), then the runs' bests are combined in order, adjacent
	// runs first, the left kept unless the right's is strictly greater: a tie (+0 and -0 included) keeps the
	// earlier shift, as the Go loop does. (The sums are finite: the accumulator's whitened values are clipped.)
	// out[6d..6d+5]: the index (as a double), z, then z at x-1, x+1, y-1 and y+1 of it (cyclic).
	__shared__ double bv[PEAK_THREADS];
	__shared__ int bi[PEAK_THREADS];
	int n = side * side, d = blockIdx.x, t = threadIdx.x;
	const double* z = sums + (size_t)d * n;
	int per = (n + PEAK_THREADS - 1) / PEAK_THREADS;
	int lo = t * per, hi = min(n, lo + per);
	int k = -1;
	double v = 0.0;
	for (int i = lo; i < hi; i++) {
		double c = z[i] / norm;
		if (k < 0 || c > v) {
			k = i;
			v = c;
		}
	}
	bv[t] = v;
	bi[t] = k;
	for (int st = 1; st < PEAK_THREADS; st <<= 1) {
		__syncthreads();
		if (t % (2 * st) == 0) {
			int k2 = bi[t + st];
			if (k2 >= 0 && (bi[t] < 0 || bv[t + st] > bv[t])) {
				bv[t] = bv[t + st];
				bi[t] = k2;
			}
		}
	}
	__syncthreads();
	if (t == 0) {
		k = bi[0];
		int kx = k % side, ky = k / side;
		int xl = kx == 0 ? side - 1 : kx - 1, xr = kx == side - 1 ? 0 : kx + 1;
		int yu = ky == 0 ? side - 1 : ky - 1, yd = ky == side - 1 ? 0 : ky + 1;
		double* o = out + 6 * d;
		o[0] = (double)k;
		o[1] = bv[0];
		o[2] = z[ky * side + xl] / norm;
		o[3] = z[ky * side + xr] / norm;
		o[4] = z[yu * side + kx] / norm;
		o[5] = z[yd * side + kx] / norm;
	}
}

extern "C" __global__ void opaque_check(const u8* pix, int w, int h, int stride, int* translucent)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	if (x >= w) return;
	for (int y = blockIdx.y; y < h; y += gridDim.y)
		if (pix[(size_t)y * stride + 4 * x + 3] != 255) *translucent = 1;
}

__device__ __forceinline__ int abs8(u8 d) { return d < 128 ? (int)d : 256 - (int)d; }

__device__ __forceinline__ u8 paeth(u8 a, u8 b, u8 c)
{
	// image/png's paeth: the predictor closest to a + b - c, ties to a, then b.
	int pc = (int)c;
	int pa = (int)b - pc;
	int pb = (int)a - pc;
	pc = abs(pa + pb);
	pa = abs(pa);
	pb = abs(pb);
	if (pa <= pb && pa <= pc) return a;
	if (pb <= pc) return b;
	return c;
}

// png_byte returns byte i of the unfiltered row y (bpp 3 drops alpha).
__device__ __forceinline__ u8 png_byte(const u8* pix, int stride, int y, int i, int bpp)
{
	if (y < 0) return 0;
	const u8* row = pix + (size_t)y * stride;
	return bpp == 4 ? row[i] : row[(i / 3) * 4 + i % 3];
}

// png_filtered computes the five PNG filters of byte i as image/png's encoder does.
__device__ __forceinline__ void png_filters(const u8* pix, int stride, int y, int i, int bpp, u8 f[5])
{
	u8 cur = png_byte(pix, stride, y, i, bpp);
	u8 up = png_byte(pix, stride, y - 1, i, bpp);
	u8 left = i >= bpp ? png_byte(pix, stride, y, i - bpp, bpp) : 0;
	u8 upLeft = i >= bpp ? png_byte(pix, stride, y - 1, i - bpp, bpp) : 0;
	f[0] = cur;
	f[1] = i >= bpp ? (u8)(cur - left) : cur;
	f[2] = (u8)(cur - up);
	f[3] = i >= bpp ? (u8)(cur - (u8)(((int)left + (int)up) / 2)) : (u8)(cur - up / 2);
	f[4] = i >= bpp ? (u8)(cur - paeth(left, up, upLeft)) : (u8)(cur - up);
}

extern "C" __global__ void png_filter(const u8* pix, int w, int h, int stride, int bpp, u8* out)
{
	// image/png writeImage + filter: per row, the filter with the least sum of absolute values, ties in the
	// order up, Paeth, none, sub, average; one block per row.
	__shared__ long long sums[5][256];
	int y = blockIdx.x;
	int n = w * bpp;
	long long s[5] = {0, 0, 0, 0, 0};
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		u8 f[5];
		png_filters(pix, stride, y, i, bpp, f);
		for (int k = 0; k < 5; k++) s[k] += abs8(f[k]);
	}
	for (int k = 0; k < 5; k++) sums[k][threadIdx.x] = s[k];
	__syncthreads();
	for (int step = blockDim.x / 2; step > 0; step >>= 1) {
		if (threadIdx.x < step)
			for (int k = 0; k < 5; k++) sums[k][threadIdx.x] += sums[k][threadIdx.x + step];
		__syncthreads();
	}
	__shared__ int chosen;
	if (threadIdx.x == 0) {
		long long best = sums[2][0];
		int ft = 2;
		if (sums[4][0] < best) { best = sums[4][0]; ft = 4; }
		if (sums[0][0] < best) { best = sums[0][0]; ft = 0; }
		if (sums[1][0] < best) { best = sums[1][0]; ft = 1; }
		if (sums[3][0] < best) { ft = 3; }
		chosen = ft;
		out[(size_t)y * (n + 1)] = (u8)ft;
	}
	__syncthreads();
	int ft = chosen;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		u8 f[5];
		png_filters(pix, stride, y, i, bpp, f);
		out[(size_t)y * (n + 1) + 1 + i] = f[ft];
	}
}
`
