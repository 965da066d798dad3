/*
 * backends/gpu/gpu.h - what the GPU backends (OpenCL, CUDA) share.
 *
 * The ops themselves (which kernels run in which order, how partials are
 * staged, where scratch lives) are written once in backends/gpu/ against a
 * tiny device interface: launch a kernel by id with a list of arguments. The
 * kernel bodies are written once in kernels/ and compiled by both OpenCL C
 * (kernels_cl/) and nvcc (kernels_cu/). A backend supplies buffers (through
 * its tally__backend_ops) and `launch`; everything else is shared, so the two
 * GPU backends cannot drift apart.
 */
#ifndef TALLY_GPU_H
#define TALLY_GPU_H

#include "backend.h"
#include "kernels/kernel_list.h"

/* Every kernel runs work-groups (blocks) of this many work-items. It equals
 * TALLY_TREE_LANES: one work-item per lane of a reduction tile. */
#define TALLY_GPU_GROUP_SIZE 256u

/* The kernels, by id: TALLY__K_<name> for each K(name, args) line of
 * TALLY_K_KERNELS in kernels/kernel_list.h (tally_k_reduce_tiles has the id
 * TALLY__K_reduce_tiles), in the list's order. */
typedef enum tally__kernel_id {
#define TALLY__KERNEL_ID(name, args) TALLY__K_##name,
    TALLY_K_KERNELS(TALLY__KERNEL_ID)
#undef TALLY__KERNEL_ID
    TALLY__KERNEL_COUNT
} tally__kernel_id;

/* The symbol name of a kernel. */
const char *tally__gpu_kernel_name(tally__kernel_id id);
/* The bytes of dynamic local memory a kernel keeps tiles in (TALLY_STAGE
 * in tally/dialect.h), 0 for the kernels that declare none, and its
 * work-items a group (TALLY_GPU_GROUP_SIZE but for the kernels declared
 * TALLY_KERNEL_GROUP_OF). A backend launches each kernel with both; the op
 * layer launches a kernel that needs its stage only where its context's
 * stage_bytes allows it. A kernel whose stage is optional (the mixture's
 * backward warp kernel, the Dirichlet-multinomial lanes kernel) also runs without
 * it, told so by an argument, and a backend that has not granted the
 * stages launches it with none. */
uint32_t tally__gpu_kernel_stage_bytes(tally__kernel_id id);
int tally__gpu_kernel_stage_optional(tally__kernel_id id);
uint32_t tally__gpu_kernel_group_size(tally__kernel_id id);
/* The CPU-shaped twin of a kernel (kernels/cpu.h), which takes its
 * arguments and gives its bits, or the kernel itself when it has none;
 * tally__gpu_kernel_is_cpu_twin says whether a kernel is such a twin. */
tally__kernel_id tally__gpu_kernel_cpu_twin(tally__kernel_id id);
int tally__gpu_kernel_is_cpu_twin(tally__kernel_id id);

/* One kernel argument, as the kernel's table in kernels/kernel_list.h has
 * it. A BUFFER argument becomes the buffer's native handle (cl_mem /
 * CUdeviceptr); element offsets travel as separate U64 arguments because
 * OpenCL cannot offset a cl_mem on the host side. */
typedef enum tally__gpu_arg_kind {
    TALLY__ARG_BUFFER = 1,
    TALLY__ARG_U64 = 2,
    TALLY__ARG_U32 = 3,
    TALLY__ARG_I32 = 4,
    TALLY__ARG_F32 = 5
} tally__gpu_arg_kind;

typedef struct tally__gpu_arg {
    tally__gpu_arg_kind kind;
    union {
        const tally_buffer *buffer;
        uint64_t u64;
        uint32_t u32;
        int32_t i32;
        float f32;
    } v;
} tally__gpu_arg;

/* The most arguments of any kernel (tally_k_gmm_bw_rows takes 39);
 * gpu_core.c checks every table against it at compile time. */
#define TALLY__GPU_MAX_ARGS 48

/* For a device's launch: the bytes of a scalar argument of `kind` (the size
 * of its member of tally__gpu_arg's union, which starts at the union's
 * first byte, so a launch may pass &arg.v itself), 0 for a buffer or an
 * unknown kind. */
static inline size_t tally__gpu_scalar_bytes(tally__gpu_arg_kind kind)
{
    switch (kind) {
    case TALLY__ARG_U64: return sizeof(uint64_t);
    case TALLY__ARG_U32: return sizeof(uint32_t);
    case TALLY__ARG_I32: return sizeof(int32_t);
    case TALLY__ARG_F32: return sizeof(float);
    default: return 0;
    }
}

typedef struct tally__gpu_device_ops {
    /* Enqueues `kernel` on `groups` work-groups of TALLY_GPU_GROUP_SIZE
     * work-items (a 1-D grid), in order after all earlier work of the
     * context. groups may exceed what one launch allows: the backend splits
     * it or the kernel loops (kernels take their group count as
     * TALLY_GROUP_COUNT() and stride over work). Errors carry the vendor's
     * error name and text. */
    tally_status (*launch)(tally_context *ctx, tally__kernel_id kernel, uint64_t groups,
                           const tally__gpu_arg *args, int nargs);
    /* Largest groups value one launch accepts (CUDA: 2^31 - 1). The shared
     * layer never asks for more: every kernel strides over its work by the
     * number of groups it was given. */
    uint64_t max_groups;
    /* Optional: the alignment in bytes (a power of two) of the buffer's
     * first byte on the device. Kernels read 16-byte float4s only where the
     * view's first element is 16-byte aligned. NULL: buffers tally allocated
     * are taken as 16-byte aligned and wrapped (app) buffers as 4-byte
     * aligned, which is always safe. */
    uint32_t (*buffer_alignment)(const tally_buffer *buf);
} tally__gpu_device_ops;

/* The base of every GPU backend's context (after the common base). */
typedef struct tally__gpu_context {
    struct tally_context base;
    const tally__gpu_device_ops *dev;
    /* Scratch for tile partials, kept between calls so that small ops do not
     * pay for an allocation; grown on demand, freed with the context. */
    tally_buffer *scratch;
    size_t scratch_bytes;
    /* Multiprocessors (CUDA) or compute units (OpenCL), set by the backend
     * at context creation; 0 when unknown. Only sizes grids (never results). */
    uint32_t compute_units;
    /* 1 when the backend's kernels keep a work-item's constant-indexed
     * private arrays in registers across barriers, set by the backend at
     * context creation. Picks kernel variants only (never results): the
     * fused path of kernels/kl_logits.h holds a whole tile that way and
     * runs only where this is 1. nvcc does (CUDA: 1); on the H200 NVIDIA's
     * OpenCL compiler made that kernel 2.2x slower than the general path,
     * and PoCL 3.1 on a CPU, with more than one thread, gave wrong sums
     * from it (OpenCL: 0). */
    int register_tiles;
    /* 1 when the backend's kernels have warp shuffles (TALLY_HAS_WARP_SHUFFLE:
     * CUDA), set by the backend at context creation: row reductions of
     * about 1024 elements then run a warp a row (tally_k_reduce_rows_warp).
     * Picks kernel variants only (never results). */
    int warp_shuffle;
    /* 1 when the backend compiles a kernel's TALLY_KERNEL_GROUPS_PER_CU(n)
     * as a register bound (CUDA's __launch_bounds__), so that n groups of it
     * are resident on a compute unit at once and a grid of n a compute unit
     * is exactly one wave; set by the backend at context creation. OpenCL
     * has no such bound (0): its grids keep their general caps. Sizes grids
     * only (never results). */
    int resident_bound;
    /* The most dynamic local memory (bytes) a group of a kernel with a
     * stage may have, set by the backend at context creation: the CUDA
     * backend sets it where the device grants every such kernel its stage
     * bytes (compute capability 8.0 and 9.0, not 7.5, 8.6 or 8.9); 0
     * (OpenCL, those GPUs) keeps the op layer on kernels without one. Picks kernel variants
     * only. */
    uint32_t stage_bytes;
    /* 1 when the backend launches the CPU-shaped twins (kernels/cpu.h) in
     * place of the kernels (OpenCL on a CPU device), set at context
     * creation: a row logsumexp of one tile a row is then one launch of the
     * twin's TALLY_K_TERM_LSE, each row's two trees while it is in the
     * cache. Picks launches only (never results). */
    int cpu_twins;
} tally__gpu_context;

/* The shared op implementations, tally__gpu_<op> for every row of
 * TALLY__JOB_OPS (src/backend.h): gpu_ops.c, gpu_gmm.c and, for the
 * gradients, gpu_backward.c. */
TALLY__DECLARE_OPS(tally__gpu_)
/* gpu_half.c: a BF16/F16 view widened to fp32 (the ops table's `widen`). */
tally_status tally__gpu_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst);
/* gpu_half.c: fp32 results narrowed into a BF16/F16 view (the ops table's `narrow`). */
tally_status tally__gpu_narrow(tally_context *ctx, const tally_buffer *src, const tally__array *dst);
/* The ops whose kernels read BF16 and F16 inputs (every op's inputs), or
 * write half outputs (the fills: tally_k_rng_fill_half), themselves (the ops
 * table's half_native); the other half outputs (kl_div's out, gmm_sample's
 * z) are narrowed after. */
#define TALLY__GPU_HALF_NATIVE                                                                              \
    (TALLY__HALF_NATIVE_REDUCE | TALLY__HALF_NATIVE_KL | TALLY__HALF_NATIVE_DM | TALLY__HALF_NATIVE_RNG_FILL | \
     TALLY__HALF_NATIVE_GMM_LOG_PROB | TALLY__HALF_NATIVE_GMM_SAMPLE | TALLY__HALF_NATIVE_CATEGORICAL)

/* Defines a GPU backend's two tables from its device operations:
 * tally__<b>_device_ops, the kernel launch this layer calls (each context's
 * `dev`: p##launch, p##buffer_alignment and `max_groups_`), and
 * tally__<b>_ops, the ops table the front end calls, named #b, of
 * `kind_`: the required device entries p##devices ... p##buffer_fill
 * (TALLY__DEVICE_ENTRIES, src/backend.h), then the optional ones the
 * backend has (context_wrap, buffer_wrap, buffer_wrap_host) as designated
 * initializers, then every op entry, widen, narrow and half_native from
 * this layer.
 * So CUDA and OpenCL write no op entry and cannot drift apart; a macro
 * rather than a table filled at run time keeps both tables const objects
 * that any thread may read. */
#define TALLY__GPU_BACKEND(b, kind_, p, max_groups_, ...)                      \
    const tally__gpu_device_ops tally__##b##_device_ops = {                    \
        .launch = p##launch, .max_groups = max_groups_,                        \
        .buffer_alignment = p##buffer_alignment,                               \
    };                                                                         \
    const tally__backend_ops tally__##b##_ops = {                              \
        .name = #b, .kind = kind_, TALLY__DEVICE_ENTRIES(p), __VA_ARGS__,      \
        TALLY__OP_ENTRIES(tally__gpu_).widen = tally__gpu_widen,               \
        .narrow = tally__gpu_narrow,                                           \
        .half_native = TALLY__GPU_HALF_NATIVE,                                 \
    }

/* Test hook (internal, reached through the static library): out[k] =
 * f(in[k]) for one portable math function, f a TALLY_K_MATH_* code from
 * kernels/abi.h, on a GPU context. Lets the tests compare each function's
 * device bits with the host's over millions of inputs. */
tally_status tally__gpu_math_eval(tally_context *ctx, uint32_t fn, const tally_buffer *in, tally_buffer *out,
                                  uint64_t n);

/* Frees the scratch buffer; backends call it first in context_release. */
void tally__gpu_context_cleanup(tally__gpu_context *gctx);

#endif
