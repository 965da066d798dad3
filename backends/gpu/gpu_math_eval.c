/*
 * backends/gpu/gpu_math_eval.c - the test hook that runs one portable math
 * function over a buffer on a GPU backend (tally_k_math_eval).
 */
#include "gpu_internal.h"
#include "kernels/abi.h"

tally_status tally__gpu_math_eval(tally_context *ctx, uint32_t fn, const tally_buffer *in, tally_buffer *out,
                                  uint64_t n)
{
    if (ctx->ops->kind != TALLY_BACKEND_OPENCL && ctx->ops->kind != TALLY_BACKEND_CUDA)
        return tally__error(ctx, TALLY_WRONG_CONTEXT, "math_eval: the %s backend has no kernels", ctx->ops->name);
    if (fn < TALLY_K_MATH_EXP || fn > TALLY_K_MATH_DIGAMMA)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "math_eval: unknown function %u", fn);
    if (in->ctx != ctx || out->ctx != ctx)
        return tally__error(ctx, TALLY_WRONG_CONTEXT, "math_eval: buffers of another context");
    if (n > in->bytes / 4 || n > out->bytes / 4)
        return tally__error(ctx, TALLY_OUT_OF_BOUNDS, "math_eval: %llu elements exceed a buffer",
                            (unsigned long long)n);
    if (n == 0) return TALLY_OK;
    const tally__kargs_math_eval a = {.in = {in, 0}, .out = {out, 0}, .n = n, .fn = fn};
    uint64_t groups = tally__gpu_ceil_div(n, TALLY_GPU_GROUP_SIZE);
    if (groups > 65536) groups = 65536;
    return tally__gpu_launch_math_eval(ctx, groups, &a);
}
