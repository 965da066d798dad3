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
 *
 * z, mu, log_var and the logits may each be fp32, bf16 or f16: every kernel
 * takes their dtypes and widens halves as it loads them (kernels/gmm.h), so
 * the front end launches no widening for this op (TALLY__HALF_NATIVE_GMM_*).
 */
#include "gpu_internal.h"
#include "tally/terms.h"

/* 1 when every row of the view starts on a quad boundary of its dtype: a
 * quad is 4 elements, read as one 16-byte float4 of fp32 or one 8-byte load
 * of halves (tally_k_load_h4), so the offset and the stride must be
 * multiples of 4 elements (16 bytes of fp32, 8 bytes of halves) in a buffer
 * aligned to at least that (16 bytes serves both). */
static int gmm_rows_on_quads(tally_context *ctx, const tally__array *a)
{
    return a->offset % 4u == 0 && (a->rows <= 1 || a->stride % 4u == 0) && tally__gpu_buffer_aligned16(ctx, a->buffer);
}

/* 1 when z, mu and log_var can be read as whole aligned quads, one load each:
 * D is a multiple of 4 (so every component, k * D elements into its row,
 * starts on a quad too) and every row of the three starts on a quad. z is
 * the job's view, or with z_scratch != NULL the fp32 rows of D floats that
 * the backward samples into, at float z_off of that buffer. */
int tally__gpu_gmm_vec4(tally_context *ctx, const tally__gmm_job *job, const tally_buffer *z_scratch, uint64_t z_off)
{
    const int z_on_quads = z_scratch != NULL ? z_off % 4u == 0 && tally__gpu_buffer_aligned16(ctx, z_scratch)
                                             : gmm_rows_on_quads(ctx, &job->z);
    return job->dim % 4u == 0 && z_on_quads && gmm_rows_on_quads(ctx, &job->mu) &&
           gmm_rows_on_quads(ctx, &job->log_var);
}

tally__gpu_at tally__gpu_gmm_logits(const tally__gmm_job *f)
{
    tally__gpu_at at = {.buf = NULL, .off = 0};
    if (f->components > 1) at = tally__gpu_at_view(&f->logits);
    return at;
}

tally_status tally__gpu_gmm_lse(tally_context *ctx, const tally__gmm_job *f, tally__gpu_at out)
{
    const tally__kargs_logits_lse a = {.logits = tally__gpu_gmm_logits(f), .K = f->components, .out = out,
                                       .logits_dtype = tally__gpu_kdtype(&f->logits)};
    return tally__gpu_launch_logits_lse(ctx, 1, &a);
}

tally_status tally__gpu_gmm_draw(tally_context *ctx, const tally__gmm_job *f, uint64_t B, tally__gpu_at comp,
                                 uint64_t comp_stride, tally__gpu_at picks, tally__gpu_at z, uint64_t z_stride)
{
    const uint64_t D = f->dim;
    const tally_rng rng = f->rng;
    const tally__kargs_gmm_pick p = {.logits = tally__gpu_gmm_logits(f), .B = B, .K = f->components,
                                     .seed = rng.seed, .subsequence = rng.subsequence, .offset = rng.offset,
                                     .comp = comp, .comp_stride = comp_stride, .has_comp = comp.buf != NULL,
                                     .picks = picks, .logits_dtype = tally__gpu_kdtype(&f->logits)};
    tally_status st = tally__gpu_launch_gmm_pick(ctx, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &p);
    if (st != TALLY_OK || D == 0) return st;
    const uint64_t s0 = rng.offset + tally__round_up4(B), span = B * (D + (D & 1u));
    const uint64_t blocks = ((s0 + (span - 1u)) >> 2) - (s0 >> 2) + 1u;
    const tally__kargs_gmm_noise n = {.z = z, .z_stride = z_stride, .mu = tally__gpu_at_view(&f->mu),
                                      .mu_stride = f->mu.stride, .lv = tally__gpu_at_view(&f->log_var),
                                      .lv_stride = f->log_var.stride, .picks = picks, .B = B, .D = D,
                                      .seed = rng.seed, .subsequence = rng.subsequence, .offset = rng.offset,
                                      .mu_dtype = tally__gpu_kdtype(&f->mu),
                                      .lv_dtype = tally__gpu_kdtype(&f->log_var)};
    return tally__gpu_launch_gmm_noise(ctx, tally__gpu_ceil_div(blocks, TALLY_GPU_GROUP_SIZE), &n);
}

tally_status tally__gpu_gmm_sums(tally_context *ctx, const tally__gmm_job *f, uint64_t B, tally__gpu_at z,
                                 uint64_t z_stride, uint32_t load_mode, tally_buffer *scratch,
                                 tally__gpu_tree_space space, uint64_t s_off)
{
    const tally__tree_plan *plan = &f->dim_plan;
    const tally__tree_level lv = tally__gpu_level0(plan);
    const uint64_t BK = B * f->components;
    const int multi = plan->levels > 1;
    /* z is the job's view, or the fp32 scratch copy the backward samples
     * into (never the job's buffer). */
    const uint32_t z_dtype = z.buf == f->z.buffer ? tally__gpu_kdtype(&f->z) : (uint32_t)TALLY_F32;
    const tally__kargs_gmm_tiles t = {.z = z, .z_stride = z_stride, .mu = tally__gpu_at_view(&f->mu),
                                      .mu_stride = f->mu.stride, .lv = tally__gpu_at_view(&f->log_var),
                                      .lv_stride = f->log_var.stride, .B = B, .K = f->components, .D = f->dim,
                                      .lanes = lv.lanes, .qpl = lv.quads_per_lane, .tiles = lv.tiles,
                                      .load_mode = load_mode, .out = {scratch, multi ? space.a_off : s_off},
                                      .z_dtype = z_dtype, .mu_dtype = tally__gpu_kdtype(&f->mu),
                                      .lv_dtype = tally__gpu_kdtype(&f->log_var)};
    /* The fp32 kernel is kept free of the half loads (kernels/gmm.h). */
    const int any_half = t.z_dtype != TALLY_F32 || t.mu_dtype != TALLY_F32 || t.lv_dtype != TALLY_F32;
    const uint64_t groups = tally__gpu_ceil_div(BK * lv.tiles, TALLY_GPU_GROUP_SIZE / lv.lanes);
    tally_status st = any_half ? tally__gpu_launch_gmm_tiles_half(ctx, groups, &t)
                               : tally__gpu_launch_gmm_tiles(ctx, groups, &t);
    if (st != TALLY_OK || !multi) return st;
    tally__gpu_result res = {.buf = scratch, .off = s_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                             .divisor = 0.0f, .shift = NULL, .shift_off = 0};
    return tally__gpu_tree_upper(ctx, plan, BK, TALLY_COMBINE_SUM, &res, scratch, space);
}

/* Rows per pass of tally_k_gmm_fused: at least enough that each segment has
 * a (row, component) tree; more when that still leaves a couple of groups
 * per compute unit, up to the rows whose normals (D2/4 Philox blocks a row)
 * give every work-item a block. Larger passes also spread a pass's serial
 * parts (the component draw, the logsumexp over K) over more work-items. */
static uint64_t fused_rows_per_pass(tally_context *ctx, uint64_t B, uint64_t K, uint64_t D, uint32_t lanes)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t segments = TALLY_GPU_GROUP_SIZE / lanes;
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
    return rows_per_pass > most ? most : rows_per_pass;
}

/* 1 when a row of the job fits a warp of the mixture's warp kernels
 * (kernels/gmm_warp.h): warp shuffles; fp32 mu and log_var (and logits)
 * whose rows start on 16-byte boundaries; D a multiple of 4 up to 128 in
 * one level of one-quad lanes; K small enough for their registers. The
 * callers add their own switch and the rows they read or write besides. */
int tally__gpu_gmm_fits_warp(tally_context *ctx, const tally__gmm_job *job)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t D = job->dim;
    const int fp32 = tally__gpu_kdtype(&job->mu) == TALLY_F32 && tally__gpu_kdtype(&job->log_var) == TALLY_F32 &&
                     (job->components == 1 || tally__gpu_kdtype(&job->logits) == TALLY_F32);
    return g->warp_shuffle && fp32 && D > 0 && D % 4u == 0 && D <= 128u &&
           job->components <= TALLY_K_GMM_WARP_MAX_K && job->dim_plan.levels == 1 &&
           job->dim_plan.level[0].quads_per_lane == 1 && job->dim_plan.level[0].tiles == 1 &&
           gmm_rows_on_quads(ctx, &job->mu) && gmm_rows_on_quads(ctx, &job->log_var);
}

static tally_status run_gmm(tally_context *ctx, const tally__gmm_job *job, int sample)
{
    const uint64_t B = job->z.rows, K = job->components, D = job->dim;
    const tally__tree_plan *plan = &job->dim_plan;
    const tally__tree_level lv = tally__gpu_level0(plan);
    const int fused = plan->levels <= 1 && K <= TALLY_K_GMM_LOCAL_K;
    const int need_lse = K > 1 && (!fused || K > TALLY_K_GMM_INLINE_LSE_K);
    const int has_comp = sample && job->component.buffer != NULL;
    const int vec4 = tally__gpu_gmm_vec4(ctx, job, NULL, 0);
    const tally__gpu_at z = tally__gpu_at_view(&job->z);
    const tally__gpu_at comp = has_comp ? tally__gpu_at_view(&job->component) : (tally__gpu_at){NULL, 0};
    const uint64_t comp_stride = has_comp ? job->component.stride : 0;

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
    const tally__gpu_at lse = {need_lse ? scratch : NULL, lse_off};
    if (need_lse) {
        st = tally__gpu_gmm_lse(ctx, job, lse);
        if (st != TALLY_OK) return st;
    }

    if (fused) {
        const uint64_t rows_per_pass = fused_rows_per_pass(ctx, B, K, D, lv.lanes);
        uint32_t flags = 0;
        if (sample) flags |= TALLY_K_GMM_SAMPLE;
        if (vec4) flags |= TALLY_K_GMM_VEC4;
        if (has_comp) flags |= TALLY_K_GMM_HAS_COMPONENT;
        if (need_lse) flags |= TALLY_K_GMM_LSE_PREPARED;
        const tally__kargs_gmm_fused a = {
            .z = z, .z_stride = job->z.stride, .mu = tally__gpu_at_view(&job->mu), .mu_stride = job->mu.stride,
            .lv = tally__gpu_at_view(&job->log_var), .lv_stride = job->log_var.stride,
            .logits = tally__gpu_gmm_logits(job), .pre = lse, .B = B, .K = K, .D = D, .lanes = lv.lanes,
            .qpl = lv.quads_per_lane, .flags = flags, .rows_per_pass = (uint32_t)rows_per_pass,
            .seed = job->rng.seed, .subsequence = job->rng.subsequence, .offset = job->rng.offset,
            .log_q = tally__gpu_at_view(&job->log_q), .lq_stride = job->log_q.stride, .comp = comp,
            .comp_stride = comp_stride, .z_dtype = tally__gpu_kdtype(&job->z), .mu_dtype = tally__gpu_kdtype(&job->mu),
            .lv_dtype = tally__gpu_kdtype(&job->log_var), .logits_dtype = tally__gpu_kdtype(&job->logits)};
        /* The fp32 kernel is kept free of the half loads (kernels/gmm.h). */
        const int any_half = a.z_dtype != TALLY_F32 || a.mu_dtype != TALLY_F32 || a.lv_dtype != TALLY_F32 ||
                             a.logits_dtype != TALLY_F32;
        if (TALLY_K_GMM_WARP && !any_half && vec4 && tally__gpu_gmm_fits_warp(ctx, job)) {
            /* A warp a row, 8 rows a group, on CUDA a grid of one wave. */
            const tally__gpu_context *g = (const tally__gpu_context *)ctx;
            uint64_t groups = tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE / 32u);
            const uint64_t one_wave = (g->compute_units != 0 ? g->compute_units : 128u) * TALLY_K_GMM_WARP_GROUPS_PER_CU;
            if (g->resident_bound && groups > one_wave) groups = one_wave;
            return tally__gpu_launch_gmm_warp(ctx, groups, &a);
        }
        const uint64_t groups = tally__gpu_ceil_div(B, rows_per_pass);
        return any_half ? tally__gpu_launch_gmm_fused_half(ctx, groups, &a) : tally__gpu_launch_gmm_fused(ctx, groups, &a);
    }

    const tally__gpu_at picks = {sample ? scratch : NULL, picks_off};
    if (sample) {
        st = tally__gpu_gmm_draw(ctx, job, B, comp, comp_stride, picks, z, job->z.stride);
        if (st != TALLY_OK) return st;
    }
    /* s_k of every (row, component): straight into s with one level, else
     * tile partials and the upper levels. */
    st = tally__gpu_gmm_sums(ctx, job, B, z, job->z.stride, vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS,
                             scratch, space, s_off);
    if (st != TALLY_OK) return st;
    const tally__kargs_gmm_finish f = {.s = {scratch, s_off}, .logits = tally__gpu_gmm_logits(job), .pre = lse,
                                       .B = B, .K = K, .picks = picks, .sample = sample ? 1u : 0u,
                                       .log_q = tally__gpu_at_view(&job->log_q), .lq_stride = job->log_q.stride,
                                       .logits_dtype = tally__gpu_kdtype(&job->logits)};
    return tally__gpu_launch_gmm_finish(ctx, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &f);
}

tally_status tally__gpu_gmm_log_prob(tally_context *ctx, const tally__gmm_job *job)
{
    return run_gmm(ctx, job, 0);
}

tally_status tally__gpu_gmm_sample(tally_context *ctx, const tally__gmm_job *job)
{
    return run_gmm(ctx, job, 1);
}
