/*
 * backends/host/host_ops.c - every op on the host, written from the
 * definitions in docs/ops.md with the shared terms (tally/terms.h) and the
 * shared tree (host_tree.c). These results are the reference bits that every
 * other backend must reproduce.
 */
#include <stdlib.h>
#include <string.h>

#include "host_backend.h"
#include "host_parallel.h"
#include "host_tree.h"
#include "tally/terms.h"

/* A view of host memory: element (r, c) at p[r * stride + c]. */
typedef struct harr {
    float *p;
    uint64_t rows, cols, stride;
    int contiguous;
} harr;

static harr harr_of(const tally__array *a)
{
    harr h = {.p = NULL, .rows = a->rows, .cols = a->cols, .stride = a->stride,
              .contiguous = a->stride == a->cols};
    if (a->buffer != NULL) h.p = (float *)((tally__host_buffer *)a->buffer)->data + a->offset;
    return h;
}

/* Element k of the row-major sequence of the view's rows*cols elements. */
static inline float harr_flat(const harr *a, uint64_t k)
{
    if (a->contiguous) return a->p[k];
    return a->p[(k / a->cols) * a->stride + k % a->cols];
}

/* ---- Reductions ------------------------------------------------------ */

typedef struct vec_state {
    const float *row; /* by-row reductions: the row's first element */
    const harr *all;  /* all-element reductions: the whole view */
    float shift;      /* logsumexp's maximum */
} vec_state;

static inline float vec_at(const vec_state *s, uint64_t k)
{
    return s->row != NULL ? s->row[k] : harr_flat(s->all, k);
}

static float term_plain(const void *st, uint64_t k) { return vec_at(st, k); }

static float term_square(const void *st, uint64_t k)
{
    float v = vec_at(st, k);
    return v * v;
}

static float term_shifted_exp(const void *st, uint64_t k)
{
    const vec_state *s = st;
    return tally_expf(vec_at(s, k) - s->shift);
}

/* The reduction tree over s under term `term` (its scalar function) or,
 * with vector kernels, the same term by name. Both give the same bits. */
static tally_status tree(const tally__host_kernels *k, const tally__tree_plan *plan, int kind,
                         tally__host_term_fn term_fn, tally__host_term term, const vec_state *s, int parallel,
                         float empty_value, float *out)
{
    if (k == NULL) return tally__host_tree_reduce(plan, kind, term_fn, s, parallel, empty_value, out);
    tally__host_src src = {.term = term, .shift = s->shift};
    if (s->row != NULL)
        src.in[0] = (tally__host_vec){.p = s->row, .cols = plan->level[0].n, .stride = plan->level[0].n};
    else
        src.in[0] = (tally__host_vec){.p = s->all->p, .cols = s->all->cols, .stride = s->all->stride};
    if (plan->levels == 0) {
        *out = empty_value;
        return TALLY_OK;
    }
    return tally__host_tree_reduce_k(plan, kind, k, &src, parallel, empty_value, out);
}

/* The MAX tree of s, or the same bits without the tree where the
 * kernels' max_direct can give them (a contiguous row). */
static tally_status tree_max(const tally__host_kernels *k, const tally__tree_plan *plan, const vec_state *s,
                             int parallel, float empty_value, float *out)
{
    if (k != NULL && s->row != NULL && plan->levels > 0 && k->max_direct(s->row, plan->level[0].n, out))
        return TALLY_OK;
    return tree(k, plan, TALLY_COMBINE_MAX, term_plain, TALLY__HOST_TERM_PLAIN, s, parallel, empty_value, out);
}

/* One vector (a row, or the whole view) under one op. */
static tally_status reduce_vector(const tally__host_kernels *k, const tally__tree_plan *plan, tally_reduce_op op,
                                  vec_state *s, int parallel, float *out)
{
    tally_status st;
    const tally__host_term plain = TALLY__HOST_TERM_PLAIN;
    switch (op) {
    case TALLY_SUM:
        return tree(k, plan, TALLY_COMBINE_SUM, term_plain, plain, s, parallel, 0.0f, out);
    case TALLY_SUMSQ:
        return tree(k, plan, TALLY_COMBINE_SUM, term_square, TALLY__HOST_TERM_SQUARE, s, parallel, 0.0f, out);
    case TALLY_MIN:
        return tree(k, plan, TALLY_COMBINE_MIN, term_plain, plain, s, parallel, TALLY_F32_NAN, out);
    case TALLY_MAX:
        return tree_max(k, plan, s, parallel, TALLY_F32_NAN, out);
    case TALLY_MEAN: {
        float sum;
        st = tree(k, plan, TALLY_COMBINE_SUM, term_plain, plain, s, parallel, 0.0f, &sum);
        if (st == TALLY_OK) *out = tally_divf(sum, (float)plan->level[0].n);
        return st;
    }
    case TALLY_LOGSUMEXP: {
        float m, sum;
        st = tree_max(k, plan, s, parallel, TALLY_F32_NEG_INF, &m);
        if (st != TALLY_OK || !tally_isfinite(m)) {
            *out = m;
            return st;
        }
        s->shift = m;
        st = tree(k, plan, TALLY_COMBINE_SUM, term_shifted_exp, TALLY__HOST_TERM_SHIFTED_EXP, s, parallel, 0.0f,
                  &sum);
        *out = tally_lse_finish(m, sum);
        return st;
    }
    }
    return TALLY_INVALID_ARGUMENT;
}

typedef struct rows_task {
    const tally__host_kernels *k;
    const tally__reduce_job *job;
    harr x, out;
    tally_status status;
} rows_task;

static void reduce_rows(void *arg, uint64_t begin, uint64_t end)
{
    rows_task *t = arg;
    for (uint64_t r = begin; r < end; r++) {
        vec_state s = {.row = t->x.p + r * t->x.stride, .all = NULL, .shift = 0.0f};
        float v = 0.0f;
        tally_status st = reduce_vector(t->k, &t->job->plan, t->job->op, &s, 0, &v);
        if (st != TALLY_OK) t->status = st;
        t->out.p[r * t->out.stride] = tally_canonical(v);
    }
}

tally_status tally__host_reduce(tally_context *ctx, const tally__reduce_job *job)
{
    harr x = harr_of(&job->x), out = harr_of(&job->out);
    tally_status st;
    if (job->axis == TALLY_AXIS_ALL) {
        vec_state s = {.row = NULL, .all = &x, .shift = 0.0f};
        float v = 0.0f;
        st = reduce_vector(tally__host_kernels_of(ctx), &job->plan, job->op, &s, 1, &v);
        out.p[0] = tally_canonical(v);
    } else {
        rows_task t = {.k = tally__host_kernels_of(ctx), .job = job, .x = x, .out = out, .status = TALLY_OK};
        tally__host_parallel_for(x.rows, x.cols + 1, reduce_rows, &t);
        st = t.status;
    }
    if (st != TALLY_OK) return tally__error(ctx, st, "host reduce: out of memory for partial sums");
    return TALLY_OK;
}

/* ---- KL divergence --------------------------------------------------- */

typedef struct kl_state {
    const tally__host_kernels *k;
    harr input, target, out;
    uint32_t flags;
} kl_state;

static float term_kl(const void *st, uint64_t k)
{
    const kl_state *s = st;
    return tally_kl_term(harr_flat(&s->input, k), harr_flat(&s->target, k), s->flags);
}

static void kl_rows(void *arg, uint64_t begin, uint64_t end)
{
    const kl_state *s = arg;
    for (uint64_t r = begin; r < end; r++) {
        const float *in = s->input.p + r * s->input.stride, *tg = s->target.p + r * s->target.stride;
        float *o = s->out.p + r * s->out.stride;
        if (s->k != NULL) {
            s->k->kl_map(in, tg, s->flags, s->input.cols, o);
            continue;
        }
        for (uint64_t c = 0; c < s->input.cols; c++) o[c] = tally_canonical(tally_kl_term(in[c], tg[c], s->flags));
    }
}

/* ---- KL divergence from logits -----------------------------------------
 * First the softmax statistics of every row of each logits side, by the
 * row trees (rows in parallel); then the terms of tally_kl_logits_term, each
 * with its row's statistics, pointwise or through the reduction's tree. */

typedef struct kl_logits_state {
    const tally__host_kernels *k;
    const tally__kl_job *job;
    harr input, target, out;
    float *stats; /* KL_STATS floats per row: m_x, L_x, m_y, L_y, r_y */
    tally_status status;
} kl_logits_state;

#define KL_STATS 5u

/* m, L and r of one row of logits (docs/ops.md). */
static tally_status softmax_stats(const tally__host_kernels *k, const tally__tree_plan *plan, const float *row,
                                  float *m, float *L, float *r)
{
    vec_state s = {.row = row, .all = NULL, .shift = 0.0f};
    float sum = 0.0f;
    tally_status st = tree_max(k, plan, &s, 0, TALLY_F32_NEG_INF, m);
    if (st == TALLY_OK && tally_isfinite(*m)) {
        s.shift = *m;
        st = tree(k, plan, TALLY_COMBINE_SUM, term_shifted_exp, TALLY__HOST_TERM_SHIFTED_EXP, &s, 0, 0.0f, &sum);
    }
    *L = tally_softmax_log_norm(*m, sum);
    *r = tally_softmax_recip_norm(*m, sum);
    return st;
}

static void kl_logits_stat_rows(void *arg, uint64_t begin, uint64_t end)
{
    kl_logits_state *s = arg;
    const uint32_t flags = s->job->flags;
    for (uint64_t row = begin; row < end; row++) {
        float *st = s->stats + row * KL_STATS, unused;
        for (unsigned i = 0; i < KL_STATS; i++) st[i] = 0.0f;
        tally_status a = TALLY_OK, b = TALLY_OK;
        if (flags & TALLY_KL_INPUT_LOGITS)
            a = softmax_stats(s->k, &s->job->row_plan, s->input.p + row * s->input.stride, &st[0], &st[1], &unused);
        if (flags & TALLY_KL_TARGET_LOGITS)
            b = softmax_stats(s->k, &s->job->row_plan, s->target.p + row * s->target.stride, &st[2], &st[3], &st[4]);
        if (a != TALLY_OK || b != TALLY_OK) s->status = TALLY_OUT_OF_MEMORY;
    }
}

static inline float kl_logits_at(const kl_logits_state *s, uint64_t row, uint64_t col)
{
    const float *st = s->stats + row * KL_STATS;
    return tally_kl_logits_term(s->input.p[row * s->input.stride + col], s->target.p[row * s->target.stride + col],
                                st[0], st[1], st[2], st[3], st[4], s->job->flags);
}

static float term_kl_logits(const void *arg, uint64_t k)
{
    const kl_logits_state *s = arg;
    const uint64_t cols = s->input.cols;
    return kl_logits_at(s, k / cols, k % cols);
}

/* The vector kernels' view of the terms (host_simd.h's KL_LOGITS). */
static tally__host_src kl_logits_src(const kl_logits_state *s)
{
    tally__host_src src = {.term = TALLY__HOST_TERM_KL_LOGITS, .flags = s->job->flags, .stats = s->stats,
                           .in = {{.p = s->input.p, .cols = s->input.cols, .stride = s->input.stride},
                                  {.p = s->target.p, .cols = s->target.cols, .stride = s->target.stride}}};
    return src;
}

static void kl_logits_rows(void *arg, uint64_t begin, uint64_t end)
{
    const kl_logits_state *s = arg;
    const tally__host_src src = kl_logits_src(s);
    for (uint64_t row = begin; row < end; row++) {
        float *o = s->out.p + row * s->out.stride;
        if (s->k != NULL) {
            s->k->terms(&src, row * s->input.cols, s->input.cols, o);
            for (uint64_t c = 0; c < s->input.cols; c++) o[c] = tally_canonical(o[c]);
            continue;
        }
        for (uint64_t c = 0; c < s->input.cols; c++) o[c] = tally_canonical(kl_logits_at(s, row, c));
    }
}

static tally_status kl_div_logits(tally_context *ctx, const tally__kl_job *job)
{
    kl_logits_state s = {.k = tally__host_kernels_of(ctx), .job = job, .input = harr_of(&job->input),
                         .target = harr_of(&job->target), .out = harr_of(&job->out), .status = TALLY_OK};
    const uint64_t rows = s.input.rows, cols = s.input.cols;
    /* rows is bounded by the front end (2^TALLY__MAX_COUNT_LOG2), so the
     * product cannot overflow size_t. */
    s.stats = malloc((rows > 0 ? rows : 1) * KL_STATS * sizeof *s.stats);
    if (s.stats == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host kl_div: out of memory for row statistics");
    tally__host_parallel_for(rows, 2 * cols * 30 + 1, kl_logits_stat_rows, &s);
    tally_status st = s.status;
    float sum = 0.0f;
    if (st == TALLY_OK && job->reduction == TALLY_REDUCTION_NONE)
        tally__host_parallel_for(rows, cols * 40 + 1, kl_logits_rows, &s);
    else if (st == TALLY_OK && s.k != NULL) {
        const tally__host_src src = kl_logits_src(&s);
        st = tally__host_tree_reduce_k(&job->plan, TALLY_COMBINE_SUM, s.k, &src, 1, 0.0f, &sum);
    } else if (st == TALLY_OK)
        st = tally__host_tree_reduce(&job->plan, TALLY_COMBINE_SUM, term_kl_logits, &s, 1, 0.0f, &sum);
    free(s.stats);
    if (st != TALLY_OK) return tally__error(ctx, st, "host kl_div: out of memory for partial sums");
    if (job->reduction == TALLY_REDUCTION_NONE) return TALLY_OK;
    if (job->reduction == TALLY_REDUCTION_MEAN) sum = tally_divf(sum, (float)(rows * cols));
    if (job->reduction == TALLY_REDUCTION_BATCHMEAN) sum = tally_divf(sum, (float)rows);
    s.out.p[0] = tally_canonical(sum);
    return TALLY_OK;
}

tally_status tally__host_kl_div(tally_context *ctx, const tally__kl_job *job)
{
    if (job->flags & (TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS)) return kl_div_logits(ctx, job);
    kl_state s = {.k = tally__host_kernels_of(ctx), .input = harr_of(&job->input), .target = harr_of(&job->target),
                  .out = harr_of(&job->out), .flags = job->flags};
    if (job->reduction == TALLY_REDUCTION_NONE) {
        tally__host_parallel_for(s.input.rows, s.input.cols * 40 + 1, kl_rows, &s);
        return TALLY_OK;
    }
    float sum;
    tally_status st;
    if (s.k != NULL) {
        tally__host_src src = {.term = TALLY__HOST_TERM_KL, .flags = s.flags,
                               .in = {{.p = s.input.p, .cols = s.input.cols, .stride = s.input.stride},
                                      {.p = s.target.p, .cols = s.target.cols, .stride = s.target.stride}}};
        st = tally__host_tree_reduce_k(&job->plan, TALLY_COMBINE_SUM, s.k, &src, 1, 0.0f, &sum);
    } else {
        st = tally__host_tree_reduce(&job->plan, TALLY_COMBINE_SUM, term_kl, &s, 1, 0.0f, &sum);
    }
    if (st != TALLY_OK) return tally__error(ctx, st, "host kl_div: out of memory for partial sums");
    if (job->reduction == TALLY_REDUCTION_MEAN) sum = tally_divf(sum, (float)(s.input.rows * s.input.cols));
    if (job->reduction == TALLY_REDUCTION_BATCHMEAN) sum = tally_divf(sum, (float)s.input.rows);
    s.out.p[0] = tally_canonical(sum);
    return TALLY_OK;
}

/* ---- Dirichlet-multinomial ------------------------------------------- */

/* Widest shared alpha that gets a lookup table (host_simd.h): 2^18
 * columns make a 65 MiB table; wider rows compute every term instead of
 * holding that much memory. */
#define DM_TABLE_MAX_COLS (1u << 18)

typedef struct dm_row_state {
    const float *counts;
    const float *log_alpha;
    uint32_t flags;
} dm_row_state;

static float term_alpha(const void *st, uint64_t v)
{
    return tally_expf(((const dm_row_state *)st)->log_alpha[v]);
}

static float term_count(const void *st, uint64_t v)
{
    return ((const dm_row_state *)st)->counts[v];
}

static float term_dm(const void *st, uint64_t v)
{
    const dm_row_state *s = st;
    return tally_dm_term(s->counts[v], tally_expf(s->log_alpha[v]), s->flags);
}

typedef struct dm_task {
    const tally__host_kernels *k;
    const tally__dm_job *job;
    harr counts, log_alpha;
    float shared_A;
    float *row_values;
    const float *table; /* vector kernels, shared alpha: the DM table (host_simd.h), or NULL */
} dm_task;

/* The tree of one row's term: scalar term function `fn`, or with vector
 * kernels the named term over the row's counts (in[0]) and log_alpha
 * (in[1], or in[0] for EXP). */
static tally_status dm_tree(const tally__host_kernels *k, const tally__tree_plan *plan, tally__host_term_fn fn,
                            tally__host_term term, const dm_row_state *s, const float *table, float *out)
{
    if (k == NULL) return tally__host_tree_reduce(plan, TALLY_COMBINE_SUM, fn, s, 0, 0.0f, out);
    if (plan->levels == 0) {
        *out = 0.0f;
        return TALLY_OK;
    }
    const uint64_t V = plan->level[0].n;
    const tally__host_vec counts = {.p = s->counts, .cols = V, .stride = V};
    const tally__host_vec alpha = {.p = s->log_alpha, .cols = V, .stride = V};
    tally__host_src src = {.term = term == TALLY__HOST_TERM_DM && table != NULL ? TALLY__HOST_TERM_DM_TABLE : term,
                           .flags = s->flags, .table = table};
    src.in[0] = term == TALLY__HOST_TERM_EXP ? alpha : counts;
    src.in[1] = alpha;
    return tally__host_tree_reduce_k(plan, TALLY_COMBINE_SUM, k, &src, 0, 0.0f, out);
}

static void dm_rows(void *arg, uint64_t begin, uint64_t end)
{
    dm_task *t = arg;
    const tally__tree_plan *plan = &t->job->row_plan;
    for (uint64_t b = begin; b < end; b++) {
        dm_row_state s = {.counts = t->counts.p + b * t->counts.stride,
                          .log_alpha = t->log_alpha.p + (t->job->per_row_alpha ? b * t->log_alpha.stride : 0),
                          .flags = t->job->flags};
        float A = t->shared_A, N, S;
        /* V is at most one tile per row in the common case, so the single-
         * tile path never allocates; a failure of a larger row's partials
         * becomes NaN rather than a silent value. */
        if (t->job->per_row_alpha &&
            dm_tree(t->k, plan, term_alpha, TALLY__HOST_TERM_EXP, &s, NULL, &A) != TALLY_OK)
            A = TALLY_F32_NAN;
        if (dm_tree(t->k, plan, term_count, TALLY__HOST_TERM_PLAIN, &s, NULL, &N) != TALLY_OK)
            N = TALLY_F32_NAN;
        if (dm_tree(t->k, plan, term_dm, TALLY__HOST_TERM_DM, &s, t->table, &S) != TALLY_OK)
            S = TALLY_F32_NAN;
        t->row_values[b] = tally_dm_row(A, N, S, t->job->flags);
    }
}

static float term_row_value(const void *st, uint64_t b)
{
    return ((const float *)st)[b];
}

tally_status tally__host_dirichlet_multinomial(tally_context *ctx, const tally__dm_job *job)
{
    dm_task t = {.k = tally__host_kernels_of(ctx), .job = job, .counts = harr_of(&job->counts),
                 .log_alpha = harr_of(&job->log_alpha), .shared_A = 0.0f, .table = NULL};
    harr out = harr_of(&job->out);
    uint64_t B = t.counts.rows;
    t.row_values = calloc(B > 0 ? B : 1, sizeof *t.row_values); /* calloc checks the product */
    if (t.row_values == NULL) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host dirichlet_multinomial: out of memory");
    if (!job->per_row_alpha) {
        /* A shared alpha gives every row the same A; computing it once gives
         * the same bits as computing it per row. */
        dm_row_state s = {.counts = NULL, .log_alpha = t.log_alpha.p, .flags = job->flags};
        if (dm_tree(t.k, &job->row_plan, term_alpha, TALLY__HOST_TERM_EXP, &s, NULL, &t.shared_A) != TALLY_OK) {
            free(t.row_values);
            return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host dirichlet_multinomial: out of memory");
        }
    }
    /* With a shared alpha and enough rows, lgamma(n + a_v) for the common
     * whole counts is computed once per column instead of once per element
     * (the same values, so the same bits; a table is V x 65 lgamma calls,
     * repaid from a few dozen rows on). Without memory for it the rows
     * compute every term. */
    float *table = NULL;
    if (t.k != NULL && !job->per_row_alpha && B >= 32 && t.counts.cols <= DM_TABLE_MAX_COLS) {
        table = malloc(TALLY__HOST_DM_TABLE_SIZE(t.counts.cols) * sizeof *table);
        if (table != NULL) t.k->dm_table(t.log_alpha.p, t.counts.cols, table);
        t.table = table;
    }
    tally__host_parallel_for(B, t.counts.cols * 120 + 1, dm_rows, &t);
    free(table);
    tally_status st = TALLY_OK;
    if (job->reduction == TALLY_REDUCTION_NONE) {
        for (uint64_t b = 0; b < B; b++) out.p[b * out.stride] = tally_canonical(t.row_values[b]);
    } else {
        float sum;
        st = tally__host_tree_reduce(&job->rows_plan, TALLY_COMBINE_SUM, term_row_value, t.row_values, 0, 0.0f,
                                     &sum);
        if (job->reduction == TALLY_REDUCTION_MEAN) sum = tally_divf(sum, (float)B);
        out.p[0] = tally_canonical(sum);
    }
    free(t.row_values);
    if (st != TALLY_OK) return tally__error(ctx, st, "host dirichlet_multinomial: out of memory");
    return TALLY_OK;
}

/* ---- Gaussian mixture ------------------------------------------------- */

float tally__host_term_gauss(const void *state, uint64_t d)
{
    const tally__host_gauss_state *s = state;
    return tally_gauss_term(s->z[d], s->mu[d], s->log_var[d]);
}

tally_status tally__host_gmm_component_sum(const tally__host_kernels *kn, const tally__gmm_job *job, const float *z,
                                           const float *mu, const float *lv, float *out)
{
    const uint64_t D = job->dim;
    if (kn != NULL && job->dim_plan.levels > 0) {
        const tally__host_src src = {.term = TALLY__HOST_TERM_GAUSS,
                                     .in = {{.p = z, .cols = D, .stride = D},
                                            {.p = mu, .cols = D, .stride = D},
                                            {.p = lv, .cols = D, .stride = D}}};
        return tally__host_tree_reduce_k(&job->dim_plan, TALLY_COMBINE_SUM, kn, &src, 0, 0.0f, out);
    }
    const tally__host_gauss_state s = {.z = z, .mu = mu, .log_var = lv};
    return tally__host_tree_reduce(&job->dim_plan, TALLY_COMBINE_SUM, tally__host_term_gauss, &s, 0, 0.0f, out);
}

/* log q of one row: per component the tree sum over D, then (K > 1) the
 * sequential logsumexp of log w_k + s_k. `v` holds K floats of scratch. */
static float gmm_row_log_q(const tally__host_kernels *kn, const tally__gmm_job *job, const float *z, const float *mu,
                           const float *lv, float logits_lse, const float *logits, float *v)
{
    const uint64_t K = job->components, D = job->dim;
    for (uint64_t k = 0; k < K; k++) {
        float sk = 0.0f;
        if (tally__host_gmm_component_sum(kn, job, z, mu + k * D, lv + k * D, &sk) != TALLY_OK) sk = TALLY_F32_NAN;
        v[k] = K > 1 ? (logits[k] - logits_lse) + sk : sk;
    }
    return K > 1 ? tally_lse_seq_private(v, K) : v[0];
}

typedef struct gmm_task {
    const tally__host_kernels *k;
    const tally__gmm_job *job;
    harr z, mu, lv, log_q;
    const float *logits;
    float logits_lse;
    int32_t *component;
    uint64_t component_stride;
    int sample;
    int failed;
} gmm_task;

static void gmm_rows(void *arg, uint64_t begin, uint64_t end)
{
    gmm_task *t = arg;
    const tally__gmm_job *job = t->job;
    const uint64_t K = job->components, D = job->dim;
    float *v = calloc(K, sizeof *v);
    if (v == NULL) {
        t->failed = 1;
        return;
    }
    const uint64_t B4 = tally__round_up4(t->z.rows), D2 = D + (D & 1u);
    for (uint64_t b = begin; b < end; b++) {
        float *z = t->z.p + b * t->z.stride;
        const float *mu = t->mu.p + b * t->mu.stride, *lv = t->lv.p + b * t->lv.stride;
        float log_q;
        if (t->sample) {
            const tally_rng r = job->rng;
            float u = tally_stream_uniform(r.seed, r.subsequence, r.offset + b);
            int32_t c = K > 1 ? tally_categorical_row(t->logits, K, 1, u) : 0;
            if (t->component != NULL) t->component[b * t->component_stride] = c;
            if (c < 0) {
                for (uint64_t d = 0; d < D; d++) z[d] = TALLY_F32_NAN;
                t->log_q.p[b * t->log_q.stride] = TALLY_F32_NAN;
                continue;
            }
            const float *mc = mu + (uint64_t)c * D, *lc = lv + (uint64_t)c * D;
            for (uint64_t d = 0; d < D; d++) {
                float eps = tally_stream_normal(r.seed, r.subsequence, r.offset + B4 + b * D2 + d);
                z[d] = tally_canonical(mc[d] + tally_gauss_std(lc[d]) * eps);
            }
        }
        log_q = gmm_row_log_q(t->k, job, z, mu, lv, t->logits_lse, t->logits, v);
        t->log_q.p[b * t->log_q.stride] = tally_canonical(log_q);
    }
    free(v);
}

static tally_status run_gmm(tally_context *ctx, const tally__gmm_job *job, int sample)
{
    gmm_task t = {.k = tally__host_kernels_of(ctx), .job = job, .z = harr_of(&job->z), .mu = harr_of(&job->mu),
                  .lv = harr_of(&job->log_var), .log_q = harr_of(&job->log_q), .logits = NULL, .logits_lse = 0.0f,
                  .component = NULL, .sample = sample, .failed = 0};
    if (job->components > 1) {
        t.logits = harr_of(&job->logits).p;
        t.logits_lse = tally_lse_seq(t.logits, job->components);
    }
    if (sample && job->component.buffer != NULL) {
        t.component = (int32_t *)((tally__host_buffer *)job->component.buffer)->data + job->component.offset;
        t.component_stride = job->component.stride;
    }
    tally__host_parallel_for(t.z.rows, job->components * job->dim * 40 + 1, gmm_rows, &t);
    if (t.failed) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host gmm: out of memory for scratch");
    return TALLY_OK;
}

tally_status tally__host_gmm_log_prob(tally_context *ctx, const tally__gmm_job *job)
{
    return run_gmm(ctx, job, 0);
}

tally_status tally__host_gmm_sample(tally_context *ctx, const tally__gmm_job *job)
{
    return run_gmm(ctx, job, 1);
}

/* ---- Random fills ------------------------------------------------------ */

typedef struct fill_task {
    const tally__host_kernels *k;
    const tally__rng_job *job;
    harr out;
} fill_task;

/* Elements per work item of a vector fill: the work is split over the
 * flat row-major index, so one long row spreads over every thread too. */
#define FILL_CHUNK 16384u

static void fill_chunks(void *arg, uint64_t begin, uint64_t end)
{
    fill_task *t = arg;
    const tally_rng r = t->job->rng;
    const uint64_t cols = t->out.cols, total = t->out.rows * cols;
    uint64_t k = begin * FILL_CHUNK, stop = end * FILL_CHUNK < total ? end * FILL_CHUNK : total;
    while (k < stop) {
        uint64_t row = k / cols, c = k % cols;
        uint64_t len = cols - c < stop - k ? cols - c : stop - k;
        t->k->fill(t->job->dist, r.seed, r.subsequence, r.offset + k, len, t->out.p + row * t->out.stride + c);
        k += len;
    }
}

static void fill_rows(void *arg, uint64_t begin, uint64_t end)
{
    fill_task *t = arg;
    const tally_rng r = t->job->rng;
    const uint64_t cols = t->out.cols;
    for (uint64_t row = begin; row < end; row++) {
        float *o = t->out.p + row * t->out.stride;
        for (uint64_t c = 0; c < cols; c++) {
            uint64_t i = r.offset + row * cols + c;
            switch (t->job->dist) {
            case TALLY_DIST_RAW: ((uint32_t *)o)[c] = tally_stream_raw(r.seed, r.subsequence, i); break;
            case TALLY_DIST_UNIFORM: o[c] = tally_stream_uniform(r.seed, r.subsequence, i); break;
            case TALLY_DIST_NORMAL: o[c] = tally_stream_normal(r.seed, r.subsequence, i); break;
            }
        }
    }
}

tally_status tally__host_rng_fill(tally_context *ctx, const tally__rng_job *job)
{
    fill_task t = {.k = tally__host_kernels_of(ctx), .job = job, .out = harr_of(&job->out)};
    if (t.k != NULL) {
        uint64_t total = t.out.rows * t.out.cols;
        tally__host_parallel_for(total / FILL_CHUNK + (total % FILL_CHUNK != 0), FILL_CHUNK * 20, fill_chunks, &t);
        return TALLY_OK;
    }
    tally__host_parallel_for(t.out.rows, t.out.cols * 60 + 1, fill_rows, &t);
    return TALLY_OK;
}

typedef struct categorical_task {
    const tally__categorical_job *job;
    harr w;
    int32_t *out;
    uint64_t out_stride;
} categorical_task;

static void categorical_rows(void *arg, uint64_t begin, uint64_t end)
{
    categorical_task *t = arg;
    const tally_rng r = t->job->rng;
    for (uint64_t row = begin; row < end; row++) {
        float u = tally_stream_uniform(r.seed, r.subsequence, r.offset + row);
        t->out[row * t->out_stride] =
            tally_categorical_row(t->w.p + row * t->w.stride, t->w.cols, t->job->is_logits, u);
    }
}

tally_status tally__host_categorical(tally_context *ctx, const tally__categorical_job *job)
{
    (void)ctx;
    categorical_task t = {.job = job, .w = harr_of(&job->weights)};
    t.out = (int32_t *)((tally__host_buffer *)job->out.buffer)->data + job->out.offset;
    t.out_stride = job->out.stride;
    tally__host_parallel_for(t.w.rows, t.w.cols * 30 + 1, categorical_rows, &t);
    return TALLY_OK;
}
