/*
 * kernels/cpu.h - CPU-shaped twins of the hot kernels, for OpenCL devices
 * that are CPUs (PoCL, Intel's CPU runtime).
 *
 * A GPU kernel gives each lane of a tile its own work-item and folds the
 * lane's quads in a loop. An OpenCL compiler for a CPU runs a group's
 * work-items in a loop of its own around that code, and that outer loop is
 * not vectorised: each lane's fold is a serial chain of dependent additions,
 * so PoCL ran the sum at a fifth of the memory bandwidth and the
 * transcendental terms one element at a time. A twin computes what one
 * whole group of its GPU kernel computes, in one work-item, the way the
 * host backend does (docs/host-simd.md): step by step through a tile, the
 * step's terms as one loop over up to 1024 consecutive elements, then each
 * lane's quad folded into its accumulator by a loop over lanes, then the
 * tree as loops over pairs. Those inner loops have independent iterations,
 * so the compiler's vectoriser runs them 8 or 16 lanes at a time; each lane
 * still performs exactly the IEEE operations of the plan in the plan's
 * order, so a twin gives its GPU kernel's bits.
 *
 * Twins take their kernel's argument table, so the op layer does not know
 * they exist: the OpenCL backend launches a twin in place of its kernel on
 * a CPU device (TALLY_K_CPU_TWINS in kernel_list.h; TALLY_OPENCL_KERNELS
 * overrides the choice for tests). Work-item w of a twin takes units w,
 * w + W, ... (W work-items in all), which changes which core computes a
 * tile, never what it computes. The CUDA module has empty bodies (it never
 * launches them).
 */
#ifndef TALLY_KERNELS_CPU_H
#define TALLY_KERNELS_CPU_H

#include "tree.h"
#include "dm_terms.h"

#define TALLY_K_CPU_BODIES (TALLY_TARGET_OPENCL && TALLY_CL_CPU)

/* The elements of one step: up to 256 lanes x 4. */
#define TALLY_K_CPU_STEP (TALLY_K_GROUP_SIZE * 4u)

/* The twin's work-item and work-item count (one group of its launch may
 * hold several work-items). */
#define TALLY_K_CPU_ITEM() (TALLY_GROUP_ID() * (tally_u64)TALLY_K_CPU_LOCAL() + TALLY_LID())
#define TALLY_K_CPU_ITEMS() (TALLY_GROUP_COUNT() * (tally_u64)TALLY_K_CPU_LOCAL())
#if TALLY_TARGET_OPENCL
#  define TALLY_K_CPU_LOCAL() ((tally_u32)get_local_size(0))
#else
#  define TALLY_K_CPU_LOCAL() 1u
#endif

#if TALLY_K_CPU_BODIES

/* The functions whose loops must vectorise inline everything they call:
 * a call left in a loop's body (PoCL's inliner declined tally_k_rng_words
 * and the sincospi core on cost) keeps the loop scalar. */
#define TALLY_K_CPU_FLAT __attribute__((flatten))

/* The transcendental terms' loops run TALLY_CL_CPU_LANES float lanes a
 * vector (the backend passes 16 on a device whose native float vectors
 * have 16, AVX-512, else 8), four vectors interleaved so that their
 * logarithms' and exponentials' latencies overlap. Clang's cost model for
 * AVX-512 prefers 8 lanes, so a 16-lane loop also needs its function to
 * allow 512-bit vectors (min_vector_width, TALLY_K_CPU_WIDE). Sixteen
 * lanes: the KL of 4096x16384 on PoCL 37.5 to 32.9 ms, the KL from logits
 * 117 to 113 ms (bench/RESULTS.md CPU run N). The loops over a fill's
 * Philox blocks and over a Dirichlet-multinomial step's table reads take
 * the same width without interleaving (TALLY_K_CPU_BLOCK_LOOP): PoCL 5.0's
 * cost model (LLVM 16) left both scalar, and a bare vectorize(enable) did
 * not move it (on 2 cores, the normal fill of 2^26 265 to 65 ms, the
 * Dirichlet-multinomial of 4096x1024 9.1 to 4.2 ms; bench/RESULTS.md CPU
 * run Q). Each lane computes its own element, so the width never changes
 * a bit. */
#ifndef TALLY_CL_CPU_LANES
#  define TALLY_CL_CPU_LANES 8
#endif
#if TALLY_CL_CPU_LANES == 16
#  define TALLY_K_CPU_VECTOR_LOOP _Pragma("clang loop vectorize_width(16) interleave_count(4)")
#  define TALLY_K_CPU_BLOCK_LOOP _Pragma("clang loop vectorize_width(16)")
#  define TALLY_K_CPU_WIDE __attribute__((flatten, min_vector_width(512)))
#else
#  define TALLY_K_CPU_VECTOR_LOOP _Pragma("clang loop vectorize_width(8) interleave_count(4)")
#  define TALLY_K_CPU_BLOCK_LOOP _Pragma("clang loop vectorize_width(8)")
#  define TALLY_K_CPU_WIDE TALLY_K_CPU_FLAT
#endif

/* The loops over a tree's lanes (a fold of each lane's quad, a level of
 * pairs), the gathers' copies and the range tests before a step's terms
 * are vectorised whatever the compiler's cost model says: PoCL 5.0 (LLVM
 * 16) judged the fold's stride-4 reads not worth vectorising and ran the
 * sum one lane at a time, 2.7 times the host's time per core, where PoCL
 * 3.1 vectorises them (bench/RESULTS.md CPU run O); it also copied each
 * gathered step one float at a time (the row logsumexp of 4096x16384 on 2
 * cores 53 to 32 ms with the copies vectorised, CPU run Q). */
#define TALLY_K_CPU_LANE_LOOP _Pragma("clang loop vectorize(enable)")

/* How far ahead of a step's elements a gather asks for its source's
 * cache lines: four steps of fp32. A step's copy is a burst of loads that
 * waits on memory, then the step computes while nothing is read, so the
 * hardware prefetcher alone leaves the memory idle half the time; asking
 * for the lines four steps ahead keeps them arriving (a row sum of
 * 4096x16384 on PoCL: 17.3 to 13.0 ms, bench/RESULTS.md CPU run N). A
 * prefetch is a hint: it reads nothing into the program and cannot fault,
 * and it never reaches past the vector. */
#define TALLY_K_CPU_AHEAD_BYTES 16384u
#if defined(__has_builtin)
#  if __has_builtin(__builtin_prefetch)
#    define TALLY_K_CPU_PREFETCH(ptr) __builtin_prefetch(ptr)
#  endif
#endif
#ifndef TALLY_K_CPU_PREFETCH
#  define TALLY_K_CPU_PREFETCH(ptr) ((void)0)
#endif

/* Asks for the lines of elements k0 + A .. k0 + A + m - 1 of a contiguous
 * source (A: TALLY_K_CPU_AHEAD_BYTES of its elements), those below n, one
 * request per 64-byte line. */
TALLY_FN void tally_k_cpu_ask_ahead(const tally_k_src *s, tally_u64 k0, tally_u32 m, tally_u64 n)
{
    const tally_u32 size = s->dtype == TALLY_F32 ? 4u : 2u;
    const tally_u64 first = k0 + TALLY_K_CPU_AHEAD_BYTES / size;
    const tally_u64 end = tally_k_min_u64(first + m, n);
    for (tally_u64 k = first; k < end; k += 64u / size) {
        if (size == 4u) TALLY_K_CPU_PREFETCH(s->p + k);
        else TALLY_K_CPU_PREFETCH(s->h + k);
    }
}

/* e[i] = element k0 + i of s, i < m (widened from halves), of a vector of
 * n elements. */
TALLY_FN void tally_k_cpu_gather(const tally_k_src *s, tally_u64 k0, tally_u32 m, tally_u64 n, float *e)
{
    if (s->mode != TALLY_K_LOAD_STRIDED) {
        tally_k_cpu_ask_ahead(s, k0, m, n);
        if (s->dtype == TALLY_F32) {
            TALLY_K_CPU_LANE_LOOP
            for (tally_u32 i = 0; i < m; i++) e[i] = s->p[k0 + i];
        } else if (s->dtype == TALLY_BF16) {
            TALLY_K_CPU_LANE_LOOP
            for (tally_u32 i = 0; i < m; i++) e[i] = tally_bf16_to_f32(s->h[k0 + i]);
        } else {
            TALLY_K_CPU_LANE_LOOP
            for (tally_u32 i = 0; i < m; i++) e[i] = tally_f16_to_f32(s->h[k0 + i]);
        }
        return;
    }
    /* Row pieces of the view: one division per step. */
    tally_u64 r = k0 / s->cols, c = k0 - r * s->cols;
    for (tally_u32 i = 0; i < m;) {
        const tally_u64 left = s->cols - c;
        const tally_u32 len = left < (tally_u64)(m - i) ? (tally_u32)left : m - i;
        const tally_u64 at = r * s->stride + c;
        for (tally_u32 k = 0; k < len; k++) e[i + k] = tally_k_ld(s->p, s->h, s->dtype, at + k);
        i += len;
        r++;
        c = 0;
    }
}

/* The reduce terms over a step, one loop per term so that each is
 * straight-line code. A step of shifted exponentials whose every argument
 * lies in [-87, 88] (a logsumexp's, x - max <= 0, almost always) takes
 * tally_pm_expf_normal, tally_expf's bits without its clamps and second
 * scaling, in TALLY_K_CPU_VECTOR_LOOP's vectors (as the KL's terms); a NaN
 * or an argument out of range sends the step to tally_expf. */
TALLY_FN TALLY_K_CPU_WIDE void tally_k_cpu_reduce_terms(tally_u32 term, float sh, tally_u32 m, float *e)
{
    if (term == TALLY_K_TERM_SQUARE) {
        for (tally_u32 i = 0; i < m; i++) e[i] = e[i] * e[i];
    } else if (term == TALLY_K_TERM_SHIFTED_EXP || term == TALLY_K_TERM_EXP) {
        int normal = 1;
        TALLY_K_CPU_LANE_LOOP
        for (tally_u32 i = 0; i < m; i++) normal &= tally_pm_expf_normal_ok(e[i] - sh);
        if (normal) {
            TALLY_K_CPU_VECTOR_LOOP
            for (tally_u32 i = 0; i < m; i++) e[i] = tally_pm_expf_normal(e[i] - sh);
        } else {
            for (tally_u32 i = 0; i < m; i++) e[i] = tally_expf(e[i] - sh);
        }
    }
}

/* The KL terms over a step (x in e, t in f, the terms to e): the short form
 * for a step whose every pair qualifies, with the common flags as
 * constants, else tally_kl_term per element; the same bits either way
 * (terms.h). */
/* The common forms' loops run in TALLY_K_CPU_VECTOR_LOOP's vectors: four
 * independent vectors hide the logarithms' latency (the KL of 4096x16384
 * on 2 cores: faster in each of four alternations, CPU run K of
 * bench/RESULTS.md). Each lane still performs its own element's
 * operations, so the bits are the same. */
TALLY_FN TALLY_K_CPU_WIDE void tally_k_cpu_kl_terms(tally_u32 flags, tally_u32 m, float *e, const float *f)
{
    int ok = 1;
    TALLY_K_CPU_LANE_LOOP
    for (tally_u32 i = 0; i < m; i++) ok &= tally_kl_fast_ok(e[i], f[i], flags);
    if (ok && flags == TALLY_KL_INPUT_IS_PROB) {
        TALLY_K_CPU_VECTOR_LOOP
        for (tally_u32 i = 0; i < m; i++) e[i] = tally_kl_term_fast(e[i], f[i], TALLY_KL_INPUT_IS_PROB);
    } else if (ok && flags == 0u) {
        TALLY_K_CPU_VECTOR_LOOP
        for (tally_u32 i = 0; i < m; i++) e[i] = tally_kl_term_fast(e[i], f[i], 0u);
    } else if (ok) {
        for (tally_u32 i = 0; i < m; i++) e[i] = tally_kl_term_fast(e[i], f[i], flags);
    } else {
        for (tally_u32 i = 0; i < m; i++) e[i] = tally_kl_term(e[i], f[i], flags);
    }
}

/* The KL terms of a step of the two common forms read where they lie,
 * from contiguous fp32 sources (x and t: the step's first elements): the
 * qualifying test and the short form in one loop, then, if any pair failed
 * the test, tally_kl_term over the step, as tally_k_cpu_kl_terms does. One
 * pass spreads the loads across the logarithms' arithmetic, where a copy
 * and a test pass first read the step in a burst while nothing computes
 * (the KL of 4096x16384 on PoCL: 50 to 37 ms, bench/RESULTS.md CPU run N).
 * A failed step's short terms are discarded, so the bits are the same. */
#define TALLY_K_CPU_KL_FUSED(FLAGS)                                                \
    do {                                                                           \
        TALLY_K_CPU_VECTOR_LOOP                                                   \
        for (tally_u32 i = 0; i < m; i++) {                                        \
            ok &= tally_kl_fast_ok(x[i], t[i], (FLAGS));                           \
            e[i] = tally_kl_term_fast(x[i], t[i], (FLAGS));                        \
        }                                                                          \
    } while (0)

TALLY_FN TALLY_K_CPU_WIDE void tally_k_cpu_kl_direct(tally_u32 flags, tally_u32 m, float *e,
                                                      TALLY_GLOBAL const float *x, TALLY_GLOBAL const float *t)
{
    int ok = 1;
    if (flags == TALLY_KL_INPUT_IS_PROB) TALLY_K_CPU_KL_FUSED(TALLY_KL_INPUT_IS_PROB);
    else if (flags == 0u) TALLY_K_CPU_KL_FUSED(0u);
    else ok = 0;
    if (!ok)
        for (tally_u32 i = 0; i < m; i++) e[i] = tally_kl_term(x[i], t[i], flags);
}

/* The KL terms from logits over one row's run of a step (x in e, y in f,
 * the terms to e), the row's statistics and the flags constants in each
 * copy (the five forms the front end accepts; host_kernels.c's
 * map_kl_logits has the same five). A run whose shifted target logits all
 * lie in [-87, 88] (y - m_y <= 0, almost always) takes their exponentials
 * by tally_pm_expf_normal in TALLY_K_CPU_VECTOR_LOOP's vectors, as the reduce twin's;
 * a NaN or an argument out of range sends the run to tally_expf. */
#define TALLY_K_CPU_KLL_LOOP(X, Y, FLAGS, NORMAL)                                                            \
    for (tally_u32 i = 0; i < len; i++)                                                                       \
    e[i] = tally_kl_logits_term_with((X)[i], (Y)[i], mx, lx, my, ly, ry, (FLAGS), (NORMAL))
#define TALLY_K_CPU_KLL_NORMAL(FLAGS)                                   \
    do {                                                                \
        TALLY_K_CPU_VECTOR_LOOP                                        \
        TALLY_K_CPU_KLL_LOOP(e, f, FLAGS, 1);                           \
    } while (0)
/* Every form with tally_expf: flags constant in each copy. */
#define TALLY_K_CPU_KLL_PLAIN(X, Y)                                         \
    do {                                                                    \
        if (flags == 4u) TALLY_K_CPU_KLL_LOOP(X, Y, 4u, 0);                 \
        else if (flags == 5u) TALLY_K_CPU_KLL_LOOP(X, Y, 5u, 0);            \
        else if (flags == 8u) TALLY_K_CPU_KLL_LOOP(X, Y, 8u, 0);            \
        else if (flags == 10u) TALLY_K_CPU_KLL_LOOP(X, Y, 10u, 0);          \
        else if (flags == 12u) TALLY_K_CPU_KLL_LOOP(X, Y, 12u, 0);          \
        else TALLY_K_CPU_KLL_LOOP(X, Y, flags, 0);                          \
    } while (0)

TALLY_FN TALLY_K_CPU_WIDE void tally_k_cpu_kll_run(tally_u32 flags, float mx, float lx, float my, float ly, float ry,
                                                    tally_u32 len, float *e, const float *f)
{
    int normal = (flags & TALLY_KL_TARGET_LOGITS) != 0u;
    if (normal) {
        TALLY_K_CPU_LANE_LOOP
        for (tally_u32 i = 0; i < len; i++) normal &= tally_pm_expf_normal_ok(f[i] - my);
    }
    if (normal && flags == 12u) TALLY_K_CPU_KLL_NORMAL(12u);
    else if (normal && flags == 8u) TALLY_K_CPU_KLL_NORMAL(8u);
    else if (normal && flags == 10u) TALLY_K_CPU_KLL_NORMAL(10u);
    else TALLY_K_CPU_KLL_PLAIN(e, f);
}

/* The same terms read where they lie, from contiguous fp32 sources (x, y:
 * the run's first elements), as tally_k_cpu_kl_direct does for the KL: a
 * form with target logits tests and computes in one loop, and a run that
 * fails the test is computed again with tally_expf. */
#define TALLY_K_CPU_KLL_FUSED(FLAGS)                                                                  \
    do {                                                                                              \
        TALLY_K_CPU_VECTOR_LOOP                                                                      \
        for (tally_u32 i = 0; i < len; i++) {                                                         \
            normal &= tally_pm_expf_normal_ok(y[i] - my);                                             \
            e[i] = tally_kl_logits_term_with(x[i], y[i], mx, lx, my, ly, ry, (FLAGS), 1);             \
        }                                                                                             \
    } while (0)

TALLY_FN TALLY_K_CPU_WIDE void tally_k_cpu_kll_run_direct(tally_u32 flags, float mx, float lx, float my, float ly,
                                                           float ry, tally_u32 len, float *e,
                                                           TALLY_GLOBAL const float *x, TALLY_GLOBAL const float *y)
{
    int normal = 1;
    if (flags == 12u) TALLY_K_CPU_KLL_FUSED(12u);
    else if (flags == 8u) TALLY_K_CPU_KLL_FUSED(8u);
    else if (flags == 10u) TALLY_K_CPU_KLL_FUSED(10u);
    else normal = 0;
    if (!normal) TALLY_K_CPU_KLL_PLAIN(x, y);
}

/* The step's elements k0 .. k0 + m - 1 of the row-major walk of rows of
 * `cols` elements, row by row with each row's statistics (st: the planes
 * of kernels/kl_logits.h, `rows` floats each): from the gathered steps e
 * and f, or, where gx is not 0, read where they lie from gx and gy (the
 * step's first elements; f unused). */
TALLY_FN void tally_k_cpu_kll_terms(TALLY_GLOBAL const float *st, tally_u64 rows, tally_u64 cols, tally_u32 flags,
                                    tally_u64 k0, tally_u32 m, float *e, const float *f, TALLY_GLOBAL const float *gx,
                                    TALLY_GLOBAL const float *gy)
{
    tally_u64 r = k0 / cols, c = k0 - r * cols;
    for (tally_u32 i = 0; i < m; r++, c = 0) {
        const tally_u64 left = cols - c;
        const tally_u32 len = left < (tally_u64)(m - i) ? (tally_u32)left : m - i;
        const float mx = st[TALLY_K_KLL_MX * rows + r], lx = st[TALLY_K_KLL_LX * rows + r];
        const float my = st[TALLY_K_KLL_MY * rows + r], ly = st[TALLY_K_KLL_LY * rows + r];
        const float ry = st[TALLY_K_KLL_RY * rows + r];
        if (gx != 0) tally_k_cpu_kll_run_direct(flags, mx, lx, my, ly, ry, len, e + i, gx + i, gy + i);
        else tally_k_cpu_kll_run(flags, mx, lx, my, ly, ry, len, e + i, f + i);
        i += len;
    }
}

/* Lane j < quads folds elements t[4j] .. t[4j + 3] into acc[j] in order;
 * `first` starts each lane from its quad's first element. One copy per
 * combine (OP), so each loop is straight-line code over lanes. */
#define TALLY_K_CPU_FOLD(OP, acc, t, quads, first)                                   \
    do {                                                                           \
        if (first) {                                                               \
            TALLY_K_CPU_LANE_LOOP                                                  \
            for (tally_u32 j_ = 0; j_ < (quads); j_++) {                           \
                float a_ = (t)[4u * j_];                                           \
                a_ = OP(a_, (t)[4u * j_ + 1u]);                                    \
                a_ = OP(a_, (t)[4u * j_ + 2u]);                                    \
                (acc)[j_] = OP(a_, (t)[4u * j_ + 3u]);                             \
            }                                                                      \
        } else {                                                                   \
            TALLY_K_CPU_LANE_LOOP                                                  \
            for (tally_u32 j_ = 0; j_ < (quads); j_++) {                           \
                float a_ = OP((acc)[j_], (t)[4u * j_]);                            \
                a_ = OP(a_, (t)[4u * j_ + 1u]);                                    \
                a_ = OP(a_, (t)[4u * j_ + 2u]);                                    \
                (acc)[j_] = OP(a_, (t)[4u * j_ + 3u]);                             \
            }                                                                      \
        }                                                                          \
    } while (0)
#define TALLY_K_CPU_SUM(a, b) ((a) + (b))

TALLY_FN void tally_k_cpu_fold(tally_u32 kind, float *acc, const float *t, tally_u32 quads, int first)
{
    if (kind == TALLY_COMBINE_MIN) TALLY_K_CPU_FOLD(tally_min_nan, acc, t, quads, first);
    else if (kind == TALLY_COMBINE_MAX) TALLY_K_CPU_FOLD(tally_max_nan, acc, t, quads, first);
    else TALLY_K_CPU_FOLD(TALLY_K_CPU_SUM, acc, t, quads, first);
}

/* acc[j] = combine(acc[j], acc[j + s]) for j < count. */
TALLY_FN void tally_k_cpu_pairs(tally_u32 kind, float *acc, tally_u32 s, tally_u32 count)
{
    if (kind == TALLY_COMBINE_MIN) {
        TALLY_K_CPU_LANE_LOOP
        for (tally_u32 j = 0; j < count; j++) acc[j] = tally_min_nan(acc[j], acc[j + s]);
    } else if (kind == TALLY_COMBINE_MAX) {
        TALLY_K_CPU_LANE_LOOP
        for (tally_u32 j = 0; j < count; j++) acc[j] = tally_max_nan(acc[j], acc[j + s]);
    } else {
        TALLY_K_CPU_LANE_LOOP
        for (tally_u32 j = 0; j < count; j++) acc[j] = acc[j] + acc[j + s];
    }
}

/* Whether a source's steps can be read where they lie: contiguous fp32. */
TALLY_FN int tally_k_cpu_in_place(const tally_k_src *s)
{
    return s->mode != TALLY_K_LOAD_STRIDED && s->dtype == TALLY_F32;
}

/* How a twin's tile computes its terms. */
#define TALLY_K_CPU_TERM_REDUCE 0u /* tally_k_reduce_term(term, a, sh) */
#define TALLY_K_CPU_TERM_KL 1u     /* tally_kl_term(a, b, flags) */
#define TALLY_K_CPU_TERM_KLL 2u    /* tally_kl_logits_term(a, b, the row's statistics in st, flags) */

/*
 * The value of one tile (first quad `base`, `lanes` lanes of `qpl` quads) of
 * a vector of n elements: docs/reduction-tree.md's lanes, active lanes and
 * tree, with the terms of `form` (REDUCE: `term` and `sh` over a; KL: the
 * terms of a and b under `flags`; KLL: from logits, with the statistics st
 * of rows of `cols` elements). e and f hold one step (caller's, so
 * that they are not reallocated per tile).
 */
TALLY_FN float tally_k_cpu_tile(const tally_k_src *a, const tally_k_src *b, tally_u64 n, tally_u64 base,
                                tally_u32 lanes, tally_u32 qpl, tally_u32 form, tally_u32 term, float sh,
                                tally_u32 flags, tally_u32 kind, TALLY_GLOBAL const float *st, tally_u64 rows,
                                tally_u64 cols, float *acc, float *e, float *f)
{
    const tally_u64 quads = tally_k_quads(n);
    const tally_u32 active = (tally_u32)tally_k_active(quads, base, lanes);
    /* The KL forms that have a one-pass loop read contiguous fp32 sources
     * where they lie (tally_k_cpu_kl_direct); the rest gather each step. */
    const int direct = form != TALLY_K_CPU_TERM_REDUCE && tally_k_cpu_in_place(a) && tally_k_cpu_in_place(b) &&
                       (form == TALLY_K_CPU_TERM_KLL || flags == TALLY_KL_INPUT_IS_PROB || flags == 0u);
    for (tally_u32 q = 0; q < qpl; q++) {
        const tally_u64 q0 = base + (tally_u64)q * lanes;
        if (q0 >= quads) break;
        /* Lanes 0 .. nq - 1 have a quad in this step: elements [k0, k1). */
        const tally_u32 nq = (tally_u32)tally_k_min_u64((tally_u64)lanes, quads - q0);
        const tally_u64 k0 = q0 << 2;
        const tally_u32 m = (tally_u32)(tally_k_min_u64(n, (q0 + nq) << 2) - k0);
        if (direct && form == TALLY_K_CPU_TERM_KL) {
            tally_k_cpu_kl_direct(flags, m, e, a->p + k0, b->p + k0);
        } else if (direct) {
            tally_k_cpu_kll_terms(st, rows, cols, flags, k0, m, e, f, a->p + k0, b->p + k0);
        } else {
            tally_k_cpu_gather(a, k0, m, n, e);
            if (form == TALLY_K_CPU_TERM_KL) {
                tally_k_cpu_gather(b, k0, m, n, f);
                tally_k_cpu_kl_terms(flags, m, e, f);
            } else if (form == TALLY_K_CPU_TERM_KLL) {
                tally_k_cpu_gather(b, k0, m, n, f);
                tally_k_cpu_kll_terms(st, rows, cols, flags, k0, m, e, f, 0, 0);
            } else {
                tally_k_cpu_reduce_terms(term, sh, m, e);
            }
        }
        const tally_u32 full = m >> 2;
        tally_k_cpu_fold(kind, acc, e, full, q == 0u);
        if (full < nq) {
            /* The vector's short last quad (only in the last step). */
            float v = q == 0u ? e[4u * full] : tally_combine((int)kind, acc[full], e[4u * full]);
            for (tally_u32 c = 4u * full + 1u; c < m; c++) v = tally_combine((int)kind, v, e[c]);
            acc[full] = v;
        }
    }
    for (tally_u32 s = lanes >> 1; s > 0u; s >>= 1)
        if (s < active) tally_k_cpu_pairs(kind, acc, s, active - s < s ? active - s : s);
    return acc[0];
}

/* Folds p[0 .. m-1] into two maxima: of the keys (tally_max_key,
 * tally/terms.h) and of the magnitudes' bits (a NaN's are the largest),
 * reductions in any order, which the vectoriser may reorder. */
TALLY_FN void tally_k_cpu_max_keys(TALLY_GLOBAL const float *p, tally_u32 m, tally_u32 *best, tally_u32 *mag)
{
    tally_u32 k = *best, g = *mag;
    TALLY_K_CPU_LANE_LOOP
    for (tally_u32 i = 0; i < m; i++) {
        const tally_u32 b = tally_as_u32(p[i]);
        const tally_u32 key = tally_max_key(b), bm = b & 0x7fffffffu;
        k = key > k ? key : k;
        g = bm > g ? bm : g;
    }
    *best = k;
    *mag = g;
}

/* A tile's MAX tree: where the source lies contiguous (fp32) and no order
 * of comparison can change the maximum (no NaN, not a zero maximum:
 * tally_max_key), the maximum of its elements read step by step with the
 * gathers' read-ahead, which is the tree's bits; else the tree. */
TALLY_FN float tally_k_cpu_tile_max(const tally_k_src *src, tally_u64 n, tally_u64 base, tally_u32 lanes,
                                    tally_u32 qpl, float *acc, float *e)
{
    if (tally_k_cpu_in_place(src)) {
        const tally_u64 k0 = base << 2, k1 = tally_k_min_u64(n, (base + (tally_u64)lanes * qpl) << 2);
        tally_u32 best = 0u, mag = 0u;
        for (tally_u64 k = k0; k < k1; k += TALLY_K_CPU_STEP) {
            const tally_u32 m = (tally_u32)tally_k_min_u64(TALLY_K_CPU_STEP, k1 - k);
            tally_k_cpu_ask_ahead(src, k, m, n);
            tally_k_cpu_max_keys(src->p + k, m, &best, &mag);
        }
        const float v = tally_as_f32(tally_max_unkey(best));
        if (tally_bits_nan(mag) == 0u && v != 0.0f) return v;
    }
    return tally_k_cpu_tile(src, src, n, base, lanes, qpl, TALLY_K_CPU_TERM_REDUCE, TALLY_K_TERM_PLAIN, 0.0f, 0u,
                            TALLY_COMBINE_MAX, 0, 0u, 1u, acc, e, e);
}

/* tally_k_reduce_tiles_run's units, each in one work-item. */
TALLY_FN void tally_k_cpu_reduce_run(TALLY_GLOBAL const float *TALLY_RESTRICT x, tally_u64 x_off, tally_u64 x_cols,
                                     tally_u64 x_stride, tally_u32 mode, tally_u64 nvec, tally_u64 vec_stride,
                                     tally_u64 n, tally_u32 lanes, tally_u32 qpl, tally_u64 tiles, tally_u32 term,
                                     tally_u32 kind, TALLY_GLOBAL const float *TALLY_RESTRICT shift,
                                     tally_u64 shift_off, tally_u32 finish, float divisor,
                                     TALLY_GLOBAL float *TALLY_RESTRICT out, tally_u64 out_off, tally_u64 out_stride,
                                     tally_u32 x_dtype)
{
    float acc[TALLY_K_GROUP_SIZE], e[TALLY_K_CPU_STEP];
    const tally_u64 units = nvec * tiles, tile_quads = (tally_u64)lanes * qpl;
    for (tally_u64 unit = TALLY_K_CPU_ITEM(); unit < units; unit += TALLY_K_CPU_ITEMS()) {
        const tally_u64 b = unit / tiles;
        const tally_u64 base = (unit - b * tiles) * tile_quads;
        const tally_k_src src = tally_k_src_at(x, x_dtype, x_off + b * vec_stride, x_cols, x_stride, mode);
        float r;
        if (term == TALLY_K_TERM_LSE) {
            /* One tile a vector: its maximum, then (a finite one) the sum of
             * the shifted exponentials while the vector is in the cache,
             * finished as the second launch would; a maximum that is not
             * finite is the result, as tally_lse_finish returns it. */
            const float m = tally_k_cpu_tile_max(&src, n, base, lanes, qpl, acc, e);
            float sum = 0.0f;
            if (tally_isfinite(m))
                sum = tally_k_cpu_tile(&src, &src, n, base, lanes, qpl, TALLY_K_CPU_TERM_REDUCE,
                                       TALLY_K_TERM_SHIFTED_EXP, m, 0u, TALLY_COMBINE_SUM, 0, 0u, 1u, acc, e, e);
            if (finish == TALLY_K_FINISH_MAX_SUM) {
                out[out_off + unit * out_stride] = tally_canonical(m);
                out[out_off + (nvec + unit) * out_stride] = tally_canonical(sum);
                continue;
            }
            r = tally_lse_finish(m, sum);
        } else if (kind == TALLY_COMBINE_MAX && term == TALLY_K_TERM_PLAIN) {
            r = tally_k_cpu_tile_max(&src, n, base, lanes, qpl, acc, e);
        } else {
            const float sh = term == TALLY_K_TERM_SHIFTED_EXP ? shift[shift_off + b] : 0.0f;
            r = tally_k_cpu_tile(&src, &src, n, base, lanes, qpl, TALLY_K_CPU_TERM_REDUCE, term, sh, 0u, kind, 0,
                                 0u, 1u, acc, e, e);
        }
        if (finish == TALLY_K_FINISH_DIVIDE) r = tally_divf(r, divisor);
        if (finish == TALLY_K_FINISH_LSE && term != TALLY_K_TERM_LSE) r = tally_lse_finish(shift[shift_off + b], r);
        if (finish == TALLY_K_FINISH_EXP_SCALE) r = tally_expf(shift[shift_off + b]) * r;
        out[out_off + unit * out_stride] = tally_canonical(r);
    }
}

/* tally_k_kl_tiles_run's tiles (st == 0) or tally_k_kl_logits_tiles' (the
 * statistics st of `rows` rows), each in one work-item. */
TALLY_FN void tally_k_cpu_kl_run(TALLY_GLOBAL const float *TALLY_RESTRICT x, tally_u64 x_off, tally_u64 x_stride,
                                 TALLY_GLOBAL const float *TALLY_RESTRICT t, tally_u64 t_off, tally_u64 t_stride,
                                 tally_u64 cols, tally_u32 mode, tally_u64 n, tally_u32 lanes, tally_u32 qpl,
                                 tally_u64 tiles, tally_u32 flags, tally_u32 finish, float divisor,
                                 TALLY_GLOBAL float *TALLY_RESTRICT out, tally_u64 out_off, tally_u32 x_dtype,
                                 tally_u32 t_dtype, TALLY_GLOBAL const float *st, tally_u64 rows)
{
    float acc[TALLY_K_GROUP_SIZE], e[TALLY_K_CPU_STEP], f[TALLY_K_CPU_STEP];
    const tally_k_src xs = tally_k_src_at(x, x_dtype, x_off, cols, x_stride, mode);
    const tally_k_src ts = tally_k_src_at(t, t_dtype, t_off, cols, t_stride, mode);
    const tally_u64 tile_quads = (tally_u64)lanes * qpl;
    for (tally_u64 tile = TALLY_K_CPU_ITEM(); tile < tiles; tile += TALLY_K_CPU_ITEMS()) {
        const float r = tally_k_cpu_tile(&xs, &ts, n, tile * tile_quads, lanes, qpl,
                                         st != 0 ? TALLY_K_CPU_TERM_KLL : TALLY_K_CPU_TERM_KL, 0u, 0.0f, flags,
                                         TALLY_COMBINE_SUM, st, rows, cols, acc, e, f);
        tally_k_store_tile(r, finish, divisor, out + out_off + tile);
    }
}

/* The four output words of Philox block m for a distribution, as
 * kernels/rng.h's tally_k_rng_words gives them, written out without its
 * loops over the words: PoCL vectorises such a short inner loop first, four wide, and the
 * vector instructions it leaves then keep the loop over blocks scalar. */
/* o[0 .. 3] = those words of block `blk` (o a pointer of any address
 * space). */
#define TALLY_K_CPU_RNG_WORDS(o, blk, dist)                                  \
    do {                                                                     \
        if ((dist) == TALLY_DIST_NORMAL) {                                   \
            float f0_, f1_, f2_, f3_;                                        \
            tally_normal_pair((blk).v[0], (blk).v[1], &f0_, &f1_);           \
            tally_normal_pair((blk).v[2], (blk).v[3], &f2_, &f3_);           \
            (o)[0] = tally_as_u32(f0_);                                      \
            (o)[1] = tally_as_u32(f1_);                                      \
            (o)[2] = tally_as_u32(f2_);                                      \
            (o)[3] = tally_as_u32(f3_);                                      \
        } else if ((dist) == TALLY_DIST_UNIFORM) {                           \
            (o)[0] = tally_as_u32(tally_uniform_from_bits((blk).v[0]));      \
            (o)[1] = tally_as_u32(tally_uniform_from_bits((blk).v[1]));      \
            (o)[2] = tally_as_u32(tally_uniform_from_bits((blk).v[2]));      \
            (o)[3] = tally_as_u32(tally_uniform_from_bits((blk).v[3]));      \
        } else {                                                             \
            (o)[0] = (blk).v[0];                                             \
            (o)[1] = (blk).v[1];                                             \
            (o)[2] = (blk).v[2];                                             \
            (o)[3] = (blk).v[3];                                             \
        }                                                                    \
    } while (0)

TALLY_FN TALLY_K_CPU_FLAT void tally_k_cpu_rng_words(tally_u64 seed, tally_u64 subsequence, tally_u64 m, tally_u32 dist,
                                                     TALLY_GLOBAL tally_u32 *TALLY_RESTRICT o)
{
    const tally_philox4 blk = tally_stream_block(seed, subsequence, m);
    TALLY_K_CPU_RNG_WORDS(o, blk, dist);
}

/* Blocks jlo + [j0, j1) of a quad fill (tally_k_rng_fill's layout), one
 * loop per distribution so that each has a constant one, the block index a
 * 32-bit step from the chunk's start. */
#define TALLY_K_CPU_RNG_BLOCKS(DIST)                                                                   \
    TALLY_K_CPU_BLOCK_LOOP                                                                             \
    for (tally_u32 i = 0; i < count; i++)                                                              \
        tally_k_cpu_rng_words(seed, subsequence, m0 + i, (DIST), out + ((q0 + i) << 2));

TALLY_FN TALLY_K_CPU_FLAT void tally_k_cpu_rng_blocks(TALLY_GLOBAL tally_u32 *TALLY_RESTRICT out, tally_u64 q0,
                                                      tally_u64 m0, tally_u32 count, tally_u32 dist, tally_u64 seed,
                                                      tally_u64 subsequence)
{
    if (dist == TALLY_DIST_RAW) {
        TALLY_K_CPU_RNG_BLOCKS(TALLY_DIST_RAW)
    } else if (dist == TALLY_DIST_UNIFORM) {
        TALLY_K_CPU_RNG_BLOCKS(TALLY_DIST_UNIFORM)
    } else {
        TALLY_K_CPU_RNG_BLOCKS(TALLY_DIST_NORMAL)
    }
}

/* Blocks in one call of tally_k_cpu_rng_blocks (its count is 32-bit). */
#define TALLY_K_CPU_RNG_CHUNK 65536u

/* The Dirichlet-multinomial terms of a step of row counts (n in e, the
 * step's first column c0): ea[c] = exp(alpha) and the table rows of
 * tally_k_dm_rows_table (tab[c] = lgamma(a), tab[k V + c] = lgamma(k + a)).
 * First, as straight-line code over the step, every term that is a zero
 * count or a table read without the coefficient; then, only if the step
 * has any other count, tally_k_dm_term for those: the same operations as
 * the GPU kernel's per element, so the same bits. a to ta, terms to ts. */
TALLY_FN TALLY_K_CPU_FLAT void tally_k_cpu_dm_terms(const float *e, tally_u32 m, tally_u32 c0, TALLY_GLOBAL const float *ea,
                                                    TALLY_GLOBAL const float *tab, tally_u32 V32, tally_u32 flags,
                                                    TALLY_LOCAL const float *fact, float *ta, float *ts)
{
    const int coefficient = (flags & TALLY_DM_WITH_COEFFICIENT) != 0u;
    int slow = 0;
    TALLY_K_CPU_BLOCK_LOOP
    for (tally_u32 i = 0; i < m; i++) {
        const float n = e[i];
        const tally_u32 c = c0 + i;
        const int has_lgn = n > 0.0f && n < (float)TALLY_K_DM_TABLE_N && n == tally_floor(n);
        const float lga = tab[c];
        const float lgn = tab[(has_lgn ? (tally_u32)n : 0u) * V32 + c];
        ta[i] = ea[c];
        ts[i] = n == 0.0f ? 0.0f : lgn - lga;
        slow |= !(n == 0.0f || (has_lgn && !coefficient));
    }
    if (!slow) return;
    for (tally_u32 i = 0; i < m; i++) {
        const float n = e[i];
        const tally_u32 c = c0 + i;
        const int has_lgn = n > 0.0f && n < (float)TALLY_K_DM_TABLE_N && n == tally_floor(n);
        if (!(n == 0.0f || (has_lgn && !coefficient))) {
            const float lgn = tab[(has_lgn ? (tally_u32)n : 0u) * V32 + c];
            ts[i] = tally_k_dm_term(n, ta[i], tab[c], lgn, has_lgn, fact, flags);
        }
    }
}

/* Row b's value under tally_k_dm_rows_table's arguments: the row's plan
 * (lanes, qpl) step by step, A, N and S each folded lane by lane in element
 * order (tally_k_cpu_fold), then the three trees (tally_k_cpu_pairs). */
TALLY_FN float tally_k_cpu_dm_row(const tally_k_src *src, tally_u32 V32, tally_u32 lanes, tally_u32 qpl,
                                  TALLY_GLOBAL const float *ea, TALLY_GLOBAL const float *tab, tally_u32 flags,
                                  TALLY_LOCAL const float *fact, float *A, float *N, float *S, float *e, float *ta,
                                  float *ts)
{
    const tally_u32 quads = (tally_u32)tally_k_quads(V32);
    const tally_u32 active = quads < lanes ? quads : lanes;
    for (tally_u32 q = 0; q < qpl; q++) {
        const tally_u32 q0 = q * lanes;
        if (q0 >= quads) break;
        const tally_u32 nq = lanes < quads - q0 ? lanes : quads - q0;
        const tally_u32 k0 = q0 << 2;
        const tally_u32 k1 = (q0 + nq) << 2;
        const tally_u32 m = (k1 < V32 ? k1 : V32) - k0;
        tally_k_cpu_gather(src, k0, m, V32, e);
        tally_k_cpu_dm_terms(e, m, k0, ea, tab, V32, flags, fact, ta, ts);
        const tally_u32 full = m >> 2;
        tally_k_cpu_fold(TALLY_COMBINE_SUM, A, ta, full, q == 0u);
        tally_k_cpu_fold(TALLY_COMBINE_SUM, N, e, full, q == 0u);
        tally_k_cpu_fold(TALLY_COMBINE_SUM, S, ts, full, q == 0u);
        if (full < nq) {
            /* The row's short last quad (only in the last step). */
            float a = q == 0u ? ta[4u * full] : A[full] + ta[4u * full];
            float n = q == 0u ? e[4u * full] : N[full] + e[4u * full];
            float t = q == 0u ? ts[4u * full] : S[full] + ts[4u * full];
            for (tally_u32 c = 4u * full + 1u; c < m; c++) {
                a = a + ta[c];
                n = n + e[c];
                t = t + ts[c];
            }
            A[full] = a;
            N[full] = n;
            S[full] = t;
        }
    }
    if (active == 0u) return tally_dm_row(0.0f, 0.0f, 0.0f, flags);
    for (tally_u32 s = lanes >> 1; s > 0u; s >>= 1) {
        if (s < active) {
            const tally_u32 count = active - s < s ? active - s : s;
            tally_k_cpu_pairs(TALLY_COMBINE_SUM, A, s, count);
            tally_k_cpu_pairs(TALLY_COMBINE_SUM, N, s, count);
            tally_k_cpu_pairs(TALLY_COMBINE_SUM, S, s, count);
        }
    }
    return tally_dm_row(A[0], N[0], S[0], flags);
}

#endif /* TALLY_K_CPU_BODIES */

TALLY_KERNEL void tally_k_cpu_reduce_tiles(TALLY_K_PARAMS(reduce_tiles))
{
#if TALLY_K_CPU_BODIES
    /* As tally_k_reduce_tiles: fp32, x_dtype ignored. */
    tally_k_cpu_reduce_run(x, x_off, x_cols, x_stride, mode, nvec, vec_stride, n, lanes, qpl, tiles, term, kind, shift,
                           shift_off, finish, divisor, out, out_off, out_stride, TALLY_F32);
#endif
}

TALLY_KERNEL void tally_k_cpu_reduce_tiles_half(TALLY_K_PARAMS(reduce_tiles))
{
#if TALLY_K_CPU_BODIES
    tally_k_cpu_reduce_run(x, x_off, x_cols, x_stride, mode, nvec, vec_stride, n, lanes, qpl, tiles, term, kind, shift,
                           shift_off, finish, divisor, out, out_off, out_stride, x_dtype);
#endif
}

TALLY_KERNEL void tally_k_cpu_kl_tiles(TALLY_K_PARAMS(kl_tiles))
{
#if TALLY_K_CPU_BODIES
    /* As tally_k_kl_tiles: fp32, the dtypes ignored. */
    tally_k_cpu_kl_run(x, x_off, x_stride, t, t_off, t_stride, cols, mode, n, lanes, qpl, tiles, flags, finish,
                       divisor, out, out_off, TALLY_F32, TALLY_F32, 0, 0u);
#endif
}

TALLY_KERNEL void tally_k_cpu_kl_tiles_half(TALLY_K_PARAMS(kl_tiles))
{
#if TALLY_K_CPU_BODIES
    tally_k_cpu_kl_run(x, x_off, x_stride, t, t_off, t_stride, cols, mode, n, lanes, qpl, tiles, flags, finish,
                       divisor, out, out_off, x_dtype, t_dtype, 0, 0u);
#endif
}

TALLY_KERNEL void tally_k_cpu_kl_logits_tiles(TALLY_K_PARAMS(kl_logits_tiles))
{
#if TALLY_K_CPU_BODIES
    tally_k_cpu_kl_run(x, x_off, x_stride, t, t_off, t_stride, cols, mode, n, lanes, qpl, tiles, flags, finish,
                       divisor, out, out_off, x_dtype, t_dtype, st + st_off, rows);
#endif
}

/* tally_k_dm_rows_table's rows, each row in one work-item. */
TALLY_KERNEL void tally_k_cpu_dm_rows_table(TALLY_K_PARAMS(dm_rows_table))
{
#if TALLY_K_CPU_BODIES
    (void)vec4;
    /* A group is one work-item here (TALLY_K_CPU_LOCAL() is 1 for the
     * twins' launches), so the work-item that writes the table reads it
     * with no barrier; with more, each would write the same values. */
    TALLY_LOCAL_ARRAY(float, fact, TALLY_K_DM_FACT_TABLE);
    if (flags & TALLY_DM_WITH_COEFFICIENT)
        for (tally_u32 k = 0; k < TALLY_K_DM_FACT_TABLE; k++) fact[k] = tally_lgammaf((float)k + 1.0f);
    float A[TALLY_K_GROUP_SIZE], N[TALLY_K_GROUP_SIZE], S[TALLY_K_GROUP_SIZE];
    float e[TALLY_K_CPU_STEP], ta[TALLY_K_CPU_STEP], ts[TALLY_K_CPU_STEP];
    /* V <= 16384, as for the kernel: 32-bit columns. */
    const tally_u32 V32 = (tally_u32)V;
    for (tally_u64 b = TALLY_K_CPU_ITEM(); b < B; b += TALLY_K_CPU_ITEMS()) {
        const tally_k_src src = tally_k_src_at(counts, c_dtype, c_off + b * c_stride, V, V, TALLY_K_LOAD_CONTIGUOUS);
        const float r = tally_k_cpu_dm_row(&src, V32, lanes, qpl, pre + ea_off, pre + lga_off, flags, fact, A, N, S,
                                           e, ta, ts);
        out[out_off + b * out_stride] = tally_canonical(r);
    }
#endif
}

/* tally_k_rng_fill's output, each work-item a contiguous run of whole
 * blocks (work-item 0 also the partial edge blocks). */
TALLY_KERNEL void tally_k_cpu_rng_fill(TALLY_K_PARAMS(rng_fill))
{
#if TALLY_K_CPU_BODIES
    (void)stride;
    const tally_k_quad_fill f = tally_k_quad_fill_of(rows, cols, offset, out_off);
    if (f.n == 0u) return;
    const tally_u64 b0 = f.b0, q0 = f.q0, jlo = f.jlo, jend = f.jend;
    const tally_u64 item = TALLY_K_CPU_ITEM(), items = TALLY_K_CPU_ITEMS();
    for (tally_u32 edge = 0; edge < 2u && item == 0u; edge++) {
        /* The partial edge blocks, as tally_k_rng_fill writes them. */
        tally_u64 j;
        if (tally_k_quad_fill_edge(&f, edge, &j)) {
            tally_u32 bits[4];
            const tally_philox4 blk = tally_stream_block(seed, subsequence, b0 + j);
            TALLY_K_CPU_RNG_WORDS(bits, blk, dist);
            tally_k_quad_fill_store_edge(out, out_off, &f, j, offset, bits);
        }
    }
    const tally_u64 nfull = jend > jlo ? jend - jlo : 0u;
    const tally_u64 per = (nfull + items - 1u) / items;
    const tally_u64 j0 = tally_k_min_u64(item * per, nfull), j1 = tally_k_min_u64(j0 + per, nfull);
    for (tally_u64 j = j0; j < j1; j += TALLY_K_CPU_RNG_CHUNK) {
        const tally_u32 count = (tally_u32)tally_k_min_u64(TALLY_K_CPU_RNG_CHUNK, j1 - j);
        tally_k_cpu_rng_blocks(out, q0 + jlo + j, b0 + jlo + j, count, dist, seed, subsequence);
    }
#endif
}

#endif /* TALLY_KERNELS_CPU_H */
