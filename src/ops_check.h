/*
 * src/ops_check.h - ops.c's argument checks, for the other front-end files
 * (src/ops_backward.c). The rules live in ops.c only; src/check_export.inc,
 * included at the end of ops.c, defines these thin entry points to them so
 * that every op checks its views in exactly the same way.
 */
#ifndef TALLY_OPS_CHECK_H
#define TALLY_OPS_CHECK_H

#include "internal.h"

/* Returns the status of a check that failed; the front end's one idiom. */
#define CHECK(expr)                                  \
    do {                                             \
        tally_status check_st_ = (expr);             \
        if (check_st_ != TALLY_OK) return check_st_; \
    } while (0)

/* The start of every op: a call leaves the context's message alone unless it
 * fails (errno-like: tally_last_error keeps the last failure; tally.h). */
#define BEGIN(op_name) \
    if (ctx == NULL) return tally__error(NULL, TALLY_INVALID_ARGUMENT, "%s: ctx is NULL", op_name)

/* A view of `dtype` on ctx, converted to the backend's form. */
tally_status tally__check_view(tally_context *ctx, const char *op, const char *arg, tally_view v, tally_dtype dtype,
                               tally__array *out);
/* An output of n values (1 x n or n x 1), stored as an n x 1 array. */
tally_status tally__check_vector(tally_context *ctx, const char *op, const char *arg, tally_view v,
                                 tally_dtype dtype, uint64_t n, tally__array *out);
/* out shares no element with in. */
tally_status tally__check_disjoint(tally_context *ctx, const char *op, const char *out_name, const tally__array *out,
                                   const char *in_name, const tally__array *in);
/* The mixture's parameters mu, log_var [B, K*D] and logits [1, K] (K > 1)
 * into job, with K, D and the D-plan; dtype is TALLY_F32 for the backward
 * passes, which read fp32 only. */
tally_status tally__check_gmm_params(tally_context *ctx, const char *name, tally_view mu, tally_view log_var,
                                     tally_view logits, int64_t components, uint64_t B, uint64_t D,
                                     tally_dtype dtype, tally__gmm_job *job);
/* The KL divergence's reduction, flags (into *job_flags), input, target and
 * the view the reduction writes or reads (result_name: out or grad_out),
 * forward and backward alike; none_dtype is that view's dtype for
 * reduction none (the reduced value is always one f32). */
tally_status tally__check_kl_args(tally_context *ctx, const char *name, tally_view input, tally_view target,
                                  tally_reduction reduction, unsigned flags, tally_dtype dtype,
                                  tally_dtype none_dtype, const char *result_name, tally_view result,
                                  tally__array *input_out, tally__array *target_out, tally__array *result_out,
                                  uint32_t *job_flags);
/* The Dirichlet-multinomial's reduction, flags, counts and log_alpha of
 * `dtype`, and whether alpha is per row (forward and backward alike). */
tally_status tally__check_dm_inputs(tally_context *ctx, const char *name, tally_view counts, tally_view log_alpha,
                                    tally_reduction reduction, unsigned flags, tally_dtype dtype,
                                    tally__array *counts_out, tally__array *log_alpha_out, int *per_row_alpha);
/* A random op that needs `consumed_count` stream elements from rng. */
tally_status tally__check_rng(tally_context *ctx, const char *op, tally_rng rng, uint64_t consumed_count,
                              int overflowed);

#endif
