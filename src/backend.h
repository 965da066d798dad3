/*
 * src/backend.h - the backend contract: what a backend sees of tally, and
 * all it may include of src/ (through the include directory src/, never by
 * a relative path).
 *
 * The front end (src/) validates every argument, plans every reduction and
 * then calls the chosen backend through its const ops table. A backend never
 * validates user input again and the front end never names a backend: it
 * only holds tally__backend_ops pointers. This header holds the base
 * objects a backend's context and buffer begin with, the error calls, the
 * planner's types, the typed jobs and the ops table; src/size.h adds the
 * checked size arithmetic. What only the front end uses is in
 * src/internal.h.
 */
#ifndef TALLY_BACKEND_H
#define TALLY_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "size.h"
#include "tally.h"

#if defined(__GNUC__)
#  define TALLY__PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#  define TALLY__PRINTF(fmt_index, first_arg)
#endif

typedef struct tally__backend_ops tally__backend_ops;

/* ------------------------------------------------------------------------
 * Base objects: every backend's context and buffer begin with these, so the
 * front end touches only the base.
 * ------------------------------------------------------------------------ */
struct tally_context {
    const tally__backend_ops *ops;
    char device_name[256];
    char *error;          /* message of the last failed call, heap; NULL before the first failure */
    size_t error_capacity;
    int64_t live_buffers; /* buffers not yet released; checked at release */
};

struct tally_buffer {
    tally_context *ctx;
    size_t bytes;
    int wrapped; /* 1 when the memory belongs to the app */
};

/* ------------------------------------------------------------------------
 * Errors: a site reports in one line, e.g.
 *   return tally__error(ctx, TALLY_INVALID_ARGUMENT, "kl_div: input is NULL");
 * ctx may be NULL: the message then goes to the calling thread's record.
 * ------------------------------------------------------------------------ */
tally_status tally__error(tally_context *ctx, tally_status status, const char *fmt, ...)
    TALLY__PRINTF(3, 4);
tally_status tally__verror(tally_context *ctx, tally_status status, const char *fmt, va_list ap);
/* Appends text (a build log, say) to the context's current message. */
void tally__error_append(tally_context *ctx, const char *text);
/* Moves a context's message to the thread record (used when a context that
 * failed half way is torn down during creation). */
void tally__error_to_thread(tally_context *ctx);
/* Runs a vendor loader's open (tally__cuda_open, tally__cl_open; each loads
 * once per process) and reports its failure, in the loader's words, on the
 * calling thread's record. */
tally_status tally__vendor_load(tally_status (*open)(const char **message));

/* ------------------------------------------------------------------------
 * The reduction planner (src/plan.c; docs/reduction-tree.md).
 * ------------------------------------------------------------------------ */

/* How one vector of n elements is reduced by one level of the tree. */
typedef struct tally__tree_level {
    uint64_t n;              /* elements in the vector */
    uint32_t lanes;          /* lanes per tile: a power of two, 1..256 */
    uint32_t quads_per_lane; /* quads each lane reads: 1..16 */
    uint64_t tiles;          /* tiles; each yields one partial */
} tally__tree_level;

#define TALLY__TREE_MAX_LEVELS 8

/* All levels: level 0 reduces the input, level i reduces the partials of
 * level i-1, and the last level has one tile. n == 0 gives zero levels. */
typedef struct tally__tree_plan {
    int levels;
    tally__tree_level level[TALLY__TREE_MAX_LEVELS];
} tally__tree_plan;

tally__tree_level tally__plan_level(uint64_t n);
tally__tree_plan tally__plan_vector(uint64_t n);

/* ------------------------------------------------------------------------
 * Jobs: fully validated requests, passed to a backend.
 * ------------------------------------------------------------------------ */

/* A validated view: element (r, c) at buffer element offset + r*stride + c. */
typedef struct tally__array {
    tally_buffer *buffer;
    uint64_t offset;
    uint64_t rows;
    uint64_t cols;
    uint64_t stride; /* == cols when the view is contiguous */
    tally_dtype dtype; /* offset and stride count elements of this type */
} tally__array;

/* Reduction of a view: axis ALL reduces the row-major sequence of all
 * rows*cols elements as one vector; axis ROW reduces each row on its own. */
typedef struct tally__reduce_job {
    tally_reduce_op op;
    tally_axis axis;
    tally__array x;
    tally__array out;        /* 1 element (ALL) or rows elements (ROW), contiguous run */
    tally__tree_plan plan;   /* for one vector: rows*cols (ALL) or cols (ROW) */
} tally__reduce_job;

typedef struct tally__kl_job {
    tally__array input;
    tally__array target;
    tally_reduction reduction;
    uint32_t flags;        /* TALLY_KL_* (tally/flags.h) */
    tally__array out;      /* same shape as input (NONE) or 1 element */
    tally__tree_plan plan; /* over rows*cols elements (unused for NONE) */
    tally__tree_plan row_plan; /* over cols: the rows' softmax statistics (logits flags only) */
} tally__kl_job;

typedef struct tally__dm_job {
    tally__array counts;     /* [B, V] */
    tally__array log_alpha;  /* [1, V] or [B, V] */
    int per_row_alpha;
    tally_reduction reduction;
    uint32_t flags;          /* TALLY_DM_WITH_COEFFICIENT or 0 */
    tally__array out;        /* B elements (NONE) or 1 */
    tally__tree_plan row_plan;  /* over V */
    tally__tree_plan rows_plan; /* over B row values (SUM, MEAN) */
} tally__dm_job;

typedef struct tally__gmm_job {
    tally__array z;        /* [B, D]: input of log_prob, output of sample */
    tally__array mu;       /* [B, K*D] */
    tally__array log_var;  /* [B, K*D] */
    tally__array logits;   /* [1, K]; unused when K == 1 */
    uint64_t components;   /* K */
    uint64_t dim;          /* D */
    tally__array log_q;    /* B elements */
    tally__array component; /* B int32 elements, or buffer NULL */
    tally__tree_plan dim_plan; /* over D */
    tally_rng rng;         /* sample only */
} tally__gmm_job;

typedef struct tally__rng_job {
    tally_distribution dist;
    tally_rng rng;
    tally__array out; /* element k of the row-major order gets stream element offset + k */
} tally__rng_job;

typedef struct tally__categorical_job {
    tally__array weights;
    int is_logits;
    tally_rng rng;
    tally__array out; /* rows int32 elements */
} tally__categorical_job;

/* Gradients (src/ops_backward.c; docs/ops.md, "Gradients"). An output whose
 * buffer is NULL is not wanted. `divide` says whether the upstream scalar
 * gradient is divided by `divisor` (mean, batchmean) before use, with
 * tally_divf, by every backend in the same way. */
typedef struct tally__kl_backward_job {
    tally__array input;
    tally__array target;
    tally__array grad_out;    /* input's shape (NONE) or 1 element */
    tally_reduction reduction;
    uint32_t flags;           /* TALLY_KL_* */
    int divide;
    float divisor;
    tally__array grad_input;  /* input's shape, or buffer NULL */
    tally__array grad_target; /* input's shape, or buffer NULL */
} tally__kl_backward_job;

typedef struct tally__dm_backward_job {
    tally__array counts;         /* [B, V] */
    tally__array log_alpha;      /* [1, V] or [B, V] */
    int per_row_alpha;
    tally__array grad_out;       /* B elements (NONE) or 1 */
    int per_row_grad;            /* grad_out holds B values */
    int divide;
    float divisor;
    tally__array grad_log_alpha; /* log_alpha's shape */
    tally__tree_plan row_plan;   /* over V: A and N of a row, as the forward */
    tally__tree_plan col_plan;   /* over B: each column of a shared alpha's gradient */
} tally__dm_backward_job;

/* The mixture's backward passes. fwd holds the forward's validated job (z:
 * log_prob's input; unused by the sample, which regenerates z from rng). */
typedef struct tally__gmm_backward_job {
    tally__gmm_job fwd;
    int sample;
    tally__array grad_log_q;   /* B values, or buffer NULL (zero) */
    tally__array grad_z_in;    /* sample: upstream [B, D], or buffer NULL (zero) */
    tally__array grad_z;       /* log_prob: output [B, D], or buffer NULL */
    tally__array grad_mu;      /* [B, K*D], or buffer NULL */
    tally__array grad_log_var; /* [B, K*D], or buffer NULL */
    tally__array grad_logits;  /* K values (K > 1), or buffer NULL */
    tally__tree_plan col_plan; /* over B: each logit's gradient */
} tally__gmm_backward_job;

/* ------------------------------------------------------------------------
 * The ops table. Every entry is required unless marked optional. Entries
 * return a status and report details with tally__error on the context (or on
 * the thread for calls without one).
 * ------------------------------------------------------------------------ */

/* The ops that run a job, one X(p, name, job type, need) row each: the
 * table's entry `name` runs a `const job type *`. need is required or
 * optional: a backend whose table leaves a required entry NULL is refused
 * at context creation (tally__backend_missing_op), and a NULL optional
 * entry (the gradients) makes its op return TALLY_BACKEND_ERROR with a
 * message naming the backend. The same rows declare a backend's entry
 * points (TALLY__DECLARE_OPS) and fill its table (TALLY__OP_ENTRIES), so a
 * new op is one row here. `p` is the prefix of the entry points' names,
 * passed through to X. */
#define TALLY__JOB_OPS(X, p)                                                   \
    X(p, reduce, tally__reduce_job, required)                                  \
    X(p, kl_div, tally__kl_job, required)                                      \
    X(p, dirichlet_multinomial, tally__dm_job, required)                       \
    X(p, gmm_log_prob, tally__gmm_job, required)                               \
    X(p, gmm_sample, tally__gmm_job, required)                                 \
    X(p, rng_fill, tally__rng_job, required)                                   \
    X(p, categorical, tally__categorical_job, required)                        \
    X(p, kl_div_backward, tally__kl_backward_job, optional)                    \
    X(p, dirichlet_multinomial_backward, tally__dm_backward_job, optional)     \
    X(p, gmm_backward, tally__gmm_backward_job, optional)

#define TALLY__OP_NEED_required 1
#define TALLY__OP_NEED_optional 0
#define TALLY__OP_FIELD(p, name, job_type, need) tally_status (*name)(tally_context *ctx, const job_type *job);
#define TALLY__OP_DECLARE(p, name, job_type, need) tally_status p##name(tally_context *ctx, const job_type *job);
#define TALLY__OP_ENTRY(p, name, job_type, need) .name = p##name,
/* Declares p<op> for every op, e.g. TALLY__DECLARE_OPS(tally__gpu_). */
#define TALLY__DECLARE_OPS(p) TALLY__JOB_OPS(TALLY__OP_DECLARE, p)
/* Designated initializers .<op> = p<op> for every op, inside a table. */
#define TALLY__OP_ENTRIES(p) TALLY__JOB_OPS(TALLY__OP_ENTRY, p)
/* The required device entries of a table whose functions are named p<entry>
 * (p = cuda_ gives .sync = cuda_sync, and so on). The optional ones
 * (context_wrap, buffer_wrap, buffer_wrap_host) are written out where a
 * backend has them. */
#define TALLY__DEVICE_ENTRIES(p)                                               \
    .devices = p##devices, .context_create = p##context_create,                \
    .context_release = p##context_release, .sync = p##sync,                    \
    .buffer_create = p##buffer_create, .buffer_release = p##buffer_release,    \
    .buffer_upload = p##buffer_upload, .buffer_download = p##buffer_download, \
    .buffer_fill = p##buffer_fill

struct tally__backend_ops {
    const char *name;
    tally_backend kind;

    /* Devices this backend can see (no context), each with is_gpu set (AUTO
     * reads it, src/context.c). On failure: the status
     * BACKEND_NOT_COMPILED is never returned here (the table exists only
     * when compiled), LIBRARY_MISSING or NO_DEVICE with a thread message. */
    tally_status (*devices)(tally_device_info *devices, int capacity, int *count);

    /* Allocates the backend's context (base first), fills ops and
     * device_name. On failure returns a status with a thread message and
     * leaves *out NULL. */
    tally_status (*context_create)(int device, tally_context **out);
    /* Optional: a context on the app's native objects (OpenCL: cl_context,
     * cl_device_id, cl_command_queue; CUDA: device index in handles[0] as
     * intptr_t, CUstream in handles[1], used as given: 0 is the default
     * stream). */
    tally_status (*context_wrap)(void *const handles[3], tally_context **out);
    void (*context_release)(tally_context *ctx);
    tally_status (*sync)(tally_context *ctx);

    tally_status (*buffer_create)(tally_context *ctx, size_t bytes, tally_buffer **out);
    /* Optional: wraps a native handle (OpenCL: cl_mem in native; CUDA: the
     * device pointer in address with bytes). */
    tally_status (*buffer_wrap)(tally_context *ctx, void *native, uint64_t address, size_t bytes,
                                tally_buffer **out);
    /* Optional: wraps app host memory (tally_buffer_wrap_host); ptr is
     * non-NULL when bytes > 0 and 4-byte aligned. NULL: not supported. */
    tally_status (*buffer_wrap_host)(tally_context *ctx, void *ptr, size_t bytes, tally_buffer **out);
    void (*buffer_release)(tally_buffer *buf);
    tally_status (*buffer_upload)(tally_buffer *buf, size_t offset, const void *src, size_t bytes);
    tally_status (*buffer_download)(const tally_buffer *buf, size_t offset, void *dst,
                                    size_t bytes);
    tally_status (*buffer_fill)(tally_buffer *buf, size_t offset, size_t bytes, uint32_t pattern);

    /* reduce, kl_div, ..., gmm_backward: one entry per TALLY__JOB_OPS row. */
    TALLY__JOB_OPS(TALLY__OP_FIELD, )

    /* Widens the rows*cols elements of a BF16 or F16 view, row-major, into
     * fp32 elements 0 .. rows*cols - 1 of dst (a buffer of this context made
     * by buffer_create, large enough). Queued like an op. The front end
     * (src/half.c) runs every op on half inputs through it. Optional: NULL
     * refuses half inputs with UNSUPPORTED_DTYPE. */
    tally_status (*widen)(tally_context *ctx, const tally__array *src, tally_buffer *dst);
    /* Narrows the rows*cols fp32 elements 0 .. rows*cols - 1 of src (a
     * buffer of this context made by buffer_create) into the BF16 or F16
     * view dst, row-major, each by tally_f32_to_bf16 or tally_f32_to_f16
     * (tally/half.h); nothing outside dst's elements is written. Queued like
     * an op. The front end (src/half.c) runs every op with a half output
     * into an fp32 temporary and then through it. Optional: NULL refuses
     * half outputs with UNSUPPORTED_DTYPE. */
    tally_status (*narrow)(tally_context *ctx, const tally_buffer *src, const tally__array *dst);
    /* TALLY__HALF_NATIVE_* bits: the ops whose entries read BF16 and F16
     * inputs (REDUCE, KL, DM, GMM_LOG_PROB, GMM_SAMPLE, CATEGORICAL) or write
     * BF16 and F16 outputs (RNG_FILL) themselves, with tally/half.h, so the
     * bits are those of the widened or narrowed path; src/half.c widens the
     * others' half inputs first and narrows their half outputs after. A bit
     * covers what it names only: GMM_SAMPLE is its inputs (mu, log_var,
     * logits), and a half z of tally_gmm_sample is still narrowed by the
     * front end, as kl_div's half out is. */
    unsigned half_native;
};

#define TALLY__HALF_NATIVE_REDUCE 1u
#define TALLY__HALF_NATIVE_KL 2u
#define TALLY__HALF_NATIVE_DM 4u
#define TALLY__HALF_NATIVE_RNG_FILL 8u
#define TALLY__HALF_NATIVE_GMM_LOG_PROB 16u /* z, mu, log_var, logits */
#define TALLY__HALF_NATIVE_GMM_SAMPLE 32u   /* mu, log_var, logits (inputs only) */
#define TALLY__HALF_NATIVE_CATEGORICAL 64u  /* weights */

#endif /* TALLY_BACKEND_H */
