package cudacodec

// detectSource is the CUDA C of the detector's two optional passes (accel.BlockScorer, accel.ConvDecoder),
// compiled (NVRTC, --fmad=false) and loaded as a module of their own, so that a failure costs only these passes
// (Device.loadDetectPasses). Both keep the order of every float64 sum and the strict comparisons of every
// maximum of the codec's Go code, so that their results are the codec's bit for bit; TestDetectKernelsOnTheHost
// runs this source as host C++ (testdata/cudahost.h, testdata/detecthost.cpp) on the inputs of real detections
// and compares.
const detectSource = `
#define SCORE_CHUNK 64
#define SCORE_MAX_SUMS 50
#define SCORE_MAXR 3
#define SCORE_SPAN (SCORE_CHUNK + 2 * SCORE_MAXR)
#define SCORE_ADDERS 64

// score_stage copies what chunk (qy, c0, m) of block_scores reads into shared memory: the grid rows j-r..j+r over
// the chunk's columns widened by r on each side (all inside the grid: a chunk's waxels are at least r from every
// side), the chunk's pilot row and ok flags. Threads first, first + stride, ... copy.
__device__ __forceinline__ void score_stage(const float* val, const unsigned char* ok, const float* pilot, int gw,
	int qy0, int side, int by, int pofs, int r, int qy, int c0, int m, int first, int stride,
	float (*sval)[SCORE_SPAN], float* sp, unsigned char* so)
{
	int j = qy - qy0, d = 2 * r + 1, span = m + 2 * r;
	for (int e = first; e < d * SCORE_SPAN; e += stride) {
		int rr = e / SCORE_SPAN, cc = e % SCORE_SPAN;
		if (cc < span) sval[rr][cc] = val[(size_t)(j - r + rr) * gw + c0 - r + cc];
	}
	for (int c = first; c < m; c += stride) {
		sp[c] = pilot[(size_t)(qy - by * side) * side + c0 + c + pofs];
		so[c] = ok[(size_t)j * gw + c0 + c] != 0;
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
	// next chunk's inputs into shared memory (score_stage). Two barriers a chunk; blockDim.x > SCORE_ADDERS. (A
	// thread per sum loading its own terms from global memory waited on a load a term: 0.9 ms of a 12 MP
	// detection on an H200.) The terms are branch-free, +0.0 where the Go code skips a waxel: a sum that starts
	// at +0.0 never becomes -0.0 (x + y is -0.0 only when both are), and s + 0.0 is s for every other s, so the
	// sums are the same.
	//
	// A row of terms is padded by one value: the adding threads read a column of it at once, and rows of 64
	// doubles would put the column in one bank (a 32-way conflict a read).
	__shared__ double terms[SCORE_MAX_SUMS][SCORE_CHUNK + 1];
	__shared__ float sval[2 * SCORE_MAXR + 1][SCORE_SPAN];
	__shared__ float sp[SCORE_CHUNK];
	__shared__ unsigned char so[SCORE_CHUNK];
	__shared__ unsigned char tok[SCORE_CHUNK]; // the chunk's ok flags for the count (so is the next chunk's by then)
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
	if (chunks > 0)
		score_stage(val, ok, pilot, gw, qy0, side, by, pofs, r, ylo, xlo, min(SCORE_CHUNK, xhi - xlo), t,
			(int)blockDim.x, sval, sp, so);
	__syncthreads();
	for (int k = 0; k < chunks; k++) {
		int c0 = xlo + (k % perRow) * SCORE_CHUNK;
		int m = min(SCORE_CHUNK, xhi - c0);
		for (int e = t; e < nsum * SCORE_CHUNK; e += (int)blockDim.x) {
			int q = e / SCORE_CHUNK, c = e % SCORE_CHUNK; // a power of two: shifts, not divisions
			if (c >= m) continue;
			double v;
			if (q == pw) {
				float x = sval[r][c + r];
				v = so[c] ? (double)(x * x) : 0.0;
				tok[c] = so[c];
			} else {
				int dy = q / d - r, dx = q % d - r;
				float p = sp[c];
				v = (so[c] && p != 0.0f) ? (double)(p * sval[r + dy][c + r + dx]) : 0.0;
			}
			terms[q][c] = v;
		}
		__syncthreads();
		if (t < nsum) {
			for (int c = 0; c < m; c++) s += terms[t][c];
			if (t == pw)
				for (int c = 0; c < m; c++) n += tok[c];
		} else if (t >= SCORE_ADDERS && k + 1 < chunks) {
			int qy = ylo + (k + 1) / perRow, c1 = xlo + ((k + 1) % perRow) * SCORE_CHUNK;
			score_stage(val, ok, pilot, gw, qy0, side, by, pofs, r, qy, c1, min(SCORE_CHUNK, xhi - c1),
				t - SCORE_ADDERS, (int)blockDim.x - SCORE_ADDERS, sval, sp, so);
		}
		__syncthreads(); // the chunk added and the next staged before the next's terms are computed
	}
	double* o = out + (size_t)blockIdx.x * (2 + d * d);
	if (t == pw) {
		o[0] = s;
		o[1] = (double)n;
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

extern "C" __global__ void conv_decode(const double* llr, int n, int wrap, int K, unsigned g0, unsigned g1, unsigned g2,
	double ninf, double* alpha, double* outparts, double* out)
{
	// convcode.go convDecode, one thread block of S = 2^(K-1) threads, thread s for trellis state s. alpha holds
	// (n + 2·wrap + 1) rows of the states' forward metrics, outparts 2·CONV_MAX_GROUPS values a step (the group
	// maxima of the output's two terms); ninf is -Inf (a kernel argument: no header needed).
	//
	// Each step's maximum over the states is the first maximum in state order, taken in two levels: G groups of
	// L adjacent states (thread g < G takes group g's, in order), then the G group maxima in order. The first
	// maximum of a concatenation is the left part's unless the right's is strictly greater, so this is the Go
	// loop's element for every split. A step so meets two barriers (it met 2 + log2 S with a tree).
	//
	// The metrics a step reads are the last step's unnormalised values and its maximum, kept in two buffers
	// (step t writes buffer t&1 and reads the other): a thread computes its predecessor's normalised metric as
	// the Go code does (nx - mx, one subtraction), and no thread overwrites a value another may still read
	// (step t+1 writes the buffer step t read before step t's first barrier).
	__shared__ double metric[2][CONV_MAX_STATES]; // unnormalised forward (then backward) metrics, by step parity
	__shared__ double val1[CONV_MAX_STATES], val2[CONV_MAX_STATES]; // the output's two maxima's terms
	__shared__ double part[2][1][CONV_MAX_GROUPS];                  // the metrics' group maxima, by step parity
	int S = (int)blockDim.x;
	int s = threadIdx.x;
	int steps = n + 2 * wrap;
	int lg = K - 1;
	int L = 1 << ((lg + 1) / 2), G = S / L; // G <= 32 for S <= 1024
	// The registers this thread's state meets: forward, as the next state s (registers 2s and 2s+1, from states
	// 2s mod S and 2s+1 mod S, in that order); backward, as the state s (registers u<<(K-1) | s, to states r>>1).
	unsigned fr0 = 2u * (unsigned)s, fr1 = 2u * (unsigned)s + 1u;
	int fs0 = (int)(fr0 & (unsigned)(S - 1)), fs1 = (int)(fr1 & (unsigned)(S - 1));
	int fp0 = conv_pattern(fr0, g0, g1, g2), fp1 = conv_pattern(fr1, g0, g1, g2);
	unsigned br0 = (unsigned)s, br1 = (1u << (K - 1)) | (unsigned)s;
	int bp0 = conv_pattern(br0, g0, g1, g2), bp1 = conv_pattern(br1, g0, g1, g2);
	int bn0 = (int)(br0 >> 1), bn1 = (int)(br1 >> 1);

	// Before step 0 every metric is 0: an unnormalised 0 less a maximum of 0 is the Go code's +0.
	alpha[s] = 0.0;
	metric[1][s] = 0.0;
	double mx = 0.0;
	int j = ((-wrap) % n + n) % n; // step t's bits start at llr[3j], j = (t - wrap) mod n
	// Each step's bits are loaded a step ahead, into registers: their loads, from global memory, then overlap the
	// step before (a load waited for on a step's way to its barrier delays the whole block).
	double l0 = llr[3 * j], l1 = llr[3 * j + 1], l2 = llr[3 * j + 2];
	if (++j == n) j = 0;
	double m0 = llr[3 * j], m1 = llr[3 * j + 1], m2 = llr[3 * j + 2];
	__syncthreads();
	for (int t = 0; t < steps; t++) {
		int cur = t & 1;
		const double* prev = metric[cur ^ 1];
		double nx = ninf;
		double a = (prev[fs0] - mx) + conv_gamma(l0, l1, l2, fp0);
		if (a > nx) nx = a;
		a = (prev[fs1] - mx) + conv_gamma(l0, l1, l2, fp1);
		if (a > nx) nx = a;
		metric[cur][s] = nx;
		l0 = m0, l1 = m1, l2 = m2;
		if (++j == n) j = 0;
		m0 = llr[3 * j], m1 = llr[3 * j + 1], m2 = llr[3 * j + 2];
		__syncthreads();
		if (s < G) part[cur][0][s] = conv_first_max(metric[cur] + s * L, L);
		__syncthreads();
		mx = conv_first_max(part[cur][0], G);
		alpha[(size_t)(t + 1) * S + s] = nx - mx;
	}
	// The backward pass, from the last step down. Its buffers reuse metric; its first step writes the buffer of
	// parity (steps-1)&1, which the forward pass last read in its step steps-1 (before that step's first barrier).
	__syncthreads();
	int last = (steps - 1) & 1;
	metric[last ^ 1][s] = 0.0;
	mx = 0.0;
	j = (((steps - 1 - wrap) % n) + n) % n;
	// As forward, a step ahead: the bits, and this state's forward metric (a global load).
	l0 = llr[3 * j], l1 = llr[3 * j + 1], l2 = llr[3 * j + 2];
	if (--j < 0) j = n - 1;
	m0 = llr[3 * j], m1 = llr[3 * j + 1], m2 = llr[3 * j + 2];
	double cs = alpha[(size_t)(steps - 1) * S + s];
	__syncthreads();
	for (int t = steps - 1; t >= 0; t--) {
		int cur = t & 1;
		const double* prev = metric[cur ^ 1];
		bool inBlock = t >= wrap && t < wrap + n;
		double p = ninf;
		double v0 = conv_gamma(l0, l1, l2, bp0) + (prev[bn0] - mx);
		if (v0 > p) p = v0;
		double v1 = conv_gamma(l0, l1, l2, bp1) + (prev[bn1] - mx);
		if (v1 > p) p = v1;
		metric[cur][s] = p;
		val1[s] = inBlock ? cs + v0 : ninf;
		val2[s] = inBlock ? cs + v1 : ninf;
		l0 = m0, l1 = m1, l2 = m2;
		if (--j < 0) j = n - 1;
		m0 = llr[3 * j], m1 = llr[3 * j + 1], m2 = llr[3 * j + 2];
		if (t > 0) cs = alpha[(size_t)(t - 1) * S + s];
		__syncthreads();
		// The output's two terms' group maxima go to outparts, for the pass after the loop: they take no part in
		// the recursion, so no thread waits on their maxima here.
		for (int q = s; q < 3 * G; q += S) {
			int g = q % G;
			if (q < G) part[cur][0][g] = conv_first_max(metric[cur] + g * L, L);
			else if (inBlock)
				outparts[((size_t)t * 2 + (q < 2 * G ? 0 : 1)) * CONV_MAX_GROUPS + g] =
					conv_first_max((q < 2 * G ? val1 : val2) + g * L, L);
		}
		__syncthreads();
		mx = conv_first_max(part[cur][0], G);
	}
	__syncthreads(); // outparts written
	for (int t = wrap + s; t < wrap + n; t += S) {
		const double* op = outparts + (size_t)t * 2 * CONV_MAX_GROUPS;
		out[t - wrap] = conv_first_max(op + CONV_MAX_GROUPS, G) - conv_first_max(op, G);
	}
}
`
