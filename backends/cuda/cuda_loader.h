/*
 * backends/cuda/cuda_loader.h - the CUDA driver API, opened at run time: the
 * one place that names the driver's entry points, for the library, the tests
 * and the bench alike.
 *
 * tally never links libcuda or libcudart: a library that did would fail to
 * load on every machine without an NVIDIA driver, and the AUTO chain could
 * not fall through to OpenCL or the host. cuda.h is included for its types
 * only. Every driver entry point that tally, its tests or its bench call is
 * named once below, by the symbol the driver exports (the _v2 names where
 * cuda.h maps a call to a versioned symbol), and the list is expanded into
 * a table of function pointers and into the dlsym loop that fills it.
 *
 * This is the non-exported static library tally_cuda_loader (see
 * backends/cuda/meson.build). It depends on nothing of libtally but the
 * public tally_status, so an executable that links libtally's shared library
 * can link it too; the library's own error reporting around it is in
 * cuda_driver.h.
 */
#ifndef TALLY_CUDA_LOADER_H
#define TALLY_CUDA_LOADER_H

#include <stddef.h>

#include <cuda.h>

#include "tally.h"

/* The soname of the driver library that the NVIDIA driver installs. */
#define TALLY__CUDA_LIBRARY "libcuda.so.1"

/* X(exported symbol, parameter list). All return CUresult; cuda.h must
 * declare each with these parameters (checked at compile time). The first
 * group is the library's, the second what only the tests and the bench call
 * as an application would (events, contexts of their own, synchronous
 * copies). */
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
    X(cuFuncSetAttribute, (CUfunction function, CUfunction_attribute attribute, int value)) \
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
       unsigned int shared_bytes, CUstream stream, void **params, void **extra))          \
    X(cuCtxSetCurrent, (CUcontext context))                                               \
    X(cuCtxGetCurrent, (CUcontext *context))                                              \
    X(cuCtxDestroy_v2, (CUcontext context))                                               \
    X(cuEventCreate, (CUevent *event, unsigned int flags))                                \
    X(cuEventDestroy_v2, (CUevent event))                                                 \
    X(cuEventRecord, (CUevent event, CUstream stream))                                    \
    X(cuEventSynchronize, (CUevent event))                                                \
    X(cuMemGetInfo_v2, (size_t *free_bytes, size_t *total_bytes))                         \
    X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t bytes))                  \
    X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t bytes))                        \
    X(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream)) \
    X(cuMemsetD32_v2, (CUdeviceptr dst, unsigned int value, size_t count))                \
    X(cuModuleLoadDataEx,                                                                 \
      (CUmodule *module, const void *image, unsigned int count, CUjit_option *options,    \
       void **values))

/* Y(table member, first symbol, second symbol or NULL, parameter list): the
 * entry points whose name depends on the driver's age, so cuda.h declares
 * them under another name or not at all (their types are not checked). The
 * first symbol the driver exports is taken. cuEventElapsedTime_v2 exists
 * from CUDA 12.8 on, the unversioned one before (same parameters);
 * cuCtxCreate_v2 is the three-argument form that CUDA 13's cuda.h no longer
 * declares and every driver still exports. */
#define TALLY__CUDA_RENAMED(Y)                                                               \
    Y(event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime",                          \
      (float *milliseconds, CUevent start, CUevent end))                                     \
    Y(ctx_create, "cuCtxCreate_v2", NULL, (CUcontext *context, unsigned int flags, CUdevice device))

/* The resolved entry points; valid after tally__cuda_open() returned OK. */
typedef struct tally__cuda_api {
#define TALLY__CUDA_FIELD(sym, params) CUresult (*sym) params;
    TALLY__CUDA_SYMBOLS(TALLY__CUDA_FIELD)
#undef TALLY__CUDA_FIELD
#define TALLY__CUDA_RENAMED_FIELD(member, first, second, params) CUresult (*member) params;
    TALLY__CUDA_RENAMED(TALLY__CUDA_RENAMED_FIELD)
#undef TALLY__CUDA_RENAMED_FIELD
} tally__cuda_api;

extern tally__cuda_api tally__cu;

/*
 * Opens libcuda.so.1, resolves every symbol and calls cuInit(0), once per
 * process (later calls return the first outcome). Returns TALLY_OK, or
 * LIBRARY_MISSING (no library, a missing symbol, a stub or too old a driver),
 * NO_DEVICE (cuInit found no GPU) or BACKEND_ERROR with *message (when
 * message is not NULL) set to a one-line reason that lives as long as the
 * process. When cuInit failed the table is filled all the same. Any thread.
 */
tally_status tally__cuda_open(const char **message);

/* Maps a driver result to the tally status that describes it. */
tally_status tally__cuda_status(CUresult result);

/* Writes "CUDA_ERROR_X: <driver text>" for a driver result into dst. Works
 * before and after a failed open. */
void tally__cuda_describe(CUresult result, char *dst, size_t capacity);

#endif
