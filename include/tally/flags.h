/*
 * tally/flags.h - the codes that the public API (tally.h), the per-element
 * terms (tally/terms.h), the backends and the kernels all read: element
 * types, the ops' flags and the distributions. Each has one name and one
 * value, so nothing translates one spelling into another on the way from
 * the caller to a kernel. Valid C11, CUDA C++ and OpenCL C 1.2; tally.h
 * includes it, so applications use these names as part of the public API.
 */
#ifndef TALLY_FLAGS_H
#define TALLY_FLAGS_H

/* The element type of a view (tally_view.dtype). The kernels take the
 * values of the floating types as their dtype arguments. */
typedef enum tally_dtype {
    TALLY_F32 = 1,  /* float: every floating input and output */
    TALLY_U32 = 2,  /* raw random draws */
    TALLY_I32 = 3,  /* indices and components */
    TALLY_BF16 = 4, /* bfloat16 (the high 16 bits of a float): floating inputs */
    TALLY_F16 = 5   /* IEEE binary16: floating inputs */
} tally_dtype;

/* Flags for tally_kl_div and tally_kl_div_backward (and the flags argument
 * of tally_kl_term and the KL kernels). */
#define TALLY_KL_LOG_TARGET 1u    /* target holds log-probabilities */
#define TALLY_KL_INPUT_IS_PROB 2u /* input holds p; log p is taken in the same pass */
/* input holds logits: each row's log-softmax replaces it inside the op */
#define TALLY_KL_INPUT_LOGITS 4u
/* target holds logits: each row's softmax is the target, its log-softmax log t */
#define TALLY_KL_TARGET_LOGITS 8u

/* Flags for tally_dirichlet_multinomial (and tally_dm_term, tally_dm_row and
 * the DM kernels). */
#define TALLY_DM_WITH_COEFFICIENT 1u /* add lgamma(N+1) - sum lgamma(n+1) */

/* Distributions of tally_rng_fill (and of the kernels' dist argument). */
typedef enum tally_distribution {
    TALLY_DIST_RAW = 1,     /* uint32 draws; out must be a TALLY_U32 view */
    TALLY_DIST_UNIFORM = 2, /* (0, 1] */
    TALLY_DIST_NORMAL = 3   /* standard normal */
} tally_distribution;

#endif /* TALLY_FLAGS_H */
