/*
 * A stand-in for libcuda.so.1 used by the gpu package's tests on machines without a GPU: it exports every
 * driver API symbol package cuda binds, and answers discovery calls as a driver would. Build variants:
 *   -DFAKE_INIT_RESULT=100  cuInit fails with CUDA_ERROR_NO_DEVICE
 *   -DFAKE_DEVICES=0        cuInit succeeds, no device
 *   -DFAKE_DEVICES=2        two 8 GiB compute-capability 9.0 devices
 * Memory, module and launch calls answer CUDA_ERROR_NOT_SUPPORTED (801): the fake runs no kernels.
 */
#include <stddef.h>
#include <string.h>

#ifndef FAKE_INIT_RESULT
#define FAKE_INIT_RESULT 0
#endif
#ifndef FAKE_DEVICES
#define FAKE_DEVICES 1
#endif
#define NOT_SUPPORTED 801

int cuGetErrorName(int r, const char **s) {
	switch (r) {
	case 0: *s = "CUDA_SUCCESS"; return 0;
	case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
	case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
	case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; return 0;
	case NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return 0;
	}
	*s = NULL;
	return 1;
}

int cuGetErrorString(int r, const char **s) {
	switch (r) {
	case 0: *s = "no error"; return 0;
	case 1: *s = "invalid argument"; return 0;
	case 100: *s = "no CUDA-capable device is detected"; return 0;
	case 101: *s = "invalid device ordinal"; return 0;
	case NOT_SUPPORTED: *s = "operation not supported"; return 0;
	}
	*s = NULL;
	return 1;
}

int cuInit(unsigned int flags) { return flags == 0 ? FAKE_INIT_RESULT : 1; }
int cuDriverGetVersion(int *v) { *v = 12040; return 0; }
int cuDeviceGetCount(int *n) { *n = FAKE_DEVICES; return 0; }

int cuDeviceGet(int *d, int ordinal) {
	if (ordinal < 0 || ordinal >= FAKE_DEVICES) return 101;
	*d = ordinal;
	return 0;
}

int cuDeviceGetName(char *name, int len, int d) {
	const char *n = d == 0 ? "Fake GPU 0" : "Fake GPU 1";
	if (len <= 0) return 1;
	strncpy(name, n, (size_t)len - 1);
	name[len - 1] = 0;
	return 0;
}

int cuDeviceTotalMem_v2(size_t *bytes, int d) { *bytes = (size_t)8 << 30; return 0; }

int cuDeviceGetAttribute(int *v, int attr, int d) {
	switch (attr) {
	case 16: *v = 132; return 0;
	case 75: *v = 9; return 0;
	case 76: *v = 0; return 0;
	}
	return 1;
}

int cuCtxCreate_v2(void **c, unsigned int flags, int d) { return NOT_SUPPORTED; }
int cuCtxDestroy_v2(void *c) { return NOT_SUPPORTED; }
int cuCtxPushCurrent_v2(void *c) { return NOT_SUPPORTED; }
int cuCtxPopCurrent_v2(void **c) { return NOT_SUPPORTED; }
int cuMemAlloc_v2(void *p, size_t n) { return NOT_SUPPORTED; }
int cuMemFree_v2(unsigned long long p) { return NOT_SUPPORTED; }
int cuMemAllocHost_v2(void **p, size_t n) { return NOT_SUPPORTED; }
int cuMemFreeHost(void *p) { return NOT_SUPPORTED; }
int cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) { return NOT_SUPPORTED; }
int cuMemHostUnregister(void *p) { return NOT_SUPPORTED; }
int cuMemcpyHtoD_v2(void) { return NOT_SUPPORTED; }
int cuMemcpyDtoH_v2(void) { return NOT_SUPPORTED; }
int cuMemcpyHtoDAsync_v2(void) { return NOT_SUPPORTED; }
int cuMemcpyDtoHAsync_v2(void) { return NOT_SUPPORTED; }
int cuModuleLoadData(void) { return NOT_SUPPORTED; }
int cuModuleUnload(void) { return NOT_SUPPORTED; }
int cuModuleGetFunction(void) { return NOT_SUPPORTED; }
int cuLaunchKernel(void) { return NOT_SUPPORTED; }
int cuStreamCreate(void) { return NOT_SUPPORTED; }
int cuStreamQuery(void) { return NOT_SUPPORTED; }
int cuStreamSynchronize(void) { return NOT_SUPPORTED; }
int cuStreamDestroy_v2(void) { return NOT_SUPPORTED; }
