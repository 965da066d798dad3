/*
 * bench/bench_cuda.c - tally-bench on CUDA, as an application: its own
 * stream on the device's primary context (the one tally uses) handed to
 * tally (tally_context_create_cuda), events on that stream as the timer,
 * and memset, copy and streaming-read ceilings. The driver is reached
 * through tally's loader (backends/cuda/cuda_loader.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_loader.h"
#include "bench_vendor.h"
#include "read_ceiling_ptx.h"

#define BENCH_ONE_F32 0x3f800000u    /* the bits of 1.0f */
#define BENCH_POISON_F32 0x7fc00000u /* a quiet NaN */
#define BENCH_READ_BLOCK 256u

/* The app's objects, in b->vendor->state. */
typedef struct cu_app {
    CUdevice device;
    CUcontext ctx; /* the primary context, retained */
    int ctx_retained;
    CUstream stream;
    CUevent ev0, ev1;
    int sm_count;
} cu_app;

static cu_app *app_of(bench *b)
{
    return b->vendor->state;
}

static const char *cu_error_name(CUresult r)
{
    const char *name = NULL;
    if (tally__cu.cuGetErrorName == NULL || tally__cu.cuGetErrorName(r, &name) != CUDA_SUCCESS || name == NULL)
        return "unknown CUDA error";
    return name;
}

/* Every driver call goes through CU (see BENCH_CHECKED). */
#define CU(b, call) BENCH_CHECKED(b, CUresult, tally__cu.call, CUDA_SUCCESS, cu_error_name, #call)

/* Makes the primary context current on this thread. Called before every
 * group of the bench's own driver calls, since tally may change the current
 * context. */
static int cu_bind(bench *b)
{
    CU(b, cuCtxSetCurrent(app_of(b)->ctx));
    return 0;
}

/* Opens the driver through the loader (which calls cuInit) and counts the
 * devices. A missing or stub driver, no device or too old a driver mean
 * the backend is absent. */
static int cu_init_count(bench *b, int *count)
{
    const char *why = NULL;
    tally_status st = tally__cuda_open(&why);
    if (st != TALLY_OK) {
        b->vendor->absent = bench_absent_status(st) || strstr(why, "CUDA_ERROR_INSUFFICIENT_DRIVER") != NULL;
        return bench_fail(b, "%s", why);
    }
    CU(b, cuDeviceGetCount(count));
    if (*count == 0) {
        b->vendor->absent = 1;
        return bench_fail(b, "CUDA reports no device");
    }
    return 0;
}

static int cu_open(bench *b)
{
    cu_app *app = calloc(1, sizeof *app);
    if (app == NULL) return bench_fail(b, "out of host memory");
    b->vendor->state = app;
    int count = 0;
    if (cu_init_count(b, &count)) return 1;
    int index = b->device < 0 ? 0 : b->device;
    if (index >= count) return bench_fail(b, "--device %d, but CUDA has %d device(s)", index, count);
    b->device = index;
    CU(b, cuDeviceGet(&app->device, index));
    CU(b, cuDeviceGetAttribute(&app->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, app->device));
    CU(b, cuDevicePrimaryCtxRetain(&app->ctx, app->device));
    app->ctx_retained = 1;
    CU(b, cuCtxSetCurrent(app->ctx));
    /* A blocking stream (flags 0): ordered with the legacy default stream
     * too, so nothing tally might put there can overlap a timed batch. */
    CU(b, cuStreamCreate(&app->stream, 0));
    CU(b, cuEventCreate(&app->ev0, 0));
    CU(b, cuEventCreate(&app->ev1, 0));
    tally_status st = tally_context_create_cuda(index, (void *)app->stream, &b->ctx);
    if (st != TALLY_OK) {
        b->vendor->absent = bench_absent_status(st);
        return bench_fail(b, "tally_context_create_cuda(%d, stream): %s: %s", index, tally_status_name(st),
                          tally_last_error(NULL));
    }
    if (cu_bind(b)) return 1;
    b->timer_name = "cuda_event";
    snprintf(b->device_name, sizeof b->device_name, "%s (CUDA device %d, %d SMs)",
             tally_context_device_name(b->ctx), index, app->sm_count);
    return 0;
}

static void cu_close(bench *b)
{
    cu_app *app = app_of(b);
    if (app == NULL || !app->ctx_retained) return;
    tally__cu.cuCtxSetCurrent(app->ctx);
    if (app->ev0 != NULL) tally__cu.cuEventDestroy_v2(app->ev0);
    if (app->ev1 != NULL) tally__cu.cuEventDestroy_v2(app->ev1);
    if (app->stream != NULL) tally__cu.cuStreamDestroy_v2(app->stream);
    tally__cu.cuDevicePrimaryCtxRelease_v2(app->device);
}

static void cu_list(void)
{
    bench b = {.backend = TALLY_BACKEND_CUDA};
    bench_vendor v = {0};
    b.vendor = &v;
    int count = 0;
    if (cu_init_count(&b, &count)) {
        printf("  (none: %s)\n", b.err);
        return;
    }
    for (int i = 0; i < count; i++) {
        CUdevice d;
        char name[256] = "?";
        if (tally__cu.cuDeviceGet(&d, i) == CUDA_SUCCESS) tally__cu.cuDeviceGetName(name, (int)sizeof name, d);
        printf("  --device %d: %s\n", i, name);
    }
}

/* ------------------------------------------------------------------------
 * Timing: events on the app's stream.
 * ------------------------------------------------------------------------ */
static int cu_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                         double *wall_ms)
{
    cu_app *app = app_of(b);
    if (cu_bind(b)) return 1;
    CU(b, cuStreamSynchronize(app->stream));
    double w0 = bench_now_s();
    CU(b, cuEventRecord(app->ev0, app->stream));
    if (bench_run_calls(b, fn, arg, first, calls)) return 1;
    if (cu_bind(b)) return 1;
    CU(b, cuEventRecord(app->ev1, app->stream));
    CU(b, cuEventSynchronize(app->ev1));
    *wall_ms = 1e3 * (bench_now_s() - w0);
    float ms = 0.0f;
    CU(b, event_elapsed(&ms, app->ev0, app->ev1));
    *dev_ms = ms;
    return 0;
}

/* ------------------------------------------------------------------------
 * Ceilings: cuMemsetD32Async, cuMemcpyDtoDAsync and the embedded
 * streaming-read kernel, JIT-compiled from PTX.
 * ------------------------------------------------------------------------ */
typedef struct cu_ceil {
    cu_app *app;
    size_t bytes, threads;
    CUdeviceptr a, b, partial;
    unsigned long long n4;
    CUmodule module;
    CUfunction read_fn;
} cu_ceil;

static int cu_ceil_setup(bench *b, void **state, size_t *bytes, size_t *threads)
{
    cu_ceil *c = calloc(1, sizeof *c);
    if (c == NULL) return bench_fail(b, "out of host memory");
    *state = c;
    c->app = app_of(b);
    size_t free_bytes = 0, total_bytes = 0;
    if (cu_bind(b)) return 1;
    CU(b, cuMemGetInfo_v2(&free_bytes, &total_bytes));
    /* Two buffers plus headroom for tally's own allocations. */
    double room = ((double)free_bytes - 512.0 * 1024 * 1024) / 2.0;
    *bytes = c->bytes = bench_ceil_bytes(b, room);
    c->n4 = c->bytes / 16;
    *threads = c->threads = (size_t)(c->app->sm_count > 0 ? c->app->sm_count : 1) * 2048u;
    CU(b, cuMemAlloc_v2(&c->a, c->bytes));
    CU(b, cuMemAlloc_v2(&c->b, c->bytes));
    CU(b, cuMemAlloc_v2(&c->partial, c->threads * sizeof(float)));
    CU(b, cuMemsetD32Async(c->a, BENCH_POISON_F32, c->bytes / 4, c->app->stream));
    CU(b, cuMemsetD32Async(c->b, BENCH_POISON_F32, c->bytes / 4, c->app->stream));
    return 0;
}

static void cu_ceil_release(bench *b, void *state)
{
    cu_ceil *c = state;
    (void)b;
    tally__cu.cuCtxSetCurrent(c->app->ctx);
    tally__cu.cuStreamSynchronize(c->app->stream);
    if (c->module != NULL) tally__cu.cuModuleUnload(c->module);
    if (c->a) tally__cu.cuMemFree_v2(c->a);
    if (c->b) tally__cu.cuMemFree_v2(c->b);
    if (c->partial) tally__cu.cuMemFree_v2(c->partial);
    free(c);
}

static int cu_call_write(bench *b, void *arg, int64_t i)
{
    cu_ceil *c = arg;
    (void)i;
    CU(b, cuMemsetD32Async(c->a, BENCH_ONE_F32, c->bytes / 4, c->app->stream));
    return 0;
}

static int cu_call_copy(bench *b, void *arg, int64_t i)
{
    cu_ceil *c = arg;
    (void)i;
    CU(b, cuMemcpyDtoDAsync_v2(c->b, c->a, c->bytes, c->app->stream));
    return 0;
}

static int cu_call_read(bench *b, void *arg, int64_t i)
{
    cu_ceil *c = arg;
    (void)i;
    void *params[] = {&c->a, &c->n4, &c->partial};
    CU(b, cuLaunchKernel(c->read_fn, (unsigned)(c->threads / BENCH_READ_BLOCK), 1, 1, BENCH_READ_BLOCK, 1, 1, 0,
                         c->app->stream, params, NULL));
    return 0;
}

static int cu_read_back(bench *b, void *state, int buffer, size_t offset, size_t bytes, void *dst)
{
    cu_ceil *c = state;
    CUdeviceptr p = buffer == BENCH_BUF_A ? c->a : buffer == BENCH_BUF_B ? c->b : c->partial;
    if (cu_bind(b)) return 1;
    CU(b, cuStreamSynchronize(c->app->stream));
    CU(b, cuMemcpyDtoH_v2(dst, p + offset, bytes));
    return 0;
}

static int cu_read_prepare(bench *b, void *state)
{
    cu_ceil *c = state;
    char log[4096] = "";
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = tally__cu.cuModuleLoadDataEx(&c->module, tally_bench_read_ceiling_ptx, 2, options, values);
    if (r != CUDA_SUCCESS) {
        c->module = NULL;
        return bench_fail(b, "cuModuleLoadDataEx failed: %s (%d): %s", cu_error_name(r), (int)r, log);
    }
    CU(b, cuModuleGetFunction(&c->read_fn, c->module, "tally_bench_read_sum"));
    return 0;
}

BENCH_DEVICE_CEILINGS(cu, "cuMemsetD32Async", "cuMemcpyDtoDAsync", "memset")

BENCH_VENDOR_OPS(cuda, cu);
