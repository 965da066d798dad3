/*
 * tests/check_wrap_host.c - tally_buffer_wrap_host: the app's host memory
 * used in place, as NumPy arrays are by the Python package.
 *
 * On the host backend and on OpenCL devices that share memory with the host
 * (PoCL's CPU device), ops read the app's memory and write their results
 * into it: after tally_sync (or the buffer's release) the app reads them
 * directly, bit-identical to the same op on buffers tally allocated. Devices
 * that do not share memory (NVIDIA's OpenCL, CUDA) refuse with
 * INVALID_ARGUMENT and say why. Registered for every backend.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

const int tally_test_needs_backend = 1;

#define ROWS 37u
#define COLS 611u /* rows of an odd length: no row starts 16-byte aligned */
#define N (ROWS * COLS)

/* 1 when this context's device is expected to share memory with the host. */
static int shares_host_memory(tally_context *ctx)
{
    if (tally_context_backend(ctx) == TALLY_BACKEND_HOST) return 1;
    if (tally_context_backend(ctx) != TALLY_BACKEND_OPENCL) return 0;
    tally_device_info info[16];
    int count = 0;
    if (tally_devices(TALLY_BACKEND_OPENCL, info, 16, &count) != TALLY_OK) return 0;
    for (int i = 0; i < count && i < 16; i++)
        if (strcmp(info[i].name, tally_context_device_name(ctx)) == 0 ||
            strstr(tally_context_device_name(ctx), info[i].name) == tally_context_device_name(ctx))
            return !info[i].is_gpu;
    return 0;
}

static float *aligned_floats(size_t n)
{
    float *p = aligned_alloc(64, ((n * sizeof(float)) + 63) & ~(size_t)63);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* KL (reduction none, an elementwise output) and a row logsumexp through
 * wrapped memory, against the same ops on tally's own buffers. */
/* Pointwise KL of probabilities p against t into kl, and each row's
 * logsumexp of p from its second element on (in app memory, an unaligned
 * start) into lse. */
static void run_ops(tally_context *ctx, tally_buffer *p, tally_buffer *t, tally_buffer *kl, tally_buffer *lse)
{
    tt_ok(tally_kl_div(ctx, tally_view_f32(p, 0, ROWS, COLS), tally_view_f32(t, 0, ROWS, COLS), TALLY_REDUCTION_NONE,
                       TALLY_KL_INPUT_IS_PROB, tally_view_f32(kl, 0, ROWS, COLS)),
          ctx);
    tt_ok(tally_reduce(ctx, TALLY_LOGSUMEXP, TALLY_AXIS_ROW, tally_view_f32_strided(p, 1, ROWS, COLS - 1, COLS),
                       tally_view_f32(lse, 0, ROWS, 1)),
          ctx);
}

START_TEST(test_results_land_in_app_memory)
{
    tally_context *ctx = tt_context();
    tally_buffer *probe = NULL;
    float tiny[4] = {0};
    tally_status st = tally_buffer_wrap_host(ctx, tiny, sizeof tiny, &probe);
    if (!shares_host_memory(ctx)) {
        tt_assert_status(st, TALLY_INVALID_ARGUMENT, ctx);
        ck_assert_ptr_null(probe);
        ck_assert_msg(strstr(tally_last_error(ctx), "upload") != NULL, "message: %s", tally_last_error(ctx));
        return;
    }
    tt_ok(st, ctx);
    tally_buffer_release(probe);

    float *p = aligned_floats(N), *t = aligned_floats(N), *kl = aligned_floats(N), *lse = aligned_floats(ROWS);
    tt_fill_uniform(p, N, 41, 0.01, 1.0);
    tt_fill_uniform(t, N, 42, 0.0, 1.0);
    for (size_t i = 0; i < N; i++) kl[i] = tt_float(TT_POISON);
    for (size_t i = 0; i < ROWS; i++) lse[i] = tt_float(TT_POISON);

    tally_buffer *wp = NULL, *wt = NULL, *wkl = NULL, *wlse = NULL;
    tt_ok(tally_buffer_wrap_host(ctx, p, N * 4, &wp), ctx);
    tt_ok(tally_buffer_wrap_host(ctx, t, N * 4, &wt), ctx);
    tt_ok(tally_buffer_wrap_host(ctx, kl, N * 4, &wkl), ctx);
    tt_ok(tally_buffer_wrap_host(ctx, lse, ROWS * 4, &wlse), ctx);
    ck_assert_uint_eq(tally_buffer_size(wkl), N * 4);
    run_ops(ctx, wp, wt, wkl, wlse);
    tt_ok(tally_sync(ctx), ctx);

    /* The same ops on buffers tally owns. */
    tally_buffer *bp = tt_upload(ctx, p, N), *bt = tt_upload(ctx, t, N), *bkl = tt_buffer(ctx, N),
                 *blse = tt_buffer(ctx, ROWS);
    run_ops(ctx, bp, bt, bkl, blse);
    float *want_kl = tt_alloc(N * 4), *want_lse = tt_alloc(ROWS * 4);
    tt_read(bkl, 0, want_kl, N);
    tt_read(blse, 0, want_lse, ROWS);
    for (size_t i = 0; i < N; i++) tt_assert_bits(kl[i], want_kl[i], "kl[%zu] in app memory", i);
    for (size_t r = 0; r < ROWS; r++) {
        tt_assert_bits(lse[r], want_lse[r], "logsumexp of row %zu in app memory", r);
        /* Independent of tally: the row's logsumexp in float64. */
        double m = -1e300, s = 0.0;
        for (size_t c = 1; c < COLS; c++) m = p[r * COLS + c] > m ? p[r * COLS + c] : m;
        for (size_t c = 1; c < COLS; c++) s += exp((double)p[r * COLS + c] - m);
        tt_assert_close(lse[r], m + log(s), 1e-5, "logsumexp of row %zu against float64", r);
    }
    /* Inputs untouched. */
    float *p_again = aligned_floats(N);
    tt_fill_uniform(p_again, N, 41, 0.01, 1.0);
    ck_assert_msg(memcmp(p, p_again, N * 4) == 0, "the op changed its input in app memory");

    tally_buffer_release(bp);
    tally_buffer_release(bt);
    tally_buffer_release(bkl);
    tally_buffer_release(blse);
    /* Released wrappers leave the app's memory allocated and intact. */
    tally_buffer_release(wp);
    tally_buffer_release(wt);
    tally_buffer_release(wkl);
    tally_buffer_release(wlse);
    for (size_t i = 0; i < N; i++) tt_assert_bits(kl[i], want_kl[i], "kl[%zu] after release", i);
    free(p);
    free(p_again);
    free(t);
    free(kl);
    free(lse);
    free(want_kl);
    free(want_lse);
}
END_TEST

/* An output written and then the buffer released without a sync: the
 * release itself makes the results visible. Then the app changes its input
 * and wraps it again: the next op sees the new values. */
START_TEST(test_release_publishes_and_rewrap_sees_new_data)
{
    tally_context *ctx = tt_context();
    if (!shares_host_memory(ctx)) return; /* refusal covered above */
    float *x = aligned_floats(1000), *y = aligned_floats(4);
    for (int i = 0; i < 1000; i++) x[i] = (float)(i % 7);
    y[0] = tt_float(TT_POISON);
    for (int round = 0; round < 2; round++) {
        tally_buffer *wx = NULL, *wy = NULL;
        tt_ok(tally_buffer_wrap_host(ctx, x, 1000 * 4, &wx), ctx);
        tt_ok(tally_buffer_wrap_host(ctx, y, 16, &wy), ctx);
        tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(wx, 0, 1, 1000),
                           tally_view_f32(wy, 0, 1, 1)),
              ctx);
        tally_buffer_release(wx);
        tally_buffer_release(wy);
        double want = 0.0;
        for (int i = 0; i < 1000; i++) want += x[i];
        ck_assert_msg(y[0] == (float)want, "round %d: sum %g, expected %g", round, (double)y[0], want);
        for (int i = 0; i < 1000; i++) x[i] = (float)(i % 5) + 0.5f;
    }
    free(x);
    free(y);
}
END_TEST

START_TEST(test_bad_arguments)
{
    tally_context *ctx = tt_context();
    float data[8] __attribute__((aligned(16))) = {0};
    tally_buffer *b = NULL;
    tt_assert_status(tally_buffer_wrap_host(NULL, data, 16, &b), TALLY_INVALID_ARGUMENT, NULL);
    tt_assert_status(tally_buffer_wrap_host(ctx, data, 16, NULL), TALLY_INVALID_ARGUMENT, ctx);
    tt_assert_status(tally_buffer_wrap_host(ctx, NULL, 16, &b), TALLY_INVALID_ARGUMENT, ctx);
    ck_assert_ptr_null(b);
    tt_assert_status(tally_buffer_wrap_host(ctx, (char *)data + 2, 8, &b), TALLY_INVALID_ARGUMENT, ctx);
    ck_assert_msg(strstr(tally_last_error(ctx), "aligned") != NULL, "message: %s", tally_last_error(ctx));
    ck_assert_ptr_null(b);
    if (!shares_host_memory(ctx)) return;
    /* Empty wraps are allowed (an empty NumPy array), and views are bounded
     * by the wrapped size like any buffer's. */
    tt_ok(tally_buffer_wrap_host(ctx, NULL, 0, &b), ctx);
    ck_assert_uint_eq(tally_buffer_size(b), 0);
    tally_buffer_release(b);
    tt_ok(tally_buffer_wrap_host(ctx, data, 16, &b), ctx);
    tally_buffer *out = tt_buffer(ctx, 1);
    tt_assert_status(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(b, 0, 1, 5),
                                  tally_view_f32(out, 0, 1, 1)),
                     TALLY_OUT_OF_BOUNDS, ctx);
    tally_buffer_release(out);
    tally_buffer_release(b);
}
END_TEST

TT_SUITE("wrap_host",
         {.name = "wrap_host", TT_FIXTURE,
          .tests = {test_results_land_in_app_memory, test_release_publishes_and_rewrap_sees_new_data,
                    test_bad_arguments}})
