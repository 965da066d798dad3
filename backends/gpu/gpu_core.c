/*
 * backends/gpu/gpu_core.c - the shared GPU layer's plumbing: kernel names,
 * argument lists, launches, the scratch buffer and the launches of the
 * reduction tree (docs/reduction-tree.md).
 */
#include <string.h>

#include "gpu_internal.h"
#include "tally/half.h"
#include "tally/terms.h"

_Static_assert(TALLY_GPU_GROUP_SIZE == TALLY_K_GROUP_SIZE, "kernels and host disagree on the group size");
_Static_assert(TALLY_GPU_GROUP_SIZE == TALLY_TREE_LANES, "a group must run one full tile");

static const char *const kernel_names[TALLY__KERNEL_COUNT] = {
#define TALLY__KERNEL(name) #name,
#include "kernel_list.h"
#undef TALLY__KERNEL
};

const char *tally__gpu_kernel_name(tally__kernel_id id)
{
    if ((int)id < 0 || (int)id >= TALLY__KERNEL_COUNT) return "(no such kernel)";
    return kernel_names[id];
}

/* ---- Arguments and launches ---------------------------------------------- */

/* The lists are built by this layer with a fixed, known number of
 * arguments per kernel (at most 28), so overflowing the array is a
 * programming error; the spare slot absorbs it and the launch reports it. */
static tally__gpu_arg *next_arg(tally__gpu_args *l)
{
    if (l->n >= TALLY__GPU_MAX_ARGS) {
        l->n = TALLY__GPU_MAX_ARGS + 1;
        return &l->a[TALLY__GPU_MAX_ARGS];
    }
    return &l->a[l->n++];
}

void tally__gpu_arg_buf(tally__gpu_args *l, const tally_buffer *buf, uint64_t element_offset)
{
    tally__gpu_arg *a = next_arg(l);
    a->kind = TALLY__ARG_BUFFER;
    a->v.buffer = buf;
    tally__gpu_arg_u64(l, element_offset);
}

void tally__gpu_arg_u64(tally__gpu_args *l, uint64_t v)
{
    tally__gpu_arg *a = next_arg(l);
    a->kind = TALLY__ARG_U64;
    a->v.u64 = v;
}

void tally__gpu_arg_u32(tally__gpu_args *l, uint32_t v)
{
    tally__gpu_arg *a = next_arg(l);
    a->kind = TALLY__ARG_U32;
    a->v.u32 = v;
}

void tally__gpu_arg_f32(tally__gpu_args *l, float v)
{
    tally__gpu_arg *a = next_arg(l);
    a->kind = TALLY__ARG_F32;
    a->v.f32 = v;
}

tally_status tally__gpu_run(tally_context *ctx, tally__kernel_id kernel, uint64_t groups,
                            const tally__gpu_args *args)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    if (args->n > TALLY__GPU_MAX_ARGS)
        return tally__error(ctx, TALLY_BACKEND_ERROR, "gpu layer: %s was given more than %d arguments",
                            tally__gpu_kernel_name(kernel), TALLY__GPU_MAX_ARGS);
    uint64_t max_groups = g->dev->max_groups != 0 ? g->dev->max_groups : 2147483647u;
    if (groups > max_groups) groups = max_groups;
    if (groups == 0) groups = 1;
    return g->dev->launch(ctx, kernel, groups, args->a, args->n);
}

uint64_t tally__gpu_ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

int tally__gpu_buffer_aligned16(const tally_context *ctx, const tally_buffer *buf)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    if (buf == NULL) return 0;
    if (g->dev->buffer_alignment != NULL) return g->dev->buffer_alignment(buf) >= 16u;
    return !buf->wrapped;
}

/* ---- Scratch ----------------------------------------------------------- */

/* Regions start on 64-float (256-byte) boundaries. */
#define REGION_ALIGN 64u
/* The first scratch buffer is at least this large, so that the small ops
 * of a typical session never reallocate. */
#define SCRATCH_MIN_BYTES (256u * 1024u)

uint64_t tally__gpu_take(tally__gpu_layout *layout, uint64_t n)
{
    uint64_t at = layout->floats;
    uint64_t rounded = n + (REGION_ALIGN - 1u);
    if (rounded < n || UINT64_MAX - at < rounded) {
        layout->overflow = 1;
        return 0;
    }
    layout->floats = at + (rounded & ~(uint64_t)(REGION_ALIGN - 1u));
    return at;
}

tally_status tally__gpu_reserve(tally_context *ctx, const tally__gpu_layout *layout, tally_buffer **scratch)
{
    tally__gpu_context *g = (tally__gpu_context *)ctx;
    *scratch = NULL;
    if (layout->overflow || layout->floats > SIZE_MAX / 4u)
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "gpu layer: scratch for partial results overflows");
    if (layout->floats == 0) return TALLY_OK;
    size_t need = (size_t)layout->floats * 4u;
    if (g->scratch != NULL && g->scratch_bytes >= need) {
        *scratch = g->scratch;
        return TALLY_OK;
    }
    /* Grow geometrically so that a sequence of growing calls reallocates
     * rarely; if the doubled size cannot be had, try the exact size. */
    size_t want = need < SCRATCH_MIN_BYTES ? SCRATCH_MIN_BYTES : need;
    if (g->scratch_bytes > 0 && want < g->scratch_bytes * 2u && g->scratch_bytes <= SIZE_MAX / 2u)
        want = g->scratch_bytes * 2u;
    if (g->scratch != NULL) {
        /* In-order queues: work already queued keeps the old buffer alive
         * (OpenCL reference counts it; the CUDA backend waits). */
        ctx->ops->buffer_release(g->scratch);
        g->scratch = NULL;
        g->scratch_bytes = 0;
    }
    tally_buffer *buf = NULL;
    tally_status st = ctx->ops->buffer_create(ctx, want, &buf);
    if (st != TALLY_OK && want > need) {
        want = need;
        st = ctx->ops->buffer_create(ctx, want, &buf);
    }
    if (st != TALLY_OK) return st;
    g->scratch = buf;
    g->scratch_bytes = want;
    *scratch = buf;
    return TALLY_OK;
}

void tally__gpu_context_cleanup(tally__gpu_context *gctx)
{
    if (gctx == NULL || gctx->scratch == NULL) return;
    gctx->base.ops->buffer_release(gctx->scratch);
    gctx->scratch = NULL;
    gctx->scratch_bytes = 0;
}

/* ---- Tree launches ------------------------------------------------------ */

tally__tree_level tally__gpu_level0(const tally__tree_plan *plan)
{
    if (plan->levels > 0) return plan->level[0];
    tally__tree_level empty = {.n = 0, .lanes = 1, .quads_per_lane = 1, .tiles = 1};
    return empty;
}

tally__gpu_tree_space tally__gpu_tree_layout(tally__gpu_layout *layout, const tally__tree_plan *plan,
                                             uint64_t nvec)
{
    tally__gpu_tree_space space = {.a_off = 0, .b_off = 0};
    uint64_t size;
    if (plan->levels > 1) {
        if (tally__mul_u64(nvec, plan->level[0].tiles, &size)) layout->overflow = 1;
        else space.a_off = tally__gpu_take(layout, size);
    }
    if (plan->levels > 2) {
        if (tally__mul_u64(nvec, plan->level[1].tiles, &size)) layout->overflow = 1;
        else space.b_off = tally__gpu_take(layout, size);
    }
    return space;
}

/* One launch of tally_k_reduce_tiles: level `lv` over `src`, writing unit
 * u = b * tiles + t to out + u * out_stride. */
static tally_status launch_level(tally_context *ctx, const tally__gpu_vectors *src, const tally__tree_level *lv,
                                 uint32_t term, uint32_t kind, const tally_buffer *shift, uint64_t shift_off,
                                 uint32_t finish, float divisor, const tally_buffer *out, uint64_t out_off,
                                 uint64_t out_stride)
{
    tally__gpu_args l = {.n = 0};
    tally__gpu_arg_buf(&l, src->buf, src->off);
    tally__gpu_arg_u64(&l, src->cols);
    tally__gpu_arg_u64(&l, src->stride);
    tally__gpu_arg_u32(&l, src->mode);
    tally__gpu_arg_u64(&l, src->nvec);
    tally__gpu_arg_u64(&l, src->vec_stride);
    tally__gpu_arg_u64(&l, lv->n);
    tally__gpu_arg_u32(&l, lv->lanes);
    tally__gpu_arg_u32(&l, lv->quads_per_lane);
    tally__gpu_arg_u64(&l, lv->tiles);
    tally__gpu_arg_u32(&l, term);
    tally__gpu_arg_u32(&l, kind);
    tally__gpu_arg_buf(&l, shift, shift_off);
    tally__gpu_arg_u32(&l, finish);
    tally__gpu_arg_f32(&l, divisor);
    tally__gpu_arg_buf(&l, out, out_off);
    tally__gpu_arg_u64(&l, out_stride);
    tally__gpu_arg_u32(&l, src->dtype != 0 ? src->dtype : TALLY_K_DTYPE_F32);
    const uint64_t segments = TALLY_GPU_GROUP_SIZE / lv->lanes;
    const int halves = src->dtype != 0 && src->dtype != TALLY_K_DTYPE_F32;
    return tally__gpu_run(ctx, halves ? TALLY__K_tally_k_reduce_tiles_half : TALLY__K_tally_k_reduce_tiles,
                          tally__gpu_ceil_div(src->nvec * lv->tiles, segments), &l);
}

tally_status tally__gpu_tree_upper(tally_context *ctx, const tally__tree_plan *plan, uint64_t nvec,
                                   uint32_t kind, const tally__gpu_result *res, tally_buffer *scratch,
                                   tally__gpu_tree_space space)
{
    uint64_t cur = space.a_off, other = space.b_off;
    for (int i = 1; i < plan->levels; i++) {
        const tally__tree_level *lv = &plan->level[i];
        /* Partials of one vector are contiguous; regions start 16-byte
         * aligned, so whole aligned quads exist when every vector's length
         * keeps the next one aligned too. */
        tally__gpu_vectors src = {.buf = scratch, .off = cur, .cols = lv->n, .stride = lv->n,
                                  .mode = (nvec == 1 || lv->n % 4 == 0) ? TALLY_K_LOAD_VEC4
                                                                         : TALLY_K_LOAD_CONTIGUOUS,
                                  .nvec = nvec, .vec_stride = lv->n};
        tally_status st;
        if (i == plan->levels - 1)
            st = launch_level(ctx, &src, lv, TALLY_K_TERM_PLAIN, kind, res->shift, res->shift_off, res->finish,
                              res->divisor, res->buf, res->off, res->stride);
        else
            st = launch_level(ctx, &src, lv, TALLY_K_TERM_PLAIN, kind, NULL, 0, TALLY_K_FINISH_NONE, 0.0f,
                              scratch, other, 1);
        if (st != TALLY_OK) return st;
        uint64_t t = cur;
        cur = other;
        other = t;
    }
    return TALLY_OK;
}

tally_status tally__gpu_tree(tally_context *ctx, const tally__gpu_vectors *src, const tally__tree_plan *plan,
                             uint32_t term, uint32_t kind, const tally__gpu_result *res, tally_buffer *scratch,
                             tally__gpu_tree_space space)
{
    if (plan->levels == 1)
        return launch_level(ctx, src, &plan->level[0], term, kind, res->shift, res->shift_off, res->finish,
                            res->divisor, res->buf, res->off, res->stride);
    tally_status st = launch_level(ctx, src, &plan->level[0], term, kind, res->shift, res->shift_off,
                                   TALLY_K_FINISH_NONE, 0.0f, scratch, space.a_off, 1);
    if (st != TALLY_OK) return st;
    return tally__gpu_tree_upper(ctx, plan, src->nvec, kind, res, scratch, space);
}

tally_status tally__gpu_fill(tally_context *ctx, const tally_buffer *buf, uint64_t off, uint64_t stride,
                             uint64_t n, uint32_t bits)
{
    tally__gpu_args l = {.n = 0};
    tally__gpu_arg_buf(&l, buf, off);
    tally__gpu_arg_u64(&l, stride);
    tally__gpu_arg_u64(&l, n);
    tally__gpu_arg_u32(&l, bits);
    return tally__gpu_run(ctx, TALLY__K_tally_k_fill, tally__gpu_ceil_div(n, TALLY_GPU_GROUP_SIZE), &l);
}
