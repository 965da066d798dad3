/*
 * harness/reference.c - see reference.h. Everything here is double precision
 * over the C library's double functions, written from tally's documented
 * definitions and sharing no code with the library, so that an error in
 * tally's portable headers cannot hide itself by appearing on both sides of a
 * comparison. The only float arithmetic is where the contract itself is a
 * float formula (the uniform and the Box-Muller angle) and the simulated
 * reduction tree, whose purpose is to predict the library's exact bits.
 */
#include "reference.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define U TALLY_REF_F32_U
#define HALF_LOG_2PI 0.91893853320467274178032973640562 /* 0.5 * log(2 pi) */

tally_ref_mat tally_ref_mat_make(const float *data, int64_t rows, int64_t cols, int64_t stride)
{
    tally_ref_mat m = {.data = data, .rows = rows, .cols = cols, .stride = stride};
    return m;
}

static inline double at(tally_ref_mat m, int64_t r, int64_t c)
{
    return (double)m.data[(m.rows > 1 ? r * m.stride : 0) + c];
}

static inline const float *row_ptr(tally_ref_mat m, int64_t r)
{
    return m.data + (m.rows > 1 ? r * m.stride : 0);
}

/* ---- Error measures --------------------------------------------------- */

static double f32_ulp(double ref)
{
    double a = fabs(ref);
    if (a < ldexp(1.0, -126)) return ldexp(1.0, -149);
    if (a > FLT_MAX) return ldexp(1.0, 104);
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    return ldexp(1.0, e - 24);
}

/* 0: compare numerically; otherwise the answer for special values. */
static int special(float a, double ref, double *result)
{
    int an = isnan(a), rn = isnan(ref);
    if (an || rn) {
        *result = (an && rn) ? 0.0 : INFINITY;
        return 1;
    }
    if (isinf(a) || isinf(ref)) {
        *result = ((double)a == ref) ? 0.0 : INFINITY;
        return 1;
    }
    return 0;
}

double tally_ref_ulp_diff(float a, double ref)
{
    double r;
    if (special(a, ref, &r)) return r;
    return fabs((double)a - ref) / f32_ulp(ref);
}

double tally_ref_rel_err(float a, double ref)
{
    double r;
    if (special(a, ref, &r)) return r;
    double d = fabs((double)a - ref);
    return ref == 0.0 ? d : d / fabs(ref);
}

int tally_ref_close(float a, double ref, double abs_tol)
{
    double r;
    if (special(a, ref, &r)) return r == 0.0;
    return fabs((double)a - ref) <= abs_tol;
}

/* ---- The documented tree ----------------------------------------------- */

/* One level of the written rule: quads = ceil(n/4); more than 4096 quads
 * make full tiles of 256 lanes x 16 quads, else one tile with lanes the next
 * power of two >= quads (at most 256) and ceil(quads/lanes) quads per lane. */
typedef struct ref_level {
    uint64_t n, quads, lanes, qpl, tiles;
} ref_level;

static ref_level ref_plan_level(uint64_t n)
{
    ref_level l = {.n = n, .quads = n / 4 + (n % 4 != 0)};
    if (l.quads > 4096) {
        l.lanes = 256;
        l.qpl = 16;
        l.tiles = l.quads / 4096 + (l.quads % 4096 != 0);
    } else {
        l.lanes = 1;
        while (l.lanes < l.quads && l.lanes < 256) l.lanes *= 2;
        l.qpl = l.quads / l.lanes + (l.quads % l.lanes != 0);
        l.tiles = 1;
    }
    return l;
}

double tally_ref_tree_depth(uint64_t n)
{
    double depth = 0.0;
    while (n > 0) {
        ref_level l = ref_plan_level(n);
        double log2_lanes = 0.0;
        for (uint64_t v = l.lanes; v > 1; v /= 2) log2_lanes += 1.0;
        depth += (double)(4 * l.qpl - 1) + log2_lanes;
        if (l.tiles == 1) break;
        n = l.tiles;
    }
    return depth;
}

double tally_ref_tolerance(double mag, uint64_t n, double extra_ulps)
{
    if (!(mag > 0.0)) return 0.0;
    /* Each float rounding errs by at most u relative plus 2^-150 absolute
     * (half the smallest subnormal, where gradual underflow rounds to the
     * subnormal grid), so results near the subnormal range get that floor
     * per rounding as well. */
    return (tally_ref_tree_depth(n) + extra_ulps) * (U * mag + TALLY_REF_F32_UNDERFLOW) * 1.01;
}

static float combine_f32(int kind, float a, float b)
{
    if (kind == 1 || kind == 2) {
        if (a != a) return a;
        if (b != b) return b;
        if (kind == 1) return (b < a) ? b : a;
        return (b > a) ? b : a;
    }
    return a + b;
}

/* One tile of one level, exactly as written: each active lane folds its
 * quads (q ascending, elements of a quad ascending) starting from its first
 * element, then the lanes combine with a halving stride. */
static float ref_tile(const ref_level *l, uint64_t t, const float *x, int kind)
{
    float lane[256];
    uint64_t base = t * l->lanes * l->qpl;
    uint64_t active = l->quads - base < l->lanes ? l->quads - base : l->lanes;
    for (uint64_t j = 0; j < active; j++) {
        int first = 1;
        float acc = 0.0f;
        for (uint64_t q = 0; q < l->qpl; q++) {
            uint64_t g = base + q * l->lanes + j;
            if (g >= l->quads) break;
            for (uint64_t e = 4 * g; e < 4 * g + 4 && e < l->n; e++) {
                acc = first ? x[e] : combine_f32(kind, acc, x[e]);
                first = 0;
            }
        }
        lane[j] = acc;
    }
    for (uint64_t s = l->lanes / 2; s >= 1; s /= 2)
        for (uint64_t j = 0; j < s; j++)
            if (j + s < active) lane[j] = combine_f32(kind, lane[j], lane[j + s]);
    return lane[0];
}

float tally_ref_tree_f32(const float *x, uint64_t n, int kind, float empty_value)
{
    if (n == 0) return empty_value;
    ref_level l = ref_plan_level(n);
    if (l.tiles == 1) return ref_tile(&l, 0, x, kind);
    float *partials = malloc(l.tiles * sizeof *partials);
    if (partials == NULL) return NAN;
    for (uint64_t t = 0; t < l.tiles; t++) partials[t] = ref_tile(&l, t, x, kind);
    float result = tally_ref_tree_f32(partials, l.tiles, kind, empty_value);
    free(partials);
    return result;
}

/* ---- Reductions --------------------------------------------------------- */

/* Neumaier's compensated sum: the double reference's own rounding stays far
 * below anything a float32 comparison can see, even for millions of terms. */
typedef struct ksum {
    double s, c;
} ksum;

static void ksum_add(ksum *k, double v)
{
    double t = k->s + v;
    if (fabs(k->s) >= fabs(v))
        k->c += (k->s - t) + v;
    else
        k->c += (v - t) + k->s;
    k->s = t;
}

static double ksum_value(const ksum *k)
{
    /* Non-finite sums carry no meaningful compensation (inf - inf = NaN). */
    if (!isfinite(k->s)) return k->s;
    return k->s + k->c;
}

/* A loss's per-element (or per-row) values: kept in out[k] with their
 * magnitudes without a reduction, else summed with them. */
typedef struct loss_sums {
    int reduce; /* 0: TALLY_REF_REDUCTION_NONE */
    double *out, *mag;
    ksum value, scale;
} loss_sums;

static void loss_add(loss_sums *l, uint64_t k, double v, double m)
{
    if (!l->reduce) {
        l->out[k] = v;
        if (l->mag != NULL) l->mag[k] = m;
    } else {
        ksum_add(&l->value, v);
        ksum_add(&l->scale, m);
    }
}

/* Writes the reduced value (sum / div) and its magnitude; returns 1. */
static int loss_finish(loss_sums *l, double div)
{
    l->out[0] = ksum_value(&l->value) / div;
    if (l->mag != NULL) l->mag[0] = isfinite(l->out[0]) ? ksum_value(&l->scale) / div : 0.0;
    return 1;
}

/* Element k of a vector: either row `row` of x, or the row-major flat view. */
typedef struct vec {
    tally_ref_mat x;
    int64_t row; /* -1: all elements */
    uint64_t n;
} vec;

static double vec_at(const vec *v, uint64_t k)
{
    if (v->row >= 0) return at(v->x, v->row, (int64_t)k);
    return at(v->x, (int64_t)(k / (uint64_t)v->x.cols), (int64_t)(k % (uint64_t)v->x.cols));
}

static double nan_max(double a, double b)
{
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return b > a ? b : a;
}

static double nan_min(double a, double b)
{
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return b < a ? b : a;
}

/* Returns 0 when the op is undefined (empty mean/min/max). */
static int reduce_vec(int op, const vec *v, double *out, double *mag)
{
    uint64_t n = v->n;
    *mag = 0.0;
    switch (op) {
    case TALLY_REF_SUM:
    case TALLY_REF_MEAN:
    case TALLY_REF_SUMSQ: {
        if (n == 0 && op == TALLY_REF_MEAN) return 0;
        ksum s = {0, 0}, a = {0, 0};
        for (uint64_t k = 0; k < n; k++) {
            double x = vec_at(v, k);
            if (op == TALLY_REF_SUMSQ) x = x * x;
            ksum_add(&s, x);
            ksum_add(&a, fabs(x));
        }
        double value = ksum_value(&s), scale = ksum_value(&a);
        if (op == TALLY_REF_MEAN) {
            value /= (double)n;
            scale /= (double)n;
        }
        *out = value;
        *mag = isfinite(value) ? scale : 0.0;
        return 1;
    }
    case TALLY_REF_MIN:
    case TALLY_REF_MAX: {
        if (n == 0) return 0;
        double m = vec_at(v, 0);
        for (uint64_t k = 1; k < n; k++) m = op == TALLY_REF_MIN ? nan_min(m, vec_at(v, k)) : nan_max(m, vec_at(v, k));
        *out = m;
        return 1;
    }
    case TALLY_REF_LOGSUMEXP: {
        if (n == 0) {
            *out = -INFINITY;
            return 1;
        }
        double m = vec_at(v, 0);
        for (uint64_t k = 1; k < n; k++) m = nan_max(m, vec_at(v, k));
        if (!isfinite(m)) {
            *out = m;
            return 1;
        }
        ksum s = {0, 0}, w = {0, 0};
        for (uint64_t k = 0; k < n; k++) {
            double d = vec_at(v, k) - m;
            double t = exp(d);
            ksum_add(&s, t);
            if (t != 0.0) ksum_add(&w, t * fabs(d)); /* exp(-inf) * inf would be NaN */
        }
        double sum = ksum_value(&s), log_s = log(sum);
        *out = m + log_s;
        /* Rounding of x - m perturbs each term relatively by u|x - m|, so the
         * sum by u * sum(t |d|) / s; the sum itself, the log and the final
         * add contribute relative, |log s| and |result| scaled errors. */
        *mag = 1.0 + ksum_value(&w) / sum + fabs(log_s) + fabs(*out);
        return 1;
    }
    }
    return 0;
}

int tally_ref_reduce(int op, int axis, tally_ref_mat x, double *out, double *mag)
{
    if (op < TALLY_REF_SUM || op > TALLY_REF_SUMSQ) return -1;
    if (x.rows < 0 || x.cols < 0) return -1;
    double m;
    if (axis == TALLY_REF_AXIS_ALL) {
        vec v = {.x = x, .row = -1, .n = (uint64_t)x.rows * (uint64_t)x.cols};
        if (!reduce_vec(op, &v, &out[0], &m)) return -1;
        if (mag != NULL) mag[0] = m;
        return 1;
    }
    if (axis != TALLY_REF_AXIS_ROW) return -1;
    for (int64_t r = 0; r < x.rows; r++) {
        vec v = {.x = x, .row = r, .n = (uint64_t)x.cols};
        if (!reduce_vec(op, &v, &out[r], &m)) return -1;
        if (mag != NULL) mag[r] = m;
    }
    return (int)x.rows;
}

/* ---- KL divergence --------------------------------------------------------- */

double tally_ref_kl_term(float input, float target, unsigned flags, double *mag)
{
    double x = input, t = target, v, scale;
    if (flags & TALLY_REF_KL_INPUT_IS_PROB) x = log(x);
    if (flags & TALLY_REF_KL_LOG_TARGET) {
        double e = exp(t);
        v = e * (t - x);
        scale = e * (fabs(t) + fabs(x));
    } else if (t > 0.0) {
        double lt = log(t);
        v = t * (lt - x);
        scale = t * (fabs(lt) + fabs(x));
    } else if (t == 0.0) {
        v = isnan(x) ? x : 0.0;
        scale = 0.0;
    } else {
        v = NAN; /* t < 0 or NaN */
        scale = 0.0;
    }
    if (mag != NULL) *mag = isfinite(v) ? scale : 0.0;
    return v;
}

/* ---- KL divergence from logits ---------------------------------------------- */

/* A row of logits in double: its maximum m, L = log s and the sum
 * s = sum exp(z - m); w = sum exp(z - m) |z - m| / s, the relative change of
 * s when every z - m moves by one unit roundoff of itself. */
typedef struct softmax_row {
    int finite; /* m is finite; otherwise the row's every value is NaN */
    double m, log_s, w;
} softmax_row;

static softmax_row softmax_row_of(const float *z, int64_t n)
{
    softmax_row r = {.finite = 0, .m = -INFINITY, .log_s = NAN, .w = 0.0};
    for (int64_t k = 0; k < n; k++) r.m = k == 0 ? (double)z[0] : nan_max(r.m, (double)z[k]);
    r.finite = isfinite(r.m);
    if (!r.finite) return r;
    ksum s = {0, 0}, w = {0, 0};
    for (int64_t k = 0; k < n; k++) {
        double d = (double)z[k] - r.m, e = exp(d);
        ksum_add(&s, e);
        if (e != 0.0) ksum_add(&w, e * fabs(d)); /* exp(-inf) * inf would be NaN */
    }
    double sum = ksum_value(&s); /* >= 1: the maximum's own term */
    r.log_s = log(sum);
    r.w = ksum_value(&w) / sum;
    return r;
}

/*
 * The float evaluation's error budget, in units of u = 2^-24 (each line is
 * one rounding or one propagated error, to first order; tally_expf and
 * tally_logf are within 1 ulp, 2u relative, tally_recipf correctly rounded):
 * - d = z - m: u |d|.
 * - the row's sum tree of tally_expf(d): each term relatively (|d| + 2) u,
 *   the tree depth(cols) u, so s relatively (depth + w + 2) u;
 *   L = tally_logf(s) then absolutely (depth + w + 2) u + 2u |L| (row_err);
 *   1/s relatively (depth + w + 3) u.
 * - a target t = tally_expf(d_y) * (1/s): relatively (|d_y| + depth + w + 7) u
 *   (t_rel), and absolutely 2^-149 (1 + 1/s) more when it is subnormal or
 *   flushes to 0 (a floor added to every such term, negligible elsewhere).
 */
static double row_err(const softmax_row *r, double depth)
{
    return depth + r->w + 2.0 + 2.0 * fabs(r->log_s);
}

/* The input side: log q and the budget of the float's d_x (the shifted or
 * logged input) and of its row constant c = L_x (logits only). */
typedef struct kl_input_side {
    double lq, d, c; /* log q = d - c */
    double err_d, err_c;
} kl_input_side;

static kl_input_side kl_input_of(double x, const softmax_row *rx, unsigned flags, double depth)
{
    kl_input_side s = {.lq = x, .d = x, .c = 0.0, .err_d = 0.0, .err_c = 0.0};
    if (flags & TALLY_REF_KL_INPUT_LOGITS) {
        if (!rx->finite) {
            s.lq = s.d = s.c = NAN;
            return s;
        }
        s.d = x - rx->m;
        s.c = rx->log_s;
        s.lq = s.d - s.c;
        s.err_d = fabs(s.d);
        s.err_c = row_err(rx, depth);
    } else if (flags & TALLY_REF_KL_INPUT_IS_PROB) {
        s.lq = s.d = log(x);
        s.err_d = 2.0 * fabs(s.d);
    }
    return s;
}

static double kl_logits_term(double x, double y, const softmax_row *rx, const softmax_row *ry, unsigned flags,
                             double depth, double *mag)
{
    const kl_input_side q = kl_input_of(x, rx, flags, depth);
    double v, scale = 0.0;
    if (flags & TALLY_REF_KL_TARGET_LOGITS) {
        if (!ry->finite) {
            *mag = 0.0;
            return NAN;
        }
        const double d_y = y - ry->m, lt = d_y - ry->log_s, t = exp(lt);
        if (t == 0.0) {
            v = isnan(q.lq) ? q.lq : 0.0;
        } else {
            /* The float regrouping (d_y - d_x) + (c_x - L_y): A and B. */
            const double S = lt - q.lq, A = d_y - q.d, B = q.c - ry->log_s;
            const double t_rel = fabs(d_y) + depth + ry->w + 7.0;
            const double err_S = fabs(d_y) + q.err_d + fabs(A) + q.err_c + row_err(ry, depth) + fabs(B) + fabs(S);
            v = t * S;
            scale = t * (fabs(S) * t_rel + err_S) + fabs(v);
            /* The subnormal floor: 2^-149 (1 + 1/s) (|S| + 1), over u. */
            scale += ldexp(1.0, -125) * (1.0 + exp(-ry->log_s)) * (fabs(S) + 1.0);
        }
    } else {
        /* INPUT_LOGITS alone: log q against the target as given. */
        const double err_lq = q.err_d + q.err_c + fabs(q.lq);
        if (flags & TALLY_REF_KL_LOG_TARGET) {
            const double e = exp(y);
            v = e * (y - q.lq);
            scale = e * (2.0 * fabs(y - q.lq) + fabs(y) + fabs(q.lq) + err_lq) + fabs(v);
        } else if (y > 0.0) {
            const double lt = log(y);
            v = y * (lt - q.lq);
            scale = y * (3.0 * fabs(lt) + fabs(q.lq) + err_lq) + fabs(v);
        } else if (y == 0.0) {
            v = isnan(q.lq) ? q.lq : 0.0;
        } else {
            v = NAN; /* y < 0 or NaN */
        }
    }
    *mag = isfinite(v) ? scale : 0.0;
    return v;
}

#define KL_LOGITS (TALLY_REF_KL_INPUT_LOGITS | TALLY_REF_KL_TARGET_LOGITS)

int tally_ref_kl_div(tally_ref_mat input, tally_ref_mat target, int reduction, unsigned flags, double *out,
                     double *mag)
{
    if (input.rows != target.rows || input.cols != target.cols || input.rows < 0 || input.cols < 0) return -1;
    if (reduction < TALLY_REF_REDUCTION_NONE || reduction > TALLY_REF_REDUCTION_BATCHMEAN) return -1;
    if ((flags & TALLY_REF_KL_INPUT_LOGITS) && (flags & TALLY_REF_KL_INPUT_IS_PROB)) return -1;
    if ((flags & TALLY_REF_KL_TARGET_LOGITS) && (flags & TALLY_REF_KL_LOG_TARGET)) return -1;
    uint64_t n = (uint64_t)input.rows * (uint64_t)input.cols;
    if (reduction == TALLY_REF_REDUCTION_MEAN && n == 0) return -1;
    if (reduction == TALLY_REF_REDUCTION_BATCHMEAN && input.rows == 0) return -1;
    loss_sums l = {.reduce = reduction != TALLY_REF_REDUCTION_NONE, .out = out, .mag = mag};
    const double depth = tally_ref_tree_depth((uint64_t)input.cols);
    uint64_t k = 0;
    for (int64_t r = 0; r < input.rows; r++) {
        const float *x = row_ptr(input, r), *y = row_ptr(target, r);
        softmax_row rx = {0}, ry = {0};
        if (flags & TALLY_REF_KL_INPUT_LOGITS) rx = softmax_row_of(x, input.cols);
        if (flags & TALLY_REF_KL_TARGET_LOGITS) ry = softmax_row_of(y, input.cols);
        for (int64_t c = 0; c < input.cols; c++, k++) {
            double m;
            double v = (flags & KL_LOGITS) ? kl_logits_term(x[c], y[c], &rx, &ry, flags, depth, &m)
                                           : tally_ref_kl_term(x[c], y[c], flags, &m);
            loss_add(&l, k, v, m);
        }
    }
    if (!l.reduce) return (int)n;
    return loss_finish(&l, reduction == TALLY_REF_REDUCTION_MEAN        ? (double)n
                           : reduction == TALLY_REF_REDUCTION_BATCHMEAN ? (double)input.rows
                                                                        : 1.0);
}

/* ---- Dirichlet-multinomial ----------------------------------------------- */

/* The error scale of a float lgamma evaluated at a float-rounded argument x:
 * its value (relative error), x * |psi(x)| <= x |log x| + 1 (the argument's
 * rounding), and 1 for the absolute accuracy of a float lgamma near its
 * zeros (at 1 and 2). */
static double lgamma_scale(double x)
{
    double lx = x > 0.0 ? fabs(log(x)) : 0.0;
    return fabs(lgamma(x)) + x * lx + 2.0;
}

static double dm_row(const float *counts, const float *log_alpha, int64_t V, unsigned flags, double *mag)
{
    ksum A = {0, 0}, N = {0, 0}, S = {0, 0}, scale = {0, 0};
    int negative = 0, nan_count = 0;
    for (int64_t v = 0; v < V; v++) {
        double n = counts[v], a = exp((double)log_alpha[v]);
        ksum_add(&A, a);
        ksum_add(&N, n);
        if (n < 0.0) negative = 1;
        if (isnan(n)) nan_count = 1;
        if (n == 0.0) continue; /* contributes exactly 0 */
        double term = lgamma(n + a) - lgamma(a);
        ksum_add(&scale, lgamma_scale(n + a) + lgamma_scale(a));
        if (flags & TALLY_REF_DM_WITH_COEFFICIENT) {
            term -= lgamma(n + 1.0);
            ksum_add(&scale, lgamma_scale(n + 1.0));
        }
        ksum_add(&S, term);
    }
    double a_sum = ksum_value(&A), n_sum = ksum_value(&N);
    double v = lgamma(a_sum) - lgamma(n_sum + a_sum);
    ksum_add(&scale, lgamma_scale(a_sum) + lgamma_scale(n_sum + a_sum));
    if (flags & TALLY_REF_DM_WITH_COEFFICIENT) {
        v += lgamma(n_sum + 1.0);
        ksum_add(&scale, lgamma_scale(n_sum + 1.0));
    }
    v += ksum_value(&S);
    if (negative || nan_count) v = NAN;
    *mag = isfinite(v) ? ksum_value(&scale) : 0.0;
    return v;
}

int tally_ref_dirichlet_multinomial(tally_ref_mat counts, tally_ref_mat log_alpha, int reduction,
                                    unsigned flags, double *out, double *mag)
{
    int64_t B = counts.rows, V = counts.cols;
    if (B < 0 || V < 0 || log_alpha.cols != V || (log_alpha.rows != 1 && log_alpha.rows != B)) return -1;
    if (reduction != TALLY_REF_REDUCTION_NONE && reduction != TALLY_REF_REDUCTION_SUM &&
        reduction != TALLY_REF_REDUCTION_MEAN)
        return -1;
    if (reduction == TALLY_REF_REDUCTION_MEAN && B == 0) return -1;
    loss_sums l = {.reduce = reduction != TALLY_REF_REDUCTION_NONE, .out = out, .mag = mag};
    for (int64_t b = 0; b < B; b++) {
        double m;
        const float *la = log_alpha.rows == 1 ? log_alpha.data : row_ptr(log_alpha, b);
        double v = dm_row(row_ptr(counts, b), la, V, flags, &m);
        loss_add(&l, (uint64_t)b, v, m);
    }
    if (!l.reduce) return (int)B;
    return loss_finish(&l, reduction == TALLY_REF_REDUCTION_MEAN ? (double)B : 1.0);
}

/* ---- Gaussian mixture ------------------------------------------------------ */

/* logsumexp of n doubles (NaN propagates; all -inf gives -inf). */
static double lse_d(const double *v, int64_t n)
{
    double m = v[0];
    for (int64_t k = 1; k < n; k++) m = nan_max(m, v[k]);
    if (!isfinite(m)) return m;
    ksum s = {0, 0};
    for (int64_t k = 0; k < n; k++) ksum_add(&s, exp(v[k] - m));
    return m + log(ksum_value(&s));
}

/* log q of one row given z as doubles. */
static double gmm_row(const double *z, const float *mu, const float *lv, const float *logits, int64_t K,
                      int64_t D, double *v, double *mag)
{
    double logits_lse = 0.0, worst = 0.0;
    if (K > 1) {
        for (int64_t k = 0; k < K; k++) v[k] = logits[k];
        logits_lse = lse_d(v, K);
    }
    for (int64_t k = 0; k < K; k++) {
        ksum s = {0, 0}, a = {0, 0};
        for (int64_t d = 0; d < D; d++) {
            double l = lv[k * D + d], diff = z[d] - (double)mu[k * D + d];
            double q = diff * diff * exp(-l);
            ksum_add(&s, -0.5 * q - 0.5 * l - HALF_LOG_2PI);
            ksum_add(&a, 0.5 * q + 0.5 * fabs(l) + HALF_LOG_2PI);
        }
        double sk = ksum_value(&s), scale = ksum_value(&a) + fabs(sk);
        if (K > 1) {
            v[k] = ((double)logits[k] - logits_lse) + sk;
            scale += fabs((double)logits[k]) + 2.0 * fabs(logits_lse) + (double)K;
        } else {
            v[k] = sk;
        }
        if (scale > worst) worst = scale;
    }
    double result = K > 1 ? lse_d(v, K) : v[0];
    *mag = isfinite(result) ? worst + fabs(result) + 2.0 : 0.0;
    return result;
}

int tally_ref_gmm_log_prob(tally_ref_mat z, tally_ref_mat mu, tally_ref_mat log_var, const float *logits,
                           int64_t components, double *out, double *mag)
{
    int64_t B = z.rows, D = z.cols, K = components;
    if (K < 1 || B < 0 || D < 0 || mu.rows != B || log_var.rows != B || mu.cols != K * D ||
        log_var.cols != K * D || (K > 1 && logits == NULL))
        return -1;
    double *v = malloc((size_t)K * sizeof *v), *zd = malloc((size_t)(D > 0 ? D : 1) * sizeof *zd);
    if (v == NULL || zd == NULL) {
        free(v);
        free(zd);
        return -1;
    }
    for (int64_t b = 0; b < B; b++) {
        double m;
        for (int64_t d = 0; d < D; d++) zd[d] = at(z, b, d);
        out[b] = gmm_row(zd, row_ptr(mu, b), row_ptr(log_var, b), logits, K, D, v, &m);
        if (mag != NULL) mag[b] = m;
    }
    free(v);
    free(zd);
    return (int)B;
}

/* ---- Philox4x32 and the stream contract ---------------------------------- */

void tally_ref_philox4x32(const uint32_t ctr[4], const uint32_t key[2], int rounds, uint32_t out[4])
{
    /* Salmon et al. (SC'11): multipliers 0xD2511F53 and 0xCD9E8D57, key
     * bumped by the Weyl constants 0x9E3779B9 and 0xBB67AE85 between rounds. */
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int r = 0; r < rounds; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

uint32_t tally_ref_rng_raw(uint64_t seed, uint64_t subsequence, uint64_t i)
{
    uint64_t q = i / 4;
    uint32_t ctr[4] = {(uint32_t)(q & 0xffffffffu), (uint32_t)(q >> 32), (uint32_t)(subsequence & 0xffffffffu),
                       (uint32_t)(subsequence >> 32)};
    uint32_t key[2] = {(uint32_t)(seed & 0xffffffffu), (uint32_t)(seed >> 32)};
    uint32_t out[4];
    tally_ref_philox4x32(ctr, key, 10, out);
    return out[i % 4];
}

float tally_ref_uniform_from_bits(uint32_t x)
{
    /* The product by a power of two is exact, so only the conversion and
     * the add round; contraction could not change the result either. */
    const float two_m32 = 2.3283064365386962890625e-10f; /* 2^-32 */
    const float two_m33 = 1.16415321826934814453125e-10f; /* 2^-33 */
    return (float)x * two_m32 + two_m33;
}

float tally_ref_angle_from_bits(uint32_t y)
{
    const float two_m31 = 4.656612873077392578125e-10f;  /* 2^-31 */
    const float two_m32 = 2.3283064365386962890625e-10f; /* 2^-32 */
    return (float)y * two_m31 + two_m32;
}

float tally_ref_rng_uniform(uint64_t seed, uint64_t subsequence, uint64_t i)
{
    return tally_ref_uniform_from_bits(tally_ref_rng_raw(seed, subsequence, i));
}

static const double REF_PI = 3.141592653589793238462643383279502884;

double tally_ref_sinpi(double t)
{
    if (!isfinite(t)) return NAN;
    double sign = 1.0;
    if (t < 0.0) {
        t = -t;
        sign = -1.0;
    }
    double r = fmod(t, 2.0); /* exact */
    if (r >= 1.0) {
        r -= 1.0; /* exact (Sterbenz) */
        sign = -sign;
    }
    if (r > 0.5) r = 1.0 - r; /* exact */
    double v = r > 0.25 ? cos(REF_PI * (0.5 - r)) : sin(REF_PI * r);
    return sign * v;
}

double tally_ref_cospi(double t)
{
    if (!isfinite(t)) return NAN;
    double r = fmod(fabs(t), 2.0);
    if (r > 1.0) r = 2.0 - r; /* exact: cos is even about 1 */
    double sign = 1.0;
    if (r > 0.5) {
        r = 1.0 - r;
        sign = -1.0;
    }
    double v = r > 0.25 ? sin(REF_PI * (0.5 - r)) : cos(REF_PI * r);
    return sign * v;
}

static void normal_pair(uint64_t seed, uint64_t subsequence, uint64_t i, double *s, double *t)
{
    uint64_t first = i & ~(uint64_t)1;
    float u = tally_ref_uniform_from_bits(tally_ref_rng_raw(seed, subsequence, first));
    float a = tally_ref_angle_from_bits(tally_ref_rng_raw(seed, subsequence, first + 1));
    *s = sqrt(-2.0 * log((double)u));
    *t = a;
}

double tally_ref_rng_normal(uint64_t seed, uint64_t subsequence, uint64_t i)
{
    double s, t;
    normal_pair(seed, subsequence, i, &s, &t);
    return (i & 1) ? s * tally_ref_cospi(t) : s * tally_ref_sinpi(t);
}

double tally_ref_rng_normal_radius(uint64_t seed, uint64_t subsequence, uint64_t i)
{
    double s, t;
    normal_pair(seed, subsequence, i, &s, &t);
    return s;
}

uint64_t tally_ref_round_up4(uint64_t count, int *overflow)
{
    if (count > UINT64_MAX - 3) {
        if (overflow != NULL) *overflow = 1;
        return 0;
    }
    if (overflow != NULL) *overflow = 0;
    return (count + 3) / 4 * 4;
}

/* The row's weights in double; returns 0 for an invalid row. */
static int categorical_weights(const float *w, int64_t n, int is_logits, double *out, double *total)
{
    double m = 0.0;
    if (n <= 0) return 0;
    if (is_logits) {
        m = w[0];
        for (int64_t k = 1; k < n; k++) m = nan_max(m, w[k]);
        if (!isfinite(m)) return 0;
    }
    ksum s = {0, 0};
    for (int64_t k = 0; k < n; k++) {
        double wk = is_logits ? exp((double)w[k] - m) : (double)w[k];
        if (!(wk >= 0.0) || isinf(wk)) return 0;
        out[k] = wk;
        ksum_add(&s, wk);
    }
    *total = ksum_value(&s);
    return *total > 0.0 && isfinite(*total);
}

int32_t tally_ref_categorical(const float *w, int64_t n, int is_logits, double u, double *margin)
{
    double *wd = malloc((size_t)(n > 0 ? n : 1) * sizeof *wd), total = 0.0;
    if (margin != NULL) *margin = INFINITY;
    if (wd == NULL || !categorical_weights(w, n, is_logits, wd, &total)) {
        free(wd);
        return TALLY_REF_CATEGORICAL_INVALID;
    }
    double target = u * total, before = 0.0;
    ksum run = {0, 0};
    int32_t chosen = -1, last_nonzero = -1;
    double lo = 0.0, hi = 0.0;
    for (int64_t k = 0; k < n; k++) {
        before = ksum_value(&run);
        ksum_add(&run, wd[k]);
        if (wd[k] > 0.0) last_nonzero = (int32_t)k;
        if (wd[k] > 0.0 && ksum_value(&run) >= target) {
            chosen = (int32_t)k;
            lo = before / total;
            hi = ksum_value(&run) / total;
            break;
        }
    }
    if (chosen < 0) {
        chosen = last_nonzero;
        lo = hi = 1.0;
    }
    if (margin != NULL) *margin = fmin(fabs(u - lo), fabs(hi - u));
    free(wd);
    return chosen;
}

int tally_ref_categorical_consistent(const float *w, int64_t n, int is_logits, double u, int32_t k, double tol)
{
    double *wd = malloc((size_t)(n > 0 ? n : 1) * sizeof *wd), total = 0.0;
    if (wd == NULL) return 0;
    if (!categorical_weights(w, n, is_logits, wd, &total)) {
        free(wd);
        return k == TALLY_REF_CATEGORICAL_INVALID;
    }
    int ok = 0;
    if (k >= 0 && k < n && wd[k] > 0.0) {
        ksum run = {0, 0};
        for (int64_t j = 0; j < k; j++) ksum_add(&run, wd[j]);
        double lo = ksum_value(&run) / total;
        ksum_add(&run, wd[k]);
        double hi = ksum_value(&run) / total;
        ok = u >= lo - tol && u <= hi + tol;
    }
    free(wd);
    return ok;
}

/* ---- The mixture sample ---------------------------------------------------- */

tally_ref_gmm_layout tally_ref_gmm_sample_layout(uint64_t B, uint64_t D)
{
    tally_ref_gmm_layout l = {0, 0, 0, 0};
    int of = 0;
    l.B4 = tally_ref_round_up4(B, &of);
    l.overflow |= of;
    if (D == UINT64_MAX) {
        l.overflow = 1;
        return l;
    }
    l.D2 = D + (D & 1u);
    if (B != 0 && l.D2 > UINT64_MAX / B) {
        l.overflow = 1;
        return l;
    }
    uint64_t normals4 = tally_ref_round_up4(B * l.D2, &of);
    l.overflow |= of;
    if (l.B4 > UINT64_MAX - normals4) l.overflow = 1;
    if (!l.overflow) l.consumed = l.B4 + normals4;
    return l;
}

uint64_t tally_ref_gmm_eps_index(uint64_t offset, uint64_t B, uint64_t D, uint64_t b, uint64_t d)
{
    uint64_t B4 = (B + 3) / 4 * 4, D2 = D + (D & 1u);
    return offset + B4 + b * D2 + d;
}

int tally_ref_gmm_sample(tally_ref_mat mu, tally_ref_mat log_var, const float *logits, int64_t components,
                         uint64_t seed, uint64_t subsequence, uint64_t offset, int64_t B, int64_t D,
                         int use_given, int32_t *component, double *z, double *log_q)
{
    int64_t K = components;
    if (K < 1 || B < 0 || D < 0 || mu.rows != B || log_var.rows != B || mu.cols != K * D ||
        log_var.cols != K * D || (K > 1 && logits == NULL))
        return -1;
    double *v = malloc((size_t)K * sizeof *v);
    if (v == NULL) return -1;
    for (int64_t b = 0; b < B; b++) {
        int32_t c = 0;
        if (use_given) {
            c = component[b];
        } else {
            if (K > 1) {
                double u = tally_ref_rng_uniform(seed, subsequence, offset + (uint64_t)b);
                c = tally_ref_categorical(logits, K, 1, u, NULL);
            }
            component[b] = c;
        }
        double *zb = z + b * D;
        if (c < 0 || c >= K) {
            for (int64_t d = 0; d < D; d++) zb[d] = NAN;
            log_q[b] = NAN;
            continue;
        }
        const float *mu_c = row_ptr(mu, b) + c * D, *lv_c = row_ptr(log_var, b) + c * D;
        for (int64_t d = 0; d < D; d++) {
            uint64_t i = tally_ref_gmm_eps_index(offset, (uint64_t)B, (uint64_t)D, (uint64_t)b, (uint64_t)d);
            zb[d] = (double)mu_c[d] + exp(0.5 * (double)lv_c[d]) * tally_ref_rng_normal(seed, subsequence, i);
        }
        double m;
        log_q[b] = gmm_row(zb, row_ptr(mu, b), row_ptr(log_var, b), logits, K, D, v, &m);
    }
    free(v);
    return (int)B;
}
