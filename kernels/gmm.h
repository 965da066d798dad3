/*
 * kernels/gmm.h - diagonal Gaussian mixture: log density, and the
 * reparameterised sample fused with it.
 *
 * The host's order per row b (backends/host/host_ops.c):
 *   sample only: u_b = uniform(offset + b); c = tally_categorical_row over
 *     the logits (K > 1, else 0); z[d] = mu_c[d] + tally_gauss_std(lv_c[d]) *
 *     normal(offset + B4 + b*D2 + d), or NaN for the whole row when c < 0;
 *   s_k = the D-tree of tally_gauss_term(z, mu_k, lv_k) for every k;
 *   log q = tally_lse_seq over v_k = (logit_k - lse(logits)) + s_k when
 *     K > 1, else s_0; NaN when the sampled c < 0.
 *
 * tally_k_gmm_fused does all of it in one launch when the D plan has one
 * level and K <= TALLY_K_GMM_LOCAL_K. Otherwise the pieces run as separate
 * launches: pick, noise, tiles (+ upper levels), finish.
 */
#ifndef TALLY_KERNELS_GMM_H
#define TALLY_KERNELS_GMM_H

#include "tree.h"
#include "halves.h"

/* The Gaussian term and the standard deviation, tally_gauss_term's and
 * tally_gauss_std's bits, with the exponential that TALLY_K_GMM_EXP_SPLIT
 * picks. */
#if TALLY_K_GMM_EXP_SPLIT
#define TALLY_K_GMM_EXPF tally_expf_split
#else
#define TALLY_K_GMM_EXPF tally_expf
#endif
TALLY_DEFINE_GAUSS_TERM(tally_k_gauss_term, TALLY_K_GMM_EXPF)
TALLY_FN float tally_k_gauss_std(float lv)
{
    return TALLY_K_GMM_EXPF(0.5f * lv);
}

/* ---- The logits. Every input of the mixture may be fp32, bf16 or f16
 * (its *_dtype argument, offsets and strides counted in its own elements);
 * each element is widened by tally/half.h as it is loaded, so a half input
 * gives the bits of the fp32 op on its widened values (docs/ops.md). The K
 * logits are read through the three functions below. tally_lse_seq and
 * tally_categorical_row (tally/terms.h) take fp32 pointers, so fp32 logits
 * still go to them, and half logits to their bodies (TALLY_LSE_SEQ_BODY,
 * TALLY_CATEGORICAL_ROW_BODY) stamped out over widening loads: the same
 * operations in the same order (tests/check_half.c compares the two paths
 * bit for bit). ---- */

/* Logit k: element off + k of buffer `logits` of dtype `dtype`. */
TALLY_FN float tally_k_gmm_logit(TALLY_GLOBAL const float *logits, tally_u32 dtype, tally_u64 off, tally_u64 k)
{
    return tally_k_ld_at(logits, dtype, off + k);
}

/* tally_lse_seq over the K logits: its body (terms.h) over widening loads. */
#define TALLY_K_GMM_LOGIT_AT(k) tally_k_gmm_logit(logits, dtype, off, (k))
TALLY_FN float tally_k_gmm_logits_lse(TALLY_GLOBAL const float *logits, tally_u32 dtype, tally_u64 off, tally_u64 K)
{
    if (dtype == TALLY_F32) return tally_lse_seq(logits + off, K);
    TALLY_LSE_SEQ_BODY(TALLY_K_GMM_LOGIT_AT, K)
}

/* tally_categorical_row over the K logits (is_logits) with uniform u: the
 * component of a sampled row. */
TALLY_FN tally_i32 tally_k_gmm_component(TALLY_GLOBAL const float *logits, tally_u32 dtype, tally_u64 off,
                                         tally_u64 K, float u)
{
    if (dtype == TALLY_F32) return tally_categorical_row(logits + off, K, 1, u);
    TALLY_CATEGORICAL_ROW_BODY(TALLY_K_GMM_LOGIT_AT, K, 1, u)
}

/* logsumexp of the K logits, once, into out[out_off]. */
TALLY_KERNEL void tally_k_logits_lse(TALLY_K_PARAMS(logits_lse))
{
    if (TALLY_GROUP_ID() == 0u && TALLY_LID() == 0u)
        out[out_off] = tally_k_gmm_logits_lse(logits, logits_dtype, logits_off, K);
}

/*
 * z for the stream elements of Philox block m that fall in rows row0 ..
 * row0 + rows - 1: the rows' normals occupy stream elements s0 .. s0 +
 * rows*D2 - 1 (s0 = offset + B4 + row0*D2), row p's element d at s0 +
 * p*D2 + d; the element d == D of an odd D is padding. n4 holds the block's
 * four normals (tally_k_normals4 of block m), which depend on the stream
 * position only, so a caller may compute them before the components are
 * known. pick(p) is row p's component, read by the caller from local or
 * global memory.
 */
#define TALLY_K_GMM_NOISE_BLOCK(m, n4, s0, span, D, D2, row0, PICK)                                        \
    do {                                                                                                  \
        for (tally_u32 w_ = 0; w_ < 4u; w_++) {                                                           \
            const tally_u64 i_ = ((m) << 2) + w_;                                                         \
            if (i_ < (s0)) continue;                                                                      \
            const tally_u64 rel_ = i_ - (s0);                                                             \
            if (rel_ >= (span)) break;                                                                    \
            const tally_u64 p_ = rel_ / (D2);                                                             \
            const tally_u64 d_ = rel_ - p_ * (D2);                                                        \
            if (d_ >= (D)) continue;                                                                      \
            const tally_u64 b_ = (row0) + p_;                                                             \
            const tally_i32 c_ = PICK(p_);                                                                \
            TALLY_GLOBAL float *zrow_ = z + z_off + b_ * z_stride;                                        \
            if (c_ < 0) {                                                                                 \
                zrow_[d_] = TALLY_F32_NAN;                                                                \
            } else {                                                                                      \
                const tally_u64 col_ = (tally_u64)c_ * (D) + d_;                                          \
                const float m_ = tally_k_ld_at(mu, mu_dtype, mu_off + b_ * mu_stride + col_);             \
                const float l_ = tally_k_ld_at(lv, lv_dtype, lv_off + b_ * lv_stride + col_);             \
                zrow_[d_] = tally_canonical(m_ + tally_k_gauss_std(l_) * (n4)[w_]);                         \
            }                                                                                             \
        }                                                                                                 \
    } while (0)

/* The D values of one (row, component) pair's input: the row of z, or the
 * component's part of the row of mu or log_var, which is element `first` of
 * buffer `base` of dtype `dtype`. */
TALLY_FN tally_k_src tally_k_gmm_src(TALLY_GLOBAL const float *base, tally_u32 dtype, tally_u64 first, tally_u64 D,
                                     int vec4)
{
    return tally_k_src_at(base, dtype, first, D, D, vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS);
}

/* One lane's fold of the Gaussian terms of quads base + j, base + j +
 * lanes, ... of one (row, component) pair; zr, mr, lr are the row's z and
 * the component's mu and log_var, each of its own dtype. vec4: every quad is
 * whole (D % 4 == 0) and starts on a quad boundary of its dtype, so each is
 * one load a source (tally_k_quad4: a float4 of fp32, 8 bytes of halves). */
TALLY_FN float tally_k_gauss_lane(const tally_k_src *zr, const tally_k_src *mr, const tally_k_src *lr, tally_u64 D,
                                  tally_u64 quads, tally_u64 base, tally_u32 lanes, tally_u32 qpl, tally_u32 j,
                                  int vec4)
{
    float acc = 0.0f;
    if (vec4) {
        for (tally_u32 q = 0; q < qpl; q++) {
            const tally_u64 g = base + (tally_u64)q * lanes + j;
            if (g >= quads) break;
            const tally_f4 a = tally_k_quad4(zr, g), m = tally_k_quad4(mr, g), l = tally_k_quad4(lr, g);
            const float first = tally_k_gauss_term(a.x, m.x, l.x);
            acc = q == 0u ? first : acc + first;
            acc = acc + tally_k_gauss_term(a.y, m.y, l.y);
            acc = acc + tally_k_gauss_term(a.z, m.z, l.z);
            acc = acc + tally_k_gauss_term(a.w, m.w, l.w);
        }
        return acc;
    }
    for (tally_u32 q = 0; q < qpl; q++) {
        const tally_u64 g = base + (tally_u64)q * lanes + j;
        if (g >= quads) break;
        const tally_u64 e0 = g << 2;
        const tally_u64 e1 = tally_k_min_u64(e0 + 4u, D);
        for (tally_u64 e = e0; e < e1; e++) {
            const float t = tally_k_gauss_term(tally_k_ld(zr->p, zr->h, zr->dtype, e),
                                             tally_k_ld(mr->p, mr->h, mr->dtype, e),
                                             tally_k_ld(lr->p, lr->h, lr->dtype, e));
            acc = (q == 0u && e == e0) ? t : acc + t;
        }
    }
    return acc;
}

#define TALLY_K_GMM_PICK_LOCAL(p) (cl[(p)])

/*
 * The fused mixture kernel. The D plan is one tile of `lanes` lanes and
 * `qpl` quads per lane (D == 0 is passed as lanes = qpl = 1 and gives s_k =
 * 0 as on the host). A group handles `rows_per_pass` consecutive rows per
 * pass (rows_per_pass * K <= TALLY_K_GMM_LOCAL_K, rows_per_pass <= 256);
 * their rows*K (row, component) trees run 256/lanes at a time, one per
 * segment, so that short rows (D = 64 gives 16 lanes) still use every
 * work-item. The host may pick more rows per pass than that, so that a
 * pass's Philox blocks keep the whole group busy and its serial parts (the
 * component draws, the logsumexp over K) run side by side.
 *
 * flags: TALLY_K_GMM_SAMPLE draws z first (the density then reads the z just
 * written, after a barrier that orders global memory); HAS_COMPONENT writes
 * the component; VEC4 reads whole aligned quads; LSE_PREPARED takes the
 * logits' logsumexp from pre[pre_off] instead of computing it per group.
 */
TALLY_FN void tally_k_gmm_fused_run(TALLY_LOCAL float *v, TALLY_LOCAL float *sk, TALLY_LOCAL tally_i32 *cl,
                                    TALLY_LOCAL float *lse_l, TALLY_K_PARAMS(gmm_fused))
{
    const tally_u32 lid = TALLY_LID();
    /* Each (row, component) tree of `lanes` lanes is played by T = lanes / P
     * work-items, P = min(TALLY_K_GMM_LANES_PER_ITEM, lanes) lanes each:
     * work-item t of a segment plays lanes t, t + T, ..., t + (P - 1) T, so
     * the tree's steps with strides >= T stay in its registers and only the
     * last log2(T) steps synchronise the group (the scheme of
     * tally_k_dm_rows_table). A segment is T work-items. A pass whose
     * lanes all fit the group at once (the small shapes, whose time is the
     * group's chain of latencies rather than its work) plays one lane a
     * work-item instead, so that more work-items share its terms. */
    const tally_u32 pass_lanes = rows_per_pass * (tally_u32)K * lanes;
    const tally_u32 P = pass_lanes <= TALLY_K_GROUP_SIZE ? 1u
                        : lanes < TALLY_K_GMM_LANES_PER_ITEM ? lanes
                                                             : TALLY_K_GMM_LANES_PER_ITEM;
    const tally_u32 T = lanes / P;
    const tally_u32 segments = TALLY_K_GROUP_SIZE / T;
    const tally_u32 seg = lid / T;
    const tally_u32 t = lid - seg * T;
    /* The pass's rows*K (row, component) units go through the segments in
     * chunks: unit u is component u % K of row u / K. */
    const tally_u32 pass_units = rows_per_pass * (tally_u32)K;
    const tally_u32 chunks = (pass_units + segments - 1u) / segments;
    const tally_u64 quads = tally_k_quads(D);
    const int vec4 = (flags & TALLY_K_GMM_VEC4) != 0u;
    const int sample = (flags & TALLY_K_GMM_SAMPLE) != 0u;
    const int noise = sample && D > 0u;
    const tally_u64 B4 = (B + 3u) & ~(tally_u64)3u;
    const tally_u64 D2 = D + (D & 1u);

    /* Row p's component is drawn by work-item 255 - p, so that the draws
     * fall to the last warps while the first ones, which hold the first
     * noise blocks, compute their normals. The logits' logsumexp, read
     * only by each pass's last step (after its barriers), goes to the
     * work-item after the drawers. */
    const tally_u32 picker = TALLY_K_GROUP_SIZE - 1u - lid;
    const tally_u32 lse_lid = rows_per_pass < TALLY_K_GROUP_SIZE ? TALLY_K_GROUP_SIZE - 1u - rows_per_pass : 0u;
    if (K > 1u && lid == lse_lid)
        lse_l[0] = (flags & TALLY_K_GMM_LSE_PREPARED) ? pre[pre_off]
                                                      : tally_k_gmm_logits_lse(logits, logits_dtype, logits_off, K);
    const tally_u64 passes = (B + rows_per_pass - 1u) / rows_per_pass;
    for (tally_u64 pass = TALLY_GROUP_ID(); pass < passes; pass += TALLY_GROUP_COUNT()) {
        const tally_u64 row0 = pass * rows_per_pass;
        const tally_u32 prow = (tally_u32)tally_k_min_u64(rows_per_pass, B - row0);
        /* The pass's normals: stream elements s0 .. s0 + span - 1, in
         * Philox blocks m_first (this work-item's first) .. m_last. */
        const tally_u64 s0 = offset + B4 + row0 * D2;
        const tally_u64 span = (tally_u64)prow * D2;
        const tally_u64 m_first = (s0 >> 2) + lid;
        const tally_u64 m_last = noise ? (s0 + (span - 1u)) >> 2 : 0u;
        /* The first block's normals depend on the stream position only, so
         * a small pass (P == 1: one lane a work-item, the group's chain of
         * latencies sets its time) computes them before the components are
         * known. A large one computes them after the draws: on the H200 the
         * early normals made the 65536x8x128 sample 3% slower. */
        const int early = noise && P == 1u && m_first <= m_last;
        float n4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (early) tally_k_normals4(seed, subsequence, m_first, n4);
        if (sample && picker < prow) {
            /* Row b's uniform is stream element offset + b, the one
             * tally_k_local_uniforms hands out. */
            const tally_u64 b = row0 + picker;
            const tally_u64 i = offset + b;
            const tally_philox4 blk = tally_stream_block(seed, subsequence, i >> 2);
            const tally_u32 w = (tally_u32)(i & 3u);
            const tally_u32 bits = w == 0u ? blk.v[0] : w == 1u ? blk.v[1] : w == 2u ? blk.v[2] : blk.v[3];
            const float u = tally_uniform_from_bits(bits);
            const tally_i32 c = K > 1u ? tally_k_gmm_component(logits, logits_dtype, logits_off, K, u) : 0;
            cl[picker] = c;
            if (flags & TALLY_K_GMM_HAS_COMPONENT) comp[comp_off + b * comp_stride] = c;
        }
        /* Unconditional in both modes (see tally_k_local_uniforms). */
        TALLY_BARRIER();
        if (noise) {
            for (tally_u64 m = m_first; m <= m_last; m += TALLY_K_GROUP_SIZE) {
                if (m != m_first || !early) tally_k_normals4(seed, subsequence, m, n4);
                TALLY_K_GMM_NOISE_BLOCK(m, n4, s0, span, D, D2, row0, TALLY_K_GMM_PICK_LOCAL);
            }
        }
        /* The density below reads the z just written by other work-items. */
        TALLY_BARRIER_GLOBAL();
        for (tally_u32 chunk = 0; chunk < chunks; chunk++) {
            const tally_u32 u = chunk * segments + seg;
            const tally_u64 p = u / (tally_u32)K;
            const tally_u64 k = u - p * K;
            const int valid = u < pass_units && p < prow;
            const tally_u64 active = valid ? tally_k_active(quads, 0u, lanes) : 0u;
            /* Lane t + iT's fold in L<i> (lanes past the active prefix keep
             * zeros that no step reads). */
            float L0 = 0.0f, L1 = 0.0f, L2 = 0.0f, L3 = 0.0f;
            if (valid) {
                const tally_u64 b = row0 + p;
                const tally_k_src zr = tally_k_gmm_src(z, z_dtype, z_off + b * z_stride, D, vec4);
                const tally_k_src mr = tally_k_gmm_src(mu, mu_dtype, mu_off + b * mu_stride + k * D, D, vec4);
                const tally_k_src lr = tally_k_gmm_src(lv, lv_dtype, lv_off + b * lv_stride + k * D, D, vec4);
                for (tally_u32 i = 0; i < P; i++) {
                    const tally_u32 lane = t + i * T;
                    if ((tally_u64)lane >= active) break;
                    const float acc = tally_k_gauss_lane(&zr, &mr, &lr, D, quads, 0u, lanes, qpl, lane, vec4);
                    if (i == 0u) L0 = acc;
                    else if (i == 1u) L1 = acc;
                    else if (i == 2u) L2 = acc;
                    else L3 = acc;
                }
            }
            /* The tree's steps with stride s >= T (2T, then T) pair lanes of
             * this work-item: lane t + iT takes lane t + iT + s when that lane
             * is active. */
            if (P == 4u) {
                if ((tally_u64)(t + 2u * T) < active) L0 = L0 + L2;
                if ((tally_u64)(t + 3u * T) < active) L1 = L1 + L3;
            }
            if (P >= 2u && (tally_u64)(t + T) < active) L0 = L0 + L1;
            if ((tally_u64)t < active) v[lid] = L0;
            /* The steps below T over lanes 0 .. T - 1 (tally_k_tree's own). */
            tally_k_tree(v, lid, T, active, TALLY_COMBINE_SUM);
            if (valid && t == 0u) sk[p * K + k] = active > 0u ? v[lid] : 0.0f;
        }
        TALLY_BARRIER();
        if (lid < prow) {
            const tally_u64 b = row0 + lid;
            TALLY_LOCAL float *row = sk + (tally_u64)lid * K;
            float r;
            if (sample && cl[lid] < 0) {
                r = TALLY_F32_NAN;
            } else if (K > 1u) {
                const float lse = lse_l[0];
                for (tally_u64 k = 0; k < K; k++)
                    row[k] = (tally_k_gmm_logit(logits, logits_dtype, logits_off, k) - lse) + row[k];
                r = tally_lse_seq_local(row, K);
            } else {
                r = row[0];
            }
            log_q[lq_off + b * lq_stride] = tally_canonical(r);
        }
        TALLY_BARRIER();
    }
}

/* The kernels' local memory and their call of the body, whose dtype
 * arguments are the kernel's own or constants. */
#define TALLY_K_GMM_FUSED_LOCALS                             \
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);         \
    TALLY_LOCAL_ARRAY(float, sk, TALLY_K_GMM_LOCAL_K);       \
    TALLY_LOCAL_ARRAY(tally_i32, cl, TALLY_K_GROUP_SIZE);    \
    TALLY_LOCAL_ARRAY(float, lse_l, 1)
#define TALLY_K_GMM_FUSED_RUN(zt, mt, lt, gt)                                                                       \
    tally_k_gmm_fused_run(v, sk, cl, lse_l, z, z_off, z_stride, mu, mu_off, mu_stride, lv, lv_off, lv_stride,  \
                          logits, logits_off, pre, pre_off, B, K, D, lanes, qpl, flags, rows_per_pass, seed,        \
                          subsequence, offset, log_q, lq_off, lq_stride, comp, comp_off, comp_stride, (zt), (mt),   \
                          (lt), (gt))

/* All four inputs fp32 (the dtype arguments are TALLY_F32): the body with
 * the dtypes as constants, so that its loads are the plain float4 loads
 * and it keeps the instructions of an fp32-only kernel. */
TALLY_KERNEL void tally_k_gmm_fused(TALLY_K_PARAMS(gmm_fused))
{
    TALLY_K_GMM_FUSED_LOCALS;
    (void)z_dtype;
    (void)mu_dtype;
    (void)lv_dtype;
    (void)logits_dtype;
    TALLY_K_GMM_FUSED_RUN(TALLY_F32, TALLY_F32, TALLY_F32, TALLY_F32);
}

/* At least one half input (each of its own dtype). */
TALLY_KERNEL void tally_k_gmm_fused_half(TALLY_K_PARAMS(gmm_fused))
{
    TALLY_K_GMM_FUSED_LOCALS;
    TALLY_K_GMM_FUSED_RUN(z_dtype, mu_dtype, lv_dtype, logits_dtype);
}
#undef TALLY_K_GMM_FUSED_LOCALS
#undef TALLY_K_GMM_FUSED_RUN

/* ---- The unfused pieces (a D plan of several levels, or K too large for
 * local memory). ---- */

/* Component of every row: picks[picks_off + b], also written to comp when
 * has_comp. */
TALLY_KERNEL void tally_k_gmm_pick(TALLY_K_PARAMS(gmm_pick))
{
    TALLY_LOCAL_ARRAY(float, ul, TALLY_K_GROUP_SIZE);
    const tally_u32 lid = TALLY_LID();
    for (tally_u64 row0 = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE; row0 < B;
         row0 += TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(TALLY_K_GROUP_SIZE, B - row0);
        tally_k_local_uniforms(ul, row0, count, seed, subsequence, offset, lid);
        TALLY_BARRIER();
        if (lid < count) {
            const tally_u64 b = row0 + lid;
            const tally_i32 c = K > 1u ? tally_k_gmm_component(logits, logits_dtype, logits_off, K, ul[lid]) : 0;
            picks[picks_off + b] = c;
            if (has_comp) comp[comp_off + b * comp_stride] = c;
        }
        TALLY_BARRIER();
    }
}

#define TALLY_K_GMM_PICK_GLOBAL(p) (picks[picks_off + (p)])

/* z of every row from the picks, one Philox block per work-item step. */
TALLY_KERNEL void tally_k_gmm_noise(TALLY_K_PARAMS(gmm_noise))
{
    const tally_u64 B4 = (B + 3u) & ~(tally_u64)3u;
    const tally_u64 D2 = D + (D & 1u);
    const tally_u64 s0 = offset + B4;
    const tally_u64 span = B * D2;
    if (span == 0u) return;
    const tally_u64 m1 = (s0 + (span - 1u)) >> 2;
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 m = (s0 >> 2) + TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); m <= m1; m += step) {
        float n4[4];
        tally_k_normals4(seed, subsequence, m, n4);
        TALLY_K_GMM_NOISE_BLOCK(m, n4, s0, span, D, D2, 0u, TALLY_K_GMM_PICK_GLOBAL);
    }
}

/*
 * Level 0 of the D trees of all B*K (row, component) pairs: unit u = pair *
 * tiles + t writes out[out_off + u]; with tiles == 1 that is s of the pair
 * (D == 0 is passed as lanes = qpl = tiles = 1 and gives 0). The body of
 * tally_k_gmm_tiles (fp32 inputs, the dtypes passed as constants) and of
 * tally_k_gmm_tiles_half (any half input): the half loads would cost the
 * fp32 kernel registers (40 -> 48 on sm_90) and so occupancy.
 */
TALLY_FN void tally_k_gmm_tiles_body(TALLY_LOCAL float *v, TALLY_GLOBAL const float *z, tally_u32 z_dtype,
                                     tally_u64 z_off, tally_u64 z_stride, TALLY_GLOBAL const float *mu,
                                     tally_u32 mu_dtype, tally_u64 mu_off, tally_u64 mu_stride,
                                     TALLY_GLOBAL const float *lv, tally_u32 lv_dtype, tally_u64 lv_off,
                                     tally_u64 lv_stride, tally_u64 B, tally_u64 K, tally_u64 D, tally_u32 lanes,
                                     tally_u32 qpl, tally_u64 tiles, tally_u32 load_mode,
                                     TALLY_GLOBAL float *TALLY_RESTRICT out, tally_u64 out_off)
{
    const tally_u32 lid = TALLY_LID();
    const tally_k_segs lay = tally_k_segs_of(lid, lanes, qpl, B * K, tiles, D);
    for (tally_u64 first = TALLY_GROUP_ID() * lay.segments; first < lay.units;
         first += TALLY_GROUP_COUNT() * lay.segments) {
        const tally_u64 unit = first + lay.seg;
        const tally_k_unit at = tally_k_unit_at(&lay, unit);
        if ((tally_u64)lay.j < at.active) {
            /* The unit's vector is the (row, component) pair b * K + k. */
            const tally_u64 b = at.vec / K;
            const tally_u64 k = at.vec - b * K;
            const int vec4 = load_mode == TALLY_K_LOAD_VEC4;
            const tally_k_src zr = tally_k_gmm_src(z, z_dtype, z_off + b * z_stride, D, vec4);
            const tally_k_src mr = tally_k_gmm_src(mu, mu_dtype, mu_off + b * mu_stride + k * D, D, vec4);
            const tally_k_src lr = tally_k_gmm_src(lv, lv_dtype, lv_off + b * lv_stride + k * D, D, vec4);
            v[lid] = tally_k_gauss_lane(&zr, &mr, &lr, D, lay.quads, at.base, lanes, qpl, lay.j, vec4);
        }
        tally_k_tree(v, lid, lanes, at.active, TALLY_COMBINE_SUM);
        if (unit < lay.units && lay.j == 0u) out[out_off + unit] = at.active > 0u ? v[lid] : 0.0f;
    }
}

/* z, mu and log_var all fp32 (the dtype arguments are TALLY_F32). */
TALLY_KERNEL void tally_k_gmm_tiles(TALLY_K_PARAMS(gmm_tiles))
{
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);
    (void)z_dtype;
    (void)mu_dtype;
    (void)lv_dtype;
    tally_k_gmm_tiles_body(v, z, TALLY_F32, z_off, z_stride, mu, TALLY_F32, mu_off, mu_stride, lv, TALLY_F32, lv_off,
                           lv_stride, B, K, D, lanes, qpl, tiles, load_mode, out, out_off);
}

/* At least one of z, mu and log_var a half view. */
TALLY_KERNEL void tally_k_gmm_tiles_half(TALLY_K_PARAMS(gmm_tiles))
{
    TALLY_LOCAL_ARRAY(float, v, TALLY_K_GROUP_SIZE);
    tally_k_gmm_tiles_body(v, z, z_dtype, z_off, z_stride, mu, mu_dtype, mu_off, mu_stride, lv, lv_dtype, lv_off,
                           lv_stride, B, K, D, lanes, qpl, tiles, load_mode, out, out_off);
}

/* log q of every row from s[s_off + b*K + k] (overwritten with v_k) and,
 * for K > 1, the logits' logsumexp in pre[pre_off]. */
TALLY_KERNEL void tally_k_gmm_finish(TALLY_K_PARAMS(gmm_finish))
{
    const tally_u64 step = TALLY_GROUP_COUNT() * TALLY_K_GROUP_SIZE;
    for (tally_u64 b = TALLY_GROUP_ID() * TALLY_K_GROUP_SIZE + TALLY_LID(); b < B; b += step) {
        TALLY_GLOBAL float *row = s + s_off + b * K;
        float r;
        if (sample && picks[picks_off + b] < 0) {
            r = TALLY_F32_NAN;
        } else if (K > 1u) {
            const float lse = pre[pre_off];
            for (tally_u64 k = 0; k < K; k++)
                row[k] = (tally_k_gmm_logit(logits, logits_dtype, logits_off, k) - lse) + row[k];
            r = tally_lse_seq(row, K);
        } else {
            r = row[0];
        }
        log_q[lq_off + b * lq_stride] = tally_canonical(r);
    }
}

#endif /* TALLY_KERNELS_GMM_H */
