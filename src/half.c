/*
 * src/half.c - ops on BF16 and F16 inputs.
 *
 * Every half value is exactly an fp32 value, so an op on half inputs is
 * defined as the fp32 op on the widened inputs (docs/ops.md). This file
 * makes that definition the implementation on every backend: each half
 * input of a validated job is widened by the backend's `widen` entry into
 * an fp32 temporary of the same context, the job is pointed at the
 * temporary (contiguous, offset 0), and the backend's unchanged fp32 op
 * runs. The bits can then only differ from the fp32 op's if the widening
 * does, and the widening is tally/half.h's integer code on every backend.
 * A backend whose kernels widen each element with the same code as they
 * load it says so per op (half_native, src/backend.h: the GPUs, for every
 * op's inputs) and gets the half views as they are.
 *
 * Half outputs work the other way round: the elementwise outputs that may
 * be half (kl_div with reduction none, the uniform and normal fills,
 * gmm_sample's z) are defined as tally_f32_to_bf16 or tally_f32_to_f16 of
 * the fp32 op's output, element by element. The op runs into a contiguous
 * fp32 temporary and the backend's `narrow` entry rounds it into the
 * caller's view with tally/half.h's integer code, so the half output is
 * the narrowed fp32 output on every backend by construction (and the
 * random bits of a fill are unchanged: a fill's draws depend on the
 * element's row-major index only, never on where it is stored).
 *
 * Temporaries are released before the call returns (a backend's release
 * waits for queued work that uses the buffer), so an op on half inputs or
 * outputs holds 4 bytes per half element for the length of the call.
 */
#include "internal.h"

uint64_t tally__dtype_bytes(tally_dtype dtype)
{
    switch (dtype) {
    case TALLY_F32:
    case TALLY_U32:
    case TALLY_I32: return 4;
    case TALLY_BF16:
    case TALLY_F16: return 2;
    }
    return 0;
}

static int is_half(const tally__array *a)
{
    return a->buffer != NULL && (a->dtype == TALLY_BF16 || a->dtype == TALLY_F16);
}

/* The temporaries of one call: at most four inputs (the mixture's). */
typedef struct widened {
    tally_buffer *tmp[4];
    int count;
} widened;

static void widened_release(tally_context *ctx, widened *w)
{
    for (int i = 0; i < w->count; i++) ctx->ops->buffer_release(w->tmp[i]);
    w->count = 0;
}

/* A new fp32 buffer of count elements for the half view `arg` of op. */
static tally_status create_f32_temporary(tally_context *ctx, const char *op, const char *arg, uint64_t count,
                                         tally_buffer **out)
{
    uint64_t bytes;
    if (tally__mul_u64(count, 4u, &bytes) || bytes > (uint64_t)INT64_MAX || bytes > (uint64_t)SIZE_MAX)
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "%s: the fp32 copy of %s (%llu elements) is too large", op,
                            arg, (unsigned long long)count);
    return ctx->ops->buffer_create(ctx, (size_t)bytes, out);
}

/* Replaces *a, a half view, by a contiguous fp32 copy of its values. */
static tally_status widen_array(tally_context *ctx, const char *op, const char *arg, tally__array *a, widened *w)
{
    if (!is_half(a)) return TALLY_OK;
    if (ctx->ops->widen == NULL)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "%s: the %s backend does not read half inputs (%s)", op,
                            ctx->ops->name, arg);
    uint64_t count = a->rows * a->cols; /* rows*cols was overflow-checked by the front end */
    if (count == 0) {
        a->dtype = TALLY_F32;
        return TALLY_OK;
    }
    tally_buffer *tmp = NULL;
    tally_status st = create_f32_temporary(ctx, op, arg, count, &tmp);
    if (st != TALLY_OK) return st;
    w->tmp[w->count++] = tmp;
    st = ctx->ops->widen(ctx, a, tmp);
    if (st != TALLY_OK) return st;
    *a = (tally__array){.buffer = tmp, .offset = 0, .rows = a->rows, .cols = a->cols, .stride = a->cols,
                        .dtype = TALLY_F32};
    return TALLY_OK;
}

/* Widens the listed arrays of a job copy, runs `call`, releases; a
 * backend that reads halves itself for this op (native bit) gets the job
 * as it is. */
#define RUN_WIDENED(op_name, job_type, entry, native, ...)                           \
    do {                                                                           \
        if (ctx->ops->half_native & (native)) return ctx->ops->entry(ctx, job);    \
        job_type copy = *job;                                                      \
        struct { const char *name; tally__array *a; } list_[] = {__VA_ARGS__};     \
        int any_ = 0;                                                              \
        for (size_t i_ = 0; i_ < sizeof list_ / sizeof list_[0]; i_++) any_ |= is_half(list_[i_].a); \
        if (!any_) return ctx->ops->entry(ctx, job);                               \
        widened w_ = {.count = 0};                                                 \
        tally_status st_ = TALLY_OK;                                               \
        for (size_t i_ = 0; i_ < sizeof list_ / sizeof list_[0] && st_ == TALLY_OK; i_++) \
            st_ = widen_array(ctx, op_name, list_[i_].name, list_[i_].a, &w_);     \
        if (st_ == TALLY_OK) st_ = ctx->ops->entry(ctx, &copy);                    \
        widened_release(ctx, &w_);                                                 \
        return st_;                                                                \
    } while (0)

tally_status tally__run_reduce(tally_context *ctx, const tally__reduce_job *job)
{
    RUN_WIDENED("tally_reduce", tally__reduce_job, reduce, TALLY__HALF_NATIVE_REDUCE, {"x", &copy.x});
}

static tally_status run_kl_div_widened(tally_context *ctx, const tally__kl_job *job)
{
    RUN_WIDENED("tally_kl_div", tally__kl_job, kl_div, TALLY__HALF_NATIVE_KL, {"input", &copy.input}, {"target", &copy.target});
}

tally_status tally__run_dirichlet_multinomial(tally_context *ctx, const tally__dm_job *job)
{
    RUN_WIDENED("tally_dirichlet_multinomial", tally__dm_job, dirichlet_multinomial, TALLY__HALF_NATIVE_DM, {"counts", &copy.counts},
                {"log_alpha", &copy.log_alpha});
}

tally_status tally__run_gmm_log_prob(tally_context *ctx, const tally__gmm_job *job)
{
    RUN_WIDENED("tally_gmm_log_prob", tally__gmm_job, gmm_log_prob, TALLY__HALF_NATIVE_GMM_LOG_PROB, {"z", &copy.z},
                {"mu", &copy.mu}, {"log_var", &copy.log_var}, {"logits", &copy.logits});
}

static tally_status run_gmm_sample_widened(tally_context *ctx, const tally__gmm_job *job)
{
    /* z is the output here (F32 by now: half z is narrowed below, on every
     * backend, so the native bit covers the inputs only). */
    RUN_WIDENED("tally_gmm_sample", tally__gmm_job, gmm_sample, TALLY__HALF_NATIVE_GMM_SAMPLE, {"mu", &copy.mu},
                {"log_var", &copy.log_var}, {"logits", &copy.logits});
}

tally_status tally__run_categorical(tally_context *ctx, const tally__categorical_job *job)
{
    RUN_WIDENED("tally_categorical", tally__categorical_job, categorical, TALLY__HALF_NATIVE_CATEGORICAL,
                {"weights", &copy.weights});
}

/* ---- Half outputs ---- */

/* A half output being computed: the fp32 temporary the op writes and the
 * caller's view the result is narrowed into. */
typedef struct narrowing {
    tally_buffer *tmp; /* NULL: the output is not half (or empty) */
    tally__array dst;
} narrowing;

/* When *a is a half view, points it at a new contiguous fp32 temporary and
 * remembers the view in *n. */
static tally_status narrow_begin(tally_context *ctx, const char *op, const char *arg, tally__array *a, narrowing *n)
{
    n->tmp = NULL;
    if (!is_half(a)) return TALLY_OK;
    if (ctx->ops->narrow == NULL)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "%s: the %s backend does not write half outputs (%s)", op,
                            ctx->ops->name, arg);
    const uint64_t count = a->rows * a->cols; /* overflow-checked by the front end */
    if (count == 0) {
        /* Nothing to narrow; the op writes no element of an empty view (a
         * mixture sample with D = 0 still writes its log_q), so the backend
         * may take it as an empty f32 view. */
        a->dtype = TALLY_F32;
        return TALLY_OK;
    }
    tally_status st = create_f32_temporary(ctx, op, arg, count, &n->tmp);
    if (st != TALLY_OK) return st;
    n->dst = *a;
    *a = (tally__array){.buffer = n->tmp, .offset = 0, .rows = a->rows, .cols = a->cols, .stride = a->cols,
                        .dtype = TALLY_F32};
    return TALLY_OK;
}

/* Narrows the temporary into the caller's view when the op succeeded, and
 * releases it in every case; returns the call's status. */
static tally_status narrow_end(tally_context *ctx, narrowing *n, tally_status st)
{
    if (n->tmp == NULL) return st;
    if (st == TALLY_OK) st = ctx->ops->narrow(ctx, n->tmp, &n->dst);
    ctx->ops->buffer_release(n->tmp);
    n->tmp = NULL;
    return st;
}

/* The entry of an op whose output `field` may be a half view: `run` writes
 * a contiguous fp32 temporary, which is then narrowed into the view; a
 * backend that narrows as it stores for this op (native bit) writes the
 * view itself. */
#define RUN_NARROWED(op_name, job_type, field, run, native)                                   \
    tally_status tally__run_##op_name(tally_context *ctx, const job_type *job)                 \
    {                                                                                          \
        if (!is_half(&job->field) || (ctx->ops->half_native & (native))) return run(ctx, job); \
        job_type copy = *job;                                                                  \
        narrowing n;                                                                           \
        tally_status st = narrow_begin(ctx, "tally_" #op_name, #field, &copy.field, &n);       \
        if (st != TALLY_OK) return st;                                                         \
        return narrow_end(ctx, &n, run(ctx, &copy));                                           \
    }

static tally_status run_rng_fill_f32(tally_context *ctx, const tally__rng_job *job)
{
    return ctx->ops->rng_fill(ctx, job);
}

/* No backend stores a half z or kl_div out itself (TALLY__HALF_NATIVE_GMM_SAMPLE
 * and _KL are their inputs). */
RUN_NARROWED(kl_div, tally__kl_job, out, run_kl_div_widened, 0u)
RUN_NARROWED(gmm_sample, tally__gmm_job, z, run_gmm_sample_widened, 0u)
/* The GPUs narrow a fill as they store it. */
RUN_NARROWED(rng_fill, tally__rng_job, out, run_rng_fill_f32, TALLY__HALF_NATIVE_RNG_FILL)
