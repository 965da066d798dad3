/*
 * kernels/dm.h - Dirichlet-multinomial log-likelihood per row.
 *
 * Per row the host computes three trees over V with one plan: A = sum of
 * exp(log_alpha), N = sum of counts and S = sum of tally_dm_term. Here one
 * segment of work-items folds all three in a single pass over the row and
 * tree3 combines them side by side.
 */
#ifndef TALLY_KERNELS_DM_H
#define TALLY_KERNELS_DM_H

#include "tree.h"
#include "dm_terms.h"

/* A lane's running sums of a and n and of the terms, in element order: the
 * lane's first element (first) starts them. */
TALLY_FN void tally_k_dm_add(float *A, float *N, float *S, int first, float a, float n, float term)
{
    if (first) {
        *A = a;
        *N = n;
        *S = term;
    } else {
        *A = *A + a;
        *N = *N + n;
        *S = *S + term;
    }
}

/*
 * For a shared alpha: pre[ea_off + v] = a = exp(log_alpha[v]) and
 * pre[lga_off + k * V + v] for k < rows: row 0 lgamma(a), row k > 0
 * lgamma((float)k + a). rows is 1 (PREPARED) or TALLY_K_DM_TABLE_N (TABLE).
 * (float)k is exact, so (float)k + a is the very float argument n + a that
 * tally_dm_term passes to lgamma for a count n == k, and the table entry is
 * its lgamma bit for bit. Row index [k][v] lets consecutive work-items of
 * tally_k_dm_rows, which read consecutive columns, read nearby entries.
 */
TALLY_KERNEL void tally_k_dm_prep(TALLY_K_PARAMS(dm_prep))
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    const tally_u64 total = V * rows;
    for (tally_u64 i = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); i < total; i += step) {
        const tally_u64 k = i / V;
        const tally_u64 v = i - k * V;
        const float a = tally_expf(tally_k_ld_at(la, la_dtype, la_off + v));
        if (k == 0u) {
            pre[ea_off + v] = a;
            pre[lga_off + v] = tally_lgammaf(a);
        } else {
            pre[lga_off + i] = tally_lgammaf((float)(tally_u32)k + a);
        }
    }
}

/*
 * Rows of counts [B, V] (row b at counts[c_off + b * c_stride]) under the
 * row plan (lanes, qpl, tiles over V; V == 0 is passed as lanes = qpl =
 * tiles = 1 and gives A = N = S = 0 as on the host).
 *
 * tiles == 1: out[out_off + b * out_stride] = tally_dm_row(A, N, S).
 * tiles > 1: unit u = b * tiles + t writes its three partials to
 * out[out_off + u], out[out_off + U + u] and out[out_off + 2U + u] with
 * U = B * tiles, i.e. 3B vectors of `tiles` partials for the upper levels.
 *
 * alpha_mode: PER_ROW reads log_alpha row b (la_off + b * la_stride) and
 * computes exp and lgamma per element; LOCAL tabulates a shared alpha in
 * local memory once per group; PREPARED reads the table tally_k_dm_prep
 * wrote to pre (TABLE is tally_k_dm_rows_table's). A zero count skips its
 * lgamma calls (tally_dm_term returns 0 for it), which is most of the work
 * on sparse counts.
 */
TALLY_FN void tally_k_dm_rows_run(TALLY_LOCAL float *va, TALLY_LOCAL float *vn, TALLY_LOCAL float *vs,
                                  TALLY_LOCAL float *tab_a, TALLY_LOCAL float *tab_lga, TALLY_LOCAL float *fact,
                                  TALLY_GLOBAL const float *counts, tally_u64 c_off, tally_u64 c_stride,
                                  TALLY_GLOBAL const float *la, tally_u64 la_off, tally_u64 la_stride,
                                  TALLY_GLOBAL const float *pre, tally_u64 ea_off, tally_u64 lga_off,
                                  tally_u32 alpha_mode, tally_u64 B, tally_u64 V, tally_u32 lanes, tally_u32 qpl,
                                  tally_u64 tiles, tally_u32 flags, TALLY_GLOBAL float *out, tally_u64 out_off,
                                  tally_u64 out_stride, tally_u32 c_dtype, tally_u32 la_dtype, int quad_ilp)
{
    const tally_u32 lid = TALLY_LID();
    if (alpha_mode == TALLY_K_DM_ALPHA_LOCAL) {
        for (tally_u64 v = lid; v < V; v += TALLY_K_GROUP_SIZE) {
            const float a = tally_expf(tally_k_ld_at(la, la_dtype, la_off + v));
            tab_a[v] = a;
            tab_lga[v] = tally_lgammaf(a);
        }
    }
    /* fact[k] = lgamma(k + 1): the same value tally_lgammaf(n + 1.0f) gives
     * for a count n == k, since k + 1 is exact. */
    if ((flags & TALLY_DM_WITH_COEFFICIENT) && lid < TALLY_K_DM_FACT_TABLE)
        fact[lid] = tally_lgammaf((float)lid + 1.0f);
    /* Unconditional: see tally_k_local_uniforms on barriers under branches. */
    TALLY_BARRIER();
    const tally_k_segs lay = tally_k_segs_of(lid, lanes, qpl, B, tiles, V);
    const tally_u32 j = lay.j;
    const tally_u64 units = lay.units, quads = lay.quads;
    for (tally_u64 first = TALLY_GROUP_ID() * lay.segments; first < units;
         first += TALLY_GROUP_COUNT() * lay.segments) {
        const tally_u64 unit = first + lay.seg;
        const tally_k_unit at = tally_k_unit_at(&lay, unit);
        const tally_u64 active = at.active, b = at.vec;
        /* Past the last unit, active is 0. */
        if ((tally_u64)j < active) {
            const tally_u64 base = at.base;
            const tally_u64 crow = c_off + b * c_stride, larow = la_off + b * la_stride;
            float A = 0.0f, N = 0.0f, S = 0.0f;
            int first_term = 1;
            for (tally_u32 q = 0; q < qpl; q++) {
                const tally_u64 g = base + (tally_u64)q * lanes + j;
                if (g >= quads) break;
                const tally_u64 e0 = g << 2;
                const tally_u32 count = (V - e0 >= 4u) ? 4u : (tally_u32)(V - e0);
                if (quad_ilp && count == 4u) {
                    /* A whole quad's four lgamma(n + a) side by side, a
                     * zero count's too (its term is still 0): small shapes
                     * are bound by one lane's chain of lgamma calls, not by
                     * issue. The terms are tally_k_dm_term's with that
                     * lgamma given, added in the quad's order. */
                    float nq[4], lgn[4];
#pragma unroll
                    for (tally_u32 c = 0; c < 4u; c++) {
                        nq[c] = tally_k_ld_at(counts, c_dtype, crow + e0 + c);
                        lgn[c] = tally_lgammaf(nq[c] + tab_a[e0 + c]);
                    }
#pragma unroll
                    for (tally_u32 c = 0; c < 4u; c++) {
                        const float a = tab_a[e0 + c];
                        const float term = tally_k_dm_term(nq[c], a, tab_lga[e0 + c], lgn[c], 1, fact, flags);
                        tally_k_dm_add(&A, &N, &S, first_term, a, nq[c], term);
                        first_term = 0;
                    }
                    continue;
                }
                for (tally_u32 c = 0; c < count; c++) {
                    const tally_u64 e = e0 + c;
                    const float n = tally_k_ld_at(counts, c_dtype, crow + e);
                    float a, lga;
                    if (alpha_mode == TALLY_K_DM_ALPHA_PER_ROW) {
                        a = tally_expf(tally_k_ld_at(la, la_dtype, larow + e));
                        /* Only a nonzero count needs it. */
                        lga = 0.0f;
                        if (n != 0.0f) lga = tally_lgammaf(a);
                    } else if (alpha_mode == TALLY_K_DM_ALPHA_LOCAL) {
                        a = tab_a[e];
                        lga = tab_lga[e];
                    } else {
                        a = pre[ea_off + e];
                        lga = pre[lga_off + e];
                    }
                    const float term = tally_k_dm_term(n, a, lga, 0.0f, 0, fact, flags);
                    tally_k_dm_add(&A, &N, &S, first_term, a, n, term);
                    first_term = 0;
                }
            }
            va[lid] = A;
            vn[lid] = N;
            vs[lid] = S;
        }
        /* With shuffles the tree leaves the sums in lane 0's registers,
         * else in its slots. */
        const int shuffled = TALLY_HAS_WARP_SHUFFLE && TALLY_K_DM_TREE_SHUFFLE;
        float tA = 0.0f, tN = 0.0f, tS = 0.0f;
#if TALLY_HAS_WARP_SHUFFLE
        if (shuffled) tally_k_tree3_shuffle(va, vn, vs, lid, lanes, active, &tA, &tN, &tS);
#endif
        if (!shuffled) tally_k_tree3(va, vn, vs, lid, lanes, active);
        if (unit < units && j == 0u) {
            /* An empty row (V == 0) sums to +0 as on the host. */
            const float A = active > 0u ? (shuffled ? tA : va[lid]) : 0.0f;
            const float N = active > 0u ? (shuffled ? tN : vn[lid]) : 0.0f;
            const float S = active > 0u ? (shuffled ? tS : vs[lid]) : 0.0f;
            if (tiles == 1u) {
                out[out_off + b * out_stride] = tally_canonical(tally_dm_row(A, N, S, flags));
            } else {
                out[out_off + unit] = A;
                out[out_off + units + unit] = N;
                out[out_off + 2u * units + unit] = S;
            }
        }
    }
}

/* A kernel of tally_k_dm_rows_run: its local arrays, then the run in
 * alpha mode `mode` with quad_ilp `ilp`. */
#define TALLY_K_DM_ROWS_KERNEL(name, mode, ilp)                                                                  \
    TALLY_KERNEL void name(TALLY_K_PARAMS(dm_rows))                                                              \
    {                                                                                                            \
        TALLY_LOCAL_ARRAY(float, va, TALLY_K_GROUP_SIZE);                                                        \
        TALLY_LOCAL_ARRAY(float, vn, TALLY_K_GROUP_SIZE);                                                        \
        TALLY_LOCAL_ARRAY(float, vs, TALLY_K_GROUP_SIZE);                                                        \
        TALLY_LOCAL_ARRAY(float, tab_a, TALLY_K_DM_LOCAL_COLS);                                                  \
        TALLY_LOCAL_ARRAY(float, tab_lga, TALLY_K_DM_LOCAL_COLS);                                                \
        TALLY_LOCAL_ARRAY(float, fact, TALLY_K_DM_FACT_TABLE);                                                   \
        tally_k_dm_rows_run(va, vn, vs, tab_a, tab_lga, fact, counts, c_off, c_stride, la, la_off, la_stride, pre, \
                            ea_off, lga_off, mode, B, V, lanes, qpl, tiles, flags, out, out_off, out_stride, c_dtype, \
                            la_dtype, ilp);                                                                      \
    }

TALLY_K_DM_ROWS_KERNEL(tally_k_dm_rows, alpha_mode, 0)

/* tally_k_dm_rows for the LOCAL mode with whole quads' lgamma calls side by
 * side (TALLY_K_DM_LOCAL_QUAD_ILP): a kernel of its own, so that the
 * registers this takes do not lower the other modes' occupancy. */
TALLY_K_DM_ROWS_KERNEL(tally_k_dm_rows_local, TALLY_K_DM_ALPHA_LOCAL, 1)

/*
 * The term of count n in column 4g + c from the global table (eq, tq: the
 * quad g of exp(alpha) and of the table, row 0 lgamma(a)) or, for a count
 * the table lacks, tally_k_dm_term: the same operations as tally_dm_term
 * (dm_terms.h).
 */
TALLY_FN_COLD float tally_k_dm_global_term(float n, TALLY_GLOBAL const float *eq, TALLY_GLOBAL const float *tq,
                                           tally_u32 c, tally_u32 V32, TALLY_LOCAL const float *fact,
                                           tally_u32 flags)
{
    const int has_lgn = n > 0.0f && n < (float)TALLY_K_DM_TABLE_N && n == tally_floor(n);
    const float lga = tq[c];
    const float lgn = tq[(has_lgn ? (tally_u32)n : 0u) * V32 + c];
    /* tally_dm_term of a zero count is 0, and of a tabulated one without
     * the coefficient lgamma(n + a) - lgamma(a). */
    if (n == 0.0f) return 0.0f;
    if (has_lgn && !(flags & TALLY_DM_WITH_COEFFICIENT)) return lgn - lga;
    return tally_k_dm_term(n, eq[c], lga, lgn, has_lgn, fact, flags);
}

/* Where tally_k_dm_rows_table finds its terms. terms[row * rs + c * VQ + g]
 * is tally_dm_term(row, a) of column 4g + c for row < R (the local table);
 * ea and tab are the global exp(alpha) and lgamma table for the rest. */
typedef struct tally_k_dm_terms {
    TALLY_LOCAL const float *terms;
    tally_u32 R, rs, VQ, V32;
    TALLY_GLOBAL const float *ea;
    TALLY_GLOBAL const float *tab;
    TALLY_LOCAL const float *fact;
    tally_u32 flags;
} tally_k_dm_terms;

/*
 * Folds the counts e[0 .. count - 1] of quad g into a lane's running sums
 * of n and of the terms. The sums start at -0 rather than at the lane's
 * first element: -0 + x is x for every x, so the bits are those of the
 * plan's fold, without a select an element.
 *
 * A count is one of the local table's rows when it is a whole number
 * 0 <= n < R: then n + 2^23 is exact and its low bits are n. Any other n
 * either rounds (w - 2^23 != n) or puts w's bits outside the R rows, and
 * -0 is row 0, a zero count's term, as in tally_dm_term. The four local
 * reads do not wait for the test, and the counts the table lacks (rare in
 * count data) go to tally_k_dm_global_term afterwards.
 */
TALLY_FN void tally_k_dm_fold_quad(const tally_k_dm_terms *d, const float *e, tally_u32 count, tally_u32 g, float *sn,
                                   float *ss)
{
    float tm[4];
    tally_u32 slow = 0u;
    for (tally_u32 c = 0; c < 4u; c++) {
        const float w = e[c] + 8388608.0f;
        const tally_u32 row = tally_as_u32(w) - 0x4b000000u;
        const int in_table = row < d->R && w - 8388608.0f == e[c];
        tm[c] = d->terms[in_table ? row * d->rs + c * d->VQ + g : 0u];
        if (c < count && !in_table) slow |= 1u << c;
    }
    if (slow != 0u) {
        for (tally_u32 c = 0; c < 4u; c++)
            if (slow & (1u << c))
                tm[c] = tally_k_dm_global_term(e[c], d->ea + (g << 2), d->tab + (g << 2), c, d->V32, d->fact, d->flags);
    }
    for (tally_u32 c = 0; c < 4u; c++) {
        if (c < count) {
            *sn = *sn + e[c];
            *ss = *ss + tm[c];
        }
    }
}

/*
 * The words of quad g of a row whose quads are whole and 16-byte aligned: a
 * float4 of fp32 counts, or the two 32-bit words of four halves in .x and
 * .y (widened by tally_k_dm_quad_widen once the loads are on their way).
 */
TALLY_FN tally_f4 tally_k_dm_quad_word(const tally_k_src *src, int halves, tally_u32 g)
{
    tally_f4 x;
    if (halves) {
        const uint2 u = ((TALLY_GLOBAL const uint2 *)src->h)[g];
        x.x = tally_as_f32(u.x);
        x.y = tally_as_f32(u.y);
        x.z = x.w = 0.0f;
    } else {
        x = TALLY_LOAD_F4(src->p, g);
    }
    return x;
}

/* The four counts of tally_k_dm_quad_word's words, as floats. */
TALLY_FN void tally_k_dm_quad_widen(tally_f4 x, tally_u32 c_dtype, int halves, float *e)
{
    if (halves) {
        e[0] = tally_k_lo(c_dtype, tally_as_u32(x.x));
        e[1] = tally_k_hi(c_dtype, tally_as_u32(x.x));
        e[2] = tally_k_lo(c_dtype, tally_as_u32(x.y));
        e[3] = tally_k_hi(c_dtype, tally_as_u32(x.y));
    } else {
        e[0] = x.x;
        e[1] = x.y;
        e[2] = x.z;
        e[3] = x.w;
    }
}

#if TALLY_HAS_WARP_SHUFFLE
/*
 * The words of lane w's eight quads g = w + 32k of a row whose quads are
 * whole and 16-byte aligned (tally_k_dm_rows_table's warp rows with one quad
 * a lane): a float4 of fp32 counts, or the two 32-bit words of four halves
 * in .x and .y. Quads g >= quads read nothing.
 */
TALLY_FN void tally_k_dm_warp_words(TALLY_GLOBAL const float *counts, tally_u32 c_dtype, tally_u64 row, int halves,
                                    tally_u32 w, tally_u32 quads, tally_f4 *words)
{
    const tally_k_src src = tally_k_src_at(counts, c_dtype, row, 4u * quads, 4u * quads, TALLY_K_LOAD_VEC4);
#pragma unroll
    for (tally_u32 k = 0; k < 8u; k++) {
        const tally_u32 g = w + 32u * k;
        words[k].x = words[k].y = words[k].z = words[k].w = 0.0f;
        if (g < quads) {
            if (halves) {
                const uint2 u = ((TALLY_GLOBAL const uint2 *)src.h)[g];
                words[k].x = tally_as_f32(u.x);
                words[k].y = tally_as_f32(u.y);
            } else {
                words[k] = TALLY_LOAD_F4(src.p, g);
            }
        }
    }
}

/* The counts of tally_k_dm_warp_words' words, as floats. */
TALLY_FN void tally_k_dm_warp_widen(const tally_f4 *words, tally_u32 c_dtype, int halves, float e[8][4])
{
#pragma unroll
    for (tally_u32 k = 0; k < 8u; k++) {
        if (halves) {
            e[k][0] = tally_k_lo(c_dtype, tally_as_u32(words[k].x));
            e[k][1] = tally_k_hi(c_dtype, tally_as_u32(words[k].x));
            e[k][2] = tally_k_lo(c_dtype, tally_as_u32(words[k].y));
            e[k][3] = tally_k_hi(c_dtype, tally_as_u32(words[k].y));
        } else {
            e[k][0] = words[k].x;
            e[k][1] = words[k].y;
            e[k][2] = words[k].z;
            e[k][3] = words[k].w;
        }
    }
}

/*
 * The end of a warp row: the tree's steps 128, 64 and 32 pair a work-item's
 * own lanes (its sums sn[k], ss[k] of lane w + 32k), then lane w takes lane
 * w + s of the warp for s = 16 .. 1 (the lanes w >= s compute values no
 * step reads), and lane 0 stores the row's value to *dst.
 */
TALLY_FN void tally_k_dm_warp_row_end(float *sn, float *ss, tally_u32 w, float A_row, tally_u32 flags,
                                      TALLY_GLOBAL float *dst)
{
#pragma unroll
    for (tally_u32 k = 0; k < 4u; k++) {
        sn[k] = sn[k] + sn[k + 4u];
        ss[k] = ss[k] + ss[k + 4u];
    }
    sn[0] = sn[0] + sn[2];
    ss[0] = ss[0] + ss[2];
    sn[1] = sn[1] + sn[3];
    ss[1] = ss[1] + ss[3];
    float N = sn[0] + sn[1], S = ss[0] + ss[1];
    for (tally_u32 s = 16u; s > 0u; s >>= 1) {
        const float n_up = TALLY_WARP_SHUFFLE(N, (w + s) & 31u);
        const float s_up = TALLY_WARP_SHUFFLE(S, (w + s) & 31u);
        N = N + n_up;
        S = S + s_up;
    }
    if (w == 0u) *dst = tally_canonical(tally_dm_row(A_row, N, S, flags));
}
#endif

/*
 * tally_k_dm_rows for a shared alpha with the TALLY_K_DM_ALPHA_TABLE table
 * (pre[ea_off + v] = a, pre[lga_off + k * V + v] = lgamma(k + a), row 0
 * lgamma(a)) and rows of one tile (1 <= V <= 16384): row b's value to
 * out[out_off + b * out_stride].
 *
 * Once lgamma(n + a) is a table read, the in-group tree and the per-row
 * bookkeeping cost as much as the elements, so here each work-item plays
 * P = min(TALLY_K_DM_LANES_PER_ITEM, lanes) lanes of the row's plan: lanes
 * t, t + T, ..., t + (P - 1) T with T = lanes / P. Each lane folds its own
 * quads exactly as in tally_k_dm_rows, the tree's steps with strides
 * s >= T pair lanes of the same work-item (lane t + kT with lane
 * t + kT + s = t + (k + s/T) T) and run in registers, and the steps below T
 * run in local memory over the first T lanes: the plan's combines in the
 * plan's order, with a quarter of the work-items per row (so P times the
 * rows per group and per barrier) and log2(P) fewer shared-memory steps.
 * With warp shuffles and a full tile (TALLY_K_DM_ROWS_WARP) a warp takes a
 * row instead: P = 8, T = 32, and the steps below 32 are shuffles.
 * vec4: every row starts 16-byte aligned, so whole quads load as float4.
 *
 * Two things do not depend on the row, so each group computes them once.
 * A, the sum of a over the row in the plan's order, is the same for every
 * row of a shared alpha: each work-item folds its lanes' a and one tree
 * gives every segment the row's A, bit for bit what the row's own fold and
 * tree gave. And the term of a small whole count k in column v is a
 * function of (k, v): the group copies tally_dm_term(k, a_v) for the first
 * R values of k into local memory (TALLY_K_DM_TERMS floats), so that such a
 * count, nearly every one in count data, costs one local read. Before, it
 * cost two gathers from the global table, whose entries for a warp's
 * columns fall in as many cache lines as the warp has distinct counts.
 */
TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_DM_GROUPS_PER_CU) void tally_k_dm_rows_table(TALLY_K_PARAMS(dm_rows_table))
{
    TALLY_LOCAL_ARRAY(float, va, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vn, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vs, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, fact, TALLY_K_DM_FACT_TABLE);
    TALLY_LOCAL_ARRAY(float, terms, TALLY_K_DM_TERMS);
    const tally_u32 lid = TALLY_LID();
    if ((flags & TALLY_DM_WITH_COEFFICIENT) && lid < TALLY_K_DM_FACT_TABLE)
        fact[lid] = tally_lgammaf((float)lid + 1.0f);
    /* Unconditional: see tally_k_local_uniforms on barriers under branches. */
    TALLY_BARRIER();
    const tally_u32 P = lanes < TALLY_K_DM_LANES_PER_ITEM ? lanes : TALLY_K_DM_LANES_PER_ITEM;
    const tally_u32 T = lanes / P;
    const tally_u32 segments = TALLY_K_GROUP_SIZE / T;
    const tally_u32 seg = lid / T;
    const tally_u32 t = lid - seg * T;
    /* V <= 16384 and the table holds V * TALLY_K_DM_TABLE_N floats: 32-bit
     * indices within a row and the table. */
    const tally_u32 V32 = (tally_u32)V;
    const tally_u32 quads = (tally_u32)tally_k_quads(V);
    const tally_u32 active = quads < lanes ? quads : lanes;
    tally_k_dm_terms d;
    d.terms = terms;
    d.ea = pre + ea_off;
    d.tab = pre + lga_off;
    d.fact = fact;
    d.flags = flags;
    d.V32 = V32;
    /* The local terms: count k of column 4g + c at terms[k * rs + c * VQ + g]
     * with VQ the quads rounded up to 32, so that work-items reading
     * consecutive quads of a row read consecutive words (one bank each)
     * whatever their counts. Row 0 is a zero count's term, 0. */
    d.VQ = ((quads > 0u ? quads : 1u) + 31u) & ~31u;
    d.rs = 4u * d.VQ;
    d.R = TALLY_K_DM_LOCAL_TERMS ? TALLY_K_DM_TERMS / d.rs : 0u;
    if (d.R > TALLY_K_DM_TABLE_N) d.R = TALLY_K_DM_TABLE_N;
    /* Four entries a pass, so that their eight global reads are in flight
     * together: the copy runs before any row, so its latency is not hidden. */
    const tally_u32 entries = d.R * d.rs;
    for (tally_u32 i0 = lid; i0 < entries; i0 += 4u * TALLY_K_GROUP_SIZE) {
#pragma unroll
        for (tally_u32 u = 0; u < 4u; u++) {
            const tally_u32 i = i0 + u * TALLY_K_GROUP_SIZE;
            if (i < entries) {
                const tally_u32 k = i / d.rs;
                const tally_u32 c = (i - k * d.rs) / d.VQ;
                const tally_u32 g = i - k * d.rs - c * d.VQ;
                const tally_u32 col = (g << 2) + c;
                float v = 0.0f;
                /* tally_k_dm_term's operations for a tabulated count k > 0. */
                if (k > 0u && g < quads && col < V32) {
                    v = d.tab[k * V32 + col] - d.tab[col];
                    if (flags & TALLY_DM_WITH_COEFFICIENT) v = v - fact[k];
                }
                terms[i] = v;
            }
        }
    }

    /* The row's A: lane t + kT's fold in A<k>, the register steps, then the
     * tree, which leaves it in va[seg * T] for every segment. */
    float A0 = 0.0f, A1 = 0.0f, A2 = 0.0f, A3 = 0.0f;
    for (tally_u32 k = 0; k < P; k++) {
        const tally_u32 j = t + k * T;
        if (j >= active) break;
        float sa = 0.0f;
        for (tally_u32 q = 0; q < qpl; q++) {
            const tally_u32 g = q * lanes + j;
            if (g >= quads) break;
            const tally_u32 count = V32 - (g << 2) >= 4u ? 4u : V32 - (g << 2);
            /* A constant trip count: the quad's reads go out together. */
            for (tally_u32 c = 0; c < 4u; c++) {
                if (c < count) {
                    const float a = d.ea[(g << 2) + c];
                    sa = q == 0u && c == 0u ? a : sa + a;
                }
            }
        }
        if (k == 0u) A0 = sa;
        else if (k == 1u) A1 = sa;
        else if (k == 2u) A2 = sa;
        else A3 = sa;
    }
    if (P == 4u) {
        if (t + 2u * T < active) A0 = A0 + A2;
        if (t + 3u * T < active) A1 = A1 + A3;
    }
    if (P >= 2u && t + T < active) A0 = A0 + A1;
    va[lid] = A0;
    tally_k_tree(va, lid, T, active, TALLY_COMBINE_SUM);
    const float A_row = va[seg * T];

#if TALLY_HAS_WARP_SHUFFLE
    if (TALLY_K_DM_ROWS_WARP && lanes == TALLY_K_GROUP_SIZE && quads >= lanes) {
        /* A warp a row: work-item w plays lanes w + 32k, k < 8, every one
         * active. The loop is the same for the 32 work-items of a warp, so
         * each shuffle has its whole warp; no barrier follows. */
        const tally_u32 w = lid & 31u;
        const tally_u32 warps = TALLY_K_GROUP_SIZE / 32u;
        const int whole_f32 = vec4 && c_dtype == TALLY_F32 && (V32 & 3u) == 0u;
        const int whole_half = vec4 && c_dtype != TALLY_F32 && (V32 & 3u) == 0u;
        tally_f4 zero4;
        zero4.x = zero4.y = zero4.z = zero4.w = 0.0f;
        uint2 zero2;
        zero2.x = zero2.y = 0u;
        const tally_u64 step = TALLY_GROUP_COUNT() * warps;
        tally_u64 b0 = TALLY_GROUP_ID() * warps + lid / 32u;
        if (TALLY_K_DM_ROWS_AHEAD && qpl == 1u && (whole_f32 || whole_half)) {
            /* One quad a lane (V == 1024 here): the next row's words are
             * loaded before this row's fold, into the registers this row's
             * words were widened from. */
            tally_f4 words[8];
            if (b0 < B) tally_k_dm_warp_words(counts, c_dtype, c_off + b0 * c_stride, whole_half, w, quads, words);
            for (tally_u64 b = b0; b < B; b += step) {
                float e[8][4];
                tally_k_dm_warp_widen(words, c_dtype, whole_half, e);
                if (b + step < B)
                    tally_k_dm_warp_words(counts, c_dtype, c_off + (b + step) * c_stride, whole_half, w, quads, words);
                float sn[8], ss[8];
#pragma unroll
                for (tally_u32 k = 0; k < 8u; k++) {
                    sn[k] = -0.0f;
                    ss[k] = -0.0f;
                    tally_k_dm_fold_quad(&d, e[k], w + 32u * k < quads ? 4u : 0u, w + 32u * k, &sn[k], &ss[k]);
                }
                tally_k_dm_warp_row_end(sn, ss, w, A_row, flags, out + out_off + b * out_stride);
            }
            return;
        }
        for (tally_u64 b = b0; b < B; b += step) {
            const tally_k_src src = tally_k_src_at(counts, c_dtype, c_off + b * c_stride, V, V,
                                                   vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS);
            float sn[8], ss[8];
#pragma unroll
            for (tally_u32 k = 0; k < 8u; k++) {
                sn[k] = -0.0f;
                ss[k] = -0.0f;
            }
            for (tally_u32 q = 0; q < qpl; q++) {
                /* The eight quads' loads go out together; rows of whole
                 * aligned quads load them as float4 (fp32) or as two
                 * words (halves) without the general loader's tests. */
                float e[8][4];
                tally_u32 count[8];
                if (whole_f32) {
#pragma unroll
                    for (tally_u32 k = 0; k < 8u; k++) {
                        const tally_u32 g = q * lanes + w + 32u * k;
                        const tally_f4 x = g < quads ? TALLY_LOAD_F4(src.p, g) : zero4;
                        e[k][0] = x.x;
                        e[k][1] = x.y;
                        e[k][2] = x.z;
                        e[k][3] = x.w;
                        count[k] = g < quads ? 4u : 0u;
                    }
                } else if (whole_half) {
                    /* The words first, widened once all eight are on
                     * their way (a widening inside each load's branch
                     * waited for that load before the next one left). */
                    uint2 raw[8];
#pragma unroll
                    for (tally_u32 k = 0; k < 8u; k++) {
                        const tally_u32 g = q * lanes + w + 32u * k;
                        raw[k] = g < quads ? ((TALLY_GLOBAL const uint2 *)src.h)[g] : zero2;
                    }
#pragma unroll
                    for (tally_u32 k = 0; k < 8u; k++) {
                        e[k][0] = tally_k_lo(c_dtype, raw[k].x);
                        e[k][1] = tally_k_hi(c_dtype, raw[k].x);
                        e[k][2] = tally_k_lo(c_dtype, raw[k].y);
                        e[k][3] = tally_k_hi(c_dtype, raw[k].y);
                        count[k] = q * lanes + w + 32u * k < quads ? 4u : 0u;
                    }
                } else {
#pragma unroll
                    for (tally_u32 k = 0; k < 8u; k++) {
                        const tally_u32 g = q * lanes + w + 32u * k;
                        e[k][0] = e[k][1] = e[k][2] = e[k][3] = 0.0f;
                        count[k] = g < quads ? tally_k_load_quad(&src, V, g, e[k]) : 0u;
                    }
                }
#pragma unroll
                for (tally_u32 k = 0; k < 8u; k++)
                    tally_k_dm_fold_quad(&d, e[k], count[k], q * lanes + w + 32u * k, &sn[k], &ss[k]);
            }
            tally_k_dm_warp_row_end(sn, ss, w, A_row, flags, out + out_off + b * out_stride);
        }
        return;
    }
#endif

    for (tally_u64 first = TALLY_GROUP_ID() * segments; first < B; first += TALLY_GROUP_COUNT() * segments) {
        const tally_u64 b = first + seg;
        if (b < B) {
            const tally_k_src src = tally_k_src_at(counts, c_dtype, c_off + b * c_stride, V, V,
                                                   vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS);
            /* Lane t + kT's sums in N<k>, S<k> (lanes past the active
             * prefix keep values that no step reads). */
            float N0 = -0.0f, S0 = -0.0f, N1 = -0.0f, S1 = -0.0f, N2 = -0.0f, S2 = -0.0f, N3 = -0.0f, S3 = -0.0f;
#if !TALLY_HAS_WARP_SHUFFLE
            /* Four whole aligned quads, one a lane, every lane active (rows
             * of 1024 on OpenCL): the four loads go out together, then the
             * folds (TALLY_K_DM_ROWS_LOADS_FIRST). Not on CUDA, whose rows
             * of 1024 are warp rows: this form was measured on OpenCL only. */
            if (TALLY_K_DM_ROWS_LOADS_FIRST && P == 4u && qpl == 1u && vec4 && (V32 & 3u) == 0u &&
                t + 3u * T < active) {
                const int halves = c_dtype != TALLY_F32;
                const tally_f4 x0 = tally_k_dm_quad_word(&src, halves, t);
                const tally_f4 x1 = tally_k_dm_quad_word(&src, halves, t + T);
                const tally_f4 x2 = tally_k_dm_quad_word(&src, halves, t + 2u * T);
                const tally_f4 x3 = tally_k_dm_quad_word(&src, halves, t + 3u * T);
                float e4[4];
                tally_k_dm_quad_widen(x0, c_dtype, halves, e4);
                tally_k_dm_fold_quad(&d, e4, 4u, t, &N0, &S0);
                tally_k_dm_quad_widen(x1, c_dtype, halves, e4);
                tally_k_dm_fold_quad(&d, e4, 4u, t + T, &N1, &S1);
                tally_k_dm_quad_widen(x2, c_dtype, halves, e4);
                tally_k_dm_fold_quad(&d, e4, 4u, t + 2u * T, &N2, &S2);
                tally_k_dm_quad_widen(x3, c_dtype, halves, e4);
                tally_k_dm_fold_quad(&d, e4, 4u, t + 3u * T, &N3, &S3);
            } else
#endif
            for (tally_u32 k = 0; k < P; k++) {
                const tally_u32 j = t + k * T;
                if (j >= active) break;
                float sn = -0.0f, ss = -0.0f;
                for (tally_u32 q = 0; q < qpl; q++) {
                    const tally_u32 g = q * lanes + j;
                    if (g >= quads) break;
                    float e4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    const tally_u32 count = tally_k_load_quad(&src, V, g, e4);
                    tally_k_dm_fold_quad(&d, e4, count, g, &sn, &ss);
                }
                if (k == 0u) {
                    N0 = sn;
                    S0 = ss;
                } else if (k == 1u) {
                    N1 = sn;
                    S1 = ss;
                } else if (k == 2u) {
                    N2 = sn;
                    S2 = ss;
                } else {
                    N3 = sn;
                    S3 = ss;
                }
            }
            /* The tree's steps with stride s >= T (s = 2T, then T): lane
             * t + kT takes lane t + kT + s when that lane is active. */
            if (P == 4u) {
                if (t + 2u * T < active) {
                    N0 = N0 + N2;
                    S0 = S0 + S2;
                }
                if (t + 3u * T < active) {
                    N1 = N1 + N3;
                    S1 = S1 + S3;
                }
            }
            if (P >= 2u && t + T < active) {
                N0 = N0 + N1;
                S0 = S0 + S1;
            }
            vn[lid] = N0;
            vs[lid] = S0;
        }
        tally_k_tree2(vn, vs, lid, T, b < B ? active : 0u);
        if (b < B && t == 0u)
            out[out_off + b * out_stride] = tally_canonical(tally_dm_row(A_row, vn[lid], vs[lid], flags));
    }
}

/* Row values from the reduced sums of a multi-level row plan: A of row b at
 * sums[off + b], N at sums[off + B + b], S at sums[off + 2B + b]. */
TALLY_KERNEL void tally_k_dm_finish(TALLY_K_PARAMS(dm_finish))
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 b = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); b < B; b += step)
        out[out_off + b * out_stride] = tally_canonical(
            tally_dm_row(sums[sums_off + b], sums[sums_off + B + b], sums[sums_off + 2u * B + b], flags));
}

#endif /* TALLY_KERNELS_DM_H */
