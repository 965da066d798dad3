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
TALLY_KERNEL void tally_k_dm_rows(TALLY_K_PARAMS(dm_rows))
{
    TALLY_LOCAL_ARRAY(float, va, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vn, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vs, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, tab_a, TALLY_K_DM_LOCAL_COLS);
    TALLY_LOCAL_ARRAY(float, tab_lga, TALLY_K_DM_LOCAL_COLS);
    TALLY_LOCAL_ARRAY(float, fact, TALLY_K_DM_FACT_TABLE);
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
        tally_k_tree3(va, vn, vs, lid, lanes, active);
        if (unit < units && j == 0u) {
            /* An empty row (V == 0) sums to +0 as on the host. */
            const float A = active > 0u ? va[lid] : 0.0f;
            const float N = active > 0u ? vn[lid] : 0.0f;
            const float S = active > 0u ? vs[lid] : 0.0f;
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
 * vec4: every row starts 16-byte aligned, so whole quads load as float4.
 */
TALLY_KERNEL void tally_k_dm_rows_table(TALLY_K_PARAMS(dm_rows_table))
{
    TALLY_LOCAL_ARRAY(float, va, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vn, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, vs, TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, fact, TALLY_K_DM_FACT_TABLE);
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
    TALLY_GLOBAL const float *ea = pre + ea_off;
    TALLY_GLOBAL const float *tab = pre + lga_off;
    for (tally_u64 first = TALLY_GROUP_ID() * segments; first < B; first += TALLY_GROUP_COUNT() * segments) {
        const tally_u64 b = first + seg;
        if (b < B) {
            const tally_k_src src = tally_k_src_at(counts, c_dtype, c_off + b * c_stride, V, V,
                                                   vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS);
            /* Lane t + kT's sums in A<k>, N<k>, S<k> (lanes past the
             * active prefix keep zeros that no step reads). */
            float A0 = 0.0f, N0 = 0.0f, S0 = 0.0f, A1 = 0.0f, N1 = 0.0f, S1 = 0.0f;
            float A2 = 0.0f, N2 = 0.0f, S2 = 0.0f, A3 = 0.0f, N3 = 0.0f, S3 = 0.0f;
            for (tally_u32 k = 0; k < P; k++) {
                const tally_u32 j = t + k * T;
                if (j >= active) break;
                float sa = 0.0f, sn = 0.0f, ss = 0.0f;
                int first_term = 1;
                for (tally_u32 q = 0; q < qpl; q++) {
                    const tally_u32 g = q * lanes + j;
                    if (g >= quads) break;
                    float e4[4];
                    const tally_u32 count = tally_k_load_quad(&src, V, g, e4);
                    /* The quad's columns of exp(alpha) and of the table. */
                    TALLY_GLOBAL const float *eq = ea + (g << 2);
                    TALLY_GLOBAL const float *tq = tab + (g << 2);
                    for (tally_u32 c = 0; c < 4u; c++) {
                        if (c < count) {
                            const float n = e4[c];
                            const float a = eq[c];
                            /* Both reads unconditional (row 0 for a count
                             * the table lacks), so that a zero or tabulated
                             * count, nearly every one, takes no branch. */
                            const int has_lgn = n > 0.0f && n < (float)TALLY_K_DM_TABLE_N && n == tally_floor(n);
                            const float lga = tq[c];
                            const float lgn = tq[(has_lgn ? (tally_u32)n : 0u) * V32 + c];
                            /* tally_dm_term of a zero count is 0, and of a
                             * tabulated one without the coefficient
                             * lgamma(n + a) - lgamma(a). */
                            float term = n == 0.0f ? 0.0f : lgn - lga;
                            if (!(n == 0.0f || (has_lgn && !(flags & TALLY_DM_WITH_COEFFICIENT))))
                                term = tally_k_dm_term(n, a, lga, lgn, has_lgn, fact, flags);
                            tally_k_dm_add(&sa, &sn, &ss, first_term, a, n, term);
                            first_term = 0;
                        }
                    }
                }
                if (k == 0u) {
                    A0 = sa;
                    N0 = sn;
                    S0 = ss;
                } else if (k == 1u) {
                    A1 = sa;
                    N1 = sn;
                    S1 = ss;
                } else if (k == 2u) {
                    A2 = sa;
                    N2 = sn;
                    S2 = ss;
                } else {
                    A3 = sa;
                    N3 = sn;
                    S3 = ss;
                }
            }
            /* The tree's steps with stride s >= T (s = 2T, then T): lane
             * t + kT takes lane t + kT + s when that lane is active. */
            if (P == 4u) {
                if (t + 2u * T < active) {
                    A0 = A0 + A2;
                    N0 = N0 + N2;
                    S0 = S0 + S2;
                }
                if (t + 3u * T < active) {
                    A1 = A1 + A3;
                    N1 = N1 + N3;
                    S1 = S1 + S3;
                }
            }
            if (P >= 2u && t + T < active) {
                A0 = A0 + A1;
                N0 = N0 + N1;
                S0 = S0 + S1;
            }
            va[lid] = A0;
            vn[lid] = N0;
            vs[lid] = S0;
        }
        tally_k_tree3(va, vn, vs, lid, T, b < B ? active : 0u);
        if (b < B && t == 0u)
            out[out_off + b * out_stride] = tally_canonical(tally_dm_row(va[lid], vn[lid], vs[lid], flags));
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
