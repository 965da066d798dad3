/*
 * tests/check_errors.c - every bad argument of every public entry point, on
 * the backend named by TALLY_TEST_BACKEND. Each error must come back as its
 * status (never a crash), leave a message that names the argument in
 * tally_last_error, write nothing, and leave the context usable: after every
 * expected error the test runs a small sum and checks its value.
 *
 * Also: status names and strings for every status (from the same X-macro
 * table), version macros against the library, backend names, and the
 * TALLY_BACKEND / TALLY_DEVICE environment variables (each test runs in its
 * own process in Check's fork mode, so setenv stays local to it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/internal.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

/* A sum of {1, 2, 3} through the context: proves it still works, and that
 * the successful calls left the last failure's message as it was
 * (errno-like; tally.h). */
static void still_usable(tally_context *ctx)
{
    char before[512];
    snprintf(before, sizeof before, "%s", tally_last_error(ctx));
    const float x[3] = {1, 2, 3};
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, 3), 6.0f, "sum after an error");
    ck_assert_msg(strncmp(tally_last_error(ctx), before, sizeof before - 1) == 0,
                  "a successful call changed the message '%s' to '%s'", before, tally_last_error(ctx));
}

/* Asserts the status, a message containing `mention` (when not NULL) on the
 * context (or the thread when ctx is NULL), and that the context still works. */
#define EXPECT(call, status, ctx, mention) expect_at(__FILE__, __LINE__, #call, (call), (status), (ctx), (mention))

static void expect_at(const char *file, int line, const char *expr, tally_status got, tally_status want,
                      tally_context *ctx, const char *mention)
{
    const char *msg = tally_last_error(ctx);
    ck_assert_msg(got == want, "%s:%d: %s returned %s, expected %s (message: %s)", file, line, expr,
                  tally_status_name(got), tally_status_name(want), msg);
    ck_assert_msg(msg[0] != '\0', "%s:%d: %s: no message", file, line, expr);
    if (mention != NULL)
        ck_assert_msg(strstr(msg, mention) != NULL, "%s:%d: %s: message '%s' does not mention '%s'", file, line, expr,
                      msg, mention);
    if (ctx != NULL) still_usable(ctx);
}

/* Common objects of a test: a context, inputs of 64 floats and outputs of
 * 64 floats (poisoned), a second context with a buffer of its own. */
typedef struct world {
    tally_context *ctx, *other;
    tally_buffer *in, *out, *foreign, *ints;
} world;

static world make_world(void)
{
    world w;
    w.ctx = tt_context();
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = 0.5f + (float)(i % 7);
    w.in = tt_upload(w.ctx, x, 64);
    w.out = tt_buffer(w.ctx, 64);
    w.ints = tt_buffer(w.ctx, 64);
    tally_status st = tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &w.other);
    ck_assert_msg(st == TALLY_OK, "second context: %s", tally_last_error(NULL));
    w.foreign = tt_upload(w.other, x, 64);
    return w;
}

/* Nothing may have been written to the output buffer. */
static void out_untouched(const world *w)
{
    uint32_t h[64];
    tt_read(w->out, 0, h, 64);
    for (int i = 0; i < 64; i++) ck_assert_msg(h[i] == TT_POISON, "output element %d was written after an error", i);
}

static void free_world(world *w)
{
    out_untouched(w);
    tally_buffer_release(w->in);
    tally_buffer_release(w->out);
    tally_buffer_release(w->ints);
    tally_buffer_release(w->foreign);
    tally_context_release(w->other);
}

static tally_view f32(tally_buffer *b, int64_t off, int64_t rows, int64_t cols)
{
    return tally_view_f32(b, off, rows, cols);
}

/* ---- Views, through tally_reduce (every op shares the same checks) ---------- */

START_TEST(view_errors)
{
    world w = make_world();
    tally_context *ctx = w.ctx;
    tally_view out = f32(w.out, 0, 1, 1);
    tally_view x = f32(w.in, 0, 8, 8);
    EXPECT(tally_reduce(NULL, TALLY_SUM, TALLY_AXIS_ALL, x, out), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(NULL, 0, 8, 8), out), TALLY_INVALID_ARGUMENT, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, x, f32(NULL, 0, 1, 1)), TALLY_INVALID_ARGUMENT, ctx, "out");
    /* Wrong dtype, and a dtype value that does not exist. */
    tally_view xi = tally_view_typed(w.in, TALLY_I32, 0, 8, 8);
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, xi, out), TALLY_UNSUPPORTED_DTYPE, ctx, "x");
    tally_view bad_dtype = x;
    bad_dtype.dtype = (tally_dtype)99;
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, bad_dtype, out), TALLY_UNSUPPORTED_DTYPE, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, x, tally_view_typed(w.out, TALLY_U32, 0, 1, 1)),
           TALLY_UNSUPPORTED_DTYPE, ctx, "out");
    /* Negative offset, rows, cols, stride. */
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, -1, 2, 2), out), TALLY_INVALID_ARGUMENT, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, 0, -2, 2), out), TALLY_INVALID_ARGUMENT, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, 0, 2, -2), out), TALLY_INVALID_ARGUMENT, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32_strided(w.in, 0, 2, 2, -4), out),
           TALLY_INVALID_ARGUMENT, ctx, "x");
    /* stride < cols with several rows. */
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32_strided(w.in, 0, 3, 8, 7), out),
           TALLY_INVALID_ARGUMENT, ctx, "stride");
    /* rows * cols overflows 64 bits; the last element's index overflows. */
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, 0, INT64_MAX, 4), out), TALLY_SIZE_OVERFLOW, ctx,
           "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32_strided(w.in, 5, 3, 1, INT64_MAX), out),
           TALLY_SIZE_OVERFLOW, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, INT64_MAX, 1, 1), out), TALLY_SIZE_OVERFLOW, ctx,
           "x");
    /* Views outside their buffer: one element too many, a far offset, a
     * stride that walks off the end. */
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, 0, 1, 65), out), TALLY_OUT_OF_BOUNDS, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, 60, 1, 5), out), TALLY_OUT_OF_BOUNDS, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32_strided(w.in, 0, 4, 4, 21), out),
           TALLY_OUT_OF_BOUNDS, ctx, "x");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, x, f32(w.out, 64, 1, 1)), TALLY_OUT_OF_BOUNDS, ctx, "out");
    /* A view of a buffer from another context. */
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.foreign, 0, 8, 8), out), TALLY_WRONG_CONTEXT, ctx, "x");
    EXPECT(tally_reduce(w.other, TALLY_SUM, TALLY_AXIS_ALL, f32(w.foreign, 0, 8, 8), out), TALLY_WRONG_CONTEXT,
           w.other, "out");
    /* An empty view may have any offset inside or at the end of its buffer. */
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, f32(w.in, 64, 0, 0), f32(w.ints, 0, 1, 1)), ctx);
    free_world(&w);
}
END_TEST

START_TEST(reduce_errors)
{
    world w = make_world();
    tally_context *ctx = w.ctx;
    tally_view x = f32(w.in, 0, 4, 16), out1 = f32(w.out, 0, 1, 1);
    EXPECT(tally_reduce(ctx, (tally_reduce_op)0, TALLY_AXIS_ALL, x, out1), TALLY_INVALID_ARGUMENT, ctx, "op");
    EXPECT(tally_reduce(ctx, (tally_reduce_op)7, TALLY_AXIS_ALL, x, out1), TALLY_INVALID_ARGUMENT, ctx, "op");
    EXPECT(tally_reduce(ctx, TALLY_SUM, (tally_axis)0, x, out1), TALLY_INVALID_ARGUMENT, ctx, "axis");
    EXPECT(tally_reduce(ctx, TALLY_SUM, (tally_axis)3, x, out1), TALLY_INVALID_ARGUMENT, ctx, "axis");
    /* Output shapes: all needs 1 value; row needs rows values as a vector. */
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, x, f32(w.out, 0, 2, 1)), TALLY_SHAPE_MISMATCH, ctx, "out");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ROW, x, f32(w.out, 0, 3, 1)), TALLY_SHAPE_MISMATCH, ctx, "out");
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ROW, x, f32(w.out, 0, 2, 2)), TALLY_SHAPE_MISMATCH, ctx, "out");
    /* Output overlapping the input (same buffer). */
    EXPECT(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, x, f32(w.in, 10, 1, 1)), TALLY_INVALID_ARGUMENT, ctx,
           "overlaps");
    EXPECT(tally_reduce(ctx, TALLY_MAX, TALLY_AXIS_ROW, x, f32(w.in, 60, 4, 1)), TALLY_INVALID_ARGUMENT, ctx,
           "overlaps");
    /* Empty inputs where the result is undefined. */
    EXPECT(tally_reduce(ctx, TALLY_MEAN, TALLY_AXIS_ALL, f32(w.in, 0, 0, 3), out1), TALLY_EMPTY_INPUT, ctx, "mean");
    EXPECT(tally_reduce(ctx, TALLY_MIN, TALLY_AXIS_ROW, f32(w.in, 0, 2, 0), f32(w.out, 0, 2, 1)), TALLY_EMPTY_INPUT,
           ctx, "min");
    EXPECT(tally_reduce(ctx, TALLY_MAX, TALLY_AXIS_ALL, f32(w.in, 0, 3, 0), out1), TALLY_EMPTY_INPUT, ctx, "max");
    free_world(&w);
}
END_TEST

START_TEST(kl_errors)
{
    world w = make_world();
    tally_context *ctx = w.ctx;
    tally_view a = f32(w.in, 0, 4, 8), b = f32(w.in, 32, 4, 8), out1 = f32(w.out, 0, 1, 1);
    EXPECT(tally_kl_div(NULL, a, b, TALLY_REDUCTION_SUM, 0, out1), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    EXPECT(tally_kl_div(ctx, a, b, (tally_reduction)-1, 0, out1), TALLY_INVALID_ARGUMENT, ctx, "reduction");
    EXPECT(tally_kl_div(ctx, a, b, (tally_reduction)4, 0, out1), TALLY_INVALID_ARGUMENT, ctx, "reduction");
    EXPECT(tally_kl_div(ctx, a, b, TALLY_REDUCTION_SUM, 16u, out1), TALLY_INVALID_ARGUMENT, ctx, "flags");
    /* Each side is described once: logits exclude probabilities (input) and
     * log-probabilities (target). */
    EXPECT(tally_kl_div(ctx, a, b, TALLY_REDUCTION_SUM, TALLY_KL_INPUT_LOGITS | TALLY_KL_INPUT_IS_PROB, out1),
           TALLY_INVALID_ARGUMENT, ctx, "TALLY_KL_INPUT_LOGITS and TALLY_KL_INPUT_IS_PROB");
    EXPECT(tally_kl_div(ctx, a, b, TALLY_REDUCTION_NONE, TALLY_KL_TARGET_LOGITS | TALLY_KL_LOG_TARGET,
                        f32(w.out, 0, 4, 8)),
           TALLY_INVALID_ARGUMENT, ctx, "TALLY_KL_TARGET_LOGITS and TALLY_KL_LOG_TARGET");
    /* The logits forms have no gradient yet: the backward names the flags. */
    tally_view g1 = f32(w.in, 0, 1, 1), gx = f32(w.out, 0, 4, 8);
    EXPECT(tally_kl_div_backward(ctx, a, b, g1, TALLY_REDUCTION_SUM, TALLY_KL_INPUT_LOGITS, gx, f32(NULL, 0, 0, 0)),
           TALLY_INVALID_ARGUMENT, ctx, "TALLY_KL_INPUT_LOGITS");
    EXPECT(tally_kl_div_backward(ctx, a, b, g1, TALLY_REDUCTION_MEAN, TALLY_KL_TARGET_LOGITS, gx, f32(NULL, 0, 0, 0)),
           TALLY_INVALID_ARGUMENT, ctx, "TALLY_KL_TARGET_LOGITS");
    EXPECT(tally_kl_div(ctx, f32(NULL, 0, 4, 8), b, TALLY_REDUCTION_SUM, 0, out1), TALLY_INVALID_ARGUMENT, ctx,
           "input");
    EXPECT(tally_kl_div(ctx, a, f32(NULL, 0, 4, 8), TALLY_REDUCTION_SUM, 0, out1), TALLY_INVALID_ARGUMENT, ctx,
           "target");
    EXPECT(tally_kl_div(ctx, a, f32(w.foreign, 0, 4, 8), TALLY_REDUCTION_SUM, 0, out1), TALLY_WRONG_CONTEXT, ctx,
           "target");
    EXPECT(tally_kl_div(ctx, a, f32(w.in, 32, 8, 4), TALLY_REDUCTION_SUM, 0, out1), TALLY_SHAPE_MISMATCH, ctx,
           "target");
    EXPECT(tally_kl_div(ctx, a, tally_view_typed(w.in, TALLY_U32, 32, 4, 8), TALLY_REDUCTION_SUM, 0, out1),
           TALLY_UNSUPPORTED_DTYPE, ctx, "target");
    /* none needs an output of the input's shape; reductions need 1 value. */
    EXPECT(tally_kl_div(ctx, a, b, TALLY_REDUCTION_NONE, 0, f32(w.out, 0, 8, 4)), TALLY_SHAPE_MISMATCH, ctx, "out");
    EXPECT(tally_kl_div(ctx, a, b, TALLY_REDUCTION_MEAN, 0, f32(w.out, 0, 1, 2)), TALLY_SHAPE_MISMATCH, ctx, "out");
    EXPECT(tally_kl_div(ctx, a, b, TALLY_REDUCTION_NONE, 0, f32(w.in, 16, 4, 8)), TALLY_INVALID_ARGUMENT, ctx,
           "overlaps");
    EXPECT(tally_kl_div(ctx, a, b, TALLY_REDUCTION_SUM, 0, f32(w.in, 40, 1, 1)), TALLY_INVALID_ARGUMENT, ctx,
           "target");
    EXPECT(tally_kl_div(ctx, f32(w.in, 0, 0, 8), f32(w.in, 8, 0, 8), TALLY_REDUCTION_MEAN, 0, out1), TALLY_EMPTY_INPUT,
           ctx, "mean");
    EXPECT(tally_kl_div(ctx, f32(w.in, 0, 0, 8), f32(w.in, 8, 0, 8), TALLY_REDUCTION_BATCHMEAN, 0, out1),
           TALLY_EMPTY_INPUT, ctx, "batchmean");
    free_world(&w);
}
END_TEST

START_TEST(dm_errors)
{
    world w = make_world();
    tally_context *ctx = w.ctx;
    tally_view counts = f32(w.in, 0, 3, 5), la = f32(w.in, 20, 1, 5), out3 = f32(w.out, 0, 3, 1);
    EXPECT(tally_dirichlet_multinomial(NULL, counts, la, TALLY_REDUCTION_NONE, 0, out3), TALLY_INVALID_ARGUMENT, NULL,
           "ctx");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, la, TALLY_REDUCTION_BATCHMEAN, 0, out3), TALLY_INVALID_ARGUMENT,
           ctx, "reduction");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, la, (tally_reduction)9, 0, out3), TALLY_INVALID_ARGUMENT, ctx,
           "reduction");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, la, TALLY_REDUCTION_NONE, 2u, out3), TALLY_INVALID_ARGUMENT, ctx,
           "flags");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, f32(w.in, 20, 1, 4), TALLY_REDUCTION_NONE, 0, out3),
           TALLY_SHAPE_MISMATCH, ctx, "log_alpha");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, f32(w.in, 20, 2, 5), TALLY_REDUCTION_NONE, 0, out3),
           TALLY_SHAPE_MISMATCH, ctx, "log_alpha");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, f32(w.foreign, 0, 1, 5), TALLY_REDUCTION_NONE, 0, out3),
           TALLY_WRONG_CONTEXT, ctx, "log_alpha");
    EXPECT(tally_dirichlet_multinomial(ctx, tally_view_typed(w.in, TALLY_I32, 0, 3, 5), la, TALLY_REDUCTION_NONE, 0,
                                       out3),
           TALLY_UNSUPPORTED_DTYPE, ctx, "counts");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, la, TALLY_REDUCTION_NONE, 0, f32(w.out, 0, 1, 4)),
           TALLY_SHAPE_MISMATCH, ctx, "out");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, la, TALLY_REDUCTION_SUM, 0, out3), TALLY_SHAPE_MISMATCH, ctx,
           "out");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, la, TALLY_REDUCTION_NONE, 0, f32(w.in, 22, 3, 1)),
           TALLY_INVALID_ARGUMENT, ctx, "log_alpha");
    EXPECT(tally_dirichlet_multinomial(ctx, counts, la, TALLY_REDUCTION_NONE, 0, f32(w.in, 14, 1, 3)),
           TALLY_INVALID_ARGUMENT, ctx, "counts");
    EXPECT(tally_dirichlet_multinomial(ctx, f32(w.in, 0, 0, 5), la, TALLY_REDUCTION_MEAN, 0, f32(w.out, 0, 1, 1)),
           TALLY_EMPTY_INPUT, ctx, "mean");
    free_world(&w);
}
END_TEST

START_TEST(gmm_errors)
{
    world w = make_world();
    tally_context *ctx = w.ctx;
    /* B = 2, K = 3, D = 2: z [2, 2], mu and lv [2, 6], logits [1, 3]. */
    tally_view z = f32(w.in, 0, 2, 2), mu = f32(w.in, 4, 2, 6), lv = f32(w.in, 16, 2, 6), lg = f32(w.in, 28, 1, 3);
    tally_view out = f32(w.out, 0, 2, 1);
    EXPECT(tally_gmm_log_prob(NULL, z, mu, lv, lg, 3, out), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, lg, 0, out), TALLY_INVALID_ARGUMENT, ctx, "components");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, lg, -3, out), TALLY_INVALID_ARGUMENT, ctx, "components");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, lg, (int64_t)INT32_MAX + 1, out), TALLY_INVALID_ARGUMENT, ctx,
           "components");
    /* K * D overflows: an empty z with 2^40 columns and K = 2^31 - 1. */
    EXPECT(tally_gmm_log_prob(ctx, f32(w.in, 0, 0, 1ll << 40), mu, lv, lg, INT32_MAX, f32(w.out, 0, 0, 1)),
           TALLY_SIZE_OVERFLOW, ctx, "components");
    EXPECT(tally_gmm_log_prob(ctx, z, f32(w.in, 4, 2, 5), lv, lg, 3, out), TALLY_SHAPE_MISMATCH, ctx, "mu");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, f32(w.in, 16, 1, 6), lg, 3, out), TALLY_SHAPE_MISMATCH, ctx, "log_var");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, f32(w.in, 28, 1, 2), 3, out), TALLY_SHAPE_MISMATCH, ctx, "logits");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, f32(NULL, 0, 1, 3), 3, out), TALLY_INVALID_ARGUMENT, ctx, "logits");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, tally_view_f32_strided(w.in, 28, 3, 1, 2), 3, out),
           TALLY_INVALID_ARGUMENT, ctx, "contiguous");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, f32(w.foreign, 0, 1, 3), 3, out), TALLY_WRONG_CONTEXT, ctx, "logits");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, lg, 3, f32(w.out, 0, 3, 1)), TALLY_SHAPE_MISMATCH, ctx, "out");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, lg, 3, f32(w.in, 29, 2, 1)), TALLY_INVALID_ARGUMENT, ctx, "logits");
    EXPECT(tally_gmm_log_prob(ctx, z, mu, lv, lg, 3, f32(w.in, 3, 1, 2)), TALLY_INVALID_ARGUMENT, ctx, "overlaps");

    /* gmm_sample: the same parameter checks plus its outputs and stream. */
    tally_view zo = f32(w.out, 0, 2, 2), lq = f32(w.out, 8, 2, 1), comp = tally_view_typed(w.ints, TALLY_I32, 0, 2, 1);
    tally_rng rng = {.seed = 1, .subsequence = 2, .offset = 0};
    uint64_t consumed = 1234;
    EXPECT(tally_gmm_sample(NULL, mu, lv, lg, 3, rng, zo, lq, comp, &consumed), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 0, rng, zo, lq, comp, &consumed), TALLY_INVALID_ARGUMENT, ctx,
           "components");
    ck_assert_uint_eq(consumed, 0);
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, f32(w.out, 0, 2, 3), lq, comp, &consumed), TALLY_SHAPE_MISMATCH,
           ctx, "mu");
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, zo, f32(w.out, 8, 1, 1), comp, &consumed), TALLY_SHAPE_MISMATCH,
           ctx, "log_q");
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, zo, lq, f32(w.ints, 0, 2, 1), &consumed), TALLY_UNSUPPORTED_DTYPE,
           ctx, "component");
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, zo, lq, tally_view_typed(w.ints, TALLY_I32, 0, 3, 1), &consumed),
           TALLY_SHAPE_MISMATCH, ctx, "component");
    /* Outputs overlapping inputs or each other. */
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, f32(w.in, 12, 2, 2), lq, comp, &consumed),
           TALLY_INVALID_ARGUMENT, ctx, "overlaps");
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, zo, f32(w.out, 2, 2, 1), comp, &consumed), TALLY_INVALID_ARGUMENT,
           ctx, "log_q");
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, zo, lq, tally_view_typed(w.out, TALLY_I32, 9, 2, 1), &consumed),
           TALLY_INVALID_ARGUMENT, ctx, "component");
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, rng, zo, lq, tally_view_typed(w.foreign, TALLY_I32, 0, 2, 1),
                            &consumed),
           TALLY_WRONG_CONTEXT, ctx, "component");
    /* The stream would pass 2^64: B4 = 4 plus 2 rows of 2 normals = 8. */
    tally_rng late = {.seed = 1, .subsequence = 2, .offset = UINT64_MAX - 6};
    EXPECT(tally_gmm_sample(ctx, mu, lv, lg, 3, late, zo, lq, comp, &consumed), TALLY_RNG_EXHAUSTED, ctx, "offset");
    ck_assert_uint_eq(consumed, 0);
    /* The backward passes read fp32 parameters only (the forward ones read
     * halves too): a half mu, log_var or logits is refused by name, not
     * read as fp32. */
    const tally_view none = f32(NULL, 0, 0, 0), gq = f32(w.out, 0, 2, 1), gmu = f32(w.out, 4, 2, 6);
    const tally_view mu_h = tally_view_typed(w.in, TALLY_BF16, 8, 2, 6);
    const tally_view lv_h = tally_view_typed(w.in, TALLY_F16, 32, 2, 6);
    const tally_view lg_h = tally_view_typed(w.in, TALLY_BF16, 56, 1, 3);
    EXPECT(tally_gmm_log_prob_backward(ctx, z, mu_h, lv, lg, 3, gq, none, gmu, none, none), TALLY_UNSUPPORTED_DTYPE,
           ctx, "mu");
    EXPECT(tally_gmm_log_prob_backward(ctx, z, mu, lv_h, lg, 3, gq, none, gmu, none, none), TALLY_UNSUPPORTED_DTYPE,
           ctx, "log_var");
    EXPECT(tally_gmm_log_prob_backward(ctx, z, mu, lv, lg_h, 3, gq, none, gmu, none, none), TALLY_UNSUPPORTED_DTYPE,
           ctx, "logits");
    EXPECT(tally_gmm_sample_backward(ctx, mu, lv_h, lg, 3, rng, none, gq, gmu, none, none), TALLY_UNSUPPORTED_DTYPE,
           ctx, "log_var");
    EXPECT(tally_gmm_sample_backward(ctx, mu, lv, lg_h, 3, rng, none, gq, gmu, none, none), TALLY_UNSUPPORTED_DTYPE,
           ctx, "logits");
    free_world(&w);
}
END_TEST

START_TEST(rng_errors)
{
    world w = make_world();
    tally_context *ctx = w.ctx;
    tally_rng rng = {.seed = 1, .subsequence = 0, .offset = 0};
    uint64_t consumed = 99;
    tally_view outf = f32(w.out, 0, 4, 4), outu = tally_view_typed(w.out, TALLY_U32, 0, 4, 4);
    EXPECT(tally_rng_fill(NULL, TALLY_DIST_UNIFORM, rng, outf, &consumed), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    EXPECT(tally_rng_fill(ctx, (tally_distribution)0, rng, outf, &consumed), TALLY_INVALID_ARGUMENT, ctx,
           "distribution");
    ck_assert_uint_eq(consumed, 0);
    EXPECT(tally_rng_fill(ctx, (tally_distribution)4, rng, outf, &consumed), TALLY_INVALID_ARGUMENT, ctx,
           "distribution");
    EXPECT(tally_rng_fill(ctx, TALLY_DIST_RAW, rng, outf, &consumed), TALLY_UNSUPPORTED_DTYPE, ctx, "out");
    EXPECT(tally_rng_fill(ctx, TALLY_DIST_NORMAL, rng, outu, &consumed), TALLY_UNSUPPORTED_DTYPE, ctx, "out");
    EXPECT(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, f32(w.out, 60, 1, 5), &consumed), TALLY_OUT_OF_BOUNDS, ctx,
           "out");
    EXPECT(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, f32(w.foreign, 0, 1, 5), &consumed), TALLY_WRONG_CONTEXT, ctx,
           "out");
    rng.offset = UINT64_MAX - 14; /* 16 elements need offset + 16 <= 2^64 - 1 */
    EXPECT(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, outf, &consumed), TALLY_RNG_EXHAUSTED, ctx, "offset");
    rng.offset = UINT64_MAX;
    EXPECT(tally_rng_fill(ctx, TALLY_DIST_RAW, rng, tally_view_typed(w.out, TALLY_U32, 0, 1, 1), NULL),
           TALLY_RNG_EXHAUSTED, ctx, NULL);
    /* An output whose rows * cols overflows. */
    rng.offset = 0;
    EXPECT(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, f32(w.out, 0, INT64_MAX, 3), NULL), TALLY_SIZE_OVERFLOW, ctx,
           "out");

    /* tally_rng_advance. */
    EXPECT(tally_rng_advance(NULL, 4), TALLY_INVALID_ARGUMENT, NULL, "rng");
    tally_rng r = {.offset = UINT64_MAX - 3};
    EXPECT(tally_rng_advance(&r, 4), TALLY_RNG_EXHAUSTED, NULL, "2^64");
    ck_assert_uint_eq(r.offset, UINT64_MAX - 3);

    /* tally_categorical. */
    tally_view wts = f32(w.in, 0, 4, 3), idx = tally_view_typed(w.ints, TALLY_I32, 0, 4, 1);
    EXPECT(tally_categorical(NULL, wts, 0, rng, idx, &consumed), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    EXPECT(tally_categorical(ctx, wts, 2u, rng, idx, &consumed), TALLY_INVALID_ARGUMENT, ctx, "flags");
    EXPECT(tally_categorical(ctx, wts, 0, rng, f32(w.ints, 0, 4, 1), &consumed), TALLY_UNSUPPORTED_DTYPE, ctx, "out");
    EXPECT(tally_categorical(ctx, wts, 0, rng, tally_view_typed(w.ints, TALLY_I32, 0, 3, 1), &consumed),
           TALLY_SHAPE_MISMATCH, ctx, "out");
    EXPECT(tally_categorical(ctx, f32(w.in, 0, 4, 0), 0, rng, idx, &consumed), TALLY_EMPTY_INPUT, ctx, "cols");
    EXPECT(tally_categorical(ctx, wts, 0, rng, tally_view_typed(w.in, TALLY_I32, 8, 4, 1), &consumed),
           TALLY_INVALID_ARGUMENT, ctx, "overlaps");
    EXPECT(tally_categorical(ctx, f32(w.foreign, 0, 4, 3), 0, rng, idx, &consumed), TALLY_WRONG_CONTEXT, ctx,
           "weights");
    tally_rng late = {.seed = 1, .subsequence = 1, .offset = UINT64_MAX - 2};
    EXPECT(tally_categorical(ctx, wts, 0, late, idx, &consumed), TALLY_RNG_EXHAUSTED, ctx, "offset");
    ck_assert_uint_eq(consumed, 0);
    uint32_t h[64];
    tt_read(w.ints, 0, h, 64);
    for (int i = 0; i < 64; i++) ck_assert_uint_eq(h[i], TT_POISON);
    free_world(&w);
}
END_TEST

/* ---- Buffers and scalars ---------------------------------------------------- */

START_TEST(buffer_errors)
{
    world w = make_world();
    tally_context *ctx = w.ctx;
    tally_buffer *b = (tally_buffer *)0x1;
    EXPECT(tally_buffer_create(NULL, 16, &b), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    ck_assert_ptr_null(b);
    EXPECT(tally_buffer_create(ctx, 16, NULL), TALLY_INVALID_ARGUMENT, ctx, "out");
    b = (tally_buffer *)0x1;
    EXPECT(tally_buffer_create(ctx, (size_t)INT64_MAX + 1, &b), TALLY_SIZE_OVERFLOW, ctx, NULL);
    ck_assert_ptr_null(b);
#if !defined(__SANITIZE_ADDRESS__)
    /* An allocation no device has: some error, never a crash or a buffer.
     * (AddressSanitizer aborts on such a request by default, so a sanitizer
     * build skips this step.) */
    b = (tally_buffer *)0x1;
    tally_status st = tally_buffer_create(ctx, (size_t)1 << 62, &b);
    ck_assert_msg(st != TALLY_OK, "a 4 EiB buffer was created");
    ck_assert_ptr_null(b);
    ck_assert(tally_last_error(ctx)[0] != '\0');
    still_usable(ctx);
#endif

    float x[4] = {1, 2, 3, 4}, y[4];
    EXPECT(tally_buffer_upload(NULL, 0, x, 16), TALLY_INVALID_ARGUMENT, NULL, "buffer");
    EXPECT(tally_buffer_upload(w.in, 0, NULL, 16), TALLY_INVALID_ARGUMENT, ctx, "src");
    EXPECT(tally_buffer_upload(w.in, 250, x, 8), TALLY_OUT_OF_BOUNDS, ctx, NULL);
    EXPECT(tally_buffer_upload(w.in, 257, x, 0), TALLY_OUT_OF_BOUNDS, ctx, NULL);
    EXPECT(tally_buffer_upload(w.in, 8, x, SIZE_MAX), TALLY_OUT_OF_BOUNDS, ctx, NULL);
    EXPECT(tally_buffer_download(NULL, 0, y, 16), TALLY_INVALID_ARGUMENT, NULL, "buffer");
    EXPECT(tally_buffer_download(w.in, 0, NULL, 16), TALLY_INVALID_ARGUMENT, ctx, "dst");
    EXPECT(tally_buffer_download(w.in, SIZE_MAX, y, 16), TALLY_OUT_OF_BOUNDS, ctx, NULL);
    EXPECT(tally_buffer_download(w.in, 0, y, 257), TALLY_OUT_OF_BOUNDS, ctx, NULL);
    EXPECT(tally_buffer_fill(NULL, 0, 16, 0), TALLY_INVALID_ARGUMENT, NULL, "buffer");
    EXPECT(tally_buffer_fill(w.in, 2, 16, 0), TALLY_INVALID_ARGUMENT, ctx, "multiples of 4");
    EXPECT(tally_buffer_fill(w.in, 0, 6, 0), TALLY_INVALID_ARGUMENT, ctx, "multiples of 4");
    EXPECT(tally_buffer_fill(w.in, 252, 8, 0), TALLY_OUT_OF_BOUNDS, ctx, NULL);
    /* Zero-byte transfers inside the buffer are fine. */
    tt_ok(tally_buffer_upload(w.in, 256, x, 0), ctx);
    tt_ok(tally_buffer_download(w.in, 0, NULL, 0), ctx);
    ck_assert_uint_eq(tally_buffer_size(w.in), 256);
    ck_assert_uint_eq(tally_buffer_size(NULL), 0);
    tally_buffer_release(NULL);

    /* Wrapping native memory: wrong backend, NULL handles. */
    b = (tally_buffer *)0x1;
    if (tt_backend() != TALLY_BACKEND_OPENCL) {
        EXPECT(tally_buffer_wrap_opencl(ctx, (void *)0x1000, &b), TALLY_WRONG_CONTEXT, ctx, "opencl");
        ck_assert_ptr_null(b);
    }
    EXPECT(tally_buffer_wrap_opencl(ctx, NULL, &b), TALLY_INVALID_ARGUMENT, ctx, "cl_mem");
    EXPECT(tally_buffer_wrap_opencl(NULL, (void *)0x1000, &b), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    if (tt_backend() != TALLY_BACKEND_CUDA) {
        EXPECT(tally_buffer_wrap_cuda(ctx, 0x1000, 64, &b), TALLY_WRONG_CONTEXT, ctx, "cuda");
        ck_assert_ptr_null(b);
    }
    EXPECT(tally_buffer_wrap_cuda(ctx, 0, 64, &b), TALLY_INVALID_ARGUMENT, ctx, "pointer");
    EXPECT(tally_buffer_wrap_cuda(NULL, 0x1000, 64, &b), TALLY_INVALID_ARGUMENT, NULL, "ctx");

    /* tally_read_scalar. */
    float v = 0;
    EXPECT(tally_read_scalar(NULL, f32(w.in, 0, 1, 1), &v), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    EXPECT(tally_read_scalar(ctx, f32(w.in, 0, 1, 1), NULL), TALLY_INVALID_ARGUMENT, ctx, "out");
    EXPECT(tally_read_scalar(ctx, f32(w.in, 0, 1, 2), &v), TALLY_SHAPE_MISMATCH, ctx, "view");
    EXPECT(tally_read_scalar(ctx, tally_view_typed(w.in, TALLY_I32, 0, 1, 1), &v), TALLY_UNSUPPORTED_DTYPE, ctx,
           "view");
    EXPECT(tally_read_scalar(ctx, f32(w.in, 64, 1, 1), &v), TALLY_OUT_OF_BOUNDS, ctx, "view");
    EXPECT(tally_read_scalar(ctx, f32(w.foreign, 0, 1, 1), &v), TALLY_WRONG_CONTEXT, ctx, "view");
    tt_ok(tally_read_scalar(ctx, f32(w.in, 3, 1, 1), &v), ctx);
    ck_assert(v == 3.5f);

    EXPECT(tally_sync(NULL), TALLY_INVALID_ARGUMENT, NULL, "ctx");
    tt_ok(tally_sync(ctx), ctx);
    free_world(&w);
}
END_TEST

/* ---- Contexts, backends, environment ------------------------------------------- */

START_TEST(context_errors)
{
    tally_context *c = (tally_context *)0x1;
    EXPECT(tally_context_create(tt_backend(), 0, NULL), TALLY_INVALID_ARGUMENT, NULL, "out");
    EXPECT(tally_context_create((tally_backend)99, 0, &c), TALLY_INVALID_ARGUMENT, NULL, "backend");
    ck_assert_ptr_null(c);
    EXPECT(tally_context_create((tally_backend)-1, 0, &c), TALLY_INVALID_ARGUMENT, NULL, "backend");
    EXPECT(tally_context_create(tt_backend(), -5, &c), TALLY_INVALID_ARGUMENT, NULL, "-5");
    c = (tally_context *)0x1;
    tally_status st = tally_context_create(tt_backend(), 100000, &c);
    ck_assert_msg(st == TALLY_NO_DEVICE, "device 100000 gave %s", tally_status_name(st));
    ck_assert_ptr_null(c);
    ck_assert(tally_last_error(NULL)[0] != '\0');
    EXPECT(tally_context_create_opencl(NULL, (void *)1, (void *)1, &c), TALLY_INVALID_ARGUMENT, NULL, "cl_context");
    EXPECT(tally_context_create_opencl((void *)1, (void *)1, (void *)1, NULL), TALLY_INVALID_ARGUMENT, NULL, "out");
    EXPECT(tally_context_create_cuda(-1, NULL, &c), TALLY_INVALID_ARGUMENT, NULL, "device");
    EXPECT(tally_context_create_cuda(0, NULL, NULL), TALLY_INVALID_ARGUMENT, NULL, "out");
    tally_context_release(NULL);
    ck_assert_int_eq(tally_context_backend(NULL), TALLY_BACKEND_AUTO);
    ck_assert_str_eq(tally_context_device_name(NULL), "");

    /* tally_devices. */
    int count = -1;
    tally_device_info info[4];
    EXPECT(tally_devices(tt_backend(), info, 4, NULL), TALLY_INVALID_ARGUMENT, NULL, "count");
    EXPECT(tally_devices(tt_backend(), NULL, 4, &count), TALLY_INVALID_ARGUMENT, NULL, "devices");
    EXPECT(tally_devices(tt_backend(), info, -1, &count), TALLY_INVALID_ARGUMENT, NULL, "capacity");
    EXPECT(tally_devices(TALLY_BACKEND_AUTO, info, 4, &count), TALLY_INVALID_ARGUMENT, NULL, "backend");
    ck_assert_int_eq(count, 0);
    EXPECT(tally_devices((tally_backend)42, info, 4, &count), TALLY_INVALID_ARGUMENT, NULL, "backend");
    tt_ok(tally_devices(tt_backend(), NULL, 0, &count), NULL);
    ck_assert_int_ge(count, 1);
    tt_ok(tally_devices(tt_backend(), info, 4, &count), NULL);
    ck_assert_int_eq(info[0].index, 0);
    ck_assert(info[0].name[0] != '\0');

    /* A context's device name and backend. */
    tally_context *ctx = tt_context();
    ck_assert_int_eq(tally_context_backend(ctx), tt_backend());
    ck_assert(tally_context_device_name(ctx)[0] != '\0');
}
END_TEST

START_TEST(environment_variables)
{
    tally_context *c = (tally_context *)0x1;
    /* TALLY_BACKEND is read only for AUTO; a bad value is an error. */
    setenv("TALLY_BACKEND", "quantum", 1);
    EXPECT(tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &c), TALLY_INVALID_ARGUMENT, NULL, "quantum");
    ck_assert_ptr_null(c);
    /* An explicit backend is never overridden by the environment. */
    tt_ok(tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &c), NULL);
    ck_assert_int_eq(tally_context_backend(c), tt_backend());
    tally_context_release(c);
    /* TALLY_BACKEND names our backend: AUTO picks it. */
    setenv("TALLY_BACKEND", tally_backend_name(tt_backend()), 1);
    tt_ok(tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &c), NULL);
    ck_assert_int_eq(tally_context_backend(c), tt_backend());
    tally_context_release(c);
    /* Case does not matter. The host has only device 0, so a TALLY_DEVICE
     * that picks a device of the backend under test (an OpenCL GPU at index
     * 1, say) is set aside for this case. */
    char *saved_device = getenv("TALLY_DEVICE") ? strdup(getenv("TALLY_DEVICE")) : NULL;
    unsetenv("TALLY_DEVICE");
    setenv("TALLY_BACKEND", "HoSt", 1);
    tt_ok(tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &c), NULL);
    ck_assert_int_eq(tally_context_backend(c), TALLY_BACKEND_HOST);
    tally_context_release(c);
    unsetenv("TALLY_BACKEND");
    if (saved_device != NULL) {
        setenv("TALLY_DEVICE", saved_device, 1);
        free(saved_device);
    }

    /* TALLY_DEVICE: read for TALLY_DEVICE_DEFAULT only. */
    static const char *const bad[] = {"abc", "-1", "1x", " ", "99999999999", "0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TALLY_DEVICE", bad[i], 1);
        c = (tally_context *)0x1;
        EXPECT(tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &c), TALLY_INVALID_ARGUMENT, NULL,
               "TALLY_DEVICE");
        ck_assert_ptr_null(c);
        /* An explicit index ignores it. */
        tt_ok(tally_context_create(tt_backend(), 0, &c), NULL);
        tally_context_release(c);
    }
    setenv("TALLY_DEVICE", "0", 1);
    tt_ok(tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &c), NULL);
    tally_context_release(c);
    setenv("TALLY_DEVICE", "4000", 1);
    c = (tally_context *)0x1;
    ck_assert_int_eq(tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &c), TALLY_NO_DEVICE);
    ck_assert_ptr_null(c);
    unsetenv("TALLY_DEVICE");
}
END_TEST

START_TEST(backend_names)
{
    static const struct {
        const char *name;
        tally_backend b;
    } ok[] = {{"auto", TALLY_BACKEND_AUTO},     {"cuda", TALLY_BACKEND_CUDA}, {"opencl", TALLY_BACKEND_OPENCL},
              {"host", TALLY_BACKEND_HOST},     {"HOST", TALLY_BACKEND_HOST}, {"OpenCL", TALLY_BACKEND_OPENCL}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        tally_backend b = (tally_backend)77;
        tt_ok(tally_backend_from_name(ok[i].name, &b), NULL);
        ck_assert_int_eq(b, ok[i].b);
    }
    static const char *const bad[] = {"", "gpu", "hosts", " host", "cpu", "open cl"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tally_backend b = TALLY_BACKEND_HOST;
        EXPECT(tally_backend_from_name(bad[i], &b), TALLY_INVALID_ARGUMENT, NULL, NULL);
        ck_assert_int_eq(b, TALLY_BACKEND_HOST);
    }
    tally_backend b;
    EXPECT(tally_backend_from_name(NULL, &b), TALLY_INVALID_ARGUMENT, NULL, NULL);
    EXPECT(tally_backend_from_name("host", NULL), TALLY_INVALID_ARGUMENT, NULL, NULL);
    ck_assert_str_eq(tally_backend_name(TALLY_BACKEND_AUTO), "auto");
    ck_assert_str_eq(tally_backend_name(TALLY_BACKEND_CUDA), "cuda");
    ck_assert_str_eq(tally_backend_name(TALLY_BACKEND_OPENCL), "opencl");
    ck_assert_str_eq(tally_backend_name(TALLY_BACKEND_HOST), "host");
    ck_assert_ptr_null(tally_backend_name((tally_backend)4));
    ck_assert_ptr_null(tally_backend_name((tally_backend)-1));
    ck_assert_int_eq(tally_backend_compiled(TALLY_BACKEND_HOST), 1);
    ck_assert_int_eq(tally_backend_compiled(tt_backend()), 1);
    ck_assert_int_eq(tally_backend_compiled(TALLY_BACKEND_AUTO), 0);
    ck_assert_int_eq(tally_backend_compiled((tally_backend)12), 0);
}
END_TEST

/* The backend's table has every required op entry; a copy missing one is
 * named, and a missing optional entry (a gradient) is allowed. */
START_TEST(backend_table)
{
    const tally__backend_ops *ops = tally__backend_table(tt_backend());
    ck_assert_ptr_nonnull(ops);
    ck_assert_ptr_null(tally__backend_missing_op(ops));
    tally__backend_ops copy = *ops;
    copy.kl_div_backward = NULL;
    copy.gmm_backward = NULL;
    ck_assert_ptr_null(tally__backend_missing_op(&copy));
    copy.categorical = NULL;
    ck_assert_str_eq(tally__backend_missing_op(&copy), "categorical");
    copy.reduce = NULL;
    ck_assert_str_eq(tally__backend_missing_op(&copy), "reduce");
}
END_TEST

/* Names and strings come from the same table as the enum. */
START_TEST(status_table)
{
    int n = 0;
#define CHECK_STATUS(name, code, text)                                  \
    ck_assert_int_eq(TALLY_##name, code);                               \
    ck_assert_str_eq(tally_status_name(TALLY_##name), #name);           \
    ck_assert_str_eq(tally_status_string(TALLY_##name), text);          \
    ck_assert(strlen(text) > 3);                                        \
    n++;
    TALLY_STATUS_MAP(CHECK_STATUS)
#undef CHECK_STATUS
    ck_assert_int_eq(n, 17);
    ck_assert_int_eq(TALLY_OK, 0);
    /* Codes are distinct and dense: 0 .. n-1. */
    for (int code = 0; code < n; code++) ck_assert_str_ne(tally_status_name((tally_status)code), "UNKNOWN");
    ck_assert_str_eq(tally_status_name((tally_status)n), "UNKNOWN");
    ck_assert_str_eq(tally_status_name((tally_status)-1), "UNKNOWN");
    ck_assert_str_eq(tally_status_string((tally_status)999), "unknown status");
}
END_TEST

START_TEST(version)
{
    ck_assert_uint_eq(tally_version(), TALLY_VERSION_HEX);
    ck_assert_uint_eq(tally_version(),
                      ((unsigned)TALLY_VERSION_MAJOR << 16) | ((unsigned)TALLY_VERSION_MINOR << 8) | TALLY_VERSION_PATCH);
    ck_assert_str_eq(tally_version_string(), TALLY_VERSION_STRING);
    char expect[64];
    snprintf(expect, sizeof expect, "%d.%d.%d", TALLY_VERSION_MAJOR, TALLY_VERSION_MINOR, TALLY_VERSION_PATCH);
    ck_assert_str_eq(tally_version_string(), expect);
}
END_TEST

/* errno-like: a failing call's message stays through successful calls and
 * is replaced only by the next failure. Before the first failure it is "".
 * Errors on one context do not leak to another. */
START_TEST(last_error_lifetime)
{
    world w = make_world();
    ck_assert_str_eq(tally_last_error(w.ctx), "");
    tally_status st = tally_reduce(w.ctx, (tally_reduce_op)42, TALLY_AXIS_ALL, f32(w.in, 0, 1, 1), f32(w.out, 0, 1, 1));
    ck_assert_int_eq(st, TALLY_INVALID_ARGUMENT);
    ck_assert(strstr(tally_last_error(w.ctx), "42") != NULL);
    ck_assert_str_eq(tally_last_error(w.other), "");
    still_usable(w.ctx); /* also checks that success keeps the message */
    ck_assert(strstr(tally_last_error(w.ctx), "unknown op 42") != NULL);
    ck_assert_int_eq(tally_sync(w.ctx), TALLY_OK);
    ck_assert(strstr(tally_last_error(w.ctx), "unknown op 42") != NULL);
    /* The next failure replaces it. */
    st = tally_reduce(w.ctx, TALLY_SUM, (tally_axis)77, f32(w.in, 0, 1, 1), f32(w.out, 0, 1, 1));
    ck_assert_int_eq(st, TALLY_INVALID_ARGUMENT);
    ck_assert(strstr(tally_last_error(w.ctx), "axis 77") != NULL);
    ck_assert(strstr(tally_last_error(w.ctx), "op 42") == NULL);
    free_world(&w);
}
END_TEST

/* Contexts on different threads at once: each thread's results are its own,
 * and so is its thread-level error message (tally_last_error(NULL)). */
typedef struct thread_job {
    int id;
    int ok;
    char problem[256];
} thread_job;

static void *thread_worker(void *arg)
{
    thread_job *j = arg;
    tally_context *ctx = NULL;
    if (tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &ctx) != TALLY_OK) {
        snprintf(j->problem, sizeof j->problem, "context: %s", tally_last_error(NULL));
        return NULL;
    }
    enum { N = 3000 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(j->id * 1000 + i % 17); /* integer sums: exact in any order */
    double want = 0.0;
    for (int i = 0; i < N; i++) want += x[i];
    tally_buffer *in = NULL, *out = NULL;
    int ok = tally_buffer_create(ctx, sizeof x, &in) == TALLY_OK && tally_buffer_create(ctx, 4, &out) == TALLY_OK;
    for (int rep = 0; ok && rep < 20; rep++) {
        float got = 0.0f;
        ok = tally_buffer_upload(in, 0, x, sizeof x) == TALLY_OK &&
             tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(in, 0, 1, N), tally_view_f32(out, 0, 1, 1)) ==
                 TALLY_OK &&
             tally_read_scalar(ctx, tally_view_f32(out, 0, 1, 1), &got) == TALLY_OK && (double)got == want;
        /* A thread-level error with this thread's own text. */
        char name[32];
        snprintf(name, sizeof name, "bogus-%d-%d", j->id, rep);
        tally_backend b;
        ok = ok && tally_backend_from_name(name, &b) == TALLY_INVALID_ARGUMENT;
        ok = ok && strstr(tally_last_error(NULL), name) != NULL;
        if (!ok)
            snprintf(j->problem, sizeof j->problem, "thread %d rep %d: sum %s, thread message '%s'", j->id, rep,
                     tally_last_error(ctx), tally_last_error(NULL));
    }
    tally_buffer_release(in);
    tally_buffer_release(out);
    tally_context_release(ctx);
    j->ok = ok;
    return NULL;
}

START_TEST(contexts_on_threads)
{
    enum { T = 4 };
    thread_job jobs[T];
    for (int i = 0; i < T; i++) jobs[i] = (thread_job){.id = i + 1, .ok = 0, .problem = ""};
    tt_run_threads(thread_worker, jobs, sizeof jobs[0], T);
    for (int i = 0; i < T; i++) ck_assert_msg(jobs[i].ok, "%s", jobs[i].problem);
}
END_TEST

TT_SUITE("errors",
         {.name = "ops", TT_FIXTURE, .timeout = 120,
          .tests = {view_errors, reduce_errors, kl_errors, dm_errors, gmm_errors, rng_errors, buffer_errors,
                    last_error_lifetime}},
         {.name = "api", TT_FIXTURE, .timeout = 120,
          .tests = {context_errors, environment_variables, backend_names, backend_table, status_table, version,
                    contexts_on_threads}})
