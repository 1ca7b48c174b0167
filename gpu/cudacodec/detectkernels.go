package cudacodec

// detectSource is the CUDA C of the detector's two optional passes (accel.BlockScorer, accel.ConvDecoder),
// compiled (NVRTC, --fmad=false) and loaded as a module of their own, so that a failure costs only these passes
// (Device.loadDetectPasses). Both keep the order of every float64 sum and the strict comparisons of every
// maximum of the codec's Go code, so that their results are the codec's bit for bit; TestDetectKernelsOnTheHost
// runs this source as host C++ (testdata/cudahost.h, testdata/detecthost.cpp) on the inputs of real detections
// and compares.
const detectSource = `
extern "C" __global__ void block_scores(const float* val, const unsigned char* ok, int gw, int gh, int qx0, int qy0,
	int bx0, int by0, int nbx, const float* pilot, int side, int r, double* out)
{
	// sync.go blockScores: one thread block per tile block (blockIdx.x in row-major block order); thread t <
	// (2r+1)² sums the pilot correlation at offset (t/(2r+1) - r, t%(2r+1) - r), the block's last thread (in a
	// warp of its own for r <= 2) the power and count. Each thread runs over the block's waxels in the Go code's
	// order, so each sum is the Go sum. The loops are branch-free, adding +0.0 where the Go code skips a waxel:
	// a sum that starts at +0.0 never becomes -0.0 (x + y is -0.0 only when both are), and s + 0.0 is s for
	// every other s, so the sums are the same and the loads of successive waxels can overlap.
	int d = 2 * r + 1;
	int t = threadIdx.x;
	bool power = t == (int)blockDim.x - 1;
	if (!power && t >= d * d) return;
	int bx = bx0 + (int)blockIdx.x % nbx, by = by0 + (int)blockIdx.x / nbx;
	int dy = t / d - r, dx = t % d - r;
	// The waxels at least r from every side of the grid (the Go code's "continue" conditions).
	int ylo = max(by * side, qy0 + r), yhi = min((by + 1) * side, qy0 + gh - r);
	int xlo = max(bx * side, qx0 + r), xhi = min((bx + 1) * side, qx0 + gw - r);
	double s = 0.0;
	int n = 0;
	int pofs = qx0 - bx * side; // the pilot column of grid column i is i + pofs
	for (int qy = ylo; qy < yhi; qy++) {
		int j = qy - qy0;
		const float* prow = pilot + (size_t)(qy - by * side) * side;
		const float* vrow = val + (size_t)j * gw;
		const unsigned char* orow = ok + (size_t)j * gw;
		if (power) {
			for (int i = xlo - qx0; i < xhi - qx0; i++) {
				float v = vrow[i];
				int o = orow[i] != 0;
				s += o ? (double)(v * v) : 0.0;
				n += o;
			}
		} else {
			const float* wrow = val + (size_t)(j + dy) * gw; // the row at offset dy (j + dy >= 0)
			for (int i = xlo - qx0; i < xhi - qx0; i++) {
				float p = prow[i + pofs];
				s += (orow[i] != 0 && p != 0.0f) ? (double)(p * wrow[i + dx]) : 0.0;
			}
		}
	}
	double* o = out + (size_t)blockIdx.x * (2 + d * d);
	if (power) {
		o[0] = s;
		o[1] = (double)n;
	} else {
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

// conv_gamma is step t's sum for the pattern s of three coded bits: ±llr/2 of the step's bits, k = 0, 1, 2 in
// order (convcode.go's 8 sums of a step).
__device__ __forceinline__ double conv_gamma(const double* llr, int t, int n, int wrap, int s)
{
	int i = 3 * (((t - wrap) % n + n) % n);
	double v = 0.0;
	for (int k = 0; k < 3; k++) {
		if ((s >> k & 1) == 1) v += llr[i + k] / 2.0;
		else v -= llr[i + k] / 2.0;
	}
	return v;
}

#define CONV_MAX_STATES 1024

// conv_max returns the first maximum of m[0..blockDim.x) (the Go loop's "if v > mx" from -Inf in index order):
// pairs of adjacent runs, the left one kept unless the right is strictly greater, so that a tie between +0 and -0
// picks the state the Go loop picks. Every thread calls it; m is overwritten.
__device__ double conv_max(double* m)
{
	int s = threadIdx.x;
	for (int k = 1; k < (int)blockDim.x; k <<= 1) {
		__syncthreads();
		if (s % (2 * k) == 0 && m[s + k] > m[s]) m[s] = m[s + k];
	}
	__syncthreads();
	double v = m[0];
	__syncthreads();
	return v;
}

extern "C" __global__ void conv_decode(const double* llr, int n, int wrap, int K, unsigned g0, unsigned g1, unsigned g2,
	double ninf, double* alpha, double* out)
{
	// convcode.go convDecode, one thread block of 2^(K-1) threads, thread s for trellis state s. alpha holds
	// (n + 2·wrap + 1) rows of the states' forward metrics; ninf is -Inf (a kernel argument: no header needed).
	__shared__ double sums[8];
	__shared__ double beta[CONV_MAX_STATES];
	__shared__ double acur[CONV_MAX_STATES]; // alpha's latest row, read by the next step from here
	__shared__ double red[3][CONV_MAX_STATES];
	int S = (int)blockDim.x;
	int s = threadIdx.x;
	int steps = n + 2 * wrap;
	// The registers this thread's state meets: forward, as the next state s (registers 2s and 2s+1, from states
	// 2s mod S and 2s+1 mod S, in that order); backward, as the state s (registers u<<(K-1) | s, to states r>>1).
	unsigned fr0 = 2u * (unsigned)s, fr1 = 2u * (unsigned)s + 1u;
	int fs0 = (int)(fr0 & (unsigned)(S - 1)), fs1 = (int)(fr1 & (unsigned)(S - 1));
	int fp0 = conv_pattern(fr0, g0, g1, g2), fp1 = conv_pattern(fr1, g0, g1, g2);
	unsigned br0 = (unsigned)s, br1 = (1u << (K - 1)) | (unsigned)s;
	int bp0 = conv_pattern(br0, g0, g1, g2), bp1 = conv_pattern(br1, g0, g1, g2);
	int bn0 = (int)(br0 >> 1), bn1 = (int)(br1 >> 1);

	alpha[s] = 0.0;
	acur[s] = 0.0;
	for (int t = 0; t < steps; t++) {
		if (s < 8) sums[s] = conv_gamma(llr, t, n, wrap, s);
		__syncthreads();
		double nx = ninf;
		double a = acur[fs0] + sums[fp0];
		if (a > nx) nx = a;
		a = acur[fs1] + sums[fp1];
		if (a > nx) nx = a;
		red[0][s] = nx;
		double mx = conv_max(red[0]); // every thread has read acur when it returns
		alpha[(size_t)(t + 1) * S + s] = nx - mx;
		acur[s] = nx - mx;
	}
	beta[s] = 0.0;
	for (int t = steps - 1; t >= 0; t--) {
		// No barrier is needed here: every thread read the step before's sums, beta and red before that step's
		// last barrier, and writes beta, then this step's sums, only after it.
		double cs = alpha[(size_t)t * S + s]; // this state's forward metric, loaded before the barrier
		if (s < 8) sums[s] = conv_gamma(llr, t, n, wrap, s);
		__syncthreads();
		bool inBlock = t >= wrap && t < wrap + n;
		double p = ninf;
		double v0 = sums[bp0] + beta[bn0];
		if (v0 > p) p = v0;
		double v1 = sums[bp1] + beta[bn1];
		if (v1 > p) p = v1;
		red[0][s] = p;
		red[1][s] = inBlock ? cs + v0 : ninf;
		red[2][s] = inBlock ? cs + v1 : ninf;
		for (int k = 1; k < S; k <<= 1) {
			__syncthreads();
			if (s % (2 * k) == 0)
				for (int q = 0; q < 3; q++)
					if (red[q][s + k] > red[q][s]) red[q][s] = red[q][s + k];
		}
		__syncthreads();
		double mx = red[0][0];
		if (inBlock && s == 0) out[t - wrap] = red[2][0] - red[1][0];
		beta[s] = p - mx;
	}
}
`
