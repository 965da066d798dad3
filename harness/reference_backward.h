/*
 * harness/reference_backward.h - float64 references of the gradient ops,
 * written from the formulas (docs/ops.md, "Gradients"), independent of the
 * library's terms. Used by tests/check_backward.c and `tally crosscheck`.
 *
 * Each also returns, per output element, a magnitude `mag` such that the
 * float32 result must lie within 2^-24 * mag of the float64 value: the sum
 * of the magnitudes the float evaluation rounds, a few ulps each, the
 * measured digamma error (docs/accuracy.md) and the trees' depth.
 */
#ifndef TALLY_REFERENCE_BACKWARD_H
#define TALLY_REFERENCE_BACKWARD_H

#include "reference.h"

/* digamma in double (recurrence to x >= 20, asymptotic series to x^-14);
 * psi(0) = -inf, x < 0 or NaN gives NaN, psi(+inf) = +inf. */
double tally_ref_digamma(double x);

/* The gradients of one KL element (input xin, target t, flags as in
 * reference.h's KL) times g: d/dinput (d/dp under INPUT_IS_PROB) and
 * d/dtarget, with tally's conventions at t == 0. */
void tally_ref_kl_grad(double xin, double t, double g, unsigned flags, double *dx, double *dt, double *mag_x,
                       double *mag_t);

/* tally_kl_div_backward in double: grad_out holds rows*cols values (NONE)
 * or one; gx, gt (either may be NULL) and their mags get rows*cols values
 * in row-major order. Returns rows*cols, or -1 for a refused case. */
int tally_ref_kl_div_backward(tally_ref_mat input, tally_ref_mat target, const float *grad_out, int reduction,
                              unsigned flags, double *gx, double *gx_mag, double *gt, double *gt_mag);

/* tally_dirichlet_multinomial_backward in double: grad_out holds B values
 * (NONE) or one; grad (log_alpha's shape, row-major) and mag. Returns the
 * number of values written, or -1. */
int tally_ref_dirichlet_multinomial_backward(tally_ref_mat counts, tally_ref_mat log_alpha, const float *grad_out,
                                             int reduction, double *grad, double *mag);

#endif

/* ---- Diagonal Gaussian mixture ---- */

/* log q of one row in double: z [D], mu and lv [K*D], logits [K] (unused
 * when K == 1). */
double tally_ref_gmm_row_logq(const double *z, const double *mu, const double *lv, const double *logits, int64_t K,
                              int64_t D);

/* The gradients of g * log q of one row: dz [D], dmu and dlv [K*D], and
 * dlogit [K] added to (K > 1). Optionally *terms gets the sum over k and d
 * of |the density's terms|, the scale of the forward's rounding. */
void tally_ref_gmm_row_backward(const double *z, const double *mu, const double *lv, const double *logits,
                                int64_t K, int64_t D, double g, double *dz, double *dmu, double *dlv,
                                double *dlogit, double *terms);

/*
 * tally_gmm_log_prob_backward in double over B rows, with mags (units of
 * 2^-24) for every output: gz [B*D], gmu, glv [B*K*D], glogits [K] (K > 1).
 * grad_log_q: B values. Inputs are dense row-major floats.
 */
int tally_ref_gmm_log_prob_backward(const float *z, const float *mu, const float *lv, const float *logits,
                                    int64_t B, int64_t K, int64_t D, const float *grad_log_q, double *gz,
                                    double *gz_mag, double *gmu, double *gmu_mag, double *glv, double *glv_mag,
                                    double *glogits, double *glogits_mag);
