/*
 * src/internal.h - what only the front end (src/) uses: the half-input
 * and half-output runners, element sizes and the table of compiled-in backends. The
 * backend contract it builds on is src/backend.h.
 */
#ifndef TALLY_INTERNAL_H
#define TALLY_INTERNAL_H

#include "backend.h"

/* ------------------------------------------------------------------------
 * Half inputs (src/half.c): each runs the backend's op, first widening
 * every BF16 or F16 input of the job into an fp32 temporary (so the op's
 * bits are the fp32 op's on the widened values). Jobs without half inputs
 * go straight to the backend.
 * ------------------------------------------------------------------------ */
tally_status tally__run_reduce(tally_context *ctx, const tally__reduce_job *job);
tally_status tally__run_kl_div(tally_context *ctx, const tally__kl_job *job);
tally_status tally__run_dirichlet_multinomial(tally_context *ctx, const tally__dm_job *job);
tally_status tally__run_gmm_log_prob(tally_context *ctx, const tally__gmm_job *job);
tally_status tally__run_gmm_sample(tally_context *ctx, const tally__gmm_job *job);
tally_status tally__run_categorical(tally_context *ctx, const tally__categorical_job *job);
/* Half outputs (src/half.c): kl_div (reduction none), gmm_sample's z and
 * the uniform and normal fills may write a BF16 or F16 view. The op then
 * runs into an fp32 temporary and the backend's `narrow` rounds each value
 * into the view, so the half output is by construction the narrowed fp32
 * output. tally__run_kl_div and tally__run_gmm_sample above do it too. */
tally_status tally__run_rng_fill(tally_context *ctx, const tally__rng_job *job);
/* Bytes per element of a dtype (0 for an unknown value). */
uint64_t tally__dtype_bytes(tally_dtype dtype);

/* The tables of the compiled-in backends (src/backends.c, generated from the
 * build configuration); NULL when a backend is compiled out. */
const tally__backend_ops *tally__backend_table(tally_backend backend);
/* The name of the first required op entry (TALLY__JOB_OPS) that ops leaves
 * NULL, or NULL when every required entry is there. */
const char *tally__backend_missing_op(const tally__backend_ops *ops);

#endif /* TALLY_INTERNAL_H */
