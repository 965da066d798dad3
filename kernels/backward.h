/*
 * kernels/backward.h - the gradient kernels (launched by
 * backends/gpu/gpu_backward.c), with the terms of tally/terms_backward.h so
 * that every element's bits are the host's (backends/host/host_backward.c).
 */
#ifndef TALLY_KERNELS_BACKWARD_H
#define TALLY_KERNELS_BACKWARD_H

#include "tree.h"
#include "backward_abi.h"
#include "tally/terms_backward.h"


/* Four results as a quad, each canonicalised (tally_canonical). */
TALLY_FN tally_f4 tally_k_canonical4(float a, float b, float c, float d)
{
    tally_f4 o;
    o.x = tally_canonical(a);
    o.y = tally_canonical(b);
    o.z = tally_canonical(c);
    o.w = tally_canonical(d);
    return o;
}

/* Both gradients of a quad of KL pairs. */
typedef struct tally_k_grad4 {
    tally_f4 a, b;
} tally_k_grad4;

/* tally_kl_grad_form over a quad, each result canonicalised. Called with
 * constant flags and forms, it compiles to straight-line code. */
TALLY_FN tally_k_grad4 tally_k_kl_grad4(tally_f4 x, tally_f4 t, tally_f4 g, tally_u32 flags, int fast, int div_normal)
{
    const tally_grad2 d0 = tally_kl_grad_form(x.x, t.x, g.x, flags, fast, div_normal);
    const tally_grad2 d1 = tally_kl_grad_form(x.y, t.y, g.y, flags, fast, div_normal);
    const tally_grad2 d2 = tally_kl_grad_form(x.z, t.z, g.z, flags, fast, div_normal);
    const tally_grad2 d3 = tally_kl_grad_form(x.w, t.w, g.w, flags, fast, div_normal);
    tally_k_grad4 r;
    r.a = tally_k_canonical4(d0.a, d1.a, d2.a, d3.a);
    r.b = tally_k_canonical4(d0.b, d1.b, d2.b, d3.b);
    return r;
}

/* tally_kl_grad over a quad, element by element (any flags, any values). */
TALLY_FN tally_k_grad4 tally_k_kl_grad4_any(tally_f4 x, tally_f4 t, tally_f4 g, tally_u32 flags)
{
    const tally_grad2 d0 = tally_kl_grad(x.x, t.x, g.x, flags);
    const tally_grad2 d1 = tally_kl_grad(x.y, t.y, g.y, flags);
    const tally_grad2 d2 = tally_kl_grad(x.z, t.z, g.z, flags);
    const tally_grad2 d3 = tally_kl_grad(x.w, t.w, g.w, flags);
    tally_k_grad4 r;
    r.a = tally_k_canonical4(d0.a, d1.a, d2.a, d3.a);
    r.b = tally_k_canonical4(d0.b, d1.b, d2.b, d3.b);
    return r;
}

/* Whether tally_kl_grad would take the short forms (fast = 1 and, with
 * INPUT_IS_PROB and no LOG_TARGET, div_normal = 1 for the quotient t / x)
 * for all four pairs: then tally_k_kl_grad4(..., 1, 1) gives its bits.
 * Bitwise operators, so one branch a quad. */
TALLY_FN int tally_k_kl_pair_short_ok(float x, float t, tally_u32 flags)
{
    const int fast = tally_kl_fast_ok(x, t, flags);
    if ((flags & TALLY_KL_INPUT_IS_PROB) == 0u || (flags & TALLY_KL_LOG_TARGET) != 0u) return fast;
    /* Both are positive normal floats here, so tally_pm_divf_normal_ok(t, x)
     * is only its bound on the difference of their biased exponents (the
     * bits above 23), |k| <= 100. */
    const tally_u32 k = (tally_as_u32(t) >> 23) - (tally_as_u32(x) >> 23);
    return fast & (k + 100u <= 200u);
}

TALLY_FN int tally_k_kl_quad_short_ok(tally_f4 x, tally_f4 t, tally_u32 flags)
{
    return tally_k_kl_pair_short_ok(x.x, t.x, flags) & tally_k_kl_pair_short_ok(x.y, t.y, flags) &
           tally_k_kl_pair_short_ok(x.z, t.z, flags) & tally_k_kl_pair_short_ok(x.w, t.w, flags);
}

/* A quad's gradients. The two common flag sets (the log input form, and
 * INPUT_IS_PROB alone) test the quad once and, on data that meet the short
 * forms' conditions (almost all real data), run copies compiled for their
 * constant flags: no per-element tests or branches, about half the
 * instructions of the element-by-element path, which bounded the kernel
 * (GPU run 7's profile: issue slots 78% busy, DRAM 73%). Everything else
 * goes element by element. tally_kl_grad makes the same choices element
 * by element, so every path gives the same bits. */
TALLY_FN tally_k_grad4 tally_k_kl_grad_quad(tally_f4 x, tally_f4 t, tally_f4 g, tally_u32 flags)
{
#if TALLY_K_KL_BW_SHORT_QUADS
    if (flags == TALLY_KL_INPUT_IS_PROB) {
        if (tally_k_kl_quad_short_ok(x, t, TALLY_KL_INPUT_IS_PROB))
            return tally_k_kl_grad4(x, t, g, TALLY_KL_INPUT_IS_PROB, 1, 1);
    } else if (flags == 0u) {
        if (tally_k_kl_quad_short_ok(x, t, 0u)) return tally_k_kl_grad4(x, t, g, 0u, 1, 0);
    }
#endif
    return tally_k_kl_grad4_any(x, t, g, flags);
}

/*
 * KL divergence backward: for each element (r, c), tally_kl_grad of
 * x[r, c], t[r, c] and the upstream gradient (g[r, c] when pointwise, else
 * g[0] scaled by tally_grad_scale), stored to gx and gt as `want` says.
 * CONTIGUOUS (every view one run of rows*cols elements): a flat grid-stride
 * loop; VEC4 (contiguous and 16-byte aligned as well): the same loop over
 * quads, 16-byte loads and stores, the n % 4 tail element by element.
 * STRIDED: groups walk rows, work-items walk a row's columns. The grid is
 * bounded (a few groups per multiprocessor), so the scaled upstream
 * gradient is computed once per work-item, not once per element.
 */
#if TALLY_K_KL_BW_STREAMING
#  define TALLY_K_KL_BW_LOAD TALLY_LOAD_F4_ONCE
#  define TALLY_K_KL_BW_STORE TALLY_STORE_F4_ONCE
#else
#  define TALLY_K_KL_BW_LOAD TALLY_LOAD_F4
#  define TALLY_K_KL_BW_STORE TALLY_STORE_F4
#endif

TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_KL_BW_BOUND) void tally_k_kl_backward(TALLY_K_PARAMS(kl_backward))
{
    const tally_u32 lid = TALLY_LID();
    const float gs = pointwise ? 0.0f : tally_grad_scale(g[g_off], divide, divisor);
    if (mode == TALLY_K_LOAD_STRIDED) {
        for (tally_u64 r = TALLY_GROUP_ID(); r < rows; r += TALLY_GROUP_COUNT()) {
            for (tally_u64 c = lid; c < cols; c += TALLY_K_GROUP_SIZE) {
                const float gv = pointwise ? g[g_off + r * g_stride + c] : gs;
                const tally_grad2 d = tally_kl_grad(x[x_off + r * x_stride + c], t[t_off + r * t_stride + c], gv, flags);
                if (want & TALLY_K_BW_WANT_A) gx[gx_off + r * gx_stride + c] = tally_canonical(d.a);
                if (want & TALLY_K_BW_WANT_B) gt[gt_off + r * gt_stride + c] = tally_canonical(d.b);
            }
        }
        return;
    }
    const tally_u64 n = rows * cols;
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    const tally_u64 first = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + lid;
    tally_u64 done = 0;
    if (mode == TALLY_K_LOAD_VEC4) {
        const tally_u64 nq = n >> 2;
        const int wa = (want & TALLY_K_BW_WANT_A) != 0u, wb = (want & TALLY_K_BW_WANT_B) != 0u;
        for (tally_u64 q = first; q < nq; q += step) {
            const tally_f4 xv = TALLY_K_KL_BW_LOAD(x + x_off, q), tv = TALLY_K_KL_BW_LOAD(t + t_off, q);
            tally_f4 gv;
            if (pointwise) {
                gv = TALLY_K_KL_BW_LOAD(g + g_off, q);
            } else {
                gv.x = gs;
                gv.y = gs;
                gv.z = gs;
                gv.w = gs;
            }
            const tally_k_grad4 d = tally_k_kl_grad_quad(xv, tv, gv, flags);
            if (wa) TALLY_K_KL_BW_STORE(gx + gx_off, q, d.a);
            if (wb) TALLY_K_KL_BW_STORE(gt + gt_off, q, d.b);
        }
        done = nq << 2;
    }
    for (tally_u64 k = done + first; k < n; k += step) {
        const float gv = pointwise ? g[g_off + k] : gs;
        const tally_grad2 d = tally_kl_grad(x[x_off + k], t[t_off + k], gv, flags);
        if (want & TALLY_K_BW_WANT_A) gx[gx_off + k] = tally_canonical(d.a);
        if (want & TALLY_K_BW_WANT_B) gt[gt_off + k] = tally_canonical(d.b);
    }
}

/*
 * Dirichlet-multinomial backward, per row b < B: R[b] = tally_dm_grad_row of
 * the row's A (sums[a_off + b * a_step]) and N (sums[n_off + b]), and the
 * row's upstream gradient G[b] (g[g_off + b * g_stride] per row, else g[g_off]
 * scaled). R at rg[rg_off + b], G at rg[rg_off + B + b].
 */
TALLY_KERNEL void tally_k_dm_bw_rows(TALLY_K_PARAMS(dm_bw_rows))
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 b = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); b < B; b += step) {
        rg[rg_off + b] = tally_dm_grad_row(sums[a_off + b * a_step], sums[n_off + b]);
        rg[rg_off + B + b] = per_row_grad ? g[g_off + b * g_stride] : tally_grad_scale(g[g_off], divide, divisor);
    }
}

/*
 * psi(n + a) for a count n of a column whose digammas psi(k + a) of the
 * whole counts k = 0 .. TALLY_K_DM_BW_TABLE_N - 1 are in local memory at
 * tab[k * stride]: those from the table, others by tally_digammaf (k + a is
 * the same sum as n + a for n == k, so the same value; for n == 0, +0 or
 * -0, tally_dm_grad_term_of reads none). The rare counts take one call out
 * of line on CUDA, so the hot loop stays small.
 */
TALLY_FN_COLD float tally_k_dm_bw_psi_untabulated(float n, float a)
{
    return n != 0.0f ? tally_digammaf(n + a) : 0.0f;
}

/*
 * 1 when the count n is a whole 0 .. rows - 1 (either zero), whose psi(n +
 * a) is in a table of that many rows; *row gets n's row (0 when it is not
 * in the table). Adding 2^23 rounds any n in [0, 2^23) to an integer, with
 * no other error, and leaves it in the low mantissa bits: n is whole
 * exactly when subtracting 2^23 back gives n (-0 included, as floor gives),
 * and then the bits are its row. Two additions, where floor(n) and the
 * conversion of n to an integer were two conversion instructions, which
 * GPUs issue at an eighth of the rate of additions, for every count.
 * Without short-circuits, so that kernels test many counts without
 * branches.
 */
TALLY_FN int tally_k_dm_bw_table_row(float n, tally_u32 rows, tally_u32 *row)
{
    const float t = n + 0x1p23f;
    const int whole = (n >= 0.0f) & (n < (float)rows) & (t - 0x1p23f == n);
    *row = whole ? tally_as_u32(t) - 0x4b000000u : 0u;
    return whole;
}

TALLY_FN float tally_k_dm_bw_psi(float n, float a, TALLY_LOCAL const float *tab, tally_u32 stride)
{
    tally_u32 row;
    if (tally_k_dm_bw_table_row(n, TALLY_K_DM_BW_TABLE_N, &row)) return tab[row * stride];
    return tally_k_dm_bw_psi_untabulated(n, a);
}

/*
 * Dirichlet-multinomial backward, per element (b, v): the weight
 * w = tally_dm_grad_weight(G[b], R[b], n[b, v], a) with a = exp(log_alpha of
 * the row, or of the shared row when la_stride == 0). per_row: out[b, v] =
 * a * w, groups walking rows and work-items a row's columns. Otherwise w
 * goes to out[out_off + v * B + b] (scratch, transposed, so that the column
 * trees then read each column as one contiguous vector): groups walk blocks
 * of TALLY_K_DM_BW_ROWS rows and each work-item writes its column's run of
 * that many consecutive values, while the counts are still read row by row
 * across the work-items. A shared alpha's digammas are tabulated per column
 * and block: psi(a) once (also the table's row 0), and psi(k + a) for the
 * whole counts k = 1 .. TALLY_K_DM_BW_TABLE_N - 1 in the work-item's own slots of local memory
 * (no other work-item reads them, so no barrier), the same values the
 * element-wise form computes, since k + a is the same sum as n + a for n == k.
 */
TALLY_KERNEL void tally_k_dm_bw_elements(TALLY_K_PARAMS(dm_bw_elements))
{
    TALLY_LOCAL_ARRAY(float, psi_tab, TALLY_K_DM_BW_TABLE_N * TALLY_K_GROUP_SIZE);
    const tally_u32 lid = TALLY_LID();
    if (per_row) {
        for (tally_u64 b = TALLY_GROUP_ID(); b < B; b += TALLY_GROUP_COUNT()) {
            const float R = rg[rg_off + b], G = rg[rg_off + B + b];
            for (tally_u64 v = lid; v < V; v += TALLY_K_GROUP_SIZE) {
                const float a = tally_expf(la[la_off + b * la_stride + v]);
                const float w = tally_dm_grad_weight(G, R, counts[c_off + b * c_stride + v], a);
                out[out_off + b * out_stride + v] = tally_canonical(a * w);
            }
        }
        return;
    }
    const tally_u64 blocks = (B + (TALLY_K_DM_BW_ROWS - 1u)) / TALLY_K_DM_BW_ROWS;
    for (tally_u64 blk = TALLY_GROUP_ID(); blk < blocks; blk += TALLY_GROUP_COUNT()) {
        const tally_u64 b0 = blk * TALLY_K_DM_BW_ROWS;
        const tally_u32 rows = B - b0 < TALLY_K_DM_BW_ROWS ? (tally_u32)(B - b0) : TALLY_K_DM_BW_ROWS;
        for (tally_u64 v = lid; v < V; v += TALLY_K_GROUP_SIZE) {
            const float a = tally_expf(la[la_off + v]);
            const float psi_a = tally_digammaf(a);
            psi_tab[lid] = psi_a;
            for (tally_u32 k = 1u; k < TALLY_K_DM_BW_TABLE_N; k++)
                psi_tab[k * TALLY_K_GROUP_SIZE + lid] = tally_digammaf((float)k + a);
            for (tally_u32 i = 0; i < rows; i++) {
                const tally_u64 b = b0 + i;
                const float n = counts[c_off + b * c_stride + v];
                const float psi_na = tally_k_dm_bw_psi(n, a, psi_tab + lid, TALLY_K_GROUP_SIZE);
                /* tally_dm_grad_weight(G, R, n, a)'s operations: G (R + T). */
                const float term = tally_dm_grad_term_of(n, psi_na, psi_a);
                out[out_off + v * B + b] = rg[rg_off + B + b] * (rg[rg_off + b] + term);
            }
        }
    }
}

/*
 * How the column kernels (tally_k_dm_bw_columns, tally_k_dm_bw_lane_tree)
 * split their work: a unit is TALLY_K_DM_BW_COLS adjacent columns of one
 * tile (`blocks` column blocks), work-item lid is (c, r) = (lid % COLS,
 * lid / COLS) and plays lanes r + R m, m < M, of column c, R = min(lanes,
 * TALLY_K_DM_BW_RESIDUES); the column plan has `quads` quads of rows.
 */
typedef struct tally_k_dm_bw_units {
    tally_u32 c, r, R, M;
    tally_u64 quads, blocks;
} tally_k_dm_bw_units;

TALLY_FN tally_k_dm_bw_units tally_k_dm_bw_units_of(tally_u32 lid, tally_u32 lanes, tally_u64 B, tally_u64 V)
{
    tally_k_dm_bw_units u;
    u.c = lid % TALLY_K_DM_BW_COLS;
    u.r = lid / TALLY_K_DM_BW_COLS;
    u.R = lanes < TALLY_K_DM_BW_RESIDUES ? lanes : TALLY_K_DM_BW_RESIDUES;
    u.M = lanes / u.R;
    u.quads = (B + 3u) / 4u;
    u.blocks = (V + (TALLY_K_DM_BW_COLS - 1u)) / TALLY_K_DM_BW_COLS;
    return u;
}

/*
 * The steps of a column tile's tree once its lanes are summed: work-item
 * (c, r) holds lanes r + R m (m < M) of column c in acc. The steps s = 4R,
 * 2R, R (those below lanes) are taken in registers, lane r + R m taking
 * lane r + R (m + S), S = s / R, while that one is active; the steps below
 * R pair work-items in part (TALLY_K_DM_BW_RESIDUES by TALLY_K_DM_BW_COLS
 * floats of local memory). The tile's partial is part[c] after the last
 * barrier, for every work-item of the group.
 */
TALLY_FN void tally_k_dm_bw_column_tree(float *acc, TALLY_LOCAL float *part, tally_u32 c, tally_u32 r, tally_u32 R,
                                        tally_u32 M, tally_u32 active)
{
#pragma unroll
    for (tally_u32 S = TALLY_K_DM_BW_LANES_PER_ITEM / 2u; S > 0u; S /= 2u) {
        if (S < M) {
#pragma unroll
            for (tally_u32 m = 0; m < TALLY_K_DM_BW_LANES_PER_ITEM / 2u; m++)
                if (m < S && r + R * (m + S) < active) acc[m] = acc[m] + acc[m + S];
        }
    }
    part[r * TALLY_K_DM_BW_COLS + c] = acc[0];
    TALLY_BARRIER();
    for (tally_u32 s = R / 2u; s > 0u; s /= 2u) {
        if (r < s && r + s < active)
            part[r * TALLY_K_DM_BW_COLS + c] = part[r * TALLY_K_DM_BW_COLS + c] + part[(r + s) * TALLY_K_DM_BW_COLS + c];
        TALLY_BARRIER();
    }
}

/*
 * A shared alpha's gradient, the weights summed where they are computed:
 * level 0 of the column tree (docs/reduction-tree.md, "Columns") over the
 * V columns, each a vector of the B weights w[b, v] = G_b (R_b + T_bv)
 * (tally_dm_grad_weight's operations, as tally_k_dm_bw_elements), so the
 * same sums in the same order as the tree over the transposed weights,
 * without writing them. A unit is TALLY_K_DM_BW_COLS adjacent columns of
 * one tile t; work-item (c, r) plays lanes j = r + R m (m < lanes / R,
 * R = min(lanes, TALLY_K_DM_BW_RESIDUES)) of column c: their accumulators
 * start at -0 (-0 + x is x for every x, so a lane's sum is the plan's),
 * the tree's steps s >= R pair lanes of the same work-item in registers,
 * and the steps below R pair work-items in local memory. The column's
 * digammas psi(a) and psi(k + a) are tabulated once a unit. The result,
 * the tile's partial, goes to out[out_off + v * tiles + t]; with scale
 * (one tile) it is the column sum, and a_v times it goes to out[out_off +
 * v], as tally_k_dm_bw_scale writes it.
 */
TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_DM_BW_GROUPS_PER_CU) void tally_k_dm_bw_columns(TALLY_K_PARAMS(dm_bw_columns))
{
    TALLY_LOCAL_ARRAY(float, psi_tab, TALLY_K_DM_BW_TABLE_N * TALLY_K_DM_BW_COLS);
    TALLY_LOCAL_ARRAY(float, part, TALLY_K_DM_BW_RESIDUES * TALLY_K_DM_BW_COLS);
    TALLY_LOCAL_ARRAY(float, rows_g, 4u * TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, rows_r, 4u * TALLY_K_GROUP_SIZE);
    const tally_u32 lid = TALLY_LID();
    const tally_k_dm_bw_units L = tally_k_dm_bw_units_of(lid, lanes, B, V);
    const tally_u32 c = L.c, r = L.r, R = L.R, M = L.M;
    const tally_u64 quads = L.quads, blocks = L.blocks;
    TALLY_GLOBAL const float *G = rg + rg_off + B, *Rb = rg + rg_off;
    for (tally_u64 u = TALLY_GROUP_ID(); u < blocks * tiles; u += TALLY_GROUP_COUNT()) {
        const tally_u64 t = u % tiles, v = (u / tiles) * TALLY_K_DM_BW_COLS + c;
        const int has_col = v < V;
        const float a = has_col ? tally_expf(la[la_off + v]) : 0.0f;
        if (r < TALLY_K_DM_BW_TABLE_N)
            psi_tab[r * TALLY_K_DM_BW_COLS + c] = tally_digammaf(r == 0u ? a : (float)r + a);
        TALLY_BARRIER();
        const float psi_a = psi_tab[c];
        const tally_u64 first = t * lanes * qpl; /* the tile's first quad */
        const tally_u64 left = quads - first;
        const tally_u32 active = left < lanes ? (tally_u32)left : lanes;
        float acc[TALLY_K_DM_BW_LANES_PER_ITEM];
#pragma unroll
        for (tally_u32 m = 0; m < TALLY_K_DM_BW_LANES_PER_ITEM; m++) acc[m] = -0.0f;
        const int playing = has_col && r < R;
        /* Lane m's first row is row0 + 4 (r + R m): its counts start at
         * first_count + m * lane_step, four rows c_stride apart. */
        const tally_u64 cs = c_stride, lane_step = 4u * (tally_u64)R * cs;
        TALLY_GLOBAL const float *first_count = counts + c_off + (has_col ? v : 0u) + 4u * (tally_u64)r * cs;
        for (tally_u32 q = 0; q < qpl; q++) {
            /* Step q visits the quads first + q lanes + j, j < lanes: the
             * rows row0 .. row0 + 4 lanes - 1. Their G and R go to local
             * memory (every column of the group reads them). */
            const tally_u64 row0 = 4u * (first + (tally_u64)q * lanes);
            /* A short last tile's later steps start past the last row. */
            const tally_u32 staged = row0 >= B ? 0u : B - row0 < 4u * lanes ? (tally_u32)(B - row0) : 4u * lanes;
#pragma unroll 1
            for (tally_u32 i = lid; i < staged; i += TALLY_K_GROUP_SIZE) {
                rows_g[i] = G[row0 + i];
                rows_r[i] = Rb[row0 + i];
            }
            TALLY_BARRIER();
            /* Half the lanes at a time: their sixteen counts are loaded
             * before any is used (sixteen loads in flight), with few enough
             * registers for four groups a multiprocessor on CUDA. `rows` is
             * how many of a lane's four rows exist (0 for a lane this
             * work-item does not play). */
#pragma unroll
            for (tally_u32 h = 0; h < TALLY_K_DM_BW_LANES_PER_ITEM; h += TALLY_K_DM_BW_LANES_PER_ITEM / 2u) {
                float term[TALLY_K_DM_BW_LANES_PER_ITEM / 2u][4];
                tally_u32 rows[TALLY_K_DM_BW_LANES_PER_ITEM / 2u], rare = 0u;
#pragma unroll
                for (tally_u32 k = 0; k < TALLY_K_DM_BW_LANES_PER_ITEM / 2u; k++) {
                    const tally_u64 b0 = row0 + 4u * (r + R * (h + k));
                    rows[k] = playing && h + k < M && b0 < B ? (B - b0 < 4u ? (tally_u32)(B - b0) : 4u) : 0u;
                    TALLY_GLOBAL const float *lane = first_count + row0 * cs + (h + k) * lane_step;
#pragma unroll
                    for (tally_u32 e = 0; e < 4u; e++) term[k][e] = e < rows[k] ? lane[e * cs] : 0.0f;
                }
                /* T = psi(n + a) - psi(a) (tally_dm_grad_term_of) with
                 * psi(n + a) from the table; the counts it lacks are marked
                 * in `rare` and computed below. */
#pragma unroll
                for (tally_u32 k = 0; k < TALLY_K_DM_BW_LANES_PER_ITEM / 2u; k++) {
#pragma unroll
                    for (tally_u32 e = 0; e < 4u; e++) {
                        const float x = term[k][e];
                        tally_u32 row;
                        const int tabulated = tally_k_dm_bw_table_row(x, TALLY_K_DM_BW_TABLE_N, &row);
                        const float psi_na = psi_tab[row * TALLY_K_DM_BW_COLS + c];
                        term[k][e] = tally_dm_grad_term_of(x, psi_na, psi_a);
                        rare |= (!tabulated & (e < rows[k])) ? 1u << (4u * k + e) : 0u;
                    }
                }
                /* The rare counts (fractions, large, negative, NaN): one
                 * call site for all of them, which reads the count again. */
                if (rare != 0u) {
#pragma unroll 1
                    for (tally_u32 j = 0; j < 4u * (TALLY_K_DM_BW_LANES_PER_ITEM / 2u); j++) {
                        if (!(rare & (1u << j))) continue;
                        const tally_u32 k = j / 4u, e = j % 4u;
                        const float x = first_count[row0 * cs + (h + k) * lane_step + e * cs];
                        const float t = tally_dm_grad_term_of(x, tally_k_dm_bw_psi_untabulated(x, a), psi_a);
#pragma unroll
                        for (tally_u32 kk = 0; kk < TALLY_K_DM_BW_LANES_PER_ITEM / 2u; kk++) {
#pragma unroll
                            for (tally_u32 ee = 0; ee < 4u; ee++)
                                if (kk == k && ee == e) term[kk][ee] = t;
                        }
                    }
                }
#pragma unroll
                for (tally_u32 k = 0; k < TALLY_K_DM_BW_LANES_PER_ITEM / 2u; k++) {
                    const tally_u32 i0 = 4u * (r + R * (h + k));
#pragma unroll
                    for (tally_u32 e = 0; e < 4u; e++) {
                        /* tally_dm_grad_weight(G, R, n, a)'s operations: G (R + T). */
                        const float w = rows_g[i0 + e] * (rows_r[i0 + e] + term[k][e]);
                        acc[h + k] = e < rows[k] ? acc[h + k] + w : acc[h + k];
                    }
                }
            }
            TALLY_BARRIER(); /* the next step rewrites rows_g and rows_r */
        }
        tally_k_dm_bw_column_tree(acc, part, c, r, R, M, active);
        if (r == 0u && has_col) {
            if (scale) out[out_off + v] = tally_canonical(a * part[c]);
            else out[out_off + v * tiles + t] = part[c];
        }
        TALLY_BARRIER(); /* the next unit rewrites psi_tab and part */
    }
}

/*
 * The tables of tally_k_dm_bw_lanes for a shared alpha: a_v = exp(log_alpha
 * v) at pre[pre_off + v], and psi(a_v) (k = 0) or psi(k + a_v) (k = 1 ..
 * TALLY_K_DM_BW_LANES_TABLE_N - 1) at pre[pre_off + (1 + k) V + v], one
 * work-item an entry: the values tally_k_dm_bw_columns tabulates. With
 * a_lanes != 0, group 0 first sums A = sum exp(log_alpha v) to sums[a_off]
 * as the row plan's one-tile level does (tally_k_reduce_tiles_run, the EXP
 * term): the launch of that tree, folded into this one.
 */
TALLY_KERNEL void tally_k_dm_bw_prep(TALLY_K_PARAMS(dm_bw_prep))
{
    TALLY_LOCAL_ARRAY(float, v_tree, TALLY_K_GROUP_SIZE);
    /* One unit (nvec 1, one tile): only group 0 enters its loop, so the
     * tree's barriers are the whole group's. */
    if (a_lanes != 0u)
        tally_k_reduce_tiles_run(v_tree, la, la_off, V, V, TALLY_K_LOAD_CONTIGUOUS, 1u, 0u, V, a_lanes, a_qpl, 1u,
                                 TALLY_K_TERM_EXP, TALLY_COMBINE_SUM, la, la_off, TALLY_K_FINISH_NONE, 0.0f, sums,
                                 a_off, 1u, TALLY_F32);
    const tally_u64 items = (tally_u64)TALLY_K_DM_BW_LANES_TABLE_N * V;
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 i = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); i < items; i += step) {
        const tally_u64 k = i / V, v = i % V;
        const float a = tally_expf(la[la_off + v]);
        if (k == 0u) pre[pre_off + v] = a;
        pre[pre_off + (1u + k) * V + v] = tally_digammaf(k == 0u ? a : (float)k + a);
    }
}

/* Quad `quad` of a row of counts into x: one 16-byte load when `whole`
 * (an aligned row, all four columns in it), else its first ncols columns,
 * 0 past them. */
TALLY_FN void tally_k_dm_bw_load_quad(TALLY_GLOBAL const float *row, tally_u32 quad, tally_u32 ncols, int whole,
                                      float x[4])
{
    if (whole) {
        const tally_f4 w = TALLY_LOAD_F4(row, quad);
        x[0] = w.x;
        x[1] = w.y;
        x[2] = w.z;
        x[3] = w.w;
    } else {
#pragma unroll
        for (tally_u32 c = 0; c < 4u; c++) x[c] = c < ncols ? row[4u * quad + c] : 0.0f;
    }
}

/*
 * The counts of tally_k_dm_bw_lanes's step at column-plan quad `quad`: x[e][c]
 * = column 4i + c of row 4 quad + e, for the quad's rows (0 past them or
 * past the work-item's ncols columns), 16 bytes a row where the rows are
 * aligned (vec4) and the work-item's quad is whole. Returns how many of the
 * quad's rows exist (0 for quad >= quads: no step).
 */
TALLY_FN tally_u32 tally_k_dm_bw_lanes_load(TALLY_GLOBAL const float *counts, tally_u64 c_off, tally_u64 c_stride,
                                            tally_u32 vec4, tally_u64 B, tally_u64 quads, tally_u64 quad,
                                            tally_u32 i, tally_u32 ncols, float x[4][4])
{
    const tally_u64 row0 = 4u * quad;
    const tally_u32 rows = quad >= quads ? 0u : B - row0 < 4u ? (tally_u32)(B - row0) : 4u;
#pragma unroll
    for (tally_u32 e = 0; e < 4u; e++)
        tally_k_dm_bw_load_quad(counts + c_off + (row0 + e) * c_stride, i, e < rows ? ncols : 0u,
                                e < rows && vec4 && ncols == 4u, x[e]);
    return rows;
}

#if TALLY_HAS_STAGE
/* Starts copying the work-item's quad of the rows of column-plan quad
 * `quad` (tally_k_dm_bw_lanes_load's rows, whole aligned quads only) into
 * its slots st[256 e] of the stage. */
TALLY_FN void tally_k_dm_bw_lanes_stage(TALLY_LOCAL tally_f4 *st, TALLY_GLOBAL const float *counts, tally_u64 c_off,
                                        tally_u64 c_stride, tally_u64 B, tally_u64 quads, tally_u64 quad, tally_u32 i,
                                        tally_u32 ncols)
{
    const tally_u64 row0 = 4u * quad;
    const tally_u32 rows = quad >= quads ? 0u : B - row0 < 4u ? (tally_u32)(B - row0) : 4u;
    if (rows == 0u || ncols != 4u) return;
    /* One address, then a row's stride to the next (no product a row). */
    TALLY_GLOBAL const float *row = counts + c_off + row0 * c_stride + 4u * (tally_u64)i;
#pragma unroll
    for (tally_u32 e = 0; e < 4u; e++) {
        if (e < rows) TALLY_STAGE_COPY(st + e * TALLY_K_GROUP_SIZE, (TALLY_GLOBAL const tally_f4 *)row);
        if (e + 1u < rows) row += c_stride;
    }
}
#endif

/* The first quad of unit u of tally_k_dm_bw_lanes (lane j = u % lanes of
 * tile t = u / lanes: t lanes qpl + j), quads for u past the units. */
TALLY_FN tally_u64 tally_k_dm_bw_lanes_unit_quad(tally_u64 u, tally_u64 units, tally_u32 lanes, tally_u32 qpl,
                                                 tally_u64 quads)
{
    return u < units ? (u / lanes) * lanes * qpl + u % lanes : quads;
}

/* The quad of step s of the unit whose first quad is quad0, for s < qpl;
 * from s == qpl on, step s - qpl of the next unit (first quad next0), so
 * that the stage and the prefetch run on from one unit into the next;
 * quads (no step) past that or where there is no next unit. */
TALLY_FN tally_u64 tally_k_dm_bw_lanes_step_quad(tally_u64 quad0, tally_u32 s, tally_u32 lanes, tally_u32 qpl,
                                                 tally_u64 next0, tally_u64 quads)
{
    return s < qpl                               ? quad0 + (tally_u64)s * lanes
           : s - qpl < qpl && next0 < quads ? next0 + (tally_u64)(s - qpl) * lanes
                                            : quads;
}

/*
 * tally_k_dm_bw_lanes_load's counts of quad `quad` into x, and its return
 * value; with `staged` from the work-item's stage slots st, into which the
 * previous call (or the kernel, for its unit's first quad) started copying
 * them, and then this call starts copying quad `next`'s (the next unit's
 * first quad after a unit's last), so that they are in flight while this
 * step computes (the lookahead that
 * TALLY_K_DM_BW_LANES_AHEAD gives in registers, which CUDA's 64-register
 * bound at four groups a multiprocessor spills). A work-item reads back
 * only its own copies; the warp barrier orders those reads before the
 * copies that overwrite them.
 */
TALLY_FN tally_u32 tally_k_dm_bw_lanes_take(TALLY_LOCAL tally_f4 *st, tally_u32 staged,
                                            TALLY_GLOBAL const float *counts, tally_u64 c_off, tally_u64 c_stride,
                                            tally_u32 vec4, tally_u64 B, tally_u64 quads, tally_u64 quad,
                                            tally_u64 next, tally_u32 i, tally_u32 ncols, float x[4][4])
{
#if TALLY_HAS_STAGE
    if (staged) {
        const tally_u64 row0 = 4u * quad;
        const tally_u32 rows = quad >= quads ? 0u : B - row0 < 4u ? (tally_u32)(B - row0) : 4u;
        /* No step: nothing to wait for (a copy in flight is the next
         * unit's first step, which its own first call waits for). */
        if (rows == 0u) return 0u;
        TALLY_STAGE_WAIT();
        if (rows == 4u && ncols == 4u) {
            /* A whole step: every slot was copied. */
#pragma unroll
            for (tally_u32 e = 0; e < 4u; e++) {
                const tally_f4 w = st[e * TALLY_K_GROUP_SIZE];
                x[e][0] = w.x, x[e][1] = w.y, x[e][2] = w.z, x[e][3] = w.w;
            }
        } else {
#pragma unroll
            for (tally_u32 e = 0; e < 4u; e++) {
                const int here = e < rows && ncols == 4u;
                const tally_f4 w = st[e * TALLY_K_GROUP_SIZE];
                x[e][0] = here ? w.x : 0.0f, x[e][1] = here ? w.y : 0.0f;
                x[e][2] = here ? w.z : 0.0f, x[e][3] = here ? w.w : 0.0f;
            }
        }
        TALLY_BARRIER_EACH32();
        tally_k_dm_bw_lanes_stage(st, counts, c_off, c_stride, B, quads, next, i, ncols);
        return rows;
    }
#else
    (void)st, (void)staged, (void)next;
#endif
    return tally_k_dm_bw_lanes_load(counts, c_off, c_stride, vec4, B, quads, quad, i, ncols, x);
}

/*
 * T = psi(n + a) - psi(a) (tally_dm_grad_term_of) of a count n in column 4
 * quad + c, with psi(n + a) from the lanes kernels' local table (laid out
 * so that work-items reading consecutive quads never share a bank);
 * *tabulated = 0 when the table lacks n, whose T the caller computes again
 * out of line.
 */
TALLY_FN float tally_k_dm_bw_lanes_term(float n, tally_u32 c, tally_u32 quad, TALLY_LOCAL const float *psi_tab,
                                        float psi_a, int *tabulated)
{
    tally_u32 row;
    *tabulated = tally_k_dm_bw_table_row(n, TALLY_K_DM_BW_LANES_TABLE_N, &row);
    const float psi_na = psi_tab[(row * 4u + c) * TALLY_K_GROUP_SIZE + quad];
    return tally_dm_grad_term_of(n, psi_na, psi_a);
}

/*
 * The terms T = psi(n + a) - psi(a) (tally_dm_grad_term_of) of one step of
 * tally_k_dm_bw_lanes, in place of its counts x (rows of them), with psi(n
 * + a) from the table; the counts it lacks are marked in `rare` and
 * computed after, through one call site (from the counts at row0 + e,
 * column v0 + c).
 */
TALLY_FN void tally_k_dm_bw_lanes_terms(float x[4][4], tally_u32 rows, tally_u32 ncols, tally_u32 i,
                                        TALLY_LOCAL const float *psi_tab, const float psi_a[4],
                                        TALLY_GLOBAL const float *counts, tally_u64 c_off, tally_u64 c_stride,
                                        tally_u64 row0, tally_u64 v0, TALLY_GLOBAL const float *a_of)
{
    tally_u32 rare = 0u;
#pragma unroll
    for (tally_u32 e = 0; e < 4u; e++) {
#pragma unroll
        for (tally_u32 c = 0; c < 4u; c++) {
            int tabulated;
            x[e][c] = tally_k_dm_bw_lanes_term(x[e][c], c, i, psi_tab, psi_a[c], &tabulated);
            rare |= (!tabulated & (e < rows) & (c < ncols)) ? 1u << (4u * e + c) : 0u;
        }
    }
    if (rare != 0u) {
#pragma unroll 1
        for (tally_u32 b = 0; b < 16u; b++) {
            if (!(rare & (1u << b))) continue;
            const tally_u32 e = b / 4u, c = b % 4u;
            const float n = counts[c_off + (row0 + e) * c_stride + v0 + c];
            const float term = tally_dm_grad_term_of(n, tally_k_dm_bw_psi_untabulated(n, a_of[v0 + c]), psi_a[c]);
#pragma unroll
            for (tally_u32 ee = 0; ee < 4u; ee++) {
#pragma unroll
                for (tally_u32 cc = 0; cc < 4u; cc++)
                    if (ee == e && cc == c) x[ee][cc] = term;
            }
        }
    }
}

/*
 * tally_k_dm_bw_lanes_terms for a step of four rows whose four psi(a) are
 * finite, without a branch or a select an element; returns nonzero when
 * some count is not in the table, whose T the caller then computes again
 * (tally_k_dm_bw_lanes_terms from the counts). Adding 2^23 to a count n
 * leaves its nearest integer in the low bits of t (tally_k_dm_bw_table_row),
 * and `raw`, those bits less 2^23's, is below the table's rows exactly when
 * that integer is: n is in the table when also t - 2^23 == n. Any other n
 * (a fraction, negative, large, NaN) reads the table's last row, a finite
 * value that the caller replaces. For n == +0 or -0 the table's row 0 is
 * psi(a) itself, and psi(a) - psi(a) is +0, the 0 that
 * tally_dm_grad_term_of gives, since psi(a) is finite; for every other
 * tabulated n it is that function's difference. So the same bits, with
 * four fewer tests an element.
 */
TALLY_FN int tally_k_dm_bw_lanes_terms_whole(float x[4][4], tally_u32 i, TALLY_LOCAL const float *psi_tab,
                                             const float psi_a[4])
{
    int rare = 0;
#pragma unroll
    for (tally_u32 e = 0; e < 4u; e++) {
#pragma unroll
        for (tally_u32 c = 0; c < 4u; c++) {
            const float n = x[e][c], t = n + 0x1p23f;
            const tally_u32 raw = tally_as_u32(t) - 0x4b000000u;
            const tally_u32 row = raw < TALLY_K_DM_BW_LANES_TABLE_N ? raw : TALLY_K_DM_BW_LANES_TABLE_N - 1u;
            rare |= (t - 0x1p23f != n) | (raw >= TALLY_K_DM_BW_LANES_TABLE_N);
            x[e][c] = psi_tab[(row * 4u + c) * TALLY_K_GROUP_SIZE + i] - psi_a[c];
        }
    }
    return rare;
}

/*
 * The step's weights G_b (R_b + T_bv) (tally_dm_grad_weight's operations;
 * R_b, G_b at row_rg[e], row_rg[4 + e]) of its terms x, added to the lane
 * accumulators acc in row order.
 */
TALLY_FN void tally_k_dm_bw_lanes_weights(const float x[4][4], float acc[4], tally_u32 rows,
                                          TALLY_LOCAL const float *row_rg)
{
#pragma unroll
    for (tally_u32 e = 0; e < 4u; e++) {
        const float R = row_rg[e], G = row_rg[4u + e];
#pragma unroll
        for (tally_u32 c = 0; c < 4u; c++) {
            const float w = G * (R + x[e][c]);
            acc[c] = e < rows ? acc[c] + w : acc[c];
        }
    }
}

/*
 * A shared alpha's gradient in one pass over the counts, for rows of at
 * most 4 * 256 columns (one tile of one-quad lanes: row_lanes of them, the
 * row plan). A unit is lane j of tile t of level 0 of the column plan
 * (lanes, qpl, tiles) for every column at once: the rows of the quads
 * first + q lanes + j, q < qpl, four at a time. Work-item i holds columns
 * 4i .. 4i + 3 of each of those rows, which is lane i of the row plan, so
 * the group sums each row's counts N by the row tree (in local memory)
 * while its counts stay in registers, computes R_b = tally_dm_grad_row(A,
 * N_b) and G_b, and adds each weight G_b (R_b + T_bv) to column v's lane
 * accumulator in row order: the plan's sums, so the same bits as
 * tally_k_dm_bw_columns after the separate row trees, with the counts read
 * once instead of twice. The lane sums of the unit go to out[out_off + (t
 * lanes + j) V + v]; tally_k_dm_bw_lane_tree takes the column tree's steps
 * over them. psi(k + a_v) is copied from the tables of tally_k_dm_bw_prep
 * to local memory once a group, work-item i's own columns only, and laid
 * out so that a warp's reads never share a bank whatever the counts.
 */
TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_DM_BW_LANES_GROUPS_PER_CU) void tally_k_dm_bw_lanes(TALLY_K_PARAMS(dm_bw_lanes))
{
    TALLY_LOCAL_ARRAY(float, psi_tab, TALLY_K_DM_BW_LANES_TABLE_N * 4u * TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, nsum, 4u * TALLY_K_GROUP_SIZE);
    TALLY_LOCAL_ARRAY(float, row_rg, 8u);
#if TALLY_HAS_STAGE
    TALLY_STAGE(stage);
    TALLY_LOCAL tally_f4 *st = stage + TALLY_LID();
#else
    TALLY_LOCAL tally_f4 *st = 0; /* never read: no stage (staged is 0) */
#endif
    const tally_u32 i = TALLY_LID();
    /* The stage holds the next step's counts where loads ahead do not. */
    const tally_u32 staged = !TALLY_K_DM_BW_LANES_AHEAD && stage_rows != 0u;
    const tally_u64 row_quads = (V + 3u) / 4u, quads = (B + 3u) / 4u, v0 = 4u * (tally_u64)i;
    const tally_u32 ncols = i < row_quads ? (V - v0 < 4u ? (tally_u32)(V - v0) : 4u) : 0u;
    TALLY_GLOBAL const float *a_of = pre + pre_off, *tab = a_of + V;
    const tally_u64 units = tiles * lanes;
    /* The group's first unit's first step is copied while the tables are
     * filled; from then on each unit's last step starts the copy of the
     * next unit's first (tally_k_dm_bw_lanes_step_quad). */
    tally_u32 first_staged = 0u;
#if TALLY_HAS_STAGE
    if (staged) {
        tally_k_dm_bw_lanes_stage(st, counts, c_off, c_stride, B, quads,
                                  tally_k_dm_bw_lanes_unit_quad(TALLY_GROUP_ID(), units, lanes, qpl, quads), i, ncols);
        first_staged = 1u;
    }
#endif
    float psi_a[4];
#pragma unroll
    for (tally_u32 c = 0; c < 4u; c++) {
        for (tally_u32 k = 0; k < TALLY_K_DM_BW_LANES_TABLE_N; k++)
            psi_tab[(k * 4u + c) * TALLY_K_GROUP_SIZE + i] = c < ncols ? tab[k * V + v0 + c] : 0.0f;
        psi_a[c] = c < ncols ? tab[v0 + c] : 0.0f;
    }
    /* Whole steps take tally_k_dm_bw_lanes_terms_whole where it gives the
     * same bits: the work-item's psi(a) finite (0 past ncols). */
    const int whole_ok = tally_isfinite(psi_a[0]) & tally_isfinite(psi_a[1]) & tally_isfinite(psi_a[2]) &
                         tally_isfinite(psi_a[3]);
    const float A = sums[a_off];
    const float psi_A = tally_digammaf(A);
    const float g_shared = per_row_grad ? 0.0f : tally_grad_scale(g[g_off], divide, divisor);
    for (tally_u64 u = TALLY_GROUP_ID(); u < units; u += TALLY_GROUP_COUNT()) {
        const tally_u64 t = u / lanes, j = u % lanes, first = t * lanes * qpl, quad0 = first + j;
        const tally_u64 next0 = tally_k_dm_bw_lanes_unit_quad(u + TALLY_GROUP_COUNT(), units, lanes, qpl, quads);
        float acc[4];
#pragma unroll
        for (tally_u32 c = 0; c < 4u; c++) acc[c] = -0.0f; /* -0 + x is x: the lane's first term */
        float x[4][4];
#if TALLY_HAS_STAGE
        if (staged && !first_staged) tally_k_dm_bw_lanes_stage(st, counts, c_off, c_stride, B, quads, quad0, i, ncols);
#endif
        tally_u32 rows = tally_k_dm_bw_lanes_take(st, staged, counts, c_off, c_stride, vec4, B, quads, quad0,
                                                  tally_k_dm_bw_lanes_step_quad(quad0, 1u, lanes, qpl, next0, quads),
                                                  i, ncols, x);
        /* Whether the next unit's first step is on its way: its copy
         * starts with the take of this unit's last step where all qpl
         * exist. */
        first_staged = qpl == 1u && rows > 0u;
        for (tally_u32 q = 0; rows > 0u; q++) {
            const tally_u64 row0 = 4u * (quad0 + (tally_u64)q * lanes);
#pragma unroll
            for (tally_u32 e = 0; e < 4u; e++) {
                /* Lane i of the row plan: its quad's counts in order. */
                float n = x[e][0];
#pragma unroll
                for (tally_u32 c = 1; c < 4u; c++) n = c < ncols ? n + x[e][c] : n;
                nsum[e * TALLY_K_GROUP_SIZE + i] = n;
            }
#if TALLY_K_DM_BW_LANES_AHEAD
            /* The next step's counts are loaded before this step's trees
             * and weights, so that their latency is hidden behind them. */
            float x_next[4][4];
            const tally_u64 next = q + 1u < qpl ? first + (tally_u64)(q + 1u) * lanes + j : quads;
            const tally_u32 rows_next =
                tally_k_dm_bw_lanes_load(counts, c_off, c_stride, vec4, B, quads, next, i, ncols, x_next);
#endif
            float n_row = 0.0f; /* work-item i < rows: N of the step's row i */
#if TALLY_HAS_WARP_SHUFFLE && TALLY_K_DM_BW_LANES_WARP_TREES
            if (row_quads == TALLY_K_GROUP_SIZE) {
                /* A row of 256 active lanes: the first warp takes the
                 * rows' trees, the steps 128, 64 and 32 from local memory
                 * (tally_k_tree_three_steps), then 16 .. 1 by shuffles, as
                 * tally_k_reduce_rows_warp does: the same pairs in the same
                 * order. Work-item e then holds row e's N, and the rows'
                 * psi(N + A) follow in the same warp with no barrier between
                 * (one barrier a step instead of eight). The four trees run
                 * side by side whatever `rows` (a short step's missing rows
                 * sum its zeros, never used). */
                TALLY_BARRIER();
                if (i < 32u) {
                    float n[4];
#pragma unroll
                    for (tally_u32 e = 0; e < 4u; e++)
                        n[e] = tally_k_tree_three_steps(nsum + e * TALLY_K_GROUP_SIZE, i, 32u, TALLY_COMBINE_SUM);
                    for (tally_u32 s = 16u; s > 0u; s >>= 1) {
#pragma unroll
                        for (tally_u32 e = 0; e < 4u; e++) {
                            const float other = TALLY_WARP_SHUFFLE(n[e], (i + s) & 31u);
                            if (i < s) n[e] = n[e] + other;
                        }
                    }
#pragma unroll
                    for (tally_u32 e = 0; e < 4u; e++) {
                        const float row_n = TALLY_WARP_SHUFFLE(n[e], 0u);
                        if (i == e) n_row = row_n;
                    }
                }
            } else
#endif
            {
                /* The row trees of the rows' N, side by side. */
                for (tally_u32 s = row_lanes >> 1; s > 0u; s >>= 1) {
                    TALLY_BARRIER();
                    if (i < s && (tally_u64)(i + s) < row_quads) {
                        for (tally_u32 e = 0; e < rows; e++)
                            nsum[e * TALLY_K_GROUP_SIZE + i] =
                                nsum[e * TALLY_K_GROUP_SIZE + i] + nsum[e * TALLY_K_GROUP_SIZE + i + s];
                    }
                }
                TALLY_BARRIER();
                if (i < rows) n_row = nsum[i * TALLY_K_GROUP_SIZE];
            }
            /* The rows' psi(N + A) side by side in the first warp: one
             * stream of instructions for the four. */
            if (i < rows) {
                row_rg[i] = tally_dm_grad_row_of(psi_A, A, n_row);
                row_rg[4u + i] = per_row_grad ? g[g_off + (row0 + i) * g_stride] : g_shared;
            }
            /* A whole step (four rows) takes the terms without tests, and
             * its weights compile with rows a constant. A step with a count
             * that the table lacks takes them again from its counts, read
             * back. The general form has one call site: with two, PoCL
             * 3.1 returned NaN gradients for every shared alpha, even with
             * the whole-step branch never taken (a cause not found). The
             * terms need no row value, so they come before the barrier
             * that publishes R and G: the other warps compute them while
             * the first warp computes the rows' psi(N + A). */
            int general = rows != 4u || !whole_ok;
            if (!general && tally_k_dm_bw_lanes_terms_whole(x, i, psi_tab, psi_a)) {
#pragma unroll
                for (tally_u32 e = 0; e < 4u; e++)
                    tally_k_dm_bw_load_quad(counts + c_off + (row0 + e) * c_stride, i, ncols, 0, x[e]);
                general = 1;
            }
            if (general)
                tally_k_dm_bw_lanes_terms(x, rows, ncols, i, psi_tab, psi_a, counts, c_off, c_stride, row0, v0, a_of);
            TALLY_BARRIER();
            if (rows == 4u)
                tally_k_dm_bw_lanes_weights(x, acc, 4u, row_rg);
            else
                tally_k_dm_bw_lanes_weights(x, acc, rows, row_rg);
#if TALLY_K_DM_BW_LANES_AHEAD
#pragma unroll
            for (tally_u32 e = 0; e < 4u; e++) {
#pragma unroll
                for (tally_u32 c = 0; c < 4u; c++) x[e][c] = x_next[e][c];
            }
            rows = rows_next;
#else
            const tally_u64 next = q + 1u < qpl ? quad0 + (tally_u64)(q + 1u) * lanes : quads;
#if TALLY_HAS_PREFETCH_L2 && TALLY_K_DM_BW_LANES_PREFETCH
            if (staged && (i & 31u) == 0u && (i >> 5) < 4u) {
                /* Lane 0 of warp e asks for row e of the step that many
                 * steps ahead, in this unit or the next, where it exists. */
                const tally_u64 quad = tally_k_dm_bw_lanes_step_quad(quad0, q + TALLY_K_DM_BW_LANES_PREFETCH, lanes,
                                                                     qpl, next0, quads);
                const tally_u64 row = 4u * quad + (i >> 5);
                if (quad < quads && row < B) TALLY_PREFETCH_L2(counts + c_off + row * c_stride, 4u * V);
            }
#endif
            rows = tally_k_dm_bw_lanes_take(st, staged, counts, c_off, c_stride, vec4, B, quads, next,
                                            tally_k_dm_bw_lanes_step_quad(quad0, q + 2u, lanes, qpl, next0, quads), i,
                                            ncols, x);
            if (q + 2u == qpl) first_staged = rows > 0u;
#endif
        }
        TALLY_GLOBAL float *dst = out + out_off + (t * lanes + j) * V + v0;
#pragma unroll
        for (tally_u32 c = 0; c < 4u; c++)
            if (c < ncols) dst[c] = acc[c];
    }
}

/*
 * The column tree's steps over the lane sums of tally_k_dm_bw_lanes
 * (part_in[p_off + (t lanes + j) V + v], lane j of tile t of column v), as
 * tally_k_dm_bw_columns takes them: a unit is TALLY_K_DM_BW_COLS adjacent
 * columns of one tile, work-item (c, r) holding lanes r + R m. The tile's
 * partial goes to out[out_off + v * tiles + t], or with scale (one tile)
 * a_v times it to out[out_off + v].
 */
TALLY_KERNEL void tally_k_dm_bw_lane_tree(TALLY_K_PARAMS(dm_bw_lane_tree))
{
    TALLY_LOCAL_ARRAY(float, part, TALLY_K_DM_BW_RESIDUES * TALLY_K_DM_BW_COLS);
    const tally_k_dm_bw_units L = tally_k_dm_bw_units_of(TALLY_LID(), lanes, B, V);
    const tally_u32 c = L.c, r = L.r, R = L.R, M = L.M;
    const tally_u64 quads = L.quads, blocks = L.blocks;
    for (tally_u64 u = TALLY_GROUP_ID(); u < blocks * tiles; u += TALLY_GROUP_COUNT()) {
        const tally_u64 t = u % tiles, v = (u / tiles) * TALLY_K_DM_BW_COLS + c;
        const int has_col = v < V;
        const tally_u64 left = quads - t * lanes * qpl;
        const tally_u32 active = left < lanes ? (tally_u32)left : lanes;
        float acc[TALLY_K_DM_BW_LANES_PER_ITEM];
#pragma unroll
        for (tally_u32 m = 0; m < TALLY_K_DM_BW_LANES_PER_ITEM; m++) {
            const tally_u32 lane = r + R * m;
            acc[m] = has_col && r < R && m < M && lane < active ? part_in[p_off + (t * lanes + lane) * V + v] : -0.0f;
        }
        tally_k_dm_bw_column_tree(acc, part, c, r, R, M, active);
        if (r == 0u && has_col) {
            if (scale) out[out_off + v] = tally_canonical(tally_expf(la[la_off + v]) * part[c]);
            else out[out_off + v * tiles + t] = part[c];
        }
        TALLY_BARRIER(); /* the next unit rewrites part */
    }
}

/* out[v] = exp(log_alpha[v]) * s[v]: a shared alpha's gradient from the
 * column sums of the weights. */
TALLY_KERNEL void tally_k_dm_bw_scale(TALLY_K_PARAMS(dm_bw_scale))
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 v = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); v < V; v += step)
        out[out_off + v] = tally_canonical(tally_expf(la[la_off + v]) * s[s_off + v]);
}


/*
 * The middle of tally_k_gmm_bw_rows for one dimension d of a row, between
 * its two passes over the components: dz = -acc (the sum over k of the
 * gradient parts a) stored at *gz_at when wanted, then, when mu's or
 * log_var's gradient is wanted (else it returns 0), G = dz plus the
 * upstream gradient of z (*gzi_at) and, for the sample, t = the noise eps
 * (stream element `element`) times tally_gauss_std of the drawn
 * component's log_var (*lv_c); 0 without a sample.
 */
TALLY_FN int tally_k_gmm_bw_dim(float acc, TALLY_GLOBAL float *gz_at, TALLY_GLOBAL const float *gzi_at, tally_u32 flags,
                                TALLY_GLOBAL const float *lv_c, tally_u64 seed, tally_u64 subsequence,
                                tally_u64 element, float *G, float *t)
{
    const float dz = -acc;
    if (flags & TALLY_K_GMM_BW_WANT_GZ) *gz_at = tally_canonical(dz);
    if (!(flags & (TALLY_K_GMM_BW_WANT_MU | TALLY_K_GMM_BW_WANT_LV))) return 0;
    *G = (flags & TALLY_K_GMM_BW_HAS_GZ_IN) ? *gzi_at + dz : dz;
    *t = 0.0f;
    if (flags & TALLY_K_GMM_BW_SAMPLE) *t = tally_k_gauss_std(*lv_c) * tally_stream_normal(seed, subsequence, element);
    return 1;
}

/* tally_gmm_grad_elem's bits with the mixture kernels' exponential
 * (TALLY_K_GMM_EXPF, kernels/gmm.h). */
TALLY_DEFINE_GMM_GRAD_ELEM(tally_k_gmm_grad_elem, TALLY_K_GMM_EXPF)

/* Stores element (k, d)'s gradients with respect to mu and log_var, the
 * drawn component (drawn) taking G and G * (0.5 t) of the sample's path. */
TALLY_FN void tally_k_gmm_bw_store(tally_grad2 e, int drawn, float G, float t, tally_u32 flags,
                                   TALLY_GLOBAL float *gmu_at, TALLY_GLOBAL float *glv_at)
{
    if (drawn) {
        e.a = e.a + G;
        e.b = e.b + G * (0.5f * t);
    }
    if (flags & TALLY_K_GMM_BW_WANT_MU) *gmu_at = tally_canonical(e.a);
    if (flags & TALLY_K_GMM_BW_WANT_LV) *glv_at = tally_canonical(e.b);
}

/* Work-items per row in tally_k_gmm_bw_rows: the smallest power of two
 * >= D, 1 .. the group size (the launcher sizes its grid with the same). */
TALLY_FN tally_u32 tally_k_gmm_bw_width(tally_u64 D)
{
    tally_u32 w = 1u;
    while (w < TALLY_K_GROUP_SIZE && (tally_u64)w < D) w <<= 1;
    return w;
}

/*
 * Row b's component weights, once a row rather than once an element
 * (host_backward.c's gmm_bw_rows computes them once a row too): from the
 * row's per-component sums s_k at sc[s_off + b*K + k] (the forward's
 * D-trees), the logits and their logsumexp llse (K > 1), c_k =
 * tally_gmm_grad_weight, written over s_k (nothing reads s after this),
 * and, when wanted, the logit weights to sc[w_off + b*K + k] for the column
 * trees. A row whose sample drew no component (pick < 0) gets NaN logit
 * weights; tally_k_gmm_bw_row does not read its c_k.
 */
TALLY_FN void tally_k_gmm_bw_row_weights(TALLY_GLOBAL float *sc, tally_u64 b, TALLY_GLOBAL const float *lg, float llse,
                                         TALLY_GLOBAL const float *gq, tally_u64 gq_stride, tally_u64 s_off,
                                         tally_u64 picks_off, tally_u64 w_off, tally_u64 K, tally_u32 flags)
{
    TALLY_GLOBAL float *s = sc + s_off + b * K;
    const int want_w = (flags & TALLY_K_GMM_BW_WANT_W) != 0u;
    if ((flags & TALLY_K_GMM_BW_SAMPLE) && ((TALLY_GLOBAL const tally_i32 *)(sc + picks_off))[b] < 0) {
        if (want_w)
            for (tally_u64 k = 0; k < K; k++) sc[w_off + b * K + k] = TALLY_F32_NAN;
        return;
    }
    const float L = tally_gmm_row_lse(s, lg, llse, K);
    const float g = (flags & TALLY_K_GMM_BW_HAS_GQ) ? gq[b * gq_stride] : 0.0f;
    for (tally_u64 k = 0; k < K; k++) {
        const float s_k = s[k];
        if (want_w) sc[w_off + b * K + k] = tally_gmm_logit_weight(g, s_k, lg[k], llse, L);
        s[k] = tally_gmm_grad_weight(g, s_k, K > 1u ? lg[k] : 0.0f, llse, L, K);
    }
}

/*
 * Work-item j of the `width` that take row b (host_backward.c's gmm_bw_rows,
 * element for element): from the row's component weights cw[k]
 * (tally_k_gmm_bw_row_weights) and, for the sample, the row's pick c and z
 * as the forward drew it, the gradients with respect to z (log_prob), mu
 * and log_var of dimensions j, j + width, ... The sample's std * eps is
 * formed again from the row's normals.
 */
TALLY_FN void tally_k_gmm_bw_row(tally_u64 b, tally_u32 j, tally_u32 width, TALLY_GLOBAL const float *cw, tally_i32 c,
                                 TALLY_GLOBAL const float *zr, TALLY_GLOBAL const float *mr,
                                 TALLY_GLOBAL const float *lr, TALLY_GLOBAL const float *gzi, tally_u64 gzi_stride,
                                 tally_u64 B, tally_u64 K, tally_u64 D, tally_u64 seed, tally_u64 subsequence,
                                 tally_u64 offset, tally_u32 flags, TALLY_GLOBAL float *gz, tally_u64 gz_stride,
                                 TALLY_GLOBAL float *gmu, tally_u64 gmu_stride, TALLY_GLOBAL float *glv,
                                 tally_u64 glv_stride)
{
    const int sample = (flags & TALLY_K_GMM_BW_SAMPLE) != 0u;
    const tally_u64 B4 = (B + 3u) & ~(tally_u64)3u, D2 = D + (D & 1u);
    if (sample && c < 0) {
        for (tally_u64 i = j; i < K * D; i += width) {
            if (flags & TALLY_K_GMM_BW_WANT_MU) gmu[b * gmu_stride + i] = TALLY_F32_NAN;
            if (flags & TALLY_K_GMM_BW_WANT_LV) glv[b * glv_stride + i] = TALLY_F32_NAN;
        }
        return;
    }
    for (tally_u64 d = j; d < D; d += width) {
        const float zd = zr[d];
        /* Pass 1: acc, the sum over k of the gradient parts a. The first
         * TALLY_K_GMM_BW_KEEP components' parts stay in registers for pass
         * 2; later ones are computed again there (the same operations on
         * the same values either way). */
        float keep_a[TALLY_K_GMM_BW_KEEP_SLOTS], keep_b[TALLY_K_GMM_BW_KEEP_SLOTS];
        float acc = 0.0f;
#pragma unroll
        for (tally_u32 k = 0; k < TALLY_K_GMM_BW_KEEP; k++) {
            if (k < K) {
                const tally_grad2 e = tally_k_gmm_grad_elem(zd, mr[k * D + d], lr[k * D + d], cw[k]);
                keep_a[k] = e.a;
                keep_b[k] = e.b;
                acc = k == 0u ? e.a : acc + e.a;
            }
        }
        for (tally_u64 k = TALLY_K_GMM_BW_KEEP; k < K; k++) {
            const tally_grad2 e = tally_k_gmm_grad_elem(zd, mr[k * D + d], lr[k * D + d], cw[k]);
            acc = k == 0u ? e.a : acc + e.a;
        }
        float G, t;
        if (!tally_k_gmm_bw_dim(acc, gz + b * gz_stride + d, gzi + b * gzi_stride + d, flags,
                                lr + (tally_u64)c * D + d, seed, subsequence, offset + B4 + b * D2 + d, &G, &t))
            continue;
        TALLY_GLOBAL float *gmu_row = gmu + b * gmu_stride + d;
        TALLY_GLOBAL float *glv_row = glv + b * glv_stride + d;
#pragma unroll
        for (tally_u32 k = 0; k < TALLY_K_GMM_BW_KEEP; k++) {
            if (k < K) {
                tally_grad2 e;
                e.a = keep_a[k];
                e.b = keep_b[k];
                tally_k_gmm_bw_store(e, sample && (tally_u64)c == k, G, t, flags, gmu_row + k * D, glv_row + k * D);
            }
        }
        for (tally_u64 k = TALLY_K_GMM_BW_KEEP; k < K; k++) {
            const tally_grad2 e = tally_k_gmm_grad_elem(zd, mr[k * D + d], lr[k * D + d], cw[k]);
            tally_k_gmm_bw_store(e, sample && (tally_u64)c == k, G, t, flags, gmu_row + k * D, glv_row + k * D);
        }
    }
}

/* Every row's weights (tally_k_gmm_bw_row_weights), a row a work-item; the
 * logits' logsumexp at scratch[lse_off] when K > 1. */
TALLY_KERNEL void tally_k_gmm_bw_weights(TALLY_K_PARAMS(gmm_bw_weights))
{
    TALLY_GLOBAL float *sc = scratch + scratch_off;
    const float llse = K > 1u ? sc[lse_off] : 0.0f;
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 b = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); b < B; b += step)
        tally_k_gmm_bw_row_weights(sc, b, logits + logits_off, llse, gq + gq_off, gq_stride, s_off, picks_off, w_off,
                                   K, flags);
}

/* The mixture's elementwise gradients, a segment of `width` work-items a
 * row (the smallest power of two >= D, at most the group, so that short
 * rows do not leave most of a group idle), from the component weights at
 * scratch[c_off + b*K + k], the picks (int32, at scratch + picks_off) and z. */
TALLY_KERNEL void tally_k_gmm_bw_rows(TALLY_K_PARAMS(gmm_bw_rows))
{
    TALLY_GLOBAL const float *sc = scratch + scratch_off;
    TALLY_GLOBAL const tally_i32 *picks = (TALLY_GLOBAL const tally_i32 *)(sc + picks_off);
    const tally_u32 lid = TALLY_LID();
    const int sample = (flags & TALLY_K_GMM_BW_SAMPLE) != 0u;
    const tally_u32 width = tally_k_gmm_bw_width(D);
    const tally_u32 rows_per_group = TALLY_K_GROUP_SIZE / width;
    const tally_u32 seg = lid / width, j = lid - seg * width;
    for (tally_u64 first = TALLY_GROUP_ID() * rows_per_group; first < B;
         first += TALLY_GROUP_COUNT() * rows_per_group) {
        const tally_u64 b = first + seg;
        if (b >= B) continue;
        tally_k_gmm_bw_row(b, j, width, sc + c_off + b * K, sample ? picks[b] : -1, z + z_off + b * z_stride,
                           mu + mu_off + b * mu_stride, lv + lv_off + b * lv_stride, gzi + gzi_off, gzi_stride, B, K,
                           D, seed, subsequence, offset, flags, gz + gz_off, gz_stride, gmu + gmu_off, gmu_stride,
                           glv + glv_off, glv_stride);
    }
}

/*
 * The mixture's backward a warp a row (kernels/gmm_warp.h: rows that fit a
 * warp): the draw when sampling, the D-trees and the row's logsumexp as
 * the forward takes them, then what tally_k_gmm_bw_row_weights and
 * tally_k_gmm_bw_row do, with mu and log_var read once: work-item k forms
 * component k's weight c_k (and its logit weight, to w_off), and
 * work-item l the gradients of its quad, per dimension the sum over k of
 * the parts a in k order. y and exp(-lv/2) are formed once an element for
 * both the term and its gradient (tally_gauss_term_of, tally_gmm_grad_of):
 * the same operations on the same values, so the same bits. With
 * TALLY_K_GMM_BW_STAGED the rows come through the stage
 * (tally_k_gmm_warp_row).
 */
TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_GMM_BW_WARP_GROUPS_PER_CU) void tally_k_gmm_bw_warp(TALLY_K_PARAMS(gmm_bw_warp))
{
#if TALLY_HAS_WARP_SHUFFLE
    TALLY_GLOBAL float *sc = scratch + scratch_off;
    TALLY_GLOBAL const float *lg = logits + logits_off;
    const tally_u32 l = TALLY_LID() & 31u;
    const int sample = (flags & TALLY_K_GMM_BW_SAMPLE) != 0u;
    const int want_w = (flags & TALLY_K_GMM_BW_WANT_W) != 0u;
    const int want_grads = (flags & (TALLY_K_GMM_BW_WANT_MU | TALLY_K_GMM_BW_WANT_LV)) != 0u;
    const tally_u64 B4 = (B + 3u) & ~(tally_u64)3u, D2 = D + (D & 1u);
    const tally_u32 quads = (tally_u32)(D / 4u);
    const int has = l < quads;
    const float llse = K > 1u ? sc[lse_off] : 0.0f;
    /* Work-item k < K's logit (read where the weights need one). */
    const float lg_l = (l < K && (K > 1u || want_w)) ? lg[l] : 0.0f;
    tally_k_gmm_pick_table pick = {0.0f, 0.0f, 0.0f, 0, 0};
    if (sample && K > 1u) pick = tally_k_gmm_warp_pick_table(lg, K, l);
    const tally_u64 per_group = TALLY_K_GROUP_SIZE / 32u, step = TALLY_GROUP_COUNT() * per_group;
    const tally_u64 first = TALLY_GROUP_ID() * per_group + TALLY_LID() / 32u;
    const int staged = (flags & TALLY_K_GMM_BW_STAGED) != 0u;
    TALLY_STAGE(stage);
    TALLY_LOCAL tally_f4 *st = stage + (TALLY_LID() / 32u) * TALLY_K_GMM_WARP_STAGE_QUADS;
    if (staged && first < B)
        tally_k_gmm_warp_stage_row(st, mu + mu_off + first * mu_stride, lv + lv_off + first * lv_stride, K, D, l, has);
    /* The row loop is the same for the 32 work-items of a warp, so each
     * shuffle has its whole warp. */
    float u_batch = 0.0f;
    tally_u32 turn = 0;
    for (tally_u64 b = first; b < B; b += step, turn = (turn + 1u) & 31u) {
        float my[TALLY_K_GMM_WARP_MAX_K][4], li[TALLY_K_GMM_WARP_MAX_K][4];
        tally_k_gmm_warp_row(st, staged, mu + mu_off, mu_stride, lv + lv_off, lv_stride, b, step, B, K, D, l, has, my,
                             li);
        float zq[4] = {0.0f, 0.0f, 0.0f, 0.0f}, tq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        tally_i32 c = -1;
        if (sample) {
            const float u = K > 1u ? tally_k_gmm_warp_uniform(&u_batch, turn, b, step, B, seed, subsequence, offset, l)
                                   : 0.0f;
            c = tally_k_gmm_warp_draw(&pick, u, K, seed, subsequence, offset, B4, D2, b, l, has, my, li, zq, tq);
            if (c < 0) {
                /* No component: NaN gradients and logit weights, as
                 * tally_k_gmm_bw_row and tally_k_gmm_bw_row_weights give. */
                for (tally_u64 i = l; i < K * D; i += 32u) {
                    if (flags & TALLY_K_GMM_BW_WANT_MU) gmu[gmu_off + b * gmu_stride + i] = TALLY_F32_NAN;
                    if (flags & TALLY_K_GMM_BW_WANT_LV) glv[glv_off + b * glv_stride + i] = TALLY_F32_NAN;
                }
                if (want_w && l < K) sc[w_off + b * K + l] = TALLY_F32_NAN;
                continue;
            }
        } else if (has) {
            const tally_f4 z4 = TALLY_LOAD_F4(z + z_off + b * z_stride, l);
            zq[0] = z4.x, zq[1] = z4.y, zq[2] = z4.z, zq[3] = z4.w;
        }
        float s[TALLY_K_GMM_WARP_MAX_K], s_l;
        tally_k_gmm_warp_sums(zq, my, li, K, lanes, quads, l, s);
        const float L = tally_k_gmm_warp_lse(s, lg_l, llse, K, l, &s_l);
        /* Work-item k's weights, then every work-item has every c_k. */
        const float g = (flags & TALLY_K_GMM_BW_HAS_GQ) ? gq[gq_off + b * gq_stride] : 0.0f;
        if (want_w && l < K) sc[w_off + b * K + l] = tally_gmm_logit_weight(g, s_l, lg_l, llse, L);
        const float c_l = tally_gmm_grad_weight(g, s_l, K > 1u ? lg_l : 0.0f, llse, L, K);
        float cw[TALLY_K_GMM_WARP_MAX_K];
#pragma unroll
        for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) cw[k] = TALLY_WARP_SHUFFLE(c_l, k);
        if (!has) continue;
        /* The gradients of dimension 4l + w: a and b of every component
         * (into my and li), dz = -(the sum of the a in k order), then the
         * drawn component's terms (tally_k_gmm_bw_store's sample path). */
#pragma unroll
        for (tally_u32 w = 0; w < 4u; w++) {
            float acc = 0.0f;
#pragma unroll
            for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
                if (k < K) {
                    const tally_grad2 e = tally_gmm_grad_of(my[k][w], li[k][w], cw[k]);
                    my[k][w] = e.a;
                    li[k][w] = e.b;
                    acc = k == 0u ? e.a : acc + e.a;
                }
            }
            const float dz = -acc;
            const tally_u64 d = 4u * (tally_u64)l + w;
            if (flags & TALLY_K_GMM_BW_WANT_GZ) gz[gz_off + b * gz_stride + d] = tally_canonical(dz);
            if (!want_grads) continue;
            const float G = (flags & TALLY_K_GMM_BW_HAS_GZ_IN) ? gzi[gzi_off + b * gzi_stride + d] + dz : dz;
#pragma unroll
            for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
                if ((tally_u64)c == k) {
                    my[k][w] = my[k][w] + G;
                    li[k][w] = li[k][w] + G * (0.5f * tq[w]);
                }
            }
        }
        if (!want_grads) continue;
#pragma unroll
        for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
            if (k >= K) continue;
            if (flags & TALLY_K_GMM_BW_WANT_MU) {
                tally_f4 o;
                o.x = tally_canonical(my[k][0]), o.y = tally_canonical(my[k][1]);
                o.z = tally_canonical(my[k][2]), o.w = tally_canonical(my[k][3]);
                TALLY_STORE_F4(gmu + gmu_off + b * gmu_stride + k * D, l, o);
            }
            if (flags & TALLY_K_GMM_BW_WANT_LV) {
                tally_f4 o;
                o.x = tally_canonical(li[k][0]), o.y = tally_canonical(li[k][1]);
                o.z = tally_canonical(li[k][2]), o.w = tally_canonical(li[k][3]);
                TALLY_STORE_F4(glv + glv_off + b * glv_stride + k * D, l, o);
            }
        }
    }
#endif
}

#endif /* TALLY_KERNELS_BACKWARD_H */
