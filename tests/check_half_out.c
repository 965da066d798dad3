/*
 * tests/check_half_out.c - half OUTPUTS on the backend named by
 * TALLY_TEST_BACKEND: kl_div with reduction none, the uniform and normal
 * fills and gmm_sample's z written to BF16 and F16 views.
 *
 * The definition (docs/ops.md) is checked directly: every half output
 * must equal, bit for bit, tally_f32_to_bf16 or tally_f32_to_f16 of the
 * same op's fp32 output computed here on the same backend, and the other
 * outputs (log_q, the components, the stream elements consumed) must not
 * change. Half views sit at odd offsets and in strided views whose gaps
 * hold a marker that must survive, in buffers whose size is not a multiple
 * of 4 bytes. The narrowing itself is checked on the device against a
 * reference written here with double arithmetic (round to nearest even
 * from frexp and rint), over every midpoint of both formats; and the
 * front end's rules: the other outputs refuse half views, bounds and
 * overlap are judged in bytes.
 */
#include <fenv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/half.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

#define GAP 0x7e5au /* marks the halves no op may write */

static const tally_dtype halves[] = {TALLY_BF16, TALLY_F16};

static const char *dt_name(tally_dtype dt)
{
    return dt == TALLY_BF16 ? "bf16" : "f16";
}

static unsigned narrow(tally_dtype dt, float x)
{
    return dt == TALLY_BF16 ? tally_f32_to_bf16(x) : tally_f32_to_f16(x);
}

/* ---- A half output view in a buffer of its own, gaps marked ---- */

typedef struct half_out {
    tally_buffer *buf;
    tally_view view;
    size_t total; /* halves in the buffer */
} half_out;

static half_out make_half_out(tally_dtype dt, int64_t rows, int64_t cols, int64_t offset, int64_t pad)
{
    half_out h;
    const int64_t stride = cols + pad;
    const int64_t used = rows > 0 && cols > 0 ? offset + (rows - 1) * stride + cols : offset;
    h.total = (size_t)used + 1; /* one spare half: an odd byte count for even `used` */
    uint16_t *init = tt_alloc(h.total * 2);
    for (size_t i = 0; i < h.total; i++) init[i] = GAP;
    tally_context *ctx = tt_context();
    tt_ok(tally_buffer_create(ctx, h.total * 2, &h.buf), ctx);
    tt_ok(tally_buffer_upload(h.buf, 0, init, h.total * 2), ctx);
    free(init);
    h.view = (tally_view){.buffer = h.buf, .offset = offset, .rows = rows, .cols = cols, .stride = stride,
                          .dtype = dt};
    return h;
}

/* Asserts that the view holds narrow(want[k]) for element k (row-major) and
 * that every half outside it still holds GAP. */
static void check_half_out(const half_out *h, const float *want, const char *what)
{
    uint16_t *got = tt_alloc(h->total * 2);
    tt_ok(tally_buffer_download(h->buf, 0, got, h->total * 2), tt_context());
    char *inside = calloc(h->total, 1);
    const tally_view *v = &h->view;
    for (int64_t r = 0; r < v->rows; r++)
        for (int64_t c = 0; c < v->cols; c++) {
            const size_t at = (size_t)(v->offset + r * v->stride + c);
            inside[at] = 1;
            const unsigned expect = narrow(v->dtype, want[r * v->cols + c]);
            if (got[at] != expect)
                ck_abort_msg("%s: element (%lld, %lld) is 0x%04x, want 0x%04x (%s of fp32 0x%08x)", what,
                             (long long)r, (long long)c, got[at], expect, dt_name(v->dtype),
                             tt_bits(want[r * v->cols + c]));
        }
    for (size_t i = 0; i < h->total; i++)
        if (!inside[i] && got[i] != GAP)
            ck_abort_msg("%s: half %zu outside the view was overwritten (0x%04x)", what, i, got[i]);
    free(inside);
    free(got);
}

static float *download_f32(tally_buffer *b, size_t n)
{
    float *x = tt_alloc((n > 0 ? n : 1) * 4);
    tt_read(b, 0, x, n);
    return x;
}

/* ---- Each op with a half output, as one case table ---- */

typedef enum out_op { OUT_KL, OUT_UNIFORM, OUT_NORMAL, OUT_GMM_Z } out_op;

typedef struct out_case {
    out_op op;
    int64_t rows, cols, offset, pad; /* the output view; the inputs are contiguous */
    unsigned flags;                  /* kl_div's */
    int64_t components;              /* gmm_sample's K */
} out_case;

static const out_case out_cases[] = {
    {OUT_KL, 1, 1, 0, 0, 0u, 0},
    {OUT_KL, 3, 37, 1, 4, 0u, 0},
    {OUT_KL, 64, 256, 0, 0, TALLY_KL_LOG_TARGET, 0},
    {OUT_KL, 5, 1000, 3, 2, TALLY_KL_INPUT_IS_PROB, 0},
    {OUT_KL, 16, 1024, 1, 0, TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS, 0},
    {OUT_KL, 1, 40000, 7, 0, 0u, 0},
    {OUT_UNIFORM, 1, 1, 0, 0, 0u, 0},
    {OUT_UNIFORM, 7, 9, 1, 3, 0u, 0},
    {OUT_UNIFORM, 1, 10001, 0, 0, 0u, 0},
    {OUT_UNIFORM, 33, 300, 5, 1, 0u, 0},
    {OUT_UNIFORM, 2, 3, 1, 5, 0u, 0},
    {OUT_UNIFORM, 1, 2000, 4, 0, 0u, 0},
    {OUT_NORMAL, 1, 3, 1, 0, 0u, 0},
    {OUT_NORMAL, 9, 17, 0, 2, 0u, 0},
    {OUT_NORMAL, 1, 20000, 3, 0, 0u, 0},
    {OUT_NORMAL, 128, 64, 0, 0, 0u, 0},
    {OUT_GMM_Z, 5, 7, 1, 2, 0u, 3},
    {OUT_GMM_Z, 64, 16, 0, 0, 0u, 1},
    {OUT_GMM_Z, 33, 4, 3, 1, 0u, 8},
};

static const char *op_name(out_op op)
{
    switch (op) {
    case OUT_KL: return "kl_div none";
    case OUT_UNIFORM: return "rng_fill uniform";
    case OUT_NORMAL: return "rng_fill normal";
    case OUT_GMM_Z: return "gmm_sample z";
    }
    return "?";
}

/* KL inputs for the flags, with a few entries that give an infinite f16
 * (a term of 1e5), NaN (a negative target) and zero terms. */
static void kl_inputs(const out_case *C, size_t n, uint64_t seed, float **x, float **t)
{
    *x = tt_alloc(n * 4);
    *t = tt_alloc(n * 4);
    const unsigned f = C->flags;
    if (f & TALLY_KL_INPUT_IS_PROB) tt_fill_uniform(*x, n, seed, 1e-4, 1.0);
    else tt_fill_uniform(*x, n, seed, -6.0, 2.0);
    if (f & (TALLY_KL_LOG_TARGET | TALLY_KL_TARGET_LOGITS)) tt_fill_uniform(*t, n, seed + 1, -4.0, 1.0);
    else tt_fill_uniform(*t, n, seed + 1, 0.0, 1.0);
    if (f == 0u && n > 8) {
        (*x)[2] = -1e5f; /* 1 * (log 1 + 1e5): above f16's largest finite */
        (*t)[2] = 1.0f;
        (*t)[4] = -0.5f; /* NaN */
        (*t)[5] = 0.0f;  /* 0 */
        (*x)[6] = -3e38f; /* 0.5 * (log 0.5 + 3e38): finite in bf16, infinite in f16 */
        (*t)[6] = 0.5f;
    }
}

/* Runs case C into `out` (a view of dtype F32 or half). gmm_sample's log_q
 * and components go to lq and comp, its consumption to *used. */
static void run_case(const out_case *C, tally_view out, const tally_view *in, tally_view lq, tally_view comp,
                     uint64_t *used)
{
    tally_context *ctx = tt_context();
    /* Stream offsets of each remainder mod 4, so that fills start inside a
     * Philox block on some cases. */
    const tally_rng rng = {.seed = 0x5eed + (uint64_t)C->rows, .subsequence = 3,
                           .offset = 12 + (uint64_t)(C->rows + C->cols) % 4u};
    *used = 0;
    switch (C->op) {
    case OUT_KL: tt_ok(tally_kl_div(ctx, in[0], in[1], TALLY_REDUCTION_NONE, C->flags, out), ctx); break;
    case OUT_UNIFORM: tt_ok(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng, out, used), ctx); break;
    case OUT_NORMAL: tt_ok(tally_rng_fill(ctx, TALLY_DIST_NORMAL, rng, out, used), ctx); break;
    case OUT_GMM_Z:
        tt_ok(tally_gmm_sample(ctx, in[0], in[1], in[2], C->components, rng, out, lq, comp, used), ctx);
        break;
    }
}

START_TEST(half_outputs_equal_narrowed_fp32)
{
    tally_context *ctx = tt_context();
    const out_case *C = &out_cases[_i];
    const size_t n = (size_t)(C->rows * C->cols);
    /* Inputs (fp32, contiguous): KL input and target; the mixture's mu,
     * log_var [B, K*D] and logits [1, K]. */
    tally_buffer *ib[3] = {NULL, NULL, NULL};
    tally_view in[3] = {{0}};
    if (C->op == OUT_KL) {
        float *x, *t;
        kl_inputs(C, n, 11 + (uint64_t)_i, &x, &t);
        ib[0] = tt_upload(ctx, x, n);
        ib[1] = tt_upload(ctx, t, n);
        in[0] = tally_view_f32(ib[0], 0, C->rows, C->cols);
        in[1] = tally_view_f32(ib[1], 0, C->rows, C->cols);
        free(x);
        free(t);
    } else if (C->op == OUT_GMM_Z) {
        const size_t pn = n * (size_t)C->components;
        float *mu = tt_alloc(pn * 4), *lv = tt_alloc(pn * 4), *lg = tt_alloc((size_t)C->components * 4);
        tt_fill_uniform(mu, pn, 21, -2.0, 2.0);
        tt_fill_uniform(lv, pn, 22, -3.0, 1.0);
        tt_fill_uniform(lg, (size_t)C->components, 23, -1.0, 1.0);
        ib[0] = tt_upload(ctx, mu, pn);
        ib[1] = tt_upload(ctx, lv, pn);
        ib[2] = tt_upload(ctx, lg, (size_t)C->components);
        in[0] = tally_view_f32(ib[0], 0, C->rows, C->cols * C->components);
        in[1] = tally_view_f32(ib[1], 0, C->rows, C->cols * C->components);
        in[2] = tally_view_f32(ib[2], 0, 1, C->components);
        free(mu);
        free(lv);
        free(lg);
    }
    const size_t B = (size_t)C->rows;
    /* The fp32 op, the reference of the definition. */
    tally_buffer *fo = tt_buffer(ctx, n), *lq32 = tt_buffer(ctx, B), *cp32 = tt_buffer(ctx, B);
    uint64_t used32 = 0;
    run_case(C, tally_view_f32(fo, 0, C->rows, C->cols), in, tally_view_f32(lq32, 0, C->rows, 1),
             tally_view_typed(cp32, TALLY_I32, 0, C->rows, 1), &used32);
    float *want = download_f32(fo, n);
    float *want_lq = download_f32(lq32, B);
    int32_t *want_cp = tt_alloc(B * 4);
    tt_read(cp32, 0, want_cp, B);
    for (size_t d = 0; d < 2; d++) {
        half_out h = make_half_out(halves[d], C->rows, C->cols, C->offset, C->pad);
        tally_buffer *lq = tt_buffer(ctx, B), *cp = tt_buffer(ctx, B);
        uint64_t used = 0;
        run_case(C, h.view, in, tally_view_f32(lq, 0, C->rows, 1), tally_view_typed(cp, TALLY_I32, 0, C->rows, 1),
                 &used);
        char what[160];
        snprintf(what, sizeof what, "%s %s [%lld x %lld, offset %lld, pad %lld]", op_name(C->op),
                 dt_name(halves[d]), (long long)C->rows, (long long)C->cols, (long long)C->offset,
                 (long long)C->pad);
        check_half_out(&h, want, what);
        ck_assert_msg(used == used32, "%s: consumed %llu, the fp32 op %llu", what, (unsigned long long)used,
                      (unsigned long long)used32);
        if (C->op == OUT_GMM_Z) {
            float *got_lq = download_f32(lq, B);
            int32_t *got_cp = tt_alloc(B * 4);
            tt_read(cp, 0, got_cp, B);
            for (size_t b = 0; b < B; b++) {
                ck_assert_msg(tt_bits(got_lq[b]) == tt_bits(want_lq[b]), "%s: log_q[%zu] 0x%08x, fp32 op 0x%08x",
                              what, b, tt_bits(got_lq[b]), tt_bits(want_lq[b]));
                ck_assert_msg(got_cp[b] == want_cp[b], "%s: component[%zu] %d, fp32 op %d", what, b, got_cp[b],
                              want_cp[b]);
            }
            free(got_lq);
            free(got_cp);
        }
        tally_buffer_release(lq);
        tally_buffer_release(cp);
        tally_buffer_release(h.buf);
    }
    /* The planted specials really are there (so the narrowing of inf and
     * NaN was exercised): the f16 of 1e5 is infinite, a negative target
     * gives the canonical NaN. */
    if (C->op == OUT_KL && C->flags == 0u && n > 8) {
        ck_assert_uint_eq(tally_f32_to_f16(want[2]), 0x7c00u);
        ck_assert_uint_eq(tt_bits(want[4]), 0x7fc00000u);
        ck_assert_uint_eq(tally_f32_to_f16(want[6]), 0x7c00u);
        ck_assert_msg(isfinite(tally_bf16_to_f32(tally_f32_to_bf16(want[6]))), "bf16 of %g", (double)want[6]);
    }
    free(want);
    free(want_lq);
    free(want_cp);
    tally_buffer_release(fo);
    tally_buffer_release(lq32);
    tally_buffer_release(cp32);
    for (int i = 0; i < 3; i++)
        if (ib[i] != NULL) tally_buffer_release(ib[i]);
}
END_TEST

/* ---- The narrowing on the device against an independent reference ---- */

typedef struct format {
    tally_dtype dt;
    int precision; /* significand bits, the implicit one included */
    int emin, emax;
    unsigned max_finite, nan; /* encodings */
} format;

static const format formats[] = {
    {TALLY_BF16, 8, -126, 127, 0x7f7fu, 0x7fc0u},
    {TALLY_F16, 11, -14, 15, 0x7bffu, 0x7e00u},
};

/* The value of encoding h from the format's definition. */
static double ref_decode(const format *f, unsigned h)
{
    const int mant_bits = f->precision - 1, exp_bits = f->dt == TALLY_BF16 ? 8 : 5;
    const int bias = f->emax;
    const unsigned m = h & ((1u << mant_bits) - 1u), e = (h >> mant_bits) & ((1u << exp_bits) - 1u);
    const double sign = (h >> 15) ? -1.0 : 1.0;
    if (e == (1u << exp_bits) - 1u) return m != 0 ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexp((double)m, 1 - bias - mant_bits);
    return sign * ldexp((double)((1u << mant_bits) | m), (int)e - bias - mant_bits);
}

/* v rounded to the format, to nearest with ties to even, in double: the
 * quantum at v's binade (never below the subnormals' one) scales v to an
 * integer part that rint rounds (ties to even in the default mode), and a
 * result beyond the largest finite value is infinite. Exact: v is a float,
 * so v / quantum and the product back are exact in double. */
static double ref_round(const format *f, double v)
{
    if (v != v || isinf(v) || v == 0.0) return v;
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    int exp2 = e - 1;
    if (exp2 < f->emin) exp2 = f->emin;
    const double quantum = ldexp(1.0, exp2 - (f->precision - 1));
    const double r = rint(fabs(v) / quantum) * quantum;
    const double largest = ref_decode(f, f->max_finite);
    const double out = r > largest ? INFINITY : r;
    return v < 0 ? -out : out;
}

START_TEST(device_narrowing_known_answers)
{
    ck_assert_int_eq(fegetround(), FE_TONEAREST);
    tally_context *ctx = tt_context();
    for (size_t d = 0; d < 2; d++) {
        const format *F = &formats[d];
        /* Every finite encoding of both signs, the midpoint to the next one
         * (a tie) and the floats either side of the midpoint; the overflow
         * thresholds; 2^16 random bit patterns; infinities and NaNs. */
        const size_t cap = 4u * 2u * 0x8000u + 65536u + 64u;
        float *v = tt_alloc(cap * 4);
        size_t n = 0;
        for (unsigned h = 0; h <= F->max_finite; h++) {
            const double a = ref_decode(F, h), b = ref_decode(F, h + 1u); /* h + 1: at most the infinity */
            const double mid = isinf(b) ? a + (a - ref_decode(F, h - 1u)) / 2.0 : (a + b) / 2.0;
            const float fm = (float)mid;
            ck_assert_msg((double)fm == mid, "midpoint above 0x%04x is not a float", h);
            const float vals[4] = {(float)a, fm, nextafterf(fm, INFINITY), nextafterf(fm, 0.0f)};
            for (int k = 0; k < 4; k++) {
                v[n++] = vals[k];
                v[n++] = -vals[k];
            }
        }
        uint64_t s = 0x9e3779b97f4a7c15ull + d;
        for (int k = 0; k < 65536; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            v[n++] = tt_float((uint32_t)(s >> 32));
        }
        const float specials[] = {INFINITY, -INFINITY, NAN, -NAN, 3.4028235e38f, -3.4028235e38f, 65504.0f,
                                  65519.996f, 65520.0f, 1e-8f, 5.9604645e-8f, 2.9802322e-8f, 2.9802326e-8f,
                                  1.4e-45f, 1.1754942e-38f, 9.18355e-41f};
        for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) v[n++] = specials[k];
        /* The device computes out = exp(0) * (0 - x) = v exactly for x = -v
         * (kl_div none with a log target of 0), so the half output is the
         * device's narrowing of v. */
        float *x = tt_alloc(n * 4), *t = tt_alloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            x[i] = -v[i];
            t[i] = 0.0f;
        }
        tally_buffer *xb = tt_upload(ctx, x, n), *tb = tt_upload(ctx, t, n), *fb = tt_buffer(ctx, n);
        tally_view xv = tally_view_f32(xb, 0, 1, (int64_t)n), tv = tally_view_f32(tb, 0, 1, (int64_t)n);
        tt_ok(tally_kl_div(ctx, xv, tv, TALLY_REDUCTION_NONE, TALLY_KL_LOG_TARGET, tally_view_f32(fb, 0, 1, (int64_t)n)),
              ctx);
        float *f = download_f32(fb, n);
        half_out h = make_half_out(F->dt, 1, (int64_t)n, 1, 0);
        tt_ok(tally_kl_div(ctx, xv, tv, TALLY_REDUCTION_NONE, TALLY_KL_LOG_TARGET, h.view), ctx);
        uint16_t *got = tt_alloc((n + 2) * 2);
        tt_ok(tally_buffer_download(h.buf, 0, got, (n + 2) * 2), ctx);
        ck_assert_uint_eq(got[0], GAP);
        ck_assert_uint_eq(got[n + 1], GAP);
        for (size_t i = 0; i < n; i++) {
            const unsigned g = got[i + 1];
            if (v[i] != v[i]) {
                /* A NaN result is stored as the canonical fp32 NaN, whose
                 * narrowing is the canonical half NaN. */
                ck_assert_msg(g == F->nan, "%s: NaN narrowed to 0x%04x, want 0x%04x", dt_name(F->dt), g, F->nan);
                continue;
            }
            ck_assert_msg(tt_bits(f[i]) == tt_bits(v[i]) || (v[i] == 0.0f && f[i] == 0.0f),
                          "kl_div's -(-v) trick gave 0x%08x for 0x%08x", tt_bits(f[i]), tt_bits(v[i]));
            const double want = ref_round(F, (double)f[i]);
            const double have = ref_decode(F, g);
            const int sign_ok = ((g >> 15) != 0) == (signbit(f[i]) != 0);
            if (have != want || !sign_ok)
                ck_abort_msg("%s: fp32 0x%08x (%.9g) narrowed to 0x%04x (%.9g), the reference rounds to %.9g",
                             dt_name(F->dt), tt_bits(f[i]), (double)f[i], g, have, want);
        }
        free(got);
        free(f);
        free(x);
        free(t);
        free(v);
        tally_buffer_release(h.buf);
        tally_buffer_release(xb);
        tally_buffer_release(tb);
        tally_buffer_release(fb);
    }
}
END_TEST

/* ---- Front-end rules ---- */

/* One call that must fail with `status`, its message containing `text`. */
typedef struct refusal {
    const char *name;
    tally_status (*call)(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt);
    tally_status status;
    const char *text;
} refusal;

static const tally_rng rng0 = {.seed = 1, .subsequence = 0, .offset = 0};

/* a: 64 floats of ones (inputs); b: 64 floats (outputs). */
static tally_status r_reduce(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    return tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(a, 0, 2, 4), tally_view_typed(b, dt, 0, 1, 1));
}
static tally_status r_kl_sum(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    tally_view x = tally_view_f32(a, 0, 2, 4);
    return tally_kl_div(ctx, x, x, TALLY_REDUCTION_SUM, 0u, tally_view_typed(b, dt, 0, 1, 1));
}
static tally_status r_kl_batchmean(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    tally_view x = tally_view_f32(a, 0, 2, 4);
    return tally_kl_div(ctx, x, x, TALLY_REDUCTION_BATCHMEAN, 0u, tally_view_typed(b, dt, 0, 1, 1));
}
static tally_status r_dm(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    return tally_dirichlet_multinomial(ctx, tally_view_f32(a, 0, 2, 4), tally_view_f32(a, 8, 1, 4),
                                       TALLY_REDUCTION_NONE, 0u, tally_view_typed(b, dt, 0, 2, 1));
}
static tally_status r_log_prob(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    tally_view z = tally_view_f32(a, 0, 2, 4);
    return tally_gmm_log_prob(ctx, z, z, z, (tally_view){0}, 1, tally_view_typed(b, dt, 0, 2, 1));
}
static tally_status r_log_q(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    tally_view p = tally_view_f32(a, 0, 2, 4);
    return tally_gmm_sample(ctx, p, p, (tally_view){0}, 1, rng0, tally_view_f32(b, 0, 2, 4),
                            tally_view_typed(b, dt, 32, 2, 1), (tally_view){0}, NULL);
}
static tally_status r_categorical(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    return tally_categorical(ctx, tally_view_f32(a, 0, 2, 4), 0u, rng0, tally_view_typed(b, dt, 0, 2, 1), NULL);
}
static tally_status r_raw(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    (void)a;
    return tally_rng_fill(ctx, TALLY_DIST_RAW, rng0, tally_view_typed(b, dt, 0, 1, 4), NULL);
}
static tally_status r_read_scalar(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    (void)a;
    float f;
    return tally_read_scalar(ctx, tally_view_typed(b, dt, 0, 1, 1), &f);
}
static tally_status r_kl_backward(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    tally_view x = tally_view_f32(a, 0, 2, 4);
    return tally_kl_div_backward(ctx, x, x, tally_view_f32(a, 8, 2, 4), TALLY_REDUCTION_NONE, 0u,
                                 tally_view_typed(b, dt, 0, 2, 4), (tally_view){0});
}
/* Bounds in bytes: 8 halves from half 60 end at byte 136 of a 128-byte
 * buffer, and 8 from half 58 at byte 132 (the fits are in
 * half_output_edges). */
static tally_status r_bounds(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    (void)a;
    return tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng0, tally_view_typed(b, dt, 60, 2, 4), NULL);
}
static tally_status r_bounds_kl(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    tally_view x = tally_view_f32(a, 0, 2, 4);
    return tally_kl_div(ctx, x, x, TALLY_REDUCTION_NONE, 0u, tally_view_typed(b, dt, 58, 2, 4));
}
/* Overlap in bytes: halves 14 .. 21 cover bytes 28 .. 43, floats 7 .. 10 of
 * the input (floats 0 .. 7). */
static tally_status r_overlap_kl(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    (void)b;
    tally_view x = tally_view_f32(a, 0, 2, 4);
    return tally_kl_div(ctx, x, x, TALLY_REDUCTION_NONE, 0u, tally_view_typed(a, dt, 14, 2, 4));
}
/* z in halves 0 .. 7 (bytes 0 .. 15) and log_q at float 3 (bytes 12 .. 15). */
static tally_status r_overlap_gmm(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    tally_view p = tally_view_f32(a, 0, 2, 4);
    return tally_gmm_sample(ctx, p, p, (tally_view){0}, 1, rng0, tally_view_typed(b, dt, 0, 2, 4),
                            tally_view_f32(b, 3, 2, 1), (tally_view){0}, NULL);
}
static tally_status r_half_stride(tally_context *ctx, tally_buffer *a, tally_buffer *b, tally_dtype dt)
{
    (void)a;
    tally_view v = tally_view_typed(b, dt, 0, 2, 4);
    v.stride = 3;
    return tally_rng_fill(ctx, TALLY_DIST_NORMAL, rng0, v, NULL);
}

static const refusal refusals[] = {
    {"reduce out", r_reduce, TALLY_UNSUPPORTED_DTYPE, "out has dtype"},
    {"kl_div sum out", r_kl_sum, TALLY_UNSUPPORTED_DTYPE, "out has dtype"},
    {"kl_div batchmean out", r_kl_batchmean, TALLY_UNSUPPORTED_DTYPE, "elementwise outputs only"},
    {"dirichlet_multinomial out", r_dm, TALLY_UNSUPPORTED_DTYPE, "out has dtype"},
    {"gmm_log_prob out", r_log_prob, TALLY_UNSUPPORTED_DTYPE, "out has dtype"},
    {"gmm_sample log_q", r_log_q, TALLY_UNSUPPORTED_DTYPE, "log_q has dtype"},
    {"categorical out", r_categorical, TALLY_UNSUPPORTED_DTYPE, "expected i32"},
    {"raw fill", r_raw, TALLY_UNSUPPORTED_DTYPE, "expected u32"},
    {"read_scalar", r_read_scalar, TALLY_UNSUPPORTED_DTYPE, "view has dtype"},
    {"kl_div_backward grad_input", r_kl_backward, TALLY_UNSUPPORTED_DTYPE, "grad_input has dtype"},
    {"fill beyond the buffer's bytes", r_bounds, TALLY_OUT_OF_BOUNDS, "needs 136 bytes"},
    {"kl_div out beyond the buffer's bytes", r_bounds_kl, TALLY_OUT_OF_BOUNDS, "needs 132 bytes"},
    {"kl_div out overlapping its input", r_overlap_kl, TALLY_INVALID_ARGUMENT, "overlaps input"},
    {"gmm_sample z overlapping log_q", r_overlap_gmm, TALLY_INVALID_ARGUMENT, "output z overlaps input log_q"},
    {"stride below cols", r_half_stride, TALLY_INVALID_ARGUMENT, "stride 3 < cols 4"},
};

START_TEST(half_output_refusals)
{
    tally_context *ctx = tt_context();
    float ones[64];
    for (int i = 0; i < 64; i++) ones[i] = 1.0f;
    tally_buffer *a = tt_upload(ctx, ones, 64), *b = tt_buffer(ctx, 32); /* b: 128 bytes */
    for (size_t d = 0; d < 2; d++)
        for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
            const refusal *R = &refusals[i];
            const tally_status st = R->call(ctx, a, b, halves[d]);
            ck_assert_msg(st == R->status, "%s (%s): status %s, want %s (%s)", R->name, dt_name(halves[d]),
                          tally_status_name(st), tally_status_name(R->status), tally_last_error(ctx));
            ck_assert_msg(strstr(tally_last_error(ctx), R->text) != NULL, "%s (%s): message '%s' lacks '%s'",
                          R->name, dt_name(halves[d]), tally_last_error(ctx), R->text);
        }
    tally_buffer_release(a);
    tally_buffer_release(b);
}
END_TEST

/* What the refusals' neighbours accept: the byte-exact fits, and views
 * of nothing. */
START_TEST(half_output_edges)
{
    tally_context *ctx = tt_context();
    tally_buffer *b = NULL;
    tt_ok(tally_buffer_create(ctx, 18, &b), ctx); /* nine halves: not a whole number of floats */
    const uint16_t gaps[9] = {GAP, GAP, GAP, GAP, GAP, GAP, GAP, GAP, GAP};
    tt_ok(tally_buffer_upload(b, 0, gaps, 18), ctx);
    for (size_t d = 0; d < 2; d++) {
        /* Halves 1 .. 8 end exactly at byte 18. */
        uint64_t used = 0;
        tt_ok(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng0, tally_view_typed(b, halves[d], 1, 2, 4), &used), ctx);
        ck_assert_uint_eq(used, 8);
        uint16_t got[9];
        tt_ok(tally_buffer_download(b, 0, got, 18), ctx);
        ck_assert_uint_eq(got[0], GAP);
        /* Uniform draws in (0, 1] narrow to (0, 1]: never a marker, never 0. */
        for (int i = 1; i < 9; i++) {
            const float w = halves[d] == TALLY_BF16 ? tally_bf16_to_f32(got[i]) : tally_f16_to_f32(got[i]);
            ck_assert_msg(w > 0.0f && w <= 1.0f, "%s uniform %d: 0x%04x", dt_name(halves[d]), i, got[i]);
        }
        /* One more half is byte 20: out of bounds. */
        tt_assert_status(tally_rng_fill(ctx, TALLY_DIST_UNIFORM, rng0, tally_view_typed(b, halves[d], 2, 2, 4), NULL),
                         TALLY_OUT_OF_BOUNDS, ctx);
        /* Empty views write nothing and succeed. */
        tt_ok(tally_buffer_upload(b, 0, gaps, 18), ctx);
        tt_ok(tally_rng_fill(ctx, TALLY_DIST_NORMAL, rng0, tally_view_typed(b, halves[d], 0, 0, 4), &used), ctx);
        ck_assert_uint_eq(used, 0);
        tally_buffer *in = tt_buffer(ctx, 4);
        tt_ok(tally_kl_div(ctx, tally_view_f32(in, 0, 0, 3), tally_view_f32(in, 0, 0, 3), TALLY_REDUCTION_NONE, 0u,
                           tally_view_typed(b, halves[d], 0, 0, 3)),
              ctx);
        tt_ok(tally_buffer_download(b, 0, got, 18), ctx);
        for (int i = 0; i < 9; i++) ck_assert_uint_eq(got[i], GAP);
        /* A mixture sample with D = 0: z holds nothing, log_q its B values,
         * the same as with an f32 z. */
        tally_buffer *lq = tt_buffer(ctx, 3), *lq32 = tt_buffer(ctx, 3);
        const tally_view p = tally_view_f32(in, 0, 3, 0), lg = tally_view_f32(in, 0, 1, 2);
        tt_ok(tally_gmm_sample(ctx, p, p, lg, 2, rng0, tally_view_typed(b, halves[d], 0, 3, 0),
                               tally_view_f32(lq, 0, 3, 1), (tally_view){0}, &used),
              ctx);
        uint64_t used32 = 0;
        tt_ok(tally_gmm_sample(ctx, p, p, lg, 2, rng0, tally_view_f32(in, 0, 3, 0), tally_view_f32(lq32, 0, 3, 1),
                               (tally_view){0}, &used32),
              ctx);
        ck_assert_uint_eq(used, used32);
        float a3[3], b3[3];
        tt_read(lq, 0, a3, 3);
        tt_read(lq32, 0, b3, 3);
        for (int i = 0; i < 3; i++) ck_assert_uint_eq(tt_bits(a3[i]), tt_bits(b3[i]));
        tt_ok(tally_buffer_download(b, 0, got, 18), ctx);
        for (int i = 0; i < 9; i++) ck_assert_uint_eq(got[i], GAP);
        tally_buffer_release(lq);
        tally_buffer_release(lq32);
        tally_buffer_release(in);
    }
    tally_buffer_release(b);
}
END_TEST

TT_SUITE("half_out",
         {.name = "ops", TT_FIXTURE, .timeout = 300,
          .loops = (int)(sizeof out_cases / sizeof out_cases[0]), .tests = {half_outputs_equal_narrowed_fp32}},
         {.name = "narrowing", TT_FIXTURE, .timeout = 300, .tests = {device_narrowing_known_answers}},
         {.name = "rules", TT_FIXTURE, .timeout = 300, .tests = {half_output_refusals, half_output_edges}})
