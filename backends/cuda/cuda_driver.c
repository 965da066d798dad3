/*
 * backends/cuda/cuda_driver.c - the driver loader's outcomes as tally
 * statuses and messages (see cuda_driver.h).
 */
#include "cuda_driver.h"

tally_status tally__cuda_load(void)
{
    const char *message = NULL;
    tally_status st = tally__cuda_open(&message);
    if (st != TALLY_OK) return tally__error(NULL, st, "%s", message);
    return TALLY_OK;
}

tally_status tally__cuda_error(tally_context *ctx, CUresult result, const char *what)
{
    char description[320];
    tally__cuda_describe(result, description, sizeof description);
    return tally__error(ctx, tally__cuda_status(result), "%s failed: %s", what, description);
}
