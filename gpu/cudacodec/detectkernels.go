package cudacodec

// detectSource is the CUDA C of the detector's two optional passes (accel.BlockScorer, accel.ConvDecoder),
// compiled (NVRTC, --fmad=false) and loaded as a module of their own, so that a failure costs only these passes
// (Device.loadDetectPasses). Both keep the order of every float64 sum and the strict comparisons of every
// maximum of the codec's Go code, so that their results are the codec's bit for bit; TestDetectKernelsOnTheHost
// runs this source as host C++ (testdata/cudahost.h, testdata/detecthost.cpp) on the inputs of real detections
// and compares.
const detectSource = `
#define SCORE_CHUNK 128
#define SCORE_MAX_SUMS 50
#define SCORE_MAXR 3
#define SCORE_SPAN (SCORE_CHUNK + 2 * SCORE_MAXR)
#define SCORE_ADDERS 64

// score_stage copies what chunk (qy, c0, m) of block_scores reads into shared memory: the grid rows j-r..j+r over
// the chunk's columns widened by r on each side (all inside the grid: a chunk's waxels are at least r from every
// side), the chunk's pilot row and ok flags. Threads first, first + stride, ... copy, four values a thread at a
// time: the four loads are issued together, then the stores (a store waits for its load, so a copy loop of one
// value an iteration waited on global memory once a value).
__device__ __forceinline__ void score_stage(const float* val, const unsigned char* ok, const float* pilot, int gw,
	int qy0, int side, int by, int pofs, int r, int qy, int c0, int m, int first, int stride,
	float (*sval)[SCORE_SPAN], float* sp, unsigned char* so)
{
	int j = qy - qy0, d = 2 * r + 1, span = m + 2 * r;
	int total = d * SCORE_SPAN;
	const float* prow = pilot + (size_t)(qy - by * side) * side + c0 + pofs;
	const unsigned char* orow = ok + (size_t)j * gw + c0;
	bool flag = first < m; // this thread's column of the pilot and flags (the rest below)
	float pv = flag ? prow[first] : 0.0f;
	unsigned char ov = flag ? orow[first] != 0 : 0;
	for (int e0 = first; e0 < total; e0 += 4 * stride) {
		float v[4];
#pragma unroll
		for (int u = 0; u < 4; u++) {
			int e = e0 + u * stride, rr = e / SCORE_SPAN, cc = e % SCORE_SPAN;
			v[u] = e < total && cc < span ? val[(size_t)(j - r + rr) * gw + c0 - r + cc] : 0.0f;
		}
#pragma unroll
		for (int u = 0; u < 4; u++) {
			int e = e0 + u * stride;
			if (e < total) sval[e / SCORE_SPAN][e % SCORE_SPAN] = v[u];
		}
	}
	if (flag) {
		sp[first] = pv;
		so[first] = ov;
	}
	for (int c = first + stride; c < m; c += stride) { // a block of fewer than SCORE_CHUNK stagers
		sp[c] = prow[c];
		so[c] = orow[c] != 0;
	}
}

extern "C" __global__ void block_scores(const float* val, const unsigned char* ok, int gw, int gh, int qx0, int qy0,
	int bx0, int by0, int nbx, const float* pilot, int side, int r, double* out)
{
	// sync.go blockScores: one thread block per tile block (blockIdx.x in row-major block order), (2r+1)² + 1 sums
	// over the block's waxels: the pilot correlation at each offset (t/(2r+1) - r, t%(2r+1) - r), then the power
	// (and the count). Each sum is the Go sum only when its terms are added one after the other in the Go code's
	// order, so one thread adds each; the terms, though, are independent. The block walks its waxels a chunk (up
	// to SCORE_CHUNK waxels of a row) at a time: all its threads compute the chunk's terms of every sum from
	// shared memory; then threads t < (2r+1)² + 1 add sum t's terms while threads from SCORE_ADDERS on copy the
	// next chunk's inputs into shared memory (score_stage). Two barriers a chunk; blockDim.x is a multiple of
	// SCORE_CHUNK above SCORE_ADDERS. (A thread a sum loading its own terms from global memory waited on a load a
	// term: 0.9 ms of a 12 MP detection on an H200; this way, 0.41-0.47.) The count is an integer sum, made in
	// any order: each column's thread keeps its part. The terms are branch-free, +0.0 where the Go code skips a
	// waxel: a sum that starts at +0.0 never becomes -0.0 (x + y is -0.0 only when both are), and s + 0.0 is s
	// for every other s, so the sums are the same.
	//
	// A term is a float32 product (or 0), converted to float64 only when added: the conversion is exact, so
	// keeping it as a float32 is the same sum, in half the memory (a chunk of 128 waxels fits). A row of terms is
	// padded by one value: the adding threads read a column of it at once, and rows of 128 floats would put the
	// column in one bank (a 32-way conflict a read).
	__shared__ float terms[SCORE_MAX_SUMS][SCORE_CHUNK + 1];
	__shared__ float sval[2 * SCORE_MAXR + 1][SCORE_SPAN];
	__shared__ float sp[SCORE_CHUNK];
	__shared__ unsigned char so[SCORE_CHUNK];
	__shared__ int ncol[SCORE_CHUNK]; // the count's part of each column thread
	__shared__ int soff[SCORE_MAX_SUMS];       // sum q's offset (dy·SCORE_SPAN + dx) from a waxel in sval
	int d = 2 * r + 1;
	int nsum = d * d + 1, pw = d * d; // sum pw is the power
	int t = threadIdx.x;
	int bx = bx0 + (int)blockIdx.x % nbx, by = by0 + (int)blockIdx.x / nbx;
	// The waxels at least r from every side of the grid (the Go code's "continue" conditions).
	int ylo = max(by * side, qy0 + r), yhi = min((by + 1) * side, qy0 + gh - r);
	int xlo = max(bx * side, qx0 + r) - qx0, xhi = min((bx + 1) * side, qx0 + gw - r) - qx0; // grid columns
	int pofs = qx0 - bx * side; // the pilot column of grid column i is i + pofs
	int perRow = xhi > xlo ? (xhi - xlo + SCORE_CHUNK - 1) / SCORE_CHUNK : 0;
	int chunks = yhi > ylo ? (yhi - ylo) * perRow : 0;
	double s = 0.0;
	int n = 0;
	// Thread t computes column t % SCORE_CHUNK's terms of sums t / SCORE_CHUNK, + blockDim.x / SCORE_CHUNK, ...:
	// the column's pilot chip and flag once a chunk, then a term a load and a product, the sum's offset into the
	// staged rows from a table (soff, made once).
	for (int q = t; q < pw; q += (int)blockDim.x) soff[q] = (q / d - r) * SCORE_SPAN + (q % d - r);
	if (chunks > 0)
		score_stage(val, ok, pilot, gw, qy0, side, by, pofs, r, ylo, xlo, min(SCORE_CHUNK, xhi - xlo), t,
			(int)blockDim.x, sval, sp, so);
	__syncthreads();
	int col = t % SCORE_CHUNK, q0 = t / SCORE_CHUNK, qstep = (int)blockDim.x / SCORE_CHUNK;
	const float* centre = &sval[r][col + r];
	for (int k = 0; k < chunks; k++) {
		int c0 = xlo + (k % perRow) * SCORE_CHUNK;
		int m = min(SCORE_CHUNK, xhi - c0);
		if (col < m) {
			float p = sp[col];
			bool o = so[col] != 0;
			bool on = o && p != 0.0f;
			for (int q = q0; q < pw; q += qstep)
				terms[q][col] = on ? p * centre[soff[q]] : 0.0f;
			if (q0 == 0) {
				float x = *centre;
				terms[pw][col] = o ? x * x : 0.0f;
				n += o; // a count: integers add in any order, so each column thread keeps its own
			}
		}
		__syncthreads();
		if (t < nsum) {
			// Eight terms loaded at once, then added in order: only the adds wait on each other (a loop of one
			// term a step waited on its shared load and conversion each time, ~60 cycles a term).
			const float* row = terms[t];
			int c = 0;
			for (; c + 8 <= m; c += 8) {
				float a[8];
#pragma unroll
				for (int u = 0; u < 8; u++) a[u] = row[c + u];
#pragma unroll
				for (int u = 0; u < 8; u++) s += (double)a[u];
			}
			for (; c < m; c++) s += (double)row[c];
		} else if (t >= SCORE_ADDERS && k + 1 < chunks) {
			int qy = ylo + (k + 1) / perRow, c1 = xlo + ((k + 1) % perRow) * SCORE_CHUNK;
			score_stage(val, ok, pilot, gw, qy0, side, by, pofs, r, qy, c1, min(SCORE_CHUNK, xhi - c1),
				t - SCORE_ADDERS, (int)blockDim.x - SCORE_ADDERS, sval, sp, so);
		}
		__syncthreads(); // the chunk added and the next staged before the next's terms are computed
	}
	// The column threads' counts, summed.
	if (t < SCORE_CHUNK) ncol[t] = n;
	__syncthreads();
	double* o = out + (size_t)blockIdx.x * (2 + d * d);
	if (t == pw) {
		int total = 0;
		for (int c = 0; c < SCORE_CHUNK; c++) total += ncol[c];
		o[0] = s;
		o[1] = (double)total;
	} else if (t < pw) {
		o[2 + t] = s;
	}
}

__device__ __forceinline__ unsigned conv_parity(unsigned v)
{
	v ^= v >> 16;
	v ^= v >> 8;
	v ^= v >> 4;
	v ^= v >> 2;
	v ^= v >> 1;
	return v & 1;
}

// conv_pattern is convcode.go's pattern[r]: the three coded bits of register r.
__device__ __forceinline__ int conv_pattern(unsigned r, unsigned g0, unsigned g1, unsigned g2)
{
	return (int)(conv_parity(r & g0) | conv_parity(r & g1) << 1 | conv_parity(r & g2) << 2);
}

// conv_gamma is a step's sum for the pattern s of three coded bits: ±llr/2 of the step's bits l0, l1, l2, k = 0,
// 1, 2 in order (convcode.go's 8 sums of a step). Each thread computes the sums it reads itself: the same
// operations give the same value on every thread, and no barrier is needed to share them. x·0.5 is x/2.0 for
// every double (both are the exact half, rounded once), without a division's dozens of instructions.
__device__ __forceinline__ double conv_gamma(double l0, double l1, double l2, int s)
{
	double v = 0.0;
	v = (s & 1) ? v + l0 * 0.5 : v - l0 * 0.5;
	v = (s & 2) ? v + l1 * 0.5 : v - l1 * 0.5;
	v = (s & 4) ? v + l2 * 0.5 : v - l2 * 0.5;
	return v;
}

#define CONV_MAX_STATES 1024
#define CONV_MAX_GROUPS 32

// conv_first_max_n is the first maximum of m[0..N) (the Go loop's "if v > mx" in index order: on a tie, +0 and
// -0, the earlier element) for N a power of two: the N values loaded at once, then a tree of adjacent runs in
// registers, the left run's maximum kept unless the right's is strictly greater (log2 N dependent comparisons
// instead of N - 1 after as many dependent loads).
template <int N> __device__ __forceinline__ double conv_first_max_n(const double* m)
{
	double v[N];
#pragma unroll
	for (int i = 0; i < N; i++) v[i] = m[i];
#pragma unroll
	for (int k = 1; k < N; k <<= 1) {
#pragma unroll
		for (int i = 0; i < N; i += 2 * k)
			if (v[i + k] > v[i]) v[i] = v[i + k];
	}
	return v[0];
}

// conv_first_max is conv_first_max_n for n a power of two up to CONV_MAX_GROUPS (the same n on every thread).
__device__ __forceinline__ double conv_first_max(const double* m, int n)
{
	switch (n) {
	case 2: return conv_first_max_n<2>(m);
	case 4: return conv_first_max_n<4>(m);
	case 8: return conv_first_max_n<8>(m);
	case 16: return conv_first_max_n<16>(m);
	case 32: return conv_first_max_n<32>(m);
	}
	return m[0];
}

// conv_step_max publishes a step's per-state values v (thread s's in buf[s]) and returns their first maximum: a
// barrier, thread g < G takes group g's (states g·L..g·L+L-1, in order) into part, a barrier, every thread the
// groups' in order. The first maximum of a concatenation is the left part's unless the right's is strictly
// greater, so this is the Go loop's element for every split. buf and part must not be written again before
// every thread has returned (callers alternate two of each by step parity).
__device__ __forceinline__ double conv_step_max(double* buf, double* part, double v, int L, int G)
{
	int s = threadIdx.x;
	buf[s] = v;
	__syncthreads();
	if (s < G) part[s] = conv_first_max(buf + s * L, L);
	__syncthreads();
	return conv_first_max(part, G);
}

// conv_groups is conv_decode's group shape for S = 2^(K-1) states: L = 2^ceil((K-1)/2) adjacent states a group,
// G = S/L groups (both at most 32 for K <= 11), so that each level's sequential part is short.
__device__ __forceinline__ void conv_groups(int K, int* L, int* G)
{
	*L = 1 << (K / 2);
	*G = (1 << (K - 1)) / *L;
}

extern "C" __global__ void conv_decode(const double* llr, int n, int wrap, int K, unsigned g0, unsigned g1, unsigned g2,
	double ninf, double* alpha, double* beta)
{
	// convcode.go convDecode's two recursions, each on a thread block of S = 2^(K-1) threads (thread s for trellis
	// state s): block 0 the forward metrics into alpha, block 1 the backward metrics into beta, at once (neither
	// reads the other's); conv_output then combines them. Each holds (n + 2·wrap + 1) rows of S values: alpha's
	// row t the forward metrics before step t, beta's row t the backward metrics before step t (counted from the
	// end: row n + 2·wrap is all 0). ninf is -Inf (a kernel argument: no header needed).
	//
	// Each step's maximum over the states is taken by conv_step_max (two barriers). The metrics a step reads are
	// the last step's unnormalised values and its maximum, kept in two buffers (step t writes buffer t&1 and
	// reads the other): a thread computes its predecessor's normalised metric as the Go code does (nx - mx, one
	// subtraction), and no thread overwrites a value another may still read.
	__shared__ double metric[2][CONV_MAX_STATES]; // unnormalised metrics, by step parity
	__shared__ double part[2][CONV_MAX_GROUPS];   // their group maxima, by step parity
	int S = (int)blockDim.x;
	int s = threadIdx.x;
	int steps = n + 2 * wrap;
	int L, G;
	conv_groups(K, &L, &G);
	bool forward = blockIdx.x == 0;
	// The registers this thread's state meets: forward, as the next state s (registers 2s and 2s+1, from states
	// 2s mod S and 2s+1 mod S, in that order); backward, as the state s (registers u<<(K-1) | s, to states r>>1).
	unsigned r0 = forward ? 2u * (unsigned)s : (unsigned)s;
	unsigned r1 = forward ? 2u * (unsigned)s + 1u : (1u << (K - 1)) | (unsigned)s;
	int n0 = forward ? (int)(r0 & (unsigned)(S - 1)) : (int)(r0 >> 1);
	int n1 = forward ? (int)(r1 & (unsigned)(S - 1)) : (int)(r1 >> 1);
	int p0 = conv_pattern(r0, g0, g1, g2), p1 = conv_pattern(r1, g0, g1, g2);
	double* rows = forward ? alpha : beta;
	int dir = forward ? 1 : -1;
	int t = forward ? 0 : steps - 1; // the step
	// Before the first step every metric is 0: an unnormalised 0 less a maximum of 0 is the Go code's +0.
	rows[(size_t)(forward ? 0 : steps) * S + s] = 0.0;
	metric[1 - (t & 1)][s] = 0.0;
	double mx = 0.0;
	int j = (((t - wrap) % n) + n) % n; // step t's bits start at llr[3j], j = (t - wrap) mod n
	// Each step's bits are loaded a step ahead, into registers: their loads, from global memory, then overlap the
	// step before (a load waited for on a step's way to its barrier delays the whole block).
	double l0 = llr[3 * j], l1 = llr[3 * j + 1], l2 = llr[3 * j + 2];
	j += dir;
	if (j == n) j = 0;
	if (j < 0) j = n - 1;
	double m0 = llr[3 * j], m1 = llr[3 * j + 1], m2 = llr[3 * j + 2];
	__syncthreads();
	for (int k = 0; k < steps; k++, t += dir) {
		int cur = t & 1;
		const double* prev = metric[cur ^ 1];
		double v = ninf;
		double a = (prev[n0] - mx) + conv_gamma(l0, l1, l2, p0);
		if (a > v) v = a;
		a = (prev[n1] - mx) + conv_gamma(l0, l1, l2, p1);
		if (a > v) v = a;
		l0 = m0, l1 = m1, l2 = m2;
		j += dir;
		if (j == n) j = 0;
		if (j < 0) j = n - 1;
		m0 = llr[3 * j], m1 = llr[3 * j + 1], m2 = llr[3 * j + 2];
		mx = conv_step_max(metric[cur], part[cur], v, L, G);
		rows[(size_t)(forward ? t + 1 : t) * S + s] = v - mx;
	}
}

extern "C" __global__ void conv_output(const double* llr, int n, int wrap, int K, unsigned g0, unsigned g1, unsigned g2,
	double ninf, const double* alpha, const double* beta, double* out)
{
	// convcode.go convDecode's output: block b for the info bit b (step t = wrap + b), thread s for state s:
	// out[b] = max over s of (alpha[t][s] + branch 1 into beta[t+1]) - max of (alpha[t][s] + branch 0), each the
	// first maximum in state order (conv_step_max), with the Go code's operations in its order.
	__shared__ double buf[2][CONV_MAX_STATES];
	__shared__ double part[2][CONV_MAX_GROUPS];
	int S = (int)blockDim.x;
	int s = threadIdx.x;
	int t = wrap + (int)blockIdx.x;
	int L, G;
	conv_groups(K, &L, &G);
	unsigned r0 = (unsigned)s, r1 = (1u << (K - 1)) | (unsigned)s;
	int j = blockIdx.x; // (t - wrap) mod n
	double l0 = llr[3 * j], l1 = llr[3 * j + 1], l2 = llr[3 * j + 2];
	const double* next = beta + (size_t)(t + 1) * S;
	double cs = alpha[(size_t)t * S + s];
	double v0 = conv_gamma(l0, l1, l2, conv_pattern(r0, g0, g1, g2)) + next[r0 >> 1];
	double v1 = conv_gamma(l0, l1, l2, conv_pattern(r1, g0, g1, g2)) + next[r1 >> 1];
	double m1 = conv_step_max(buf[0], part[0], cs + v0, L, G);
	double m2 = conv_step_max(buf[1], part[1], cs + v1, L, G);
	if (s == 0) out[blockIdx.x] = m2 - m1;
}
`
