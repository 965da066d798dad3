/*
 * tests/check_kl_logits.c - KL divergence straight from logits
 * (TALLY_KL_INPUT_LOGITS, TALLY_KL_TARGET_LOGITS) on the backend named by
 * TALLY_TEST_BACKEND, against the float64 reference of harness/reference.c
 * (torch's kl_div(log_softmax(x, -1), softmax(y, -1)) written in double,
 * never the library's own host backend) and against known answers.
 *
 * Tolerances, from the error analysis of the definition (tally/terms.h):
 * the float evaluation of one element rounds the max shift d = z - m (u|d|),
 * the row's exponentials (<= 1 ulp each, plus u|d| from d's rounding) and
 * their tree sum (depth(cols) u: docs/reduction-tree.md), L = log s and
 * 1/s (1 ulp each), the target's t = exp(d_y) * (1/s), the regrouped
 * (d_y - d_x) + (c_x - L_y) and the final product. The reference adds these
 * up, each times the magnitude it rounds, into its `mag`, the row tree's
 * depth included (harness/reference.c, row_err and kl_logits_term), so
 * every element is expected within (3 + 8) * 2^-24 * mag of float64
 * (tally_ref_tolerance(mag, 1, 8): the first-order budget with a margin of
 * 11 for the neglected second-order terms), and a reduction within
 * (depth(rows*cols) + 10) * 2^-24 * sum(mag) (its tree adds depth(n) u of
 * sum |term| <= sum mag). Beyond tolerances, exact expectations: a reduced
 * value is the documented tree over the op's own elementwise terms (divided
 * by (float)n or (float)rows), identical rows and one-column rows give +0,
 * masked targets give +0, NaN rows are NaN throughout, and a row shifted by
 * 1e4 gives the unshifted row's bits (the max shift is exact there).
 *
 * Inputs sit in strided views with poisoned gaps at an offset, or contiguous
 * at offset 0 (the GPU's fused path for power-of-two rows of 1024 to 16384);
 * outputs are checked for writes outside their view.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases.h"
#include "reference.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define IN_LOGITS TALLY_KL_INPUT_LOGITS
#define TG_LOGITS TALLY_KL_TARGET_LOGITS
#define BOTH (TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS)

/* Every accepted combination with a logits flag. */
static const unsigned flag_sets[] = {
    IN_LOGITS, TG_LOGITS, BOTH, IN_LOGITS | TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB | TG_LOGITS,
};

/* ---- Inputs ------------------------------------------------------------------ */

/* Logits rows: plain N(0, 2^2); with masked (-inf) target elements and the
 * odd -inf input element where the target is masked too; offset by +-1e4
 * (large magnitudes, where only the max shift keeps exp finite); or with a
 * maximum of exactly zero held by both -0 and +0, the -0 first (the GPU's
 * fused path takes maxima with the hardware's instruction and folds such
 * a row again exactly), every other row with the rest of its elements
 * more than 87 below (the general form of the exponential there); a side
 * that is not logits is made as for plain rows. */
typedef enum gen_kind { GEN_PLAIN, GEN_MASKED, GEN_LARGE, GEN_ZERO_MAX } gen_kind;

static void zero_max_row(float *z, int64_t cols, int64_t row)
{
    if (cols < 16) return;
    float m = z[0];
    for (int64_t c = 1; c < cols; c++) m = z[c] > m ? z[c] : m;
    for (int64_t c = 0; c < cols; c++) {
        z[c] = z[c] - m; /* <= 0, and +0 where z[c] is the maximum */
        if (z[c] == 0.0f) z[c] = -1.0f;
        if (row % 2 == 1) z[c] -= 100.0f;
    }
    z[row % 5] = -0.0f;
    z[10 + row % 7] = 0.0f;
    z[cols - 1 - row % 3] = -0.0f;
}

/* A row of logits z turned, in double, into what a side without the logits
 * flag holds: probabilities (softmax) or log-probabilities (log-softmax). */
static void softmax_row_to(float *z, int64_t cols, int as_log)
{
    double m = -INFINITY, s = 0.0;
    for (int64_t c = 0; c < cols; c++) m = z[c] > m ? z[c] : m;
    for (int64_t c = 0; c < cols; c++) s += exp((double)z[c] - m);
    for (int64_t c = 0; c < cols; c++) {
        double lp = ((double)z[c] - m) - log(s);
        z[c] = (float)(as_log ? lp : exp(lp));
    }
}

static void make_inputs(float *x, float *y, int64_t rows, int64_t cols, unsigned flags, gen_kind gen, uint64_t seed)
{
    const size_t n = (size_t)(rows * cols);
    tt_fill_normal(x, n, seed, 0.0, 2.0);
    tt_fill_normal(y, n, seed + 1, 0.5, 2.0);
    tt_rand r = tt_rand_seed(seed + 2);
    if (gen == GEN_MASKED && !(flags & TALLY_KL_LOG_TARGET))
        for (size_t i = 0; i < n; i++) {
            if (tt_rand_below(&r, 10) != 0 || i % (size_t)cols == 0) continue; /* each row keeps some mass */
            y[i] = -INFINITY;
            if (tt_rand_below(&r, 3) == 0) x[i] = -INFINITY;
        }
    if (gen == GEN_LARGE)
        for (size_t i = 0; i < n; i++) {
            x[i] += 1.0e4f;
            y[i] -= 1.0e4f;
        }
    for (int64_t row = 0; gen == GEN_ZERO_MAX && row < rows; row++) {
        if (flags & TALLY_KL_INPUT_LOGITS) zero_max_row(x + row * cols, cols, row);
        if (flags & TALLY_KL_TARGET_LOGITS) zero_max_row(y + row * cols, cols, row + 1);
    }
    for (int64_t row = 0; row < rows; row++) {
        if (!(flags & TALLY_KL_INPUT_LOGITS)) softmax_row_to(x + row * cols, cols, !(flags & TALLY_KL_INPUT_IS_PROB));
        if (!(flags & TALLY_KL_TARGET_LOGITS)) softmax_row_to(y + row * cols, cols, (flags & TALLY_KL_LOG_TARGET) != 0);
    }
}

/* ---- One call against the reference -------------------------------------------- */

/* x and y [rows, cols] contiguous at offset 0 (aligned), or at offsets 3 and
 * 4 with row strides cols + 5 and cols + 2 in poisoned buffers. */
static void check_case(const float *x, const float *y, int64_t rows, int64_t cols, unsigned flags, int aligned,
                       const char *what)
{
    tally_context *ctx = tt_context();
    const uint64_t n = (uint64_t)(rows * cols);
    tt_placed px = aligned ? tt_place(x, TALLY_F32, rows, cols, 0, cols, 0)
                           : tt_place(x, TALLY_F32, rows, cols, 3, cols + 5, 2);
    tt_placed py = aligned ? tt_place(y, TALLY_F32, rows, cols, 0, cols, 0)
                           : tt_place(y, TALLY_F32, rows, cols, 4, cols + 2, 2);
    const tally_ref_mat rx = tally_ref_mat_make(x, rows, cols, cols), ry = tally_ref_mat_make(y, rows, cols, cols);
    float *terms = tt_alloc((n > 0 ? n : 1) * sizeof *terms);
    double *ref = tt_alloc((n > 0 ? n : 1) * sizeof *ref), *mag = tt_alloc((n > 0 ? n : 1) * sizeof *mag);
    ck_assert_int_eq(tally_ref_kl_div(rx, ry, TALLY_REF_REDUCTION_NONE, flags, ref, mag), (int)n);
    if (n > 0) {
        tt_placed out = aligned ? tt_place(NULL, TALLY_F32, rows, cols, 0, cols, 5)
                                : tt_place(NULL, TALLY_F32, rows, cols, 1, cols + 3, 5);
        tt_ok(tally_kl_div(ctx, px.view, py.view, TALLY_REDUCTION_NONE, flags, out.view), ctx);
        tt_read_placed(&out, terms);
        for (uint64_t i = 0; i < n; i++)
            tt_assert_close(terms[i], ref[i], tally_ref_tolerance(mag[i], 1, 8),
                            "%s: flags %u term %llu of %lldx%lld (x %.9g, y %.9g)", what, flags,
                            (unsigned long long)i, (long long)rows, (long long)cols, (double)x[i], (double)y[i]);
        tt_placed_release(&out);
    }
    const float tree = tally_ref_tree_f32(terms, n, 0, 0.0f);
    for (int red = TALLY_REDUCTION_SUM; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
        tt_placed o1 = tt_place(NULL, TALLY_F32, 1, 1, 1, 1, 5);
        double r1, m1;
        const int n_ref = tally_ref_kl_div(rx, ry, red, flags, &r1, &m1);
        const tally_status st = tally_kl_div(ctx, px.view, py.view, (tally_reduction)red, flags, o1.view);
        if (n_ref < 0) { /* an empty mean or batchmean */
            tt_assert_status(st, TALLY_EMPTY_INPUT, ctx);
            tt_placed_release(&o1);
            continue;
        }
        tt_ok(st, ctx);
        float got;
        tt_read_placed(&o1, &got);
        tt_assert_close(got, r1, tally_ref_tolerance(m1, n, 10), "%s: flags %u reduction %d of %lldx%lld", what, flags,
                        red, (long long)rows, (long long)cols);
        const float want = red == TALLY_REDUCTION_SUM ? tree
                           : red == TALLY_REDUCTION_MEAN ? tree / (float)n
                                                          : tree / (float)rows;
        tt_assert_bits(got, want, "%s: flags %u reduction %d of %lldx%lld: the tree over its own terms", what, flags,
                       red, (long long)rows, (long long)cols);
        tt_placed_release(&o1);
    }
    free(terms);
    free(ref);
    free(mag);
    tt_placed_release_all(&px, &py);
}

/* ---- The shape rows ---------------------------------------------------------------- */

typedef struct shape_row {
    int64_t rows, cols;
    gen_kind gen;
    int aligned;
    const char *label;
} shape_row;

static const shape_row shapes[] = {
    /* The GPU's fused path: cols a power of two in [1024, 16384], rows * cols
     * a multiple of 16384, contiguous; and the same shapes strided. */
    {16, 1024, GEN_PLAIN, 1, "fused 16x1024"},
    {32, 2048, GEN_MASKED, 1, "fused 32x2048 masked"},
    {8, 16384, GEN_PLAIN, 1, "fused 8x16384"},
    {4, 4096, GEN_LARGE, 1, "fused 4x4096 +-1e4"},
    {16, 1024, GEN_ZERO_MAX, 1, "fused 16x1024 zero maxima"},
    {2, 16384, GEN_ZERO_MAX, 1, "fused 2x16384 zero maxima"},
    {16, 1024, GEN_ZERO_MAX, 0, "16x1024 strided zero maxima"},
    {16, 1024, GEN_MASKED, 0, "16x1024 strided masked"},
    /* The general path: odd widths, one column, a row wider than a tile
     * (two-level row trees), empty rows and columns. */
    {7, 1000, GEN_PLAIN, 0, "7x1000 strided"},
    {7, 1000, GEN_MASKED, 1, "7x1000 masked"},
    {5, 3, GEN_PLAIN, 0, "5x3 strided"},
    {1, 1, GEN_PLAIN, 0, "1x1"},
    {3, 20000, GEN_MASKED, 0, "3x20000 strided masked"},
    {2, 16387, GEN_LARGE, 1, "2x16387 +-1e4"},
    {33, 517, GEN_LARGE, 0, "33x517 strided +-1e4"},
    {3, 0, GEN_PLAIN, 0, "3x0 empty rows"},
    {0, 5, GEN_PLAIN, 0, "0x5 no rows"},
};

START_TEST(logits_shapes)
{
    const shape_row *s = &shapes[_i];
    const size_t n = (size_t)(s->rows * s->cols);
    float *x = tt_alloc((n > 0 ? n : 1) * sizeof *x), *y = tt_alloc((n > 0 ? n : 1) * sizeof *y);
    for (size_t f = 0; f < COUNT(flag_sets); f++) {
        make_inputs(x, y, s->rows, s->cols, flag_sets[f], s->gen, 1000 + 10 * (uint64_t)_i + f);
        check_case(x, y, s->rows, s->cols, flag_sets[f], s->aligned, s->label);
    }
    free(x);
    free(y);
}
END_TEST

/* The catalogue's KL-from-logits rows (harness/cases.h), which `tally
 * crosscheck` runs too, here against float64: those of at most 65536
 * elements at their quick size, strided ones at an offset with a padded
 * stride, "1e4" ones offset, "odd" and "fused" ones masked. */
START_TEST(logits_catalogue)
{
    harness_shape rows[HARNESS_MAX_FAMILY_ROWS];
    const size_t n_rows = harness_family_rows(HARNESS_FAMILY(KL_LOGITS), 1, rows);
    int checked = 0;
    for (size_t i = 0; i < n_rows; i++) {
        const harness_shape *sh = &rows[i];
        const size_t n = (size_t)(sh->rows * sh->cols);
        if (n > 65536) continue;
        const int masked = strncmp(sh->label, "odd", 3) == 0 || strncmp(sh->label, "fused", 5) == 0;
        const gen_kind gen = strstr(sh->label, "1e4") != NULL ? GEN_LARGE : masked ? GEN_MASKED : GEN_PLAIN;
        float *x = tt_alloc((n > 0 ? n : 1) * sizeof *x), *y = tt_alloc((n > 0 ? n : 1) * sizeof *y);
        for (size_t f = 0; f < COUNT(flag_sets); f++) {
            make_inputs(x, y, sh->rows, sh->cols, flag_sets[f], gen, 2000 + 10 * (uint64_t)i + f);
            check_case(x, y, sh->rows, sh->cols, flag_sets[f], !sh->strided, sh->label);
        }
        free(x);
        free(y);
        checked++;
    }
    ck_assert_int_ge(checked, 10); /* the catalogue's small logits rows are there */
}
END_TEST

/* ---- Known answers --------------------------------------------------------------- */

#define EC 8 /* columns of the edge matrix */

/* Runs kl_div (reduction none) on x, y [rows, EC] contiguous; got gets the
 * terms. */
static void run_none(const float *x, const float *y, int64_t rows, int64_t cols, unsigned flags, float *got)
{
    tally_context *ctx = tt_context();
    tt_placed px = tt_place(x, TALLY_F32, rows, cols, 0, cols, 0), py = tt_place(y, TALLY_F32, rows, cols, 0, cols, 0);
    tt_placed out = tt_place(NULL, TALLY_F32, rows, cols, 0, cols, 3);
    tt_ok(tally_kl_div(ctx, px.view, py.view, TALLY_REDUCTION_NONE, flags, out.view), ctx);
    tt_read_placed(&out, got);
    tt_placed_release_all(&px, &py, &out);
}

static float sum_of(const float *x, const float *y, int64_t rows, int64_t cols, unsigned flags)
{
    tally_context *ctx = tt_context();
    tt_placed px = tt_place(x, TALLY_F32, rows, cols, 0, cols, 0), py = tt_place(y, TALLY_F32, rows, cols, 0, cols, 0);
    tt_placed out = tt_place(NULL, TALLY_F32, 1, 1, 0, 1, 3);
    tt_ok(tally_kl_div(ctx, px.view, py.view, TALLY_REDUCTION_SUM, flags, out.view), ctx);
    float got;
    tt_read_placed(&out, &got);
    tt_placed_release_all(&px, &py, &out);
    return got;
}

/*
 * Rows of both logits, each a rule of the definition:
 * 0: masked target elements (-inf) give exactly +0;
 * 1: -inf in input and target at the same place gives +0 there;
 * 2: a +inf target logit, 3: a NaN input logit, 4: an all -inf target row:
 *    the whole row is the canonical NaN;
 * 5 and 6: a row and the same row shifted by +1e4 (input) and -1e4
 *    (target): the shift is exact, so the bits are the same;
 * 7: identical input and target rows: every term is exactly +0.
 */
START_TEST(logits_edge_rows)
{
    float x[8 * EC], y[8 * EC], got[8 * EC];
    tt_fill_normal(x, 8 * EC, 51, 0.0, 1.5);
    tt_fill_normal(y, 8 * EC, 52, 0.0, 1.5);
    y[0 * EC + 1] = y[0 * EC + 5] = -INFINITY;
    x[1 * EC + 2] = y[1 * EC + 2] = -INFINITY;
    y[2 * EC + 3] = INFINITY;
    x[3 * EC + 0] = NAN;
    for (int c = 0; c < EC; c++) {
        y[4 * EC + c] = -INFINITY;
        /* Quarter steps: exact in float at 1e4 and below. */
        x[5 * EC + c] = 0.25f * (float)((c * 5) % 7) - 1.0f;
        y[5 * EC + c] = 0.25f * (float)((c * 3) % 8) - 0.5f;
        x[6 * EC + c] = x[5 * EC + c] + 1.0e4f;
        y[6 * EC + c] = y[5 * EC + c] - 1.0e4f;
        y[7 * EC + c] = x[7 * EC + c];
    }
    run_none(x, y, 8, EC, BOTH, got);
    double ref[8 * EC], mag[8 * EC];
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(x, 8, EC, EC), tally_ref_mat_make(y, 8, EC, EC),
                                      TALLY_REF_REDUCTION_NONE, BOTH, ref, mag),
                     8 * EC);
    for (int i = 0; i < 8 * EC; i++)
        tt_assert_close(got[i], ref[i], tally_ref_tolerance(mag[i], 1, 8), "edge row %d, column %d", i / EC, i % EC);
    tt_assert_bits(got[0 * EC + 1], 0.0f, "masked target");
    tt_assert_bits(got[0 * EC + 5], 0.0f, "masked target");
    tt_assert_bits(got[1 * EC + 2], 0.0f, "-inf in input and target at the same place");
    ck_assert_msg(isfinite(got[1 * EC + 3]), "the rest of row 1 is finite");
    for (int row = 2; row <= 4; row++)
        for (int c = 0; c < EC; c++)
            ck_assert_msg(tt_bits(got[row * EC + c]) == 0x7fc00000u, "row %d column %d: 0x%08x, not the canonical NaN",
                          row, c, tt_bits(got[row * EC + c]));
    for (int c = 0; c < EC; c++) {
        tt_assert_bits(got[6 * EC + c], got[5 * EC + c], "column %d shifted by 1e4", c);
        tt_assert_bits(got[7 * EC + c], 0.0f, "identical rows, column %d", c);
    }
    /* The sum over the matrix is NaN (rows 2 to 4); over rows 5 to 7 it is
     * the reference's. */
    ck_assert(isnan(sum_of(x, y, 8, EC, BOTH)));
    double r3, m3;
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(x + 5 * EC, 3, EC, EC), tally_ref_mat_make(y + 5 * EC, 3, EC, EC),
                                      TALLY_REF_REDUCTION_SUM, BOTH, &r3, &m3),
                     1);
    tt_assert_close(sum_of(x + 5 * EC, y + 5 * EC, 3, EC, BOTH), r3, tally_ref_tolerance(m3, 3 * EC, 10),
                    "sum of rows 5 to 7");
    /* An input row with +inf, or all -inf, is NaN throughout too (the
     * target's only -inf is masked, which does not rescue it). */
    float xi[2 * EC], yi[2 * EC];
    for (int c = 0; c < EC; c++) {
        xi[c] = c == 4 ? INFINITY : 0.5f * (float)c;
        xi[EC + c] = -INFINITY;
        yi[c] = yi[EC + c] = c == 0 ? -INFINITY : (float)c;
    }
    run_none(xi, yi, 2, EC, BOTH, got);
    for (int i = 0; i < 2 * EC; i++) ck_assert_msg(tt_bits(got[i]) == 0x7fc00000u, "NaN input row element %d", i);
    run_none(xi, yi, 2, EC, IN_LOGITS | TALLY_KL_LOG_TARGET, got);
    for (int i = 0; i < 2 * EC; i++) ck_assert_msg(isnan(got[i]), "NaN input row against log targets, element %d", i);
}
END_TEST

/* One column: the softmax is 1 and the log-softmax 0 whatever the logit,
 * so KL with both logits is exactly +0, with target logits alone exactly
 * -x, and with input logits alone t * log t against probabilities. */
START_TEST(logits_one_column)
{
    const float x[6] = {0.0f, -3.0f, 1.0e4f, -1.0e4f, 2.5f, 0x1p-140f};
    const float y[6] = {1.0f, 7.0f, -1.0e4f, 3.0f, 2.5f, -0.0f};
    const float t[6] = {1.0f, 0.5f, 0.25f, 0.0f, 0x1p-100f, 0.75f};
    float got[6];
    run_none(x, y, 6, 1, BOTH, got);
    for (int i = 0; i < 6; i++) tt_assert_bits(got[i], 0.0f, "one column, both logits, row %d", i);
    tt_assert_bits(sum_of(x, y, 6, 1, BOTH), 0.0f, "one column, both logits, sum");
    run_none(x, y, 6, 1, TG_LOGITS, got);
    /* (0 - x) + (0 - 0): +0 where x = 0. */
    for (int i = 0; i < 6; i++) tt_assert_bits(got[i], 0.0f - x[i], "one column, target logits, row %d", i);
    run_none(x, t, 6, 1, IN_LOGITS, got);
    for (int i = 0; i < 6; i++) {
        double want = t[i] == 0.0f ? 0.0 : (double)t[i] * log((double)t[i]);
        tt_assert_close(got[i], want, 8 * TALLY_REF_F32_U * fabs(want), "one column, input logits, row %d", i);
    }
}
END_TEST

TT_SUITE("kl_logits",
         {.name = "shapes", TT_FIXTURE, .tests = {logits_shapes}, .loops = (int)COUNT(shapes), .timeout = 600},
         {.name = "catalogue", TT_FIXTURE, .tests = {logits_catalogue}, .timeout = 600},
         {.name = "known", TT_FIXTURE, .tests = {logits_edge_rows, logits_one_column}})
