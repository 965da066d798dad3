/*
 * backends/host/host_backward.c - the gradient ops on the host, written from
 * the definitions in docs/ops.md ("Gradients") with the shared terms of
 * tally/terms_backward.h and the shared tree (host_tree.c). These are the
 * reference bits that every other backend reproduces.
 */
#include <stdint.h>
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
    const tally__host_kernels *k; /* the vector kernels, NULL: the scalar path */
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
        if (s->k != NULL) {
            s->k->kl_grad_map(x, t, g, s->g_scalar, job->flags, job->input.cols, gx, gt);
            continue;
        }
        for (uint64_t c = 0; c < job->input.cols; c++) {
            const tally_grad2 d = tally_kl_grad(x[c], t[c], pointwise ? g[c] : s->g_scalar, job->flags);
            if (gx != NULL) gx[c] = tally_canonical(d.a);
            if (gt != NULL) gt[c] = tally_canonical(d.b);
        }
    }
}

tally_status tally__host_kl_div_backward(tally_context *ctx, const tally__kl_backward_job *job)
{
    kl_bw_task s = {.k = tally__host_kernels_of(ctx), .job = job, .x = host_ptr(&job->input), .t = host_ptr(&job->target),
                    .g = host_ptr(&job->grad_out), .gx = host_ptr(&job->grad_input),
                    .gt = host_ptr(&job->grad_target), .g_scalar = 0.0f};
    if (job->reduction != TALLY_REDUCTION_NONE) s.g_scalar = tally_grad_scale(s.g[0], (tally_u32)job->divide, job->divisor);
    tally__host_parallel_for(job->input.rows, job->input.cols * 60 + 1, kl_bw_rows, &s);
    return TALLY_OK;
}

/* ---- Dirichlet-multinomial ------------------------------------------- */

typedef struct dm_bw_task {
    const tally__host_kernels *k; /* the vector kernels, NULL: the scalar path */
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

/* The tree sum over V of one row p (its elements, or their exponentials:
 * exp), through the vector kernels k where the context has them. */
static tally_status dm_bw_row_sum(const tally__host_kernels *k, const tally__tree_plan *plan, const float *p, int exp,
                                  float *out)
{
    if (k != NULL && plan->levels > 0) {
        const tally__host_src src = {.term = exp ? TALLY__HOST_TERM_EXP : TALLY__HOST_TERM_PLAIN,
                                     .in = {{.p = p, .cols = plan->level[0].n, .stride = plan->level[0].n}}};
        return tally__host_tree_reduce_k(plan, TALLY_COMBINE_SUM, k, &src, 0, 0.0f, out);
    }
    const dm_bw_vec v = {.p = p, .step = 1, .exp = exp};
    return tally__host_tree_reduce(plan, TALLY_COMBINE_SUM, term_vec, &v, 0, 0.0f, out);
}

/* Per row: g_b and R_b, from the trees of A (per-row alpha) and N over V,
 * the forward's trees. */
static void dm_bw_row_terms(void *arg, uint64_t begin, uint64_t end)
{
    dm_bw_task *t = arg;
    const tally__dm_backward_job *job = t->job;
    for (uint64_t b = begin; b < end; b++) {
        float A = t->shared_A, N;
        if (job->per_row_alpha &&
            dm_bw_row_sum(t->k, &job->row_plan, t->log_alpha + b * job->log_alpha.stride, 1, &A) != TALLY_OK)
            t->failed = 1;
        if (dm_bw_row_sum(t->k, &job->row_plan, t->counts + b * job->counts.stride, 0, &N) != TALLY_OK)
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

/* Shared alpha: column v is a_v times the column tree over b of the
 * weights g_b (R_b + T_bv) (docs/reduction-tree.md, "Columns"). Level 0 is
 * taken a lane at a time for every column at once, as the GPU's
 * tally_k_dm_bw_lanes does: lane j of tile t visits the rows of its quads
 * in order and adds each row's weights to V accumulators, so the counts are
 * read row by row, contiguously. The lane sums then take the tree's steps
 * column-wise, and the tiles' partials the plan's upper levels. The
 * digammas of whole counts below DM_BW_PSI_TABLE are tabulated once a
 * column, psi(k + a) at psi_tab[k V + v] (k + a is the same sum as n + a for
 * n == k, so the same values as the element-wise form); others are
 * computed where they occur. */
#define DM_BW_PSI_TABLE 16u
typedef struct dm_bw_cols {
    const dm_bw_task *t;
    uint64_t V;
    float *a;       /* V values: exp(log_alpha) */
    float *psi_tab; /* DM_BW_PSI_TABLE rows of V: row 0 psi(a), row k psi(k + a) */
    float *lanes;   /* tiles * lanes rows of V lane sums */
} dm_bw_cols;

/* Level 0's lanes [begin, end) of the column plan, unit u = t lanes + j. */
static void dm_bw_lane_sums(void *arg, uint64_t begin, uint64_t end)
{
    const dm_bw_cols *c = arg;
    const dm_bw_task *t = c->t;
    const tally__tree_level *lv = &t->job->col_plan.level[0];
    const uint64_t B = t->job->counts.rows, V = c->V, quads = (B + 3u) / 4u, stride = t->job->counts.stride;
    for (uint64_t u = begin; u < end; u++) {
        const uint64_t tile = u / lv->lanes, j = u % lv->lanes, first = tile * lv->lanes * lv->quads_per_lane;
        float *acc = c->lanes + u * V;
        for (uint64_t v = 0; v < V; v++) acc[v] = -0.0f; /* -0 + x is x: the lane's first term */
        for (uint32_t q = 0; q < lv->quads_per_lane; q++) {
            const uint64_t quad = first + (uint64_t)q * lv->lanes + j;
            if (quad >= quads) break;
            for (uint64_t b = 4u * quad; b < 4u * quad + 4u && b < B; b++) {
                const float *n = t->counts + b * stride, G = t->row_g[b], R = t->row_R[b];
                for (uint64_t v = 0; v < V; v++) {
                    const float x = n[v];
                    float psi_na = 0.0f; /* n == 0 reads no digamma */
                    if (x >= 1.0f && x < (float)DM_BW_PSI_TABLE && x == tally_floor(x))
                        psi_na = c->psi_tab[(uint32_t)x * V + v];
                    else if (x != 0.0f)
                        psi_na = tally_digammaf(x + c->a[v]);
                    acc[v] = acc[v] + G * (R + tally_dm_grad_term_of(x, psi_na, c->psi_tab[v]));
                }
            }
        }
    }
}

/* Columns [begin, end): each tile's lane sums by the tree's steps (lane j
 * takes lane j + s while that one is active), then the tiles' partials by
 * the plan's upper levels (the planner's plan of a vector of `tiles`
 * elements), times a_v. */
static void dm_bw_column_trees(void *arg, uint64_t begin, uint64_t end)
{
    const dm_bw_cols *c = arg;
    const dm_bw_task *t = c->t;
    const tally__tree_level *lv = &t->job->col_plan.level[0];
    const uint64_t V = c->V, quads = (t->job->counts.rows + 3u) / 4u;
    for (uint64_t tile = 0; tile < lv->tiles; tile++) {
        const uint64_t left = quads - tile * lv->lanes * lv->quads_per_lane;
        const uint64_t active = left < lv->lanes ? left : lv->lanes;
        float *lane0 = c->lanes + tile * lv->lanes * V;
        for (uint32_t s = lv->lanes / 2u; s > 0u; s /= 2u) {
            for (uint32_t j = 0; j < s && j + s < active; j++) {
                float *dst = lane0 + (uint64_t)j * V;
                const float *src = lane0 + (uint64_t)(j + s) * V;
                for (uint64_t v = begin; v < end; v++) dst[v] = dst[v] + src[v];
            }
        }
    }
    const tally__tree_plan upper = tally__plan_vector(lv->tiles);
    for (uint64_t v = begin; v < end; v++) {
        float sum = c->lanes[v];
        if (lv->tiles > 1) {
            /* Tile k's partial of column v is its lane 0's sum. */
            const dm_bw_vec ps = {.p = c->lanes + v, .step = lv->lanes * V, .exp = 0};
            if (tally__host_tree_reduce(&upper, TALLY_COMBINE_SUM, term_vec, &ps, 0, 0.0f, &sum) != TALLY_OK)
                ((dm_bw_task *)t)->failed = 1;
        }
        t->grad[v] = tally_canonical(c->a[v] * sum);
    }
}

static void dm_bw_tables(void *arg, uint64_t begin, uint64_t end)
{
    const dm_bw_cols *c = arg;
    for (uint64_t v = begin; v < end; v++) {
        c->a[v] = tally_expf(c->t->log_alpha[v]);
        c->psi_tab[v] = tally_digammaf(c->a[v]);
        for (uint32_t k = 1; k < DM_BW_PSI_TABLE; k++) c->psi_tab[k * c->V + v] = tally_digammaf((float)k + c->a[v]);
    }
}

/* The shared alpha's gradient (B > 0); 0, or -1 when out of memory. */
static int dm_bw_shared(dm_bw_task *t)
{
    const tally__tree_level *lv = &t->job->col_plan.level[0];
    const uint64_t V = t->job->counts.cols, units = lv->tiles * lv->lanes;
    dm_bw_cols c = {.t = t, .V = V};
    c.a = malloc((V > 0 ? V : 1) * sizeof(float));
    c.psi_tab = malloc((V > 0 ? V : 1) * DM_BW_PSI_TABLE * sizeof(float));
    c.lanes = units <= SIZE_MAX / sizeof(float) / (V > 0 ? V : 1) ? malloc((size_t)(units * (V > 0 ? V : 1)) * sizeof(float)) : NULL;
    int rc = 0;
    if (c.a == NULL || c.psi_tab == NULL || c.lanes == NULL) {
        rc = -1;
    } else {
        tally__host_parallel_for(V, DM_BW_PSI_TABLE * 60u, dm_bw_tables, &c);
        tally__host_parallel_for(units, 4u * lv->quads_per_lane * V * 8u + 1u, dm_bw_lane_sums, &c);
        tally__host_parallel_for(V, units + 1u, dm_bw_column_trees, &c);
    }
    free(c.a);
    free(c.psi_tab);
    free(c.lanes);
    return rc;
}

tally_status tally__host_dirichlet_multinomial_backward(tally_context *ctx, const tally__dm_backward_job *job)
{
    const uint64_t B = job->counts.rows, V = job->counts.cols;
    dm_bw_task t = {.k = tally__host_kernels_of(ctx), .job = job, .counts = host_ptr(&job->counts), .log_alpha = host_ptr(&job->log_alpha),
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
    else if (B > 0 && dm_bw_shared(&t) != 0)
        t.failed = 1;
    else if (B == 0) /* the empty sum, 0, times a_v, as the GPU backends take it */
        for (uint64_t v = 0; v < V; v++) t.grad[v] = tally_canonical(tally_expf(t.log_alpha[v]) * 0.0f);
    free(t.row_g);
    free(t.row_R);
    if (t.failed) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host dirichlet_multinomial_backward: out of memory");
    return TALLY_OK;
}

/* ---- Gaussian mixture --------------------------------------------------- */

typedef struct gmm_bw_task {
    const tally__host_kernels *k; /* the vector kernels, NULL: the scalar path */
    const tally__gmm_backward_job *job;
    const float *logits;
    float llse;        /* tally_lse_seq of the logits (K > 1) */
    float *weights;    /* B*K logit weights, or NULL when grad_logits is not wanted */
    int failed;
} gmm_bw_task;

static void gmm_bw_rows(void *arg, uint64_t begin, uint64_t end)
{
    gmm_bw_task *t = arg;
    const tally__gmm_backward_job *job = t->job;
    const tally__gmm_job *f = &job->fwd;
    const uint64_t K = f->components, D = f->dim, B = f->mu.rows;
    const uint64_t B4 = tally__round_up4(B), D2 = D + (D & 1u);
    /* Per component k: s[k] and its weight ck[k] (a row constant, computed
     * once a row); per element (k, d) its two gradients ea[k D + d] and
     * eb[k D + d] (computed once, for d/dz's sum and for the outputs). */
    float *s = malloc(2u * K * sizeof *s);
    float *zs = malloc((D > 0 ? D : 1) * sizeof *zs); /* the sample's z */
    float *ts = malloc((D > 0 ? D : 1) * sizeof *ts); /* the sample's std * eps */
    float *ea = malloc((K * D > 0 ? 2u * K * D : 1) * sizeof *ea);
    if (s == NULL || zs == NULL || ts == NULL || ea == NULL) {
        t->failed = 1;
        free(s), free(zs), free(ts), free(ea);
        return;
    }
    float *ck = s + K, *eb = ea + K * D;
    const float *gq = host_ptr(&job->grad_log_q), *gzi = host_ptr(&job->grad_z_in);
    float *gz = host_ptr(&job->grad_z), *gmu = host_ptr(&job->grad_mu), *glv = host_ptr(&job->grad_log_var);
    for (uint64_t b = begin; b < end; b++) {
        const float *mu = host_ptr(&f->mu) + b * f->mu.stride, *lv = host_ptr(&f->log_var) + b * f->log_var.stride;
        const float *z = NULL;
        int32_t c = -1;
        if (job->sample) {
            /* The forward's draws, bit for bit (host_ops.c's gmm_rows). */
            const tally_rng r = f->rng;
            const float u = tally_stream_uniform(r.seed, r.subsequence, r.offset + b);
            c = K > 1 ? tally_categorical_row(t->logits, K, 1, u) : 0;
            if (c < 0) {
                for (uint64_t i = 0; i < K * D; i++) {
                    if (gmu != NULL) gmu[b * job->grad_mu.stride + i] = TALLY_F32_NAN;
                    if (glv != NULL) glv[b * job->grad_log_var.stride + i] = TALLY_F32_NAN;
                }
                if (t->weights != NULL)
                    for (uint64_t k = 0; k < K; k++) t->weights[b * K + k] = TALLY_F32_NAN;
                continue;
            }
            const float *mc = mu + (uint64_t)c * D, *lc = lv + (uint64_t)c * D;
            const uint64_t i0 = r.offset + B4 + b * D2;
            /* The row's noise: the vector kernels' fill gives the values of
             * tally_stream_normal, whole Philox blocks at a time. */
            if (t->k != NULL) t->k->fill(TALLY_DIST_NORMAL, r.seed, r.subsequence, i0, D, ts);
            for (uint64_t d = 0; d < D; d++) {
                const float eps = t->k != NULL ? ts[d] : tally_stream_normal(r.seed, r.subsequence, i0 + d);
                ts[d] = tally_gauss_std(lc[d]) * eps;
                zs[d] = tally_canonical(mc[d] + ts[d]);
            }
            z = zs;
        } else {
            z = host_ptr(&f->z) + b * f->z.stride;
        }
        /* The forward's D-trees. */
        for (uint64_t k = 0; k < K; k++)
            if (tally__host_gmm_component_sum(t->k, f, z, mu + k * D, lv + k * D, &s[k]) != TALLY_OK) t->failed = 1;
        const float L = tally_gmm_row_lse(s, t->logits, t->llse, K);
        const float g = gq != NULL ? gq[b * job->grad_log_q.stride] : 0.0f;
        if (t->weights != NULL)
            for (uint64_t k = 0; k < K; k++)
                t->weights[b * K + k] = tally_gmm_logit_weight(g, s[k], t->logits[k], t->llse, L);
        for (uint64_t k = 0; k < K; k++) {
            ck[k] = tally_gmm_grad_weight(g, s[k], K > 1 ? t->logits[k] : 0.0f, t->llse, L, K);
            if (t->k != NULL) {
                t->k->gmm_grad_map(z, mu + k * D, lv + k * D, ck[k], D, ea + k * D, eb + k * D);
                continue;
            }
            for (uint64_t d = 0; d < D; d++) {
                const tally_grad2 e = tally_gmm_grad_elem(z[d], mu[k * D + d], lv[k * D + d], ck[k]);
                ea[k * D + d] = e.a;
                eb[k * D + d] = e.b;
            }
        }
        for (uint64_t d = 0; d < D; d++) {
            /* d/dz of the density: minus the k-ordered sum of d/dmu. */
            float acc = 0.0f;
            for (uint64_t k = 0; k < K; k++) acc = k == 0 ? ea[d] : acc + ea[k * D + d];
            const float dz = -acc;
            if (gz != NULL) gz[b * job->grad_z.stride + d] = tally_canonical(dz);
            if (gmu == NULL && glv == NULL) continue;
            /* The sample: the whole gradient of z flows into component c. */
            const float G = gzi != NULL ? gzi[b * job->grad_z_in.stride + d] + dz : dz;
            for (uint64_t k = 0; k < K; k++) {
                tally_grad2 e = {.a = ea[k * D + d], .b = eb[k * D + d]};
                if (job->sample && (uint64_t)c == k) {
                    e.a = e.a + G;
                    e.b = e.b + G * (0.5f * ts[d]);
                }
                if (gmu != NULL) gmu[b * job->grad_mu.stride + k * D + d] = tally_canonical(e.a);
                if (glv != NULL) glv[b * job->grad_log_var.stride + k * D + d] = tally_canonical(e.b);
            }
        }
    }
    free(s), free(zs), free(ts), free(ea);
}

typedef struct gmm_col {
    const float *w;
    uint64_t K, k;
} gmm_col;

static float term_gmm_col(const void *st, uint64_t b)
{
    const gmm_col *c = st;
    return c->w[b * c->K + c->k];
}

tally_status tally__host_gmm_backward(tally_context *ctx, const tally__gmm_backward_job *job)
{
    const tally__gmm_job *f = &job->fwd;
    const uint64_t B = f->mu.rows, K = f->components;
    gmm_bw_task t = {.k = tally__host_kernels_of(ctx), .job = job, .logits = NULL, .llse = 0.0f, .weights = NULL, .failed = 0};
    if (K > 1) {
        t.logits = host_ptr(&f->logits);
        t.llse = tally_lse_seq(t.logits, K);
    }
    if (job->grad_logits.buffer != NULL) {
        uint64_t BK;
        if (tally__mul_u64(B, K, &BK) || (t.weights = malloc(BK * sizeof *t.weights)) == NULL)
            return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host gmm backward: out of memory");
    }
    tally__host_parallel_for(B, K * f->dim * 120 + 1, gmm_bw_rows, &t);
    if (t.weights != NULL) {
        float *out = host_ptr(&job->grad_logits);
        for (uint64_t k = 0; k < K && !t.failed; k++) {
            gmm_col col = {.w = t.weights, .K = K, .k = k};
            float v;
            if (tally__host_tree_reduce(&job->col_plan, TALLY_COMBINE_SUM, term_gmm_col, &col, 1, 0.0f, &v) != TALLY_OK)
                t.failed = 1;
            out[k * job->grad_logits.stride] = tally_canonical(v);
        }
        free(t.weights);
    }
    if (t.failed) return tally__error(ctx, TALLY_OUT_OF_MEMORY, "host gmm backward: out of memory");
    return TALLY_OK;
}
