/*
 * backends/gpu/gpu_internal.h - helpers of the shared GPU op layer: typed
 * kernel launches, the scratch buffer and the reduction tree's launches.
 * Used only by the layer's own files (backends/gpu/gpu_*.c).
 */
#ifndef TALLY_GPU_INTERNAL_H
#define TALLY_GPU_INTERNAL_H

#include "gpu.h"
#include "../../kernels/abi.h"

/* ---- Launches. Every kernel K(name, args) of kernels/kernel_list.h gets
 * a struct tally__kargs_<name> with one member per argument of its table,
 * named as the kernel names it (a buffer member is a tally__gpu_at, which
 * stands for the buffer and its element offset), and a launcher
 *     tally__gpu_launch_<name>(ctx, groups, &(struct of its table))
 * that packs the members in the table's order (gpu_core.c). A launch thus
 * names its arguments; a member it leaves out is 0 (a NULL buffer for a
 * buffer the kernel does not touch). `groups` is clamped to 1 .. the
 * backend's maximum; kernels stride over whatever they are given. A
 * variant kernel (K(kl_tiles_half, kl_tiles)) takes the struct of the
 * kernel whose table it shares. */
typedef struct tally__gpu_at {
    const tally_buffer *buf;
    uint64_t off; /* in the kernel's elements */
} tally__gpu_at;

/* The first element of a view. */
static inline tally__gpu_at tally__gpu_at_view(const tally__array *a)
{
    tally__gpu_at at = {.buf = a->buffer, .off = a->offset};
    return at;
}

#define TALLY__GPU_CTYPE_u64 uint64_t
#define TALLY__GPU_CTYPE_u32 uint32_t
#define TALLY__GPU_CTYPE_i32 int32_t
#define TALLY__GPU_CTYPE_f32 float
#define TALLY__GPU_MEMBER_BUF(name, off, access, elem) tally__gpu_at name;
#define TALLY__GPU_MEMBER_VAL(type, name) TALLY__GPU_CTYPE_##type name;
#define TALLY__GPU_KERNEL_ARGS(name, args)                                                                      \
    typedef struct tally__kargs_##name {                                                                        \
        TALLY_K_ARGS_##args(TALLY__GPU_MEMBER_BUF, TALLY__GPU_MEMBER_VAL, )                                     \
    } tally__kargs_##name;                                                                                      \
    tally_status tally__gpu_launch_##name(tally_context *ctx, uint64_t groups, const tally__kargs_##args *a);
TALLY_K_KERNELS(TALLY__GPU_KERNEL_ARGS)
#undef TALLY__GPU_KERNEL_ARGS
#undef TALLY__GPU_MEMBER_BUF
#undef TALLY__GPU_MEMBER_VAL

/* ceil(a / b) for b > 0. */
uint64_t tally__gpu_ceil_div(uint64_t a, uint64_t b);

/* 1 when the buffer's first byte is 16-byte aligned on the device. */
int tally__gpu_buffer_aligned16(const tally_context *ctx, const tally_buffer *buf);

/* ---- Views as the kernels read them (gpu_ops.c, gpu_kl_logits.c). ---- */

/* 1 when a view's rows are one contiguous run of rows*cols elements. */
static inline int tally__gpu_contiguous(const tally__array *a)
{
    return a->rows <= 1 || a->stride == a->cols;
}

/* A view's element type as the kernels take it: the tally_dtype of a half
 * view, else TALLY_F32. */
static inline uint32_t tally__gpu_kdtype(const tally__array *a)
{
    return a->dtype == TALLY_BF16 || a->dtype == TALLY_F16 ? (uint32_t)a->dtype : (uint32_t)TALLY_F32;
}

/* Elements of the view's dtype per 16 bytes: 4 fp32, 8 halves. */
static inline uint64_t tally__gpu_per16(const tally__array *a)
{
    return tally__gpu_kdtype(a) == TALLY_F32 ? 4u : 8u;
}

/* 1 when every row of the view starts 16-byte aligned. */
static inline int tally__gpu_rows_aligned16(tally_context *ctx, const tally__array *a)
{
    return a->offset % tally__gpu_per16(a) == 0 && (a->rows <= 1 || a->stride % tally__gpu_per16(a) == 0) &&
           tally__gpu_buffer_aligned16(ctx, a->buffer);
}

/* ---- Scratch: an op first lays out every region it needs, then reserves
 * them all at once (growing the buffer drops its contents), then launches. */
typedef struct tally__gpu_layout {
    uint64_t floats; /* total so far */
    int overflow;
} tally__gpu_layout;

/* Adds a region of n floats (rounded up to 256 bytes, so every region
 * starts 16-byte aligned) and returns its offset in floats. */
uint64_t tally__gpu_take(tally__gpu_layout *layout, uint64_t n);
/* Makes the scratch buffer at least layout->floats floats; *scratch gets it
 * (NULL when the layout is empty). */
tally_status tally__gpu_reserve(tally_context *ctx, const tally__gpu_layout *layout, tally_buffer **scratch);

/* ---- The reduction tree. ---- */

/* Where level 0 of a tree reads: nvec vectors of plan->level[0].n elements,
 * vector b from element off + b * vec_stride of buf (or, in STRIDED mode,
 * the row-major walk of a view of `cols` columns and row stride `stride`). */
typedef struct tally__gpu_vectors {
    const tally_buffer *buf;
    uint64_t off;
    uint64_t cols;
    uint64_t stride;
    uint32_t mode;
    uint64_t nvec;
    uint64_t vec_stride;
    uint32_t dtype; /* tally_dtype of buf's elements (off, stride counted in them); 0 = fp32 */
} tally__gpu_vectors;

/* Where the last level writes: value of vector b to element off + b *
 * stride of buf, after `finish`. */
typedef struct tally__gpu_result {
    const tally_buffer *buf;
    uint64_t off;
    uint64_t stride;
    uint32_t finish;
    float divisor;
    const tally_buffer *shift; /* SHIFTED_EXP term, LSE and EXP_SCALE finishes: vector b's at shift_off + b */
    uint64_t shift_off;
} tally__gpu_result;

/* Scratch regions a tree of nvec vectors needs between its levels: two
 * ping-pong regions (a_off, b_off), taken from the layout when the plan has
 * more than one (resp. two) levels. */
typedef struct tally__gpu_tree_space {
    uint64_t a_off;
    uint64_t b_off;
} tally__gpu_tree_space;

tally__gpu_tree_space tally__gpu_tree_layout(tally__gpu_layout *layout, const tally__tree_plan *plan,
                                             uint64_t nvec);

/* The whole tree with tally_k_reduce_tiles: level 0 reads `src` with
 * `term`, the upper levels read partials in scratch, the last writes `res`. */
tally_status tally__gpu_tree(tally_context *ctx, const tally__gpu_vectors *src, const tally__tree_plan *plan,
                             uint32_t term, uint32_t kind, const tally__gpu_result *res, tally_buffer *scratch,
                             tally__gpu_tree_space space);

/* Levels 1 .. of `plan` over nvec vectors of level-0 partials that some
 * op-specific kernel wrote to scratch at space.a_off (vector b at a_off +
 * b * plan->level[0].tiles). */
tally_status tally__gpu_tree_upper(tally_context *ctx, const tally__tree_plan *plan, uint64_t nvec,
                                   uint32_t kind, const tally__gpu_result *res, tally_buffer *scratch,
                                   tally__gpu_tree_space space);

/* out[off + k * stride] = bits for k < n. */
tally_status tally__gpu_fill(tally_context *ctx, const tally_buffer *buf, uint64_t off, uint64_t stride,
                             uint64_t n, uint32_t bits);

/* The (lanes, qpl, tiles) of a plan's level 0, with an empty plan (n == 0)
 * given as one lane, one quad, one tile: the kernels then see no active lane
 * and produce the host's empty value. */
tally__tree_level tally__gpu_level0(const tally__tree_plan *plan);

/* ---- KL divergence from logits (gpu_kl_logits.c), for tally__gpu_kl_div. ---- */
tally_status tally__gpu_kl_div_logits(tally_context *ctx, const tally__kl_job *job);

/* ---- The mixture's launches that its forward (gpu_gmm.c) and backward
 * (gpu_backward.c) share; B is the number of rows. ---- */

/* The logits (NULL with one component, which needs none). */
tally__gpu_at tally__gpu_gmm_logits(const tally__gmm_job *f);
/* The logits' logsumexp (tally_k_logits_lse) to out. */
tally_status tally__gpu_gmm_lse(tally_context *ctx, const tally__gmm_job *f, tally__gpu_at out);
/* The sample's component picks (tally_k_gmm_pick; also to comp unless its
 * buffer is NULL) and, when D > 0, z (tally_k_gmm_noise), from the
 * stream positions of f->rng. */
tally_status tally__gpu_gmm_draw(tally_context *ctx, const tally__gmm_job *f, uint64_t B, tally__gpu_at comp,
                                 uint64_t comp_stride, tally__gpu_at picks, tally__gpu_at z, uint64_t z_stride);
/* 1 when the D-trees may read z, mu and log_var as aligned quads
 * (TALLY_K_LOAD_VEC4); z_scratch != NULL: z is the backward's fp32 copy, rows
 * of D floats at float z_off of z_scratch. */
int tally__gpu_gmm_vec4(tally_context *ctx, const tally__gmm_job *job, const tally_buffer *z_scratch, uint64_t z_off);
int tally__gpu_gmm_fits_warp(tally_context *ctx, const tally__gmm_job *job);
/* The sum s_k of every (row, component) D-tree (tally_k_gmm_tiles and the
 * upper levels of f->dim_plan) to scratch at s_off. */
tally_status tally__gpu_gmm_sums(tally_context *ctx, const tally__gmm_job *f, uint64_t B, tally__gpu_at z,
                                 uint64_t z_stride, uint32_t load_mode, tally_buffer *scratch,
                                 tally__gpu_tree_space space, uint64_t s_off);

#endif /* TALLY_GPU_INTERNAL_H */
