// cudahost.h lets the deflate kernels' CUDA C compile as host C++ for TestDeflateKernelsOnTheHost: the CUDA
// qualifiers are dropped, a launch is a loop over blockIdx.x (the deflate passes run one thread a block), and
// atomics are plain additions (the loop runs the blocks one after another).
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
static uint3s blockIdx, threadIdx, blockDim, gridDim;
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p += v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p += v; return o; }
static inline int atomicOr(int* p, int v) { int o = *p; *p |= v; return o; }
static inline unsigned atomicOr(unsigned* p, unsigned v) { unsigned o = *p; *p |= v; return o; }
static inline void __syncthreads() {}
using std::max;
using std::min;
