/*
 * kernels/kl_logits.h - KL divergence from logits (TALLY_KL_INPUT_LOGITS,
 * TALLY_KL_TARGET_LOGITS): each row's softmax statistics, then the terms of
 * tally_kl_logits_term (tally/terms.h) in the reduction's tree.
 *
 * The general path (any shape and placement, backends/gpu/gpu_kl_logits.c):
 * the row trees of tally_k_reduce_tiles write the maximum and the shifted
 * sum of every row of each logits side to a statistics array, which
 * tally_k_kl_logits_stats completes with L and r; tally_k_kl_logits_tiles
 * (level 0 of the reduction's tree) or tally_k_kl_logits_pointwise then
 * computes the terms, each with its row's statistics.
 *
 * The fused path, tally_k_kl_logits_rows: when the reduction's tiles of
 * 16384 elements are whole rows (contiguous 16-byte aligned inputs, cols a
 * power of two from 1024 to 16384, rows * cols a multiple of 16384), a
 * group keeps its tile's quads in registers, takes each of its rows'
 * statistics there (the row plan's lanes are the tile's lanes: lane j of a
 * row of cols elements folds quads j + 256 q', which are its own quads
 * q = rho Q + q' of the tile, Q = cols / 1024) and then the tile's terms, so
 * the inputs are read from memory once. tally_k_kl_logits_rows_pair is the
 * same with two independent parts a group, each with its target quads in
 * local memory (CUDA).
 */
#ifndef TALLY_KERNELS_KL_LOGITS_H
#define TALLY_KERNELS_KL_LOGITS_H

#include "tree.h"

/* The term of element (x, y) of row r under the statistics array st. */
TALLY_FN float tally_k_kll_term(TALLY_GLOBAL const float *st, tally_u64 rows, tally_u64 r, float x, float y,
                                tally_u32 flags)
{
    return tally_kl_logits_term(x, y, st[TALLY_K_KLL_MX * rows + r], st[TALLY_K_KLL_LX * rows + r],
                                st[TALLY_K_KLL_MY * rows + r], st[TALLY_K_KLL_LY * rows + r],
                                st[TALLY_K_KLL_RY * rows + r], flags);
}

/* The row trees left m and s in the planes of each logits side: s becomes
 * L (and r for the target); the planes of a side that is not logits become
 * 0, the value tally_kl_logits_term expects there. */
TALLY_KERNEL void tally_k_kl_logits_stats(TALLY_K_PARAMS(kl_logits_stats))
{
    TALLY_GLOBAL float *p = st + st_off;
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 r = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); r < rows; r += step) {
        if (flags & TALLY_KL_INPUT_LOGITS) {
            const float m = p[TALLY_K_KLL_MX * rows + r], s = p[TALLY_K_KLL_LX * rows + r];
            p[TALLY_K_KLL_LX * rows + r] = tally_softmax_log_norm(m, s);
        } else {
            p[TALLY_K_KLL_MX * rows + r] = 0.0f;
            p[TALLY_K_KLL_LX * rows + r] = 0.0f;
        }
        if (flags & TALLY_KL_TARGET_LOGITS) {
            const float m = p[TALLY_K_KLL_MY * rows + r], s = p[TALLY_K_KLL_LY * rows + r];
            p[TALLY_K_KLL_LY * rows + r] = tally_softmax_log_norm(m, s);
            p[TALLY_K_KLL_RY * rows + r] = tally_softmax_recip_norm(m, s);
        } else {
            p[TALLY_K_KLL_MY * rows + r] = 0.0f;
            p[TALLY_K_KLL_LY * rows + r] = 0.0f;
            p[TALLY_K_KLL_RY * rows + r] = 0.0f;
        }
    }
}

/* Level 0 of the reduction's tree over the row-major walk of n = rows *
 * cols elements, as tally_k_kl_tiles but quad by quad (any placement, any
 * dtype); each element's row is found once per quad and then followed. */
TALLY_KERNEL void tally_k_kl_logits_tiles(TALLY_K_PARAMS(kl_logits_tiles))
{
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);
    const tally_u32 lid = TALLY_LID();
    const tally_u32 j = lid & (lanes - 1u);
    const tally_u64 quads = tally_k_quads(n);
    const tally_u64 tile_quads = (tally_u64)lanes * qpl;
    const tally_k_src xs = tally_k_src_at(x, x_dtype, x_off, cols, x_stride, mode);
    const tally_k_src ts = tally_k_src_at(t, t_dtype, t_off, cols, t_stride, mode);
    TALLY_GLOBAL const float *sp = st + st_off;
    /* A plan narrower than a group has a single tile: segment 0 runs it. */
    const int in_segment = lid < lanes;
    for (tally_u64 tile = TALLY_GROUP_ID(); tile < tiles; tile += TALLY_GROUP_COUNT()) {
        const tally_u64 base = tile * tile_quads;
        const tally_u64 active = in_segment ? tally_k_active(quads, base, lanes) : 0u;
        if ((tally_u64)j < active) {
            const float acc = tally_k_kl_lane(&xs, &ts, n, base, lanes, j, qpl, flags, sp, rows, cols);
            v[lid] = acc;
        }
        tally_k_tile_sum_store(v, lid, lanes, active, in_segment && j == 0u, finish, divisor, out + out_off + tile);
    }
}

/* The pointwise loss: groups walk the rows, work-items a row's columns. */
TALLY_KERNEL void tally_k_kl_logits_pointwise(TALLY_K_PARAMS(kl_logits_pointwise))
{
    const tally_k_src xs = tally_k_src_at(x, x_dtype, x_off, cols, x_stride, TALLY_K_LOAD_STRIDED);
    const tally_k_src ts = tally_k_src_at(t, t_dtype, t_off, cols, t_stride, TALLY_K_LOAD_STRIDED);
    TALLY_GLOBAL const float *sp = st + st_off;
    for (tally_u64 r = TALLY_GROUP_ID(); r < rows; r += TALLY_GROUP_COUNT()) {
        TALLY_GLOBAL float *orow = o + o_off + r * o_stride;
        for (tally_u64 c = TALLY_LID(); c < cols; c += TALLY_K_GROUP_SIZE) {
            const float xv = tally_k_ld(xs.p, xs.h, x_dtype, r * x_stride + c);
            const float yv = tally_k_ld(ts.p, ts.h, t_dtype, r * t_stride + c);
            orow[c] = tally_canonical(tally_k_kll_term(sp, rows, r, xv, yv, flags));
        }
    }
}

/* ---- The fused path. ---- */

/* M(q) for the sixteen quads of a lane, with q a constant, so that the
 * quads stay in registers. */
#define TALLY_K_KLL_EACH(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7) M(8) M(9) M(10) M(11) M(12) M(13) M(14) M(15)

/* A lane's maximum over a quad, continuing m (or starting it with the
 * quad's first element). Without NaNs this is tally_max_nan's fold; a NaN
 * in a row makes its shifted sum NaN and so, through L and r, every value
 * of the row NaN, which is what the plan's NaN-propagating maximum gives
 * too: the bits of every result are the same either way. */
#define TALLY_K_KLL_MAX4(m, q4, first)                   \
    do {                                                 \
        m = (first) ? (q4).x : ((q4).x > m ? (q4).x : m); \
        m = (q4).y > m ? (q4).y : m;                     \
        m = (q4).z > m ? (q4).z : m;                     \
        m = (q4).w > m ? (q4).w : m;                     \
    } while (0)

/* A lane's minimum over a quad (the test for the short exponential). */
#define TALLY_K_KLL_MIN4(m, q4, first)                   \
    do {                                                 \
        m = (first) ? (q4).x : ((q4).x < m ? (q4).x : m); \
        m = (q4).y < m ? (q4).y : m;                     \
        m = (q4).z < m ? (q4).z : m;                     \
        m = (q4).w < m ? (q4).w : m;                     \
    } while (0)

/* A lane's maximum m and minimum n over a quad with the hardware's
 * instructions (TALLY_MAXNUM, one instruction an element where the fold
 * above takes a comparison and a select). Without NaNs m has the value of
 * the fold above; only the sign of a zero maximum may differ, and the
 * caller folds a row whose maximum is zero again with the fold above. A
 * NaN is ignored here, which leaves every value of its row NaN as above.
 * n is the test for the short exponential, which a zero's sign does not
 * change. */
#define TALLY_K_KLL_MAXMIN4(m, n, q4, first)                                     \
    do {                                                                         \
        m = (first) ? (q4).x : TALLY_MAXNUM((q4).x, m);                          \
        n = (first) ? (q4).x : TALLY_MINNUM((q4).x, n);                          \
        m = TALLY_MAXNUM((q4).y, m);                                             \
        n = TALLY_MINNUM((q4).y, n);                                             \
        m = TALLY_MAXNUM((q4).z, m);                                             \
        n = TALLY_MINNUM((q4).z, n);                                             \
        m = TALLY_MAXNUM((q4).w, m);                                             \
        n = TALLY_MINNUM((q4).w, n);                                             \
    } while (0)

/* The same with the exact folds (TALLY_K_KLL_HW_MAX 0, and the second
 * fold of a row whose maximum is zero). */
#define TALLY_K_KLL_MAXMIN4_EXACT(m, n, q4, first) \
    do {                                           \
        TALLY_K_KLL_MAX4(m, q4, first);            \
        TALLY_K_KLL_MIN4(n, q4, first);            \
    } while (0)

/* The lowest shifted logit d = z - m of a lane for which its exponentials
 * take tally_pm_expf_normal (the same bits as tally_expf there). */
#define TALLY_K_KLL_EXP_LOW (-87.0f)

/* Element c of pass B: the shifted sums and what pass C needs. dx: the
 * input side (d_x), y: the target element. With TARGET_LOGITS, a becomes
 * delta = d_y - d_x and b becomes e = tally_expf(d_y); where e == 0 the
 * term is 0 or NaN whatever delta is, so delta is replaced by 0, or NaN
 * where d_x is NaN: pass C's test of delta + (c_x - L_y) for NaN is then
 * exactly tally_kl_softmax_term's test of log q = d_x - c_x (a t == 0 with
 * e != 0 has a finite d_y, and the c_x - L_y of a row with t == 0 is NaN
 * exactly when c_x is). Without it a becomes d_x. */
#define TALLY_K_KLL_B1(a, b, xl, yl, flags, mx, my, sx, sy, first, EXP, SHORT)            \
    do {                                                                                  \
        float dx_ = (a);                                                                  \
        if (xl) {                                                                         \
            dx_ = dx_ - (mx);                                                             \
            const float ex_ = EXP(dx_);                                                   \
            sx = (first) ? ex_ : sx + ex_;                                                \
        } else if ((flags) & TALLY_KL_INPUT_IS_PROB) {                                    \
            dx_ = tally_logf(dx_);                                                        \
        }                                                                                 \
        if (yl) {                                                                         \
            const float dy_ = (b) - (my);                                                 \
            const float ey_ = EXP(dy_);                                                   \
            sy = (first) ? ey_ : sy + ey_;                                                \
            (a) = (SHORT || ey_ != 0.0f) ? dy_ - dx_ : (dx_ == dx_ ? 0.0f : dx_);         \
            (b) = ey_;                                                                    \
        } else {                                                                          \
            (a) = dx_;                                                                    \
        }                                                                                 \
    } while (0)

/* Element c of pass C: the term, folded into acc (first: the tile's first
 * term starts it). SHORT: the lane's exponentials were all short forms, so
 * every e >= e^-87 > 2^-126 and, as r >= 1/cols >= 2^-14 (s <= cols, each
 * term of s being <= 1), t = e r > 2^-140 is never 0: the zero-target case
 * cannot occur and the term is the product alone. */
#define TALLY_K_KLL_C1(acc, a, b, yl, flags, Lx, ry, cxy, first, SHORT)                   \
    do {                                                                                  \
        float term_;                                                                      \
        if (yl) {                                                                         \
            const float t_ = (b) * (ry);                                                  \
            const float w_ = (a) + (cxy);                                                 \
            term_ = (SHORT || t_ != 0.0f) ? t_ * w_ : (w_ == w_ ? 0.0f : w_);             \
        } else {                                                                          \
            term_ = tally_kl_term((a) - (Lx), (b), (flags) & TALLY_KL_LOG_TARGET);        \
        }                                                                                 \
        acc = (first) ? term_ : acc + term_;                                              \
    } while (0)

/* Where a tile's quads live while a part (256 work-items) works on it. A
 * part holds the input's quads in registers, a[q], and the target's either
 * in registers too (b[q]; y_local 0: one part a group, the whole register
 * file of a multiprocessor) or in local memory (ys; y_local 1: half the
 * registers, so that two parts of one group share a multiprocessor and
 * each computes while the other waits for its loads or at its barriers).
 * A part's place, as arguments of tally_k_kl_logits_rows_run:
 *   ys       y_local: this part's 16 x 256 target quads
 *   y_local  1: the target in local memory, 0: in registers
 *   part     the part's barrier (TALLY_BARRIER_PART)
 *   first    the part's first tile
 *   step     tiles between two of the part's */
#define TALLY_K_KLL_HOME_PARAMS \
    TALLY_LOCAL tally_f4 *ys, int y_local, tally_u32 part, tally_u64 first, tally_u64 step
#define TALLY_K_KLL_HOME_ARGS ys, y_local, part, first, step
/* y_local where a kernel can have its target in local memory (0 for the
 * compiler from the start where TALLY_HAS_STAGE is 0). */
#define TALLY_K_KLL_Y_LOCAL (TALLY_HAS_STAGE && y_local)

/* The target quad q of the work-item's lane. */
#define TALLY_K_KLL_Y(q) (TALLY_K_KLL_Y_LOCAL ? ys[(q) * L + lid] : b[q])

/* The arguments of the fused path's functions below: the part's five tree
 * arrays, its place, and the kernel's arguments. */
#define TALLY_K_KLL_RUN_PARAMS                                                                                  \
    TALLY_LOCAL float *va, TALLY_LOCAL float *vb, TALLY_LOCAL float *vc, TALLY_LOCAL float *vd,                  \
        TALLY_LOCAL float *ve, TALLY_K_KLL_HOME_PARAMS, TALLY_GLOBAL const float *TALLY_RESTRICT x, tally_u64 x_off, \
        TALLY_GLOBAL const float *TALLY_RESTRICT t, tally_u64 t_off, tally_u64 cols, tally_u64 tiles,            \
        tally_u32 flags, tally_u32 finish, float divisor, TALLY_GLOBAL float *TALLY_RESTRICT out, tally_u64 out_off, \
        tally_u32 x_dtype, tally_u32 t_dtype

TALLY_FN void tally_k_kl_logits_rows_run(TALLY_K_KLL_RUN_PARAMS)
{
    /* cols / 1024 quads per lane per row. */
    const tally_u32 qrow = (tally_u32)(cols >> 10);
    const tally_u32 lid = TALLY_LID() & (TALLY_K_GROUP_SIZE - 1u);
    const tally_u64 L = TALLY_K_GROUP_SIZE;
    const int xl = (flags & TALLY_KL_INPUT_LOGITS) != 0u, yl = (flags & TALLY_KL_TARGET_LOGITS) != 0u;
    const tally_k_src xs = tally_k_src_at(x, x_dtype, x_off, 0u, 0u, TALLY_K_LOAD_VEC4);
    const tally_k_src ts = tally_k_src_at(t, t_dtype, t_off, 0u, 0u, TALLY_K_LOAD_VEC4);
    TALLY_GLOBAL const tally_f4 *tq = (TALLY_GLOBAL const tally_f4 *)ts.p;
    /* The part's first tile is loaded here, each later one while the part
     * still works on the one before: the input (and a target in registers)
     * quad by quad during pass C into the registers that pass has just
     * finished with; a target in local memory through the ring above,
     * copied without passing through registers (each work-item copies and
     * reads back only its own quads, so no barrier orders them), while the
     * other part computes. */
    tally_f4 a[TALLY_TREE_QUADS_PER_LANE], b[TALLY_TREE_QUADS_PER_LANE];
    const tally_u64 tile_quads = L * TALLY_TREE_QUADS_PER_LANE;
#define TALLY_K_KLL_COPY_Y(q, g) TALLY_STAGE_COPY(&ys[(q) * L + lid], tq + (g) + (q) * L);
#define TALLY_K_KLL_LOAD_FIRST(q)                     \
    a[q] = tally_k_quad4(&xs, g0 + (q) * L);          \
    if (TALLY_K_KLL_Y_LOCAL) {                        \
        TALLY_K_KLL_COPY_Y(q, g0)                     \
    } else {                                          \
        b[q] = tally_k_quad4(&ts, g0 + (q) * L);      \
    }
#define TALLY_K_KLL_COPY_NEXT(q) TALLY_K_KLL_COPY_Y(q, g_next)
    if (first < tiles) {
        const tally_u64 g0 = first * tile_quads + lid;
        TALLY_K_KLL_EACH(TALLY_K_KLL_LOAD_FIRST)
    }
    /* TALLY_K_KLL_MERGED_TREES: the tile whose final sum tree (in ve) waits
     * to run beside the next tile's first maxima tree. Every work-item of a
     * part walks the same tiles, so the part agrees on it. */
    int pending = 0;
    tally_u64 pending_tile = 0;
    for (tally_u64 tile = first; tile < tiles; tile += step) {
        const tally_u64 next = tile + step;
        const tally_u64 g_next = next * tile_quads + lid;
        const int prefetch = next < tiles;
        if (TALLY_K_KLL_Y_LOCAL) TALLY_STAGE_WAIT();
        float acc = 0.0f;
        for (tally_u32 lo = 0; lo < TALLY_TREE_QUADS_PER_LANE; lo += qrow) {
            const tally_u32 hi = lo + qrow;
            /* Pass A: the row's maxima (and the lane's minima, for the
             * choice of exponential below). */
            float mx = 0.0f, my = 0.0f, nx = 0.0f, ny = 0.0f;
#define TALLY_K_KLL_A(q, MAXMIN)                                 \
    if ((q) >= lo && (q) < hi) {                                 \
        if (xl) MAXMIN(mx, nx, a[q], (q) == lo);                 \
        if (yl) {                                                \
            const tally_f4 y4_ = TALLY_K_KLL_Y(q);               \
            MAXMIN(my, ny, y4_, (q) == lo);                      \
        }                                                        \
    }
#define TALLY_K_KLL_A_HW(q) TALLY_K_KLL_A(q, TALLY_K_KLL_MAXMIN4)
#define TALLY_K_KLL_A_EXACT(q) TALLY_K_KLL_A(q, TALLY_K_KLL_MAXMIN4_EXACT)
            if (TALLY_K_KLL_HW_MAX) {
                TALLY_K_KLL_EACH(TALLY_K_KLL_A_HW)
            } else {
                TALLY_K_KLL_EACH(TALLY_K_KLL_A_EXACT)
            }
            va[lid] = mx;
            vb[lid] = my;
            if (TALLY_K_KLL_MERGED_TREES) {
                tally_k_tree_full3(va, TALLY_COMBINE_MAX, vb, TALLY_COMBINE_MAX, pending ? ve : 0, TALLY_COMBINE_SUM,
                                   lid, part);
                if (pending && lid == 0u) tally_k_store_tile(ve[0], finish, divisor, out + out_off + pending_tile);
                pending = 0;
            } else {
                tally_k_tree_full(va, vb, lid, TALLY_COMBINE_MAX, part);
            }
            mx = va[0];
            my = vb[0];
            /* A zero maximum may carry the other sign than the plan's
             * fold gives (TALLY_K_KLL_MAXMIN4), so such a row, rare
             * outside tests, is folded again exactly: then m is the
             * plan's bit for bit and nothing rests on where the sign of a
             * zero goes. Every work-item of the part read the same
             * maxima, so all of them take this branch and its barriers,
             * the first of which orders their reads of va[0] and vb[0]
             * before the arrays are written again. */
            if (TALLY_K_KLL_HW_MAX && ((xl && mx == 0.0f) || (yl && my == 0.0f))) {
                TALLY_K_KLL_EACH(TALLY_K_KLL_A_EXACT)
                TALLY_BARRIER_PART(part);
                va[lid] = mx;
                vb[lid] = my;
                tally_k_tree_full(va, vb, lid, TALLY_COMBINE_MAX, part);
                mx = va[0];
                my = vb[0];
            }
#undef TALLY_K_KLL_A_HW
#undef TALLY_K_KLL_A_EXACT
#undef TALLY_K_KLL_A
            /* z - m is monotonic in z, so the lane's smallest shifted logit
             * is its minimum's: when it is >= -87 every exponential of the
             * lane is the short form, as straight-line code whose elements
             * the compiler can interleave (a choice per element would put
             * each in a branch of its own). A NaN fails the test. */
            const int fast = (!xl || nx - mx >= TALLY_K_KLL_EXP_LOW) && (!yl || ny - my >= TALLY_K_KLL_EXP_LOW);
            /* Pass B: the shifted sums; a and the target quads become what
             * pass C reads. */
            float sx = 0.0f, sy = 0.0f;
#define TALLY_K_KLL_B(q, EXP, SHORT)                                                                \
    if ((q) >= lo && (q) < hi) {                                                                    \
        tally_f4 y4_ = TALLY_K_KLL_Y(q);                                                            \
        TALLY_K_KLL_B1(a[q].x, y4_.x, xl, yl, flags, mx, my, sx, sy, (q) == lo, EXP, SHORT);        \
        TALLY_K_KLL_B1(a[q].y, y4_.y, xl, yl, flags, mx, my, sx, sy, 0, EXP, SHORT);                \
        TALLY_K_KLL_B1(a[q].z, y4_.z, xl, yl, flags, mx, my, sx, sy, 0, EXP, SHORT);                \
        TALLY_K_KLL_B1(a[q].w, y4_.w, xl, yl, flags, mx, my, sx, sy, 0, EXP, SHORT);                \
        if (TALLY_K_KLL_Y_LOCAL)                                                                    \
            ys[(q) * L + lid] = y4_;                                                               \
        else                                                                                        \
            b[q] = y4_;                                                                             \
    }
#define TALLY_K_KLL_B_SHORT(q) TALLY_K_KLL_B(q, tally_pm_expf_normal, 1)
#define TALLY_K_KLL_B_GENERAL(q) TALLY_K_KLL_B(q, tally_expf, 0)
            if (fast) {
                TALLY_K_KLL_EACH(TALLY_K_KLL_B_SHORT)
            } else {
                TALLY_K_KLL_EACH(TALLY_K_KLL_B_GENERAL)
            }
#undef TALLY_K_KLL_B_SHORT
#undef TALLY_K_KLL_B_GENERAL
#undef TALLY_K_KLL_B
            vc[lid] = sx;
            vd[lid] = sy;
            if (TALLY_K_KLL_MERGED_TREES)
                tally_k_tree_full3(vc, TALLY_COMBINE_SUM, vd, TALLY_COMBINE_SUM, 0, TALLY_COMBINE_SUM, lid, part);
            else
                tally_k_tree_full(vc, vd, lid, TALLY_COMBINE_SUM, part);
            const float Lx = xl ? tally_softmax_log_norm(mx, vc[0]) : 0.0f;
            const float Ly = yl ? tally_softmax_log_norm(my, vd[0]) : 0.0f;
            const float ry = yl ? tally_softmax_recip_norm(my, vd[0]) : 0.0f;
            const float cxy = (xl ? Lx : 0.0f) - Ly;
            /* Pass C: the terms, continuing the lane's fold of the tile. */
#define TALLY_K_KLL_C(q, SHORT)                                                       \
    if ((q) >= lo && (q) < hi) {                                                      \
        const tally_f4 y4_ = TALLY_K_KLL_Y(q);                                        \
        TALLY_K_KLL_C1(acc, a[q].x, y4_.x, yl, flags, Lx, ry, cxy, (q) == 0, SHORT);  \
        TALLY_K_KLL_C1(acc, a[q].y, y4_.y, yl, flags, Lx, ry, cxy, 0, SHORT);         \
        TALLY_K_KLL_C1(acc, a[q].z, y4_.z, yl, flags, Lx, ry, cxy, 0, SHORT);         \
        TALLY_K_KLL_C1(acc, a[q].w, y4_.w, yl, flags, Lx, ry, cxy, 0, SHORT);         \
        if (prefetch) {                                                               \
            a[q] = tally_k_quad4(&xs, g_next + (q) * L);                              \
            if (!TALLY_K_KLL_Y_LOCAL) b[q] = tally_k_quad4(&ts, g_next + (q) * L);           \
        }                                                                             \
    }
#define TALLY_K_KLL_C_SHORT(q) TALLY_K_KLL_C(q, 1)
#define TALLY_K_KLL_C_GENERAL(q) TALLY_K_KLL_C(q, 0)
            if (fast) {
                TALLY_K_KLL_EACH(TALLY_K_KLL_C_SHORT)
            } else {
                TALLY_K_KLL_EACH(TALLY_K_KLL_C_GENERAL)
            }
#undef TALLY_K_KLL_C_SHORT
#undef TALLY_K_KLL_C_GENERAL
#undef TALLY_K_KLL_C
        }
        ve[lid] = acc;
        if (TALLY_K_KLL_MERGED_TREES) {
            /* The next tile's copies go out now: each work-item copies only
             * its own slots, which it has read above; the fence orders
             * those reads before the copies. The sum tree waits (ve is
             * next written after two more barriers). */
            pending = 1;
            pending_tile = tile;
            if (TALLY_K_KLL_Y_LOCAL && prefetch) {
                TALLY_BARRIER_EACH32();
                TALLY_K_KLL_EACH(TALLY_K_KLL_COPY_NEXT)
            }
        } else {
            tally_k_tree_full(ve, 0, lid, TALLY_COMBINE_SUM, part);
            if (lid == 0u) tally_k_store_tile(ve[0], finish, divisor, out + out_off + tile);
            /* Every target quad of the tile was read before the tree's barriers. */
            if (TALLY_K_KLL_Y_LOCAL && prefetch) {
                TALLY_K_KLL_EACH(TALLY_K_KLL_COPY_NEXT)
            }
        }
    }
    if (pending) {
        /* The part's last tile. */
        tally_k_tree_full3(ve, TALLY_COMBINE_SUM, 0, TALLY_COMBINE_SUM, 0, TALLY_COMBINE_SUM, lid, part);
        if (lid == 0u) tally_k_store_tile(ve[0], finish, divisor, out + out_off + pending_tile);
    }
#undef TALLY_K_KLL_COPY_NEXT
#undef TALLY_K_KLL_LOAD_FIRST
#undef TALLY_K_KLL_COPY_Y
}
#undef TALLY_K_KLL_Y

/* The common form (both sides logits, rows of 16384, fp32) runs a copy
 * with those arguments as constants. */
TALLY_FN void tally_k_kl_logits_rows_pick(TALLY_K_KLL_RUN_PARAMS)
{
    const tally_u32 both = TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS;
    const tally_u64 common_cols = 1024u * TALLY_TREE_QUADS_PER_LANE;
    if (flags == both && cols == common_cols && x_dtype == TALLY_F32 && t_dtype == TALLY_F32)
        tally_k_kl_logits_rows_run(va, vb, vc, vd, ve, TALLY_K_KLL_HOME_ARGS, x, x_off, t, t_off, common_cols, tiles,
                                   both, finish, divisor, out, out_off, TALLY_F32, TALLY_F32);
    else
        tally_k_kl_logits_rows_run(va, vb, vc, vd, ve, TALLY_K_KLL_HOME_ARGS, x, x_off, t, t_off, cols, tiles, flags,
                                   finish, divisor, out, out_off, x_dtype, t_dtype);
}

TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_KLL_GROUPS_PER_CU) void tally_k_kl_logits_rows(TALLY_K_PARAMS(kl_logits_rows))
{
#if TALLY_HAS_REGISTER_TILES
    /* Five arrays rather than one of five parts: PoCL 3.1's compiler
     * crashed on the constant offsets into one. */
    TALLY_LOCAL_ARRAY(float, va, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vb, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vc, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vd, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, ve, TALLY_K_GROUP_SIZE);
    tally_k_kl_logits_rows_pick(va, vb, vc, vd, ve, 0, 0, 0u, TALLY_GROUP_ID(), TALLY_GROUP_COUNT(), x, x_off, t, t_off, cols, tiles, flags, finish, divisor, out, out_off,
                                x_dtype, t_dtype);
#endif
}

/* (Where TALLY_HAS_REGISTER_TILES is 0, in OpenCL C, the kernel above
 * exists with an empty body, as the program must define every kernel of
 * the list, and is never launched.)
 *
 * The same for fp32 inputs with groups of two parts of 256 work-items
 * (TALLY_K_KLL_PAIR_GROUP_SIZE), each with its own tiles, barriers and
 * half of TALLY_K_KLL_STAGE_BYTES of dynamic local memory for its target
 * quads. Where TALLY_HAS_STAGE is 0 (OpenCL C: no dynamic local memory, no
 * barrier of part of a group) the kernel exists with an empty body, as the
 * program must define every kernel of the list, and is never launched. */
TALLY_KERNEL_GROUP_OF(TALLY_K_KLL_PAIR_GROUP_SIZE) void tally_k_kl_logits_rows_pair(TALLY_K_PARAMS(kl_logits_rows))
{
#if TALLY_HAS_STAGE
    TALLY_LOCAL_ARRAY(float, va, 2u * TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vb, 2u * TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vc, 2u * TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vd, 2u * TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, ve, 2u * TALLY_K_GROUP_SIZE);
    TALLY_STAGE(stage);
    const tally_u32 part = TALLY_LID() / TALLY_K_GROUP_SIZE;
    const tally_u32 o = part * TALLY_K_GROUP_SIZE;
    (void)x_dtype;
    (void)t_dtype;
    tally_k_kl_logits_rows_pick(va + o, vb + o, vc + o, vd + o, ve + o,
                                stage + (tally_u64)part * TALLY_TREE_QUADS_PER_LANE * TALLY_K_GROUP_SIZE, 1, part,
                                TALLY_GROUP_ID() * 2u + part, TALLY_GROUP_COUNT() * 2u, x, x_off, t, t_off,
                                cols, tiles, flags, finish, divisor, out, out_off, TALLY_F32, TALLY_F32);
#endif
}

#endif /* TALLY_KERNELS_KL_LOGITS_H */
