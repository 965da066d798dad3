/*
 * src/ops_backward.c - the public gradient ops: every argument checked here,
 * once (with ops.c's own view checks, through src/ops_check.h), the trees
 * planned, and a validated job handed to the backend.
 */
#include "ops_check.h"
#include "tally/terms.h"

/* An output of the given shape, or absent (buffer NULL: *out keeps a NULL
 * buffer). */
static tally_status check_grad_output(tally_context *ctx, const char *op, const char *arg, tally_view v,
                                      uint64_t rows, uint64_t cols, tally__array *out)
{
    *out = (tally__array){.buffer = NULL};
    if (v.buffer == NULL) return TALLY_OK;
    CHECK(tally__check_view(ctx, op, arg, v, TALLY_F32, out));
    if (out->rows != rows || out->cols != cols)
        return tally__error(ctx, TALLY_SHAPE_MISMATCH, "%s: %s is %llu x %llu but must be %llu x %llu", op, arg,
                            (unsigned long long)out->rows, (unsigned long long)out->cols, (unsigned long long)rows,
                            (unsigned long long)cols);
    return TALLY_OK;
}

/* Every pair of (output, input) and (output, output) is disjoint. */
static tally_status check_all_disjoint(tally_context *ctx, const char *op, const tally__array *const *outs,
                                       const char *const *out_names, int nout, const tally__array *const *ins,
                                       const char *const *in_names, int nin)
{
    for (int o = 0; o < nout; o++) {
        if (outs[o]->buffer == NULL) continue;
        for (int i = 0; i < nin; i++) CHECK(tally__check_disjoint(ctx, op, out_names[o], outs[o], in_names[i], ins[i]));
        for (int p = o + 1; p < nout; p++)
            if (outs[p]->buffer != NULL)
                CHECK(tally__check_disjoint(ctx, op, out_names[o], outs[o], out_names[p], outs[p]));
    }
    return TALLY_OK;
}

static tally_status no_kernels(tally_context *ctx, const char *op)
{
    return tally__error(ctx, TALLY_BACKEND_ERROR, "%s: the %s backend has no gradient kernels", op,
                        ctx->ops->name);
}

tally_status tally_kl_div_backward(tally_context *ctx, tally_view input, tally_view target, tally_view grad_out,
                                   tally_reduction reduction, unsigned flags, tally_view grad_input,
                                   tally_view grad_target)
{
    static const char name[] = "tally_kl_div_backward";
    BEGIN(name);
    tally__kl_backward_job job = {.reduction = reduction, .divide = 0, .divisor = 1.0f};
    CHECK(tally__check_kl_args(ctx, name, input, target, reduction, flags, TALLY_F32, TALLY_F32, "grad_out", grad_out,
                               &job.input, &job.target, &job.grad_out, &job.flags));
    if (flags & (TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS))
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "%s: the logits flags (TALLY_KL_INPUT_LOGITS, TALLY_KL_TARGET_LOGITS) have no backward "
                            "pass yet; differentiate kl_div of explicit log-probabilities instead",
                            name);
    const uint64_t rows = job.input.rows, cols = job.input.cols, n = rows * cols;
    if (reduction != TALLY_REDUCTION_NONE) {
        /* (float)n and (float)rows: the forward's own conversions. */
        job.divide = reduction != TALLY_REDUCTION_SUM;
        job.divisor = reduction == TALLY_REDUCTION_MEAN ? (float)n : reduction == TALLY_REDUCTION_BATCHMEAN
                                                                         ? (float)rows
                                                                         : 1.0f;
    }
    CHECK(check_grad_output(ctx, name, "grad_input", grad_input, rows, cols, &job.grad_input));
    CHECK(check_grad_output(ctx, name, "grad_target", grad_target, rows, cols, &job.grad_target));
    const tally__array *outs[2] = {&job.grad_input, &job.grad_target};
    const char *const out_names[2] = {"grad_input", "grad_target"};
    const tally__array *ins[3] = {&job.input, &job.target, &job.grad_out};
    const char *const in_names[3] = {"input", "target", "grad_out"};
    CHECK(check_all_disjoint(ctx, name, outs, out_names, 2, ins, in_names, 3));
    if (n == 0 || (job.grad_input.buffer == NULL && job.grad_target.buffer == NULL)) return TALLY_OK;
    if (ctx->ops->kl_div_backward == NULL) return no_kernels(ctx, name);
    return ctx->ops->kl_div_backward(ctx, &job);
}

tally_status tally_dirichlet_multinomial_backward(tally_context *ctx, tally_view counts, tally_view log_alpha,
                                                  tally_view grad_out, tally_reduction reduction, unsigned flags,
                                                  tally_view grad_log_alpha)
{
    static const char name[] = "tally_dirichlet_multinomial_backward";
    BEGIN(name);
    tally__dm_backward_job job = {.divide = 0, .divisor = 1.0f};
    CHECK(tally__check_dm_inputs(ctx, name, counts, log_alpha, reduction, flags, TALLY_F32, &job.counts,
                                 &job.log_alpha, &job.per_row_alpha));
    const uint64_t B = job.counts.rows, V = job.counts.cols;
    job.per_row_grad = reduction == TALLY_REDUCTION_NONE;
    CHECK(tally__check_vector(ctx, name, "grad_out", grad_out, TALLY_F32, job.per_row_grad ? B : 1, &job.grad_out));
    if (reduction == TALLY_REDUCTION_MEAN) {
        if (B == 0) return tally__error(ctx, TALLY_EMPTY_INPUT, "%s: mean over zero rows is undefined", name);
        job.divide = 1;
        job.divisor = (float)B; /* the forward's conversion */
    }
    if (grad_log_alpha.buffer == NULL)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: grad_log_alpha has no buffer", name);
    CHECK(check_grad_output(ctx, name, "grad_log_alpha", grad_log_alpha, job.log_alpha.rows, V, &job.grad_log_alpha));
    const tally__array *outs[1] = {&job.grad_log_alpha};
    const char *const out_names[1] = {"grad_log_alpha"};
    const tally__array *ins[3] = {&job.counts, &job.log_alpha, &job.grad_out};
    const char *const in_names[3] = {"counts", "log_alpha", "grad_out"};
    CHECK(check_all_disjoint(ctx, name, outs, out_names, 1, ins, in_names, 3));
    if (V == 0 || job.log_alpha.rows == 0) return TALLY_OK;
    if (ctx->ops->dirichlet_multinomial_backward == NULL) return no_kernels(ctx, name);
    job.row_plan = tally__plan_vector(V);
    job.col_plan = tally__plan_vector(B);
    return ctx->ops->dirichlet_multinomial_backward(ctx, &job);
}

/* Checks shared by the two mixture backward passes, after job->fwd holds
 * the parameters: the upstream gradients and the outputs. */
static tally_status check_gmm_grads(tally_context *ctx, const char *name, tally__gmm_backward_job *job,
                                    tally_view grad_log_q, tally_view grad_z_in, tally_view grad_z,
                                    tally_view grad_mu, tally_view grad_log_var, tally_view grad_logits)
{
    const tally__gmm_job *f = &job->fwd;
    const uint64_t B = f->mu.rows, K = f->components, D = f->dim;
    job->grad_log_q = (tally__array){.buffer = NULL};
    if (grad_log_q.buffer != NULL)
        CHECK(tally__check_vector(ctx, name, "grad_log_q", grad_log_q, TALLY_F32, B, &job->grad_log_q));
    CHECK(check_grad_output(ctx, name, "grad_z", grad_z_in, B, D, &job->grad_z_in));
    CHECK(check_grad_output(ctx, name, "grad_z", grad_z, B, D, &job->grad_z));
    CHECK(check_grad_output(ctx, name, "grad_mu", grad_mu, B, K * D, &job->grad_mu));
    CHECK(check_grad_output(ctx, name, "grad_log_var", grad_log_var, B, K * D, &job->grad_log_var));
    job->grad_logits = (tally__array){.buffer = NULL};
    if (K > 1 && grad_logits.buffer != NULL) {
        CHECK(tally__check_vector(ctx, name, "grad_logits", grad_logits, TALLY_F32, K, &job->grad_logits));
    }
    const tally__array *outs[4] = {&job->grad_z, &job->grad_mu, &job->grad_log_var, &job->grad_logits};
    const char *const out_names[4] = {"grad_z", "grad_mu", "grad_log_var", "grad_logits"};
    const tally__array none = {.buffer = NULL};
    const tally__array *ins[6] = {&f->z, &f->mu, &f->log_var, K > 1 ? &f->logits : &none, &job->grad_log_q,
                                  &job->grad_z_in};
    const char *const in_names[6] = {"z", "mu", "log_var", "logits", "grad_log_q", "grad_z"};
    for (int o = 0; o < 4; o++) {
        if (outs[o]->buffer == NULL) continue;
        for (int i = 0; i < 6; i++)
            if (ins[i]->buffer != NULL) CHECK(tally__check_disjoint(ctx, name, out_names[o], outs[o], in_names[i], ins[i]));
        for (int p = o + 1; p < 4; p++)
            if (outs[p]->buffer != NULL)
                CHECK(tally__check_disjoint(ctx, name, out_names[o], outs[o], out_names[p], outs[p]));
    }
    job->col_plan = tally__plan_vector(B);
    return TALLY_OK;
}

static int gmm_nothing_wanted(const tally__gmm_backward_job *job)
{
    return job->grad_z.buffer == NULL && job->grad_mu.buffer == NULL && job->grad_log_var.buffer == NULL &&
           job->grad_logits.buffer == NULL;
}

tally_status tally_gmm_log_prob_backward(tally_context *ctx, tally_view z, tally_view mu, tally_view log_var,
                                         tally_view logits, int64_t components, tally_view grad_log_q,
                                         tally_view grad_z, tally_view grad_mu, tally_view grad_log_var,
                                         tally_view grad_logits)
{
    static const char name[] = "tally_gmm_log_prob_backward";
    BEGIN(name);
    tally__gmm_backward_job job = {.sample = 0};
    CHECK(tally__check_view(ctx, name, "z", z, TALLY_F32, &job.fwd.z));
    const uint64_t B = job.fwd.z.rows, D = job.fwd.z.cols;
    CHECK(tally__check_gmm_params(ctx, name, mu, log_var, logits, components, B, D, TALLY_F32, &job.fwd));
    if (grad_log_q.buffer == NULL)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT, "%s: grad_log_q has no buffer", name);
    CHECK(check_gmm_grads(ctx, name, &job, grad_log_q, (tally_view){.buffer = NULL}, grad_z, grad_mu, grad_log_var,
                          grad_logits));
    if (B == 0 || gmm_nothing_wanted(&job)) return TALLY_OK;
    if (ctx->ops->gmm_backward == NULL) return no_kernels(ctx, name);
    return ctx->ops->gmm_backward(ctx, &job);
}

tally_status tally_gmm_sample_backward(tally_context *ctx, tally_view mu, tally_view log_var, tally_view logits,
                                       int64_t components, tally_rng rng, tally_view grad_z, tally_view grad_log_q,
                                       tally_view grad_mu, tally_view grad_log_var, tally_view grad_logits)
{
    static const char name[] = "tally_gmm_sample_backward";
    BEGIN(name);
    tally__gmm_backward_job job = {.sample = 1};
    job.fwd.rng = rng;
    if (components < 1 || components > INT32_MAX)
        return tally__error(ctx, TALLY_INVALID_ARGUMENT,
                            "%s: components is %lld, must be in [1, 2^31 - 1] (indices are int32)", name,
                            (long long)components);
    /* B and D from mu [B, K*D]. */
    tally__array m;
    CHECK(tally__check_view(ctx, name, "mu", mu, TALLY_F32, &m));
    if (m.cols % (uint64_t)components != 0)
        return tally__error(ctx, TALLY_SHAPE_MISMATCH, "%s: mu has %llu columns, not a multiple of K = %lld", name,
                            (unsigned long long)m.cols, (long long)components);
    const uint64_t B = m.rows, D = m.cols / (uint64_t)components;
    CHECK(tally__check_gmm_params(ctx, name, mu, log_var, logits, components, B, D, TALLY_F32, &job.fwd));
    CHECK(check_gmm_grads(ctx, name, &job, grad_log_q, grad_z, (tally_view){.buffer = NULL}, grad_mu, grad_log_var,
                          grad_logits));
    /* The forward's draws: B4 component uniforms, then B rows of D2 normals. */
    uint64_t B4 = tally__round_up4(B), D2 = D + (D & 1u), normals, need;
    int overflow = (B != 0 && B4 == 0) || D2 < D || tally__mul_u64(B, D2, &normals);
    uint64_t normals4 = overflow ? 0 : tally__round_up4(normals);
    overflow = overflow || (normals != 0 && normals4 == 0) || tally__add_u64(B4, normals4, &need);
    CHECK(tally__check_rng(ctx, name, rng, overflow ? 0 : need, overflow));
    if (B == 0 || gmm_nothing_wanted(&job)) return TALLY_OK;
    if (ctx->ops->gmm_backward == NULL) return no_kernels(ctx, name);
    return ctx->ops->gmm_backward(ctx, &job);
}
