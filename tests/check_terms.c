/*
 * tests/check_terms.c - the short paths of the hot terms give the same bits
 * as their plain definitions, on every input.
 *
 * tally_kl_term skips tally_logf's special-value selects when its
 * logarithms' arguments are positive normal floats, and tally_normal_pair
 * calls the cores of log, sqrt and sincospi because its arguments' ranges
 * are known. Results are a contract shared by the host, CUDA and OpenCL
 * builds, so the short paths must reproduce the general functions bit for
 * bit, NaN payloads included. The references are the general definitions
 * themselves (tally_kl_term_general, tally_logf, tally_sqrtf,
 * tally_pm_sincospi), never a copy of them:
 *   - the log core against tally_logf on one positive normal float in 8
 *     (every one with TALLY_TERMS_EXHAUSTIVE=1);
 *   - tally_kl_term against tally_kl_term_general for each of the four flag
 *     combinations, on 2^26 random pairs drawn from every float class and on
 *     every pair of a list of edge values;
 *   - tally_normal_pair's radius on every distinct uniform u and its sine
 *     and cosine on every distinct angle t (both take one value per
 *     distinct (float)x, x a uint32: about 8.4e7 values), so the pair is
 *     the same for all 2^64 inputs; plus 2^24 random pairs end to end.
 * The general functions' own bits are pinned by known answers: a hash of
 * tally_logf, tally_sqrtf, tally_sinpif and tally_cospif on 2^26 spread bit
 * patterns and the special values, and of the radius and angle on every
 * distinct input, recorded from the definitions these short paths replaced
 * (the same bits: the functions were rewritten around shared cores).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/terms.h"
#include "testutil.h"

static uint32_t fbits(float f) { return tt_bits(f); }
static float ffrom(uint32_t u) { return tt_float(u); }

/* ---- The references: the general definitions. ---- */

static float plain_radius(float u) { return tally_sqrtf(-2.0f * tally_logf(u)); }

static void plain_normal_pair(tally_u32 x, tally_u32 y, float *first, float *second)
{
    float s = plain_radius(tally_uniform_from_bits(x));
    tally_pm_f2 sc = tally_pm_sincospi(tally_angle_from_bits(y));
    *first = s * sc.hi;
    *second = s * sc.lo;
}

/* Known answers: 64-bit FNV-1a over the results' bit patterns, a word at a
 * time. */
#define HASH_START 0xcbf29ce484222325ull
static uint64_t hash_add(uint64_t h, float v) { return (h ^ fbits(v)) * 0x100000001b3ull; }

#define ASSERT_HASH(got, want, what)                                                                   \
    ck_assert_msg((got) == (want), "%s: hash 0x%016llx, expected 0x%016llx (the bits changed)", what, \
                  (unsigned long long)(got), (unsigned long long)(want))

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
static float draw(tt_rand *s)
{
    uint64_t r = tt_rand_u64(s);
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
    tt_rand s = tt_rand_seed(seed);
    for (uint64_t i = 0; i < n; i++) {
        float x = draw(&s), t = draw(&s);
        float got = tally_kl_term(x, t, flags), want = tally_kl_term_general(x, t, flags);
        NOTE_MISMATCH(&fl, got, want, "kl_term(0x%08x, 0x%08x, flags %u)", fbits(x), fbits(t), flags);
    }
    ASSERT_NO_MISMATCH(&fl);
}

START_TEST(test_kl_random_plain) { check_kl_pairs(0u, 1u, 1ull << 26); }
END_TEST
START_TEST(test_kl_random_log_target) { check_kl_pairs(TALLY_KL_LOG_TARGET, 2u, 1ull << 26); }
END_TEST
START_TEST(test_kl_random_prob) { check_kl_pairs(TALLY_KL_INPUT_IS_PROB, 3u, 1ull << 26); }
END_TEST
START_TEST(test_kl_random_prob_log_target)
{
    check_kl_pairs(TALLY_KL_INPUT_IS_PROB | TALLY_KL_LOG_TARGET, 4u, 1ull << 26);
}
END_TEST

START_TEST(test_kl_edges)
{
    fails_t fl = { 0, "" };
    for (tally_u32 flags = 0; flags < 4u; flags++) {
        for (size_t i = 0; i < N_EDGE; i++) {
            for (size_t k = 0; k < N_EDGE; k++) {
                float x = ffrom(EDGE_BITS[i]), t = ffrom(EDGE_BITS[k]);
                float got = tally_kl_term(x, t, flags), want = tally_kl_term_general(x, t, flags);
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
        NOTE_MISMATCH(&fl, tally_pm_logf_normal(x), tally_logf(x), "logf_normal(0x%08x)", b);
        if (hi - base < (all ? 1u : 8u)) break;
    }
    ASSERT_NO_MISMATCH(&fl);
}

START_TEST(test_log_core_low) { check_log_core_range(0x00800000u, 0x3fffffffu); }
END_TEST
START_TEST(test_log_core_high) { check_log_core_range(0x40000000u, 0x7f7fffffu); }
END_TEST

/* The bf16 logarithm table's arithmetic (tally_pm_log_bf16_entry,
 * tally_pm_logf_bf16) against tally_logf on every positive normal bf16
 * value, 0x0080 .. 0x7f7f, each widened to the float with those high 16
 * bits; the table's entry is the one a kernel looks up, bits 16..22. The
 * wide table's split at the low byte (tally_pm_log_bf16_bias,
 * tally_pm_logf_bf16_parts) likewise. */
START_TEST(test_log_bf16_table)
{
    fails_t fl = { 0, "" };
    float entry[128], bias[256];
    for (uint32_t m = 0; m < 128u; m++) entry[m] = tally_pm_log_bf16_entry(m);
    for (uint32_t low = 0; low < 256u; low++) bias[low] = tally_pm_log_bf16_bias(low);
    unsigned checked = 0;
    for (uint32_t h = 0x0080u; h <= 0x7f7fu; h++) {
        const uint32_t b = h << 16;
        const float x = ffrom(b);
        NOTE_MISMATCH(&fl, tally_pm_logf_bf16(x, entry[(b >> 16) & 0x7fu]), tally_logf(x), "logf_bf16(0x%08x)", b);
        NOTE_MISMATCH(&fl, tally_pm_logf_bf16_parts(ffrom(0x4b400000u | (h & 0xff00u)), entry[h & 0x7fu], bias[h & 0xffu]),
                      tally_logf(x), "logf_bf16_parts(0x%04x)", h);
        checked++;
    }
    ASSERT_NO_MISMATCH(&fl);
    ck_assert_uint_eq(checked, 0x7f7fu - 0x0080u + 1u);
    /* The entries are tally_logf's mantissa parts: log of 1 + m/128 itself
     * for the mantissas that keep e = 0 (m < 43, x < 4/3). */
    ck_assert_uint_eq(fbits(entry[0]), fbits(0.0f));
    ck_assert_uint_eq(fbits(entry[16]), fbits(tally_logf(1.125f)));
}
END_TEST

/* tally_pm_expf_normal against tally_expf over its whole domain [-87, 88]:
 * one bit pattern in 8 of each sign (the low three bits rotating, as
 * above), about 2.7e8 floats, or all of them with TALLY_TERMS_EXHAUSTIVE=1.
 * Its ends are checked exactly. */
static void check_exp_normal_sign(uint32_t sign, float limit)
{
    const char *env = getenv("TALLY_TERMS_EXHAUSTIVE");
    const uint32_t step = env != NULL && env[0] == '1' ? 1u : 8u;
    const uint32_t hi = fbits(limit);
    fails_t fl = { 0, "" };
    for (uint32_t base = 0;; base += step) {
        uint32_t b = step == 1u ? base : base + ((base >> 3) & 7u);
        if (b > hi) b = hi;
        float x = ffrom(sign | b);
        NOTE_MISMATCH(&fl, tally_pm_expf_normal(x), tally_expf(x), "expf_normal(0x%08x)", sign | b);
        if (hi - base < step) break;
    }
    ASSERT_NO_MISMATCH(&fl);
    ck_assert_uint_eq(fbits(tally_pm_expf_normal(-87.0f)), fbits(tally_expf(-87.0f)));
    ck_assert_uint_eq(fbits(tally_pm_expf_normal(88.0f)), fbits(tally_expf(88.0f)));
}

START_TEST(test_exp_normal_neg) { check_exp_normal_sign(0x80000000u, 87.0f); }
END_TEST
START_TEST(test_exp_normal_pos) { check_exp_normal_sign(0u, 88.0f); }
END_TEST

/* ---- Normal pair. ---- */

/* Every value (float)x takes for a uint32 x: every integer below 2^24 and
 * every float in [2^24, 2^32] (all of them integers). Calls fn on each. */
static void for_each_u32_float(void (*fn)(float, void *), void *ctx)
{
    for (uint32_t k = 0; k < (1u << 24); k++) fn((float)k, ctx);
    for (uint32_t b = fbits(0x1p24f); b <= fbits(0x1p32f); b++) fn(ffrom(b), ctx);
}

/* The radius and the angle of each distinct input: compared with the
 * general definitions, and hashed. */
typedef struct walk {
    fails_t fl;
    uint64_t hash;
} walk;

static void radius_one(float f, void *ctx)
{
    walk *w = ctx;
    float u = f * 0x1p-32f + 0x1p-33f; /* tally_uniform_from_bits */
    float a = -2.0f * tally_pm_logf_normal(u);
    float s = (a > 0.0f) ? tally_pm_sqrtf_normal(a) : a;
    NOTE_MISMATCH(&w->fl, s, plain_radius(u), "radius(u = %a)", (double)u);
    w->hash = hash_add(w->hash, s);
}

static void angle_one(float f, void *ctx)
{
    walk *w = ctx;
    float t = f * 0x1p-31f + 0x1p-32f; /* tally_angle_from_bits */
    tally_pm_f2 got = tally_pm_sincospi_reduced(t, 0u), want = tally_pm_sincospi(t);
    NOTE_MISMATCH(&w->fl, got.hi, want.hi, "sinpi(%a)", (double)t);
    NOTE_MISMATCH(&w->fl, got.lo, want.lo, "cospi(%a)", (double)t);
    w->hash = hash_add(hash_add(w->hash, got.hi), got.lo);
}

/* Each walk: its function on every distinct input, its known hash, and the
 * map from a uint32 whose ends show that the enumeration is the real one
 * (the first and last x map to its ends). */
static const struct {
    const char *name;
    void (*one)(float f, void *ctx);
    uint64_t hash;
    float (*from_bits)(tally_u32 x);
    float first, last;
} walks[] = {
    {"radius on every input", radius_one, 0x828edae15379ca3eull, tally_uniform_from_bits, 0x1p-33f, 1.0f},
    {"sincospi on every angle", angle_one, 0x03bb68644ba12d19ull, tally_angle_from_bits, 0x1p-32f, 2.0f},
};

START_TEST(test_normal_walk)
{
    walk w = {{0, ""}, HASH_START};
    for_each_u32_float(walks[_i].one, &w);
    ASSERT_NO_MISMATCH(&w.fl);
    ASSERT_HASH(w.hash, walks[_i].hash, walks[_i].name);
    ck_assert(walks[_i].from_bits(0u) == walks[_i].first && walks[_i].from_bits(0xffffffffu) == walks[_i].last);
}
END_TEST

START_TEST(test_normal_pairs)
{
    fails_t fl = { 0, "" };
    tt_rand s = tt_rand_seed(5u);
    static const uint32_t ends[] = { 0u, 1u, 0x7fffffffu, 0x80000000u, 0xfffffeffu, 0xffffff7fu,
                                     0xffffff80u, 0xffffffffu, 0x40000000u, 0xc0000000u };
    const uint64_t n_ends = sizeof ends / sizeof ends[0];
    for (uint64_t i = 0; i < (1ull << 24) + n_ends * n_ends; i++) {
        uint32_t x, y;
        if (i < n_ends * n_ends) {
            x = ends[i / n_ends];
            y = ends[i % n_ends];
        } else {
            uint64_t r = tt_rand_u64(&s);
            x = (uint32_t)r;
            y = (uint32_t)(r >> 32);
        }
        float f1, f2, r1, r2;
        tally_normal_pair(x, y, &f1, &f2);
        plain_normal_pair(x, y, &r1, &r2);
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
    uint64_t h[4] = {HASH_START, HASH_START, HASH_START, HASH_START};
    /* 2^26 bit patterns spread over all 2^32 (odd stride, so every low
     * bit pattern occurs), then every edge value. */
    for (uint64_t i = 0; i < (1ull << 26) + N_EDGE; i++) {
        uint32_t b = i < (1ull << 26) ? (uint32_t)(i * 64u + (i % 61u)) : EDGE_BITS[i - (1ull << 26)];
        float x = ffrom(b), sn, cs;
        h[0] = hash_add(h[0], tally_logf(x));
        h[1] = hash_add(h[1], tally_sqrtf(x));
        h[2] = hash_add(h[2], tally_sinpif(x));
        h[3] = hash_add(h[3], tally_cospif(x));
        tally_sincospif(x, &sn, &cs);
        NOTE_MISMATCH(&fl, sn, tally_sinpif(x), "sincospif(0x%08x).sin", b);
        NOTE_MISMATCH(&fl, cs, tally_cospif(x), "sincospif(0x%08x).cos", b);
    }
    ASSERT_NO_MISMATCH(&fl);
    ASSERT_HASH(h[0], 0xfc7af0af11e37462ull, "logf");
    ASSERT_HASH(h[1], 0xb3576d8682346164ull, "sqrtf");
    ASSERT_HASH(h[2], 0x82f8a8d1ed59684bull, "sinpif");
    ASSERT_HASH(h[3], 0x931cf7e474c0a317ull, "cospif");
    /* The sqrt core where its callers use it. */
    uint64_t hn = HASH_START;
    for (uint32_t b = fbits(0x1p-100f); b < 0x7f800000u; b += 997u) {
        NOTE_MISMATCH(&fl, tally_pm_sqrtf_normal(ffrom(b)), tally_sqrtf(ffrom(b)), "sqrtf_normal(0x%08x)", b);
        hn = hash_add(hn, tally_pm_sqrtf_normal(ffrom(b)));
    }
    ASSERT_NO_MISMATCH(&fl);
    ASSERT_HASH(hn, 0xb82c767c424301ffull, "sqrtf_normal");
}
END_TEST

TT_SUITE("terms",
         {.name = "terms", .case_per_test = 1, .timeout = 240,
          .tests = {test_kl_edges, test_kl_random_plain, test_kl_random_log_target, test_kl_random_prob,
                    test_kl_random_prob_log_target, test_log_core_low, test_log_core_high, test_exp_normal_neg,
                    test_exp_normal_pos, test_normal_pairs, test_log_bf16_table,
                    test_general_functions}},
         {.name = "normal_walks", .timeout = 240, .tests = {test_normal_walk}, .loops = (int)(sizeof walks / sizeof walks[0])})
