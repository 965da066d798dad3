/*
 * backends/gpu/gpu_ops.c - reductions, KL divergence, Dirichlet-
 * multinomial and the random ops on any GPU backend, as launch sequences of
 * the kernels in kernels/. Each op reproduces backends/host/host_ops.c bit
 * for bit: the same terms, in the order of the same tree.
 */
#include "gpu_internal.h"
#include "tally/half.h"
#include "tally/terms.h"

static uint32_t f32_bits(float f)
{
    return tally_as_u32(f);
}

/* ---- Reductions ------------------------------------------------------------
 * ALL: one vector, the row-major walk of the view; ROW: one vector per row.
 * Every op is one tree (sum, sum of squares, min, max; mean divides in the
 * last launch) except logsumexp: a max tree into scratch, then a sum tree of
 * exp(x - max) whose last launch applies tally_lse_finish. A single-level
 * plan (n <= 16384) is a single launch per tree. */

tally_status tally__gpu_reduce(tally_context *ctx, const tally__reduce_job *job)
{
    const tally__tree_plan *plan = &job->plan;
    const int all = job->axis == TALLY_AXIS_ALL;
    const uint64_t nvec = all ? 1 : job->x.rows;
    if (plan->levels == 0) {
        /* Empty vectors: the host's empty values (mean, min and max of
         * nothing were refused by the front end). */
        float v = job->op == TALLY_LOGSUMEXP ? TALLY_F32_NEG_INF : 0.0f;
        return tally__gpu_fill(ctx, job->out.buffer, job->out.offset, job->out.stride, nvec, f32_bits(v));
    }

    /* An ALL reduction of a contiguous view reads one run of rows * cols
     * elements whatever its shape: seen as that one row, [n, 1] (stride 1,
     * not a multiple of 4) and [r, c] with c % 4 != 0 get the 16-byte loads
     * of [1, n], which only the first element's alignment decides. The walk,
     * and so every term and its place in the tree, is the same. */
    tally__array x = job->x;
    if (all && tally__gpu_contiguous(&x)) {
        x.cols = x.rows * x.cols;
        x.stride = x.cols;
        x.rows = 1;
    }
    tally__gpu_vectors src = {.buf = x.buffer, .off = x.offset, .cols = x.cols, .stride = x.stride, .nvec = nvec,
                              .vec_stride = 0, .dtype = tally__gpu_kdtype(&x)};
    if (all && !tally__gpu_contiguous(&x)) {
        src.mode = TALLY_K_LOAD_STRIDED;
    } else {
        src.vec_stride = all ? 0 : x.stride;
        src.mode = tally__gpu_rows_aligned16(ctx, &x) ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS;
    }

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    tally__gpu_tree_space space = tally__gpu_tree_layout(&layout, plan, nvec);
    const uint64_t max_off = job->op == TALLY_LOGSUMEXP ? tally__gpu_take(&layout, nvec) : 0;
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    tally__gpu_result res = {.buf = job->out.buffer, .off = job->out.offset, .stride = job->out.stride,
                             .finish = TALLY_K_FINISH_NONE, .divisor = 0.0f, .shift = NULL, .shift_off = 0};
    switch (job->op) {
    case TALLY_SUM:
        return tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &res, scratch, space);
    case TALLY_SUMSQ:
        return tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_SQUARE, TALLY_COMBINE_SUM, &res, scratch, space);
    case TALLY_MIN:
        return tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_MIN, &res, scratch, space);
    case TALLY_MAX:
        return tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_MAX, &res, scratch, space);
    case TALLY_MEAN:
        /* (float)n converted here by the same C conversion the host uses. */
        res.finish = TALLY_K_FINISH_DIVIDE;
        res.divisor = (float)plan->level[0].n;
        return tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &res, scratch, space);
    case TALLY_LOGSUMEXP: {
        if (((const tally__gpu_context *)ctx)->cpu_twins && plan->levels == 1) {
            /* One tile a vector: the twin's two trees in one unit. */
            res.finish = TALLY_K_FINISH_LSE;
            res.shift = scratch;
            res.shift_off = max_off;
            return tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_LSE, TALLY_COMBINE_SUM, &res, scratch, space);
        }
        tally__gpu_result max_res = {.buf = scratch, .off = max_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                     .divisor = 0.0f, .shift = NULL, .shift_off = 0};
        st = tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_MAX, &max_res, scratch, space);
        if (st != TALLY_OK) return st;
        /* A non-finite maximum makes tally_lse_finish return it unchanged,
         * which is what the host returns without running the sum. */
        res.finish = TALLY_K_FINISH_LSE;
        res.shift = scratch;
        res.shift_off = max_off;
        return tally__gpu_tree(ctx, &src, plan, TALLY_K_TERM_SHIFTED_EXP, TALLY_COMBINE_SUM, &res, scratch,
                               space);
    }
    }
    return tally__error(ctx, TALLY_INVALID_ARGUMENT, "gpu reduce: unknown op %d", (int)job->op);
}

/* ---- KL divergence -----------------------------------------------------------
 * NONE: one pointwise launch. Reduced: tally_k_kl_tiles reads input and
 * target once (16-byte loads when both are contiguous and aligned), tiles
 * of 16384 elements walked by the groups (one a tile, or at most
 * TALLY_K_KL_(HALF_)GROUPS_PER_CU a compute unit), partials to scratch;
 * the upper levels (a single small launch up to 2^28 elements) finish with
 * the division. */

tally_status tally__gpu_kl_div(tally_context *ctx, const tally__kl_job *job)
{
    if (job->flags & (TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS)) return tally__gpu_kl_div_logits(ctx, job);
    const tally__array *x = &job->input, *t = &job->target;
    const uint64_t rows = x->rows, cols = x->cols, n = rows * cols;
    if (job->reduction == TALLY_REDUCTION_NONE) {
        const tally__array *o = &job->out;
        uint32_t mode = TALLY_K_LOAD_STRIDED;
        uint64_t groups = rows;
        if (tally__gpu_contiguous(x) && tally__gpu_contiguous(t) && tally__gpu_contiguous(o)) {
            const int vec4 = x->offset % tally__gpu_per16(x) == 0 && t->offset % tally__gpu_per16(t) == 0 && o->offset % 4u == 0 &&
                             tally__gpu_buffer_aligned16(ctx, x->buffer) &&
                             tally__gpu_buffer_aligned16(ctx, t->buffer) &&
                             tally__gpu_buffer_aligned16(ctx, o->buffer);
            mode = vec4 ? TALLY_K_LOAD_VEC4 : TALLY_K_LOAD_CONTIGUOUS;
            groups = tally__gpu_ceil_div(vec4 ? n / 4u + 1u : n, TALLY_GPU_GROUP_SIZE);
        }
        const tally__kargs_kl_pointwise a = {
            .x = tally__gpu_at_view(x), .x_stride = x->stride, .t = tally__gpu_at_view(t), .t_stride = t->stride,
            .o = tally__gpu_at_view(o), .o_stride = o->stride, .rows = rows, .cols = cols, .mode = mode,
            .flags = job->flags, .x_dtype = tally__gpu_kdtype(x), .t_dtype = tally__gpu_kdtype(t)};
        return tally__gpu_launch_kl_pointwise(ctx, groups, &a);
    }

    const uint32_t finish = job->reduction == TALLY_REDUCTION_SUM ? TALLY_K_FINISH_NONE : TALLY_K_FINISH_DIVIDE;
    const float divisor = job->reduction == TALLY_REDUCTION_MEAN ? (float)n : (float)rows;
    const tally__tree_plan *plan = &job->plan;
    if (plan->levels == 0) {
        /* The empty sum is +0 (mean of nothing was refused; batchmean of
         * rows with no columns divides it by rows, as the host does). */
        float v = finish == TALLY_K_FINISH_DIVIDE ? tally_divf(0.0f, divisor) : 0.0f;
        return tally__gpu_fill(ctx, job->out.buffer, job->out.offset, 1, 1, f32_bits(v));
    }
    uint32_t mode = TALLY_K_LOAD_STRIDED;
    if (tally__gpu_contiguous(x) && tally__gpu_contiguous(t))
        mode = x->offset % tally__gpu_per16(x) == 0 && t->offset % tally__gpu_per16(t) == 0 && tally__gpu_buffer_aligned16(ctx, x->buffer) &&
                       tally__gpu_buffer_aligned16(ctx, t->buffer)
                   ? TALLY_K_LOAD_VEC4
                   : TALLY_K_LOAD_CONTIGUOUS;

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    tally__gpu_tree_space space = tally__gpu_tree_layout(&layout, plan, 1);
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    const tally__tree_level *lv = &plan->level[0];
    const int single = plan->levels == 1;
    const tally__kargs_kl_tiles a = {
        .x = tally__gpu_at_view(x), .x_stride = x->stride, .t = tally__gpu_at_view(t), .t_stride = t->stride,
        .cols = cols, .mode = mode, .n = n, .lanes = lv->lanes, .qpl = lv->quads_per_lane, .tiles = lv->tiles,
        .flags = job->flags, .finish = single ? finish : TALLY_K_FINISH_NONE, .divisor = divisor,
        .out = single ? tally__gpu_at_view(&job->out) : (tally__gpu_at){scratch, space.a_off},
        .x_dtype = tally__gpu_kdtype(x), .t_dtype = tally__gpu_kdtype(t)};
    /* The kernels stride over the plan's tiles, so a capped grid computes the
     * same values in the same order. */
    const int halves = tally__gpu_kdtype(x) != TALLY_F32 || tally__gpu_kdtype(t) != TALLY_F32;
    const uint64_t per_cu = halves ? TALLY_K_KL_HALF_GROUPS_PER_CU : TALLY_K_KL_GROUPS_PER_CU;
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t cap = (uint64_t)(g->compute_units != 0 ? g->compute_units : 128u) * per_cu;
    const uint64_t groups = per_cu != 0u && lv->tiles > cap ? cap : lv->tiles;
    if (halves)
        st = tally__gpu_launch_kl_tiles_half(ctx, groups, &a);
    else
        st = tally__gpu_launch_kl_tiles(ctx, groups, &a);
    if (st != TALLY_OK || single) return st;
    tally__gpu_result res = {.buf = job->out.buffer, .off = job->out.offset, .stride = 1, .finish = finish,
                             .divisor = divisor, .shift = NULL, .shift_off = 0};
    return tally__gpu_tree_upper(ctx, plan, 1, TALLY_COMBINE_SUM, &res, scratch, space);
}

/* ---- Dirichlet-multinomial ----------------------------------------------------
 * One launch computes every row value: a segment of lanes per row folds A,
 * N and S in one pass (rows of V <= 16384). A shared alpha is tabulated
 * once per group in local memory (V <= 2048) or once per call by
 * tally_k_dm_prep. Longer rows reduce their tile partials with the upper
 * levels and tally_k_dm_finish. SUM and MEAN then reduce the row values with
 * the rows' own tree.
 *
 * A large call with a shared alpha and rows of one tile (V <= 16384) has
 * tally_k_dm_prep also tabulate lgamma(n + a) for every column and whole
 * n < TALLY_K_DM_TABLE_N (mode TABLE, at most 4 MiB of scratch): small whole
 * counts, the common kind, then cost a table read instead of an lgamma
 * evaluation, which was most of the work per element. The tree and the
 * per-row bookkeeping of tally_k_dm_rows then cost as much as the elements,
 * so those rows go to tally_k_dm_rows_table, whose work-items each play
 * several lanes of the plan. The table costs V * TALLY_K_DM_TABLE_N lgamma
 * evaluations and one launch, so it is built only when the rows outnumber
 * its rows several times over and the call is large enough that the launch
 * is small beside it. */

/* Fewest rows, and fewest elements, for which a shared alpha is tabulated
 * with lgamma(n + a). */
#define DM_TABLE_MIN_ROWS (4u * TALLY_K_DM_TABLE_N)
#define DM_TABLE_MIN_ELEMENTS (UINT64_C(1) << 18)

/* tally_k_dm_rows: a segment of lanes per row tile; out receives the row
 * values (one tile) or the tiles' partials (several). */
static tally_status dm_rows(tally_context *ctx, const tally__dm_job *job, const tally__tree_level *lv,
                            uint32_t alpha_mode, const tally_buffer *pre, uint64_t ea_off, uint64_t lga_off,
                            uint64_t cap, const tally_buffer *out, uint64_t out_at, uint64_t out_stride)
{
    const tally__array *counts = &job->counts, *la = &job->log_alpha;
    const uint64_t B = counts->rows, V = counts->cols;
    const tally__kargs_dm_rows a = {
        .counts = tally__gpu_at_view(counts), .c_stride = counts->stride, .la = tally__gpu_at_view(la),
        .la_stride = job->per_row_alpha ? la->stride : 0, .pre = {pre, ea_off}, .lga_off = lga_off,
        .alpha_mode = alpha_mode, .B = B, .V = V, .lanes = lv->lanes, .qpl = lv->quads_per_lane,
        .tiles = lv->tiles, .flags = job->flags, .out = {out, out_at}, .out_stride = out_stride,
        .c_dtype = tally__gpu_kdtype(counts), .la_dtype = tally__gpu_kdtype(la)};
    uint64_t groups = tally__gpu_ceil_div(B * lv->tiles, TALLY_GPU_GROUP_SIZE / lv->lanes);
    /* Each group tabulates alpha once (as much work as one row of
     * V <= 2048): about 32 groups per compute unit fill the device and keep
     * that table under a few percent of a large call's work. */
    if (alpha_mode == TALLY_K_DM_ALPHA_LOCAL && groups > cap) groups = cap;
    if (alpha_mode == TALLY_K_DM_ALPHA_LOCAL && TALLY_K_DM_LOCAL_QUAD_ILP)
        return tally__gpu_launch_dm_rows_local(ctx, groups, &a);
    return tally__gpu_launch_dm_rows(ctx, groups, &a);
}

/* tally_k_dm_rows_table for rows of one tile (TABLE mode): row values to
 * out, each work-item playing several lanes of the row's plan. */
static tally_status dm_rows_table(tally_context *ctx, const tally__dm_job *job, const tally__tree_level *lv,
                                  const tally_buffer *scratch, uint64_t ea_off, uint64_t lga_off, uint64_t cap,
                                  const tally_buffer *out, uint64_t out_at, uint64_t out_stride)
{
    const tally__array *counts = &job->counts;
    const uint32_t per_item = lv->lanes < TALLY_K_DM_LANES_PER_ITEM ? lv->lanes : TALLY_K_DM_LANES_PER_ITEM;
    uint64_t groups = tally__gpu_ceil_div(counts->rows, TALLY_GPU_GROUP_SIZE / (lv->lanes / per_item));
    /* Capped as tally_k_dm_rows's LOCAL groups are: each group computes the
     * lgamma(n + 1) table once with the coefficient, and copies up to
     * TALLY_K_DM_TERMS terms from the global table (two reads each) into
     * local memory before its first row. With the terms, the groups that
     * fit a compute unit at once (cap is 32 a compute unit) copy them once
     * each and then share out the rows. */
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t per_cu = g->warp_shuffle ? TALLY_K_DM_GROUPS_PER_CU : TALLY_K_DM_TABLE_GROUPS_PER_CU;
    const uint64_t most = TALLY_K_DM_LOCAL_TERMS ? cap / 32u * per_cu : cap;
    if (groups > most) groups = most;
    const tally__kargs_dm_rows_table a = {
        .counts = tally__gpu_at_view(counts), .c_stride = counts->stride,
        .vec4 = tally__gpu_rows_aligned16(ctx, counts) ? 1u : 0u, .pre = {scratch, ea_off}, .lga_off = lga_off,
        .B = counts->rows, .V = counts->cols, .lanes = lv->lanes, .qpl = lv->quads_per_lane, .flags = job->flags,
        .out = {out, out_at}, .out_stride = out_stride, .c_dtype = tally__gpu_kdtype(counts)};
    return tally__gpu_launch_dm_rows_table(ctx, groups, &a);
}

tally_status tally__gpu_dirichlet_multinomial(tally_context *ctx, const tally__dm_job *job)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const tally__array *counts = &job->counts, *la = &job->log_alpha;
    const uint64_t B = counts->rows, V = counts->cols;
    if (B == 0) /* SUM over no rows (MEAN of none was refused): the empty sum, +0. */
        return tally__gpu_fill(ctx, job->out.buffer, job->out.offset, 1, 1, f32_bits(0.0f));
    const tally__tree_plan *row_plan = &job->row_plan;
    const tally__tree_level lv = tally__gpu_level0(row_plan);
    const int multi = row_plan->levels > 1;
    uint32_t alpha_mode = TALLY_K_DM_ALPHA_PER_ROW;
    if (!job->per_row_alpha) {
        alpha_mode = V <= TALLY_K_DM_LOCAL_COLS ? TALLY_K_DM_ALPHA_LOCAL : TALLY_K_DM_ALPHA_PREPARED;
        if (!multi && B >= DM_TABLE_MIN_ROWS && B * V >= DM_TABLE_MIN_ELEMENTS) alpha_mode = TALLY_K_DM_ALPHA_TABLE;
    }
    const int prepared = alpha_mode == TALLY_K_DM_ALPHA_PREPARED || alpha_mode == TALLY_K_DM_ALPHA_TABLE;
    const uint32_t table_rows = alpha_mode == TALLY_K_DM_ALPHA_TABLE ? TALLY_K_DM_TABLE_N : 1u;

    tally__gpu_layout layout = {.floats = 0, .overflow = 0};
    uint64_t ea_off = 0, lga_off = 0, sums_off = 0, rv_off = 0;
    tally__gpu_tree_space row_space = {.a_off = 0, .b_off = 0}, rows_space = {.a_off = 0, .b_off = 0};
    if (prepared) {
        ea_off = tally__gpu_take(&layout, V);
        lga_off = tally__gpu_take(&layout, V * table_rows);
    }
    if (multi) {
        row_space = tally__gpu_tree_layout(&layout, row_plan, 3u * B);
        sums_off = tally__gpu_take(&layout, 3u * B);
    }
    const int reduced = job->reduction != TALLY_REDUCTION_NONE;
    if (reduced) {
        rv_off = tally__gpu_take(&layout, B);
        rows_space = tally__gpu_tree_layout(&layout, &job->rows_plan, 1);
    }
    tally_buffer *scratch = NULL;
    tally_status st = tally__gpu_reserve(ctx, &layout, &scratch);
    if (st != TALLY_OK) return st;

    if (prepared) {
        const tally__kargs_dm_prep a = {.la = tally__gpu_at_view(la), .V = V, .pre = {scratch, ea_off},
                                        .lga_off = lga_off, .rows = table_rows, .la_dtype = tally__gpu_kdtype(la)};
        st = tally__gpu_launch_dm_prep(ctx, tally__gpu_ceil_div(V * table_rows, TALLY_GPU_GROUP_SIZE), &a);
        if (st != TALLY_OK) return st;
    }

    /* Row values go straight to out, or to scratch for SUM and MEAN. */
    const tally_buffer *rv_buf = reduced ? scratch : job->out.buffer;
    const uint64_t rv_at = reduced ? rv_off : job->out.offset;
    const uint64_t rv_stride = reduced ? 1 : job->out.stride;

    const uint64_t cap = (uint64_t)(g->compute_units != 0 ? g->compute_units : 128u) * 32u;
    if (alpha_mode == TALLY_K_DM_ALPHA_TABLE) {
        st = dm_rows_table(ctx, job, &lv, scratch, ea_off, lga_off, cap, rv_buf, rv_at, rv_stride);
        if (st != TALLY_OK) return st;
    } else {
        st = dm_rows(ctx, job, &lv, alpha_mode, prepared ? scratch : NULL, ea_off, lga_off, cap,
                     multi ? scratch : rv_buf, multi ? row_space.a_off : rv_at, multi ? 1 : rv_stride);
        if (st != TALLY_OK) return st;
    }

    if (multi) {
        tally__gpu_result sums = {.buf = scratch, .off = sums_off, .stride = 1, .finish = TALLY_K_FINISH_NONE,
                                  .divisor = 0.0f, .shift = NULL, .shift_off = 0};
        st = tally__gpu_tree_upper(ctx, row_plan, 3u * B, TALLY_COMBINE_SUM, &sums, scratch, row_space);
        if (st != TALLY_OK) return st;
        const tally__kargs_dm_finish f = {.sums = {scratch, sums_off}, .B = B, .flags = job->flags,
                                          .out = {rv_buf, rv_at}, .out_stride = rv_stride};
        st = tally__gpu_launch_dm_finish(ctx, tally__gpu_ceil_div(B, TALLY_GPU_GROUP_SIZE), &f);
        if (st != TALLY_OK) return st;
    }
    if (!reduced) return TALLY_OK;

    tally__gpu_vectors src = {.buf = scratch, .off = rv_off, .cols = B, .stride = B, .mode = TALLY_K_LOAD_VEC4,
                              .nvec = 1, .vec_stride = 0};
    tally__gpu_result res = {.buf = job->out.buffer, .off = job->out.offset, .stride = 1,
                             .finish = job->reduction == TALLY_REDUCTION_MEAN ? TALLY_K_FINISH_DIVIDE
                                                                              : TALLY_K_FINISH_NONE,
                             .divisor = (float)B, .shift = NULL, .shift_off = 0};
    return tally__gpu_tree(ctx, &src, &job->rows_plan, TALLY_K_TERM_PLAIN, TALLY_COMBINE_SUM, &res, scratch,
                           rows_space);
}

/* ---- Random ops -------------------------------------------------------------
 * A fill is one launch. When the output is contiguous, its buffer 16-byte
 * aligned and out_off % 4 == offset % 4, every whole Philox block lands on
 * one aligned quad of the output and tally_k_rng_fill stores it with one
 * 16-byte store; any other view goes through tally_k_rng_fill_any, which
 * stages each pass's words in local memory so that its stores stay
 * coalesced. Both take TALLY_K_RNG_BLOCKS_PER_ITEM blocks per work-item per
 * pass; the grid covers the fill in one pass (the backend's group limit
 * may cut it, and the kernels stride over what they get). */

tally_status tally__gpu_rng_fill(tally_context *ctx, const tally__rng_job *job)
{
    const tally__array *o = &job->out;
    const uint64_t n = o->rows * o->cols;
    const uint64_t off = job->rng.offset;
    const uint64_t blocks = ((off + (n - 1u)) >> 2) - (off >> 2) + 1u;
    const int quads = tally__gpu_contiguous(o) && (o->offset & 3u) == (off & 3u) && tally__gpu_buffer_aligned16(ctx, o->buffer);
    const tally__kargs_rng_fill a = {.out = tally__gpu_at_view(o), .stride = o->stride, .rows = o->rows,
                                     .cols = o->cols, .dist = (uint32_t)job->dist, .seed = job->rng.seed,
                                     .subsequence = job->rng.subsequence, .offset = off};
    const uint64_t groups = tally__gpu_ceil_div(blocks, (uint64_t)TALLY_GPU_GROUP_SIZE * TALLY_K_RNG_BLOCKS_PER_ITEM);
    if (o->dtype == TALLY_BF16 || o->dtype == TALLY_F16) {
        /* A half view (uniform or normal: the front end allows no other)
         * is written by the general walk, each draw narrowed as it is
         * stored: 2 bytes an element, the bits of narrowing the fp32 fill. */
        const tally__kargs_rng_fill_half h = {.out = tally__gpu_at_view(o), .stride = o->stride, .rows = o->rows,
                                              .cols = o->cols, .dist = (uint32_t)job->dist, .seed = job->rng.seed,
                                              .subsequence = job->rng.subsequence, .offset = off,
                                              .dtype = (uint32_t)o->dtype};
        return tally__gpu_launch_rng_fill_half(ctx, groups, &h);
    }
    return quads ? tally__gpu_launch_rng_fill(ctx, groups, &a) : tally__gpu_launch_rng_fill_any(ctx, groups, &a);
}

/* The weights are read where they are, in any view (the kernels load them
 * element by element, so no alignment is asked of them): rows of up to
 * TALLY_K_CAT_SHORT_COLS columns by tally_k_categorical_short (CUDA), other fp32
 * rows by tally_k_categorical, other bf16 and f16 rows by
 * tally_k_categorical_half; each widens a half element as it stages it. */
tally_status tally__gpu_categorical(tally_context *ctx, const tally__categorical_job *job)
{
    const tally__array *w = &job->weights;
    /* Tiles of C = 2^log2 columns by 4096 / C rows: the smallest C from 16
     * to 256 that holds a whole row, so short rows are staged once and a
     * group still owns many of them. */
    uint32_t log2 = 4;
    while (log2 < 8 && (UINT64_C(1) << log2) < w->cols) log2++;
    const tally__kargs_categorical a = {.w = tally__gpu_at_view(w), .w_stride = w->stride, .rows = w->rows,
                                        .cols = w->cols, .is_logits = job->is_logits ? 1u : 0u,
                                        .seed = job->rng.seed, .subsequence = job->rng.subsequence,
                                        .offset = job->rng.offset, .out = tally__gpu_at_view(&job->out),
                                        .out_stride = job->out.stride, .tile_log2 = log2,
                                        .w_dtype = tally__gpu_kdtype(w)};
    /* Short rows: a row a work-item, every dtype in one kernel, where the
     * backend keeps its private arrays in registers across barriers
     * (register_tiles: CUDA). On PoCL 3.1 here it took 1.18 ms for
     * [4096, 64] against the tile kernel's 0.64 ms (a CPU keeps the arrays
     * in memory). */
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t short_groups = tally__gpu_ceil_div(w->rows, TALLY_GPU_GROUP_SIZE);
    /* fp32 rows in whole aligned quads, where the stage is granted (CUDA on
     * compute capability 8.0 and 9.0): copied to local memory by cp.async
     * and walked there. */
    if (TALLY_K_CAT_STAGED && g->stage_bytes >= TALLY_K_CAT_STAGE_BYTES && a.w_dtype == TALLY_F32 &&
        w->cols <= TALLY_K_CAT_SHORT_COLS && w->cols % 4u == 0 && tally__gpu_rows_aligned16(ctx, w))
        return tally__gpu_launch_categorical_staged(ctx, short_groups, &a);
    if (TALLY_K_CAT_SHORT && g->register_tiles && w->cols <= TALLY_K_CAT_SHORT_COLS)
        return tally__gpu_launch_categorical_short(ctx, short_groups, &a);
    /* Elsewhere (OpenCL), TALLY_K_CAT_LOCAL_ROWS rows a group in local
     * memory, on CPU devices too: on PoCL 3.1 and 5.0 on the 2-core CI kind
     * of machine, [4096, 64] took 0.49 ms against the tile kernels' 0.61 to
     * 0.65 ms (bench/RESULTS.md, CPU run R). */
    if (TALLY_K_CAT_LOCAL && !g->register_tiles && w->cols <= TALLY_K_CAT_SHORT_COLS)
        return tally__gpu_launch_categorical_local(ctx, tally__gpu_ceil_div(w->rows, TALLY_K_CAT_LOCAL_ROWS), &a);
    const uint64_t groups = tally__gpu_ceil_div(w->rows, TALLY_K_CAT_TILE >> log2);
    return a.w_dtype == TALLY_F32 ? tally__gpu_launch_categorical(ctx, groups, &a)
                                  : tally__gpu_launch_categorical_half(ctx, groups, &a);
}
