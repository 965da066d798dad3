/*
 * tests/check_half.c - every op on BF16 and F16 inputs, on the backend named
 * by TALLY_TEST_BACKEND: the result must equal, bit for bit, the same op on
 * fp32 inputs holding the widened values. The fp32 inputs are widened here
 * by an independent decoder (ldexp from the format's definition), not by
 * tally/half.h, so a wrong device conversion fails too.
 *
 * Half inputs sit at odd element offsets and in strided views whose gaps
 * hold a NaN (reading one would show), in buffers whose size is not a
 * multiple of 4 bytes; outputs are poisoned before each op. Also here: all
 * 65536 encodings of each type widened by the device (a per-row sum of
 * one-element rows), and the front end's dtype rules.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/half.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

#define HALF_GAP 0x7e5au /* a NaN in both formats */

/* The value of encoding h from the format's definition. */
static float ref_widen(tally_dtype dt, unsigned h)
{
    const int mant_bits = dt == TALLY_BF16 ? 7 : 10, exp_bits = dt == TALLY_BF16 ? 8 : 5;
    const int bias = dt == TALLY_BF16 ? 127 : 15;
    const unsigned m = h & ((1u << mant_bits) - 1u);
    const unsigned e = (h >> mant_bits) & ((1u << exp_bits) - 1u);
    const double sign = (h >> 15) ? -1.0 : 1.0;
    if (e == (1u << exp_bits) - 1u) return m != 0 ? NAN : (float)(sign * INFINITY);
    if (e == 0) return (float)(sign * ldexp((double)m, 1 - bias - mant_bits));
    return (float)(sign * ldexp((double)((1u << mant_bits) | m), (int)e - bias - mant_bits));
}

static unsigned narrow(tally_dtype dt, float x)
{
    return dt == TALLY_BF16 ? tally_f32_to_bf16(x) : tally_f32_to_f16(x);
}

static const char *dt_name(tally_dtype dt)
{
    return dt == TALLY_BF16 ? "bf16" : dt == TALLY_F16 ? "f16" : "f32";
}

/* One input in two forms: `view` of dtype dt (half, or f32) and `f32`, the
 * same values widened, as a contiguous fp32 view. */
typedef struct input {
    tally_buffer *hbuf, *fbuf;
    tally_view view, f32;
} input;

/* vals: rows*cols floats, rounded to dt first (for dt f32 the values are
 * used as they are). */
static input make_input(tally_dtype dt, const float *vals, int64_t rows, int64_t cols, int64_t offset, int64_t stride)
{
    tally_context *ctx = tt_context();
    input in;
    const size_t n = (size_t)(rows * cols);
    float *wide = tt_alloc((n > 0 ? n : 1) * 4);
    const int64_t used = rows > 0 && cols > 0 ? offset + (rows - 1) * stride + cols : offset;
    const size_t total = (size_t)used + 1; /* one spare element */
    if (dt == TALLY_F32) {
        uint32_t *h = tt_alloc(total * 4);
        for (size_t i = 0; i < total; i++) h[i] = TT_POISON;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) memcpy(&h[offset + r * stride + c], &vals[r * cols + c], 4);
        tt_ok(tally_buffer_create(ctx, total * 4, &in.hbuf), ctx);
        tt_ok(tally_buffer_upload(in.hbuf, 0, h, total * 4), ctx);
        free(h);
        memcpy(wide, vals, n * 4);
    } else {
        uint16_t *h = tt_alloc(total * 2);
        for (size_t i = 0; i < total; i++) h[i] = HALF_GAP;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                const unsigned bits = narrow(dt, vals[r * cols + c]);
                h[offset + r * stride + c] = (uint16_t)bits;
                wide[r * cols + c] = ref_widen(dt, bits);
            }
        /* An odd byte count: the view's last element ends 2 bytes before
         * the end, which a 4-byte element size would reject. */
        tt_ok(tally_buffer_create(ctx, total * 2, &in.hbuf), ctx);
        tt_ok(tally_buffer_upload(in.hbuf, 0, h, total * 2), ctx);
        free(h);
    }
    in.view = (tally_view){.buffer = in.hbuf, .offset = offset, .rows = rows, .cols = cols, .stride = stride,
                           .dtype = dt};
    in.fbuf = tt_upload(ctx, wide, n > 0 ? n : 1);
    in.f32 = tally_view_f32(in.fbuf, 0, rows, cols);
    free(wide);
    return in;
}

static void free_input(input *in)
{
    tally_buffer_release(in->hbuf);
    tally_buffer_release(in->fbuf);
}

/* Output buffer of n 4-byte elements, poisoned. */
static tally_buffer *out_buf(size_t n)
{
    return tt_buffer(tt_context(), n > 0 ? n : 1);
}

static void assert_same_bits(tally_buffer *a, tally_buffer *b, size_t n, const char *what)
{
    uint32_t *x = tt_alloc((n > 0 ? n : 1) * 4), *y = tt_alloc((n > 0 ? n : 1) * 4);
    tt_read(a, 0, x, n);
    tt_read(b, 0, y, n);
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i])
            ck_abort_msg("%s: element %zu is 0x%08x on half inputs but 0x%08x on their fp32 values", what, i, x[i],
                         y[i]);
    free(x);
    free(y);
}

/* Random values in [lo, hi), a few replaced by specials when asked. */
static float *values(size_t n, uint64_t seed, double lo, double hi, int specials)
{
    float *v = tt_alloc((n > 0 ? n : 1) * 4);
    tt_fill_uniform(v, n, seed, lo, hi);
    if (specials && n > 8) {
        v[1] = 0.0f;
        v[n / 2] = -0.0f;
        v[n - 2] = 1e-6f; /* subnormal in f16 */
        v[n / 3] = 70000.0f; /* infinite in f16 */
    }
    return v;
}

/* A view layout for the inputs of a case. */
typedef struct layout {
    int64_t rows, cols, offset, pad; /* stride = cols + pad */
} layout;

static const layout layouts[] = {
    {1, 1, 0, 0},      {3, 37, 1, 4},   {64, 256, 0, 0},   {16, 1000, 3, 0},
    {2, 20000, 5, 3},  {300, 5, 1, 1},  {1, 40000, 8, 0},
};

static const tally_dtype halves[] = {TALLY_BF16, TALLY_F16};

/* ---- Widening on the device ---- */

START_TEST(device_widens_every_encoding)
{
    tally_context *ctx = tt_context();
    for (size_t d = 0; d < 2; d++) {
        const tally_dtype dt = halves[d];
        uint16_t *h = tt_alloc(65536 * 2 + 2);
        h[0] = HALF_GAP;
        for (unsigned i = 0; i < 65536u; i++) h[i + 1] = (uint16_t)i;
        tally_buffer *hb = NULL;
        tt_ok(tally_buffer_create(ctx, 65537 * 2, &hb), ctx);
        tt_ok(tally_buffer_upload(hb, 0, h, 65537 * 2), ctx);
        tally_buffer *ob = out_buf(65536);
        /* 65536 rows of one element (offset 1: odd), each row's sum = its value. */
        tally_view x = {.buffer = hb, .offset = 1, .rows = 65536, .cols = 1, .stride = 1, .dtype = dt};
        tt_ok(tally_reduce(ctx, TALLY_MAX, TALLY_AXIS_ROW, x, tally_view_f32(ob, 0, 65536, 1)), ctx);
        float *got = tt_alloc(65536 * 4);
        tt_read(ob, 0, got, 65536);
        for (unsigned i = 0; i < 65536u; i++) {
            const float want = ref_widen(dt, i);
            const uint32_t gb = tt_bits(got[i]);
            if (want != want) {
                if (gb != 0x7fc00000u) ck_abort_msg("%s 0x%04x: NaN stored as 0x%08x, not canonical", dt_name(dt), i, gb);
            } else if (gb != tt_bits(want)) {
                ck_abort_msg("%s 0x%04x: device widened to 0x%08x, want 0x%08x", dt_name(dt), i, gb, tt_bits(want));
            }
        }
        free(got);
        free(h);
        tally_buffer_release(hb);
        tally_buffer_release(ob);
    }
}
END_TEST

/* ---- Reductions ---- */

START_TEST(reduce_half_equals_fp32)
{
    tally_context *ctx = tt_context();
    for (size_t d = 0; d < 2; d++)
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            const layout *L = &layouts[l];
            const size_t n = (size_t)(L->rows * L->cols);
            float *v = values(n, 100 + l, -3.0, 3.0, 1);
            /* Magnitudes from 2^-12 to 2^12, so that sums round and a wrong
             * order of additions shows. */
            for (size_t i = 0; i < n; i++) v[i] = ldexpf(v[i], (int)((i * 7u) % 25u) - 12);
            input in = make_input(halves[d], v, L->rows, L->cols, L->offset, L->cols + L->pad);
            for (int axis = TALLY_AXIS_ALL; axis <= TALLY_AXIS_ROW; axis++)
                for (int op = TALLY_SUM; op <= TALLY_SUMSQ; op++) {
                    const size_t outs = axis == TALLY_AXIS_ALL ? 1 : (size_t)L->rows;
                    tally_buffer *a = out_buf(outs), *b = out_buf(outs);
                    tt_ok(tally_reduce(ctx, op, axis, in.view, tally_view_f32(a, 0, (int64_t)outs, 1)), ctx);
                    tt_ok(tally_reduce(ctx, op, axis, in.f32, tally_view_f32(b, 0, (int64_t)outs, 1)), ctx);
                    char what[128];
                    snprintf(what, sizeof what, "reduce %s op %d axis %d [%lld x %lld]", dt_name(halves[d]), op, axis,
                             (long long)L->rows, (long long)L->cols);
                    assert_same_bits(a, b, outs, what);
                    tally_buffer_release(a);
                    tally_buffer_release(b);
                }
            free_input(&in);
            free(v);
        }
}
END_TEST

/* ---- KL divergence: every mix of dtypes for input and target ---- */

START_TEST(kl_half_equals_fp32)
{
    tally_context *ctx = tt_context();
    const tally_dtype mixes[][2] = {{TALLY_BF16, TALLY_BF16}, {TALLY_F16, TALLY_F16}, {TALLY_BF16, TALLY_F32},
                                    {TALLY_F32, TALLY_F16},   {TALLY_F16, TALLY_BF16}};
    const unsigned flag_sets[] = {0u, TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB,
                                  TALLY_KL_INPUT_IS_PROB | TALLY_KL_LOG_TARGET};
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++)
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            const layout *L = &layouts[l];
            if (L->rows * L->cols > 20000 && m > 1) continue; /* keep the slow devices quick */
            const size_t n = (size_t)(L->rows * L->cols);
            for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
                const unsigned flags = flag_sets[f];
                float *xv = flags & TALLY_KL_INPUT_IS_PROB ? values(n, 7 + l, 1e-4, 1.0, 0) : values(n, 7 + l, -5.0, 0.0, 0);
                float *tv = flags & TALLY_KL_LOG_TARGET ? values(n, 9 + l, -6.0, 0.5, 0) : values(n, 9 + l, 0.0, 1.0, 1);
                /* The reduced forms get targets whose terms are all finite
                 * (zero targets included, which take the batches' long
                 * path), since one NaN or infinite term would make both sums
                 * equal whatever the other terms are. The pointwise form
                 * also gets one target whose term is NaN (a negative one) or
                 * 0 times infinity (log target -inf), and f16's infinity. */
                float *tv_finite = tt_alloc((n > 0 ? n : 1) * 4);
                memcpy(tv_finite, tv, n * 4);
                if (n > 8 && !(flags & TALLY_KL_LOG_TARGET)) tv_finite[n / 3] = 0.5f;
                if (n > 4) tv[3] = flags & TALLY_KL_LOG_TARGET ? -INFINITY : -0.25f;
                input x = make_input(mixes[m][0], xv, L->rows, L->cols, L->offset, L->cols + L->pad);
                /* Odd offsets stay odd (unaligned), even ones the same as
                 * the input's, so aligned views take the wide loads. */
                input t_special = make_input(mixes[m][1], tv, L->rows, L->cols, L->offset + (L->offset & 1),
                                             L->cols + 2 * L->pad);
                input t_finite = make_input(mixes[m][1], tv_finite, L->rows, L->cols, L->offset + (L->offset & 1),
                                            L->cols + 2 * L->pad);
                for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
                    const size_t outs = red == TALLY_REDUCTION_NONE ? n : 1;
                    const input *t = red == TALLY_REDUCTION_NONE ? &t_special : &t_finite;
                    tally_buffer *a = out_buf(outs), *b = out_buf(outs);
                    const int64_t orows = red == TALLY_REDUCTION_NONE ? L->rows : 1;
                    const int64_t ocols = red == TALLY_REDUCTION_NONE ? L->cols : 1;
                    tt_ok(tally_kl_div(ctx, x.view, t->view, red, flags, tally_view_f32(a, 0, orows, ocols)), ctx);
                    tt_ok(tally_kl_div(ctx, x.f32, t->f32, red, flags, tally_view_f32(b, 0, orows, ocols)), ctx);
                    if (red != TALLY_REDUCTION_NONE && n > 0) {
                        float sum;
                        tt_read(a, 0, &sum, 1);
                        ck_assert_msg(isfinite(sum), "kl flags %u reduction %d: the sum of finite terms is %g",
                                      flags, red, (double)sum);
                    }
                    char what[160];
                    snprintf(what, sizeof what, "kl %s/%s flags %u reduction %d [%lld x %lld]", dt_name(mixes[m][0]),
                             dt_name(mixes[m][1]), flags, red, (long long)L->rows, (long long)L->cols);
                    assert_same_bits(a, b, outs, what);
                    tally_buffer_release(a);
                    tally_buffer_release(b);
                }
                free_input(&x);
                free_input(&t_special);
                free_input(&t_finite);
                free(xv);
                free(tv);
                free(tv_finite);
            }
        }
}
END_TEST

/* The bf16 kernels take their logarithms from a table of the 128
 * mantissas (kernels/kl.h). A sum of many terms would hide a logarithm one
 * ulp off, so each call here has one term that matters: every other target
 * is 2^-126, whose terms (about 1e-36) leave the sum's rounding alone. The
 * term's pair goes at place `at` (in one of the two full tiles of 40000
 * elements), so the sum's bits are that term's bits on the table's path;
 * they must equal the fp32 op's on the widened inputs, and float64's value. */
static void kl_bf16_one_term(tally_context *ctx, float *xv, float *tv, int64_t n, unsigned flags, int64_t at, float x,
                             float t, const char *what)
{
    for (int64_t i = 0; i < n; i++) {
        xv[i] = flags ? 0.5f : -1.0f;
        tv[i] = 0x1p-126f;
    }
    xv[at] = x;
    tv[at] = t;
    input xi = make_input(TALLY_BF16, xv, 1, n, 8, n);
    input ti = make_input(TALLY_BF16, tv, 1, n, 8, n);
    tally_buffer *a = out_buf(1), *b = out_buf(1);
    tt_ok(tally_kl_div(ctx, xi.view, ti.view, TALLY_REDUCTION_SUM, flags, tally_view_f32(a, 0, 1, 1)), ctx);
    tt_ok(tally_kl_div(ctx, xi.f32, ti.f32, TALLY_REDUCTION_SUM, flags, tally_view_f32(b, 0, 1, 1)), ctx);
    assert_same_bits(a, b, 1, what);
    const double lx = flags ? log((double)x) : (double)x;
    const double want = (double)t * (log((double)t) - lx);
    const double got = (double)tt_read1(a, 0);
    ck_assert_msg(fabs(got - want) <= 1e-6 * fabs(want) + 1e-7, "%s: %.9g, float64 %.9g", what, got, want);
    tally_buffer_release(a);
    tally_buffer_release(b);
    free_input(&xi);
    free_input(&ti);
}

/* Call m puts mantissa m in the input (input_is_prob) and 127 - m in the
 * target of the one term. */
START_TEST(kl_bf16_every_mantissa)
{
    tally_context *ctx = tt_context();
    const int64_t n = 40000;
    float *xv = tt_alloc((size_t)n * 4), *tv = tt_alloc((size_t)n * 4);
    const unsigned flag_sets[] = {TALLY_KL_INPUT_IS_PROB, 0u};
    for (size_t f = 0; f < 2; f++)
        for (unsigned m = 0; m < 128u; m++) {
            const unsigned flags = flag_sets[f];
            const int64_t at = (int64_t)((m * 331u + 17u) % 32768u);
            /* Mantissas m and 127 - m (bf16 keeps 7 bits), exponents on
             * both sides of e = 0. */
            const float x = flags ? ldexpf(1.0f + (float)m / 128.0f, -3) : -1.5f;
            const float t = ldexpf(1.0f + (float)(127u - m) / 128.0f, (int)(m % 3u) - 1);
            char what[96];
            snprintf(what, sizeof what, "kl bf16 flags %u mantissa %u at %lld", flags, m, (long long)at);
            kl_bf16_one_term(ctx, xv, tv, n, flags, at, x, t, what);
        }
    free(xv);
    free(tv);
}
END_TEST

/* The kernels read a word of two bf16 values and find each one's exponent
 * in its own way (the low and the high half, kernels/kl.h
 * tally_k_kl_word_terms). Every exponent of the input's logarithm (1 ..
 * 254, input_is_prob), in both halves of a word, with the target's
 * exponent swept over -40 .. 40 (a larger target overflows the term; a
 * smaller one vanishes beside the others), and mantissas on both sides of
 * the split's threshold that vary with the exponent. */
START_TEST(kl_bf16_every_exponent)
{
    tally_context *ctx = tt_context();
    const int64_t n = 40000;
    float *xv = tt_alloc((size_t)n * 4), *tv = tt_alloc((size_t)n * 4);
    const unsigned flag_sets[] = {TALLY_KL_INPUT_IS_PROB, 0u};
    for (size_t f = 0; f < 2; f++)
        for (int half = 0; half < 2; half++)
            for (int e = 1; e <= 254; e++)
                for (int high = 0; high < 2; high++) {
                    /* Mantissas below 43 keep the exponent the bits give,
                     * 43 and above take the next one (tally_pm_log_split):
                     * one of each, for each exponent and half. */
                    const unsigned flags = flag_sets[f];
                    const int64_t at = 2 * (int64_t)((e * 97 + high * 5003) % 16000) + half;
                    const int kx = (e * 53 + half * 29) % (high ? 85 : 43), kt = (e * 37 + half * 11) % (high ? 85 : 43);
                    const float mx = (float)(high ? 43 + kx : kx), mt = (float)(high ? 43 + kt : kt);
                    const float x = flags ? ldexpf(1.0f + mx / 128.0f, e - 127) : -1.5f;
                    const float t = ldexpf(1.0f + mt / 128.0f, e % 81 - 40);
                    char what[128];
                    snprintf(what, sizeof what, "kl bf16 flags %u exponent %d mantissa %g half %d at %lld", flags, e,
                             (double)mx, half, (long long)at);
                    kl_bf16_one_term(ctx, xv, tv, n, flags, at, x, t, what);
                }
    free(xv);
    free(tv);
}
END_TEST

/* The bf16 kernels test a batch's sixteen pairs for the short path on the
 * packed words, two values a test (kernels/kl.h,
 * tally_k_kl_batch_bf16_words). Each call here puts one special value at
 * one of the sixteen places of one lane's batch in a full tile, every
 * other pair giving a term of exactly 0 (t = 1 and log x = 0), so the sum
 * is the special pair's term: the short path's logarithm of a special
 * value would show in it. The special's partner makes the term large
 * enough to see. */
typedef struct {
    unsigned flags;
    int special_in_target; /* 0: the input holds the special value */
    float special, partner;
} kl_special_case;

static const kl_special_case kl_special_cases[] = {
    {TALLY_KL_INPUT_IS_PROB, 0, 0.0f, 0.75f},
    {TALLY_KL_INPUT_IS_PROB, 0, 0x1p-133f, 0.75f},         /* bf16 0x0001 */
    {TALLY_KL_INPUT_IS_PROB, 0, 127.0f * 0x1p-133f, 0.75f}, /* 0x007f, the largest subnormal */
    {TALLY_KL_INPUT_IS_PROB, 0, -1.0f, 0.75f},
    {TALLY_KL_INPUT_IS_PROB, 0, INFINITY, 0.75f},
    {TALLY_KL_INPUT_IS_PROB, 0, NAN, 0.75f},
    {TALLY_KL_INPUT_IS_PROB, 1, 0x1p-133f, 0.5f},
    {TALLY_KL_INPUT_IS_PROB, 1, 127.0f * 0x1p-133f, 0.5f},
    {TALLY_KL_INPUT_IS_PROB, 1, -0.5f, 0.5f},
    {TALLY_KL_INPUT_IS_PROB, 1, INFINITY, 0.5f},
    {0u, 1, 0x1p-133f, -0.75f},
    {0u, 1, 127.0f * 0x1p-133f, -0.75f},
    {0u, 1, -0.5f, -0.75f},
    {0u, 1, INFINITY, -0.75f},
};

START_TEST(kl_bf16_one_special)
{
    tally_context *ctx = tt_context();
    const int64_t n = 16384; /* one full tile: 256 lanes of 16 quads */
    float *xv = tt_alloc((size_t)n * 4), *tv = tt_alloc((size_t)n * 4);
    for (size_t c = 0; c < sizeof kl_special_cases / sizeof kl_special_cases[0]; c++)
        for (int place = 0; place < 16; place++) {
            const kl_special_case *K = &kl_special_cases[c];
            /* Lane 37's second batch: quads 37 + 256 q for q = 4 .. 7. */
            const int64_t at = 4 * (37 + 256 * (4 + place / 4)) + place % 4;
            for (int64_t i = 0; i < n; i++) {
                xv[i] = K->flags ? 1.0f : 0.0f;
                tv[i] = 1.0f;
            }
            xv[at] = K->special_in_target ? K->partner : K->special;
            tv[at] = K->special_in_target ? K->special : K->partner;
            input x = make_input(TALLY_BF16, xv, 1, n, 0, n);
            input t = make_input(TALLY_BF16, tv, 1, n, 0, n);
            tally_buffer *a = out_buf(1), *b = out_buf(1);
            tt_ok(tally_kl_div(ctx, x.view, t.view, TALLY_REDUCTION_SUM, K->flags, tally_view_f32(a, 0, 1, 1)), ctx);
            tt_ok(tally_kl_div(ctx, x.f32, t.f32, TALLY_REDUCTION_SUM, K->flags, tally_view_f32(b, 0, 1, 1)), ctx);
            char what[112];
            snprintf(what, sizeof what, "kl bf16 flags %u %s %g at place %d", K->flags,
                     K->special_in_target ? "target" : "input", (double)K->special, place);
            assert_same_bits(a, b, 1, what);
            /* The float64 term of the pair (every value here is a bf16
             * value; tally_kl_term's rules: a negative target or a NaN
             * gives NaN). */
            const double xd = (double)xv[at], td = (double)tv[at];
            const double lx = K->flags ? log(xd) : xd;
            const double want = td < 0.0 || isnan(td) || isnan(xd) ? NAN : td * (log(td) - lx);
            const double got = (double)tt_read1(a, 0);
            if (isnan(want))
                ck_assert_msg(isnan(got), "%s: %g, float64 NaN", what, got);
            else
                ck_assert_msg(got == want || fabs(got - want) <= 1e-6 * fabs(want) + 0x1p-140,
                              "%s: %.9g, float64 %.9g", what, got, want);
            tally_buffer_release(a);
            tally_buffer_release(b);
            free_input(&x);
            free_input(&t);
        }
    free(xv);
    free(tv);
}
END_TEST

/* ---- Dirichlet-multinomial: half counts and log_alpha, shared and per row ---- */

START_TEST(dm_half_equals_fp32)
{
    tally_context *ctx = tt_context();
    const tally_dtype mixes[][2] = {{TALLY_BF16, TALLY_BF16}, {TALLY_F16, TALLY_F16}, {TALLY_F16, TALLY_F32},
                                    {TALLY_F32, TALLY_BF16}};
    /* The last two are large enough for the GPUs' lgamma-table kernel, with
     * rows 16-byte aligned (whole quads of halves in one load); rows of 1024
     * are a full tile, which CUDA gives a warp each, and 3500 of them are
     * more than an H200's warps take in one round (2112), so that warps load
     * a next row ahead. */
    const layout dm_layouts[] = {{4, 9, 1, 2},     {32, 300, 0, 0},   {7, 2100, 3, 1},
                                 {200, 64, 0, 0},  {512, 520, 8, 0},  {3500, 1024, 8, 0}};
    for (size_t m = 0; m < sizeof mixes / sizeof mixes[0]; m++)
        for (size_t l = 0; l < sizeof dm_layouts / sizeof dm_layouts[0]; l++)
            for (int per_row = 0; per_row <= 1; per_row++) {
                const layout *L = &dm_layouts[l];
                /* The large case is for the table kernel (shared alpha); once
                 * per dtype mix keeps the host's lgamma calls few. */
                const int large = L->rows * L->cols > 100000;
                if (large && per_row) continue;
                const size_t n = (size_t)(L->rows * L->cols);
                float *cv = values(n, 31 + l, 0.0, 40.0, 0);
                for (size_t i = 0; i < n; i++) cv[i] = floorf(cv[i]);
                if (n > 20) cv[17] = 2.5f; /* a non-integer count */
                const int64_t arows = per_row ? L->rows : 1;
                float *av = values((size_t)(arows * L->cols), 37 + l, -3.0, 3.0, 0);
                input c = make_input(mixes[m][0], cv, L->rows, L->cols, L->offset, L->cols + L->pad);
                input a = make_input(mixes[m][1], av, arows, L->cols, 1, L->cols + 1);
                for (int red = TALLY_REDUCTION_NONE; red <= (large ? TALLY_REDUCTION_NONE : TALLY_REDUCTION_MEAN); red++)
                    for (unsigned flags = 0; flags <= TALLY_DM_WITH_COEFFICIENT; flags++) {
                        const size_t outs = red == TALLY_REDUCTION_NONE ? (size_t)L->rows : 1;
                        tally_buffer *p = out_buf(outs), *q = out_buf(outs);
                        tt_ok(tally_dirichlet_multinomial(ctx, c.view, a.view, red, flags,
                                                          tally_view_f32(p, 0, (int64_t)outs, 1)),
                              ctx);
                        tt_ok(tally_dirichlet_multinomial(ctx, c.f32, a.f32, red, flags,
                                                          tally_view_f32(q, 0, (int64_t)outs, 1)),
                              ctx);
                        char what[160];
                        snprintf(what, sizeof what, "dm %s/%s per_row %d reduction %d flags %u [%lld x %lld]",
                                 dt_name(mixes[m][0]), dt_name(mixes[m][1]), per_row, red, flags,
                                 (long long)L->rows, (long long)L->cols);
                        assert_same_bits(p, q, outs, what);
                        tally_buffer_release(p);
                        tally_buffer_release(q);
                    }
                free_input(&c);
                free_input(&a);
                free(cv);
                free(av);
            }
}
END_TEST

/* ---- Mixture log density and sample ---- */

/* An input of a mixture case: its dtype (the pass's half type H, the other
 * half type O, or F32) and its view's offset and row padding in elements. A
 * view whose offset and stride are multiples of 4 elements starts every row
 * on a quad (16 bytes of fp32, 8 of halves), so with D % 4 == 0 and all three
 * of z, mu and log_var so placed the GPUs take their one-load-a-quad path;
 * any other view the element path. */
enum { AS_H, AS_O, AS_F32 };

typedef struct gmm_input {
    int as;
    int64_t offset, pad;
} gmm_input;

typedef struct gmm_case {
    int64_t B, K, D;
    gmm_input z, mu, lv, logits; /* logits: pad unused */
} gmm_case;

static const gmm_case gmm_cases[] = {
    /* Element path: unaligned offsets, odd D. */
    {5, 3, 7, {AS_H, 1, 1}, {AS_H, 3, 2}, {AS_O, 0, 0}, {AS_H, 1, 0}},
    {64, 1, 16, {AS_H, 1, 1}, {AS_H, 3, 2}, {AS_O, 0, 0}, {AS_H, 1, 0}},
    {33, 8, 4, {AS_H, 1, 1}, {AS_H, 3, 2}, {AS_O, 0, 0}, {AS_H, 1, 0}},
    /* K > 32: the logits' logsumexp by its own launch. */
    {4, 40, 130, {AS_H, 1, 1}, {AS_H, 3, 2}, {AS_O, 0, 0}, {AS_H, 1, 0}},
    /* Quads: halves at 8-byte (not 16-byte) offsets, strided rows. */
    {64, 1, 16, {AS_H, 4, 4}, {AS_H, 0, 0}, {AS_O, 8, 4}, {AS_H, 0, 0}},
    /* Mixed dtypes, quads: fp32 z and logits beside half mu and log_var. */
    {33, 8, 4, {AS_F32, 4, 0}, {AS_H, 4, 4}, {AS_O, 0, 0}, {AS_F32, 0, 0}},
    /* Mixed dtypes, elements: log_var 4 bytes off a quad. */
    {16, 3, 12, {AS_H, 0, 0}, {AS_F32, 0, 0}, {AS_H, 2, 2}, {AS_O, 1, 0}},
    /* K > 1024: the unfused launches (pick, noise, tiles, finish), quads. */
    {3, 1100, 4, {AS_H, 0, 0}, {AS_H, 4, 0}, {AS_O, 0, 4}, {AS_H, 3, 0}},
    /* D > 16384: a D-tree of two levels, elements. */
    {2, 2, 20000, {AS_H, 2, 2}, {AS_F32, 1, 0}, {AS_H, 0, 0}, {AS_O, 1, 0}},
    /* D = 0: empty half views. */
    {3, 2, 0, {AS_H, 1, 0}, {AS_H, 0, 0}, {AS_O, 1, 0}, {AS_H, 0, 0}},
};

static tally_dtype gmm_dtype(const gmm_input *in, size_t d)
{
    return in->as == AS_F32 ? TALLY_F32 : halves[in->as == AS_H ? d : 1 - d];
}

static input gmm_make(const gmm_input *in, size_t d, const float *vals, int64_t rows, int64_t cols)
{
    return make_input(gmm_dtype(in, d), vals, rows, cols, in->offset, cols + in->pad);
}

START_TEST(gmm_half_equals_fp32)
{
    tally_context *ctx = tt_context();
    for (size_t d = 0; d < 2; d++)
        for (size_t g = 0; g < sizeof gmm_cases / sizeof gmm_cases[0]; g++) {
            const gmm_case *G = &gmm_cases[g];
            const size_t zn = (size_t)(G->B * G->D), pn = (size_t)(G->B * G->K * G->D);
            float *zv = values(zn, 51 + g, -3.0, 3.0, 0), *mv = values(pn, 53 + g, -2.0, 2.0, 0);
            float *lv = values(pn, 57 + g, -2.0, 1.0, 0), *gv = values((size_t)G->K, 59 + g, -1.0, 1.0, 0);
            input z = gmm_make(&G->z, d, zv, G->B, G->D);
            input mu = gmm_make(&G->mu, d, mv, G->B, G->K * G->D);
            input lvar = gmm_make(&G->lv, d, lv, G->B, G->K * G->D);
            input lg = make_input(gmm_dtype(&G->logits, d), gv, 1, G->K, G->logits.offset, G->K);
            char dts[64];
            snprintf(dts, sizeof dts, "z %s mu %s log_var %s logits %s", dt_name(gmm_dtype(&G->z, d)),
                     dt_name(gmm_dtype(&G->mu, d)), dt_name(gmm_dtype(&G->lv, d)), dt_name(gmm_dtype(&G->logits, d)));
            tally_buffer *a = out_buf((size_t)G->B), *b = out_buf((size_t)G->B);
            tt_ok(tally_gmm_log_prob(ctx, z.view, mu.view, lvar.view, lg.view, G->K, tally_view_f32(a, 0, G->B, 1)), ctx);
            tt_ok(tally_gmm_log_prob(ctx, z.f32, mu.f32, lvar.f32, lg.f32, G->K, tally_view_f32(b, 0, G->B, 1)), ctx);
            char what[160];
            snprintf(what, sizeof what, "gmm_log_prob %s B %lld K %lld D %lld", dts, (long long)G->B,
                     (long long)G->K, (long long)G->D);
            assert_same_bits(a, b, (size_t)G->B, what);

            /* Sample: z, log_q and the component. */
            const tally_rng rng = {.seed = 1234 + g, .subsequence = 5, .offset = 8};
            tally_buffer *za = out_buf(zn), *zb = out_buf(zn), *ca = out_buf((size_t)G->B), *cb = out_buf((size_t)G->B);
            uint64_t used_a = 0, used_b = 0;
            tt_ok(tally_gmm_sample(ctx, mu.view, lvar.view, lg.view, G->K, rng, tally_view_f32(za, 0, G->B, G->D),
                                   tally_view_f32(a, 0, G->B, 1), tally_view_typed(ca, TALLY_I32, 0, G->B, 1), &used_a),
                  ctx);
            tt_ok(tally_gmm_sample(ctx, mu.f32, lvar.f32, lg.f32, G->K, rng, tally_view_f32(zb, 0, G->B, G->D),
                                   tally_view_f32(b, 0, G->B, 1), tally_view_typed(cb, TALLY_I32, 0, G->B, 1), &used_b),
                  ctx);
            ck_assert_uint_eq(used_a, used_b);
            snprintf(what, sizeof what, "gmm_sample %s B %lld K %lld D %lld", dts, (long long)G->B,
                     (long long)G->K, (long long)G->D);
            assert_same_bits(za, zb, zn, what);
            assert_same_bits(a, b, (size_t)G->B, what);
            assert_same_bits(ca, cb, (size_t)G->B, what);
            tally_buffer_release(za);
            tally_buffer_release(zb);
            tally_buffer_release(ca);
            tally_buffer_release(cb);
            tally_buffer_release(a);
            tally_buffer_release(b);
            free_input(&z);
            free_input(&mu);
            free_input(&lvar);
            free_input(&lg);
            free(zv);
            free(mv);
            free(lv);
            free(gv);
        }
}
END_TEST

/* ---- Categorical ---- */

START_TEST(categorical_half_equals_fp32)
{
    tally_context *ctx = tt_context();
    /* Tiles of 16 to 256 columns: short rows, a row of one whole tile,
     * rows of several tiles and a partial last one; one column. */
    const layout cat_layouts[] = {{7, 3, 1, 1}, {100, 50, 0, 0}, {9, 3000, 5, 2}, {40, 256, 4, 0}, {300, 1, 3, 2}};
    for (size_t d = 0; d < 2; d++)
        for (size_t l = 0; l < sizeof cat_layouts / sizeof cat_layouts[0]; l++)
            for (unsigned flags = 0; flags <= TALLY_CATEGORICAL_LOGITS; flags++) {
                const layout *L = &cat_layouts[l];
                const size_t n = (size_t)(L->rows * L->cols);
                float *wv = flags ? values(n, 71 + l, -4.0, 4.0, 0) : values(n, 71 + l, 0.0, 2.0, 0);
                if (!flags && n > 6) wv[5] = -1.0f; /* an invalid row: index -1 */
                input w = make_input(halves[d], wv, L->rows, L->cols, L->offset, L->cols + L->pad);
                const tally_rng rng = {.seed = 99, .subsequence = l, .offset = 4};
                tally_buffer *a = out_buf((size_t)L->rows), *b = out_buf((size_t)L->rows);
                tt_ok(tally_categorical(ctx, w.view, flags, rng, tally_view_typed(a, TALLY_I32, 0, L->rows, 1), NULL),
                      ctx);
                tt_ok(tally_categorical(ctx, w.f32, flags, rng, tally_view_typed(b, TALLY_I32, 0, L->rows, 1), NULL),
                      ctx);
                char what[128];
                snprintf(what, sizeof what, "categorical %s flags %u [%lld x %lld]", dt_name(halves[d]), flags,
                         (long long)L->rows, (long long)L->cols);
                assert_same_bits(a, b, (size_t)L->rows, what);
                tally_buffer_release(a);
                tally_buffer_release(b);
                free_input(&w);
                free(wv);
            }
}
END_TEST

/* ---- Front-end rules for half views ---- */

START_TEST(half_view_rules)
{
    tally_context *ctx = tt_context();
    tally_buffer *hb = NULL, *ob = out_buf(16);
    tt_ok(tally_buffer_create(ctx, 10, &hb), ctx); /* five halves */
    const uint16_t ones[5] = {0x3f80, 0x3f80, 0x3f80, 0x3f80, 0x3f80}; /* bf16 1.0 */
    tt_ok(tally_buffer_upload(hb, 0, ones, 10), ctx);
    tally_view out = tally_view_f32(ob, 0, 1, 1);
    /* Five bf16 elements fit ten bytes; six do not. */
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(hb, TALLY_BF16, 0, 1, 5), out), ctx);
    ck_assert_float_eq(tt_read1(ob, 0), 5.0f);
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(hb, TALLY_BF16, 3, 1, 2), out), ctx);
    ck_assert_float_eq(tt_read1(ob, 0), 2.0f);
    tt_assert_status(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(hb, TALLY_BF16, 0, 1, 6), out),
                     TALLY_OUT_OF_BOUNDS, ctx);
    tt_assert_status(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(hb, TALLY_F16, 4, 1, 2), out),
                     TALLY_OUT_OF_BOUNDS, ctx);
    /* Halves are inputs, and outputs of the elementwise ops only
     * (tests/check_half_out.c): a reduction's out, a raw fill, read_scalar
     * refuse them. */
    tally_view hout = tally_view_typed(ob, TALLY_BF16, 0, 1, 1);
    tt_assert_status(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(hb, TALLY_BF16, 0, 1, 5), hout),
                     TALLY_UNSUPPORTED_DTYPE, ctx);
    ck_assert_msg(strstr(tally_last_error(ctx), "out has dtype bf16") != NULL, "message: %s", tally_last_error(ctx));
    tally_rng rng = {.seed = 1, .subsequence = 0, .offset = 0};
    tt_assert_status(tally_rng_fill(ctx, TALLY_DIST_RAW, rng, tally_view_typed(ob, TALLY_F16, 0, 1, 4), NULL),
                     TALLY_UNSUPPORTED_DTYPE, ctx);
    float f;
    tt_assert_status(tally_read_scalar(ctx, tally_view_typed(ob, TALLY_BF16, 0, 1, 1), &f), TALLY_UNSUPPORTED_DTYPE,
                     ctx);
    /* A floating input of an integer type names the accepted set. */
    tt_assert_status(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(ob, TALLY_U32, 0, 1, 4), out),
                     TALLY_UNSUPPORTED_DTYPE, ctx);
    ck_assert_msg(strstr(tally_last_error(ctx), "expected f32, bf16 or f16") != NULL, "message: %s",
                  tally_last_error(ctx));
    /* Overlap is judged in bytes: halves 8..9 are bytes 16..19, float 4. */
    tally_buffer *mixed = out_buf(16);
    tt_assert_status(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(mixed, TALLY_BF16, 8, 1, 2),
                                  tally_view_f32(mixed, 4, 1, 1)),
                     TALLY_INVALID_ARGUMENT, ctx);
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_typed(mixed, TALLY_BF16, 8, 1, 2),
                       tally_view_f32(mixed, 5, 1, 1)),
          ctx);
    tally_buffer_release(mixed);
    tally_buffer_release(hb);
    tally_buffer_release(ob);
}
END_TEST

TT_SUITE("half",
         {.name = "widen", TT_FIXTURE, .timeout = 300, .tests = {device_widens_every_encoding, half_view_rules}},
         {.name = "reduce", TT_FIXTURE, .timeout = 300, .tests = {reduce_half_equals_fp32}},
         {.name = "kl", TT_FIXTURE, .timeout = 300, .tests = {kl_half_equals_fp32, kl_bf16_every_mantissa, kl_bf16_every_exponent, kl_bf16_one_special}},
         {.name = "dm", TT_FIXTURE, .timeout = 300, .tests = {dm_half_equals_fp32}},
         {.name = "gmm", TT_FIXTURE, .timeout = 300, .tests = {gmm_half_equals_fp32}},
         {.name = "categorical", TT_FIXTURE, .timeout = 300, .tests = {categorical_half_equals_fp32}})
