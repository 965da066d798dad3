/*
 * src/size.h - checked size arithmetic and the one bound on counts
 * (src/size.c). The front end bounds every count before a job reaches a
 * backend; backends use the overflow-checked products and sums below where
 * they multiply counts together.
 */
#ifndef TALLY_SIZE_H
#define TALLY_SIZE_H

#include <stdint.h>

#include "tally.h"

/* a*b and a+b with overflow detection: return 0 on success, 1 on overflow
 * (and then leave *out as it was). */
int tally__mul_u64(uint64_t a, uint64_t b, uint64_t *out);
int tally__add_u64(uint64_t a, uint64_t b, uint64_t *out);

/* Number of stream elements an op that needs `count` consumes: count
 * rounded up to a multiple of 4 (0 on overflow, checked by the caller). */
uint64_t tally__round_up4(uint64_t count);

/* The largest count (rows, columns, elements, components, stream
 * elements) the front end lets reach a backend, for every view including
 * empty ones. 2^56 elements of 4 bytes is 256 PiB, far above any memory,
 * and leaves room for a backend to multiply a count by an element size and
 * a small constant without overflowing 64 bits. */
#define TALLY__MAX_COUNT_LOG2 56
#define TALLY__MAX_COUNT ((uint64_t)1 << TALLY__MAX_COUNT_LOG2)
/* 1 when count <= TALLY__MAX_COUNT. */
int tally__count_ok(uint64_t count);
/* TALLY_OK, or SIZE_OVERFLOW with a message naming `what` (on ctx, or on
 * the thread when ctx is NULL). */
tally_status tally__check_count(tally_context *ctx, const char *op, const char *what, uint64_t count);

#endif /* TALLY_SIZE_H */
