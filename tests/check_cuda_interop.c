/*
 * tests/check_cuda_interop.c - tally inside a CUDA application, on a GPU.
 *
 * The test plays the app: it opens the driver (through the loader tally
 * uses too), makes the device's
 * primary context current (as the CUDA runtime does), allocates memory and
 * creates a stream, then hands both to tally (tally_context_create_cuda,
 * tally_buffer_wrap_cuda). It checks results against float64 references
 * and against the host backend bit for bit, that tally's work ran on the
 * app's stream, that tally left the thread's current context alone, and that
 * tally freed nothing of the app's: the app still reads, frees and destroys
 * its memory and stream successfully afterwards.
 *
 * Registered with TALLY_TEST_BACKEND=cuda: the runner exits 77 (SKIP) where
 * CUDA has no library or device, so this file only runs on GPU machines.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"
#include "backends/cuda/cuda_loader.h"

const int tally_test_needs_backend = 1;
/* Run by hand without TALLY_TEST_BACKEND, the runner would probe the host. */
const char *const tally_test_only_backend = "cuda";

/* ---- The app's own use of the driver ---------------------------------------
 * Through the one CUDA loader (backends/cuda/cuda_loader.h), whose table
 * holds the entry points an application calls as well as tally's own. This
 * file is built only where the CUDA backend is (it needs cuda.h); elsewhere
 * the suite is registered as skipped. */
static CUdevice app_device;
static CUcontext app_primary;

/* Opens the driver and makes device 0's primary context current on this
 * thread, the state a CUDA runtime app is in after its first cudaMalloc. */
static void app_setup(void)
{
    const char *why = NULL;
    ck_assert_msg(tally__cuda_open(&why) == TALLY_OK, "%s", why);
    ck_assert_int_eq(tally__cu.cuDeviceGet(&app_device, 0), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuDevicePrimaryCtxRetain(&app_primary, app_device), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuCtxSetCurrent(app_primary), CUDA_SUCCESS);
}

static void app_teardown(void)
{
    ck_assert_int_eq(tally__cu.cuDevicePrimaryCtxRelease_v2(app_device), CUDA_SUCCESS);
}

static CUdeviceptr app_alloc(size_t bytes)
{
    CUdeviceptr p = 0;
    ck_assert_int_eq(tally__cu.cuMemAlloc_v2(&p, bytes), CUDA_SUCCESS);
    return p;
}

static void assert_current_is_app(const char *when)
{
    CUcontext current = NULL;
    ck_assert_int_eq(tally__cu.cuCtxGetCurrent(&current), CUDA_SUCCESS);
    ck_assert_msg(current == app_primary, "%s: the thread's current context changed", when);
}

/* A host-backend result for the same input: the bits CUDA must match. */
static float host_sum(const float *x, size_t n)
{
    tally_context *host = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_HOST, 0, &host), NULL);
    tally_buffer *in = tt_upload(host, x, n), *out = tt_buffer(host, 1);
    tt_ok(tally_reduce(host, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(in, 0, 1, (int64_t)n),
                       tally_view_f32(out, 0, 1, 1)),
          host);
    float v = tt_read1(out, 0);
    tally_buffer_release(in);
    tally_buffer_release(out);
    tally_context_release(host);
    return v;
}

/* ---- Tests ----------------------------------------------------------------- */

/* Enough elements for a two-level tree (62 tiles, then their partials). */
#define SUM_N 1000003u
#define RNG_N 4099u

START_TEST(test_app_memory_and_stream)
{
    float *x = tt_alloc(SUM_N * sizeof *x);
    tt_fill_uniform(x, SUM_N, 11, -1.0, 1.0);

    CUstream stream = NULL;
    ck_assert_int_eq(tally__cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    CUdeviceptr dx = app_alloc(SUM_N * 4), dsum = app_alloc(16), draw = app_alloc(RNG_N * 4),
            duni = app_alloc(RNG_N * 4);
    ck_assert_int_eq(tally__cu.cuMemcpyHtoD_v2(dx, x, SUM_N * 4), CUDA_SUCCESS);

    tally_context *ctx = NULL;
    tt_ok(tally_context_create_cuda(0, stream, &ctx), NULL);
    ck_assert_int_eq(tally_context_backend(ctx), TALLY_BACKEND_CUDA);
    assert_current_is_app("after tally_context_create_cuda");

    tally_buffer *bx = NULL, *bsum = NULL, *braw = NULL, *buni = NULL;
    tt_ok(tally_buffer_wrap_cuda(ctx, dx, SUM_N * 4, &bx), ctx);
    tt_ok(tally_buffer_wrap_cuda(ctx, dsum, 16, &bsum), ctx);
    tt_ok(tally_buffer_wrap_cuda(ctx, draw, RNG_N * 4, &braw), ctx);
    tt_ok(tally_buffer_wrap_cuda(ctx, duni, RNG_N * 4, &buni), ctx);
    tt_poison(bsum);
    tt_poison(braw);
    tt_poison(buni);

    /* The ops are queued on the app's stream; the app waits on that stream
     * and reads the results with its own copies. */
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(bx, 0, 1, SUM_N),
                       tally_view_f32(bsum, 1, 1, 1)),
          ctx);
    tally_rng rng = {.seed = 0x0123456789abcdefull, .subsequence = 7, .offset = 6};
    uint64_t consumed = 0;
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_RAW, rng, tally_view_typed(braw, TALLY_U32, 0, 1, RNG_N), &consumed),
          ctx);
    ck_assert_uint_eq(consumed, (RNG_N + 3) / 4 * 4);
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, tally_view_f32(buni, 0, 1, RNG_N), NULL), ctx);
    assert_current_is_app("after the ops");
    ck_assert_int_eq(tally__cu.cuStreamSynchronize(stream), CUDA_SUCCESS);

    float sums[4];
    ck_assert_int_eq(tally__cu.cuMemcpyDtoH_v2(sums, dsum, sizeof sums), CUDA_SUCCESS);
    ck_assert_uint_eq(tt_bits(sums[0]), TT_POISON);
    ck_assert_uint_eq(tt_bits(sums[2]), TT_POISON);
    double ref = 0.0, mag = 0.0;
    tally_ref_mat m = tally_ref_mat_make(x, 1, SUM_N, SUM_N);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUM, TALLY_REF_AXIS_ALL, m, &ref, &mag), 1);
    tt_assert_close(sums[1], ref, tally_ref_tolerance(mag, SUM_N, 0.0), "sum of %u floats", SUM_N);
    tt_assert_bits(sums[1], tally_ref_tree_f32(x, SUM_N, 0, 0.0f), "sum against the float32 tree rule");
    tt_assert_bits(sums[1], host_sum(x, SUM_N), "sum against the host backend");

    uint32_t *raw = tt_alloc(RNG_N * 4);
    float *uni = tt_alloc(RNG_N * 4);
    ck_assert_int_eq(tally__cu.cuMemcpyDtoH_v2(raw, draw, RNG_N * 4), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemcpyDtoH_v2(uni, duni, RNG_N * 4), CUDA_SUCCESS);
    for (uint64_t k = 0; k < RNG_N; k++) {
        uint32_t want = tally_ref_rng_raw(rng.seed, rng.subsequence, rng.offset + k);
        ck_assert_msg(raw[k] == want, "raw[%llu] = 0x%08x, reference 0x%08x", (unsigned long long)k, raw[k],
                      want);
        float u = tally_ref_rng_uniform(rng.seed, rng.subsequence, rng.offset + k);
        tt_assert_bits(uni[k], u, "uniform[%llu]", (unsigned long long)k);
        ck_assert_msg(uni[k] > 0.0f && uni[k] <= 1.0f, "uniform[%llu] = %g", (unsigned long long)k,
                      (double)uni[k]);
    }

    /* tally's own download agrees with the app's copy. */
    tt_assert_bits(tt_read1(bsum, 1), sums[1], "tally_buffer_download of the wrapped sum");

    tally_buffer_release(bx);
    tally_buffer_release(bsum);
    tally_buffer_release(braw);
    tally_buffer_release(buni);
    tally_context_release(ctx);
    assert_current_is_app("after tally_context_release");

    /* Nothing of the app's was freed or destroyed: its data is intact, its
     * stream still works, and each free succeeds exactly once. */
    ck_assert_int_eq(tally__cu.cuStreamSynchronize(stream), CUDA_SUCCESS);
    float *back = tt_alloc(SUM_N * sizeof *back);
    ck_assert_int_eq(tally__cu.cuMemcpyDtoH_v2(back, dx, SUM_N * 4), CUDA_SUCCESS);
    ck_assert_msg(memcmp(back, x, SUM_N * 4) == 0, "the app's input changed");
    ck_assert_int_eq(tally__cu.cuMemFree_v2(dx), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemFree_v2(dsum), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemFree_v2(draw), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemFree_v2(duni), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuStreamDestroy_v2(stream), CUDA_SUCCESS);
    free(back);
    free(raw);
    free(uni);
    free(x);
}
END_TEST

/* tally's own stream and memory: empty buffers, fills, partial copies, and
 * an allocation the device cannot satisfy, after which the context still
 * works. */
START_TEST(test_own_buffers)
{
    tally_context *ctx = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_CUDA, TALLY_DEVICE_DEFAULT, &ctx), NULL);

    tally_buffer *empty = NULL;
    tt_ok(tally_buffer_create(ctx, 0, &empty), ctx);
    ck_assert_uint_eq(tally_buffer_size(empty), 0);
    tt_ok(tally_buffer_upload(empty, 0, NULL, 0), ctx);
    tt_ok(tally_buffer_fill(empty, 0, 0, 0u), ctx);
    tally_buffer_release(empty);

    enum { N = 1000 };
    tally_buffer *buf = tt_buffer(ctx, N);
    uint32_t got[N];
    tt_ok(tally_buffer_fill(buf, 40, 400, 0x3f800000u), ctx);
    float part[3] = {2.5f, -0.0f, 7.0f};
    tt_write(buf, 500, part, 3);
    tt_read(buf, 0, got, N);
    for (int i = 0; i < N; i++) {
        uint32_t want = (i >= 10 && i < 110) ? 0x3f800000u : TT_POISON;
        if (i >= 500 && i < 503) want = tt_bits(part[i - 500]);
        ck_assert_msg(got[i] == want, "element %d = 0x%08x, expected 0x%08x", i, got[i], want);
    }

    /* 2^50 bytes (a petabyte) exceeds any GPU's memory. */
    tally_buffer *huge = (tally_buffer *)ctx;
    tt_assert_status(tally_buffer_create(ctx, (size_t)1 << 50, &huge), TALLY_OUT_OF_MEMORY, ctx);
    ck_assert_ptr_null(huge);
    ck_assert_msg(strstr(tally_last_error(ctx), "cuMemAlloc") != NULL &&
                      strstr(tally_last_error(ctx), "CUDA_ERROR_OUT_OF_MEMORY") != NULL,
                  "message: %s", tally_last_error(ctx));
    tt_ok(tally_buffer_fill(buf, 0, 4, 0x40000000u), ctx);
    tt_assert_bits(tt_read1(buf, 0), 2.0f, "a fill after the failed allocation");
    tt_ok(tally_sync(ctx), ctx);

    tally_buffer_release(buf);
    tally_context_release(ctx);
}
END_TEST

/* Wrapping rejects what would fault inside a kernel. */
START_TEST(test_wrap_rejects)
{
    tally_context *ctx = NULL;
    tt_ok(tally_context_create_cuda(0, NULL, &ctx), NULL);
    CUdeviceptr p = app_alloc(64);
    tally_buffer *buf = NULL;
    tt_assert_status(tally_buffer_wrap_cuda(ctx, p + 2, 16, &buf), TALLY_INVALID_ARGUMENT, ctx);
    ck_assert_msg(strstr(tally_last_error(ctx), "aligned") != NULL, "message: %s", tally_last_error(ctx));
    float host[16];
    tt_assert_status(tally_buffer_wrap_cuda(ctx, (uint64_t)(uintptr_t)host, sizeof host, &buf),
                     TALLY_INVALID_ARGUMENT, ctx);
    ck_assert_msg(strstr(tally_last_error(ctx), "cuMemGetAddressRange") != NULL, "message: %s",
                  tally_last_error(ctx));
    ck_assert_ptr_null(buf);
    /* A pointer inside an allocation and a zero-byte wrap are fine. */
    tt_ok(tally_buffer_wrap_cuda(ctx, p + 16, 48, &buf), ctx);
    tally_buffer_release(buf);
    tt_ok(tally_buffer_wrap_cuda(ctx, 0, 0, &buf), ctx);
    tally_buffer_release(buf);
    tally_context_release(ctx);
    ck_assert_int_eq(tally__cu.cuMemFree_v2(p), CUDA_SUCCESS);
}
END_TEST

/* A context made on one thread is used from another that has no current
 * context; tally pushes and pops its own, leaving that thread as it was. */
typedef struct worker {
    tally_context *ctx;
    tally_buffer *in, *out;
    tally_status status;
    float result;
    CUcontext before, after;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    tally__cu.cuCtxGetCurrent(&w->before);
    w->status = tally_reduce(w->ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(w->in, 0, 1, 4097),
                             tally_view_f32(w->out, 0, 1, 1));
    if (w->status == TALLY_OK) w->status = tally_buffer_download(w->out, 0, &w->result, 4);
    tally__cu.cuCtxGetCurrent(&w->after);
    return NULL;
}

START_TEST(test_other_thread)
{
    float x[4097];
    tt_fill_uniform(x, 4097, 5, -100.0, 100.0);
    tally_context *ctx = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_CUDA, 0, &ctx), NULL);
    worker w = {.ctx = ctx, .in = tt_upload(ctx, x, 4097), .out = tt_buffer(ctx, 1)};
    tt_run_threads(work, &w, sizeof w, 1);
    tt_ok(w.status, ctx);
    ck_assert_ptr_null(w.before);
    ck_assert_ptr_null(w.after);
    tt_assert_bits(w.result, tally_ref_tree_f32(x, 4097, 0, 0.0f), "sum computed from another thread");
    tally_buffer_release(w.in);
    tally_buffer_release(w.out);
    tally_context_release(ctx);
}
END_TEST

/* A stream of another CUDA context than the device's primary one is
 * refused at creation instead of failing in the first launch. */
START_TEST(test_foreign_stream_rejected)
{
    CUcontext other = NULL;
    ck_assert_int_eq(tally__cu.ctx_create(&other, 0, app_device), CUDA_SUCCESS); /* now current */
    CUstream stream = NULL;
    ck_assert_int_eq(tally__cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    tally_context *ctx = NULL;
    tt_assert_status(tally_context_create_cuda(0, stream, &ctx), TALLY_INVALID_ARGUMENT, NULL);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(tally_last_error(NULL), "another CUDA context") != NULL, "message: %s",
                  tally_last_error(NULL));
    ck_assert_int_eq(tally__cu.cuStreamDestroy_v2(stream), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuCtxDestroy_v2(other), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuCtxSetCurrent(app_primary), CUDA_SUCCESS);
}
END_TEST

/* Two tally contexts share the primary context (each with its own module
 * and stream); releasing one leaves the other working. */
START_TEST(test_two_contexts)
{
    float x[1000];
    tt_fill_uniform(x, 1000, 9, 0.0, 1.0);
    tally_context *a = NULL, *b = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_CUDA, 0, &a), NULL);
    tt_ok(tally_context_create_cuda(0, NULL, &b), NULL);
    tally_buffer *xa = tt_upload(a, x, 1000), *oa = tt_buffer(a, 1);
    tally_buffer *xb = tt_upload(b, x, 1000), *ob = tt_buffer(b, 1);
    tt_ok(tally_reduce(a, TALLY_MAX, TALLY_AXIS_ALL, tally_view_f32(xa, 0, 1, 1000), tally_view_f32(oa, 0, 1, 1)),
          a);
    tally_buffer_release(xa);
    float max_a = tt_read1(oa, 0);
    tally_buffer_release(oa);
    tally_context_release(a);
    tt_ok(tally_reduce(b, TALLY_MAX, TALLY_AXIS_ALL, tally_view_f32(xb, 0, 1, 1000), tally_view_f32(ob, 0, 1, 1)),
          b);
    tt_ok(tally_sync(b), b);
    float want = tally_ref_tree_f32(x, 1000, 2, 0.0f);
    tt_assert_bits(max_a, want, "max in the first context");
    tt_assert_bits(tt_read1(ob, 0), want, "max in the second context after the first was released");
    tally_buffer_release(xb);
    tally_buffer_release(ob);
    tally_context_release(b);
}
END_TEST

START_TEST(test_devices_match_context)
{
    tally_device_info info[16];
    int count = 0;
    tt_ok(tally_devices(TALLY_BACKEND_CUDA, info, 16, &count), NULL);
    ck_assert_int_ge(count, 1);
    tally_context *ctx = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_CUDA, 0, &ctx), NULL);
    ck_assert_str_eq(tally_context_device_name(ctx), info[0].name);
    tally_context_release(ctx);
}
END_TEST

/* ---- The app's kernel on a default stream ---------------------------------
 * What PyTorch, CuPy and every CUDA runtime program do: a kernel writes the
 * inputs on the default stream and the next library call reads them, with no
 * synchronisation in between. The app's kernel waits `delay_ns` on the GPU's
 * clock before it writes, so a tally that ran on any other stream would
 * read the zeros underneath and return 0. Hand-written PTX (JIT-compiled by
 * the driver), so this file needs no CUDA toolkit to build. */
static const char app_fill_ptx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry app_fill(.param .u64 dst, .param .u64 count, .param .u32 bits, .param .u64 delay_ns)\n"
    "{\n"
    "  .reg .pred %p<3>; .reg .b32 %r<6>; .reg .b64 %rd<12>;\n"
    "  ld.param.u64 %rd1, [dst]; ld.param.u64 %rd2, [count];\n"
    "  ld.param.u32 %r1, [bits]; ld.param.u64 %rd3, [delay_ns];\n"
    "  mov.u64 %rd4, %globaltimer; add.u64 %rd5, %rd4, %rd3;\n"
    "WAIT:\n"
    "  mov.u64 %rd6, %globaltimer; setp.lt.u64 %p1, %rd6, %rd5; @%p1 bra WAIT;\n"
    "  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x; mov.u32 %r5, %nctaid.x;\n"
    "  mul.wide.u32 %rd7, %r2, %r3; cvt.u64.u32 %rd8, %r4; add.u64 %rd7, %rd7, %rd8;\n"
    "  mul.wide.u32 %rd9, %r5, %r3;\n"
    "LOOP:\n"
    "  setp.ge.u64 %p2, %rd7, %rd2; @%p2 bra DONE;\n"
    "  shl.b64 %rd10, %rd7, 2; add.u64 %rd11, %rd1, %rd10; st.global.u32 [%rd11], %r1;\n"
    "  add.u64 %rd7, %rd7, %rd9; bra LOOP;\n"
    "DONE:\n"
    "  ret;\n"
    "}\n";

static void app_fill(CUfunction f, CUstream stream, CUdeviceptr dst, unsigned long long count, float value,
                     unsigned long long delay_ns)
{
    unsigned bits = tt_bits(value);
    void *params[] = {&dst, &count, &bits, &delay_ns};
    ck_assert_int_eq(tally__cu.cuLaunchKernel(f, 264, 1, 1, 256, 1, 1, 0, stream, params, NULL), CUDA_SUCCESS);
}

/* Rows x cols of the KL below: big enough that the app's writes take a while
 * and tally's tree has two levels. */
#define DEFAULT_ROWS 256u
#define DEFAULT_COLS 16384u

static void check_default_stream(CUstream stream, const char *label)
{
    const size_t n = (size_t)DEFAULT_ROWS * DEFAULT_COLS;
    CUmodule module = NULL;
    CUfunction fill = NULL;
    ck_assert_int_eq(tally__cu.cuModuleLoadData(&module, app_fill_ptx), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuModuleGetFunction(&fill, module, "app_fill"), CUDA_SUCCESS);
    CUdeviceptr dp = app_alloc(n * 4), dt = app_alloc(n * 4), dy = app_alloc(16);
    ck_assert_int_eq(tally__cu.cuMemsetD32_v2(dp, 0u, n), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemsetD32_v2(dt, 0u, n), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemsetD32_v2(dy, TT_POISON, 4), CUDA_SUCCESS);

    tally_context *ctx = NULL;
    tt_ok(tally_context_create_cuda(0, stream, &ctx), NULL);
    tally_buffer *bp = NULL, *bt = NULL, *by = NULL;
    tt_ok(tally_buffer_wrap_cuda(ctx, dp, n * 4, &bp), ctx);
    tt_ok(tally_buffer_wrap_cuda(ctx, dt, n * 4, &bt), ctx);
    tt_ok(tally_buffer_wrap_cuda(ctx, dy, 16, &by), ctx);

    /* The app's kernels, then tally's op, back to back on the same stream. */
    app_fill(fill, stream, dp, n, 0.25f, 50000000ull);
    app_fill(fill, stream, dt, n, 0.5f, 0ull);
    tt_ok(tally_kl_div(ctx, tally_view_f32(bp, 0, DEFAULT_ROWS, DEFAULT_COLS),
                       tally_view_f32(bt, 0, DEFAULT_ROWS, DEFAULT_COLS), TALLY_REDUCTION_BATCHMEAN,
                       TALLY_KL_INPUT_IS_PROB, tally_view_f32(by, 0, 1, 1)),
          ctx);
    float got = 0.0f;
    tt_ok(tally_read_scalar(ctx, tally_view_f32(by, 0, 1, 1), &got), ctx);

    /* Every element contributes 0.5 * (log 0.5 - log 0.25) = 0.5 log 2, and
     * batchmean divides the sum by the rows. */
    double ref = 0.5 * log(2.0) * (double)DEFAULT_COLS;
    tt_assert_close(got, ref, 1e-5 * ref, "%s: KL batchmean after the app's kernels", label);

    /* The same bits as the host backend on the same values. */
    tally_context *host = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_HOST, 0, &host), NULL);
    float *p = tt_alloc(n * 4), *t = tt_alloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        p[i] = 0.25f;
        t[i] = 0.5f;
    }
    tally_buffer *hp = tt_upload(host, p, n), *ht = tt_upload(host, t, n), *hy = tt_buffer(host, 1);
    tt_ok(tally_kl_div(host, tally_view_f32(hp, 0, DEFAULT_ROWS, DEFAULT_COLS),
                       tally_view_f32(ht, 0, DEFAULT_ROWS, DEFAULT_COLS), TALLY_REDUCTION_BATCHMEAN,
                       TALLY_KL_INPUT_IS_PROB, tally_view_f32(hy, 0, 1, 1)),
          host);
    tt_assert_bits(got, tt_read1(hy, 0), "%s: against the host backend", label);
    tally_buffer_release(hp);
    tally_buffer_release(ht);
    tally_buffer_release(hy);
    tally_context_release(host);
    free(p);
    free(t);

    tally_buffer_release(bp);
    tally_buffer_release(bt);
    tally_buffer_release(by);
    tally_context_release(ctx);
    assert_current_is_app(label);
    ck_assert_int_eq(tally__cu.cuMemFree_v2(dp), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemFree_v2(dt), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuMemFree_v2(dy), CUDA_SUCCESS);
    ck_assert_int_eq(tally__cu.cuModuleUnload(module), CUDA_SUCCESS);
}

START_TEST(test_stream_zero_is_default_stream)
{
    check_default_stream(NULL, "stream 0");
}
END_TEST

START_TEST(test_stream_legacy)
{
    check_default_stream(CU_STREAM_LEGACY, "CU_STREAM_LEGACY");
}
END_TEST

START_TEST(test_stream_per_thread)
{
    check_default_stream(CU_STREAM_PER_THREAD, "CU_STREAM_PER_THREAD");
}
END_TEST

/* tally's own context (tally_context_create) still makes a stream of its
 * own, and host memory cannot be wrapped on CUDA. */
START_TEST(test_wrap_host_refused)
{
    tally_context *ctx = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_CUDA, TALLY_DEVICE_DEFAULT, &ctx), NULL);
    float host[4] = {0};
    tally_buffer *b = NULL;
    tt_assert_status(tally_buffer_wrap_host(ctx, host, sizeof host, &b), TALLY_INVALID_ARGUMENT, ctx);
    ck_assert_ptr_null(b);
    tally_context_release(ctx);
}
END_TEST

TT_SUITE("cuda_interop",
         {.name = "interop", .setup = app_setup, .teardown = app_teardown,
          .tests = {test_app_memory_and_stream, test_own_buffers, test_wrap_rejects, test_other_thread,
                    test_foreign_stream_rejected, test_two_contexts, test_devices_match_context,
                    test_stream_zero_is_default_stream, test_stream_legacy, test_stream_per_thread,
                    test_wrap_host_refused}})
