/*
 * tests/check_ops.c - every op's values on the backend named by
 * TALLY_TEST_BACKEND, against the float64 references of harness/reference.c
 * (never against the library's own host backend).
 *
 * Two kinds of expectation:
 * - Exact bits where the contract fixes them without transcendental math:
 *   sum, sumsq, min and max equal the documented tree simulated in float
 *   (tally_ref_tree_f32); mean is that sum divided by (float)n with a
 *   correctly rounded division; a reduced KL or DM equals the tree over the
 *   op's own elementwise outputs; raw and uniform draws equal the
 *   reference Philox bit for bit; a mixture sample's log_q equals
 *   tally_gmm_log_prob of its z.
 * - Tolerances against float64 where tally's portable exp/log/lgamma/sinpi
 *   are involved. They all have the form (depth + extra) * 2^-24 * mag:
 *   a float tree sum of terms t_i has |error| <= depth * u * sum|t_i|
 *   (u = 2^-24, depth = the longest chain of additions in the documented
 *   tree: 4*quads_per_lane - 1 + log2(lanes) per level), and each term's own
 *   roundings add a few ulps of its magnitude (include/tally/portable_math.h
 *   states exp and log <= 1 ulp and sinpi about 1 ulp; lgamma is budgeted
 *   at 2 ulp, or 3.2e-6 absolute below 10, the accuracy measured for such
 *   portable code);
 *   `mag` is computed by the reference as the sum of the magnitudes that the
 *   float evaluation rounds (see harness/reference.h). These bounds are
 *   worst-case; the observed errors are far smaller.
 *
 * Every output is poisoned (0x7fbadbad) before the op; inputs sit in
 * strided views with poisoned gaps (reading one gives NaN), and outputs are
 * checked for writes outside their view.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "op_names.h"
#include "reference.h"
#include "tally/philox.h"
#include "tally/terms.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

#define U TALLY_REF_F32_U

/* ---- Placement (tests/testutil.h: tt_place) --------------------------------- */

typedef tt_placed placed;

static placed place(const float *dense, int64_t rows, int64_t cols, int64_t offset, int64_t stride, int64_t pad)
{
    return tt_place(dense, TALLY_F32, rows, cols, offset, stride, pad);
}

static placed place_out(tally_dtype dtype, int64_t rows, int64_t cols, int64_t offset, int64_t stride)
{
    return tt_place(NULL, dtype, rows, cols, offset, stride, 5);
}

/* ---- Reductions ------------------------------------------------------------ */

/* A reduction's name, from tally.h's op table. */
static const char *op_name(tally_reduce_op op)
{
    return harness_op_name((harness_op)harness_op_of_reduce(op));
}

/* Extra ulps of each op's own roundings beyond the tree: mean's division and
 * the conversion of n; sumsq's square; logsumexp's exp, log and final add
 * (its mag already carries |log s| and |result|). */
static double op_extra(tally_reduce_op op)
{
    switch (op) {
    case TALLY_MEAN: return 2;
    case TALLY_SUMSQ: return 2;
    case TALLY_LOGSUMEXP: return 6;
    default: return 0;
    }
}

/* The exact bits expected from the written tree for SUM/SUMSQ/MIN/MAX/MEAN
 * over one vector of n elements; returns 0 for ops without exact bits. */
static int tree_bits(tally_reduce_op op, const float *v, uint64_t n, float *out)
{
    float *t = tt_alloc((n > 0 ? n : 1) * sizeof *t);
    int ok = 1;
    for (uint64_t i = 0; i < n; i++) t[i] = op == TALLY_SUMSQ ? v[i] * v[i] : v[i];
    switch (op) {
    case TALLY_SUM:
    case TALLY_SUMSQ: *out = tally_ref_tree_f32(t, n, 0, 0.0f); break;
    case TALLY_MEAN: *out = tally_ref_tree_f32(t, n, 0, 0.0f) / (float)n; break;
    case TALLY_MIN: *out = tally_ref_tree_f32(t, n, 1, NAN); break;
    case TALLY_MAX: *out = tally_ref_tree_f32(t, n, 2, NAN); break;
    default: ok = 0;
    }
    free(t);
    return ok;
}

/* Runs op over x [rows, cols] placed at offset/stride and checks every
 * output against the float64 reference and, where defined, the exact tree
 * bits. out_stride > 1 spaces the by-row outputs; out_row_major puts them in
 * a 1 x rows view instead of rows x 1. */
static void check_reduce(tally_reduce_op op, tally_axis axis, const float *x, int64_t rows, int64_t cols,
                         int64_t offset, int64_t stride, int64_t out_stride, int out_row_major)
{
    tally_context *ctx = tt_context();
    int64_t outs = axis == TALLY_AXIS_ALL ? 1 : rows;
    placed in = place(x, rows, cols, offset, stride, 3);
    placed out = out_row_major ? place_out(TALLY_F32, 1, outs, 2, outs)
                               : place_out(TALLY_F32, outs, 1, 2, out_stride);
    tt_ok(tally_reduce(ctx, op, axis, in.view, out.view), ctx);
    float *got = tt_alloc((size_t)outs * sizeof *got);
    tt_read_placed(&out, got);
    double *ref = tt_alloc((size_t)outs * sizeof *ref), *mag = tt_alloc((size_t)outs * sizeof *mag);
    int n_ref = tally_ref_reduce(op, axis, tally_ref_mat_make(x, rows, cols, cols), ref, mag);
    ck_assert_int_eq(n_ref, outs);
    uint64_t n = axis == TALLY_AXIS_ALL ? (uint64_t)(rows * cols) : (uint64_t)cols;
    for (int64_t r = 0; r < outs; r++) {
        double tol = tally_ref_tolerance(mag[r], n, op_extra(op));
        tt_assert_close(got[r], ref[r], tol, "%s %s [%lld x %lld] output %lld", op_name(op),
                        axis == TALLY_AXIS_ALL ? "all" : "row", (long long)rows, (long long)cols, (long long)r);
        float exact;
        const float *vec = axis == TALLY_AXIS_ALL ? x : x + r * cols;
        if (tree_bits(op, vec, n, &exact))
            tt_assert_bits(got[r], exact, "%s %s [%lld x %lld] output %lld vs the documented tree", op_name(op),
                           axis == TALLY_AXIS_ALL ? "all" : "row", (long long)rows, (long long)cols, (long long)r);
    }
    free(got);
    free(ref);
    free(mag);
    tt_placed_release(&in);
    tt_placed_release(&out);
}

static const tally_reduce_op all_ops[] = {TALLY_SUM, TALLY_MEAN, TALLY_MIN, TALLY_MAX, TALLY_LOGSUMEXP, TALLY_SUMSQ};

static void check_all_ops(const float *x, int64_t rows, int64_t cols, int64_t offset, int64_t stride)
{
    for (int i = 0; i < 6; i++) {
        check_reduce(all_ops[i], TALLY_AXIS_ALL, x, rows, cols, offset, stride, 1, 0);
        check_reduce(all_ops[i], TALLY_AXIS_ROW, x, rows, cols, offset, stride, i % 2 ? 3 : 1, i == 2);
    }
}

START_TEST(reduce_small_shapes)
{
    static const int64_t shapes[][2] = {{1, 1}, {1, 2}, {2, 1}, {3, 5}, {1, 7}, {5, 4}, {4, 17}, {9, 63}, {2, 65}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
        tt_fill_normal(x, (size_t)(rows * cols), 10 + s, 0.25, 3.0);
        check_all_ops(x, rows, cols, 0, cols);
        check_all_ops(x, rows, cols, 1 + (int64_t)s, cols + 2);
        free(x);
    }
}
END_TEST

/* Many short rows (kernels may pack several rows into one work-group), as
 * contiguous views at an aligned and at an unaligned offset. */
/* A contiguous view reduced over ALL reads the same run whatever its shape,
 * so [n, 1], [1, n] and [r, c] take the same loads and give the documented
 * tree's bits; at buffer offsets 0 and 4 (aligned: the 16-byte loads) and 1
 * (element loads), past one tile so the tree has two levels. */
START_TEST(reduce_all_contiguous_any_shape)
{
    static const int64_t shapes[][2] = {{1, 40000}, {40000, 1}, {16, 2500}, {25, 1600}, {5, 8000}, {3, 13333}};
    static const int64_t offsets[] = {0, 4, 1};
    float *x = tt_alloc(40000 * sizeof *x);
    tt_fill_normal(x, 40000, 31, 0.5, 2.0);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
            for (int i = 0; i < 6; i++)
                check_reduce(all_ops[i], TALLY_AXIS_ALL, x, shapes[s][0], shapes[s][1], offsets[o], shapes[s][1], 1,
                             0);
    free(x);
}
END_TEST

START_TEST(reduce_many_short_rows)
{
    static const int64_t shapes[][2] = {{100000, 1}, {3000, 7}, {1000, 33}, {300, 257}, {40, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
        tt_fill_normal(x, (size_t)(rows * cols), 120 + s, 1.0, 2.0);
        for (int i = 0; i < 6; i++) {
            check_reduce(all_ops[i], TALLY_AXIS_ROW, x, rows, cols, 0, cols, 1, i & 1);
            check_reduce(all_ops[i], TALLY_AXIS_ROW, x, rows, cols, 1, cols, 1, 0);
        }
        check_reduce(TALLY_SUM, TALLY_AXIS_ALL, x, rows, cols, 1, cols, 1, 0);
        free(x);
    }
}
END_TEST

START_TEST(reduce_rows_of_1000)
{
    int64_t rows = 7, cols = 1000;
    float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
    tt_fill_normal(x, (size_t)(rows * cols), 21, -1.0, 10.0);
    check_all_ops(x, rows, cols, 0, cols);
    check_all_ops(x, rows, cols, 5, 1003);
    free(x);
}
END_TEST

/* Rows of one full tile of 256 lanes of one quad each (1021 to 1024
 * elements), as whole aligned quads, with a short last quad, at an
 * unaligned offset (the element loads) and strided; a NaN and an infinity
 * in two rows. CUDA reduces 2200 or more such rows with a warp each
 * (tally_k_reduce_rows_warp: at least eight a compute unit on GPUs of up
 * to 275 of them) and fewer with a group each. */
START_TEST(reduce_one_tile_rows)
{
    static const int64_t cases[][4] = {/* rows, cols, offset, stride */
                                       {2400, 1024, 0, 1024}, {17, 1023, 0, 1023}, {9, 1022, 5, 1035},
                                       {2200, 1022, 5, 1035}, {12, 1024, 1, 1024},  {2200, 1023, 1, 1023},
                                       {3, 1021, 4, 1021}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t rows = cases[i][0], cols = cases[i][1];
        float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
        tt_fill_normal(x, (size_t)(rows * cols), 23 + i, 0.5, 3.0);
        check_all_ops(x, rows, cols, cases[i][2], cases[i][3]);
        x[1 * cols + 700] = NAN;
        x[2 * cols + 1020] = INFINITY;
        for (int op = 0; op < 6; op++)
            check_reduce(all_ops[op], TALLY_AXIS_ROW, x, rows, cols, cases[i][2], cases[i][3], 1, 0);
        free(x);
    }
}
END_TEST

/* 64 rows of 16385 (two tiles per row) in a strided view at offset 3; as
 * one vector, 64 * 16385 elements make 65 tiles. */
START_TEST(reduce_two_tile_rows_strided)
{
    int64_t rows = 64, cols = 16385;
    float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
    tt_fill_normal(x, (size_t)(rows * cols), 22, 0.5, 4.0);
    check_all_ops(x, rows, cols, 3, 16400);
    free(x);
}
END_TEST

/* One vector of 16384 * 300 + 7 elements: 301 tiles, so the second level has
 * more than 256 quads' worth of lanes busy and a partial last tile. */
START_TEST(reduce_two_levels)
{
    int64_t cols = 16384 * 300 + 7;
    float *x = tt_alloc((size_t)cols * sizeof *x);
    tt_fill_uniform(x, (size_t)cols, 23, -2.0, 3.0);
    for (int i = 0; i < 6; i++) check_reduce(all_ops[i], TALLY_AXIS_ALL, x, 1, cols, 0, cols, 1, 0);
    /* The same elements as a 7 x (cols / 7) matrix reduce as the same
     * vector for axis all: the row stride must not matter. */
    check_reduce(TALLY_SUM, TALLY_AXIS_ALL, x, 7, cols / 7, 11, cols / 7 + 9, 1, 0);
    free(x);
}
END_TEST

/* Large magnitudes and cancellation: the exact-bits comparison with the
 * simulated tree is what catches a wrong order here. */
START_TEST(reduce_order_sensitive)
{
    int64_t rows = 3, cols = 20000;
    float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
    tt_rand r = tt_rand_seed(24);
    for (int64_t i = 0; i < rows * cols; i++)
        x[i] = (float)(ldexp(1.0 + tt_rand_unit(&r), (int)tt_rand_below(&r, 50) - 25) *
                       (tt_rand_below(&r, 2) ? 1 : -1));
    check_reduce(TALLY_SUM, TALLY_AXIS_ALL, x, rows, cols, 0, cols, 1, 0);
    check_reduce(TALLY_SUM, TALLY_AXIS_ROW, x, rows, cols, 0, cols, 1, 0);
    check_reduce(TALLY_SUMSQ, TALLY_AXIS_ROW, x, rows, cols, 0, cols, 1, 0);
    check_reduce(TALLY_MEAN, TALLY_AXIS_ALL, x, rows, cols, 0, cols, 1, 0);
    free(x);
}
END_TEST

/* Reads the output of one reduction of a small dense input. */
static void reduce_values(tally_reduce_op op, tally_axis axis, const float *x, int64_t rows, int64_t cols, float *got)
{
    tally_context *ctx = tt_context();
    int64_t outs = axis == TALLY_AXIS_ALL ? 1 : rows;
    placed in = place(x, rows, cols, 1, cols + 1, 1);
    placed out = place_out(TALLY_F32, outs, 1, 1, 1);
    tt_ok(tally_reduce(ctx, op, axis, in.view, out.view), ctx);
    tt_read_placed(&out, got);
    tt_placed_release(&in);
    tt_placed_release(&out);
}

START_TEST(reduce_nan_propagates)
{
    /* One NaN per row at different positions (first, middle, last, in a
     * second tile); row 4 has none. */
    int64_t rows = 5, cols = 17000;
    float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
    tt_fill_uniform(x, (size_t)(rows * cols), 25, -3.0, 3.0);
    int64_t where[4] = {0, 8191, cols - 1, 16500};
    for (int r = 0; r < 4; r++) x[r * cols + where[r]] = NAN;
    float got[5];
    for (int i = 0; i < 6; i++) {
        reduce_values(all_ops[i], TALLY_AXIS_ROW, x, rows, cols, got);
        for (int r = 0; r < 4; r++)
            ck_assert_msg(isnan(got[r]), "%s row %d with a NaN at %lld gave %g", op_name(all_ops[i]), r,
                          (long long)where[r], (double)got[r]);
        ck_assert_msg(!isnan(got[4]), "%s row without NaN gave NaN", op_name(all_ops[i]));
        reduce_values(all_ops[i], TALLY_AXIS_ALL, x, rows, cols, got);
        ck_assert_msg(isnan(got[0]), "%s all with NaN gave %g", op_name(all_ops[i]), (double)got[0]);
    }
    /* min/max: NaN wins even against infinities and when it comes first. */
    float y[6] = {NAN, -INFINITY, 1.0f, INFINITY, 2.0f, 3.0f};
    reduce_values(TALLY_MIN, TALLY_AXIS_ALL, y, 1, 6, got);
    ck_assert(isnan(got[0]));
    reduce_values(TALLY_MAX, TALLY_AXIS_ALL, y, 2, 3, got);
    ck_assert(isnan(got[0]));
    free(x);
}
END_TEST

START_TEST(reduce_infinities)
{
    float got[4];
    float a[8] = {1, 2, INFINITY, 3, -1, -2, -3, -4};
    reduce_values(TALLY_MAX, TALLY_AXIS_ROW, a, 2, 4, got);
    ck_assert(got[0] == INFINITY && got[1] == -1.0f);
    reduce_values(TALLY_LOGSUMEXP, TALLY_AXIS_ROW, a, 2, 4, got);
    ck_assert(got[0] == INFINITY);
    tt_assert_close(got[1], log(exp(-1.0) + exp(-2.0) + exp(-3.0) + exp(-4.0)), 8 * U, "lse(-1..-4)");
    reduce_values(TALLY_SUM, TALLY_AXIS_ROW, a, 2, 4, got);
    ck_assert(got[0] == INFINITY);
    ck_assert(got[1] == -10.0f);
    float b[6] = {-INFINITY, 5, -INFINITY, 7, INFINITY, -INFINITY};
    reduce_values(TALLY_MIN, TALLY_AXIS_ALL, b, 2, 3, got);
    ck_assert(got[0] == -INFINITY);
    reduce_values(TALLY_SUM, TALLY_AXIS_ALL, b, 2, 3, got);
    ck_assert(isnan(got[0])); /* inf + -inf */
}
END_TEST

START_TEST(reduce_logsumexp_edge_rows)
{
    int64_t rows = 4, cols = 37;
    float *x = tt_alloc((size_t)(rows * cols) * sizeof *x);
    for (int64_t i = 0; i < rows * cols; i++) x[i] = -INFINITY;
    /* row 0: all -inf; row 1: one finite value among -inf; row 2: large
     * values that would overflow exp without the shift; row 3: tiny ones. */
    x[1 * cols + 20] = 3.5f;
    for (int64_t c = 0; c < cols; c++) x[2 * cols + c] = 80.0f + (float)c;
    for (int64_t c = 0; c < cols; c++) x[3 * cols + c] = -100.0f - (float)c * 0.5f;
    float got[4];
    reduce_values(TALLY_LOGSUMEXP, TALLY_AXIS_ROW, x, rows, cols, got);
    ck_assert_msg(got[0] == -INFINITY, "all -inf row gave %g", (double)got[0]);
    tt_assert_bits(got[1], 3.5f, "single finite value among -inf");
    double ref[4], mag[4];
    tally_ref_reduce(TALLY_LOGSUMEXP, TALLY_AXIS_ROW, tally_ref_mat_make(x, rows, cols, cols), ref, mag);
    for (int r = 2; r < 4; r++) tt_assert_close(got[r], ref[r], tally_ref_tolerance(mag[r], 37, 6), "lse row %d", r);
    /* axis all: -inf everywhere gives -inf. */
    for (int64_t i = 0; i < rows * cols; i++) x[i] = -INFINITY;
    reduce_values(TALLY_LOGSUMEXP, TALLY_AXIS_ALL, x, rows, cols, got);
    ck_assert(got[0] == -INFINITY);
    free(x);
}
END_TEST

START_TEST(reduce_empty)
{
    tally_context *ctx = tt_context();
    tally_buffer *empty = NULL;
    tt_ok(tally_buffer_create(ctx, 0, &empty), ctx);
    placed out = place_out(TALLY_F32, 3, 1, 0, 1);
    float got[3];
    for (int pass = 0; pass < 3; pass++) {
        /* [0 x 5], [5 x 0] and [0 x 0] views of an empty buffer. */
        int64_t rows = pass == 1 ? 5 : 0, cols = pass == 0 ? 5 : 0;
        tally_view x = tally_view_f32(empty, 0, rows, cols);
        tally_view one = tally_view_f32(out.buf, 0, 1, 1);
        tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, x, one), ctx);
        tt_read(out.buf, 0, got, 1);
        tt_assert_bits(got[0], 0.0f, "empty sum");
        tt_poison(out.buf);
        tt_ok(tally_reduce(ctx, TALLY_SUMSQ, TALLY_AXIS_ALL, x, one), ctx);
        tt_read(out.buf, 0, got, 1);
        tt_assert_bits(got[0], 0.0f, "empty sumsq");
        tt_ok(tally_reduce(ctx, TALLY_LOGSUMEXP, TALLY_AXIS_ALL, x, one), ctx);
        tt_read(out.buf, 0, got, 1);
        ck_assert(got[0] == -INFINITY);
        tt_assert_status(tally_reduce(ctx, TALLY_MEAN, TALLY_AXIS_ALL, x, one), TALLY_EMPTY_INPUT, ctx);
        tt_assert_status(tally_reduce(ctx, TALLY_MIN, TALLY_AXIS_ALL, x, one), TALLY_EMPTY_INPUT, ctx);
        tt_assert_status(tally_reduce(ctx, TALLY_MAX, TALLY_AXIS_ALL, x, one), TALLY_EMPTY_INPUT, ctx);
        ck_assert(strlen(tally_last_error(ctx)) > 0);
    }
    /* By row: 3 rows of 0 columns give 3 empty values. */
    tt_poison(out.buf);
    tally_view rows3 = tally_view_f32(empty, 0, 3, 0);
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ROW, rows3, tally_view_f32(out.buf, 0, 3, 1)), ctx);
    tt_read(out.buf, 0, got, 3);
    for (int i = 0; i < 3; i++) tt_assert_bits(got[i], 0.0f, "empty row sum %d", i);
    tt_ok(tally_reduce(ctx, TALLY_LOGSUMEXP, TALLY_AXIS_ROW, rows3, tally_view_f32(out.buf, 0, 1, 3)), ctx);
    tt_read(out.buf, 0, got, 3);
    for (int i = 0; i < 3; i++) ck_assert(got[i] == -INFINITY);
    tt_assert_status(tally_reduce(ctx, TALLY_MEAN, TALLY_AXIS_ROW, rows3, tally_view_f32(out.buf, 0, 3, 1)),
                     TALLY_EMPTY_INPUT, ctx);
    tt_assert_status(tally_reduce(ctx, TALLY_MAX, TALLY_AXIS_ROW, rows3, tally_view_f32(out.buf, 0, 3, 1)),
                     TALLY_EMPTY_INPUT, ctx);
    /* Zero rows by row: nothing to compute, nothing written. */
    tt_poison(out.buf);
    tt_ok(tally_reduce(ctx, TALLY_MEAN, TALLY_AXIS_ROW, tally_view_f32(empty, 0, 0, 4), tally_view_f32(out.buf, 0, 0, 1)),
          ctx);
    tt_read(out.buf, 0, got, 3);
    for (int i = 0; i < 3; i++) ck_assert_uint_eq(tt_bits(got[i]), TT_POISON);
    tally_buffer_release(empty);
    tt_placed_release(&out);
}
END_TEST

/* Integer data with exact answers through every backend. */
START_TEST(reduce_exact_values)
{
    float x[12] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12};
    float got[4];
    reduce_values(TALLY_SUM, TALLY_AXIS_ALL, x, 3, 4, got);
    tt_assert_bits(got[0], -6.0f, "sum");
    reduce_values(TALLY_SUM, TALLY_AXIS_ROW, x, 3, 4, got);
    tt_assert_bits(got[0], -2.0f, "row 0");
    tt_assert_bits(got[2], -2.0f, "row 2");
    reduce_values(TALLY_MEAN, TALLY_AXIS_ROW, x, 4, 3, got);
    tt_assert_bits(got[0], 2.0f / 3.0f, "mean row 0 = 2/3 rounded once");
    reduce_values(TALLY_SUMSQ, TALLY_AXIS_ALL, x, 2, 6, got);
    tt_assert_bits(got[0], 650.0f, "sumsq");
    reduce_values(TALLY_MIN, TALLY_AXIS_ROW, x, 2, 6, got);
    tt_assert_bits(got[0], -6.0f, "min row 0");
    tt_assert_bits(got[1], -12.0f, "min row 1");
    reduce_values(TALLY_MAX, TALLY_AXIS_ALL, x, 1, 12, got);
    tt_assert_bits(got[0], 11.0f, "max");
    float z[2] = {0.0f, 0.0f};
    reduce_values(TALLY_LOGSUMEXP, TALLY_AXIS_ALL, z, 1, 2, got);
    tt_assert_close(got[0], log(2.0), 2 * U, "lse(0, 0) = log 2");
}
END_TEST

/* ---- KL divergence -------------------------------------------------------- */

static const unsigned kl_flag_sets[] = {0, TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB,
                                        TALLY_KL_LOG_TARGET | TALLY_KL_INPUT_IS_PROB};

/* Inputs suited to the flags: log-probabilities or probabilities (with a
 * few exact zeros), targets as probabilities (some exactly 0) or
 * log-probabilities. */
static void kl_inputs(float *in, float *tg, size_t n, unsigned flags, uint64_t seed)
{
    tt_rand r = tt_rand_seed(seed);
    for (size_t i = 0; i < n; i++) {
        double p = tt_rand_unit(&r);
        in[i] = (flags & TALLY_KL_INPUT_IS_PROB) ? (float)(p * p) : (float)(-8.0 * p);
        double t = tt_rand_unit(&r);
        if (flags & TALLY_KL_LOG_TARGET)
            tg[i] = (float)(-10.0 * t);
        else
            tg[i] = tt_rand_below(&r, 7) == 0 ? 0.0f : (float)t;
    }
}

/* aligned: input, target and output contiguous at offset 0 (kernels may
 * then load whole quads); otherwise input at offset/stride and target one
 * element further on both. */
static void check_kl(const float *in, const float *tg, int64_t rows, int64_t cols, unsigned flags, int64_t offset,
                     int64_t stride, int aligned)
{
    tally_context *ctx = tt_context();
    uint64_t n = (uint64_t)(rows * cols);
    placed pin = aligned ? place(in, rows, cols, 0, cols, 0) : place(in, rows, cols, offset, stride, 2),
           ptg = aligned ? place(tg, rows, cols, 0, cols, 0) : place(tg, rows, cols, offset + 1, stride + 1, 2);
    /* Reduction none: elementwise against the reference. */
    placed out = aligned ? place_out(TALLY_F32, rows, cols, 0, cols) : place_out(TALLY_F32, rows, cols, 3, cols + 2);
    tt_ok(tally_kl_div(ctx, pin.view, ptg.view, TALLY_REDUCTION_NONE, flags, out.view), ctx);
    float *terms = tt_alloc((n > 0 ? n : 1) * sizeof *terms);
    tt_read_placed(&out, terms);
    double *ref = tt_alloc((n > 0 ? n : 1) * sizeof *ref), *mag = tt_alloc((n > 0 ? n : 1) * sizeof *mag);
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(in, rows, cols, cols), tally_ref_mat_make(tg, rows, cols, cols),
                                      TALLY_REDUCTION_NONE, flags, ref, mag),
                     (int)n);
    for (uint64_t i = 0; i < n; i++)
        tt_assert_close(terms[i], ref[i], tally_ref_tolerance(mag[i], 1, 8),
                        "kl term %llu (flags %u, input %.9g, target %.9g)", (unsigned long long)i, flags,
                        (double)in[i], (double)tg[i]);
    tt_placed_release(&out);
    /* Reductions: against the reference, and exactly the documented tree
     * over the op's own terms. */
    float tree = tally_ref_tree_f32(terms, n, 0, 0.0f);
    for (int red = TALLY_REDUCTION_SUM; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
        placed o1 = place_out(TALLY_F32, 1, 1, 1, 1);
        tt_ok(tally_kl_div(ctx, pin.view, ptg.view, (tally_reduction)red, flags, o1.view), ctx);
        float got;
        tt_read_placed(&o1, &got);
        double r1, m1;
        ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(in, rows, cols, cols),
                                          tally_ref_mat_make(tg, rows, cols, cols), red, flags, &r1, &m1),
                         1);
        tt_assert_close(got, r1, tally_ref_tolerance(m1, n, 10), "kl reduction %d flags %u [%lld x %lld]", red, flags,
                        (long long)rows, (long long)cols);
        float want = red == TALLY_REDUCTION_SUM ? tree
                     : red == TALLY_REDUCTION_MEAN ? tree / (float)n
                                                   : tree / (float)rows;
        tt_assert_bits(got, want, "kl reduction %d flags %u [%lld x %lld]%s: tree over its own terms", red, flags,
                       (long long)rows, (long long)cols, aligned ? " aligned" : "");
        tt_placed_release(&o1);
    }
    free(terms);
    free(ref);
    free(mag);
    tt_placed_release(&pin);
    tt_placed_release(&ptg);
}

START_TEST(kl_shapes_and_flags)
{
    static const int64_t shapes[][2] = {{1, 1}, {1, 5}, {5, 7}, {33, 1000}, {2, 20000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int f = 0; f < 4; f++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            size_t n = (size_t)(rows * cols);
            float *in = tt_alloc(n * sizeof *in), *tg = tt_alloc(n * sizeof *tg);
            kl_inputs(in, tg, n, kl_flag_sets[f], 30 + s * 4 + (size_t)f);
            check_kl(in, tg, rows, cols, kl_flag_sets[f], (int64_t)s, cols + (int64_t)s, 0);
            free(in);
            free(tg);
        }
    }
}
END_TEST

START_TEST(kl_one_vector_two_levels)
{
    int64_t cols = 16384 * 20 + 3;
    float *in = tt_alloc((size_t)cols * sizeof *in), *tg = tt_alloc((size_t)cols * sizeof *tg);
    kl_inputs(in, tg, (size_t)cols, TALLY_KL_INPUT_IS_PROB, 40);
    check_kl(in, tg, 1, cols, TALLY_KL_INPUT_IS_PROB, 0, cols, 0);
    free(in);
    free(tg);
}
END_TEST

/* Contiguous, aligned placements (whole-quad loads in a kernel), rows whose
 * length is not a multiple of 4, several tiles; log-targets with both signs
 * (large terms). */
START_TEST(kl_aligned)
{
    static const int64_t shapes[][2] = {{16, 1024}, {16, 1025}, {64, 4097}, {3, 16384}, {1, 70001}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)(rows * cols);
        float *in = tt_alloc(n * sizeof *in), *tg = tt_alloc(n * sizeof *tg);
        for (int f = 0; f < 4; f++) {
            kl_inputs(in, tg, n, kl_flag_sets[f], 140 + s * 4 + (size_t)f);
            if (kl_flag_sets[f] & TALLY_KL_LOG_TARGET) tt_fill_normal(tg, n, 150 + s, 0.0, 2.0);
            check_kl(in, tg, rows, cols, kl_flag_sets[f], 0, cols, 1);
        }
        free(in);
        free(tg);
    }
}
END_TEST

/* The pointwise conventions: zero targets give exactly +0 (also where the
 * input is -inf, i.e. p = 0 with INPUT_IS_PROB), NaN inputs with zero
 * targets give NaN, negative or NaN targets give NaN. */
START_TEST(kl_special_values)
{
    tally_context *ctx = tt_context();
    float in[8] = {-1.0f, -INFINITY, NAN, -2.0f, -3.0f, -0.5f, 0.0f, -1.0f};
    float tg[8] = {0.0f, 0.0f, 0.0f, -0.25f, NAN, 0.5f, 0.25f, 1.0f};
    placed pin = place(in, 1, 8, 0, 8, 0), ptg = place(tg, 1, 8, 0, 8, 0);
    placed out = place_out(TALLY_F32, 1, 8, 0, 8);
    tt_ok(tally_kl_div(ctx, pin.view, ptg.view, TALLY_REDUCTION_NONE, 0, out.view), ctx);
    float got[8];
    tt_read_placed(&out, got);
    tt_assert_bits(got[0], 0.0f, "t = 0");
    tt_assert_bits(got[1], 0.0f, "t = 0, x = -inf (tally's documented difference from torch)");
    ck_assert(isnan(got[2]));
    ck_assert(isnan(got[3]));
    ck_assert(isnan(got[4]));
    tt_assert_close(got[5], 0.5 * (log(0.5) + 0.5), 4 * U, "0.5 * (log 0.5 + 0.5)");
    tt_assert_close(got[6], 0.25 * log(0.25), 4 * U, "0.25 * log 0.25");
    tt_assert_bits(got[7], 1.0f, "1 * (log 1 - (-1)) = 1 exactly");
    /* A sum with a negative target is NaN. */
    placed o1 = place_out(TALLY_F32, 1, 1, 0, 1);
    tt_ok(tally_kl_div(ctx, pin.view, ptg.view, TALLY_REDUCTION_SUM, 0, o1.view), ctx);
    float s;
    tt_read_placed(&o1, &s);
    ck_assert(isnan(s));
    /* INPUT_IS_PROB with p = 0 and t = 0: 0; with p = 0 and t > 0: +inf. */
    float p[3] = {0.0f, 0.0f, 1.0f}, t[3] = {0.0f, 0.5f, 0.0f};
    placed pp = place(p, 1, 3, 0, 3, 0), pt = place(t, 1, 3, 0, 3, 0);
    placed o3 = place_out(TALLY_F32, 1, 3, 0, 3);
    tt_ok(tally_kl_div(ctx, pp.view, pt.view, TALLY_REDUCTION_NONE, TALLY_KL_INPUT_IS_PROB, o3.view), ctx);
    tt_read_placed(&o3, got);
    tt_assert_bits(got[0], 0.0f, "p = 0, t = 0");
    ck_assert(got[1] == INFINITY);
    tt_assert_bits(got[2], 0.0f, "p = 1, t = 0");
    /* LOG_TARGET: exp(t) * (t - x). */
    float lx[2] = {-1.0f, -2.0f}, lt[2] = {0.0f, -INFINITY};
    placed plx = place(lx, 2, 1, 0, 1, 0), plt = place(lt, 2, 1, 0, 1, 0);
    placed o2 = place_out(TALLY_F32, 2, 1, 0, 1);
    tt_ok(tally_kl_div(ctx, plx.view, plt.view, TALLY_REDUCTION_NONE, TALLY_KL_LOG_TARGET, o2.view), ctx);
    tt_read_placed(&o2, got);
    tt_assert_bits(got[0], 1.0f, "exp(0) * (0 - (-1))");
    /* exp(-inf) * (-inf + 2) = 0 * -inf = NaN, as torch computes it. */
    ck_assert(isnan(got[1]));
    tt_placed_release_all(&pin, &ptg, &out, &o1, &pp, &pt, &o3, &plx, &plt, &o2);
}
END_TEST

START_TEST(kl_empty)
{
    tally_context *ctx = tt_context();
    tally_buffer *empty = NULL;
    tt_ok(tally_buffer_create(ctx, 0, &empty), ctx);
    placed o1 = place_out(TALLY_F32, 1, 1, 0, 1);
    tally_view e = tally_view_f32(empty, 0, 0, 6);
    tt_ok(tally_kl_div(ctx, e, e, TALLY_REDUCTION_SUM, 0, o1.view), ctx);
    float got;
    tt_read_placed(&o1, &got);
    tt_assert_bits(got, 0.0f, "empty KL sum");
    tt_assert_status(tally_kl_div(ctx, e, e, TALLY_REDUCTION_MEAN, 0, o1.view), TALLY_EMPTY_INPUT, ctx);
    tt_assert_status(tally_kl_div(ctx, e, e, TALLY_REDUCTION_BATCHMEAN, 0, o1.view), TALLY_EMPTY_INPUT, ctx);
    tt_ok(tally_kl_div(ctx, e, e, TALLY_REDUCTION_NONE, 0, tally_view_f32(empty, 0, 0, 6)), ctx);
    /* batchmean of rows with zero columns is 0 / rows = 0. */
    tally_view e3 = tally_view_f32(empty, 0, 3, 0);
    tt_ok(tally_kl_div(ctx, e3, e3, TALLY_REDUCTION_BATCHMEAN, 0, o1.view), ctx);
    tt_read_placed(&o1, &got);
    tt_assert_bits(got, 0.0f, "batchmean over 3 empty rows");
    tt_placed_release(&o1);
    tally_buffer_release(empty);
}
END_TEST

/* ---- Dirichlet-multinomial ------------------------------------------------ */

static void dm_inputs(float *counts, float *log_alpha, int64_t B, int64_t V, int64_t alpha_rows, int integer,
                      uint64_t seed)
{
    tt_rand r = tt_rand_seed(seed);
    for (int64_t i = 0; i < B * V; i++) {
        uint64_t k = tt_rand_below(&r, 10);
        double c = k < 4 ? 0.0 : (double)(k - 3);
        counts[i] = integer ? (float)c : (float)(c * 1.37);
    }
    for (int64_t i = 0; i < alpha_rows * V; i++) log_alpha[i] = tt_rand_float(&r, -2.5, 2.5);
}

static void check_dm(const float *counts, const float *log_alpha, int64_t B, int64_t V, int64_t alpha_rows,
                     unsigned flags)
{
    tally_context *ctx = tt_context();
    placed pc = place(counts, B, V, 2, V + 3, 1), pa = place(log_alpha, alpha_rows, V, 1, V + 1, 1);
    placed out = place_out(TALLY_F32, B, 1, 1, 2);
    tt_ok(tally_dirichlet_multinomial(ctx, pc.view, pa.view, TALLY_REDUCTION_NONE, flags, out.view), ctx);
    float *rows = tt_alloc((size_t)B * sizeof *rows);
    tt_read_placed(&out, rows);
    double *ref = tt_alloc((size_t)B * sizeof *ref), *mag = tt_alloc((size_t)B * sizeof *mag);
    tally_ref_mat cm = tally_ref_mat_make(counts, B, V, V), am = tally_ref_mat_make(log_alpha, alpha_rows, V, V);
    ck_assert_int_eq(tally_ref_dirichlet_multinomial(cm, am, TALLY_REDUCTION_NONE, flags, ref, mag), (int)B);
    /* lgamma's absolute accuracy below 10 (3.2e-6, about 54 ulp of 1) is
     * carried by the +2 per lgamma in mag; 64 extra ulps cover it. */
    for (int64_t b = 0; b < B; b++)
        tt_assert_close(rows[b], ref[b], tally_ref_tolerance(mag[b], (uint64_t)V, 64),
                        "dm row %lld of [%lld x %lld] (alpha rows %lld, flags %u)", (long long)b, (long long)B,
                        (long long)V, (long long)alpha_rows, flags);
    float tree = tally_ref_tree_f32(rows, (uint64_t)B, 0, 0.0f);
    for (int red = TALLY_REDUCTION_SUM; red <= TALLY_REDUCTION_MEAN; red++) {
        placed o1 = place_out(TALLY_F32, 1, 1, 0, 1);
        tt_ok(tally_dirichlet_multinomial(ctx, pc.view, pa.view, (tally_reduction)red, flags, o1.view), ctx);
        float got;
        tt_read_placed(&o1, &got);
        double r1, m1;
        ck_assert_int_eq(tally_ref_dirichlet_multinomial(cm, am, red, flags, &r1, &m1), 1);
        tt_assert_close(got, r1, tally_ref_tolerance(m1, (uint64_t)V, 64 + tally_ref_tree_depth((uint64_t)B)),
                        "dm reduction %d", red);
        tt_assert_bits(got, red == TALLY_REDUCTION_SUM ? tree : tree / (float)B,
                       "dm reduction %d: tree over its own row values", red);
        tt_placed_release(&o1);
    }
    free(rows);
    free(ref);
    free(mag);
    tt_placed_release_all(&pc, &pa, &out);
}

START_TEST(dm_shapes)
{
    static const int64_t shapes[][2] = {{1, 1}, {4, 7}, {33, 1000}, {3, 20000}, {200, 3},
                                        {5, 2048}, {5, 2049}, {2000, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t B = shapes[s][0], V = shapes[s][1];
        float *c = tt_alloc((size_t)(B * V) * sizeof *c), *a = tt_alloc((size_t)(B * V) * sizeof *a);
        for (int integer = 0; integer < 2; integer++) {
            dm_inputs(c, a, B, V, B, integer, 50 + s * 2 + (size_t)integer);
            for (unsigned flags = 0; flags <= TALLY_DM_WITH_COEFFICIENT; flags++) {
                check_dm(c, a, B, V, 1, flags); /* shared alpha: the first row of a */
                if (B > 1) check_dm(c, a, B, V, B, flags);
            }
        }
        free(c);
        free(a);
    }
}
END_TEST

/* Exact values: for integer counts and integer alphas the pmf is a ratio of
 * factorials, computed exactly (Python's fractions) and logged to 40
 * digits. These equal scipy.stats.dirichlet_multinomial.logpmf. */
START_TEST(dm_exact_pmf)
{
    static const struct {
        float counts[4];
        float alpha[4];
        int V;
        double logpmf;
    } cases[] = {
        {{2, 0, 1}, {1, 2, 3}, 3, -2.926739402067039541961803870895183729217},      /* 3/56 */
        {{5, 3, 0, 7}, {2, 1, 4, 3}, 4, -8.708352126505793010358754870226904945228}, /* 27/163438 */
        {{10, 1}, {1, 1}, 2, -2.484906649788000310229709479838878840798},            /* 1/12 */
        {{0, 0, 4}, {3, 5, 1}, 3, -6.204557762568690301453193385036368348642},       /* 1/495 */
    };
    tally_context *ctx = tt_context();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int V = cases[i].V;
        float la[4];
        for (int v = 0; v < V; v++) la[v] = logf(cases[i].alpha[v]);
        double ref, mag;
        ck_assert_int_eq(tally_ref_dirichlet_multinomial(tally_ref_mat_make(cases[i].counts, 1, V, V),
                                                         tally_ref_mat_make(la, 1, V, V), TALLY_REDUCTION_NONE,
                                                         TALLY_DM_WITH_COEFFICIENT, &ref, &mag),
                         1);
        /* log alpha rounded to float moves alpha by ~2^-24 relative, so the
         * reference of these float inputs is within ~1e-6 of the exact value. */
        ck_assert_msg(fabs(ref - cases[i].logpmf) < 2e-6, "reference %.15g vs exact %.15g", ref, cases[i].logpmf);
        placed pc = place(cases[i].counts, 1, V, 0, V, 0), pa = place(la, 1, V, 0, V, 0);
        placed o = place_out(TALLY_F32, 1, 1, 0, 1);
        tt_ok(tally_dirichlet_multinomial(ctx, pc.view, pa.view, TALLY_REDUCTION_NONE, TALLY_DM_WITH_COEFFICIENT,
                                          o.view),
              ctx);
        float got;
        tt_read_placed(&o, &got);
        tt_assert_close(got, cases[i].logpmf, tally_ref_tolerance(mag, (uint64_t)V, 64) + 2e-6, "exact pmf case %zu", i);
        tt_placed_release_all(&pc, &pa, &o);
    }
    /* alpha = 1 everywhere: uniform over compositions, pmf = 1 / C(N+V-1, V-1).
     * N = 12, V = 5: C(16, 4) = 1820. */
    float counts[5] = {3, 0, 4, 1, 4}, zero[5] = {0, 0, 0, 0, 0};
    placed pc = place(counts, 1, 5, 0, 5, 0), pa = place(zero, 1, 5, 0, 5, 0);
    placed o = place_out(TALLY_F32, 1, 1, 0, 1);
    tt_ok(tally_dirichlet_multinomial(ctx, pc.view, pa.view, TALLY_REDUCTION_NONE, TALLY_DM_WITH_COEFFICIENT, o.view),
          ctx);
    float got;
    tt_read_placed(&o, &got);
    tt_assert_close(got, -log(1820.0), 64 * 40 * U, "uniform compositions");
    tt_placed_release_all(&pc, &pa, &o);
}
END_TEST

START_TEST(dm_negative_count_and_zero_rows)
{
    tally_context *ctx = tt_context();
    int64_t B = 4, V = 6;
    float c[24], a[6];
    dm_inputs(c, a, B, V, 1, 1, 60);
    c[1 * V + 3] = -1.0f;
    for (int v = 0; v < V; v++) c[2 * V + v] = 0.0f; /* an all-zero row: log-likelihood 0 */
    placed pc = place(c, B, V, 0, V, 0), pa = place(a, 1, V, 0, V, 0);
    placed out = place_out(TALLY_F32, 1, B, 0, B);
    for (unsigned flags = 0; flags <= TALLY_DM_WITH_COEFFICIENT; flags++) {
        tt_ok(tally_dirichlet_multinomial(ctx, pc.view, pa.view, TALLY_REDUCTION_NONE, flags, out.view), ctx);
        float got[4];
        tt_read_placed(&out, got);
        ck_assert_msg(isnan(got[1]), "row with a negative count gave %g", (double)got[1]);
        ck_assert(!isnan(got[0]) && !isnan(got[3]));
        /* lgamma(A) - lgamma(0 + A) = 0 exactly, [+ lgamma(1) = 0] + 0. */
        tt_assert_bits(got[2], 0.0f, "all-zero row");
        placed o1 = place_out(TALLY_F32, 1, 1, 0, 1);
        tt_ok(tally_dirichlet_multinomial(ctx, pc.view, pa.view, TALLY_REDUCTION_SUM, flags, o1.view), ctx);
        float s;
        tt_read_placed(&o1, &s);
        ck_assert(isnan(s));
        tt_placed_release(&o1);
    }
    /* Zero rows: none writes nothing; sum is 0; mean is an error. */
    tally_buffer *empty = NULL;
    tt_ok(tally_buffer_create(ctx, 0, &empty), ctx);
    placed o1 = place_out(TALLY_F32, 1, 1, 0, 1);
    tt_ok(tally_dirichlet_multinomial(ctx, tally_view_f32(empty, 0, 0, V), pa.view, TALLY_REDUCTION_SUM, 0, o1.view),
          ctx);
    float s;
    tt_read_placed(&o1, &s);
    tt_assert_bits(s, 0.0f, "DM sum over zero rows");
    tt_assert_status(
        tally_dirichlet_multinomial(ctx, tally_view_f32(empty, 0, 0, V), pa.view, TALLY_REDUCTION_MEAN, 0, o1.view),
        TALLY_EMPTY_INPUT, ctx);
    tally_buffer_release(empty);
    tt_placed_release_all(&o1, &pc, &pa, &out);
}
END_TEST

/* ---- Gaussian mixture log density ------------------------------------------ */

static void gmm_inputs(float *z, float *mu, float *lv, float *logits, int64_t B, int64_t K, int64_t D, uint64_t seed)
{
    tt_fill_normal(mu, (size_t)(B * K * D), seed, 0.0, 2.0);
    tt_fill_uniform(lv, (size_t)(B * K * D), seed + 1, -3.0, 2.0);
    tt_fill_normal(logits, (size_t)K, seed + 2, 0.0, 1.5);
    tt_rand r = tt_rand_seed(seed + 3);
    for (int64_t b = 0; b < B; b++) {
        int64_t k = (int64_t)tt_rand_below(&r, (uint64_t)K);
        for (int64_t d = 0; d < D; d++)
            z[b * D + d] = mu[b * K * D + k * D + d] + (float)(exp(0.5 * lv[b * K * D + k * D + d]) *
                                                               (2.0 * tt_rand_unit(&r) - 1.0) * 1.5);
    }
}

/* aligned: every view contiguous at offset 0 (kernels may then move whole
 * 16-byte quads); otherwise strided views at odd offsets. */
static void check_gmm_log_prob(int64_t B, int64_t K, int64_t D, uint64_t seed, int aligned)
{
    tally_context *ctx = tt_context();
    size_t nz = (size_t)(B * D), np = (size_t)(B * K * D);
    float *z = tt_alloc(nz * 4), *mu = tt_alloc(np * 4), *lv = tt_alloc(np * 4), *lg = tt_alloc((size_t)K * 4);
    gmm_inputs(z, mu, lv, lg, B, K, D, seed);
    placed pz = aligned ? place(z, B, D, 0, D, 0) : place(z, B, D, 1, D + 3, 1),
           pm = aligned ? place(mu, B, K * D, 0, K * D, 0) : place(mu, B, K * D, 0, K * D + 1, 2),
           pl = aligned ? place(lv, B, K * D, 0, K * D, 0) : place(lv, B, K * D, 4, K * D, 0),
           pg = place(lg, 1, K, aligned ? 0 : 2, K, 1);
    placed out = place_out(TALLY_F32, B, 1, 2, 1);
    tt_ok(tally_gmm_log_prob(ctx, pz.view, pm.view, pl.view, pg.view, K, out.view), ctx);
    float *got = tt_alloc((size_t)B * 4);
    tt_read_placed(&out, got);
    double *ref = tt_alloc((size_t)B * 8), *mag = tt_alloc((size_t)B * 8);
    ck_assert_int_eq(tally_ref_gmm_log_prob(tally_ref_mat_make(z, B, D, D), tally_ref_mat_make(mu, B, K * D, K * D),
                                            tally_ref_mat_make(lv, B, K * D, K * D), lg, K, ref, mag),
                     (int)B);
    for (int64_t b = 0; b < B; b++)
        tt_assert_close(got[b], ref[b], tally_ref_tolerance(mag[b], (uint64_t)D, 16 + 2 * (double)K),
                        "gmm log_prob row %lld (B %lld, K %lld, D %lld)", (long long)b, (long long)B, (long long)K,
                        (long long)D);
    free(z);
    free(mu);
    free(lv);
    free(lg);
    free(got);
    free(ref);
    free(mag);
    tt_placed_release_all(&pz, &pm, &pl, &pg, &out);
}

START_TEST(gmm_log_prob_shapes)
{
    check_gmm_log_prob(1, 1, 1, 70, 0);
    check_gmm_log_prob(5, 1, 7, 71, 0);
    check_gmm_log_prob(9, 3, 5, 72, 0);
    check_gmm_log_prob(17, 4, 64, 73, 0);
    check_gmm_log_prob(17, 4, 64, 73, 1);
    check_gmm_log_prob(3, 2, 1001, 74, 0);
    check_gmm_log_prob(2, 5, 20001, 75, 0); /* D over two tiles */
    check_gmm_log_prob(2, 3, 20000, 75, 1);
    check_gmm_log_prob(300, 8, 3, 76, 0);
    check_gmm_log_prob(1000, 1, 4, 77, 1);
    check_gmm_log_prob(6, 33, 5, 78, 0);  /* more components than a short sequential logsumexp */
    check_gmm_log_prob(3, 1100, 2, 79, 1); /* more components than fit in local memory */
}
END_TEST

/* K = 1 with an empty logits view, and a standard normal checked by hand:
 * z = 0, mu = 0, lv = 0 gives -D/2 log(2 pi). */
START_TEST(gmm_log_prob_k1_closed_form)
{
    tally_context *ctx = tt_context();
    float zeros[6] = {0};
    placed pz = place(zeros, 2, 3, 0, 3, 0), pp = place(zeros, 2, 3, 0, 3, 0);
    tally_buffer *empty = NULL;
    tt_ok(tally_buffer_create(ctx, 0, &empty), ctx);
    placed out = place_out(TALLY_F32, 2, 1, 0, 1);
    tt_ok(tally_gmm_log_prob(ctx, pz.view, pp.view, pp.view, tally_view_f32(empty, 0, 0, 0), 1, out.view), ctx);
    float got[2];
    tt_read_placed(&out, got);
    for (int b = 0; b < 2; b++) tt_assert_close(got[b], -1.5 * log(2.0 * 3.14159265358979323846), 8 * U * 3, "standard normal row %d", b);
    tally_buffer_release(empty);
    tt_placed_release_all(&pz, &pp, &out);
}
END_TEST

/* ---- Gaussian mixture sample ------------------------------------------------- */

/* Tolerance of one normal draw against the double Box-Muller: 8 ulp of the
 * result, or 4 * 2^-24 of the radius s where sin/cos of the angle is tiny
 * (a float sinpi's absolute error there is ~2^-24, magnified by s). */
static double normal_tol(double ref, double s)
{
    return fmax(16.0 * U * fabs(ref), 4.0 * U * s);
}

static void check_gmm_sample(int64_t B, int64_t K, int64_t D, tally_rng rng, int with_component, uint64_t seed,
                             int aligned)
{
    tally_context *ctx = tt_context();
    size_t nz = (size_t)(B * D), np = (size_t)(B * K * D);
    float *z0 = tt_alloc((nz > 0 ? nz : 1) * 4), *mu = tt_alloc(np * 4), *lv = tt_alloc(np * 4),
          *lg = tt_alloc((size_t)K * 4);
    gmm_inputs(z0, mu, lv, lg, B, K, D, seed);
    placed pm = aligned ? place(mu, B, K * D, 0, K * D, 0) : place(mu, B, K * D, 3, K * D + 2, 1),
           pl = place(lv, B, K * D, 0, K * D, 1), pg = place(lg, 1, K, aligned ? 0 : 1, K, 1);
    placed pz = aligned ? place_out(TALLY_F32, B, D, 0, D) : place_out(TALLY_F32, B, D, 1, D + 1),
           pq = place_out(TALLY_F32, 1, B, 2, B), pc = place_out(TALLY_I32, B, 1, 1, 1);
    uint64_t consumed = 12345;
    tt_ok(tally_gmm_sample(ctx, pm.view, pl.view, pg.view, K, rng, pz.view, pq.view,
                           with_component ? pc.view : (tally_view){0}, &consumed),
          ctx);
    tally_ref_gmm_layout layout = tally_ref_gmm_sample_layout((uint64_t)B, (uint64_t)D);
    ck_assert_uint_eq(consumed, layout.consumed);
    ck_assert_uint_eq(consumed % 4, 0);
    float *z = tt_alloc(nz * 4), *lq = tt_alloc((size_t)B * 4);
    int32_t *comp = tt_alloc((size_t)B * 4);
    tt_read_placed(&pz, z);
    tt_read_placed(&pq, lq);
    if (with_component) {
        tt_read_placed(&pc, comp);
    } else {
        for (int64_t b = 0; b < B; b++) comp[b] = -2; /* unknown: infer from z below */
    }
    double *lq_ref = tt_alloc((size_t)B * 8), *mag = tt_alloc((size_t)B * 8);
    ck_assert_int_eq(tally_ref_gmm_log_prob(tally_ref_mat_make(z, B, D, D), tally_ref_mat_make(mu, B, K * D, K * D),
                                            tally_ref_mat_make(lv, B, K * D, K * D), lg, K, lq_ref, mag),
                     (int)B);
    for (int64_t b = 0; b < B; b++) {
        double u = tally_ref_rng_uniform(rng.seed, rng.subsequence, rng.offset + (uint64_t)b);
        if (comp[b] == -2) {
            /* Without the component output, accept the component whose
             * sample explains z best among the consistent ones. */
            comp[b] = K == 1 ? 0 : tally_ref_categorical(lg, K, 1, u, NULL);
        }
        int32_t c = comp[b];
        ck_assert_msg(tally_ref_categorical_consistent(lg, K, 1, u, c, (2.0 * (double)K + 20.0) * U),
                      "row %lld: component %d inconsistent with u = %.9g", (long long)b, c, u);
        if (K == 1) ck_assert_int_eq(c, 0);
        for (int64_t d = 0; d < D; d++) {
            uint64_t i = tally_ref_gmm_eps_index(rng.offset, (uint64_t)B, (uint64_t)D, (uint64_t)b, (uint64_t)d);
            double eps = tally_ref_rng_normal(rng.seed, rng.subsequence, i);
            double s = tally_ref_rng_normal_radius(rng.seed, rng.subsequence, i);
            double m = mu[b * K * D + c * D + d], sd = exp(0.5 * (double)lv[b * K * D + c * D + d]);
            double want = m + sd * eps;
            double tol = sd * normal_tol(eps, s) + 4.0 * U * (fabs(sd * eps) + fabs(m) + fabs(want));
            tt_assert_close(z[b * D + d], want, tol, "z[%lld][%lld] (component %d, eps index %" PRIu64 ")",
                            (long long)b, (long long)d, c, i);
        }
        tt_assert_close(lq[b], lq_ref[b], tally_ref_tolerance(mag[b], (uint64_t)D, 16 + 2 * (double)K),
                        "log_q row %lld", (long long)b);
    }
    /* log_q is op 4 on the returned z: the same bits as gmm_log_prob. */
    placed zin = place(z, B, D, 0, D, 0), out = place_out(TALLY_F32, B, 1, 0, 1);
    tt_ok(tally_gmm_log_prob(ctx, zin.view, pm.view, pl.view, pg.view, K, out.view), ctx);
    float *lp = tt_alloc((size_t)B * 4);
    tt_read_placed(&out, lp);
    for (int64_t b = 0; b < B; b++) tt_assert_bits(lq[b], lp[b], "log_q row %lld vs gmm_log_prob(z)", (long long)b);
    free(lp);
    tt_placed_release(&zin);
    tt_placed_release(&out);
    free(z0);
    free(mu);
    free(lv);
    free(lg);
    free(z);
    free(lq);
    free(comp);
    free(lq_ref);
    free(mag);
    tt_placed_release_all(&pm, &pl, &pg, &pz, &pq, &pc);
}

START_TEST(gmm_sample_shapes)
{
    check_gmm_sample(7, 3, 5, (tally_rng){.seed = 1, .subsequence = 0, .offset = 0}, 1, 80, 0);
    check_gmm_sample(3, 1, 4, (tally_rng){.seed = 2, .subsequence = 5, .offset = 6}, 1, 81, 0);
    check_gmm_sample(9, 5, 1, (tally_rng){.seed = 0xfeedfacecafebeefull, .subsequence = 1ull << 40, .offset = 13}, 1,
                     82, 0);
    check_gmm_sample(64, 4, 33, (tally_rng){.seed = 3, .subsequence = 1, .offset = 1000}, 1, 83, 0);
    check_gmm_sample(64, 4, 32, (tally_rng){.seed = 3, .subsequence = 1, .offset = 1000}, 1, 83, 1);
    /* Aligned rows whose normals do not start a Philox block (CUDA's warp
     * kernel draws them one element at a time), and the founding rows. */
    check_gmm_sample(64, 4, 32, (tally_rng){.seed = 3, .subsequence = 1, .offset = 1002}, 0, 83, 1);
    check_gmm_sample(256, 4, 64, (tally_rng){.seed = 11, .subsequence = 2, .offset = 0}, 1, 91, 1);
    /* More rows than a one-wave grid has warps: each warp of CUDA's warp
     * kernel takes several rows. */
    check_gmm_sample(6000, 3, 16, (tally_rng){.seed = 12, .subsequence = 0, .offset = 8}, 1, 92, 1);
    check_gmm_sample(5, 2, 2000, (tally_rng){.seed = 4, .subsequence = 2, .offset = 4}, 0, 84, 0);
    check_gmm_sample(1, 1, 1, (tally_rng){.seed = 5, .subsequence = 3, .offset = 3}, 1, 85, 0);
    check_gmm_sample(33, 6, 7, (tally_rng){.seed = 6, .subsequence = 0, .offset = (1ull << 40) + 2}, 0, 86, 0);
    check_gmm_sample(2000, 1, 8, (tally_rng){.seed = 7, .subsequence = 0, .offset = 16}, 1, 87, 1);
    check_gmm_sample(5, 40, 3, (tally_rng){.seed = 8, .subsequence = 0, .offset = 5}, 1, 88, 0);
    check_gmm_sample(3, 1100, 2, (tally_rng){.seed = 9, .subsequence = 0, .offset = 0}, 1, 89, 1);
    check_gmm_sample(2, 3, 20001, (tally_rng){.seed = 10, .subsequence = 0, .offset = 1}, 1, 90, 0);
}
END_TEST

/* Rows whose logits cannot be sampled get component -1 and NaN outputs;
 * sampling with and without the component output gives the same z. D = 4
 * takes CUDA's warp kernel (kernels/gmm_warp.h), D = 3 the fused one. */
START_TEST(gmm_sample_invalid_logits)
{
    tally_context *ctx = tt_context();
    for (int64_t D = 3; D <= 4; D++) {
        const int64_t B = 3, K = 2;
        float mu[24] = {0}, lv[24] = {0}, lg[2] = {NAN, 0.0f};
        placed pm = place(mu, B, K * D, 0, K * D, 0), pl = place(lv, B, K * D, 0, K * D, 0);
        placed pg = place(lg, 1, K, 0, K, 0);
        placed pz = place_out(TALLY_F32, B, D, 0, D), pq = place_out(TALLY_F32, B, 1, 0, 1),
               pc = place_out(TALLY_I32, B, 1, 0, 1);
        uint64_t consumed = 0;
        tally_rng rng = {.seed = 9, .subsequence = 9, .offset = 8};
        tt_ok(tally_gmm_sample(ctx, pm.view, pl.view, pg.view, K, rng, pz.view, pq.view, pc.view, &consumed), ctx);
        float z[12], q[3];
        int32_t c[3];
        tt_read_placed(&pz, z);
        tt_read_placed(&pq, q);
        tt_read_placed(&pc, c);
        for (int b = 0; b < 3; b++) {
            ck_assert_int_eq(c[b], -1);
            ck_assert(isnan(q[b]));
            for (int d = 0; d < D; d++) ck_assert(isnan(z[b * D + d]));
        }
        ck_assert_uint_eq(consumed, 4 + 12); /* B4 = 4, B * D2 = 12 for both */
        tt_placed_release_all(&pm, &pl, &pg, &pz, &pq, &pc);
    }
}
END_TEST

/* ---- Random fills ------------------------------------------------------------ */

/* A fill of rows x cols into a strided output: element (r, c) gets stream
 * element offset + r*cols + c. */
static void check_fill(tally_distribution dist, tally_rng rng, int64_t rows, int64_t cols, int64_t out_stride)
{
    tally_context *ctx = tt_context();
    tally_dtype dtype = dist == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32;
    placed out = place_out(dtype, rows, cols, 3, out_stride);
    uint64_t consumed = 777;
    tt_ok(tally_rng_fill(ctx, dist, rng, out.view, &consumed), ctx);
    uint64_t n = (uint64_t)(rows * cols);
    ck_assert_uint_eq(consumed, tally_ref_round_up4(n, NULL));
    uint32_t *got = tt_alloc(n * 4);
    tt_read_placed(&out, got);
    double worst = 0.0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = rng.offset + k;
        if (dist == TALLY_DIST_RAW) {
            uint32_t want = tally_ref_rng_raw(rng.seed, rng.subsequence, i);
            ck_assert_msg(got[k] == want, "raw(%" PRIu64 ") = %08x, reference %08x", i, got[k], want);
        } else if (dist == TALLY_DIST_UNIFORM) {
            float want = tally_ref_rng_uniform(rng.seed, rng.subsequence, i);
            tt_assert_bits(tt_float(got[k]), want, "uniform(%" PRIu64 ")", i);
        } else {
            double want = tally_ref_rng_normal(rng.seed, rng.subsequence, i);
            double s = tally_ref_rng_normal_radius(rng.seed, rng.subsequence, i);
            tt_assert_close(tt_float(got[k]), want, normal_tol(want, s), "normal(%" PRIu64 ")", i);
            if (fabs(want) > 1e-3) worst = fmax(worst, tally_ref_ulp_diff(tt_float(got[k]), want));
        }
    }
    if (dist == TALLY_DIST_NORMAL) fprintf(stderr, "normal fill: worst ulp difference (|ref| > 1e-3) %.2f\n", worst);
    free(got);
    tt_placed_release(&out);
}

START_TEST(rng_fill_raw_exact)
{
    check_fill(TALLY_DIST_RAW, (tally_rng){0, 0, 0}, 1, 1, 1);
    check_fill(TALLY_DIST_RAW, (tally_rng){42, 7, 3}, 3, 5, 7);
    check_fill(TALLY_DIST_RAW, (tally_rng){0xdeadbeefcafebabeull, 0x123456789abcdef0ull, 5}, 17, 33, 33);
    check_fill(TALLY_DIST_RAW, (tally_rng){1, (1ull << 40) + 1, (1ull << 33) + 2}, 1, 100003, 100003);
    check_fill(TALLY_DIST_RAW, (tally_rng){UINT64_MAX, UINT64_MAX, UINT64_MAX - 1024}, 4, 255, 256);
}
END_TEST

START_TEST(rng_fill_uniform_exact)
{
    check_fill(TALLY_DIST_UNIFORM, (tally_rng){0, 0, 0}, 1, 4, 4);
    check_fill(TALLY_DIST_UNIFORM, (tally_rng){42, 7, 3}, 9, 11, 12);
    check_fill(TALLY_DIST_UNIFORM, (tally_rng){7, 1ull << 63, (1ull << 32) - 1}, 2, 65537, 65540);
}
END_TEST

START_TEST(rng_fill_normal)
{
    check_fill(TALLY_DIST_NORMAL, (tally_rng){0, 0, 0}, 1, 8, 8);
    check_fill(TALLY_DIST_NORMAL, (tally_rng){42, 7, 3}, 9, 11, 13); /* odd offset: pair shared with element 2 */
    check_fill(TALLY_DIST_NORMAL, (tally_rng){3, 3, 1ull << 36}, 1, 200001, 200001);
}
END_TEST

/* Every element of a fill has the stream's exact bits whatever the output's
 * layout: its first element's alignment against the stream's blocks (the
 * buffer offset and the stream offset mod 4 decide which kernel writes it),
 * odd lengths, several passes of a work-group, column views and padded
 * rows. The normal draws are compared bit for bit with the contract's own
 * definition (tally_stream_normal), which the host backend computes;
 * rng_fill_normal holds that definition to float64. */
typedef struct fill_layout {
    uint64_t offset;
    int64_t out_off, rows, cols, stride;
} fill_layout;

static void check_fill_layout(tally_distribution dist, const fill_layout *f)
{
    tally_context *ctx = tt_context();
    const tally_rng rng = {.seed = 0x5eed0000u + (uint64_t)dist, .subsequence = 3, .offset = f->offset};
    placed out = tt_place(NULL, dist == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32, f->rows, f->cols, f->out_off,
                             f->stride, 5);
    tt_ok(tally_rng_fill(ctx, dist, rng, out.view, NULL), ctx);
    const uint64_t n = (uint64_t)(f->rows * f->cols);
    uint32_t *got = tt_alloc(n * 4);
    tt_read_placed(&out, got);
    for (uint64_t k = 0; k < n; k++) {
        const uint64_t i = rng.offset + k;
        uint32_t want = tally_ref_rng_raw(rng.seed, rng.subsequence, i);
        if (dist == TALLY_DIST_UNIFORM) want = tt_bits(tally_ref_rng_uniform(rng.seed, rng.subsequence, i));
        if (dist == TALLY_DIST_NORMAL) want = tt_bits(tally_stream_normal(rng.seed, rng.subsequence, i));
        ck_assert_msg(got[k] == want,
                      "dist %d, offset %" PRIu64 ", view [%" PRId64 ", %" PRId64 "] stride %" PRId64
                      " at %" PRId64 ": element %" PRIu64 " = %08x, want %08x",
                      (int)dist, f->offset, f->rows, f->cols, f->stride, f->out_off, k, got[k], want);
    }
    free(got);
    tt_placed_release(&out);
}

START_TEST(rng_fill_layouts)
{
    static const tally_distribution dists[] = {TALLY_DIST_RAW, TALLY_DIST_UNIFORM, TALLY_DIST_NORMAL};
    /* Contiguous rows: every buffer offset against every stream phase, and
     * lengths from one element to several 4096-element passes. */
    static const int64_t lengths[] = {1, 2, 3, 4, 5, 7, 8, 4097, 3 * 4096 + 6};
    static const uint64_t offsets[] = {0, 1, 2, 3, 4, 4098, (1ull << 34) - 2};
    static const fill_layout strided[] = {
        {.offset = 0, .out_off = 0, .rows = 5000, .cols = 1, .stride = 1}, /* [n, 1], contiguous */
        {.offset = 1, .out_off = 1, .rows = 5000, .cols = 1, .stride = 1},
        {.offset = 0, .out_off = 2, .rows = 3000, .cols = 1, .stride = 3}, /* a column of a matrix */
        {.offset = 4, .out_off = 0, .rows = 40, .cols = 64, .stride = 68}, /* padded rows */
        {.offset = 3, .out_off = 1, .rows = 33, .cols = 300, .stride = 301},
        {.offset = 6, .out_off = 0, .rows = 7, .cols = 5, .stride = 8},
        {.offset = 2, .out_off = 3, .rows = 4, .cols = 1000, .stride = 1000}, /* rows back to back */
        {.offset = 0, .out_off = 0, .rows = 2, .cols = 257, .stride = 259},
    };
    for (size_t d = 0; d < sizeof dists / sizeof dists[0]; d++) {
        for (int64_t at = 0; at < 4; at++)
            for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++)
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
                    const fill_layout f = {.offset = offsets[o], .out_off = at, .rows = 1, .cols = lengths[l],
                                           .stride = lengths[l]};
                    check_fill_layout(dists[d], &f);
                }
        for (size_t v = 0; v < sizeof strided / sizeof strided[0]; v++) check_fill_layout(dists[d], &strided[v]);
    }
}
END_TEST

/* Pairs are absolute: a fill from an odd offset gives the same bits as the
 * corresponding elements of a fill that starts one earlier. */
START_TEST(rng_fill_normal_pairs_absolute)
{
    tally_context *ctx = tt_context();
    placed a = place_out(TALLY_F32, 1, 101, 0, 101), b = place_out(TALLY_F32, 1, 100, 0, 100);
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_NORMAL, (tally_rng){11, 12, 40}, a.view, NULL), ctx);
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_NORMAL, (tally_rng){11, 12, 41}, b.view, NULL), ctx);
    float fa[101], fb[100];
    tt_read_placed(&a, fa);
    tt_read_placed(&b, fb);
    for (int i = 0; i < 100; i++) tt_assert_bits(fb[i], fa[i + 1], "normal(41 + %d)", i);
    tt_placed_release(&a);
    tt_placed_release(&b);
}
END_TEST

START_TEST(rng_consumed_and_advance)
{
    tally_context *ctx = tt_context();
    placed out = place_out(TALLY_F32, 1, 9, 0, 9);
    uint64_t consumed = 0;
    for (int64_t n = 1; n <= 9; n++) {
        tt_ok(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, (tally_rng){1, 2, 3}, tally_view_f32(out.buf, 0, 1, n),
                             &consumed),
              ctx);
        ck_assert_uint_eq(consumed, (uint64_t)((n + 3) / 4 * 4));
    }
    /* Consecutive ops chained with tally_rng_advance never reuse a draw:
     * two fills of 5 equal one fill of 8 (the first's 5) then from 8. */
    tally_rng rng = {.seed = 77, .subsequence = 1, .offset = 0};
    float first[5], second[5];
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, tally_view_f32(out.buf, 0, 1, 5), &consumed), ctx);
    tt_read(out.buf, 0, first, 5);
    tt_ok(tally_rng_advance(&rng, consumed), NULL);
    ck_assert_uint_eq(rng.offset, 8);
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, tally_view_f32(out.buf, 0, 1, 5), &consumed), ctx);
    tt_read(out.buf, 0, second, 5);
    for (int i = 0; i < 5; i++) {
        tt_assert_bits(first[i], tally_ref_rng_uniform(77, 1, (uint64_t)i), "first %d", i);
        tt_assert_bits(second[i], tally_ref_rng_uniform(77, 1, 8 + (uint64_t)i), "second %d", i);
    }
    /* tally_rng_advance: up to 2^64 - 1 is fine; past it is RNG_EXHAUSTED
     * and leaves the state unchanged. */
    tally_rng top = {.seed = 1, .subsequence = 1, .offset = UINT64_MAX - 8};
    tt_ok(tally_rng_advance(&top, 8), NULL);
    ck_assert_uint_eq(top.offset, UINT64_MAX);
    tt_assert_status(tally_rng_advance(&top, 1), TALLY_RNG_EXHAUSTED, NULL);
    ck_assert_uint_eq(top.offset, UINT64_MAX);
    ck_assert(strlen(tally_last_error(NULL)) > 0);
    top.offset = 5;
    tt_assert_status(tally_rng_advance(&top, UINT64_MAX), TALLY_RNG_EXHAUSTED, NULL);
    ck_assert_uint_eq(top.offset, 5);
    /* An op whose draws would pass 2^64 fails before writing anything. */
    tt_poison(out.buf);
    consumed = 99;
    tt_assert_status(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, (tally_rng){1, 1, UINT64_MAX - 2},
                                    tally_view_f32(out.buf, 0, 1, 2), &consumed),
                     TALLY_RNG_EXHAUSTED, ctx);
    ck_assert_uint_eq(consumed, 0);
    float g[9];
    tt_read_placed(&out, g);
    for (int i = 0; i < 9; i++) ck_assert_uint_eq(tt_bits(g[i]), TT_POISON);
    /* The highest usable draws: offset 2^64 - 8, four elements. */
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, (tally_rng){1, 1, UINT64_MAX - 7}, tally_view_f32(out.buf, 0, 1, 4),
                         &consumed),
          ctx);
    tt_read(out.buf, 0, g, 4);
    for (int i = 0; i < 4; i++) tt_assert_bits(g[i], tally_ref_rng_uniform(1, 1, UINT64_MAX - 7 + (uint64_t)i), "top %d", i);
    tt_placed_release(&out);
}
END_TEST

/* ---- Categorical ---------------------------------------------------------------- */

static void check_categorical(const float *w, int64_t rows, int64_t cols, unsigned flags, tally_rng rng)
{
    tally_context *ctx = tt_context();
    placed pw = place(w, rows, cols, 2, cols + 1, 1);
    placed out = place_out(TALLY_I32, rows, 1, 1, 1);
    uint64_t consumed = 0;
    tt_ok(tally_categorical(ctx, pw.view, flags, rng, out.view, &consumed), ctx);
    ck_assert_uint_eq(consumed, tally_ref_round_up4((uint64_t)rows, NULL));
    int32_t *got = tt_alloc((size_t)rows * 4);
    tt_read_placed(&out, got);
    int is_logits = (flags & TALLY_CATEGORICAL_LOGITS) != 0;
    /* The float running sums of tally and the double ones here differ by at
     * most ~(2 cols + 8) * 2^-24 of the total (each float addition rounds
     * once). A logit's weight exp(l - max) is further off by 1 ulp of exp
     * plus the rounding of l - max (|l - max| <= 10 here): 12 more. */
    double tol = (2.0 * (double)cols + 8.0 + (is_logits ? 12.0 : 0.0)) * U;
    for (int64_t r = 0; r < rows; r++) {
        double u = tally_ref_rng_uniform(rng.seed, rng.subsequence, rng.offset + (uint64_t)r);
        ck_assert_msg(tally_ref_categorical_consistent(w + r * cols, cols, is_logits, u, got[r], tol),
                      "row %lld: index %d inconsistent with u = %.9g (reference picks %d)", (long long)r, got[r], u,
                      tally_ref_categorical(w + r * cols, cols, is_logits, u, NULL));
    }
    free(got);
    tt_placed_release(&pw);
    tt_placed_release(&out);
}

START_TEST(categorical_weights)
{
    static const int64_t shapes[][2] = {{1, 1}, {7, 2}, {50, 5}, {33, 37}, {10000, 3}, {3, 5000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        float *w = tt_alloc((size_t)(rows * cols) * 4);
        tt_rand r = tt_rand_seed(90 + s);
        for (int64_t i = 0; i < rows * cols; i++)
            w[i] = tt_rand_below(&r, 4) == 0 ? 0.0f : (float)(tt_rand_unit(&r) * 10.0);
        for (int64_t i = 0; i < rows; i++) w[i * cols] = (float)(i % 3); /* some leading zeros */
        check_categorical(w, rows, cols, 0, (tally_rng){.seed = 100 + s, .subsequence = s, .offset = 4 * s + 1});
        /* The same numbers as logits (negative values included). */
        for (int64_t i = 0; i < rows * cols; i++) w[i] = w[i] - 5.0f;
        check_categorical(w, rows, cols, TALLY_CATEGORICAL_LOGITS,
                          (tally_rng){.seed = 200 + s, .subsequence = 1, .offset = 7});
        free(w);
    }
}
END_TEST

/* The device's categorical draws equal the rule of include/tally/terms.h
 * (tally_categorical_row, which the host backend runs) bit for bit: rows
 * past one group of 256, rows longer than one 16-column tile with ragged
 * last tiles, padded rows, invalid rows whose bad entry lies in a later
 * tile, and logits. */
static void check_categorical_exact(const float *w, int64_t rows, int64_t cols, int64_t stride, int64_t offset,
                                    unsigned flags, tally_rng rng)
{
    tally_context *ctx = tt_context();
    float *dense = tt_alloc((size_t)(rows * cols) * 4);
    for (int64_t r = 0; r < rows; r++) memcpy(dense + r * cols, w + r * stride, (size_t)cols * 4);
    placed pw = place(dense, rows, cols, offset, stride, 2);
    placed out = place_out(TALLY_I32, 1, rows, 1, rows);
    tt_ok(tally_categorical(ctx, pw.view, flags, rng, out.view, NULL), ctx);
    int32_t *got = tt_alloc((size_t)rows * 4);
    tt_read_placed(&out, got);
    const int is_logits = (flags & TALLY_CATEGORICAL_LOGITS) != 0;
    for (int64_t r = 0; r < rows; r++) {
        const float u = tally_stream_uniform(rng.seed, rng.subsequence, rng.offset + (uint64_t)r);
        const int32_t want = tally_categorical_row(dense + r * cols, (tally_u64)cols, is_logits, u);
        ck_assert_msg(got[r] == want, "[%lld x %lld] %s row %lld: index %d, the rule gives %d", (long long)rows,
                      (long long)cols, is_logits ? "logits" : "weights", (long long)r, got[r], want);
    }
    free(got);
    free(dense);
    tt_placed_release(&pw);
    tt_placed_release(&out);
}

START_TEST(categorical_exact_bits)
{
    /* Short rows (up to 64 columns, a row a work-item: whole and ragged
     * chunks of 16, several groups of 256 rows), then tiles of 128 and 256
     * columns (the smallest holding a row): one tile, one tile with a
     * ragged width, several tiles of 256. */
    static const int64_t shapes[][3] = {{1, 1, 1},       {3, 16, 16},    {5, 17, 19},   {300, 33, 33},
                                        {600, 64, 64},   {257, 5, 8},    {1100, 49, 52}, {260, 65, 65},
                                        {2, 1000, 1001}, {40, 48, 50},   {70, 200, 203}, {20, 256, 256},
                                        {9, 257, 260}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1], stride = shapes[s][2];
        float *w = tt_alloc((size_t)(rows * stride) * 4);
        tt_rand rnd = tt_rand_seed(500 + s);
        for (int64_t i = 0; i < rows * stride; i++)
            w[i] = tt_rand_below(&rnd, 5) == 0 ? 0.0f : (float)(tt_rand_unit(&rnd) * 3.0);
        /* Invalid rows with the offending entry late in the row, and a row
         * whose only weight is its last. */
        if (rows > 4) {
            w[1 * stride + cols - 1] = -1.0f;
            w[2 * stride + cols / 2] = NAN;
            w[3 * stride + cols - 1] = INFINITY;
            for (int64_t c = 0; c < cols; c++) w[4 * stride + c] = c == cols - 1 ? 2.0f : 0.0f;
        }
        /* At element 3, and at element 0: with a stride of whole quads the
         * rows are then 16-byte aligned (CUDA's staged rows). */
        for (int64_t at = 3; at >= 0; at -= 3)
            check_categorical_exact(w, rows, cols, stride, at, 0,
                                    (tally_rng){.seed = 31 + s, .subsequence = 2, .offset = 3 * s});
        for (int64_t i = 0; i < rows * stride; i++) w[i] = (float)(4.0 * tt_rand_unit(&rnd) - 6.0);
        if (rows > 4) {
            w[1 * stride + cols - 1] = NAN;
            w[2 * stride + cols - 1] = INFINITY;
            for (int64_t c = 0; c < cols; c++) w[3 * stride + c] = -INFINITY;
        }
        for (int64_t at = 3; at >= 0; at -= 3)
            check_categorical_exact(w, rows, cols, stride, at, TALLY_CATEGORICAL_LOGITS,
                                    (tally_rng){.seed = 61 + s, .subsequence = 0, .offset = 8});
        free(w);
    }
}
END_TEST

/* Rows made of the values where the rule's tests decide: zeros of both
 * signs, subnormals (a total so small that u * total rounds to 0, which
 * leaves only the first nonzero weight), leading zeros, weights that a
 * large running sum absorbs, a tiny negative weight absorbed the same way,
 * NaN, both infinities and totals that overflow. Each row mixes a few of
 * them; every draw must equal tally_categorical_row's bit for bit, in
 * 16-byte aligned rows of whole quads (CUDA's staged rows) and in rows at
 * element 1. */
static const float categorical_edge_values[] = {
    0.0f, -0.0f, 1e-45f, 3e-45f, 1e-40f, 1.17549435e-38f, 1.0f, 0.5f, 3.0f, 1e30f, 3e38f,
    -1e-45f, -1.0f, NAN, INFINITY, -INFINITY,
};

START_TEST(categorical_edge_rows)
{
    enum { ROWS = 700, NVAL = sizeof categorical_edge_values / sizeof categorical_edge_values[0] };
    static const int64_t widths[] = {64, 40, 4};
    for (size_t s = 0; s < sizeof widths / sizeof widths[0]; s++) {
        const int64_t cols = widths[s];
        float *w = tt_alloc((size_t)(ROWS * cols) * 4);
        tt_rand rnd = tt_rand_seed(7100 + s);
        for (int64_t r = 0; r < ROWS; r++) {
            /* A row draws from the first 11 values (valid weights) or, one
             * row in four, from all of them; most of its entries are 0. */
            const uint64_t pool = tt_rand_below(&rnd, 4) == 0 ? NVAL : 11;
            const uint64_t density = 1 + tt_rand_below(&rnd, 4);
            for (int64_t c = 0; c < cols; c++)
                w[r * cols + c] =
                    tt_rand_below(&rnd, 4) < density ? categorical_edge_values[tt_rand_below(&rnd, pool)] : 0.0f;
        }
        for (int64_t at = 0; at <= 1; at++)
            check_categorical_exact(w, ROWS, cols, cols, at, 0,
                                    (tally_rng){.seed = 900 + s, .subsequence = 3, .offset = 5 + (uint64_t)at});
        /* As logits: -inf entries are zero weights, NaN and +inf invalid. */
        check_categorical_exact(w, ROWS, cols, cols, 0, TALLY_CATEGORICAL_LOGITS,
                                (tally_rng){.seed = 950 + s, .subsequence = 1, .offset = 2});
        free(w);
    }
}
END_TEST

START_TEST(categorical_invalid_rows)
{
    tally_context *ctx = tt_context();
    enum { R = 10, C = 4 };
    float w[R][C] = {
        {1, 2, 3, 4},                 /* valid */
        {1, -1, 3, 4},                /* negative */
        {1, NAN, 3, 4},               /* NaN */
        {1, INFINITY, 3, 4},          /* infinite */
        {0, 0, 0, 0},                 /* zero total */
        {0, 0, 5, 0},                 /* only index 2 */
        {3e38f, 3e38f, 0, 0},         /* float total overflows */
        {0, 0, 0, 1e-45f},            /* tiny only weight: index 3 */
        {-0.0f, 2, 0, 0},             /* -0 is a zero weight, not negative */
        {1e-30f, 0, 0, 1e30f},        /* huge ratio */
    };
    placed pw = place(&w[0][0], R, C, 0, C, 0);
    placed out = place_out(TALLY_I32, 1, R, 0, R);
    for (uint64_t off = 0; off < 40; off += 7) {
        tt_ok(tally_categorical(ctx, pw.view, 0, (tally_rng){5, 5, off}, out.view, NULL), ctx);
        int32_t got[R];
        tt_read_placed(&out, got);
        ck_assert(got[0] >= 0 && got[0] < 4);
        ck_assert_int_eq(got[1], -1);
        ck_assert_int_eq(got[2], -1);
        ck_assert_int_eq(got[3], -1);
        ck_assert_int_eq(got[4], -1);
        ck_assert_int_eq(got[5], 2);
        ck_assert_int_eq(got[6], -1);
        ck_assert_int_eq(got[7], 3);
        ck_assert_int_eq(got[8], 1);
        ck_assert(got[9] == 0 || got[9] == 3);
    }
    /* Logits: NaN, +inf and all -inf rows are invalid; -inf entries are
     * never chosen. */
    float l[5][3] = {
        {0, 1, 2},
        {0, NAN, 2},
        {0, INFINITY, 2},
        {-INFINITY, -INFINITY, -INFINITY},
        {-INFINITY, 5, -INFINITY},
    };
    placed pl = place(&l[0][0], 5, 3, 0, 3, 0);
    placed o5 = place_out(TALLY_I32, 5, 1, 0, 1);
    tt_ok(tally_categorical(ctx, pl.view, TALLY_CATEGORICAL_LOGITS, (tally_rng){6, 6, 6}, o5.view, NULL), ctx);
    int32_t g5[5];
    tt_read_placed(&o5, g5);
    ck_assert(g5[0] >= 0 && g5[0] < 3);
    ck_assert_int_eq(g5[1], -1);
    ck_assert_int_eq(g5[2], -1);
    ck_assert_int_eq(g5[3], -1);
    ck_assert_int_eq(g5[4], 1);
    tt_placed_release_all(&pw, &out, &pl, &o5);
}
END_TEST

/* Large samples follow the probabilities: with weights {1, 3}, about a
 * quarter of 40000 rows pick 0. The count is deterministic; the bound
 * (5 sigma) only documents why the value is plausible. */
START_TEST(categorical_frequencies)
{
    tally_context *ctx = tt_context();
    int64_t rows = 40000;
    float *w = tt_alloc((size_t)rows * 2 * 4);
    for (int64_t i = 0; i < rows; i++) {
        w[2 * i] = 1.0f;
        w[2 * i + 1] = 3.0f;
    }
    placed pw = place(w, rows, 2, 0, 2, 0);
    placed out = place_out(TALLY_I32, rows, 1, 0, 1);
    tt_ok(tally_categorical(ctx, pw.view, 0, (tally_rng){2024, 0, 0}, out.view, NULL), ctx);
    int32_t *g = tt_alloc((size_t)rows * 4);
    tt_read_placed(&out, g);
    int64_t zeros = 0;
    for (int64_t i = 0; i < rows; i++) {
        double u = tally_ref_rng_uniform(2024, 0, (uint64_t)i);
        ck_assert_int_eq(g[i], u <= 0.25 ? 0 : 1); /* exact: 1, 3, 4 and u*4 are exact in float */
        zeros += g[i] == 0;
    }
    ck_assert(fabs((double)zeros - 10000.0) < 5 * sqrt(40000 * 0.25 * 0.75));
    free(w);
    free(g);
    tt_placed_release(&pw);
    tt_placed_release(&out);
}
END_TEST


/* ---- The case catalogue --------------------------------------------------------- */

/* The catalogue's rows (harness/cases.h) that crosscheck runs too, here each
 * against the float64 references: every family on the rows of at most
 * CATALOGUE_MAX_ELEMENTS elements at their quick size, the strided rows at
 * an offset with a padded row stride (the specials row has its own tests
 * above). */
#define CATALOGUE_MAX_ELEMENTS 65536

START_TEST(catalogue_rows)
{
    size_t n_rows;
    const harness_shape *rows = harness_shapes(&n_rows);
    int checked = 0;
    for (size_t i = 0; i < n_rows; i++) {
        const harness_shape sh = harness_shape_at(&rows[i], 1);
        const int64_t R = sh.rows, C = sh.cols, N = R * C;
        if (N > CATALOGUE_MAX_ELEMENTS || (sh.families & (HARNESS_FAMILY(SPECIALS) | HARNESS_FAMILY(BENCH)))) continue;
        if (sh.families == HARNESS_FAMILY(KL_LOGITS)) continue; /* tests/check_kl_logits.c runs these */
        const int64_t off = sh.strided ? 13 : 0, stride = sh.strided ? C + 13 : C;
        checked++;
        if (sh.families & HARNESS_FAMILY(GMM)) {
            check_gmm_log_prob(R, sh.components, C, 700 + i, 0);
            continue;
        }
        float *x = tt_alloc((size_t)N * sizeof *x), *y = tt_alloc((size_t)N * sizeof *y);
        if (sh.families & HARNESS_FAMILY(REDUCE)) {
            tt_fill_normal(x, (size_t)N, 600 + i, 0.25, 1.5);
            check_all_ops(x, R, C, off, stride);
        }
        if (sh.families & HARNESS_FAMILY(KL))
            for (int f = 0; f < 4; f++) {
                kl_inputs(x, y, (size_t)N, kl_flag_sets[f], 640 + 4 * i + (size_t)f);
                check_kl(x, y, R, C, kl_flag_sets[f], off, stride, 0);
            }
        if (sh.families & HARNESS_FAMILY(DM)) {
            dm_inputs(x, y, R, C, R, 1, 740 + i);
            for (unsigned flags = 0; flags <= TALLY_DM_WITH_COEFFICIENT; flags++) {
                check_dm(x, y, R, C, 1, flags);
                if (R > 1) check_dm(x, y, R, C, R, flags);
            }
        }
        if (sh.families & HARNESS_FAMILY(CATEGORICAL)) {
            tt_fill_uniform(x, (size_t)N, 780 + i, 0.0, 4.0);
            check_categorical(x, R, C, 0, (tally_rng){.seed = 780 + i, .subsequence = 1, .offset = 3});
        }
        free(x);
        free(y);
    }
    ck_assert_int_ge(checked, 12); /* the catalogue's small rows are there */
}
END_TEST

/* NaN results are stored as the one quiet NaN 0x7fc00000 on every backend
 * (tally_canonical), whatever NaN the hardware's arithmetic produced: a
 * signalling-looking payload and a negative NaN go in, 0x7fc00000 comes out. */
START_TEST(nan_results_are_canonical)
{
    tally_context *ctx = tt_context();
    const float x[6] = {1.0f, tt_float(0xffc00001u), 2.0f, 3.0f, tt_float(0x7fa00000u), 4.0f};
    tally_buffer *bx = tt_upload(ctx, x, 6);
    tally_buffer *out = tt_buffer(ctx, 6);
    const tally_reduce_op ops[] = {TALLY_SUM, TALLY_MEAN, TALLY_MIN, TALLY_MAX, TALLY_LOGSUMEXP, TALLY_SUMSQ};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        tt_poison(out);
        tt_assert_status(tally_reduce(ctx, ops[i], TALLY_AXIS_ALL, tally_view_f32(bx, 0, 2, 3), tally_view_f32(out, 0, 1, 1)),
                         TALLY_OK, ctx);
        ck_assert_uint_eq(tt_bits(tt_read1(out, 0)), 0x7fc00000u);
        tt_poison(out);
        tt_assert_status(tally_reduce(ctx, ops[i], TALLY_AXIS_ROW, tally_view_f32(bx, 0, 2, 3), tally_view_f32(out, 0, 2, 1)),
                         TALLY_OK, ctx);
        ck_assert_uint_eq(tt_bits(tt_read1(out, 0)), 0x7fc00000u);
        ck_assert_uint_eq(tt_bits(tt_read1(out, 1)), 0x7fc00000u);
    }
    /* Elementwise KL: NaN inputs where the target is positive. */
    const float t[6] = {0.5f, 0.5f, 0.25f, 0.25f, 0.5f, 0.5f};
    tally_buffer *bt = tt_upload(ctx, t, 6);
    tt_poison(out);
    tt_assert_status(tally_kl_div(ctx, tally_view_f32(bx, 0, 2, 3), tally_view_f32(bt, 0, 2, 3), TALLY_REDUCTION_NONE, 0,
                                  tally_view_f32(out, 0, 2, 3)),
                     TALLY_OK, ctx);
    ck_assert_uint_eq(tt_bits(tt_read1(out, 1)), 0x7fc00000u);
    ck_assert_uint_eq(tt_bits(tt_read1(out, 4)), 0x7fc00000u);
    tally_buffer_release(bt);
    tally_buffer_release(bx);
    tally_buffer_release(out);
}
END_TEST

TT_SUITE("ops",
         {.name = "reduce", TT_FIXTURE, .timeout = 300,
          .tests = {reduce_small_shapes, reduce_all_contiguous_any_shape, reduce_many_short_rows, reduce_rows_of_1000,
                    reduce_one_tile_rows, reduce_two_tile_rows_strided, reduce_two_levels, reduce_order_sensitive, reduce_nan_propagates,
                    reduce_infinities, reduce_logsumexp_edge_rows, reduce_empty, reduce_exact_values,
                    nan_results_are_canonical}},
         {.name = "kl", TT_FIXTURE, .timeout = 300,
          .tests = {kl_shapes_and_flags, kl_aligned, kl_one_vector_two_levels, kl_special_values, kl_empty}},
         {.name = "dm", TT_FIXTURE, .timeout = 300,
          .tests = {dm_shapes, dm_exact_pmf, dm_negative_count_and_zero_rows}},
         {.name = "gmm", TT_FIXTURE, .timeout = 300,
          .tests = {gmm_log_prob_shapes, gmm_log_prob_k1_closed_form, gmm_sample_shapes, gmm_sample_invalid_logits}},
         {.name = "rng", TT_FIXTURE, .timeout = 300,
          .tests = {rng_fill_raw_exact, rng_fill_uniform_exact, rng_fill_normal, rng_fill_layouts,
                    rng_fill_normal_pairs_absolute, rng_consumed_and_advance}},
         {.name = "categorical", TT_FIXTURE, .timeout = 300,
          .tests = {categorical_weights, categorical_exact_bits, categorical_edge_rows, categorical_invalid_rows,
                    categorical_frequencies}},
         {.name = "catalogue", TT_FIXTURE, .timeout = 300, .tests = {catalogue_rows}})
