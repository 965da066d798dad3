/*
 * backends/gpu/gpu_half.c - the GPU backends' `widen` and `narrow` entries:
 * one launch of tally_k_widen (kernels/halves.h) copies a BF16 or F16 view
 * into fp32, one launch of tally_k_narrow rounds fp32 results into one,
 * both with tally/half.h, the same integer code the host uses.
 */
#include "gpu_internal.h"
#include "tally/half.h"

tally_status tally__gpu_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst)
{
    if (src->dtype != TALLY_BF16 && src->dtype != TALLY_F16)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "gpu widen: dtype %d is not a half type", (int)src->dtype);
    const uint64_t n = src->rows * src->cols;
    if (n == 0) return TALLY_OK;
    const int flat = src->rows <= 1 || src->stride == src->cols;
    uint64_t groups = flat ? tally__gpu_ceil_div(n, TALLY_GPU_GROUP_SIZE) : src->rows;
    /* Kernels stride over their work: a bounded grid is enough to fill any
     * device and keeps the group count within every backend's limit. */
    if (groups > 65536u) groups = 65536u;
    const tally__kargs_widen a = {.x = tally__gpu_at_view(src), .x_stride = src->stride, .rows = src->rows,
                                  .cols = src->cols, .dtype = (uint32_t)src->dtype, .o = {dst, 0}};
    return tally__gpu_launch_widen(ctx, groups, &a);
}

tally_status tally__gpu_narrow(tally_context *ctx, const tally_buffer *src, const tally__array *dst)
{
    if (dst->dtype != TALLY_BF16 && dst->dtype != TALLY_F16)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "gpu narrow: dtype %d is not a half type", (int)dst->dtype);
    const uint64_t n = dst->rows * dst->cols;
    if (n == 0) return TALLY_OK;
    const int flat = dst->rows <= 1 || dst->stride == dst->cols;
    uint64_t groups = flat ? tally__gpu_ceil_div(n, TALLY_GPU_GROUP_SIZE) : dst->rows;
    if (groups > 65536u) groups = 65536u; /* the kernel strides, as tally_k_widen does */
    const tally__kargs_narrow a = {.x = {src, 0}, .rows = dst->rows, .cols = dst->cols,
                                   .dtype = (uint32_t)dst->dtype, .o = tally__gpu_at_view(dst),
                                   .o_stride = dst->stride};
    return tally__gpu_launch_narrow(ctx, groups, &a);
}
