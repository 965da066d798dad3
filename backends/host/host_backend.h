/*
 * backends/host/host_backend.h - the host backend's objects and op entry
 * points (ops in host_ops.c, objects in host.c).
 */
#ifndef TALLY_HOST_BACKEND_H
#define TALLY_HOST_BACKEND_H

#include "backend.h"
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

/* tally__host_<op> for every row of TALLY__JOB_OPS (src/backend.h): the
 * forward ops in host_ops.c, the gradients in host_backward.c. */
TALLY__DECLARE_OPS(tally__host_)
/* host_half.c: BF16/F16 views widened to fp32 (the ops table's `widen`). */
tally_status tally__host_widen(tally_context *ctx, const tally__array *src, tally_buffer *dst);
/* host_half.c: fp32 results narrowed into BF16/F16 views (the ops table's `narrow`). */
tally_status tally__host_narrow(tally_context *ctx, const tally_buffer *src, const tally__array *dst);

/* The Gaussian term of dimension d, tally_gauss_term(z[d], mu[d],
 * log_var[d]), as a tree term (host_tree.h; host_ops.c): the mixture's
 * forward and backward reduce the same terms. */
typedef struct tally__host_gauss_state {
    const float *z, *mu, *log_var;
} tally__host_gauss_state;
float tally__host_term_gauss(const void *state, uint64_t d);
/* s_k of one mixture component: the tree sum over D of tally_gauss_term
 * (the job's dim_plan), through the vector kernels kn where the context
 * has them (NULL: the scalar tree); the same bits either way. Safe inside
 * a parallel loop. */
tally_status tally__host_gmm_component_sum(const tally__host_kernels *kn, const tally__gmm_job *job, const float *z,
                                           const float *mu, const float *lv, float *out);

#endif
