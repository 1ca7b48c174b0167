// detecthost.cpp runs the detector's kernels (included from the kernel source as codec.cu) on the host.
//   detecthost scores: reads "grid" (int32 gw, gh, qx0, qy0, bx0, by0, nbx, nby, side, r; float32 val[gw·gh];
//     uint8 ok[gw·gh]; float32 pilot[side·side]) and writes block_scores' output to "scores".
//   detecthost decode: reads "llr" (int32 n, wrap, K, g0, g1, g2; float64 llr[3n]) and writes conv_decode's
//     output to "info", the block's 2^(K-1) threads run as fibers in ascending thread order (hostBlockFibers,
//     cudahost.h); "decode-reverse" runs them in descending order.
// TestDetectKernelsOnTheHost compares the outputs with the codec's.
#include "cudahost.h"
#include "codec.cu"
#include "hostio.h"
#include <string.h>

// hostDoubles is n doubles, each the pattern -12345.0 (a value no kernel output takes, so a value it failed to
// write shows).
static double* hostDoubles(size_t n) {
	double* v = (double*)hostAlloc(n, sizeof(double));
	for (size_t i = 0; i < n; i++) v[i] = -12345.0;
	return v;
}

int main(int argc, char** argv) {
	if (argc != 2) return 2;
	if (strcmp(argv[1], "scores") == 0) {
		hostFile in = readAll("grid");
		int hd[10];
		if (in.size < sizeof hd) { fprintf(stderr, "grid file size\n"); return 2; }
		memcpy(hd, in.data, sizeof hd);
		int gw = hd[0], gh = hd[1], qx0 = hd[2], qy0 = hd[3], bx0 = hd[4], by0 = hd[5], nbx = hd[6], nby = hd[7],
			side = hd[8], r = hd[9];
		size_t n = (size_t)gw * gh;
		if (in.size != sizeof hd + 5 * n + 4 * (size_t)side * side) { fprintf(stderr, "grid file size\n"); return 2; }
		float* val = (float*)hostAlloc(n, sizeof(float));
		float* pilot = (float*)hostAlloc((size_t)side * side, sizeof(float));
		memcpy(val, in.data + sizeof hd, 4 * n);
		const unsigned char* ok = in.data + sizeof hd + 4 * n;
		memcpy(pilot, in.data + sizeof hd + 5 * n, 4 * (size_t)side * side);
		int d = 2 * r + 1;
		size_t nout = (size_t)nbx * nby * (2 + d * d);
		double* out = hostDoubles(nout);
		blockDim.x = 64;
		for (int b = 0; b < nbx * nby; b++) {
			blockIdx.x = b;
			for (unsigned t = 0; t < blockDim.x; t++) {
				threadIdx.x = t;
				block_scores(val, ok, gw, gh, qx0, qy0, bx0, by0, nbx, pilot, side, r, out);
			}
		}
		writeAll("scores", out, nout * 8);
		return 0;
	}
	if (strcmp(argv[1], "decode") == 0 || strcmp(argv[1], "decode-reverse") == 0) {
		hostFile in = readAll("llr");
		int hd[6];
		if (in.size < sizeof hd) { fprintf(stderr, "llr file size\n"); return 2; }
		memcpy(hd, in.data, sizeof hd);
		int n = hd[0], wrap = hd[1], K = hd[2];
		if (in.size != sizeof hd + 24 * (size_t)n) { fprintf(stderr, "llr file size\n"); return 2; }
		double* llr = (double*)hostAlloc(3 * (size_t)n, sizeof(double));
		memcpy(llr, in.data + sizeof hd, 24 * (size_t)n);
		int states = 1 << (K - 1);
		double* alpha = (double*)hostAlloc((size_t)(n + 2 * wrap + 1) * states, sizeof(double));
		double* out = hostDoubles(n);
		blockDim.x = states;
		blockIdx.x = 0;
		hostBlockFibers([&] {
			conv_decode(llr, n, wrap, K, (unsigned)hd[3], (unsigned)hd[4], (unsigned)hd[5], -INFINITY, alpha, out);
		}, strcmp(argv[1], "decode-reverse") == 0);
		writeAll("info", out, (size_t)n * 8);
		return 0;
	}
	return 2;
}
