/*
 * bench/bench.h - shared state of tally-bench.
 *
 * bench_vendor.c and the backend files it dispatches to (bench_host.c,
 * bench_opencl.c, bench_cuda.c; bench_vendor.h) own everything that talks to
 * a vendor library directly, through tally's vendor loaders, so one binary
 * runs on any machine: the app-side CUDA stream and events, the app-side
 * OpenCL context and profiling queue, the batch timer and the bandwidth
 * ceilings. bench_ops.c owns the workloads, which go through tally's public
 * API only, and the report.
 */
#ifndef TALLY_BENCH_H
#define TALLY_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "tally.h"

/* Inputs smaller than this are replicated and rotated, so a batch never
 * re-reads what the previous call left in the cache (60 MiB of L2 on an
 * H200, doubled). */
#define BENCH_ROTATE_BYTES_DEFAULT (120.0 * 1024 * 1024)

typedef struct bench_vendor bench_vendor; /* opaque: bench_vendor.c */

typedef struct bench {
    tally_backend backend;
    int device;            /* -1: default (CUDA 0; first OpenCL GPU, else device 0) */
    double scale;          /* shrinks every shape */
    int reps;              /* timed batches per measurement; the median is reported */
    int calls;             /* calls per batch; 0 picks from batch_ms */
    double batch_ms;       /* target length of one timed batch when calls == 0 */
    int small_calls;       /* calls per batch for latency-bound workloads */
    double rotate_bytes;   /* see BENCH_ROTATE_BYTES_DEFAULT */
    int plan_only;         /* --list-workloads: each workload sizes itself and returns before it allocates */

    tally_context *ctx;
    bench_vendor *vendor;
    char device_name[256];
    const char *timer_name; /* "cuda_event", "cl_marker" or "wall" */

    /* Ceilings measured in this run, GB/s (0 when not measured). */
    double ceil_read, ceil_copy, ceil_write;

    char err[1024]; /* the first failure of the current measurement */
} bench;

/* One timed call: performs call number i of a measurement (the callee uses i
 * to rotate among input sets and advance random offsets). Returns 0, or
 * nonzero after writing b->err. */
typedef int (*bench_call_fn)(bench *b, void *arg, int64_t i);

typedef struct bench_timing {
    double ms_median, ms_min, ms_max; /* device (or wall) time per call */
    int batches, calls;
    double wall_us_median; /* host wall clock per call, first enqueue to completion */
    double single_us;      /* median of isolated single calls; NaN when not measured */
    const char *timer;
} bench_timing;

/* printf-style: records the first error of a measurement in b->err. */
int bench_fail(bench *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

double bench_now_s(void);

/* Opens the backend: CUDA and OpenCL through the app's own stream / queue,
 * wrapped with tally_context_create_cuda / _opencl. Returns 0 on success, 1
 * when the backend is absent here (message in b->err: skip it), 2 on a real
 * failure. */
int bench_open(bench *b);
void bench_close(bench *b);
/* Lists every device each backend can see (for --list). */
void bench_list_devices(void);

/* Times one batch of `calls` calls starting at call index `first`. The device
 * queue is drained first. *dev_ms: device time of the batch (CUDA events,
 * OpenCL markers, or the wall clock on the host or when markers fail);
 * *wall_ms: host wall clock from the first enqueue to completion. */
int bench_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                     double *wall_ms);

/* Measures the ceilings for this backend: read (a streaming read kernel),
 * copy (device-to-device copy, bytes read + written) and write (fill). Fills
 * b->ceil_* and calls `report` once per ceiling measured. Returns the number
 * of failures. */
typedef void (*bench_ceiling_report)(bench *b, const char *name, const char *what, double bytes,
                                     const bench_timing *t, double value, int ok, const char *check);
int bench_ceilings(bench *b, bench_ceiling_report report);

/* Warms up and times fn: `reps` batches, median per call. latency_bound adds
 * a batch of small_calls back-to-back calls (wall per call) and isolated
 * single calls. */
int bench_measure(bench *b, bench_call_fn fn, void *arg, int latency_bound, bench_timing *t);

#endif /* TALLY_BENCH_H */
