/*
 * tests/check_backward.c - the gradient ops (tally_kl_div_backward,
 * tally_dirichlet_multinomial_backward) and tally_digammaf, on the backend
 * named by TALLY_TEST_BACKEND.
 *
 * Three kinds of expectation:
 * - against float64: the gradients written out analytically in double
 *   (harness/reference_backward.c, independent of the library's terms), which
 *   are themselves checked here against float64 central finite differences
 *   of float64 forward losses; the tolerances are a few float ulps of the magnitudes that the
 *   float evaluation rounds, plus the tree depth for sums (as in
 *   tests/check_ops.c), and the measured digamma error (docs/accuracy.md);
 * - exact values where the contract fixes them (the target == 0 and NaN
 *   conventions of docs/ops.md, absent outputs left untouched);
 * - the same bits as the host backend, compared element by element, for
 *   every case (a second context on the host backend in the same process).
 * Two training loops of 100 gradient steps (the Dirichlet-multinomial model
 * fitting log_alpha, and a VAE-style objective on the mixture sample) must
 * end with the host's parameters bit for bit; the first also near a float64
 * run of the same loop. TALLY_TEST_BACKEND=cuda (or opencl with
 * TALLY_DEVICE) runs them on a GPU: scripts/gpu_backward.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_backward.h"
#include "tally/portable_math.h"
#include "tally/terms_backward.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

#define U 0x1p-24

/* ---- float64 references ------------------------------------------------- */

enum { KL_LOG_TARGET = 1, KL_PROB = 2 };

/* The pointwise KL loss in double (torch's definition; t > 0 for the
 * default target). */
static double ref_kl_loss(double xin, double t, unsigned flags)
{
    double x = (flags & KL_PROB) ? log(xin) : xin;
    if (flags & KL_LOG_TARGET) return exp(t) * (t - x);
    return t * (log(t) - x);
}

/* ---- Helpers --------------------------------------------------------------- */

static tally_context *host_context(void)
{
    static tally_context *h = NULL;
    if (h == NULL) {
        tally_status st = tally_context_create(TALLY_BACKEND_HOST, 0, &h); /* TALLY_DEVICE may name a GPU */
        ck_assert_msg(st == TALLY_OK, "host context: %s", tally_last_error(NULL));
    }
    return h;
}

/* A [rows, cols] matrix at element offset off with row stride cols + pad
 * (pad > 0: poisoned gaps) in a new buffer of ctx; returns the view. */
static tally_view put_at(tally_context *ctx, const float *dense, int64_t rows, int64_t cols, int64_t pad, int64_t off)
{
    const int64_t stride = cols + pad;
    const size_t total = (size_t)(off + (rows > 0 ? rows * stride : 0) + 3);
    float *h = tt_alloc(total * sizeof *h);
    for (size_t i = 0; i < total; i++) h[i] = tt_float(TT_POISON);
    if (dense != NULL)
        for (int64_t r = 0; r < rows; r++) memcpy(h + off + r * stride, dense + r * cols, (size_t)cols * 4);
    tally_buffer *b = tt_upload(ctx, h, total);
    free(h);
    return tally_view_f32_strided(b, off, rows, cols, stride);
}

/* put_at offset 2: no view starts 16-byte aligned. */
static tally_view put(tally_context *ctx, const float *dense, int64_t rows, int64_t cols, int64_t pad)
{
    return put_at(ctx, dense, rows, cols, pad, 2);
}

/* Downloads a view into dense [rows, cols] and checks that the elements
 * around it still hold the poison. */
static void get(const tally_view v, float *dense)
{
    const size_t total = tally_buffer_size(v.buffer) / 4;
    float *h = tt_alloc(total * sizeof *h);
    tt_read(v.buffer, 0, h, total);
    for (size_t i = 0; i < total; i++) {
        int64_t k = (int64_t)i - v.offset;
        int inside = k >= 0 && v.rows > 0 && k / v.stride < v.rows && k % v.stride < v.cols;
        if (inside)
            dense[(k / v.stride) * v.cols + k % v.stride] = h[i];
        else
            ck_assert_msg(tt_bits(h[i]) == TT_POISON, "element %zu outside the output view was written", i);
    }
    free(h);
}

static tally_view absent(void)
{
    return (tally_view){.buffer = NULL, .dtype = TALLY_F32};
}

static void assert_same_bits(const float *got, const float *host, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(tt_bits(got[i]) == tt_bits(host[i]), "%s[%zu]: backend 0x%08x, host 0x%08x", what, i,
                      tt_bits(got[i]), tt_bits(host[i]));
}

/* ---- digamma ------------------------------------------------------------- */

START_TEST(digamma_known_values)
{
    static const struct {
        float x;
        double psi;
    } rows[] = {
        {1.0f, -0.57721566490153286},
        {0.5f, -1.9635100260214235},
        {2.0f, 0.42278433509846714},
        {10.0f, 2.2517525890667211},
        {1e-3f, -1000.5755719318103},
        {100.0f, 4.6001618527380874},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        tt_assert_close(tally_digammaf(rows[i].x), rows[i].psi, 4.0 * U * fabs(rows[i].psi) + 1e-7, "psi(%g)",
                        (double)rows[i].x);
    /* The root: |psi| stays within the measured absolute error. */
    tt_assert_close(tally_digammaf(1.46163214f), tally_ref_digamma((double)1.46163214f), 4e-8, "psi at its root");
    ck_assert(tally_digammaf(0.0f) == -INFINITY);
    ck_assert(tally_digammaf(-0.0f) == -INFINITY);
    ck_assert(tally_digammaf(INFINITY) == INFINITY);
    ck_assert(isnan(tally_digammaf(-1.0f)));
    ck_assert(isnan(tally_digammaf(-INFINITY)));
    ck_assert_uint_eq(tt_bits(tally_digammaf(tt_float(0x7fc01234u))), 0x7fc01234u);
}
END_TEST

/* A dense sample of (0, 1e30): every 4099th bit pattern. Relative error
 * within 3 ulp, or 4e-8 absolute where |psi| < 0.2 (next to the root):
 * the bounds measured over every float (docs/accuracy.md), rounded up. */
START_TEST(digamma_dense_sample)
{
    for (uint32_t u = 1; u < 0x7149f2cau; u += 4099u) {
        float x = tt_float(u);
        double ref = tally_ref_digamma((double)x);
        float got = tally_digammaf(x);
        if (fabs(ref) > 0x1.fffffep127) {
            /* Beyond the float range (x < about 3e-39): -inf, as rounding gives. */
            ck_assert_msg(got == -INFINITY, "psi(%a) = %a, expected -inf", (double)x, (double)got);
            continue;
        }
        double tol = fabs(ref) < 0.2 ? 4e-8 : 3.0 * U * fabs(ref);
        tt_assert_close(got, ref, tol, "psi(%a)", (double)x);
    }
}
END_TEST

/* tally_digammaf_shared (the GPU lanes kernel's psi(N + A), a branch past
 * the recurrence at x >= 6) gives tally_digammaf's bits: every
 * 509th bit pattern of both signs (NaNs, infinities, zeros and subnormals
 * among them), and every float of [5.99, 6.01] and next to 1, 2 and 3. */
START_TEST(digamma_shared_same_bits)
{
    uint64_t n = 0;
    for (uint64_t u = 0; u <= 0xffffffffu; u += 509u, n++) {
        const float x = tt_float((uint32_t)u);
        ck_assert_msg(tt_bits(tally_digammaf_shared(x)) == tt_bits(tally_digammaf(x)), "x = %a (0x%08x)", (double)x,
                      (unsigned)u);
    }
    const float spans[][2] = {{5.99f, 6.01f}, {0.999f, 1.001f}, {1.999f, 2.001f}, {2.999f, 3.001f}};
    for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++) {
        for (float x = spans[i][0]; x <= spans[i][1]; x = nextafterf(x, INFINITY), n++)
            ck_assert_msg(tt_bits(tally_digammaf_shared(x)) == tt_bits(tally_digammaf(x)), "x = %a", (double)x);
    }
    ck_assert_uint_gt(n, 8000000u);
}
END_TEST

/* ---- KL divergence backward ---------------------------------------------- */

typedef struct kl_case {
    int64_t rows, cols, pad;
    tally_reduction reduction;
    unsigned flags;
    int want; /* 1: grad_input, 2: grad_target */
    int flat; /* 1: every view dense and 16-byte aligned (the GPU kernels' quad
               * loop); 0: offset 2, grad_target padded once more */
} kl_case;

typedef struct kl_data {
    float *x, *t, *g;
    size_t n;
} kl_data;

static kl_data kl_inputs(const kl_case *c, uint64_t seed)
{
    kl_data d;
    d.n = (size_t)(c->rows * c->cols);
    const size_t m = d.n > 0 ? d.n : 1;
    d.x = tt_alloc(m * 4);
    d.t = tt_alloc(m * 4);
    d.g = tt_alloc(m * 4);
    if (c->flags & TALLY_KL_INPUT_IS_PROB)
        tt_fill_uniform(d.x, d.n, seed, 0.01, 1.0);
    else
        tt_fill_uniform(d.x, d.n, seed, -6.0, 0.0);
    if (c->flags & TALLY_KL_LOG_TARGET)
        tt_fill_uniform(d.t, d.n, seed + 1, -6.0, 0.5);
    else
        tt_fill_uniform(d.t, d.n, seed + 1, 0.001, 1.0);
    tt_fill_uniform(d.g, d.n, seed + 2, -2.0, 2.0);
    return d;
}

static void kl_free(kl_data *d)
{
    free(d->x);
    free(d->t);
    free(d->g);
}

/* Runs the op on ctx; gx/gt (dense, n floats) receive the outputs that
 * c->want asks for. */
static void kl_run(tally_context *ctx, const kl_case *c, const kl_data *d, float *gx, float *gt)
{
    const int pointwise = c->reduction == TALLY_REDUCTION_NONE;
    const int64_t off = c->flat ? 4 : 2, pad = c->pad, rows = c->rows, cols = c->cols;
    tally_view x = put_at(ctx, d->x, rows, cols, pad, off), t = put_at(ctx, d->t, rows, cols, pad, off);
    tally_view g = pointwise ? put_at(ctx, d->g, rows, cols, pad, off) : put(ctx, d->g, 1, 1, 0);
    tally_view vx = (c->want & 1) ? put_at(ctx, NULL, rows, cols, pad, off) : absent();
    tally_view vt = (c->want & 2) ? put_at(ctx, NULL, rows, cols, c->flat ? pad : pad + 1, off) : absent();
    tt_ok(tally_kl_div_backward(ctx, x, t, g, c->reduction, c->flags, vx, vt), ctx);
    if (c->want & 1) get(vx, gx);
    if (c->want & 2) get(vt, gt);
    tally_buffer_release(x.buffer);
    tally_buffer_release(t.buffer);
    tally_buffer_release(g.buffer);
    tally_buffer_release(vx.buffer);
    tally_buffer_release(vt.buffer);
}

static double kl_scale(const kl_case *c)
{
    if (c->reduction == TALLY_REDUCTION_MEAN) return 1.0 / (double)(c->rows * c->cols);
    if (c->reduction == TALLY_REDUCTION_BATCHMEAN) return 1.0 / (double)c->rows;
    return 1.0;
}

static unsigned ref_flags(unsigned flags)
{
    return ((flags & TALLY_KL_LOG_TARGET) ? KL_LOG_TARGET : 0) | ((flags & TALLY_KL_INPUT_IS_PROB) ? KL_PROB : 0);
}

START_TEST(kl_backward_cases)
{
    static const kl_case cases[] = {
        {3, 5, 0, TALLY_REDUCTION_NONE, 0, 3, 0},
        {3, 5, 2, TALLY_REDUCTION_NONE, TALLY_KL_LOG_TARGET, 3, 0},
        {4, 7, 0, TALLY_REDUCTION_SUM, TALLY_KL_INPUT_IS_PROB, 3, 0},
        {4, 7, 1, TALLY_REDUCTION_MEAN, TALLY_KL_INPUT_IS_PROB | TALLY_KL_LOG_TARGET, 3, 0},
        {16, 33, 0, TALLY_REDUCTION_BATCHMEAN, 0, 3, 0},
        {16, 33, 3, TALLY_REDUCTION_BATCHMEAN, TALLY_KL_LOG_TARGET, 1, 0},
        {2, 1000, 0, TALLY_REDUCTION_MEAN, 0, 2, 0},
        {1, 20000, 0, TALLY_REDUCTION_SUM, TALLY_KL_INPUT_IS_PROB, 3, 0},
        {300, 64, 5, TALLY_REDUCTION_NONE, TALLY_KL_INPUT_IS_PROB, 3, 0},
        /* Dense and aligned: the GPU kernels' quad loop (and its tail). */
        {4, 7, 0, TALLY_REDUCTION_SUM, TALLY_KL_INPUT_IS_PROB, 3, 1},
        {16, 33, 0, TALLY_REDUCTION_BATCHMEAN, 0, 3, 1},
        {3, 5, 0, TALLY_REDUCTION_NONE, TALLY_KL_LOG_TARGET, 2, 1},
        {300, 64, 0, TALLY_REDUCTION_NONE, TALLY_KL_INPUT_IS_PROB, 3, 1},
        {1, 20001, 0, TALLY_REDUCTION_MEAN, TALLY_KL_INPUT_IS_PROB | TALLY_KL_LOG_TARGET, 1, 1},
    };
    tally_context *ctx = tt_context();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const kl_case *c = &cases[ci];
        kl_data d = kl_inputs(c, 100 + ci);
        float *gx = tt_alloc(d.n * 4), *gt = tt_alloc(d.n * 4), *hx = tt_alloc(d.n * 4), *ht = tt_alloc(d.n * 4);
        kl_run(ctx, c, &d, gx, gt);
        kl_run(host_context(), c, &d, hx, ht);
        const int pointwise = c->reduction == TALLY_REDUCTION_NONE;
        for (size_t i = 0; i < d.n; i++) {
            double g = pointwise ? (double)d.g[i] : (double)d.g[0] * kl_scale(c);
            double dx, dt, mx, mt;
            tally_ref_kl_grad(d.x[i], d.t[i], g, ref_flags(c->flags), &dx, &dt, &mx, &mt);
            if (c->want & 1) tt_assert_close(gx[i], dx, U * mx + 1e-30, "case %zu grad_input[%zu]", ci, i);
            if (c->want & 2) tt_assert_close(gt[i], dt, U * mt + 1e-30, "case %zu grad_target[%zu]", ci, i);
        }
        if (c->want & 1) assert_same_bits(gx, hx, d.n, "grad_input");
        if (c->want & 2) assert_same_bits(gt, ht, d.n, "grad_target");
        free(gx), free(gt), free(hx), free(ht);
        kl_free(&d);
    }
}
END_TEST

/* The float64 analytic gradients of this file agree with central finite
 * differences of the float64 loss, for every flag set. */
START_TEST(kl_reference_matches_finite_differences)
{
    tt_rand r = tt_rand_seed(7);
    for (unsigned flags = 0; flags < 4; flags++) {
        for (int k = 0; k < 200; k++) {
            double xin = (flags & KL_PROB) ? 0.05 + 0.9 * tt_rand_unit(&r) : -5.0 * tt_rand_unit(&r);
            double t = (flags & KL_LOG_TARGET) ? -4.0 + 4.0 * tt_rand_unit(&r) : 0.01 + 0.99 * tt_rand_unit(&r);
            double g = -2.0 + 4.0 * tt_rand_unit(&r);
            double dx, dt, mx, mt;
            tally_ref_kl_grad(xin, t, g, flags, &dx, &dt, &mx, &mt);
            const double h = 1e-6;
            double fx = g * (ref_kl_loss(xin + h, t, flags) - ref_kl_loss(xin - h, t, flags)) / (2 * h);
            double ft = g * (ref_kl_loss(xin, t + h, flags) - ref_kl_loss(xin, t - h, flags)) / (2 * h);
            ck_assert_msg(fabs(fx - dx) <= 1e-6 * (1 + fabs(dx)), "flags %u d/dx %g vs fd %g", flags, dx, fx);
            ck_assert_msg(fabs(ft - dt) <= 1e-6 * (1 + fabs(dt)), "flags %u d/dt %g vs fd %g", flags, dt, ft);
        }
    }
}
END_TEST

/* docs/ops.md's conventions, value by value (grad_out 1 per element). */
START_TEST(kl_backward_special_values)
{
    const float inf = INFINITY, nan = NAN;
    static const struct {
        unsigned flags;
        float x, t;
        uint32_t gx, gt; /* expected bits */
    } rows[] = {
        /* t == 0: d/dx = -(0 * 1) = -0, d/dt = -inf (torch: NaN). */
        {0, -1.0f, 0.0f, 0x80000000u, 0xff800000u},
        /* p = 0 and t == 0 under INPUT_IS_PROB: no mass, d/dp = -0. */
        {TALLY_KL_INPUT_IS_PROB, 0.0f, 0.0f, 0x80000000u, 0x7fc00000u},
        /* p = 0, t > 0: d/dp = -(inf) and d/dt = +inf. */
        {TALLY_KL_INPUT_IS_PROB, 0.0f, 0.5f, 0xff800000u, 0x7f800000u},
        /* Negative target: d/dx = -t, d/dt NaN (log of a negative). */
        {0, -1.0f, -0.5f, 0x3f000000u, 0x7fc00000u},
        /* x = 0: d/dx = -t exactly; d/dt = log(0.25) + 1 (checked with a tolerance). */
        {0, 0.0f, 0.25f, 0xbe800000u, 0x3faa2a3au},
        /* log target -inf: exp = 0, d/dx = -0, d/dt = 0 * inf = NaN. */
        {TALLY_KL_LOG_TARGET, -1.0f, -inf, 0x80000000u, 0x7fc00000u},
    };
    const size_t n = sizeof rows / sizeof rows[0];
    (void)nan;
    (void)inf;
    tally_context *ctx = tt_context();
    for (size_t i = 0; i < n; i++) {
        float one = 1.0f;
        tally_view x = put(ctx, &rows[i].x, 1, 1, 0), t = put(ctx, &rows[i].t, 1, 1, 0), g = put(ctx, &one, 1, 1, 0);
        tally_view vx = put(ctx, NULL, 1, 1, 0), vt = put(ctx, NULL, 1, 1, 0);
        tt_ok(tally_kl_div_backward(ctx, x, t, g, TALLY_REDUCTION_NONE, rows[i].flags, vx, vt), ctx);
        float gx, gt;
        get(vx, &gx);
        get(vt, &gt);
        if (i == 4) {
            /* x = 0, t = 0.25: d/dt = log(0.25) + 1 computed in float. */
            ck_assert_uint_eq(tt_bits(gx), rows[i].gx);
            tt_assert_close(gt, log(0.25) + 1.0, 2.0 * U, "d/dt at x = 0");
        } else {
            ck_assert_msg(tt_bits(gx) == rows[i].gx, "row %zu grad_input 0x%08x, expected 0x%08x", i, tt_bits(gx),
                          rows[i].gx);
            ck_assert_msg(tt_bits(gt) == rows[i].gt, "row %zu grad_target 0x%08x, expected 0x%08x", i, tt_bits(gt),
                          rows[i].gt);
        }
        tally_buffer_release(x.buffer), tally_buffer_release(t.buffer), tally_buffer_release(g.buffer);
        tally_buffer_release(vx.buffer), tally_buffer_release(vt.buffer);
    }
    /* A NaN anywhere gives the canonical NaN. */
    float xs[3] = {NAN, -1.0f, -1.0f}, ts[3] = {0.5f, NAN, 0.5f}, gs[3] = {1.0f, 1.0f, NAN};
    tally_view x = put(ctx, xs, 1, 3, 0), t = put(ctx, ts, 1, 3, 0), g = put(ctx, gs, 1, 3, 0);
    tally_view vx = put(ctx, NULL, 1, 3, 0), vt = put(ctx, NULL, 1, 3, 0);
    tt_ok(tally_kl_div_backward(ctx, x, t, g, TALLY_REDUCTION_NONE, 0, vx, vt), ctx);
    float gx[3], gt[3];
    get(vx, gx);
    get(vt, gt);
    ck_assert_uint_eq(tt_bits(gt[0]), 0x7fc00000u);
    ck_assert_uint_eq(tt_bits(gt[1]), 0x7fc00000u);
    ck_assert_uint_eq(tt_bits(gx[1]), 0x7fc00000u);
    ck_assert_uint_eq(tt_bits(gx[2]), 0x7fc00000u);
    ck_assert_uint_eq(tt_bits(gt[2]), 0x7fc00000u);
    tally_buffer_release(x.buffer), tally_buffer_release(t.buffer), tally_buffer_release(g.buffer);
    tally_buffer_release(vx.buffer), tally_buffer_release(vt.buffer);
}
END_TEST

/* Quads that mix the short forms with every other path. The GPU kernels
 * test each aligned quad of four pairs once and run the short forms on
 * the whole quad only where all four qualify; here each special pair sits
 * at every place of a quad (one special a quad, between ordinary quads),
 * under every flag set, for a pointwise and a reduced upstream gradient.
 * Each element must equal tally_kl_grad evaluated alone (the definition)
 * and the host, bit for bit, and ordinary ones float64 within 8 ulp. */
START_TEST(kl_backward_mixed_quads)
{
    const float inf = INFINITY, nan = NAN;
    static const struct {
        float x, t;
    } specials[] = {
        {0.25f, 0.0f},     /* t == 0 */
        {0.0f, 0.5f},      /* x == 0 */
        {1e-40f, 0.5f},    /* subnormal x */
        {0.5f, 1e-40f},    /* subnormal t */
        {-0.5f, 0.5f},     /* negative x */
        {0.5f, -0.5f},     /* negative t */
        {0.5f, 1e-35f},    /* exponents 116 apart: a normal quotient off the short path */
        {1e-37f, 0.5f},    /* exponents 122 apart the other way */
        {4.0f, 1.5e-38f},  /* a subnormal quotient */
        {1e-3f, 3e38f},    /* an overflowing quotient */
        {0.5f, 0x1p-100f}, /* exponents 99 apart: still short */
        {0x1p-101f, 0.5f}, /* exponents 100 apart: the short path's last */
        {0.5f, inf},
        {inf, 0.5f},
        {nan, 0.5f},
        {0.5f, nan},
    };
    const size_t ns = sizeof specials / sizeof specials[0];
    const int64_t rows = 4, cols = (int64_t)(8 * 4 * ns) / rows; /* a special every other quad */
    const size_t n = (size_t)(rows * cols);
    static const tally_reduction reductions[] = {TALLY_REDUCTION_NONE, TALLY_REDUCTION_BATCHMEAN};
    tally_context *ctx = tt_context();
    for (unsigned flags = 0; flags < 4; flags++) {
        for (size_t ri = 0; ri < 2; ri++) {
            const kl_case c = {rows, cols, 0, reductions[ri], flags, 3, 1};
            kl_data d = kl_inputs(&c, 900 + flags * 2 + ri);
            for (size_t j = 0; j < 2 * ns; j++) {
                /* Special j % ns at place j % 4 of quad 2j + 1 (the second
                 * round puts each at the next place). */
                const size_t at = 4 * (2 * j + 1) + (j + j / ns) % 4;
                d.x[at] = specials[j % ns].x;
                d.t[at] = (flags & TALLY_KL_LOG_TARGET) ? logf(specials[j % ns].t) : specials[j % ns].t;
            }
            /* Quads of ordinary pairs whose upstream gradient is NaN,
             * infinite or -0 (pointwise only): the short forms' results
             * canonicalised too. */
            const size_t after = 4 * (4 * ns + 2);
            if (ri == 0) {
                d.g[after + 1] = -nan;                     /* a NaN of either sign stays NaN */
                d.g[after + 6] = tt_float(0x7fa00001u);    /* a payload the product keeps */
                d.g[after + 11] = -inf, d.g[after + 16] = -0.0f;
            }
            float *gx = tt_alloc(n * 4), *gt = tt_alloc(n * 4), *hx = tt_alloc(n * 4), *ht = tt_alloc(n * 4);
            kl_run(ctx, &c, &d, gx, gt);
            kl_run(host_context(), &c, &d, hx, ht);
            assert_same_bits(gx, hx, n, "grad_input");
            assert_same_bits(gt, ht, n, "grad_target");
            const float gs = ri == 0 ? 0.0f : tally_grad_scale(d.g[0], 1u, (float)rows);
            for (size_t i = 0; i < n; i++) {
                const float g = ri == 0 ? d.g[i] : gs;
                const tally_grad2 e = tally_kl_grad(d.x[i], d.t[i], g, flags);
                ck_assert_msg(tt_bits(gx[i]) == tt_bits(tally_canonical(e.a)) &&
                                  tt_bits(gt[i]) == tt_bits(tally_canonical(e.b)),
                              "flags %u reduction %zu element %zu: 0x%08x 0x%08x, alone 0x%08x 0x%08x", flags, ri, i,
                              tt_bits(gx[i]), tt_bits(gt[i]), tt_bits(e.a), tt_bits(e.b));
                if ((i >= 4 * (4 * ns + 1) || (i / 4) % 2 == 0) && isfinite(g)) { /* the ordinary pairs */
                    double dx, dt, mx, mt;
                    tally_ref_kl_grad(d.x[i], d.t[i], (double)g, ref_flags(flags), &dx, &dt, &mx, &mt);
                    tt_assert_close(gx[i], dx, 8 * U * mx + 1e-30, "flags %u grad_input[%zu]", flags, i);
                    tt_assert_close(gt[i], dt, 8 * U * mt + 1e-30, "flags %u grad_target[%zu]", flags, i);
                }
            }
            free(gx), free(gt), free(hx), free(ht);
            kl_free(&d);
        }
    }
}
END_TEST

START_TEST(kl_backward_errors_and_empty)
{
    tally_context *ctx = tt_context();
    float v[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    tally_view x = put(ctx, v, 2, 3, 0), t = put(ctx, v, 2, 3, 0), g1 = put(ctx, v, 1, 1, 0);
    tally_view out = put(ctx, NULL, 2, 3, 0), small = put(ctx, NULL, 2, 2, 0);
    tt_assert_status(tally_kl_div_backward(ctx, x, t, g1, TALLY_REDUCTION_NONE, 0, out, absent()),
                     TALLY_SHAPE_MISMATCH, ctx);
    tt_assert_status(tally_kl_div_backward(ctx, x, t, x, TALLY_REDUCTION_SUM, 0, out, absent()),
                     TALLY_SHAPE_MISMATCH, ctx);
    tt_assert_status(tally_kl_div_backward(ctx, x, t, g1, TALLY_REDUCTION_SUM, 0, small, absent()),
                     TALLY_SHAPE_MISMATCH, ctx);
    tt_assert_status(tally_kl_div_backward(ctx, x, t, g1, TALLY_REDUCTION_SUM, 0, out, out),
                     TALLY_INVALID_ARGUMENT, ctx);
    tt_assert_status(tally_kl_div_backward(ctx, x, t, g1, TALLY_REDUCTION_SUM, 0, x, absent()),
                     TALLY_INVALID_ARGUMENT, ctx);
    tt_assert_status(tally_kl_div_backward(ctx, x, t, g1, TALLY_REDUCTION_SUM, 8u, out, absent()),
                     TALLY_INVALID_ARGUMENT, ctx);
    tt_assert_status(tally_kl_div_backward(ctx, x, t, g1, (tally_reduction)9, 0, out, absent()),
                     TALLY_INVALID_ARGUMENT, ctx);
    tt_assert_status(tally_kl_div_backward(NULL, x, t, g1, TALLY_REDUCTION_SUM, 0, out, absent()),
                     TALLY_INVALID_ARGUMENT, NULL);
    /* Nothing wanted: OK, nothing written. */
    tt_ok(tally_kl_div_backward(ctx, x, t, g1, TALLY_REDUCTION_SUM, 0, absent(), absent()), ctx);
    /* Empty: mean of nothing is refused, sum and none of nothing do nothing. */
    tally_view e = put(ctx, NULL, 0, 3, 0);
    tally_view eo = put(ctx, NULL, 0, 3, 0);
    tt_assert_status(tally_kl_div_backward(ctx, e, e, g1, TALLY_REDUCTION_MEAN, 0, eo, absent()),
                     TALLY_EMPTY_INPUT, ctx);
    tt_ok(tally_kl_div_backward(ctx, e, e, g1, TALLY_REDUCTION_SUM, 0, eo, absent()), ctx);
    tt_ok(tally_kl_div_backward(ctx, e, e, e, TALLY_REDUCTION_NONE, 0, eo, absent()), ctx);
    get(out, v); /* checks that no element of out was written */
    for (int i = 0; i < 6; i++) ck_assert_uint_eq(tt_bits(v[i]), TT_POISON);
    tally_buffer_release(x.buffer), tally_buffer_release(t.buffer), tally_buffer_release(g1.buffer);
    tally_buffer_release(out.buffer), tally_buffer_release(small.buffer);
    tally_buffer_release(e.buffer), tally_buffer_release(eo.buffer);
}
END_TEST

/* ---- Dirichlet-multinomial backward ------------------------------------- */

typedef struct dm_case {
    int64_t B, V, pad;
    int per_row;
    tally_reduction reduction;
    int zero_every; /* every k-th count is 0 (0: none) */
    int whole;      /* whole counts */
    int aligned;    /* 1: the counts' rows start 16-byte aligned (the GPU kernels' quad loads) */
    double top;     /* counts drawn below this (0: below 6) */
} dm_case;

/* The float64 gradient w.r.t. log_alpha ([1, V] or [B, V] into grad) and
 * its tolerance magnitude (harness/reference_backward.c). */
static void ref_dm_grad(const dm_case *c, const float *n, const float *la, const float *g, double *grad,
                        double *mag)
{
    const int64_t rows_out = c->per_row ? c->B : 1;
    int rc = tally_ref_dirichlet_multinomial_backward(tally_ref_mat_make(n, c->B, c->V, c->V),
                                                      tally_ref_mat_make(la, rows_out, c->V, c->V), g,
                                                      (int)c->reduction, grad, mag);
    ck_assert_int_ge(rc, 0);
}

static void dm_run(tally_context *ctx, const dm_case *c, const float *n, const float *la, const float *g,
                   float *grad)
{
    const int64_t rows_out = c->per_row ? c->B : 1;
    tally_view vn = put_at(ctx, n, c->B, c->V, c->pad, c->aligned ? 4 : 2), vla = put(ctx, la, rows_out, c->V, c->pad);
    tally_view vg = c->reduction == TALLY_REDUCTION_NONE ? put(ctx, g, c->B, 1, 0) : put(ctx, g, 1, 1, 0);
    tally_view vo = put(ctx, NULL, rows_out, c->V, c->pad + 1);
    tt_ok(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, c->reduction, 0, vo), ctx);
    get(vo, grad);
    tally_buffer_release(vn.buffer), tally_buffer_release(vla.buffer), tally_buffer_release(vg.buffer);
    tally_buffer_release(vo.buffer);
}

/* A case's inputs (counts for the caller to fill; log_alpha and the
 * upstream gradient drawn from seed and seed + 100) and its gradients on
 * the backend under test (got) and on the host (host), whose bits
 * dm_data_run compares. */
typedef struct dm_data {
    float *n, *la, *g, *got, *host;
    size_t nn, no;
} dm_data;

static dm_data dm_data_make(const dm_case *c, uint64_t seed)
{
    dm_data d;
    d.nn = (size_t)(c->B * c->V);
    d.no = (c->per_row ? (size_t)c->B : 1) * (size_t)c->V;
    d.n = tt_alloc(d.nn * 4), d.la = tt_alloc(d.no * 4), d.g = tt_alloc((size_t)c->B * 4 + 4);
    d.got = tt_alloc(d.no * 4), d.host = tt_alloc(d.no * 4);
    tt_fill_uniform(d.la, d.no, seed, -2.0, 2.0);
    tt_fill_uniform(d.g, (size_t)c->B + 1, seed + 100, -1.5, 1.5);
    return d;
}

static void dm_data_run(tally_context *ctx, const dm_case *c, dm_data *d)
{
    dm_run(ctx, c, d->n, d->la, d->g, d->got);
    dm_run(host_context(), c, d->n, d->la, d->g, d->host);
    assert_same_bits(d->got, d->host, d->no, "grad_log_alpha");
}

static void dm_data_free(dm_data *d)
{
    free(d->n), free(d->la), free(d->g), free(d->got), free(d->host);
}

START_TEST(dm_backward_cases)
{
    static const dm_case cases[] = {
        {4, 5, 0, 1, TALLY_REDUCTION_NONE, 3, 1, 0, 0.0},
        {4, 5, 2, 0, TALLY_REDUCTION_NONE, 3, 1, 0, 0.0},
        {7, 33, 1, 0, TALLY_REDUCTION_SUM, 0, 0, 0, 0.0},
        {7, 33, 0, 1, TALLY_REDUCTION_MEAN, 2, 0, 0, 0.0},
        {1, 40, 0, 0, TALLY_REDUCTION_SUM, 4, 1, 0, 0.0},
        {300, 17, 0, 0, TALLY_REDUCTION_MEAN, 5, 1, 0, 0.0},
        {20000, 3, 0, 0, TALLY_REDUCTION_SUM, 4, 1, 0, 0.0}, /* a two-level column tree */
        {3, 20000, 0, 1, TALLY_REDUCTION_NONE, 3, 1, 0, 0.0}, /* two-level row trees */
        {5, 20000, 0, 0, TALLY_REDUCTION_NONE, 3, 1, 0, 0.0},
        /* Shared alpha's column trees (tally_k_dm_bw_lanes on the GPU for
         * rows of up to 1024 columns, as every case above and below but
         * the last three): 64 lanes of one quad; one full tile of 16 quads
         * a lane; three tiles, the last of 103 quads (fewer active lanes)
         * ending in a short quad, with a column block (8) cut short and
         * fractional counts. */
        {250, 9, 1, 0, TALLY_REDUCTION_SUM, 0, 0, 0, 0.0},
        {16384, 5, 0, 0, TALLY_REDUCTION_SUM, 3, 1, 0, 0.0},
        {33179, 37, 3, 0, TALLY_REDUCTION_MEAN, 7, 0, 0, 0.0},
        /* Counts in aligned quads (rows of a multiple of 4 columns). */
        {40, 64, 0, 0, TALLY_REDUCTION_SUM, 3, 1, 1, 0.0},
        {9, 36, 0, 1, TALLY_REDUCTION_NONE, 0, 0, 1, 0.0},
        {16384, 8, 0, 0, TALLY_REDUCTION_MEAN, 3, 1, 1, 0.0},
        {6, 1024, 4, 0, TALLY_REDUCTION_SUM, 5, 1, 1, 0.0},
        /* Rows of 1021 to 1024 columns with fewer than 256 active lanes
         * (tally_k_dm_bw_lanes on the GPU sums each row's counts where it
         * weighs them): whole counts past the digamma tables (8 and 16
         * rows), and fractional counts in unaligned rows with a short last
         * quad, against a per-row upstream gradient. */
        {600, 1000, 0, 0, TALLY_REDUCTION_SUM, 3, 1, 1, 20.0},
        {70, 1023, 1, 0, TALLY_REDUCTION_NONE, 0, 0, 0, 0.0},
        /* Longer rows (tally_k_dm_bw_columns on the GPU): 64 lanes of one
         * quad, fractional counts, a column block cut short; 16 lanes
         * (fewer than a work-item's 32 residues), whole counts past the
         * tables; two tiles, the second of 29 active lanes. */
        {250, 1100, 1, 0, TALLY_REDUCTION_SUM, 0, 0, 0, 0.0},
        {40, 1028, 0, 0, TALLY_REDUCTION_SUM, 3, 1, 1, 20.0},
        {16500, 1025, 0, 0, TALLY_REDUCTION_MEAN, 7, 1, 0, 0.0},
    };
    tally_context *ctx = tt_context();
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const dm_case *c = &cases[ci];
        dm_data d = dm_data_make(c, 400 + ci);
        tt_fill_uniform(d.n, d.nn, 300 + ci, 0.0, c->top > 0.0 ? c->top : 6.0);
        for (size_t i = 0; i < d.nn; i++) {
            if (c->whole) d.n[i] = floorf(d.n[i]);
            if (c->zero_every && i % (size_t)c->zero_every == 0) d.n[i] = 0.0f;
        }
        dm_data_run(ctx, c, &d);
        double *ref = tt_alloc(d.no * 8), *mag = tt_alloc(d.no * 8);
        ref_dm_grad(c, d.n, d.la, d.g, ref, mag);
        for (size_t i = 0; i < d.no; i++)
            tt_assert_close(d.got[i], ref[i], U * mag[i] + 1e-30, "case %zu grad_log_alpha[%zu]", ci, i);
        free(ref), free(mag);
        dm_data_free(&d);
    }
}
END_TEST

/* Counts at the edges of the GPU kernels' digamma tables (whole counts
 * 0 .. 7 or 0 .. 15 take psi(n + a) from a table; kernels/backward.h's
 * tally_k_dm_bw_table_row decides which): both zeros, the tables' last rows
 * and the next whole numbers, fractions next to whole numbers, 2^23 and its
 * neighbours, 2^24, negative counts. Every backend's bits equal the
 * host's, for a shared alpha (the lanes kernel: aligned rows of 16
 * columns; the column kernel: rows of 1500) and per-row alphas. */
START_TEST(dm_backward_table_edges)
{
    /* Finite, non-negative: 0, -0, the least subnormal, 1 - ulp, 1, 1 + ulp,
     * 7 and its neighbours, 8, 14, 15, 16, 0.5, 2^23 and its neighbours,
     * 2^24. */
    static const uint32_t special[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x3f7fffffu, 0x3f800000u, 0x3f800001u, 0x40e00000u,
        0x40dfffffu, 0x40e00001u, 0x41000000u, 0x41600000u, 0x41700000u, 0x41800000u, 0x3f000000u,
        0x4b000000u, 0x4affffffu, 0x4b000001u, 0x4b800000u,
    };
    /* Negative counts make their element NaN (with a shared alpha, their
     * column): -1, -0.5, the least negative subnormal and -7, in the last
     * column only. (An infinite or NaN count would poison its whole row
     * through N.) */
    static const uint32_t poison[] = {0xbf800000u, 0xbf000000u, 0x80000001u, 0xc0e00000u};
    const size_t nspecial = sizeof special / sizeof special[0];
    static const dm_case shapes[] = {
        {24, 16, 0, 0, TALLY_REDUCTION_SUM, 0, 0, 1, 0.0},
        {24, 16, 0, 1, TALLY_REDUCTION_NONE, 0, 0, 1, 0.0},
        {6, 1500, 0, 0, TALLY_REDUCTION_MEAN, 0, 0, 0, 0.0},
    };
    tally_context *ctx = tt_context();
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const dm_case *c = &shapes[si];
        dm_data d = dm_data_make(c, 620 + si);
        /* Mostly small whole counts; the special values at every fifth
         * element, so that every column meets many of them. */
        tt_fill_uniform(d.n, d.nn, 610 + si, 0.0, 9.0);
        for (size_t i = 0; i < d.nn; i++) d.n[i] = floorf(d.n[i]);
        for (size_t i = 0; i < d.nn; i += 5) d.n[i] = tt_float(special[(i / 5) % nspecial]);
        for (int64_t b = 0; b < 4 && b < c->B; b++) d.n[b * c->V + c->V - 1] = tt_float(poison[b]);
        dm_data_run(ctx, c, &d);
        /* Only the poisoned column is NaN (so the others test the tables). */
        for (size_t i = 0; i < d.no; i++)
            ck_assert_msg(isnan(d.got[i]) == ((int64_t)(i % (size_t)c->V) == c->V - 1 &&
                                              (!c->per_row || (int64_t)(i / (size_t)c->V) < 4)),
                          "shape %zu grad_log_alpha[%zu] = %g", si, i, d.got[i]);
        dm_data_free(&d);
    }
}
END_TEST

/* The float64 analytic gradient agrees with central finite differences of
 * the float64 log-likelihood (per-row and shared alpha, fractional counts). */
static double ref_dm_loglik(const float *n, const double *la, int64_t B, int64_t V, int per_row)
{
    double total = 0;
    for (int64_t b = 0; b < B; b++) {
        const double *lr = la + (per_row ? b * V : 0);
        double A = 0, N = 0, S = 0;
        for (int64_t v = 0; v < V; v++) {
            double a = exp(lr[v]);
            A += a, N += n[b * V + v];
            S += lgamma(n[b * V + v] + a) - lgamma(a);
        }
        total += lgamma(A) - lgamma(N + A) + S;
    }
    return total;
}

START_TEST(dm_reference_matches_finite_differences)
{
    for (int per_row = 0; per_row < 2; per_row++) {
        const dm_case c = {3, 4, 0, per_row, TALLY_REDUCTION_SUM, 3, 0, 0, 0.0};
        float n[12], la[12], g[1] = {1.0f};
        tt_fill_uniform(n, 12, 11, 0.0, 5.0);
        n[0] = 0.0f;
        tt_fill_uniform(la, 12, 12, -1.5, 1.5);
        const int64_t no = per_row ? 12 : 4;
        double ref[12], mag[12], lad[12];
        ref_dm_grad(&c, n, la, g, ref, mag);
        for (int64_t i = 0; i < no; i++) {
            for (int64_t k = 0; k < no; k++) lad[k] = la[k];
            const double h = 1e-6;
            lad[i] = la[i] + h;
            double up = ref_dm_loglik(n, lad, 3, 4, per_row);
            lad[i] = la[i] - h;
            double dn = ref_dm_loglik(n, lad, 3, 4, per_row);
            double fd = (up - dn) / (2 * h);
            ck_assert_msg(fabs(fd - ref[i]) <= 1e-6 * (1 + fabs(fd)), "per_row %d [%lld]: analytic %g fd %g",
                          per_row, (long long)i, ref[i], fd);
        }
    }
}
END_TEST

START_TEST(dm_backward_edges_and_errors)
{
    tally_context *ctx = tt_context();
    /* A negative count makes its element NaN (per row) or its column NaN
     * (shared); an all-zero row has only its row part. */
    float n[6] = {0.0f, 0.0f, 0.0f, 1.0f, -1.0f, 2.0f}, la[3] = {0.0f, 0.5f, -0.5f}, g = 1.0f;
    tally_view vn = put(ctx, n, 2, 3, 0), vla = put(ctx, la, 1, 3, 0), vg = put(ctx, &g, 1, 1, 0);
    tally_view vo = put(ctx, NULL, 1, 3, 0);
    tt_ok(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, TALLY_REDUCTION_SUM, 0, vo), ctx);
    float out[3];
    get(vo, out);
    ck_assert_uint_eq(tt_bits(out[1]), 0x7fc00000u);
    ck_assert(isfinite(out[0]) && isfinite(out[2]));
    /* Row 0 (all zero) contributes psi(A) - psi(0 + A) = 0 exactly, so
     * column 0 equals the gradient of row 1 alone. */
    float n1[3] = {1.0f, -1.0f, 2.0f};
    tally_view vn1 = put(ctx, n1, 1, 3, 0), vo1 = put(ctx, NULL, 1, 3, 0);
    tt_ok(tally_dirichlet_multinomial_backward(ctx, vn1, vla, vg, TALLY_REDUCTION_SUM, 0, vo1), ctx);
    float out1[3];
    get(vo1, out1);
    ck_assert_uint_eq(tt_bits(out[0]), tt_bits(out1[0]));
    /* Errors. */
    tally_view bad = put(ctx, NULL, 1, 2, 0);
    tt_assert_status(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, TALLY_REDUCTION_SUM, 0, bad),
                     TALLY_SHAPE_MISMATCH, ctx);
    tt_assert_status(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, TALLY_REDUCTION_BATCHMEAN, 0, vo),
                     TALLY_INVALID_ARGUMENT, ctx);
    tt_assert_status(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, TALLY_REDUCTION_NONE, 0, vo),
                     TALLY_SHAPE_MISMATCH, ctx);
    tt_assert_status(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, TALLY_REDUCTION_SUM, 0, absent()),
                     TALLY_INVALID_ARGUMENT, ctx);
    tt_assert_status(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, TALLY_REDUCTION_SUM, 0, vla),
                     TALLY_INVALID_ARGUMENT, ctx);
    /* Zero rows with a shared alpha: the empty column sums give a * 0 = 0. */
    tally_view e = put(ctx, NULL, 0, 3, 0);
    tt_ok(tally_dirichlet_multinomial_backward(ctx, e, vla, vg, TALLY_REDUCTION_SUM, 0, vo), ctx);
    get(vo, out);
    for (int v = 0; v < 3; v++) ck_assert_uint_eq(tt_bits(out[v]), 0u);
    tt_assert_status(tally_dirichlet_multinomial_backward(ctx, e, vla, vg, TALLY_REDUCTION_MEAN, 0, vo),
                     TALLY_EMPTY_INPUT, ctx);
    tally_buffer_release(vn.buffer), tally_buffer_release(vla.buffer), tally_buffer_release(vg.buffer);
    tally_buffer_release(vo.buffer), tally_buffer_release(vn1.buffer), tally_buffer_release(vo1.buffer);
    tally_buffer_release(bad.buffer), tally_buffer_release(e.buffer);
}
END_TEST

/* ---- Training loop --------------------------------------------------------
 * Fits a shared log_alpha [1, V] to synthetic counts by 100 steps of plain
 * gradient descent on the mean negative log-likelihood: the gradient from
 * tally_dirichlet_multinomial_backward (grad_out = -1), the update
 * la -= lr * grad in float on the host. The backend's final parameters must
 * equal the host backend's bit for bit, the loss must fall, and the result
 * must be near the same loop run in float64. */

#define TRAIN_B 64
#define TRAIN_V 12
#define TRAIN_STEPS 100
#define TRAIN_LR 0.05f

static void train(tally_context *ctx, const float *counts, float *la, float *first_loss, float *last_loss)
{
    tally_view vn = put(ctx, counts, TRAIN_B, TRAIN_V, 0), vla = put(ctx, la, 1, TRAIN_V, 0);
    float minus_one = -1.0f;
    tally_view vg = put(ctx, &minus_one, 1, 1, 0), vo = put(ctx, NULL, 1, TRAIN_V, 0), vl = put(ctx, NULL, 1, 1, 0);
    for (int s = 0; s <= TRAIN_STEPS; s++) {
        tt_write(vla.buffer, (size_t)vla.offset, la, TRAIN_V);
        float loss;
        tt_ok(tally_dirichlet_multinomial(ctx, vn, vla, TALLY_REDUCTION_MEAN, 0, vl), ctx);
        tt_ok(tally_read_scalar(ctx, vl, &loss), ctx);
        if (s == 0) *first_loss = -loss;
        *last_loss = -loss;
        if (s == TRAIN_STEPS) break;
        tt_ok(tally_dirichlet_multinomial_backward(ctx, vn, vla, vg, TALLY_REDUCTION_MEAN, 0, vo), ctx);
        float grad[TRAIN_V];
        get(vo, grad);
        for (int v = 0; v < TRAIN_V; v++) la[v] = la[v] - TRAIN_LR * grad[v];
    }
    tally_buffer_release(vn.buffer), tally_buffer_release(vla.buffer), tally_buffer_release(vg.buffer);
    tally_buffer_release(vo.buffer), tally_buffer_release(vl.buffer);
}

START_TEST(dm_training_loop)
{
    float counts[TRAIN_B * TRAIN_V];
    tt_rand r = tt_rand_seed(2026);
    /* Counts from a skewed profile: column v has mean about 1 + v / 2. */
    for (int b = 0; b < TRAIN_B; b++)
        for (int v = 0; v < TRAIN_V; v++)
            counts[b * TRAIN_V + v] = (float)tt_rand_below(&r, (uint64_t)(2 + v));
    float la[TRAIN_V] = {0}, la_host[TRAIN_V] = {0};
    float first, last, first_h, last_h;
    train(tt_context(), counts, la, &first, &last);
    train(host_context(), counts, la_host, &first_h, &last_h);
    assert_same_bits(la, la_host, TRAIN_V, "trained log_alpha");
    ck_assert_uint_eq(tt_bits(last), tt_bits(last_h));
    ck_assert_msg(last < first - 0.5f, "loss fell only from %g to %g", (double)first, (double)last);
    /* The same loop in float64. */
    double lad[TRAIN_V] = {0};
    const dm_case c = {TRAIN_B, TRAIN_V, 0, 0, TALLY_REDUCTION_MEAN, 0, 1, 0, 0.0};
    float minus_one = -1.0f, laf[TRAIN_V];
    double grad[TRAIN_V], mag[TRAIN_V];
    for (int s = 0; s < TRAIN_STEPS; s++) {
        for (int v = 0; v < TRAIN_V; v++) laf[v] = (float)lad[v];
        ref_dm_grad(&c, counts, laf, &minus_one, grad, mag);
        for (int v = 0; v < TRAIN_V; v++) lad[v] -= (double)TRAIN_LR * grad[v];
    }
    for (int v = 0; v < TRAIN_V; v++)
        tt_assert_close(la[v], lad[v], 1e-5, "log_alpha[%d] after %d steps against float64", v, TRAIN_STEPS);
}
END_TEST

/* ---- Gaussian mixture backward ------------------------------------------ */

typedef struct gmm_case {
    int64_t B, K, D;
    int check_ref; /* 0: bits against the host only (outside the reference's size limits) */
    int aligned;   /* 1: z, mu and log_var dense from element 4 (with D % 4 == 0, the GPU D-trees' quad loads) */
} gmm_case;

typedef struct gmm_data {
    float *z, *mu, *lv, *logits, *gq, *gz;
} gmm_data;

static gmm_data gmm_inputs(const gmm_case *c, uint64_t seed)
{
    gmm_data d;
    const size_t BD = (size_t)(c->B * c->D), BKD = (size_t)(c->B * c->K * c->D);
    d.z = tt_alloc(BD * 4 + 4), d.gz = tt_alloc(BD * 4 + 4);
    d.mu = tt_alloc(BKD * 4 + 4), d.lv = tt_alloc(BKD * 4 + 4);
    d.logits = tt_alloc((size_t)c->K * 4), d.gq = tt_alloc((size_t)c->B * 4 + 4);
    tt_fill_normal(d.z, BD, seed, 0.0, 1.0);
    tt_fill_normal(d.gz, BD, seed + 1, 0.0, 1.0);
    tt_fill_normal(d.mu, BKD, seed + 2, 0.0, 1.0);
    tt_fill_uniform(d.lv, BKD, seed + 3, -1.0, 1.0);
    tt_fill_normal(d.logits, (size_t)c->K, seed + 4, 0.0, 1.0);
    tt_fill_uniform(d.gq, (size_t)c->B, seed + 5, -1.0, 1.0);
    return d;
}

static void gmm_free(gmm_data *d)
{
    free(d->z), free(d->gz), free(d->mu), free(d->lv), free(d->logits), free(d->gq);
}

/* The outputs of one backward call, dense. */
typedef struct gmm_grads {
    float *gz, *gmu, *glv, *glogits;
} gmm_grads;

static gmm_grads gmm_grads_alloc(const gmm_case *c)
{
    gmm_grads g;
    g.gz = tt_alloc((size_t)(c->B * c->D) * 4 + 4);
    g.gmu = tt_alloc((size_t)(c->B * c->K * c->D) * 4 + 4);
    g.glv = tt_alloc((size_t)(c->B * c->K * c->D) * 4 + 4);
    g.glogits = tt_alloc((size_t)c->K * 4);
    return g;
}

static void gmm_grads_free(gmm_grads *g)
{
    free(g->gz), free(g->gmu), free(g->glv), free(g->glogits);
}

/* log_prob backward (sample = 0) or sample backward (sample = 1, rng). */
static void gmm_run(tally_context *ctx, const gmm_case *c, const gmm_data *d, int sample, tally_rng rng,
                    gmm_grads *out)
{
    const int64_t KD = c->K * c->D;
    tally_view z = c->aligned ? put_at(ctx, d->z, c->B, c->D, 0, 4) : put(ctx, d->z, c->B, c->D, 1);
    tally_view mu = c->aligned ? put_at(ctx, d->mu, c->B, KD, 0, 4) : put(ctx, d->mu, c->B, KD, 2);
    tally_view lv = c->aligned ? put_at(ctx, d->lv, c->B, KD, 0, 4) : put(ctx, d->lv, c->B, KD, 0);
    tally_view lg = put(ctx, d->logits, 1, c->K, 0), gq = put(ctx, d->gq, c->B, 1, 0);
    tally_view gzi = put(ctx, d->gz, c->B, c->D, 0);
    /* Aligned cases write aligned gradient rows too: CUDA then takes the
     * whole backward a warp a row (tally_k_gmm_bw_warp) where D <= 128. */
    tally_view gz = put(ctx, NULL, c->B, c->D, 3);
    tally_view gmu = c->aligned ? put_at(ctx, NULL, c->B, KD, 0, 4) : put(ctx, NULL, c->B, KD, 1);
    tally_view glv = c->aligned ? put_at(ctx, NULL, c->B, KD, 4, 8) : put(ctx, NULL, c->B, KD, 0);
    tally_view glg = put(ctx, NULL, 1, c->K, 0);
    if (sample)
        tt_ok(tally_gmm_sample_backward(ctx, mu, lv, lg, c->K, rng, gzi, gq, gmu, glv, glg), ctx);
    else
        tt_ok(tally_gmm_log_prob_backward(ctx, z, mu, lv, lg, c->K, gq, gz, gmu, glv, glg), ctx);
    if (!sample) get(gz, out->gz);
    get(gmu, out->gmu);
    get(glv, out->glv);
    float lgv[64];
    get(glg, c->K > 1 ? out->glogits : lgv);
    tally_buffer_release(z.buffer), tally_buffer_release(mu.buffer), tally_buffer_release(lv.buffer);
    tally_buffer_release(lg.buffer), tally_buffer_release(gq.buffer), tally_buffer_release(gzi.buffer);
    tally_buffer_release(gz.buffer), tally_buffer_release(gmu.buffer), tally_buffer_release(glv.buffer);
    tally_buffer_release(glg.buffer);
}

static const gmm_case gmm_cases[] = {
    {3, 1, 5, 1, 0}, {4, 3, 7, 1, 0}, {17, 4, 33, 1, 0}, {300, 8, 8, 1, 0}, {2, 2, 20000, 0, 0},
    {20000, 2, 3, 0, 0},
    {6, 11, 9, 1, 0}, /* more components than the GPU kernel keeps in registers (TALLY_K_GMM_BW_KEEP) */
    /* Aligned quads: one level, and a D of several tree levels. */
    {300, 8, 8, 1, 1}, {17, 3, 36, 1, 1}, {2, 2, 20000, 0, 1},
    /* Rows that fit a warp on CUDA: the founding shape's row, all 32 lanes
     * of a tree, one component, a D of 4, and a D past 128. */
    {256, 4, 64, 1, 1}, {40, 8, 128, 1, 1}, {33, 1, 12, 1, 1}, {9, 5, 4, 1, 1}, {7, 2, 132, 1, 1},
    /* More rows than a one-wave grid has warps, so that CUDA's warp
     * kernel copies each warp's next row into its stage. */
    {6000, 3, 16, 1, 1},
    /* More than 32 rows a warp of a one-wave grid: the warp kernel's batch
     * of row uniforms is drawn again. */
    {100000, 2, 4, 0, 1},
};

START_TEST(gmm_log_prob_backward_cases)
{
    tally_context *ctx = tt_context();
    const tally_rng none = {0, 0, 0};
    for (size_t ci = 0; ci < sizeof gmm_cases / sizeof gmm_cases[0]; ci++) {
        const gmm_case *c = &gmm_cases[ci];
        gmm_data d = gmm_inputs(c, 700 + 10 * ci);
        gmm_grads got = gmm_grads_alloc(c), host = gmm_grads_alloc(c);
        gmm_run(ctx, c, &d, 0, none, &got);
        gmm_run(host_context(), c, &d, 0, none, &host);
        const size_t BD = (size_t)(c->B * c->D), BKD = (size_t)(c->B * c->K * c->D);
        assert_same_bits(got.gz, host.gz, BD, "grad_z");
        assert_same_bits(got.gmu, host.gmu, BKD, "grad_mu");
        assert_same_bits(got.glv, host.glv, BKD, "grad_log_var");
        if (c->K > 1) assert_same_bits(got.glogits, host.glogits, (size_t)c->K, "grad_logits");
        if (c->check_ref) {
            double *rz = tt_alloc(BD * 8), *mz = tt_alloc(BD * 8), *rmu = tt_alloc(BKD * 8), *mmu = tt_alloc(BKD * 8);
            double *rlv = tt_alloc(BKD * 8), *mlv = tt_alloc(BKD * 8), rl[64], ml[64];
            ck_assert_int_eq(tally_ref_gmm_log_prob_backward(d.z, d.mu, d.lv, d.logits, c->B, c->K, c->D, d.gq, rz,
                                                             mz, rmu, mmu, rlv, mlv, rl, ml),
                             0);
            for (size_t i = 0; i < BD; i++) tt_assert_close(got.gz[i], rz[i], U * mz[i] + 1e-30, "case %zu grad_z[%zu]", ci, i);
            for (size_t i = 0; i < BKD; i++) {
                tt_assert_close(got.gmu[i], rmu[i], U * mmu[i] + 1e-30, "case %zu grad_mu[%zu]", ci, i);
                tt_assert_close(got.glv[i], rlv[i], U * mlv[i] + 1e-30, "case %zu grad_log_var[%zu]", ci, i);
            }
            for (int64_t k = 0; c->K > 1 && k < c->K; k++)
                tt_assert_close(got.glogits[k], rl[k], U * ml[k] + 1e-30, "case %zu grad_logits[%lld]", ci, (long long)k);
            free(rz), free(mz), free(rmu), free(mmu), free(rlv), free(mlv);
        }
        gmm_grads_free(&got), gmm_grads_free(&host);
        gmm_free(&d);
    }
}
END_TEST

/* The float64 analytic gradients against central finite differences of the
 * float64 log density. */
START_TEST(gmm_reference_matches_finite_differences)
{
    enum { K = 3, D = 4 };
    double z[D], mu[K * D], lv[K * D], lg[K], dz[D], dmu[K * D], dlv[K * D], dl[K] = {0};
    tt_rand r = tt_rand_seed(99);
    for (int i = 0; i < D; i++) z[i] = 2.0 * tt_rand_unit(&r) - 1.0;
    for (int i = 0; i < K * D; i++) mu[i] = 2.0 * tt_rand_unit(&r) - 1.0, lv[i] = tt_rand_unit(&r) - 0.5;
    for (int k = 0; k < K; k++) lg[k] = tt_rand_unit(&r);
    const double g = 0.7, h = 1e-6;
    tally_ref_gmm_row_backward(z, mu, lv, lg, K, D, g, dz, dmu, dlv, dl, NULL);
    double *params[4] = {z, mu, lv, lg}, *grads[4] = {dz, dmu, dlv, dl};
    const int sizes[4] = {D, K * D, K * D, K};
    for (int p = 0; p < 4; p++)
        for (int i = 0; i < sizes[p]; i++) {
            const double keep = params[p][i];
            params[p][i] = keep + h;
            double up = tally_ref_gmm_row_logq(z, mu, lv, lg, K, D);
            params[p][i] = keep - h;
            double dn = tally_ref_gmm_row_logq(z, mu, lv, lg, K, D);
            params[p][i] = keep;
            double fd = g * (up - dn) / (2 * h);
            ck_assert_msg(fabs(fd - grads[p][i]) <= 1e-6 * (1 + fabs(fd)), "param %d [%d]: analytic %g fd %g", p, i,
                          grads[p][i], fd);
        }
}
END_TEST

/* The sample's backward equals the log density's backward at the z the
 * forward drew, plus the reparameterisation's terms in component c:
 * d/dmu_c += G and d/dlog_var_c += G * 0.5 * std * eps, with G = dL/dz +
 * dlogq/dz, eps the forward's normals (the float64 reference stream). */
START_TEST(gmm_sample_backward_cases)
{
    tally_context *ctx = tt_context();
    const tally_rng rng = {.seed = 0x1234abcdull, .subsequence = 5, .offset = 6};
    /* Offset 8 puts each aligned row's normals on whole Philox blocks (the
     * CUDA warp kernel's one block a quad); 6 does not. */
    const tally_rng on_blocks = {.seed = 0x1234abcdull, .subsequence = 5, .offset = 8};
    for (size_t ci = 0; ci < sizeof gmm_cases / sizeof gmm_cases[0]; ci++) {
        const gmm_case *c = &gmm_cases[ci];
        const int64_t KD = c->K * c->D;
        gmm_data d = gmm_inputs(c, 900 + 10 * ci);
        gmm_grads got = gmm_grads_alloc(c), host = gmm_grads_alloc(c);
        const size_t BD = (size_t)(c->B * c->D), BKD = (size_t)(c->B * KD);
        if (c->aligned) {
            gmm_run(ctx, c, &d, 1, on_blocks, &got);
            gmm_run(host_context(), c, &d, 1, on_blocks, &host);
            assert_same_bits(got.gmu, host.gmu, BKD, "grad_mu (offset 8)");
            assert_same_bits(got.glv, host.glv, BKD, "grad_log_var (offset 8)");
            if (c->K > 1) assert_same_bits(got.glogits, host.glogits, (size_t)c->K, "grad_logits (offset 8)");
        }
        gmm_run(ctx, c, &d, 1, rng, &got);
        gmm_run(host_context(), c, &d, 1, rng, &host);
        assert_same_bits(got.gmu, host.gmu, BKD, "grad_mu");
        assert_same_bits(got.glv, host.glv, BKD, "grad_log_var");
        if (c->K > 1) assert_same_bits(got.glogits, host.glogits, (size_t)c->K, "grad_logits");
        if (c->check_ref) {
            /* The forward's z and components, from the backend under test. */
            tally_view mu = put(ctx, d.mu, c->B, KD, 0), lv = put(ctx, d.lv, c->B, KD, 0);
            tally_view lg = put(ctx, d.logits, 1, c->K, 0), zv = put(ctx, NULL, c->B, c->D, 0);
            tally_view lq = put(ctx, NULL, c->B, 1, 0);
            tally_buffer *cb = tt_buffer(ctx, (size_t)c->B);
            tt_ok(tally_gmm_sample(ctx, mu, lv, lg, c->K, rng, zv, lq, tally_view_typed(cb, TALLY_I32, 0, c->B, 1), NULL),
                  ctx);
            float *z = tt_alloc(BD * 4 + 4);
            int32_t *comp = tt_alloc((size_t)c->B * 4);
            get(zv, z);
            tt_read(cb, 0, comp, (size_t)c->B);
            double *rz = tt_alloc(BD * 8), *mz = tt_alloc(BD * 8), *rmu = tt_alloc(BKD * 8), *mmu = tt_alloc(BKD * 8);
            double *rlv = tt_alloc(BKD * 8), *mlv = tt_alloc(BKD * 8), rl[64], ml[64];
            ck_assert_int_eq(tally_ref_gmm_log_prob_backward(z, d.mu, d.lv, d.logits, c->B, c->K, c->D, d.gq, rz, mz,
                                                             rmu, mmu, rlv, mlv, rl, ml),
                             0);
            for (int64_t b = 0; b < c->B; b++) {
                ck_assert(comp[b] >= 0 && comp[b] < c->K);
                for (int64_t dd = 0; dd < c->D; dd++) {
                    const double G = (double)d.gz[b * c->D + dd] + rz[b * c->D + dd];
                    const uint64_t si = tally_ref_gmm_eps_index(rng.offset, (uint64_t)c->B, (uint64_t)c->D,
                                                                (uint64_t)b, (uint64_t)dd);
                    const size_t i = (size_t)(b * KD + comp[b] * c->D + dd);
                    const double t = exp(0.5 * (double)d.lv[i]) * tally_ref_rng_normal(rng.seed, rng.subsequence, si);
                    const double gerr = mz[b * c->D + dd] + 32.0 * fabs(G);
                    rmu[i] += G;
                    mmu[i] += gerr;
                    rlv[i] += G * 0.5 * t;
                    mlv[i] += gerr * fabs(0.5 * t) + 32.0 * fabs(G * t);
                }
            }
            for (size_t i = 0; i < BKD; i++) {
                tt_assert_close(got.gmu[i], rmu[i], U * mmu[i] + 1e-30, "case %zu sample grad_mu[%zu]", ci, i);
                tt_assert_close(got.glv[i], rlv[i], U * mlv[i] + 1e-30, "case %zu sample grad_log_var[%zu]", ci, i);
            }
            for (int64_t k = 0; c->K > 1 && k < c->K; k++)
                tt_assert_close(got.glogits[k], rl[k], U * ml[k] + 1e-30, "case %zu sample grad_logits[%lld]", ci,
                                (long long)k);
            free(rz), free(mz), free(rmu), free(mmu), free(rlv), free(mlv), free(z), free(comp);
            tally_buffer_release(mu.buffer), tally_buffer_release(lv.buffer), tally_buffer_release(lg.buffer);
            tally_buffer_release(zv.buffer), tally_buffer_release(lq.buffer), tally_buffer_release(cb);
        }
        gmm_grads_free(&got), gmm_grads_free(&host);
        gmm_free(&d);
    }
}
END_TEST

START_TEST(gmm_backward_edges_and_errors)
{
    tally_context *ctx = tt_context();
    const gmm_case c = {3, 2, 4, 1, 0};
    gmm_data d = gmm_inputs(&c, 1234);
    d.logits[1] = NAN; /* no component can be drawn: every row NaN */
    const tally_rng rng = {1, 2, 3};
    for (int aligned = 0; aligned < 2; aligned++) {
        /* Aligned rows take CUDA's warp kernel, which writes the NaN rows itself. */
        const int64_t at = aligned ? 4 : 2;
        tally_view mu = put_at(ctx, d.mu, 3, 8, 0, at), lv = put_at(ctx, d.lv, 3, 8, 0, at);
        tally_view lg = put(ctx, d.logits, 1, 2, 0), gq = put(ctx, d.gq, 3, 1, 0), gmu = put_at(ctx, NULL, 3, 8, 0, at);
        tally_view glv = put_at(ctx, NULL, 3, 8, 4, at), glg = put(ctx, NULL, 1, 2, 0);
        tt_ok(tally_gmm_sample_backward(ctx, mu, lv, lg, 2, rng, absent(), gq, gmu, glv, glg), ctx);
        float out[24], logit_grads[2];
        get(gmu, out);
        for (int i = 0; i < 24; i++) ck_assert_uint_eq(tt_bits(out[i]), 0x7fc00000u);
        get(glv, out);
        for (int i = 0; i < 24; i++) ck_assert_uint_eq(tt_bits(out[i]), 0x7fc00000u);
        get(glg, logit_grads);
        ck_assert(isnan(logit_grads[0]) && isnan(logit_grads[1]));
        tally_buffer_release(mu.buffer), tally_buffer_release(lv.buffer), tally_buffer_release(lg.buffer);
        tally_buffer_release(gq.buffer), tally_buffer_release(gmu.buffer), tally_buffer_release(glv.buffer);
        tally_buffer_release(glg.buffer);
    }
    tally_view mu = put(ctx, d.mu, 3, 8, 0), lv = put(ctx, d.lv, 3, 8, 0), lg = put(ctx, d.logits, 1, 2, 0);
    tally_view gq = put(ctx, d.gq, 3, 1, 0), gmu = put(ctx, NULL, 3, 8, 0);
    /* Errors: K not dividing mu's columns, a wrong output shape, an output
     * over an input, a stream that would pass 2^64. */
    tally_view bad = put(ctx, NULL, 3, 7, 0);
    tt_assert_status(tally_gmm_sample_backward(ctx, mu, lv, lg, 3, rng, absent(), gq, gmu, absent(), absent()),
                     TALLY_SHAPE_MISMATCH, ctx);
    tt_assert_status(tally_gmm_sample_backward(ctx, mu, lv, lg, 2, rng, absent(), gq, bad, absent(), absent()),
                     TALLY_SHAPE_MISMATCH, ctx);
    tt_assert_status(tally_gmm_sample_backward(ctx, mu, lv, lg, 2, rng, absent(), gq, mu, absent(), absent()),
                     TALLY_INVALID_ARGUMENT, ctx);
    const tally_rng late = {1, 2, UINT64_MAX - 4};
    tt_assert_status(tally_gmm_sample_backward(ctx, mu, lv, lg, 2, late, absent(), gq, gmu, absent(), absent()),
                     TALLY_RNG_EXHAUSTED, ctx);
    tally_view z = put(ctx, d.z, 3, 4, 0);
    tt_assert_status(tally_gmm_log_prob_backward(ctx, z, mu, lv, lg, 2, absent(), absent(), gmu, absent(), absent()),
                     TALLY_INVALID_ARGUMENT, ctx);
    tally_buffer_release(mu.buffer), tally_buffer_release(lv.buffer), tally_buffer_release(lg.buffer);
    tally_buffer_release(gq.buffer), tally_buffer_release(gmu.buffer), tally_buffer_release(bad.buffer);
    tally_buffer_release(z.buffer);
    gmm_free(&d);
}
END_TEST

/* A VAE-style objective on the mixture: 100 steps of gradient descent on
 * the Monte-Carlo estimate mean_b(0.5 |z_b|^2 + log q(z_b)) (KL(q || N(0, I))
 * up to a constant) with respect to mu, log_var and the logits, z drawn by
 * tally_gmm_sample and the gradients from tally_gmm_sample_backward with the
 * same stream position (grad_z = z / B, grad_log_q = 1 / B). The backend's
 * final parameters must equal the host's bit for bit, and the objective
 * must fall. */
#define VAE_B 16
#define VAE_K 3
#define VAE_D 4
#define VAE_KD (VAE_K * VAE_D)

static void vae_train(tally_context *ctx, float *mu, float *lv, float *lg, float *first, float *last)
{
    tally_view vmu = put(ctx, mu, VAE_B, VAE_KD, 0), vlv = put(ctx, lv, VAE_B, VAE_KD, 0);
    tally_view vlg = put(ctx, lg, 1, VAE_K, 0), vz = put(ctx, NULL, VAE_B, VAE_D, 0), vq = put(ctx, NULL, VAE_B, 1, 0);
    tally_view vgz = put(ctx, NULL, VAE_B, VAE_D, 0), vgq = put(ctx, NULL, VAE_B, 1, 0);
    tally_view gmu = put(ctx, NULL, VAE_B, VAE_KD, 0), glv = put(ctx, NULL, VAE_B, VAE_KD, 0), glg = put(ctx, NULL, 1, VAE_K, 0);
    tally_rng rng = {.seed = 77, .subsequence = 1, .offset = 0};
    float gq[VAE_B];
    for (int b = 0; b < VAE_B; b++) gq[b] = 1.0f / VAE_B;
    tt_write(vgq.buffer, (size_t)vgq.offset, gq, VAE_B);
    const float lr = 0.05f;
    for (int s = 0; s < 100; s++) {
        tt_write(vmu.buffer, (size_t)vmu.offset, mu, VAE_B * VAE_KD);
        tt_write(vlv.buffer, (size_t)vlv.offset, lv, VAE_B * VAE_KD);
        tt_write(vlg.buffer, (size_t)vlg.offset, lg, VAE_K);
        uint64_t used = 0;
        tt_ok(tally_gmm_sample(ctx, vmu, vlv, vlg, VAE_K, rng, vz, vq, absent(), &used), ctx);
        float z[VAE_B * VAE_D], q[VAE_B], gz[VAE_B * VAE_D];
        get(vz, z);
        get(vq, q);
        float loss = 0.0f;
        for (int b = 0; b < VAE_B; b++) {
            float zz = 0.0f;
            for (int d = 0; d < VAE_D; d++) zz = zz + z[b * VAE_D + d] * z[b * VAE_D + d];
            loss = loss + (0.5f * zz + q[b]) / VAE_B;
        }
        for (int i = 0; i < VAE_B * VAE_D; i++) gz[i] = z[i] / VAE_B;
        tt_write(vgz.buffer, (size_t)vgz.offset, gz, VAE_B * VAE_D);
        tt_ok(tally_gmm_sample_backward(ctx, vmu, vlv, vlg, VAE_K, rng, vgz, vgq, gmu, glv, glg), ctx);
        float dmu[VAE_B * VAE_KD], dlv[VAE_B * VAE_KD], dlg[VAE_K];
        get(gmu, dmu);
        get(glv, dlv);
        get(glg, dlg);
        /* Per-row parameters get the per-row gradient times B (each row is
         * its own posterior); the shared logits the mean's gradient. */
        for (int i = 0; i < VAE_B * VAE_KD; i++) {
            mu[i] = mu[i] - lr * VAE_B * dmu[i];
            lv[i] = lv[i] - lr * VAE_B * dlv[i];
        }
        for (int k = 0; k < VAE_K; k++) lg[k] = lg[k] - lr * dlg[k];
        tt_ok(tally_rng_advance(&rng, used), ctx);
        if (s < 10) *first = (s == 0 ? 0.0f : *first) + loss / 10;
        if (s >= 90) *last = (s == 90 ? 0.0f : *last) + loss / 10;
    }
    tally_view all[] = {vmu, vlv, vlg, vz, vq, vgz, vgq, gmu, glv, glg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tally_buffer_release(all[i].buffer);
}

START_TEST(gmm_training_loop)
{
    float mu[VAE_B * VAE_KD], lv[VAE_B * VAE_KD], lg[VAE_K] = {0.3f, -0.2f, 0.1f};
    tt_fill_normal(mu, VAE_B * VAE_KD, 4242, 0.0, 2.0);
    tt_fill_uniform(lv, VAE_B * VAE_KD, 4243, -1.0, 1.0);
    float mu_h[VAE_B * VAE_KD], lv_h[VAE_B * VAE_KD], lg_h[VAE_K];
    memcpy(mu_h, mu, sizeof mu), memcpy(lv_h, lv, sizeof lv), memcpy(lg_h, lg, sizeof lg);
    float first = 0, last = 0, first_h = 0, last_h = 0;
    vae_train(tt_context(), mu, lv, lg, &first, &last);
    vae_train(host_context(), mu_h, lv_h, lg_h, &first_h, &last_h);
    assert_same_bits(mu, mu_h, VAE_B * VAE_KD, "trained mu");
    assert_same_bits(lv, lv_h, VAE_B * VAE_KD, "trained log_var");
    assert_same_bits(lg, lg_h, VAE_K, "trained logits");
    ck_assert_msg(isfinite(last) && last < first - 1.0f, "objective fell only from %g to %g", (double)first,
                  (double)last);
}
END_TEST

TT_SUITE("backward",
         {.name = "digamma", TT_FIXTURE, .timeout = 300, .tests = {digamma_known_values, digamma_dense_sample, digamma_shared_same_bits}},
         {.name = "kl", TT_FIXTURE, .timeout = 300,
          .tests = {kl_backward_cases, kl_reference_matches_finite_differences, kl_backward_special_values,
                    kl_backward_mixed_quads, kl_backward_errors_and_empty}},
         {.name = "dm", TT_FIXTURE, .timeout = 300,
          .tests = {dm_backward_cases, dm_backward_table_edges, dm_reference_matches_finite_differences,
                    dm_backward_edges_and_errors, dm_training_loop}},
         {.name = "gmm", TT_FIXTURE, .timeout = 300,
          .tests = {gmm_log_prob_backward_cases, gmm_reference_matches_finite_differences, gmm_sample_backward_cases,
                    gmm_backward_edges_and_errors, gmm_training_loop}})
