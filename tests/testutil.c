/*
 * tests/testutil.c - see testutil.h.
 */
#include "testutil.h"

#include "place.h"
#include "rand.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- Threads ------------------------------------------------------------- */

void tt_run_threads(void *(*fn)(void *job), void *jobs, size_t job_size, int count)
{
    pthread_t ids[64];
    ck_assert_msg(count >= 1 && count <= 64, "tt_run_threads: %d threads", count);
    for (int i = 0; i < count; i++)
        ck_assert_int_eq(pthread_create(&ids[i], NULL, fn, (char *)jobs + (size_t)i * job_size), 0);
    for (int i = 0; i < count; i++) ck_assert_int_eq(pthread_join(ids[i], NULL), 0);
}

/* ---- Backend fixture ------------------------------------------------------ */

tally_backend tt_backend(void)
{
    const char *name = getenv("TALLY_TEST_BACKEND");
    if (name == NULL || name[0] == '\0') return TALLY_BACKEND_HOST;
    tally_backend b;
    if (tally_backend_from_name(name, &b) != TALLY_OK || b == TALLY_BACKEND_AUTO) {
        fprintf(stderr, "TALLY_TEST_BACKEND='%s' is not host, opencl or cuda\n", name);
        exit(2);
    }
    return b;
}

static int absent_status(tally_status st)
{
    return st == TALLY_BACKEND_NOT_COMPILED || st == TALLY_LIBRARY_MISSING || st == TALLY_NO_DEVICE ||
           st == TALLY_DEVICE_UNSUITABLE;
}

int tt_probe_backend(char *why, size_t why_size)
{
    tally_backend b = tt_backend();
    const char *name = tally_backend_name(b);
    if (!tally_backend_compiled(b)) {
        snprintf(why, why_size, "the %s backend is not compiled into this build", name);
        return 0;
    }
    /* The probe creates a context in a child, which reports its status and
     * message through a pipe: the parent never initialises the vendor
     * runtime, so the tests it forks start from a clean process. */
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, why_size, "pipe failed");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_size, "fork failed");
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        tally_context *ctx = NULL;
        tally_status st = tally_context_create(b, TALLY_DEVICE_DEFAULT, &ctx);
        char msg[1024];
        snprintf(msg, sizeof msg, "%d %s", (int)st,
                 st == TALLY_OK ? tally_context_device_name(ctx) : tally_last_error(NULL));
        tally_context_release(ctx);
        ssize_t w = write(fds[1], msg, strlen(msg) + 1);
        (void)w;
        close(fds[1]);
        _exit(0);
    }
    close(fds[1]);
    char msg[1024] = "";
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fds[0], msg + got, sizeof msg - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        if (got >= sizeof msg - 1) break;
    }
    msg[got] = '\0';
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0 || got == 0) {
        snprintf(why, why_size, "creating a %s context crashed the probe process", name);
        return -1;
    }
    int code = atoi(msg);
    const char *text = strchr(msg, ' ');
    text = text != NULL ? text + 1 : "";
    if (code == TALLY_OK) {
        snprintf(why, why_size, "%s", text);
        return 1;
    }
    snprintf(why, why_size, "%s context: %s: %s", name, tally_status_name((tally_status)code), text);
    return absent_status((tally_status)code) ? 0 : -1;
}

static tally_context *the_context;

tally_context *tt_context(void)
{
    if (the_context != NULL) return the_context;
    tally_status st = tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &the_context);
    ck_assert_msg(st == TALLY_OK, "cannot create a %s context: %s: %s", tally_backend_name(tt_backend()),
                  tally_status_name(st), tally_last_error(NULL));
    ck_assert_int_eq(tally_context_backend(the_context), tt_backend());
    return the_context;
}

void tt_context_release(void)
{
    tally_context_release(the_context);
    the_context = NULL;
}

void tt_setup(void)
{
    (void)tt_context();
}

void tt_teardown(void)
{
    tt_context_release();
}

/* ---- Buffers ---------------------------------------------------------------- */

tally_buffer *tt_buffer(tally_context *ctx, size_t n)
{
    tally_buffer *buf = NULL;
    tally_status st = tally_buffer_create(ctx, n * 4, &buf);
    ck_assert_msg(st == TALLY_OK, "tally_buffer_create(%zu floats): %s: %s", n, tally_status_name(st),
                  tally_last_error(ctx));
    tt_poison(buf);
    return buf;
}

tally_buffer *tt_upload(tally_context *ctx, const float *data, size_t n)
{
    tally_buffer *buf = tt_buffer(ctx, n);
    tt_write(buf, 0, data, n);
    return buf;
}

void tt_write(tally_buffer *buf, size_t at, const float *data, size_t n)
{
    tally_status st = tally_buffer_upload(buf, at * 4, data, n * 4);
    ck_assert_msg(st == TALLY_OK, "upload: %s", tally_status_name(st));
}

void tt_read(const tally_buffer *buf, size_t at, void *dst, size_t n)
{
    tally_status st = tally_buffer_download(buf, at * 4, dst, n * 4);
    ck_assert_msg(st == TALLY_OK, "download: %s", tally_status_name(st));
}

void tt_poison(tally_buffer *buf)
{
    size_t bytes = tally_buffer_size(buf) & ~(size_t)3;
    if (bytes == 0) return;
    tally_status st = tally_buffer_fill(buf, 0, bytes, TT_POISON);
    ck_assert_msg(st == TALLY_OK, "poison fill: %s", tally_status_name(st));
}

float tt_read1(const tally_buffer *buf, size_t at)
{
    float v;
    tt_read(buf, at, &v, 1);
    return v;
}

float tt_reduce_all(tally_context *ctx, tally_reduce_op op, const float *x, int64_t rows, int64_t cols)
{
    tally_buffer *in = tt_upload(ctx, x, (size_t)(rows * cols)), *out = tt_buffer(ctx, 1);
    tt_ok(tally_reduce(ctx, op, TALLY_AXIS_ALL, tally_view_f32(in, 0, rows, cols), tally_view_f32(out, 0, 1, 1)),
          ctx);
    float v = tt_read1(out, 0);
    tally_buffer_release(in);
    tally_buffer_release(out);
    return v;
}

/* ---- Poisoned strided placement -------------------------------------------- */

tt_placed tt_place(const void *dense, tally_dtype dtype, int64_t rows, int64_t cols, int64_t offset,
                   int64_t stride, int64_t pad)
{
    const harness_window w = {.rows = rows, .cols = cols, .offset = offset, .stride = stride};
    uint64_t total = 0;
    ck_assert_msg(pad >= 0 && harness_window_extent(&w, (uint64_t)pad, &total) == 0,
                  "placement of [%lld x %lld] at %lld, stride %lld overflows", (long long)rows, (long long)cols,
                  (long long)offset, (long long)stride);
    tt_placed p = {.total = (size_t)total};
    uint32_t *h = tt_alloc((p.total > 0 ? p.total : 1) * 4);
    harness_poison(h, total, TT_POISON);
    if (dense != NULL) harness_window_scatter(&w, dense, h);
    p.buf = tt_buffer(tt_context(), p.total);
    if (p.total > 0) tt_write(p.buf, 0, (const float *)h, p.total);
    free(h);
    p.view = (tally_view){.buffer = p.buf, .offset = offset, .rows = rows, .cols = cols, .stride = stride,
                          .dtype = dtype};
    return p;
}

void tt_read_placed(const tt_placed *p, void *dst)
{
    uint32_t *h = tt_alloc((p->total > 0 ? p->total : 1) * 4);
    if (p->total > 0) tt_read(p->buf, 0, h, p->total);
    const harness_window w = {.rows = p->view.rows, .cols = p->view.cols, .offset = p->view.offset,
                              .stride = p->view.stride};
    int64_t changed = harness_window_gather(&w, h, p->total, TT_POISON, dst);
    uint32_t was = changed >= 0 ? h[changed] : 0;
    free(h);
    ck_assert_msg(changed < 0, "element %lld outside the output view was written (0x%08x)", (long long)changed, was);
}

void tt_placed_release(tt_placed *p)
{
    tally_buffer_release(p->buf);
    p->buf = NULL;
}

/* ---- Deterministic inputs ---------------------------------------------------- */

tt_rand tt_rand_seed(uint64_t seed)
{
    /* The first splitmix64 output of the seed, so that small seeds give
     * unrelated streams and the state is never 0. */
    uint64_t z = harness_splitmix64(&seed);
    tt_rand r = {.s = z != 0 ? z : 1};
    return r;
}

uint64_t tt_rand_u64(tt_rand *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

double tt_rand_unit(tt_rand *r)
{
    return (double)(tt_rand_u64(r) >> 11) * 0x1.0p-53;
}

float tt_rand_float(tt_rand *r, double lo, double hi)
{
    return (float)(lo + (hi - lo) * tt_rand_unit(r));
}

uint64_t tt_rand_below(tt_rand *r, uint64_t n)
{
    return n == 0 ? 0 : tt_rand_u64(r) % n;
}

void tt_fill_uniform(float *x, size_t n, uint64_t seed, double lo, double hi)
{
    tt_rand r = tt_rand_seed(seed);
    for (size_t i = 0; i < n; i++) x[i] = tt_rand_float(&r, lo, hi);
}

void tt_fill_normal(float *x, size_t n, uint64_t seed, double mean, double sd)
{
    tt_rand r = tt_rand_seed(seed);
    for (size_t i = 0; i < n; i++) {
        double u = 1.0 - tt_rand_unit(&r), v = tt_rand_unit(&r);
        x[i] = (float)(mean + sd * sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
    }
}

void *tt_alloc(size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    ck_assert_msg(p != NULL, "out of memory for %zu bytes", bytes);
    return p;
}

/* ---- Comparisons ----------------------------------------------------------- */

uint32_t tt_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float tt_float(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static int close_enough(float got, double ref, double tol)
{
    if (isnan(got) || isnan(ref)) return isnan(got) && isnan(ref);
    if (isinf(got) || isinf(ref)) return (double)got == ref;
    return fabs((double)got - ref) <= tol;
}

/* With TALLY_TEST_REPORT set, each test process prints at exit the largest
 * |got - ref| / tolerance it saw: how much of each tolerance is used. */
static double worst_ratio = -1.0;
static char worst_what[512];

static void report_worst(void)
{
    if (worst_ratio >= 0.0) fprintf(stderr, "tolerance used: %.3g of the bound at %s\n", worst_ratio, worst_what);
}

static void track_ratio(const char *file, int line, float got, double ref, double abs_tol, const char *fmt,
                        va_list ap)
{
    if (getenv("TALLY_TEST_REPORT") == NULL || !(abs_tol > 0.0) || !isfinite(got) || !isfinite(ref)) return;
    double ratio = fabs((double)got - ref) / abs_tol;
    if (ratio <= worst_ratio) return;
    if (worst_ratio < 0.0) atexit(report_worst);
    worst_ratio = ratio;
    int n = snprintf(worst_what, sizeof worst_what, "%s:%d: ", file, line);
    if (n > 0 && (size_t)n < sizeof worst_what) vsnprintf(worst_what + n, sizeof worst_what - (size_t)n, fmt, ap);
}

void tt_assert_close_at(const char *file, int line, float got, double ref, double abs_tol, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    track_ratio(file, line, got, ref, abs_tol, fmt, ap);
    va_end(ap);
    if (close_enough(got, ref, abs_tol)) return;
    char what[512];
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ck_assert_msg(0, "%s:%d: %s: got %.9g (0x%08x), reference %.17g, |diff| %.3g > tolerance %.3g", file, line,
                  what, (double)got, tt_bits(got), ref, fabs((double)got - ref), abs_tol);
}

void tt_assert_bits_at(const char *file, int line, float got, float expected, const char *fmt, ...)
{
    if (tt_bits(got) == tt_bits(expected)) return;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ck_assert_msg(0, "%s:%d: %s: got %.9g (0x%08x), expected %.9g (0x%08x)", file, line, what, (double)got,
                  tt_bits(got), (double)expected, tt_bits(expected));
}

void tt_assert_status_at(const char *file, int line, const char *expr, tally_status st, tally_status expected,
                         const tally_context *ctx)
{
    if (st == expected) return;
    ck_assert_msg(0, "%s:%d: %s returned %s, expected %s; last error: %s", file, line, expr, tally_status_name(st),
                  tally_status_name(expected), tally_last_error(ctx));
}

const char *tt_data_path(const char *name)
{
    static char path[4096];
#ifdef TALLY_TEST_DATA_DIR
    const char *dir = TALLY_TEST_DATA_DIR;
#else
    const char *dir = "tests/data";
#endif
    const char *env = getenv("TALLY_TEST_DATA_DIR");
    if (env != NULL && env[0] != '\0') dir = env;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}
