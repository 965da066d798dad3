/*
 * tally.h - portable fused reductions and Philox random sampling.
 *
 * tally runs the same operations through CUDA, OpenCL or plain C on the host
 * and returns bit-identical results on all of them. This header is the whole
 * public API. It includes no vendor header: native handles (cl_mem,
 * CUdeviceptr, CUstream, ...) are passed as void pointers or integers.
 *
 * Conventions that hold for every call unless its comment says otherwise:
 *
 * - Status: every fallible call returns a tally_status. TALLY_OK is 0. On an
 *   error, the context (or, for calls without one, the calling thread) keeps a
 *   message naming the argument, the shape or the vendor error; read it with
 *   tally_last_error(). The library never prints and never exits.
 * - Sizes, offsets and strides are 64-bit and counted in elements unless the
 *   name says bytes. All size arithmetic is overflow-checked.
 * - Threads: a context and the buffers made from it may be used from one
 *   thread at a time (the caller serialises; tally takes no locks). Different
 *   contexts may be used concurrently from different threads. The calls that
 *   take no context (version, status strings, enumeration, tally_last_error
 *   with NULL) may be called from any thread at any time.
 * - Asynchrony: ops enqueue their work on the context's queue (a CUDA stream,
 *   an OpenCL command queue) and may return before the device finishes.
 *   Downloads and tally_read_scalar wait for all work queued before them;
 *   tally_sync waits for everything. The host backend runs each op to
 *   completion before returning.
 * - Ownership: objects are created by tally_*_create and released by the
 *   matching tally_*_release, which accepts NULL. A buffer must be released
 *   before its context. Wrapped native objects (an app's cl_mem, device
 *   pointer, stream or queue) stay owned by the app: tally never frees them.
 */
#ifndef TALLY_H
#define TALLY_H

#include <stddef.h>
#include <stdint.h>

#include "tally_version.h"
#include "tally/flags.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TALLY_STATIC)
#  define TALLY_API
#elif defined(_WIN32)
#  if defined(TALLY_BUILDING)
#    define TALLY_API __declspec(dllexport)
#  else
#    define TALLY_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define TALLY_API __attribute__((visibility("default")))
#else
#  define TALLY_API
#endif

/* ------------------------------------------------------------------------
 * Version
 * ------------------------------------------------------------------------ */

/* The library's version as TALLY_VERSION_HEX (0xMMmmpp), so a program can
 * compare it with the TALLY_VERSION_* macros it was compiled against. */
TALLY_API unsigned tally_version(void);
/* "MAJOR.MINOR.PATCH". Static storage; never free it. */
TALLY_API const char *tally_version_string(void);

/* ------------------------------------------------------------------------
 * Status codes: one X-macro table generates the enum, the message and the
 * name, so the three can never disagree.
 * ------------------------------------------------------------------------ */
#define TALLY_STATUS_MAP(X)                                                        \
    X(OK, 0, "success")                                                           \
    X(INVALID_ARGUMENT, 1, "invalid argument")                                    \
    X(SHAPE_MISMATCH, 2, "shapes do not agree")                                   \
    X(SIZE_OVERFLOW, 3, "size arithmetic overflows 64 bits")                      \
    X(OUT_OF_BOUNDS, 4, "view reaches outside its buffer")                        \
    X(EMPTY_INPUT, 5, "operation is undefined on an empty input")                 \
    X(WRONG_CONTEXT, 6, "object belongs to a different context")                  \
    X(UNSUPPORTED_DTYPE, 7, "element type not supported by this operation")       \
    X(BACKEND_NOT_COMPILED, 8, "backend was not compiled into this library")      \
    X(LIBRARY_MISSING, 9, "backend's vendor library could not be loaded")         \
    X(NO_DEVICE, 10, "backend found no usable device")                            \
    X(DEVICE_UNSUITABLE, 11, "device lacks a feature tally needs")                \
    X(OUT_OF_MEMORY, 12, "out of memory")                                         \
    X(BUILD_FAILED, 13, "device program failed to build")                         \
    X(BACKEND_ERROR, 14, "backend reported an error")                             \
    X(RNG_EXHAUSTED, 15, "random stream offset would pass 2^64")                  \
    X(IO_ERROR, 16, "file input or output failed")

typedef enum tally_status {
#define TALLY__STATUS_ENUM(name, code, text) TALLY_##name = code,
    TALLY_STATUS_MAP(TALLY__STATUS_ENUM)
#undef TALLY__STATUS_ENUM
} tally_status;

/* A fixed English sentence for a status ("invalid argument"). Static storage. */
TALLY_API const char *tally_status_string(tally_status status);
/* The status's name without prefix ("INVALID_ARGUMENT"). Static storage. */
TALLY_API const char *tally_status_name(tally_status status);

/* ------------------------------------------------------------------------
 * Backends, devices and contexts
 * ------------------------------------------------------------------------ */
typedef enum tally_backend {
    TALLY_BACKEND_AUTO = 0,
    TALLY_BACKEND_CUDA = 1,
    TALLY_BACKEND_OPENCL = 2,
    TALLY_BACKEND_HOST = 3
} tally_backend;

/* Pass as a device index to mean "the default device, or TALLY_DEVICE". */
#define TALLY_DEVICE_DEFAULT (-1)

/* "auto", "cuda", "opencl" or "host"; NULL for an unknown value. */
TALLY_API const char *tally_backend_name(tally_backend backend);
/* Parses those names; returns TALLY_INVALID_ARGUMENT for anything else. */
TALLY_API tally_status tally_backend_from_name(const char *name, tally_backend *out);

/* 1 if the backend was compiled into this library, else 0. */
TALLY_API int tally_backend_compiled(tally_backend backend);

typedef struct tally_device_info {
    int index;          /* the index to pass to tally_context_create */
    char name[128];     /* the device's own name */
    char platform[128]; /* OpenCL platform, CUDA driver version, or "host" */
    int is_gpu;         /* 1 for a GPU */
} tally_device_info;

/*
 * Lists the devices a backend can see, without creating a context.
 * Writes at most `capacity` entries to `devices` (which may be NULL when
 * capacity is 0) and the number available to *count. When the backend is
 * compiled out, its vendor library is missing or it has no device, returns the
 * matching status (BACKEND_NOT_COMPILED, LIBRARY_MISSING, NO_DEVICE) and sets
 * *count to 0; tally_last_error(NULL) then says why. Any thread.
 */
TALLY_API tally_status tally_devices(tally_backend backend, tally_device_info *devices,
                                     int capacity, int *count);

typedef struct tally_context tally_context;

/*
 * Creates a context on one device of one backend.
 *
 * backend AUTO reads TALLY_BACKEND (auto|cuda|opencl|host) and, when that is
 * unset or "auto", tries CUDA, then an OpenCL GPU, then any OpenCL device, then
 * the host, keeping the first that is compiled in, whose vendor library loads
 * and that has a device. device TALLY_DEVICE_DEFAULT reads TALLY_DEVICE (an
 * index), else uses device 0. An explicit backend or index from the caller is
 * never overridden by the environment.
 *
 * On failure *out is NULL and tally_last_error(NULL) on this thread says which
 * backend failed and why (compiled out, library missing, no device, ...).
 * The caller owns the context and releases it with tally_context_release.
 */
TALLY_API tally_status tally_context_create(tally_backend backend, int device,
                                            tally_context **out);

/*
 * Creates an OpenCL context on the app's own objects: cl_context, cl_device_id
 * and cl_command_queue (all required; the queue must be in order). tally
 * retains them while the context lives and releases only its own references.
 */
TALLY_API tally_status tally_context_create_opencl(void *cl_context, void *cl_device_id,
                                                   void *cl_command_queue, tally_context **out);

/*
 * Creates a CUDA context on the device's primary context, so pointers from
 * the app's cudaMalloc work with tally, and enqueues every op, copy and fill
 * on exactly `stream`, as cuBLAS, cuRAND and CUB do:
 *
 * - 0 (NULL) is the legacy default stream, the CUDA convention (and what
 *   PyTorch's default stream reports as torch.cuda.current_stream().cuda_stream).
 *   tally's work is then ordered after the app's work on that stream and on
 *   every blocking stream, with no synchronisation by the app.
 * - CU_STREAM_LEGACY ((void *)1) is the same stream; CU_STREAM_PER_THREAD
 *   ((void *)2) is the per-thread default stream of the thread that makes
 *   each tally call.
 * - Any other value is a CUstream / cudaStream_t of the device's primary
 *   context (another context's stream gives INVALID_ARGUMENT).
 *
 * tally never creates a stream behind the app's back here and never destroys
 * the app's stream; it waits on it where a call blocks (downloads,
 * tally_read_scalar, tally_sync, releases). For a stream of tally's own, use
 * tally_context_create(TALLY_BACKEND_CUDA, device, &ctx). Before 0.2.0 a NULL
 * stream meant "tally's own stream" (see CHANGELOG.md).
 */
TALLY_API tally_status tally_context_create_cuda(int device, void *stream, tally_context **out);

/* Waits for queued work, frees what tally allocated. Accepts NULL. All buffers
 * of the context must have been released. */
TALLY_API void tally_context_release(tally_context *ctx);

TALLY_API tally_backend tally_context_backend(const tally_context *ctx);
/* The device's name; valid while the context lives. */
TALLY_API const char *tally_context_device_name(const tally_context *ctx);

/* Waits until all work queued on the context has finished. */
TALLY_API tally_status tally_sync(tally_context *ctx);

/*
 * The last error's detail, errno-like: for a context, the message of the last
 * call on it that failed; for NULL, the last failure on this thread of a call
 * that had no context to hold it (tally_context_create, tally_devices, a call
 * given a NULL context). A call that succeeds leaves the message as it was,
 * so it can be read after clean-up calls; only the next failure replaces it.
 * Returns "" when nothing has failed yet. The string stays valid until the
 * next failing call on the same context (or thread), or the context's release.
 */
TALLY_API const char *tally_last_error(const tally_context *ctx);

/* ------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------ */
typedef struct tally_buffer tally_buffer;

/* Allocates `bytes` of device memory (contents undefined). bytes may be 0. */
TALLY_API tally_status tally_buffer_create(tally_context *ctx, size_t bytes, tally_buffer **out);
/* Wraps the app's cl_mem without copying (OpenCL contexts only). The app keeps
 * ownership; tally retains it while the buffer lives. */
TALLY_API tally_status tally_buffer_wrap_opencl(tally_context *ctx, void *cl_mem,
                                                tally_buffer **out);
/* Wraps an app's device pointer of `bytes` bytes (CUDA contexts only). tally
 * never frees it. */
TALLY_API tally_status tally_buffer_wrap_cuda(tally_context *ctx, uint64_t device_ptr,
                                              size_t bytes, tally_buffer **out);
/*
 * Wraps `bytes` of the app's host memory at `ptr` without copying, so that
 * NumPy arrays and other host data need no upload on the CPU paths.
 * - host contexts: tally reads and writes the app's memory directly.
 * - OpenCL contexts whose device shares memory with the host
 *   (CL_DEVICE_HOST_UNIFIED_MEMORY, as PoCL's CPU device does): a
 *   CL_MEM_USE_HOST_PTR buffer. The memory holds tally's results once
 *   tally_sync returns or the buffer is released; the app must not touch it
 *   while an op that uses it may be running. Other OpenCL devices and CUDA
 *   contexts return INVALID_ARGUMENT (use tally_buffer_create and upload).
 * ptr must be aligned to 4 bytes (16 or more is best for the OpenCL paths)
 * and stay valid until the buffer is released; bytes may be 0. The app keeps
 * ownership: tally never frees the memory. Same thread rules as the context.
 */
TALLY_API tally_status tally_buffer_wrap_host(tally_context *ctx, void *ptr, size_t bytes,
                                              tally_buffer **out);
/* Releases a buffer. Accepts NULL. A buffer tally allocated is freed after
 * the queued work that uses it. A wrapped buffer leaves the app's memory
 * alone: on CUDA the release does not wait (the app's stream orders its later
 * use of the memory after tally's work, as with any CUDA library); on OpenCL
 * it waits for the queue, and wrapped host memory holds the results once it
 * returns. */
TALLY_API void tally_buffer_release(tally_buffer *buf);
TALLY_API size_t tally_buffer_size(const tally_buffer *buf);

/* Copies host memory into the buffer; returns when the copy is done (src may be
 * reused). Ordered after work already queued. */
TALLY_API tally_status tally_buffer_upload(tally_buffer *buf, size_t byte_offset,
                                           const void *src, size_t bytes);
/* Copies the buffer to host memory after all queued work; blocks. */
TALLY_API tally_status tally_buffer_download(const tally_buffer *buf, size_t byte_offset,
                                             void *dst, size_t bytes);
/* Fills bytes [byte_offset, byte_offset + bytes) with a repeated 32-bit
 * pattern (for example the bits of a float). Offset and size must be multiples
 * of 4. Queued; may return before it is done. */
TALLY_API tally_status tally_buffer_fill(tally_buffer *buf, size_t byte_offset, size_t bytes,
                                         uint32_t pattern);

/* ------------------------------------------------------------------------
 * Views: a 2-D window on a buffer.
 * ------------------------------------------------------------------------ */
/* The element types, tally_dtype (TALLY_F32, TALLY_U32, TALLY_I32, TALLY_BF16,
 * TALLY_F16), are in tally/flags.h. */

/*
 * Element (r, c) lives at element index offset + r * stride + c of the buffer
 * (units of the dtype's size: 4 bytes for F32, U32 and I32, 2 for BF16 and
 * F16). stride >= cols is required when rows > 1. A view does not own its
 * buffer.
 *
 * Every floating input of every op (reduce x; kl_div input and target, in
 * any mix; dirichlet_multinomial counts and log_alpha; gmm z, mu, log_var
 * and logits; categorical weights) may be F32, BF16 or F16. Each half
 * element is widened to fp32 exactly (tally/half.h) and the op then computes
 * in fp32 as for F32 inputs, so its result is, bit for bit, the fp32 op on
 * the widened inputs, on every backend. Outputs are F32 (U32, I32 where
 * stated), except the elementwise ones: kl_div's out with reduction none,
 * rng_fill's out for the uniform and normal distributions and gmm_sample's
 * z may also be BF16 or F16 (either, whatever the inputs' types), and are
 * then tally_f32_to_bf16 or tally_f32_to_f16 (tally/half.h: round to
 * nearest even) of the F32 output, element by element, on every backend.
 */
typedef struct tally_view {
    tally_buffer *buffer;
    int64_t offset;
    int64_t rows;
    int64_t cols;
    int64_t stride;
    tally_dtype dtype;
} tally_view;

/* A contiguous fp32 view [rows, cols] starting at element `offset`. */
TALLY_API tally_view tally_view_f32(tally_buffer *buf, int64_t offset, int64_t rows, int64_t cols);
/* A strided fp32 view. */
TALLY_API tally_view tally_view_f32_strided(tally_buffer *buf, int64_t offset, int64_t rows,
                                            int64_t cols, int64_t stride);
/* A contiguous view of any dtype (offset counts elements of that dtype). */
TALLY_API tally_view tally_view_typed(tally_buffer *buf, tally_dtype dtype, int64_t offset,
                                      int64_t rows, int64_t cols);

/* Reads the one element of a 1x1 fp32 view to the host, after queued work. */
TALLY_API tally_status tally_read_scalar(tally_context *ctx, tally_view view, float *out);

/* ------------------------------------------------------------------------
 * Reductions. The order of every addition is fixed by tally's planner
 * (docs/reduction-tree.md), so results are identical on every backend.
 * Queued: may return before the device finishes.
 * ------------------------------------------------------------------------ */
typedef enum tally_reduce_op {
    TALLY_SUM = 1,
    TALLY_MEAN = 2,
    TALLY_MIN = 3,
    TALLY_MAX = 4,
    TALLY_LOGSUMEXP = 5,
    TALLY_SUMSQ = 6
} tally_reduce_op;

typedef enum tally_axis {
    TALLY_AXIS_ALL = 1, /* one scalar: out is 1x1 */
    TALLY_AXIS_ROW = 2  /* one value per row: out has rows elements (rows x 1 or 1 x rows) */
} tally_axis;

/*
 * out = op(x) over all elements or over each row. NaN propagates (min and max
 * too). Empty input: sum and sumsq give 0, logsumexp -inf; mean, min and max
 * return TALLY_EMPTY_INPUT. out must not overlap x.
 */
TALLY_API tally_status tally_reduce(tally_context *ctx, tally_reduce_op op, tally_axis axis,
                                    tally_view x, tally_view out);

typedef enum tally_reduction {
    TALLY_REDUCTION_NONE = 0,     /* elementwise / per-row output */
    TALLY_REDUCTION_SUM = 1,
    TALLY_REDUCTION_MEAN = 2,     /* divided by the element (or row) count */
    TALLY_REDUCTION_BATCHMEAN = 3 /* KL only: divided by rows */
} tally_reduction;

/* Flags for tally_kl_div (tally/flags.h): TALLY_KL_LOG_TARGET (target holds
 * log-probabilities), TALLY_KL_INPUT_IS_PROB (input holds p; log p is taken in
 * the same pass), TALLY_KL_INPUT_LOGITS (input holds logits: each row's
 * log-softmax replaces it), TALLY_KL_TARGET_LOGITS (target holds logits:
 * each row's softmax is the target). INPUT_LOGITS excludes INPUT_IS_PROB and
 * TARGET_LOGITS excludes LOG_TARGET (TALLY_INVALID_ARGUMENT). */

/*
 * KL divergence with torch.nn.functional.kl_div semantics (docs/ops.md).
 * Pointwise: target*(log target - input), 0 where target == 0, NaN where
 * target < 0; with LOG_TARGET, exp(target)*(target - input). With
 * INPUT_IS_PROB, input is p and log p replaces it. With the logits flags the
 * op is kl_div(log_softmax(input, -1), softmax(target, -1)) (either side as
 * flagged): each row's max and sum of exponentials are taken inside the op,
 * never stored as a normalised copy. out: same shape as input for NONE
 * (F32, BF16 or F16: see tally_view), else 1x1 F32. One pass over the data (the logits forms read each row again
 * for its statistics, from on-chip memory where the shape allows). out is
 * written only; input and target are read only and may share a buffer.
 * Queued; ownership and threads as for every op (one thread per context at
 * a time).
 */
TALLY_API tally_status tally_kl_div(tally_context *ctx, tally_view input, tally_view target,
                                    tally_reduction reduction, unsigned flags, tally_view out);

/* Flag for tally_dirichlet_multinomial (tally/flags.h):
 * TALLY_DM_WITH_COEFFICIENT adds lgamma(N+1) - sum lgamma(n+1). */

/*
 * Dirichlet-multinomial log-likelihood of each row of counts [B, V] under
 * alpha = exp(log_alpha); log_alpha is [1, V] (shared) or [B, V] (per row).
 * Row value: lgamma(A) - lgamma(N + A) + sum_v (lgamma(n_v + a_v) - lgamma(a_v)),
 * plus the multinomial coefficient with TALLY_DM_WITH_COEFFICIENT. A row with a
 * negative count gives NaN. out: B values for NONE (B x 1 or 1 x B), 1x1 for
 * SUM and MEAN (over rows). Queued.
 */
TALLY_API tally_status tally_dirichlet_multinomial(tally_context *ctx, tally_view counts,
                                                   tally_view log_alpha, tally_reduction reduction,
                                                   unsigned flags, tally_view out);

/*
 * Log density of a diagonal Gaussian mixture. z [B, D]; mu and log_var
 * [B, K*D] (component k of row b in columns k*D .. k*D + D - 1); logits
 * [1, K] (ignored when K == 1, may then have an empty buffer). out: B values.
 * Queued.
 */
TALLY_API tally_status tally_gmm_log_prob(tally_context *ctx, tally_view z, tally_view mu,
                                          tally_view log_var, tally_view logits,
                                          int64_t components, tally_view out);

/* A position in a Philox4x32-10 stream (docs/rng.md). */
typedef struct tally_rng {
    uint64_t seed;
    uint64_t subsequence;
    uint64_t offset;
} tally_rng;

/*
 * Adds `consumed` (as reported by a random op) to rng->offset. Returns
 * TALLY_RNG_EXHAUSTED, leaving rng unchanged, if that would pass 2^64.
 */
TALLY_API tally_status tally_rng_advance(tally_rng *rng, uint64_t consumed);

/*
 * Reparameterised sample of the mixture fused with its log density (one
 * pass): component c_b ~ Categorical(softmax(logits)), eps ~ N(0, 1),
 * z = mu_c + exp(0.5 * log_var_c) * eps, log_q = log density of z. Outputs z
 * [B, D] (F32, BF16 or F16: see tally_view; log_q is of the F32 z), log_q
 * (B values) and, when component.buffer is not NULL, the
 * component index per row as int32 (TALLY_I32 view of B values). *consumed
 * (may be NULL) receives the stream elements used, a multiple of 4. Queued.
 */
TALLY_API tally_status tally_gmm_sample(tally_context *ctx, tally_view mu, tally_view log_var,
                                        tally_view logits, int64_t components, tally_rng rng,
                                        tally_view z, tally_view log_q, tally_view component,
                                        uint64_t *consumed);

/* The distributions, tally_distribution (tally/flags.h): TALLY_DIST_RAW
 * (uint32 draws; out must be a TALLY_U32 view), TALLY_DIST_UNIFORM ((0, 1]),
 * TALLY_DIST_NORMAL (standard normal). */

/*
 * Fills out (row-major over its rows and cols) with stream elements
 * offset, offset + 1, ... *consumed (may be NULL) receives the count rounded up
 * to a multiple of 4. For UNIFORM and NORMAL, out may be BF16 or F16: each
 * value is then the F32 draw narrowed (tally_view), from the same stream
 * elements. Queued.
 */
TALLY_API tally_status tally_rng_fill(tally_context *ctx, tally_distribution dist, tally_rng rng,
                                      tally_view out, uint64_t *consumed);

/* Flag for tally_categorical: the input holds logits rather than weights. */
#define TALLY_CATEGORICAL_LOGITS 1u

/*
 * One index per row of weights [rows, cols] (non-negative) or of logits.
 * Row r uses uniform(offset + r). A row whose weights are not all finite and
 * non-negative, or sum to zero, gives index -1. out: TALLY_I32 view of rows
 * values. *consumed: rows rounded up to a multiple of 4. Queued.
 */
TALLY_API tally_status tally_categorical(tally_context *ctx, tally_view weights, unsigned flags,
                                         tally_rng rng, tally_view out, uint64_t *consumed);

/* ------------------------------------------------------------------------
 * Gradients: the backward passes of the ops above, with the same bits on
 * every backend (docs/ops.md, "Gradients"). Each takes the forward's inputs
 * again and the upstream gradient grad_out, and writes the gradients with
 * respect to the inputs; nothing saved by the forward is needed. The rules
 * of every op apply: views do not own their buffers, outputs may not
 * overlap inputs or each other, every argument is checked before anything
 * runs, calls are queued (they may return before the device finishes;
 * downloads and tally_sync wait), one thread at a time per context.
 * ------------------------------------------------------------------------ */

/*
 * Backward of tally_kl_div with the same reduction and flags. grad_out: 1x1
 * for SUM, MEAN and BATCHMEAN (the gradient of the scalar loss), the input's
 * shape for NONE. grad_input and grad_target: the input's shape, or a view
 * with a NULL buffer when that gradient is not wanted (both NULL is allowed
 * and does nothing after the checks). With INPUT_IS_PROB grad_input is the
 * gradient with respect to p. torch's formulas; the conventions at
 * target == 0 are in docs/ops.md. Elementwise, one pass. The views are
 * borrowed (releasing a buffer waits for queued work on it); queued (may return
 * before the device finishes); one thread at a time per context.
 */
TALLY_API tally_status tally_kl_div_backward(tally_context *ctx, tally_view input, tally_view target,
                                             tally_view grad_out, tally_reduction reduction,
                                             unsigned flags, tally_view grad_input,
                                             tally_view grad_target);

/*
 * Backward of tally_dirichlet_multinomial with respect to log_alpha.
 * grad_out: B values for NONE, 1x1 for SUM and MEAN. grad_log_alpha has
 * log_alpha's shape: [B, V] per-row (elementwise) or [1, V] shared (each
 * column summed over the B rows by the planner's tree). flags as in the
 * forward (the coefficient does not depend on alpha). The gradient with
 * respect to the counts is not computed. The views are borrowed; queued;
 * one thread at a time per context.
 */
TALLY_API tally_status tally_dirichlet_multinomial_backward(tally_context *ctx, tally_view counts,
                                                            tally_view log_alpha, tally_view grad_out,
                                                            tally_reduction reduction, unsigned flags,
                                                            tally_view grad_log_alpha);

/*
 * Backward of tally_gmm_log_prob: given grad_log_q (B values, the gradient
 * of each row's log density), the gradients with respect to z [B, D], mu
 * and log_var [B, K*D] and logits (K values; ignored when K == 1). Each
 * output may be a view with a NULL buffer (not wanted). Responsibilities
 * come from the forward's own sums and logsumexp order. The views are
 * borrowed; queued; one thread at a time per context.
 */
TALLY_API tally_status tally_gmm_log_prob_backward(tally_context *ctx, tally_view z, tally_view mu,
                                                   tally_view log_var, tally_view logits, int64_t components,
                                                   tally_view grad_log_q, tally_view grad_z,
                                                   tally_view grad_mu, tally_view grad_log_var,
                                                   tally_view grad_logits);

/*
 * Backward of tally_gmm_sample with the same parameters and rng: given the
 * upstream gradients of z [B, D] and of log_q (B values; either may be a
 * view with a NULL buffer, meaning zero), the gradients with respect to mu,
 * log_var [B, K*D] and logits (K values; ignored when K == 1) through the
 * reparameterisation z = mu_c + exp(0.5 log_var_c) eps and through log_q(z).
 * The component draw is not differentiated (as torch's multinomial); the
 * components and the noise are drawn again from (seed, subsequence, offset)
 * exactly as the forward drew them, so nothing saved is read. A row whose
 * component could not be drawn (invalid logits) gets NaN gradients. The
 * views are borrowed and rng is read, not advanced (pass the rng the forward
 * used, before its tally_rng_advance); queued; one thread at a time per
 * context.
 */
TALLY_API tally_status tally_gmm_sample_backward(tally_context *ctx, tally_view mu, tally_view log_var,
                                                 tally_view logits, int64_t components, tally_rng rng,
                                                 tally_view grad_z, tally_view grad_log_q, tally_view grad_mu,
                                                 tally_view grad_log_var, tally_view grad_logits);

/* ------------------------------------------------------------------------
 * Op names: X(ID, name, reduce_op), one row per op, named as the `tally`
 * CLI, its crosscheck and tally-bench spell it; reduce_op is the
 * tally_reduce_op of a reduction and 0 for every other op. The library does
 * not use the names; tools expand this table instead of keeping their own.
 * ------------------------------------------------------------------------ */
#define TALLY_OP_MAP(X)                                                          \
    X(SUM, sum, TALLY_SUM)                                                       \
    X(MEAN, mean, TALLY_MEAN)                                                    \
    X(MIN, min, TALLY_MIN)                                                       \
    X(MAX, max, TALLY_MAX)                                                       \
    X(LOGSUMEXP, logsumexp, TALLY_LOGSUMEXP)                                     \
    X(SUMSQ, sumsq, TALLY_SUMSQ)                                                 \
    X(KL_DIV, kl_div, 0)                                                         \
    X(DIRICHLET_MULTINOMIAL, dirichlet_multinomial, 0)                           \
    X(GMM_LOG_PROB, gmm_log_prob, 0)                                             \
    X(GMM_SAMPLE, gmm_sample, 0)                                                 \
    X(RNG, rng, 0)                                                               \
    X(CATEGORICAL, categorical, 0)                                               \
    X(KL_DIV_BACKWARD, kl_div_backward, 0)                                       \
    X(DIRICHLET_MULTINOMIAL_BACKWARD, dirichlet_multinomial_backward, 0)         \
    X(GMM_LOG_PROB_BACKWARD, gmm_log_prob_backward, 0)                           \
    X(GMM_SAMPLE_BACKWARD, gmm_sample_backward, 0)

#ifdef __cplusplus
}
#endif

#endif /* TALLY_H */
