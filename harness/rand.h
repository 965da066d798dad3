/*
 * harness/rand.h - the one generator of test, crosscheck, demo and bench
 * inputs, and the deterministic input makers built on it.
 *
 * splitmix64 (Steele, Lea and Flood, OOPSLA 2014; constants from the paper's
 * reference code): one 64-bit state, advanced by a fixed odd constant and
 * mixed. Seeded per case, so every run feeds every backend the same inputs.
 * Independent of tally's Philox: the inputs should not share structure with
 * the random ops under test.
 *
 * Thread rules: a state belongs to one thread; nothing here has globals.
 * The inline part is C and C++ alike (tools/math/cuda_math_compare.cu).
 */
#ifndef TALLY_HARNESS_RAND_H
#define TALLY_HARNESS_RAND_H

#include <stdint.h>

/* The next 64 random bits of a splitmix64 stream. */
static inline uint64_t harness_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A stream of the input makers below (the crosscheck's and demo's). */
typedef struct harness_rand {
    uint64_t state;
} harness_rand;

static inline harness_rand harness_rand_make(uint64_t seed)
{
    harness_rand r;
    r.state = seed ^ 0x5DEECE66Dull;
    return r;
}

static inline uint64_t harness_rand_u64(harness_rand *r)
{
    return harness_splitmix64(&r->state);
}

/* Uniform in (0, 1): 53 random bits, centred in their interval. */
static inline double harness_rand_unit(harness_rand *r)
{
    return ((double)(harness_rand_u64(r) >> 11) + 0.5) * 0x1.0p-53;
}

/* Standard normal (Box-Muller, one value per call). */
double harness_rand_normal(harness_rand *r);

/* Fills n floats with mean + sd * normal. */
void harness_fill_normal(float *x, uint64_t n, harness_rand *r, double mean, double sd);

/* Integer counts as floats, many zero and a few large:
 * floor(exp(N(0.5, 1.2^2))) - 1, clipped to [0, 10^6]. */
void harness_fill_counts(float *x, uint64_t n, harness_rand *r);

/*
 * Rows of a categorical distribution: each row is softmax(sd * normal), with
 * about `zero_fraction` of the entries set to exactly 0 before normalising
 * (sparse supports; at least one entry of a row stays positive). With
 * `as_log`, writes log p (log 0 = -inf) instead of p. Computed in double and
 * rounded once. When `zero_mask` is not NULL it holds rows*cols bytes: the
 * same mask is reused (so p and t share their support) and, when
 * `make_mask` is set, it is drawn first.
 */
void harness_fill_softmax_rows(float *x, int64_t rows, int64_t cols, harness_rand *r, double sd, double zero_fraction,
                           int as_log, unsigned char *zero_mask, int make_mask);

#endif /* TALLY_HARNESS_RAND_H */
