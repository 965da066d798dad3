/*
 * backends/gpu/gpu_backward.c - the gradient ops on any GPU backend, as
 * launch sequences of the kernels in kernels/backward.h and the shared tree.
 * Each reproduces backends/host/host_backward.c bit for bit: the same terms
 * (tally/terms_backward.h), summed in the order of the same trees.
 */
#include "gpu_internal.h"
#include "../../kernels/backward_abi.h"
#include "tally/terms.h"

static int contiguous(const tally__array *a)
{
    return a->buffer == NULL || a->rows <= 1 || a->stride == a->cols;
}

/* 1 when a view (or an absent output) allows 16-byte loads and stores: its
 * first element 16-byte aligned (fp32 views only reach the gradients). */
static int aligned16(tally_context *ctx, const tally__array *a)
{
    return a->buffer == NULL || (a->offset % 4u == 0 && tally__gpu_buffer_aligned16(ctx, a->buffer));
}

/* A grid for `items` work-items of a grid-stride loop: enough groups to fill
 * every multiprocessor several times over, no more, so that per-work-item
 * set-up is paid once per many elements. Only the speed depends on it. */
static uint64_t capped_groups(tally_context *ctx, uint64_t groups)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t cap = (g->compute_units != 0 ? g->compute_units : 128u) * 16u;
    return groups < cap ? groups : cap;
}

static uint64_t bounded_grid(tally_context *ctx, uint64_t items)
{
    return capped_groups(ctx, tally__gpu_ceil_div(items, TALLY_GPU_GROUP_SIZE));
}

/* ---- KL divergence -----------------------------------------------------------
 * One elementwise launch; an absent output is passed as a NULL buffer that
 * the kernel never touches. */

tally_status tally__gpu_kl_div_backward(tally_context *ctx, const tally__kl_backward_job *job)
{
    const tally__array *x = &job->input, *t = &job->target, *g = &job->grad_out;
    const tally__array *gx = &job->grad_input, *gt = &job->grad_target;
    const uint64_t rows = x->rows, cols = x->cols;
    const int pointwise = job->reduction == TALLY_REDUCTION_NONE;
    const int flat = contiguous(x) && contiguous(t) && (!pointwise || contiguous(g)) && contiguous(gx) &&
                     contiguous(gt);
    const int vec4 = flat && aligned16(ctx, x) && aligned16(ctx, t) && (!pointwise || aligned16(ctx, g)) &&
                     aligned16(ctx, gx) && aligned16(ctx, gt);
    const uint32_t mode = vec4 ? TALLY_K_LOAD_VEC4 : flat ? TALLY_K_LOAD_CONTIGUOUS : TALLY_K_LOAD_STRIDED;
    const uint64_t items = vec4 ? rows * cols / 4u + 1u : rows * cols;
    const tally__gpu_context *gc = (const tally__gpu_context *)ctx;
    const uint64_t one_wave = (gc->compute_units != 0 ? gc->compute_units : 128u) * TALLY_K_KL_BW_GROUPS_PER_CU;
    uint64_t groups = flat ? bounded_grid(ctx, items) : rows;
    if (flat && gc->resident_bound && TALLY_K_KL_BW_GROUPS_PER_CU != 0u && groups > one_wave) groups = one_wave;
    uint32_t want = 0;
    if (gx->buffer != NULL) want |= TALLY_K_BW_WANT_A;
    if (gt->buffer != NULL) want |= TALLY_K_BW_WANT_B;
    const tally__kargs_kl_backward a = {
        .x = tally__gpu_at_view(x), .x_stride = x->stride, .t = tally__gpu_at_view(t), .t_stride = t->stride,
        .g = tally__gpu_at_view(g), .g_stride = g->stride, .gx = tally__gpu_at_view(gx), .gx_stride = gx->stride,
        .gt = tally__gpu_at_view(gt), .gt_stride = gt->stride, .rows = rows, .cols = cols, .mode = mode,
        .flags = job->flags, .pointwise = pointwise ? 1u : 0u, .divide = job->divide ? 1u : 0u,
        .divisor = job->divisor, .want = want};
    return tally__gpu_launch_kl_backward(ctx, groups, &a);
}

/* ---- Dirichlet-multinomial ----------------------------------------------------
 * 1. The forward's trees over V: A = sum exp(log_alpha) per row (once for a
 *    shared alpha; the EXP term is the forward's SHIFTED_EXP with a zero
 *    shift, exactly, since x - 0 == x) and N = sum n per row.
 * 2. tally_k_dm_bw_rows: R_b and g_b per row.
 * 3. Per-row alpha: tally_k_dm_bw_elements writes the gradient.
 * 4. Shared alpha: tally_k_dm_bw_columns computes the weights w[b, v] and
 *    runs level 0 of the column tree over them (the gradient itself when
 *    the tree has one level); the upper levels finish it, their last launch
 *    scaling column v's sum by exp(log_alpha v) (TALLY_K_FINISH_EXP_SCALE,
 *    tally_k_dm_bw_scale's operations). (TALLY_K_DM_BW_FUSED_COLUMNS 0:
 *    tally_k_dm_bw_elements writes the weights transposed, [V, B], to
 *    scratch, and the planner's tree over B sums its V contiguous vectors.)
 * A shared alpha over rows of at most TALLY_K_DM_BW_LANES_MAX_V columns
 * takes dm_backward_lanes instead: A's tree in the launch of the digamma
 * tables, then one read of the counts for steps 1 (N) to 4. */

/* Where a shared alpha's column tree ends: the gradient, exp(log_alpha v)
 * times column v's sum. */
static tally__gpu_result dm_gradient_result(const tally__dm_backward_job *job)
{
    const tally__gpu_result r = {.buf = job->grad_log_alpha.buffer, .off = job->grad_log_alpha.offset, .stride = 1,
                                 .finish = TALLY_K_FINISH_EXP_SCALE, .divisor = 0.0f,
                                 .shift = job->log_alpha.buffer, .shift_off = job->log_alpha.offset};
    return r;
}

/* 1 when tally_k_dm_bw_lanes copies each step's counts into its stage a
 * step ahead (TALLY_K_DM_BW_LANES_STAGED, where the backend grants it):
 * rows of whole quads on 16-byte boundaries only, the copies' unit. */
static int dm_backward_lanes_staged(tally_context *ctx, const tally__array *counts)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    return TALLY_K_DM_BW_LANES_STAGED && g->stage_bytes >= TALLY_K_DM_BW_LANES_STAGE_BYTES &&
           counts->cols % 4u == 0 && tally__gpu_rows_aligned16(ctx, counts);
}

/* A shared alpha, B > 0, 0 < V <= TALLY_K_DM_BW_LANES_MAX_V (a row plan of
 * one level of one tile): tally_k_dm_bw_prep's A at a_off and its tables at
 * pre_off, tally_k_dm_bw_lanes's lane
 * sums at p_off, then tally_k_dm_bw_lane_tree into the gradient (one level)
 * or the column tree's partials, whose upper levels end in the gradient. */
static tally_status dm_backward_lanes(tally_context *ctx, const tally__dm_backward_job *job, tally_buffer *scratch,
                                      uint64_t a_off, uint64_t pre_off, uint64_t p_off, tally__gpu_tree_space c_space)
{
    const tally__array *counts = &job->counts, *g = &job->grad_out;
    const uint64_t B = counts->rows, V = counts->cols;
    const tally__tree_level *lv = &job->col_plan.level[0];
    const tally__gpu_context *gc = (const tally__gpu_context *)ctx;
    const int done = job->col_plan.levels == 1;
    /* The row plan of V <= 1024 is one tile: A's tree runs in the prep launch. */
    const tally__tree_level *rl = &job->row_plan.level[0];
    const tally__kargs_dm_bw_prep p = {.la = tally__gpu_at_view(&job->log_alpha), .V = V, .pre = {scratch, pre_off},
                                       .a_lanes = rl->lanes, .a_qpl = rl->quads_per_lane, .sums = {scratch, a_off}};
    tally_status st = tally__gpu_launch_dm_bw_prep(ctx, bounded_grid(ctx, TALLY_K_DM_BW_LANES_TABLE_N * V), &p);
    if (st != TALLY_OK) return st;
    /* One unit a lane of the column plan; on CUDA a grid of one wave. */
    const uint64_t units = lv->tiles * lv->lanes;
    uint64_t groups = capped_groups(ctx, units);
    const uint64_t one_wave = (gc->compute_units != 0 ? gc->compute_units : 128u) * TALLY_K_DM_BW_LANES_GROUPS_PER_CU;
    if (gc->resident_bound && TALLY_K_DM_BW_LANES_GROUPS_PER_CU != 0u && groups > one_wave) groups = one_wave;
    const tally__kargs_dm_bw_lanes l = {
        .counts = tally__gpu_at_view(counts), .c_stride = counts->stride,
        .vec4 = tally__gpu_rows_aligned16(ctx, counts) ? 1u : 0u, .pre = {scratch, pre_off}, .sums = {scratch, a_off},
        .g = tally__gpu_at_view(g), .g_stride = g->stride, .per_row_grad = job->per_row_grad ? 1u : 0u,
        .divide = job->divide ? 1u : 0u, .divisor = job->divisor, .B = B, .V = V,
        .row_lanes = job->row_plan.level[0].lanes, .lanes = lv->lanes, .qpl = lv->quads_per_lane, .tiles = lv->tiles,
        .stage_rows = dm_backward_lanes_staged(ctx, counts) ? 1u : 0u,
        .out = {scratch, p_off}};
    st = tally__gpu_launch_dm_bw_lanes(ctx, groups, &l);
    if (st != TALLY_OK) return st;
    const tally__kargs_dm_bw_lane_tree lt = {
        .part_in = {scratch, p_off}, .la = tally__gpu_at_view(&job->log_alpha), .B = B, .V = V, .lanes = lv->lanes,
        .qpl = lv->quads_per_lane, .tiles = lv->tiles, .scale = done ? 1u : 0u,
        .out = done ? tally__gpu_at_view(&job->grad_log_alpha) : (tally__gpu_at){scratch, c_space.a_off}};
    st = tally__gpu_launch_dm_bw_lane_tree(ctx, capped_groups(ctx, tally__gpu_ceil_div(V, TALLY_K_DM_BW_COLS) * lv->tiles),
                                           &lt);
    if (st != TALLY_OK || done) return st;
    const tally__gpu_result res = dm_gradient_result(job);
    return tally__gpu_tree_upper(ctx, &job->col_plan, V, TALLY_COMBINE_SUM, &res, scratch, c_space);
}

/* Step 4 for a shared alpha (B > 0): tally_k_dm_bw_columns over level 0 of
 * the column plan, straight into the gradient when that is the only level,
 * else into the tree's partials, whose upper levels end in the gradient.
 * The kernel strides over its units (column blocks by tiles), so a capped
 * grid computes the same values in the same order. */
static tally_status dm_backward_columns(tally_context *ctx, const tally__dm_backward_job *job, tally_buffer *scratch,
                                        uint64_t rg_off, tally__gpu_tree_space c_space)
{
    const tally__array *counts = &job->counts;
    const uint64_t V = counts->cols;
    const tally__tree_level *lv = &job->col_plan.level[0];
    const int done = job->col_plan.levels == 1;
    const tally__kargs_dm_bw_columns a = {
        .counts = tally__gpu_at_view(counts), .c_stride = counts->stride, .la = tally__gpu_at_view(&job->log_alpha),
        .rg = {scratch, rg_off}, .B = counts->rows, .V = V, .lanes = lv->lanes, .qpl = lv->quads_per_lane,
        .tiles = lv->tiles, .scale = done ? 1u : 0u,
        .out = done ? tally__gpu_at_view(&job->grad_log_alpha) : (tally__gpu_at){scratch, c_space.a_off}};
    tally_status st = tally__gpu_launch_dm_bw_columns(
        ctx, capped_groups(ctx, tally__gpu_ceil_div(V, TALLY_K_DM_BW_COLS) * lv->tiles), &a);
    if (st != TALLY_OK || done) return st;
    const tally__gpu_result res = dm_gradient_result(job);
    return tally__gpu_tree_upper(ctx, &job->col_plan, V, TALLY_COMBINE_SUM, &res, scratch, c_space);
}

tally_status tally__gpu_dirichlet_multinomial_backward(tally_context *ctx, const tally__dm_backward_job *job)
{
    const tally__array *counts = &job->counts, *la = &job->log_alpha, *g = &job->grad_out;
    const tally__array *out = &job->grad_log_alpha;
    const uint64_t B = counts->rows, V = counts->cols;
    const uint64_t a_vectors = job->per_row_alpha ? B : 1;
    const int lanes = TALLY_K_DM_BW_LANES && !job->per_row_alpha && B > 0 && V > 0 &&
                      V <= TALLY_K_DM_BW_LANES_MAX_V;
    const int fused = TALLY_K_DM_BW_FUSED_COLUMNS && !job->per_row_alpha && B > 0;
    uint64_t weights = 0, lane_sums = 0;
    if (!job->per_row_alpha && !fused && tally__mul_u64(B, V, &weights))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "gpu dirichlet_multinomial_backward: B*V overflows");
    if (lanes && tally__mul_u64(job->col_plan.level[0].tiles * job->col_plan.level[0].lanes, V, &lane_sums))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "gpu dirichlet_multinomial_backward: lane sums overflow");

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    tally__gpu_tree_space a_space = tally__gpu_tree_layout(&layout, &job->row_plan, a_vectors);
    tally__gpu_tree_space n_space = {0, 0};
    if (!lanes) n_space = tally__gpu_tree_layout(&layout, &job->row_plan, B);
    const uint64_t a_off = tally__gpu_take(&layout, a_vectors);
    uint64_t n_off = 0, rg_off = 0, pre_off = 0, p_off = 0;
    if (lanes) {
        pre_off = tally__gpu_take(&layout, (1u + TALLY_K_DM_BW_LANES_TABLE_N) * V);
        p_off = tally__gpu_take(&layout, lane_sums);
    } else {
        n_off = tally__gpu_take(&layout, B > 0 ? B : 1);
        rg_off = tally__gpu_take(&layout, 2 * (B > 0 ? B : 1));
    }
    uint64_t w_off = 0, s_off = 0;
    tally__gpu_tree_space c_space = {0, 0};
    if (!job->per_row_alpha) {
        if (!fused && !lanes) w_off = tally__gpu_take(&layout, weights > 0 ? weights : 1);
        if (B == 0) s_off = tally__gpu_take(&layout, V);
        c_space = tally__gpu_tree_layout(&layout, &job->col_plan, V);
    }
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    if (lanes) return dm_backward_lanes(ctx, job, scratch, a_off, pre_off, p_off, c_space);
    tally__gpu_vectors a_src = {.buf = la->buffer, .off = la->offset, .cols = V, .stride = la->stride,
                                .mode = TALLY_K_LOAD_CONTIGUOUS, .nvec = a_vectors,
                                .vec_stride = job->per_row_alpha ? la->stride : 0};
    tally__gpu_result a_res = {.buf = scratch, .off = a_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                               .divisor = 0.0f, .shift = NULL, .shift_off = 0};
    st = tally__gpu_tree(ctx, &a_src, &job->row_plan, TALLY_K_TERM_EXP, TALLY_COMBINE_SUM, &a_res, scratch, a_space);
    if (st != TALLY_OK) return st;
    if (B > 0) {
        tally__gpu_vectors n_src = {.buf = counts->buffer, .off = counts->offset, .cols = V,
                                    .stride = counts->stride,
                                    .mode = tally__gpu_rows_aligned16(ctx, counts) ? TALLY_K_LOAD_VEC4
                                                                                    : TALLY_K_LOAD_CONTIGUOUS,
                                    .nvec = B,
                                    .vec_stride = counts->stride};
        tally__gpu_result n_res = {.buf = scratch, .off = n_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                   .divisor = 0.0f, .shift = NULL, .shift_off = 0};
        st = tally__gpu_tree(ctx, &n_src, &job->row_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &n_res, scratch,
                             n_space);
        if (st != TALLY_OK) return st;

        const tally__kargs_dm_bw_rows r = {.sums = {scratch, a_off}, .a_step = job->per_row_alpha ? 1u : 0u,
                                           .n_off = n_off, .g = tally__gpu_at_view(g), .g_stride = g->stride,
                                           .per_row_grad = job->per_row_grad ? 1u : 0u,
                                           .divide = job->divide ? 1u : 0u, .divisor = job->divisor, .B = B,
                                           .rg = {scratch, rg_off}};
        st = tally__gpu_launch_dm_bw_rows(ctx, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &r);
        if (st != TALLY_OK) return st;

        if (fused) return dm_backward_columns(ctx, job, scratch, rg_off, c_space);
        /* Per-row alpha: the gradient; shared: the weights, [V, B] in scratch. */
        const tally__kargs_dm_bw_elements e = {
            .counts = tally__gpu_at_view(counts), .c_stride = counts->stride, .la = tally__gpu_at_view(la),
            .la_stride = job->per_row_alpha ? la->stride : 0, .rg = {scratch, rg_off}, .B = B, .V = V,
            .per_row = job->per_row_alpha ? 1u : 0u,
            .out = job->per_row_alpha ? tally__gpu_at_view(out) : (tally__gpu_at){scratch, w_off},
            .out_stride = job->per_row_alpha ? out->stride : 0};
        st = tally__gpu_launch_dm_bw_elements(ctx, job->per_row_alpha ? B : tally__gpu_ceil_div(B, TALLY_K_DM_BW_ROWS),
                                              &e);
        if (st != TALLY_OK || job->per_row_alpha) return st;
        /* Shared alpha, not fused: column v is the contiguous vector w[v * B
         * .. v * B + B - 1] (stored transposed), read 16 bytes at a time when
         * B is a multiple of 4 (scratch regions start 256-byte aligned). */
        tally__gpu_vectors w_src = {.buf = scratch, .off = w_off, .cols = B, .stride = B,
                                    .mode = B % 4u == 0 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS, .nvec = V,
                                    .vec_stride = B};
        const tally__gpu_result res = dm_gradient_result(job);
        return tally__gpu_tree(ctx, &w_src, &job->col_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &res, scratch,
                               c_space);
    }
    /* No rows: the empty sum (+0, as the host's tree gives) scaled. */
    st = tally__gpu_fill(ctx, scratch, s_off, 1, V, 0u);
    if (st != TALLY_OK) return st;
    const tally__kargs_dm_bw_scale sc = {.la = tally__gpu_at_view(la), .s = {scratch, s_off}, .V = V,
                                         .out = tally__gpu_at_view(out)};
    return tally__gpu_launch_dm_bw_scale(ctx, tally__gpu_ceil_div(V, TALLY_GPU_GROUP_SIZE), &sc);
}

/* ---- Gaussian mixture -----------------------------------------------------------
 * 1. The logits' logsumexp (tally_k_logits_lse) when K > 1.
 * 2. The sample: the forward's component picks and z (tally_k_gmm_pick,
 *    tally_k_gmm_noise) into scratch, from the same stream positions.
 * 3. Every (row, component) D-tree of the density (tally_k_gmm_tiles and the
 *    upper levels), the forward's sums.
 * 4. tally_k_gmm_bw_weights: each row's component weights (over the sums)
 *    and logit weights, once a row;
 * 5. tally_k_gmm_bw_rows: the elementwise gradients;
 * 6. the planner's tree over B logit weights per logit (one vector per
 *    column, read with stride K), straight into grad_logits. */

static uint32_t gmm_backward_flags(const tally__gmm_backward_job *job)
{
    uint32_t flags = 0;
    if (job->sample) flags |= TALLY_K_GMM_BW_SAMPLE;
    if (job->grad_log_q.buffer != NULL) flags |= TALLY_K_GMM_BW_HAS_GQ;
    if (job->grad_z_in.buffer != NULL) flags |= TALLY_K_GMM_BW_HAS_GZ_IN;
    if (job->grad_z.buffer != NULL) flags |= TALLY_K_GMM_BW_WANT_GZ;
    if (job->grad_mu.buffer != NULL) flags |= TALLY_K_GMM_BW_WANT_MU;
    if (job->grad_log_var.buffer != NULL) flags |= TALLY_K_GMM_BW_WANT_LV;
    if (job->grad_logits.buffer != NULL) flags |= TALLY_K_GMM_BW_WANT_W;
    return flags;
}

/* 1 when tally_k_gmm_bw_warp takes the job (TALLY_K_GMM_BW_WARP, rows that
 * fit a warp: tally__gpu_gmm_fits_warp), with z (log_prob) and the wanted
 * gradients on 16-byte boundaries too. */
static int gmm_backward_fits_warp(tally_context *ctx, const tally__gmm_backward_job *job)
{
    if (!TALLY_K_GMM_BW_WARP || !tally__gpu_gmm_fits_warp(ctx, &job->fwd)) return 0;
    const tally__array *rows[] = {job->sample ? NULL : &job->fwd.z,
                                  job->grad_mu.buffer != NULL ? &job->grad_mu : NULL,
                                  job->grad_log_var.buffer != NULL ? &job->grad_log_var : NULL};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i] != NULL && !tally__gpu_rows_aligned16(ctx, rows[i])) return 0;
    return 1;
}

/* 1 when tally_k_gmm_bw_warp copies each next row into its stage
 * (TALLY_K_GMM_BW_WARP_STAGED, where the backend grants it): only where a
 * grid of `groups` gives some warp a next row (B rows, 8 a group at a
 * time), since a lone row would only wait for its copy. */
static int gmm_backward_staged(tally_context *ctx, uint64_t B, uint64_t groups)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    return TALLY_K_GMM_BW_WARP_STAGED && g->stage_bytes >= TALLY_K_GMM_WARP_STAGE_BYTES &&
           groups < tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE / 32u);
}

/* The whole backward after the logits' logsumexp: tally_k_gmm_bw_warp, a
 * warp a row (8 a group), the logit weights to w_off. */
static tally_status gmm_backward_warp(tally_context *ctx, const tally__gmm_backward_job *job, tally_buffer *scratch,
                                      uint64_t lse_off, uint64_t w_off, uint32_t flags)
{
    const tally__gmm_job *f = &job->fwd;
    const tally__gpu_context *gc = (const tally__gpu_context *)ctx;
    const uint64_t B = f->mu.rows;
    uint64_t groups = tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE / 32u);
    const uint64_t one_wave = (gc->compute_units != 0 ? gc->compute_units : 128u) * TALLY_K_GMM_BW_WARP_GROUPS_PER_CU;
    if (gc->resident_bound && groups > one_wave) groups = one_wave;
    const uint32_t staged = gmm_backward_staged(ctx, B, groups) ? TALLY_K_GMM_BW_STAGED : 0u;
    const tally__kargs_gmm_bw_warp a = {
        .z = job->sample ? (tally__gpu_at){NULL, 0} : tally__gpu_at_view(&f->z), .z_stride = f->z.stride,
        .mu = tally__gpu_at_view(&f->mu), .mu_stride = f->mu.stride, .lv = tally__gpu_at_view(&f->log_var),
        .lv_stride = f->log_var.stride, .logits = tally__gpu_gmm_logits(f), .scratch = {scratch, 0},
        .lse_off = lse_off, .w_off = w_off, .gq = tally__gpu_at_view(&job->grad_log_q),
        .gq_stride = job->grad_log_q.stride, .gzi = tally__gpu_at_view(&job->grad_z_in),
        .gzi_stride = job->grad_z_in.stride, .B = B, .K = f->components, .D = f->dim,
        .lanes = f->dim_plan.level[0].lanes, .seed = f->rng.seed, .subsequence = f->rng.subsequence,
        .offset = f->rng.offset, .flags = flags | staged, .gz = tally__gpu_at_view(&job->grad_z),
        .gz_stride = job->grad_z.stride, .gmu = tally__gpu_at_view(&job->grad_mu),
        .gmu_stride = job->grad_mu.stride, .glv = tally__gpu_at_view(&job->grad_log_var),
        .glv_stride = job->grad_log_var.stride};
    return tally__gpu_launch_gmm_bw_warp(ctx, groups, &a);
}

/* The planner's tree over the B logit weights of each logit (a vector a
 * column, read with stride K), straight into grad_logits. */
static tally_status gmm_backward_logits(tally_context *ctx, const tally__gmm_backward_job *job, tally_buffer *scratch,
                                        uint64_t w_off, tally__gpu_tree_space c_space)
{
    const uint64_t K = job->fwd.components;
    tally__gpu_vectors w_src = {.buf = scratch, .off = w_off, .cols = 1, .stride = K, .mode = TALLY_K_LOAD_STRIDED,
                                .nvec = K, .vec_stride = 1};
    tally__gpu_result w_res = {.buf = job->grad_logits.buffer, .off = job->grad_logits.offset,
                               .stride = job->grad_logits.stride, .finish = TALLY_K_FINISH_NONE, .divisor = 0.0f,
                               .shift = NULL, .shift_off = 0};
    return tally__gpu_tree(ctx, &w_src, &job->col_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &w_res, scratch,
                           c_space);
}

tally_status tally__gpu_gmm_backward(tally_context *ctx, const tally__gmm_backward_job *job)
{
    const tally__gmm_job *f = &job->fwd;
    const uint64_t B = f->mu.rows, K = f->components, D = f->dim;
    const tally__tree_plan *plan = &f->dim_plan;
    const tally_rng rng = f->rng;
    const int want_w = job->grad_logits.buffer != NULL;
    uint64_t BK, BD = 0;
    if (tally__mul_u64(B, K, &BK) || (job->sample && tally__mul_u64(B, D, &BD)))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "gpu gmm backward: scratch size overflows");

    const int warp = gmm_backward_fits_warp(ctx, job);
    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    const uint64_t lse_off = tally__gpu_take(&layout, 1);
    const uint64_t picks_off = job->sample && !warp ? tally__gpu_take(&layout, B) : 0;
    const uint64_t z_off = job->sample && !warp ? tally__gpu_take(&layout, BD > 0 ? BD : 1) : 0;
    const uint64_t s_off = warp ? 0 : tally__gpu_take(&layout, BK);
    const uint64_t w_off = want_w ? tally__gpu_take(&layout, BK) : 0;
    tally__gpu_tree_space space = {0, 0};
    if (!warp) space = tally__gpu_tree_layout(&layout, plan, BK);
    tally__gpu_tree_space c_space = {0, 0};
    if (want_w) c_space = tally__gpu_tree_layout(&layout, &job->col_plan, K);
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    if (K > 1) {
        st = tally__gpu_gmm_lse(ctx, f, (tally__gpu_at){scratch, lse_off});
        if (st != TALLY_OK) return st;
    }
    const uint32_t flags = gmm_backward_flags(job);
    if (warp) {
        st = gmm_backward_warp(ctx, job, scratch, lse_off, w_off, flags);
        if (st != TALLY_OK || !want_w) return st;
        return gmm_backward_logits(ctx, job, scratch, w_off, c_space);
    }
    tally__gpu_at z = tally__gpu_at_view(&f->z);
    uint64_t zstride = f->z.stride;
    if (job->sample) {
        z = (tally__gpu_at){scratch, z_off};
        zstride = D;
        st = tally__gpu_gmm_draw(ctx, f, B, (tally__gpu_at){NULL, 0}, 0, (tally__gpu_at){scratch, picks_off}, z, D);
        if (st != TALLY_OK) return st;
    }
    /* The D-trees read quads where the forward would (the same tree order
     * either way, so the same sums). */
    const int vec4 = tally__gpu_gmm_vec4(ctx, f, job->sample ? scratch : NULL, z_off);
    const uint32_t load_mode = vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS;
    uint32_t width = 1u; /* as tally_k_gmm_bw_width: the smallest power of two >= D, at most a group */
    while (width < TALLY_GPU_GROUP_SIZE && width < D) width <<= 1;
    const uint64_t row_groups = tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE / width);
    st = tally__gpu_gmm_sums(ctx, f, B, z, zstride, load_mode, scratch, space, s_off);
    if (st != TALLY_OK) return st;
    const tally__kargs_gmm_bw_weights w = {
        .logits = tally__gpu_gmm_logits(f), .scratch = {scratch, 0}, .s_off = s_off, .lse_off = lse_off,
        .picks_off = picks_off, .w_off = w_off, .gq = tally__gpu_at_view(&job->grad_log_q),
        .gq_stride = job->grad_log_q.stride, .B = B, .K = K, .flags = flags};
    st = tally__gpu_launch_gmm_bw_weights(ctx, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &w);
    if (st != TALLY_OK) return st;
    /* The component weights are where the sums were (s_off). */
    const tally__kargs_gmm_bw_rows r = {
        .z = z, .z_stride = zstride, .mu = tally__gpu_at_view(&f->mu), .mu_stride = f->mu.stride,
        .lv = tally__gpu_at_view(&f->log_var), .lv_stride = f->log_var.stride, .scratch = {scratch, 0},
        .c_off = s_off, .picks_off = picks_off, .gzi = tally__gpu_at_view(&job->grad_z_in),
        .gzi_stride = job->grad_z_in.stride, .B = B, .K = K, .D = D, .seed = rng.seed,
        .subsequence = rng.subsequence, .offset = rng.offset, .flags = flags,
        .gz = tally__gpu_at_view(&job->grad_z), .gz_stride = job->grad_z.stride,
        .gmu = tally__gpu_at_view(&job->grad_mu), .gmu_stride = job->grad_mu.stride,
        .glv = tally__gpu_at_view(&job->grad_log_var), .glv_stride = job->grad_log_var.stride};
    st = tally__gpu_launch_gmm_bw_rows(ctx, row_groups, &r);
    if (st != TALLY_OK || !want_w) return st;
    return gmm_backward_logits(ctx, job, scratch, w_off, c_space);
}
