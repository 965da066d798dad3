/*
 * tools/cli_crosscheck.c - `tally crosscheck`: every op, on shapes from tiny
 * to large, on every available backend; each output compared bit for bit
 * with the host backend's and, within a documented tolerance, with the
 * float64 references of harness/reference.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "json.h"
#include "cli_exec.h"
#include "rand.h"
#include "cases.h"
#include "op_names.h"
#include "reference.h"
#include "reference_backward.h"
#include "tally/half.h"

const char cli_crosscheck_usage[] =
    "usage: tally crosscheck [--backends LIST] [--ops LIST] [--quick] [--json]\n"
    "\n"
    "Runs every op - each reduction on both axes, kl_div with every reduction and\n"
    "flag combination (from logits too: --input-logits, --target-logits, both, and\n"
    "each with the other side as probabilities or log-probabilities, on the GPU's\n"
    "fused row widths and others), dirichlet_multinomial with shared and per-row alpha, with\n"
    "and without the coefficient, under each reduction, gmm_log_prob, gmm_sample,\n"
    "rng raw/uniform/normal, categorical on weights and on logits, and the\n"
    "gradients kl_div_backward (every reduction and flag) and\n"
    "dirichlet_multinomial_backward (shared and per-row alpha, each reduction),\n"
    "gmm_log_prob_backward and gmm_sample_backward -\n"
    "on tiny, odd\n"
    "(rows and cols not multiples of 4), strided (stride > cols, non-zero offset),\n"
    "two-level-tree and large shapes (KL over 4096x4096; --quick shrinks the large\n"
    "ones), with deterministic realistic inputs (softmaxed rows, integer counts...).\n"
    "\n"
    "  --backends LIST  comma-separated among host, opencl, cuda. The host backend is\n"
    "                   always run: it is the reference for bits. Default: every\n"
    "                   backend compiled in and available (others are reported as\n"
    "                   skipped); a backend named here that is unavailable is an\n"
    "                   error (exit 1). Every device of each backend is checked\n"
    "                   (shown as backend:index when it has several).\n"
    "  --ops LIST       only these ops (sum, mean, min, max, logsumexp, sumsq, kl_div,\n"
    "                   dirichlet_multinomial, gmm_log_prob, gmm_sample, rng,\n"
    "                   categorical, kl_div_backward,\n"
    "                   dirichlet_multinomial_backward, gmm_log_prob_backward,\n"
    "                   gmm_sample_backward).\n"
    "  --quick          smaller large shapes.\n"
    "  --dtype LIST     types of the floating inputs, comma-separated among f32, bf16,\n"
    "                   f16, or all (default f32). Each case runs once per type on\n"
    "                   inputs rounded to it (f16 counts clipped to 2048); the\n"
    "                   references see the same rounded values.\n"
    "  --out-dtype LIST types of the elementwise outputs (kl_div's with reduction\n"
    "                   none, rng uniform and normal, gmm_sample's z), among f32,\n"
    "                   bf16, f16, or all (the default). On a few shapes of each op\n"
    "                   (fp32 inputs), each half type runs as a case of its own,\n"
    "                   variant 'out=bf16' or 'out=f16', checked as below and by\n"
    "                   its definition: on each backend, every half value must be\n"
    "                   the same backend's fp32 result rounded to nearest even\n"
    "                   (tally/half.h), every other output (log_q, component,\n"
    "                   consumed) the fp32 run's, bit for bit; the fp32 run is\n"
    "                   what err/tol and ulp measure.\n"
    "  --json           results as one JSON object on stdout instead of a table.\n"
    "\n"
    "Checks, for each case and backend (progress: one line on a terminal):\n"
    "  bits     every output equals the host backend's bit for bit (any NaN equals\n"
    "           any NaN: payloads are not part of the contract). Sum, sumsq, min and\n"
    "           max must also equal, on every backend, the tree simulated in float32\n"
    "           by harness/reference.c. Nothing outside an output view may change.\n"
    "  err/tol  the largest |result - float64 reference| / tol over the outputs, where\n"
    "           tol = (tree depth(n) + e) * 2^-24 * mag, mag being the reference's\n"
    "           scale of the float rounding (sum |terms|, see harness/reference.h) and\n"
    "           e the op's own roundings: 0 sum, 1 sumsq, 2 mean, 4 logsumexp,\n"
    "           8 kl_div, 32 dirichlet_multinomial (float lgamma is good to ~3e-6\n"
    "           absolute below 10) plus the depth over rows for its sum and mean,\n"
    "           8 + 2K gmm_log_prob and the sample's log_q (checked against its own\n"
    "           z). min and max must be exact. Draws: raw and uniform exact; normal\n"
    "           within 8 * 2^-24 * its radius sqrt(-2 log u); the sample's z within\n"
    "           16 * 2^-24 * (|mu| + std * radius); categorical indices and\n"
    "           components must fall in their category's interval within\n"
    "           (n + 4) * 2^-22. A result passes when err/tol <= 1.\n"
    "  ulp      the largest distance from the float64 reference in float32 ulps, for\n"
    "           information (large where the result cancels, e.g. a sum near 0).\n"
    "\n"
    "Exit status: 0 when every result passes; 1 on any mismatch, out-of-tolerance\n"
    "result, op failure or unavailable named backend; 2 bad arguments.\n";

#define U TALLY_REF_F32_U

/* ---- Cases ----------------------------------------------------------------- */

typedef struct xc_case {
    const char *op;
    char variant[128];
    char shape[64];
    cli_job job; /* kind, parameters and shape; tensors laid out per case */
    int strided;
    int special; /* reductions: rows with NaN, infinities, zeros, subnormals */
    int zeros;   /* kl: sparse supports; categorical: an invalid row */
    int half_out; /* the shape also runs the op's elementwise output as bf16 and f16 (HARNESS_FAMILY(HALF_OUT)) */
    uint64_t data_seed;
} xc_case;

typedef struct xc_result {
    const char *op;
    char variant[128];
    char shape[64];
    tally_backend backend;
    const char *target; /* xc_target.label */
    int device;
    int ran;
    char error[320];
    uint64_t elements;
    uint64_t bit_mismatches;
    char first_mismatch[160];
    int bits_compared; /* a host result existed to compare with */
    int tree; /* -1 not applicable, 0 differs, 1 equal */
    int wrote_outside;
    double max_ulp;   /* NAN when no float output is compared */
    double max_ratio; /* max err/tol; INFINITY for an exact check that failed */
    uint64_t out_of_tolerance;
    char worst[160];
    char tree_note[160];
    double op_seconds;
    int pass;
} xc_result;

/* One device of one backend (or, when unused, a backend and why). */
typedef struct xc_target {
    tally_backend backend;
    int device; /* index; -1 for a backend skipped as a whole */
    int used;
    char label[32]; /* "opencl", or "opencl:1" when the backend has several devices */
    char name[256];
    char reason[512];
    tally_context *ctx;
} xc_target;

#define XC_MAX_TARGETS 32

typedef struct xc_state {
    int quick, json, count_only, tty;
    unsigned dtypes; /* bit 0 f32, bit 1 bf16, bit 2 f16: the floating inputs' types to run */
    unsigned out_dtypes; /* the same bits for the elementwise outputs (half_out cases) */
    const char *ops_filter;
    int total, index;
    int wanted[4]; /* per tally_backend: 0 no, 1 by default, 2 named in --backends */
    xc_target targets[XC_MAX_TARGETS];
    int n_targets;
    xc_result *results;
    size_t n_results, cap_results;
    int fatal; /* a host allocation failed */
} xc_state;

static const char *reduction_name(tally_reduction r)
{
    switch (r) {
    case TALLY_REDUCTION_NONE: return "none";
    case TALLY_REDUCTION_SUM: return "sum";
    case TALLY_REDUCTION_MEAN: return "mean";
    case TALLY_REDUCTION_BATCHMEAN: return "batchmean";
    }
    return "?";
}

/* ---- Inputs ---------------------------------------------------------------- */

/* Places every tensor of a strided case at a non-zero offset with a row
 * stride that is neither cols nor a multiple of 4; vectors of outputs get a
 * stride of 3. Every output gets spare elements after it, so that writes past
 * its end are seen. */
static void place_tensors(xc_case *c)
{
    cli_job *job = &c->job;
    for (int k = 0; k < job->n_in + job->n_out; k++) {
        int is_in = k < job->n_in;
        cli_tensor *t = is_in ? &job->in[k] : &job->out[k - job->n_in];
        t->pad_after = 5;
        if (!c->strided) continue;
        t->offset = 13 + 2 * k;
        if (t->cols == 1 && t->rows > 1 && !is_in) t->stride = 3;
        else t->stride = t->cols + 13;
    }
}

static float *alloc_floats(uint64_t n)
{
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
}

/* Reductions: N(0.25, 1.5^2); the "specials" case adds a NaN, infinities,
 * signed zeros, subnormals and large finite values to chosen rows. */
static void gen_reduce(const xc_case *c, float *x, harness_rand *r)
{
    const cli_job *job = &c->job;
    harness_fill_normal(x, (uint64_t)(job->rows * job->cols), r, 0.25, 1.5);
    if (!c->special) return;
    int64_t C = job->cols;
    float *row;
    if (job->rows > 1) x[1 * C + C / 2] = NAN;
    if (job->rows > 2) x[2 * C + 3 % C] = INFINITY;
    if (job->rows > 3) {
        row = x + 3 * C;
        row[C - 1] = -INFINITY;
        row[0] = -0.0f;
        row[1 % C] = 0.0f;
    }
    if (job->rows > 4) {
        row = x + 4 * C;
        for (int64_t k = 0; k < C; k += 3) row[k] = (k % 2) ? 1e-40f : -3e-42f;
        /* Large but with squares that stay finite in float. */
        row[C / 2] = 3e18f;
        row[C / 3] = -2e17f;
    }
}

/* Mixture parameters; z (log_prob) near a random component. */
static void gen_gmm(const cli_job *job, float *z, float *mu, float *lv, float *logits, harness_rand *r)
{
    int64_t B = job->batch, K = job->components, D = job->dim;
    harness_fill_normal(mu, (uint64_t)(B * K * D), r, 0.0, 1.5);
    harness_fill_normal(lv, (uint64_t)(B * K * D), r, -0.5, 0.6);
    harness_fill_normal(logits, (uint64_t)K, r, 0.0, 1.0);
    if (z == NULL) return;
    for (int64_t b = 0; b < B; b++) {
        int64_t k = (int64_t)(harness_rand_u64(r) % (uint64_t)K);
        for (int64_t d = 0; d < D; d++) {
            size_t i = (size_t)(b * K * D + k * D + d);
            z[b * D + d] = (float)(mu[i] + exp(0.5 * lv[i]) * harness_rand_normal(r));
        }
    }
}

/* Categorical rows: weights exp(N(0,1)) with ~20% zeros, or logits N(0, 2^2)
 * with ~10% -inf. With `zeros`, row 0 cannot be sampled (all zero / all -inf). */
static void gen_categorical(const xc_case *c, float *w, harness_rand *r)
{
    const cli_job *job = &c->job;
    int logits = (job->flags & TALLY_CATEGORICAL_LOGITS) != 0;
    for (int64_t row = 0; row < job->rows; row++) {
        float *p = w + row * job->cols;
        int any = 0;
        for (int64_t k = 0; k < job->cols; k++) {
            double g = harness_rand_normal(r);
            int off = harness_rand_unit(r) < (logits ? 0.1 : 0.2);
            p[k] = logits ? (off ? -INFINITY : (float)(2.0 * g)) : (off ? 0.0f : (float)exp(g));
            any |= !off;
        }
        if (!any) p[0] = logits ? 0.0f : 1.0f;
        if (c->zeros && row == 0)
            for (int64_t k = 0; k < job->cols; k++) p[k] = logits ? -INFINITY : 0.0f;
    }
}

/* KL from logits: logits N(0, 2^2) (input) and N(0.5, 2^2) (target), +-1e4
 * on the "1e4" rows; with `zeros`, about 10% of the target logits are -inf
 * (masked; never a row's first) and a third of those have q = 0 in the
 * input too (a -inf logit, or p = 0: a zero term). A side without its logits
 * flag gets rows of probabilities (all positive for the input, about 20%
 * zeros for the target), or of log-probabilities for LOG_TARGET. */
static void gen_kl_logits(const xc_case *c, float *x, float *y, harness_rand *r)
{
    const cli_job *job = &c->job;
    const uint64_t n = (uint64_t)(job->rows * job->cols);
    const unsigned flags = job->flags;
    const int in_logits = (flags & TALLY_KL_INPUT_LOGITS) != 0, tg_logits = (flags & TALLY_KL_TARGET_LOGITS) != 0;
    const float shift = strstr(c->shape, "1e4") != NULL ? 1.0e4f : 0.0f;
    if (in_logits) harness_fill_normal(x, n, r, 0.0, 2.0);
    else harness_fill_softmax_rows(x, job->rows, job->cols, r, 1.0, 0.0, !(flags & TALLY_KL_INPUT_IS_PROB), NULL, 0);
    if (tg_logits) harness_fill_normal(y, n, r, 0.5, 2.0);
    else harness_fill_softmax_rows(y, job->rows, job->cols, r, 1.0, (flags & TALLY_KL_LOG_TARGET) ? 0.0 : 0.2,
                                   (flags & TALLY_KL_LOG_TARGET) != 0, NULL, 0);
    for (uint64_t i = 0; i < n; i++) {
        if (in_logits) x[i] += shift;
        if (tg_logits) y[i] -= shift;
        if (!c->zeros || !tg_logits || i % (uint64_t)job->cols == 0 || harness_rand_unit(r) >= 0.1) continue;
        y[i] = -INFINITY;
        if (harness_rand_unit(r) < 1.0 / 3.0) x[i] = in_logits ? -INFINITY : 0.0f; /* q = 0 where t = 0 */
    }
}

/* Allocates and fills the inputs of a case. Returns 0, or -1 when out of memory. */
static int gen_inputs(xc_case *c)
{
    cli_job *job = &c->job;
    harness_rand r = harness_rand_make(c->data_seed);
    for (int k = 0; k < job->n_in; k++) {
        job->in[k].data = alloc_floats(cli_tensor_count(&job->in[k]));
        if (job->in[k].data == NULL) return -1;
    }
    switch (job->kind) {
    case CLI_OP_REDUCE: gen_reduce(c, job->in[0].data, &r); break;
    case CLI_OP_KL:
        if (job->flags & (TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS)) {
            gen_kl_logits(c, job->in[0].data, job->in[1].data, &r);
            break;
        }
        /* fall through */
    case CLI_OP_KL_BACKWARD: {
        int prob = (job->flags & TALLY_KL_INPUT_IS_PROB) != 0, logt = (job->flags & TALLY_KL_LOG_TARGET) != 0;
        unsigned char *mask = NULL;
        /* Shared zeros make 0 * log 0 terms; log targets cannot hold zeros
         * (exp(-inf) * -inf is NaN, as in torch). */
        if (c->zeros && !logt) {
            mask = malloc((size_t)(job->rows * job->cols > 0 ? job->rows * job->cols : 1));
            if (mask == NULL) return -1;
        }
        harness_fill_softmax_rows(job->in[0].data, job->rows, job->cols, &r, 1.0, 0.2, !prob, mask, 1);
        harness_fill_softmax_rows(job->in[1].data, job->rows, job->cols, &r, 1.0, 0.2, logt, mask, 0);
        free(mask);
        /* The upstream gradient of a backward case. */
        if (job->kind == CLI_OP_KL_BACKWARD) harness_fill_normal(job->in[2].data, cli_tensor_count(&job->in[2]), &r, 0.0, 1.0);
        break;
    }
    case CLI_OP_DM:
    case CLI_OP_DM_BACKWARD:
        harness_fill_counts(job->in[0].data, cli_tensor_count(&job->in[0]), &r);
        harness_fill_normal(job->in[1].data, cli_tensor_count(&job->in[1]), &r, -0.5, 0.8);
        if (job->kind == CLI_OP_DM_BACKWARD) harness_fill_normal(job->in[2].data, cli_tensor_count(&job->in[2]), &r, 0.0, 1.0);
        break;
    case CLI_OP_GMM_LOG_PROB:
        gen_gmm(job, job->in[0].data, job->in[1].data, job->in[2].data, job->in[3].data, &r);
        break;
    case CLI_OP_GMM_SAMPLE: gen_gmm(job, NULL, job->in[0].data, job->in[1].data, job->in[2].data, &r); break;
    case CLI_OP_GMM_LOG_PROB_BACKWARD:
        gen_gmm(job, job->in[0].data, job->in[1].data, job->in[2].data, job->in[3].data, &r);
        harness_fill_normal(job->in[4].data, cli_tensor_count(&job->in[4]), &r, 0.0, 1.0);
        break;
    case CLI_OP_GMM_SAMPLE_BACKWARD:
        gen_gmm(job, NULL, job->in[0].data, job->in[1].data, job->in[2].data, &r);
        harness_fill_normal(job->in[3].data, cli_tensor_count(&job->in[3]), &r, 0.0, 1.0);
        harness_fill_normal(job->in[4].data, cli_tensor_count(&job->in[4]), &r, 0.0, 1.0);
        break;
    case CLI_OP_CATEGORICAL: gen_categorical(c, job->in[0].data, &r); break;
    case CLI_OP_RNG: break;
    }
    return 0;
}

/* ---- References ------------------------------------------------------------ */

/* Expected values for one output: float64 value and absolute tolerance per
 * element (tolerance 0: exact), or exact bits (tree), or nothing. */
typedef struct xc_expect {
    double *ref[CLI_MAX_TENSORS];
    double *tol[CLI_MAX_TENSORS];
    float *tree[CLI_MAX_TENSORS];
} xc_expect;

static void expect_free(xc_expect *e)
{
    for (int k = 0; k < CLI_MAX_TENSORS; k++) {
        free(e->ref[k]);
        free(e->tol[k]);
        free(e->tree[k]);
    }
    memset(e, 0, sizeof *e);
}

static tally_ref_mat dense(const cli_tensor *t)
{
    return tally_ref_mat_make(t->data, t->rows, t->cols, t->cols);
}

static int alloc_expect(xc_expect *e, int k, uint64_t n)
{
    e->ref[k] = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    e->tol[k] = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    return e->ref[k] != NULL && e->tol[k] != NULL ? 0 : -1;
}

/* mag -> tolerance in place. */
static void to_tolerance(double *mag, uint64_t count, uint64_t tree_n, double extra)
{
    for (uint64_t i = 0; i < count; i++) mag[i] = tally_ref_tolerance(mag[i], tree_n, extra);
}

/* Expectations that do not depend on a backend's outputs. Returns 0 or -1
 * (out of memory, or the reference refused the case). */
static int prepare_expect(const xc_case *c, xc_expect *e)
{
    const cli_job *job = &c->job;
    memset(e, 0, sizeof *e);
    const cli_tensor *out = &job->out[0];
    uint64_t n_out = cli_tensor_count(out);
    switch (job->kind) {
    case CLI_OP_REDUCE: {
        if (alloc_expect(e, 0, n_out) != 0) return -1;
        if (tally_ref_reduce((int)job->reduce_op, (int)job->axis, dense(&job->in[0]), e->ref[0], e->tol[0]) < 0)
            return -1;
        uint64_t n = job->axis == TALLY_AXIS_ALL ? (uint64_t)(job->rows * job->cols) : (uint64_t)job->cols;
        double extra = job->reduce_op == TALLY_SUMSQ ? 1.0 : job->reduce_op == TALLY_MEAN ? 2.0
                       : job->reduce_op == TALLY_LOGSUMEXP ? 4.0 : 0.0;
        to_tolerance(e->tol[0], n_out, n, extra);
        if (job->reduce_op == TALLY_SUM || job->reduce_op == TALLY_SUMSQ || job->reduce_op == TALLY_MIN ||
            job->reduce_op == TALLY_MAX) {
            /* The exact bits of the written tree, simulated by reference.c. */
            int kind = job->reduce_op == TALLY_MIN ? 1 : job->reduce_op == TALLY_MAX ? 2 : 0;
            float *terms = alloc_floats((uint64_t)(job->rows * job->cols));
            e->tree[0] = alloc_floats(n_out);
            if (terms == NULL || e->tree[0] == NULL) {
                free(terms);
                return -1;
            }
            const float *x = job->in[0].data;
            for (int64_t i = 0; i < job->rows * job->cols; i++)
                terms[i] = job->reduce_op == TALLY_SUMSQ ? x[i] * x[i] : x[i];
            if (job->axis == TALLY_AXIS_ALL) e->tree[0][0] = tally_ref_tree_f32(terms, n, kind, 0.0f);
            else
                for (int64_t row = 0; row < job->rows; row++)
                    e->tree[0][row] = tally_ref_tree_f32(terms + row * job->cols, n, kind, 0.0f);
            free(terms);
        }
        return 0;
    }
    case CLI_OP_KL: {
        if (alloc_expect(e, 0, n_out) != 0) return -1;
        if (tally_ref_kl_div(dense(&job->in[0]), dense(&job->in[1]), (int)job->reduction, job->flags, e->ref[0],
                             e->tol[0]) < 0)
            return -1;
        uint64_t n = job->reduction == TALLY_REDUCTION_NONE ? 1u : (uint64_t)(job->rows * job->cols);
        to_tolerance(e->tol[0], n_out, n, 8.0);
        return 0;
    }
    case CLI_OP_DM: {
        if (alloc_expect(e, 0, n_out) != 0) return -1;
        if (tally_ref_dirichlet_multinomial(dense(&job->in[0]), dense(&job->in[1]), (int)job->reduction,
                                            job->flags, e->ref[0], e->tol[0]) < 0)
            return -1;
        double extra = 32.0;
        if (job->reduction != TALLY_REDUCTION_NONE) extra += tally_ref_tree_depth((uint64_t)job->rows) + 2.0;
        to_tolerance(e->tol[0], n_out, (uint64_t)job->cols, extra);
        return 0;
    }
    case CLI_OP_GMM_LOG_PROB: {
        if (alloc_expect(e, 0, n_out) != 0) return -1;
        if (tally_ref_gmm_log_prob(dense(&job->in[0]), dense(&job->in[1]), dense(&job->in[2]), job->in[3].data,
                                   job->components, e->ref[0], e->tol[0]) < 0)
            return -1;
        to_tolerance(e->tol[0], n_out, (uint64_t)job->dim, 8.0 + 2.0 * (double)job->components);
        return 0;
    }
    case CLI_OP_RNG: {
        if (alloc_expect(e, 0, n_out) != 0) return -1;
        const tally_rng g = job->rng;
        for (uint64_t i = 0; i < n_out; i++) {
            uint64_t s = g.offset + i;
            switch (job->dist) {
            case TALLY_DIST_RAW:
                e->ref[0][i] = (double)tally_ref_rng_raw(g.seed, g.subsequence, s);
                e->tol[0][i] = 0.0;
                break;
            case TALLY_DIST_UNIFORM:
                e->ref[0][i] = (double)tally_ref_rng_uniform(g.seed, g.subsequence, s);
                e->tol[0][i] = 0.0;
                break;
            case TALLY_DIST_NORMAL:
                e->ref[0][i] = tally_ref_rng_normal(g.seed, g.subsequence, s);
                e->tol[0][i] = 8.0 * U * tally_ref_rng_normal_radius(g.seed, g.subsequence, s) * 1.01;
                break;
            }
        }
        return 0;
    }
    case CLI_OP_GMM_SAMPLE:
    case CLI_OP_CATEGORICAL: return 0; /* checked against each backend's own draws */
    case CLI_OP_KL_BACKWARD: {
        /* harness/reference_backward.c gives magnitudes already in units of
         * 2^-24: the tolerance is that many float ulps. */
        if (alloc_expect(e, 0, n_out) != 0 || alloc_expect(e, 1, n_out) != 0) return -1;
        if (tally_ref_kl_div_backward(dense(&job->in[0]), dense(&job->in[1]), job->in[2].data, (int)job->reduction,
                                      job->flags, e->ref[0], e->tol[0], e->ref[1], e->tol[1]) < 0)
            return -1;
        for (int k = 0; k < 2; k++)
            for (uint64_t i = 0; i < n_out; i++) e->tol[k][i] *= U;
        return 0;
    }
    case CLI_OP_GMM_SAMPLE_BACKWARD: return 0; /* bits against the host; float64 in tests/check_backward.c */
    case CLI_OP_GMM_LOG_PROB_BACKWARD: {
        const int64_t B = job->batch, K = job->components, D = job->dim;
        if (K > 64 || D > 4096 || K * D > 4096) return 0; /* beyond the reference's sizes: bits only */
        for (int k = 0; k < job->n_out; k++)
            if (alloc_expect(e, k, cli_tensor_count(&job->out[k])) != 0) return -1;
        double dummy[2];
        if (tally_ref_gmm_log_prob_backward(job->in[0].data, job->in[1].data, job->in[2].data, job->in[3].data, B, K,
                                            D, job->in[4].data, e->ref[0], e->tol[0], e->ref[1], e->tol[1],
                                            e->ref[2], e->tol[2], K > 1 ? e->ref[3] : dummy,
                                            K > 1 ? e->tol[3] : dummy + 1) != 0)
            return -1;
        for (int k = 0; k < job->n_out; k++)
            for (uint64_t i = 0; i < cli_tensor_count(&job->out[k]); i++) e->tol[k][i] *= U;
        return 0;
    }
    case CLI_OP_DM_BACKWARD: {
        if (alloc_expect(e, 0, n_out) != 0) return -1;
        if (tally_ref_dirichlet_multinomial_backward(dense(&job->in[0]), dense(&job->in[1]), job->in[2].data,
                                                     (int)job->reduction, e->ref[0], e->tol[0]) < 0)
            return -1;
        for (uint64_t i = 0; i < n_out; i++) e->tol[0][i] *= U;
        return 0;
    }
    }
    return -1;
}

/* ---- Comparison ------------------------------------------------------------ */

static double ratio_of(double err, double tol)
{
    if (err == 0.0) return 0.0;
    if (tol == 0.0) return INFINITY;
    return err / tol;
}

/* One float output against its float64 reference. */
static void compare_float(xc_result *res, const char *name, const float *got, const double *ref, const double *tol,
                          uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        double ulp = tally_ref_ulp_diff(got[i], ref[i]);
        if (isnan(res->max_ulp) || ulp > res->max_ulp) res->max_ulp = ulp;
        double diff = fabs((double)got[i] - ref[i]), ratio;
        if (tally_ref_close(got[i], ref[i], tol[i])) {
            ratio = isfinite(diff) ? ratio_of(diff, tol[i]) : 0.0; /* both NaN, or the same infinity */
        } else {
            res->out_of_tolerance++;
            ratio = isfinite(diff) ? ratio_of(diff, tol[i]) : INFINITY;
        }
        if (ratio > res->max_ratio) {
            res->max_ratio = ratio;
            snprintf(res->worst, sizeof res->worst, "%s[%llu] = %.9g, float64 %.17g, tol %.3g", name,
                     (unsigned long long)i, (double)got[i], ref[i], tol[i]);
        }
    }
}

/* Output-dependent checks: categorical indices, the mixture sample. */
static int compare_draws(const xc_case *c, const cli_job *ran, xc_result *res)
{
    const cli_job *job = &c->job;
    const tally_rng g = job->rng;
    if (job->kind == CLI_OP_CATEGORICAL) {
        const int32_t *idx = ran->out[0].data;
        const float *w = job->in[0].data;
        int logits = (job->flags & TALLY_CATEGORICAL_LOGITS) != 0;
        double tol = (double)(job->cols + 4) * 0x1.0p-22;
        for (int64_t row = 0; row < job->rows; row++) {
            double u = (double)tally_ref_rng_uniform(g.seed, g.subsequence, g.offset + (uint64_t)row);
            if (!tally_ref_categorical_consistent(w + row * job->cols, job->cols, logits, u, idx[row], tol)) {
                if (res->out_of_tolerance++ == 0)
                    snprintf(res->worst, sizeof res->worst, "index[%lld] = %d is not in its interval (u = %.9g)",
                             (long long)row, idx[row], u);
                res->max_ratio = INFINITY;
            }
        }
        return 0;
    }
    /* gmm_sample: components, then z given those components, then log_q
     * given z. */
    int64_t B = job->batch, K = job->components, D = job->dim;
    const float *z = ran->out[0].data, *log_q = ran->out[1].data;
    const int32_t *comp = ran->out[2].data;
    const float *mu = job->in[0].data, *lv = job->in[1].data, *logits = job->in[2].data;
    double tol_c = (double)(K + 4) * 0x1.0p-22;
    int32_t *given = malloc((size_t)(B > 0 ? B : 1) * sizeof *given);
    double *zr = malloc((size_t)(B * D > 0 ? B * D : 1) * sizeof *zr);
    double *lq = malloc((size_t)(B > 0 ? B : 1) * sizeof *lq);
    double *zt = calloc((size_t)(B * D > 0 ? B * D : 1), sizeof *zt); /* calloc: quiets a false maybe-uninitialized */
    double *lqt = malloc((size_t)(B > 0 ? B : 1) * sizeof *lqt);
    int rc = -1;
    if (given == NULL || zr == NULL || lq == NULL || zt == NULL || lqt == NULL) goto done;
    for (int64_t b = 0; b < B; b++) {
        double u = (double)tally_ref_rng_uniform(g.seed, g.subsequence, g.offset + (uint64_t)b);
        int ok = K > 1 ? tally_ref_categorical_consistent(logits, K, 1, u, comp[b], tol_c) : comp[b] == 0;
        if (!ok) {
            if (res->out_of_tolerance++ == 0)
                snprintf(res->worst, sizeof res->worst, "component[%lld] = %d is not in its interval (u = %.9g)",
                         (long long)b, comp[b], u);
            res->max_ratio = INFINITY;
        }
        given[b] = comp[b] >= 0 && comp[b] < K ? comp[b] : -1;
    }
    tally_ref_mat m_mu = dense(&job->in[0]), m_lv = dense(&job->in[1]);
    tally_ref_gmm_sample(m_mu, m_lv, logits, K, g.seed, g.subsequence, g.offset, B, D, 1, given, zr, lq);
    for (int64_t b = 0; b < B; b++) {
        int32_t k = given[b];
        for (int64_t d = 0; d < D; d++) {
            uint64_t s = tally_ref_gmm_eps_index(g.offset, (uint64_t)B, (uint64_t)D, (uint64_t)b, (uint64_t)d);
            double scale = 0.0;
            if (k >= 0) {
                size_t i = (size_t)(b * K * D + k * D + d);
                scale = fabs((double)mu[i]) +
                        exp(0.5 * (double)lv[i]) * tally_ref_rng_normal_radius(g.seed, g.subsequence, s);
            }
            zt[b * D + d] = 16.0 * U * scale * 1.01;
        }
    }
    compare_float(res, "z", z, zr, zt, (uint64_t)(B * D));
    cli_tensor zt_view = ran->out[0];
    if (tally_ref_gmm_log_prob(dense(&zt_view), m_mu, m_lv, logits, K, lq, lqt) < 0) goto done;
    to_tolerance(lqt, (uint64_t)B, (uint64_t)D, 8.0 + 2.0 * (double)K);
    compare_float(res, "log_q", log_q, lq, lqt, (uint64_t)B);
    rc = 0;
done:
    free(given);
    free(zr);
    free(lq);
    free(zt);
    free(lqt);
    return rc;
}

/* Bits of one backend's outputs against the host's. */
static void compare_bits(const cli_job *host, const cli_job *other, xc_result *res)
{
    for (int k = 0; k < other->n_out; k++) {
        const cli_tensor *a = &host->out[k], *b = &other->out[k];
        const uint32_t *pa = a->data, *pb = b->data;
        uint64_t n = cli_tensor_count(a);
        /* Half outputs are held as their widened floats. */
        const int floating = a->dtype == TALLY_F32 || a->dtype == TALLY_BF16 || a->dtype == TALLY_F16;
        for (uint64_t i = 0; i < n; i++) {
            int same = floating ? cli_same_bits(pa[i], pb[i]) : pa[i] == pb[i];
            if (same) continue;
            if (res->bit_mismatches++ > 0) continue;
            if (floating)
                snprintf(res->first_mismatch, sizeof res->first_mismatch,
                         "%s[%llu]: host 0x%08x (%.9g), this 0x%08x (%.9g)", a->name, (unsigned long long)i,
                         (unsigned)pa[i], (double)cli_bits_f32(pa[i]), (unsigned)pb[i],
                         (double)cli_bits_f32(pb[i]));
            else
                snprintf(res->first_mismatch, sizeof res->first_mismatch, "%s[%llu]: host %lld, this %lld", a->name,
                         (unsigned long long)i,
                         a->dtype == TALLY_I32 ? (long long)(int32_t)pa[i] : (long long)pa[i],
                         a->dtype == TALLY_I32 ? (long long)(int32_t)pb[i] : (long long)pb[i]);
        }
    }
}

static void update_pass(xc_result *res)
{
    res->pass = res->ran && res->bit_mismatches == 0 && res->tree != 0 && !res->wrote_outside &&
                res->out_of_tolerance == 0 && !(res->max_ratio > 1.0);
}

/* A half-output run against the fp32 run of the same job on the same
 * backend: the half output must be each fp32 value narrowed by tally/half.h
 * (both held widened, so compared as float bits), every other output and
 * the consumption equal. Mismatches count as bit mismatches. */
static void compare_definition(const cli_job *half, const cli_job *wide, int k_half, xc_result *res)
{
    if (half->consumed != wide->consumed && res->bit_mismatches++ == 0)
        snprintf(res->first_mismatch, sizeof res->first_mismatch, "consumed %llu, the fp32 run %llu",
                 (unsigned long long)half->consumed, (unsigned long long)wide->consumed);
    for (int k = 0; k < half->n_out; k++) {
        const cli_tensor *h = &half->out[k], *w = &wide->out[k];
        const uint32_t *ph = h->data, *pw = w->data;
        for (uint64_t i = 0; i < cli_tensor_count(h); i++) {
            uint32_t want = pw[i];
            if (k == k_half) {
                const float f = cli_bits_f32(pw[i]);
                want = cli_f32_bits(h->dtype == TALLY_BF16 ? tally_bf16_to_f32(tally_f32_to_bf16(f))
                                                          : tally_f16_to_f32(tally_f32_to_f16(f)));
            }
            if (ph[i] == want) continue;
            if (res->bit_mismatches++ > 0) continue;
            snprintf(res->first_mismatch, sizeof res->first_mismatch,
                     "%s[%llu]: 0x%08x, but the fp32 run's value %s gives 0x%08x", h->name, (unsigned long long)i,
                     (unsigned)ph[i], k == k_half ? "narrowed" : "itself", (unsigned)want);
        }
    }
}

/* Everything that compares a finished run with the expectations. */
static void check_run(const xc_case *c, const xc_expect *e, const cli_job *ran, const cli_job *host_run,
                      xc_result *res)
{
    const cli_job *job = &c->job;
    res->max_ulp = NAN;
    res->max_ratio = 0.0;
    for (int k = 0; k < ran->n_out; k++) res->elements += cli_tensor_count(&ran->out[k]);
    res->bits_compared = host_run != NULL;
    if (host_run != NULL) compare_bits(host_run, ran, res);
    res->tree = -1;
    if (e->tree[0] != NULL) {
        const uint32_t *got = ran->out[0].data;
        res->tree = 1;
        for (uint64_t i = 0; i < cli_tensor_count(&ran->out[0]); i++)
            if (!cli_same_bits(got[i], cli_f32_bits(e->tree[0][i]))) {
                if (res->tree == 1)
                    snprintf(res->tree_note, sizeof res->tree_note, "y[%llu] = %.9g but the simulated tree gives %.9g",
                             (unsigned long long)i, (double)cli_bits_f32(got[i]), (double)e->tree[0][i]);
                res->tree = 0;
            }
    }
    if (job->kind == CLI_OP_RNG && job->dist == TALLY_DIST_RAW) {
        const uint32_t *got = ran->out[0].data;
        for (uint64_t i = 0; i < cli_tensor_count(&ran->out[0]); i++)
            if ((double)got[i] != e->ref[0][i]) {
                if (res->out_of_tolerance++ == 0)
                    snprintf(res->worst, sizeof res->worst, "x[%llu] = %u, reference %.0f", (unsigned long long)i,
                             (unsigned)got[i], e->ref[0][i]);
                res->max_ratio = INFINITY;
            }
    } else if (job->kind == CLI_OP_GMM_SAMPLE || job->kind == CLI_OP_CATEGORICAL) {
        if (compare_draws(c, ran, res) != 0) {
            snprintf(res->error, sizeof res->error, "out of host memory for the reference");
            res->ran = 0;
        }
    } else {
        for (int k = 0; k < ran->n_out; k++)
            if (e->ref[k] != NULL)
                compare_float(res, ran->out[k].name, ran->out[k].data, e->ref[k], e->tol[k],
                              cli_tensor_count(&ran->out[k]));
    }
    update_pass(res);
}

/* ---- Running one case --------------------------------------------------------- */

static xc_result *new_result(xc_state *st)
{
    if (st->n_results == st->cap_results) {
        size_t cap = st->cap_results ? 2 * st->cap_results : 256;
        xc_result *p = realloc(st->results, cap * sizeof *p);
        if (p == NULL) return NULL;
        st->results = p;
        st->cap_results = cap;
    }
    xc_result *r = &st->results[st->n_results++];
    memset(r, 0, sizeof *r);
    return r;
}

static void progress(xc_state *st, const xc_case *c, const char *backend, int first)
{
    (void)first;
    /* Progress is for a person watching: one line rewritten in place on a
     * terminal, nothing at all in a pipe or a log (mismatches and the
     * summary still go there). */
    if (!st->tty) return;
    fprintf(stderr, "\r\033[K[%d/%d] %s %s %s on %s", st->index, st->total, c->op, c->variant, c->shape, backend);
    fflush(stderr);
}

/* Rounds a case's generated inputs to its input dtype (a no-op for f32),
 * so the host data, and with them the float64 references, hold exactly the
 * values the device reads. f16 counts are clipped to 2048 first: the largest
 * f16 is 65504 and integers above 2048 are not all representable, while
 * the generator draws counts up to 10^6. */
static void round_inputs(cli_job *job)
{
    for (int k = 0; k < job->n_in; k++) {
        float *x = job->in[k].data;
        const uint64_t n = cli_tensor_count(&job->in[k]);
        if (job->kind == CLI_OP_DM && k == 0 && job->in_dtype == TALLY_F16)
            for (uint64_t i = 0; i < n; i++)
                if (x[i] > 2048.0f) x[i] = 2048.0f;
        cli_round_to_dtype(job->in_dtype, x, n);
    }
}

static void run_case_dtype(xc_state *st, xc_case *c)
{
    st->index++;
    if (st->count_only || st->fatal) return;
    char err[160];
    if (cli_job_layout(&c->job, err, sizeof err) != 0) {
        fprintf(stderr, "tally: crosscheck: case %s %s: %s\n", c->op, c->shape, err);
        st->fatal = 1;
        return;
    }
    place_tensors(c);
    xc_expect e;
    memset(&e, 0, sizeof e);
    cli_job host_run;
    int have_host = 0;
    int generated = gen_inputs(c) == 0;
    if (generated) round_inputs(&c->job);
    if (!generated || prepare_expect(c, &e) != 0) {
        fprintf(stderr, "tally: crosscheck: out of host memory (or a refused reference) for %s %s\n", c->op,
                c->shape);
        st->fatal = 1;
        goto done;
    }
    int first = 1;
    for (int b = 0; b < st->n_targets; b++) {
        xc_target *be = &st->targets[b];
        if (!be->used) continue;
        progress(st, c, be->label, first);
        first = 0;
        xc_result *res = new_result(st);
        if (res == NULL) {
            st->fatal = 1;
            break;
        }
        res->op = c->op;
        snprintf(res->variant, sizeof res->variant, "%s", c->variant);
        snprintf(res->shape, sizeof res->shape, "%s", c->shape);
        res->backend = be->backend;
        res->target = be->label;
        res->device = be->device;
        cli_job run = c->job;
        tally_status status = cli_exec_run(be->ctx, &run);
        res->op_seconds = run.op_seconds;
        /* A half-output case runs the fp32 job too: its outputs are what
         * the references measure, and what the half ones are defined by. */
        const int k_half = c->job.out_dtype == TALLY_BF16 || c->job.out_dtype == TALLY_F16
                               ? cli_job_half_output(&c->job)
                               : -1;
        cli_job wide = c->job;
        if (k_half >= 0 && status == TALLY_OK) {
            wide.out[k_half].dtype = TALLY_F32;
            status = cli_exec_run(be->ctx, &wide);
            if (status != TALLY_OK) {
                snprintf(run.error, sizeof run.error, "the fp32 run: %.200s", wide.error);
                cli_job_free_outputs(&run);
            }
        }
        if (status != TALLY_OK) {
            snprintf(res->error, sizeof res->error, "%s: %s", tally_status_name(status), run.error);
            res->max_ulp = NAN;
            res->pass = 0;
            continue;
        }
        res->ran = 1;
        res->wrote_outside = run.wrote_outside;
        if (k_half >= 0) {
            res->wrote_outside |= wide.wrote_outside;
            check_run(c, &e, &wide, NULL, res);
            if (have_host) compare_bits(&host_run, &run, res);
            res->bits_compared = have_host;
            compare_definition(&run, &wide, k_half, res);
            update_pass(res);
            cli_job_free_outputs(&wide);
        } else {
            check_run(c, &e, &run, have_host ? &host_run : NULL, res);
        }
        if (be->backend == TALLY_BACKEND_HOST && !have_host) {
            host_run = run;
            have_host = 1;
        } else {
            cli_job_free_outputs(&run);
        }
    }
    if (have_host) cli_job_free_outputs(&host_run);
done:
    expect_free(&e);
    for (int k = 0; k < c->job.n_in; k++) {
        free(c->job.in[k].data);
        c->job.in[k].data = NULL;
    }
}

/* Runs a case once per selected input dtype (ops without inputs once). */
static void run_case(xc_state *st, xc_case *c)
{
    if (!harness_list_has(st->ops_filter, c->op)) return;
    const char *names[] = {"f32", "bf16", "f16"};
    const tally_dtype types[] = {TALLY_F32, TALLY_BF16, TALLY_F16};
    char variant[sizeof c->variant];
    snprintf(variant, sizeof variant, "%s", c->variant);
    int ran = 0;
    for (int d = 0; d < 3; d++) {
        if (!(st->dtypes & (1u << d))) continue;
        if (c->job.kind == CLI_OP_RNG && ran) break; /* no floating inputs: one run */
        /* The gradients read fp32 inputs only (docs/ops.md). */
        if (d > 0 && (c->job.kind == CLI_OP_KL_BACKWARD || c->job.kind == CLI_OP_DM_BACKWARD ||
                      c->job.kind == CLI_OP_GMM_LOG_PROB_BACKWARD || c->job.kind == CLI_OP_GMM_SAMPLE_BACKWARD))
            continue;
        c->job.in_dtype = types[d];
        if (d > 0 && c->job.kind != CLI_OP_RNG) snprintf(c->variant, sizeof c->variant, "%.100s dtype=%s", variant, names[d]);
        else snprintf(c->variant, sizeof c->variant, "%s", variant);
        run_case_dtype(st, c);
        ran = 1;
    }
    /* The elementwise output as each half type, on fp32 inputs. */
    c->job.in_dtype = TALLY_F32;
    if (c->half_out && cli_job_half_output(&c->job) >= 0)
        for (int d = 1; d < 3; d++) {
            if (!(st->out_dtypes & (1u << d))) continue;
            c->job.out_dtype = types[d];
            snprintf(c->variant, sizeof c->variant, "%.100s out=%s", variant, names[d]);
            run_case_dtype(st, c);
        }
    c->job.out_dtype = TALLY_F32;
    /* The case may run again (another backend list): leave its name as it was. */
    snprintf(c->variant, sizeof c->variant, "%s", variant);
}

/* ---- The catalogue of cases -------------------------------------------------- */

static void shape_text(char *out, size_t size, int64_t rows, int64_t cols, int strided, const char *label)
{
    snprintf(out, size, "%lldx%lld %s%s", (long long)rows, (long long)cols, label, strided ? " strided" : "");
}

/* Random-stream positions: zero, odd offsets, the largest seed, a subsequence
 * and an offset above 2^32 (both counter words used), and (index 4) an
 * offset whose draws end exactly at 2^64 - 1. */
static tally_rng rng_setting(int i, uint64_t need)
{
    switch (i % 5) {
    case 0: return (tally_rng){.seed = 0, .subsequence = 0, .offset = 0};
    case 1: return (tally_rng){.seed = 42, .subsequence = 0, .offset = 1};
    case 2: return (tally_rng){.seed = UINT64_MAX, .subsequence = 7, .offset = 3};
    case 3: return (tally_rng){.seed = 123456789, .subsequence = 0x100000001ull, .offset = (1ull << 40) + 2};
    default: return (tally_rng){.seed = 5, .subsequence = 1, .offset = UINT64_MAX - need};
    }
}

/* A 64-bit stream coordinate, short: decimal below 2^32, 2^64-N near the
 * top, hex otherwise. */
static void u64_text(char *out, size_t size, uint64_t v)
{
    if (v < (1ull << 32)) snprintf(out, size, "%llu", (unsigned long long)v);
    else if (UINT64_MAX - v < (1ull << 20)) snprintf(out, size, "2^64-%llu", (unsigned long long)(UINT64_MAX - v) + 1);
    else snprintf(out, size, "0x%llx", (unsigned long long)v);
}

static void rng_text(char *out, size_t size, tally_rng g)
{
    char seed[24], sub[24], off[24];
    u64_text(seed, sizeof seed, g.seed);
    u64_text(sub, sizeof sub, g.subsequence);
    u64_text(off, sizeof off, g.offset);
    snprintf(out, size, "seed=%s sub=%s off=%s", seed, sub, off);
}

/* KL cases (backward: its gradient) over the given matrix shapes: every
 * reduction x every flag combination; the large shape runs four
 * representative combinations (each reduction once, batchmean as the
 * founding workload: input_is_prob). */
/* A case on a matrix row of the catalogue: op, kind, shape, placement and
 * the shape's text; everything else 0. */
static xc_case matrix_case(const char *op, cli_op_kind kind, const harness_shape *sh)
{
    xc_case c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.job.kind = kind;
    c.job.rows = sh->rows;
    c.job.cols = sh->cols;
    c.strided = sh->strided;
    c.half_out = (sh->families & HARNESS_FAMILY(HALF_OUT)) != 0;
    shape_text(c.shape, sizeof c.shape, sh->rows, sh->cols, sh->strided, sh->label);
    return c;
}

static void kl_cases(xc_state *st, uint64_t *seed, const harness_shape *shapes, size_t n_shapes, int backward)
{
    static const unsigned large_flags[] = {
        [TALLY_REDUCTION_NONE] = TALLY_KL_INPUT_IS_PROB,
        [TALLY_REDUCTION_SUM] = TALLY_KL_LOG_TARGET,
        [TALLY_REDUCTION_MEAN] = TALLY_KL_INPUT_IS_PROB | TALLY_KL_LOG_TARGET,
        [TALLY_REDUCTION_BATCHMEAN] = TALLY_KL_INPUT_IS_PROB,
    };
    xc_case c;
    for (size_t s = 0; s < n_shapes; s++) {
        const harness_shape sh = shapes[s];
        int large = strcmp(sh.label, "large") == 0;
        for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_BATCHMEAN; red++)
            for (unsigned flags = 0; flags < 4; flags++) {
                if (large && flags != large_flags[red]) continue;
                c = matrix_case(backward ? "kl_div_backward" : "kl_div", backward ? CLI_OP_KL_BACKWARD : CLI_OP_KL,
                                &sh);
                c.job.reduction = (tally_reduction)red;
                c.job.flags = flags;
                c.zeros = strcmp(sh.label, "odd") == 0;
                c.data_seed = (*seed)++;
                snprintf(c.variant, sizeof c.variant, "%s%s%s", reduction_name((tally_reduction)red),
                         (flags & TALLY_KL_INPUT_IS_PROB) ? " prob" : "", (flags & TALLY_KL_LOG_TARGET) ? " logt" : "");
                if (c.zeros && !(flags & TALLY_KL_LOG_TARGET)) strncat(c.shape, " zeros", sizeof c.shape - strlen(c.shape) - 1);
                run_case(st, &c);
            }
    }
}

/* KL from logits over the given shapes: every flag set with a logits flag x
 * every reduction; the large shape runs one set per reduction. Masked
 * (-inf) target logits on the "odd" and "fused" rows. */
static void kl_logits_cases(xc_state *st, uint64_t *seed, const harness_shape *shapes, size_t n_shapes)
{
    static const unsigned flag_sets[] = {
        TALLY_KL_INPUT_LOGITS, TALLY_KL_TARGET_LOGITS, TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS,
        TALLY_KL_INPUT_IS_PROB | TALLY_KL_TARGET_LOGITS, TALLY_KL_INPUT_LOGITS | TALLY_KL_LOG_TARGET,
    };
    /* Both logits twice: the founding form of the op. */
    static const unsigned large_flags[] = {
        [TALLY_REDUCTION_NONE] = TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS,
        [TALLY_REDUCTION_SUM] = TALLY_KL_TARGET_LOGITS,
        [TALLY_REDUCTION_MEAN] = TALLY_KL_INPUT_LOGITS,
        [TALLY_REDUCTION_BATCHMEAN] = TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS,
    };
    for (size_t s = 0; s < n_shapes; s++) {
        const harness_shape sh = shapes[s];
        const int large = strcmp(sh.label, "large") == 0;
        for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_BATCHMEAN; red++)
            for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
                const unsigned flags = flag_sets[f];
                if (large && flags != large_flags[red]) continue;
                /* An empty mean is TALLY_EMPTY_INPUT (tests/check_kl_logits.c), not a value. */
                if ((red == TALLY_REDUCTION_MEAN && sh.rows * sh.cols == 0) ||
                    (red == TALLY_REDUCTION_BATCHMEAN && sh.rows == 0))
                    continue;
                xc_case c = matrix_case("kl_div", CLI_OP_KL, &sh);
                c.job.reduction = (tally_reduction)red;
                c.job.flags = flags;
                c.zeros = strncmp(sh.label, "odd", 3) == 0 || strncmp(sh.label, "fused", 5) == 0;
                c.data_seed = (*seed)++;
                snprintf(c.variant, sizeof c.variant, "%s%s%s%s%s", reduction_name((tally_reduction)red),
                         (flags & TALLY_KL_INPUT_LOGITS) ? " x-logits" : "",
                         (flags & TALLY_KL_INPUT_IS_PROB) ? " prob" : "",
                         (flags & TALLY_KL_TARGET_LOGITS) ? " t-logits" : "",
                         (flags & TALLY_KL_LOG_TARGET) ? " logt" : "");
                if (c.zeros && (flags & TALLY_KL_TARGET_LOGITS))
                    strncat(c.shape, " masked", sizeof c.shape - strlen(c.shape) - 1);
                run_case(st, &c);
            }
    }
}

/* Dirichlet-multinomial cases (backward: its gradient, which takes no
 * coefficient flag): shared / per-row alpha x coefficient x reduction. */
static void dm_cases(xc_state *st, uint64_t *seed, const harness_shape *shapes, size_t n_shapes, int backward)
{
    xc_case c;
    const unsigned n_flags = backward ? 1u : 2u;
    for (size_t s = 0; s < n_shapes; s++) {
        const harness_shape sh = shapes[s];
        for (int per_row = 0; per_row < 2; per_row++)
            for (unsigned flags = 0; flags < n_flags; flags++)
                for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_MEAN; red++) {
                    c = matrix_case(backward ? "dirichlet_multinomial_backward" : "dirichlet_multinomial",
                                    backward ? CLI_OP_DM_BACKWARD : CLI_OP_DM, &sh);
                    c.job.reduction = (tally_reduction)red;
                    c.job.flags = flags;
                    c.job.per_row_alpha = per_row;
                    c.data_seed = (*seed)++;
                    snprintf(c.variant, sizeof c.variant, "%s %s%s", reduction_name((tally_reduction)red),
                             per_row ? "per-row" : "shared", flags ? " coef" : "");
                    run_case(st, &c);
                }
    }
}

static void catalogue(xc_state *st)
{
    const int q = st->quick;
    uint64_t seed = 1;
    xc_case c;
    harness_shape shapes[HARNESS_MAX_FAMILY_ROWS];
    size_t n_shapes;

    /* Reductions on both axes; the special-value row last. */
    n_shapes = harness_family_rows(HARNESS_FAMILY(REDUCE), q, shapes);
    for (size_t s = 0; s < n_shapes; s++) {
        const harness_shape sh = shapes[s];
        for (int o = HARNESS_OP_SUM; o <= HARNESS_OP_SUMSQ; o++)
            for (int axis = TALLY_AXIS_ALL; axis <= TALLY_AXIS_ROW; axis++) {
                c = matrix_case(harness_op_name((harness_op)o), CLI_OP_REDUCE, &sh);
                c.job.reduce_op = harness_op_reduce((harness_op)o);
                c.job.axis = (tally_axis)axis;
                c.special = (sh.families & HARNESS_FAMILY(SPECIALS)) != 0;
                c.data_seed = seed++;
                snprintf(c.variant, sizeof c.variant, "axis=%s", axis == TALLY_AXIS_ALL ? "all" : "row");
                run_case(st, &c);
            }
    }

    /* KL and its gradient: every reduction x every flag combination (the
     * large shape: four representative ones); then Dirichlet-multinomial
     * and its gradient: shared / per-row alpha x (forward only) the
     * coefficient x reduction. The forwards run first, then the gradients. */
    harness_shape dm_shapes[HARNESS_MAX_FAMILY_ROWS];
    n_shapes = harness_family_rows(HARNESS_FAMILY(KL), q, shapes);
    const size_t n_dm = harness_family_rows(HARNESS_FAMILY(DM), q, dm_shapes);
    for (int backward = 0; backward < 2; backward++) {
        kl_cases(st, &seed, shapes, n_shapes, backward);
        dm_cases(st, &seed, dm_shapes, n_dm, backward);
    }

    /* Gaussian mixtures (rows = B, components = K, cols = D), each shape
     * through the forward and then its gradient. */
    n_shapes = harness_family_rows(HARNESS_FAMILY(GMM), q, shapes);
    for (int sample = 0; sample < 2; sample++)
        for (size_t s = 0; s < n_shapes; s++) {
            const harness_shape sh = shapes[s];
            memset(&c, 0, sizeof c);
            c.op = sample ? "gmm_sample" : "gmm_log_prob";
            c.job.kind = sample ? CLI_OP_GMM_SAMPLE : CLI_OP_GMM_LOG_PROB;
            c.strided = sh.strided;
            c.half_out = (sh.families & HARNESS_FAMILY(HALF_OUT)) != 0;
            c.job.batch = sh.rows;
            c.job.components = sh.components;
            c.job.dim = sh.cols;
            c.data_seed = seed++;
            snprintf(c.shape, sizeof c.shape, "B=%lld K=%lld D=%lld %s%s", (long long)sh.rows,
                     (long long)sh.components, (long long)sh.cols, sh.label, sh.strided ? " strided" : "");
            if (sample) {
                tally_ref_gmm_layout l = tally_ref_gmm_sample_layout((uint64_t)sh.rows, (uint64_t)sh.cols);
                c.job.rng = rng_setting((int)s, l.consumed);
                rng_text(c.variant, sizeof c.variant, c.job.rng);
            } else {
                snprintf(c.variant, sizeof c.variant, "-");
            }
            run_case(st, &c);
            c.op = sample ? "gmm_sample_backward" : "gmm_log_prob_backward";
            c.job.kind = sample ? CLI_OP_GMM_SAMPLE_BACKWARD : CLI_OP_GMM_LOG_PROB_BACKWARD;
            c.data_seed = seed++;
            run_case(st, &c);
        }

    /* Random fills. */
    static const tally_distribution dists[] = {TALLY_DIST_RAW, TALLY_DIST_UNIFORM, TALLY_DIST_NORMAL};
    static const char *const dist_names[] = {"raw", "uniform", "normal"};
    n_shapes = harness_family_rows(HARNESS_FAMILY(RNG), q, shapes);
    for (size_t d = 0; d < 3; d++)
        for (size_t s = 0; s < n_shapes; s++) {
            const harness_shape sh = shapes[s];
            c = matrix_case("rng", CLI_OP_RNG, &sh);
            c.job.dist = dists[d];
            c.job.rng = rng_setting((int)(s + d), tally_ref_round_up4((uint64_t)(sh.rows * sh.cols), NULL));
            char where[100];
            rng_text(where, sizeof where, c.job.rng);
            snprintf(c.variant, sizeof c.variant, "%s %s", dist_names[d], where);
            run_case(st, &c);
        }

    /* Categorical draws on weights and on logits. */
    n_shapes = harness_family_rows(HARNESS_FAMILY(CATEGORICAL), q, shapes);
    for (int logits = 0; logits < 2; logits++)
        for (size_t s = 0; s < n_shapes; s++) {
            const harness_shape sh = shapes[s];
            c = matrix_case("categorical", CLI_OP_CATEGORICAL, &sh);
            c.job.flags = logits ? TALLY_CATEGORICAL_LOGITS : 0u;
            c.zeros = sh.rows == 2; /* the small case holds a row that cannot be sampled */
            c.data_seed = seed++;
            c.job.rng = rng_setting((int)s + logits, tally_ref_round_up4((uint64_t)sh.rows, NULL));
            char where[100];
            rng_text(where, sizeof where, c.job.rng);
            snprintf(c.variant, sizeof c.variant, "%s %s", logits ? "logits" : "weights", where);
            if (c.zeros) strncat(c.shape, " invalid-row", sizeof c.shape - strlen(c.shape) - 1);
            run_case(st, &c);
        }

    /* KL from logits, last, so that the cases above keep their seeds. */
    n_shapes = harness_family_rows(HARNESS_FAMILY(KL_LOGITS), q, shapes);
    kl_logits_cases(st, &seed, shapes, n_shapes);
}

/* ---- Output -------------------------------------------------------------------- */

static void format_number(char *out, size_t size, double v)
{
    if (isnan(v)) snprintf(out, size, "-");
    else if (isinf(v)) snprintf(out, size, "inf");
    else snprintf(out, size, "%.3g", v);
}

static const char *bits_text(const xc_result *r, char *buf, size_t size)
{
    if (!r->ran) return "-";
    if (r->backend == TALLY_BACKEND_HOST) {
        if (r->tree == 0) return "NO (tree)";
        if (r->bit_mismatches > 0) return "NO (def)"; /* a half output that is not its narrowed fp32 run */
        return r->tree == 1 ? "ref, tree" : "ref";
    }
    if (!r->bits_compared) return "-";
    if (r->bit_mismatches == 0) return "yes";
    snprintf(buf, size, "NO %llu/%llu", (unsigned long long)r->bit_mismatches, (unsigned long long)r->elements);
    return buf;
}

static void print_table(const xc_state *st)
{
    printf("%-21s %-36s %-28s %-8s %-12s %-9s %-8s %s\n", "op", "variant", "shape", "backend", "bits", "max ulp",
           "err/tol", "result");
    for (size_t i = 0; i < st->n_results; i++) {
        const xc_result *r = &st->results[i];
        char ulp[32], ratio[32], bits[48];
        format_number(ulp, sizeof ulp, r->max_ulp);
        format_number(ratio, sizeof ratio, r->ran ? r->max_ratio : NAN);
        printf("%-21s %-36s %-28s %-8s %-12s %-9s %-8s %s\n", r->op, r->variant, r->shape, r->target,
               bits_text(r, bits, sizeof bits), ulp, ratio,
               r->pass ? "ok" : "FAIL");
        if (!r->pass) {
            if (r->error[0] != '\0') printf("    error: %s\n", r->error);
            if (r->bit_mismatches > 0) printf("    first difference: %s\n", r->first_mismatch);
            if (r->wrote_outside) printf("    wrote outside its output view\n");
            if (r->tree == 0) printf("    tree: %s\n", r->tree_note);
            if (r->worst[0] != '\0' && (r->out_of_tolerance > 0 || r->max_ratio > 1.0))
                printf("    worst: %s (%llu out of tolerance)\n", r->worst, (unsigned long long)r->out_of_tolerance);
        }
    }
}

static void print_json(const xc_state *st, int failures)
{
    printf("{\n  \"quick\": %s,\n  \"backends\": [", st->quick ? "true" : "false");
    for (int b = 0; b < st->n_targets; b++) {
        const xc_target *be = &st->targets[b];
        printf("%s\n    {\"name\": \"%s\", \"device\": %d, \"status\": \"%s\", ", b ? "," : "",
               tally_backend_name(be->backend), be->device, be->used ? "used" : "skipped");
        if (be->used) {
            printf("\"device_name\": ");
            harness_json_string(stdout, be->name);
        } else {
            printf("\"reason\": ");
            harness_json_string(stdout, be->reason);
        }
        printf("}");
    }
    printf("\n  ],\n  \"results\": [");
    for (size_t i = 0; i < st->n_results; i++) {
        const xc_result *r = &st->results[i];
        printf("%s\n    {\"op\": \"%s\", \"variant\": ", i ? "," : "", r->op);
        harness_json_string(stdout, r->variant);
        printf(", \"shape\": ");
        harness_json_string(stdout, r->shape);
        printf(", \"backend\": \"%s\", \"device\": %d, \"ran\": %s, \"reference_backend\": %s, \"bit_identical\": %s, "
               "\"bit_mismatches\": %llu, \"elements\": %llu, \"tree_exact\": %s, \"wrote_outside\": %s, "
               "\"max_ulp\": ",
               tally_backend_name(r->backend), r->device, r->ran ? "true" : "false",
               r->backend == TALLY_BACKEND_HOST ? "true" : "false",
               r->ran && (r->bits_compared || r->backend == TALLY_BACKEND_HOST) && r->bit_mismatches == 0
                   ? "true" : "false", (unsigned long long)r->bit_mismatches,
               (unsigned long long)r->elements, r->tree < 0 ? "null" : r->tree ? "true" : "false",
               r->wrote_outside ? "true" : "false");
        harness_json_number(stdout, r->max_ulp);
        printf(", \"max_err_over_tol\": ");
        if (isinf(r->max_ratio)) printf("\"inf\"");
        else harness_json_number(stdout, r->ran ? r->max_ratio : NAN);
        printf(", \"out_of_tolerance\": %llu, \"seconds\": %.6f, \"pass\": %s", (unsigned long long)r->out_of_tolerance,
               r->op_seconds, r->pass ? "true" : "false");
        if (r->error[0] != '\0') {
            printf(", \"error\": ");
            harness_json_string(stdout, r->error);
        }
        if (r->bit_mismatches > 0) {
            printf(", \"first_difference\": ");
            harness_json_string(stdout, r->first_mismatch);
        }
        if (!r->pass && r->worst[0] != '\0' && (r->out_of_tolerance > 0 || r->max_ratio > 1.0)) {
            printf(", \"worst\": ");
            harness_json_string(stdout, r->worst);
        }
        if (r->tree == 0) {
            printf(", \"tree_difference\": ");
            harness_json_string(stdout, r->tree_note);
        }
        printf("}");
    }
    printf("\n  ],\n  \"results_count\": %zu,\n  \"failures\": %d,\n  \"pass\": %s\n}\n", st->n_results, failures,
           failures == 0 ? "true" : "false");
}

/* ---- Backends -------------------------------------------------------------------- */

static const tally_backend backend_order[] = {TALLY_BACKEND_HOST, TALLY_BACKEND_OPENCL, TALLY_BACKEND_CUDA};

static int parse_backends(xc_state *st, const char *list)
{
    for (int b = 0; b < 3; b++)
        st->wanted[backend_order[b]] = list == NULL ? 1 : backend_order[b] == TALLY_BACKEND_HOST ? 1 : 0;
    if (list == NULL) return 0;
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char name[32];
        if (n == 0 || n >= sizeof name) return -1;
        memcpy(name, p, n);
        name[n] = '\0';
        tally_backend be;
        if (tally_backend_from_name(name, &be) != TALLY_OK || be == TALLY_BACKEND_AUTO) return -1;
        st->wanted[be] = 2; /* named explicitly */
        if (comma == NULL) break;
        p = comma + 1;
    }
    return 0;
}

static xc_target *add_target(xc_state *st, tally_backend backend, int device)
{
    if (st->n_targets == XC_MAX_TARGETS) return NULL;
    xc_target *t = &st->targets[st->n_targets++];
    memset(t, 0, sizeof *t);
    t->backend = backend;
    t->device = device;
    snprintf(t->label, sizeof t->label, "%s", tally_backend_name(backend));
    return t;
}

/* Opens a context on every device of every wanted backend. A backend that is
 * unavailable is skipped, unless it was named in --backends or is the host
 * (the reference): then no usable device is an error, printed here, and the
 * return value is CLI_EXIT_FAIL. A device that fails while others of its
 * backend work is reported as skipped. */
static int open_backends(xc_state *st)
{
    for (int b = 0; b < 3; b++) {
        tally_backend backend = backend_order[b];
        const char *name = tally_backend_name(backend);
        int explicit = st->wanted[backend] == 2 || backend == TALLY_BACKEND_HOST;
        xc_target *t;
        if (!st->wanted[backend]) {
            if ((t = add_target(st, backend, -1)) != NULL) snprintf(t->reason, sizeof t->reason, "not requested");
            continue;
        }
        tally_device_info devices[XC_MAX_TARGETS];
        int count = 0, used = 0;
        tally_status status = tally_devices(backend, devices, XC_MAX_TARGETS, &count);
        if (status == TALLY_OK && count == 0) status = TALLY_NO_DEVICE;
        if (status != TALLY_OK) {
            const char *why = tally_last_error(NULL);
            if (explicit) {
                fprintf(stderr, "error: %s: %s backend: %s\n", tally_status_name(status), name, why);
                return CLI_EXIT_FAIL;
            }
            if ((t = add_target(st, backend, -1)) != NULL)
                snprintf(t->reason, sizeof t->reason, "%s: %s", tally_status_name(status), why);
            if (!st->json) fprintf(stderr, "crosscheck: skipping %s: %s: %s\n", name, tally_status_name(status), why);
            continue;
        }
        if (count > XC_MAX_TARGETS) count = XC_MAX_TARGETS;
        for (int d = 0; d < count; d++) {
            if ((t = add_target(st, backend, devices[d].index)) == NULL) break;
            if (count > 1) snprintf(t->label, sizeof t->label, "%s:%d", name, devices[d].index);
            snprintf(t->name, sizeof t->name, "%s", devices[d].name);
            if (!st->json) cli_note_first_opencl_use(backend);
            status = tally_context_create(backend, devices[d].index, &t->ctx);
            if (status != TALLY_OK) {
                snprintf(t->reason, sizeof t->reason, "%s: %s", tally_status_name(status), tally_last_error(NULL));
                fprintf(stderr, "crosscheck: skipping %s device %d (%s): %s\n", name, devices[d].index,
                        devices[d].name, t->reason);
                continue;
            }
            t->used = 1;
            used++;
            snprintf(t->name, sizeof t->name, "%s", tally_context_device_name(t->ctx));
        }
        if (used == 0 && explicit) {
            fprintf(stderr, "error: no device of the %s backend could be used\n", name);
            return CLI_EXIT_FAIL;
        }
    }
    return CLI_EXIT_OK;
}

/* ---- Entry -------------------------------------------------------------------------- */

int cli_crosscheck(int argc, char **argv)
{
    const char *usage = cli_crosscheck_usage;
    enum { O_BACKENDS, O_OPS, O_QUICK, O_JSON, O_DTYPE, O_OUT_DTYPE, O_HELP };
    static const harness_option options[] = {
        {.name = "backends", .has_value = 1, .id = O_BACKENDS},
        {.name = "ops", .has_value = 1, .id = O_OPS},
        {.name = "quick", .has_value = 0, .id = O_QUICK},
        {.name = "json", .has_value = 0, .id = O_JSON},
        {.name = "dtype", .has_value = 1, .id = O_DTYPE},
        {.name = "out-dtype", .has_value = 1, .id = O_OUT_DTYPE},
        {.name = "help", .has_value = 0, .id = O_HELP},
    };
    xc_state st;
    memset(&st, 0, sizeof st);
    st.dtypes = 1u;
    st.out_dtypes = 7u;
    const char *list = NULL;
    harness_args args = HARNESS_ARGS(argc, argv, 0, options);
    for (int id; (id = harness_args_next(&args)) != HARNESS_ARGS_DONE;) {
        const char *value = args.value;
        switch (id) {
        case O_BACKENDS: list = value; break;
        case O_OPS: st.ops_filter = value; break;
        case O_QUICK: st.quick = 1; break;
        case O_JSON: st.json = 1; break;
        case O_DTYPE:
        case O_OUT_DTYPE: {
            unsigned *set = id == O_DTYPE ? &st.dtypes : &st.out_dtypes;
            *set = 0;
            for (const char *p = value;;) {
                const char *comma = strchr(p, ',');
                size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
                if (n == 3 && strncmp(p, "all", 3) == 0) *set |= 7u;
                else if (n == 3 && strncmp(p, "f32", 3) == 0) *set |= 1u;
                else if (n == 4 && strncmp(p, "bf16", 4) == 0) *set |= 2u;
                else if (n == 3 && strncmp(p, "f16", 3) == 0) *set |= 4u;
                else
                    return cli_usage_error(usage, "crosscheck: --%s: unknown type '%.*s'",
                                           id == O_DTYPE ? "dtype" : "out-dtype", (int)n, p);
                if (comma == NULL) break;
                p = comma + 1;
            }
            break;
        }
        case O_HELP: fputs(usage, stdout); return CLI_EXIT_OK;
        default: return cli_usage_error(usage, "crosscheck: %s", args.err);
        }
    }
    if (parse_backends(&st, list) != 0)
        return cli_usage_error(usage, "crosscheck: --backends '%s' is not a list of host, opencl, cuda", list);
    if (st.ops_filter != NULL) {
        for (const char *p = st.ops_filter;;) {
            const char *comma = strchr(p, ',');
            size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
            int ok = harness_op_find(p, n) >= 0;
            if (!ok) return cli_usage_error(usage, "crosscheck: --ops: unknown op '%.*s'", (int)n, p);
            if (comma == NULL) break;
            p = comma + 1;
        }
    }

    int rc = open_backends(&st);
    if (rc == CLI_EXIT_OK) {
        st.tty = isatty(fileno(stderr));
        st.count_only = 1;
        catalogue(&st);
        st.total = st.index;
        st.index = 0;
        st.count_only = 0;
        double t0 = cli_now();
        catalogue(&st);
        if (st.tty) fprintf(stderr, "\r\033[K");
        int failures = 0;
        for (size_t i = 0; i < st.n_results; i++) failures += !st.results[i].pass;
        if (st.fatal) {
            fprintf(stderr, "error: OUT_OF_MEMORY: crosscheck stopped early\n");
            failures++;
        }
        if (st.json) {
            print_json(&st, failures);
        } else {
            print_table(&st);
            int used = 0;
            printf("\nbackends:");
            for (int b = 0; b < st.n_targets; b++) {
                const xc_target *be = &st.targets[b];
                used += be->used;
                if (be->used) printf(" %s (%s)", be->label, be->name);
                else if (st.wanted[be->backend]) printf(" [%s skipped: %s]", be->label, be->reason);
            }
            printf("\n%d cases x %d device%s = %zu results in %.1f s: ", st.total, used, used == 1 ? "" : "s",
                   st.n_results, cli_now() - t0);
            if (failures == 0) printf("all bit-identical with the host and within tolerance of float64\n");
            else printf("%d FAILED\n", failures);
        }
        rc = failures == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
        if (fflush(stdout) != 0 || ferror(stdout)) rc = cli_io_error("cannot write to standard output");
    }
    for (int b = 0; b < st.n_targets; b++) tally_context_release(st.targets[b].ctx);
    free(st.results);
    return rc;
}
