/*
 * backends/host/host_backward.c - the gradient ops on the host, written from
 * the definitions in docs/ops.md ("Gradients") with the shared terms of
 * tally/terms_backward.h and the shared tree (host_tree.c). These are the
 * reference bits that every other backend reproduces.
 */
#include <stdlib.h>

#include "host_backend.h"
#include "host_parallel.h"
#include "host_tree.h"
#include "tally/terms_backward.h"

static float *host_ptr(const tally__array *a)
{
    return a->buffer == NULL ? NULL : (float *)((tally__host_buffer *)a->buffer)->data + a->offset;
}

/* ---- KL divergence ----------------------------------------------------- */

typedef struct kl_bw_task {
    const tally__kl_backward_job *job;
    const float *x, *t, *g;
    float *gx, *gt;
    float g_scalar; /* the scaled upstream gradient of a reduced loss */
} kl_bw_task;

static void kl_bw_rows(void *arg, uint64_t begin, uint64_t end)
{
    const kl_bw_task *s = arg;
    const tally__kl_backward_job *job = s->job;
    const int pointwise = job->reduction == TALLY_REDUCTION_NONE;
    for (uint64_t r = begin; r < end; r++) {
        const float *x = s->x + r * job->input.stride, *t = s->t + r * job->target.stride;
        const float *g = pointwise ? s->g + r * job->grad_out.stride : NULL;
        float *gx = s->gx != NULL ? s->gx + r * job->grad_input.stride : NULL;
        float *gt = s->gt != NULL ? s->gt + r * job->grad_target.stride : NULL;
        for (uint64_t c = 0; c < job->input.cols; c++) {
            const tally_grad2 d = tally_kl_grad(x[c], t[c], pointwise ? g[c] : s->g_scalar, job->flags);
            if (gx != NULL) gx[c] = tally_canonical(d.a);
            if (gt != NULL) gt[c] = tally_canonical(d.b);
        }
    }
}

tally_status tally__host_kl_div_backward(tally_context *ctx, const tally__kl_backward_job *job)
{
    (void)ctx;
    kl_bw_task s = {.job = job, .x = host_ptr(&job->input), .t = host_ptr(&job->target),
                    .g = host_ptr(&job->grad_out), .gx = host_ptr(&job->grad_input),
                    .gt = host_ptr(&job->grad_target), .g_scalar = 0.0f};
    if (job->reduction != TALLY_REDUCTION_NONE) s.g_scalar = tally_grad_scale(s.g[0], (tally_u32)job->divide, job->divisor);
    tally__host_parallel_for(job->input.rows, job->input.cols * 60 + 1, kl_bw_rows, &s);
    return TALLY_OK;
}

/* ---- Dirichlet-multinomial ------------------------------------------- */

typedef struct dm_bw_task {
    const tally__dm_backward_job *job;
    const float *counts, *log_alpha, *grad_out;
    float *grad;
    float shared_A;
    float g_scalar;
    float *row_g; /* B values: g_b */
    float *row_R; /* B values: psi(A_b) - psi(N_b + A_b) */
    int failed;
} dm_bw_task;

typedef struct dm_bw_vec {
    const float *p;  /* the vector's first element */
    uint64_t step;   /* distance between its elements */
    int exp;         /* 1: the term is exp(p[k]) */
} dm_bw_vec;

static float term_vec(const void *st, uint64_t k)
{
    const dm_bw_vec *s = st;
    const float v = s->p[k * s->step];
    return s->exp ? tally_expf(v) : v;
}

/* Per row: g_b and R_b, from the trees of A (per-row alpha) and N over V,
 * the forward's trees. */
static void dm_bw_row_terms(void *arg, uint64_t begin, uint64_t end)
{
    dm_bw_task *t = arg;
    const tally__dm_backward_job *job = t->job;
    for (uint64_t b = begin; b < end; b++) {
        float A = t->shared_A, N;
        if (job->per_row_alpha) {
            dm_bw_vec va = {.p = t->log_alpha + b * job->log_alpha.stride, .step = 1, .exp = 1};
            if (tally__host_tree_reduce(&job->row_plan, TALLY_COMBINE_SUM, term_vec, &va, 0, 0.0f, &A) != TALLY_OK)
                t->failed = 1;
        }
        dm_bw_vec vn = {.p = t->counts + b * job->counts.stride, .step = 1, .exp = 0};
        if (tally__host_tree_reduce(&job->row_plan, TALLY_COMBINE_SUM, term_vec, &vn, 0, 0.0f, &N) != TALLY_OK)
            t->failed = 1;
        t->row_R[b] = tally_dm_grad_row(A, N);
        t->row_g[b] = job->per_row_grad ? t->grad_out[b * job->grad_out.stride] : t->g_scalar;
    }
}

/* Per-row alpha: every element on its own. */
static void dm_bw_elements(void *arg, uint64_t begin, uint64_t end)
{
    dm_bw_task *t = arg;
    const tally__dm_backward_job *job = t->job;
    for (uint64_t b = begin; b < end; b++) {
        const float *n = t->counts + b * job->counts.stride, *la = t->log_alpha + b * job->log_alpha.stride;
        float *o = t->grad + b * job->grad_log_alpha.stride;
        for (uint64_t v = 0; v < job->counts.cols; v++) {
            const float a = tally_expf(la[v]);
            o[v] = tally_canonical(a * tally_dm_grad_weight(t->row_g[b], t->row_R[b], n[v], a));
        }
    }
}

/* Shared alpha: column v is a_v times the tree over b of the weights. */
typedef struct dm_bw_col {
    const dm_bw_task *t;
    uint64_t v;
    float a;
} dm_bw_col;

static float term_col_weight(const void *st, uint64_t b)
{
    const dm_bw_col *c = st;
    const dm_bw_task *t = c->t;
    const float n = t->counts[b * t->job->counts.stride + c->v];
    return tally_dm_grad_weight(t->row_g[b], t->row_R[b], n, c->a);
}

static void dm_bw_columns(void *arg, uint64_t begin, uint64_t end)
{
    dm_bw_task *t = arg;
    for (uint64_t v = begin; v < end; v++) {
        dm_bw_col c = {.t = t, .v = v, .a = tally_expf(t->log_alpha[v])};
        float s;
        if (tally__host_tree_reduce(&t->job->col_plan, TALLY_COMBINE_SUM, term_col_weight, &c, 0, 0.0f, &s) !=
            TALLY_OK)
            t->failed = 1;
        t->grad[v] = tally_canonical(c.a * s);
    }
}

tally_status tally__host_dirichlet_multinomial_backward(tally_context *ctx, const tally__dm_backward_job *job)
{
    const uint64_t B = job->counts.rows, V = job->counts.cols;
    dm_bw_task t = {.job = job, .counts = host_ptr(&job->counts), .log_alpha = host_ptr(&job->log_alpha),
                    .grad_out = host_ptr(&job->grad_out), .grad = host_ptr(&job->grad_log_alpha),
                    .shared_A = 0.0f, .g_scalar = 0.0f, .failed = 0};
    if (!job->per_row_grad) t.g_scalar = tally_grad_scale(t.grad_out[0], (tally_u32)job->divide, job->divisor);
    t.row_g = malloc((B > 0 ? B : 1) * sizeof *t.row_g);
    t.row_R = malloc((B > 0 ? B : 1) * sizeof *t.row_R);
    if (t.row_g == NULL || t.row_R == NULL) {
        free(t.row_g);
        free(t.row_R);
        return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host dirichlet_multinomial_backward: out of memory");
    }
    if (!job->per_row_alpha) {
        dm_bw_vec va = {.p = t.log_alpha, .step = 1, .exp = 1};
        if (tally__host_tree_reduce(&job->row_plan, TALLY_COMBINE_SUM, term_vec, &va, 0, 0.0f, &t.shared_A) !=
            TALLY_OK)
            t.failed = 1;
    }
    tally__host_parallel_for(B, V * 2 + 60, dm_bw_row_terms, &t);
    if (job->per_row_alpha)
        tally__host_parallel_for(B, V * 90 + 1, dm_bw_elements, &t);
    else
        tally__host_parallel_for(V, B * 90 + 1, dm_bw_columns, &t);
    free(t.row_g);
    free(t.row_R);
    if (t.failed) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host dirichlet_multinomial_backward: out of memory");
    return TALLY_OK;
}
