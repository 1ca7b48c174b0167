// detecthost.cpp runs the detector's kernels (included from the kernel source as codec.cu) on the host.
//   detecthost scores: reads "grid" (int32 gw, gh, qx0, qy0, bx0, by0, nbx, nby, side, r; float32 val[gw·gh];
//     uint8 ok[gw·gh]; float32 pilot[side·side]) and writes block_scores' output to "scores".
//   detecthost decode: reads "llr" (int32 n, wrap, K, g0, g1, g2; float64 llr[3n]) and writes conv_decode's
//     output to "info", the block's 2^(K-1) threads run by hostBlock (cudahost.h).
// TestDetectKernelsOnTheHost compares the outputs with the codec's.
#include "cudahost.h"
#include "codec.cu"
#include "hostio.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
	if (argc != 2) return 2;
	if (strcmp(argv[1], "scores") == 0) {
		std::vector<unsigned char> in = readAll("grid");
		int hd[10];
		memcpy(hd, in.data(), sizeof hd);
		int gw = hd[0], gh = hd[1], qx0 = hd[2], qy0 = hd[3], bx0 = hd[4], by0 = hd[5], nbx = hd[6], nby = hd[7],
			side = hd[8], r = hd[9];
		size_t n = (size_t)gw * gh;
		if (in.size() != sizeof hd + 5 * n + 4 * (size_t)side * side) { fprintf(stderr, "grid file size\n"); return 2; }
		std::vector<float> val(n), pilot((size_t)side * side);
		memcpy(val.data(), in.data() + sizeof hd, 4 * n);
		const unsigned char* ok = in.data() + sizeof hd + 4 * n;
		memcpy(pilot.data(), in.data() + sizeof hd + 5 * n, 4 * (size_t)side * side);
		int d = 2 * r + 1;
		std::vector<double> out((size_t)nbx * nby * (2 + d * d), -12345.0);
		blockDim.x = 64;
		for (int b = 0; b < nbx * nby; b++) {
			blockIdx.x = b;
			for (unsigned t = 0; t < blockDim.x; t++) {
				threadIdx.x = t;
				block_scores(val.data(), ok, gw, gh, qx0, qy0, bx0, by0, nbx, pilot.data(), side, r, out.data());
			}
		}
		writeAll("scores", out.data(), out.size() * 8);
		return 0;
	}
	if (strcmp(argv[1], "decode") == 0 || strcmp(argv[1], "decode-threads") == 0) {
		std::vector<unsigned char> in = readAll("llr");
		int hd[6];
		memcpy(hd, in.data(), sizeof hd);
		int n = hd[0], wrap = hd[1], K = hd[2];
		if (in.size() != sizeof hd + 24 * (size_t)n) { fprintf(stderr, "llr file size\n"); return 2; }
		std::vector<double> llr(3 * (size_t)n);
		memcpy(llr.data(), in.data() + sizeof hd, 24 * (size_t)n);
		int states = 1 << (K - 1);
		std::vector<double> alpha((size_t)(n + 2 * wrap + 1) * states), out(n, -12345.0);
		blockDim.x = states;
		blockIdx.x = 0;
		auto kernel = [&] {
			conv_decode(llr.data(), n, wrap, K, (unsigned)hd[3], (unsigned)hd[4], (unsigned)hd[5], -INFINITY, alpha.data(), out.data());
		};
		if (strcmp(argv[1], "decode") == 0) hostBlockFibers(kernel);
		else hostBlock(kernel);
		writeAll("info", out.data(), out.size() * 8);
		return 0;
	}
	return 2;
}
