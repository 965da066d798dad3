/*
 * bench/bench_vendor.c - what tally-bench does the same way on every
 * backend: the measurement loop, the ceilings' sequence and checks, and the
 * dispatch to the backend files (bench_host.c, bench_opencl.c,
 * bench_cuda.c; see bench_vendor.h). The app side of each backend, with
 * its own stream or queue handed to tally exactly as an application would,
 * is in those files; the vendor libraries are reached through tally's
 * vendor loaders (backends/cuda/cuda_loader.h,
 * backends/opencl/opencl_loader.h), so one binary runs anywhere and skips a
 * backend that is absent.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_vendor.h"

/* ------------------------------------------------------------------------
 * Small helpers.
 * ------------------------------------------------------------------------ */
int bench_fail(bench *b, const char *fmt, ...)
{
    if (b->err[0] != '\0') return 1; /* keep the first, root-cause error */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err, sizeof b->err, fmt, ap);
    va_end(ap);
    return 1;
}

double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bench_call_failed(bench *b, const char *call, const char *error_name, int code)
{
    return bench_fail(b, "%s failed: %s (%d)", call, error_name, code);
}

int bench_absent_status(tally_status st)
{
    return st == TALLY_BACKEND_NOT_COMPILED || st == TALLY_LIBRARY_MISSING || st == TALLY_NO_DEVICE;
}

int bench_run_calls(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls)
{
    for (int i = 0; i < calls; i++)
        if (fn(b, arg, first + i)) return 1;
    return 0;
}

/* ------------------------------------------------------------------------
 * The backends: the compiled ones from tally_backend_list.h, listed by
 * --list in a fixed order whether compiled or not.
 * ------------------------------------------------------------------------ */
static const bench_vendor_ops *vendor_ops(tally_backend backend)
{
#define TALLY__BACKEND(name, kind) \
    if (backend == kind) return &bench_vendor_##name;
#include "tally_backend_list.h"
#undef TALLY__BACKEND
    return NULL;
}

int bench_open(bench *b)
{
    bench_vendor *v = calloc(1, sizeof *v);
    if (v == NULL) {
        bench_fail(b, "out of host memory");
        return 2;
    }
    b->vendor = v;
    b->err[0] = '\0';
    v->ops = vendor_ops(b->backend);
    if (v->ops == NULL) {
        v->absent = 1;
        bench_fail(b, "the %s backend is not compiled into this build", tally_backend_name(b->backend));
        return 1;
    }
    if (v->ops->open(b) == 0) return 0;
    return v->absent ? 1 : 2;
}

void bench_close(bench *b)
{
    bench_vendor *v = b->vendor;
    tally_context_release(b->ctx);
    b->ctx = NULL;
    if (v == NULL) return;
    if (v->ops != NULL) v->ops->close(b);
    free(v->state);
    free(v);
    b->vendor = NULL;
}

void bench_list_devices(void)
{
    static const tally_backend order[] = {TALLY_BACKEND_CUDA, TALLY_BACKEND_OPENCL, TALLY_BACKEND_HOST};
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const bench_vendor_ops *ops = vendor_ops(order[i]);
        printf("%s:\n", tally_backend_name(order[i]));
        if (ops != NULL)
            ops->list();
        else
            printf("  (none: the %s backend is not compiled into this build)\n", tally_backend_name(order[i]));
    }
}

/* ------------------------------------------------------------------------
 * Timing.
 * ------------------------------------------------------------------------ */
int bench_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                     double *wall_ms)
{
    return b->vendor->ops->time_batch(b, fn, arg, first, calls, dev_ms, wall_ms);
}

#define BENCH_MAX_CALLS 100000
#define BENCH_SINGLE_CALLS 50

int bench_measure(bench *b, bench_call_fn fn, void *arg, int latency_bound, bench_timing *t)
{
    int reps = b->reps < 1 ? 1 : b->reps;
    int64_t idx = 0;
    double dev, wall;
    b->vendor->markers_failed = 0;
    /* Warm-up: module loads, program builds and first-touch faults stay out
     * of the numbers. The third call's time sizes the batches. */
    if (bench_run_calls(b, fn, arg, idx, 2)) return 1;
    idx += 2;
    if (bench_time_batch(b, fn, arg, idx, 1, &dev, &wall)) return 1;
    idx += 1;
    int calls = b->calls;
    if (calls <= 0 && latency_bound) calls = b->small_calls;
    if (calls <= 0) {
        double per = dev > 1e-4 ? dev : 1e-4;
        double want = ceil(b->batch_ms / per);
        calls = want < 1.0 ? 1 : want > BENCH_MAX_CALLS ? BENCH_MAX_CALLS : (int)want;
    }
    /* One untimed batch, so clocks and queues are in their steady state. */
    if (bench_time_batch(b, fn, arg, idx, calls, &dev, &wall)) return 1;
    idx += calls;
    double *devs = malloc(sizeof(double) * (size_t)(2 * reps + BENCH_SINGLE_CALLS));
    if (devs == NULL) return bench_fail(b, "out of host memory");
    double *walls = devs + reps, *singles = devs + 2 * reps;
    int rc = 0;
    for (int r = 0; r < reps && rc == 0; r++) {
        rc = bench_time_batch(b, fn, arg, idx, calls, &devs[r], &walls[r]);
        idx += calls;
        devs[r] /= calls;
        walls[r] /= calls;
    }
    if (rc == 0) {
        t->batches = reps;
        t->calls = calls;
        t->ms_min = t->ms_max = devs[0];
        for (int r = 1; r < reps; r++) {
            if (devs[r] < t->ms_min) t->ms_min = devs[r];
            if (devs[r] > t->ms_max) t->ms_max = devs[r];
        }
        t->ms_median = median(devs, reps);
        t->wall_us_median = 1e3 * median(walls, reps);
        t->single_us = NAN;
    }
    if (rc == 0 && latency_bound) {
        /* Isolated calls on an idle queue: the latency of one call. */
        for (int r = 0; r < BENCH_SINGLE_CALLS && rc == 0; r++) {
            rc = bench_time_batch(b, fn, arg, idx++, 1, &singles[r], &wall);
            singles[r] *= 1e3;
        }
        if (rc == 0) t->single_us = median(singles, BENCH_SINGLE_CALLS);
    }
    free(devs);
    t->timer = b->vendor->markers_failed ? "wall (markers unusable)" : b->timer_name;
    return rc;
}

/* ------------------------------------------------------------------------
 * Ceilings: the rates every result is compared with, measured in the same
 * run on the same device through the same timer.
 * ------------------------------------------------------------------------ */
#define BENCH_CEIL_BYTES (4.0 * 1024 * 1024 * 1024) /* 4 GiB, scaled by --scale */
#define BENCH_ONE_F32 0x3f800000u                   /* the bits of 1.0f */

int bench_ceilings(bench *b, bench_ceiling_report report)
{
    return b->vendor->ops->ceilings(b, report);
}

size_t bench_ceil_bytes(bench *b, double limit)
{
    double want = BENCH_CEIL_BYTES * b->scale;
    if (limit > 0 && want > limit) want = limit;
    size_t bytes = (size_t)want & ~(size_t)0xFFFF; /* whole 64 KiB units */
    return bytes < 65536 ? 65536 : bytes;
}

void bench_report_ceiling(bench *b, bench_ceiling_report report, const char *name, const char *what, double bytes,
                          const bench_timing *t, double *slot, double value, int ok, const char *check)
{
    double gbps = bytes / (t->ms_median * 1e-3) / 1e9;
    if (ok) *slot = gbps;
    report(b, name, what, bytes, t, value, ok, check);
}

/* Sums the per-thread partials of the read kernel in double: with every
 * input 1.0f each partial is a whole number well under 2^24, so the total
 * is exact and must equal the element count. */
static int check_read_total(const float *partials, size_t threads, double elements, double *total, char *msg,
                            size_t msg_size)
{
    double s = 0.0;
    for (size_t i = 0; i < threads; i++) s += partials[i];
    *total = s;
    int ok = s == elements;
    snprintf(msg, msg_size, "%s: sum of %.0f ones read back as %.0f", ok ? "ok" : "WRONG", elements, s);
    return ok;
}

/* Checks that the first and last 64 KiB of a device copy hold 1.0f. */
static int check_ones(const uint32_t *head, const uint32_t *tail, size_t words, const char *what, char *msg,
                      size_t msg_size)
{
    for (size_t i = 0; i < words; i++)
        if (head[i] != BENCH_ONE_F32 || tail[i] != BENCH_ONE_F32) {
            snprintf(msg, msg_size, "WRONG: %s left 0x%08x at word %zu", what,
                     head[i] != BENCH_ONE_F32 ? head[i] : tail[i], i);
            return 0;
        }
    snprintf(msg, msg_size, "ok: %s wrote 1.0f (first and last 64 KiB checked)", what);
    return 1;
}

/* Measures one of the two calls that leave 1.0f in a buffer (the write into
 * a, the copy into b) and checks the buffer's first and last 64 KiB.
 * Returns 0 (passed), 1 (failed its check) or -1 (an error). */
static int ones_ceiling(bench *b, bench_ceiling_report report, const bench_device_ceilings *d, void *state,
                        size_t bytes, int buffer)
{
    enum { WORDS = 65536 / 4 };
    static uint32_t head[WORDS], tail[WORDS];
    bench_timing t;
    char msg[256], what[128];
    int copy = buffer == BENCH_BUF_B;
    if (bench_measure(b, copy ? d->copy : d->write, state, 0, &t) ||
        d->read_back(b, state, buffer, 0, sizeof head, head) ||
        d->read_back(b, state, buffer, bytes - sizeof tail, sizeof tail, tail))
        return -1;
    int ok = check_ones(head, tail, WORDS, copy ? "copy" : d->write_name, msg, sizeof msg);
    snprintf(what, sizeof what, "%s, %s", copy ? d->copy_call : d->write_call,
             copy ? "bytes read + written" : "bytes written");
    bench_report_ceiling(b, report, copy ? "ceil_copy" : "ceil_write", what, (copy ? 2.0 : 1.0) * (double)bytes, &t,
                         copy ? &b->ceil_copy : &b->ceil_write, NAN, ok, msg);
    return !ok;
}

/* The streaming read of a; 0 (passed), 1 (failed or skipped) or -1. */
static int read_ceiling(bench *b, bench_ceiling_report report, const bench_device_ceilings *d, void *state,
                        size_t bytes, size_t threads)
{
    if (d->read_prepare(b, state)) {
        fprintf(stderr, "ceil_read skipped: %s\n", b->err);
        b->err[0] = '\0';
        return 1;
    }
    bench_timing t;
    char msg[256];
    if (bench_measure(b, d->read, state, 0, &t)) return -1;
    float *partials = malloc(threads * sizeof *partials);
    if (partials == NULL) {
        bench_fail(b, "out of host memory");
        return -1;
    }
    double total = 0.0;
    int ok = 0, failed = d->read_back(b, state, BENCH_BUF_PARTIAL, 0, threads * sizeof *partials, partials);
    if (!failed) ok = check_read_total(partials, threads, (double)(bytes / 4), &total, msg, sizeof msg);
    free(partials);
    if (failed) return -1;
    bench_report_ceiling(b, report, "ceil_read", "streaming-read kernel, bytes read", (double)bytes, &t,
                         &b->ceil_read, total, ok, msg);
    return !ok;
}

int bench_device_ceilings_run(bench *b, bench_ceiling_report report, const bench_device_ceilings *d)
{
    void *state = NULL;
    size_t bytes = 0, threads = 0;
    int write = -1, read = -1, copy = -1;
    /* The write leaves 1.0f everywhere, which the read kernel then checks. */
    if (d->setup(b, &state, &bytes, &threads) == 0 &&
        (write = ones_ceiling(b, report, d, state, bytes, BENCH_BUF_A)) >= 0 &&
        (read = read_ceiling(b, report, d, state, bytes, threads)) >= 0)
        copy = ones_ceiling(b, report, d, state, bytes, BENCH_BUF_B);
    if (state != NULL) d->release(b, state);
    return copy < 0 ? 1 : write + read + copy;
}
