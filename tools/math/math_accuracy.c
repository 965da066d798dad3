/*
 * math_accuracy - measure tally's portable math (include/tally/portable_math.h)
 * against glibc's double-precision functions rounded to float, and measure
 * glibc's own float functions the same way for comparison.
 *
 * Build and run (the numbers in docs/accuracy.md come from exactly this):
 *   gcc -std=c11 -O2 -ffp-contract=off -fopenmp -Wall -Wextra -Wundef -Werror \
 *       -Iinclude tools/math/math_accuracy.c -o /tmp/math_accuracy -lm
 *   /tmp/math_accuracy            # full run: every float where stated
 *   /tmp/math_accuracy --quick    # every 64th float pattern, for a smoke test
 *   /tmp/math_accuracy exp log    # only the named functions
 *
 * Metrics, per function and input set:
 *   max ulp   the largest distance, in float steps, between the result and
 *             the double reference rounded to float (0 = that rounding,
 *             1 = a neighbour of it).  +0 and -0 count as equal here; the
 *             signs of zeros are checked by tests/check_math.c.
 *   max err   the largest |result - reference| / ulp(reference), with the
 *             reference kept in double (ulp of the float binade, 2^-149 for
 *             subnormals), i.e. the error in units of the last place.
 *   special   results whose NaN-ness or infinity differs from the rounded
 *             reference (must be 0).
 * lgamma's requirement is absolute where |lgamma(x)| < 0.1 (its zeros at 1
 * and 2), so those inputs are reported as a separate max absolute error.
 * The glibc double reference is itself rounded once more to float; glibc's
 * exp/log/sin/cos are accurate to well under one double ulp, so a different
 * rounding could only arise within ~1e-16 relative of a float midpoint.
 */
#define _GNU_SOURCE 1
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../harness/rand.h"
#include "math_ref.h"
#include "tally/portable_math.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Every function measured: X(ID, name, float64 reference of float x (as
 * double d), tally's value, glibc's float value, how glibc's is spelled). */
#define FN_MAP(X)                                                                                       \
    X(EXP, "exp", exp(d), tally_expf(x), expf(x), "expf")                                               \
    X(LOG, "log", log(d), tally_logf(x), logf(x), "logf")                                               \
    X(LOG1P, "log1p", log1p(d), tally_log1pf(x), log1pf(x), "log1pf")                                   \
    X(LGAMMA, "lgamma", (x < 0.0f) ? NAN : lgamma(d), tally_lgammaf(x), (x < 0.0f) ? NAN : lgammaf(x),  \
      "lgammaf")                                                                                        \
    X(SQRT, "sqrt", sqrt(d), tally_sqrtf(x), sqrtf(x), "sqrtf")                                         \
    X(RECIP, "recip", 1.0 / d, tally_recipf(x), 1.0f / x, "1.0f/x")                                     \
    X(SINPI, "sinpi", math_ref_sincospi(x, 0), tally_sinpif(x), sinf((float)M_PI * x), "sinf((float)M_PI*x)") \
    X(COSPI, "cospi", math_ref_sincospi(x, 1), tally_cospif(x), cosf((float)M_PI * x), "cosf((float)M_PI*x)")

enum fn_id {
#define FN_ID(id, name, ref, mine, glibc, glibc_name) F_##id,
    FN_MAP(FN_ID)
#undef FN_ID
    F_COUNT
};
static const char *fn_names[F_COUNT] = {
#define FN_NAME(id, name, ref, mine, glibc, glibc_name) name,
    FN_MAP(FN_NAME)
#undef FN_NAME
};
static const char *glibc_names[F_COUNT] = {
#define FN_GLIBC_NAME(id, name, ref, mine, glibc, glibc_name) glibc_name,
    FN_MAP(FN_GLIBC_NAME)
#undef FN_GLIBC_NAME
};

static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }


/* Function fn at x: which 0 is the float64 reference, 1 tally's value, 2
 * glibc's (the floats widen exactly). */
static double eval(int fn, float x, int which)
{
    const double d = x;
    switch (fn) {
#define FN_EVAL(id, name, ref, mine, glibc, glibc_name) \
    case F_##id: return which == 0 ? (double)(ref) : which == 1 ? (double)(mine) : (double)(glibc);
        FN_MAP(FN_EVAL)
#undef FN_EVAL
    }
    (void)d;
    return NAN;
}

static double reference(int fn, float x) { return eval(fn, x, 0); }
static float tally_eval(int fn, float x) { return (float)eval(fn, x, 1); }
static float glibc_eval(int fn, float x) { return (float)eval(fn, x, 2); }



typedef struct {
    uint64_t n;          /* inputs measured */
    int64_t max_ulp;     /* max distance to the rounded reference */
    float at_ulp;
    double max_err;      /* max |y - ref| / ulp(ref) */
    float at_err;
    uint64_t n_off;      /* results not equal to the rounded reference */
    uint64_t special;    /* NaN / inf disagreements */
    float at_special;
    double max_abs;      /* lgamma only: max abs error where |ref| < 0.1 */
    float at_abs;
    uint64_t n_abs;
} stats_t;

static void stats_init(stats_t *s)
{
    memset(s, 0, sizeof *s);
    s->max_ulp = -1;
}

static void stats_merge(stats_t *into, const stats_t *s)
{
    into->n += s->n;
    into->n_off += s->n_off;
    into->n_abs += s->n_abs;
    if (s->max_ulp > into->max_ulp) { into->max_ulp = s->max_ulp; into->at_ulp = s->at_ulp; }
    if (s->max_err > into->max_err) { into->max_err = s->max_err; into->at_err = s->at_err; }
    if (s->special > 0 && into->special == 0) into->at_special = s->at_special;
    into->special += s->special;
    if (s->max_abs > into->max_abs) { into->max_abs = s->max_abs; into->at_abs = s->at_abs; }
}

static void stats_add(stats_t *s, int fn, float x, float y, double ref)
{
    float rf = (float)ref;
    s->n++;
    int yn = isnan(y), rn = isnan(rf);
    if (yn || rn) {
        if (yn != rn) { if (!s->special) s->at_special = x; s->special++; }
        return;
    }
    if (isinf(y) || isinf(rf)) {
        if (y != rf) { if (!s->special) s->at_special = x; s->special++; }
        return;
    }
    if (fn == F_LGAMMA && fabs(ref) < 0.1) {
        double ae = fabs((double)y - ref);
        s->n_abs++;
        if (ae > s->max_abs) { s->max_abs = ae; s->at_abs = x; }
        return;
    }
    int64_t d = math_ref_ordinal(y) - math_ref_ordinal(rf);
    if (d < 0) d = -d;
    if (d) s->n_off++;
    if (d > s->max_ulp) { s->max_ulp = d; s->at_ulp = x; }
    double e = fabs((double)y - ref) / math_ref_ulp(ref);
    if (e > s->max_err) { s->max_err = e; s->at_err = x; }
}

/* Measure fn over the bit patterns lo..hi (inclusive) with the given step. */
static void run_range(int fn, uint64_t lo, uint64_t hi, uint64_t step, stats_t *tal, stats_t *gl)
{
    stats_init(tal);
    stats_init(gl);
    int64_t count = (int64_t)((hi - lo) / step) + 1;
#pragma omp parallel
    {
        stats_t t, g;
        stats_init(&t);
        stats_init(&g);
#pragma omp for schedule(dynamic, 65536)
        for (int64_t i = 0; i < count; i++) {
            float x = float_of((uint32_t)(lo + (uint64_t)i * step));
            if (isnan(x)) {
                /* NaN in must give NaN out; nothing else to measure. */
                float y = tally_eval(fn, x);
                t.n++;
                if (!isnan(y)) { if (!t.special) t.at_special = x; t.special++; }
                continue;
            }
            double ref = reference(fn, x);
            stats_add(&t, fn, x, tally_eval(fn, x), ref);
            stats_add(&g, fn, x, glibc_eval(fn, x), ref);
        }
#pragma omp critical
        {
            stats_merge(tal, &t);
            stats_merge(gl, &g);
        }
    }
}

static char *fmt_x(char *buf, size_t len, float x)
{
    snprintf(buf, len, "%.9g (%a)", (double)x, (double)x);
    return buf;
}

static void print_row(const char *name, const char *domain, const stats_t *s, int fn)
{
    char b1[64], b2[64], b3[64];
    if (fn == F_LGAMMA) {
        printf("| %s | %s | %" PRIu64 " | %" PRId64 " | %s | %.3f | %s | %.3g at %s | %" PRIu64 " |\n",
               name, domain, s->n, s->max_ulp, fmt_x(b1, sizeof b1, s->at_ulp), s->max_err,
               fmt_x(b2, sizeof b2, s->at_err), s->max_abs, fmt_x(b3, sizeof b3, s->at_abs),
               s->special);
    } else {
        printf("| %s | %s | %" PRIu64 " | %" PRId64 " | %s | %.3f | %s | %" PRIu64 " | %" PRIu64 " |\n",
               name, domain, s->n, s->max_ulp, fmt_x(b1, sizeof b1, s->at_ulp), s->max_err,
               fmt_x(b2, sizeof b2, s->at_err), s->n_off, s->special);
    }
}

typedef struct {
    int fn;
    const char *domain;
    uint32_t lo, hi;
    uint32_t step; /* full-run step; --quick multiplies it by 64 */
} job_t;

static const job_t jobs[] = {
    { F_EXP, "all 2^32 floats", 0x00000000u, 0xffffffffu, 1 },
    { F_LOG, "all 2^32 floats", 0x00000000u, 0xffffffffu, 1 },
    { F_LOG1P, "all 2^32 floats", 0x00000000u, 0xffffffffu, 1 },
    { F_SQRT, "all 2^32 floats", 0x00000000u, 0xffffffffu, 1 },
    { F_RECIP, "all 2^32 floats", 0x00000000u, 0xffffffffu, 1 },
    { F_SINPI, "every float in [0, 2]", 0x00000000u, 0x40000000u, 1 },
    { F_SINPI, "every float in [-2, 0)", 0x80000001u, 0xc0000000u, 1 },
    { F_SINPI, "every 61st float pattern (all finite x)", 0x00000000u, 0xffffffffu, 61 },
    { F_COSPI, "every float in [0, 2]", 0x00000000u, 0x40000000u, 1 },
    { F_COSPI, "every 61st float pattern (all finite x)", 0x00000000u, 0xffffffffu, 61 },
    { F_LGAMMA, "every float in (0, 2^24]", 0x00000001u, 0x4b800000u, 1 },
    { F_LGAMMA, "every float in (2^24, +inf]", 0x4b800001u, 0x7f800000u, 1 },
};

/* ---- division: tally_divf against IEEE a / b ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;
/* splitmix64 (harness/rand.h): deterministic inputs, the same on every run. */
static uint64_t rng_next(void)
{
    return harness_splitmix64(&rng_state);
}

static void run_div(uint64_t n)
{
    uint64_t bad = 0, done = 0, nsub = 0;
    float bad_a = 0, bad_b = 0;
    float *as = malloc(sizeof(float) * 4096), *bs = malloc(sizeof(float) * 4096);
    for (uint64_t base = 0; base < n; base += 4096) {
        for (int i = 0; i < 4096; i++) {
            uint64_t r = rng_next();
            uint32_t ua = (uint32_t)r, ub = (uint32_t)(r >> 32);
            int kind = (int)((base / 4096) % 4);
            if (kind == 1) {
                /* quotients around the subnormal range */
                uint32_t ea = (uint32_t)(rng_next() % 60u), eb = 127u + (uint32_t)(rng_next() % 60u);
                ua = (ua & 0x807fffffu) | (ea << 23);
                ub = (ub & 0x807fffffu) | (eb << 23);
            } else if (kind == 2) {
                /* operands of similar size: all-ones and sparse mantissas */
                ua = (ua & 0x80ffffffu) | 0x3f000000u;
                ub = (ub & 0x80ffffffu) | 0x3f000000u;
                if (r & 0x100000000000ull) ub |= 0x007fffffu;
                if (r & 0x200000000000ull) ua &= 0xff800fffu;
            } else if (kind == 3) {
                /* subnormal operands */
                if (r & 1) ua &= 0x807fffffu; else ub &= 0x807fffffu;
            }
            as[i] = float_of(ua);
            bs[i] = float_of(ub);
        }
        for (int i = 0; i < 4096; i++) {
            float q = tally_divf(as[i], bs[i]);
            float e = as[i] / bs[i];
            done++;
            if (fabsf(e) < 0x1p-126f && e != 0.0f) nsub++;
            int same = (bits_of(q) == bits_of(e)) || (isnan(q) && isnan(e));
            if (!same) {
                if (!bad) { bad_a = as[i]; bad_b = bs[i]; }
                bad++;
            }
        }
    }
    printf("| div | %" PRIu64 " pairs (random bits; quotients near/under 2^-126: %" PRIu64
           "; similar-size operands; subnormal operands) | bits different from IEEE a/b: %" PRIu64,
           done, nsub, bad);
    if (bad)
        printf(" (first: %a / %a)", (double)bad_a, (double)bad_b);
    printf(" |\n");
    free(as);
    free(bs);
}

int main(int argc, char **argv)
{
    int quick = 0;
    int want[F_COUNT + 1];
    int any = 0;
    memset(want, 0, sizeof want);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) { quick = 1; continue; }
        int found = 0;
        for (int f = 0; f < F_COUNT; f++)
            if (!strcmp(argv[i], fn_names[f])) { want[f] = 1; found = 1; }
        if (!strcmp(argv[i], "div")) { want[F_COUNT] = 1; found = 1; }
        if (!found) { fprintf(stderr, "unknown argument %s\n", argv[i]); return 2; }
        any = 1;
    }
    if (!any)
        for (int f = 0; f <= F_COUNT; f++) want[f] = 1;

    printf("Accuracy against glibc double functions rounded to float%s.\n\n",
           quick ? " (--quick: every 64th pattern)" : "");
    printf("| function | inputs | n | max ulp | at x | max err (ulp) | at x | results != reference "
           "(lgamma: max abs err where |lgamma|<0.1) | special mismatches |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    stats_t glibc_rows[sizeof jobs / sizeof jobs[0]];
    int ran[sizeof jobs / sizeof jobs[0]];
    for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++) {
        ran[j] = 0;
        if (!want[jobs[j].fn])
            continue;
        stats_t t;
        uint64_t step = jobs[j].step * (quick ? 64u : 1u);
        run_range(jobs[j].fn, jobs[j].lo, jobs[j].hi, step, &t, &glibc_rows[j]);
        char name[64];
        snprintf(name, sizeof name, "tally_%sf", fn_names[jobs[j].fn]);
        print_row(name, jobs[j].domain, &t, jobs[j].fn);
        fflush(stdout);
        ran[j] = 1;
    }
    printf("\nThe same inputs through glibc's float functions:\n\n");
    printf("| function | inputs | n | max ulp | at x | max err (ulp) | at x | results != reference "
           "(lgamma: max abs err where |lgamma|<0.1) | special mismatches |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t j = 0; j < sizeof jobs / sizeof jobs[0]; j++)
        if (ran[j])
            print_row(glibc_names[jobs[j].fn], jobs[j].domain, &glibc_rows[j], jobs[j].fn);
    if (want[F_COUNT]) {
        printf("\n| function | inputs | result |\n|---|---|---|\n");
        run_div(quick ? (1u << 20) : (1u << 26));
    }
    return 0;
}
