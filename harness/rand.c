/*
 * harness/rand.c - deterministic input makers (see rand.h).
 */
#include "rand.h"

#include <math.h>
#include <stdlib.h>

#define TWO_PI 6.283185307179586476925286766559

double harness_rand_normal(harness_rand *r)
{
    double u = harness_rand_unit(r), v = harness_rand_unit(r);
    return sqrt(-2.0 * log(u)) * cos(TWO_PI * v);
}

void harness_fill_normal(float *x, uint64_t n, harness_rand *r, double mean, double sd)
{
    for (uint64_t i = 0; i < n; i++) x[i] = (float)(mean + sd * harness_rand_normal(r));
}

void harness_fill_counts(float *x, uint64_t n, harness_rand *r)
{
    for (uint64_t i = 0; i < n; i++) {
        double v = floor(exp(0.5 + 1.2 * harness_rand_normal(r))) - 1.0;
        x[i] = (float)(v < 0.0 ? 0.0 : v > 1e6 ? 1e6 : v);
    }
}

void harness_fill_softmax_rows(float *x, int64_t rows, int64_t cols, harness_rand *r, double sd, double zero_fraction,
                           int as_log, unsigned char *zero_mask, int make_mask)
{
    double *w = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *w);
    if (w == NULL) abort(); /* a few KiB; the tool cannot go on without it */
    for (int64_t row = 0; row < rows; row++) {
        unsigned char *mask = zero_mask != NULL ? zero_mask + (size_t)row * (size_t)cols : NULL;
        if (mask != NULL && make_mask) {
            int any = 0;
            for (int64_t c = 0; c < cols; c++) {
                mask[c] = harness_rand_unit(r) < zero_fraction;
                any |= !mask[c];
            }
            if (!any && cols > 0) mask[(size_t)(harness_rand_u64(r) % (uint64_t)cols)] = 0;
        }
        /* Softmax in double, shifted by the maximum. */
        double m = -INFINITY;
        for (int64_t c = 0; c < cols; c++) {
            w[c] = sd * harness_rand_normal(r);
            if (mask == NULL || !mask[c]) m = w[c] > m ? w[c] : m;
        }
        double total = 0.0;
        for (int64_t c = 0; c < cols; c++) {
            w[c] = (mask != NULL && mask[c]) ? 0.0 : exp(w[c] - m);
            total += w[c];
        }
        float *out = x + (size_t)row * (size_t)cols;
        for (int64_t c = 0; c < cols; c++) {
            double p = w[c] / total;
            out[c] = as_log ? (float)log(p) : (float)p;
        }
    }
    free(w);
}
