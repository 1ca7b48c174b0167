// deflatehost.cpp runs deflate_tokens and deflate_encode (included from the kernel source as codec.cu) on the
// host over the rows in "rows" with the blocks' plans in "plans", and writes the histograms and Adler-32 parts
// to "hist" and the deflate data to "out" (its size in the second argument). TestDeflateKernelsOnTheHost
// compares them with pardeflate's.
#include "cudahost.h"
#include "codec.cu"
#include "hostio.h"

int main(int argc, char** argv) {
	if (argc != 3) return 2;
	hostFile rows = readAll("rows");
	long long n = (long long)rows.size;
	size_t size = strtoull(argv[1], 0, 10);
	bool encode = argv[2][0] == '1';
	hostFile plans = {nullptr, 0};
	if (encode) plans = readAll("plans");
	int nseg = (int)((n + PD_SEG - 1) / PD_SEG), nblocks = (nseg + PD_BLOCKSEGS - 1) / PD_BLOCKSEGS;
	unsigned* tokens = (unsigned*)hostAlloc((size_t)nseg * PD_SEG, sizeof(unsigned));
	unsigned* counts = (unsigned*)hostAlloc(nseg, sizeof(unsigned));
	size_t nhist = (size_t)nblocks * PD_BLOCKHISTWORDS + 2 * nseg;
	unsigned* hist = (unsigned*)hostAlloc(nhist, sizeof(unsigned));
	blockDim.x = 1;
	for (int s = 0; s < nseg; s++) {
		blockIdx.x = s;
		deflate_tokens(rows.data, n, nseg, tokens, counts, hist, hist + (size_t)nblocks * PD_BLOCKHISTWORDS);
	}
	writeAll("hist", hist, nhist * 4);
	if (!encode) return 0;
	unsigned char* out = (unsigned char*)hostAlloc(size + 64, 1);
	for (size_t i = 0; i < size + 64; i++) out[i] = 0xa5;
	for (int b = 0; b < nblocks; b++) {
		blockIdx.x = b;
		deflate_encode(rows.data, n, tokens, counts, (const unsigned*)plans.data, nblocks, nseg, out);
	}
	for (size_t i = size; i < size + 64; i++)
		if (out[i] != 0xa5) { fprintf(stderr, "wrote past the stream's end\n"); return 1; }
	writeAll("out", out, size);
	return 0;
}
