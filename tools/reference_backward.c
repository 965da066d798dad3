/*
 * tools/reference_backward.c - float64 references of the gradient ops (see
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
