/*
 * src/size.c - checked size arithmetic, and the one bound every count that
 * reaches a backend obeys.
 *
 * A backend sizes its scratch (per-row values, tree partials, device
 * scratch) from the counts of a validated job: rows, columns, components,
 * stream elements. Most of them are bounded by a buffer, because a view that
 * holds elements must fit in its buffer. An empty view is not: a [B, 0] view
 * of counts needs no memory whatever B is, and a backend that allocated B
 * row values from it once wrapped its size and wrote past the block. So the
 * front end bounds every count itself, empty views included, and a backend
 * may multiply any count by an element size and a small constant without
 * checking for overflow.
 */
#include <stdint.h>

#include "backend.h" /* tally__error */
#include "size.h"

int tally__mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a) return 1;
    *out = a * b;
    return 0;
}

int tally__add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a) return 1;
    *out = a + b;
    return 0;
}

uint64_t tally__round_up4(uint64_t count)
{
    if (count > UINT64_MAX - 3) return 0;
    return (count + 3) & ~(uint64_t)3;
}

int tally__count_ok(uint64_t count)
{
    return count <= TALLY__MAX_COUNT;
}

tally_status tally__check_count(tally_context *ctx, const char *op, const char *what, uint64_t count)
{
    if (count <= TALLY__MAX_COUNT) return TALLY_OK;
    return tally__error(ctx, TALLY_SIZE_OVERFLOW,
                        "%s: %s is %llu, above the largest count tally can size (2^%d); "
                        "its scratch would not fit in memory",
                        op, what, (unsigned long long)count, TALLY__MAX_COUNT_LOG2);
}
