/*
 * bench/bench_ops.c - tally-bench: times tally's ops through the public API
 * on one backend and compares them with bandwidth ceilings measured in the
 * same run. See bench/README.md for the workloads and what each number means.
 *
 * Every workload is checked after it is timed (outputs poisoned first, then
 * compared with an expectation or a float64 host computation), so a broken
 * kernel cannot post a fast time unnoticed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "bench.h"
#include "cases.h"
#include "json.h"
#include "rand.h"

#define POISON_F32 0x7fc00000u /* a quiet NaN */
#define GIB (1024.0 * 1024.0 * 1024.0)

/* ------------------------------------------------------------------------
 * Results.
 * ------------------------------------------------------------------------ */
typedef struct result {
    char workload[24];
    char shape[48];
    char what[96];
    int is_ceiling;
    int failed; /* the run stopped with an error (in error) */
    int ok;     /* the result passed its check */
    bench_timing t;
    double bytes_read, bytes_written;
    const char *ceiling; /* "read", "write" or "copy": the rate this workload is held to */
    int latency_bound;
    double value;
    char check[320];
    char error[1024];
    int64_t sets;
    double scale; /* the --scales entry this result ran at (ceilings: the scale they ran at) */
    harness_shape base; /* the workload's catalogue row (harness/cases.c) at scale 1 */
} result;

#define MAX_RESULTS 256
static result results[MAX_RESULTS];
static int result_count;
static FILE *json_out;
static double b_scale_now = 1.0; /* the scale being run, stamped on each new result */
static const char *run_label;     /* --label: names a variant build in the meta record */

static double result_gbps(const result *r)
{
    if (r->t.ms_median <= 0) return NAN;
    return (r->bytes_read + r->bytes_written) / (r->t.ms_median * 1e-3) / 1e9;
}

static double ceiling_gbps(const bench *b, const char *which)
{
    if (which == NULL) return NAN;
    double v = strcmp(which, "read") == 0 ? b->ceil_read : strcmp(which, "write") == 0 ? b->ceil_write : b->ceil_copy;
    return v > 0 ? v : NAN;
}

/* ---- JSON lines (harness/json.h) ---- */
static void json_common(harness_json *j, const bench *b, const char *record)
{
    harness_json_begin(j, json_out);
    harness_json_str(j, "record", record);
    harness_json_str(j, "bench", "tally");
    harness_json_str(j, "backend", tally_backend_name(b->backend));
}

static void json_result(const bench *b, const result *r)
{
    if (json_out == NULL) return;
    harness_json j;
    json_common(&j, b, r->failed ? "error" : r->is_ceiling ? "ceiling" : "result");
    harness_json_str(&j, "workload", r->workload);
    harness_json_str(&j, "shape", r->shape);
    harness_json_num(&j, "scale", r->scale);
    if (r->what[0]) harness_json_str(&j, "what", r->what);
    if (r->failed) {
        harness_json_str(&j, "error", r->error);
        harness_json_end(&j);
        return;
    }
    harness_json_bool(&j, "ok", r->ok);
    harness_json_num(&j, "ms", r->t.ms_median);
    harness_json_num(&j, "ms_min", r->t.ms_min);
    harness_json_num(&j, "ms_max", r->t.ms_max);
    harness_json_num(&j, "us", r->t.ms_median * 1e3);
    harness_json_int(&j, "batches", r->t.batches);
    harness_json_int(&j, "calls_per_batch", r->t.calls);
    harness_json_str(&j, "timer", r->t.timer);
    harness_json_num(&j, "wall_us_per_call", r->t.wall_us_median);
    harness_json_num(&j, "single_us", r->t.single_us);
    harness_json_bool(&j, "latency_bound", r->latency_bound);
    harness_json_num(&j, "bytes_read", r->bytes_read);
    harness_json_num(&j, "bytes_written", r->bytes_written);
    harness_json_num(&j, "gbps", result_gbps(r));
    if (!r->is_ceiling) {
        harness_json_str(&j, "ceiling", r->ceiling);
        harness_json_num(&j, "ceiling_gbps", ceiling_gbps(b, r->ceiling));
        harness_json_num(&j, "frac_ceiling", result_gbps(r) / ceiling_gbps(b, r->ceiling));
        harness_json_num(&j, "frac_read", result_gbps(r) / ceiling_gbps(b, "read"));
        harness_json_num(&j, "frac_copy", result_gbps(r) / ceiling_gbps(b, "copy"));
        harness_json_num(&j, "frac_write", result_gbps(r) / ceiling_gbps(b, "write"));
        harness_json_int(&j, "rotation_sets", r->sets);
    }
    harness_json_num(&j, "value", r->value);
    harness_json_str(&j, "check", r->check);
    harness_json_end(&j);
}

/* ---- the terminal ---- */
static void fmt_time(char *out, size_t size, double ms)
{
    if (!isfinite(ms))
        snprintf(out, size, "-");
    else if (ms < 1.0)
        snprintf(out, size, "%.2f us", ms * 1e3);
    else
        snprintf(out, size, "%.3f ms", ms);
}

static void print_row(const bench *b, const result *r)
{
    char tm[24], wall[24], single[24], frac[24];
    if (r->failed) {
        printf("%-12s %-16s FAILED: %s\n", r->workload, r->shape, r->error);
        return;
    }
    fmt_time(tm, sizeof tm, r->t.ms_median);
    fmt_time(wall, sizeof wall, r->t.wall_us_median * 1e-3);
    fmt_time(single, sizeof single, r->t.single_us * 1e-3);
    double f = r->is_ceiling ? NAN : result_gbps(r) / ceiling_gbps(b, r->ceiling);
    if (isfinite(f))
        snprintf(frac, sizeof frac, "%5.1f%% %s", 100.0 * f, r->ceiling);
    else
        snprintf(frac, sizeof frac, "%s", r->is_ceiling ? "(ceiling)" : "-");
    printf("%-12s %-16s %11s %11s %11s %9.1f  %-12s %-14.8g %s\n", r->workload, r->shape, tm,
           r->latency_bound ? wall : "", r->latency_bound ? single : "", result_gbps(r), frac, r->value,
           r->ok ? "ok" : "WRONG");
}

static void print_header(void)
{
    printf("%-12s %-16s %11s %11s %11s %9s  %-12s %-14s %s\n", "workload", "shape", "time/call", "wall/call",
           "single", "GB/s", "of ceiling", "value", "check");
}

static result *new_result(const char *name)
{
    if (result_count == MAX_RESULTS) return NULL;
    result *r = &results[result_count++];
    memset(r, 0, sizeof *r);
    snprintf(r->workload, sizeof r->workload, "%s", name);
    r->value = NAN;
    r->sets = 1;
    r->scale = b_scale_now;
    return r;
}

static void finish_result(const bench *b, result *r)
{
    if (r->failed && r->error[0] == '\0') snprintf(r->error, sizeof r->error, "%s", b->err);
    json_result(b, r);
    print_row(b, r);
    if (!r->failed && !r->ok) printf("             check: %s\n", r->check);
    fflush(stdout);
}

static void ceiling_report(bench *b, const char *name, const char *what, double bytes, const bench_timing *t,
                           double value, int ok, const char *check)
{
    result *r = new_result(name);
    if (r == NULL) return;
    r->is_ceiling = 1;
    r->t = *t;
    r->ok = ok;
    r->value = value;
    snprintf(r->shape, sizeof r->shape, "%.3f GiB", (strcmp(name, "ceil_copy") == 0 ? bytes / 2 : bytes) / GIB);
    snprintf(r->what, sizeof r->what, "%s", what);
    snprintf(r->check, sizeof r->check, "%s", check);
    if (strcmp(name, "ceil_write") == 0)
        r->bytes_written = bytes;
    else if (strcmp(name, "ceil_read") == 0)
        r->bytes_read = bytes;
    else
        r->bytes_read = r->bytes_written = bytes / 2;
    finish_result(b, r);
}

/* ------------------------------------------------------------------------
 * Workload helpers.
 * ------------------------------------------------------------------------ */
#define TCHK(b, name, call)                                                                           \
    do {                                                                                              \
        tally_status tchk_st_ = (call);                                                               \
        if (tchk_st_ != TALLY_OK)                                                                     \
            return bench_fail((b), "%s: %s: %s", (name), tally_status_name(tchk_st_),                 \
                              tally_last_error((b)->ctx));                                            \
    } while (0)

typedef struct wl_bufs {
    tally_buffer *list[8];
    int n;
} wl_bufs;

static int make_buffer(bench *b, wl_bufs *bufs, uint64_t elements, const char *what, tally_buffer **out)
{
    tally_status st = tally_buffer_create(b->ctx, (size_t)elements * 4u, out);
    if (st != TALLY_OK)
        return bench_fail(b, "tally_buffer_create(%s, %.3f GiB): %s: %s", what, (double)elements * 4 / GIB,
                          tally_status_name(st), tally_last_error(b->ctx));
    bufs->list[bufs->n++] = *out;
    return 0;
}

static void release_buffers(wl_bufs *bufs)
{
    for (int i = 0; i < bufs->n; i++) tally_buffer_release(bufs->list[i]);
    bufs->n = 0;
}

/* Runs a workload's body on its state with a fresh buffer list, which it
 * releases afterwards whatever the body returned. */
static int run_body(bench *b, result *r, int (*body)(bench *, result *, void *, wl_bufs *), void *state)
{
    if (b->plan_only) return 0;
    wl_bufs bufs = {.n = 0};
    int rc = body(b, r, state, &bufs);
    release_buffers(&bufs);
    return rc;
}

static int64_t scaled(const bench *b, int64_t n)
{
    double v = floor((double)n * b->scale + 0.5);
    return v < 1.0 ? 1 : (int64_t)v;
}

static int64_t round_up4(int64_t n)
{
    return (n + 3) & ~(int64_t)3;
}

/* How many copies of a set of inputs (and outputs) a batch rotates through,
 * so that together they are at least --rotate-mib. */
static int64_t rotation_sets(const bench *b, double set_bytes)
{
    if (b->rotate_bytes <= 0 || set_bytes >= b->rotate_bytes) return 1;
    double n = ceil(b->rotate_bytes / set_bytes);
    return n > 4096 ? 4096 : (int64_t)n;
}

static int fill_device(bench *b, tally_distribution dist, uint64_t seed, tally_buffer *buf, int64_t count)
{
    tally_rng rng = {.seed = seed, .subsequence = 0, .offset = 0};
    TCHK(b, "tally_rng_fill", tally_rng_fill(b->ctx, dist, rng, tally_view_f32(buf, 0, 1, count), NULL));
    return 0;
}

static int poison(bench *b, tally_buffer *buf, int64_t offset, int64_t count)
{
    TCHK(b, "tally_buffer_fill", tally_buffer_fill(buf, (size_t)offset * 4u, (size_t)count * 4u, POISON_F32));
    return 0;
}

static int download(bench *b, tally_buffer *buf, int64_t offset, int64_t count, void *dst)
{
    TCHK(b, "tally_buffer_download", tally_buffer_download(buf, (size_t)offset * 4u, dst, (size_t)count * 4u));
    return 0;
}

static int read_scalar(bench *b, tally_buffer *buf, int64_t offset, float *out)
{
    TCHK(b, "tally_read_scalar", tally_read_scalar(b->ctx, tally_view_f32(buf, offset, 1, 1), out));
    return 0;
}

static int all_finite(const float *v, int64_t n, int64_t *bad)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            *bad = i;
            return 0;
        }
    return 1;
}

static double host_uniform(uint64_t *state)
{
    return (double)(harness_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------------------------
 * kl: KL batchmean with INPUT_IS_PROB over two [16384, 16384] matrices.
 * ------------------------------------------------------------------------ */
typedef struct kl_state {
    tally_buffer *p, *t, *out;
    int64_t rows, cols, sets;
    unsigned flags; /* TALLY_KL_INPUT_IS_PROB (p given), 0 (log p given) or both logits flags */
} kl_state;

/* sum over one row of softmax(y) * (log_softmax(y) - log_softmax(x)), in
 * float64 (the logits form's reference). */
static double kl_logits_row64(const float *x, const float *y, int64_t cols)
{
    double mx = -INFINITY, my = -INFINITY, sx = 0.0, sy = 0.0, kl = 0.0;
    for (int64_t c = 0; c < cols; c++) {
        mx = fmax(mx, (double)x[c]);
        my = fmax(my, (double)y[c]);
    }
    for (int64_t c = 0; c < cols; c++) {
        sx += exp((double)x[c] - mx);
        sy += exp((double)y[c] - my);
    }
    for (int64_t c = 0; c < cols; c++) {
        const double lt = (double)y[c] - my - log(sy), lq = (double)x[c] - mx - log(sx);
        kl += exp(lt) * (lt - lq);
    }
    return kl;
}

static int kl_call(bench *b, void *arg, int64_t i)
{
    kl_state *s = arg;
    int64_t k = i % s->sets, n = s->rows * s->cols;
    TCHK(b, "tally_kl_div",
         tally_kl_div(b->ctx, tally_view_f32(s->p, k * n, s->rows, s->cols), tally_view_f32(s->t, k * n, s->rows, s->cols),
                      TALLY_REDUCTION_BATCHMEAN, s->flags, tally_view_f32(s->out, k, 1, 1)));
    return 0;
}

static int kl_body(bench *b, result *r, void *state, wl_bufs *bufs)
{
    kl_state *s = state;
    int64_t n = s->rows * s->cols;
    if (make_buffer(b, bufs, (uint64_t)(s->sets * n), "p", &s->p) ||
        make_buffer(b, bufs, (uint64_t)(s->sets * n), "t", &s->t) ||
        make_buffer(b, bufs, (uint64_t)s->sets + 1, "out", &s->out))
        return 1;
    /* Independent uniform (0, 1] draws: positive probabilities, and p != t so
     * the divergence is far from zero. The log-input form takes standard
     * normal inputs: any float is a valid log p for the formula. */
    const int prob = (s->flags & TALLY_KL_INPUT_IS_PROB) != 0;
    /* The logits form: independent standard normal logits on both sides. */
    const int logits = (s->flags & TALLY_KL_TARGET_LOGITS) != 0;
    if (fill_device(b, prob ? TALLY_DIST_UNIFORM : TALLY_DIST_NORMAL, 101, s->p, s->sets * n) ||
        fill_device(b, logits ? TALLY_DIST_NORMAL : TALLY_DIST_UNIFORM, 202, s->t, s->sets * n))
        return 1;
    if (bench_measure(b, kl_call, s, 0, &r->t)) return 1;

    /* Check 1: E[t log t - t log p] = -1/4 + 1/2 for independent uniforms, so
     * the batchmean is cols / 4; with x ~ N(0, 1) as log p, E[t log t - t x]
     * = -1/4 and it is -cols / 4. */
    float v = NAN, v_sub = NAN;
    int64_t slot = s->sets;
    if (poison(b, s->out, slot, 1)) return 1;
    TCHK(b, "tally_kl_div",
         tally_kl_div(b->ctx, tally_view_f32(s->p, 0, s->rows, s->cols), tally_view_f32(s->t, 0, s->rows, s->cols),
                      TALLY_REDUCTION_BATCHMEAN, s->flags, tally_view_f32(s->out, slot, 1, 1)));
    if (read_scalar(b, s->out, slot, &v)) return 1;
    /* The logits form: with t = softmax(y) ~ e^y / (cols e^(1/2)), a row's
     * sum of t (y - x) has mean E[y e^y] / e^(1/2) = 1 (the normalisers
     * nearly cancel over 16384 columns). */
    double expect = logits ? 1.0 : (prob ? 0.25 : -0.25) * (double)s->cols;
    int ok1 = isfinite(v) && fabs(v / expect - 1.0) < 0.02;

    /* Check 2: the first rows against a float64 host computation. */
    int64_t sub = s->rows < 4 ? s->rows : 4, m = sub * s->cols;
    float *p = malloc(sizeof(float) * (size_t)m * 2);
    if (p == NULL) return bench_fail(b, "out of host memory");
    float *t = p + m;
    int rc = poison(b, s->out, slot, 1) ||
             download(b, s->p, 0, m, p) || download(b, s->t, 0, m, t);
    if (rc == 0) {
        tally_status st = tally_kl_div(b->ctx, tally_view_f32(s->p, 0, sub, s->cols), tally_view_f32(s->t, 0, sub, s->cols),
                                       TALLY_REDUCTION_BATCHMEAN, s->flags, tally_view_f32(s->out, slot, 1, 1));
        if (st != TALLY_OK) rc = bench_fail(b, "tally_kl_div(check rows): %s", tally_last_error(b->ctx));
    }
    if (rc == 0) rc = read_scalar(b, s->out, slot, &v_sub);
    double ref = 0.0;
    for (int64_t i = 0; i < m && rc == 0 && !logits; i++)
        ref += (double)t[i] * (log((double)t[i]) - (prob ? log((double)p[i]) : (double)p[i]));
    for (int64_t row = 0; row < sub && rc == 0 && logits; row++)
        ref += kl_logits_row64(p + row * s->cols, t + row * s->cols, s->cols);
    free(p);
    if (rc) return 1;
    ref /= (double)sub;
    int ok2 = isfinite(v_sub) && fabs(v_sub - ref) <= 1e-4 * fabs(ref) + 1e-6;
    r->value = v;
    r->ok = ok1 && ok2;
    snprintf(r->check, sizeof r->check,
             "%s: batchmean %.6g vs expected ~%.6g (2%%); first %lld rows %.8g vs float64 %.8g", r->ok ? "ok" : "WRONG",
             (double)v, expect, (long long)sub, (double)v_sub, ref);
    return 0;
}

static int run_kl_form(bench *b, result *r, unsigned flags)
{
    kl_state s = {.rows = scaled(b, r->base.rows), .cols = r->base.cols, .flags = flags};
    double n = (double)(s.rows * s.cols);
    s.sets = rotation_sets(b, 2.0 * n * 4.0);
    snprintf(r->shape, sizeof r->shape, "%lldx%lld", (long long)s.rows, (long long)s.cols);
    r->bytes_read = 2.0 * n * 4.0;
    r->bytes_written = 4.0;
    r->ceiling = "read";
    r->sets = s.sets;
    return run_body(b, r, kl_body, &s);
}

static int run_kl(bench *b, result *r) { return run_kl_form(b, r, TALLY_KL_INPUT_IS_PROB); }
static int run_kl_log(bench *b, result *r) { return run_kl_form(b, r, 0); }
static int run_kl_logits(bench *b, result *r)
{
    return run_kl_form(b, r, TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS);
}

/* ------------------------------------------------------------------------
 * gmm_small / gmm_large: fused mixture sample + log density.
 * ------------------------------------------------------------------------ */
typedef struct gmm_state {
    tally_buffer *mu, *lv, *logits, *z, *lq, *comp;
    int64_t B, K, D, sets;
    uint64_t need; /* stream elements one call consumes */
} gmm_state;

static int gmm_sample_call(bench *b, gmm_state *s, int64_t k, uint64_t offset, tally_view component, uint64_t *consumed)
{
    int64_t KD = s->K * s->D;
    tally_rng rng = {.seed = 303, .subsequence = 0, .offset = offset};
    TCHK(b, "tally_gmm_sample",
         tally_gmm_sample(b->ctx, tally_view_f32(s->mu, k * s->B * KD, s->B, KD),
                          tally_view_f32(s->lv, k * s->B * KD, s->B, KD), tally_view_f32(s->logits, 0, 1, s->K), s->K,
                          rng, tally_view_f32(s->z, k * s->B * s->D, s->B, s->D), tally_view_f32(s->lq, k * s->B, 1, s->B),
                          component, consumed));
    return 0;
}

static int gmm_call(bench *b, void *arg, int64_t i)
{
    gmm_state *s = arg;
    tally_view none = {.buffer = NULL};
    /* Each call draws fresh randomness, as a training loop would. */
    return gmm_sample_call(b, s, i % s->sets, (uint64_t)i * s->need, none, NULL);
}

/* log q(z) of row r in float64: logsumexp_k (log w_k + sum_d log N(z_d; mu, exp(lv))). */
static double gmm_host_log_q(const gmm_state *s, const float *z, const float *mu, const float *lv, const float *logits,
                             double *magnitude)
{
    double m = -INFINITY, lse_logits = 0.0;
    for (int64_t k = 0; k < s->K; k++) m = logits[k] > m ? logits[k] : m;
    for (int64_t k = 0; k < s->K; k++) lse_logits += exp(logits[k] - m);
    lse_logits = m + log(lse_logits);
    double v[64], vmax = -INFINITY, acc = 0.0;
    *magnitude = 0.0;
    for (int64_t k = 0; k < s->K && k < 64; k++) {
        double c = 0.0;
        for (int64_t d = 0; d < s->D; d++) {
            double l = lv[k * s->D + d], y = (z[d] - (double)mu[k * s->D + d]) * exp(-0.5 * l);
            double term = -0.5 * y * y - 0.5 * l - 0.918938533204672742;
            c += term;
            *magnitude += fabs(term);
        }
        v[k] = (s->K > 1 ? logits[k] - lse_logits : 0.0) + c;
        vmax = v[k] > vmax ? v[k] : vmax;
    }
    for (int64_t k = 0; k < s->K && k < 64; k++) acc += exp(v[k] - vmax);
    *magnitude /= (double)s->K;
    return vmax + log(acc);
}

static int gmm_check(bench *b, result *r, gmm_state *s)
{
    int64_t B = s->B, D = s->D, KD = s->K * s->D;
    int64_t rows = B < 64 ? B : 64;
    float *z = malloc(sizeof(float) * (size_t)(B * D + B + 2 * rows * KD + s->K));
    int32_t *comp = malloc(sizeof(int32_t) * (size_t)B);
    if (z == NULL || comp == NULL) {
        free(z);
        free(comp);
        return bench_fail(b, "out of host memory");
    }
    float *lq = z + B * D, *mu = lq + B, *lv = mu + rows * KD, *logits = lv + rows * KD;
    tally_view none = {.buffer = NULL};
    int64_t bad = -1;
    /* Check 1, on the timed path (no component output): outputs poisoned,
     * one call, every value finite and log q consistent with the z drawn. */
    int rc = poison(b, s->z, 0, B * D) || poison(b, s->lq, 0, B) || gmm_sample_call(b, s, 0, 12345 * s->need, none, NULL) ||
             download(b, s->z, 0, B * D, z) || download(b, s->lq, 0, B, lq) || download(b, s->mu, 0, rows * KD, mu) ||
             download(b, s->lv, 0, rows * KD, lv) || download(b, s->logits, 0, s->K, logits);
    int finite = rc == 0 && all_finite(z, B * D, &bad) && all_finite(lq, B, &bad);
    double worst = 0.0, mean_lq = 0.0;
    int ok1 = finite;
    for (int64_t i = 0; i < B && rc == 0; i++) mean_lq += lq[i];
    for (int64_t i = 0; i < rows && rc == 0 && finite; i++) {
        double mag, ref = gmm_host_log_q(s, z + i * D, mu + i * KD, lv + i * KD, logits, &mag);
        double err = fabs(lq[i] - ref), tol = 1e-5 * mag + 1e-4 * fabs(ref) + 1e-4;
        if (err / tol > worst) worst = err / tol;
        if (!(err <= tol)) ok1 = 0;
    }
    /* Check 2, with the component output: z - mu_c over std_c must look
     * standard normal. */
    double sum = 0.0, sumsq = 0.0;
    int ok2 = 1;
    if (rc == 0) {
        rc = poison(b, s->z, 0, B * D) || poison(b, s->comp, 0, B) ||
             gmm_sample_call(b, s, 0, 54321 * s->need, tally_view_typed(s->comp, TALLY_I32, 0, 1, B), NULL) ||
             download(b, s->z, 0, rows * D, z) || download(b, s->comp, 0, B, comp);
    }
    for (int64_t i = 0; i < rows && rc == 0 && ok2; i++) {
        int32_t c = comp[i];
        if (c < 0 || c >= s->K) {
            ok2 = 0;
            break;
        }
        for (int64_t d = 0; d < D; d++) {
            double e = (z[i * D + d] - (double)mu[i * KD + c * D + d]) * exp(-0.5 * lv[i * KD + c * D + d]);
            sum += e;
            sumsq += e * e;
        }
    }
    double cnt = (double)(rows * D), mean = sum / cnt, var = sumsq / cnt - mean * mean;
    ok2 = ok2 && fabs(mean) < 5.0 / sqrt(cnt) + 0.01 && fabs(var - 1.0) < 5.0 * sqrt(2.0 / cnt) + 0.02;
    free(z);
    free(comp);
    if (rc) return 1;
    r->value = mean_lq / (double)B;
    r->ok = ok1 && ok2;
    snprintf(r->check, sizeof r->check,
             "%s: outputs %s; log_q vs float64 on %lld rows, worst %.2f of tolerance; eps mean %.4f var %.4f over %.0f "
             "draws%s",
             r->ok ? "ok" : "WRONG", finite ? "finite" : "NOT FINITE", (long long)rows, worst, mean, var, cnt,
             ok2 ? "" : " (component or noise wrong)");
    if (!finite) snprintf(r->check + strlen(r->check), sizeof r->check - strlen(r->check), " (first bad %lld)", (long long)bad);
    return 0;
}

static int gmm_body(bench *b, result *r, void *state, wl_bufs *bufs)
{
    gmm_state *s = state;
    int64_t KD = s->K * s->D;
    if (make_buffer(b, bufs, (uint64_t)(s->sets * s->B * KD), "mu", &s->mu) ||
        make_buffer(b, bufs, (uint64_t)(s->sets * s->B * KD), "log_var", &s->lv) ||
        make_buffer(b, bufs, (uint64_t)s->K, "logits", &s->logits) ||
        make_buffer(b, bufs, (uint64_t)(s->sets * s->B * s->D), "z", &s->z) ||
        make_buffer(b, bufs, (uint64_t)(s->sets * s->B), "log_q", &s->lq) ||
        make_buffer(b, bufs, (uint64_t)s->B, "component", &s->comp))
        return 1;
    /* mu ~ N(0, 1), log_var ~ U(0, 1], logits ~ N(0, 1). */
    if (fill_device(b, TALLY_DIST_NORMAL, 301, s->mu, s->sets * s->B * KD) ||
        fill_device(b, TALLY_DIST_UNIFORM, 302, s->lv, s->sets * s->B * KD) ||
        fill_device(b, TALLY_DIST_NORMAL, 304, s->logits, s->K))
        return 1;
    tally_view none = {.buffer = NULL};
    if (gmm_sample_call(b, s, 0, 0, none, &s->need)) return 1;
    if (bench_measure(b, gmm_call, s, r->latency_bound, &r->t)) return 1;
    return gmm_check(b, r, s);
}

static int run_gmm(bench *b, result *r, int latency_bound)
{
    const int64_t K = r->base.components, D = r->base.cols;
    gmm_state s = {.B = scaled(b, r->base.rows), .K = K, .D = D};
    double KD = (double)(K * D), Bs = (double)s.B;
    s.sets = rotation_sets(b, (2.0 * Bs * KD + Bs * (double)D + Bs) * 4.0);
    snprintf(r->shape, sizeof r->shape, "%lldx%lldx%lld", (long long)s.B, (long long)K, (long long)D);
    r->bytes_read = (2.0 * Bs * KD + (double)K) * 4.0;
    r->bytes_written = (Bs * (double)D + Bs) * 4.0;
    r->ceiling = "copy";
    r->latency_bound = latency_bound;
    r->sets = s.sets;
    return run_body(b, r, gmm_body, &s);
}

static int run_gmm_small(bench *b, result *r) { return run_gmm(b, r, 1); }
static int run_gmm_large(bench *b, result *r) { return run_gmm(b, r, 0); }

/* ------------------------------------------------------------------------
 * dm_small / dm_large: Dirichlet-multinomial per row, shared log_alpha.
 * ------------------------------------------------------------------------ */
typedef struct dm_state {
    tally_buffer *counts, *log_alpha, *out;
    int64_t B, V, sets;
    int per_row; /* log_alpha [B, V] (one copy per set) instead of [1, V] */
} dm_state;

static int dm_call(bench *b, void *arg, int64_t i)
{
    dm_state *s = arg;
    int64_t k = i % s->sets;
    TCHK(b, "tally_dirichlet_multinomial",
         tally_dirichlet_multinomial(b->ctx, tally_view_f32(s->counts, k * s->B * s->V, s->B, s->V),
                                     s->per_row ? tally_view_f32(s->log_alpha, k * s->B * s->V, s->B, s->V)
                                                : tally_view_f32(s->log_alpha, 0, 1, s->V),
                                     TALLY_REDUCTION_NONE, 0,
                                     tally_view_f32(s->out, k * s->B, 1, s->B)));
    return 0;
}

/* Counts floor(4u): 0..3, a quarter of them zero, as small count data is. */
static void dm_make_counts(float *c, int64_t n, int64_t set)
{
    uint64_t state = UINT64_C(0xC0FFEE) + (uint64_t)set * UINT64_C(0x1000003);
    for (int64_t i = 0; i < n; i++) c[i] = (float)floor(4.0 * host_uniform(&state));
}

static int dm_body(bench *b, result *r, dm_state *s, wl_bufs *bufs, float *host)
{
    int64_t BV = s->B * s->V;
    const int64_t la_rows = s->B < 16 ? s->B : 16; /* rows of a per-row alpha the check reads */
    if (make_buffer(b, bufs, (uint64_t)(s->sets * BV), "counts", &s->counts) ||
        make_buffer(b, bufs, (uint64_t)(s->per_row ? s->sets * BV : s->V), "log_alpha", &s->log_alpha) ||
        make_buffer(b, bufs, (uint64_t)(s->sets * s->B), "out", &s->out))
        return 1;
    float *la = host + BV, *out = la + (s->per_row ? la_rows * s->V : s->V);
    if (s->per_row) {
        /* log_alpha uniform in (0, 1] (alpha in (1, e]), drawn on the device. */
        if (fill_device(b, TALLY_DIST_UNIFORM, 78, s->log_alpha, s->sets * BV) ||
            download(b, s->log_alpha, 0, la_rows * s->V, la))
            return 1;
    } else {
        uint64_t state = 77;
        for (int64_t v = 0; v < s->V; v++) la[v] = (float)(-2.0 + 3.0 * host_uniform(&state)); /* alpha in [0.14, 2.7) */
        TCHK(b, "tally_buffer_upload", tally_buffer_upload(s->log_alpha, 0, la, (size_t)s->V * 4u));
    }
    for (int64_t k = 0; k < s->sets; k++) {
        dm_make_counts(host, BV, k);
        TCHK(b, "tally_buffer_upload", tally_buffer_upload(s->counts, (size_t)(k * BV) * 4u, host, (size_t)BV * 4u));
    }
    if (bench_measure(b, dm_call, s, r->latency_bound, &r->t)) return 1;

    /* Check: poisoned output, one call on set 0, all finite, and the first
     * rows against lgamma in float64. */
    dm_make_counts(host, BV, 0);
    if (poison(b, s->out, 0, s->B) || dm_call(b, s, 0) || download(b, s->out, 0, s->B, out)) return 1;
    int64_t bad = -1, rows = s->B < 16 ? s->B : 16;
    int finite = all_finite(out, s->B, &bad), ok = finite;
    double worst = 0.0, mean = 0.0;
    for (int64_t i = 0; i < s->B; i++) mean += out[i];
    for (int64_t i = 0; i < rows && finite; i++) {
        double A = 0.0, N = 0.0, S = 0.0, mag = 0.0;
        for (int64_t v = 0; v < s->V; v++) {
            double a = exp((double)la[(s->per_row ? i * s->V : 0) + v]), n = host[i * s->V + v];
            A += a;
            N += n;
            if (n != 0.0) {
                S += lgamma(n + a) - lgamma(a);
                mag += fabs(lgamma(n + a)) + fabs(lgamma(a));
            }
        }
        double ref = lgamma(A) - lgamma(N + A) + S;
        mag += fabs(lgamma(A)) + fabs(lgamma(N + A));
        double err = fabs(out[i] - ref), tol = 1e-5 * mag + 1e-4;
        if (err / tol > worst) worst = err / tol;
        if (!(err <= tol)) ok = 0;
    }
    r->value = mean / (double)s->B;
    r->ok = ok;
    snprintf(r->check, sizeof r->check, "%s: outputs %s; first %lld rows vs float64 lgamma, worst %.2f of tolerance",
             ok ? "ok" : "WRONG", finite ? "finite" : "NOT FINITE", (long long)rows, worst);
    return 0;
}

static int run_dm(bench *b, result *r, int latency_bound, int per_row)
{
    const int64_t V = r->base.cols;
    dm_state s = {.B = scaled(b, r->base.rows), .V = V, .per_row = per_row};
    double BV = (double)(s.B * V), la_elems = per_row ? BV : (double)V;
    s.sets = rotation_sets(b, (BV + (per_row ? BV : 0.0) + (double)s.B) * 4.0);
    snprintf(r->shape, sizeof r->shape, "%lldx%lld", (long long)s.B, (long long)V);
    r->bytes_read = (BV + la_elems) * 4.0;
    r->bytes_written = (double)s.B * 4.0;
    r->ceiling = "copy";
    r->latency_bound = latency_bound;
    r->sets = s.sets;
    if (b->plan_only) return 0;
    float *host = malloc(sizeof(float) * (size_t)(s.B * V + 16 * V + s.B));
    if (host == NULL) return bench_fail(b, "out of host memory");
    wl_bufs bufs = {.n = 0};
    int rc = dm_body(b, r, &s, &bufs, host);
    release_buffers(&bufs);
    free(host);
    return rc;
}

static int run_dm_small(bench *b, result *r) { return run_dm(b, r, 1, 0); }
static int run_dm_large(bench *b, result *r) { return run_dm(b, r, 0, 0); }
static int run_dm_large_row(bench *b, result *r) { return run_dm(b, r, 0, 1); }

/* ------------------------------------------------------------------------
 * raw_fill / uniform_fill / normal_fill: 2^30 draws (write bandwidth).
 * ------------------------------------------------------------------------ */
typedef struct fill_state {
    tally_buffer *out;
    int64_t n, sets;
    tally_distribution dist;
} fill_state;

static tally_view fill_view(const fill_state *s, int64_t offset, int64_t count)
{
    return s->dist == TALLY_DIST_RAW ? tally_view_typed(s->out, TALLY_U32, offset, 1, count)
                                     : tally_view_f32(s->out, offset, 1, count);
}

static int fill_call(bench *b, void *arg, int64_t i)
{
    fill_state *s = arg;
    tally_rng rng = {.seed = 404, .subsequence = 0, .offset = (uint64_t)i * (uint64_t)s->n};
    TCHK(b, "tally_rng_fill", tally_rng_fill(b->ctx, s->dist, rng, fill_view(s, (i % s->sets) * s->n, s->n), NULL));
    return 0;
}

/* Raw bits read as x / 2^32 and uniforms have mean 1/2 and variance 1/12;
 * normals mean 0 and variance 1. */
static double fill_sample(const fill_state *s, const float *v, int64_t i)
{
    if (s->dist != TALLY_DIST_RAW) return v[i];
    uint32_t u;
    memcpy(&u, v + i, 4);
    return (double)u * (1.0 / 4294967296.0);
}

static int fill_body(bench *b, result *r, void *state, wl_bufs *bufs)
{
    fill_state *s = state;
    if (make_buffer(b, bufs, (uint64_t)(s->sets * s->n), "out", &s->out)) return 1;
    if (bench_measure(b, fill_call, s, 0, &r->t)) return 1;
    int64_t m = s->n < (1 << 22) ? s->n : (1 << 22), tail = s->n < 1024 ? s->n : 1024;
    float *v = malloc(sizeof(float) * (size_t)(m + tail));
    if (v == NULL) return bench_fail(b, "out of host memory");
    int rc = poison(b, s->out, 0, s->n) || fill_call(b, s, 0) || download(b, s->out, 0, m, v) ||
             download(b, s->out, s->n - tail, tail, v + m);
    int64_t bad = -1;
    /* The poison is a NaN: raw bits can be any pattern, so for them "written"
     * means no poison word left at the end. */
    int finite = rc == 0;
    for (int64_t i = 0; i < m + tail && finite; i++) {
        uint32_t u;
        memcpy(&u, v + i, 4);
        if (s->dist == TALLY_DIST_RAW ? u == POISON_F32 : !isfinite(v[i])) {
            finite = 0;
            bad = i;
        }
    }
    double sum = 0.0, sumsq = 0.0;
    for (int64_t i = 0; i < m && finite; i++) {
        double x = fill_sample(s, v, i);
        sum += x;
        sumsq += x * x;
    }
    free(v);
    if (rc) return 1;
    const double want_mean = s->dist == TALLY_DIST_NORMAL ? 0.0 : 0.5;
    const double want_var = s->dist == TALLY_DIST_NORMAL ? 1.0 : 1.0 / 12.0;
    double mean = sum / (double)m, var = sumsq / (double)m - mean * mean;
    int ok = finite && fabs(mean - want_mean) < 5.0 * sqrt(want_var / (double)m) + 1e-3 &&
             fabs(var / want_var - 1.0) < 5.0 * sqrt(2.0 / (double)m) + 1e-3;
    r->value = finite ? sqrt(var) : NAN;
    r->ok = ok;
    snprintf(r->check, sizeof r->check, "%s: %s to the last element; first %lld: mean %.5f, std %.5f (want %.3g, %.4g)",
             ok ? "ok" : "WRONG", finite ? "written" : "NOT all written/finite", (long long)m, mean, sqrt(var), want_mean,
             sqrt(want_var));
    if (!finite) snprintf(r->check + strlen(r->check), sizeof r->check - strlen(r->check), " (first bad %lld)", (long long)bad);
    return 0;
}

static int run_fill(bench *b, result *r, tally_distribution dist)
{
    fill_state s = {.n = round_up4(scaled(b, r->base.rows * r->base.cols)), .dist = dist};
    s.sets = rotation_sets(b, (double)s.n * 4.0);
    snprintf(r->shape, sizeof r->shape, "%lld", (long long)s.n);
    r->bytes_written = (double)s.n * 4.0;
    r->ceiling = "write";
    r->sets = s.sets;
    return run_body(b, r, fill_body, &s);
}

static int run_raw_fill(bench *b, result *r) { return run_fill(b, r, TALLY_DIST_RAW); }
static int run_uniform_fill(bench *b, result *r) { return run_fill(b, r, TALLY_DIST_UNIFORM); }
static int run_normal_fill(bench *b, result *r) { return run_fill(b, r, TALLY_DIST_NORMAL); }

/* ------------------------------------------------------------------------
 * categorical: one draw per row of weights [65536, 64] (read bandwidth).
 * ------------------------------------------------------------------------ */
typedef struct cat_state {
    tally_buffer *w, *out;
    int64_t rows, cols, sets;
} cat_state;

static int cat_call(bench *b, void *arg, int64_t i)
{
    cat_state *s = arg;
    int64_t k = i % s->sets;
    tally_rng rng = {.seed = 606, .subsequence = 0, .offset = (uint64_t)i * (uint64_t)round_up4(s->rows)};
    TCHK(b, "tally_categorical",
         tally_categorical(b->ctx, tally_view_f32(s->w, k * s->rows * s->cols, s->rows, s->cols), 0, rng,
                           tally_view_typed(s->out, TALLY_I32, k * s->rows, 1, s->rows), NULL));
    return 0;
}

static int cat_body(bench *b, result *r, void *state, wl_bufs *bufs)
{
    cat_state *s = state;
    if (make_buffer(b, bufs, (uint64_t)(s->sets * s->rows * s->cols), "weights", &s->w) ||
        make_buffer(b, bufs, (uint64_t)(s->sets * s->rows), "out", &s->out))
        return 1;
    /* Independent uniform (0, 1] weights: every index is possible and, by
     * symmetry, the mean index is (cols - 1) / 2. */
    if (fill_device(b, TALLY_DIST_UNIFORM, 607, s->w, s->sets * s->rows * s->cols)) return 1;
    if (bench_measure(b, cat_call, s, 0, &r->t)) return 1;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)s->rows);
    if (idx == NULL) return bench_fail(b, "out of host memory");
    int rc = poison(b, s->out, 0, s->rows) || cat_call(b, s, 0) || download(b, s->out, 0, s->rows, idx);
    int in_range = rc == 0;
    double sum = 0.0;
    for (int64_t i = 0; i < s->rows && in_range; i++) {
        in_range = idx[i] >= 0 && idx[i] < s->cols;
        sum += idx[i];
    }
    free(idx);
    if (rc) return 1;
    double mean = sum / (double)s->rows, want = 0.5 * (double)(s->cols - 1);
    /* The index's standard deviation is about cols / sqrt(12). */
    int ok = in_range && fabs(mean - want) < 5.0 * (double)s->cols / sqrt(12.0 * (double)s->rows) + 0.01;
    r->value = mean;
    r->ok = ok;
    snprintf(r->check, sizeof r->check, "%s: indices %s; mean index %.4f vs ~%.1f", ok ? "ok" : "WRONG",
             in_range ? "in range" : "OUT OF RANGE", mean, want);
    return 0;
}

static int run_categorical(bench *b, result *r)
{
    cat_state s = {.rows = scaled(b, r->base.rows), .cols = r->base.cols};
    s.sets = rotation_sets(b, (double)(s.rows * s.cols + s.rows) * 4.0);
    snprintf(r->shape, sizeof r->shape, "%lldx%lld", (long long)s.rows, (long long)s.cols);
    r->bytes_read = (double)(s.rows * s.cols) * 4.0;
    r->bytes_written = (double)s.rows * 4.0;
    r->ceiling = "read";
    r->sets = s.sets;
    return run_body(b, r, cat_body, &s);
}

/* ------------------------------------------------------------------------
 * sum_1n / sum_n1 / sum_rc: tally_reduce sum over ALL of 2^30 floats viewed
 * as [1, n], [n, 1] and [32768, 32768] (the same contiguous run: the time
 * should not depend on the shape).
 * ------------------------------------------------------------------------ */
typedef struct sum_state {
    tally_buffer *x, *out;
    int64_t n, rows, cols, sets;
} sum_state;

static int sum_call(bench *b, void *arg, int64_t i)
{
    sum_state *s = arg;
    int64_t k = i % s->sets;
    TCHK(b, "tally_reduce",
         tally_reduce(b->ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(s->x, k * s->n, s->rows, s->cols),
                      tally_view_f32(s->out, k, 1, 1)));
    return 0;
}

static int sum_body(bench *b, result *r, void *state, wl_bufs *bufs)
{
    sum_state *s = state;
    if (make_buffer(b, bufs, (uint64_t)(s->sets * s->n), "x", &s->x) ||
        make_buffer(b, bufs, (uint64_t)s->sets + 1, "out", &s->out))
        return 1;
    if (fill_device(b, TALLY_DIST_UNIFORM, 505, s->x, s->sets * s->n)) return 1;
    if (bench_measure(b, sum_call, s, 0, &r->t)) return 1;
    float v = NAN, v_sub = NAN;
    int64_t slot = s->sets, m = s->n < (1 << 20) ? s->n : (1 << 20);
    if (poison(b, s->out, slot, 1)) return 1;
    TCHK(b, "tally_reduce", tally_reduce(b->ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(s->x, 0, s->rows, s->cols),
                                         tally_view_f32(s->out, slot, 1, 1)));
    if (read_scalar(b, s->out, slot, &v)) return 1;
    double expect = 0.5 * (double)s->n;
    int ok1 = isfinite(v) && fabs(v / expect - 1.0) < 1e-3 + 3.0 / sqrt((double)s->n);
    float *x = malloc(sizeof(float) * (size_t)m);
    if (x == NULL) return bench_fail(b, "out of host memory");
    int rc = download(b, s->x, 0, m, x) || poison(b, s->out, slot, 1);
    if (rc == 0) {
        tally_status st = tally_reduce(b->ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(s->x, 0, 1, m),
                                       tally_view_f32(s->out, slot, 1, 1));
        if (st != TALLY_OK) rc = bench_fail(b, "tally_reduce(check): %s", tally_last_error(b->ctx));
    }
    if (rc == 0) rc = read_scalar(b, s->out, slot, &v_sub);
    double ref = 0.0;
    for (int64_t i = 0; i < m; i++) ref += x[i];
    free(x);
    if (rc) return 1;
    int ok2 = isfinite(v_sub) && fabs(v_sub - ref) <= 1e-5 * ref;
    r->value = v;
    r->ok = ok1 && ok2;
    snprintf(r->check, sizeof r->check, "%s: sum %.8g vs expected ~%.8g (n/2); first %lld: %.8g vs float64 %.8g",
             r->ok ? "ok" : "WRONG", (double)v, expect, (long long)m, (double)v_sub, ref);
    return 0;
}

static int run_sum(bench *b, result *r, int shape)
{
    /* shape 0: [1, n]; 1: [n, 1]; 2: [rows of 32768 columns, 32768]. */
    sum_state s = {.n = 0};
    if (shape == 2) {
        s.cols = r->base.cols;
        s.rows = scaled(b, r->base.rows);
    } else {
        int64_t n = round_up4(scaled(b, r->base.rows * r->base.cols));
        s.rows = shape == 1 ? n : 1;
        s.cols = shape == 1 ? 1 : n;
    }
    s.n = s.rows * s.cols;
    s.sets = rotation_sets(b, (double)s.n * 4.0);
    snprintf(r->shape, sizeof r->shape, "%lldx%lld", (long long)s.rows, (long long)s.cols);
    r->bytes_read = (double)s.n * 4.0;
    r->bytes_written = 4.0;
    r->ceiling = "read";
    r->sets = s.sets;
    return run_body(b, r, sum_body, &s);
}

static int run_sum_1n(bench *b, result *r) { return run_sum(b, r, 0); }
static int run_sum_n1(bench *b, result *r) { return run_sum(b, r, 1); }
static int run_sum_rc(bench *b, result *r) { return run_sum(b, r, 2); }

/* ------------------------------------------------------------------------
 * kl_bf16, dm_large_bf16, sum_rows_bf16 / sum_rows_f32: the same ops on
 * bf16 inputs (half the bytes of fp32), with an fp32 twin of the row sum
 * for the bytes-proportional comparison. Inputs are generated on the host
 * as bf16 (round to nearest even) and uploaded. Check: on the first rows,
 * the bf16 op's bits equal the fp32 op's on the widened values (the
 * definition of a half input), and the value is plausible.
 * ------------------------------------------------------------------------ */
typedef enum half_kind { HALF_KL = 0, HALF_DM = 1, HALF_SUM_ROWS = 2 } half_kind;

typedef struct half_state {
    half_kind kind;
    tally_dtype dtype; /* TALLY_BF16, or TALLY_F32 for the fp32 twin */
    tally_buffer *x, *y, *out;
    int64_t rows, cols, sets, y_rows;
} half_state;

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static tally_view half_view(const half_state *s, tally_buffer *buf, int64_t offset, int64_t rows, int64_t cols)
{
    return (tally_view){.buffer = buf, .offset = offset, .rows = rows, .cols = cols, .stride = cols, .dtype = s->dtype};
}

static int half_run_op(bench *b, const half_state *s, tally_view x, tally_view y, tally_buffer *out, int64_t out_off,
                       int64_t rows)
{
    switch (s->kind) {
    case HALF_KL:
        TCHK(b, "tally_kl_div", tally_kl_div(b->ctx, x, y, TALLY_REDUCTION_BATCHMEAN, TALLY_KL_INPUT_IS_PROB,
                                             tally_view_f32(out, out_off, 1, 1)));
        break;
    case HALF_DM:
        TCHK(b, "tally_dirichlet_multinomial",
             tally_dirichlet_multinomial(b->ctx, x, y, TALLY_REDUCTION_NONE, 0, tally_view_f32(out, out_off, 1, rows)));
        break;
    case HALF_SUM_ROWS:
        TCHK(b, "tally_reduce",
             tally_reduce(b->ctx, TALLY_SUM, TALLY_AXIS_ROW, x, tally_view_f32(out, out_off, rows, 1)));
        break;
    }
    return 0;
}

static int half_call(bench *b, void *arg, int64_t i)
{
    half_state *s = arg;
    int64_t k = i % s->sets, n = s->rows * s->cols;
    const int64_t outs = s->kind == HALF_KL ? 1 : s->rows;
    tally_view y = {.buffer = NULL};
    if (s->kind == HALF_KL) y = half_view(s, s->y, k * n, s->rows, s->cols);
    if (s->kind == HALF_DM) y = half_view(s, s->y, 0, 1, s->cols);
    return half_run_op(b, s, half_view(s, s->x, k * n, s->rows, s->cols), y, s->out, k * outs, s->rows);
}

/* Host values of element i of set k of tensor `which` (0 x, 1 y). */
static float half_value(const half_state *s, int which, uint64_t *state)
{
    const double u = host_uniform(state);
    if (s->kind == HALF_DM) return which == 0 ? (float)floor(4.0 * u) : (float)(-2.0 + 3.0 * u);
    if (s->kind == HALF_KL) return (float)(u * 0.999 + 0.001); /* positive probabilities */
    return (float)u;
}

/* Uploads rows*cols values of each set (bf16 or fp32) in chunks. */
static int half_upload(bench *b, const half_state *s, tally_buffer *buf, int which, int64_t count, int64_t sets)
{
    const size_t esize = s->dtype == TALLY_F32 ? 4u : 2u;
    const int64_t chunk = (int64_t)1 << 22;
    void *host = malloc((size_t)chunk * esize);
    if (host == NULL) return bench_fail(b, "out of host memory");
    uint64_t state = 0x5eed0000u + (uint64_t)which;
    for (int64_t at = 0; at < count * sets; at += chunk) {
        const int64_t m = count * sets - at < chunk ? count * sets - at : chunk;
        for (int64_t i = 0; i < m; i++) {
            const float v = half_value(s, which, &state);
            if (esize == 2u) ((uint16_t *)host)[i] = to_bf16(v);
            else ((float *)host)[i] = from_bf16(to_bf16(v)); /* the same values as the bf16 run */
        }
        tally_status st = tally_buffer_upload(buf, (size_t)at * esize, host, (size_t)m * esize);
        if (st != TALLY_OK) {
            free(host);
            return bench_fail(b, "tally_buffer_upload: %s", tally_last_error(b->ctx));
        }
    }
    free(host);
    return 0;
}

static int half_body(bench *b, result *r, void *state, wl_bufs *bufs)
{
    half_state *s = state;
    const int64_t n = s->rows * s->cols, outs = s->kind == HALF_KL ? 1 : s->rows;
    const int64_t y_count = s->kind == HALF_KL ? n : s->kind == HALF_DM ? s->cols : 0;
    const int64_t y_sets = s->kind == HALF_KL ? s->sets : 1;
    const uint64_t words = s->dtype == TALLY_F32 ? 1u : 2u; /* elements per 4-byte buffer element */
    if (make_buffer(b, bufs, ((uint64_t)(s->sets * n) + words - 1) / words, "x", &s->x) ||
        (y_count > 0 && make_buffer(b, bufs, ((uint64_t)(y_sets * y_count) + words - 1) / words, "y", &s->y)) ||
        make_buffer(b, bufs, (uint64_t)(s->sets * outs + 2 * outs), "out", &s->out))
        return 1;
    if (half_upload(b, s, s->x, 0, n, s->sets) || (y_count > 0 && half_upload(b, s, s->y, 1, y_count, y_sets))) return 1;
    if (bench_measure(b, half_call, s, 0, &r->t)) return 1;

    /* Check on the first rows of set 0: widen them on the host into fp32
     * buffers and run the fp32 op; the bits must be the same. */
    const int64_t sub = s->rows < 8 ? s->rows : 8, m = sub * s->cols;
    const int64_t sub_outs = s->kind == HALF_KL ? 1 : sub, slot = s->sets * outs;
    const int64_t ym = s->kind == HALF_KL ? m : s->kind == HALF_DM ? s->cols : 0;
    float *xf = malloc(sizeof(float) * (size_t)(m + ym + 2 * sub_outs + 1));
    uint16_t *raw = malloc(sizeof(uint16_t) * (size_t)(m + ym + 1));
    if (xf == NULL || raw == NULL) {
        free(xf);
        free(raw);
        return bench_fail(b, "out of host memory");
    }
    float *yf = xf + m, *got = yf + ym, *want = got + sub_outs;
    tally_buffer *cx = NULL, *cy = NULL;
    int rc = 0;
    if (s->dtype == TALLY_F32) {
        rc = download(b, s->x, 0, m, xf) || (ym > 0 && download(b, s->y, 0, ym, yf));
    } else {
        tally_status st = tally_buffer_download(s->x, 0, raw, (size_t)m * 2u);
        if (st == TALLY_OK && ym > 0) st = tally_buffer_download(s->y, 0, raw + m, (size_t)ym * 2u);
        if (st != TALLY_OK) rc = bench_fail(b, "tally_buffer_download: %s", tally_last_error(b->ctx));
        for (int64_t i = 0; i < m + ym && rc == 0; i++) xf[i] = from_bf16(raw[i]);
    }
    if (rc == 0 && (tally_buffer_create(b->ctx, (size_t)m * 4u, &cx) != TALLY_OK ||
                    tally_buffer_create(b->ctx, (size_t)(ym > 0 ? ym : 1) * 4u, &cy) != TALLY_OK ||
                    tally_buffer_upload(cx, 0, xf, (size_t)m * 4u) != TALLY_OK ||
                    (ym > 0 && tally_buffer_upload(cy, 0, yf, (size_t)ym * 4u) != TALLY_OK)))
        rc = bench_fail(b, "check buffers: %s", tally_last_error(b->ctx));
    tally_view hy = {.buffer = NULL}, fy = {.buffer = NULL};
    if (s->kind == HALF_KL) {
        hy = half_view(s, s->y, 0, sub, s->cols);
        fy = tally_view_f32(cy, 0, sub, s->cols);
    } else if (s->kind == HALF_DM) {
        hy = half_view(s, s->y, 0, 1, s->cols);
        fy = tally_view_f32(cy, 0, 1, s->cols);
    }
    if (rc == 0) rc = poison(b, s->out, slot, 2 * sub_outs);
    if (rc == 0) rc = half_run_op(b, s, half_view(s, s->x, 0, sub, s->cols), hy, s->out, slot, sub);
    if (rc == 0) rc = half_run_op(b, s, tally_view_f32(cx, 0, sub, s->cols), fy, s->out, slot + sub_outs, sub);
    if (rc == 0) rc = download(b, s->out, slot, 2 * sub_outs, got);
    tally_buffer_release(cx);
    tally_buffer_release(cy);
    int same = rc == 0, finite = rc == 0;
    for (int64_t i = 0; i < sub_outs && rc == 0; i++) {
        uint32_t a, c;
        memcpy(&a, &got[i], 4);
        memcpy(&c, &want[i], 4);
        same = same && a == c;
        finite = finite && isfinite(got[i]);
    }
    /* got and want live in xf: read them before it is freed. */
    const float got0 = got[0], want0 = want[0];
    free(xf);
    free(raw);
    if (rc) return 1;
    r->value = got0;
    r->ok = same && finite;
    snprintf(r->check, sizeof r->check, "%s: first %lld rows %s the fp32 op on the widened values (%.8g)%s",
             r->ok ? "ok" : "WRONG", (long long)sub, same ? "bit-equal to" : "DIFFER from", (double)want0,
             finite ? "" : ", NOT FINITE");
    return 0;
}

static int run_half(bench *b, result *r, half_kind kind, tally_dtype dtype)
{
    const int64_t cols = r->base.cols;
    half_state s = {.kind = kind, .dtype = dtype, .rows = scaled(b, r->base.rows), .cols = cols};
    const double esize = dtype == TALLY_F32 ? 4.0 : 2.0, n = (double)(s.rows * cols);
    const double in_bytes = (kind == HALF_KL ? 2.0 * n : n + (kind == HALF_DM ? (double)cols : 0.0)) * esize;
    const double out_bytes = kind == HALF_KL ? 4.0 : (double)s.rows * 4.0;
    s.sets = rotation_sets(b, in_bytes + out_bytes);
    snprintf(r->shape, sizeof r->shape, "%lldx%lld", (long long)s.rows, (long long)cols);
    r->bytes_read = in_bytes;
    r->bytes_written = out_bytes;
    r->ceiling = kind == HALF_KL ? "read" : "copy";
    r->sets = s.sets;
    return run_body(b, r, half_body, &s);
}

static int run_kl_bf16(bench *b, result *r) { return run_half(b, r, HALF_KL, TALLY_BF16); }
static int run_dm_large_bf16(bench *b, result *r) { return run_half(b, r, HALF_DM, TALLY_BF16); }
static int run_sum_rows_bf16(bench *b, result *r) { return run_half(b, r, HALF_SUM_ROWS, TALLY_BF16); }
static int run_sum_rows_f32(bench *b, result *r) { return run_half(b, r, HALF_SUM_ROWS, TALLY_F32); }

/* ------------------------------------------------------------------------
 * Gradients: kl_bw (KL batchmean INPUT_IS_PROB backward over [16384,
 * 16384]: reads p and t, writes both gradients), dm_bw (Dirichlet-
 * multinomial backward, shared alpha, 65536x1024: reads the counts, writes
 * V values; the per-row weights go through a [B, V] scratch) and gmm_bw
 * (mixture sample backward, 65536x8x128: reads mu, log_var, grad_z and
 * grad_log_q, writes grad_mu and grad_log_var).
 * ------------------------------------------------------------------------ */
typedef struct bw_state {
    tally_buffer *a, *b, *g, *o1, *o2, *extra;
    int64_t rows, cols, K, D;
} bw_state;

static int kl_bw_call(bench *b, void *arg, int64_t i)
{
    bw_state *s = arg;
    (void)i;
    TCHK(b, "tally_kl_div_backward",
         tally_kl_div_backward(b->ctx, tally_view_f32(s->a, 0, s->rows, s->cols), tally_view_f32(s->b, 0, s->rows, s->cols),
                               tally_view_f32(s->g, 0, 1, 1), TALLY_REDUCTION_BATCHMEAN, TALLY_KL_INPUT_IS_PROB,
                               tally_view_f32(s->o1, 0, s->rows, s->cols), tally_view_f32(s->o2, 0, s->rows, s->cols)));
    return 0;
}

static int run_kl_bw(bench *b, result *r)
{
    bw_state s = {.rows = scaled(b, r->base.rows), .cols = r->base.cols};
    const int64_t n = s.rows * s.cols;
    snprintf(r->shape, sizeof r->shape, "%lldx%lld", (long long)s.rows, (long long)s.cols);
    r->bytes_read = 2.0 * (double)n * 4.0;
    r->bytes_written = 2.0 * (double)n * 4.0;
    r->ceiling = "copy";
    if (b->plan_only) return 0;
    wl_bufs bufs = {.n = 0};
    float one = 1.0f, host[2 * 1024], got[2 * 1024];
    int rc = make_buffer(b, &bufs, (uint64_t)n, "p", &s.a) || make_buffer(b, &bufs, (uint64_t)n, "t", &s.b) ||
             make_buffer(b, &bufs, 1, "grad_out", &s.g) || make_buffer(b, &bufs, (uint64_t)n, "grad_p", &s.o1) ||
             make_buffer(b, &bufs, (uint64_t)n, "grad_t", &s.o2) ||
             fill_device(b, TALLY_DIST_UNIFORM, 505, s.a, n) || fill_device(b, TALLY_DIST_UNIFORM, 606, s.b, n);
    if (rc == 0 && tally_buffer_upload(s.g, 0, &one, 4) != TALLY_OK) rc = bench_fail(b, "upload grad_out");
    if (rc == 0) rc = bench_measure(b, kl_bw_call, &s, 0, &r->t);
    /* Check: the first 1024 elements of both gradients against float64. */
    const int64_t m = n < 1024 ? n : 1024;
    if (rc == 0) rc = poison(b, s.o1, 0, m) || poison(b, s.o2, 0, m) || kl_bw_call(b, &s, 0) ||
                      download(b, s.a, 0, m, host) || download(b, s.b, 0, m, host + 1024) ||
                      download(b, s.o1, 0, m, got) || download(b, s.o2, 0, m, got + 1024);
    if (rc == 0) {
        double worst = 0.0;
        for (int64_t i = 0; i < m; i++) {
            double p = host[i], t = host[1024 + i], g = 1.0 / (double)s.rows;
            double rp = -(t / p) * g, rt = g * (log(t) - log(p) + 1.0);
            double e1 = fabs(got[i] - rp) / (1e-5 * fabs(rp) + 1e-30);
            double e2 = fabs(got[1024 + i] - rt) / (1e-5 * g * (fabs(log(t)) + fabs(log(p)) + 1.0) + 1e-30);
            if (!(e1 <= worst)) worst = e1;
            if (!(e2 <= worst)) worst = e2;
        }
        r->ok = worst <= 1.0;
        r->value = got[0];
        snprintf(r->check, sizeof r->check, "%s: first %lld elements of both gradients vs float64, worst %.3f of tolerance",
                 r->ok ? "ok" : "WRONG", (long long)m, worst);
    }
    release_buffers(&bufs);
    return rc;
}

static double bench_digamma(double x)
{
    double acc = 0.0;
    while (x < 20.0) acc += 1.0 / x, x += 1.0;
    double w = 1.0 / x, w2 = w * w;
    return log(x) - 0.5 * w - w2 * (1.0 / 12 - w2 * (1.0 / 120 - w2 * (1.0 / 252 - w2 / 240))) - acc;
}

static int dm_bw_call(bench *b, void *arg, int64_t i)
{
    bw_state *s = arg;
    (void)i;
    TCHK(b, "tally_dirichlet_multinomial_backward",
         tally_dirichlet_multinomial_backward(b->ctx, tally_view_f32(s->a, 0, s->rows, s->cols),
                                              tally_view_f32(s->b, 0, 1, s->cols), tally_view_f32(s->g, 0, 1, 1),
                                              TALLY_REDUCTION_MEAN, 0, tally_view_f32(s->o1, 0, 1, s->cols)));
    return 0;
}

static int run_dm_bw(bench *b, result *r)
{
    bw_state s = {.rows = scaled(b, r->base.rows), .cols = r->base.cols};
    const int64_t B = s.rows, V = s.cols, BV = B * V;
    snprintf(r->shape, sizeof r->shape, "%lldx%lld", (long long)B, (long long)V);
    r->bytes_read = ((double)BV + (double)V) * 4.0;
    r->bytes_written = (double)V * 4.0;
    r->ceiling = "read";
    if (b->plan_only) return 0;
    float *host = malloc(sizeof(float) * (size_t)(BV + 2 * V));
    if (host == NULL) return bench_fail(b, "out of host memory");
    float *la = host + BV, *got = la + V, one = 1.0f;
    uint64_t state = 78;
    for (int64_t v = 0; v < V; v++) la[v] = (float)(-2.0 + 3.0 * host_uniform(&state));
    dm_make_counts(host, BV, 0);
    wl_bufs bufs = {.n = 0};
    int rc = make_buffer(b, &bufs, (uint64_t)BV, "counts", &s.a) || make_buffer(b, &bufs, (uint64_t)V, "log_alpha", &s.b) ||
             make_buffer(b, &bufs, 1, "grad_out", &s.g) || make_buffer(b, &bufs, (uint64_t)V, "grad", &s.o1);
    if (rc == 0 && (tally_buffer_upload(s.a, 0, host, (size_t)BV * 4u) != TALLY_OK ||
                    tally_buffer_upload(s.b, 0, la, (size_t)V * 4u) != TALLY_OK ||
                    tally_buffer_upload(s.g, 0, &one, 4) != TALLY_OK))
        rc = bench_fail(b, "upload: %s", tally_last_error(b->ctx));
    if (rc == 0) rc = bench_measure(b, dm_bw_call, &s, 0, &r->t);
    if (rc == 0) rc = poison(b, s.o1, 0, V) || dm_bw_call(b, &s, 0) || download(b, s.o1, 0, V, got);
    if (rc == 0) {
        /* Check: the first 8 columns against float64 over every row. */
        double A = 0.0, worst = 0.0;
        for (int64_t v = 0; v < V; v++) A += exp((double)la[v]);
        const double pA = bench_digamma(A);
        double col[8] = {0}, mag[8] = {0};
        for (int64_t i = 0; i < B; i++) {
            double N = 0.0;
            for (int64_t v = 0; v < V; v++) N += host[i * V + v];
            const double R = pA - bench_digamma(N + A);
            for (int v = 0; v < 8; v++) {
                const double a = exp((double)la[v]), n = host[i * V + v];
                const double T = n == 0 ? 0.0 : bench_digamma(n + a) - bench_digamma(a);
                col[v] += (R + T) / (double)B;
                mag[v] += (fabs(pA) + fabs(bench_digamma(N + A)) + fabs(T) + 1.0) / (double)B;
            }
        }
        for (int v = 0; v < 8; v++) {
            const double a = exp((double)la[v]), ref = a * col[v], err = fabs(got[v] - ref) / (1e-4 * a * mag[v]);
            if (!(err <= worst)) worst = err;
        }
        int64_t bad = -1;
        r->ok = worst <= 1.0 && all_finite(got, V, &bad);
        r->value = got[0];
        snprintf(r->check, sizeof r->check, "%s: first 8 columns vs float64 over all rows, worst %.3f of tolerance",
                 r->ok ? "ok" : "WRONG", worst);
    }
    release_buffers(&bufs);
    free(host);
    return rc;
}

static int gmm_bw_call(bench *b, void *arg, int64_t i)
{
    bw_state *s = arg;
    (void)i;
    const int64_t B = s->rows, KD = s->K * s->D;
    const tally_rng rng = {.seed = 303, .subsequence = 0, .offset = 0};
    TCHK(b, "tally_gmm_sample_backward",
         tally_gmm_sample_backward(b->ctx, tally_view_f32(s->a, 0, B, KD), tally_view_f32(s->b, 0, B, KD),
                                   tally_view_f32(s->extra, 0, 1, s->K), s->K, rng,
                                   tally_view_f32(s->g, 0, B, s->D), tally_view_f32(s->g, B * s->D, 1, B),
                                   tally_view_f32(s->o1, 0, B, KD), tally_view_f32(s->o2, 0, B, KD),
                                   (tally_view){.buffer = NULL}));
    return 0;
}

static int run_gmm_bw(bench *b, result *r)
{
    bw_state s = {.rows = scaled(b, r->base.rows), .K = r->base.components, .D = r->base.cols};
    const int64_t B = s.rows, KD = s.K * s.D;
    snprintf(r->shape, sizeof r->shape, "%lldx%lldx%lld", (long long)B, (long long)s.K, (long long)s.D);
    r->bytes_read = (2.0 * (double)(B * KD) + (double)(B * s.D) + (double)B) * 4.0;
    r->bytes_written = 2.0 * (double)(B * KD) * 4.0;
    r->ceiling = "copy";
    if (b->plan_only) return 0;
    wl_bufs bufs = {.n = 0};
    float logits[8] = {0.1f, -0.3f, 0.5f, 0.0f, -1.0f, 0.2f, 0.7f, -0.4f};
    int rc = make_buffer(b, &bufs, (uint64_t)(B * KD), "mu", &s.a) || make_buffer(b, &bufs, (uint64_t)(B * KD), "log_var", &s.b) ||
             make_buffer(b, &bufs, (uint64_t)(B * s.D + B), "upstream", &s.g) ||
             make_buffer(b, &bufs, (uint64_t)(B * KD), "grad_mu", &s.o1) ||
             make_buffer(b, &bufs, (uint64_t)(B * KD), "grad_log_var", &s.o2) ||
             make_buffer(b, &bufs, 8, "logits", &s.extra) || fill_device(b, TALLY_DIST_NORMAL, 707, s.a, B * KD) ||
             fill_device(b, TALLY_DIST_UNIFORM, 808, s.b, B * KD) || fill_device(b, TALLY_DIST_NORMAL, 909, s.g, B * s.D + B);
    if (rc == 0 && tally_buffer_upload(s.extra, 0, logits, sizeof logits) != TALLY_OK) rc = bench_fail(b, "upload logits");
    if (rc == 0) rc = bench_measure(b, gmm_bw_call, &s, 0, &r->t);
    /* Check: every gradient finite (bits are checked by tests and crosscheck). */
    if (rc == 0) {
        float *got = malloc(sizeof(float) * (size_t)(B * KD));
        if (got == NULL) rc = bench_fail(b, "out of host memory");
        if (rc == 0) rc = poison(b, s.o1, 0, B * KD) || gmm_bw_call(b, &s, 0) || download(b, s.o1, 0, B * KD, got);
        if (rc == 0) {
            int64_t bad = -1;
            r->ok = all_finite(got, B * KD, &bad);
            r->value = got[0];
            snprintf(r->check, sizeof r->check, "%s: grad_mu all finite%s", r->ok ? "ok" : "WRONG", r->ok ? "" : " (NOT)");
        }
        free(got);
    }
    release_buffers(&bufs);
    return rc;
}

/* ------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------ */
typedef struct workload {
    const char *name;
    int (*run)(bench *b, result *r);
} workload;

static const workload workloads[] = {
    {.name = "uniform_fill", .run = run_uniform_fill},
    {.name = "raw_fill", .run = run_raw_fill},
    {.name = "normal_fill", .run = run_normal_fill},
    {.name = "categorical", .run = run_categorical},
    {.name = "gmm_small", .run = run_gmm_small},
    {.name = "gmm_large", .run = run_gmm_large},
    {.name = "dm_small", .run = run_dm_small},
    {.name = "dm_large", .run = run_dm_large},
    {.name = "dm_large_row", .run = run_dm_large_row},
    {.name = "kl", .run = run_kl},
    {.name = "kl_log", .run = run_kl_log},
    {.name = "kl_logits", .run = run_kl_logits},
    {.name = "sum_n1", .run = run_sum_n1},
    {.name = "sum_1n", .run = run_sum_1n},
    {.name = "sum_rc", .run = run_sum_rc},
    {.name = "kl_bf16", .run = run_kl_bf16},
    {.name = "dm_large_bf16", .run = run_dm_large_bf16},
    {.name = "sum_rows_bf16", .run = run_sum_rows_bf16},
    {.name = "sum_rows_f32", .run = run_sum_rows_f32},
    {.name = "kl_bw", .run = run_kl_bw},
    {.name = "dm_bw", .run = run_dm_bw},
    {.name = "gmm_bw", .run = run_gmm_bw},
};
#define WORKLOAD_COUNT (sizeof workloads / sizeof workloads[0])

/* A workload's row of the case catalogue (its sizes at scale 1), or NULL. */
static const harness_shape *workload_row(const char *name)
{
    size_t n;
    const harness_shape *rows = harness_shapes(&n);
    for (size_t i = 0; i < n; i++)
        if ((rows[i].families & HARNESS_FAMILY(BENCH)) && strcmp(rows[i].label, name) == 0) return &rows[i];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tally-bench [options]\n"
            "  --backend cuda|opencl|host  backend to time (default host)\n"
            "  --device N                  device index (see --list); default: CUDA 0, first OpenCL GPU\n"
            "  --json PATH                 write JSON lines (one record per ceiling / workload)\n"
            "  --only A,B,...              workloads: uniform_fill raw_fill normal_fill categorical gmm_small\n"
            "                              gmm_large dm_small dm_large dm_large_row kl kl_log kl_logits sum_n1 sum_1n sum_rc\n"
            "                              kl_bf16 dm_large_bf16 sum_rows_bf16 sum_rows_f32\n"
            "                              kl_bw dm_bw gmm_bw\n"
            "  --no-ceilings               skip the ceiling measurements\n"
            "  --scale F                   multiply batch sizes and element counts by F (e.g. 0.01 to smoke-test)\n"
            "  --scales F,G,...            run every workload at each of these scales in turn (time against size);\n"
            "                              the ceilings run once, at the largest scale up to 1\n"
            "  --reps N                    timed batches per measurement, median reported (default 5)\n"
            "  --calls N                   calls per batch (default: enough for --batch-ms; latency-bound: --small-calls)\n"
            "  --batch-ms F                target length of a batch (default 50)\n"
            "  --small-calls N             calls per batch for gmm_small and dm_small (default 1000)\n"
            "  --rotate-mib F              rotate among input copies totalling this much (default 120; 0: off)\n"
            "  --label TEXT                a name for this build in the JSON meta record (variant builds)\n"
            "  --list                      list the devices each backend sees\n"
            "  --list-workloads            print each workload's shape and byte counts at the scales as JSON lines\n"
            "                              (record \"workload\"; bench/numpy_baseline.py reads them), run nothing\n");
}

#define MAX_SCALES 8

/* --list-workloads: every selected workload at every scale, sized by its
 * own run function (b->plan_only makes it return before it allocates), so
 * another program (bench/numpy_baseline.py) times the same shapes and
 * counts the same bytes without a copy of the catalogue or of the scaling
 * rules. One JSON line each on stdout. */
static void list_workloads(bench *b, const char *only, const double *scales, int nscales)
{
    for (int si = 0; si < nscales; si++) {
        b->scale = b_scale_now = scales[si];
        for (size_t k = 0; k < WORKLOAD_COUNT; k++) {
            if (!harness_list_has(only, workloads[k].name)) continue;
            result_count = 0; /* nothing is kept: one slot serves every workload */
            result *r = new_result(workloads[k].name);
            r->base = *workload_row(workloads[k].name); /* main checked that it exists */
            workloads[k].run(b, r);
            harness_json j;
            harness_json_begin(&j, stdout);
            harness_json_str(&j, "record", "workload");
            harness_json_str(&j, "workload", r->workload);
            harness_json_num(&j, "scale", r->scale);
            harness_json_str(&j, "shape", r->shape);
            harness_json_int(&j, "base_rows", (long long)r->base.rows);
            harness_json_int(&j, "base_cols", (long long)r->base.cols);
            harness_json_int(&j, "base_components", (long long)r->base.components);
            harness_json_num(&j, "bytes_read", r->bytes_read);
            harness_json_num(&j, "bytes_written", r->bytes_written);
            harness_json_str(&j, "ceiling", r->ceiling);
            harness_json_bool(&j, "latency_bound", r->latency_bound);
            harness_json_int(&j, "rotation_sets", (long long)r->sets);
            harness_json_end(&j);
        }
    }
}

static int parse_args(int argc, char **argv, bench *b, const char **json_path, const char **only, int *ceilings,
                      int *list, double *scales, int *nscales)
{
    enum { O_BACKEND, O_DEVICE, O_JSON, O_ONLY, O_LABEL, O_SCALE, O_SCALES, O_REPS, O_CALLS, O_BATCH_MS,
           O_SMALL_CALLS, O_ROTATE_MIB, O_NO_CEILINGS, O_LIST, O_LIST_WORKLOADS, O_HELP };
    static const harness_option options[] = {
        {"backend", 1, O_BACKEND}, {"device", 1, O_DEVICE}, {"json", 1, O_JSON}, {"only", 1, O_ONLY},
        {"label", 1, O_LABEL}, {"scale", 1, O_SCALE}, {"scales", 1, O_SCALES}, {"reps", 1, O_REPS},
        {"calls", 1, O_CALLS}, {"batch-ms", 1, O_BATCH_MS}, {"small-calls", 1, O_SMALL_CALLS},
        {"rotate-mib", 1, O_ROTATE_MIB}, {"no-ceilings", 0, O_NO_CEILINGS}, {"list", 0, O_LIST},
        {"list-workloads", 0, O_LIST_WORKLOADS}, {"help", 0, O_HELP},
    };
    harness_args args = HARNESS_ARGS(argc, argv, 1, options);
    for (int id; (id = harness_args_next(&args)) != HARNESS_ARGS_DONE;) {
        const char *val = args.value;
        switch (id) {
        case O_BACKEND:
            if (tally_backend_from_name(val, &b->backend) != TALLY_OK || b->backend == TALLY_BACKEND_AUTO) {
                fprintf(stderr, "tally-bench: unknown backend '%s' (cuda, opencl or host)\n", val);
                return 2;
            }
            break;
        case O_DEVICE: b->device = atoi(val); break;
        case O_JSON: *json_path = val; break;
        case O_ONLY: *only = val; break;
        case O_LABEL: run_label = val; break;
        case O_SCALE:
            scales[0] = atof(val);
            *nscales = 1;
            break;
        case O_SCALES:
            *nscales = 0;
            for (const char *p = val; *p && *nscales < MAX_SCALES;) {
                char *end;
                scales[(*nscales)++] = strtod(p, &end);
                if (end == p) break;
                p = *end == ',' ? end + 1 : end;
            }
            break;
        case O_REPS: b->reps = atoi(val); break;
        case O_CALLS: b->calls = atoi(val); break;
        case O_BATCH_MS: b->batch_ms = atof(val); break;
        case O_SMALL_CALLS: b->small_calls = atoi(val); break;
        case O_ROTATE_MIB: b->rotate_bytes = atof(val) * 1024.0 * 1024.0; break;
        case O_NO_CEILINGS: *ceilings = 0; break;
        case O_LIST: *list = 1; break;
        case O_LIST_WORKLOADS: b->plan_only = 1; break;
        case O_HELP: usage(stdout); exit(0);
        default:
            fprintf(stderr, "tally-bench: %s\n", args.err);
            usage(stderr);
            return 2;
        }
    }
    int scales_ok = *nscales > 0;
    for (int i = 0; i < *nscales; i++) scales_ok = scales_ok && scales[i] > 0;
    if (!scales_ok || b->reps < 1 || b->small_calls < 1 || !(b->batch_ms > 0)) {
        fprintf(stderr, "tally-bench: --scale and --batch-ms must be > 0, --reps and --small-calls >= 1\n");
        return 2;
    }
    if (*only != NULL) {
        for (const char *p = *only; *p;) {
            const char *end = strchr(p, ',');
            size_t n = end ? (size_t)(end - p) : strlen(p), k;
            for (k = 0; k < WORKLOAD_COUNT; k++)
                if (strlen(workloads[k].name) == n && strncmp(p, workloads[k].name, n) == 0) break;
            if (k == WORKLOAD_COUNT) {
                fprintf(stderr, "tally-bench: unknown workload '%.*s' in --only\n", (int)n, p);
                return 2;
            }
            p += n + (end != NULL);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    static bench b;
    b.backend = TALLY_BACKEND_HOST;
    b.device = -1;
    b.scale = 1.0;
    b.reps = 5;
    b.batch_ms = 50.0;
    b.small_calls = 1000;
    b.rotate_bytes = BENCH_ROTATE_BYTES_DEFAULT;
    const char *json_path = NULL, *only = NULL;
    int ceilings = 1, list = 0, nscales = 1;
    double scales[MAX_SCALES] = {1.0};
    int rc = parse_args(argc, argv, &b, &json_path, &only, &ceilings, &list, scales, &nscales);
    if (rc) return rc;
    for (size_t k = 0; k < WORKLOAD_COUNT; k++)
        if (workload_row(workloads[k].name) == NULL) {
            fprintf(stderr, "tally-bench: workload %s has no row in harness/cases.c\n", workloads[k].name);
            return 2;
        }
    if (list) {
        bench_list_devices();
        return 0;
    }
    if (b.plan_only) {
        list_workloads(&b, only, scales, nscales);
        return 0;
    }
    if (json_path != NULL && (json_out = fopen(json_path, "w")) == NULL) {
        perror(json_path);
        return 2;
    }
    const char *backend = tally_backend_name(b.backend);
    int open_rc = bench_open(&b);
    if (open_rc != 0) {
        harness_json j;
        printf("tally-bench: backend %s %s: %s\n", backend, open_rc == 1 ? "not available here, skipped" : "failed",
               b.err);
        if (json_out != NULL) {
            json_common(&j, &b, open_rc == 1 ? "skipped" : "error");
            harness_json_str(&j, "error", b.err);
            harness_json_end(&j);
            fclose(json_out);
        }
        bench_close(&b);
        return open_rc == 1 ? 0 : 1;
    }

    /* The ceilings run at the largest scale up to 1 (the smallest, when all
     * are larger): full-size ceilings for full-size runs, small ones for a
     * smoke test. */
    double ceil_scale = scales[0];
    for (int i = 0; i < nscales; i++)
        if ((scales[i] <= 1.0 && (ceil_scale > 1.0 || scales[i] > ceil_scale)) ||
            (ceil_scale > 1.0 && scales[i] < ceil_scale))
            ceil_scale = scales[i];
    b.scale = ceil_scale;
    b_scale_now = ceil_scale;
    time_t now = time(NULL);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("tally-bench: tally %s, backend %s, device %s\n", tally_version_string(), backend, b.device_name);
    printf("timer %s; scales", b.timer_name);
    for (int i = 0; i < nscales; i++) printf("%s%g", i ? "," : " ", scales[i]);
    printf("; %d batches per median; rotation to %.0f MiB\n\n", b.reps, b.rotate_bytes / (1024.0 * 1024.0));
    if (json_out != NULL) {
        harness_json j;
        json_common(&j, &b, "meta");
        harness_json_str(&j, "tally_version", tally_version_string());
        harness_json_str(&j, "device", b.device_name);
        harness_json_int(&j, "device_index", b.device);
        harness_json_str(&j, "timer", b.timer_name);
        harness_json_num(&j, "scale", nscales == 1 ? scales[0] : NAN);
        harness_json_key(&j, "scales");
        for (int i = 0; i < nscales; i++) fprintf(json_out, "%s%.9g", i ? "," : "[", scales[i]);
        fputc(']', json_out);
        harness_json_num(&j, "ceiling_scale", ceil_scale);
        if (run_label != NULL) harness_json_str(&j, "variant", run_label);
        harness_json_int(&j, "reps", b.reps);
        harness_json_num(&j, "rotate_mib", b.rotate_bytes / (1024.0 * 1024.0));
        harness_json_str(&j, "time", stamp);
        harness_json_end(&j);
    }
    print_header();

    int failures = 0;
    if (ceilings) {
        b.err[0] = '\0';
        int bad = bench_ceilings(&b, ceiling_report);
        if (b.err[0] != '\0') {
            result *r = new_result("ceilings");
            if (r != NULL) {
                r->failed = 1;
                finish_result(&b, r);
            }
        }
        failures += bad != 0;
    }
    for (int si = 0; si < nscales; si++) {
        b.scale = b_scale_now = scales[si];
        if (nscales > 1) printf("-- scale %g\n", b.scale);
        for (size_t k = 0; k < WORKLOAD_COUNT; k++) {
            if (!harness_list_has(only, workloads[k].name)) continue;
            result *r = new_result(workloads[k].name);
            if (r == NULL) break;
            r->base = *workload_row(workloads[k].name); /* main checked that it exists */
            b.err[0] = '\0';
            if (workloads[k].run(&b, r)) r->failed = 1;
            finish_result(&b, r);
            failures += r->failed || !r->ok;
        }
    }

    printf("\nceilings (GB/s): read %.1f, copy %.1f (read + write), write %.1f\n", b.ceil_read, b.ceil_copy,
           b.ceil_write);
    printf("time/call: median over %d batches (%s); wall/call: host clock over a batch of back-to-back calls;\n"
           "single: median of isolated calls. %s\n",
           b.reps, b.timer_name, failures ? "SOME RUNS FAILED OR GAVE WRONG VALUES." : "All checks passed.");
    if (json_out != NULL) fclose(json_out);
    bench_close(&b);
    return failures ? 1 : 0;
}
