/*
 * backends/opencl/opencl_api.c - failed OpenCL calls as tally
 * statuses and messages (see opencl_api.h).
 */
#include "opencl_api.h"

tally_status tally__cl_error(tally_context *ctx, cl_int code, const char *call)
{
    tally_status st = TALLY_BACKEND_ERROR;
    if (code == -4 || code == -5 || code == -6 || code == -61) st = TALLY_OUT_OF_MEMORY;
    return tally__error(ctx, st, "%s failed: %s (%d)", call, tally__cl_error_name(code), (int)code);
}
