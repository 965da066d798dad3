/*
 * tests/check_opencl.c - what only the OpenCL backend has.
 *
 * Device and allocation errors, build failures with their log, and interop
 * with an app's own cl_context, queue and cl_mem made through libOpenCL
 * here. The program binary cache is tests/check_cache.c's; the bits of
 * every op against the host are tests/check_bits.c's, for every GPU
 * backend.
 *
 * The internal hooks below are declared weak so that this file also links
 * when the OpenCL backend is compiled out (the runner then skips it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/philox.h"
#include "testutil.h"
#include "backends/opencl/opencl_loader.h"

const int tally_test_needs_backend = 1;

extern int tally__opencl_fma_emulated(const tally_context *ctx) __attribute__((weak));
extern tally_status tally__opencl_context_create_with_source(int device, const char *source, tally_context **out)
    __attribute__((weak));

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

START_TEST(test_devices_and_bad_index)
{
    int count = 0;
    ck_assert_int_eq(tally_devices(TALLY_BACKEND_OPENCL, NULL, 0, &count), TALLY_OK);
    ck_assert_int_ge(count, 1);
    tally_device_info *info = tt_alloc((size_t)count * sizeof *info);
    int again = 0;
    ck_assert_int_eq(tally_devices(TALLY_BACKEND_OPENCL, info, count, &again), TALLY_OK);
    ck_assert_int_eq(again, count);
    for (int i = 0; i < count; i++) {
        ck_assert_int_eq(info[i].index, i);
        ck_assert_msg(info[i].name[0] != '\0' && info[i].platform[0] != '\0', "device %d has no name", i);
    }
    free(info);

    tally_context *ctx = (tally_context *)1;
    tally_status st = tally_context_create(TALLY_BACKEND_OPENCL, count + 3, &ctx);
    ck_assert_int_eq(st, TALLY_NO_DEVICE);
    ck_assert_ptr_null(ctx);
    char expect[64];
    snprintf(expect, sizeof expect, "(%d device", count);
    ck_assert_msg(strstr(tally_last_error(NULL), expect) != NULL, "message '%s' lacks the count", tally_last_error(NULL));
}
END_TEST

START_TEST(test_huge_allocation)
{
    tally_context *ctx = tt_context();
    tally_buffer *b = (tally_buffer *)1;
    tally_status st = tally_buffer_create(ctx, (size_t)1 << 60, &b);
    ck_assert_int_eq(st, TALLY_OUT_OF_MEMORY);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(tally_last_error(ctx), "CL_DEVICE_MAX_MEM_ALLOC_SIZE") != NULL, "%s", tally_last_error(ctx));
    /* The context is still usable: the sum of 0, 0.25, ..., 24.75 is exact. */
    float data[100];
    for (int i = 0; i < 100; i++) data[i] = (float)i * 0.25f;
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, data, 1, 100), 1237.5f, "sum after a failed allocation");
}
END_TEST

START_TEST(test_build_failure_log)
{
    ck_assert_ptr_nonnull(tally__opencl_context_create_with_source);
    setenv("TALLY_CACHE", "0", 1);
    tally_context *ctx = (tally_context *)1;
    tally_status st = tally__opencl_context_create_with_source(
        0, "#pragma OPENCL FP_CONTRACT OFF\n__kernel void k(__global float *x) { x[0] = tally_no_such_symbol; }\n",
        &ctx);
    ck_assert_int_eq(st, TALLY_BUILD_FAILED);
    ck_assert_ptr_null(ctx);
    const char *msg = tally_last_error(NULL);
    ck_assert_msg(strstr(msg, "clBuildProgram failed: CL_BUILD_PROGRAM_FAILURE (-11)") != NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "tally_no_such_symbol") != NULL, "the build log is missing: %s", msg);

    /* A program that builds but lacks tally's kernels. */
    st = tally__opencl_context_create_with_source(0, "__kernel void k(__global float *x) { x[0] = 1.0f; }\n", &ctx);
    ck_assert_int_eq(st, TALLY_BACKEND_ERROR);
    ck_assert_msg(strstr(tally_last_error(NULL), "CL_INVALID_KERNEL_NAME") != NULL, "%s", tally_last_error(NULL));
}
END_TEST

/* An OpenCL context refuses `value` for the environment variable `name`:
 * TALLY_INVALID_ARGUMENT, no context, and a message that names both. The
 * variable is unset afterwards. */
static void assert_setting_refused(const char *name, const char *value)
{
    char quoted[128];
    snprintf(quoted, sizeof quoted, "%s='%s'", name, value);
    setenv(name, value, 1);
    tally_context *ctx = (tally_context *)1;
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_OPENCL, 0, &ctx), TALLY_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(tally_last_error(NULL), quoted) != NULL, "%s", tally_last_error(NULL));
    unsetenv(name);
}

/* A sum over several tiles (a short last quad, two tree levels) and a
 * normal fill from an odd offset, in a context of the given kernel shape
 * (TALLY_OPENCL_KERNELS; NULL: unset). */
static void shape_results(const char *shape, const float *x, size_t n, float *sum, float *normal, size_t m)
{
    if (shape != NULL) setenv("TALLY_OPENCL_KERNELS", shape, 1);
    else unsetenv("TALLY_OPENCL_KERNELS");
    tally_context *ctx = NULL;
    ck_assert_msg(tally_context_create(TALLY_BACKEND_OPENCL, 0, &ctx) == TALLY_OK, "%s: %s", shape ? shape : "unset",
                  tally_last_error(NULL));
    *sum = tt_reduce_all(ctx, TALLY_SUM, x, 1, (int64_t)n);
    tally_buffer *out = tt_buffer(ctx, m);
    tally_rng rng = {.seed = 11, .subsequence = 3, .offset = 5};
    ck_assert_int_eq(tally_rng_fill(ctx, TALLY_DIST_NORMAL, rng, tally_view_f32(out, 0, 1, (int64_t)m), NULL),
                     TALLY_OK);
    tt_read(out, 0, normal, m);
    tally_buffer_release(out);
    tally_context_release(ctx);
}

/* The CPU-shaped twins (kernels/cpu.h) and the GPU kernels give the same
 * bits, both equal to the definition (the scalar stream, a float64 sum
 * within rounding); TALLY_OPENCL_KERNELS chooses between them and refuses
 * a value it does not know. */
START_TEST(test_kernel_shapes)
{
    enum { N = 70001, M = 4099 };
    float *x = tt_alloc(N * sizeof *x);
    double want = 0.0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i * 7919) % 1000) / 997.0f - 0.25f;
        want += x[i];
    }
    const char *shapes[] = {NULL, "auto", "gpu", "cpu"};
    float sums[4], *normals[4];
    for (int s = 0; s < 4; s++) {
        normals[s] = tt_alloc(M * sizeof(float));
        shape_results(shapes[s], x, N, &sums[s], normals[s], M);
        tt_assert_bits(sums[s], sums[0], "sum under TALLY_OPENCL_KERNELS=%s", shapes[s] ? shapes[s] : "(unset)");
        for (int i = 0; i < M; i++)
            tt_assert_bits(normals[s][i], tally_stream_normal(11, 3, 5 + (uint64_t)i), "normal %d under %s", i,
                           shapes[s] ? shapes[s] : "(unset)");
    }
    ck_assert_msg(fabs((double)sums[0] - want) <= 1e-5 * fabs(want) + 1e-3, "sum %.9g against %.9g", sums[0], want);

    assert_setting_refused("TALLY_OPENCL_KERNELS", "fastest");
    for (int s = 0; s < 4; s++) free(normals[s]);
    free(x);
}
END_TEST

/* Row logsumexps and a KL batchmean (input_is_prob, some zero targets so
 * that a step leaves the short form) of a [rows, cols] matrix in a
 * context of the given backend, with TALLY_OPENCL_CPU_LANES = lanes
 * (NULL: unset) and the CPU-shaped twins. */
static void lanes_results(tally_backend backend, const char *lanes, const float *x, const float *t, int64_t rows,
                          int64_t cols, float *lse, float *kl)
{
    setenv("TALLY_OPENCL_KERNELS", "cpu", 1);
    if (lanes != NULL) setenv("TALLY_OPENCL_CPU_LANES", lanes, 1);
    else unsetenv("TALLY_OPENCL_CPU_LANES");
    tally_context *ctx = NULL;
    ck_assert_msg(tally_context_create(backend, 0, &ctx) == TALLY_OK, "lanes %s: %s", lanes ? lanes : "unset",
                  tally_last_error(NULL));
    const size_t n = (size_t)(rows * cols);
    tally_buffer *bx = tt_upload(ctx, x, n), *bt = tt_upload(ctx, t, n), *out = tt_buffer(ctx, (size_t)rows + 1u);
    const tally_view vx = tally_view_f32(bx, 0, rows, cols), vt = tally_view_f32(bt, 0, rows, cols);
    tt_ok(tally_reduce(ctx, TALLY_LOGSUMEXP, TALLY_AXIS_ROW, vx, tally_view_f32(out, 0, 1, rows)), ctx);
    tt_ok(tally_kl_div(ctx, vx, vt, TALLY_REDUCTION_BATCHMEAN, TALLY_KL_INPUT_IS_PROB,
                       tally_view_f32(out, rows, 1, 1)),
          ctx);
    tt_read(out, 0, lse, (size_t)rows);
    tt_read(out, (size_t)rows, kl, 1);
    tally_buffer_release(bx);
    tally_buffer_release(bt);
    tally_buffer_release(out);
    tally_context_release(ctx);
    unsetenv("TALLY_OPENCL_KERNELS");
    unsetenv("TALLY_OPENCL_CPU_LANES");
}

/* The twins' transcendental loops run 8 or 16 lanes a vector
 * (TALLY_OPENCL_CPU_LANES; unset: by the device): every width gives the
 * host backend's bits, and a width the backend does not know is refused. */
START_TEST(test_cpu_lanes)
{
    enum { ROWS = 37, COLS = 5003 };
    const size_t n = (size_t)ROWS * COLS;
    float *x = tt_alloc(n * sizeof *x), *t = tt_alloc(n * sizeof *t);
    tt_fill_uniform(x, n, 41, 1e-4, 1.0);
    tt_fill_uniform(t, n, 42, 1e-4, 1.0);
    for (size_t i = 0; i < n; i += 9973) t[i] = 0.0f;
    float want_lse[ROWS], want_kl, lse[ROWS], kl;
    lanes_results(TALLY_BACKEND_HOST, NULL, x, t, ROWS, COLS, want_lse, &want_kl);
    const char *widths[] = {NULL, "8", "16"};
    for (int w = 0; w < 3; w++) {
        lanes_results(TALLY_BACKEND_OPENCL, widths[w], x, t, ROWS, COLS, lse, &kl);
        const char *name = widths[w] ? widths[w] : "(unset)";
        tt_assert_bits(kl, want_kl, "KL under TALLY_OPENCL_CPU_LANES=%s", name);
        for (int r = 0; r < ROWS; r++)
            tt_assert_bits(lse[r], want_lse[r], "logsumexp of row %d under TALLY_OPENCL_CPU_LANES=%s", r, name);
    }

    setenv("TALLY_OPENCL_KERNELS", "cpu", 1);
    assert_setting_refused("TALLY_OPENCL_CPU_LANES", "12");
    unsetenv("TALLY_OPENCL_KERNELS");
    free(x);
    free(t);
}
END_TEST

START_TEST(test_context_queries)
{
    ck_assert_ptr_nonnull(tally__opencl_fma_emulated);
    int emulated = tally__opencl_fma_emulated(tt_context());
    ck_assert(emulated == 0 || emulated == 1);
    tally_context *host = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_HOST, 0, &host), NULL);
    ck_assert_int_eq(tally__opencl_fma_emulated(host), -1);
    tally_context_release(host);
    const char *name = tally_context_device_name(tt_context());
    ck_assert(name[0] != '\0');
    ck_assert_int_eq(strstr(name, "fma emulated") != NULL, emulated);
    /* A zero-byte buffer exists and reports 0 bytes. */
    tally_buffer *b = NULL;
    ck_assert_int_eq(tally_buffer_create(tt_context(), 0, &b), TALLY_OK);
    ck_assert_uint_eq(tally_buffer_size(b), 0);
    tally_buffer_release(b);
}
END_TEST

/* ------------------------------------------------------------------------
 * Interop: the app's own OpenCL objects, made here through libOpenCL.
 * ------------------------------------------------------------------------ */

/* The app's calls go through the same loader as tally's own
 * (backends/opencl/opencl_loader.h); a missing libOpenCL skips this suite
 * before any test runs. */
static void app_load(void)
{
    const char *why = NULL;
    ck_assert_msg(tally__cl_open(&why) == TALLY_OK, "%s", why);
}

/* Device 0 in tally's order: the first device of the first platform that
 * has one. */
static void app_device(cl_platform_id *platform, cl_device_id *device)
{
    cl_platform_id platforms[16];
    cl_uint np = 0;
    ck_assert_int_eq(tally__cl.clGetPlatformIDs(16, platforms, &np), CL_SUCCESS);
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_uint nd = 0;
        if (tally__cl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 1, device, &nd) == CL_SUCCESS && nd > 0) {
            *platform = platforms[p];
            return;
        }
    }
    ck_abort_msg("no OpenCL device");
}

/* The reference count of one of the app's objects, as OpenCL reports it:
 * REFCOUNT(clGetMemObjectInfo, m, CL_MEM_REFERENCE_COUNT). */
static cl_uint refcount_value;

static cl_uint refcount_checked(cl_int e)
{
    ck_assert_int_eq(e, CL_SUCCESS);
    return refcount_value;
}

#define REFCOUNT(query, obj, what) \
    refcount_checked(tally__cl.query((obj), (what), sizeof refcount_value, &refcount_value, NULL))

enum { ROWS = 37, COLS = 301, N = ROWS * COLS };

/* Pointwise KL of x against t into `pointwise`, and its batchmean into
 * element 1 of `batchmean`. */
static void kl_pair(tally_context *ctx, tally_buffer *x, tally_buffer *t, tally_view pointwise, tally_buffer *batchmean)
{
    tt_ok(tally_kl_div(ctx, tally_view_f32(x, 0, ROWS, COLS), tally_view_f32(t, 0, ROWS, COLS), TALLY_REDUCTION_NONE, 0,
                       pointwise),
          ctx);
    tt_ok(tally_kl_div(ctx, tally_view_f32(x, 0, ROWS, COLS), tally_view_f32(t, 0, ROWS, COLS),
                       TALLY_REDUCTION_BATCHMEAN, 0, tally_view_f32(batchmean, 1, 1, 1)),
          ctx);
}

START_TEST(test_interop)
{
    app_load();
    cl_platform_id platform = NULL;
    cl_device_id device = NULL;
    app_device(&platform, &device);
    cl_int err = 0;
    cl_context_properties props[3] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    cl_context context = tally__cl.clCreateContext(props, 1, &device, NULL, NULL, &err);
    ck_assert_int_eq(err, 0);
    cl_command_queue queue = tally__cl.clCreateCommandQueue(context, device, 0, &err);
    ck_assert_int_eq(err, 0);

    float *x = tt_alloc(N * 4u), *t = tt_alloc(N * 4u);
    tt_fill_normal(x, N, 11, 0.0, 1.0);
    tt_fill_uniform(t, N, 12, 0.0, 1.0);
    cl_mem mx = tally__cl.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4u, x, &err);
    ck_assert_int_eq(err, 0);
    cl_mem mt = tally__cl.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4u, t, &err);
    ck_assert_int_eq(err, 0);
    cl_mem mo = tally__cl.clCreateBuffer(context, CL_MEM_READ_WRITE, (N + 8) * 4u, NULL, &err);
    ck_assert_int_eq(err, 0);

    uint32_t queue_refs = REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT);

    tally_context *tc = NULL;
    tally_status st = tally_context_create_opencl(context, device, queue, &tc);
    ck_assert_msg(st == TALLY_OK, "%s", tally_last_error(NULL));
    ck_assert_int_eq(tally_context_backend(tc), TALLY_BACKEND_OPENCL);
    ck_assert_uint_eq(REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT), queue_refs + 1);
    tally_buffer *bx = NULL, *bt = NULL, *bo = NULL, *bs = NULL;
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, mx, &bx), TALLY_OK);
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, mt, &bt), TALLY_OK);
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, mo, &bo), TALLY_OK);
    ck_assert_uint_eq(tally_buffer_size(bx), N * 4u);
    ck_assert_uint_eq(tally_buffer_size(bo), (N + 8) * 4u);
    ck_assert_uint_eq(REFCOUNT(clGetMemObjectInfo, mx, CL_MEM_REFERENCE_COUNT), 2);
    ck_assert_int_eq(tally_buffer_create(tc, 16, &bs), TALLY_OK);

    /* Pointwise KL into the app's buffer (at an offset), batchmean into
     * tally's own. */
    kl_pair(tc, bx, bt, tally_view_f32(bo, 4, ROWS, COLS), bs);
    ck_assert_int_eq(tally_sync(tc), TALLY_OK);

    /* The same on the host backend. */
    tally_context *hc = NULL;
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_HOST, 0, &hc), TALLY_OK);
    tally_buffer *hx = tt_upload(hc, x, N), *ht = tt_upload(hc, t, N), *ho = tt_buffer(hc, N), *hs = tt_buffer(hc, 2);
    kl_pair(hc, hx, ht, tally_view_f32(ho, 0, ROWS, COLS), hs);
    float *want = tt_alloc(N * 4u), *got = tt_alloc((N + 8) * 4u);
    tt_read(ho, 0, want, N);
    /* Read back by the app itself, on its own queue. */
    ck_assert_int_eq(tally__cl.clEnqueueReadBuffer(queue, mo, 1, 0, (N + 8) * 4u, got, 0, NULL, NULL), 0);
    ck_assert_msg(memcmp(got + 4, want, N * 4u) == 0, "pointwise KL through the app's cl_mem differs from the host");
    tt_assert_bits(tt_read1(bs, 1), tt_read1(hs, 1), "batchmean against the host");

    /* A cl_mem of another context is refused; so is a queue of another
     * context. */
    cl_context context2 = tally__cl.clCreateContext(props, 1, &device, NULL, NULL, &err);
    ck_assert_int_eq(err, 0);
    cl_command_queue queue2 = tally__cl.clCreateCommandQueue(context2, device, 0, &err);
    ck_assert_int_eq(err, 0);
    cl_mem foreign = tally__cl.clCreateBuffer(context2, CL_MEM_READ_WRITE, 64, NULL, &err);
    ck_assert_int_eq(err, 0);
    tally_buffer *bf = (tally_buffer *)1;
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, foreign, &bf), TALLY_WRONG_CONTEXT);
    ck_assert_ptr_null(bf);
    tally_context *bad = (tally_context *)1;
    ck_assert_int_eq(tally_context_create_opencl(context, device, queue2, &bad), TALLY_INVALID_ARGUMENT);
    ck_assert_ptr_null(bad);

    /* tally releases only its own references. */
    tally_buffer_release(bx);
    tally_buffer_release(bt);
    tally_buffer_release(bo);
    tally_buffer_release(bs);
    /* Implementations may hold their own references for finished commands
     * a while longer (PoCL does), so the queue's and context's counts must
     * drop by at least tally's one reference rather than return to where
     * they started. */
    uint32_t queue_before = REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT);
    uint32_t ctx_before = REFCOUNT(clGetContextInfo, context, CL_CONTEXT_REFERENCE_COUNT);
    tally_context_release(tc);
    ck_assert_uint_eq(REFCOUNT(clGetMemObjectInfo, mx, CL_MEM_REFERENCE_COUNT), 1);
    ck_assert_uint_eq(REFCOUNT(clGetMemObjectInfo, mo, CL_MEM_REFERENCE_COUNT), 1);
    ck_assert_uint_le(REFCOUNT(clGetContextInfo, context, CL_CONTEXT_REFERENCE_COUNT), ctx_before - 1);
    ck_assert_uint_le(REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT), queue_before - 1);
    ck_assert_uint_ge(REFCOUNT(clGetContextInfo, context, CL_CONTEXT_REFERENCE_COUNT), 1);
    ck_assert_int_eq(tally__cl.clFinish(queue), 0);

    tally_buffer_release(hx);
    tally_buffer_release(ht);
    tally_buffer_release(ho);
    tally_buffer_release(hs);
    tally_context_release(hc);
    tally__cl.clReleaseMemObject(foreign);
    tally__cl.clReleaseCommandQueue(queue2);
    tally__cl.clReleaseContext(context2);
    tally__cl.clReleaseMemObject(mx);
    tally__cl.clReleaseMemObject(mt);
    tally__cl.clReleaseMemObject(mo);
    tally__cl.clReleaseCommandQueue(queue);
    tally__cl.clReleaseContext(context);
    free(x);
    free(t);
    free(want);
    free(got);
}
END_TEST

TT_SUITE("opencl",
         {.name = "errors", .tests = {test_devices_and_bad_index, test_build_failure_log, test_interop},
          .timeout = 600},
         {.name = "kernel_shapes", .tests = {test_kernel_shapes, test_cpu_lanes}, .timeout = 600},
         {.name = "errors_ctx", .tests = {test_huge_allocation, test_context_queries}, TT_FIXTURE, .timeout = 600})
