/*
 * kernels/halves.h - loading and widening a BF16 or F16 view to fp32 (the GPU backends'
 * `widen`, which src/half.c runs before the fp32 op on half inputs), and
 * narrowing fp32 results into a BF16 or F16 view (`narrow`, which src/half.c
 * runs after the fp32 op of a half output).
 */
#ifndef TALLY_KERNELS_HALVES_H
#define TALLY_KERNELS_HALVES_H

#include "tally/half.h"
#include "abi.h"

/* ---- Loads of half elements. The element types' codes are
 * tally_dtype (tally/half.h); every load widens with tally/half.h, so
 * what a kernel computes after the load is the fp32 path on the widened
 * values. GPUs are little-endian: element 2k of a 32-bit word is its low
 * half. ---- */

/* Element i of a vector of dtype `dtype` whose first element is p (f32)
 * or h (halves). */
TALLY_FN float tally_k_ld(TALLY_GLOBAL const float *p, TALLY_GLOBAL const tally_u16 *h, tally_u32 dtype,
                          tally_u64 i)
{
    if (dtype == TALLY_F32) return p[i];
    return tally_half_to_f32(dtype, (tally_u32)h[i]);
}

/* Element i of buffer `base` of dtype `dtype` (i counted in its elements). */
TALLY_FN float tally_k_ld_at(TALLY_GLOBAL const float *base, tally_u32 dtype, tally_u64 i)
{
    return tally_k_ld(base, (TALLY_GLOBAL const tally_u16 *)base, dtype, i);
}

/* The low and high halves of a 32-bit word, widened. */
TALLY_FN float tally_k_lo(tally_u32 dtype, tally_u32 w)
{
    return tally_half_to_f32(dtype, w & 0xffffu);
}

TALLY_FN float tally_k_hi(tally_u32 dtype, tally_u32 w)
{
    return tally_half_to_f32(dtype, w >> 16);
}

/* Quad g (halves 4g .. 4g + 3) as one 8-byte load; h + 4g must be 8-byte
 * aligned. */
TALLY_FN tally_f4 tally_k_load_h4(TALLY_GLOBAL const tally_u16 *h, tally_u32 dtype, tally_u64 g)
{
    const uint2 w = ((TALLY_GLOBAL const uint2 *)h)[g];
    tally_f4 q;
    q.x = tally_k_lo(dtype, w.x);
    q.y = tally_k_hi(dtype, w.x);
    q.z = tally_k_lo(dtype, w.y);
    q.w = tally_k_hi(dtype, w.y);
    return q;
}

/* Quads 2m and 2m + 1 (halves 8m .. 8m + 7) as one 16-byte load into
 * *even and *odd; h + 8m must be 16-byte aligned. */
TALLY_FN void tally_k_load_h8(TALLY_GLOBAL const tally_u16 *h, tally_u32 dtype, tally_u64 m, tally_f4 *even,
                              tally_f4 *odd)
{
    const uint4 w = ((TALLY_GLOBAL const uint4 *)h)[m];
    even->x = tally_k_lo(dtype, w.x);
    even->y = tally_k_hi(dtype, w.x);
    even->z = tally_k_lo(dtype, w.y);
    even->w = tally_k_hi(dtype, w.y);
    odd->x = tally_k_lo(dtype, w.z);
    odd->y = tally_k_hi(dtype, w.z);
    odd->z = tally_k_lo(dtype, w.w);
    odd->w = tally_k_hi(dtype, w.w);
}

/* The same pair of quads of a vector of any dtype: one 16-byte load of
 * halves, or two float4 loads of fp32. */
TALLY_FN void tally_k_load_pair(TALLY_GLOBAL const float *p, TALLY_GLOBAL const tally_u16 *h, tally_u32 dtype,
                                tally_u64 m, tally_f4 *even, tally_f4 *odd)
{
    if (dtype == TALLY_F32) {
        *even = TALLY_LOAD_F4(p, 2u * m);
        *odd = TALLY_LOAD_F4(p, 2u * m + 1u);
    } else {
        tally_k_load_h8(h, dtype, m, even, odd);
    }
}

/* The walk of tally_k_widen and tally_k_narrow over their rows x cols
 * elements: MOVE(k, h) for each element, k its index in the contiguous
 * fp32 side (k = r * cols + c) and h in the half view of row stride
 * `stride`. A contiguous view is walked flat; a strided one row by row
 * (groups over rows, work-items over columns), so no element needs a
 * division. */
#define TALLY_K_HALF_WALK(stride, MOVE)                                                                   \
    do {                                                                                                  \
        const tally_u32 lid_ = TALLY_LID();                                                               \
        if (rows <= 1u || (stride) == cols) {                                                             \
            const tally_u64 n_ = rows * cols;                                                             \
            const tally_u64 step_ = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;                             \
            for (tally_u64 k_ = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + lid_; k_ < n_; k_ += step_)       \
                MOVE(k_, k_);                                                                             \
        } else {                                                                                          \
            for (tally_u64 r_ = TALLY_GROUP_ID(); r_ < rows; r_ += TALLY_GROUP_COUNT())                   \
                for (tally_u64 c_ = lid_; c_ < cols; c_ += TALLY_K_GROUP_SIZE)                            \
                    MOVE(r_ * cols + c_, r_ * (stride) + c_);                                             \
        }                                                                                                 \
    } while (0)

/* o[k] = widen(x[r * x_stride + c]) for element k = r * cols + c of the
 * rows x cols view at x + x_off (offsets and stride in halves). dtype is
 * TALLY_BF16 or TALLY_F16. */
TALLY_KERNEL void tally_k_widen(TALLY_K_PARAMS(widen))
{
    TALLY_GLOBAL const tally_u16 *xp = x + x_off;
    TALLY_GLOBAL float *op = o + o_off;
#define TALLY_K_WIDEN1(k, h) op[k] = tally_half_to_f32(dtype, (tally_u32)xp[h])
    TALLY_K_HALF_WALK(x_stride, TALLY_K_WIDEN1);
#undef TALLY_K_WIDEN1
}

/* fp32 value f rounded to half dtype `dtype` (TALLY_BF16 or TALLY_F16) by
 * tally/half.h's integer code: round to nearest even, never the device's
 * conversion instructions. */
TALLY_FN tally_u16 tally_k_narrow1(tally_u32 dtype, float f)
{
    return (tally_u16)(dtype == TALLY_BF16 ? tally_f32_to_bf16(f) : tally_f32_to_f16(f));
}

/* o[r * o_stride + c] = narrow(x[k]) for element k = r * cols + c of the
 * contiguous fp32 source and the rows x cols half view at o + o_off (offset
 * and stride in halves). Each element is one 2-byte store, so a strided
 * view's gaps and the other half of a shared 32-bit word are never
 * written (byte-addressable stores are core in OpenCL C 1.1 and later). */
TALLY_KERNEL void tally_k_narrow(TALLY_K_PARAMS(narrow))
{
    TALLY_GLOBAL const float *xp = x + x_off;
    TALLY_GLOBAL tally_u16 *op = o + o_off;
#define TALLY_K_NARROW1(k, h) op[h] = tally_k_narrow1(dtype, xp[k])
    TALLY_K_HALF_WALK(o_stride, TALLY_K_NARROW1);
#undef TALLY_K_NARROW1
}

#endif /* TALLY_KERNELS_HALVES_H */
