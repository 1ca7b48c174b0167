package cudacodec

import (
	"fmt"

	"filigrane/codec/pardeflate"
)

// deflateSource is the CUDA C of package codec/pardeflate's two device passes, line for line its Go: Tokenize
// and AdlerPart (deflate_tokens, one thread per segment) and EncodeBlock (deflate_encode, one thread per
// block), so that the stream is byte for byte pardeflate.Compress's. The format's constants come from that
// package.
var deflateSource = fmt.Sprintf(`
#define PD_SEG %d
#define PD_BLOCKSEGS %d
#define PD_HASHBITS %d
#define PD_NUMLITLEN %d
#define PD_HISTWORDS %d
#define PD_BLOCKHISTWORDS %d
#define PD_PLANWORDS %d
#define PD_MAXMATCH 258
#define PD_SHORTMATCH %d
#define PD_SHORTDIST %d
`, pardeflate.SegmentSize, pardeflate.BlockSegments, pardeflate.HashBits, pardeflate.NumLitLen,
	pardeflate.HistWords, pardeflate.BlockHistWords, pardeflate.PlanWords, pardeflate.ShortMatch,
	pardeflate.ShortDist) + `
__constant__ unsigned short pd_lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59,
	67, 83, 99, 115, 131, 163, 195, 227, 258};
__constant__ unsigned char pd_lextra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5,
	5, 5, 5, 0};
__constant__ unsigned short pd_dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513,
	769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
__constant__ unsigned char pd_dextra[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10,
	11, 11, 12, 12, 13, 13};

__device__ __forceinline__ unsigned pd_le32(const u8* p)
{
	return (unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24;
}
__device__ __forceinline__ unsigned pd_hash(unsigned v) { return (v * 2654435761u) >> (32 - PD_HASHBITS); }
__device__ __forceinline__ int pd_lcode(int l) { int i = 28; while ((int)pd_lbase[i] > l) i--; return i; }
__device__ __forceinline__ int pd_dcode(int d) { int i = 29; while ((int)pd_dbase[i] > d) i--; return i; }

extern "C" __global__ void zero_words(unsigned* p, long long n)
{
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) p[i] = 0;
}

__device__ __forceinline__ void pd_tokens(int s, const u8* data, long long n, unsigned* tokens, unsigned* counts,
	unsigned* hist, unsigned short* table, unsigned* adler, unsigned short* mine, unsigned short* bytes)
{
	// pardeflate.Tokenize and AdlerPart of segment s. The thread counts its segment's symbols and bytes in shared
	// memory (a segment's counts fit 16 bits), then adds them to its block's histogram.
	for (int i = 0; i < PD_HISTWORDS; i++) mine[i] = 0;
	for (int i = 0; i < 256; i++) bytes[i] = 0;
	const u8* seg = data + (size_t)s * PD_SEG;
	int len = (int)min((long long)PD_SEG, n - (long long)s * PD_SEG);
	unsigned* tok = tokens + (size_t)s * PD_SEG;
	unsigned* t32 = (unsigned*)table;
	for (int i = 0; i < (1 << PD_HASHBITS) / 2; i++) t32[i] = 0;
	int nt = 0, pos = 0;
	while (pos < len) {
		if (pos + 4 <= len) {
			unsigned v = pd_le32(seg + pos);
			unsigned hh = pd_hash(v);
			int c = (int)table[hh] - 1;
			table[hh] = (unsigned short)(pos + 1);
			if (c >= 0 && pd_le32(seg + c) == v) {
				int l = 4;
				while (pos + l < len && l < PD_MAXMATCH && seg[c + l] == seg[pos + l]) l++;
				if (!(l < PD_SHORTMATCH && pos - c > PD_SHORTDIST)) {
					tok[nt++] = 0x80000000u | ((unsigned)l << 16) | (unsigned)(pos - c);
					mine[257 + pd_lcode(l)]++;
					mine[PD_NUMLITLEN + pd_dcode(pos - c)]++;
					int end = pos + l - 1;
					if (end + 4 <= len) table[pd_hash(pd_le32(seg + end))] = (unsigned short)(end + 1);
					pos += l;
					continue;
				}
			}
		}
		tok[nt++] = seg[pos];
		mine[seg[pos]]++;
		pos++;
	}
	counts[s] = (unsigned)nt;
	unsigned long long sa = 0, sb = 0;
	for (int i = 0; i < len; i++) {
		u8 c = seg[i];
		bytes[c]++;
		sa += c;
		sb += (unsigned long long)(len - i) * c;
	}
	adler[2 * s] = (unsigned)(sa % 65521);
	adler[2 * s + 1] = (unsigned)(sb % 65521);
	unsigned* h = hist + (size_t)(s / PD_BLOCKSEGS) * PD_BLOCKHISTWORDS;
	for (int i = 0; i < PD_HISTWORDS; i++)
		if (mine[i]) atomicAdd(&h[i], (unsigned)mine[i]);
	for (int i = 0; i < 256; i++)
		if (bytes[i]) atomicAdd(&h[PD_HISTWORDS + i], (unsigned)bytes[i]);
}

// deflate_tokens runs one segment per thread block of one thread (the threads of a warp would diverge at every
// token), its match table in shared memory: 16 KiB a block, so 13 blocks share a multiprocessor. With the table
// in global memory (and 32 blocks a multiprocessor) 16 12 MP images at once went through at 24 images/s, against
// 107 (H200).
extern "C" __global__ void deflate_tokens(const u8* data, long long n, int nseg, unsigned* tokens,
	unsigned* counts, unsigned* hist, unsigned* adler)
{
	__shared__ unsigned short mine[PD_HISTWORDS];
	__shared__ unsigned short bytes[256];
	__shared__ __align__(16) unsigned short table[1 << PD_HASHBITS];
	int s = blockIdx.x;
	if (s >= nseg) return;
	pd_tokens(s, data, n, tokens, counts, hist, table, adler, mine, bytes);
}

__device__ __forceinline__ void pd_put(u8*& out, unsigned long long& acc, int& n, unsigned v, int nb)
{
	acc |= (unsigned long long)v << n;
	n += nb;
	while (n >= 8) {
		*out++ = (u8)acc;
		acc >>= 8;
		n -= 8;
	}
}

extern "C" __global__ void deflate_encode(const u8* data, long long ndata, const unsigned* tokens,
	const unsigned* counts, const unsigned* plans, int nblocks, int nseg, u8* outBase)
{
	// pardeflate.EncodeBlock of block b, from its plan (pardeflate.Plan.Words); one thread a thread block.
	int b = blockIdx.x;
	if (b >= nblocks) return;
	const unsigned* code = plans + (size_t)b * PD_PLANWORDS;
	int headerBits = (int)code[PD_HISTWORDS];
	unsigned offset = code[PD_HISTWORDS + 1];
	int last = (int)code[PD_HISTWORDS + 2];
	int literals = (int)code[PD_HISTWORDS + 3];
	const u8* header = (const u8*)(code + PD_HISTWORDS + 4);
	u8* out = outBase + offset;
	unsigned long long acc = 0;
	int n = 0;
	for (int i = 0; i < headerBits; i += 8) pd_put(out, acc, n, header[i / 8], min(8, headerBits - i));
	if (literals) {
		long long i1 = min(ndata, (long long)(b + 1) * PD_BLOCKSEGS * PD_SEG);
		for (long long i = min(ndata, (long long)b * PD_BLOCKSEGS * PD_SEG); i < i1; i++) {
			unsigned c = code[data[i]];
			pd_put(out, acc, n, c & 0xffff, (int)(c >> 16));
		}
	}
	int s1 = literals ? 0 : min(nseg, (b + 1) * PD_BLOCKSEGS);
	for (int s = b * PD_BLOCKSEGS; s < s1; s++) {
		const unsigned* tok = tokens + (size_t)s * PD_SEG;
		int nt = (int)counts[s];
		for (int i = 0; i < nt; i++) {
			unsigned t = tok[i];
			if (!(t & 0x80000000u)) {
				unsigned c = code[t & 0xff];
				pd_put(out, acc, n, c & 0xffff, (int)(c >> 16));
				continue;
			}
			int l = (int)(t >> 16) & 0x1ff, d = (int)(t & 0xffff);
			int lc = pd_lcode(l);
			unsigned c = code[257 + lc];
			pd_put(out, acc, n, c & 0xffff, (int)(c >> 16));
			pd_put(out, acc, n, (unsigned)(l - (int)pd_lbase[lc]), pd_lextra[lc]);
			int dc = pd_dcode(d);
			c = code[PD_NUMLITLEN + dc];
			pd_put(out, acc, n, c & 0xffff, (int)(c >> 16));
			pd_put(out, acc, n, (unsigned)(d - (int)pd_dbase[dc]), pd_dextra[dc]);
		}
	}
	unsigned c = code[256];
	pd_put(out, acc, n, c & 0xffff, (int)(c >> 16));
	if (!last) {
		pd_put(out, acc, n, 0, 3);
		if (n > 0) *out++ = (u8)acc;
		out[0] = 0;
		out[1] = 0;
		out[2] = 0xff;
		out[3] = 0xff;
	} else if (n > 0) {
		*out++ = (u8)acc;
	}
}
`
