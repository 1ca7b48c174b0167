// cudahost.h lets the kernels' CUDA C compile as host C++ for the host harnesses (TestDeflateKernelsOnTheHost,
// TestDetectKernelsOnTheHost): the CUDA qualifiers are dropped, __shared__ variables are statics (one thread
// block runs at a time, so they are the block's), and atomics are plain operations.
//
// A launch is the harness's loop over blockIdx.x. Kernels without barriers run their threads one after another
// in that loop (threadIdx.x set before each call). A kernel with __syncthreads runs its block with hostBlock
// (C++20): one host thread per CUDA thread, threadIdx thread-local, and __syncthreads a std::barrier of all of
// them, so the phases between barriers run concurrently as on the device and a missing barrier shows up as a
// data race (and a wrong result) here too.
#include <algorithm>
#include <cmath>
#include <cstddef>
#define __global__
#define __device__
#define __forceinline__ inline
#define __constant__
#define __shared__ static
#define __align__(x)
struct uint3s { unsigned x, y, z; };
static uint3s blockIdx, blockDim, gridDim;
static thread_local uint3s threadIdx;
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p += v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p += v; return o; }
static inline int atomicOr(int* p, int v) { int o = *p; *p |= v; return o; }
static inline unsigned atomicOr(unsigned* p, unsigned v) { unsigned o = *p; *p |= v; return o; }
using std::max;
using std::min;
#if __cplusplus >= 202002L
#include <barrier>
#include <thread>
#include <vector>
static std::barrier<>* hostBarrier;
static inline void __syncthreads() { if (hostBarrier) hostBarrier->arrive_and_wait(); }
// hostBlock runs f as one thread block of blockDim.x threads (set it first) with working barriers.
template <class F> static void hostBlock(F f) {
	std::barrier<> b(blockDim.x);
	hostBarrier = &b;
	std::vector<std::thread> ts;
	for (unsigned t = 0; t < blockDim.x; t++) ts.emplace_back([&f, t] { threadIdx = {t, 0, 0}; f(); });
	for (auto& t : ts) t.join();
	hostBarrier = nullptr;
}
#else
static inline void __syncthreads() {}
#endif
