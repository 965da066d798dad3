/*
 * backends/cuda/cuda_driver.h - the CUDA driver API, opened at run time.
 *
 * tally never links libcuda or libcudart: a library that did would fail to
 * load on every machine without an NVIDIA driver, and the AUTO chain could
 * not fall through to OpenCL or the host. cuda.h is included for its types
 * only. Every driver entry point tally calls is named once below, by the
 * symbol the driver exports (the _v2 names where cuda.h maps a call to a
 * versioned symbol), and the list is expanded twice: into a table of function
 * pointers and into the dlsym loop that fills it.
 */
#ifndef TALLY_CUDA_DRIVER_H
#define TALLY_CUDA_DRIVER_H

#include <cuda.h>

#include "backend.h"

/* The soname of the driver library that the NVIDIA driver installs. */
#define TALLY__CUDA_LIBRARY "libcuda.so.1"

/* X(exported symbol, parameter list). All return CUresult. */
#define TALLY__CUDA_SYMBOLS(X)                                                            \
    X(cuInit, (unsigned int flags))                                                       \
    X(cuDriverGetVersion, (int *version))                                                 \
    X(cuGetErrorName, (CUresult error, const char **name))                                \
    X(cuGetErrorString, (CUresult error, const char **text))                              \
    X(cuDeviceGetCount, (int *count))                                                     \
    X(cuDeviceGet, (CUdevice *device, int ordinal))                                       \
    X(cuDeviceGetName, (char *name, int length, CUdevice device))                         \
    X(cuDeviceGetAttribute, (int *value, CUdevice_attribute attribute, CUdevice device))  \
    X(cuDevicePrimaryCtxRetain, (CUcontext *context, CUdevice device))                    \
    X(cuDevicePrimaryCtxRelease_v2, (CUdevice device))                                    \
    X(cuCtxPushCurrent_v2, (CUcontext context))                                           \
    X(cuCtxPopCurrent_v2, (CUcontext *context))                                           \
    X(cuStreamCreate, (CUstream *stream, unsigned int flags))                             \
    X(cuStreamDestroy_v2, (CUstream stream))                                              \
    X(cuStreamSynchronize, (CUstream stream))                                             \
    X(cuStreamGetCtx, (CUstream stream, CUcontext *context))                              \
    X(cuModuleLoadData, (CUmodule *module, const void *image))                            \
    X(cuModuleUnload, (CUmodule module))                                                  \
    X(cuModuleGetFunction, (CUfunction *function, CUmodule module, const char *name))     \
    X(cuFuncGetAttribute, (int *value, CUfunction_attribute attribute, CUfunction function)) \
    X(cuMemAlloc_v2, (CUdeviceptr *pointer, size_t bytes))                                \
    X(cuMemFree_v2, (CUdeviceptr pointer))                                                \
    X(cuMemGetAddressRange_v2, (CUdeviceptr *base, size_t *bytes, CUdeviceptr pointer))   \
    X(cuMemcpyHtoDAsync_v2,                                                               \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                  \
    X(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))  \
    X(cuMemsetD32Async, (CUdeviceptr dst, unsigned int value, size_t count, CUstream stream)) \
    X(cuLaunchKernel,                                                                     \
      (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,  \
       unsigned int block_x, unsigned int block_y, unsigned int block_z,                  \
       unsigned int shared_bytes, CUstream stream, void **params, void **extra))

/* The resolved entry points; valid after tally__cuda_load() returned OK. */
typedef struct tally__cuda_api {
#define TALLY__CUDA_FIELD(sym, params) CUresult (*sym) params;
    TALLY__CUDA_SYMBOLS(TALLY__CUDA_FIELD)
#undef TALLY__CUDA_FIELD
} tally__cuda_api;

extern tally__cuda_api tally__cu;

/*
 * Opens libcuda.so.1, resolves every symbol and calls cuInit(0), once per
 * process (later calls return the first outcome). On failure returns
 * LIBRARY_MISSING (no library, a missing symbol, a stub or too old a driver),
 * NO_DEVICE (cuInit found no GPU) or BACKEND_ERROR, with a message on the
 * calling thread's record. Any thread.
 */
tally_status tally__cuda_load(void);

/* Maps a driver result to the tally status that describes it. */
tally_status tally__cuda_status(CUresult result);

/*
 * Reports a failed driver call in one line on ctx (or the thread record when
 * ctx is NULL): "<what> failed: CUDA_ERROR_X: <driver text>", with the status
 * that tally__cuda_status gives. Returns that status.
 */
tally_status tally__cuda_error(tally_context *ctx, CUresult result, const char *what);

#endif
