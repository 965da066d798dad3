/*
 * kernels/reduce.h - the general tree level (tally_reduce, and the upper
 * levels of every other op's tree) and a strided fill.
 */
#ifndef TALLY_KERNELS_REDUCE_H
#define TALLY_KERNELS_REDUCE_H

#include "tree.h"

/* acc = combine(acc, term(x)), and the same for the four members of a
 * float4 in order (term, kind, sh: the kernel's). */
#define TALLY_K_REDUCE_FOLD(acc, x) acc = tally_combine((int)kind, acc, tally_k_reduce_term(term, (x), sh))
#define TALLY_K_REDUCE_FOLD4(acc, q4)  \
    do {                               \
        TALLY_K_REDUCE_FOLD(acc, (q4).x); \
        TALLY_K_REDUCE_FOLD(acc, (q4).y); \
        TALLY_K_REDUCE_FOLD(acc, (q4).z); \
        TALLY_K_REDUCE_FOLD(acc, (q4).w); \
    } while (0)

/* The same for the plain term (the element itself). */
#define TALLY_K_REDUCE_PLAIN4(acc, q4)                       \
    do {                                                     \
        acc = tally_combine((int)kind, acc, (q4).x);         \
        acc = tally_combine((int)kind, acc, (q4).y);         \
        acc = tally_combine((int)kind, acc, (q4).z);         \
        acc = tally_combine((int)kind, acc, (q4).w);         \
    } while (0)

/* acc folded with the sixteen plain terms of quads e0 .. e3 in element
 * order; a lane's first batch (first) starts acc with its first term. */
TALLY_FN float tally_k_fold_plain16(float acc, int first, tally_f4 e0, tally_f4 e1, tally_f4 e2, tally_f4 e3,
                                    tally_u32 kind)
{
    acc = first ? e0.x : tally_combine((int)kind, acc, e0.x);
    acc = tally_combine((int)kind, acc, e0.y);
    acc = tally_combine((int)kind, acc, e0.z);
    acc = tally_combine((int)kind, acc, e0.w);
    TALLY_K_REDUCE_PLAIN4(acc, e1);
    TALLY_K_REDUCE_PLAIN4(acc, e2);
    TALLY_K_REDUCE_PLAIN4(acc, e3);
    return acc;
}

/* The value of one element under a reduce term. */
TALLY_FN float tally_k_reduce_term(tally_u32 term, float x, float shift)
{
    if (term == TALLY_K_TERM_SQUARE) return x * x;
    if (term == TALLY_K_TERM_SHIFTED_EXP || term == TALLY_K_TERM_EXP) return tally_expf(x - shift);
    return x;
}

/*
 * One level of the tree for nvec vectors of n elements each.
 *
 * Vector b starts at x[x_off + b * vec_stride] (for STRIDED mode the single
 * vector is the row-major walk of a view of x_cols columns and row stride
 * x_stride). The level has `tiles` tiles per vector of `lanes` lanes and
 * `qpl` quads per lane. Unit u = b * tiles + t is tile t of vector b; its
 * value goes to out[out_off + u * out_stride], after `finish` when this is
 * the last level (tiles == 1). shift[shift_off + b] is vector b's shift (the
 * maximum, for logsumexp); it is read only by the SHIFTED_EXP term and the
 * LSE and EXP_SCALE finishes (where it is the vector's log_alpha).
 *
 * A group runs 256 / lanes units side by side, and strides over the units
 * by the number of groups.
 */
TALLY_FN void tally_k_reduce_tiles_run(TALLY_LOCAL float *v, TALLY_GLOBAL const float *TALLY_RESTRICT x, tally_u64 x_off,
                                       tally_u64 x_cols, tally_u64 x_stride, tally_u32 mode, tally_u64 nvec,
                                       tally_u64 vec_stride, tally_u64 n, tally_u32 lanes, tally_u32 qpl,
                                       tally_u64 tiles, tally_u32 term, tally_u32 kind,
                                       TALLY_GLOBAL const float *TALLY_RESTRICT shift, tally_u64 shift_off,
                                       tally_u32 finish, float divisor, TALLY_GLOBAL float *TALLY_RESTRICT out,
                                       tally_u64 out_off, tally_u64 out_stride, tally_u32 x_dtype)
{
    const tally_u32 lid = TALLY_LID();
    const tally_k_segs lay = tally_k_segs_of(lid, lanes, qpl, nvec, tiles, n);
    const tally_u32 j = lay.j;
    const tally_u64 units = lay.units, quads = lay.quads, tile_quads = lay.tile_quads;
    for (tally_u64 first = TALLY_GROUP_ID() * lay.segments; first < units;
         first += TALLY_GROUP_COUNT() * lay.segments) {
        const tally_u64 unit = first + lay.seg;
        const tally_k_unit at = tally_k_unit_at(&lay, unit);
        const tally_u64 active = at.active, b = at.vec;
        if (unit < units) {
            const tally_u64 base = at.base;
            const int full = mode == TALLY_K_LOAD_VEC4 && lanes == TALLY_K_GROUP_SIZE &&
                             qpl == TALLY_TREE_QUADS_PER_LANE && base + tile_quads <= (n >> 2);
            if (full && x_dtype != TALLY_F32 && term == TALLY_K_TERM_PLAIN) {
                /* Halves: lanes 2 lid and 2 lid + 1 read adjacent quads, so
                 * work-item lid plays both, one 16-byte load bringing a
                 * quad for each (work-items 128 .. 255 only join the tree;
                 * a full tile is the group's only unit). Plain terms only
                 * (sum, mean, min, max, logsumexp's maximum): inlining the
                 * other terms' exp for two lanes would double the program;
                 * they take the quad-by-quad path below. */
                if (lid < TALLY_K_GROUP_SIZE / 2u) {
                    const tally_k_src src = tally_k_src_at(x, x_dtype, x_off + b * vec_stride, x_cols, x_stride, mode);
                    const tally_u64 L2 = TALLY_K_GROUP_SIZE / 2u;
                    const tally_u64 m0 = (base >> 1) + lid;
                    float accA = 0.0f, accB = 0.0f;
                    for (tally_u32 q = 0; q < TALLY_TREE_QUADS_PER_LANE; q += 4u) {
                        const tally_u64 m = m0 + (tally_u64)q * L2;
                        tally_f4 e0, o0, e1, o1, e2, o2, e3, o3;
                        tally_k_load_h8(src.h, x_dtype, m, &e0, &o0);
                        tally_k_load_h8(src.h, x_dtype, m + L2, &e1, &o1);
                        tally_k_load_h8(src.h, x_dtype, m + 2u * L2, &e2, &o2);
                        tally_k_load_h8(src.h, x_dtype, m + 3u * L2, &e3, &o3);
                        accA = tally_k_fold_plain16(accA, q == 0u, e0, e1, e2, e3, kind);
                        accB = tally_k_fold_plain16(accB, q == 0u, o0, o1, o2, o3, kind);
                    }
                    v[2u * lid] = accA;
                    v[2u * lid + 1u] = accB;
                }
            } else if ((tally_u64)j < active) {
                const tally_k_src src = tally_k_src_at(x, x_dtype, x_off + b * vec_stride, x_cols, x_stride, mode);
                const float sh = term == TALLY_K_TERM_SHIFTED_EXP ? shift[shift_off + b] : 0.0f;
                float acc = 0.0f;
                int first_term = 1, done = 0;
                if (full && x_dtype == TALLY_F32) {
                    /* A full tile of whole aligned quads: four 16-byte loads
                     * in flight per batch, then the fold in plan order. */
                    const tally_u64 L = TALLY_K_GROUP_SIZE;
                    for (tally_u32 q = 0; q < TALLY_TREE_QUADS_PER_LANE; q += 4u) {
                        const tally_u64 h = base + j + (tally_u64)q * L;
                        const tally_f4 a0 = TALLY_LOAD_F4(src.p, h), a1 = TALLY_LOAD_F4(src.p, h + L);
                        const tally_f4 a2 = TALLY_LOAD_F4(src.p, h + 2u * L), a3 = TALLY_LOAD_F4(src.p, h + 3u * L);
                        const float first = tally_k_reduce_term(term, a0.x, sh);
                        acc = q == 0u ? first : tally_combine((int)kind, acc, first);
                        TALLY_K_REDUCE_FOLD(acc, a0.y);
                        TALLY_K_REDUCE_FOLD(acc, a0.z);
                        TALLY_K_REDUCE_FOLD(acc, a0.w);
                        TALLY_K_REDUCE_FOLD4(acc, a1);
                        TALLY_K_REDUCE_FOLD4(acc, a2);
                        TALLY_K_REDUCE_FOLD4(acc, a3);
                    }
                    done = 1;
                }
                for (tally_u32 q = 0; q < qpl && !done; q++) {
                    const tally_u64 g = base + (tally_u64)q * lanes + j;
                    if (g >= quads) break;
                    float e[4];
                    const tally_u32 count = tally_k_load_quad(&src, n, g, e);
                    for (tally_u32 c = 0; c < 4u; c++) {
                        if (c < count) {
                            const float t = tally_k_reduce_term(term, e[c], sh);
                            acc = first_term ? t : tally_combine((int)kind, acc, t);
                            first_term = 0;
                        }
                    }
                }
                v[lid] = acc;
            }
        }
        tally_k_tree(v, lid, lanes, active, kind);
        if (unit < units && j == 0u) {
            float r = v[lid];
            if (finish == TALLY_K_FINISH_DIVIDE) r = tally_divf(r, divisor);
            if (finish == TALLY_K_FINISH_LSE) r = tally_lse_finish(shift[shift_off + b], r);
            if (finish == TALLY_K_FINISH_EXP_SCALE) r = tally_expf(shift[shift_off + b]) * r;
            out[out_off + unit * out_stride] = tally_canonical(r);
        }
    }
}

/* fp32 input only (x_dtype is ignored): the halves' code is compiled out,
 * so the fp32 kernel keeps its registers and occupancy. */
TALLY_KERNEL void tally_k_reduce_tiles(TALLY_K_PARAMS(reduce_tiles))
{
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);
    (void)x_dtype;
    tally_k_reduce_tiles_run(v, x, x_off, x_cols, x_stride, mode, nvec, vec_stride, n, lanes, qpl, tiles, term, kind,
                             shift, shift_off, finish, divisor, out, out_off, out_stride, TALLY_F32);
}

/* The same on a bf16 or f16 input. */
TALLY_KERNEL void tally_k_reduce_tiles_half(TALLY_K_PARAMS(reduce_tiles))
{
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);
    tally_k_reduce_tiles_run(v, x, x_off, x_cols, x_stride, mode, nvec, vec_stride, n, lanes, qpl, tiles, term, kind,
                             shift, shift_off, finish, divisor, out, out_off, out_stride, x_dtype);
}

/*
 * The level of tally_k_reduce_tiles for vectors of one full tile of 256
 * lanes of one quad each (lanes 256, qpl 1, tiles 1: n of 1021 to 1024,
 * rows of about 1024 elements), a warp of 32 work-items a vector instead of
 * a group: work-item t of the warp takes lanes t + 32 k (k = 0 .. 7), folds
 * each lane's quad as tally_k_reduce_tiles does, then takes the steps of
 * tally_k_tree_full in registers (128, 64, 32: its own lanes) and across
 * the warp by shuffles (16, 8, 4 from work-items t + 4 m; 2 and 1 from
 * work-items 0 .. 3): the same operations on the same values, so the same
 * bits, with no barrier and eight vectors a group. A group of the general
 * kernel gives such a vector 256 work-items with four elements each, and
 * its fixed costs a vector (the unit's place, the tree's barriers) then
 * bound the level, not the loads. Where TALLY_HAS_WARP_SHUFFLE is 0 the
 * kernel is empty and never launched.
 */
TALLY_KERNEL void tally_k_reduce_rows_warp(TALLY_K_PARAMS(reduce_tiles))
{
#if TALLY_HAS_WARP_SHUFFLE
    const tally_u32 lid = TALLY_LID();
    const tally_u32 t = lid & 31u;
    const int k = (int)kind;
    const tally_u64 per_group = TALLY_K_GROUP_SIZE / 32u;
    (void)lanes;
    (void)qpl;
    (void)tiles;
    /* The vector loop is the same for the 32 work-items of a warp, so each
     * shuffle below has its whole warp. */
    for (tally_u64 b = TALLY_GROUP_ID() * per_group + lid / 32u; b < nvec; b += TALLY_GROUP_COUNT() * per_group) {
        const tally_k_src src = tally_k_src_at(x, x_dtype, x_off + b * vec_stride, x_cols, x_stride, mode);
        const float sh = term == TALLY_K_TERM_SHIFTED_EXP ? shift[shift_off + b] : 0.0f;
        float r[8];
        if (mode == TALLY_K_LOAD_VEC4 && n == 4u * TALLY_K_GROUP_SIZE) {
            /* Whole aligned quads: the eight loads go out together. */
            tally_f4 q[8];
#pragma unroll
            for (tally_u32 m = 0; m < 8u; m++) q[m] = tally_k_quad4(&src, t + 32u * m);
#pragma unroll
            for (tally_u32 m = 0; m < 8u; m++) {
                float acc = tally_k_reduce_term(term, q[m].x, sh);
                acc = tally_combine(k, acc, tally_k_reduce_term(term, q[m].y, sh));
                acc = tally_combine(k, acc, tally_k_reduce_term(term, q[m].z, sh));
                r[m] = tally_combine(k, acc, tally_k_reduce_term(term, q[m].w, sh));
            }
        } else {
#pragma unroll
            for (tally_u32 m = 0; m < 8u; m++) {
                float e[4];
                const tally_u32 count = tally_k_load_quad(&src, n, t + 32u * m, e);
                float acc = tally_k_reduce_term(term, e[0], sh);
                for (tally_u32 c = 1; c < 4u; c++)
                    if (c < count) acc = tally_combine(k, acc, tally_k_reduce_term(term, e[c], sh));
                r[m] = acc;
            }
        }
        /* tally_k_tree_three_steps(v, t, 32): v[t + 32 m] is r[m]. */
        float w = tally_combine(k, tally_combine(k, tally_combine(k, r[0], r[4]), tally_combine(k, r[2], r[6])),
                                tally_combine(k, tally_combine(k, r[1], r[5]), tally_combine(k, r[3], r[7])));
        /* tally_k_tree_three_steps(v, j, 4) for j = t & 3: v[j + 4 m] is w
         * of work-item j + 4 m. */
        float s[8];
#pragma unroll
        for (tally_u32 m = 0; m < 8u; m++) s[m] = TALLY_WARP_SHUFFLE(w, (t & 3u) + 4u * m);
        w = tally_combine(k, tally_combine(k, tally_combine(k, s[0], s[4]), tally_combine(k, s[2], s[6])),
                          tally_combine(k, tally_combine(k, s[1], s[5]), tally_combine(k, s[3], s[7])));
        const float a0 = TALLY_WARP_SHUFFLE(w, 0u), a1 = TALLY_WARP_SHUFFLE(w, 1u);
        const float a2 = TALLY_WARP_SHUFFLE(w, 2u), a3 = TALLY_WARP_SHUFFLE(w, 3u);
        if (t == 0u) {
            float v = tally_combine(k, tally_combine(k, a0, a2), tally_combine(k, a1, a3));
            if (finish == TALLY_K_FINISH_DIVIDE) v = tally_divf(v, divisor);
            if (finish == TALLY_K_FINISH_LSE) v = tally_lse_finish(shift[shift_off + b], v);
            if (finish == TALLY_K_FINISH_EXP_SCALE) v = tally_expf(shift[shift_off + b]) * v;
            out[out_off + b * out_stride] = tally_canonical(v);
        }
    }
#endif
}

/* out[off + k * stride] = pattern (as bits) for k < n. Used for the results
 * of empty inputs, whose values the host computes. */
TALLY_KERNEL void tally_k_fill(TALLY_K_PARAMS(fill))
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 k = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); k < n; k += step)
        out[off + k * stride] = pattern;
}

#endif /* TALLY_KERNELS_REDUCE_H */
