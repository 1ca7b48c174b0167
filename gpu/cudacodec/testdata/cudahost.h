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
#include <ucontext.h>
static std::barrier<>* hostBarrier;
static ucontext_t* hostFiberMain;
static ucontext_t* hostFiberCur;
static inline void __syncthreads() {
	if (hostBarrier) hostBarrier->arrive_and_wait();
	else if (hostFiberCur) swapcontext(hostFiberCur, hostFiberMain);
}
// hostBlock runs f as one thread block of blockDim.x threads (set it first) with working barriers: one host
// thread per CUDA thread, the barrier a std::barrier.
template <class F> static void hostBlock(F f) {
	std::barrier<> b(blockDim.x);
	hostBarrier = &b;
	std::vector<std::thread> ts;
	for (unsigned t = 0; t < blockDim.x; t++) ts.emplace_back([&f, t] { threadIdx = {t, 0, 0}; f(); });
	for (auto& t : ts) t.join();
	hostBarrier = nullptr;
}
// hostBlockFibers runs the same block on this thread, each CUDA thread a fiber (ucontext) that runs until its
// next barrier, in thread order, phase after phase: deterministic and many times faster than hostBlock, but a
// missing barrier shows up only where a thread reads what a later thread writes.
template <class F> static void hostBlockFibers(F f) {
	static F* fp;
	static std::vector<char>* donep;
	static unsigned cur;
	unsigned n = blockDim.x;
	std::vector<ucontext_t> fibers(n);
	std::vector<std::vector<char>> stacks(n, std::vector<char>(1 << 16));
	std::vector<char> done(n, 0);
	ucontext_t main;
	fp = &f;
	donep = &done;
	hostFiberMain = &main;
	for (unsigned t = 0; t < n; t++) {
		getcontext(&fibers[t]);
		fibers[t].uc_stack.ss_sp = stacks[t].data();
		fibers[t].uc_stack.ss_size = stacks[t].size();
		fibers[t].uc_link = &main;
		makecontext(&fibers[t], (void (*)()) + [] { (*fp)(); (*donep)[cur] = 1; }, 0);
	}
	for (bool left = true; left;) {
		left = false;
		for (unsigned t = 0; t < n; t++) {
			if (done[t]) continue;
			cur = t;
			threadIdx = {t, 0, 0};
			hostFiberCur = &fibers[t];
			swapcontext(&main, &fibers[t]);
			left = left || !done[t];
		}
	}
	hostFiberCur = nullptr;
}
#else
static inline void __syncthreads() {}
#endif
