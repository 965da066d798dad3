/*
 * tally/philox.h - Philox4x32-10 and tally's random stream contract, written
 * once for C11, CUDA and OpenCL C (see docs/rng.md).
 *
 * Element i of the stream (seed, subsequence) is word i % 4 of
 *   philox4x32_10(counter = {lo32(i/4), hi32(i/4), lo32(sub), hi32(sub)},
 *                 key     = {lo32(seed), hi32(seed)}).
 * That is cuRAND's sequence after curand_init(seed, subsequence, 0), and it
 * depends only on (seed, subsequence, i): never on the device, the launch
 * shape or which thread computes it.
 */
#ifndef TALLY_PHILOX_H
#define TALLY_PHILOX_H

#include "dialect.h"
#include "portable_math.h"

/* Round multipliers from Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3" (SC'11), chosen there for avalanche quality. */
#define TALLY_PHILOX_M0 0xD2511F53u
#define TALLY_PHILOX_M1 0xCD9E8D57u
/* Key increments (Weyl sequence): the golden ratio and sqrt(3) - 1, as 0.32
 * fixed-point numbers. */
#define TALLY_PHILOX_W0 0x9E3779B9u
#define TALLY_PHILOX_W1 0xBB67AE85u

typedef struct tally_philox4 {
    tally_u32 v[4];
} tally_philox4;

/* One Philox round: two 32x32->64 multiplies, the high halves mixed with the
 * other counter words and the key. */
TALLY_FN tally_philox4 tally_philox_round(tally_philox4 c, tally_u32 k0, tally_u32 k1)
{
    tally_u32 lo0 = c.v[0] * TALLY_PHILOX_M0;
    tally_u32 hi0 = tally_mulhi32(c.v[0], TALLY_PHILOX_M0);
    tally_u32 lo1 = c.v[2] * TALLY_PHILOX_M1;
    tally_u32 hi1 = tally_mulhi32(c.v[2], TALLY_PHILOX_M1);
    tally_philox4 r;
    r.v[0] = hi1 ^ c.v[1] ^ k0;
    r.v[1] = lo1;
    r.v[2] = hi0 ^ c.v[3] ^ k1;
    r.v[3] = lo0;
    return r;
}

/* Philox4x32 with a given number of rounds; the key is bumped between
 * rounds. rounds is 7 or 10 in the known-answer tests, 10 everywhere else. */
TALLY_FN tally_philox4 tally_philox4x32_rounds(tally_philox4 ctr, tally_u32 k0, tally_u32 k1,
                                              int rounds)
{
    TALLY_UNROLL
    for (int i = 0; i < rounds; i++) {
        if (i > 0) {
            k0 += TALLY_PHILOX_W0;
            k1 += TALLY_PHILOX_W1;
        }
        ctr = tally_philox_round(ctr, k0, k1);
    }
    return ctr;
}

TALLY_FN tally_philox4 tally_philox4x32_10(tally_philox4 ctr, tally_u32 k0, tally_u32 k1)
{
    return tally_philox4x32_rounds(ctr, k0, k1, 10);
}

/* The four stream elements 4q .. 4q+3 of (seed, subsequence). */
TALLY_FN tally_philox4 tally_stream_block(tally_u64 seed, tally_u64 subsequence, tally_u64 q)
{
    tally_philox4 ctr;
    ctr.v[0] = (tally_u32)q;
    ctr.v[1] = (tally_u32)(q >> 32);
    ctr.v[2] = (tally_u32)subsequence;
    ctr.v[3] = (tally_u32)(subsequence >> 32);
    return tally_philox4x32_10(ctr, (tally_u32)seed, (tally_u32)(seed >> 32));
}

/* Element i of the stream. Kernels that need several neighbouring elements
 * call tally_stream_block once instead. */
TALLY_FN tally_u32 tally_stream_raw(tally_u64 seed, tally_u64 subsequence, tally_u64 i)
{
    tally_philox4 b = tally_stream_block(seed, subsequence, i >> 2);
    return b.v[i & 3u];
}

/* 2^-32 and 2^-33, exact powers of two, spelled as bits. */
#define TALLY_2POW_M32 tally_as_f32(0x2f800000u)
#define TALLY_2POW_M33 tally_as_f32(0x2f000000u)
#define TALLY_2POW_M31 tally_as_f32(0x30000000u)

/* uniform = (float)x * 2^-32 + 2^-33, in (0, 1]: cuRAND's curand_uniform
 * bit for bit (the multiply is exact, so only the conversion and the add
 * round, and contraction is off everywhere). */
TALLY_FN float tally_uniform_from_bits(tally_u32 x)
{
    return (float)x * TALLY_2POW_M32 + TALLY_2POW_M33;
}

/* The Box-Muller angle in half-turns: t = (float)y * 2^-31 + 2^-32 in (0, 2]. */
TALLY_FN float tally_angle_from_bits(tally_u32 y)
{
    return (float)y * TALLY_2POW_M31 + TALLY_2POW_M32;
}

/* The normal pair made from raw elements (2k, 2k+1) = (x, y):
 * s = sqrt(-2 log u(x)); first = s * sinpi(t(y)); second = s * cospi(t(y)).
 *
 * These are tally_logf, tally_sqrtf, tally_sinpif and tally_cospif bit for
 * bit, called through their cores because the arguments' ranges are known:
 * u is in [2^-33, 1], a positive normal float, for every x; -2 log u is
 * either -0 (u = 1, where tally_sqrtf returns its argument) or in
 * [2^-24, 46], far above the 2^-100 below which tally_sqrtf rescales; and
 * t is in (0, 2], finite, positive and below 2^24, and one reduction serves
 * both sine and cosine. tests/check_terms.c compares this with the general
 * functions for every x and every distinct t. */
TALLY_FN void tally_normal_pair(tally_u32 x, tally_u32 y, float *first, float *second)
{
    float u = tally_uniform_from_bits(x);
    float a = -2.0f * tally_pm_logf_normal(u);
    /* The core on -0 gives a finite value that the select drops (a select,
     * not a branch: no warp diverges on it). */
    float s = tally_pm_sqrtf_normal(a);
    s = (a > 0.0f) ? s : a;
    float t = tally_angle_from_bits(y);
    tally_pm_f2 sc = tally_pm_sincospi_reduced(t, 0u);
    *first = s * sc.hi;
    *second = s * sc.lo;
}

/* normal(i): element i of the normal stream (pairs are absolute: (2k, 2k+1)). */
TALLY_FN float tally_stream_normal(tally_u64 seed, tally_u64 subsequence, tally_u64 i)
{
    tally_philox4 b = tally_stream_block(seed, subsequence, i >> 2);
    tally_u32 w = (tally_u32)(i & 3u);
    tally_u32 x = (w < 2u) ? b.v[0] : b.v[2];
    tally_u32 y = (w < 2u) ? b.v[1] : b.v[3];
    float first, second;
    tally_normal_pair(x, y, &first, &second);
    return (i & 1u) ? second : first;
}

TALLY_FN float tally_stream_uniform(tally_u64 seed, tally_u64 subsequence, tally_u64 i)
{
    return tally_uniform_from_bits(tally_stream_raw(seed, subsequence, i));
}

#endif /* TALLY_PHILOX_H */
