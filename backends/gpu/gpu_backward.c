/*
 * backends/gpu/gpu_backward.c - the gradient ops on any GPU backend, as
 * launch sequences of the kernels in kernels/backward.h and the shared tree.
 * Each reproduces backends/host/host_backward.c bit for bit: the same terms
 * (tally/terms_backward.h), summed in the order of the same trees.
 */
#include "gpu_internal.h"
#include "tally/terms.h"

static int contiguous(const tally__array *a)
{
    return a->buffer == NULL || a->rows <= 1 || a->stride == a->cols;
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
    const uint32_t mode = flat ? TALLY_K_LOAD_CONTIGUOUS : TALLY_K_LOAD_STRIDED;
    const uint64_t groups = flat ? tally__gpu_ceil_div(rows * cols, TALLY_GPU_GROUP_SIZE) : rows;
    uint32_t want = 0;
    if (gx->buffer != NULL) want |= 1u;
    if (gt->buffer != NULL) want |= 2u;
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
 *    alpha writes the weights w[b, v] to scratch,
 * 4. whose V columns the planner's tree over B sums (one vector per column,
 *    read with stride V), and tally_k_dm_bw_scale multiplies by a_v. */

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
            tally__gpu_arg_u64(&l, V);
        }
        st = tally__gpu_run(ctx, TALLY__K_tally_k_dm_bw_elements, B, &l);
        if (st != TALLY_OK || job->per_row_alpha) return st;
    }

    /* Shared alpha: column v is the vector w[v], w[V + v], ... of B values. */
    if (job->col_plan.levels == 0) {
        st = tally__gpu_fill(ctx, scratch, s_off, 1, V, 0u); /* the empty sum, as the host's tree gives */
    } else {
        tally__gpu_vectors w_src = {.buf = scratch, .off = w_off, .cols = 1, .stride = V,
                                    .mode = TALLY_K_LOAD_STRIDED, .nvec = V, .vec_stride = 1};
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
