/*
 * tally/terms.h - the per-element terms and combine steps of every op,
 * written once for C11, CUDA and OpenCL C.
 *
 * Every backend evaluates exactly these functions, in the order fixed by the
 * reduction tree (docs/reduction-tree.md), so every backend produces the same
 * bits. Nothing here depends on the device, the launch shape or the thread.
 */
#ifndef TALLY_TERMS_H
#define TALLY_TERMS_H

#include "dialect.h"
#include "flags.h"
#include "portable_math.h"
#include "philox.h"

/* ---- The reduction tree's fixed shape (docs/reduction-tree.md). ---- */

/* Lanes of a full tile. A logical count fixed by tally, not the hardware's
 * warp or SIMD width; GPU kernels run one work-item per lane. */
#define TALLY_TREE_LANES 256u
/* Quads (4 consecutive elements) each lane reads per full tile. */
#define TALLY_TREE_QUADS_PER_LANE 16u
/* Elements in a full tile: 256 lanes x 16 quads x 4 = 16384. */
#define TALLY_TREE_TILE (TALLY_TREE_LANES * TALLY_TREE_QUADS_PER_LANE * 4u)

/* ---- Combine steps. ---- */

/* Reduction kinds shared by the planner, the host loops and the kernels. */
#define TALLY_COMBINE_SUM 0
#define TALLY_COMBINE_MIN 1
#define TALLY_COMBINE_MAX 2

/* min and max propagate NaN (as torch does): the first NaN operand wins. */
TALLY_FN float tally_min_nan(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    return (b < a) ? b : a;
}

TALLY_FN float tally_max_nan(float a, float b)
{
    if (a != a) return a;
    if (b != b) return b;
    return (b > a) ? b : a;
}

/*
 * The maximum of a vector without the tree, where its bits cannot depend on
 * the order of the comparisons: with no NaN and a maximum other than zero,
 * every element equal to the maximum has its bits (+0 and -0 are the only
 * equal floats with different bits), so tally_max_nan in any order, the
 * tree's too, returns them. tally_max_key maps a float's bits to an
 * unsigned key that orders as the floats do (-0 below +0; negative floats
 * have all bits flipped, the others their sign bit), so that a loop can take
 * the maximum and test for NaN by integer operations, which a compiler may
 * vectorise in any order (a float maximum it may not reorder);
 * tally_max_unkey gives the bits back.
 */
TALLY_FN tally_u32 tally_max_key(tally_u32 b)
{
    return b ^ ((0u - (b >> 31)) | 0x80000000u);
}

TALLY_FN tally_u32 tally_max_unkey(tally_u32 k)
{
    return k ^ ((0u - ((~k) >> 31)) | 0x80000000u);
}

/* 1 when a NaN's bits. */
TALLY_FN tally_u32 tally_bits_nan(tally_u32 b)
{
    return (b & 0x7fffffffu) > 0x7f800000u ? 1u : 0u;
}

TALLY_FN float tally_combine(int kind, float a, float b)
{
    if (kind == TALLY_COMBINE_MIN) return tally_min_nan(a, b);
    if (kind == TALLY_COMBINE_MAX) return tally_max_nan(a, b);
    return a + b;
}

/* ---- Stored results. ---- */

/*
 * Every float an op stores passes through this. IEEE 754 leaves the sign and
 * payload of a NaN produced by arithmetic to the hardware (NVIDIA GPUs give
 * 0x7fffffff, x86 keeps an operand's payload or gives 0xffc00000), so NaN
 * results are stored as the one quiet NaN 0x7fc00000 to keep outputs
 * bit-identical across backends.
 */
TALLY_FN float tally_canonical(float x)
{
    return (x != x) ? TALLY_F32_NAN : x;
}

/* ---- Constants. ---- */

/* 0.5 * log(2 pi) rounded to float: 0.918938533204672741780... */
#define TALLY_HALF_LOG_2PI 0.918938533204672742f

/* ---- KL divergence (torch.nn.functional.kl_div). ---- */

/* flags: TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB (tally/flags.h). */

/* Positive, normal and finite: bits in [0x00800000, 0x7f7fffff]. */
TALLY_FN int tally_kl_is_pos_normal(float v)
{
    return tally_as_u32(v) - 0x00800000u < 0x7f000000u;
}

/*
 * The pointwise loss for input x and target t.
 * - log_target: exp(t) * (t - x).
 * - otherwise: t * (log t - x) for t > 0; 0 for t == 0 unless x is NaN
 *   (torch's xlogy convention, which makes zero targets contribute nothing
 *   even where log p is -inf); NaN for t < 0 or t NaN.
 * With input_is_prob, x is replaced by log(x) first, inside the same pass.
 * This is the definition; tally_kl_term below computes the same bits.
 */
TALLY_FN float tally_kl_term_general(float x, float t, tally_u32 flags)
{
    if (flags & TALLY_KL_INPUT_IS_PROB) x = tally_logf(x);
    if (flags & TALLY_KL_LOG_TARGET) return tally_expf(t) * (t - x);
    float v = t * (tally_logf(t) - x);
    if (t == 0.0f) v = (x != x) ? x : 0.0f;
    if (t < 0.0f) v = TALLY_F32_NAN;
    return v;
}

/*
 * Real data is almost all positive normal floats, for which tally_logf is
 * its core arithmetic alone (tally_pm_logf_normal) and none of the zero and
 * negative-target cases apply. tally_kl_term_fast is that case: the same
 * operations in the same order as tally_kl_term_general, so the same bits,
 * whenever tally_kl_fast_ok(x, t, flags) holds, that is when the arguments
 * of the logarithms the term takes (x with input_is_prob, t without
 * log_target) are positive normal floats. Every other input takes the
 * general path, a branch almost never taken on real data, so GPU warps
 * rarely diverge on it. tests/check_terms.c compares tally_kl_term with the
 * plain definition over every float class and flag combination.
 */
TALLY_FN int tally_kl_fast_ok(float x, float t, tally_u32 flags)
{
    /* Bitwise operators: a predicate, not a chain of branches. */
    const int x_ok = ((flags & TALLY_KL_INPUT_IS_PROB) == 0u) | tally_kl_is_pos_normal(x);
    const int t_ok = ((flags & TALLY_KL_LOG_TARGET) != 0u) | tally_kl_is_pos_normal(t);
    return x_ok & t_ok;
}

TALLY_FN float tally_kl_term_fast(float x, float t, tally_u32 flags)
{
    const float lx = (flags & TALLY_KL_INPUT_IS_PROB) ? tally_pm_logf_normal(x) : x;
    if (flags & TALLY_KL_LOG_TARGET) return tally_expf(t) * (t - lx);
    return t * (tally_pm_logf_normal(t) - lx);
}

TALLY_FN float tally_kl_term(float x, float t, tally_u32 flags)
{
    if (tally_kl_fast_ok(x, t, flags)) return tally_kl_term_fast(x, t, flags);
    return tally_kl_term_general(x, t, flags);
}

/* ---- KL divergence from logits (TALLY_KL_INPUT_LOGITS, TALLY_KL_TARGET_LOGITS). ----
 *
 * A row of logits z is normalised by its softmax statistics: m = the row's
 * max tree, s = the row's sum tree of tally_expf(z - m) (docs/reduction-
 * tree.md), and from them, once per row, L = log s and r = 1/s. A row whose
 * maximum is not finite (a NaN, a +inf, or only -inf) has L = r = NaN, so
 * its every value is NaN, as in torch. Element z then has d = z - m, the
 * log-softmax d - L and the softmax tally_expf(d) * r. */

/* L of a row with maximum m and shifted sum s. */
TALLY_FN float tally_softmax_log_norm(float m, float s)
{
    return tally_isfinite(m) ? tally_logf(s) : TALLY_F32_NAN;
}

/* r of a row with maximum m and shifted sum s. */
TALLY_FN float tally_softmax_recip_norm(float m, float s)
{
    return tally_isfinite(m) ? tally_recipf(s) : TALLY_F32_NAN;
}

/* The input side of a KL term: d_x and the row constant c_x with log q =
 * d_x - c_x. Logits: d_x = x - m_x, c_x = L_x. Otherwise m_x = c_x = 0 is
 * passed and d_x is x (exactly x - 0), or tally_logf(x) with INPUT_IS_PROB. */
TALLY_FN float tally_kl_input_shifted(float x, float m_x, tally_u32 flags)
{
    if (flags & TALLY_KL_INPUT_LOGITS) return x - m_x;
    if (flags & TALLY_KL_INPUT_IS_PROB) return tally_logf(x);
    return x;
}

/*
 * The KL term against a target given as logits, from the target element's
 * e = tally_expf(d_y) and d_y = y - m_y, its row's L_y and r_y, and the input
 * side d_x, c_x: t = e * r_y and, with log t - log q regrouped as
 * (d_y - d_x) + (c_x - L_y),
 *     t * ((d_y - d_x) + (c_x - L_y))   for t != 0;
 *     0 for t == 0 (a zero target carries no mass, even where log q is
 *     -inf, as for probability targets), NaN if log q = d_x - c_x is NaN.
 * A NaN target or row gives NaN through t.
 */
TALLY_FN float tally_kl_softmax_term(float e, float d_y, float L_y, float r_y, float d_x, float c_x)
{
    const float t = e * r_y;
    if (t == 0.0f) {
        const float lq = d_x - c_x;
        return lq == lq ? 0.0f : lq;
    }
    return t * ((d_y - d_x) + (c_x - L_y));
}

/*
 * The KL term of element (x, y) of a call with logits flags, given the row
 * statistics (m_x, L_x) of the input and (m_y, L_y, r_y) of the target (each
 * 0 for a side that is not logits): with TARGET_LOGITS the term above; with
 * INPUT_LOGITS alone, tally_kl_term of log q = (x - m_x) - L_x against the
 * target as given (LOG_TARGET as flagged). This is the definition every
 * backend computes (tally_kl_logits_term below). normal_exp 1 takes the
 * target's exponential by tally_pm_expf_normal, the same bits where the
 * caller has tested tally_pm_expf_normal_ok(y - m_y).
 */
TALLY_FN float tally_kl_logits_term_with(float x, float y, float m_x, float L_x, float m_y, float L_y, float r_y,
                                         tally_u32 flags, int normal_exp)
{
    const float d_x = tally_kl_input_shifted(x, m_x, flags);
    const float c_x = (flags & TALLY_KL_INPUT_LOGITS) ? L_x : 0.0f;
    if (flags & TALLY_KL_TARGET_LOGITS) {
        const float d_y = y - m_y;
        const float e = normal_exp ? tally_pm_expf_normal(d_y) : tally_expf(d_y);
        return tally_kl_softmax_term(e, d_y, L_y, r_y, d_x, c_x);
    }
    return tally_kl_term(d_x - c_x, y, flags & TALLY_KL_LOG_TARGET);
}

TALLY_FN float tally_kl_logits_term(float x, float y, float m_x, float L_x, float m_y, float L_y, float r_y,
                                    tally_u32 flags)
{
    return tally_kl_logits_term_with(x, y, m_x, L_x, m_y, L_y, r_y, flags, 0);
}

/* ---- Dirichlet-multinomial. ---- */

/* flags: TALLY_DM_WITH_COEFFICIENT (tally/flags.h). */

/*
 * Per-element term for count n and concentration a = exp(log_alpha):
 * (lgamma(n + a) - lgamma(a)), minus lgamma(n + 1) with the coefficient.
 * A zero count contributes exactly 0 (lgamma(a) - lgamma(a), and
 * lgamma(1) = 0), which lets kernels skip the lgamma calls for it without
 * changing a bit. A negative count gives NaN.
 */
TALLY_FN float tally_dm_term(float n, float a, tally_u32 flags)
{
    if (n == 0.0f) return 0.0f;
    float v = tally_lgammaf(n + a) - tally_lgammaf(a);
    if (flags & TALLY_DM_WITH_COEFFICIENT) v = v - tally_lgammaf(n + 1.0f);
    if (n < 0.0f) v = TALLY_F32_NAN;
    return v;
}

/*
 * Row value from the three tree sums of the row: A = sum a, N = sum n and
 * S = sum of tally_dm_term. Order: ((lgamma(A) - lgamma(N + A)) [+ lgamma(N + 1)]) + S.
 */
TALLY_FN float tally_dm_row(float A, float N, float S, tally_u32 flags)
{
    float v = tally_lgammaf(A) - tally_lgammaf(N + A);
    if (flags & TALLY_DM_WITH_COEFFICIENT) v = v + tally_lgammaf(N + 1.0f);
    return v + S;
}

/* ---- Diagonal Gaussian mixture. ---- */

/*
 * One dimension's log-density term of a diagonal Gaussian:
 * -0.5 * ((z - mu) * exp(-0.5 * lv))^2 - 0.5 * lv - 0.5 * log(2 pi).
 * exp(-0.5 lv) is 1/std computed without a division. Stamped out per
 * exponential of tally_expf's bits: tally_expf here, tally_expf_split in
 * the GPU kernels (kernels/gmm.h).
 */
/* The term from y = (z - mu) * exp(-0.5 * lv) at hand (a kernel that also
 * needs y for the term's gradient computes it once). */
TALLY_FN float tally_gauss_term_of(float y, float lv)
{
    return (-0.5f * (y * y) - 0.5f * lv) - TALLY_HALF_LOG_2PI;
}
#define TALLY_DEFINE_GAUSS_TERM(fn_name, exp_fn)                      \
    TALLY_FN float fn_name(float z, float mu, float lv)               \
    {                                                                 \
        float y = (z - mu) * exp_fn(-0.5f * lv);                      \
        return tally_gauss_term_of(y, lv);                            \
    }
TALLY_DEFINE_GAUSS_TERM(tally_gauss_term, tally_expf)

/* The standard deviation exp(0.5 * lv) used by the reparameterised sample. */
TALLY_FN float tally_gauss_std(float lv)
{
    return tally_expf(0.5f * lv);
}

/*
 * logsumexp finish: m + log(s) where m is the maximum and s the fixed-order
 * sum of exp(x - m). An infinite or NaN maximum is the answer itself (all
 * -inf gives -inf; any +inf gives +inf; NaN stays NaN).
 */
TALLY_FN float tally_lse_finish(float m, float s)
{
    if (!tally_isfinite(m)) return m;
    return m + tally_logf(s);
}

/* ---- Sequential rules over short index ranges (components, categories). ---- */

/* The value returned for a row whose weights cannot be sampled. */
#define TALLY_CATEGORICAL_INVALID (-1)

/*
 * logsumexp of n values at p[0], p[step], ... in index order: the maximum
 * first, then the index-order sum of exp(p_k - max). Used for the mixture's
 * logits (its K values are few, so a sequential order is cheap and simple
 * to reproduce).
 */
#define TALLY_LSE_SEQ_BODY(AT, n)                                              \
    {                                                                          \
        float m = AT(0u);                                                      \
        for (tally_u64 k = 1; k < (n); k++) m = tally_max_nan(m, AT(k));        \
        if (!tally_isfinite(m)) return m;                                      \
        float s = 0.0f;                                                        \
        for (tally_u64 k = 0; k < (n); k++) s = s + tally_expf(AT(k) - m);      \
        return tally_lse_finish(m, s);                                         \
    }
#define TALLY_LSE_SEQ_AT_P(k) p[k]
#define TALLY_DEFINE_LSE_SEQ(fn_name, address_space)                          \
    TALLY_FN float fn_name(address_space const float *p, tally_u64 n)          \
    TALLY_LSE_SEQ_BODY(TALLY_LSE_SEQ_AT_P, n)
/* OpenCL C 1.2 has no generic address space, so the same body is stamped out
 * once per address space it reads from: global memory (logits), private
 * arrays, and local (shared) memory. Kernels reading half logits stamp it
 * out over their widening loads (AT(k): value k). */
TALLY_DEFINE_LSE_SEQ(tally_lse_seq, TALLY_GLOBAL)
TALLY_DEFINE_LSE_SEQ(tally_lse_seq_private, )
#if TALLY_DEVICE_PASS
TALLY_DEFINE_LSE_SEQ(tally_lse_seq_local, TALLY_LOCAL)
#endif

/*
 * The categorical rule on one row of n weights (or logits, whose weights are
 * exp(l_k - max l)), read at w[0], w[1], ...:
 * total = index-order sum of the weights; the result is the smallest k with
 * w_k > 0 whose index-order running sum reaches u * total. A row with a
 * negative, NaN or infinite weight, or a total of zero or infinity, gives
 * TALLY_CATEGORICAL_INVALID. Requiring w_k > 0 only matters when u * total
 * underflows to 0; otherwise the first k reaching the target has w_k > 0.
 */
#define TALLY_CATEGORICAL_ROW_BODY(AT, n, is_logits, u)                               \
    {                                                                                 \
        float m = 0.0f;                                                               \
        if (is_logits) {                                                              \
            m = AT(0u);                                                               \
            for (tally_u64 k = 1; k < (n); k++) m = tally_max_nan(m, AT(k));          \
            if (!tally_isfinite(m)) return TALLY_CATEGORICAL_INVALID;                 \
        }                                                                             \
        float total = 0.0f;                                                           \
        tally_i32 last_nonzero = TALLY_CATEGORICAL_INVALID;                           \
        for (tally_u64 k = 0; k < (n); k++) {                                         \
            float wk = (is_logits) ? tally_expf(AT(k) - m) : AT(k);                   \
            if (!(wk >= 0.0f) || tally_isinf(wk)) return TALLY_CATEGORICAL_INVALID;   \
            total = total + wk;                                                       \
            if (wk > 0.0f) last_nonzero = (tally_i32)k;                               \
        }                                                                             \
        if (!(total > 0.0f) || tally_isinf(total)) return TALLY_CATEGORICAL_INVALID;  \
        float target = (u) * total;                                                   \
        float running = 0.0f;                                                         \
        for (tally_u64 k = 0; k < (n); k++) {                                         \
            float wk = (is_logits) ? tally_expf(AT(k) - m) : AT(k);                   \
            running = running + wk;                                                   \
            if (wk > 0.0f && running >= target) return (tally_i32)k;                  \
        }                                                                             \
        return last_nonzero;                                                          \
    }
#define TALLY_CATEGORICAL_AT_W(k) w[k]
/* The body is a macro over AT(k), weight k, so that kernels reading half
 * weights run the same operations over their widening loads. */
TALLY_FN tally_i32 tally_categorical_row(TALLY_GLOBAL const float *w, tally_u64 n, int is_logits, float u)
TALLY_CATEGORICAL_ROW_BODY(TALLY_CATEGORICAL_AT_W, n, is_logits, u)

#endif /* TALLY_TERMS_H */
