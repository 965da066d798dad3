/*
 * kernels/rng.h - random fills and categorical draws. Stream element i is
 * word i % 4 of Philox block i / 4 (tally/philox.h); each work-item
 * computes whole blocks and hands out their words, so no block is computed
 * twice for one call.
 */
#ifndef TALLY_KERNELS_RNG_H
#define TALLY_KERNELS_RNG_H

#include "tree.h"

/*
 * Element k of the row-major walk of out [rows, cols] (row stride `stride`)
 * gets stream element offset + k: raw bits, uniform or normal (written as
 * bits, so one kernel serves the u32 and the f32 outputs).
 */
TALLY_KERNEL void tally_k_rng_fill(TALLY_GLOBAL tally_u32 *TALLY_RESTRICT out, tally_u64 out_off, tally_u64 stride,
                                   tally_u64 rows, tally_u64 cols, tally_u32 dist, tally_u64 seed,
                                   tally_u64 subsequence, tally_u64 offset)
{
    const tally_u64 n = rows * cols;
    if (n == 0u) return;
    const int contiguous = rows <= 1u || stride == cols;
    const tally_u64 m1 = (offset + (n - 1u)) >> 2;
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 m = (offset >> 2) + TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); m <= m1; m += step) {
        const tally_philox4 blk = tally_stream_block(seed, subsequence, m);
        tally_u32 bits[4];
        if (dist == TALLY_K_DIST_NORMAL) {
            float f[4];
            tally_normal_pair(blk.v[0], blk.v[1], &f[0], &f[1]);
            tally_normal_pair(blk.v[2], blk.v[3], &f[2], &f[3]);
            for (tally_u32 w = 0; w < 4u; w++) bits[w] = tally_as_u32(f[w]);
        } else if (dist == TALLY_K_DIST_UNIFORM) {
            for (tally_u32 w = 0; w < 4u; w++) bits[w] = tally_as_u32(tally_uniform_from_bits(blk.v[w]));
        } else {
            for (tally_u32 w = 0; w < 4u; w++) bits[w] = blk.v[w];
        }
        const tally_u64 i0 = m << 2;
        const tally_u32 w0 = i0 < offset ? (tally_u32)(offset - i0) : 0u;
        const tally_u64 k0 = i0 + w0 - offset;
        /* Position of element k0; later elements step along the row and wrap
         * to the next row (one division per block). */
        tally_u64 r = contiguous ? 0u : k0 / cols;
        tally_u64 c = contiguous ? k0 : k0 - r * cols;
        for (tally_u32 w = 0; w < 4u; w++) {
            if (w < w0 || i0 + w - offset >= n) continue;
            if (contiguous) {
                out[out_off + c] = bits[w];
                c++;
            } else {
                out[out_off + r * stride + c] = bits[w];
                c++;
                if (c == cols) {
                    c = 0;
                    r++;
                }
            }
        }
    }
}

/*
 * out[out_off + r * out_stride] = tally_categorical_row(row r of w, u_r)
 * with u_r = uniform(offset + r). A group takes 256 rows at a time and
 * shares their uniforms through local memory. Each row's rule is
 * sequential (the running sum fixes the order), so one work-item owns it.
 */
TALLY_KERNEL void tally_k_categorical(TALLY_GLOBAL const float *TALLY_RESTRICT w, tally_u64 w_off, tally_u64 w_stride,
                                      tally_u64 rows, tally_u64 cols, tally_u32 is_logits, tally_u64 seed,
                                      tally_u64 subsequence, tally_u64 offset,
                                      TALLY_GLOBAL tally_i32 *TALLY_RESTRICT out, tally_u64 out_off,
                                      tally_u64 out_stride)
{
    TALLY_LOCAL_ARRAY(float, ul, TALLY_K_GROUP_SIZE);
    const tally_u32 lid = TALLY_LID();
    for (tally_u64 row0 = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE; row0 < rows;
         row0 += TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(TALLY_K_GROUP_SIZE, rows - row0);
        tally_k_local_uniforms(ul, row0, count, seed, subsequence, offset, lid);
        TALLY_BARRIER();
        if (lid < count) {
            const tally_u64 r = row0 + lid;
            out[out_off + r * out_stride] =
                tally_categorical_row(w + w_off + r * w_stride, cols, (int)is_logits, ul[lid]);
        }
        TALLY_BARRIER();
    }
}

#endif /* TALLY_KERNELS_RNG_H */
