// cudahost.h lets the kernels' CUDA C compile as host C++ for the host harnesses (TestDeflateKernelsOnTheHost,
// TestDetectKernelsOnTheHost): the CUDA qualifiers are dropped, __shared__ variables are statics (one thread
// block runs at a time, so they are the block's), and atomics are plain operations. It and the harnesses use the
// C library's headers only: the C++ library's would be most of the compiler's time, which every test run pays.
//
// A launch is the harness's loop over blockIdx.x. Kernels without barriers run their threads one after another
// in that loop (threadIdx.x set before each call). A kernel with __syncthreads runs its block with
// hostBlockFibers: each CUDA thread a fiber on this one host thread, run until its next barrier, thread after
// thread, phase after phase, in ascending or descending thread order. A barrier missing between a write and a
// read of two threads shows in one of the two orders (the reader runs before the writer), deterministically.
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __constant__
#define __shared__ static
#define __align__(x)
struct uint3s { unsigned x, y, z; };
static uint3s blockIdx, blockDim, gridDim, threadIdx;
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p += v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p += v; return o; }
static inline int atomicOr(int* p, int v) { int o = *p; *p |= v; return o; }
static inline unsigned atomicOr(unsigned* p, unsigned v) { unsigned o = *p; *p |= v; return o; }
// CUDA's max and min, as std::max and std::min (the first on ties).
template <class T> static inline T max(T a, T b) { return a < b ? b : a; }
template <class T> static inline T min(T a, T b) { return b < a ? b : a; }

// A fiber switch. On x86-64 (System V) a fiber is its saved stack pointer: hostFiberSwitch(&from, to) pushes the
// callee-saved registers on the running stack, stores the stack pointer in from, loads to and pops the other
// fiber's registers, so a switch is a few instructions. glibc's swapcontext also saves and restores the signal
// mask with a system call each switch, which was most of this harness's time (a 256-thread block meets ~21
// barriers a trellis step); other architectures and object formats keep it (define HOST_FIBERS_UCONTEXT to use
// it here too). The switch returns into another stack, which a CPU's shadow stack would refuse: the harness is
// compiled with -fcf-protection=none, which leaves the program without one.
#if defined(__x86_64__) && defined(__ELF__) && !defined(HOST_FIBERS_UCONTEXT)
typedef void* hostFiber;
extern "C" void hostFiberSwitch(hostFiber* from, hostFiber to);
asm(".text\n"
    ".globl hostFiberSwitch\n"
    ".type hostFiberSwitch, @function\n"
    "hostFiberSwitch:\n"
    "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
    "\tmovq %rsp, (%rdi)\n"
    "\tmovq %rsi, %rsp\n"
    "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
    "\tret\n"
    ".size hostFiberSwitch, .-hostFiberSwitch\n");
// hostFiberStart makes f a fiber that starts in entry (which must never return) on the stack [lo, lo+size): the
// six registers hostFiberSwitch pops (zeros), then entry as the return address, placed so that entry starts
// with the stack aligned as after a call (rsp + 8 a multiple of 16).
static void hostFiberStart(hostFiber* f, char* lo, size_t size, void (*entry)()) {
	size_t top = ((size_t)lo + size) & ~(size_t)15;
	void** sp = (void**)(top - 64);
	for (int i = 0; i < 6; i++) sp[i] = nullptr;
	sp[6] = (void*)entry;
	sp[7] = nullptr;
	*f = sp;
}
#else
#include <ucontext.h>
typedef ucontext_t hostFiber;
static void hostFiberSwitch(hostFiber* from, hostFiber& to) { swapcontext(from, &to); }
static void hostFiberStart(hostFiber* f, char* lo, size_t size, void (*entry)()) {
	getcontext(f);
	f->uc_stack.ss_sp = lo;
	f->uc_stack.ss_size = size;
	f->uc_link = nullptr;
	makecontext(f, entry, 0);
}
#endif

// The running block's state: its fibers, the host thread's own context, the fiber running, the kernel, and
// which fibers have finished and how many barriers each has met.
static struct {
	hostFiber* fibers;
	hostFiber main;
	unsigned cur;
	bool running;
	void (*run)(void*);
	void* kernel;
	char* done;
	long* barriers;
} hostBlockState;

static inline void __syncthreads() {
	if (!hostBlockState.running) return; // a kernel run one thread at a time: nothing to wait for
	hostBlockState.barriers[hostBlockState.cur]++;
	hostFiberSwitch(&hostBlockState.fibers[hostBlockState.cur], hostBlockState.main);
}

static void hostFiberEntry() {
	hostBlockState.run(hostBlockState.kernel);
	hostBlockState.done[hostBlockState.cur] = 1;
	hostFiberSwitch(&hostBlockState.fibers[hostBlockState.cur], hostBlockState.main); // never resumed
	abort();
}

// hostAlloc is calloc that exits with status 2 when memory runs out.
static void* hostAlloc(size_t n, size_t size) {
	void* p = calloc(n ? n : 1, size);
	if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
	return p;
}

// hostBlockFibers runs f as one thread block of blockDim.x threads (set it first), each thread a fiber that runs
// until its next barrier, in ascending thread order (descending when reverse), phase after phase. It exits the
// program with status 1 when the threads met different numbers of barriers (a kernel that would hang a GPU).
template <class F> static void hostBlockFibers(F f, bool reverse) {
	unsigned n = blockDim.x;
	const size_t stackSize = 1 << 16;
	hostFiber* fibers = (hostFiber*)hostAlloc(n, sizeof(hostFiber));
	char* done = (char*)hostAlloc(n, 1);
	long* barriers = (long*)hostAlloc(n, sizeof(long));
	char* stacks = (char*)malloc(n * stackSize); // not cleared: the kernel touches a few pages of each
	if (!stacks) { fprintf(stderr, "out of memory\n"); exit(2); }
	hostBlockState.fibers = fibers;
	hostBlockState.done = done;
	hostBlockState.barriers = barriers;
	hostBlockState.kernel = &f;
	hostBlockState.run = [](void* k) { (*(F*)k)(); };
	for (unsigned t = 0; t < n; t++) hostFiberStart(&fibers[t], stacks + t * stackSize, stackSize, hostFiberEntry);
	hostBlockState.running = true;
	for (bool left = true; left;) {
		left = false;
		for (unsigned i = 0; i < n; i++) {
			unsigned t = reverse ? n - 1 - i : i;
			if (done[t]) continue;
			hostBlockState.cur = t;
			threadIdx = {t, 0, 0};
			hostFiberSwitch(&hostBlockState.main, fibers[t]);
			left = left || !done[t];
		}
	}
	hostBlockState.running = false;
	for (unsigned t = 1; t < n; t++)
		if (barriers[t] != barriers[0]) {
			fprintf(stderr, "thread %u met %ld barriers, thread 0 %ld\n", t, barriers[t], barriers[0]);
			exit(1);
		}
	free(stacks);
	free(barriers);
	free(done);
	free(fibers);
}
