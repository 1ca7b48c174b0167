// detecthost.cpp runs the detector's kernels (included from the kernel source as codec.cu) on the host.
//   detecthost scores: reads "grid" (int32 gw, gh, qx0, qy0, bx0, by0, nbx, nby, side, r; float32 val[gw·gh];
//     uint8 ok[gw·gh]; float32 pilot[side·side]) and writes block_scores' output to "scores" (its blocks of 128
//     threads as fibers; "scores-reverse": descending thread and block order).
//   detecthost decode: reads "llr" (int32 n, wrap, K, g0, g1, g2; float64 llr[3n]), runs conv_decode (two blocks)
//     and conv_output (a block an info bit) and writes the output to "info", the blocks' 2^(K-1) threads run as
//     fibers in ascending thread order (hostBlockFibers, cudahost.h); "decode-reverse": descending thread and
//     block order.
//   detecthost pilot: reads "pilot" (int32 side, np, pilot[np]; float32 sign[np]; int32 index[8·side²]; float64
//     acc[side²]), runs pilot_dihedral and pilot_sums in PilotSums' shapes (pilot_sums, which has barriers, as
//     fibers; "pilot-reverse": descending thread and block order) and writes the sums (float64 8·side²) to "sums",
//     then pilot_peaks of them at the norm PILOT_TEST_NORM, to "peaks" (float64 6 a transform).
//   detecthost grid: reads "plan" (int32 lw, lh, gw, gh, qx0, qy0, side, r, then Grid's 8 launch shapes as int32
//     grid.x, grid.y, block.x each; float64 m0, m2, start[2·gh]; float32 level[lw·lh]), runs Grid's kernels in
//     Grid's order and shapes (sample_grid, box_rows and box_cols, which have barriers, as fibers in ascending
//     thread order; "grid-reverse": descending, and the blocks of each launch in descending order too) and
//     writes the whitened grid to "wval" (float32) and "wok" (uint8), the fold to "acc" (float64 side²).
// TestDetectKernelsOnTheHost compares the outputs with the codec's.
#include "cudahost.h"
#include "codec.cu"
#define PILOT_TEST_NORM 3.7 // TestDetectKernelsOnTheHost/pilot's
#include "hostio.h"
#include <string.h>

// hostPoisoned is n·size bytes of 0xa5 (float32 and float64 values no kernel computes here), as a device's
// uninitialised memory: a value a kernel failed to write shows.
static void* hostPoisoned(size_t n, size_t size) {
	void* p = hostAlloc(n, size);
	memset(p, 0xa5, n * size);
	return p;
}

// hostLaunch runs f as a launch of grid.x × grid.y blocks of blockX threads: as fibers (hostBlockFibers) when the
// kernel has barriers, else thread after thread; blocks and threads in descending order when reverse.
template <class F> static void hostLaunch(const int shape[3], bool barriers, bool reverse, F f) {
	unsigned gx = (unsigned)shape[0], gy = (unsigned)shape[1];
	blockDim = {(unsigned)shape[2], 1, 1};
	gridDim = {gx, gy, 1};
	for (unsigned i = 0; i < gx * gy; i++) {
		unsigned b = reverse ? gx * gy - 1 - i : i;
		blockIdx = {b % gx, b / gx, 0};
		if (barriers) {
			hostBlockFibers(f, reverse);
			continue;
		}
		for (unsigned t = 0; t < blockDim.x; t++) {
			threadIdx = {reverse ? blockDim.x - 1 - t : t, 0, 0};
			f();
		}
	}
}

// runGrid is surface.go Grid's sequence of kernels on the plan in "plan" (see the top of this file).
static int runGrid(bool reverse) {
	hostFile in = readAll("plan");
	int hd[8 + 8 * 3];
	if (in.size < sizeof hd) { fprintf(stderr, "plan file size\n"); return 2; }
	memcpy(hd, in.data, sizeof hd);
	int lw = hd[0], lh = hd[1], gw = hd[2], gh = hd[3], qx0 = hd[4], qy0 = hd[5], side = hd[6], r = hd[7];
	const int* shape = hd + 8;
	size_t n = (size_t)gw * gh, nl = (size_t)lw * lh;
	if (in.size != sizeof hd + 16 + 16 * (size_t)gh + 4 * nl) { fprintf(stderr, "plan file size\n"); return 2; }
	double m[2];
	memcpy(m, in.data + sizeof hd, 16);
	double* start = (double*)hostAlloc(2 * (size_t)gh, sizeof(double));
	memcpy(start, in.data + sizeof hd + 16, 16 * (size_t)gh);
	float* level = (float*)hostAlloc(nl, sizeof(float));
	memcpy(level, in.data + sizeof hd + 16 + 16 * (size_t)gh, 4 * nl);
	float* val = (float*)hostPoisoned(n, 4);
	u8* ok = (u8*)hostPoisoned(n, 1);
	float* res = (float*)hostPoisoned(n, 4);
	u8* rok = (u8*)hostPoisoned(n, 1);
	float* sq = (float*)hostPoisoned(n, 4);
	float* cnt = (float*)hostPoisoned(n, 4);
	float* tmp = (float*)hostPoisoned(n, 4);
	double* prefix = (double*)hostPoisoned(n + gh, 8);
	float* msq = (float*)hostPoisoned(n, 4);
	float* mcnt = (float*)hostPoisoned(n, 4);
	float* wval = (float*)hostPoisoned(n, 4);
	u8* wok = (u8*)hostPoisoned(n, 1);
	double* acc = (double*)hostPoisoned((size_t)side * side, 8);
	hostLaunch(shape + 0, true, reverse, [&] { sample_grid(level, lw, lh, start, m[0], m[1], gw, gh, val, ok); });
	hostLaunch(shape + 3, false, reverse, [&] { whiten_residual(val, ok, gw, gh, res, rok, sq, cnt); });
	hostLaunch(shape + 6, true, reverse, [&] { box_rows(sq, tmp, prefix, gw, gh, r); });
	hostLaunch(shape + 9, true, reverse, [&] { box_cols(tmp, msq, gw, gh, r); });
	hostLaunch(shape + 12, true, reverse, [&] { box_rows(cnt, tmp, prefix, gw, gh, r); });
	hostLaunch(shape + 15, true, reverse, [&] { box_cols(tmp, mcnt, gw, gh, r); });
	hostLaunch(shape + 18, false, reverse, [&] { whiten_normalise(res, rok, msq, mcnt, (int)n, wval, wok); });
	hostLaunch(shape + 21, false, reverse, [&] { fold_tile(wval, wok, gw, gh, qx0, qy0, side, acc); });
	writeAll("wval", wval, 4 * n);
	writeAll("wok", wok, n);
	writeAll("acc", acc, 8 * (size_t)side * side);
	return 0;
}

// hostDoubles is n doubles, each the pattern -12345.0 (a value no kernel output takes, so a value it failed to
// write shows).
static double* hostDoubles(size_t n) {
	double* v = (double*)hostAlloc(n, sizeof(double));
	for (size_t i = 0; i < n; i++) v[i] = -12345.0;
	return v;
}

int main(int argc, char** argv) {
	if (argc != 2) return 2;
	if (strcmp(argv[1], "scores") == 0 || strcmp(argv[1], "scores-reverse") == 0) {
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
		// 128 threads a block, not the device's 256: the kernel's loops stride by the block's size (it needs more
		// than SCORE_ADDERS), and the fibers' switches (two barriers a chunk) are most of this harness's time.
		int shape[3] = {nbx * nby, 1, 128};
		hostLaunch(shape, true, strcmp(argv[1], "scores-reverse") == 0,
			[&] { block_scores(val, ok, gw, gh, qx0, qy0, bx0, by0, nbx, pilot, side, r, out); });
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
		size_t rows = (size_t)(n + 2 * wrap + 1) * states;
		double* alpha = hostDoubles(rows);
		double* beta = hostDoubles(rows);
		double* out = hostDoubles(n);
		bool reverse = strcmp(argv[1], "decode-reverse") == 0;
		unsigned g0 = (unsigned)hd[3], g1 = (unsigned)hd[4], g2 = (unsigned)hd[5];
		int two[3] = {2, 1, states}, bits[3] = {n, 1, states};
		hostLaunch(two, true, reverse, [&] { conv_decode(llr, n, wrap, K, g0, g1, g2, -INFINITY, alpha, beta); });
		hostLaunch(bits, true, reverse,
			[&] { conv_output(llr, n, wrap, K, g0, g1, g2, -INFINITY, alpha, beta, out); });
		writeAll("info", out, (size_t)n * 8);
		return 0;
	}
	if (strcmp(argv[1], "pilot") == 0 || strcmp(argv[1], "pilot-reverse") == 0) {
		bool reverse = strcmp(argv[1], "pilot-reverse") == 0;
		hostFile in = readAll("pilot");
		int hd[2];
		if (in.size < sizeof hd) { fprintf(stderr, "pilot file size\n"); return 2; }
		memcpy(hd, in.data, sizeof hd);
		int side = hd[0], np = hd[1];
		size_t n = (size_t)side * side;
		if (in.size != sizeof hd + 8 * (size_t)np + 32 * n + 8 * n) { fprintf(stderr, "pilot file size\n"); return 2; }
		const unsigned char* at = in.data + sizeof hd;
		int* pilot = (int*)hostAlloc(np, 4);
		float* sign = (float*)hostAlloc(np, 4);
		int* index = (int*)hostAlloc(8 * n, 4);
		double* acc = (double*)hostAlloc(n, 8);
		memcpy(pilot, at, 4 * (size_t)np);
		memcpy(sign, at + 4 * (size_t)np, 4 * (size_t)np);
		memcpy(index, at + 8 * (size_t)np, 32 * n);
		memcpy(acc, at + 8 * (size_t)np + 32 * n, 8 * n);
		double* accd = (double*)hostPoisoned(8 * n, 8);
		double* sums = hostDoubles(8 * n);
		int shape[3] = {(int)((n + 255) / 256), 8, 256};
		hostLaunch(shape, false, reverse, [&] { pilot_dihedral(acc, index, (int)n, accd); });
		hostLaunch(shape, true, reverse, [&] { pilot_sums(accd, pilot, sign, np, side, sums); });
		double* peaks = hostDoubles(8 * 6);
		int peakShape[3] = {8, 1, PEAK_THREADS};
		hostLaunch(peakShape, true, reverse, [&] { pilot_peaks(sums, side, PILOT_TEST_NORM, peaks); });
		writeAll("sums", sums, 8 * 8 * n);
		writeAll("peaks", peaks, 8 * 6 * 8);
		return 0;
	}
	if (strcmp(argv[1], "grid") == 0 || strcmp(argv[1], "grid-reverse") == 0)
		return runGrid(strcmp(argv[1], "grid-reverse") == 0);
	return 2;
}
