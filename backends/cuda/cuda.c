/*
 * backends/cuda/cuda.c - the CUDA backend: devices, contexts, buffers and
 * kernel launches over the driver API. The ops themselves are the shared GPU
 * layer's (backends/gpu/), so CUDA and OpenCL run the same kernels with the
 * same arguments in the same order.
 *
 * Contexts live on the device's primary context, the one the CUDA runtime
 * uses, so an app's cudaMalloc pointers and streams work with tally. Every
 * call pushes that context onto the calling thread and pops it before
 * returning: tally works from any thread and leaves the thread's current
 * context as it found it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

/* The widest grid one launch may have in x (every GPU since compute
 * capability 3.0). */
#define TALLY__CUDA_MAX_GROUPS 2147483647u

/* cuMemAlloc returns memory aligned to at least this many bytes. */
#define TALLY__CUDA_ALLOC_ALIGNMENT 256u

/* ------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------ */

static tally__cuda_context *cuda_ctx(tally_context *ctx)
{
    return (tally__cuda_context *)ctx;
}

/* Makes the context's primary context current on this thread. ctx receives
 * the error (NULL: the thread record, during creation). */
static tally_status enter(tally_context *report, const tally__cuda_context *cc)
{
    CUresult r = tally__cu.cuCtxPushCurrent_v2(cc->primary);
    if (r != CUDA_SUCCESS) return tally__cuda_error(report, r, "cuCtxPushCurrent");
    return TALLY_OK;
}

/* Restores the thread's previous current context. Popping what enter()
 * pushed cannot fail, so the result is not needed. */
static void leave(void)
{
    CUcontext popped;
    (void)tally__cu.cuCtxPopCurrent_v2(&popped);
}

/* "CUDA driver 13.0" from the driver's version number (1000 * major +
 * 10 * minor). */
static void driver_description(char *dst, size_t capacity)
{
    int version = 0;
    if (tally__cu.cuDriverGetVersion(&version) != CUDA_SUCCESS) version = 0;
    snprintf(dst, capacity, "CUDA driver %d.%d", version / 1000, (version % 1000) / 10);
}

/* ------------------------------------------------------------------------
 * Devices
 * ------------------------------------------------------------------------ */

static tally_status device_count(int *count)
{
    tally_status st = tally__cuda_load();
    if (st != TALLY_OK) return st;
    CUresult r = tally__cu.cuDeviceGetCount(count);
    if (r != CUDA_SUCCESS) return tally__cuda_error(NULL, r, "cuDeviceGetCount");
    if (*count <= 0)
        return tally__error(NULL, TALLY_NO_DEVICE, "%s found no CUDA device", TALLY__CUDA_LIBRARY);
    return TALLY_OK;
}

static tally_status cuda_devices(tally_device_info *devices, int capacity, int *count)
{
    int n = 0;
    tally_status st = device_count(&n);
    if (st != TALLY_OK) return st;
    char platform[sizeof devices[0].platform];
    driver_description(platform, sizeof platform);
    for (int i = 0; i < n && i < capacity; i++) {
        tally_device_info *info = &devices[i];
        memset(info, 0, sizeof *info);
        info->index = i;
        info->is_gpu = 1;
        snprintf(info->platform, sizeof info->platform, "%s", platform);
        CUdevice device;
        CUresult r = tally__cu.cuDeviceGet(&device, i);
        if (r == CUDA_SUCCESS) r = tally__cu.cuDeviceGetName(info->name, (int)sizeof info->name, device);
        if (r != CUDA_SUCCESS) return tally__cuda_error(NULL, r, "cuDeviceGetName");
    }
    *count = n;
    return TALLY_OK;
}

/* ------------------------------------------------------------------------
 * Contexts
 * ------------------------------------------------------------------------ */

/* Undoes whatever cuda_open() got done; every step tolerates a step that
 * never happened. The caller has pushed the primary context when
 * `entered` is 1. Nothing here reports an error: a failed creation's message
 * must survive its cleanup, and a release has nowhere to report. */
static void teardown(tally__cuda_context *cc, int entered)
{
    if (cc->primary != NULL && !entered)
        entered = tally__cu.cuCtxPushCurrent_v2(cc->primary) == CUDA_SUCCESS;
    if (entered) {
        /* Waiting first means no kernel of tally's is still reading the
         * module or tally's memory when they go away. */
        if (cc->stream_ready) (void)tally__cu.cuStreamSynchronize(cc->stream);
        if (cc->own_stream) (void)tally__cu.cuStreamDestroy_v2(cc->stream);
        if (cc->module != NULL) (void)tally__cu.cuModuleUnload(cc->module);
        leave();
    }
    if (cc->primary != NULL) (void)tally__cu.cuDevicePrimaryCtxRelease_v2(cc->device);
    free(cc);
}

/* A module without machine code for the device names what the device is and
 * what tally carries, so the fix (a newer driver, another GPU) is clear. */
static void explain_module_failure(const tally__cuda_context *cc)
{
    int major = 0, minor = 0;
    if (tally__cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                       cc->device) != CUDA_SUCCESS ||
        tally__cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                       cc->device) != CUDA_SUCCESS)
        return;
    char driver[64], note[320];
    driver_description(driver, sizeof driver);
    snprintf(note, sizeof note,
             " (device compute capability %d.%d, %s; tally carries machine code for sm_75, sm_80, "
             "sm_86, sm_89 and sm_90 and PTX for compute_90, built by CUDA %d.%d)",
             major, minor, driver, CUDA_VERSION / 1000, (CUDA_VERSION % 1000) / 10);
    tally__error_append(NULL, note);
}

/* Loads tally's module into the primary context and resolves every kernel
 * by name, so that a kernel missing from the module fails here rather than
 * in the middle of an op. */
static tally_status load_kernels(tally__cuda_context *cc)
{
    CUresult r = tally__cu.cuModuleLoadData(&cc->module, tally__cuda_fatbin);
    if (r != CUDA_SUCCESS) {
        cc->module = NULL;
        tally_status st = tally__cuda_error(NULL, r, "cuModuleLoadData(tally's kernels)");
        explain_module_failure(cc);
        return st;
    }
    for (int k = 0; k < TALLY__KERNEL_COUNT; k++) {
        const char *name = tally__gpu_kernel_name((tally__kernel_id)k);
        char what[160];
        snprintf(what, sizeof what, "cuModuleGetFunction(%s)", name);
        r = tally__cu.cuModuleGetFunction(&cc->kernels[k], cc->module, name);
        if (r != CUDA_SUCCESS) return tally__cuda_error(NULL, r, what);
        /* Every kernel runs blocks of its group size (TALLY_GPU_GROUP_SIZE
         * but for a few); a kernel that needs too many registers for that
         * cannot be launched. */
        int max_threads = 0;
        r = tally__cu.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                         cc->kernels[k]);
        if (r != CUDA_SUCCESS) return tally__cuda_error(NULL, r, what);
        const uint32_t group = tally__gpu_kernel_group_size((tally__kernel_id)k);
        if (max_threads < (int)group)
            return tally__error(NULL, TALLY_DEVICE_UNSUITABLE,
                                "kernel %s runs at most %d threads per block on %s; tally needs %u",
                                name, max_threads, cc->gpu.base.device_name, group);
    }
    /* A kernel with a stage needs more shared memory than a block gets
     * without asking (48 KiB). Where the device refuses (compute
     * capability 7.5, 8.6 and 8.9 give a block at most 64 or 99 KiB),
     * stage_bytes stays 0 and the op layer never launches one. */
    uint32_t stage = 0;
    int refused = 0;
    for (int k = 0; k < TALLY__KERNEL_COUNT; k++) {
        const uint32_t bytes = tally__gpu_kernel_stage_bytes((tally__kernel_id)k);
        if (bytes == 0) continue;
        if (tally__cu.cuFuncSetAttribute(cc->kernels[k], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         (int)bytes) != CUDA_SUCCESS)
            refused = 1;
        else if (bytes > stage)
            stage = bytes;
    }
    /* Every staged kernel got its bytes (the largest of them), or none runs. */
    cc->gpu.stage_bytes = refused ? 0 : stage;
    return TALLY_OK;
}

/* The stream handles that name a default stream rather than a stream
 * object: 0 (the legacy default stream, as in the runtime API, cuBLAS and
 * CUB), CU_STREAM_LEGACY and CU_STREAM_PER_THREAD. They belong to whatever
 * context is current, which is always the primary context while tally
 * enqueues, so they need no ownership check. */
static int is_default_stream(CUstream stream)
{
    return stream == NULL || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

/* Opens a context on `device`. With use_app_stream 0 tally creates its own
 * non-blocking stream; with 1 every op is enqueued on app_stream exactly, a
 * default-stream handle included, and no stream is ever created. A stream
 * object must belong to the device's primary context. */
static tally_status cuda_open(int device, int use_app_stream, CUstream app_stream, tally_context **out)
{
    int n = 0;
    tally_status st = device_count(&n);
    if (st != TALLY_OK) return st;
    if (device >= n)
        return tally__error(NULL, TALLY_NO_DEVICE, "CUDA device %d does not exist (%d device%s)",
                            device, n, n == 1 ? "" : "s");

    tally__cuda_context *cc = calloc(1, sizeof *cc);
    if (cc == NULL)
        return tally__error(NULL, TALLY_OUT_OF_MEMORY, "cuda backend: out of memory for a context");
    cc->gpu.base.ops = &tally__cuda_ops;
    cc->gpu.dev = &tally__cuda_device_ops;

    CUresult r = tally__cu.cuDeviceGet(&cc->device, device);
    if (r == CUDA_SUCCESS)
        r = tally__cu.cuDeviceGetName(cc->gpu.base.device_name,
                                      (int)sizeof cc->gpu.base.device_name, cc->device);
    if (r != CUDA_SUCCESS) {
        st = tally__cuda_error(NULL, r, "cuDeviceGetName");
        teardown(cc, 0);
        return st;
    }
    /* The shared layer sizes grids by it (never results). */
    int units = 0;
    if (tally__cu.cuDeviceGetAttribute(&units, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, cc->device) ==
            CUDA_SUCCESS &&
        units > 0)
        cc->gpu.compute_units = (uint32_t)units;
    cc->gpu.register_tiles = 1; /* see tally__gpu_context */
    cc->gpu.cpu_twins = 0;
    cc->gpu.warp_shuffle = 1;
    cc->gpu.resident_bound = 1; /* see tally__gpu_context */
    r = tally__cu.cuDevicePrimaryCtxRetain(&cc->primary, cc->device);
    if (r != CUDA_SUCCESS) {
        cc->primary = NULL;
        st = tally__cuda_error(NULL, r, "cuDevicePrimaryCtxRetain");
        teardown(cc, 0);
        return st;
    }
    st = enter(NULL, cc);
    if (st != TALLY_OK) {
        teardown(cc, 0);
        return st;
    }

    if (use_app_stream && is_default_stream(app_stream)) {
        cc->stream = app_stream;
        cc->stream_ready = 1;
    } else if (use_app_stream) {
        CUcontext owner = NULL;
        r = tally__cu.cuStreamGetCtx(app_stream, &owner);
        if (r != CUDA_SUCCESS) {
            st = tally__cuda_error(NULL, r, "cuStreamGetCtx(the app's stream)");
        } else if (owner != cc->primary) {
            st = tally__error(NULL, TALLY_INVALID_ARGUMENT,
                              "tally_context_create_cuda: the stream belongs to another CUDA "
                              "context than the primary context of device %d",
                              device);
        } else {
            cc->stream = app_stream;
            cc->stream_ready = 1;
        }
    } else {
        /* Non-blocking: tally's work does not serialise with the legacy
         * default stream that other code in the process may use. */
        r = tally__cu.cuStreamCreate(&cc->stream, CU_STREAM_NON_BLOCKING);
        if (r != CUDA_SUCCESS) {
            cc->stream = NULL;
            st = tally__cuda_error(NULL, r, "cuStreamCreate");
        } else {
            cc->own_stream = 1;
            cc->stream_ready = 1;
        }
    }
    if (st == TALLY_OK) st = load_kernels(cc);
    if (st != TALLY_OK) {
        teardown(cc, 1);
        return st;
    }
    leave();
    *out = &cc->gpu.base;
    return TALLY_OK;
}

static tally_status cuda_context_create(int device, tally_context **out)
{
    return cuda_open(device, 0, NULL, out);
}

static tally_status cuda_context_wrap(void *const handles[3], tally_context **out)
{
    return cuda_open((int)(intptr_t)handles[0], 1, (CUstream)handles[1], out);
}

static void cuda_context_release(tally_context *ctx)
{
    tally__cuda_context *cc = cuda_ctx(ctx);
    /* The shared layer's scratch buffer goes first, while the context can
     * still free it. */
    tally__gpu_context_cleanup(&cc->gpu);
    teardown(cc, 0);
}

static tally_status cuda_sync(tally_context *ctx)
{
    tally__cuda_context *cc = cuda_ctx(ctx);
    tally_status st = enter(ctx, cc);
    if (st != TALLY_OK) return st;
    CUresult r = tally__cu.cuStreamSynchronize(cc->stream);
    leave();
    if (r != CUDA_SUCCESS) return tally__cuda_error(ctx, r, "cuStreamSynchronize");
    return TALLY_OK;
}

/* ------------------------------------------------------------------------
 * Kernel launch (the shared GPU layer's device interface)
 * ------------------------------------------------------------------------ */

static tally_status cuda_launch(tally_context *ctx, tally__kernel_id kernel, uint64_t groups,
                                const tally__gpu_arg *args, int nargs)
{
    tally__cuda_context *cc = cuda_ctx(ctx);
    if ((int)kernel < 0 || (int)kernel >= TALLY__KERNEL_COUNT)
        return tally__error(ctx, TALLY_BACKEND_ERROR, "cuda launch: kernel id %d does not exist",
                            (int)kernel);
    const char *name = tally__gpu_kernel_name(kernel);
    if (nargs < 0 || nargs > TALLY__GPU_MAX_ARGS)
        return tally__error(ctx, TALLY_BACKEND_ERROR, "cuda launch of %s: %d arguments (at most %d)",
                            name, nargs, TALLY__GPU_MAX_ARGS);
    if (groups > TALLY__CUDA_MAX_GROUPS)
        return tally__error(ctx, TALLY_BACKEND_ERROR,
                            "cuda launch of %s: %llu blocks exceed the grid limit of %u", name,
                            (unsigned long long)groups, TALLY__CUDA_MAX_GROUPS);
    if (groups == 0) return TALLY_OK;

    /* cuLaunchKernel reads each argument through a pointer to a value of
     * the parameter's size: a buffer becomes its 64-bit device address, and
     * a scalar is read in place (tally__gpu_scalar_bytes; the driver only
     * reads it). */
    CUdeviceptr pointers[TALLY__GPU_MAX_ARGS];
    void *params[TALLY__GPU_MAX_ARGS + 1];
    for (int i = 0; i < nargs; i++) {
        const tally__gpu_arg *arg = &args[i];
        if (arg->kind == TALLY__ARG_BUFFER) {
            pointers[i] = arg->v.buffer != NULL ? ((const tally__cuda_buffer *)arg->v.buffer)->pointer : 0;
            params[i] = &pointers[i];
        } else if (tally__gpu_scalar_bytes(arg->kind) != 0) {
            params[i] = (void *)&arg->v;
        } else {
            return tally__error(ctx, TALLY_BACKEND_ERROR, "cuda launch of %s: argument %d has kind %d", name, i,
                                (int)arg->kind);
        }
    }
    params[nargs] = NULL;

    /* Where the device refused the stages, a kernel whose stage is optional
     * (tally__gpu_kernel_stage_optional) is launched with none. */
    const uint32_t stage = cc->gpu.stage_bytes != 0 ? tally__gpu_kernel_stage_bytes(kernel) : 0u;
    tally_status st = enter(ctx, cc);
    if (st != TALLY_OK) return st;
    CUresult r = tally__cu.cuLaunchKernel(cc->kernels[kernel], (unsigned)groups, 1, 1,
                                          tally__gpu_kernel_group_size(kernel), 1, 1, stage, cc->stream, params,
                                          NULL);
    leave();
    if (r != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "cuLaunchKernel(%s)", name);
        return tally__cuda_error(ctx, r, what);
    }
    return TALLY_OK;
}

/* ------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------ */

static tally_status cuda_buffer_create(tally_context *ctx, size_t bytes, tally_buffer **out)
{
    tally__cuda_context *cc = cuda_ctx(ctx);
    tally__cuda_buffer *b = calloc(1, sizeof *b);
    if (b == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "cuda backend: out of memory for a buffer");
    b->base.ctx = ctx;
    b->base.bytes = bytes;
    /* cuMemAlloc rejects 0 bytes; an empty buffer has no memory and a null
     * pointer, which no op ever dereferences. */
    if (bytes > 0) {
        tally_status st = enter(ctx, cc);
        if (st != TALLY_OK) {
            free(b);
            return st;
        }
        CUresult r = tally__cu.cuMemAlloc_v2(&b->pointer, bytes);
        leave();
        if (r != CUDA_SUCCESS) {
            free(b);
            char what[96];
            snprintf(what, sizeof what, "cuMemAlloc(%zu bytes)", bytes);
            return tally__cuda_error(ctx, r, what);
        }
    }
    *out = &b->base;
    return TALLY_OK;
}

/* Wraps the app's memory. The pointer must be one the driver knows: a host
 * pointer passed by mistake would otherwise fault inside a kernel, and a
 * fault ruins the primary context for the whole app, not only for tally.
 * The extent is not checked against the allocation, because memory mapped
 * piecewise (the VMM API, as PyTorch's expandable segments use it) is
 * reported one mapping at a time. */
static tally_status cuda_buffer_wrap(tally_context *ctx, void *native, uint64_t address, size_t bytes,
                                     tally_buffer **out)
{
    (void)native;
    tally__cuda_context *cc = cuda_ctx(ctx);
    if (address % 4 != 0)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "tally_buffer_wrap_cuda: device pointer 0x%llx is not 4-byte aligned",
                            (unsigned long long)address);
    if (bytes > 0) {
        tally_status st = enter(ctx, cc);
        if (st != TALLY_OK) return st;
        CUdeviceptr base = 0;
        size_t extent = 0;
        CUresult r = tally__cu.cuMemGetAddressRange_v2(&base, &extent, (CUdeviceptr)address);
        leave();
        if (r != CUDA_SUCCESS) {
            char what[160];
            snprintf(what, sizeof what,
                     "tally_buffer_wrap_cuda: 0x%llx is not device memory known to the CUDA "
                     "driver: cuMemGetAddressRange",
                     (unsigned long long)address);
            tally__cuda_error(ctx, r, what);
            return TALLY_INVALID_ARGUMENT;
        }
    }
    tally__cuda_buffer *b = calloc(1, sizeof *b);
    if (b == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "cuda backend: out of memory for a buffer");
    b->base.ctx = ctx;
    b->base.bytes = bytes;
    b->base.wrapped = 1;
    b->pointer = (CUdeviceptr)address;
    *out = &b->base;
    return TALLY_OK;
}

/* The alignment of the buffer's first byte, which decides whether the
 * kernels may read whole float4s: cuMemAlloc's for tally's own memory, the
 * address's lowest set bit (at most 256) for the app's. */
static uint32_t cuda_buffer_alignment(const tally_buffer *buf)
{
    const tally__cuda_buffer *b = (const tally__cuda_buffer *)buf;
    if (!buf->wrapped || b->pointer == 0) return TALLY__CUDA_ALLOC_ALIGNMENT;
    uint32_t alignment = 1;
    while (alignment < TALLY__CUDA_ALLOC_ALIGNMENT && (b->pointer & alignment) == 0) alignment *= 2;
    return alignment;
}

static void cuda_buffer_release(tally_buffer *buf)
{
    tally__cuda_buffer *b = (tally__cuda_buffer *)buf;
    tally__cuda_context *cc = cuda_ctx(buf->ctx);
    /* tally's own memory may still be read or written by queued work: wait
     * for it before freeing. The app's memory is left as it is, without a
     * wait, as cuBLAS and CUB do: the work queued on the app's stream is
     * ordered before whatever the app does next on that stream (a
     * stream-ordered allocator's reuse included), so a release costs no
     * host round trip and tally's ops can be captured in a CUDA graph. */
    if (!buf->wrapped && b->pointer != 0 && tally__cu.cuCtxPushCurrent_v2(cc->primary) == CUDA_SUCCESS) {
        (void)tally__cu.cuStreamSynchronize(cc->stream);
        (void)tally__cu.cuMemFree_v2(b->pointer);
        leave();
    }
    free(b);
}

/* Reports r, the result of the copy call `what`, if it failed, else waits
 * for the stream. The caller has entered the context. */
static tally_status finish_copy(tally_context *ctx, CUresult r, const char *what)
{
    tally__cuda_context *cc = cuda_ctx(ctx);
    if (r != CUDA_SUCCESS) return tally__cuda_error(ctx, r, what);
    r = tally__cu.cuStreamSynchronize(cc->stream);
    if (r != CUDA_SUCCESS) return tally__cuda_error(ctx, r, "cuStreamSynchronize");
    return TALLY_OK;
}

/* Copies are enqueued on the context's stream, so they follow the work
 * queued before them, and then waited for, so that the host memory may be
 * reused (upload) or read (download) as soon as the call returns. */
static tally_status cuda_buffer_upload(tally_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    tally_context *ctx = buf->ctx;
    tally__cuda_context *cc = cuda_ctx(ctx);
    tally_status st = enter(ctx, cc);
    if (st != TALLY_OK) return st;
    CUdeviceptr dst = ((tally__cuda_buffer *)buf)->pointer + offset;
    CUresult r = tally__cu.cuMemcpyHtoDAsync_v2(dst, src, bytes, cc->stream);
    st = finish_copy(ctx, r, "cuMemcpyHtoDAsync");
    leave();
    return st;
}

static tally_status cuda_buffer_download(const tally_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    tally_context *ctx = buf->ctx;
    tally__cuda_context *cc = cuda_ctx(ctx);
    tally_status st = enter(ctx, cc);
    if (st != TALLY_OK) return st;
    CUdeviceptr src = ((const tally__cuda_buffer *)buf)->pointer + offset;
    CUresult r = tally__cu.cuMemcpyDtoHAsync_v2(dst, src, bytes, cc->stream);
    st = finish_copy(ctx, r, "cuMemcpyDtoHAsync");
    leave();
    return st;
}

static tally_status cuda_buffer_fill(tally_buffer *buf, size_t offset, size_t bytes, uint32_t pattern)
{
    tally_context *ctx = buf->ctx;
    tally__cuda_context *cc = cuda_ctx(ctx);
    tally_status st = enter(ctx, cc);
    if (st != TALLY_OK) return st;
    CUdeviceptr dst = ((tally__cuda_buffer *)buf)->pointer + offset;
    CUresult r = tally__cu.cuMemsetD32Async(dst, pattern, bytes / 4, cc->stream);
    leave();
    if (r != CUDA_SUCCESS) return tally__cuda_error(ctx, r, "cuMemsetD32Async");
    return TALLY_OK;
}

/* The backend's tables, built by the shared GPU layer from the device
 * operations above (TALLY__GPU_BACKEND, backends/gpu/gpu.h). */
TALLY__GPU_BACKEND(cuda, TALLY_BACKEND_CUDA, cuda_, TALLY__CUDA_MAX_GROUPS, .context_wrap = cuda_context_wrap,
                  .buffer_wrap = cuda_buffer_wrap);
