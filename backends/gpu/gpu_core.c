/*
 * backends/gpu/gpu_core.c - the shared GPU layer's plumbing: kernel names,
 * argument lists, launches, the scratch buffer and the launches of the
 * reduction tree (docs/reduction-tree.md).
 */
#include "gpu_internal.h"
#include "tally/half.h"
#include "tally/terms.h"
#include "../../kernels/backward_abi.h"

_Static_assert(TALLY_GPU_GROUP_SIZE == TALLY_K_GROUP_SIZE, "kernels and host disagree on the group size");
_Static_assert(TALLY_GPU_GROUP_SIZE == TALLY_TREE_LANES, "a group must run one full tile");

static const char *const kernel_names[TALLY__KERNEL_COUNT] = {
#define KERNEL_NAME(name, args) "tally_k_" #name,
    TALLY_K_KERNELS(KERNEL_NAME)
#undef KERNEL_NAME
};

const char *tally__gpu_kernel_name(tally__kernel_id id)
{
    if ((int)id < 0 || (int)id >= TALLY__KERNEL_COUNT) return "(no such kernel)";
    return kernel_names[id];
}

uint32_t tally__gpu_kernel_stage_bytes(tally__kernel_id id)
{
    switch (id) {
    case TALLY__K_kl_logits_rows_pair: return TALLY_K_KLL_STAGE_BYTES;
    case TALLY__K_categorical_staged: return TALLY_K_CAT_STAGE_BYTES;
    case TALLY__K_gmm_bw_warp: return TALLY_K_GMM_WARP_STAGE_BYTES;
    case TALLY__K_dm_bw_lanes: return TALLY_K_DM_BW_LANES_STAGE_BYTES;
    default: return 0u;
    }
}

int tally__gpu_kernel_stage_optional(tally__kernel_id id)
{
    return id == TALLY__K_gmm_bw_warp || id == TALLY__K_dm_bw_lanes;
}

uint32_t tally__gpu_kernel_group_size(tally__kernel_id id)
{
    return id == TALLY__K_kl_logits_rows_pair ? TALLY_K_KLL_PAIR_GROUP_SIZE : TALLY_GPU_GROUP_SIZE;
}

tally__kernel_id tally__gpu_kernel_cpu_twin(tally__kernel_id id)
{
    switch (id) {
#define TWIN_CASE(kernel, twin) \
    case TALLY__K_##kernel: return TALLY__K_##twin;
        TALLY_K_CPU_TWINS(TWIN_CASE)
#undef TWIN_CASE
    default: return id;
    }
}

int tally__gpu_kernel_is_cpu_twin(tally__kernel_id id)
{
    switch (id) {
#define TWIN_CASE(kernel, twin) \
    case TALLY__K_##twin: return 1;
        TALLY_K_CPU_TWINS(TWIN_CASE)
#undef TWIN_CASE
    default: return 0;
    }
}

/* ---- Arguments and launches ----------------------------------------------
 * Everything here is generated from the tables of kernels/kernel_list.h, as
 * the kernels' signatures are, so the two cannot disagree. */

/* The kinds of each kernel's arguments in order, then 0 (no kind is 0). A
 * buffer is two arguments: the buffer and its element offset. */
#define KIND_u64 TALLY__ARG_U64
#define KIND_u32 TALLY__ARG_U32
#define KIND_i32 TALLY__ARG_I32
#define KIND_f32 TALLY__ARG_F32
#define KIND_BUF(name, off, access, elem) TALLY__ARG_BUFFER, TALLY__ARG_U64,
#define KIND_VAL(type, name) KIND_##type,
static const unsigned char kernel_kinds[TALLY__KERNEL_COUNT][TALLY__GPU_MAX_ARGS + 1] = {
#define KERNEL_KINDS(name, args) {TALLY_K_ARGS_##args(KIND_BUF, KIND_VAL, ) 0},
    TALLY_K_KERNELS(KERNEL_KINDS)
#undef KERNEL_KINDS
};

/* Every table fits an argument list (an excess would only be a warning in
 * the initializer above). */
#define COUNT_BUF(name, off, access, elem) +2
#define COUNT_VAL(type, name) +1
#define KERNEL_COUNT_CHECK(name, args)                                                                           \
    _Static_assert(0 TALLY_K_ARGS_##args(COUNT_BUF, COUNT_VAL, ) <= TALLY__GPU_MAX_ARGS,                         \
                   "tally_k_" #name " takes more than TALLY__GPU_MAX_ARGS arguments");
TALLY_K_KERNELS(KERNEL_COUNT_CHECK)
#undef KERNEL_COUNT_CHECK

typedef struct arg_list {
    tally__gpu_arg a[TALLY__GPU_MAX_ARGS];
    int n;
} arg_list;

/* The static assertions above bound every list, so n never passes the end.
 * A buffer is the handle, then its element offset (the kernels' order). */
static void push_buf(arg_list *l, tally__gpu_at at)
{
    l->a[l->n].kind = TALLY__ARG_BUFFER;
    l->a[l->n++].v.buffer = at.buf;
    l->a[l->n].kind = TALLY__ARG_U64;
    l->a[l->n++].v.u64 = at.off;
}

#define PUSH_SCALAR(type, code)                                                                                  \
    static inline void push_##type(arg_list *l, TALLY__GPU_CTYPE_##type v)                                      \
    {                                                                                                           \
        l->a[l->n].kind = code;                                                                                 \
        l->a[l->n++].v.type = v;                                                                                \
    }
PUSH_SCALAR(u64, TALLY__ARG_U64)
PUSH_SCALAR(u32, TALLY__ARG_U32)
PUSH_SCALAR(i32, TALLY__ARG_I32)
PUSH_SCALAR(f32, TALLY__ARG_F32)
#undef PUSH_SCALAR

static const char *kind_name(unsigned kind)
{
    static const char *const names[] = {"nothing", "buffer", "u64", "u32", "i32", "f32"};
    return kind < sizeof names / sizeof names[0] ? names[kind] : "(unknown kind)";
}

/* The debug build (no NDEBUG, as meson's default release build) checks
 * each packed list against its kernel's kinds before the backend sees it:
 * a packer, kind or type mapping edited out of step with the tables is
 * refused at its first launch with the first disagreement, instead of
 * reaching a kernel as misread bits. */
static tally_status check_args(tally_context *ctx, tally__kernel_id kernel, const arg_list *l)
{
#ifndef NDEBUG
    const unsigned char *want = kernel_kinds[kernel];
    for (int i = 0; i <= l->n && i <= TALLY__GPU_MAX_ARGS; i++) {
        const unsigned got = i < l->n ? (unsigned)l->a[i].kind : 0u;
        if (got != want[i])
            return tally__error(ctx, TALLY_BACKEND_ERROR,
                                "gpu layer: argument %d of %s is %s, kernels/kernel_list.h says %s", i,
                                tally__gpu_kernel_name(kernel), kind_name(got), kind_name(want[i]));
    }
#else
    (void)ctx;
    (void)kernel;
    (void)l;
#endif
    return TALLY_OK;
}

static tally_status run(tally_context *ctx, tally__kernel_id kernel, uint64_t groups, const arg_list *l)
{
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    tally_status st = check_args(ctx, kernel, l);
    if (st != TALLY_OK) return st;
    uint64_t max_groups = g->dev->max_groups != 0 ? g->dev->max_groups : 2147483647u;
    if (groups > max_groups) groups = max_groups;
    if (groups == 0) groups = 1;
    return g->dev->launch(ctx, kernel, groups, l->a, l->n);
}

#define PUSH_BUF(name, off, access, elem) push_buf(&l, a->name);
#define PUSH_VAL(type, name) push_##type(&l, a->name);
#define LAUNCHER(name, args)                                                                                     \
    tally_status tally__gpu_launch_##name(tally_context *ctx, uint64_t groups, const tally__kargs_##args *a)    \
    {                                                                                                           \
        arg_list l = {.n = 0};                                                                                  \
        TALLY_K_ARGS_##args(PUSH_BUF, PUSH_VAL, )                                                               \
        return run(ctx, TALLY__K_##name, groups, &l);                                                           \
    }
TALLY_K_KERNELS(LAUNCHER)
#undef LAUNCHER

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
    const tally__kargs_reduce_tiles a = {
        .x = {src->buf, src->off}, .x_cols = src->cols, .x_stride = src->stride, .mode = src->mode,
        .nvec = src->nvec, .vec_stride = src->vec_stride, .n = lv->n, .lanes = lv->lanes,
        .qpl = lv->quads_per_lane, .tiles = lv->tiles, .term = term, .kind = kind, .shift = {shift, shift_off},
        .finish = finish, .divisor = divisor, .out = {out, out_off}, .out_stride = out_stride,
        .x_dtype = src->dtype != 0 ? src->dtype : TALLY_F32};
    const tally__gpu_context *g = (const tally__gpu_context *)ctx;
    const uint64_t compute_units = g->compute_units != 0 ? g->compute_units : 128u;
    /* Vectors of one full tile of 256 one-quad lanes: a warp each, where
     * there are enough of them to give every compute unit a group of
     * warps. Fewer vectors take a group each: a lone warp folding a whole
     * vector (the Dirichlet-multinomial backward's A, one vector) took 22
     * us on an H100 where its group takes a few. */
    if (TALLY_K_REDUCE_ROWS_WARP && g->warp_shuffle && lv->lanes == TALLY_GPU_GROUP_SIZE && lv->quads_per_lane == 1 &&
        lv->tiles == 1 && lv->n > 4u * (TALLY_GPU_GROUP_SIZE - 1u) && lv->n <= 4u * TALLY_GPU_GROUP_SIZE &&
        src->nvec >= compute_units * (TALLY_GPU_GROUP_SIZE / 32u))
        return tally__gpu_launch_reduce_rows_warp(ctx, tally__gpu_ceil_div(src->nvec, TALLY_GPU_GROUP_SIZE / 32u), &a);
    uint64_t groups = tally__gpu_ceil_div(src->nvec * lv->tiles, TALLY_GPU_GROUP_SIZE / lv->lanes);
    /* The kernel strides over its units, so a capped grid computes the
     * same values in the same order. */
    const uint64_t cap = compute_units * TALLY_K_REDUCE_GROUPS_PER_CU;
    if (TALLY_K_REDUCE_GROUPS_PER_CU != 0u && groups > cap) groups = cap;
    if (src->dtype != 0 && src->dtype != TALLY_F32) return tally__gpu_launch_reduce_tiles_half(ctx, groups, &a);
    return tally__gpu_launch_reduce_tiles(ctx, groups, &a);
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
    const tally__kargs_fill a = {.out = {buf, off}, .stride = stride, .n = n, .pattern = bits};
    return tally__gpu_launch_fill(ctx, tally__gpu_ceil_div(n, TALLY_GPU_GROUP_SIZE), &a);
}
