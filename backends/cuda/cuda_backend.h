/*
 * backends/cuda/cuda_backend.h - the CUDA backend's objects.
 *
 * The ops are the shared GPU layer's (backends/gpu/); this backend supplies
 * the context, the buffers and `launch` (cuda.c) over the driver API opened
 * at run time (cuda_driver.c), and the kernels compiled by nvcc into a
 * fatbin that the build embeds (tally__cuda_fatbin).
 */
#ifndef TALLY_CUDA_BACKEND_H
#define TALLY_CUDA_BACKEND_H

#include "../gpu/gpu.h"
#include "cuda_driver.h"

typedef struct tally__cuda_context {
    tally__gpu_context gpu; /* first: the front end and backends/gpu/ see only this */
    CUdevice device;
    CUcontext primary;      /* the device's primary context, retained */
    CUstream stream;        /* every op, copy and fill is enqueued here */
    int own_stream;         /* 1 when tally created the stream (and destroys it) */
    int stream_ready;       /* 1 once `stream` is set; 0 is a valid handle (the default stream) */
    CUmodule module;
    CUfunction kernels[TALLY__KERNEL_COUNT];
} tally__cuda_context;

typedef struct tally__cuda_buffer {
    struct tally_buffer base;
    CUdeviceptr pointer;    /* 0 for an empty buffer */
} tally__cuda_buffer;

/* The ops table (the front end's view) and the kernel launch (the shared
 * GPU layer's view, each context's `dev`), defined by TALLY__GPU_BACKEND
 * at the end of cuda.c. */
extern const tally__backend_ops tally__cuda_ops;
extern const tally__gpu_device_ops tally__cuda_device_ops;

/* The kernels as a fatbin (machine code for each supported architecture plus
 * PTX), generated at build time by scripts/embed_binary.py from nvcc's
 * output. Aligned for cuModuleLoadData. */
extern const unsigned char tally__cuda_fatbin[];
extern const size_t tally__cuda_fatbin_size;

#endif
