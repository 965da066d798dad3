/*
 * bench/bench_vendor.h - what the backend files of tally-bench share
 * (bench_host.c, bench_opencl.c, bench_cuda.c; only those of the backends
 * compiled into libtally are built, listed by tally_backend_list.h).
 *
 * Each backend file supplies one bench_vendor_ops table; bench_vendor.c
 * dispatches to it and holds what is the same for every backend: the
 * measurement loop and the ceilings' sequence, checks and report.
 */
#ifndef TALLY_BENCH_VENDOR_H
#define TALLY_BENCH_VENDOR_H

#include "bench.h"

/* The app side of one backend, as tally-bench drives it. */
typedef struct bench_vendor_ops {
    /* Opens the device: the app's own stream / queue handed to tally, and
     * b->ctx, b->device_name, b->timer_name set. Returns 0, or 1 after
     * bench_fail (with b->vendor->absent set when the backend is simply
     * not here). */
    int (*open)(bench *b);
    /* Releases what open made (b->ctx is released by the caller). Safe
     * after a failed open. */
    void (*close)(bench *b);
    /* See bench_time_batch in bench.h. */
    int (*time_batch)(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                      double *wall_ms);
    /* See bench_ceilings in bench.h. */
    int (*ceilings)(bench *b, bench_ceiling_report report);
    /* Prints one "  --device N: ..." line per device, or "  (none: why)". */
    void (*list)(void);
} bench_vendor_ops;

struct bench_vendor {
    const bench_vendor_ops *ops;
    void *state;        /* the backend file's own, freed by bench_close */
    int markers_failed; /* markers gave no usable profiling: the wall clock was used */
    int absent;         /* the failure means "this backend is not here": skip, not an error */
};

/* Records "<call> failed: <error name> (<code>)" in b->err; returns 1. */
int bench_call_failed(bench *b, const char *call, const char *error_name, int code);

/* A vendor call checked: unless it returns `success`, the call's text and
 * the error's name (namer(result)) end up in b->err and the enclosing
 * function returns 1. Each backend file wraps it for its vendor (CU, CL). */
#define BENCH_CHECKED(b, type, call, success, namer, text)                                \
    do {                                                                                  \
        type bench_r_ = (call);                                                           \
        if (bench_r_ != (success)) return bench_call_failed((b), (text), namer(bench_r_), (int)bench_r_); \
    } while (0)

/* The calls of a timed batch, in order; 0, or 1 at the first failure. */
int bench_run_calls(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls);

/* 1 for the statuses that mean a backend is not here (not compiled, no
 * library, no device). */
int bench_absent_status(tally_status st);

/* The size of the ceilings' buffers: BENCH_CEIL_BYTES scaled by --scale,
 * at most limit (when > 0), in whole 64 KiB units. */
size_t bench_ceil_bytes(bench *b, double limit);

/* Stores the rate of a passed ceiling in *slot and reports it. */
void bench_report_ceiling(bench *b, bench_ceiling_report report, const char *name, const char *what, double bytes,
                          const bench_timing *t, double *slot, double value, int ok, const char *check);

/* The three device ceilings in their one order and with their one set of
 * checks; a GPU backend supplies the calls and read-backs. */
enum { BENCH_BUF_A, BENCH_BUF_B, BENCH_BUF_PARTIAL };
typedef struct bench_device_ceilings {
    /* Allocates buffers a and b of *bytes bytes (a and b poisoned) and room
     * for *threads partial sums of the read kernel, in a state of its own
     * that it stores in *state as soon as it exists. 0, or 1 after
     * bench_fail. */
    int (*setup)(bench *b, void **state, size_t *bytes, size_t *threads);
    /* write fills a with 1.0f, read sums a into the partials, copy copies a
     * to b; each gets the state as its argument. */
    bench_call_fn write, read, copy;
    /* Makes the read kernel; nonzero (after bench_fail) skips ceil_read. */
    int (*read_prepare)(bench *b, void *state);
    /* Copies `bytes` bytes at `offset` of a buffer (BENCH_BUF_*) into dst,
     * after the queue drained. */
    int (*read_back)(bench *b, void *state, int buffer, size_t offset, size_t bytes, void *dst);
    /* Frees the state and what it holds (after a failed setup too). */
    void (*release)(bench *b, void *state);
    /* The write and copy calls as the report names them, and the write's
     * name in check messages ("memset", "fill"). */
    const char *write_call, *copy_call, *write_name;
} bench_device_ceilings;

/* Measures and reports ceil_write, ceil_read and ceil_copy. Returns the
 * number of failures, or 1 after an error. */
int bench_device_ceilings_run(bench *b, bench_ceiling_report report, const bench_device_ceilings *d);

/* A GPU backend's ceilings function, prefix_ceilings (for its
 * bench_vendor_ops), from its functions' names: prefix_ceil_setup,
 * prefix_call_write, prefix_call_read, prefix_call_copy,
 * prefix_read_prepare, prefix_read_back and prefix_ceil_release. */
#define BENCH_DEVICE_CEILINGS(prefix, write_call_name, copy_call_name, write_label)                      \
    static const bench_device_ceilings prefix##_device_ceilings = {                                     \
        .setup = prefix##_ceil_setup, .write = prefix##_call_write, .read = prefix##_call_read,          \
        .copy = prefix##_call_copy, .read_prepare = prefix##_read_prepare, .read_back = prefix##_read_back, \
        .release = prefix##_ceil_release, .write_call = write_call_name, .copy_call = copy_call_name,    \
        .write_name = write_label,                                                                       \
    };                                                                                                   \
    static int prefix##_ceilings(bench *b, bench_ceiling_report report)                                  \
    {                                                                                                    \
        return bench_device_ceilings_run(b, report, &prefix##_device_ceilings);                          \
    }

/* A backend's bench_vendor_ops from its functions' names: prefix_open,
 * prefix_close, prefix_time_batch, prefix_ceilings, prefix_list. */
#define BENCH_VENDOR_OPS(name, prefix)                                                           \
    const bench_vendor_ops bench_vendor_##name = {                                               \
        .open = prefix##_open, .close = prefix##_close, .time_batch = prefix##_time_batch,       \
        .ceilings = prefix##_ceilings, .list = prefix##_list,                                    \
    }

/* The backends' tables, one per line of tally_backend_list.h. */
#define TALLY__BACKEND(name, kind) extern const bench_vendor_ops bench_vendor_##name;
#include "tally_backend_list.h"
#undef TALLY__BACKEND

#endif /* TALLY_BENCH_VENDOR_H */
