/*
 * tools/cli_exec.c - runs one op described by a cli_job through the public
 * API (see cli_exec.h).
 */
#include "cli_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "place.h"
#include "tally/half.h"

/* Poison around and (for outputs) inside the views before the op runs. The
 * input pattern is a quiet NaN, so a kernel that reads a gap poisons its
 * result; the output pattern is a NaN no op writes and not a valid index. */
#define POISON_INPUT 0x7fc0deadu
#define POISON_OUTPUT 0x7fa11a5eu
#define POISON_INPUT_HALF 0x7e5au /* a NaN as bf16 and as f16 */

static int is_half(tally_dtype d)
{
    return d == TALLY_BF16 || d == TALLY_F16;
}

/* Bytes per element on the device (host data is always 4 bytes). */
static size_t element_bytes(const cli_tensor *t)
{
    return is_half(t->dtype) ? 2u : 4u;
}

static void set_tensor(cli_tensor *t, const char *name, tally_dtype dtype, int64_t rows, int64_t cols,
                       int scalar)
{
    *t = (cli_tensor){.name = name, .dtype = dtype, .rows = rows, .cols = cols, .offset = 0,
                      .stride = cols, .pad_after = 0, .present = 1, .scalar = scalar, .data = NULL};
}

/* A loss's value (the forward's output y), or its gradient's upstream
 * gradient (input grad_out): rows x cols without a reduction (KL: one per
 * element; DM: one per row), else one scalar. */
static void set_loss_value(cli_job *job, int grad, int64_t rows, int64_t cols)
{
    cli_tensor *t = grad ? &job->in[2] : &job->out[0];
    const char *name = grad ? "grad_out" : "y";
    if (job->reduction == TALLY_REDUCTION_NONE) set_tensor(t, name, TALLY_F32, rows, cols, 0);
    else set_tensor(t, name, TALLY_F32, 1, 1, 1);
}

uint64_t cli_tensor_count(const cli_tensor *t)
{
    return (uint64_t)t->rows * (uint64_t)t->cols;
}

/* rows*cols elements of 4 bytes must fit int64 and size_t. */
static int count_fits(int64_t rows, int64_t cols)
{
    if (rows < 0 || cols < 0) return 0;
    if (rows == 0 || cols == 0) return 1;
    uint64_t limit = (uint64_t)INT64_MAX / 4u;
    if ((uint64_t)SIZE_MAX / 4u < limit) limit = (uint64_t)SIZE_MAX / 4u;
    return (uint64_t)rows <= limit / (uint64_t)cols;
}

int cli_job_start(cli_job *job, const char *name)
{
    memset(job, 0, sizeof *job);
    int op = harness_op_find(name, strlen(name));
    if (op < 0) return -1;
    job->reduce_op = harness_op_reduce((harness_op)op);
    job->kind = job->reduce_op != 0 ? CLI_OP_REDUCE : (cli_op_kind)op;
    job->axis = TALLY_AXIS_ALL;
    job->reduction =
        job->kind == CLI_OP_KL || job->kind == CLI_OP_KL_BACKWARD ? TALLY_REDUCTION_MEAN : TALLY_REDUCTION_NONE;
    return op;
}

/* The index of value among names, or -1. */
static int choice(const char *value, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0) return i;
    return -1;
}

int cli_job_option(cli_job *job, int id, const char *value, int64_t *count)
{
    /* Names in the order of their enums' values, which start at 1. */
    static const char *const axes[] = {"all", "row"};
    static const char *const reductions[] = {"none", "sum", "mean", "batchmean"};
    static const char *const dists[] = {"raw", "uniform", "normal"};
    int c = 0;
    switch (id) {
    case CLI_JOB_OPT_ROWS: return cli_parse_size(value, &job->rows);
    case CLI_JOB_OPT_COLS: return cli_parse_size(value, &job->cols);
    case CLI_JOB_OPT_BATCH: return cli_parse_size(value, &job->batch);
    case CLI_JOB_OPT_COMPONENTS: return cli_parse_size(value, &job->components);
    case CLI_JOB_OPT_DIM: return cli_parse_size(value, &job->dim);
    case CLI_JOB_OPT_COUNT: return cli_parse_size(value, count);
    case CLI_JOB_OPT_SEED: return cli_parse_u64(value, &job->rng.seed);
    case CLI_JOB_OPT_SUBSEQUENCE: return cli_parse_u64(value, &job->rng.subsequence);
    case CLI_JOB_OPT_OFFSET: return cli_parse_u64(value, &job->rng.offset);
    case CLI_JOB_OPT_AXIS:
        c = choice(value, axes, 2);
        job->axis = c == 1 ? TALLY_AXIS_ROW : TALLY_AXIS_ALL;
        return c < 0 ? -1 : 0;
    case CLI_JOB_OPT_REDUCTION:
        c = choice(value, reductions, job->kind == CLI_OP_KL || job->kind == CLI_OP_KL_BACKWARD ? 4 : 3);
        job->reduction = c < 0 ? TALLY_REDUCTION_NONE : (tally_reduction)c;
        return c < 0 ? -1 : 0;
    case CLI_JOB_OPT_DIST:
        c = choice(value, dists, 3);
        job->dist = (tally_distribution)(c + 1);
        return c < 0 ? -1 : 0;
    case CLI_JOB_OPT_INPUT_IS_PROB: job->flags |= TALLY_KL_INPUT_IS_PROB; return 0;
    case CLI_JOB_OPT_LOG_TARGET: job->flags |= TALLY_KL_LOG_TARGET; return 0;
    case CLI_JOB_OPT_INPUT_LOGITS: job->flags |= TALLY_KL_INPUT_LOGITS; return 0;
    case CLI_JOB_OPT_TARGET_LOGITS: job->flags |= TALLY_KL_TARGET_LOGITS; return 0;
    case CLI_JOB_OPT_WITH_COEFFICIENT: job->flags |= TALLY_DM_WITH_COEFFICIENT; return 0;
    case CLI_JOB_OPT_PER_ROW_ALPHA: job->per_row_alpha = 1; return 0;
    case CLI_JOB_OPT_LOGITS: job->flags |= TALLY_CATEGORICAL_LOGITS; return 0;
    }
    return -1;
}

int cli_file_arg_parse(const char *arg, cli_file_arg *out)
{
    const char *eq = strchr(arg, '=');
    if (eq == NULL || eq == arg || eq[1] == '\0') return -1;
    size_t len = (size_t)(eq - arg);
    if (len >= sizeof out->name) return -1;
    memcpy(out->name, arg, len);
    out->name[len] = '\0';
    out->path = eq + 1;
    return 0;
}

/* The index of the tensor called name among n, or -1. */
static int tensor_named(const cli_tensor *t, int n, const char *name)
{
    for (int k = 0; k < n; k++)
        if (strcmp(t[k].name, name) == 0) return k;
    return -1;
}

int cli_job_match_files(cli_job *job, const cli_file_arg *ins, int n_ins, const cli_file_arg *outs, int n_outs,
                        const char **in_path, const char **out_path, char *err, size_t err_size)
{
    for (int k = 0; k < CLI_MAX_TENSORS; k++) in_path[k] = out_path[k] = NULL;
    for (int i = 0; i < n_ins + n_outs; i++) {
        const int is_in = i < n_ins;
        const cli_file_arg *f = is_in ? &ins[i] : &outs[i - n_ins];
        const int k = is_in ? tensor_named(job->in, job->n_in, f->name) : tensor_named(job->out, job->n_out, f->name);
        if (k < 0) {
            snprintf(err, err_size, "the op has no %s named '%s'", is_in ? "input" : "output", f->name);
            return -1;
        }
        if (is_in) job->in[k].present = 1;
        (is_in ? in_path : out_path)[k] = f->path;
    }
    for (int k = 0; k < job->n_in; k++)
        if (job->in[k].present && in_path[k] == NULL) {
            snprintf(err, err_size, "missing --in %s=PATH", job->in[k].name);
            return -1;
        }
    return 0;
}

int cli_job_layout(cli_job *job, char *err, size_t err_size)
{
    const int64_t R = job->rows, C = job->cols, B = job->batch, D = job->dim;
    const int64_t K = job->components > 0 ? job->components : 0;
    job->n_in = job->n_out = 0;
    memset(job->in, 0, sizeof job->in);
    memset(job->out, 0, sizeof job->out);
    int64_t KD = 0;
    switch (job->kind) {
    case CLI_OP_REDUCE:
        set_tensor(&job->in[0], "x", TALLY_F32, R, C, 0);
        if (job->axis == TALLY_AXIS_ROW) set_tensor(&job->out[0], "y", TALLY_F32, R, 1, 0);
        else set_tensor(&job->out[0], "y", TALLY_F32, 1, 1, 1);
        job->n_in = job->n_out = 1;
        break;
    case CLI_OP_KL:
    case CLI_OP_KL_BACKWARD: {
        const int grad = job->kind == CLI_OP_KL_BACKWARD;
        set_tensor(&job->in[0], "input", TALLY_F32, R, C, 0);
        set_tensor(&job->in[1], "target", TALLY_F32, R, C, 0);
        set_loss_value(job, grad, R, C);
        if (grad) {
            set_tensor(&job->out[0], "grad_input", TALLY_F32, R, C, 0);
            set_tensor(&job->out[1], "grad_target", TALLY_F32, R, C, 0);
        }
        job->n_in = grad ? 3 : 2;
        job->n_out = grad ? 2 : 1;
        break;
    }
    case CLI_OP_DM:
    case CLI_OP_DM_BACKWARD: {
        const int grad = job->kind == CLI_OP_DM_BACKWARD;
        const int64_t alpha_rows = job->per_row_alpha ? R : 1;
        set_tensor(&job->in[0], "counts", TALLY_F32, R, C, 0);
        set_tensor(&job->in[1], "log_alpha", TALLY_F32, alpha_rows, C, 0);
        set_loss_value(job, grad, R, 1);
        if (grad) set_tensor(&job->out[0], "grad_log_alpha", TALLY_F32, alpha_rows, C, 0);
        job->n_in = grad ? 3 : 2;
        job->n_out = 1;
        break;
    }
    case CLI_OP_GMM_LOG_PROB:
    case CLI_OP_GMM_SAMPLE:
    case CLI_OP_GMM_LOG_PROB_BACKWARD:
    case CLI_OP_GMM_SAMPLE_BACKWARD: {
        if (!count_fits(K, D)) {
            snprintf(err, err_size, "components x dim = %lld x %lld is too large", (long long)K, (long long)D);
            return -1;
        }
        KD = K * D;
        const int lp = job->kind == CLI_OP_GMM_LOG_PROB || job->kind == CLI_OP_GMM_LOG_PROB_BACKWARD;
        const int grad = job->kind == CLI_OP_GMM_LOG_PROB_BACKWARD || job->kind == CLI_OP_GMM_SAMPLE_BACKWARD;
        cli_tensor *in = job->in;
        if (lp) set_tensor(in++, "z", TALLY_F32, B, D, 0);
        set_tensor(in++, "mu", TALLY_F32, B, KD, 0);
        set_tensor(in++, "log_var", TALLY_F32, B, KD, 0);
        set_tensor(in, "logits", TALLY_F32, 1, K, 0);
        in->present = K > 1; /* ignored by the library when K == 1 */
        in++;
        if (grad && !lp) set_tensor(in++, "grad_z", TALLY_F32, B, D, 0);
        if (grad) set_tensor(in++, "grad_log_q", TALLY_F32, B, 1, 0);
        job->n_in = (int)(in - job->in);
        cli_tensor *out = job->out;
        if (!grad) {
            if (!lp) set_tensor(out++, "z", TALLY_F32, B, D, 0);
            set_tensor(out++, "log_q", TALLY_F32, B, 1, 0);
            if (!lp) set_tensor(out++, "component", TALLY_I32, B, 1, 0);
        } else {
            if (lp) set_tensor(out++, "grad_z", TALLY_F32, B, D, 0);
            set_tensor(out++, "grad_mu", TALLY_F32, B, KD, 0);
            set_tensor(out++, "grad_log_var", TALLY_F32, B, KD, 0);
            if (K > 1) set_tensor(out++, "grad_logits", TALLY_F32, 1, K, 0); /* none when K == 1 */
        }
        job->n_out = (int)(out - job->out);
        break;
    }
    case CLI_OP_RNG:
        set_tensor(&job->out[0], "x", job->dist == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32, R, C, 0);
        job->n_out = 1;
        break;
    case CLI_OP_CATEGORICAL:
        set_tensor(&job->in[0], "weights", TALLY_F32, R, C, 0);
        set_tensor(&job->out[0], "index", TALLY_I32, R, 1, 0);
        job->n_in = job->n_out = 1;
        break;
    default:
        snprintf(err, err_size, "unknown op kind %d", (int)job->kind);
        return -1;
    }
    /* Every input of these ops is floating. */
    if (is_half(job->in_dtype))
        for (int i = 0; i < job->n_in; i++) job->in[i].dtype = job->in_dtype;
    if (is_half(job->out_dtype)) {
        const int k = cli_job_half_output(job);
        if (k < 0) {
            snprintf(err, err_size,
                     "a half output type is only for kl_div with reduction none, rng uniform and normal, and "
                     "gmm_sample's z");
            return -1;
        }
        job->out[k].dtype = job->out_dtype;
    }
    for (int i = 0; i < job->n_in + job->n_out; i++) {
        const cli_tensor *t = i < job->n_in ? &job->in[i] : &job->out[i - job->n_in];
        if (!count_fits(t->rows, t->cols)) {
            snprintf(err, err_size, "%s [%lld x %lld] is too large", t->name, (long long)t->rows,
                     (long long)t->cols);
            return -1;
        }
    }
    return 0;
}

int cli_job_half_output(const cli_job *job)
{
    switch (job->kind) {
    case CLI_OP_KL: return job->reduction == TALLY_REDUCTION_NONE ? 0 : -1;
    case CLI_OP_RNG: return job->dist == TALLY_DIST_UNIFORM || job->dist == TALLY_DIST_NORMAL ? 0 : -1;
    case CLI_OP_GMM_SAMPLE: return 0; /* z */
    default: return -1;
    }
}

/* The tensor's window in its buffer. */
static harness_window window_of(const cli_tensor *t)
{
    return (harness_window){.rows = t->rows, .cols = t->cols, .offset = t->offset, .stride = t->stride};
}

/* Elements of the tensor's buffer: its view plus the gaps around it. */
static int buffer_elements(const cli_tensor *t, uint64_t *out)
{
    const harness_window w = window_of(t);
    return harness_window_extent(&w, (uint64_t)t->pad_after, out);
}

static size_t row_stride(const cli_tensor *t)
{
    return t->rows > 1 ? (size_t)t->stride : (size_t)t->cols;
}

/* A half tensor's host data are floats that the type represents exactly
 * (cli_round_to_dtype); they are narrowed to its encoding here. */
static void scatter(const cli_tensor *t, uint32_t *stage)
{
    const uint32_t *src = t->data;
    size_t stride = row_stride(t), cols = (size_t)t->cols;
    if (is_half(t->dtype)) {
        uint16_t *h = (uint16_t *)(void *)stage;
        const float *f = t->data;
        for (size_t r = 0; r < (size_t)t->rows && cols > 0; r++)
            for (size_t c = 0; c < cols; c++) {
                const float v = f[r * cols + c];
                h[(size_t)t->offset + r * stride + c] =
                    (uint16_t)(t->dtype == TALLY_BF16 ? tally_f32_to_bf16(v) : tally_f32_to_f16(v));
            }
        return;
    }
    const harness_window w = window_of(t);
    harness_window_scatter(&w, src, stage);
}

/* A half output's view in the downloaded image of its buffer, widened into
 * t->data (exactly); returns 1 when a half outside the view changed from
 * the poison it was given. */
static int gather_half(cli_tensor *t, const uint32_t *stage, uint64_t elems)
{
    const uint16_t *h = (const uint16_t *)(const void *)stage;
    const size_t stride = row_stride(t), cols = (size_t)t->cols, rows = (size_t)t->rows;
    float *dense = t->data;
    int changed = 0;
    size_t pos = 0;
    for (size_t r = 0; r < rows && cols > 0; r++) {
        const size_t begin = (size_t)t->offset + r * stride;
        for (; pos < begin; pos++) changed |= h[pos] != POISON_INPUT_HALF;
        for (size_t c = 0; c < cols; c++)
            dense[r * cols + c] = t->dtype == TALLY_BF16 ? tally_bf16_to_f32(h[begin + c]) : tally_f16_to_f32(h[begin + c]);
        pos = begin + cols;
    }
    for (; pos < (size_t)elems; pos++) changed |= h[pos] != POISON_INPUT_HALF;
    return changed;
}

void cli_round_to_dtype(tally_dtype dtype, float *x, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        if (dtype == TALLY_BF16) x[i] = tally_bf16_to_f32(tally_f32_to_bf16(x[i]));
        else if (dtype == TALLY_F16) x[i] = tally_f16_to_f32(tally_f32_to_f16(x[i]));
    }
}

void cli_job_free_outputs(cli_job *job)
{
    for (int i = 0; i < job->n_out; i++) {
        free(job->out[i].data);
        job->out[i].data = NULL;
    }
}

typedef struct placed {
    tally_buffer *buf;
    uint32_t *stage;
    uint64_t elems;
} placed;

static tally_view view_of(const cli_tensor *t, const placed *p)
{
    if (!t->present) return (tally_view){.buffer = NULL, .offset = 0, .rows = 0, .cols = 0, .stride = 0,
                                         .dtype = t->dtype};
    return (tally_view){.buffer = p->buf, .offset = t->offset, .rows = t->rows, .cols = t->cols,
                        .stride = t->rows > 1 ? t->stride : t->cols, .dtype = t->dtype};
}

static tally_status fail_host(cli_job *job, const char *what)
{
    snprintf(job->error, sizeof job->error, "out of host memory for %s", what);
    return TALLY_OUT_OF_MEMORY;
}

static tally_status run_op(tally_context *ctx, cli_job *job, const tally_view *in, const tally_view *out)
{
    uint64_t *consumed = &job->consumed;
    switch (job->kind) {
    case CLI_OP_REDUCE: return tally_reduce(ctx, job->reduce_op, job->axis, in[0], out[0]);
    case CLI_OP_KL: return tally_kl_div(ctx, in[0], in[1], job->reduction, job->flags, out[0]);
    case CLI_OP_DM: return tally_dirichlet_multinomial(ctx, in[0], in[1], job->reduction, job->flags, out[0]);
    case CLI_OP_GMM_LOG_PROB: return tally_gmm_log_prob(ctx, in[0], in[1], in[2], in[3], job->components, out[0]);
    case CLI_OP_GMM_SAMPLE:
        return tally_gmm_sample(ctx, in[0], in[1], in[2], job->components, job->rng, out[0], out[1], out[2],
                                consumed);
    case CLI_OP_RNG: return tally_rng_fill(ctx, job->dist, job->rng, out[0], consumed);
    case CLI_OP_CATEGORICAL: return tally_categorical(ctx, in[0], job->flags, job->rng, out[0], consumed);
    case CLI_OP_KL_BACKWARD:
        return tally_kl_div_backward(ctx, in[0], in[1], in[2], job->reduction, job->flags, out[0], out[1]);
    case CLI_OP_DM_BACKWARD:
        return tally_dirichlet_multinomial_backward(ctx, in[0], in[1], in[2], job->reduction, job->flags, out[0]);
    case CLI_OP_GMM_LOG_PROB_BACKWARD:
        return tally_gmm_log_prob_backward(ctx, in[0], in[1], in[2], in[3], job->components, in[4], out[0], out[1],
                                           out[2], out[3]);
    case CLI_OP_GMM_SAMPLE_BACKWARD:
        return tally_gmm_sample_backward(ctx, in[0], in[1], in[2], job->components, job->rng, in[3], in[4], out[0],
                                         out[1], out[2]);
    }
    return TALLY_INVALID_ARGUMENT;
}

tally_status cli_exec_run(tally_context *ctx, cli_job *job)
{
    placed in[CLI_MAX_TENSORS], out[CLI_MAX_TENSORS];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    tally_view vin[CLI_MAX_TENSORS], vout[CLI_MAX_TENSORS];
    tally_status st = TALLY_OK;
    job->consumed = 0;
    job->op_seconds = 0.0;
    job->wrote_outside = 0;
    job->error[0] = '\0';

    for (int k = 0; k < job->n_in + job->n_out && st == TALLY_OK; k++) {
        int is_in = k < job->n_in;
        cli_tensor *t = is_in ? &job->in[k] : &job->out[k - job->n_in];
        placed *p = is_in ? &in[k] : &out[k - job->n_in];
        if (!t->present) continue;
        if (buffer_elements(t, &p->elems) != 0) {
            snprintf(job->error, sizeof job->error, "%s's placement overflows", t->name);
            st = TALLY_SIZE_OVERFLOW;
            break;
        }
        uint64_t count = cli_tensor_count(t);
        p->stage = malloc(p->elems > 0 ? (size_t)p->elems * 4u : 4u);
        if (p->stage == NULL) {
            st = fail_host(job, t->name);
            break;
        }
        uint32_t poison = is_in ? POISON_INPUT : POISON_OUTPUT;
        harness_poison(p->stage, p->elems, poison);
        if (is_half(t->dtype))
            for (uint64_t i = 0; i < p->elems; i++) ((uint16_t *)(void *)p->stage)[i] = POISON_INPUT_HALF;
        if (is_in) {
            scatter(t, p->stage);
        } else {
            t->data = malloc(count > 0 ? (size_t)count * 4u : 4u);
            if (t->data == NULL) {
                st = fail_host(job, t->name);
                break;
            }
        }
        const size_t bytes = (size_t)p->elems * element_bytes(t);
        st = tally_buffer_create(ctx, bytes, &p->buf);
        if (st == TALLY_OK) st = tally_buffer_upload(p->buf, 0, p->stage, bytes);
        if (st != TALLY_OK) snprintf(job->error, sizeof job->error, "%s", tally_last_error(ctx));
        /* The input's staging copy is no longer needed once uploaded. */
        if (is_in) {
            free(p->stage);
            p->stage = NULL;
        }
    }

    if (st == TALLY_OK) {
        for (int i = 0; i < job->n_in; i++) vin[i] = view_of(&job->in[i], &in[i]);
        for (int i = job->n_in; i < CLI_MAX_TENSORS; i++) vin[i] = (tally_view){.buffer = NULL};
        for (int i = 0; i < job->n_out; i++) vout[i] = view_of(&job->out[i], &out[i]);
        for (int i = job->n_out; i < CLI_MAX_TENSORS; i++) vout[i] = (tally_view){.buffer = NULL};
        double t0 = cli_now();
        st = run_op(ctx, job, vin, vout);
        if (st == TALLY_OK) st = tally_sync(ctx);
        job->op_seconds = cli_now() - t0;
        if (st != TALLY_OK) snprintf(job->error, sizeof job->error, "%s", tally_last_error(ctx));
    }

    for (int i = 0; i < job->n_out && st == TALLY_OK; i++) {
        cli_tensor *t = &job->out[i];
        st = tally_buffer_download(out[i].buf, 0, out[i].stage, (size_t)out[i].elems * element_bytes(t));
        if (st != TALLY_OK) {
            snprintf(job->error, sizeof job->error, "%s", tally_last_error(ctx));
            break;
        }
        if (is_half(t->dtype)) {
            if (gather_half(t, out[i].stage, out[i].elems)) job->wrote_outside = 1;
            continue;
        }
        const harness_window w = window_of(t);
        if (harness_window_gather(&w, out[i].stage, out[i].elems, POISON_OUTPUT, t->data) >= 0) job->wrote_outside = 1;
    }

    for (int i = 0; i < CLI_MAX_TENSORS; i++) {
        tally_buffer_release(in[i].buf);
        tally_buffer_release(out[i].buf);
        free(in[i].stage);
        free(out[i].stage);
    }
    if (st != TALLY_OK) {
        if (job->error[0] == '\0') snprintf(job->error, sizeof job->error, "%s", tally_status_string(st));
        cli_job_free_outputs(job);
    }
    return st;
}
