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
static uint64_t bounded_grid(tally_context *ctx, uint64_t items)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t cap = (g->compute_units != 0 ? g->compute_units : 128u) * 16u;
    const uint64_t groups = tally__gpu_ceil_div(items, TALLY_GPU_GROUP_SIZE);
    return groups < cap ? groups : cap;
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
    const uint64_t groups = flat ? bounded_grid(ctx, items) : rows;
    uint32_t want = 0;
    if (gx->buffer != NULL) want |= TALLY_K_BW_WANT_A;
    if (gt->buffer != NULL) want |= TALLY_K_BW_WANT_B;
    tally__gpu_args l = {.n = 0};
    tally__gpu_arg_buf(&l, x->buffer, x->offset);
    tally__gpu_arg_u64(&l, x->stride);
    tally__gpu_arg_buf(&l, t->buffer, t->offset);
    tally__gpu_arg_u64(&l, t->stride);
    tally__gpu_arg_buf(&l, g->buffer, g->offset);
    tally__gpu_arg_u64(&l, g->stride);
    tally__gpu_arg_buf(&l, gx->buffer, gx->offset);
    tally__gpu_arg_u64(&l, gx->stride);
    tally__gpu_arg_buf(&l, gt->buffer, gt->offset);
    tally__gpu_arg_u64(&l, gt->stride);
    tally__gpu_arg_u64(&l, rows);
    tally__gpu_arg_u64(&l, cols);
    tally__gpu_arg_u32(&l, mode);
    tally__gpu_arg_u32(&l, job->flags);
    tally__gpu_arg_u32(&l, pointwise ? 1u : 0u);
    tally__gpu_arg_u32(&l, job->divide ? 1u : 0u);
    tally__gpu_arg_f32(&l, job->divisor);
    tally__gpu_arg_u32(&l, want);
    return tally__gpu_run(ctx, TALLY__K_tally_k_kl_backward, groups, &l);
}

/* ---- Dirichlet-multinomial ----------------------------------------------------
 * 1. The forward's trees over V: A = sum exp(log_alpha) per row (once for a
 *    shared alpha; the SHIFTED_EXP term with a zero shift is exp(x) exactly,
 *    since x - 0 == x) and N = sum n per row.
 * 2. tally_k_dm_bw_rows: R_b and g_b per row.
 * 3. tally_k_dm_bw_elements: per-row alpha writes the gradient; a shared
 *    alpha writes the weights w[b, v] to scratch, transposed ([V, B]),
 * 4. whose V columns the planner's tree over B sums (one contiguous vector
 *    per column), and tally_k_dm_bw_scale multiplies by a_v. */

tally_status tally__gpu_dirichlet_multinomial_backward(tally_context *ctx, const tally__dm_backward_job *job)
{
    const tally__array *counts = &job->counts, *la = &job->log_alpha, *g = &job->grad_out;
    const tally__array *out = &job->grad_log_alpha;
    const uint64_t B = counts->rows, V = counts->cols;
    const uint64_t a_vectors = job->per_row_alpha ? B : 1;
    uint64_t weights = 0;
    if (!job->per_row_alpha && tally__mul_u64(B, V, &weights))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "gpu dirichlet_multinomial_backward: B*V overflows");

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    tally__gpu_tree_space a_space = tally__gpu_tree_layout(&layout, &job->row_plan, a_vectors);
    tally__gpu_tree_space n_space = tally__gpu_tree_layout(&layout, &job->row_plan, B);
    const uint64_t zero_off = tally__gpu_take(&layout, a_vectors);
    const uint64_t a_off = tally__gpu_take(&layout, a_vectors);
    const uint64_t n_off = tally__gpu_take(&layout, B > 0 ? B : 1);
    const uint64_t rg_off = tally__gpu_take(&layout, 2 * (B > 0 ? B : 1));
    uint64_t w_off = 0, s_off = 0;
    tally__gpu_tree_space c_space = {0, 0};
    if (!job->per_row_alpha) {
        w_off = tally__gpu_take(&layout, weights > 0 ? weights : 1);
        s_off = tally__gpu_take(&layout, V);
        c_space = tally__gpu_tree_layout(&layout, &job->col_plan, V);
    }
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    st = tally__gpu_fill(ctx, scratch, zero_off, 1, a_vectors, 0u);
    if (st != TALLY_OK) return st;
    tally__gpu_vectors a_src = {.buf = la->buffer, .off = la->offset, .cols = V, .stride = la->stride,
                                .mode = TALLY_K_LOAD_CONTIGUOUS, .nvec = a_vectors,
                                .vec_stride = job->per_row_alpha ? la->stride : 0};
    tally__gpu_result a_res = {.buf = scratch, .off = a_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                               .divisor = 0.0f, .shift = scratch, .shift_off = zero_off};
    st = tally__gpu_tree(ctx, &a_src, &job->row_plan, TALLY_K_TERM_SHIFTED_EXP, TALLY_COMBINE_SUM, &a_res, scratch,
                         a_space);
    if (st != TALLY_OK) return st;
    if (B > 0) {
        tally__gpu_vectors n_src = {.buf = counts->buffer, .off = counts->offset, .cols = V,
                                    .stride = counts->stride, .mode = TALLY_K_LOAD_CONTIGUOUS, .nvec = B,
                                    .vec_stride = counts->stride};
        tally__gpu_result n_res = {.buf = scratch, .off = n_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                   .divisor = 0.0f, .shift = NULL, .shift_off = 0};
        st = tally__gpu_tree(ctx, &n_src, &job->row_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &n_res, scratch,
                             n_space);
        if (st != TALLY_OK) return st;

        tally__gpu_args l = {.n = 0};
        tally__gpu_arg_buf(&l, scratch, a_off);
        tally__gpu_arg_u64(&l, job->per_row_alpha ? 1u : 0u);
        tally__gpu_arg_u64(&l, n_off);
        tally__gpu_arg_buf(&l, g->buffer, g->offset);
        tally__gpu_arg_u64(&l, g->stride);
        tally__gpu_arg_u32(&l, job->per_row_grad ? 1u : 0u);
        tally__gpu_arg_u32(&l, job->divide ? 1u : 0u);
        tally__gpu_arg_f32(&l, job->divisor);
        tally__gpu_arg_u64(&l, B);
        tally__gpu_arg_buf(&l, scratch, rg_off);
        st = tally__gpu_run(ctx, TALLY__K_tally_k_dm_bw_rows, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &l);
        if (st != TALLY_OK) return st;

        l.n = 0;
        tally__gpu_arg_buf(&l, counts->buffer, counts->offset);
        tally__gpu_arg_u64(&l, counts->stride);
        tally__gpu_arg_buf(&l, la->buffer, la->offset);
        tally__gpu_arg_u64(&l, job->per_row_alpha ? la->stride : 0);
        tally__gpu_arg_buf(&l, scratch, rg_off);
        tally__gpu_arg_u64(&l, B);
        tally__gpu_arg_u64(&l, V);
        tally__gpu_arg_u32(&l, job->per_row_alpha ? 1u : 0u);
        if (job->per_row_alpha) {
            tally__gpu_arg_buf(&l, out->buffer, out->offset);
            tally__gpu_arg_u64(&l, out->stride);
        } else {
            tally__gpu_arg_buf(&l, scratch, w_off);
            tally__gpu_arg_u64(&l, 0);
        }
        st = tally__gpu_run(ctx, TALLY__K_tally_k_dm_bw_elements,
                            job->per_row_alpha ? B : tally__gpu_ceil_div(B, TALLY_K_DM_BW_ROWS), &l);
        if (st != TALLY_OK || job->per_row_alpha) return st;
    }

    /* Shared alpha: column v is the contiguous vector w[v * B .. v * B + B - 1]
     * (stored transposed), read 16 bytes at a time when B is a multiple of 4
     * (scratch regions start 256-byte aligned). */
    if (job->col_plan.levels == 0) {
        st = tally__gpu_fill(ctx, scratch, s_off, 1, V, 0u); /* the empty sum, as the host's tree gives */
    } else {
        tally__gpu_vectors w_src = {.buf = scratch, .off = w_off, .cols = B, .stride = B,
                                    .mode = B % 4u == 0 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS, .nvec = V,
                                    .vec_stride = B};
        tally__gpu_result s_res = {.buf = scratch, .off = s_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                   .divisor = 0.0f, .shift = NULL, .shift_off = 0};
        st = tally__gpu_tree(ctx, &w_src, &job->col_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &s_res, scratch,
                             c_space);
    }
    if (st != TALLY_OK) return st;
    tally__gpu_args l = {.n = 0};
    tally__gpu_arg_buf(&l, la->buffer, la->offset);
    tally__gpu_arg_buf(&l, scratch, s_off);
    tally__gpu_arg_u64(&l, V);
    tally__gpu_arg_buf(&l, out->buffer, out->offset);
    return tally__gpu_run(ctx, TALLY__K_tally_k_dm_bw_scale, tally__gpu_ceil_div(V, TALLY_GPU_GROUP_SIZE), &l);
}

/* ---- Gaussian mixture -----------------------------------------------------------
 * 1. The logits' logsumexp (tally_k_logits_lse) when K > 1.
 * 2. The sample: the forward's component picks and z (tally_k_gmm_pick,
 *    tally_k_gmm_noise) into scratch, from the same stream positions.
 * 3. Every (row, component) D-tree of the density (tally_k_gmm_tiles and the
 *    upper levels), the forward's sums.
 * 4. tally_k_gmm_bw_rows: the elementwise gradients and each row's logit
 *    weights, which
 * 5. the planner's tree over B sums per logit (one vector per column, read
 *    with stride K), straight into grad_logits. */

tally_status tally__gpu_gmm_backward(tally_context *ctx, const tally__gmm_backward_job *job)
{
    const tally__gmm_job *f = &job->fwd;
    const uint64_t B = f->mu.rows, K = f->components, D = f->dim;
    const tally__tree_plan *plan = &f->dim_plan;
    const tally__tree_level lv = tally__gpu_level0(plan);
    const tally_buffer *logits = K > 1 ? f->logits.buffer : NULL;
    const uint64_t logits_off = K > 1 ? f->logits.offset : 0;
    const tally_rng rng = f->rng;
    const int want_w = job->grad_logits.buffer != NULL;
    uint64_t BK, BD = 0;
    if (tally__mul_u64(B, K, &BK) || (job->sample && tally__mul_u64(B, D, &BD)))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "gpu gmm backward: scratch size overflows");

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    const uint64_t lse_off = tally__gpu_take(&layout, 1);
    const uint64_t picks_off = job->sample ? tally__gpu_take(&layout, B) : 0;
    const uint64_t z_off = job->sample ? tally__gpu_take(&layout, BD > 0 ? BD : 1) : 0;
    const uint64_t s_off = tally__gpu_take(&layout, BK);
    const uint64_t w_off = want_w ? tally__gpu_take(&layout, BK) : 0;
    tally__gpu_tree_space space = tally__gpu_tree_layout(&layout, plan, BK);
    tally__gpu_tree_space c_space = {0, 0};
    if (want_w) c_space = tally__gpu_tree_layout(&layout, &job->col_plan, K);
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    if (K > 1) {
        tally__gpu_args l = {.n = 0};
        tally__gpu_arg_buf(&l, logits, logits_off);
        tally__gpu_arg_u64(&l, K);
        tally__gpu_arg_buf(&l, scratch, lse_off);
        st = tally__gpu_run(ctx, TALLY__K_tally_k_logits_lse, 1, &l);
        if (st != TALLY_OK) return st;
    }
    const tally_buffer *zbuf = f->z.buffer;
    uint64_t zoff = f->z.offset, zstride = f->z.stride;
    if (job->sample) {
        tally__gpu_args l = {.n = 0};
        tally__gpu_arg_buf(&l, logits, logits_off);
        tally__gpu_arg_u64(&l, B);
        tally__gpu_arg_u64(&l, K);
        tally__gpu_arg_u64(&l, rng.seed);
        tally__gpu_arg_u64(&l, rng.subsequence);
        tally__gpu_arg_u64(&l, rng.offset);
        tally__gpu_arg_buf(&l, NULL, 0);
        tally__gpu_arg_u64(&l, 0);
        tally__gpu_arg_u32(&l, 0u);
        tally__gpu_arg_buf(&l, scratch, picks_off);
        st = tally__gpu_run(ctx, TALLY__K_tally_k_gmm_pick, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &l);
        if (st != TALLY_OK) return st;
        zbuf = scratch;
        zoff = z_off;
        zstride = D;
        if (D > 0) {
            const uint64_t s0 = rng.offset + tally__round_up4(B), span = B * (D + (D & 1u));
            const uint64_t blocks = ((s0 + (span - 1u)) >> 2) - (s0 >> 2) + 1u;
            tally__gpu_args nz = {.n = 0};
            tally__gpu_arg_buf(&nz, scratch, z_off);
            tally__gpu_arg_u64(&nz, D);
            tally__gpu_arg_buf(&nz, f->mu.buffer, f->mu.offset);
            tally__gpu_arg_u64(&nz, f->mu.stride);
            tally__gpu_arg_buf(&nz, f->log_var.buffer, f->log_var.offset);
            tally__gpu_arg_u64(&nz, f->log_var.stride);
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

    const int multi = plan->levels > 1;
    tally__gpu_args t = {.n = 0};
    tally__gpu_arg_buf(&t, zbuf, zoff);
    tally__gpu_arg_u64(&t, zstride);
    tally__gpu_arg_buf(&t, f->mu.buffer, f->mu.offset);
    tally__gpu_arg_u64(&t, f->mu.stride);
    tally__gpu_arg_buf(&t, f->log_var.buffer, f->log_var.offset);
    tally__gpu_arg_u64(&t, f->log_var.stride);
    tally__gpu_arg_u64(&t, B);
    tally__gpu_arg_u64(&t, K);
    tally__gpu_arg_u64(&t, D);
    tally__gpu_arg_u32(&t, lv.lanes);
    tally__gpu_arg_u32(&t, lv.quads_per_lane);
    tally__gpu_arg_u64(&t, lv.tiles);
    tally__gpu_arg_u32(&t, TALLY_K_LOAD_CONTIGUOUS);
    tally__gpu_arg_buf(&t, scratch, multi ? space.a_off : s_off);
    st = tally__gpu_run(ctx, TALLY__K_tally_k_gmm_tiles, tally__gpu_ceil_div(BK * lv.tiles, TALLY_GPU_GROUP_SIZE / lv.lanes),
                        &t);
    if (st != TALLY_OK) return st;
    if (multi) {
        tally__gpu_result res = {.buf = scratch, .off = s_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                 .divisor = 0.0f, .shift = NULL, .shift_off = 0};
        st = tally__gpu_tree_upper(ctx, plan, BK, TALLY_COMBINE_SUM, &res, scratch, space);
        if (st != TALLY_OK) return st;
    }

    uint32_t flags = 0;
    if (job->sample) flags |= TALLY_K_GMM_BW_SAMPLE;
    if (job->grad_log_q.buffer != NULL) flags |= TALLY_K_GMM_BW_HAS_GQ;
    if (job->grad_z_in.buffer != NULL) flags |= TALLY_K_GMM_BW_HAS_GZ_IN;
    if (job->grad_z.buffer != NULL) flags |= TALLY_K_GMM_BW_WANT_GZ;
    if (job->grad_mu.buffer != NULL) flags |= TALLY_K_GMM_BW_WANT_MU;
    if (job->grad_log_var.buffer != NULL) flags |= TALLY_K_GMM_BW_WANT_LV;
    if (want_w) flags |= TALLY_K_GMM_BW_WANT_W;
    tally__gpu_args r = {.n = 0};
    tally__gpu_arg_buf(&r, zbuf, zoff);
    tally__gpu_arg_u64(&r, zstride);
    tally__gpu_arg_buf(&r, f->mu.buffer, f->mu.offset);
    tally__gpu_arg_u64(&r, f->mu.stride);
    tally__gpu_arg_buf(&r, f->log_var.buffer, f->log_var.offset);
    tally__gpu_arg_u64(&r, f->log_var.stride);
    tally__gpu_arg_buf(&r, logits, logits_off);
    tally__gpu_arg_buf(&r, scratch, 0);
    tally__gpu_arg_u64(&r, s_off);
    tally__gpu_arg_u64(&r, lse_off);
    tally__gpu_arg_u64(&r, picks_off);
    tally__gpu_arg_u64(&r, w_off);
    tally__gpu_arg_buf(&r, job->grad_log_q.buffer, job->grad_log_q.offset);
    tally__gpu_arg_u64(&r, job->grad_log_q.stride);
    tally__gpu_arg_buf(&r, job->grad_z_in.buffer, job->grad_z_in.offset);
    tally__gpu_arg_u64(&r, job->grad_z_in.stride);
    tally__gpu_arg_u64(&r, B);
    tally__gpu_arg_u64(&r, K);
    tally__gpu_arg_u64(&r, D);
    tally__gpu_arg_u64(&r, rng.seed);
    tally__gpu_arg_u64(&r, rng.subsequence);
    tally__gpu_arg_u64(&r, rng.offset);
    tally__gpu_arg_u32(&r, flags);
    tally__gpu_arg_buf(&r, job->grad_z.buffer, job->grad_z.offset);
    tally__gpu_arg_u64(&r, job->grad_z.stride);
    tally__gpu_arg_buf(&r, job->grad_mu.buffer, job->grad_mu.offset);
    tally__gpu_arg_u64(&r, job->grad_mu.stride);
    tally__gpu_arg_buf(&r, job->grad_log_var.buffer, job->grad_log_var.offset);
    tally__gpu_arg_u64(&r, job->grad_log_var.stride);
    uint32_t width = 1u; /* as tally_k_gmm_bw_width: the smallest power of two >= D, at most a group */
    while (width < TALLY_GPU_GROUP_SIZE && width < D) width <<= 1;
    st = tally__gpu_run(ctx, TALLY__K_tally_k_gmm_bw_rows, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE / width), &r);
    if (st != TALLY_OK || !want_w) return st;

    tally__gpu_vectors w_src = {.buf = scratch, .off = w_off, .cols = 1, .stride = K, .mode = TALLY_K_LOAD_STRIDED,
                                .nvec = K, .vec_stride = 1};
    tally__gpu_result w_res = {.buf = job->grad_logits.buffer, .off = job->grad_logits.offset,
                               .stride = job->grad_logits.stride, .finish = TALLY_K_FINISH_NONE, .divisor = 0.0f,
                               .shift = NULL, .shift_off = 0};
    return tally__gpu_tree(ctx, &w_src, &job->col_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &w_res, scratch,
                           c_space);
}
