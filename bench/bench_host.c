/*
 * bench/bench_host.c - tally-bench on the host backend: the wall clock as
 * the timer, and one-thread memset, memcpy and word-sum ceilings (tally's
 * host backend may use several threads, so its fractions of these can
 * exceed 1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_vendor.h"

static int host_open(bench *b)
{
    tally_status st = tally_context_create(TALLY_BACKEND_HOST, 0, &b->ctx);
    if (st != TALLY_OK)
        return bench_fail(b, "tally_context_create(host): %s: %s", tally_status_name(st), tally_last_error(NULL));
    b->timer_name = "wall";
    snprintf(b->device_name, sizeof b->device_name, "%s (host)", tally_context_device_name(b->ctx));
    return 0;
}

static void host_close(bench *b)
{
    (void)b;
}

static void host_list(void)
{
    printf("  --device 0: the host CPU\n");
}

static int host_time_batch(bench *b, bench_call_fn fn, void *arg, int64_t first, int calls, double *dev_ms,
                           double *wall_ms)
{
    tally_status st = tally_sync(b->ctx);
    if (st != TALLY_OK) return bench_fail(b, "tally_sync: %s", tally_last_error(b->ctx));
    double w0 = bench_now_s();
    if (bench_run_calls(b, fn, arg, first, calls)) return 1;
    st = tally_sync(b->ctx);
    if (st != TALLY_OK) return bench_fail(b, "tally_sync: %s", tally_last_error(b->ctx));
    *wall_ms = *dev_ms = 1e3 * (bench_now_s() - w0);
    return 0;
}

typedef struct host_ceil {
    size_t bytes;
    unsigned char *h_a, *h_b;
    volatile uint64_t sink;
} host_ceil;

static int host_call_memset(bench *b, void *arg, int64_t i)
{
    host_ceil *c = arg;
    (void)b;
    memset(c->h_a, 0x3f, c->bytes);
    c->h_a[(size_t)i % c->bytes] = 0x3f; /* a use of i, so no call is provably redundant */
    return 0;
}

static int host_call_copy(bench *b, void *arg, int64_t i)
{
    host_ceil *c = arg;
    (void)b;
    (void)i;
    memcpy(c->h_b, c->h_a, c->bytes);
    return 0;
}

static int host_call_read(bench *b, void *arg, int64_t i)
{
    host_ceil *c = arg;
    const uint64_t *w = (const uint64_t *)(const void *)c->h_a;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t n = c->bytes / 8;
    (void)b;
    (void)i;
    for (size_t k = 0; k + 3 < n; k += 4) {
        s0 += w[k];
        s1 += w[k + 1];
        s2 += w[k + 2];
        s3 += w[k + 3];
    }
    c->sink = (s0 + s1) + (s2 + s3);
    return 0;
}

static int host_ceilings_on(bench *b, bench_ceiling_report report, host_ceil *c)
{
    bench_timing t;
    char msg[256];
    int ok, failures = 0;
    c->bytes = bench_ceil_bytes(b, 0);
    c->h_a = malloc(c->bytes);
    c->h_b = malloc(c->bytes);
    if (c->h_a == NULL || c->h_b == NULL) return bench_fail(b, "out of host memory for 2 x %zu bytes", c->bytes);
    memset(c->h_b, 0, c->bytes); /* first touch outside the timing */

    if (bench_measure(b, host_call_memset, c, 0, &t)) return 1;
    ok = c->h_a[0] == 0x3f && c->h_a[c->bytes - 1] == 0x3f;
    bench_report_ceiling(b, report, "ceil_write", "memset, one thread, bytes written", (double)c->bytes, &t,
                   &b->ceil_write, NAN, ok, ok ? "ok" : "WRONG: memset");
    failures += !ok;

    if (bench_measure(b, host_call_read, c, 0, &t)) return 1;
    uint64_t expect = (uint64_t)(c->bytes / 8) * UINT64_C(0x3f3f3f3f3f3f3f3f);
    ok = c->sink == expect;
    snprintf(msg, sizeof msg, "%s: 64-bit word sum", ok ? "ok" : "WRONG");
    bench_report_ceiling(b, report, "ceil_read", "64-bit word sum, one thread, bytes read", (double)c->bytes, &t,
                   &b->ceil_read, NAN, ok, msg);
    failures += !ok;

    if (bench_measure(b, host_call_copy, c, 0, &t)) return 1;
    ok = memcmp(c->h_a, c->h_b, c->bytes) == 0;
    bench_report_ceiling(b, report, "ceil_copy", "memcpy, one thread, bytes read + written", 2.0 * (double)c->bytes, &t,
                   &b->ceil_copy, NAN, ok, ok ? "ok" : "WRONG: memcpy");
    failures += !ok;
    return failures;
}

static int host_ceilings(bench *b, bench_ceiling_report report)
{
    host_ceil c = {0};
    int rc = host_ceilings_on(b, report, &c);
    free(c.h_a);
    free(c.h_b);
    return rc;
}

BENCH_VENDOR_OPS(host, host);
