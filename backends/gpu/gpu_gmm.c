/*
 * backends/gpu/gpu_gmm.c - the Gaussian mixture's log density and its
 * fused reparameterised sample on any GPU backend.
 *
 * The common case (D <= 16384, so one tile per (row, component), and K <=
 * 1024) is one launch of tally_k_gmm_fused: the component draw, the Philox
 * normals, z, every component's D-tree and the logsumexp over components,
 * with z read back from where it was just written. Above that the same
 * arithmetic runs as separate launches: pick, noise, tiles (+ upper levels)
 * and finish, with per-row intermediates in scratch.
 */
#include "gpu_internal.h"
#include "tally/terms.h"

/* 1 when z, mu and log_var can be read as whole aligned float4 quads: D is a
 * multiple of 4 and every row (and so every component) starts 16-byte
 * aligned. */
static int gmm_vec4(tally_context *ctx, const tally__gmm_job *job)
{
    const tally__array *views[3] = {&job->z, &job->mu, &job->log_var};
    if (job->dim % 4u != 0) return 0;
    for (int i = 0; i < 3; i++) {
        const tally__array *a = views[i];
        if (a->offset % 4u != 0 || (a->rows > 1 && a->stride % 4u != 0) ||
            !tally__gpu_buffer_aligned16(ctx, a->buffer))
            return 0;
    }
    return 1;
}

static tally_status run_gmm(tally_context *ctx, const tally__gmm_job *job, int sample)
{
    const uint64_t B = job->z.rows, K = job->components, D = job->dim;
    const tally__tree_plan *plan = &job->dim_plan;
    const tally__tree_level lv = tally__gpu_level0(plan);
    const int fused = plan->levels <= 1 && K <= TALLY_K_GMM_LOCAL_K;
    const int need_lse = K > 1 && (!fused || K > TALLY_K_GMM_INLINE_LSE_K);
    const int has_comp = sample && job->component.buffer != NULL;
    const int vec4 = gmm_vec4(ctx, job);
    const tally_buffer *logits = K > 1 ? job->logits.buffer : NULL;
    const uint64_t logits_off = K > 1 ? job->logits.offset : 0;
    const tally_rng rng = job->rng;

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    const uint64_t lse_off = need_lse ? tally__gpu_take(&layout, 1) : 0;
    uint64_t picks_off = 0, s_off = 0, BK = 0;
    tally__gpu_tree_space space = {.a_off = 0, .b_off = 0};
    if (!fused) {
        if (tally__mul_u64(B, K, &BK)) layout.overflow = 1;
        if (sample) picks_off = tally__gpu_take(&layout, B);
        s_off = tally__gpu_take(&layout, BK);
        space = tally__gpu_tree_layout(&layout, plan, BK);
    }
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    if (need_lse) {
        tally__gpu_args l = {.n = 0};
        tally__gpu_arg_buf(&l, logits, logits_off);
        tally__gpu_arg_u64(&l, K);
        tally__gpu_arg_buf(&l, scratch, lse_off);
        st = tally__gpu_run(ctx, TALLY__K_tally_k_logits_lse, 1, &l);
        if (st != TALLY_OK) return st;
    }

    if (fused) {
        /* Rows per pass: at least enough that each segment has a (row,
         * component) tree; more when that still leaves a couple of groups
         * per compute unit, up to the rows whose normals (D2/4 Philox blocks
         * a row) give every work-item a block. Larger passes also spread a
         * pass's serial parts (the component draw, the logsumexp over K)
         * over more work-items. */
        const tally__gpu_context *g = (const tally__gpu_context *)ctx;
        const uint64_t segments = TALLY_GPU_GROUP_SIZE / lv.lanes;
        uint64_t rows_per_pass = K <= segments ? segments / K : 1;
        if (D > 0) {
            const uint64_t fill = tally__gpu_ceil_div(4u * TALLY_GPU_GROUP_SIZE, D + (D & 1u));
            const uint64_t units = g->compute_units != 0 ? g->compute_units : 128u;
            const uint64_t spread = B / (2u * units) > 0 ? B / (2u * units) : 1;
            const uint64_t want = fill < spread ? fill : spread;
            if (want > rows_per_pass) rows_per_pass = want;
        }
        const uint64_t most = TALLY_K_GMM_LOCAL_K / K < TALLY_GPU_GROUP_SIZE ? TALLY_K_GMM_LOCAL_K / K
                                                                              : TALLY_GPU_GROUP_SIZE;
        if (rows_per_pass > most) rows_per_pass = most;
        uint32_t flags = 0;
        if (sample) flags |= TALLY_K_GMM_SAMPLE;
        if (vec4) flags |= TALLY_K_GMM_VEC4;
        if (has_comp) flags |= TALLY_K_GMM_HAS_COMPONENT;
        if (need_lse) flags |= TALLY_K_GMM_LSE_PREPARED;
        tally__gpu_args l = {.n = 0};
        tally__gpu_arg_buf(&l, job->z.buffer, job->z.offset);
        tally__gpu_arg_u64(&l, job->z.stride);
        tally__gpu_arg_buf(&l, job->mu.buffer, job->mu.offset);
        tally__gpu_arg_u64(&l, job->mu.stride);
        tally__gpu_arg_buf(&l, job->log_var.buffer, job->log_var.offset);
        tally__gpu_arg_u64(&l, job->log_var.stride);
        tally__gpu_arg_buf(&l, logits, logits_off);
        tally__gpu_arg_buf(&l, need_lse ? scratch : NULL, lse_off);
        tally__gpu_arg_u64(&l, B);
        tally__gpu_arg_u64(&l, K);
        tally__gpu_arg_u64(&l, D);
        tally__gpu_arg_u32(&l, lv.lanes);
        tally__gpu_arg_u32(&l, lv.quads_per_lane);
        tally__gpu_arg_u32(&l, flags);
        tally__gpu_arg_u32(&l, (uint32_t)rows_per_pass);
        tally__gpu_arg_u64(&l, rng.seed);
        tally__gpu_arg_u64(&l, rng.subsequence);
        tally__gpu_arg_u64(&l, rng.offset);
        tally__gpu_arg_buf(&l, job->log_q.buffer, job->log_q.offset);
        tally__gpu_arg_u64(&l, job->log_q.stride);
        tally__gpu_arg_buf(&l, has_comp ? job->component.buffer : NULL, has_comp ? job->component.offset : 0);
        tally__gpu_arg_u64(&l, has_comp ? job->component.stride : 0);
        return tally__gpu_run(ctx, TALLY__K_tally_k_gmm_fused, tally__gpu_ceil_div(B, rows_per_pass), &l);
    }

    if (sample) {
        tally__gpu_args l = {.n = 0};
        tally__gpu_arg_buf(&l, logits, logits_off);
        tally__gpu_arg_u64(&l, B);
        tally__gpu_arg_u64(&l, K);
        tally__gpu_arg_u64(&l, rng.seed);
        tally__gpu_arg_u64(&l, rng.subsequence);
        tally__gpu_arg_u64(&l, rng.offset);
        tally__gpu_arg_buf(&l, has_comp ? job->component.buffer : NULL, has_comp ? job->component.offset : 0);
        tally__gpu_arg_u64(&l, has_comp ? job->component.stride : 0);
        tally__gpu_arg_u32(&l, has_comp ? 1u : 0u);
        tally__gpu_arg_buf(&l, scratch, picks_off);
        st = tally__gpu_run(ctx, TALLY__K_tally_k_gmm_pick, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &l);
        if (st != TALLY_OK) return st;
        if (D > 0) {
            const uint64_t s0 = rng.offset + tally__round_up4(B), span = B * (D + (D & 1u));
            const uint64_t blocks = ((s0 + (span - 1u)) >> 2) - (s0 >> 2) + 1u;
            tally__gpu_args nz = {.n = 0};
            tally__gpu_arg_buf(&nz, job->z.buffer, job->z.offset);
            tally__gpu_arg_u64(&nz, job->z.stride);
            tally__gpu_arg_buf(&nz, job->mu.buffer, job->mu.offset);
            tally__gpu_arg_u64(&nz, job->mu.stride);
            tally__gpu_arg_buf(&nz, job->log_var.buffer, job->log_var.offset);
            tally__gpu_arg_u64(&nz, job->log_var.stride);
            tally__gpu_arg_buf(&nz, scratch, picks_off);
            tally__gpu_arg_u64(&nz, B);
            tally__gpu_arg_u64(&nz, D);
            tally__gpu_arg_u64(&nz, rng.seed);
            tally__gpu_arg_u64(&nz, rng.subsequence);
            tally__gpu_arg_u64(&nz, rng.offset);
            st = tally__gpu_run(ctx, TALLY__K_tally_k_gmm_noise, tally__gpu_ceil_div(blocks, TALLY_GPU_GROUP_SIZE),
                                &nz);
            if (st != TALLY_OK) return st;
        }
    }

    /* s_k of every (row, component): straight into s with one level, else
     * tile partials and the upper levels. */
    const int multi = plan->levels > 1;
    tally__gpu_args t = {.n = 0};
    tally__gpu_arg_buf(&t, job->z.buffer, job->z.offset);
    tally__gpu_arg_u64(&t, job->z.stride);
    tally__gpu_arg_buf(&t, job->mu.buffer, job->mu.offset);
    tally__gpu_arg_u64(&t, job->mu.stride);
    tally__gpu_arg_buf(&t, job->log_var.buffer, job->log_var.offset);
    tally__gpu_arg_u64(&t, job->log_var.stride);
    tally__gpu_arg_u64(&t, B);
    tally__gpu_arg_u64(&t, K);
    tally__gpu_arg_u64(&t, D);
    tally__gpu_arg_u32(&t, lv.lanes);
    tally__gpu_arg_u32(&t, lv.quads_per_lane);
    tally__gpu_arg_u64(&t, lv.tiles);
    tally__gpu_arg_u32(&t, vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS);
    tally__gpu_arg_buf(&t, scratch, multi ? space.a_off : s_off);
    st = tally__gpu_run(ctx, TALLY__K_tally_k_gmm_tiles,
                        tally__gpu_ceil_div(BK * lv.tiles, TALLY_GPU_GROUP_SIZE / lv.lanes), &t);
    if (st != TALLY_OK) return st;
    if (multi) {
        tally__gpu_result res = {.buf = scratch, .off = s_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                 .divisor = 0.0f, .shift = NULL, .shift_off = 0};
        st = tally__gpu_tree_upper(ctx, plan, BK, TALLY_COMBINE_SUM, &res, scratch, space);
        if (st != TALLY_OK) return st;
    }

    tally__gpu_args f = {.n = 0};
    tally__gpu_arg_buf(&f, scratch, s_off);
    tally__gpu_arg_buf(&f, logits, logits_off);
    tally__gpu_arg_buf(&f, need_lse ? scratch : NULL, lse_off);
    tally__gpu_arg_u64(&f, B);
    tally__gpu_arg_u64(&f, K);
    tally__gpu_arg_buf(&f, sample ? scratch : NULL, picks_off);
    tally__gpu_arg_u32(&f, sample ? 1u : 0u);
    tally__gpu_arg_buf(&f, job->log_q.buffer, job->log_q.offset);
    tally__gpu_arg_u64(&f, job->log_q.stride);
    return tally__gpu_run(ctx, TALLY__K_tally_k_gmm_finish, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &f);
}

tally_status tally__gpu_gmm_log_prob(tally_context *ctx, const tally__gmm_job *job)
{
    return run_gmm(ctx, job, 0);
}

tally_status tally__gpu_gmm_sample(tally_context *ctx, const tally__gmm_job *job)
{
    return run_gmm(ctx, job, 1);
}
