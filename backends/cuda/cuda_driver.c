/*
 * backends/cuda/cuda_driver.c - failed driver calls as tally
 * statuses and messages (see cuda_driver.h).
 */
#include "cuda_driver.h"

tally_status tally__cuda_error(tally_context *ctx, CUresult result, const char *what)
{
    char description[320];
    tally__cuda_describe(result, description, sizeof description);
    return tally__error(ctx, tally__cuda_status(result), "%s failed: %s", what, description);
}
