/*
 * backends/gpu/gpu_half.c - the GPU backends' `widen` and `narrow` entries:
 * one launch of tally_k_widen (kernels/halves.h) copies a BF16 or F16 view
 * into fp32, one launch of tally_k_narrow rounds fp32 results into one,
 * both with tally/half.h, the same integer code the host uses.
 */
#include "gpu_internal.h"
#include "tally/half.h"

/* The groups of a widen or narrow launch over the half view v (0 when v
 * is empty), after v's dtype is checked: a group a row for a strided
 * view, a group a run of work-items for a contiguous one (tally_k_widen's
 * two walks). The kernels stride over their work, so a bounded grid fills
 * any device and keeps the group count within every backend's limit. */
static tally_status half_groups(tally_context *ctx, const char *what, const tally__array *v, uint64_t *groups)
{
    if (v->dtype != TALLY_BF16 && v->dtype != TALLY_F16)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "gpu %s: dtype %d is not a half type", what, (int)v->dtype);
    const uint64_t n = v->rows * v->cols;
    const int flat = v->rows <= 1 || v->stride == v->cols;
    const uint64_t g = n == 0 ? 0 : flat ? tally__gpu_ceil_div(n, TALLY_GPU_GROUP_SIZE) : v->rows;
    *groups = g > 65536u ? 65536u : g;
    return TALLY_OK;
}

tally_status tally__gpu_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst)
{
    uint64_t groups = 0;
    const tally_status st = half_groups(ctx, "widen", src, &groups);
    if (st != TALLY_OK || groups == 0) return st;
    const tally__kargs_widen a = {.x = tally__gpu_at_view(src), .x_stride = src->stride, .rows = src->rows,
                                  .cols = src->cols, .dtype = (uint32_t)src->dtype, .o = {dst, 0}};
    return tally__gpu_launch_widen(ctx, groups, &a);
}

tally_status tally__gpu_narrow(tally_context *ctx, const tally_buffer *src, const tally__array *dst)
{
    uint64_t groups = 0;
    const tally_status st = half_groups(ctx, "narrow", dst, &groups);
    if (st != TALLY_OK || groups == 0) return st;
    const tally__kargs_narrow a = {.x = {src, 0}, .rows = dst->rows, .cols = dst->cols,
                                   .dtype = (uint32_t)dst->dtype, .o = tally__gpu_at_view(dst),
                                   .o_stride = dst->stride};
    return tally__gpu_launch_narrow(ctx, groups, &a);
}
