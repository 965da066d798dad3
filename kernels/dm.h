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

/* Counts below this that are whole numbers take lgamma(n + 1) from a table
 * each group builds once (the coefficient's term). */
#define TALLY_K_DM_FACT_TABLE TALLY_K_GROUP_SIZE

/*
 * tally_dm_term(n, a, flags) with lgamma(a) given as lga, lgamma(n + a)
 * given as lgn when has_lgn (from the TALLY_K_DM_ALPHA_TABLE table) and
 * lgamma(n + 1) taken from fact[] when n is a whole number below
 * TALLY_K_DM_FACT_TABLE: the same operations in the same order as terms.h
 * (the tables hold values of the same tally_lgammaf at the same float
 * arguments), so the same bits, with at most one lgamma call per nonzero
 * count instead of three. Keep in step with tally_dm_term.
 */
TALLY_FN float tally_k_dm_term(float n, float a, float lga, float lgn, int has_lgn, TALLY_LOCAL const float *fact,
                               tally_u32 flags)
{
    if (n == 0.0f) return 0.0f;
    float v = (has_lgn ? lgn : tally_lgammaf(n + a)) - lga;
    if (flags & TALLY_DM_FLAG_COEFFICIENT) {
        float lg1;
        if (n >= 0.0f && n < (float)TALLY_K_DM_FACT_TABLE && n == tally_floor(n))
            lg1 = fact[(tally_u32)n];
        else
            lg1 = tally_lgammaf(n + 1.0f);
        v = v - lg1;
    }
    if (n < 0.0f) v = TALLY_F32_NAN;
    return v;
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
TALLY_KERNEL void tally_k_dm_prep(TALLY_GLOBAL const float *TALLY_RESTRICT la, tally_u64 la_off, tally_u64 V,
                                  TALLY_GLOBAL float *TALLY_RESTRICT pre, tally_u64 ea_off, tally_u64 lga_off,
                                  tally_u32 rows)
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    const tally_u64 total = V * rows;
    for (tally_u64 i = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); i < total; i += step) {
        const tally_u64 k = i / V;
        const tally_u64 v = i - k * V;
        const float a = tally_expf(la[la_off + v]);
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
 * wrote to pre; TABLE also reads lgamma(n + a) for whole counts
 * 0 < n < TALLY_K_DM_TABLE_N from the rows of that table (other counts
 * compute it). A zero count skips its lgamma calls (tally_dm_term returns
 * 0 for it), which is most of the work on sparse counts.
 */
TALLY_KERNEL void tally_k_dm_rows(TALLY_GLOBAL const float *TALLY_RESTRICT counts, tally_u64 c_off, tally_u64 c_stride,
                                  TALLY_GLOBAL const float *TALLY_RESTRICT la, tally_u64 la_off, tally_u64 la_stride,
                                  TALLY_GLOBAL const float *TALLY_RESTRICT pre, tally_u64 ea_off, tally_u64 lga_off,
                                  tally_u32 alpha_mode, tally_u64 B, tally_u64 V, tally_u32 lanes, tally_u32 qpl,
                                  tally_u64 tiles, tally_u32 flags, TALLY_GLOBAL float *TALLY_RESTRICT out,
                                  tally_u64 out_off, tally_u64 out_stride)
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
            const float a = tally_expf(la[la_off + v]);
            tab_a[v] = a;
            tab_lga[v] = tally_lgammaf(a);
        }
    }
    /* fact[k] = lgamma(k + 1): the same value tally_lgammaf(n + 1.0f) gives
     * for a count n == k, since k + 1 is exact. */
    if ((flags & TALLY_DM_FLAG_COEFFICIENT) && lid < TALLY_K_DM_FACT_TABLE)
        fact[lid] = tally_lgammaf((float)lid + 1.0f);
    /* Unconditional: see tally_k_local_uniforms on barriers under branches. */
    TALLY_BARRIER();
    const tally_u32 segments = TALLY_K_GROUP_SIZE / lanes;
    const tally_u32 seg = lid / lanes;
    const tally_u32 j = lid - seg * lanes;
    const tally_u64 units = B * tiles;
    const tally_u64 quads = tally_k_quads(V);
    const tally_u64 tile_quads = (tally_u64)lanes * qpl;
    for (tally_u64 first = TALLY_GROUP_ID() * segments; first < units;
         first += TALLY_GROUP_COUNT() * segments) {
        const tally_u64 unit = first + seg;
        tally_u64 active = 0;
        tally_u64 b = 0;
        if (unit < units) {
            b = unit / tiles;
            const tally_u64 base = (unit - b * tiles) * tile_quads;
            active = tally_k_active(quads, base, lanes);
            if ((tally_u64)j < active) {
                TALLY_GLOBAL const float *crow = counts + c_off + b * c_stride;
                TALLY_GLOBAL const float *larow = la + la_off + b * la_stride;
                float A = 0.0f, N = 0.0f, S = 0.0f;
                int first_term = 1;
                for (tally_u32 q = 0; q < qpl; q++) {
                    const tally_u64 g = base + (tally_u64)q * lanes + j;
                    if (g >= quads) break;
                    const tally_u64 e0 = g << 2;
                    const tally_u32 count = (V - e0 >= 4u) ? 4u : (tally_u32)(V - e0);
                    for (tally_u32 c = 0; c < count; c++) {
                        const tally_u64 e = e0 + c;
                        const float n = crow[e];
                        float a, lga, lgn = 0.0f;
                        int has_lgn = 0;
                        if (alpha_mode == TALLY_K_DM_ALPHA_PER_ROW) {
                            a = tally_expf(larow[e]);
                            /* Only a nonzero count needs it. */
                            lga = 0.0f;
                            if (n != 0.0f) lga = tally_lgammaf(a);
                        } else if (alpha_mode == TALLY_K_DM_ALPHA_LOCAL) {
                            a = tab_a[e];
                            lga = tab_lga[e];
                        } else {
                            a = pre[ea_off + e];
                            /* Only a nonzero count needs it. */
                            lga = 0.0f;
                            if (n != 0.0f) lga = pre[lga_off + e];
                            if (alpha_mode == TALLY_K_DM_ALPHA_TABLE && n > 0.0f &&
                                n < (float)TALLY_K_DM_TABLE_N && n == tally_floor(n)) {
                                lgn = pre[lga_off + (tally_u64)(tally_u32)n * V + e];
                                has_lgn = 1;
                            }
                        }
                        const float term = tally_k_dm_term(n, a, lga, lgn, has_lgn, fact, flags);
                        if (first_term) {
                            A = a;
                            N = n;
                            S = term;
                            first_term = 0;
                        } else {
                            A = A + a;
                            N = N + n;
                            S = S + term;
                        }
                    }
                }
                va[lid] = A;
                vn[lid] = N;
                vs[lid] = S;
            }
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

/* Row values from the reduced sums of a multi-level row plan: A of row b at
 * sums[off + b], N at sums[off + B + b], S at sums[off + 2B + b]. */
TALLY_KERNEL void tally_k_dm_finish(TALLY_GLOBAL const float *TALLY_RESTRICT sums, tally_u64 sums_off, tally_u64 B,
                                    tally_u32 flags, TALLY_GLOBAL float *TALLY_RESTRICT out, tally_u64 out_off,
                                    tally_u64 out_stride)
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 b = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); b < B; b += step)
        out[out_off + b * out_stride] = tally_canonical(
            tally_dm_row(sums[sums_off + b], sums[sums_off + B + b], sums[sums_off + 2u * B + b], flags));
}

#endif /* TALLY_KERNELS_DM_H */
