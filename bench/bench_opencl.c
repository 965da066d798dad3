/*
 * bench/bench_opencl.c - tally-bench on OpenCL, as an application: its own
 * context and in-order profiling queue handed to tally
 * (tally_context_create_opencl), markers on that queue as the timer, and
 * fill, copy and streaming-read ceilings. OpenCL is reached through tally's
 * loader (backends/opencl/opencl_loader.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/opencl_loader.h"
#include "bench_vendor.h"

#define BENCH_CL_MAX_DEVICES 64
#define BENCH_ONE_F32 0x3f800000u    /* the bits of 1.0f */
#define BENCH_POISON_F32 0x7fc00000u /* a quiet NaN */
/* The ICD loader's "no platform" (cl_ext.h's CL_PLATFORM_NOT_FOUND_KHR). */
#define BENCH_CL_PLATFORM_NOT_FOUND_KHR (-1001)

/* The app's objects, in b->vendor->state. */
typedef struct cl_app {
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    cl_uint compute_units;
    cl_ulong max_alloc;
} cl_app;

static cl_app *app_of(bench *b)
{
    return b->vendor->state;
}

static int cl_fail(bench *b, const char *call, cl_int e)
{
    return bench_call_failed(b, call, tally__cl_error_name(e), (int)e);
}

/* Every OpenCL call goes through CL (see BENCH_CHECKED). */
#define CL(b, call) BENCH_CHECKED(b, cl_int, tally__cl.call, CL_SUCCESS, tally__cl_error_name, #call)

/* ------------------------------------------------------------------------
 * Devices: every device of every platform, in the ICD loader's order (the
 * list that --device indexes).
 * ------------------------------------------------------------------------ */
typedef struct cl_entry {
    cl_platform_id platform;
    cl_device_id device;
} cl_entry;

static int cl_enumerate(bench *b, cl_entry *out, int *count)
{
    const char *why = NULL;
    if (tally__cl_open(&why) != TALLY_OK) {
        b->vendor->absent = 1;
        return bench_fail(b, "%s", why);
    }
    cl_platform_id platforms[16];
    cl_uint np = 0;
    cl_int e = tally__cl.clGetPlatformIDs(16, platforms, &np);
    if (e == BENCH_CL_PLATFORM_NOT_FOUND_KHR || (e == CL_SUCCESS && np == 0)) {
        b->vendor->absent = 1;
        return bench_fail(b, "OpenCL has no platform");
    }
    if (e != CL_SUCCESS) return cl_fail(b, "clGetPlatformIDs", e);
    if (np > 16) np = 16;
    *count = 0;
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devices[BENCH_CL_MAX_DEVICES];
        cl_uint nd = 0;
        e = tally__cl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, BENCH_CL_MAX_DEVICES, devices, &nd);
        if (e == CL_DEVICE_NOT_FOUND) continue;
        if (e != CL_SUCCESS) return cl_fail(b, "clGetDeviceIDs", e);
        for (cl_uint d = 0; d < nd && d < BENCH_CL_MAX_DEVICES && *count < BENCH_CL_MAX_DEVICES; d++)
            out[(*count)++] = (cl_entry){.platform = platforms[p], .device = devices[d]};
    }
    if (*count == 0) {
        b->vendor->absent = 1;
        return bench_fail(b, "OpenCL platforms have no device");
    }
    return 0;
}

static void cl_describe(cl_entry en, char *name, size_t name_size, char *platform, size_t platform_size,
                        int *is_gpu)
{
    cl_device_type type = 0;
    name[0] = platform[0] = '\0';
    tally__cl.clGetDeviceInfo(en.device, CL_DEVICE_NAME, name_size, name, NULL);
    tally__cl.clGetPlatformInfo(en.platform, CL_PLATFORM_NAME, platform_size, platform, NULL);
    tally__cl.clGetDeviceInfo(en.device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    name[name_size - 1] = platform[platform_size - 1] = '\0';
    *is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
}

static int cl_open(bench *b)
{
    cl_app *app = calloc(1, sizeof *app);
    if (app == NULL) return bench_fail(b, "out of host memory");
    b->vendor->state = app;
    cl_entry entries[BENCH_CL_MAX_DEVICES];
    int count = 0;
    if (cl_enumerate(b, entries, &count)) return 1;
    char name[128], platform[128];
    int index = b->device, is_gpu = 0;
    if (index < 0) {
        /* Default: the first GPU, else the first device. */
        index = 0;
        for (int i = count - 1; i >= 0; i--) {
            cl_describe(entries[i], name, sizeof name, platform, sizeof platform, &is_gpu);
            if (is_gpu) index = i;
        }
    }
    if (index >= count) return bench_fail(b, "--device %d, but OpenCL has %d device(s)", index, count);
    b->device = index;
    cl_entry en = entries[index];
    cl_describe(en, name, sizeof name, platform, sizeof platform, &is_gpu);
    app->device = en.device;
    CL(b, clGetDeviceInfo(en.device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof app->compute_units, &app->compute_units,
                          NULL));
    CL(b, clGetDeviceInfo(en.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof app->max_alloc, &app->max_alloc, NULL));
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)en.platform, 0};
    cl_int e = CL_SUCCESS;
    app->ctx = tally__cl.clCreateContext(props, 1, &en.device, NULL, NULL, &e);
    if (app->ctx == NULL || e != CL_SUCCESS) return cl_fail(b, "clCreateContext", e);
    app->queue = tally__cl.clCreateCommandQueue(app->ctx, en.device, CL_QUEUE_PROFILING_ENABLE, &e);
    if (app->queue == NULL || e != CL_SUCCESS) return cl_fail(b, "clCreateCommandQueue(PROFILING)", e);
    tally_status st = tally_context_create_opencl((void *)app->ctx, (void *)en.device, (void *)app->queue, &b->ctx);
    if (st != TALLY_OK) {
        b->vendor->absent = bench_absent_status(st);
        return bench_fail(b, "tally_context_create_opencl: %s: %s", tally_status_name(st), tally_last_error(NULL));
    }
    b->timer_name = "cl_marker";
    snprintf(b->device_name, sizeof b->device_name, "%s (OpenCL device %d, platform %s, %u CUs)",
             tally_context_device_name(b->ctx), index, platform, (unsigned)app->compute_units);
    return 0;
}

static void cl_close(bench *b)
{
    cl_app *app = app_of(b);
    if (app == NULL) return;
    if (app->queue != NULL) tally__cl.clReleaseCommandQueue(app->queue);
    if (app->ctx != NULL) tally__cl.clReleaseContext(app->ctx);
}

static void cl_list(void)
{
    bench b = {.backend = TALLY_BACKEND_OPENCL};
    bench_vendor v = {0};
    b.vendor = &v;
    cl_entry entries[BENCH_CL_MAX_DEVICES];
    int count = 0;
    if (cl_enumerate(&b, entries, &count)) {
        printf("  (none: %s)\n", b.err);
        return;
    }
    for (int i = 0; i < count; i++) {
        char name[128], platform[128];
        int is_gpu;
        cl_describe(entries[i], name, sizeof name, platform, sizeof platform, &is_gpu);
        printf("  --device %d: %s [%s]%s\n", i, name, platform, is_gpu ? " (GPU)" : "");
    }
}

/* ------------------------------------------------------------------------
 * Timing: markers on the app's queue, checked against the wall clock.
 * ------------------------------------------------------------------------ */
static int cl_marker_ns(cl_event ev, cl_ulong *ns)
{
    return tally__cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof *ns, ns, NULL) != CL_SUCCESS;
}

static int cl_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                         double *wall_ms)
{
    cl_app *app = app_of(b);
    cl_event e0 = NULL, e1 = NULL;
    CL(b, clFinish(app->queue));
    double w0 = bench_now_s();
    CL(b, clEnqueueMarkerWithWaitList(app->queue, 0, NULL, &e0));
    if (bench_run_calls(b, fn, arg, first, calls)) {
        tally__cl.clReleaseEvent(e0);
        return 1;
    }
    cl_int e = tally__cl.clEnqueueMarkerWithWaitList(app->queue, 0, NULL, &e1);
    if (e != CL_SUCCESS) {
        tally__cl.clReleaseEvent(e0);
        return cl_fail(b, "clEnqueueMarkerWithWaitList", e);
    }
    e = tally__cl.clWaitForEvents(1, &e1);
    cl_int e_finish = tally__cl.clFinish(app->queue);
    *wall_ms = 1e3 * (bench_now_s() - w0);
    cl_ulong t0 = 0, t1 = 0;
    int bad = cl_marker_ns(e0, &t0) || cl_marker_ns(e1, &t1) || t1 < t0;
    tally__cl.clReleaseEvent(e0);
    tally__cl.clReleaseEvent(e1);
    if (e != CL_SUCCESS) return cl_fail(b, "clWaitForEvents(end marker)", e);
    if (e_finish != CL_SUCCESS) return cl_fail(b, "clFinish", e_finish);
    double ms = bad ? -1.0 : 1e-6 * (double)(t1 - t0);
    /* Markers carry no work of their own, and some drivers stamp them when
     * they are submitted rather than when the device reaches them. Such a
     * stamp could post an impossibly fast time; the wall clock (which cannot
     * be beaten) replaces any marker interval that strays from it. */
    if (bad || ms > *wall_ms + 0.05 || ms < 0.5 * *wall_ms - 0.2) {
        b->vendor->markers_failed++;
        ms = *wall_ms;
    }
    *dev_ms = ms;
    return 0;
}

/* ------------------------------------------------------------------------
 * Ceilings: clEnqueueFillBuffer, clEnqueueCopyBuffer and a streaming-read
 * kernel built from the source below.
 * ------------------------------------------------------------------------ */
static const char cl_read_source[] =
    "__kernel void tally_bench_read_sum(__global const float4 *restrict x, ulong n4,\n"
    "                                   __global float *restrict partial)\n"
    "{\n"
    "    ulong tid = get_global_id(0), stride = get_global_size(0), i = tid;\n"
    "    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;\n"
    "    for (; i + 3 * stride < n4; i += 4 * stride) {\n"
    "        float4 v0 = x[i], v1 = x[i + stride], v2 = x[i + 2 * stride], v3 = x[i + 3 * stride];\n"
    "        a0 += (v0.x + v0.y) + (v0.z + v0.w);\n"
    "        a1 += (v1.x + v1.y) + (v1.z + v1.w);\n"
    "        a2 += (v2.x + v2.y) + (v2.z + v2.w);\n"
    "        a3 += (v3.x + v3.y) + (v3.z + v3.w);\n"
    "    }\n"
    "    for (; i < n4; i += stride) {\n"
    "        float4 v = x[i];\n"
    "        a0 += (v.x + v.y) + (v.z + v.w);\n"
    "    }\n"
    "    partial[tid] = (a0 + a1) + (a2 + a3);\n"
    "}\n";

typedef struct cl_ceil {
    cl_app *app;
    size_t bytes, threads;
    cl_mem a, b, partial;
    cl_program program;
    cl_kernel kernel;
} cl_ceil;

static cl_mem cl_buffer(bench *b, cl_ceil *c, size_t bytes, const char *call)
{
    cl_int e = CL_SUCCESS;
    cl_mem m = tally__cl.clCreateBuffer(c->app->ctx, CL_MEM_READ_WRITE, bytes, NULL, &e);
    if (m == NULL || e != CL_SUCCESS) cl_fail(b, call, e);
    return e == CL_SUCCESS ? m : NULL;
}

static int cl_ceil_setup(bench *b, void **state, size_t *bytes, size_t *threads)
{
    cl_ceil *c = calloc(1, sizeof *c);
    if (c == NULL) return bench_fail(b, "out of host memory");
    *state = c;
    c->app = app_of(b);
    *bytes = c->bytes = bench_ceil_bytes(b, (double)c->app->max_alloc);
    *threads = c->threads = (size_t)(c->app->compute_units > 0 ? c->app->compute_units : 1) * 2048u;
    if ((c->a = cl_buffer(b, c, c->bytes, "clCreateBuffer(a)")) == NULL ||
        (c->b = cl_buffer(b, c, c->bytes, "clCreateBuffer(b)")) == NULL ||
        (c->partial = cl_buffer(b, c, c->threads * sizeof(float), "clCreateBuffer(partial)")) == NULL)
        return 1;
    const uint32_t poison = BENCH_POISON_F32;
    CL(b, clEnqueueFillBuffer(c->app->queue, c->a, &poison, sizeof poison, 0, c->bytes, 0, NULL, NULL));
    CL(b, clEnqueueFillBuffer(c->app->queue, c->b, &poison, sizeof poison, 0, c->bytes, 0, NULL, NULL));
    return 0;
}

static void cl_ceil_release(bench *b, void *state)
{
    cl_ceil *c = state;
    (void)b;
    tally__cl.clFinish(c->app->queue);
    if (c->kernel != NULL) tally__cl.clReleaseKernel(c->kernel);
    if (c->program != NULL) tally__cl.clReleaseProgram(c->program);
    if (c->a != NULL) tally__cl.clReleaseMemObject(c->a);
    if (c->b != NULL) tally__cl.clReleaseMemObject(c->b);
    if (c->partial != NULL) tally__cl.clReleaseMemObject(c->partial);
    free(c);
}

static int cl_call_write(bench *b, void *arg, int64_t i)
{
    cl_ceil *c = arg;
    const uint32_t one = BENCH_ONE_F32;
    (void)i;
    CL(b, clEnqueueFillBuffer(c->app->queue, c->a, &one, sizeof one, 0, c->bytes, 0, NULL, NULL));
    return 0;
}

static int cl_call_copy(bench *b, void *arg, int64_t i)
{
    cl_ceil *c = arg;
    (void)i;
    CL(b, clEnqueueCopyBuffer(c->app->queue, c->a, c->b, 0, 0, c->bytes, 0, NULL, NULL));
    return 0;
}

static int cl_call_read(bench *b, void *arg, int64_t i)
{
    cl_ceil *c = arg;
    (void)i;
    CL(b, clEnqueueNDRangeKernel(c->app->queue, c->kernel, 1, NULL, &c->threads, NULL, 0, NULL, NULL));
    return 0;
}

static int cl_read_back(bench *b, void *state, int buffer, size_t offset, size_t bytes, void *dst)
{
    cl_ceil *c = state;
    cl_mem m = buffer == BENCH_BUF_A ? c->a : buffer == BENCH_BUF_B ? c->b : c->partial;
    CL(b, clEnqueueReadBuffer(c->app->queue, m, CL_TRUE, offset, bytes, dst, 0, NULL, NULL));
    return 0;
}

static int cl_read_prepare(bench *b, void *state)
{
    cl_ceil *c = state;
    cl_int e = CL_SUCCESS;
    const char *src = cl_read_source;
    c->program = tally__cl.clCreateProgramWithSource(c->app->ctx, 1, &src, NULL, &e);
    if (c->program == NULL || e != CL_SUCCESS) return cl_fail(b, "clCreateProgramWithSource", e);
    e = tally__cl.clBuildProgram(c->program, 1, &c->app->device, "", NULL, NULL);
    if (e != CL_SUCCESS) {
        char log[2048] = "";
        tally__cl.clGetProgramBuildInfo(c->program, c->app->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
        return bench_fail(b, "clBuildProgram(read kernel) failed: %s (%d): %s", tally__cl_error_name(e), (int)e, log);
    }
    c->kernel = tally__cl.clCreateKernel(c->program, "tally_bench_read_sum", &e);
    if (c->kernel == NULL || e != CL_SUCCESS) return cl_fail(b, "clCreateKernel", e);
    cl_ulong n4 = c->bytes / 16;
    CL(b, clSetKernelArg(c->kernel, 0, sizeof(cl_mem), &c->a));
    CL(b, clSetKernelArg(c->kernel, 1, sizeof n4, &n4));
    CL(b, clSetKernelArg(c->kernel, 2, sizeof(cl_mem), &c->partial));
    return 0;
}

BENCH_DEVICE_CEILINGS(cl, "clEnqueueFillBuffer", "clEnqueueCopyBuffer", "fill")

BENCH_VENDOR_OPS(opencl, cl);
