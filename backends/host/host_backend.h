/*
 * backends/host/host_backend.h - the host backend's objects and op entry
 * points (ops in host_ops.c, objects in host.c).
 */
#ifndef TALLY_HOST_BACKEND_H
#define TALLY_HOST_BACKEND_H

#include "../../src/internal.h"
#include "host_parallel.h"
#include "host_simd.h"

/* kernels: the vector kernels chosen at creation (host_simd.h), NULL for
 * the scalar reference path; impl names the choice. Both are fixed for the
 * context's lifetime, as is the thread pool (host_parallel.h). */
typedef struct tally__host_context {
    struct tally_context base;
    const tally__host_kernels *kernels;
    const char *impl;
    tally__host_pool *pool; /* worker threads for this context's ops; NULL: threads per op */
} tally__host_context;

/* The context's vector kernels, or NULL for the scalar path. */
static inline const tally__host_kernels *tally__host_kernels_of(const tally_context *ctx)
{
    return ((const tally__host_context *)ctx)->kernels;
}

typedef struct tally__host_buffer {
    struct tally_buffer base;
    void *data;
} tally__host_buffer;

extern const tally__backend_ops tally__host_ops;

tally_status tally__host_reduce(tally_context *ctx, const tally__reduce_job *job);
tally_status tally__host_kl_div(tally_context *ctx, const tally__kl_job *job);
tally_status tally__host_dirichlet_multinomial(tally_context *ctx, const tally__dm_job *job);
tally_status tally__host_gmm_log_prob(tally_context *ctx, const tally__gmm_job *job);
tally_status tally__host_gmm_sample(tally_context *ctx, const tally__gmm_job *job);
tally_status tally__host_rng_fill(tally_context *ctx, const tally__rng_job *job);
tally_status tally__host_categorical(tally_context *ctx, const tally__categorical_job *job);
/* host_half.c: BF16/F16 views widened to fp32 (the ops table's `widen`). */
tally_status tally__host_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst);

/* Gradients (host_backward.c). */
tally_status tally__host_kl_div_backward(tally_context *ctx, const tally__kl_backward_job *job);
tally_status tally__host_dirichlet_multinomial_backward(tally_context *ctx, const tally__dm_backward_job *job);
tally_status tally__host_gmm_backward(tally_context *ctx, const tally__gmm_backward_job *job);

#endif
