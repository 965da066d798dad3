/*
 * kernels/math_eval.h - evaluates one of tally's portable math functions
 * over an array, so that tests and tools can compare the device's bits with
 * the host's function by function (not only through the ops).
 */
#ifndef TALLY_KERNELS_MATH_EVAL_H
#define TALLY_KERNELS_MATH_EVAL_H

#include "abi.h"
#include "tally/terms.h"

/* out[k] = f(in[k]); for TALLY_K_MATH_DIV, out[k] = in[k] / in[n - 1 - k]. */
TALLY_KERNEL void tally_k_math_eval(TALLY_K_PARAMS(math_eval))
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    TALLY_GLOBAL const float *x = in + in_off;
    TALLY_GLOBAL float *y = out + out_off;
    for (tally_u64 k = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); k < n; k += step) {
        const float v = x[k];
        float r;
        switch (fn) {
        case TALLY_K_MATH_EXP: r = tally_expf(v); break;
        case TALLY_K_MATH_LOG: r = tally_logf(v); break;
        case TALLY_K_MATH_LOG1P: r = tally_log1pf(v); break;
        case TALLY_K_MATH_LGAMMA: r = tally_lgammaf(v); break;
        case TALLY_K_MATH_SQRT: r = tally_sqrtf(v); break;
        case TALLY_K_MATH_RECIP: r = tally_recipf(v); break;
        case TALLY_K_MATH_SINPI: r = tally_sinpif(v); break;
        case TALLY_K_MATH_COSPI: r = tally_cospif(v); break;
        case TALLY_K_MATH_DIV: r = tally_divf(v, x[n - 1u - k]); break;
        case TALLY_K_MATH_DIGAMMA: r = tally_digammaf(v); break;
        default: r = TALLY_F32_NAN; break;
        }
        y[k] = r;
    }
}

#endif /* TALLY_KERNELS_MATH_EVAL_H */
