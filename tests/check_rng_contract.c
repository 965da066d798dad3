/*
 * tests/check_rng_contract.c - the random stream contract (docs/rng.md),
 * checked without any backend: include/tally/philox.h is compiled into this
 * test as plain C and compared with
 * - the published Philox4x32 known-answer vectors (tests/data/philox4x32_kat.txt),
 * - the independent implementation in harness/reference.c, over a grid of
 *   seeds, subsequences and offsets that includes 64-bit values and offsets
 *   that are not multiples of 4,
 * - cuRAND's own output recorded on an NVIDIA GPU
 *   (tests/data/curand_reference.txt, written by tools/math/curand_record.cu),
 *   recorded on an NVIDIA H200 and kept in the repository.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "tally/philox.h"
#include "testutil.h"

typedef struct kat {
    int rounds;
    uint32_t ctr[4], key[2], expected[4];
} kat;

/* Reads every philox4x32 line of the KAT file; fails the test when the file
 * is missing or holds fewer vectors than published (3 per round count). */
static int read_kats(kat *out, int capacity)
{
    const char *path = tt_data_path("philox4x32_kat.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char name[32];
        kat k;
        if (line[0] == '#') continue;
        int got = sscanf(line, "%31s %d %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32
                               " %" SCNx32 " %" SCNx32 " %" SCNx32 " %" SCNx32,
                         name, &k.rounds, &k.ctr[0], &k.ctr[1], &k.ctr[2], &k.ctr[3], &k.key[0], &k.key[1],
                         &k.expected[0], &k.expected[1], &k.expected[2], &k.expected[3]);
        if (got <= 0) continue;
        ck_assert_msg(got == 12, "malformed KAT line: %s", line);
        if (strcmp(name, "philox4x32") != 0) continue;
        ck_assert_int_lt(n, capacity);
        out[n++] = k;
    }
    fclose(f);
    return n;
}

START_TEST(kat_header)
{
    kat k[32];
    int n = read_kats(k, 32);
    int r7 = 0, r10 = 0;
    for (int i = 0; i < n; i++) {
        tally_philox4 ctr = {{k[i].ctr[0], k[i].ctr[1], k[i].ctr[2], k[i].ctr[3]}};
        tally_philox4 out = tally_philox4x32_rounds(ctr, k[i].key[0], k[i].key[1], k[i].rounds);
        for (int w = 0; w < 4; w++)
            ck_assert_msg(out.v[w] == k[i].expected[w], "KAT %d (%d rounds) word %d: got %08x, expected %08x", i,
                          k[i].rounds, w, out.v[w], k[i].expected[w]);
        if (k[i].rounds == 10) {
            tally_philox4 ten = tally_philox4x32_10(ctr, k[i].key[0], k[i].key[1]);
            ck_assert_mem_eq(ten.v, out.v, sizeof ten.v);
        }
        r7 += k[i].rounds == 7;
        r10 += k[i].rounds == 10;
    }
    /* Refuse a truncated file: the published set has three vectors each. */
    ck_assert_int_ge(r7, 3);
    ck_assert_int_ge(r10, 3);
}
END_TEST

START_TEST(kat_reference)
{
    kat k[32];
    int n = read_kats(k, 32);
    ck_assert_int_ge(n, 6);
    for (int i = 0; i < n; i++) {
        uint32_t out[4];
        tally_ref_philox4x32(k[i].ctr, k[i].key, k[i].rounds, out);
        ck_assert_mem_eq(out, k[i].expected, sizeof out);
    }
}
END_TEST

/* The grid: 64-bit seeds and subsequences whose high words matter, offsets
 * around every word boundary and at the top of the 64-bit range. */
static const uint64_t seeds[] = {0, 1, 42, 0xdeadbeefull, 0x100000000ull, 0x123456789abcdef0ull,
                                 0xffffffff00000000ull, UINT64_MAX};
static const uint64_t subsequences[] = {0, 1, 7, 0xffffffffull, 0x100000005ull, (1ull << 40) + 1, UINT64_MAX};
static const uint64_t offsets[] = {0,
                                   1,
                                   2,
                                   3,
                                   5,
                                   7,
                                   1023,
                                   0x3ffffffffull,
                                   0x400000001ull,
                                   (1ull << 34) + 3,
                                   0x123456789abcdefull,
                                   UINT64_MAX - 7,
                                   UINT64_MAX - 3,
                                   UINT64_MAX - 1,
                                   UINT64_MAX};
#define N_SEEDS (sizeof seeds / sizeof seeds[0])
#define N_SUBS (sizeof subsequences / sizeof subsequences[0])
#define N_OFFSETS (sizeof offsets / sizeof offsets[0])

START_TEST(stream_mapping)
{
    for (size_t a = 0; a < N_SEEDS; a++) {
        for (size_t b = 0; b < N_SUBS; b++) {
            for (size_t c = 0; c < N_OFFSETS; c++) {
                uint64_t seed = seeds[a], sub = subsequences[b];
                /* Eight consecutive elements (wrapping at 2^64 is never used by
                 * an op, but the mapping itself is defined for every i). */
                for (uint64_t j = 0; j < 8; j++) {
                    uint64_t i = offsets[c] + j;
                    if (i < offsets[c]) break;
                    uint32_t want = tally_ref_rng_raw(seed, sub, i);
                    uint32_t got = tally_stream_raw(seed, sub, i);
                    ck_assert_msg(got == want,
                                  "raw(seed %" PRIu64 ", sub %" PRIu64 ", i %" PRIu64 "): %08x, reference %08x",
                                  seed, sub, i, got, want);
                    /* The definition spelled out once more with the header's
                     * block function: counter {lo(i/4), hi(i/4), lo(sub), hi(sub)}. */
                    tally_philox4 ctr = {{(uint32_t)(i >> 2), (uint32_t)(i >> 34), (uint32_t)sub,
                                          (uint32_t)(sub >> 32)}};
                    tally_philox4 blk = tally_philox4x32_10(ctr, (uint32_t)seed, (uint32_t)(seed >> 32));
                    ck_assert_uint_eq(blk.v[i % 4], want);
                    float u = tally_stream_uniform(seed, sub, i);
                    float ur = tally_ref_rng_uniform(seed, sub, i);
                    ck_assert_msg(tt_bits(u) == tt_bits(ur), "uniform(%" PRIu64 "): %a vs %a", i, (double)u,
                                  (double)ur);
                }
            }
        }
    }
}
END_TEST

/* Spot values of the reference stream that pin the word order: element i of
 * (0, 0) is word i of the all-zero 10-round KAT for i < 4, and element 4 is
 * the first word of counter {1, 0, 0, 0}. */
START_TEST(stream_words_follow_kat)
{
    ck_assert_uint_eq(tally_ref_rng_raw(0, 0, 0), 0x6627e8d5u);
    ck_assert_uint_eq(tally_ref_rng_raw(0, 0, 1), 0xe169c58du);
    ck_assert_uint_eq(tally_ref_rng_raw(0, 0, 2), 0xbc57ac4cu);
    ck_assert_uint_eq(tally_ref_rng_raw(0, 0, 3), 0x9b00dbd8u);
    uint32_t ctr[4] = {1, 0, 0, 0}, key[2] = {0, 0}, out[4];
    tally_ref_philox4x32(ctr, key, 10, out);
    ck_assert_uint_eq(tally_ref_rng_raw(0, 0, 4), out[0]);
    ck_assert_uint_eq(tally_stream_raw(0, 0, 7), out[3]);
    /* The highest element: counter {ffffffff, 3fffffff, lo(sub), hi(sub)}
     * (i/4 < 2^62, so the all-ones KAT counter is not reachable by a stream). */
    uint32_t top_ctr[4] = {0xffffffffu, 0x3fffffffu, 0x89abcdefu, 0x01234567u}, top_key[2] = {7, 0}, top[4];
    tally_ref_philox4x32(top_ctr, top_key, 10, top);
    ck_assert_uint_eq(tally_stream_raw(7, 0x0123456789abcdefull, UINT64_MAX), top[3]);
    ck_assert_uint_eq(tally_stream_raw(7, 0x0123456789abcdefull, UINT64_MAX - 3), top[0]);
}
END_TEST

/* uniform's formula at its edges: raw 0 gives 2^-33 (never 0), raw 2^32 - 1
 * converts to 2^32 and gives exactly 1; large draws round in the conversion
 * (ties to even), never in the multiply. */
START_TEST(uniform_formula)
{
    static const struct {
        uint32_t x;
        uint32_t bits;
    } cases[] = {
        {0u, 0x2f000000u},          /* 2^-33 */
        {1u, 0x2fc00000u},          /* 2^-32 + 2^-33 = 1.5 * 2^-32 */
        {0xffffffffu, 0x3f800000u}, /* 1.0 */
        {0x80000000u, 0x3f000000u}, /* 0.5 + 2^-33 rounds to 0.5 */
        {0x00ffffffu, 0x3b800000u}, /* 2^-8 - 2^-33: a tie between 2^-8 - 2^-32 and 2^-8, to even */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float got = tally_uniform_from_bits(cases[i].x);
        float ref = tally_ref_uniform_from_bits(cases[i].x);
        ck_assert_msg(tt_bits(got) == cases[i].bits, "uniform(%08x) = %a (0x%08x), expected 0x%08x", cases[i].x,
                      (double)got, tt_bits(got), cases[i].bits);
        ck_assert_uint_eq(tt_bits(ref), cases[i].bits);
    }
    /* For x < 2^24 the conversion is exact, so the float equals the double
     * value x * 2^-32 + 2^-33 rounded once. */
    tt_rand r = tt_rand_seed(5);
    for (int i = 0; i < 100000; i++) {
        uint32_t x = (uint32_t)(tt_rand_u64(&r) & 0xffffffu);
        double exact = ldexp((double)x, -32) + ldexp(1.0, -33);
        ck_assert_uint_eq(tt_bits(tally_uniform_from_bits(x)), tt_bits((float)exact));
    }
    /* Every uniform lies in (0, 1]. */
    for (int i = 0; i < 100000; i++) {
        float u = tally_uniform_from_bits((uint32_t)tt_rand_u64(&r));
        ck_assert(u > 0.0f && u <= 1.0f);
    }
}
END_TEST

START_TEST(angle_formula)
{
    ck_assert_uint_eq(tt_bits(tally_angle_from_bits(0)), 0x2f800000u);          /* 2^-32 */
    ck_assert_uint_eq(tt_bits(tally_angle_from_bits(0xffffffffu)), 0x40000000u); /* 2.0 */
    ck_assert_uint_eq(tt_bits(tally_angle_from_bits(0x80000000u)), 0x3f800000u); /* 1.0 */
    tt_rand r = tt_rand_seed(6);
    for (int i = 0; i < 100000; i++) {
        uint32_t y = (uint32_t)tt_rand_u64(&r);
        ck_assert_uint_eq(tt_bits(tally_angle_from_bits(y)), tt_bits(tally_ref_angle_from_bits(y)));
    }
}
END_TEST

/*
 * Normal draws from the header against the double Box-Muller of the same
 * float u and t. Exact bits cannot be expected from a double libm; tally's
 * float chain rounds log (<= 2 ulp), -2*log (exact), sqrt (correctly rounded),
 * sinpi/cospi (a few ulp) and the final product (0.5 ulp), so the result is
 * within a few ulp of s * sinpi(t). Where sinpi(t) is tiny, the float
 * sinpi's absolute error (~2^-24) times s is the honest bound, so the
 * tolerance is max(8 ulp of the reference, 4 * 2^-24 * s).
 */
START_TEST(normal_header_vs_reference)
{
    double worst_ulp = 0.0;
    for (size_t a = 0; a < 3; a++) {
        for (uint64_t i = 0; i < 20000; i++) {
            uint64_t idx = (a == 2 ? (1ull << 40) : 0) + i;
            float got = tally_stream_normal(seeds[a + 2], subsequences[a], idx);
            double ref = tally_ref_rng_normal(seeds[a + 2], subsequences[a], idx);
            double s = tally_ref_rng_normal_radius(seeds[a + 2], subsequences[a], idx);
            double tol = fmax(8.0 * ldexp(1.0, -24) * fabs(ref) * 2.0, 4.0 * ldexp(1.0, -24) * s);
            tt_assert_close(got, ref, tol, "normal(seed %" PRIu64 ", i %" PRIu64 ")", seeds[a + 2], idx);
            double ulp = tally_ref_ulp_diff(got, ref);
            if (ulp > worst_ulp && fabs(ref) > 1e-3) worst_ulp = ulp;
        }
    }
    fprintf(stderr, "normal: worst ulp difference (|ref| > 1e-3) %.2f\n", worst_ulp);
}
END_TEST

/* normal(2k) and normal(2k+1) share their pair: element 2k+1 must equal the
 * cosine partner no matter at which offset a fill started. */
START_TEST(normal_pairs_absolute)
{
    for (uint64_t k = 0; k < 1000; k++) {
        float first, second;
        uint32_t x = tally_stream_raw(3, 9, 2 * k), y = tally_stream_raw(3, 9, 2 * k + 1);
        tally_normal_pair(x, y, &first, &second);
        ck_assert_uint_eq(tt_bits(tally_stream_normal(3, 9, 2 * k)), tt_bits(first));
        ck_assert_uint_eq(tt_bits(tally_stream_normal(3, 9, 2 * k + 1)), tt_bits(second));
    }
}
END_TEST

/* The reference sinpi/cospi: exact zeros and signs at the quarter points. */
START_TEST(reference_sinpi)
{
    ck_assert(tally_ref_sinpi(1.0) == 0.0);
    ck_assert(tally_ref_sinpi(2.0) == 0.0);
    ck_assert(tally_ref_cospi(0.5) == 0.0);
    ck_assert(tally_ref_cospi(1.5) == 0.0);
    ck_assert(tally_ref_sinpi(0.5) == 1.0);
    ck_assert(tally_ref_sinpi(1.5) == -1.0);
    ck_assert(tally_ref_cospi(1.0) == -1.0);
    ck_assert(tally_ref_cospi(2.0) == 1.0);
    for (double t = 0.001; t < 2.0; t += 0.0137) {
        ck_assert(fabs(tally_ref_sinpi(t) - sin(3.14159265358979323846 * t)) < 1e-15);
        ck_assert(fabs(tally_ref_cospi(t) - cos(3.14159265358979323846 * t)) < 1e-15);
    }
}
END_TEST

/* cuRAND's recorded streams, when the recording exists. */
START_TEST(curand_recording)
{
    const char *path = tt_data_path("curand_reference.txt");
    FILE *f = fopen(path, "r");
    /* The recording is part of the repository (made on an H200 by
     * tools/math/curand_record.cu); its absence is a broken checkout. */
    ck_assert_msg(f != NULL, "cannot open %s: %s", path, strerror(errno));
    char line[4096];
    int lines = 0, words = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char kind[16];
        unsigned long long seed, sub, offset;
        int count, used = 0;
        int got = sscanf(line, "%15s %llu %llu %llu %d%n", kind, &seed, &sub, &offset, &count, &used);
        ck_assert_msg(got == 5, "malformed line in %s: %s", path, line);
        ck_assert_msg(strcmp(kind, "raw") == 0 || strcmp(kind, "uniform") == 0, "unknown kind %s", kind);
        ck_assert_int_gt(count, 0);
        const char *p = line + used;
        for (int k = 0; k < count; k++) {
            unsigned w;
            int n = 0;
            ck_assert_msg(sscanf(p, "%x%n", &w, &n) == 1, "line %d: word %d missing", lines + 1, k);
            p += n;
            uint64_t i = (uint64_t)offset + (uint64_t)k;
            uint32_t mine = strcmp(kind, "raw") == 0 ? tally_stream_raw(seed, sub, i)
                                                     : tt_bits(tally_stream_uniform(seed, sub, i));
            ck_assert_msg(mine == w, "cuRAND %s(seed %llu, sub %llu, offset %llu) draw %d: cuRAND %08x, tally %08x",
                          kind, seed, sub, offset, k, w, mine);
            words++;
        }
        lines++;
    }
    fclose(f);
    /* An empty recording would prove nothing. */
    ck_assert_msg(lines > 0 && words > 0, "%s holds no data", path);
}
END_TEST

/* tally_ref_round_up4 and the mixture layout, recomputed by hand. */
START_TEST(consumption_rules)
{
    int of = 0;
    ck_assert_uint_eq(tally_ref_round_up4(0, &of), 0);
    ck_assert_uint_eq(tally_ref_round_up4(1, &of), 4);
    ck_assert_uint_eq(tally_ref_round_up4(4, &of), 4);
    ck_assert_uint_eq(tally_ref_round_up4(5, &of), 8);
    ck_assert_uint_eq(tally_ref_round_up4(UINT64_MAX - 3, &of), UINT64_MAX - 3);
    ck_assert_int_eq(of, 0);
    tally_ref_round_up4(UINT64_MAX - 2, &of);
    ck_assert_int_eq(of, 1);
    /* B = 3, D = 5: B4 = 4, D2 = 6, normals 18 -> 20; consumed 24. */
    tally_ref_gmm_layout l = tally_ref_gmm_sample_layout(3, 5);
    ck_assert_uint_eq(l.B4, 4);
    ck_assert_uint_eq(l.D2, 6);
    ck_assert_uint_eq(l.consumed, 24);
    ck_assert_int_eq(l.overflow, 0);
    ck_assert_uint_eq(tally_ref_gmm_eps_index(100, 3, 5, 2, 4), 100 + 4 + 12 + 4);
    l = tally_ref_gmm_sample_layout(1, 1);
    ck_assert_uint_eq(l.consumed, 8);
    l = tally_ref_gmm_sample_layout(1ull << 62, 4);
    ck_assert_int_eq(l.overflow, 1);
}
END_TEST

TT_SUITE("rng_contract",
         {.name = "philox", .timeout = 120,
          .tests = {kat_header, kat_reference, stream_mapping, stream_words_follow_kat, curand_recording}},
         {.name = "floats", .timeout = 120,
          .tests = {uniform_formula, angle_formula, normal_header_vs_reference, normal_pairs_absolute,
                    reference_sinpi, consumption_rules}})
