/*
 * tests/check_half_convert.c - tally/half.h's conversions against an
 * independent reference written here with double arithmetic and ldexp.
 *
 * Widening: all 65536 encodings of each type against the value the format
 * defines (sign * 2^(e - bias) * 1.m, or the subnormal and special cases),
 * bits included (signed zeros, infinities, NaN sign and payload).
 * Narrowing: every encoding round-trips; every midpoint between adjacent
 * values, and the floats just either side of it, round as a search for the
 * nearest value (ties to the even encoding) says; and 2^24 float bit
 * patterns spread over all 2^32 do too. Overflow goes to infinity from the
 * midpoint between the largest finite value and the next power of two.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/half.h"
#include "testutil.h"

/* Check's ck_assert_msg records its location on every call (a write to the
 * runner's pipe in fork mode); the loops here make tens of millions of
 * checks, so they test first and call Check only on a failure. */
#define EXPECT(cond, ...)                              \
    do {                                               \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);        \
    } while (0)

/* The two formats as the reference sees them. */
typedef struct format {
    const char *name;
    int mant_bits; /* stored mantissa bits */
    int exp_bits;
    int bias;
    float (*widen)(tally_u32);
    tally_u32 (*narrow)(float);
} format;

static const format formats[] = {
    {"bf16", 7, 8, 127, tally_bf16_to_f32, tally_f32_to_bf16},
    {"f16", 10, 5, 15, tally_f16_to_f32, tally_f32_to_f16},
};

/* The value of encoding h, from the format's definition. Sets *nan for a NaN. */
static double ref_value(const format *f, unsigned h, int *nan)
{
    const unsigned m = h & ((1u << f->mant_bits) - 1u);
    const unsigned e = (h >> f->mant_bits) & ((1u << f->exp_bits) - 1u);
    const double sign = (h >> 15) ? -1.0 : 1.0;
    *nan = 0;
    if (e == (1u << f->exp_bits) - 1u) {
        if (m != 0) *nan = 1;
        return sign * INFINITY;
    }
    if (e == 0) return sign * ldexp((double)m, 1 - f->bias - f->mant_bits);
    return sign * ldexp((double)((1u << f->mant_bits) | m), (int)e - f->bias - f->mant_bits);
}

START_TEST(widen_every_encoding)
{
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++) {
        const format *f = &formats[k];
        for (unsigned h = 0; h < 65536u; h++) {
            int nan;
            const double want = ref_value(f, h, &nan);
            const float got = f->widen(h);
            const uint32_t bits = tt_bits(got);
            if (nan) {
                EXPECT(got != got, "%s 0x%04x: widened to 0x%08x, not a NaN", f->name, h, bits);
                EXPECT((bits >> 31) == (h >> 15), "%s 0x%04x: NaN lost its sign (0x%08x)", f->name, h, bits);
                /* The payload's bits move up unchanged. */
                const unsigned m = h & ((1u << f->mant_bits) - 1u);
                EXPECT((bits & 0x7fffffu) == (uint32_t)m << (23 - f->mant_bits),
                              "%s 0x%04x: NaN payload 0x%06x", f->name, h, bits & 0x7fffffu);
            } else {
                EXPECT((double)got == want, "%s 0x%04x: widened to %.9g (0x%08x), want %.17g", f->name, h,
                              (double)got, bits, want);
                EXPECT(!signbit(got) == !signbit(want), "%s 0x%04x: sign of %g", f->name, h, (double)got);
            }
        }
    }
}
END_TEST

/* Sorted table of the finite non-negative values (encodings 0 .. max are
 * increasing) plus, at index max + 1, the next power of two standing for
 * infinity: rounding beyond the largest value goes there. */
typedef struct table {
    double v[65536];
    unsigned count; /* finite encodings + 1 */
} table;

static void build_table(const format *f, table *t)
{
    const unsigned inf = ((1u << f->exp_bits) - 1u) << f->mant_bits;
    for (unsigned h = 0; h < inf; h++) {
        int nan;
        t->v[h] = ref_value(f, h, &nan);
        if (h > 0) EXPECT(t->v[h] > t->v[h - 1], "%s: table not increasing at 0x%04x", f->name, h);
    }
    t->v[inf] = ldexp(1.0, (1 << (f->exp_bits - 1)));
    t->count = inf + 1;
}

/* The expected encoding of x: nearest value, ties to the even encoding. */
static unsigned ref_narrow(const format *f, const table *t, float x)
{
    const uint32_t bits = tt_bits(x);
    const unsigned sign = (bits >> 31) << 15;
    if (x != x) return 0xffffffffu; /* checked separately */
    const double a = fabs((double)x);
    const unsigned inf = t->count - 1;
    if (isinf(a)) return sign | inf;
    /* Largest index with v <= a (binary search over [0, inf]). */
    unsigned lo = 0, hi = inf;
    if (a >= t->v[inf]) return sign | inf;
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (t->v[mid] <= a) lo = mid;
        else hi = mid;
    }
    const double below = a - t->v[lo], above = t->v[lo + 1] - a; /* both exact in double */
    unsigned pick;
    if (below < above) pick = lo;
    else if (above < below) pick = lo + 1;
    else pick = (lo & 1u) == 0u ? lo : lo + 1;
    (void)f;
    return sign | pick;
}

static void check_narrow(const format *f, const table *t, float x)
{
    const tally_u32 got = f->narrow(x);
    EXPECT(got <= 0xffffu, "%s: narrowing %a gave 0x%x, more than 16 bits", f->name, (double)x, got);
    if (x != x) {
        int nan;
        ref_value(f, got, &nan);
        EXPECT(nan, "%s: NaN 0x%08x narrowed to 0x%04x, not a NaN", f->name, tt_bits(x), got);
        EXPECT((got >> 15) == (tt_bits(x) >> 31), "%s: NaN 0x%08x lost its sign", f->name, tt_bits(x));
        return;
    }
    const unsigned want = ref_narrow(f, t, x);
    EXPECT(got == want, "%s: %a (0x%08x) narrowed to 0x%04x, want 0x%04x", f->name, (double)x, tt_bits(x),
                  got, want);
}

START_TEST(narrow_every_encoding_and_midpoint)
{
    table *t = tt_alloc(sizeof *t);
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++) {
        const format *f = &formats[k];
        build_table(f, t);
        for (unsigned h = 0; h < 65536u; h++) {
            int nan;
            ref_value(f, h, &nan);
            const float w = f->widen(h);
            check_narrow(f, t, w);
            if (!nan) EXPECT(f->narrow(w) == h, "%s 0x%04x does not round-trip", f->name, h);
        }
        /* Midpoints (exact in float: at most 12 significant bits) and
         * their float neighbours, both signs, up to the overflow point. */
        for (unsigned h = 0; h + 1 < t->count; h++) {
            const float mid = (float)((t->v[h] + t->v[h + 1]) / 2.0);
            EXPECT((double)mid == (t->v[h] + t->v[h + 1]) / 2.0, "%s: midpoint above 0x%04x is not a float", f->name, h);
            const float probes[3] = {nextafterf(mid, 0.0f), mid, nextafterf(mid, INFINITY)};
            for (int p = 0; p < 3; p++) {
                check_narrow(f, t, probes[p]);
                check_narrow(f, t, -probes[p]);
            }
        }
    }
    free(t);
}
END_TEST

START_TEST(narrow_spread_of_floats)
{
    table *t = tt_alloc(sizeof *t);
    for (size_t k = 0; k < sizeof formats / sizeof formats[0]; k++) {
        const format *f = &formats[k];
        build_table(f, t);
        /* 2^24 patterns: every 256th, each with its low byte varied by a
         * multiplicative hash so the rounding bits are not always equal. */
        for (uint64_t i = 0; i < (1u << 24); i++) {
            const uint32_t bits = (uint32_t)(i << 8) | (uint32_t)((i * 0x9e3779b1u) >> 24);
            check_narrow(f, t, tt_float(bits));
        }
    }
    free(t);
}
END_TEST

TT_SUITE("half_convert",
         {.name = "convert", .timeout = 300,
          .tests = {widen_every_encoding, narrow_every_encoding_and_midpoint, narrow_spread_of_floats}})
