/*
 * kernels/gmm_warp.h - the diagonal Gaussian mixture a warp a row, where
 * the kernels have warp shuffles (CUDA; elsewhere the kernels' bodies are
 * empty and the backends never launch them).
 *
 * A row fits a warp when D is a multiple of 4 up to 128 (its D plan is one
 * tile of `lanes` one-quad lanes, lanes <= 32) and K <=
 * TALLY_K_GMM_WARP_MAX_K, with every row on a 16-byte boundary. Work-item l
 * of the warp holds quad l (dimensions 4l .. 4l + 3) of each component's
 * mu and log_var and does for its dimensions what kernels/gmm.h's kernels
 * do, with no barrier:
 * - the sample's draw (tally_k_gmm_pick, tally_k_gmm_noise): the row's
 *   component c from the uniform at stream element offset + b, z = mu_c +
 *   std_c eps with the normals at offset + B4 + b D2 + d;
 * - the D-trees (tally_k_gmm_tiles): the lane's fold of its quad's
 *   Gaussian terms, then the plan's tree over the lanes by shuffles (step s
 *   pairs lane j < s with lane j + s < quads, the same pairs in the same
 *   order);
 * - the row's logsumexp over v_k = (logit_k - llse) + s_k in k order
 *   (tally_lse_seq's operations), work-item k forming exp(v_k - m).
 * The same operations on the same values, so the same bits as the
 * separate launches. kernels/backward.h's tally_k_gmm_bw_warp builds the
 * backward on the same pieces.
 */
#ifndef TALLY_KERNELS_GMM_WARP_H
#define TALLY_KERNELS_GMM_WARP_H

#include "gmm.h"

#if TALLY_HAS_WARP_SHUFFLE

/* mu and log_var of quad l of each component of row b into my and li (0
 * past K and for work-items past the row's quads: has == 0). */
TALLY_FN void tally_k_gmm_warp_load(TALLY_GLOBAL const float *mu_row, TALLY_GLOBAL const float *lv_row, tally_u64 K,
                                    tally_u64 D, tally_u32 l, int has, float my[TALLY_K_GMM_WARP_MAX_K][4],
                                    float li[TALLY_K_GMM_WARP_MAX_K][4])
{
#pragma unroll
    for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
        if (k < K && has) {
            const tally_f4 m4 = TALLY_LOAD_F4(mu_row + k * D, l);
            const tally_f4 l4 = TALLY_LOAD_F4(lv_row + k * D, l);
            my[k][0] = m4.x, my[k][1] = m4.y, my[k][2] = m4.z, my[k][3] = m4.w;
            li[k][0] = l4.x, li[k][1] = l4.y, li[k][2] = l4.z, li[k][3] = l4.w;
        } else {
#pragma unroll
            for (tally_u32 w = 0; w < 4u; w++) my[k][w] = li[k][w] = 0.0f;
        }
    }
}

/* Starts copying quad l of each component's mu and log_var of a row into
 * the warp's stage st (slot 32 (2 k) + l for mu, 32 (2 k + 1) + l for
 * log_var: a warp's 32 quads of one array are 512 contiguous bytes). */
TALLY_FN void tally_k_gmm_warp_stage_row(TALLY_LOCAL tally_f4 *st, TALLY_GLOBAL const float *mu_row,
                                         TALLY_GLOBAL const float *lv_row, tally_u64 K, tally_u64 D, tally_u32 l,
                                         int has)
{
#pragma unroll
    for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
        if (k < K && has) {
            TALLY_STAGE_COPY(st + 64u * k + l, (TALLY_GLOBAL const tally_f4 *)(mu_row + k * D) + l);
            TALLY_STAGE_COPY(st + 64u * k + 32u + l, (TALLY_GLOBAL const tally_f4 *)(lv_row + k * D) + l);
        }
    }
}

/*
 * Row b's mu and log_var into my and li (tally_k_gmm_warp_load's values),
 * in the row loop b = first, first + step, ... of the caller's warp. With
 * `staged` they come from the warp's stage st, into which the previous
 * call (or the caller, before the loop, for the first row) started copying
 * row b; this call then starts copying row b + step into the same slots,
 * so that the next row's bytes are in flight while this row computes (the
 * backward warp kernel is bound by that latency otherwise: GPU run 25). Each
 * work-item reads back only its own copies, and the warp barrier orders
 * those reads before the copies that overwrite them.
 */
TALLY_FN void tally_k_gmm_warp_row(TALLY_LOCAL tally_f4 *st, int staged, TALLY_GLOBAL const float *mu,
                                   tally_u64 mu_stride, TALLY_GLOBAL const float *lv, tally_u64 lv_stride, tally_u64 b,
                                   tally_u64 step, tally_u64 B, tally_u64 K, tally_u64 D, tally_u32 l, int has,
                                   float my[TALLY_K_GMM_WARP_MAX_K][4], float li[TALLY_K_GMM_WARP_MAX_K][4])
{
    if (!staged) {
        tally_k_gmm_warp_load(mu + b * mu_stride, lv + b * lv_stride, K, D, l, has, my, li);
        return;
    }
    TALLY_STAGE_WAIT();
#pragma unroll
    for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
        const int here = k < K && has;
        const tally_f4 m4 = st[64u * k + l], l4 = st[64u * k + 32u + l];
        my[k][0] = here ? m4.x : 0.0f, my[k][1] = here ? m4.y : 0.0f;
        my[k][2] = here ? m4.z : 0.0f, my[k][3] = here ? m4.w : 0.0f;
        li[k][0] = here ? l4.x : 0.0f, li[k][1] = here ? l4.y : 0.0f;
        li[k][2] = here ? l4.z : 0.0f, li[k][3] = here ? l4.w : 0.0f;
    }
    TALLY_BARRIER_EACH32();
    if (b + step < B)
        tally_k_gmm_warp_stage_row(st, mu + (b + step) * mu_stride, lv + (b + step) * lv_stride, K, D, l, has);
}

/*
 * The part of tally_categorical_row over the K shared logits (is_logits)
 * that does not depend on the row's uniform, computed once a kernel by
 * every work-item with the rule's operations in its order: the weights w_k
 * = exp(l_k - m), their running sums P_k = ((w_0 + w_1) + ...) + w_k (the
 * walk's `running`; total is P_{K-1}), the last k with w_k > 0, and whether
 * the rule gives TALLY_CATEGORICAL_INVALID whatever the uniform. Work-item
 * l keeps w_l and P_l (l < K).
 */
typedef struct tally_k_gmm_pick_table {
    float w_l, P_l, total;
    tally_i32 last;
    int valid;
} tally_k_gmm_pick_table;

TALLY_FN tally_k_gmm_pick_table tally_k_gmm_warp_pick_table(TALLY_GLOBAL const float *lg, tally_u64 K, tally_u32 l)
{
    tally_k_gmm_pick_table t = {0.0f, 0.0f, 0.0f, TALLY_CATEGORICAL_INVALID, 1};
    float m = lg[0];
    for (tally_u64 k = 1; k < K; k++) m = tally_max_nan(m, lg[k]);
    if (!tally_isfinite(m)) t.valid = 0;
    for (tally_u64 k = 0; k < K && t.valid; k++) {
        const float wk = tally_expf(lg[k] - m);
        if (!(wk >= 0.0f) || tally_isinf(wk)) t.valid = 0;
        t.total = t.total + wk;
        if (wk > 0.0f) t.last = (tally_i32)k;
        if (k == l) t.w_l = wk, t.P_l = t.total;
    }
    if (!(t.total > 0.0f) || tally_isinf(t.total)) t.valid = 0;
    return t;
}

/* tally_categorical_row(lg, K, 1, u) from the table: the smallest k with
 * w_k > 0 whose running sum reaches u * total (work-item k tests its own),
 * else the last k with w_k > 0. The same comparisons of the same values. */
TALLY_FN tally_i32 tally_k_gmm_warp_pick(const tally_k_gmm_pick_table *t, tally_u64 K, tally_u32 l, float u)
{
    const float target = u * t->total;
    const int first = TALLY_WARP_FIRST(l < K && t->w_l > 0.0f && t->P_l >= target);
    if (!t->valid) return TALLY_CATEGORICAL_INVALID;
    return first >= 0 ? (tally_i32)first : t->last;
}

/*
 * Row b's uniform u_b = uniform(offset + b), the pick's, in the row loop b
 * = first, first + step, ... of the caller's warp, `turn` counting its rows
 * modulo 32: at turn 0 work-item t draws the uniform of row b + t step
 * into *batch, so that the warp computes one Philox block a row instead of
 * 32 copies of it (the same block, so the same bits), and turn t reads
 * work-item t's.
 */
TALLY_FN float tally_k_gmm_warp_uniform(float *batch, tally_u32 turn, tally_u64 b, tally_u64 step, tally_u64 B,
                                        tally_u64 seed, tally_u64 subsequence, tally_u64 offset, tally_u32 l)
{
    if (turn == 0u) {
        const tally_u64 mine = b + (tally_u64)l * step;
        *batch = mine < B ? tally_stream_uniform(seed, subsequence, offset + mine) : 0.0f;
    }
    return TALLY_WARP_SHUFFLE(*batch, turn);
}

/*
 * The sample's draw for row b with its uniform u: returns the component c
 * (-1: none, as tally_categorical_row gives for logits that admit no
 * draw), and for c >= 0 the work-item's z (zq) and t = std_c eps (tq), the
 * product both z and the backward's reparameterisation term take. pick:
 * the logits' table (tally_k_gmm_warp_pick_table).
 */
TALLY_FN tally_i32 tally_k_gmm_warp_draw(const tally_k_gmm_pick_table *pick, float u, tally_u64 K, tally_u64 seed,
                                         tally_u64 subsequence, tally_u64 offset, tally_u64 B4, tally_u64 D2,
                                         tally_u64 b, tally_u32 l, int has, float my[TALLY_K_GMM_WARP_MAX_K][4],
                                         float li[TALLY_K_GMM_WARP_MAX_K][4], float zq[4], float tq[4])
{
    float n4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const tally_u64 e0 = offset + B4 + b * D2 + 4u * (tally_u64)l;
    if (has) {
        if ((e0 & 3u) == 0u) {
            tally_k_normals4(seed, subsequence, e0 >> 2, n4);
        } else {
#pragma unroll
            for (tally_u32 w = 0; w < 4u; w++) n4[w] = tally_stream_normal(seed, subsequence, e0 + w);
        }
    }
    const tally_i32 c = K > 1u ? tally_k_gmm_warp_pick(pick, K, l, u) : 0;
    if (c < 0) return c;
    /* c is the same for the whole warp: a uniform branch a component. */
#pragma unroll
    for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
        if ((tally_u64)c == k) {
#pragma unroll
            for (tally_u32 w = 0; w < 4u; w++) {
                tq[w] = tally_k_gauss_std(li[k][w]) * n4[w];
                zq[w] = tally_canonical(my[k][w] + tq[w]);
            }
        }
    }
    return c;
}

/*
 * s_k of every component k < K into s: the lane's fold of its quad's
 * Gaussian terms (tally_k_gauss_lane's order), then the plan's tree over
 * the `lanes` lanes, quads of them active. my and li become y = (z - mu)
 * exp(-lv/2) and exp(-lv/2), which the backward's gradients take.
 */
TALLY_FN void tally_k_gmm_warp_sums(const float zq[4], float my[TALLY_K_GMM_WARP_MAX_K][4],
                                    float li[TALLY_K_GMM_WARP_MAX_K][4], tally_u64 K, tally_u32 lanes,
                                    tally_u32 quads, tally_u32 l, float s[TALLY_K_GMM_WARP_MAX_K])
{
#pragma unroll
    for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
        s[k] = 0.0f;
        if (k >= K) continue; /* the same for the whole grid */
        float acc = 0.0f;
#pragma unroll
        for (tally_u32 w = 0; w < 4u; w++) {
            const float is = TALLY_K_GMM_EXPF(-0.5f * li[k][w]);
            const float y = (zq[w] - my[k][w]) * is;
            const float term = tally_gauss_term_of(y, li[k][w]);
            acc = w == 0u ? term : acc + term;
            my[k][w] = y;
            li[k][w] = is;
        }
#pragma unroll
        for (tally_u32 st = 16u; st > 0u; st >>= 1) {
            const float other = TALLY_WARP_SHUFFLE(acc, (l + st) & 31u);
            if (st < lanes && l < st && l + st < quads) acc = acc + other;
        }
        s[k] = TALLY_WARP_SHUFFLE(acc, 0u);
    }
}

/*
 * The row's log density L from s (every work-item holds all K): s_0 for K
 * == 1, else the logsumexp of v_k = (logit_k - llse) + s_k in k order, with
 * lg_l the work-item's logit (l < K) and work-item k forming exp(v_k - m).
 * *s_l gets s of the work-item's component.
 */
TALLY_FN float tally_k_gmm_warp_lse(const float s[TALLY_K_GMM_WARP_MAX_K], float lg_l, float llse, tally_u64 K,
                                    tally_u32 l, float *s_l)
{
    float own = s[0];
#pragma unroll
    for (tally_u32 k = 1; k < TALLY_K_GMM_WARP_MAX_K; k++) own = l == k ? s[k] : own;
    *s_l = own;
    if (K == 1u) return s[0];
    float m = 0.0f;
#pragma unroll
    for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++) {
        if (k < K) {
            const float v = (TALLY_WARP_SHUFFLE(lg_l, k) - llse) + s[k];
            m = k == 0u ? v : tally_max_nan(m, v);
        }
    }
    if (!tally_isfinite(m)) return m;
    const float e = tally_expf(((lg_l - llse) + own) - m);
    float sum = 0.0f;
#pragma unroll
    for (tally_u32 k = 0; k < TALLY_K_GMM_WARP_MAX_K; k++)
        if (k < K) sum = sum + TALLY_WARP_SHUFFLE(e, k);
    return tally_lse_finish(m, sum);
}

#endif /* TALLY_HAS_WARP_SHUFFLE */

/*
 * The forward a warp a row (tally_k_gmm_fused's arguments; qpl,
 * rows_per_pass and the dtypes, all fp32 here, are not read): with
 * TALLY_K_GMM_SAMPLE the draw, z and the component, then log q. Its rows
 * are loaded when their turn comes: copying the next row into a stage
 * (tally_k_gmm_warp_row, as the backward does) made it slower (GPU run 28:
 * 246.5 against 233.0 us at 65536 x 8 x 128 on an H100). The
 * logits' logsumexp is computed once a work-item unless the host prepared
 * it (TALLY_K_GMM_LSE_PREPARED).
 */
TALLY_KERNEL_GROUPS_PER_CU(TALLY_K_GMM_WARP_GROUPS_PER_CU) void tally_k_gmm_warp(TALLY_K_PARAMS(gmm_fused))
{
#if TALLY_HAS_WARP_SHUFFLE
    TALLY_GLOBAL const float *lg = logits + logits_off;
    const tally_u32 l = TALLY_LID() & 31u;
    const int sample = (flags & TALLY_K_GMM_SAMPLE) != 0u;
    const tally_u64 B4 = (B + 3u) & ~(tally_u64)3u, D2 = D + (D & 1u);
    const tally_u32 quads = (tally_u32)(D / 4u);
    const int has = l < quads;
    const float llse = K > 1u ? ((flags & TALLY_K_GMM_LSE_PREPARED) ? pre[pre_off] : tally_lse_seq(lg, K)) : 0.0f;
    const float lg_l = l < K && K > 1u ? lg[l] : 0.0f;
    tally_k_gmm_pick_table pick = {0.0f, 0.0f, 0.0f, 0, 0};
    if (sample && K > 1u) pick = tally_k_gmm_warp_pick_table(lg, K, l);
    const tally_u64 per_group = TALLY_K_GROUP_SIZE / 32u, step = TALLY_GROUP_COUNT() * per_group;
    const tally_u64 first = TALLY_GROUP_ID() * per_group + TALLY_LID() / 32u;
    (void)qpl, (void)rows_per_pass, (void)z_dtype, (void)mu_dtype, (void)lv_dtype, (void)logits_dtype;
    /* The row loop is the same for the 32 work-items of a warp, so each
     * shuffle has its whole warp. */
    float u_batch = 0.0f;
    tally_u32 turn = 0;
    for (tally_u64 b = first; b < B; b += step, turn = (turn + 1u) & 31u) {
        float my[TALLY_K_GMM_WARP_MAX_K][4], li[TALLY_K_GMM_WARP_MAX_K][4];
        tally_k_gmm_warp_load(mu + mu_off + b * mu_stride, lv + lv_off + b * lv_stride, K, D, l, has, my, li);
        TALLY_GLOBAL float *z_row = z + z_off + b * z_stride;
        float zq[4] = {0.0f, 0.0f, 0.0f, 0.0f}, tq[4];
        if (sample) {
            const float u = K > 1u ? tally_k_gmm_warp_uniform(&u_batch, turn, b, step, B, seed, subsequence, offset, l)
                                   : 0.0f;
            const tally_i32 c = tally_k_gmm_warp_draw(&pick, u, K, seed, subsequence, offset, B4, D2, b, l, has, my,
                                                      li, zq, tq);
            if ((flags & TALLY_K_GMM_HAS_COMPONENT) && l == 0u) comp[comp_off + b * comp_stride] = c;
            if (c < 0) {
                /* No component: a NaN row of z and a NaN log q. */
                if (has) {
                    tally_f4 o;
                    o.x = o.y = o.z = o.w = TALLY_F32_NAN;
                    TALLY_STORE_F4(z_row, l, o);
                }
                if (l == 0u) log_q[lq_off + b * lq_stride] = TALLY_F32_NAN;
                continue;
            }
            if (has) {
                tally_f4 o;
                o.x = zq[0], o.y = zq[1], o.z = zq[2], o.w = zq[3];
                TALLY_STORE_F4(z_row, l, o);
            }
        } else if (has) {
            const tally_f4 z4 = TALLY_LOAD_F4(z_row, l);
            zq[0] = z4.x, zq[1] = z4.y, zq[2] = z4.z, zq[3] = z4.w;
        }
        float s[TALLY_K_GMM_WARP_MAX_K], s_l;
        tally_k_gmm_warp_sums(zq, my, li, K, lanes, quads, l, s);
        const float L = tally_k_gmm_warp_lse(s, lg_l, llse, K, l, &s_l);
        if (l == 0u) log_q[lq_off + b * lq_stride] = tally_canonical(L);
    }
#endif
}

#endif /* TALLY_KERNELS_GMM_WARP_H */
