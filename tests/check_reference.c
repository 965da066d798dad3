/*
 * tests/check_reference.c - the float64 references themselves
 * (harness/reference.c), on cases with answers known in closed form, so that a
 * mistake in a reference cannot pass unnoticed by agreeing with the library.
 * Host-only: no backend, no library op.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "reference.h"
#include "testutil.h"

#define PI 3.14159265358979323846

START_TEST(error_measures)
{
    ck_assert(tally_ref_ulp_diff(1.0f, 1.0) == 0.0);
    ck_assert(tally_ref_ulp_diff(nextafterf(1.0f, 2.0f), 1.0) == 1.0);
    ck_assert(tally_ref_ulp_diff(1.0f, 1.0 + ldexp(1.0, -24)) == 0.5);
    ck_assert(tally_ref_ulp_diff(-3.0f, -3.0 - ldexp(1.0, -22)) == 1.0);
    ck_assert(tally_ref_ulp_diff(0.0f, ldexp(1.0, -149)) == 1.0); /* subnormal spacing */
    ck_assert(tally_ref_ulp_diff(NAN, NAN) == 0.0);
    ck_assert(isinf(tally_ref_ulp_diff(NAN, 1.0)));
    ck_assert(isinf(tally_ref_ulp_diff(1.0f, NAN)));
    ck_assert(tally_ref_ulp_diff(INFINITY, INFINITY) == 0.0);
    ck_assert(isinf(tally_ref_ulp_diff(INFINITY, -INFINITY)));
    ck_assert(isinf(tally_ref_ulp_diff(FLT_MAX, INFINITY)));
    ck_assert(tally_ref_rel_err(2.0f, 2.0) == 0.0);
    ck_assert(fabs(tally_ref_rel_err(1.5f, 1.0) - 0.5) < 1e-15);
    ck_assert(tally_ref_close(1.0f, 1.0 + 1e-8, 2e-8));
    ck_assert(!tally_ref_close(1.0f, 1.0 + 1e-7, 2e-8));
    ck_assert(tally_ref_close(NAN, NAN, 0.0));
    ck_assert(!tally_ref_close(0.0f, NAN, 1e30));
}
END_TEST

/* Depth = per level 4 * quads_per_lane - 1 + log2(lanes). */
START_TEST(tree_depth_and_tolerance)
{
    ck_assert(tally_ref_tree_depth(0) == 0.0);
    ck_assert(tally_ref_tree_depth(1) == 3.0);     /* 1 lane, 1 quad */
    ck_assert(tally_ref_tree_depth(10) == 5.0);    /* 4 lanes x 1 quad: 3 + 2 */
    ck_assert(tally_ref_tree_depth(1000) == 11.0); /* 256 lanes x 1: 3 + 8 */
    ck_assert(tally_ref_tree_depth(16384) == 71.0);
    ck_assert(tally_ref_tree_depth(16385) == 74.0); /* then 2 partials: 1 lane, 3 + 0 */
    ck_assert(tally_ref_tree_depth(1ull << 28) == 142.0);
    ck_assert(tally_ref_tolerance(0.0, 100, 5) == 0.0);
    ck_assert(fabs(tally_ref_tolerance(1.0, 10, 3) - 8 * (TALLY_REF_F32_U + TALLY_REF_F32_UNDERFLOW) * 1.01) < 1e-20);
    /* A result near the subnormal range may be a whole subnormal step off
     * (2^-149, about 1.4e-45): its tolerance covers that and stays tiny. */
    const double subnormal_scale = tally_ref_tolerance(2e-44, 1, 8);
    ck_assert(subnormal_scale >= 1.401298464324817e-45);
    ck_assert(subnormal_scale < 1e-43);
    /* The simulated tree against a hand evaluation of the documented n = 10
     * example. */
    float e[10] = {16777216.0f, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    ck_assert(tally_ref_tree_f32(e, 10, 0, 0.0f) == 16777222.0f);
    float mm[5] = {3, NAN, -1, 7, 2};
    ck_assert(isnan(tally_ref_tree_f32(mm, 5, 1, 0.0f)));
    mm[1] = 0.5f;
    ck_assert(tally_ref_tree_f32(mm, 5, 1, 0.0f) == -1.0f);
    ck_assert(tally_ref_tree_f32(mm, 5, 2, 0.0f) == 7.0f);
    ck_assert(tally_ref_tree_f32(mm, 0, 0, -5.0f) == -5.0f);
}
END_TEST

START_TEST(reductions)
{
    const float x[6] = {1, 2, 3, 4, 5, 6};
    double out[3], mag[3];
    tally_ref_mat m = tally_ref_mat_make(x, 2, 3, 3);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUM, TALLY_REF_AXIS_ALL, m, out, mag), 1);
    ck_assert(out[0] == 21.0 && mag[0] == 21.0);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUM, TALLY_REF_AXIS_ROW, m, out, mag), 2);
    ck_assert(out[0] == 6.0 && out[1] == 15.0);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_MEAN, TALLY_REF_AXIS_ROW, m, out, NULL), 2);
    ck_assert(out[0] == 2.0 && out[1] == 5.0);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUMSQ, TALLY_REF_AXIS_ALL, m, out, NULL), 1);
    ck_assert(out[0] == 91.0);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_MIN, TALLY_REF_AXIS_ROW, m, out, mag), 2);
    ck_assert(out[0] == 1.0 && out[1] == 4.0 && mag[0] == 0.0);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_MAX, TALLY_REF_AXIS_ALL, m, out, NULL), 1);
    ck_assert(out[0] == 6.0);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_LOGSUMEXP, TALLY_REF_AXIS_ROW, m, out, NULL), 2);
    ck_assert(fabs(out[0] - log(exp(1.0) + exp(2.0) + exp(3.0))) < 1e-14);
    /* A strided window: columns 1..2 of a 2 x 4 array. */
    const float y[8] = {9, 1, 2, 9, 9, 3, 4, 9};
    tally_ref_mat w = tally_ref_mat_make(y + 1, 2, 2, 4);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUM, TALLY_REF_AXIS_ALL, w, out, NULL), 1);
    ck_assert(out[0] == 10.0);
    /* NaN, infinities, empties. */
    const float z[4] = {1, NAN, -INFINITY, -INFINITY};
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_MIN, TALLY_REF_AXIS_ROW, tally_ref_mat_make(z, 2, 2, 2), out, NULL), 2);
    ck_assert(isnan(out[0]) && out[1] == -INFINITY);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_LOGSUMEXP, TALLY_REF_AXIS_ROW, tally_ref_mat_make(z, 2, 2, 2), out, NULL),
                     2);
    ck_assert(isnan(out[0]) && out[1] == -INFINITY);
    tally_ref_mat empty = tally_ref_mat_make(x, 0, 3, 3);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUM, TALLY_REF_AXIS_ALL, empty, out, NULL), 1);
    ck_assert(out[0] == 0.0);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_LOGSUMEXP, TALLY_REF_AXIS_ALL, empty, out, NULL), 1);
    ck_assert(out[0] == -INFINITY);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_MEAN, TALLY_REF_AXIS_ALL, empty, out, NULL), -1);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_MAX, TALLY_REF_AXIS_ROW, tally_ref_mat_make(x, 2, 0, 0), out, NULL), -1);
    ck_assert_int_eq(tally_ref_reduce(7, TALLY_REF_AXIS_ALL, m, out, NULL), -1);
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUM, 3, m, out, NULL), -1);
    /* The compensated sum keeps 1 + 1e-17 * many exactly enough. */
    static float many[100001];
    many[0] = 1.0f;
    for (int i = 1; i < 100001; i++) many[i] = 1e-8f;
    ck_assert_int_eq(tally_ref_reduce(TALLY_REF_SUM, TALLY_REF_AXIS_ALL, tally_ref_mat_make(many, 1, 100001, 100001),
                                      out, NULL),
                     1);
    ck_assert(fabs(out[0] - (1.0 + 100000.0 * (double)1e-8f)) < 1e-15);
}
END_TEST

START_TEST(kl)
{
    double mag;
    ck_assert(fabs(tally_ref_kl_term(logf(0.25f), 0.5f, 0, &mag) - 0.5 * (log(0.5) - (double)logf(0.25f))) < 1e-15);
    ck_assert(tally_ref_kl_term(-INFINITY, 0.0f, 0, &mag) == 0.0);
    ck_assert(isnan(tally_ref_kl_term(NAN, 0.0f, 0, &mag)));
    ck_assert(isnan(tally_ref_kl_term(-1.0f, -0.5f, 0, &mag)));
    ck_assert(tally_ref_kl_term(0.0f, 0.5f, TALLY_REF_KL_INPUT_IS_PROB, &mag) == INFINITY);
    ck_assert(tally_ref_kl_term(-1.0f, 0.0f, TALLY_REF_KL_LOG_TARGET, &mag) == 1.0);
    ck_assert(fabs(tally_ref_kl_term(0.5f, -1.0f, TALLY_REF_KL_LOG_TARGET | TALLY_REF_KL_INPUT_IS_PROB, &mag) -
                   exp(-1.0) * (-1.0 - log(0.5))) < 1e-15);
    const float in[4] = {-1, -2, -3, -4}, tg[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    double out[4], sum = 0;
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(in, 2, 2, 2), tally_ref_mat_make(tg, 2, 2, 2),
                                      TALLY_REF_REDUCTION_NONE, 0, out, NULL),
                     4);
    for (int i = 0; i < 4; i++) sum += out[i];
    double r;
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(in, 2, 2, 2), tally_ref_mat_make(tg, 2, 2, 2),
                                      TALLY_REF_REDUCTION_BATCHMEAN, 0, &r, NULL),
                     1);
    ck_assert(fabs(r - sum / 2) < 1e-15);
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(in, 0, 2, 2), tally_ref_mat_make(tg, 0, 2, 2),
                                      TALLY_REF_REDUCTION_MEAN, 0, &r, NULL),
                     -1);
}
END_TEST

/* The logits forms against log_softmax / softmax written out by hand for a
 * 2 x 3 matrix (no max shift needed at these sizes), the zero-target and
 * NaN-row rules, and the refused flag combinations. */
START_TEST(kl_logits)
{
    const float x[6] = {1, 2, 3, 0, -INFINITY, 0.5f}, y[6] = {3, 2, 1, -INFINITY, -INFINITY, 2};
    const tally_ref_mat mx = tally_ref_mat_make(x, 2, 3, 3), my = tally_ref_mat_make(y, 2, 3, 3);
    double lq[6], lt[6], p[6], out[6], mag[6];
    for (int r = 0; r < 2; r++) {
        double sx = 0, sy = 0;
        for (int c = 0; c < 3; c++) {
            sx += exp((double)x[3 * r + c]);
            sy += exp((double)y[3 * r + c]);
        }
        for (int c = 0; c < 3; c++) {
            lq[3 * r + c] = (double)x[3 * r + c] - log(sx);
            lt[3 * r + c] = (double)y[3 * r + c] - log(sy);
            p[3 * r + c] = exp(lt[3 * r + c]);
        }
    }
    const unsigned both = TALLY_REF_KL_INPUT_LOGITS | TALLY_REF_KL_TARGET_LOGITS;
    ck_assert_int_eq(tally_ref_kl_div(mx, my, TALLY_REF_REDUCTION_NONE, both, out, mag), 6);
    for (int i = 0; i < 6; i++) {
        /* Masked target elements (-inf) give 0, also where log q = -inf. */
        double want = i == 3 || i == 4 ? 0.0 : p[i] * (lt[i] - lq[i]);
        ck_assert_msg(fabs(out[i] - want) < 1e-14, "both, element %d: %.17g vs %.17g", i, out[i], want);
        ck_assert(mag[i] >= fabs(out[i]));
    }
    ck_assert_int_eq(tally_ref_kl_div(mx, my, TALLY_REF_REDUCTION_NONE, TALLY_REF_KL_TARGET_LOGITS, out, mag), 6);
    for (int i = 0; i < 6; i++) {
        double want = i == 3 || i == 4 ? 0.0 : p[i] * (lt[i] - (double)x[i]);
        ck_assert_msg(fabs(out[i] - want) < 1e-14, "target logits, element %d", i);
    }
    /* INPUT_LOGITS against probabilities and against log-probabilities. */
    const float t[6] = {0.25f, 0.5f, 0.25f, 0.0f, 0.0f, 1.0f};
    ck_assert_int_eq(tally_ref_kl_div(mx, tally_ref_mat_make(t, 2, 3, 3), TALLY_REF_REDUCTION_NONE,
                                      TALLY_REF_KL_INPUT_LOGITS, out, mag),
                     6);
    for (int i = 0; i < 6; i++) {
        double want = t[i] == 0.0f ? 0.0 : (double)t[i] * (log((double)t[i]) - lq[i]);
        ck_assert_msg(fabs(out[i] - want) < 1e-14, "input logits, element %d", i);
    }
    ck_assert_int_eq(tally_ref_kl_div(mx, tally_ref_mat_make(x, 2, 3, 3), TALLY_REF_REDUCTION_NONE,
                                      TALLY_REF_KL_INPUT_LOGITS | TALLY_REF_KL_LOG_TARGET, out, mag),
                     6);
    ck_assert(fabs(out[0] - exp(1.0) * (1.0 - lq[0])) < 1e-14);
    ck_assert(isnan(out[4])); /* exp(-inf) * (-inf - log q): 0 * -inf */
    /* A row with a NaN or +inf logit, or only -inf, is NaN throughout. */
    const float bad[6] = {1, NAN, 0, INFINITY, 1, 2}, minf[3] = {-INFINITY, -INFINITY, -INFINITY};
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(bad, 2, 3, 3), my, TALLY_REF_REDUCTION_NONE, both, out, mag), 6);
    for (int i = 0; i < 6; i++) ck_assert_msg(isnan(out[i]) && mag[i] == 0.0, "NaN row, element %d", i);
    ck_assert_int_eq(tally_ref_kl_div(mx, tally_ref_mat_make(bad, 2, 3, 3), TALLY_REF_REDUCTION_NONE, both, out, mag), 6);
    for (int i = 0; i < 6; i++) ck_assert_msg(isnan(out[i]), "NaN target row, element %d", i);
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(minf, 1, 3, 3), tally_ref_mat_make(y, 1, 3, 3),
                                      TALLY_REF_REDUCTION_SUM, both, out, mag),
                     1);
    ck_assert(isnan(out[0]));
    /* Identical rows: exactly 0; one column: exactly 0. */
    ck_assert_int_eq(tally_ref_kl_div(mx, mx, TALLY_REF_REDUCTION_SUM, both, out, mag), 1);
    ck_assert(out[0] == 0.0);
    ck_assert_int_eq(tally_ref_kl_div(tally_ref_mat_make(x, 6, 1, 1), tally_ref_mat_make(y, 6, 1, 1),
                                      TALLY_REF_REDUCTION_NONE, both, out, mag),
                     6);
    ck_assert(out[0] == 0.0 && out[1] == 0.0 && out[5] == 0.0 && isnan(out[3]) && isnan(out[4]));
    /* batchmean divides the sum by rows. */
    double sum, bm;
    ck_assert_int_eq(tally_ref_kl_div(mx, my, TALLY_REF_REDUCTION_SUM, both, &sum, NULL), 1);
    ck_assert_int_eq(tally_ref_kl_div(mx, my, TALLY_REF_REDUCTION_BATCHMEAN, both, &bm, NULL), 1);
    ck_assert(fabs(bm - sum / 2) < 1e-15);
    /* The combinations the library refuses. */
    ck_assert_int_eq(tally_ref_kl_div(mx, my, TALLY_REF_REDUCTION_SUM,
                                      TALLY_REF_KL_INPUT_LOGITS | TALLY_REF_KL_INPUT_IS_PROB, out, mag),
                     -1);
    ck_assert_int_eq(tally_ref_kl_div(mx, my, TALLY_REF_REDUCTION_SUM,
                                      TALLY_REF_KL_TARGET_LOGITS | TALLY_REF_KL_LOG_TARGET, out, mag),
                     -1);
}
END_TEST

/* DM with integer alphas: pmf as a ratio of factorials. alpha = 1 for all V
 * categories gives 1 / C(N + V - 1, V - 1). */
START_TEST(dirichlet_multinomial)
{
    const float counts[5] = {3, 0, 4, 1, 4}, zero[5] = {0};
    double v, mag;
    ck_assert_int_eq(tally_ref_dirichlet_multinomial(tally_ref_mat_make(counts, 1, 5, 5), tally_ref_mat_make(zero, 1, 5, 5),
                                                     TALLY_REF_REDUCTION_NONE, TALLY_REF_DM_WITH_COEFFICIENT, &v, &mag),
                     1);
    ck_assert(fabs(v + log(1820.0)) < 1e-12);
    /* Without the coefficient: log pmf - log multinomial(12; 3,0,4,1,4)
     * = -log 1820 - log(12! / (3! 4! 1! 4!)). */
    ck_assert_int_eq(tally_ref_dirichlet_multinomial(tally_ref_mat_make(counts, 1, 5, 5), tally_ref_mat_make(zero, 1, 5, 5),
                                                     TALLY_REF_REDUCTION_NONE, 0, &v, NULL),
                     1);
    ck_assert(fabs(v + log(1820.0) + log(479001600.0 / (6.0 * 24.0 * 1.0 * 24.0))) < 1e-12);
    /* Per-row alpha, reductions, a negative count. */
    const float c2[6] = {1, 2, 0, 2, -1, 0}, la2[6] = {0, 0.5f, -0.5f, 0, 0, 0};
    double rows[2], s;
    ck_assert_int_eq(tally_ref_dirichlet_multinomial(tally_ref_mat_make(c2, 2, 3, 3), tally_ref_mat_make(la2, 2, 3, 3),
                                                     TALLY_REF_REDUCTION_NONE, 0, rows, NULL),
                     2);
    ck_assert(isfinite(rows[0]) && isnan(rows[1]));
    ck_assert_int_eq(tally_ref_dirichlet_multinomial(tally_ref_mat_make(c2, 1, 3, 3), tally_ref_mat_make(la2, 1, 3, 3),
                                                     TALLY_REF_REDUCTION_MEAN, 0, &s, NULL),
                     1);
    ck_assert(s == rows[0]);
    ck_assert_int_eq(tally_ref_dirichlet_multinomial(tally_ref_mat_make(c2, 0, 3, 3), tally_ref_mat_make(la2, 1, 3, 3),
                                                     TALLY_REF_REDUCTION_MEAN, 0, &s, NULL),
                     -1);
    ck_assert_int_eq(tally_ref_dirichlet_multinomial(tally_ref_mat_make(c2, 2, 3, 3), tally_ref_mat_make(la2, 2, 2, 2),
                                                     TALLY_REF_REDUCTION_NONE, 0, rows, NULL),
                     -1);
}
END_TEST

START_TEST(gmm)
{
    /* K = 1, D = 1: a standard normal at 0. */
    const float z0 = 0.0f, zero = 0.0f;
    double v, mag;
    ck_assert_int_eq(tally_ref_gmm_log_prob(tally_ref_mat_make(&z0, 1, 1, 1), tally_ref_mat_make(&zero, 1, 1, 1),
                                            tally_ref_mat_make(&zero, 1, 1, 1), NULL, 1, &v, &mag),
                     1);
    ck_assert(fabs(v + 0.5 * log(2 * PI)) < 1e-15);
    /* N(z; 1, e^2) at z = 3, D = 1: -0.5 (2/e)^2 - 1 - 0.5 log 2 pi. */
    const float z1 = 3.0f, mu1 = 1.0f, lv1 = 2.0f;
    tally_ref_gmm_log_prob(tally_ref_mat_make(&z1, 1, 1, 1), tally_ref_mat_make(&mu1, 1, 1, 1),
                           tally_ref_mat_make(&lv1, 1, 1, 1), NULL, 1, &v, NULL);
    ck_assert(fabs(v - (-0.5 * 4.0 / exp(2.0) - 1.0 - 0.5 * log(2 * PI))) < 1e-14);
    /* Two identical components with any logits equal one component. */
    const float mu2[2] = {1.0f, 1.0f}, lv2[2] = {2.0f, 2.0f}, lg[2] = {0.3f, -4.0f};
    double v2;
    tally_ref_gmm_log_prob(tally_ref_mat_make(&z1, 1, 1, 1), tally_ref_mat_make(mu2, 1, 2, 2),
                           tally_ref_mat_make(lv2, 1, 2, 2), lg, 2, &v2, NULL);
    ck_assert(fabs(v2 - v) < 1e-14);
    /* A mixture of N(-2, 1) and N(2, 1) with weights about 1/4, 3/4 at z = 0. */
    const float mu3[2] = {-2.0f, 2.0f}, lv3[2] = {0, 0}, lg3[2] = {0.0f, logf(3.0f)};
    tally_ref_gmm_log_prob(tally_ref_mat_make(&z0, 1, 1, 1), tally_ref_mat_make(mu3, 1, 2, 2),
                           tally_ref_mat_make(lv3, 1, 2, 2), lg3, 2, &v2, NULL);
    /* Both components have density exp(-2) / sqrt(2 pi) at 0, whatever the weights. */
    ck_assert(fabs(v2 - (-2.0 - 0.5 * log(2 * PI))) < 1e-14);
    /* The sample in double: z = mu_c + std * eps with eps from the stream. */
    int32_t comp = 0;
    double z, lq;
    const float mus[1] = {0.5f}, lvs[1] = {1.0f};
    ck_assert_int_eq(tally_ref_gmm_sample(tally_ref_mat_make(mus, 1, 1, 1), tally_ref_mat_make(lvs, 1, 1, 1), NULL, 1,
                                          7, 8, 12, 1, 1, 0, &comp, &z, &lq),
                     1);
    ck_assert_int_eq(comp, 0);
    double eps = tally_ref_rng_normal(7, 8, 12 + 4); /* B4 = 4 */
    ck_assert(fabs(z - (0.5 + exp(0.5) * eps)) < 1e-15);
    ck_assert(fabs(lq - (-0.5 * eps * eps - 0.5 - 0.5 * log(2 * PI))) < 1e-13);
}
END_TEST

START_TEST(categorical)
{
    const float w[3] = {1, 0, 3};
    double margin;
    ck_assert_int_eq(tally_ref_categorical(w, 3, 0, 0.25, &margin), 0);
    ck_assert(margin == 0.0);
    ck_assert_int_eq(tally_ref_categorical(w, 3, 0, 0.2500001, NULL), 2);
    ck_assert_int_eq(tally_ref_categorical(w, 3, 0, 1.0, NULL), 2);
    ck_assert_int_eq(tally_ref_categorical(w, 3, 0, 0.1, &margin), 0);
    ck_assert(fabs(margin - 0.1) < 1e-15);
    ck_assert(tally_ref_categorical_consistent(w, 3, 0, 0.25, 0, 0.0));
    ck_assert(tally_ref_categorical_consistent(w, 3, 0, 0.25, 2, 0.0));
    ck_assert(!tally_ref_categorical_consistent(w, 3, 0, 0.25, 1, 0.1)); /* zero weight */
    ck_assert(!tally_ref_categorical_consistent(w, 3, 0, 0.9, 0, 0.1));
    ck_assert(tally_ref_categorical_consistent(w, 3, 0, 0.26, 0, 0.02));
    const float bad[3] = {1, -1, 3}, zeros[3] = {0, 0, 0}, inf[3] = {1, INFINITY, 0};
    ck_assert_int_eq(tally_ref_categorical(bad, 3, 0, 0.5, NULL), -1);
    ck_assert_int_eq(tally_ref_categorical(zeros, 3, 0, 0.5, NULL), -1);
    ck_assert_int_eq(tally_ref_categorical(inf, 3, 0, 0.5, NULL), -1);
    ck_assert(tally_ref_categorical_consistent(bad, 3, 0, 0.5, -1, 0.0));
    ck_assert(!tally_ref_categorical_consistent(w, 3, 0, 0.5, -1, 0.0));
    /* Logits: softmax of {0, log 3} is {1/4, 3/4}; -inf never chosen; NaN,
     * +inf and all -inf are invalid. */
    const float lg[3] = {0.0f, -INFINITY, logf(3.0f)};
    ck_assert_int_eq(tally_ref_categorical(lg, 3, 1, 0.2, NULL), 0);
    ck_assert_int_eq(tally_ref_categorical(lg, 3, 1, 0.3, NULL), 2);
    const float lnan[2] = {0, NAN}, linf[2] = {0, INFINITY}, lneg[2] = {-INFINITY, -INFINITY};
    ck_assert_int_eq(tally_ref_categorical(lnan, 2, 1, 0.5, NULL), -1);
    ck_assert_int_eq(tally_ref_categorical(linf, 2, 1, 0.5, NULL), -1);
    ck_assert_int_eq(tally_ref_categorical(lneg, 2, 1, 0.5, NULL), -1);
}
END_TEST

/* Normal draws from the reference equal Box-Muller of the pair's float u and
 * t, and a pair shares its radius. */
START_TEST(normal_reference)
{
    for (uint64_t k = 0; k < 100; k++) {
        float u = tally_ref_rng_uniform(1, 2, 2 * k);
        float t = tally_ref_angle_from_bits(tally_ref_rng_raw(1, 2, 2 * k + 1));
        double s = sqrt(-2.0 * log((double)u));
        ck_assert(fabs(tally_ref_rng_normal(1, 2, 2 * k) - s * sin(PI * t)) < 1e-14);
        ck_assert(fabs(tally_ref_rng_normal(1, 2, 2 * k + 1) - s * cos(PI * t)) < 1e-14);
        ck_assert(tally_ref_rng_normal_radius(1, 2, 2 * k) == tally_ref_rng_normal_radius(1, 2, 2 * k + 1));
    }
}
END_TEST

TT_SUITE("reference",
         {.name = "reference",
          .tests = {error_measures, tree_depth_and_tolerance, reductions, kl, kl_logits, dirichlet_multinomial, gmm, categorical,
                    normal_reference}})
