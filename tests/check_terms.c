/*
 * tests/check_terms.c - the short paths of the hot terms give the same bits
 * as their plain definitions, on every input.
 *
 * tally_kl_term skips tally_logf's special-value selects when its
 * logarithms' arguments are positive normal floats, and tally_normal_pair
 * calls the cores of log, sqrt and sincospi because its arguments' ranges
 * are known. Results are a contract shared by the host, CUDA and OpenCL
 * builds, so the new code must reproduce the old one bit for bit, NaN
 * payloads included. The old definitions are copied below as references
 * (ref_*), exactly as they were before the short paths went in, and
 * compared with the current functions:
 *   - the log core against the old tally_logf on one positive normal float
 *     in 8 (every one with TALLY_TERMS_EXHAUSTIVE=1);
 *   - tally_kl_term for each of the four flag combinations, on 2^26
 *     random pairs drawn from every float class and on every pair of a
 *     list of edge values;
 *   - tally_normal_pair's radius on every distinct uniform u and its sine
 *     and cosine on every distinct angle t (both take one value per
 *     distinct (float)x, x a uint32: about 8.4e7 values), so the pair is
 *     the same for all 2^64 inputs; plus 2^24 random pairs end to end;
 *   - tally_logf, tally_sqrtf, tally_sinpif and tally_cospif themselves
 *     (rewritten around the shared cores) on 2^26 spread bit patterns and
 *     the special values.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/terms.h"
#include "testutil.h"

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float ffrom(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- The reference: the definitions before the short paths. ---- */

static float ref_logf(float x)
{
    int sub = x < 0x1p-126f;
    tally_i32 e;
    float f = tally_pm_log_split(sub ? x * 0x1p23f : x, &e);
    float ef = (float)(e - (sub ? 23 : 0));
    float v = tally_fma(f * f, tally_pm_log_q(f), f);
    float r = tally_fma(ef, TALLY_PM_LN2, tally_fma(ef, TALLY_PM_LN2_TAIL, v));
    int ok = (tally_as_u32(x) - 1u) < 0x7f7fffffu;
    r = ok ? r : x;
    r = (x < 0.0f) ? TALLY_F32_NAN : r;
    return (x == 0.0f) ? TALLY_F32_NEG_INF : r;
}

static float ref_sqrtf(float x)
{
    int tiny = x < 0x1p-100f;
    float xs = tiny ? x * 0x1p52f : x;
    float back = tiny ? 0x1p-26f : 1.0f;
    float y = tally_as_f32(0x5f3759dfu - (tally_as_u32(xs) >> 1));
    float h = 0.5f * xs;
    float e = tally_fma(-(h * y), y, 0.5f);
    y = tally_fma(y, e, y);
    e = tally_fma(-(h * y), y, 0.5f);
    y = tally_fma(y, e, y);
    float s = xs * y;
    float d = tally_fma(-s, s, xs);
    s = tally_fma(d, 0.5f * y, s);
    tally_u32 sb = tally_as_u32(s);
    float u = tally_as_f32(sb & 0x7f800000u) * 0x1p-23f;
    float su = s * u;
    d = tally_fma(-s, s, xs);
    float lim_lo = ((sb & 0x007fffffu) == 0u) ? -0.5f * su : -su;
    sb = (d > su) ? sb + 1u : ((d <= lim_lo) ? sb - 1u : sb);
    float r = tally_as_f32(sb) * back;
    int ok = (x > 0.0f) & (x < TALLY_F32_INF);
    r = ok ? r : x;
    return (x < 0.0f) ? TALLY_F32_NAN : r;
}

static tally_pm_f2 ref_sincospi(float x)
{
    tally_u32 ux = tally_as_u32(x);
    float ax = tally_as_f32(ux & 0x7fffffffu);
    float xr = (ax < 0x1p24f) ? x : 0.0f;
    float j = tally_rint(xr + xr);
    float t = xr - 0.5f * j;
    tally_i32 qd = (tally_i32)j;
    float u = t * t;
    float v = tally_fma(-0x1.2db5a6p-1f, u, 0x1.465facp+1f);
    v = tally_fma(v, u, -0x1.4abbbep+2f);
    v = tally_fma(v, u, -0x1.777a5cp-24f);
    float sn = tally_fma(t, 0x1.921fb6p+1f, t * v);
    float cs = tally_fma(0x1.d4f7eep-3f, u, -0x1.55b2b6p+0f);
    cs = tally_fma(cs, u, 0x1.03c1bp+2f);
    cs = tally_fma(cs, u, -0x1.3bd3ccp+2f);
    cs = tally_fma(cs, u, 1.0f);
    int odd = (qd & 1) != 0;
    float a = odd ? cs : sn;
    float b = odd ? sn : cs;
    a = ((qd & 2) != 0) ? -a : a;
    b = (((qd + 1) & 2) != 0) ? -b : b;
    a = (a == 0.0f) ? tally_as_f32(ux & 0x80000000u) : a;
    b = b + 0.0f;
    int fin = ax < TALLY_F32_INF;
    float bad = (x != x) ? x : TALLY_F32_NAN;
    tally_pm_f2 res;
    res.hi = fin ? a : bad;
    res.lo = fin ? b : bad;
    return res;
}

static float ref_kl_term(float x, float t, tally_u32 flags)
{
    if (flags & TALLY_KL_FLAG_INPUT_IS_PROB) x = ref_logf(x);
    if (flags & TALLY_KL_FLAG_LOG_TARGET) return tally_expf(t) * (t - x);
    float v = t * (ref_logf(t) - x);
    if (t == 0.0f) v = (x != x) ? x : 0.0f;
    if (t < 0.0f) v = TALLY_F32_NAN;
    return v;
}

static float ref_radius(float u) { return ref_sqrtf(-2.0f * ref_logf(u)); }

static void ref_normal_pair(tally_u32 x, tally_u32 y, float *first, float *second)
{
    float s = ref_radius(tally_uniform_from_bits(x));
    float t = tally_angle_from_bits(y);
    *first = s * ref_sincospi(t).hi;
    *second = s * ref_sincospi(t).lo;
}

/* ---- Helpers. ---- */

/* Mismatches are counted in the loops and asserted once afterwards
 * (Check records every passing assertion, a system call each in fork
 * mode). */
typedef struct {
    uint64_t count;
    char first[320];
} fails_t;

#define NOTE_MISMATCH(fl, got, want, ...)                                                          \
    do {                                                                                           \
        if (fbits(got) != fbits(want) && (fl)->count++ == 0) {                                     \
            int n_ = snprintf((fl)->first, sizeof (fl)->first, __VA_ARGS__);                       \
            if (n_ > 0 && (size_t)n_ < sizeof (fl)->first)                                         \
                snprintf((fl)->first + n_, sizeof (fl)->first - (size_t)n_,                        \
                         ": got 0x%08x, want 0x%08x", fbits(got), fbits(want));                    \
        }                                                                                          \
    } while (0)

#define ASSERT_NO_MISMATCH(fl)                                                                     \
    ck_assert_msg((fl)->count == 0, "%llu mismatches, first: %s", (unsigned long long)(fl)->count, \
                  (fl)->first)

/* splitmix64: a fixed seed, so every run draws the same inputs. */
static uint64_t mix_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Floats that sit on a boundary of some path. */
static const uint32_t EDGE_BITS[] = {
    0x00000000u, 0x80000000u,                            /* +-0 */
    0x00000001u, 0x80000001u, 0x00400000u, 0x007fffffu,  /* subnormals */
    0x807fffffu, 0x00800000u, 0x80800000u, 0x00800001u,  /* smallest normals */
    0x3f800000u, 0xbf800000u, 0x3f7fffffu, 0x3f800001u,  /* 1 and neighbours */
    0x3f000000u, 0x40000000u, 0x3f2aaaabu, 0x3f2aaaaau,  /* 1/2, 2, 2/3 split point */
    0x2f000000u, 0x2f800000u, 0x3e800000u, 0x4b800000u,  /* 2^-33, 2^-32, 1/4, 2^24 */
    0x42b17218u, 0xc2cff1b5u, 0x42b20000u, 0xc2d00000u,  /* exp overflow/underflow edges */
    0x7f7fffffu, 0xff7fffffu, 0x7f000000u,               /* FLT_MAX, 2^127 */
    0x7f800000u, 0xff800000u,                            /* +-inf */
    0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu,  /* NaNs, quiet and signalling */
    0xffffffffu, 0x7fc12345u, 0xff812345u,
    0x1e3ce508u, 0x5e3ce508u, 0xc0490fdbu, 0x40490fdbu,  /* assorted */
};
#define N_EDGE (sizeof EDGE_BITS / sizeof EDGE_BITS[0])

/* A float from one of the classes, each about equally likely: any bit
 * pattern, a probability in (0, 1], any positive normal, a subnormal, a
 * zero, an infinity, a NaN (any payload, either sign), a negative normal,
 * a value near 1, a boundary value, or a normal within a few steps of the
 * normal range's ends. */
static float draw(uint64_t *s)
{
    uint64_t r = mix_next(s);
    uint32_t lo = (uint32_t)r, hi = (uint32_t)(r >> 32);
    switch (hi % 11u) {
    case 0: return ffrom(lo);
    case 1: return ((float)(lo >> 8) + 1.0f) * 0x1p-24f;
    case 2: return ffrom(0x00800000u + lo % 0x7f000000u);
    case 3: return ffrom((lo & 0x80000000u) | (1u + lo % 0x007fffffu));
    case 4: return ffrom(lo & 0x80000000u);
    case 5: return ffrom((lo & 0x80000000u) | 0x7f800000u);
    case 6: return ffrom((lo & 0x80000000u) | 0x7f800000u | (1u + lo % 0x007fffffu));
    case 7: return ffrom(0x80800000u + lo % 0x7f000000u);
    case 8: return ffrom(0x3f800000u + (lo % 4096u) - 2048u);
    case 9: return ffrom(EDGE_BITS[lo % N_EDGE]);
    default:
        return ffrom((lo & 0x80000000u) | ((lo & 1u) ? 0x7f7fffffu - (lo >> 1) % 64u
                                                       : 0x00800000u + (lo >> 1) % 64u));
    }
}

/* ---- KL term. ---- */

static void check_kl_pairs(tally_u32 flags, uint64_t seed, uint64_t n)
{
    fails_t fl = { 0, "" };
    uint64_t s = seed;
    for (uint64_t i = 0; i < n; i++) {
        float x = draw(&s), t = draw(&s);
        float got = tally_kl_term(x, t, flags), want = ref_kl_term(x, t, flags);
        NOTE_MISMATCH(&fl, got, want, "kl_term(0x%08x, 0x%08x, flags %u)", fbits(x), fbits(t), flags);
    }
    ASSERT_NO_MISMATCH(&fl);
}

START_TEST(test_kl_random_plain) { check_kl_pairs(0u, 1u, 1ull << 26); }
END_TEST
START_TEST(test_kl_random_log_target) { check_kl_pairs(TALLY_KL_FLAG_LOG_TARGET, 2u, 1ull << 26); }
END_TEST
START_TEST(test_kl_random_prob) { check_kl_pairs(TALLY_KL_FLAG_INPUT_IS_PROB, 3u, 1ull << 26); }
END_TEST
START_TEST(test_kl_random_prob_log_target)
{
    check_kl_pairs(TALLY_KL_FLAG_INPUT_IS_PROB | TALLY_KL_FLAG_LOG_TARGET, 4u, 1ull << 26);
}
END_TEST

START_TEST(test_kl_edges)
{
    fails_t fl = { 0, "" };
    for (tally_u32 flags = 0; flags < 4u; flags++) {
        for (size_t i = 0; i < N_EDGE; i++) {
            for (size_t k = 0; k < N_EDGE; k++) {
                float x = ffrom(EDGE_BITS[i]), t = ffrom(EDGE_BITS[k]);
                float got = tally_kl_term(x, t, flags), want = ref_kl_term(x, t, flags);
                NOTE_MISMATCH(&fl, got, want, "kl_term(0x%08x, 0x%08x, flags %u)", fbits(x), fbits(t),
                              flags);
            }
        }
    }
    ASSERT_NO_MISMATCH(&fl);
    /* The short path is taken exactly for positive normal finite floats. */
    ck_assert(!tally_kl_is_pos_normal(0.0f) && !tally_kl_is_pos_normal(-0.0f));
    ck_assert(!tally_kl_is_pos_normal(0x1.fffffcp-127f) && tally_kl_is_pos_normal(0x1p-126f));
    ck_assert(tally_kl_is_pos_normal(0x1.fffffep127f) && !tally_kl_is_pos_normal((float)INFINITY));
    ck_assert(!tally_kl_is_pos_normal((float)NAN) && !tally_kl_is_pos_normal(-1.0f));
    ck_assert(!tally_kl_is_pos_normal(ffrom(0xff800000u)) && !tally_kl_is_pos_normal(ffrom(0x80800000u)));
}
END_TEST

/* The log core on positive normal floats: the short paths' only change of
 * arithmetic is calling it instead of tally_logf. By default one bit
 * pattern in 8 (the low three bits rotating, so every residue occurs in
 * every binade), about 2.7e8 floats; TALLY_TERMS_EXHAUSTIVE=1 checks all
 * 2.1e9 (a few minutes; not the default, to keep the suite short on two
 * slow cores). Split in two test cases at 2. */
static void check_log_core_range(uint32_t lo, uint32_t hi)
{
    const char *env = getenv("TALLY_TERMS_EXHAUSTIVE");
    const int all = env != NULL && env[0] == '1';
    fails_t fl = { 0, "" };
    for (uint32_t base = lo;; base += all ? 1u : 8u) {
        uint32_t b = all ? base : base + ((base >> 3) & 7u);
        float x = ffrom(b);
        NOTE_MISMATCH(&fl, tally_pm_logf_normal(x), ref_logf(x), "logf_normal(0x%08x)", b);
        if (hi - base < (all ? 1u : 8u)) break;
    }
    ASSERT_NO_MISMATCH(&fl);
}

START_TEST(test_log_core_low) { check_log_core_range(0x00800000u, 0x3fffffffu); }
END_TEST
START_TEST(test_log_core_high) { check_log_core_range(0x40000000u, 0x7f7fffffu); }
END_TEST

/* ---- Normal pair. ---- */

/* Every value (float)x takes for a uint32 x: every integer below 2^24 and
 * every float in [2^24, 2^32] (all of them integers). Calls fn on each. */
static void for_each_u32_float(void (*fn)(float, void *), void *ctx)
{
    for (uint32_t k = 0; k < (1u << 24); k++) fn((float)k, ctx);
    for (uint32_t b = fbits(0x1p24f); b <= fbits(0x1p32f); b++) fn(ffrom(b), ctx);
}

static void radius_one(float f, void *ctx)
{
    fails_t *fl = ctx;
    float u = f * 0x1p-32f + 0x1p-33f; /* tally_uniform_from_bits */
    float a = -2.0f * tally_pm_logf_normal(u);
    float s = (a > 0.0f) ? tally_pm_sqrtf_normal(a) : a;
    NOTE_MISMATCH(fl, s, ref_radius(u), "radius(u = %a)", (double)u);
}

static void angle_one(float f, void *ctx)
{
    fails_t *fl = ctx;
    float t = f * 0x1p-31f + 0x1p-32f; /* tally_angle_from_bits */
    tally_pm_f2 got = tally_pm_sincospi_reduced(t, 0u), want = ref_sincospi(t);
    NOTE_MISMATCH(fl, got.hi, want.hi, "sinpi(%a)", (double)t);
    NOTE_MISMATCH(fl, got.lo, want.lo, "cospi(%a)", (double)t);
}

START_TEST(test_normal_every_radius)
{
    fails_t fl = { 0, "" };
    for_each_u32_float(radius_one, &fl);
    ASSERT_NO_MISMATCH(&fl);
    /* The enumeration is the real one: the first and last x map to its
     * ends. */
    ck_assert(tally_uniform_from_bits(0u) == 0x1p-33f && tally_uniform_from_bits(0xffffffffu) == 1.0f);
}
END_TEST

START_TEST(test_normal_every_angle)
{
    fails_t fl = { 0, "" };
    for_each_u32_float(angle_one, &fl);
    ASSERT_NO_MISMATCH(&fl);
    ck_assert(tally_angle_from_bits(0u) == 0x1p-32f && tally_angle_from_bits(0xffffffffu) == 2.0f);
}
END_TEST

START_TEST(test_normal_pairs)
{
    fails_t fl = { 0, "" };
    uint64_t s = 5u;
    static const uint32_t ends[] = { 0u, 1u, 0x7fffffffu, 0x80000000u, 0xfffffeffu, 0xffffff7fu,
                                     0xffffff80u, 0xffffffffu, 0x40000000u, 0xc0000000u };
    const uint64_t n_ends = sizeof ends / sizeof ends[0];
    for (uint64_t i = 0; i < (1ull << 24) + n_ends * n_ends; i++) {
        uint32_t x, y;
        if (i < n_ends * n_ends) {
            x = ends[i / n_ends];
            y = ends[i % n_ends];
        } else {
            uint64_t r = mix_next(&s);
            x = (uint32_t)r;
            y = (uint32_t)(r >> 32);
        }
        float f1, f2, r1, r2;
        tally_normal_pair(x, y, &f1, &f2);
        ref_normal_pair(x, y, &r1, &r2);
        NOTE_MISMATCH(&fl, f1, r1, "normal_pair(0x%08x, 0x%08x).first", x, y);
        NOTE_MISMATCH(&fl, f2, r2, "normal_pair(0x%08x, 0x%08x).second", x, y);
    }
    ASSERT_NO_MISMATCH(&fl);
}
END_TEST

/* ---- The general functions, rewritten around the cores. ---- */

START_TEST(test_general_functions)
{
    fails_t fl = { 0, "" };
    /* 2^26 bit patterns spread over all 2^32 (odd stride, so every low
     * bit pattern occurs), then every edge value. */
    for (uint64_t i = 0; i < (1ull << 26) + N_EDGE; i++) {
        uint32_t b = i < (1ull << 26) ? (uint32_t)(i * 64u + (i % 61u)) : EDGE_BITS[i - (1ull << 26)];
        float x = ffrom(b);
        NOTE_MISMATCH(&fl, tally_logf(x), ref_logf(x), "logf(0x%08x)", b);
        NOTE_MISMATCH(&fl, tally_sqrtf(x), ref_sqrtf(x), "sqrtf(0x%08x)", b);
        NOTE_MISMATCH(&fl, tally_sinpif(x), ref_sincospi(x).hi, "sinpif(0x%08x)", b);
        NOTE_MISMATCH(&fl, tally_cospif(x), ref_sincospi(x).lo, "cospif(0x%08x)", b);
        float sn, cs;
        tally_sincospif(x, &sn, &cs);
        NOTE_MISMATCH(&fl, sn, ref_sincospi(x).hi, "sincospif(0x%08x).sin", b);
        NOTE_MISMATCH(&fl, cs, ref_sincospi(x).lo, "sincospif(0x%08x).cos", b);
    }
    ASSERT_NO_MISMATCH(&fl);
    /* The cores where their callers use them. */
    for (uint32_t b = fbits(0x1p-100f); b < 0x7f800000u; b += 997u) {
        NOTE_MISMATCH(&fl, tally_pm_sqrtf_normal(ffrom(b)), ref_sqrtf(ffrom(b)), "sqrtf_normal(0x%08x)", b);
    }
    ASSERT_NO_MISMATCH(&fl);
}
END_TEST

TT_SUITE("terms",
         {.name = "terms", .case_per_test = 1, .timeout = 240,
          .tests = {test_kl_edges, test_kl_random_plain, test_kl_random_log_target, test_kl_random_prob,
                    test_kl_random_prob_log_target, test_log_core_low, test_log_core_high, test_normal_every_radius,
                    test_normal_every_angle, test_normal_pairs, test_general_functions}})
