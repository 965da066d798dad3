/*
 * tests/check_cuda.c - the CUDA backend where CI runs: on a machine without
 * the NVIDIA driver or without a GPU, asking for CUDA must fail cleanly with
 * the driver's reason, and AUTO must move on. The same tests hold on a GPU
 * machine, where they expect success instead: each test first works out,
 * through the driver itself, which outcome this machine must give.
 *
 * Needs no backend (runs once, in the core suite). The device tests are in
 * check_cuda_interop.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* What tally must report for CUDA on this machine. */
typedef struct expectation {
    tally_status status;
    int devices;            /* the device count when status is OK */
    const char *prefix;     /* the message must start with this (or NULL) */
    const char *contains;   /* ... and contain this (or NULL) */
    char situation[256];    /* for failure messages */
} expectation;

/* Asks the driver itself, through the one CUDA loader
 * (backends/cuda/cuda_loader.h), what tally must report: the loader's own
 * outcome for a missing library or symbol, then cuInit and the device count
 * called here. Built only where the CUDA backend is (TALLY_TEST_CUDA): cuda.h
 * is needed, and elsewhere expect_cuda stops at "not compiled". */
#if TALLY_TEST_CUDA
#  include "backends/cuda/cuda_loader.h"

static void probe_driver(expectation *e)
{
    const char *why = NULL;
    tally__cuda_open(&why);
    if (tally__cu.cuInit == NULL) {
        e->status = TALLY_LIBRARY_MISSING;
        e->prefix = "libcuda.so.1 was not found (";
        snprintf(e->situation, sizeof e->situation, "no NVIDIA driver (%s)", why);
        ck_assert_msg(strncmp(why, e->prefix, strlen(e->prefix)) == 0, "libcuda.so.1 is incomplete: %s", why);
        return;
    }
    CUresult r = tally__cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        e->status = r == CUDA_ERROR_NO_DEVICE      ? TALLY_NO_DEVICE
                    : r == CUDA_ERROR_STUB_LIBRARY ? TALLY_LIBRARY_MISSING
                                                   : TALLY_BACKEND_ERROR; /* refined below */
        e->prefix = "libcuda.so.1 was loaded but cuInit failed: CUDA_ERROR_";
        e->contains = r == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : NULL;
        snprintf(e->situation, sizeof e->situation, "a driver whose cuInit fails with %d", (int)r);
        return;
    }
    int n = 0;
    ck_assert_int_eq(tally__cu.cuDeviceGetCount(&n), CUDA_SUCCESS);
    if (n == 0) {
        e->status = TALLY_NO_DEVICE;
        e->contains = "libcuda.so.1";
        snprintf(e->situation, sizeof e->situation, "a driver with no device");
        return;
    }
    e->devices = n;
    snprintf(e->situation, sizeof e->situation, "a driver with %d device(s)", n);
}
#else
static void probe_driver(expectation *e)
{
    (void)e;
    ck_abort_msg("the cuda backend is compiled, but this test was built without its loader");
}
#endif

/* Not compiled in, no libcuda.so.1, cuInit failing, no device, or usable. */
static expectation expect_cuda(void)
{
    expectation e = {.status = TALLY_OK};
    if (!tally_backend_compiled(TALLY_BACKEND_CUDA)) {
        e.status = TALLY_BACKEND_NOT_COMPILED;
        e.contains = "not compiled";
        snprintf(e.situation, sizeof e.situation, "the cuda backend is not compiled in");
        return e;
    }
    probe_driver(&e);
    return e;
}

/* A cuInit failure other than the two named ones may map to any of the
 * "absent" statuses or BACKEND_ERROR; everything else is exact. */
static void check_outcome(const expectation *e, tally_status st, const char *message, const char *call)
{
    if (e->status == TALLY_BACKEND_ERROR) {
        ck_assert_msg(st != TALLY_OK, "%s succeeded with %s", call, e->situation);
    } else {
        ck_assert_msg(st == e->status, "%s returned %s (%s), expected %s with %s", call, tally_status_name(st),
                      message, tally_status_name(e->status), e->situation);
    }
    if (st == TALLY_OK) return;
    ck_assert_msg(strstr(message, "libcuda.so.1") != NULL || e->status == TALLY_BACKEND_NOT_COMPILED,
                  "%s: the message does not name libcuda.so.1: '%s'", call, message);
    if (e->prefix != NULL)
        ck_assert_msg(strncmp(message, e->prefix, strlen(e->prefix)) == 0,
                      "%s: message '%s' does not start with '%s'", call, message, e->prefix);
    if (e->contains != NULL)
        ck_assert_msg(strstr(message, e->contains) != NULL, "%s: message '%s' lacks '%s'", call, message,
                      e->contains);
}

START_TEST(test_context_outcome)
{
    expectation e = expect_cuda();
    tally_context *ctx = (tally_context *)&e; /* must be overwritten with NULL on failure */
    tally_status st = tally_context_create(TALLY_BACKEND_CUDA, TALLY_DEVICE_DEFAULT, &ctx);
    check_outcome(&e, st, tally_last_error(NULL), "tally_context_create(CUDA)");
    if (st == TALLY_OK) {
        ck_assert_int_eq(tally_context_backend(ctx), TALLY_BACKEND_CUDA);
        ck_assert_msg(tally_context_device_name(ctx)[0] != '\0', "empty device name");
        tally_context_release(ctx);
    } else {
        ck_assert_ptr_null(ctx);
    }
}
END_TEST

START_TEST(test_devices_outcome)
{
    expectation e = expect_cuda();
    tally_device_info info[8];
    int count = -1;
    tally_status st = tally_devices(TALLY_BACKEND_CUDA, info, 8, &count);
    check_outcome(&e, st, tally_last_error(NULL), "tally_devices(CUDA)");
    if (st != TALLY_OK) {
        ck_assert_int_eq(count, 0);
        return;
    }
    ck_assert_int_eq(count, e.devices);
    for (int i = 0; i < count && i < 8; i++) {
        ck_assert_int_eq(info[i].index, i);
        ck_assert_int_eq(info[i].is_gpu, 1);
        ck_assert_msg(info[i].name[0] != '\0', "device %d has no name", i);
        ck_assert_msg(strncmp(info[i].platform, "CUDA driver ", 12) == 0, "platform '%s'", info[i].platform);
    }
    /* capacity 0 only counts. */
    int again = -1;
    tt_ok(tally_devices(TALLY_BACKEND_CUDA, NULL, 0, &again), NULL);
    ck_assert_int_eq(again, count);
}
END_TEST

START_TEST(test_create_cuda_outcome)
{
    expectation e = expect_cuda();
    tally_context *ctx = NULL;
    tally_status st = tally_context_create_cuda(0, NULL, &ctx);
    check_outcome(&e, st, tally_last_error(NULL), "tally_context_create_cuda(0, NULL)");
    tally_context_release(ctx);

    /* A device index past the last one is NO_DEVICE once a driver runs. */
    st = tally_context_create_cuda(1000, NULL, &ctx);
    if (e.status == TALLY_OK) {
        tt_assert_status(st, TALLY_NO_DEVICE, NULL);
        ck_assert_ptr_null(ctx);
    } else {
        check_outcome(&e, st, tally_last_error(NULL), "tally_context_create_cuda(1000, NULL)");
    }
}
END_TEST

/* TALLY_BACKEND=cuda makes AUTO mean CUDA, with CUDA's own outcome. */
START_TEST(test_env_selects_cuda)
{
    expectation e = expect_cuda();
    ck_assert_int_eq(setenv("TALLY_BACKEND", "cuda", 1), 0);
    tally_context *ctx = NULL;
    tally_status st = tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &ctx);
    check_outcome(&e, st, tally_last_error(NULL), "tally_context_create(AUTO) with TALLY_BACKEND=cuda");
    if (st == TALLY_OK) ck_assert_int_eq(tally_context_backend(ctx), TALLY_BACKEND_CUDA);
    tally_context_release(ctx);
    unsetenv("TALLY_BACKEND");
}
END_TEST

/* AUTO tries CUDA first and, where CUDA is unusable, ends on OpenCL or the
 * host (which is always compiled in). */
START_TEST(test_auto_moves_on)
{
    expectation e = expect_cuda();
    unsetenv("TALLY_BACKEND");
    unsetenv("TALLY_DEVICE");
    tally_context *ctx = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_AUTO, TALLY_DEVICE_DEFAULT, &ctx), NULL);
    tally_backend got = tally_context_backend(ctx);
    if (e.status == TALLY_OK)
        ck_assert_msg(got == TALLY_BACKEND_CUDA, "AUTO chose %s with %s", tally_backend_name(got), e.situation);
    else
        ck_assert_msg(got == TALLY_BACKEND_OPENCL || got == TALLY_BACKEND_HOST, "AUTO chose %s with %s",
                      tally_backend_name(got), e.situation);
    /* The context works: a sum on whatever AUTO chose. */
    const float x[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.5f};
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, 5), 15.5f, "sum on the %s backend", tally_backend_name(got));
    tally_context_release(ctx);
}
END_TEST

/* The driver is opened once per process; later calls replay the first
 * outcome with the same message, from any thread. */
typedef struct attempt {
    tally_status status;
    char message[512];
} attempt;

static void *attempt_create(void *arg)
{
    attempt *a = arg;
    tally_context *ctx = NULL;
    a->status = tally_context_create(TALLY_BACKEND_CUDA, 0, &ctx);
    snprintf(a->message, sizeof a->message, "%s", a->status == TALLY_OK ? "" : tally_last_error(NULL));
    tally_context_release(ctx);
    return NULL;
}

START_TEST(test_concurrent_first_use)
{
    enum { THREADS = 4 };
    attempt attempts[THREADS];
    tt_run_threads(attempt_create, attempts, sizeof attempts[0], THREADS);
    /* Asked only now: the probe opens the driver through the same loader,
     * and the threads must be the first to. */
    expectation e = expect_cuda();
    for (int i = 0; i < THREADS; i++) {
        check_outcome(&e, attempts[i].status, attempts[i].message, "tally_context_create(CUDA) on a thread");
        ck_assert_int_eq(attempts[i].status, attempts[0].status);
        ck_assert_str_eq(attempts[i].message, attempts[0].message);
    }
}
END_TEST

/* tally_buffer_wrap_cuda belongs to CUDA contexts only. */
START_TEST(test_wrap_cuda_needs_cuda_context)
{
    tally_context *ctx = NULL;
    tt_ok(tally_context_create(TALLY_BACKEND_HOST, 0, &ctx), NULL);
    tally_buffer *buf = (tally_buffer *)ctx;
    tt_assert_status(tally_buffer_wrap_cuda(ctx, 0x10000, 64, &buf), TALLY_WRONG_CONTEXT, ctx);
    ck_assert_ptr_null(buf);
    ck_assert_msg(strstr(tally_last_error(ctx), "not cuda") != NULL, "message: %s", tally_last_error(ctx));
    tally_context_release(ctx);
}
END_TEST

TT_SUITE("cuda",
         {.name = "no_driver",
          .tests = {test_context_outcome, test_devices_outcome, test_create_cuda_outcome, test_env_selects_cuda,
                    test_auto_moves_on, test_concurrent_first_use, test_wrap_cuda_needs_cuda_context}})
