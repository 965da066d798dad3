/*
 * tests/check_sizes.c - counts that no memory can hold, on every backend.
 *
 * A view with no elements needs no memory, so its bounds say nothing about
 * its other dimension: counts [2^62 + 1, 0] once passed every check, the
 * host backend's row-value allocation wrapped and its rows were written past
 * the block, while OpenCL refused the same call. The front end now bounds
 * every dimension of every view (src/size.c), so each row below must give
 * the same status on every backend, write nothing, and leave the context
 * usable. Run under AddressSanitizer (scripts/sanitize.sh), the first row
 * reported a heap-buffer-overflow before the fix.
 */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

const int tally_test_needs_backend = 1;

#define HUGE_ROWS ((int64_t)4611686018427387905) /* 2^62 + 1: rows * 4 bytes wraps 64 bits */
#define ABOVE_BOUND (((int64_t)1 << 56) + 1)     /* one above TALLY__MAX_COUNT */
#define AT_BOUND ((int64_t)1 << 56)              /* allowed, but no memory holds its scratch */

typedef enum op_kind { DM, DM_PER_ROW, REDUCE, KL, GMM_LOG_PROB, GMM_SAMPLE, RNG, CATEGORICAL } op_kind;

typedef struct size_case {
    const char *what;
    op_kind op;
    int64_t rows, cols;    /* the empty input's (or output's) shape */
    int64_t offset, stride; /* stride 0: contiguous */
    int reduction;          /* DM and KL: a tally_reduction; REDUCE: a tally_axis */
    tally_status want;
} size_case;

static const size_case cases[] = {
    {"dm counts [2^62+1, 0], sum (issue 15's reproducer)", DM, HUGE_ROWS, 0, 0, 0, TALLY_REDUCTION_SUM,
     TALLY_SIZE_OVERFLOW},
    {"dm counts [2^62+1, 0], mean", DM, HUGE_ROWS, 0, 0, 0, TALLY_REDUCTION_MEAN, TALLY_SIZE_OVERFLOW},
    {"dm counts [2^56+1, 0], sum", DM, ABOVE_BOUND, 0, 0, 0, TALLY_REDUCTION_SUM, TALLY_SIZE_OVERFLOW},
    {"dm counts [2^56, 0], sum: allowed, but its row values fit no memory", DM, AT_BOUND, 0, 0, 0,
     TALLY_REDUCTION_SUM, TALLY_OUT_OF_MEMORY},
    {"dm counts and per-row log_alpha [2^62+1, 0], sum", DM_PER_ROW, HUGE_ROWS, 0, 0, 0, TALLY_REDUCTION_SUM,
     TALLY_SIZE_OVERFLOW},
    {"dm counts [0, 0] at offset 2^62+1", DM, 0, 0, HUGE_ROWS, 0, TALLY_REDUCTION_SUM, TALLY_SIZE_OVERFLOW},
    {"dm counts [0, 0] with stride 2^62+1", DM, 0, 0, 0, HUGE_ROWS, TALLY_REDUCTION_SUM, TALLY_SIZE_OVERFLOW},
    {"reduce all of x [2^62+1, 0]", REDUCE, HUGE_ROWS, 0, 0, 0, TALLY_AXIS_ALL, TALLY_SIZE_OVERFLOW},
    {"reduce all of x [0, 2^62+1]", REDUCE, 0, HUGE_ROWS, 0, 0, TALLY_AXIS_ALL, TALLY_SIZE_OVERFLOW},
    {"reduce rows of x [0, 2^56+1]", REDUCE, 0, ABOVE_BOUND, 0, 0, TALLY_AXIS_ROW, TALLY_SIZE_OVERFLOW},
    {"kl input and target [2^62+1, 0], sum", KL, HUGE_ROWS, 0, 0, 0, TALLY_REDUCTION_SUM, TALLY_SIZE_OVERFLOW},
    {"kl input and target [2^62+1, 0], batchmean", KL, HUGE_ROWS, 0, 0, 0, TALLY_REDUCTION_BATCHMEAN,
     TALLY_SIZE_OVERFLOW},
    {"gmm_log_prob z [0, 2^62+1]", GMM_LOG_PROB, 0, HUGE_ROWS, 0, 0, 0, TALLY_SIZE_OVERFLOW},
    {"gmm_sample z [0, 2^56+1]", GMM_SAMPLE, 0, ABOVE_BOUND, 0, 0, 0, TALLY_SIZE_OVERFLOW},
    {"rng_fill out [2^62+1, 0]", RNG, HUGE_ROWS, 0, 0, 0, 0, TALLY_SIZE_OVERFLOW},
    {"categorical weights [0, 2^62+1]", CATEGORICAL, 0, HUGE_ROWS, 0, 0, 0, TALLY_SIZE_OVERFLOW},
};

static tally_view empty_view(tally_buffer *b, const size_case *c)
{
    int64_t stride = c->stride != 0 ? c->stride : c->cols;
    return tally_view_f32_strided(b, c->offset, c->rows, c->cols, stride);
}

static tally_status run_case(tally_context *ctx, const size_case *c, tally_buffer *in, tally_buffer *out)
{
    tally_view e = empty_view(in, c);
    tally_view o1 = tally_view_f32(out, 0, 1, 1);
    tally_rng rng = {.seed = 1, .subsequence = 0, .offset = 0};
    uint64_t consumed = 0;
    switch (c->op) {
    case DM:
        return tally_dirichlet_multinomial(ctx, e, tally_view_f32(in, 0, 1, c->cols), (tally_reduction)c->reduction,
                                           0, o1);
    case DM_PER_ROW:
        return tally_dirichlet_multinomial(ctx, e, e, (tally_reduction)c->reduction, 0, o1);
    case REDUCE:
        return tally_reduce(ctx, TALLY_SUM, (tally_axis)c->reduction, e,
                            tally_view_f32(out, 0, c->reduction == TALLY_AXIS_ALL ? 1 : 0, 1));
    case KL:
        return tally_kl_div(ctx, e, e, (tally_reduction)c->reduction, 0, o1);
    case GMM_LOG_PROB:
        return tally_gmm_log_prob(ctx, e, tally_view_f32(in, 0, 0, c->cols), tally_view_f32(in, 0, 0, c->cols),
                                  tally_view_f32(in, 0, 1, 1), 1, tally_view_f32(out, 0, 0, 1));
    case GMM_SAMPLE:
        return tally_gmm_sample(ctx, tally_view_f32(in, 0, 0, c->cols), tally_view_f32(in, 0, 0, c->cols),
                                tally_view_f32(in, 0, 1, 1), 1, rng, tally_view_f32(out, 0, 0, c->cols),
                                tally_view_f32(out, 0, 0, 1), (tally_view){.buffer = NULL}, &consumed);
    case RNG:
        return tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, tally_view_f32(out, 0, c->rows, c->cols), &consumed);
    case CATEGORICAL:
        return tally_categorical(ctx, e, 0, rng, tally_view_typed(out, TALLY_I32, 0, 0, 1), &consumed);
    }
    return TALLY_INVALID_ARGUMENT;
}

START_TEST(unsizable_counts)
{
    const size_case *c = &cases[_i];
    tally_context *ctx = tt_context();
    float x[64];
    for (int i = 0; i < 64; i++) x[i] = 1.0f;
    tally_buffer *in = tt_upload(ctx, x, 64), *out = tt_buffer(ctx, 64);
    tally_status st = run_case(ctx, c, in, out);
    const char *msg = tally_last_error(ctx);
    ck_assert_msg(st == c->want, "%s: got %s, want %s (%s)", c->what, tally_status_name(st),
                  tally_status_name(c->want), msg);
    ck_assert_msg(msg[0] != '\0', "%s: no message", c->what);
    uint32_t h[64];
    tt_read(out, 0, h, 64);
    for (int i = 0; i < 64; i++) ck_assert_msg(h[i] == TT_POISON, "%s: output element %d was written", c->what, i);
    tt_read(in, 0, h, 64);
    for (int i = 0; i < 64; i++) ck_assert_msg(h[i] == tt_bits(1.0f), "%s: input element %d changed", c->what, i);
    /* The context still works after the refusal. */
    tally_buffer *one = tt_buffer(ctx, 1);
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(in, 0, 4, 16), tally_view_f32(one, 0, 1, 1)),
          ctx);
    ck_assert(tt_read1(one, 0) == 64.0f);
    tally_buffer_release(one);
    tally_buffer_release(in);
    tally_buffer_release(out);
    tt_context_release();
}
END_TEST

TT_SUITE("sizes",
         {.name = "unsizable", .tests = {unsizable_counts}, .loops = (int)(sizeof cases / sizeof cases[0])})
