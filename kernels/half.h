/*
 * kernels/half.h - widening a BF16 or F16 view to fp32 (the GPU backends'
 * `widen`, which src/half.c runs before the fp32 op on half inputs).
 */
#ifndef TALLY_KERNELS_HALF_H
#define TALLY_KERNELS_HALF_H

#include "tally/half.h"
#include "abi.h"

/*
 * o[k] = widen(x[r * x_stride + c]) for element k = r * cols + c of the
 * rows x cols view at x + x_off (offsets and stride in halves). dtype is
 * TALLY_K_DTYPE_BF16 or TALLY_K_DTYPE_F16. A contiguous view is walked
 * flat; a strided one row by row (groups over rows, work-items over
 * columns), so no element needs a division.
 */
TALLY_KERNEL void tally_k_widen(TALLY_GLOBAL const tally_u16 *TALLY_RESTRICT x, tally_u64 x_off, tally_u64 x_stride,
                                tally_u64 rows, tally_u64 cols, tally_u32 dtype, TALLY_GLOBAL float *TALLY_RESTRICT o,
                                tally_u64 o_off)
{
    const tally_u32 lid = TALLY_LID();
    TALLY_GLOBAL const tally_u16 *xp = x + x_off;
    TALLY_GLOBAL float *op = o + o_off;
    if (rows <= 1u || x_stride == cols) {
        const tally_u64 n = rows * cols;
        const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
        for (tally_u64 k = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + lid; k < n; k += step)
            op[k] = tally_half_to_f32(dtype, (tally_u32)xp[k]);
        return;
    }
    for (tally_u64 r = TALLY_GROUP_ID(); r < rows; r += TALLY_GROUP_COUNT())
        for (tally_u64 c = lid; c < cols; c += TALLY_K_GROUP_SIZE)
            op[r * cols + c] = tally_half_to_f32(dtype, (tally_u32)xp[r * x_stride + c]);
}

#endif /* TALLY_KERNELS_HALF_H */
