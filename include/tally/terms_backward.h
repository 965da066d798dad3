/*
 * tally/terms_backward.h - the per-element terms of the gradients, written
 * once for C11, CUDA and OpenCL C like tally/terms.h. The host backend
 * (backends/host/host_backward.c) and the kernels (kernels/backward.h)
 * evaluate exactly these functions, so every backend stores the same bits.
 * The formulas and their conventions are in docs/ops.md, "Gradients".
 */
#ifndef TALLY_TERMS_BACKWARD_H
#define TALLY_TERMS_BACKWARD_H

#include "terms.h"

/* Two gradients of one element. */
typedef struct tally_grad2 {
    float a;
    float b;
} tally_grad2;

/* The upstream gradient of one element of a reduced loss: grad_out itself
 * (sum), or divided by the element or row count (mean, batchmean). */
TALLY_FN float tally_grad_scale(float g, tally_u32 divide, float divisor)
{
    return divide ? tally_divf(g, divisor) : g;
}

/*
 * KL divergence: the gradients with respect to the input (a) and the target
 * (b) of the pointwise loss tally_kl_term(xin, t, flags), times g. With x the
 * log-input (tally_logf(xin) under INPUT_IS_PROB, else xin):
 * - default: d/dx = -(t * g), d/dt = g * ((log t - x) + 1);
 * - LOG_TARGET: with e = exp(t), d/dx = -(e * g), d/dt = (e * g) * ((t - x) + 1);
 * - INPUT_IS_PROB: d/dp = -((t / p) * g) (default) or -((e / p) * g), the
 *   quotient correctly rounded; where t == 0 (default targets) the quotient
 *   is taken as 0 unless p is NaN, because the forward term is then the
 *   constant 0 whatever p is (p = 0 included).
 * torch's formulas (xlogy(t, t) - t * x, or exp(t) * (t - x), through
 * autograd); at t == 0 the target gradient is g * (-inf), the one-sided
 * derivative of t log t, where torch's xlogy backward gives 0/0 = NaN.
 */
/* tally_kl_grad with its choices of logarithm and quotient given: fast
 * must be tally_kl_fast_ok(xin, t, flags) or 0 (tally_logf throughout), and
 * div_normal 1 only where the quotient below satisfies
 * tally_pm_divf_normal_ok (0: tally_divf), which give the same bits; a
 * caller that knows a whole run's choices passes them as constants (the
 * host's vector kernels). */
TALLY_FN tally_grad2 tally_kl_grad_form(float xin, float t, float g, tally_u32 flags, int fast, int div_normal)
{
    const int prob = (flags & TALLY_KL_INPUT_IS_PROB) != 0u;
    const float x = prob ? (fast ? tally_pm_logf_normal(xin) : tally_logf(xin)) : xin;
    tally_grad2 r;
    if (flags & TALLY_KL_LOG_TARGET) {
        const float e = tally_expf(t);
        const float eg = e * g;
        r.a = prob ? -((div_normal ? tally_pm_divf_normal(e, xin) : tally_divf(e, xin)) * g) : -eg;
        r.b = eg * ((t - x) + 1.0f);
    } else {
        r.a = -(t * g);
        if (prob) {
            /* tally_pm_divf_normal_ok(t, xin) implies t != 0, so the short
             * quotient needs no test for t == 0. */
            const float ratio = div_normal                   ? tally_pm_divf_normal(t, xin)
                                : (t == 0.0f && xin == xin) ? 0.0f
                                                             : tally_divf(t, xin);
            r.a = -(ratio * g);
        }
        r.b = g * (((fast ? tally_pm_logf_normal(t) : tally_logf(t)) - x) + 1.0f);
    }
    return r;
}

TALLY_FN tally_grad2 tally_kl_grad(float xin, float t, float g, tally_u32 flags)
{
    /* The forward's short path (tally/terms.h): where the logarithms'
     * arguments are positive normal floats, tally_pm_logf_normal gives
     * tally_logf's bits with fewer instructions. */
    return tally_kl_grad_form(xin, t, g, flags, tally_kl_fast_ok(xin, t, flags), 0);
}

/*
 * Dirichlet-multinomial, with respect to a = exp(log_alpha):
 * d(row value)/da_v = R + T_v, with the row part R = psi(A) - psi(N + A)
 * and the element part T_v = psi(n_v + a_v) - psi(a_v) (exactly 0 for a
 * zero count, NaN for a negative count, as the forward's term).
 */
TALLY_FN float tally_dm_grad_row(float A, float N)
{
    return tally_digammaf(A) - tally_digammaf(N + A);
}

/* tally_dm_grad_row with psi(A) at hand (psi_A = tally_digammaf(A)), for
 * kernels that take many rows of one A: the same value, with psi(N + A)
 * through tally_digammaf_shared (rows of real counts have N + A >= 6, so
 * the work-items of a warp that take it branch together). */
TALLY_FN float tally_dm_grad_row_of(float psi_A, float A, float N)
{
    return psi_A - tally_digammaf_shared(N + A);
}

/* The element part from psi_na = psi(n + a) and psi_a = psi(a) at hand (the
 * GPU kernel tabulates them per column); psi_na is not read for n == 0. */
TALLY_FN float tally_dm_grad_term_of(float n, float psi_na, float psi_a)
{
    /* Selects, not branches: GPU kernels evaluate it for many counts at once. */
    const float v = psi_na - psi_a;
    return n == 0.0f ? 0.0f : n < 0.0f ? TALLY_F32_NAN : v;
}

TALLY_FN float tally_dm_grad_term(float n, float a)
{
    if (n == 0.0f) return 0.0f;
    return tally_dm_grad_term_of(n, tally_digammaf(n + a), tally_digammaf(a));
}

/* The weight of element (b, v): g_b * (R_b + T_bv). The gradient with
 * respect to log_alpha is a_v times it (per-row alpha) or a_v times the tree
 * sum of it over the rows b (shared alpha). */
TALLY_FN float tally_dm_grad_weight(float g, float R, float n, float a)
{
    return g * (R + tally_dm_grad_term(n, a));
}

/* ---- Diagonal Gaussian mixture ---- */

/*
 * The log density's value L of one row from its per-component sums s_k
 * (the forward's D-trees) and the logits: v_k = (logit_k - llse) + s_k
 * (llse = tally_lse_seq of the logits), L = the sequential logsumexp of the
 * v_k; for K == 1, L = s_0. The same operations as the forward, so the
 * same bits. Stamped out per address space of s, as tally_lse_seq.
 */
#define TALLY_DEFINE_GMM_ROW_LSE(fn_name, address_space)                                        \
    TALLY_FN float fn_name(address_space const float *s, TALLY_GLOBAL const float *logits, float llse, \
                           tally_u64 K)                                                         \
    {                                                                                           \
        if (K == 1u) return s[0];                                                               \
        float m = (logits[0] - llse) + s[0];                                                    \
        for (tally_u64 k = 1; k < K; k++) m = tally_max_nan(m, (logits[k] - llse) + s[k]);      \
        if (!tally_isfinite(m)) return m;                                                       \
        float sum = 0.0f;                                                                       \
        for (tally_u64 k = 0; k < K; k++) sum = sum + tally_expf(((logits[k] - llse) + s[k]) - m); \
        return tally_lse_finish(m, sum);                                                        \
    }
TALLY_DEFINE_GMM_ROW_LSE(tally_gmm_row_lse, TALLY_GLOBAL)

/* The responsibility-weighted upstream gradient of component k of a row:
 * c_k = g * r_k with r_k = exp(v_k - L) (1 for K == 1). */
TALLY_FN float tally_gmm_grad_weight(float g, float s_k, float logit_k, float llse, float L, tally_u64 K)
{
    if (K == 1u) return g;
    return g * tally_expf(((logit_k - llse) + s_k) - L);
}

/* d/dlogit_k of the row's log density, times g: g * (r_k - w_k), with
 * w_k = exp(logit_k - llse). */
TALLY_FN float tally_gmm_logit_weight(float g, float s_k, float logit_k, float llse, float L)
{
    return g * (tally_expf(((logit_k - llse) + s_k) - L) - tally_expf(logit_k - llse));
}

/*
 * One (component, dimension) element's gradients of c * tally_gauss_term(z,
 * mu, lv), with is = exp(-0.5 lv) and y = (z - mu) * is as in the forward
 * (tally_gmm_grad_of from y and is at hand):
 * d/dmu = c * (y * is) (a), d/dlv = c * (0.5 * (y * y) - 0.5) (b);
 * d/dz is -(d/dmu). Stamped out per exponential, as tally_gauss_term.
 */
TALLY_FN tally_grad2 tally_gmm_grad_of(float y, float is, float c)
{
    tally_grad2 r;
    r.a = c * (y * is);
    r.b = c * (0.5f * (y * y) - 0.5f);
    return r;
}
#define TALLY_DEFINE_GMM_GRAD_ELEM(fn_name, exp_fn)                     \
    TALLY_FN tally_grad2 fn_name(float z, float mu, float lv, float c)  \
    {                                                                   \
        const float is = exp_fn(-0.5f * lv);                            \
        return tally_gmm_grad_of((z - mu) * is, is, c);                 \
    }
TALLY_DEFINE_GMM_GRAD_ELEM(tally_gmm_grad_elem, tally_expf)

#endif /* TALLY_TERMS_BACKWARD_H */
