/*
 * tools/cli_gen.h - deterministic input generators for crosscheck and demo.
 *
 * A splitmix64 stream (Steele, Lea and Flood, OOPSLA 2014; constants from
 * the paper's reference code) seeded per case, so every run of the tool
 * feeds every backend the same inputs. Independent of tally's Philox: the
 * inputs should not share structure with the random ops under test.
 */
#ifndef TALLY_CLI_GEN_H
#define TALLY_CLI_GEN_H

#include <stdint.h>

typedef struct cli_rand {
    uint64_t state;
} cli_rand;

static inline cli_rand cli_rand_make(uint64_t seed)
{
    cli_rand r = {.state = seed ^ 0x5DEECE66Dull};
    return r;
}

static inline uint64_t cli_rand_u64(cli_rand *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): 53 random bits, centred in their interval. */
static inline double cli_rand_unit(cli_rand *r)
{
    return ((double)(cli_rand_u64(r) >> 11) + 0.5) * 0x1.0p-53;
}

/* Standard normal (Box-Muller, one value per call). */
double cli_rand_normal(cli_rand *r);

/* Fills n floats with mean + sd * normal. */
void cli_fill_normal(float *x, uint64_t n, cli_rand *r, double mean, double sd);

/* Integer counts as floats, many zero and a few large:
 * floor(exp(N(0.5, 1.2^2))) - 1, clipped to [0, 10^6]. */
void cli_fill_counts(float *x, uint64_t n, cli_rand *r);

/*
 * Rows of a categorical distribution: each row is softmax(sd * normal), with
 * about `zero_fraction` of the entries set to exactly 0 before normalising
 * (sparse supports; at least one entry of a row stays positive). With
 * `as_log`, writes log p (log 0 = -inf) instead of p. Computed in double and
 * rounded once. When `zero_mask` is not NULL it holds rows*cols bytes: the
 * same mask is reused (so p and t share their support) and, when
 * `make_mask` is set, it is drawn first.
 */
void cli_fill_softmax_rows(float *x, int64_t rows, int64_t cols, cli_rand *r, double sd, double zero_fraction,
                           int as_log, unsigned char *zero_mask, int make_mask);

#endif /* TALLY_CLI_GEN_H */
