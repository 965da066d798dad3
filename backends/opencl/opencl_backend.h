/*
 * backends/opencl/opencl_backend.h - the OpenCL backend's objects and its
 * internal entry points (opencl.c, opencl_api.c, opencl_program.c; tests
 * reach the hooks through the static library).
 */
#ifndef TALLY_OPENCL_BACKEND_H
#define TALLY_OPENCL_BACKEND_H

#include "kernels/abi.h"
#include "../gpu/gpu.h"
#include "opencl_api.h"

typedef struct tally__cl_context {
    tally__gpu_context gpu; /* first: the shared GPU layer's base */
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;      /* retained (created or the app's) */
    cl_command_queue queue;  /* retained (created or the app's) */
    int device_retained;     /* 1 once clRetainDevice succeeded */
    cl_program program;
    cl_program cpu_program;  /* the twins' program (TALLY_CL_CPU=1) when cpu_kernels, else NULL */
    cl_kernel kernels[TALLY__KERNEL_COUNT];
    cl_ulong max_alloc;      /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    uint32_t base_align;     /* CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes */
    int fma_emulated;        /* no CL_FP_FMA: fma() runs in software (same bits, slower) */
    int hw_div_sqrt;         /* programs built with TALLY__CL_HW_DIV_SQRT (opencl.c's pick_div_sqrt) */
    unsigned cpu_lanes;      /* the twins' TALLY_CL_CPU_LANES, 8 or 16 (opencl.c's pick_cpu_lanes) */
    int program_from_cache;  /* 1 when the program binary came from the disk cache */
    int host_unified;        /* CL_DEVICE_HOST_UNIFIED_MEMORY: the device shares the host's memory */
    int cpu_kernels;         /* launch the CPU-shaped twins (kernels/cpu.h; opencl.c's pick_kernel_shape) */
    struct tally__cl_buffer *host_wrapped; /* list of live tally_buffer_wrap_host buffers */
} tally__cl_context;

typedef struct tally__cl_buffer {
    struct tally_buffer base;
    cl_mem mem; /* retained (created or the app's) */
    void *host_ptr; /* app memory behind a CL_MEM_USE_HOST_PTR buffer, else NULL */
    int host_listed; /* 1 for a tally_buffer_wrap_host buffer (in the context's list) */
    struct tally__cl_buffer *next_host, *prev_host; /* the context's host_wrapped list */
} tally__cl_buffer;

/* The ops table (the front end's view) and the kernel launch (the shared
 * GPU layer's view, each context's `dev`), defined by TALLY__GPU_BACKEND
 * at the end of opencl.c. */
extern const tally__backend_ops tally__opencl_ops;
extern const tally__gpu_device_ops tally__opencl_device_ops;

/* The program's text, baked in at build time (scripts/embed_cl.py). */
extern const char tally__opencl_source[];
extern const size_t tally__opencl_source_size;

/* The only build options tally ever passes: no fast or relaxed math, no
 * mad, no flushing of denormals (they all change result bits). A context
 * that launches the CPU-shaped twins (cpu_kernels) builds a second program
 * from the same text with TALLY_CL_CPU=1: the twins alone, with their
 * bodies and every shared function inlined (tally/dialect.h), which
 * changes how the text compiles, never what it computes. */
#define TALLY__CL_BUILD_OPTIONS "-cl-std=CL1.2"
#define TALLY__CL_BUILD_OPTIONS_CPU "-cl-std=CL1.2 -DTALLY_CL_CPU=1"
/* Appended to both where the device rounds division and square root
 * correctly (CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT): then tally/dialect.h's
 * TALLY_HW_DIV_SQRT lets the portable functions use them, with the same
 * bits (see there). */
#define TALLY__CL_HW_DIV_SQRT " -cl-fp32-correctly-rounded-divide-sqrt -DTALLY_HW_DIV_SQRT=1"

/* Builds (or loads from the on-disk cache) the program of `source` under
 * `options` for cc's device into *out; *from_cache says which. Errors go
 * to cc's message; a build failure carries the build log. */
tally_status tally__cl_build_program(tally__cl_context *cc, const char *source, size_t source_size,
                                     const char *options, cl_program *out, int *from_cache);

/* The likely cause of a platform without devices (the driver's kernel
 * cache directory, /sys) and how to skip OpenCL, as text that starts with
 * "; " for the end of a NO_DEVICE message (opencl_hint.c). */
const char *tally__cl_no_device_hint(char *buf, size_t capacity);

/* ---- Internal hooks for tests (hidden in the shared library). ---- */

/* 1 if ctx's program binary came from the disk cache, 0 if it was built
 * from source, -1 if ctx is not an OpenCL context. */
int tally__opencl_program_from_cache(const tally_context *ctx);
/* 1 if ctx's device lacks CL_FP_FMA (fma is emulated), 0 if not, -1 if ctx
 * is not an OpenCL context. */
int tally__opencl_fma_emulated(const tally_context *ctx);
/* tally_context_create(TALLY_BACKEND_OPENCL, device) with another program
 * text (a deliberately broken one, to test build failures). */
tally_status tally__opencl_context_create_with_source(int device, const char *source, tally_context **out);

#endif /* TALLY_OPENCL_BACKEND_H */
