/*
 * tests/fuzz/fuzz_input.h - reading a fuzzer's bytes as typed values.
 *
 * A reader that runs out of bytes returns zeros, so every input decodes to
 * some call and short inputs stay meaningful. Integers come from a table of
 * edge values, a small range or eight raw bytes, so that the fuzzer reaches
 * both the valid shapes and the overflow paths quickly.
 */
#ifndef TALLY_FUZZ_INPUT_H
#define TALLY_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct fuzz_reader {
    const uint8_t *p;
    size_t n;
} fuzz_reader;

static inline uint8_t fuzz_u8(fuzz_reader *r)
{
    if (r->n == 0) return 0;
    r->n--;
    return *r->p++;
}

static inline uint64_t fuzz_raw64(fuzz_reader *r)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)fuzz_u8(r) << (8 * i);
    return v;
}

/* Selector 0..15: an edge value; 16..254: the value selector - 16; 255:
 * eight raw bytes. */
static inline int64_t fuzz_i64(fuzz_reader *r)
{
    static const int64_t edges[16] = {0, 1, 2, 3, 4, 7, 8, 64, -1, -2, INT64_MAX, INT64_MIN,
                                      (int64_t)4611686018427387905, (int64_t)1 << 56, ((int64_t)1 << 56) + 1,
                                      (int64_t)1 << 31};
    uint8_t s = fuzz_u8(r);
    if (s < 16) return edges[s];
    if (s < 255) return (int64_t)(s - 16);
    return (int64_t)fuzz_raw64(r);
}

#endif /* TALLY_FUZZ_INPUT_H */
