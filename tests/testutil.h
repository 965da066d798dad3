/*
 * tests/testutil.h - the shared test fixture and helpers (prefix tt_).
 *
 * Every tests/check_<name>.c defines `Suite *tally_test_suite(void);`, as
 * rows of test cases through TT_SUITE (below), and is linked with
 * tests/runner.c, which runs it. A suite that runs ops on a
 * device defines `const int tally_test_needs_backend = 1;`; the runner then
 * probes the backend named by TALLY_TEST_BACKEND (host, opencl or cuda;
 * default host) before running anything, and exits 77 (meson's SKIP) with a
 * one-line reason when that backend is not compiled in or has no library or
 * device. Meson also sets TALLY_TEST_BACKEND only for such suites, and the
 * runner treats a set variable the same way.
 */
#ifndef TALLY_TESTUTIL_H
#define TALLY_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "tally.h"

/* Defined by a test file whose suite needs a backend (see above). */
extern const int tally_test_needs_backend;
/* Defined by a test file whose suite runs on one backend only, whatever
 * TALLY_TEST_BACKEND says (its name, e.g. "cuda"): the runner probes that
 * backend, so a machine without it skips the suite even when the suite is
 * run by hand. */
extern const char *const tally_test_only_backend;
Suite *tally_test_suite(void);

/* ---- Suite registration: one shape for every test file ---- */

/* One Check test case (TCase) as a row: its tests run in this order, each in
 * its own process in Check's fork mode. */
typedef struct tt_tcase {
    const char *name;
    /* The tests, up to the first NULL (START_TEST's names); at most 23, so
     * that the last slot is NULL (the runner checks it). */
    const TTest *tests[24];
    /* A checked fixture, run around every test (TT_FIXTURE: the test
     * context), and an unchecked one, run once around the whole case. */
    void (*setup)(void);
    void (*teardown)(void);
    void (*unchecked_setup)(void);
    void (*unchecked_teardown)(void);
    /* Seconds per test; 0 keeps the runner's default (300). */
    int timeout;
    /* Above 0, every test is a loop test run for _i in [0, loops), each
     * value in its own process. */
    int loops;
    /* An environment variable: the case is registered only when it is set
     * (work too large for CI, run on request). */
    const char *only_with;
    /* 1: every test is a case of its own, named after the test, so that
     * one test runs by its name (the runner's argument, CK_RUN_CASE). */
    int case_per_test;
} tt_tcase;

/* The suite named `name` made of `count` case rows. */
Suite *tt_suite(const char *name, const tt_tcase *cases, size_t count);

/* Defines tally_test_suite() from case rows written as designated
 * initialisers, e.g.
 *   TT_SUITE("planner", {.name = "plan", .tests = {plan_shapes, plan_invariants}})
 * The rows are an automatic array because START_TEST's names are variables,
 * not constant expressions. */
#define TT_SUITE(name, ...)                                                         \
    Suite *tally_test_suite(void)                                                   \
    {                                                                               \
        const tt_tcase tt_cases_[] = {__VA_ARGS__};                                 \
        return tt_suite((name), tt_cases_, sizeof tt_cases_ / sizeof tt_cases_[0]); \
    }
/* The checked fixture of the test context (tt_setup, tt_teardown). */
#define TT_FIXTURE .setup = tt_setup, .teardown = tt_teardown

/* The bit pattern written over every output before an op runs: a quiet NaN
 * with a recognisable payload, so an element the op forgot to write shows up
 * as 0x7fbadbad rather than as a plausible stale value. */
#define TT_POISON 0x7fbadbadu

/* ---- Backend fixture ---- */

/* The backend named by TALLY_TEST_BACKEND (host when unset). Exits 2 (a
 * harness error, not a test failure) on an unknown name. */
tally_backend tt_backend(void);
/* Probes the test backend without touching the process's own state (in a
 * child process: a vendor runtime initialised before fork is not safe to use
 * after it). Returns 1 when usable, 0 with a reason in `why` when absent,
 * -1 when present but broken (for example a build failure). */
int tt_probe_backend(char *why, size_t why_size);
/* The test context: created on first use with tally_context_create(explicit
 * backend, TALLY_DEVICE_DEFAULT), cached per process; fails the test if it
 * cannot be created. tt_context_release frees it (checked teardown). */
tally_context *tt_context(void);
void tt_context_release(void);
/* Checked fixture pair for TCases: creates the context before each test and
 * releases it after (each test runs in its own process in fork mode). */
void tt_setup(void);
void tt_teardown(void);

/* ---- Buffers ---- */

/* A buffer of n floats (or 4-byte elements), poisoned. */
tally_buffer *tt_buffer(tally_context *ctx, size_t n);
/* A buffer of n floats holding data. */
tally_buffer *tt_upload(tally_context *ctx, const float *data, size_t n);
/* Uploads n floats at element offset `at` of an existing buffer. */
void tt_write(tally_buffer *buf, size_t at, const float *data, size_t n);
/* Downloads n 4-byte elements starting at element `at`. */
void tt_read(const tally_buffer *buf, size_t at, void *dst, size_t n);
/* Fills the whole buffer with TT_POISON. */
void tt_poison(tally_buffer *buf);
/* Reads one float at element index `at`. */
float tt_read1(const tally_buffer *buf, size_t at);
/* `op` over all elements of a rows x cols copy of x on a fresh buffer of
 * ctx; fails the test when the op fails. */
float tt_reduce_all(tally_context *ctx, tally_reduce_op op, const float *x, int64_t rows, int64_t cols);

/* ---- Poisoned strided placement (harness/place.h) ---- */

/* A view placed in a buffer of its own, every element outside it poisoned. */
typedef struct tt_placed {
    tally_buffer *buf;
    tally_view view;
    size_t total; /* elements in the buffer */
} tt_placed;

/* dense [rows, cols] of 4-byte elements (NULL: all poison) at element
 * `offset` with row stride `stride`, in a new buffer of the test context
 * with `pad` spare elements after it; every other element holds TT_POISON.
 * The view has the given dtype (4-byte types). */
tt_placed tt_place(const void *dense, tally_dtype dtype, int64_t rows, int64_t cols, int64_t offset,
                   int64_t stride, int64_t pad);
/* Reads the view's elements densely into dst and asserts that nothing
 * outside the view changed. */
void tt_read_placed(const tt_placed *p, void *dst);
/* Releases the buffer (the struct may be reused). */
void tt_placed_release(tt_placed *p);
/* tt_placed_release on every tt_placed pointer listed. */
#define tt_placed_release_all(...)                                                  \
    do {                                                                            \
        tt_placed *tt_all_[] = {__VA_ARGS__};                                       \
        for (size_t tt_i_ = 0; tt_i_ < sizeof tt_all_ / sizeof tt_all_[0]; tt_i_++) \
            tt_placed_release(tt_all_[tt_i_]);                                      \
    } while (0)

/* ---- Deterministic inputs: xorshift64* with a fixed seed per call site. ---- */
typedef struct tt_rand {
    uint64_t s;
} tt_rand;

tt_rand tt_rand_seed(uint64_t seed);
uint64_t tt_rand_u64(tt_rand *r);
/* In [0, 1), 53 random bits. */
double tt_rand_unit(tt_rand *r);
/* A float uniform in [lo, hi). */
float tt_rand_float(tt_rand *r, double lo, double hi);
/* An integer in [0, n). */
uint64_t tt_rand_below(tt_rand *r, uint64_t n);
/* n floats uniform in [lo, hi). */
void tt_fill_uniform(float *x, size_t n, uint64_t seed, double lo, double hi);
/* n floats ~ N(mean, sd) (Box-Muller in double, rounded). */
void tt_fill_normal(float *x, size_t n, uint64_t seed, double mean, double sd);
/* malloc that fails the test instead of returning NULL. */
void *tt_alloc(size_t bytes);
/* Runs fn on `count` threads at once, thread i with the job at
 * (char *)jobs + i * job_size, and waits for all of them; fails the test if
 * a thread cannot be started (at most 64). */
void tt_run_threads(void *(*fn)(void *job), void *jobs, size_t job_size, int count);

/* ---- Comparisons ---- */

uint32_t tt_bits(float f);
float tt_float(uint32_t bits);
/* Asserts got is within abs_tol of ref (NaN matches NaN, infinities must be
 * equal); the message names `what` and the values. With TALLY_TEST_REPORT
 * set in the environment, each test process prints at exit the largest
 * fraction of a tolerance it used, and where. */
#define tt_assert_close(got, ref, abs_tol, ...) \
    tt_assert_close_at(__FILE__, __LINE__, (got), (ref), (abs_tol), __VA_ARGS__)
void tt_assert_close_at(const char *file, int line, float got, double ref, double abs_tol, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Asserts exact float bits. */
#define tt_assert_bits(got, expected, ...) \
    tt_assert_bits_at(__FILE__, __LINE__, (got), (expected), __VA_ARGS__)
void tt_assert_bits_at(const char *file, int line, float got, float expected, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Asserts a status, printing the context's last error when it differs. */
#define tt_assert_status(st, expected, ctx) \
    tt_assert_status_at(__FILE__, __LINE__, #st, (st), (expected), (ctx))
void tt_assert_status_at(const char *file, int line, const char *expr, tally_status st, tally_status expected,
                         const tally_context *ctx);
#define tt_ok(st, ctx) tt_assert_status(st, TALLY_OK, ctx)

/* Path of a file in tests/data (TALLY_TEST_DATA_DIR from meson). Static
 * storage, overwritten by the next call. */
const char *tt_data_path(const char *name);

#endif /* TALLY_TESTUTIL_H */
