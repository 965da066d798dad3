/*
 * backends/host/host_simd.h - the host backend's vector kernels and their
 * run-time dispatch (docs/host-simd.md).
 *
 * host_kernels.c is compiled once per instruction set (baseline, AVX2+FMA,
 * AVX-512) with the same source; each copy exports one const table of
 * kernels. A context picks one table when it is created (the best this CPU
 * runs, or TALLY_HOST_IMPL) and keeps it for its lifetime. The "scalar"
 * implementation has no table: the ops then run the plain reference code
 * of host_ops.c and host_tree.c, which is what every forced path is tested
 * against, bit for bit.
 *
 * The kernels compute the reduction tree's lanes many at a time: within one
 * step of a tile the 256 lanes read 256 consecutive quads, so the terms of
 * that step are computed as one contiguous chunk of up to 1024 elements,
 * then each lane folds its own quad into its accumulator in index order.
 * Every lane performs exactly the IEEE operations of the scalar path, in the
 * same order; vector registers only hold several lanes at once.
 */
#ifndef TALLY_HOST_SIMD_H
#define TALLY_HOST_SIMD_H

#include <stdint.h>

#include "backend.h"

/* The per-element terms the kernels know, one row per term: the name and
 * how many input vectors it reads. */
#define TALLY__HOST_TERMS(X)                                                   \
    X(PLAIN, 1)        /* a[k] */                                              \
    X(SQUARE, 1)       /* a[k]^2 */                                            \
    X(SHIFTED_EXP, 1)  /* tally_expf(a[k] - shift) */                          \
    X(EXP, 1)          /* tally_expf(a[k]) (a Dirichlet concentration) */      \
    X(KL, 2)           /* tally_kl_term(a[k], b[k], flags) */                  \
    X(DM, 2)           /* tally_dm_term(a[k], tally_expf(b[k]), flags) */      \
    X(GAUSS, 3)        /* tally_gauss_term(a[k], b[k], c[k]) */                \
    X(DM_TABLE, 2)     /* DM with a shared alpha through src->table */       \
    X(KL_LOGITS, 2)    /* tally_kl_logits_term(a[k], b[k], its row's src->stats, flags) */

typedef enum tally__host_term {
#define TALLY__HOST_TERM_ENUM(name, inputs) TALLY__HOST_TERM_##name,
    TALLY__HOST_TERMS(TALLY__HOST_TERM_ENUM)
#undef TALLY__HOST_TERM_ENUM
} tally__host_term;

/* A vector of floats laid out as rows of a view: element k is at
 * p[(k / cols) * stride + k % cols]. stride == cols (or a vector shorter
 * than one row) is contiguous. */
typedef struct tally__host_vec {
    const float *p;
    uint64_t cols, stride;
} tally__host_vec;

/* One vector under one term. */
typedef struct tally__host_src {
    tally__host_term term;
    tally__host_vec in[3];
    float shift;    /* SHIFTED_EXP */
    uint32_t flags; /* KL, DM */
    /* DM_TABLE: the dm_table() of the row's log_alpha (b). */
    const float *table;
    /* KL_LOGITS: five floats per row of in[0] (m_x, L_x, m_y, L_y, r_y;
     * host_ops.c's kl_div_logits), element k's row being k / in[0].cols. */
    const float *stats;
} tally__host_src;

/* Whole counts below this are looked up in a DM table. */
#define TALLY__HOST_DM_TABLE_N 64u
/* Floats in the DM table of V concentrations. */
#define TALLY__HOST_DM_TABLE_SIZE(V) ((uint64_t)(V) * (TALLY__HOST_DM_TABLE_N + 1u) + TALLY__HOST_DM_TABLE_N)

typedef struct tally__host_kernels {
    const char *name;
    /* The partial of tile `tile` of `level` (docs/reduction-tree.md) for
     * combine `kind` over the terms of `src`: host_tree.c's reduce_tile. */
    float (*tile)(const tally__tree_level *level, uint64_t tile, int kind, const tally__host_src *src);
    /* out[c] = element (i0 + c) of the stream of `dist`, c < n: the values
     * of tally_stream_raw / _uniform / _normal (raw stored as bits). */
    void (*fill)(tally_distribution dist, uint64_t seed, uint64_t subsequence, uint64_t i0, uint64_t n, float *out);
    /* out[c] = tally_canonical(tally_kl_term(x[c], t[c], flags)), c < n. */
    void (*kl_map)(const float *x, const float *t, uint32_t flags, uint64_t n, float *out);
    /* gx[c] and gt[c] = tally_canonical of tally_kl_grad(x[c], t[c], g,
     * flags)'s two gradients, c < n, with g = g[c], or g_scalar where g is
     * NULL; gx or gt NULL: that gradient is not stored. */
    void (*kl_grad_map)(const float *x, const float *t, const float *g, float g_scalar, uint32_t flags, uint64_t n,
                        float *gx, float *gt);
    /* ga[i] and gb[i] = tally_gmm_grad_elem(z[i], mu[i], lv[i], c)'s two
     * gradients, i < n (not canonicalised: they are summed and adjusted
     * before they are stored). */
    void (*gmm_grad_map)(const float *z, const float *mu, const float *lv, float c, uint64_t n, float *ga, float *gb);
    /* out[c] = the term of element k0 + c of src, c < n (uncanonicalised):
     * what tile() folds, exposed for tests/check_host_dispatch.c. */
    void (*terms)(const tally__host_src *src, uint64_t k0, uint64_t n, float *out);
    /* The DM table of concentrations a_v = tally_expf(la[v]), v < V:
     * lgamma(n + a_v) for whole n < TALLY__HOST_DM_TABLE_N at
     * [v * N + n], then lgamma(a_v) at [V * N + v], then lgamma(n + 1) at
     * [V * (N + 1) + n]; each the same float expression tally_dm_term
     * evaluates, so a DM_TABLE term has tally_dm_term's bits. */
    void (*dm_table)(const float *la, uint64_t V, float *table);
    /* 1 and *out = the maximum of p[0 .. n-1] (n >= 1) where it has the
     * same bits in every order of comparison, as the tree's MAX (no NaN,
     * and not a zero maximum, whose sign would depend on the order); else
     * 0 and the caller runs the tree. */
    int (*max_direct)(const float *p, uint64_t n, float *out);
} tally__host_kernels;

/* The implementations, best last, as an X-macro: name, the table's symbol,
 * and whether this build has it. */
extern const tally__host_kernels tally__host_kernels_base;
#if TALLY_HOST_HAVE_X86_ISAS
extern const tally__host_kernels tally__host_kernels_avx2;
extern const tally__host_kernels tally__host_kernels_avx512;
#endif

/* One implementation of the dispatch chain: its name, its kernels (NULL
 * for scalar) and whether this CPU runs it. */
typedef struct tally__host_impl {
    const char *name;
    const tally__host_kernels *kernels;
    int (*supported)(void);
} tally__host_impl;

/* The chain, best first, scalar last; returns its length. */
size_t tally__host_impls(const tally__host_impl **out);

/* The kernels a new context uses: TALLY_HOST_IMPL if set (scalar, a name
 * from tally__host_impl_names(), or "best"), else the best this CPU runs.
 * NULL means the scalar reference path. Sets *name to the chosen path's
 * name. An unknown or unsupported TALLY_HOST_IMPL is an error
 * (TALLY_INVALID_ARGUMENT, message in *why). */
tally_status tally__host_pick_kernels(const tally__host_kernels **out, const char **name, char *why,
                                      size_t why_size);

#endif
