/*
 * backends/gpu/gpu_kl_logits.c - KL divergence from logits on any GPU
 * backend (kernels/kl_logits.h), reproducing backends/host/host_ops.c's
 * kl_div_logits bit for bit.
 *
 * Fused (tally_k_kl_logits_rows, one launch plus the tree's upper levels):
 * reduced forms whose level-0 tiles are whole rows (both inputs contiguous
 * and 16-byte aligned, cols a power of two from 1024 to 16384, rows * cols a
 * multiple of 16384), where the backend keeps private arrays in registers
 * (tally__gpu_context's register_tiles: CUDA): the inputs are read once.
 * With fp32 inputs, where the backend grants the local memory (stage_bytes:
 * CUDA on compute capability 8.0 and 9.0), tally_k_kl_logits_rows_pair
 * runs two parts a multiprocessor, each with its target quads in local
 * memory, so that one computes while the other waits.
 * Everything else takes the
 * general path: per logits side a max tree and a shifted-exp sum tree over
 * the rows (the row reductions' own launches), tally_k_kl_logits_stats, and
 * tally_k_kl_logits_tiles with the upper levels, or the pointwise kernel.
 */
#include "gpu_internal.h"
#include "tally/half.h"
#include "tally/terms.h"

/* Shortest and longest rows of the fused path. */
#define FUSED_MIN_COLS 1024u
#define FUSED_MAX_COLS 16384u

static int fused_shape(tally_context *ctx, const tally__kl_job *job)
{
    const uint64_t cols = job->input.cols, n = job->input.rows * cols;
    const tally__tree_level *lv = &job->plan.level[0];
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    return g->register_tiles && job->reduction != TALLY_REDUCTION_NONE && cols >= FUSED_MIN_COLS && cols <= FUSED_MAX_COLS &&
           (cols & (cols - 1u)) == 0 && n % TALLY_TREE_TILE == 0 && tally__gpu_contiguous(&job->input) &&
           tally__gpu_contiguous(&job->target) && tally__gpu_rows_aligned16(ctx, &job->input) && tally__gpu_rows_aligned16(ctx, &job->target) &&
           lv->lanes == TALLY_TREE_LANES && lv->quads_per_lane == TALLY_TREE_QUADS_PER_LANE;
}

/* The max tree and the shifted-exp sum tree of every row of one logits
 * side, to planes m_plane and m_plane + 1 of the statistics at st_off. */
static tally_status side_stats(tally_context *ctx, const tally__kl_job *job, const tally__array *side,
                               uint32_t m_plane, tally_buffer *scratch, uint64_t st_off, tally__gpu_tree_space space)
{
    const uint64_t rows = side->rows;
    const tally__gpu_vectors src = {.buf = side->buffer, .off = side->offset, .cols = side->cols,
                                    .stride = side->stride, .nvec = rows, .vec_stride = side->stride,
                                    .mode = tally__gpu_rows_aligned16(ctx, side) ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS,
                                    .dtype = tally__gpu_kdtype(side)};
    const uint64_t m_off = st_off + m_plane * rows;
    if (((const tally__gpu_context *)ctx)->cpu_twins && job->row_plan.levels == 1) {
        /* One tile a row: the twin's two trees in one unit, the row read
         * from memory once (the maxima's plane, then the sums'). */
        const tally__gpu_result res = {.buf = scratch, .off = m_off, .stride = 1, .finish = TALLY_K_FINISH_MAX_SUM,
                                       .divisor = 0.0f, .shift = scratch, .shift_off = m_off};
        return tally__gpu_tree(ctx, &src, &job->row_plan, TALLY_K_TERM_LSE, TALLY_COMBINE_SUM, &res, scratch, space);
    }
    const tally__gpu_result max_res = {.buf = scratch, .off = m_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                       .divisor = 0.0f, .shift = NULL, .shift_off = 0};
    tally_status st = tally__gpu_tree(ctx, &src, &job->row_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_MAX, &max_res,
                                      scratch, space);
    if (st != TALLY_OK) return st;
    const tally__gpu_result sum_res = {.buf = scratch, .off = m_off + rows, .stride = 1,
                                       .finish = TALLY_K_FINISH_NONE, .divisor = 0.0f, .shift = scratch,
                                       .shift_off = m_off};
    return tally__gpu_tree(ctx, &src, &job->row_plan, TALLY_K_TERM_SHIFTED_EXP, TALLY_COMBINE_SUM, &sum_res,
                           scratch, space);
}

tally_status tally__gpu_kl_div_logits(tally_context *ctx, const tally__kl_job *job)
{
    const tally__array *x = &job->input, *t = &job->target;
    const uint64_t rows = x->rows, cols = x->cols, n = rows * cols;
    const uint32_t finish = job->reduction == TALLY_REDUCTION_SUM ? TALLY_K_FINISH_NONE : TALLY_K_FINISH_DIVIDE;
    const float divisor = job->reduction == TALLY_REDUCTION_MEAN ? (float)n : (float)rows;
    const tally__tree_plan *plan = &job->plan;
    if (job->reduction != TALLY_REDUCTION_NONE && plan->levels == 0) {
        /* No elements: the empty sum, as for the plain forms. */
        const float v = finish == TALLY_K_FINISH_DIVIDE ? tally_divf(0.0f, divisor) : 0.0f;
        return tally__gpu_fill(ctx, job->out.buffer, job->out.offset, 1, 1, tally_as_u32(v));
    }

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    const int fused = fused_shape(ctx, job);
    tally__gpu_tree_space kl_space = {0, 0}, row_space = {0, 0};
    uint64_t st_off = 0;
    if (job->reduction != TALLY_REDUCTION_NONE) kl_space = tally__gpu_tree_layout(&layout, plan, 1);
    if (!fused) {
        /* rows is bounded by the front end, so the planes cannot overflow. */
        st_off = tally__gpu_take(&layout, TALLY_K_KLL_PLANES * rows);
        row_space = tally__gpu_tree_layout(&layout, &job->row_plan, rows);
    }
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    const tally__tree_level *lv = &plan->level[0];
    const int single = plan->levels == 1;
    const tally__gpu_at level0_out = single ? tally__gpu_at_view(&job->out) : (tally__gpu_at){scratch, kl_space.a_off};
    if (fused) {
        const tally__kargs_kl_logits_rows a = {
            .x = tally__gpu_at_view(x), .t = tally__gpu_at_view(t), .cols = cols, .tiles = lv->tiles,
            .flags = job->flags, .finish = single ? finish : TALLY_K_FINISH_NONE, .divisor = divisor,
            .out = level0_out, .x_dtype = tally__gpu_kdtype(x), .t_dtype = tally__gpu_kdtype(t)};
        /* One group per multiprocessor (TALLY_K_KLL_GROUPS_PER_CU), looping
         * over tiles: a part's tile fills the registers of one, or half of
         * them in the two parts of tally_k_kl_logits_rows_pair, whose target
         * quads are in local memory where the backend grants it (fp32). */
        const tally__gpu_context *g = (const tally__gpu_context *)ctx;
        const int pair = TALLY_K_KLL_PAIR && g->stage_bytes >= TALLY_K_KLL_STAGE_BYTES && a.x_dtype == TALLY_F32 &&
                         a.t_dtype == TALLY_F32;
        const uint64_t units = (g->compute_units != 0 ? g->compute_units : 128u) * TALLY_K_KLL_GROUPS_PER_CU;
        const uint64_t tiles_per_group = pair ? 2u : 1u;
        const uint64_t groups = tally__gpu_ceil_div(lv->tiles, tiles_per_group);
        st = pair ? tally__gpu_launch_kl_logits_rows_pair(ctx, groups < units ? groups : units, &a)
                  : tally__gpu_launch_kl_logits_rows(ctx, groups < units ? groups : units, &a);
    } else {
        if (job->flags & TALLY_KL_INPUT_LOGITS)
            st = side_stats(ctx, job, x, TALLY_K_KLL_MX, scratch, st_off, row_space);
        if (st == TALLY_OK && (job->flags & TALLY_KL_TARGET_LOGITS))
            st = side_stats(ctx, job, t, TALLY_K_KLL_MY, scratch, st_off, row_space);
        if (st != TALLY_OK) return st;
        const tally__kargs_kl_logits_stats s = {.st = {scratch, st_off}, .rows = rows, .flags = job->flags};
        st = tally__gpu_launch_kl_logits_stats(ctx, tally__gpu_ceil_div(rows, TALLY_GPU_GROUP_SIZE), &s);
        if (st != TALLY_OK) return st;
        if (job->reduction == TALLY_REDUCTION_NONE) {
            const tally__array *o = &job->out;
            const tally__kargs_kl_logits_pointwise a = {
                .x = tally__gpu_at_view(x), .x_stride = x->stride, .t = tally__gpu_at_view(t),
                .t_stride = t->stride, .o = tally__gpu_at_view(o), .o_stride = o->stride, .rows = rows,
                .cols = cols, .flags = job->flags, .st = {scratch, st_off}, .x_dtype = tally__gpu_kdtype(x),
                .t_dtype = tally__gpu_kdtype(t)};
            return tally__gpu_launch_kl_logits_pointwise(ctx, rows, &a);
        }
        uint32_t mode = TALLY_K_LOAD_STRIDED;
        if (tally__gpu_contiguous(x) && tally__gpu_contiguous(t))
            mode = tally__gpu_rows_aligned16(ctx, x) && tally__gpu_rows_aligned16(ctx, t) ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS;
        const tally__kargs_kl_logits_tiles a = {
            .x = tally__gpu_at_view(x), .x_stride = x->stride, .t = tally__gpu_at_view(t), .t_stride = t->stride,
            .cols = cols, .mode = mode, .n = n, .lanes = lv->lanes, .qpl = lv->quads_per_lane, .tiles = lv->tiles,
            .flags = job->flags, .finish = single ? finish : TALLY_K_FINISH_NONE, .divisor = divisor,
            .st = {scratch, st_off}, .rows = rows, .out = level0_out, .x_dtype = tally__gpu_kdtype(x), .t_dtype = tally__gpu_kdtype(t)};
        st = tally__gpu_launch_kl_logits_tiles(ctx, lv->tiles, &a);
    }
    if (st != TALLY_OK || single) return st;
    const tally__gpu_result res = {.buf = job->out.buffer, .off = job->out.offset, .stride = 1, .finish = finish,
                                   .divisor = divisor, .shift = NULL, .shift_off = 0};
    return tally__gpu_tree_upper(ctx, plan, 1, TALLY_COMBINE_SUM, &res, scratch, kl_space);
}
