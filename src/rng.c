/*
 * src/rng.c - the public generator call that needs no context: moving a
 * tally_rng past the stream elements an op consumed (docs/rng.md).
 */
#include "internal.h"

tally_status tally_rng_advance(tally_rng *rng, uint64_t consumed)
{
    if (rng == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "tally_rng_advance: rng is NULL");
    uint64_t next;
    if (tally__add_u64(rng->offset, consumed, &next))
        return tally__error(NULL, TALLY_RNG_EXHAUSTED,
                            "tally_rng_advance: offset %llu + %llu passes 2^64",
                            (unsigned long long)rng->offset, (unsigned long long)consumed);
    rng->offset = next;
    return TALLY_OK;
}
