/*
 * digamma_accuracy - measures tally_digammaf (include/tally/portable_math.h)
 * against a float64 digamma over every positive float (or every STEP-th bit
 * pattern), and prints the rows of docs/accuracy.md's digamma table.
 *
 * Build and run (the numbers in docs/accuracy.md come from exactly this):
 *   gcc -std=c11 -O2 -ffp-contract=off -fopenmp -Wall -Wextra -Werror \
 *       -Iinclude -Iharness tools/math/digamma_accuracy.c \
 *       harness/reference_backward.c -o /tmp/digamma_accuracy -lm
 *   /tmp/digamma_accuracy        # every float in (0, +inf]
 *   /tmp/digamma_accuracy 64     # every 64th bit pattern, a smoke test
 *
 * The float64 reference: the recurrence psi(x) = psi(x + 1) - 1/x up to
 * x >= 20, then the asymptotic series to the x^-14 term (the first omitted
 * term is below 1e-21 there), all in double. Its own error is a few double
 * ulps of the largest term, far below a float ulp.
 *
 * Metrics per input range: the largest error in units of the reference's
 * float ulp (relative), and, where |psi(x)| < 0.1 (next to the root at
 * x = 1.46163...), where a relative measure is meaningless, the largest
 * absolute error instead.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference_backward.h"
#include "tally/portable_math.h"

static float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* The spacing of floats at |v| (2^-149 below the normal range). */
static double ulp_of(double v)
{
    double a = fabs(v);
    if (a < 0x1p-126) return 0x1p-149;
    int e;
    frexp(a, &e);
    return ldexp(1.0, e - 24);
}

typedef struct range {
    const char *name;
    uint32_t lo, hi; /* bit patterns, inclusive */
} range;

int main(int argc, char **argv)
{
    uint32_t step = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 1u;
    if (step == 0) step = 1;
    const range ranges[] = {
        {"(0, 2^-20)", 0x00000001u, 0x357fffffu},
        {"[2^-20, 1)", 0x35800000u, 0x3f7fffffu},
        {"[1, 6)", 0x3f800000u, 0x40bfffffu},
        {"[6, 2^24]", 0x40c00000u, 0x4b800000u},
        {"(2^24, +inf]", 0x4b800001u, 0x7f800000u},
    };
    printf("| inputs | n | max err (ulp) | at x | max abs err where abs(psi) < 0.1 | at x | special |\n");
    printf("|---|---|---|---|---|---|---|\n");
    for (size_t ri = 0; ri < sizeof ranges / sizeof ranges[0]; ri++) {
        const range *g = &ranges[ri];
        double worst = 0.0, worst_abs = 0.0;
        float at = 0.0f, at_abs = 0.0f;
        uint64_t n = 0, special = 0;
        int64_t count = ((int64_t)g->hi - g->lo) / step + 1;
#pragma omp parallel
        {
            double w = 0.0, wa = 0.0;
            float a = 0.0f, aa = 0.0f;
            uint64_t nn = 0, sp = 0;
#pragma omp for schedule(static)
            for (int64_t k = 0; k < count; k++) {
                float x = float_of(g->lo + (uint32_t)k * step);
                float got = tally_digammaf(x);
                double ref = tally_ref_digamma((double)x);
                nn++;
                if (isinf(ref) || isinf(got) || isnan(got)) {
                    float rf = (float)ref;
                    if (!(isinf(rf) && got == rf)) sp++;
                    continue;
                }
                double err = fabs((double)got - ref);
                if (fabs(ref) < 0.1) {
                    if (err > wa) wa = err, aa = x;
                } else {
                    double e = err / ulp_of(ref);
                    if (e > w) w = e, a = x;
                }
            }
#pragma omp critical
            {
                n += nn;
                special += sp;
                if (w > worst) worst = w, at = a;
                if (wa > worst_abs) worst_abs = wa, at_abs = aa;
            }
        }
        if (worst_abs > 0.0)
            printf("| %s | %llu | %.3f | %.9g | %.3g | %.9g | %llu |\n", g->name, (unsigned long long)n, worst,
                   (double)at, worst_abs, (double)at_abs, (unsigned long long)special);
        else
            printf("| %s | %llu | %.3f | %.9g | - | - | %llu |\n", g->name, (unsigned long long)n, worst,
                   (double)at, (unsigned long long)special);
        fflush(stdout);
    }
    return 0;
}
