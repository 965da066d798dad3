/*
 * tools/cli_demo.c - `tally demo`: the three founding workloads at their
 * founding shapes on one backend (AUTO by default), with their values, a
 * float64 check of each and the time each took.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "rand.h"
#include "reference.h"

const char cli_demo_usage[] =
    "usage: tally demo [--backend auto|host|opencl|cuda] [--device N] [--kl-rows R]\n"
    "\n"
    "With no --backend, --device or TALLY_BACKEND: says which backend AUTO picks and\n"
    "why each other backend is or is not usable, runs the founding workloads on\n"
    "every usable backend (AUTO's first) and compares their result bits (exit 1 if\n"
    "they differ). With --backend (or TALLY_BACKEND) it runs on that one backend\n"
    "(auto: CUDA, else an OpenCL GPU, any OpenCL device, the host). Workloads:\n"
    "  1. KL divergence, batchmean, input_is_prob, between two row-softmaxed fp32\n"
    "     matrices [16384 x 16384] (2 GiB of input), generated on the host in\n"
    "     row blocks from fixed tables and uploaded block by block;\n"
    "  2. the Gaussian-mixture reparameterised sample, B=256 K=4 D=64, with its\n"
    "     log density;\n"
    "  3. the Dirichlet-multinomial log-likelihood per row, B=512 V=256.\n"
    "Prints each value next to a float64 evaluation of the same inputs, the\n"
    "input-generation time, and the time of the op (wall clock around the op and\n"
    "tally_sync). Device backends show the first call (which may include building\n"
    "kernels) and the best of up to five more (fewer once they take a second).\n"
    "\n"
    "The KL matrices shrink (by halving their rows, with a note) only when memory\n"
    "is short: on the host and CPU OpenCL devices when MemAvailable cannot hold\n"
    "them, on any device when allocating them fails. --kl-rows R sets the rows\n"
    "explicitly (the columns stay 16384).\n";

#define KL_COLS 16384
#define KL_ROWS 16384
#define KL_BLOCK_ROWS 256
#define TABLE_BITS 12
#define TABLE_SIZE (1u << TABLE_BITS)

/* ---- KL inputs ---------------------------------------------------------------- */

/*
 * Entry (r, c) of matrix m (0: p, 1: t) takes logit L[h(m, r, c)] from a
 * fixed table of N(0, 1) values, and each row is softmaxed in double and
 * rounded once to float. A table lookup instead of a fresh exp per element
 * keeps 2^29 elements within seconds on two cores, and since log p is then
 * known exactly as L - log(row sum), the float64 KL of the rounded inputs
 * costs no log per element either.
 */
typedef struct kl_tables {
    double L[TABLE_SIZE];
    double W[TABLE_SIZE]; /* exp(L) */
} kl_tables;

static inline uint32_t table_index(uint64_t m, uint64_t r, uint64_t c)
{
    uint64_t h = ((r << 20) ^ c) * 0x9E3779B97F4A7C15ull + (m + 1) * 0xD1B54A32D192ED03ull;
    h ^= h >> 32;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (uint32_t)(h >> (64 - TABLE_BITS));
}

typedef struct kl_block_task {
    const kl_tables *tb;
    int64_t row0, rows, cols;
    float *p, *t;
    double kl; /* sum over the task's rows of sum_c t (log t - log p), in double */
    pthread_t thread;
    int threaded;
} kl_block_task;

static void *kl_block_rows(void *arg)
{
    kl_block_task *k = arg;
    const double *L = k->tb->L, *W = k->tb->W;
    double kl = 0.0;
    for (int64_t i = 0; i < k->rows; i++) {
        uint64_t r = (uint64_t)(k->row0 + i);
        float *p = k->p + i * k->cols, *t = k->t + i * k->cols;
        double sp = 0.0, st = 0.0;
        for (int64_t c = 0; c < k->cols; c++) {
            sp += W[table_index(0, r, (uint64_t)c)];
            st += W[table_index(1, r, (uint64_t)c)];
        }
        double log_sp = log(sp), log_st = log(st), inv_sp = 1.0 / sp, inv_st = 1.0 / st, row = 0.0;
        for (int64_t c = 0; c < k->cols; c++) {
            uint32_t ip = table_index(0, r, (uint64_t)c), it = table_index(1, r, (uint64_t)c);
            double pd = W[ip] * inv_sp, td = W[it] * inv_st;
            float pf = (float)pd, tf = (float)td;
            p[c] = pf;
            t[c] = tf;
            /* log of the rounded float: log(pd) + log1p((pf - pd) / pd), whose
             * second term is below 2^-24 in size, so its first order is exact
             * to ~1e-15. */
            double log_pf = (L[ip] - log_sp) + ((double)pf - pd) / pd;
            double log_tf = (L[it] - log_st) + ((double)tf - td) / td;
            row += (double)tf * (log_tf - log_pf);
        }
        kl += row;
    }
    k->kl = kl;
    return NULL;
}

/* Generates rows [row0, row0 + rows) of p and t with `threads` threads and
 * returns their float64 KL sum. */
static double kl_generate_block(const kl_tables *tb, int64_t row0, int64_t rows, float *p, float *t, int threads)
{
    kl_block_task tasks[64];
    if (threads > 64) threads = 64;
    if (threads > rows) threads = (int)rows;
    int64_t per = (rows + threads - 1) / threads;
    int started = 0;
    for (int i = 0; i < threads; i++) {
        int64_t begin = i * per, end = begin + per < rows ? begin + per : rows;
        if (begin >= end) break;
        tasks[i] = (kl_block_task){.tb = tb, .row0 = row0 + begin, .rows = end - begin, .cols = KL_COLS,
                                   .p = p + begin * KL_COLS, .t = t + begin * KL_COLS, .kl = 0.0, .threaded = 0};
        /* Task 0 runs on this thread; the others on their own, or here too
         * when a thread cannot be started. */
        if (i > 0) tasks[i].threaded = pthread_create(&tasks[i].thread, NULL, kl_block_rows, &tasks[i]) == 0;
        if (i > 0 && !tasks[i].threaded) kl_block_rows(&tasks[i]);
        started = i + 1;
    }
    kl_block_rows(&tasks[0]);
    double kl = tasks[0].kl;
    for (int i = 1; i < started; i++) {
        if (tasks[i].threaded) pthread_join(tasks[i].thread, NULL);
        kl += tasks[i].kl;
    }
    return kl;
}

/* ---- Timing -------------------------------------------------------------------- */

typedef struct timing {
    double first;
    double best; /* of the repeats after the first; NAN when there were none */
} timing;

/* Seconds as "12.345 s" or "1.234 ms" or "12.3 us". */
static void format_seconds(char *out, size_t size, double s)
{
    if (s >= 1.0) snprintf(out, size, "%.3f s", s);
    else if (s >= 1e-3) snprintf(out, size, "%.3f ms", 1e3 * s);
    else snprintf(out, size, "%.1f us", 1e6 * s);
}

static void print_timing(timing tm, double bytes)
{
    char text[32];
    format_seconds(text, sizeof text, tm.first);
    printf("      time (op + sync): %s%s", text, isnan(tm.best) ? "" : " first call");
    if (bytes > 0.0) printf(", %.2f GB/s", bytes / tm.first * 1e-9);
    if (!isnan(tm.best)) {
        format_seconds(text, sizeof text, tm.best);
        printf("; %s best of the next calls", text);
        if (bytes > 0.0) printf(", %.2f GB/s", bytes / tm.best * 1e-9);
    }
    printf("\n");
}

/* ---- Workloads ------------------------------------------------------------------ */

typedef struct demo {
    tally_context *ctx;
    tally_backend backend;
    int is_gpu;     /* the device is a GPU (memory is not the host's) */
    int repeats;    /* timed calls after the first (0 on the host) */
    int64_t kl_rows;
    int kl_rows_given;
    char error[128]; /* a failure of the tool itself (host memory), else "" */
    /* What each workload returned, as bits, for the comparison across
     * backends: the KL value itself, and 64-bit FNV-1a hashes of every output
     * byte of the mixture (z, log q, components) and the per-row values. */
    uint32_t kl_bits;
    int64_t kl_rows_used;
    uint64_t gmm_hash, dm_hash;
} demo;

static uint64_t fnv1a(uint64_t h, const void *data, size_t bytes)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

#define TRY(expr)                                  \
    do {                                           \
        tally_status try_st_ = (expr);             \
        if (try_st_ != TALLY_OK) {                 \
            st = try_st_;                          \
            goto done;                             \
        }                                          \
    } while (0)

/* Times the first call of an op and then up to `repeats` more (op + sync
 * each), stopping once the repeats have taken a second: a CPU device needs
 * seconds per KL call, a GPU milliseconds. */
#define REPEAT_BUDGET_S 1.0
#define TIME_OP(d, tm, call)                                                 \
    do {                                                                     \
        double spent_ = 0.0;                                                 \
        (tm).first = 0.0;                                                    \
        (tm).best = NAN;                                                     \
        for (int rep_ = 0; rep_ <= (d)->repeats; rep_++) {                   \
            double s0_ = cli_now();                                          \
            TRY(call);                                                       \
            TRY(tally_sync((d)->ctx));                                       \
            double s_ = cli_now() - s0_;                                     \
            if (rep_ == 0) {                                                 \
                (tm).first = s_;                                             \
                continue;                                                    \
            }                                                                \
            if (isnan((tm).best) || s_ < (tm).best) (tm).best = s_;          \
            spent_ += s_;                                                    \
            if (spent_ > REPEAT_BUDGET_S) break;                             \
        }                                                                    \
    } while (0)

/* Allocates p and t of rows x KL_COLS, touching their last element so that
 * lazily allocating devices fail here rather than later. */
static tally_status kl_allocate(demo *d, int64_t rows, tally_buffer **p, tally_buffer **t)
{
    size_t bytes = (size_t)rows * KL_COLS * sizeof(float);
    *p = *t = NULL;
    tally_status st = tally_buffer_create(d->ctx, bytes, p);
    if (st == TALLY_OK) st = tally_buffer_create(d->ctx, bytes, t);
    if (st == TALLY_OK) st = tally_buffer_fill(*p, bytes - 4, 4, 0u);
    if (st == TALLY_OK) st = tally_buffer_fill(*t, bytes - 4, 4, 0u);
    if (st == TALLY_OK) st = tally_sync(d->ctx);
    if (st != TALLY_OK) {
        tally_buffer_release(*p);
        tally_buffer_release(*t);
        *p = *t = NULL;
    }
    return st;
}

static tally_status demo_kl(demo *d)
{
    tally_status st = TALLY_OK;
    tally_buffer *p = NULL, *t = NULL, *y = NULL;
    float *block = NULL;
    kl_tables *tb = malloc(sizeof *tb);
    int64_t rows = d->kl_rows;
    const uint64_t row_bytes = (uint64_t)KL_COLS * sizeof(float);
    if (tb == NULL) {
        snprintf(d->error, sizeof d->error, "out of host memory for the KL tables");
        return TALLY_OUT_OF_MEMORY;
    }

    printf("[1/3] KL divergence: kl_div(p, t, batchmean, input_is_prob), p and t row-softmaxed [%lld x %d] fp32\n",
           (long long)rows, KL_COLS);
    /* The host backend's buffers, and a CPU OpenCL device's, are host memory. */
    if (!d->is_gpu && !d->kl_rows_given) {
        uint64_t avail = cli_mem_available();
        uint64_t spare = 512ull << 20; /* staging blocks, the process, the system */
        while (avail > 0 && rows > KL_BLOCK_ROWS && 2 * (uint64_t)rows * row_bytes + spare > avail) {
            rows /= 2;
            printf("      note: %.1f GiB of memory available; halving the rows to %lld\n",
                   (double)avail / (double)(1ull << 30), (long long)rows);
        }
    }
    for (;;) {
        st = kl_allocate(d, rows, &p, &t);
        if (st != TALLY_OUT_OF_MEMORY || rows <= KL_BLOCK_ROWS) break;
        printf("      note: allocating 2 x %.2f GiB failed (%s); retrying with %lld rows\n",
               (double)((uint64_t)rows * row_bytes) / (double)(1ull << 30), tally_last_error(d->ctx),
               (long long)(rows / 2));
        rows /= 2;
    }
    if (st != TALLY_OK) goto done;
    TRY(tally_buffer_create(d->ctx, sizeof(float), &y));

    /* Inputs: tables, then blocks of rows generated with every core and
     * uploaded one after the other. */
    double t0 = cli_now();
    harness_rand r = harness_rand_make(16384);
    for (unsigned i = 0; i < TABLE_SIZE; i++) {
        tb->L[i] = harness_rand_normal(&r);
        tb->W[i] = exp(tb->L[i]);
    }
    block = malloc(2 * (size_t)KL_BLOCK_ROWS * KL_COLS * sizeof(float));
    if (block == NULL) {
        snprintf(d->error, sizeof d->error, "out of host memory for the KL staging blocks");
        st = TALLY_OUT_OF_MEMORY;
        goto done;
    }
    float *bp = block, *bt = block + (size_t)KL_BLOCK_ROWS * KL_COLS;
    double kl64 = 0.0;
    int threads = cli_processors();
    for (int64_t row0 = 0; row0 < rows; row0 += KL_BLOCK_ROWS) {
        int64_t n = rows - row0 < KL_BLOCK_ROWS ? rows - row0 : KL_BLOCK_ROWS;
        kl64 += kl_generate_block(tb, row0, n, bp, bt, threads);
        TRY(tally_buffer_upload(p, (size_t)row0 * row_bytes, bp, (size_t)n * row_bytes));
        TRY(tally_buffer_upload(t, (size_t)row0 * row_bytes, bt, (size_t)n * row_bytes));
    }
    kl64 /= (double)rows;
    double gen_seconds = cli_now() - t0;
    printf("      inputs: generated and uploaded in %.2f s (%.2f GiB, %d thread%s)\n", gen_seconds,
           (double)(2 * (uint64_t)rows * row_bytes) / (double)(1ull << 30), threads, threads == 1 ? "" : "s");

    tally_view vp = tally_view_f32(p, 0, rows, KL_COLS), vt = tally_view_f32(t, 0, rows, KL_COLS);
    tally_view vy = tally_view_f32(y, 0, 1, 1);
    timing tm;
    TIME_OP(d, tm, tally_kl_div(d->ctx, vp, vt, TALLY_REDUCTION_BATCHMEAN, TALLY_KL_INPUT_IS_PROB, vy));
    float kl;
    TRY(tally_read_scalar(d->ctx, vy, &kl));
    memcpy(&d->kl_bits, &kl, sizeof kl);
    d->kl_rows_used = rows;
    printf("      kl_div = %.9g   (float64 of the same inputs: %.12g; difference %.2g, %.1f ulp)\n", (double)kl,
           kl64, (double)kl - kl64, tally_ref_ulp_diff(kl, kl64));
    print_timing(tm, (double)(2 * (uint64_t)rows * row_bytes));
done:
    tally_buffer_release(p);
    tally_buffer_release(t);
    tally_buffer_release(y);
    free(block);
    free(tb);
    return st;
}

/* A buffer of `bytes` on the demo's context holding data (NULL: left as
 * created, for an output). */
static tally_status new_buffer(demo *d, const void *data, size_t bytes, tally_buffer **out)
{
    tally_status st = tally_buffer_create(d->ctx, bytes, out);
    if (st == TALLY_OK && data != NULL) st = tally_buffer_upload(*out, 0, data, bytes);
    return st;
}

static tally_status demo_gmm(demo *d)
{
    enum { B = 256, K = 4, D = 64 };
    tally_status st = TALLY_OK;
    tally_buffer *bmu = NULL, *blv = NULL, *blg = NULL, *bz = NULL, *blq = NULL, *bc = NULL;
    static float mu[B * K * D], lv[B * K * D], logits[K], z[B * D], log_q[B];
    static int32_t comp[B];
    static double ref[B];
    printf("[2/3] Gaussian-mixture reparameterised sample with log density: B=%d K=%d D=%d\n", B, K, D);
    double t0 = cli_now();
    harness_rand r = harness_rand_make(256);
    harness_fill_normal(mu, (uint64_t)B * K * D, &r, 0.0, 1.5);
    harness_fill_normal(lv, (uint64_t)B * K * D, &r, -0.5, 0.6);
    harness_fill_normal(logits, K, &r, 0.0, 1.0);
    TRY(new_buffer(d, mu, sizeof mu, &bmu));
    TRY(new_buffer(d, lv, sizeof lv, &blv));
    TRY(new_buffer(d, logits, sizeof logits, &blg));
    TRY(new_buffer(d, NULL, sizeof z, &bz));
    TRY(new_buffer(d, NULL, sizeof log_q, &blq));
    TRY(new_buffer(d, NULL, sizeof comp, &bc));
    printf("      inputs: generated and uploaded in %.3f ms\n", 1e3 * (cli_now() - t0));

    tally_rng rng = {.seed = 20261130, .subsequence = 0, .offset = 0};
    uint64_t consumed = 0;
    timing tm;
    TIME_OP(d, tm,
            tally_gmm_sample(d->ctx, tally_view_f32(bmu, 0, B, K * D), tally_view_f32(blv, 0, B, K * D),
                             tally_view_f32(blg, 0, 1, K), K, rng, tally_view_f32(bz, 0, B, D),
                             tally_view_f32(blq, 0, B, 1), tally_view_typed(bc, TALLY_I32, 0, B, 1), &consumed));
    TRY(tally_buffer_download(bz, 0, z, sizeof z));
    TRY(tally_buffer_download(blq, 0, log_q, sizeof log_q));
    TRY(tally_buffer_download(bc, 0, comp, sizeof comp));
    d->gmm_hash = fnv1a(fnv1a(fnv1a(FNV_START, z, sizeof z), log_q, sizeof log_q), comp, sizeof comp);

    int hist[K] = {0};
    double mean = 0.0, worst = 0.0;
    tally_ref_gmm_log_prob(tally_ref_mat_make(z, B, D, D), tally_ref_mat_make(mu, B, K * D, K * D),
                           tally_ref_mat_make(lv, B, K * D, K * D), logits, K, ref, NULL);
    double ref_mean = 0.0;
    for (int b = 0; b < B; b++) {
        if (comp[b] >= 0 && comp[b] < K) hist[comp[b]]++;
        mean += log_q[b];
        ref_mean += ref[b];
        double e = fabs((double)log_q[b] - ref[b]);
        if (e > worst) worst = e;
    }
    printf("      z[0][0..3] = %.9g %.9g %.9g %.9g; components drawn %d/%d/%d/%d; consumed %llu draws\n",
           (double)z[0], (double)z[1], (double)z[2], (double)z[3], hist[0], hist[1], hist[2], hist[3],
           (unsigned long long)consumed);
    printf("      mean log q(z) = %.9g   (float64 of the same z: %.12g; worst row differs by %.2g)\n", mean / B,
           ref_mean / B, worst);
    print_timing(tm, 0.0);
done:
    tally_buffer_release(bmu);
    tally_buffer_release(blv);
    tally_buffer_release(blg);
    tally_buffer_release(bz);
    tally_buffer_release(blq);
    tally_buffer_release(bc);
    return st;
}

static tally_status demo_dm(demo *d)
{
    enum { B = 512, V = 256 };
    tally_status st = TALLY_OK;
    tally_buffer *bn = NULL, *ba = NULL, *by = NULL;
    static float counts[B * V], log_alpha[V], y[B];
    static double ref[B];
    printf("[3/3] Dirichlet-multinomial log-likelihood per row: B=%d V=%d, shared alpha\n", B, V);
    double t0 = cli_now();
    harness_rand r = harness_rand_make(512);
    harness_fill_counts(counts, (uint64_t)B * V, &r);
    harness_fill_normal(log_alpha, V, &r, -0.5, 0.8);
    TRY(new_buffer(d, counts, sizeof counts, &bn));
    TRY(new_buffer(d, log_alpha, sizeof log_alpha, &ba));
    TRY(new_buffer(d, NULL, sizeof y, &by));
    printf("      inputs: generated and uploaded in %.3f ms\n", 1e3 * (cli_now() - t0));
    timing tm;
    TIME_OP(d, tm,
            tally_dirichlet_multinomial(d->ctx, tally_view_f32(bn, 0, B, V), tally_view_f32(ba, 0, 1, V),
                                        TALLY_REDUCTION_NONE, 0u, tally_view_f32(by, 0, B, 1)));
    TRY(tally_buffer_download(by, 0, y, sizeof y));
    d->dm_hash = fnv1a(FNV_START, y, sizeof y);
    tally_ref_dirichlet_multinomial(tally_ref_mat_make(counts, B, V, V), tally_ref_mat_make(log_alpha, 1, V, V),
                                    TALLY_REF_REDUCTION_NONE, 0u, ref, NULL);
    double total = 0.0, ref_total = 0.0, worst = 0.0;
    for (int b = 0; b < B; b++) {
        total += y[b];
        ref_total += ref[b];
        double e = fabs((double)y[b] - ref[b]);
        if (e > worst) worst = e;
    }
    printf("      rows 0..2 = %.9g %.9g %.9g; sum over rows %.9g\n", (double)y[0], (double)y[1], (double)y[2],
           total);
    printf("      float64 of the same inputs: rows 0..2 = %.12g %.12g %.12g; sum %.12g; worst row differs by %.2g\n",
           ref[0], ref[1], ref[2], ref_total, worst);
    print_timing(tm, 0.0);
done:
    tally_buffer_release(bn);
    tally_buffer_release(ba);
    tally_buffer_release(by);
    return st;
}

/* Whether the context's device is a GPU, from the backend's device list. */
static int context_is_gpu(tally_context *ctx)
{
    tally_device_info devices[64];
    int count = 0;
    if (tally_devices(tally_context_backend(ctx), devices, 64, &count) != TALLY_OK) return 0;
    const char *name = tally_context_device_name(ctx);
    for (int i = 0; i < count && i < 64; i++)
        if (strcmp(devices[i].name, name) == 0) return devices[i].is_gpu;
    return 0;
}

/* Runs the three workloads on one context of (backend, device), printing as
 * it goes. Returns a CLI exit code; the results are left in *d. */
static int demo_one(demo *d, tally_backend backend, int device, int release)
{
    cli_note_first_opencl_use(backend);
    double t0 = cli_now();
    tally_status st = tally_context_create(backend, device, &d->ctx);
    if (st != TALLY_OK) return cli_library_error(NULL, st);
    d->backend = tally_context_backend(d->ctx);
    d->is_gpu = context_is_gpu(d->ctx);
    d->error[0] = '\0';
    /* The host runs each op to completion, so one call is the measure; a
     * device's first call may include building its kernels. */
    d->repeats = d->backend == TALLY_BACKEND_HOST ? 0 : 5;
    printf("tally %s demo on backend %s, device '%s'%s (context created in %.3f s)\n", tally_version_string(),
           tally_backend_name(d->backend), tally_context_device_name(d->ctx), d->is_gpu ? " (GPU)" : "",
           cli_now() - t0);
    fflush(stdout);

    st = demo_kl(d);
    fflush(stdout);
    if (st == TALLY_OK) st = demo_gmm(d);
    fflush(stdout);
    if (st == TALLY_OK) st = demo_dm(d);
    int rc = CLI_EXIT_OK;
    if (st != TALLY_OK && d->error[0] != '\0') {
        fprintf(stderr, "error: %s: %s\n", tally_status_name(st), d->error);
        rc = CLI_EXIT_FAIL;
    } else if (st != TALLY_OK) {
        rc = cli_library_error(d->ctx, st);
    } else {
        printf("total %.1f s\n", cli_now() - t0);
    }
    if (release) {
        tally_context_release(d->ctx);
        d->ctx = NULL;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) rc = cli_io_error("cannot write to standard output");
    return rc;
}

/* The headline: AUTO's choice and why the other backends were or were not
 * usable, then the same workloads on every backend present, their result
 * bits side by side. Exit 1 when a backend failed or any bit differs. */
static int demo_everywhere(demo *d)
{
    static const tally_backend order[] = {TALLY_BACKEND_CUDA, TALLY_BACKEND_OPENCL, TALLY_BACKEND_HOST};
    enum { N_BACKENDS = sizeof order / sizeof order[0] };
    tally_context *auto_ctx = NULL;
    tally_status auto_st = tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &auto_ctx);
    if (auto_st != TALLY_OK) return cli_library_error(NULL, auto_st);
    tally_backend picked = tally_context_backend(auto_ctx);
    printf("auto picks %s ('%s'); AUTO tries CUDA, an OpenCL GPU, any OpenCL device, then the host\n",
           tally_backend_name(picked), tally_context_device_name(auto_ctx));
    tally_context_release(auto_ctx);

    int usable[N_BACKENDS];
    for (int i = 0; i < N_BACKENDS; i++) {
        int count = 0;
        tally_status st = tally_devices(order[i], NULL, 0, &count);
        usable[i] = st == TALLY_OK && count > 0;
        if (usable[i])
            printf("  %-6s: %d device%s\n", tally_backend_name(order[i]), count, count == 1 ? "" : "s");
        else
            printf("  %-6s: not used: %s: %s\n", tally_backend_name(order[i]),
                   tally_status_name(st == TALLY_OK ? TALLY_NO_DEVICE : st),
                   st == TALLY_OK ? "no device" : tally_last_error(NULL));
    }
    printf("Running the founding workloads on each usable backend (default device), AUTO's first.\n\n");

    demo results[N_BACKENDS];
    tally_backend ran[N_BACKENDS];
    int n_ran = 0, rc = CLI_EXIT_OK;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N_BACKENDS; i++) {
            if (!usable[i] || (pass == 0) != (order[i] == picked)) continue;
            results[n_ran] = *d;
            int one = demo_one(&results[n_ran], order[i], TALLY_DEVICE_DEFAULT, 1);
            printf("\n");
            if (one != CLI_EXIT_OK) {
                rc = one;
                continue;
            }
            ran[n_ran++] = order[i];
        }

    printf("Result bits on every backend (KL value; FNV-1a of every output byte of the others):\n");
    printf("  %-28s", "workload");
    for (int i = 0; i < n_ran; i++) printf(" %-18s", tally_backend_name(ran[i]));
    printf("\n  %-28s", "KL batchmean");
    for (int i = 0; i < n_ran; i++) printf(" 0x%08x%-8s", results[i].kl_bits, "");
    printf("\n  %-28s", "mixture z, log q, component");
    for (int i = 0; i < n_ran; i++) printf(" %016llx  ", (unsigned long long)results[i].gmm_hash);
    printf("\n  %-28s", "Dirichlet-multinomial rows");
    for (int i = 0; i < n_ran; i++) printf(" %016llx  ", (unsigned long long)results[i].dm_hash);
    printf("\n");
    int same = 1, comparable = 1;
    for (int i = 1; i < n_ran; i++) {
        comparable = comparable && results[i].kl_rows_used == results[0].kl_rows_used;
        same = same && results[i].gmm_hash == results[0].gmm_hash && results[i].dm_hash == results[0].dm_hash &&
               (results[i].kl_rows_used != results[0].kl_rows_used || results[i].kl_bits == results[0].kl_bits);
    }
    if (!comparable) printf("note: memory limits shrank the KL on some backend, so its KL value is not compared\n");
    if (n_ran > 1 && same) printf("identical bits on all %d backends\n", n_ran);
    else if (n_ran > 1) {
        printf("THE BITS DIFFER between backends: please report this as a bug\n");
        rc = CLI_EXIT_FAIL;
    }
    return rc;
}

int cli_demo(int argc, char **argv)
{
    const char *usage = cli_demo_usage;
    enum { O_BACKEND, O_DEVICE, O_KL_ROWS, O_HELP };
    static const harness_option options[] = {
        {.name = "backend", .has_value = 1, .id = O_BACKEND},
        {.name = "device", .has_value = 1, .id = O_DEVICE},
        {.name = "kl-rows", .has_value = 1, .id = O_KL_ROWS},
        {.name = "help", .has_value = 0, .id = O_HELP},
    };
    tally_backend backend = TALLY_BACKEND_AUTO;
    int device = TALLY_DEVICE_DEFAULT;
    demo d;
    memset(&d, 0, sizeof d);
    d.kl_rows = KL_ROWS;
    harness_args args = HARNESS_ARGS(argc, argv, 0, options);
    for (int id; (id = harness_args_next(&args)) != HARNESS_ARGS_DONE;) {
        const char *value = args.value;
        switch (id) {
        case O_BACKEND:
            if (tally_backend_from_name(value, &backend) != TALLY_OK)
                return cli_usage_error(usage, "demo: unknown backend '%s'", value);
            break;
        case O_DEVICE:
            if (cli_parse_index(value, &device) != 0)
                return cli_usage_error(usage, "demo: bad device index '%s'", value);
            break;
        case O_KL_ROWS:
            if (cli_parse_size(value, &d.kl_rows) != 0 || d.kl_rows < 1 || d.kl_rows > (1 << 24))
                return cli_usage_error(usage, "demo: --kl-rows must be in [1, 2^24]");
            d.kl_rows_given = 1;
            break;
        case O_HELP: fputs(usage, stdout); return CLI_EXIT_OK;
        default: return cli_usage_error(usage, "demo: %s", args.err);
        }
    }

    if (backend != TALLY_BACKEND_AUTO || device != TALLY_DEVICE_DEFAULT || getenv("TALLY_BACKEND") != NULL) {
        /* One backend, as asked. */
        return demo_one(&d, backend, device, 1);
    }
    return demo_everywhere(&d);
}
