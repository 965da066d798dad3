/*
 * src/size.c - the one bound every count that reaches a backend obeys.
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

#include "internal.h"

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
