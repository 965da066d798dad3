/*
 * harness/reference_backward.c - float64 references of the gradient ops (see
 * reference_backward.h).
 */
#include "reference_backward.h"

#include <math.h>

#define U 0x1p-24

double tally_ref_digamma(double x)
{
    if (x == 0.0) return -INFINITY;
    if (!(x > 0.0)) return NAN;
    if (isinf(x)) return x;
    double acc = 0.0;
    while (x < 20.0) {
        acc += 1.0 / x;
        x += 1.0;
    }
    double w = 1.0 / x, w2 = w * w;
    double p = 691.0 / 32760.0 - w2 / 12.0;
    p = 1.0 / 132.0 - w2 * p;
    p = 1.0 / 240.0 - w2 * p;
    p = 1.0 / 252.0 - w2 * p;
    p = 1.0 / 120.0 - w2 * p;
    p = 1.0 / 12.0 - w2 * p;
    return (log(x) - 0.5 * w - w2 * p) - acc;
}

/* An upper bound of trigamma for x > 0: how far an error in x moves psi. */
static double trigamma_bound(double x)
{
    return 1.0 / x + 1.0 / (x * x);
}

void tally_ref_kl_grad(double xin, double t, double g, unsigned flags, double *dx, double *dt, double *mag_x,
                       double *mag_t)
{
    const int prob = (flags & TALLY_REF_KL_INPUT_IS_PROB) != 0;
    const double x = prob ? log(xin) : xin;
    if (flags & TALLY_REF_KL_LOG_TARGET) {
        const double e = exp(t);
        *dx = prob ? -(e / xin) * g : -e * g;
        *dt = e * g * ((t - x) + 1.0);
        *mag_x = 6.0 * fabs(*dx);
        *mag_t = 6.0 * (fabs(e * g) * (fabs(t) + fabs(x) + 1.0) + fabs(*dt));
    } else {
        *dx = prob ? (t == 0.0 ? 0.0 : -(t / xin) * g) : -t * g;
        const double lt = t == 0.0 ? -INFINITY : log(t);
        *dt = g * ((lt - x) + 1.0);
        *mag_x = 6.0 * fabs(*dx);
        *mag_t = t == 0.0 ? 0.0 : 6.0 * (fabs(g) * (fabs(lt) + fabs(x) + 1.0) + fabs(*dt));
    }
}

int tally_ref_kl_div_backward(tally_ref_mat input, tally_ref_mat target, const float *grad_out, int reduction,
                              unsigned flags, double *gx, double *gx_mag, double *gt, double *gt_mag)
{
    if (input.rows != target.rows || input.cols != target.cols || input.rows < 0 || input.cols < 0) return -1;
    const int64_t n = input.rows * input.cols;
    double scale = 1.0;
    if (reduction == TALLY_REF_REDUCTION_MEAN) scale = 1.0 / (double)n;
    if (reduction == TALLY_REF_REDUCTION_BATCHMEAN) scale = 1.0 / (double)input.rows;
    int64_t k = 0;
    for (int64_t r = 0; r < input.rows; r++)
        for (int64_t c = 0; c < input.cols; c++, k++) {
            const double g = reduction == TALLY_REF_REDUCTION_NONE ? grad_out[k] : grad_out[0] * scale;
            double dx, dt, mx, mt;
            tally_ref_kl_grad(input.data[r * input.stride + c], target.data[r * target.stride + c], g, flags, &dx,
                              &dt, &mx, &mt);
            if (gx != NULL) gx[k] = dx, gx_mag[k] = mx;
            if (gt != NULL) gt[k] = dt, gt_mag[k] = mt;
        }
    return (int)n;
}

int tally_ref_dirichlet_multinomial_backward(tally_ref_mat counts, tally_ref_mat log_alpha, const float *grad_out,
                                             int reduction, double *grad, double *mag)
{
    const int64_t B = counts.rows, V = counts.cols;
    const int per_row = log_alpha.rows == B && B != 1;
    if (log_alpha.cols != V || (log_alpha.rows != 1 && log_alpha.rows != B)) return -1;
    if (reduction == TALLY_REF_REDUCTION_MEAN && B == 0) return -1;
    const int64_t rows_out = per_row ? B : 1;
    for (int64_t i = 0; i < rows_out * V; i++) grad[i] = 0.0, mag[i] = 0.0;
    /* The column tree's depth bound (docs/reduction-tree.md), doubled. */
    const double depth_col = 2.0 * (log2((double)(B > 1 ? B : 1)) + 64.0);
    for (int64_t b = 0; b < B; b++) {
        const float *lr = log_alpha.data + (per_row ? b * log_alpha.stride : 0);
        const float *nr = counts.data + b * counts.stride;
        double A = 0, N = 0;
        for (int64_t v = 0; v < V; v++) A += exp((double)lr[v]), N += nr[v];
        const double gb = reduction == TALLY_REF_REDUCTION_NONE ? grad_out[b]
                          : grad_out[0] / (reduction == TALLY_REF_REDUCTION_MEAN ? (double)B : 1.0);
        const double pA = tally_ref_digamma(A), pNA = tally_ref_digamma(N + A);
        /* The row part's roundings, and the trees' error in A and N moved
         * through psi. */
        const double row_mag =
            fabs(pA) + fabs(pNA) + 70.0 * (A * trigamma_bound(A) + (N + A) * trigamma_bound(N + A));
        for (int64_t v = 0; v < V; v++) {
            const double a = exp((double)lr[v]), nv = nr[v];
            const double T = nv == 0 ? 0.0 : tally_ref_digamma(nv + a) - tally_ref_digamma(a);
            const double tm = nv == 0 ? 0.0
                                      : fabs(tally_ref_digamma(nv + a)) + fabs(tally_ref_digamma(a)) +
                                            2.0 * a * trigamma_bound(a);
            const int64_t o = (per_row ? b * V : 0) + v;
            grad[o] += a * gb * ((pA - pNA) + T);
            /* Each digamma is within 3 ulp (relative) or 4e-8 absolute, and
             * each difference and product rounds once more. */
            mag[o] += a * fabs(gb) * (6.0 * (row_mag + tm) + 4.0 * 4e-8 / U + depth_col * fabs((pA - pNA) + T));
        }
    }
    return (int)(rows_out * V);
}

/* ---- Diagonal Gaussian mixture ---- */

static double lse_d(const double *v, int64_t n)
{
    double m = v[0];
    for (int64_t k = 1; k < n; k++) m = v[k] > m ? v[k] : m;
    if (!isfinite(m)) return m;
    double s = 0;
    for (int64_t k = 0; k < n; k++) s += exp(v[k] - m);
    return m + log(s);
}

#define HALF_LOG_2PI 0.91893853320467274178

/* v_k = log w_k + s_k into v[K] (K doubles of scratch); returns L. */
static double row_v(const double *z, const double *mu, const double *lv, const double *logits, int64_t K, int64_t D,
                    double *v, double *lw, double *terms)
{
    double llse = K > 1 ? lse_d(logits, K) : 0.0, t = 0.0;
    for (int64_t k = 0; k < K; k++) {
        double s = 0.0;
        for (int64_t d = 0; d < D; d++) {
            double y = (z[d] - mu[k * D + d]) * exp(-0.5 * lv[k * D + d]);
            double term = (-0.5 * y * y - 0.5 * lv[k * D + d]) - HALF_LOG_2PI;
            s += term;
            t += fabs(y * y) * 0.5 + fabs(0.5 * lv[k * D + d]) + HALF_LOG_2PI;
        }
        lw[k] = K > 1 ? logits[k] - llse : 0.0;
        v[k] = lw[k] + s;
    }
    if (terms != NULL) *terms = t;
    return K > 1 ? lse_d(v, K) : v[0];
}

double tally_ref_gmm_row_logq(const double *z, const double *mu, const double *lv, const double *logits, int64_t K,
                              int64_t D)
{
    double v[64], lw[64];
    if (K > 64) return NAN;
    return row_v(z, mu, lv, logits, K, D, v, lw, NULL);
}

void tally_ref_gmm_row_backward(const double *z, const double *mu, const double *lv, const double *logits,
                                int64_t K, int64_t D, double g, double *dz, double *dmu, double *dlv,
                                double *dlogit, double *terms)
{
    double v[64], lw[64];
    if (K > 64) return;
    const double L = row_v(z, mu, lv, logits, K, D, v, lw, terms);
    for (int64_t d = 0; d < D; d++) dz[d] = 0.0;
    for (int64_t k = 0; k < K; k++) {
        const double r = K > 1 ? exp(v[k] - L) : 1.0;
        for (int64_t d = 0; d < D; d++) {
            const double is = exp(-0.5 * lv[k * D + d]), y = (z[d] - mu[k * D + d]) * is;
            dmu[k * D + d] = g * r * y * is;
            dlv[k * D + d] = g * r * (0.5 * y * y - 0.5);
            dz[d] -= g * r * y * is;
        }
        if (K > 1 && dlogit != NULL) dlogit[k] += g * (r - exp(lw[k]));
    }
}

int tally_ref_gmm_log_prob_backward(const float *z, const float *mu, const float *lv, const float *logits,
                                    int64_t B, int64_t K, int64_t D, const float *grad_log_q, double *gz,
                                    double *gz_mag, double *gmu, double *gmu_mag, double *glv, double *glv_mag,
                                    double *glogits, double *glogits_mag)
{
    if (K < 1 || K > 64 || D > 4096 || K * D > 64 * 64) return -1;
    static double zd[4096], mud[64 * 64], lvd[64 * 64];
    double lg[64], v[64], lw[64];
    for (int64_t k = 0; k < K; k++) lg[k] = K > 1 ? logits[k] : 0.0;
    if (K > 1)
        for (int64_t k = 0; k < K; k++) glogits[k] = 0.0, glogits_mag[k] = 0.0;
    /* Depth bounds of the trees over B and over D (docs/reduction-tree.md), doubled. */
    const double depth_col = 2.0 * (log2((double)(B > 1 ? B : 1)) + 64.0);
    const double depth_d = 2.0 * (log2((double)(D > 1 ? D : 1)) + 64.0);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t d = 0; d < D; d++) zd[d] = z[b * D + d];
        for (int64_t i = 0; i < K * D; i++) mud[i] = mu[b * K * D + i], lvd[i] = lv[b * K * D + i];
        const double g = grad_log_q[b];
        double *dz = gz + b * D, *dmu = gmu + b * K * D, *dlv = glv + b * K * D, terms = 0.0;
        double dl[64];
        for (int64_t k = 0; k < K; k++) dl[k] = 0.0;
        tally_ref_gmm_row_backward(zd, mud, lvd, lg, K, D, g, dz, dmu, dlv, dl, &terms);
        const double L = row_v(zd, mud, lvd, lg, K, D, v, lw, NULL);
        /* Relative error of a responsibility: the trees' error in v_k - L
         * (twice the D-tree bound over the row's terms) plus a few ulps. */
        const double rel = 8.0 + (K > 1 ? 2.0 * depth_d * terms : 0.0);
        for (int64_t d = 0; d < D; d++) gz_mag[b * D + d] = 0.0;
        for (int64_t k = 0; k < K; k++) {
            const double r = K > 1 ? exp(v[k] - L) : 1.0;
            for (int64_t d = 0; d < D; d++) {
                const int64_t i = k * D + d;
                const double is = exp(-0.5 * lvd[i]), y = (zd[d] - mud[i]) * is;
                /* A responsibility below the float range is subnormal or 0:
                 * an absolute error of a subnormal ulp (2^-149), times the
                 * factors after it, in units of 2^-24. */
                const double tiny = 0x1p-124 * fabs(g);
                gmu_mag[b * K * D + i] = fabs(dmu[i]) * rel + tiny * (fabs(y * is) + 1.0);
                glv_mag[b * K * D + i] = fabs(g) * r * (0.5 * y * y + 0.5) * rel + tiny * (0.5 * y * y + 1.0);
                gz_mag[b * D + d] += fabs(dmu[i]) * (rel + 2.0 * (double)K) + tiny * (fabs(y * is) + 1.0);
            }
            if (K > 1) {
                glogits[k] += dl[k];
                glogits_mag[k] += fabs(g) * (r + exp(lw[k])) * rel + depth_col * fabs(dl[k]) + 0x1p-124 * fabs(g);
            }
        }
    }
    return 0;
}
