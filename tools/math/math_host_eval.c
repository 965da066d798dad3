/*
 * math_host_eval.c - the host (plain C) build of tally's portable math, for
 * tools/math/cuda_math_compare.cu.
 *
 * The CUDA program cannot call the header's functions from host code (in a
 * CUDA compilation TALLY_FN is __device__ only), and the host results must
 * come from the C compilation anyway, since that is the reference the GPU
 * bits are compared with.  So this file is compiled separately by gcc:
 *
 *   gcc -std=c11 -O2 -ffp-contract=off -Wall -Wextra -Wundef -Werror \
 *       -Iinclude -c tools/math/math_host_eval.c -o math_host_eval.o
 *
 * Function numbers (keep in sync with TALLY_TOOLS_FN_* in
 * tools/math/cuda_math_compare.cu):
 *   0 exp, 1 log, 2 log1p, 3 lgamma, 4 sqrt, 5 recip, 6 sinpi, 7 cospi:
 *       out[i] = f(in[i]) for i < n;
 *   8 div:      in holds n pairs (a, b), out[i] = tally_divf(in[2i], in[2i+1]);
 *   9 sincospi: out holds n pairs, out[2i] = sinpi(in[i]), out[2i+1] = cospi(in[i]).
 */
#include <stddef.h>

#include "tally/portable_math.h"

void tally_tools_eval_host(int fn, const float *in, float *out, size_t n);

void tally_tools_eval_host(int fn, const float *in, float *out, size_t n)
{
    size_t i;
    switch (fn) {
    case 0: for (i = 0; i < n; i++) out[i] = tally_expf(in[i]); break;
    case 1: for (i = 0; i < n; i++) out[i] = tally_logf(in[i]); break;
    case 2: for (i = 0; i < n; i++) out[i] = tally_log1pf(in[i]); break;
    case 3: for (i = 0; i < n; i++) out[i] = tally_lgammaf(in[i]); break;
    case 4: for (i = 0; i < n; i++) out[i] = tally_sqrtf(in[i]); break;
    case 5: for (i = 0; i < n; i++) out[i] = tally_recipf(in[i]); break;
    case 6: for (i = 0; i < n; i++) out[i] = tally_sinpif(in[i]); break;
    case 7: for (i = 0; i < n; i++) out[i] = tally_cospif(in[i]); break;
    case 8: for (i = 0; i < n; i++) out[i] = tally_divf(in[2 * i], in[2 * i + 1]); break;
    case 9:
        for (i = 0; i < n; i++)
            tally_sincospif(in[i], &out[2 * i], &out[2 * i + 1]);
        break;
    default: break;
    }
}
