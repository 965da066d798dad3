/*
 * src/ops.c - the public ops: every argument is checked here, once, the
 * reduction tree is planned, and a validated job goes to the backend.
 */
#include <string.h>

#include "ops_check.h" /* internal.h, and the CHECK and BEGIN idioms */
#include "tally/terms.h"

static const char *dtype_name(tally_dtype d)
{
    switch (d) {
    case TALLY_F32: return "f32";
    case TALLY_U32: return "u32";
    case TALLY_I32: return "i32";
    case TALLY_BF16: return "bf16";
    case TALLY_F16: return "f16";
    }
    return "unknown";
}

/* Passed to check_view for a floating input: F32, BF16 or F16 accepted
 * (src/half.c widens the halves). Not a tally_dtype value. */
#define FLOAT_INPUT ((tally_dtype)0x100)
/* Passed to check_view for an elementwise floating output that may be half
 * (KL with reduction none, uniform and normal fills, the mixture's z):
 * F32, BF16 or F16 accepted (src/half.c narrows into the halves). */
#define HALF_OUTPUT ((tally_dtype)0x101)

/* Checks one view against its context and buffer and converts it to the
 * backend's form. Every rule of tally_view lives here. */
static tally_status check_view(tally_context *ctx, const char *op, const char *arg, tally_view v,
                               tally_dtype dtype, tally__array *out)
{
    *out = (tally__array){.buffer = NULL};
    if (v.buffer == NULL) return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: %s has no buffer", op, arg);
    if (v.buffer->ctx != ctx)
        return tally__error(ctx, TALLY_WRONG_CONTEXT, "%s: %s's buffer belongs to another context", op, arg);
    const int any_float = dtype == FLOAT_INPUT || dtype == HALF_OUTPUT;
    if (any_float && v.dtype != TALLY_F32 && v.dtype != TALLY_BF16 && v.dtype != TALLY_F16)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "%s: %s has dtype %s (%d), expected f32, bf16 or f16",
                            op, arg, dtype_name(v.dtype), (int)v.dtype);
    if (!any_float && v.dtype != dtype)
        return tally__error(ctx, TALLY_UNSUPPORTED_DTYPE, "%s: %s has dtype %s (%d), expected %s%s", op, arg,
                            dtype_name(v.dtype), (int)v.dtype, dtype_name(dtype),
                            v.dtype == TALLY_BF16 || v.dtype == TALLY_F16
                                ? " (bf16 and f16 are taken by the forward ops' floating inputs and by the "
                                  "elementwise outputs only: kl_div with reduction none, uniform and normal "
                                  "fills, gmm_sample's z)"
                                : "");
    const uint64_t element_bytes = tally__dtype_bytes(v.dtype);
    if (v.offset < 0 || v.rows < 0 || v.cols < 0 || v.stride < 0)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "%s: %s has a negative offset, rows, cols or stride (%lld, %lld, %lld, %lld)", op,
                            arg, (long long)v.offset, (long long)v.rows, (long long)v.cols,
                            (long long)v.stride);
    if (v.rows > 1 && v.stride < v.cols)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: %s has stride %lld < cols %lld", op, arg,
                            (long long)v.stride, (long long)v.cols);
    /* Bounded before the emptiness test: a backend sizes scratch from the
     * rows of an empty view too (src/size.c). */
    if (!tally__count_ok((uint64_t)v.offset) || !tally__count_ok((uint64_t)v.rows) ||
        !tally__count_ok((uint64_t)v.cols) || !tally__count_ok((uint64_t)v.stride))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW,
                            "%s: %s [%lld x %lld, stride %lld, offset %lld] has a dimension above 2^%d, "
                            "more than any memory holds",
                            op, arg, (long long)v.rows, (long long)v.cols, (long long)v.stride,
                            (long long)v.offset, TALLY__MAX_COUNT_LOG2);
    uint64_t count, last, end, end_bytes;
    if (tally__mul_u64((uint64_t)v.rows, (uint64_t)v.cols, &count) || !tally__count_ok(count))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "%s: %s rows*cols = %lld*%lld is above 2^%d elements", op,
                            arg, (long long)v.rows, (long long)v.cols, TALLY__MAX_COUNT_LOG2);
    out->buffer = v.buffer;
    out->offset = (uint64_t)v.offset;
    out->rows = (uint64_t)v.rows;
    out->cols = (uint64_t)v.cols;
    out->stride = v.rows > 1 ? (uint64_t)v.stride : (uint64_t)v.cols;
    out->dtype = v.dtype;
    if (count == 0) return TALLY_OK;
    if (tally__mul_u64(out->rows - 1, out->stride, &last) || tally__add_u64(last, out->offset, &last) ||
        tally__add_u64(last, out->cols, &end) || tally__mul_u64(end, element_bytes, &end_bytes))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "%s: %s's last element index overflows 64 bits", op,
                            arg);
    if (end_bytes > v.buffer->bytes)
        return tally__error(ctx, TALLY_OUT_OF_BOUNDS,
                            "%s: %s [%lld x %lld, stride %lld, offset %lld] needs %llu bytes but its buffer "
                            "has %zu",
                            op, arg, (long long)v.rows, (long long)v.cols, (long long)out->stride,
                            (long long)v.offset, (unsigned long long)end_bytes, v.buffer->bytes);
    return TALLY_OK;
}

/* An output of n values: a 1 x n or n x 1 view. Stored as an n x 1 array
 * whose stride is the distance between consecutive values. */
static tally_status check_vector(tally_context *ctx, const char *op, const char *arg, tally_view v,
                                 tally_dtype dtype, uint64_t n, tally__array *out)
{
    tally_status st = check_view(ctx, op, arg, v, dtype, out);
    if (st != TALLY_OK) return st;
    uint64_t count = out->rows * out->cols;
    if (count != n || (out->rows > 1 && out->cols > 1))
        return tally__error(ctx, TALLY_SHAPE_MISMATCH, "%s: %s is %llu x %llu but must hold %llu values "
                            "(1 x %llu or %llu x 1)",
                            op, arg, (unsigned long long)out->rows, (unsigned long long)out->cols,
                            (unsigned long long)n, (unsigned long long)n, (unsigned long long)n);
    uint64_t step = out->rows > 1 ? out->stride : 1;
    out->rows = n;
    out->cols = 1;
    out->stride = step;
    return TALLY_OK;
}

/* First and last byte of a view (views of different dtypes may share a
 * buffer; check_view made sure these fit the buffer). */
static void extent(const tally__array *a, uint64_t *first, uint64_t *last)
{
    const uint64_t size = tally__dtype_bytes(a->dtype);
    *first = a->offset * size;
    *last = (a->offset + (a->rows - 1) * a->stride + a->cols) * size - 1;
}

/* Outputs may not share elements with inputs (checked by extent, which is
 * conservative for interleaved strided views). */
static tally_status check_disjoint(tally_context *ctx, const char *op, const char *out_name,
                                   const tally__array *out, const char *in_name, const tally__array *in)
{
    if (out->buffer != in->buffer || out->rows * out->cols == 0 || in->rows * in->cols == 0) return TALLY_OK;
    uint64_t a0, a1, b0, b1;
    extent(out, &a0, &a1);
    extent(in, &b0, &b1);
    if (a0 <= b1 && b0 <= a1)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: output %s overlaps input %s in the same buffer",
                            op, out_name, in_name);
    return TALLY_OK;
}

static tally_status check_rng(tally_context *ctx, const char *op, tally_rng rng, uint64_t consumed_count,
                              int overflowed)
{
    uint64_t end;
    if (overflowed)
        return tally__error(ctx, TALLY_RNG_EXHAUSTED,
                            "%s: the number of stream elements needed overflows 64 bits", op);
    if (tally__add_u64(rng.offset, consumed_count, &end))
        return tally__error(ctx, TALLY_RNG_EXHAUSTED, "%s: offset %llu plus the %llu elements it needs passes 2^64",
                            op, (unsigned long long)rng.offset, (unsigned long long)consumed_count);
    return TALLY_OK;
}

/* ---------------------------------------------------------------------- */

tally_status tally_reduce(tally_context *ctx, tally_reduce_op op, tally_axis axis, tally_view x, tally_view out)
{
    static const char name[] = "tally_reduce";
    BEGIN(name);
    if (op < TALLY_SUM || op > TALLY_SUMSQ)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: unknown op %d", name, (int)op);
    if (axis != TALLY_AXIS_ALL && axis != TALLY_AXIS_ROW)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: unknown axis %d", name, (int)axis);
    tally__reduce_job job = {.op = op, .axis = axis};
    CHECK(check_view(ctx, name, "x", x, FLOAT_INPUT, &job.x));
    uint64_t n = axis == TALLY_AXIS_ALL ? job.x.rows * job.x.cols : job.x.cols;
    uint64_t outputs = axis == TALLY_AXIS_ALL ? 1 : job.x.rows;
    CHECK(check_vector(ctx, name, "out", out, TALLY_F32, outputs, &job.out));
    CHECK(check_disjoint(ctx, name, "out", &job.out, "x", &job.x));
    int needs_elements = op == TALLY_MEAN || op == TALLY_MIN || op == TALLY_MAX;
    if (needs_elements && n == 0 && outputs > 0)
        return tally__error(ctx, TALLY_EMPTY_INPUT, "%s: %s of an empty input (%llu x %llu) is undefined", name,
                            op == TALLY_MEAN ? "mean" : op == TALLY_MIN ? "min" : "max",
                            (unsigned long long)job.x.rows, (unsigned long long)job.x.cols);
    if (outputs == 0) return TALLY_OK;
    job.plan = tally__plan_vector(n);
    return tally__run_reduce(ctx, &job);
}

/* The KL divergence's arguments, forward and backward alike: the reduction
 * and flags (the public TALLY_KL_* values, which the job and the kernels
 * share through tally/flags.h, in *job_flags), input and target of `dtype` and one shape, and the view `result_name`
 * the reduction writes or reads (the forward's out, the backward's
 * grad_out): the input's shape for NONE, of `none_dtype` (the forward's
 * out may be half there), else one f32 value of an input that is not empty
 * where the reduction divides by its size. */
static tally_status check_kl_args(tally_context *ctx, const char *name, tally_view input, tally_view target,
                                  tally_reduction reduction, unsigned flags, tally_dtype dtype,
                                  tally_dtype none_dtype, const char *result_name, tally_view result,
                                  tally__array *input_out,
                                  tally__array *target_out, tally__array *result_out, uint32_t *job_flags)
{
    if (reduction < TALLY_REDUCTION_NONE || reduction > TALLY_REDUCTION_BATCHMEAN)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: unknown reduction %d", name, (int)reduction);
    if (flags & ~(TALLY_KL_LOG_TARGET | TALLY_KL_INPUT_IS_PROB | TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS))
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: unknown flags 0x%x", name, flags);
    if ((flags & TALLY_KL_INPUT_LOGITS) && (flags & TALLY_KL_INPUT_IS_PROB))
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "%s: TALLY_KL_INPUT_LOGITS and TALLY_KL_INPUT_IS_PROB both describe the input; give one",
                            name);
    if ((flags & TALLY_KL_TARGET_LOGITS) && (flags & TALLY_KL_LOG_TARGET))
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "%s: TALLY_KL_TARGET_LOGITS and TALLY_KL_LOG_TARGET both describe the target; give one",
                            name);
    *job_flags = flags;
    CHECK(check_view(ctx, name, "input", input, dtype, input_out));
    CHECK(check_view(ctx, name, "target", target, dtype, target_out));
    const uint64_t rows = input_out->rows, cols = input_out->cols, n = rows * cols;
    if (target_out->rows != rows || target_out->cols != cols)
        return tally__error(ctx, TALLY_SHAPE_MISMATCH, "%s: input is %llu x %llu but target is %llu x %llu", name,
                            (unsigned long long)rows, (unsigned long long)cols,
                            (unsigned long long)target_out->rows, (unsigned long long)target_out->cols);
    if (reduction == TALLY_REDUCTION_NONE) {
        CHECK(check_view(ctx, name, result_name, result, none_dtype, result_out));
        if (result_out->rows != rows || result_out->cols != cols)
            return tally__error(ctx, TALLY_SHAPE_MISMATCH,
                                "%s: reduction none needs %s of the input's shape %llu x %llu, got %llu x %llu",
                                name, result_name, (unsigned long long)rows, (unsigned long long)cols,
                                (unsigned long long)result_out->rows, (unsigned long long)result_out->cols);
        return TALLY_OK;
    }
    CHECK(check_vector(ctx, name, result_name, result, TALLY_F32, 1, result_out));
    if ((reduction == TALLY_REDUCTION_MEAN && n == 0) || (reduction == TALLY_REDUCTION_BATCHMEAN && rows == 0))
        return tally__error(ctx, TALLY_EMPTY_INPUT, "%s: %s of an empty input is undefined", name,
                            reduction == TALLY_REDUCTION_MEAN ? "mean" : "batchmean");
    return TALLY_OK;
}

tally_status tally_kl_div(tally_context *ctx, tally_view input, tally_view target, tally_reduction reduction,
                          unsigned flags, tally_view out)
{
    static const char name[] = "tally_kl_div";
    BEGIN(name);
    tally__kl_job job = {.reduction = reduction};
    CHECK(check_kl_args(ctx, name, input, target, reduction, flags, FLOAT_INPUT, HALF_OUTPUT, "out", out,
                        &job.input, &job.target, &job.out, &job.flags));
    const uint64_t n = job.input.rows * job.input.cols;
    CHECK(check_disjoint(ctx, name, "out", &job.out, "input", &job.input));
    CHECK(check_disjoint(ctx, name, "out", &job.out, "target", &job.target));
    if (reduction == TALLY_REDUCTION_NONE && n == 0) return TALLY_OK;
    job.plan = tally__plan_vector(n);
    job.row_plan = tally__plan_vector(job.input.cols);
    return tally__run_kl_div(ctx, &job);
}

/* The Dirichlet-multinomial's arguments, forward and backward alike: the
 * reduction and flags, counts [B, V] and log_alpha [1, V] or [B, V] of
 * `dtype`, and whether alpha is per row (a 1 x V alpha with B == 1 is the
 * shared case, whose one-row trees give the per-row bits anyway). */
static tally_status check_dm_inputs(tally_context *ctx, const char *name, tally_view counts, tally_view log_alpha,
                                    tally_reduction reduction, unsigned flags, tally_dtype dtype,
                                    tally__array *counts_out, tally__array *log_alpha_out, int *per_row_alpha)
{
    if (reduction != TALLY_REDUCTION_NONE && reduction != TALLY_REDUCTION_SUM && reduction != TALLY_REDUCTION_MEAN)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: reduction %d is not none, sum or mean", name,
                            (int)reduction);
    if (flags & ~TALLY_DM_WITH_COEFFICIENT)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: unknown flags 0x%x", name, flags);
    CHECK(check_view(ctx, name, "counts", counts, dtype, counts_out));
    CHECK(check_view(ctx, name, "log_alpha", log_alpha, dtype, log_alpha_out));
    const uint64_t B = counts_out->rows, V = counts_out->cols;
    if (log_alpha_out->cols != V || (log_alpha_out->rows != 1 && log_alpha_out->rows != B))
        return tally__error(ctx, TALLY_SHAPE_MISMATCH,
                            "%s: log_alpha is %llu x %llu but counts is %llu x %llu (need 1 x %llu or %llu x %llu)",
                            name, (unsigned long long)log_alpha_out->rows, (unsigned long long)log_alpha_out->cols,
                            (unsigned long long)B, (unsigned long long)V, (unsigned long long)V,
                            (unsigned long long)B, (unsigned long long)V);
    *per_row_alpha = log_alpha_out->rows == B && B != 1;
    return TALLY_OK;
}

tally_status tally_dirichlet_multinomial(tally_context *ctx, tally_view counts, tally_view log_alpha,
                                         tally_reduction reduction, unsigned flags, tally_view out)
{
    static const char name[] = "tally_dirichlet_multinomial";
    BEGIN(name);
    tally__dm_job job = {.reduction = reduction,
                         .flags = flags & TALLY_DM_WITH_COEFFICIENT};
    CHECK(check_dm_inputs(ctx, name, counts, log_alpha, reduction, flags, FLOAT_INPUT, &job.counts, &job.log_alpha,
                          &job.per_row_alpha));
    const uint64_t B = job.counts.rows, V = job.counts.cols;
    uint64_t outputs = reduction == TALLY_REDUCTION_NONE ? B : 1;
    CHECK(check_vector(ctx, name, "out", out, TALLY_F32, outputs, &job.out));
    CHECK(check_disjoint(ctx, name, "out", &job.out, "counts", &job.counts));
    CHECK(check_disjoint(ctx, name, "out", &job.out, "log_alpha", &job.log_alpha));
    if (reduction == TALLY_REDUCTION_MEAN && B == 0)
        return tally__error(ctx, TALLY_EMPTY_INPUT, "%s: mean over zero rows is undefined", name);
    if (outputs == 0) return TALLY_OK;
    job.row_plan = tally__plan_vector(V);
    job.rows_plan = tally__plan_vector(B);
    return tally__run_dirichlet_multinomial(ctx, &job);
}

/* Shared checks of the mixture's parameters: mu and log_var [B, K*D],
 * logits [1, K] when K > 1. */
static tally_status check_gmm_params(tally_context *ctx, const char *name, tally_view mu, tally_view log_var,
                                     tally_view logits, int64_t components, uint64_t B, uint64_t D,
                                     tally_dtype dtype, tally__gmm_job *job)
{
    if (components < 1 || components > INT32_MAX)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "%s: components is %lld, must be in [1, 2^31 - 1] (indices are int32)", name,
                            (long long)components);
    uint64_t K = (uint64_t)components, KD;
    if (tally__mul_u64(K, D, &KD) || !tally__count_ok(KD))
        return tally__error(ctx, TALLY_SIZE_OVERFLOW, "%s: components*dim = %llu*%llu is above 2^%d", name,
                            (unsigned long long)K, (unsigned long long)D, TALLY__MAX_COUNT_LOG2);
    CHECK(check_view(ctx, name, "mu", mu, dtype, &job->mu));
    CHECK(check_view(ctx, name, "log_var", log_var, dtype, &job->log_var));
    if (job->mu.rows != B || job->mu.cols != KD || job->log_var.rows != B || job->log_var.cols != KD)
        return tally__error(ctx, TALLY_SHAPE_MISMATCH,
                            "%s: mu is %llu x %llu and log_var %llu x %llu, both must be B x K*D = %llu x %llu",
                            name, (unsigned long long)job->mu.rows, (unsigned long long)job->mu.cols,
                            (unsigned long long)job->log_var.rows, (unsigned long long)job->log_var.cols,
                            (unsigned long long)B, (unsigned long long)KD);
    if (K > 1) {
        CHECK(check_view(ctx, name, "logits", logits, dtype, &job->logits));
        if (job->logits.rows * job->logits.cols != K || (job->logits.rows != 1 && job->logits.cols != 1))
            return tally__error(ctx, TALLY_SHAPE_MISMATCH, "%s: logits is %llu x %llu, must hold K = %llu values",
                                name, (unsigned long long)job->logits.rows, (unsigned long long)job->logits.cols,
                                (unsigned long long)K);
        /* Stored as 1 x K contiguous or K x 1 strided: normalise to a vector. */
        CHECK(check_vector(ctx, name, "logits", logits, dtype, K, &job->logits));
        if (job->logits.stride != 1)
            return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: logits must be contiguous", name);
    }
    job->components = K;
    job->dim = D;
    job->dim_plan = tally__plan_vector(D);
    return TALLY_OK;
}

tally_status tally_gmm_log_prob(tally_context *ctx, tally_view z, tally_view mu, tally_view log_var,
                                tally_view logits, int64_t components, tally_view out)
{
    static const char name[] = "tally_gmm_log_prob";
    BEGIN(name);
    tally__gmm_job job = {.components = 0};
    CHECK(check_view(ctx, name, "z", z, FLOAT_INPUT, &job.z));
    uint64_t B = job.z.rows, D = job.z.cols;
    CHECK(check_gmm_params(ctx, name, mu, log_var, logits, components, B, D, FLOAT_INPUT, &job));
    CHECK(check_vector(ctx, name, "out", out, TALLY_F32, B, &job.log_q));
    CHECK(check_disjoint(ctx, name, "out", &job.log_q, "z", &job.z));
    CHECK(check_disjoint(ctx, name, "out", &job.log_q, "mu", &job.mu));
    CHECK(check_disjoint(ctx, name, "out", &job.log_q, "log_var", &job.log_var));
    if (job.components > 1) CHECK(check_disjoint(ctx, name, "out", &job.log_q, "logits", &job.logits));
    if (B == 0) return TALLY_OK;
    return tally__run_gmm_log_prob(ctx, &job);
}

tally_status tally_gmm_sample(tally_context *ctx, tally_view mu, tally_view log_var, tally_view logits,
                              int64_t components, tally_rng rng, tally_view z, tally_view log_q,
                              tally_view component, uint64_t *consumed)
{
    static const char name[] = "tally_gmm_sample";
    BEGIN(name);
    if (consumed != NULL) *consumed = 0;
    tally__gmm_job job = {.rng = rng};
    CHECK(check_view(ctx, name, "z", z, HALF_OUTPUT, &job.z));
    uint64_t B = job.z.rows, D = job.z.cols;
    CHECK(check_gmm_params(ctx, name, mu, log_var, logits, components, B, D, FLOAT_INPUT, &job));
    CHECK(check_vector(ctx, name, "log_q", log_q, TALLY_F32, B, &job.log_q));
    if (component.buffer != NULL) CHECK(check_vector(ctx, name, "component", component, TALLY_I32, B, &job.component));
    const tally__array *outs[3] = {&job.z, &job.log_q, component.buffer != NULL ? &job.component : NULL};
    const char *out_names[3] = {"z", "log_q", "component"};
    const tally__array *ins[3] = {&job.mu, &job.log_var, job.components > 1 ? &job.logits : NULL};
    const char *in_names[3] = {"mu", "log_var", "logits"};
    for (int o = 0; o < 3; o++) {
        if (outs[o] == NULL) continue;
        for (int i = 0; i < 3; i++)
            if (ins[i] != NULL) CHECK(check_disjoint(ctx, name, out_names[o], outs[o], in_names[i], ins[i]));
        for (int p = o + 1; p < 3; p++)
            if (outs[p] != NULL) CHECK(check_disjoint(ctx, name, out_names[o], outs[o], out_names[p], outs[p]));
    }
    /* Layout of the draws: B4 component uniforms, then B rows of D2 normals. */
    uint64_t B4 = tally__round_up4(B), D2 = D + (D & 1u), normals, need;
    int overflow = (B != 0 && B4 == 0) || D2 < D || tally__mul_u64(B, D2, &normals);
    uint64_t normals4 = overflow ? 0 : tally__round_up4(normals);
    overflow = overflow || (normals != 0 && normals4 == 0) || tally__add_u64(B4, normals4, &need);
    if (!overflow) CHECK(tally__check_count(ctx, name, "the number of draws (rows*dim)", need));
    CHECK(check_rng(ctx, name, rng, overflow ? 0 : need, overflow));
    if (B == 0) return TALLY_OK;
    tally_status st = tally__run_gmm_sample(ctx, &job);
    if (st == TALLY_OK && consumed != NULL) *consumed = need;
    return st;
}

tally_status tally_rng_fill(tally_context *ctx, tally_distribution dist, tally_rng rng, tally_view out,
                            uint64_t *consumed)
{
    static const char name[] = "tally_rng_fill";
    BEGIN(name);
    if (consumed != NULL) *consumed = 0;
    if (dist != TALLY_DIST_RAW && dist != TALLY_DIST_UNIFORM && dist != TALLY_DIST_NORMAL)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: unknown distribution %d", name, (int)dist);
    tally__rng_job job = {.dist = dist, .rng = rng};
    CHECK(check_view(ctx, name, "out", out, dist == TALLY_DIST_RAW ? TALLY_U32 : HALF_OUTPUT, &job.out));
    uint64_t n = job.out.rows * job.out.cols, need = tally__round_up4(n);
    CHECK(check_rng(ctx, name, rng, need, n != 0 && need == 0));
    if (n == 0) return TALLY_OK;
    tally_status st = tally__run_rng_fill(ctx, &job);
    if (st == TALLY_OK && consumed != NULL) *consumed = need;
    return st;
}

tally_status tally_categorical(tally_context *ctx, tally_view weights, unsigned flags, tally_rng rng,
                               tally_view out, uint64_t *consumed)
{
    static const char name[] = "tally_categorical";
    BEGIN(name);
    if (consumed != NULL) *consumed = 0;
    if (flags & ~TALLY_CATEGORICAL_LOGITS)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: unknown flags 0x%x", name, flags);
    tally__categorical_job job = {.is_logits = (flags & TALLY_CATEGORICAL_LOGITS) != 0, .rng = rng};
    CHECK(check_view(ctx, name, "weights", weights, FLOAT_INPUT, &job.weights));
    uint64_t rows = job.weights.rows;
    CHECK(check_vector(ctx, name, "out", out, TALLY_I32, rows, &job.out));
    CHECK(check_disjoint(ctx, name, "out", &job.out, "weights", &job.weights));
    if (rows > 0 && job.weights.cols == 0)
        return tally__error(ctx, TALLY_EMPTY_INPUT, "%s: rows with no categories (cols = 0)", name);
    if (job.weights.cols > (uint64_t)INT32_MAX)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: %llu categories do not fit an int32 index", name,
                            (unsigned long long)job.weights.cols);
    uint64_t need = tally__round_up4(rows);
    CHECK(check_rng(ctx, name, rng, need, rows != 0 && need == 0));
    if (rows == 0) return TALLY_OK;
    tally_status st = tally__run_categorical(ctx, &job);
    if (st == TALLY_OK && consumed != NULL) *consumed = need;
    return st;
}

tally_status tally_read_scalar(tally_context *ctx, tally_view view, float *out)
{
    static const char name[] = "tally_read_scalar";
    BEGIN(name);
    if (out == NULL) return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: out is NULL", name);
    tally__array a;
    CHECK(check_vector(ctx, name, "view", view, TALLY_F32, 1, &a));
    return ctx->ops->buffer_download(a.buffer, (size_t)a.offset * sizeof(float), out, sizeof *out);
}
#include "check_export.inc" /* ops_backward.c reaches the checks above through src/ops_check.h */
