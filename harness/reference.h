/*
 * harness/reference.h - float64 reference implementations of every tally op.
 *
 * These functions are written from the definitions (include/tally.h,
 * docs/ops.md, docs/rng.md, docs/reduction-tree.md), independently of the
 * library: they use double precision and the C library's double functions
 * (exp, log, lgamma, sqrt, sin, cos), contain their own Philox4x32, and
 * neither include tally's portable headers nor call libtally. The tests and
 * `tally crosscheck` compare the library's float32 results with them.
 *
 * Conventions:
 * - A matrix is a strided window on host floats: element (r, c) is
 *   data[r * stride + c] (stride is ignored when rows <= 1).
 * - Enumerations and flags use the same numeric values as tally.h
 *   (TALLY_SUM == TALLY_REF_SUM, TALLY_KL_LOG_TARGET == TALLY_REF_KL_LOG_TARGET,
 *   ...), so a caller may pass either; this header does not include tally.h.
 * - Functions that return an int return the number of values written to
 *   `out`, or -1 when the op is undefined for the input (an empty mean, min
 *   or max; a bad enumeration value).
 * - `mag` (may be NULL; same length as out) receives, for each output, an
 *   absolute scale of the float32 evaluation's rounding error: the sum of
 *   the magnitudes of the quantities that a float evaluation rounds
 *   (for a sum: sum |x|). A float32 result is then expected within
 *   tally_ref_tolerance(mag, n, extra) of the reference. mag is 0 for
 *   outputs that are exact (min, max) and for non-finite references.
 */
#ifndef TALLY_TOOLS_REFERENCE_H
#define TALLY_TOOLS_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Values shared with tally.h (same numbers, independent names). ---- */
enum {
    TALLY_REF_SUM = 1,
    TALLY_REF_MEAN = 2,
    TALLY_REF_MIN = 3,
    TALLY_REF_MAX = 4,
    TALLY_REF_LOGSUMEXP = 5,
    TALLY_REF_SUMSQ = 6
};
enum { TALLY_REF_AXIS_ALL = 1, TALLY_REF_AXIS_ROW = 2 };
enum {
    TALLY_REF_REDUCTION_NONE = 0,
    TALLY_REF_REDUCTION_SUM = 1,
    TALLY_REF_REDUCTION_MEAN = 2,
    TALLY_REF_REDUCTION_BATCHMEAN = 3
};
#define TALLY_REF_KL_LOG_TARGET 1u
#define TALLY_REF_KL_INPUT_IS_PROB 2u
#define TALLY_REF_KL_INPUT_LOGITS 4u
#define TALLY_REF_KL_TARGET_LOGITS 8u
#define TALLY_REF_DM_WITH_COEFFICIENT 1u
#define TALLY_REF_CATEGORICAL_INVALID (-1)

/* 2^-24: the unit roundoff of float32 (half an ulp of 1). */
#define TALLY_REF_F32_U 5.9604644775390625e-08
/* 2^-150: half the smallest float32 subnormal, the absolute error of one
 * rounding that underflows. */
#define TALLY_REF_F32_UNDERFLOW 7.00649232162408535e-46

/* A strided window on host floats. */
typedef struct tally_ref_mat {
    const float *data;
    int64_t rows;
    int64_t cols;
    int64_t stride;
} tally_ref_mat;

tally_ref_mat tally_ref_mat_make(const float *data, int64_t rows, int64_t cols, int64_t stride);

/* ---- Error measures. ---- */

/* |a - ref| in units of the float32 ulp at ref (the spacing of floats around
 * |ref|, 2^-149 for subnormals). 0 when both are NaN or both are the same
 * infinity; INFINITY when exactly one is NaN or the infinities differ. */
double tally_ref_ulp_diff(float a, double ref);
/* |a - ref| / |ref| (|a| when ref is 0), with the same NaN/inf rules. */
double tally_ref_rel_err(float a, double ref);
/* 1 if a matches ref within abs_tol: both NaN, the same infinity, or
 * |a - ref| <= abs_tol for finite values. */
int tally_ref_close(float a, double ref, double abs_tol);

/*
 * The largest number of float additions any one element passes through in
 * tally's reduction tree for a vector of n elements (docs/reduction-tree.md,
 * recomputed here from the written rule): per level, the lane's sequential
 * fold (4 * quads_per_lane - 1) plus log2(lanes) pairwise steps. A float sum
 * of the tree then satisfies |err| <= depth * u * sum|x| / (1 - depth * u).
 */
double tally_ref_tree_depth(uint64_t n);
/* (tally_ref_tree_depth(n) + extra_ulps) * (2^-24 * mag + 2^-150) * 1.01
 * (0 when mag is 0): the absolute tolerance for a result whose reference
 * had scale `mag` and whose tree ran over n elements; extra_ulps covers the
 * op's own elementwise roundings. 2^-150 is the absolute error of one
 * rounding in the subnormal range, which matters only for results near it
 * (a gradient of 2e-44 may be one subnormal step off). */
double tally_ref_tolerance(double mag, uint64_t n, double extra_ulps);

/*
 * tally's tree, simulated in float32 from the written rule, for sums of the
 * given floats (combine +), or min/max (NaN propagating, first NaN operand
 * wins). kind: 0 sum, 1 min, 2 max. Returns the exact bits a conforming
 * backend must produce for SUM/MIN/MAX of these values; n == 0 gives
 * `empty_value`. Compile with -ffp-contract=off (the tests do).
 */
float tally_ref_tree_f32(const float *x, uint64_t n, int kind, float empty_value);

/* ---- Reductions. ---- */

/*
 * op (TALLY_REF_SUM .. TALLY_REF_SUMSQ) over all elements of x in row-major
 * order (axis ALL, 1 output) or over each row (axis ROW, rows outputs).
 * NaN propagates; sum/sumsq of nothing is 0, logsumexp -inf; mean, min and
 * max of nothing return -1. logsumexp: all -inf gives -inf, any +inf +inf.
 */
int tally_ref_reduce(int op, int axis, tally_ref_mat x, double *out, double *mag);

/* ---- KL divergence (torch.nn.functional.kl_div). ---- */

/*
 * Pointwise term in double: with KL_INPUT_IS_PROB x := log(input) first;
 * LOG_TARGET: exp(t) * (t - x); else t * (log t - x) for t > 0, 0 for t == 0
 * (NaN if x is NaN), NaN for t < 0 or NaN.
 */
double tally_ref_kl_term(float input, float target, unsigned flags, double *mag);
/*
 * reduction NONE writes rows*cols values in row-major order; SUM, MEAN
 * (over rows*cols) and BATCHMEAN (over rows) write 1. Empty MEAN or
 * BATCHMEAN returns -1.
 *
 * The logits flags (torch's kl_div(log_softmax(input, -1),
 * softmax(target, -1)), either side as flagged): per row of logits z, in
 * double, m = max z, log_softmax(z) = (z - m) - log(sum exp(z - m)) and
 * softmax(z) = exp(log_softmax(z)). A row whose maximum is not finite (a
 * NaN, a +inf, or only -inf) is NaN throughout. With KL_TARGET_LOGITS the
 * term is t * (log t - log q) with log t the target row's log-softmax, 0
 * where t == 0 unless log q is NaN; with KL_INPUT_LOGITS alone it is
 * tally_ref_kl_term's of log q against the target as given (LOG_TARGET as
 * flagged). INPUT_LOGITS with INPUT_IS_PROB, or TARGET_LOGITS with
 * LOG_TARGET, returns -1 (the library refuses them).
 *
 * mag for the logits forms also carries the rounding of each row's float
 * statistics (its max shift, its sum tree of exponentials, whose depth
 * over cols is folded in, its log and reciprocal), so the element
 * tolerance stays tally_ref_tolerance(mag, 1, extra) and a reduction's
 * tally_ref_tolerance(mag, rows*cols, extra), as without them.
 * Note: a float target exp(z - m) underflows to 0 for z - m below about
 * -104 where the double one does not; at such an element with log q =
 * -inf the float term is 0 and the double one +inf (callers avoid it).
 */
int tally_ref_kl_div(tally_ref_mat input, tally_ref_mat target, int reduction, unsigned flags, double *out,
                     double *mag);

/* ---- Dirichlet-multinomial. ---- */

/*
 * Log-likelihood of each row of counts [B, V] under alpha = exp(log_alpha),
 * log_alpha [1, V] (shared) or [B, V]:
 * lgamma(A) - lgamma(N + A) + sum_v (lgamma(n_v + a_v) - lgamma(a_v)),
 * plus lgamma(N + 1) - sum_v lgamma(n_v + 1) with DM_WITH_COEFFICIENT (then
 * equal to scipy.stats.dirichlet_multinomial.logpmf for integer counts).
 * Zero counts contribute 0; a row with a negative count is NaN.
 * reduction NONE writes B values, SUM and MEAN (over rows) 1; MEAN of zero
 * rows returns -1.
 */
int tally_ref_dirichlet_multinomial(tally_ref_mat counts, tally_ref_mat log_alpha, int reduction,
                                    unsigned flags, double *out, double *mag);

/* ---- Diagonal Gaussian mixture. ---- */

/*
 * log q(z_b) for z [B, D], mu and log_var [B, K*D] (component k in columns
 * k*D .. k*D + D - 1), logits[K] contiguous (unused when K == 1, may be
 * NULL). Per component s_k = sum_d -0.5 (z - mu)^2 exp(-lv) - 0.5 lv
 * - 0.5 log(2 pi); result logsumexp_k(logit_k - lse(logits) + s_k) (K > 1)
 * or s_0. Writes B values.
 */
int tally_ref_gmm_log_prob(tally_ref_mat z, tally_ref_mat mu, tally_ref_mat log_var, const float *logits,
                           int64_t components, double *out, double *mag);

/* ---- The random stream contract (docs/rng.md). ---- */

/* Philox4x32 with `rounds` rounds (10 for tally; 7 and 10 in the KATs).
 * Independent of include/tally/philox.h. */
void tally_ref_philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4]);

/* Element i of stream (seed, subsequence): word i % 4 of
 * philox4x32_10({lo(i/4), hi(i/4), lo(sub), hi(sub)}, {lo(seed), hi(seed)}). */
uint32_t tally_ref_rng_raw(uint64_t seed, uint64_t subsequence, uint64_t i);
/* The exact float formulas: uniform = (float)x * 2^-32 + 2^-33 in (0, 1];
 * angle t = (float)y * 2^-31 + 2^-32 in (0, 2] (half-turns). */
float tally_ref_uniform_from_bits(uint32_t x);
float tally_ref_angle_from_bits(uint32_t y);
/* uniform(i): the exact float tally must return. */
float tally_ref_rng_uniform(uint64_t seed, uint64_t subsequence, uint64_t i);
/* normal(i) in double from the float u and t of its pair (2k, 2k+1):
 * s = sqrt(-2 log u(raw(2k))), t = angle(raw(2k+1));
 * normal(2k) = s sin(pi t), normal(2k+1) = s cos(pi t), with sin/cos of
 * pi t reduced exactly (so t = 1 or 2 gives an exact 0). */
double tally_ref_rng_normal(uint64_t seed, uint64_t subsequence, uint64_t i);
/* The pair's radius s (an absolute error scale for normal(i)). */
double tally_ref_rng_normal_radius(uint64_t seed, uint64_t subsequence, uint64_t i);
/* sin(pi t) and cos(pi t) in double with exact argument reduction. */
double tally_ref_sinpi(double t);
double tally_ref_cospi(double t);

/* Stream elements an op needing `count` draws consumes: count rounded up to
 * a multiple of 4. Returns 0 and sets *overflow (may be NULL) when that
 * passes 2^64 - 1. */
uint64_t tally_ref_round_up4(uint64_t count, int *overflow);

/*
 * The categorical rule in double on one row of n weights (or logits, whose
 * weights are exp(l_k - max l)) for the uniform u: the smallest k with
 * w_k > 0 and cumulative sum C_k >= u * total. Returns
 * TALLY_REF_CATEGORICAL_INVALID for a row with a negative, NaN or infinite
 * weight (for logits: a NaN or +inf logit, or all -inf), or a zero total.
 * *margin (may be NULL) receives the distance of u from the nearest edge of
 * k's interval [C_{k-1}, C_k] / total: a float evaluation may legitimately
 * pick a neighbour when the margin is within rounding (~n * 2^-23).
 * Note: a float total can overflow to +inf (which tally treats as invalid)
 * where the double total does not; callers should avoid such rows.
 */
int32_t tally_ref_categorical(const float *w, int64_t n, int is_logits, double u, double *margin);
/*
 * 1 if index k is consistent with u under the rule within tol: for an
 * invalid row, k == -1; otherwise 0 <= k < n, w_k > 0 and
 * C_{k-1}/total - tol <= u <= C_k/total + tol.
 */
int tally_ref_categorical_consistent(const float *w, int64_t n, int is_logits, double u, int32_t k,
                                     double tol);

/* The mixture sample's use of the stream (docs/rng.md): B4 = B rounded up
 * to 4 component uniforms (uniform(offset + b) for row b), then B rows of
 * D2 = D rounded up to even normals; eps(b, d) = normal(offset + B4 + b*D2 + d);
 * consumed = B4 + roundup4(B * D2). overflow is set when any of it passes
 * 2^64 - 1. */
typedef struct tally_ref_gmm_layout {
    uint64_t B4;
    uint64_t D2;
    uint64_t consumed;
    int overflow;
} tally_ref_gmm_layout;

tally_ref_gmm_layout tally_ref_gmm_sample_layout(uint64_t B, uint64_t D);
/* Stream index of eps(b, d) (no overflow check). */
uint64_t tally_ref_gmm_eps_index(uint64_t offset, uint64_t B, uint64_t D, uint64_t b, uint64_t d);

/*
 * The mixture sample in double. component[b] (B values): on entry, if
 * use_given is nonzero, the components to use (for example the library's,
 * after checking them with tally_ref_categorical_consistent); otherwise the
 * double categorical rule picks them and writes them. z[b*D + d] =
 * mu_c + exp(0.5 lv_c) * eps(b, d) in double; log_q[b] = log density of
 * that double z. A row whose component is -1 gets NaN. Returns B.
 */
int tally_ref_gmm_sample(tally_ref_mat mu, tally_ref_mat log_var, const float *logits, int64_t components,
                         uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t B, int64_t D,
                         int use_given, int32_t *component, double *z, double *log_q);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_TOOLS_REFERENCE_H */
