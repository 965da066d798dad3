/*
 * tests/check_opencl.c - the OpenCL backend.
 *
 * - Bit identity: every op, with every flag and reduction, on many shapes
 *   (tiny, odd, multi-tile and multi-level, strided with stride > cols,
 *   unaligned and aligned offsets, empty) runs on the host backend and on
 *   OpenCL with the same inputs, and every output buffer must be equal byte
 *   for byte (memcmp, never a tolerance), poisoned gaps included, so a
 *   stray write on either side also fails.
 * - The program binary cache (reuse, corrupt files, TALLY_CACHE=0), device
 *   and allocation errors, build failures with their log, and interop with
 *   an app's own cl_context, queue and cl_mem made through libOpenCL here.
 *
 * The internal hooks below are declared weak so that this file also links
 * when the OpenCL backend is compiled out (the runner then skips it).
 */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "backends/opencl/opencl_loader.h"
#include "kernels/kernel_list.h"

const int tally_test_needs_backend = 1;

extern int tally__opencl_program_from_cache(const tally_context *ctx) __attribute__((weak));
extern int tally__opencl_fma_emulated(const tally_context *ctx) __attribute__((weak));
extern tally_status tally__opencl_context_create_with_source(int device, const char *source, tally_context **out)
    __attribute__((weak));
extern void tally__cl_cache_digest(const unsigned char key[32], const unsigned char size_le[8],
                                   const unsigned char *payload, size_t size, unsigned char digest[32])
    __attribute__((weak));

/* The kernel names, from the one list (for stub programs). */
static const char *const kernel_names[] = {
#define KERNEL_NAME(name, args) "tally_k_" #name,
    TALLY_K_KERNELS(KERNEL_NAME)
#undef KERNEL_NAME
};
#define KERNEL_COUNT (sizeof kernel_names / sizeof kernel_names[0])

/* ------------------------------------------------------------------------
 * Two contexts: [0] the host (the reference bits), [1] OpenCL.
 * ------------------------------------------------------------------------ */

static tally_context *ctxs[2];

static void both_setup(void)
{
    tally_status st = tally_context_create(TALLY_BACKEND_HOST, 0, &ctxs[0]);
    ck_assert_msg(st == TALLY_OK, "host context: %s", tally_last_error(NULL));
    st = tally_context_create(TALLY_BACKEND_OPENCL, TALLY_DEVICE_DEFAULT, &ctxs[1]);
    ck_assert_msg(st == TALLY_OK, "opencl context: %s: %s", tally_status_name(st), tally_last_error(NULL));
    ck_assert_int_eq(tally_context_backend(ctxs[1]), TALLY_BACKEND_OPENCL);
}

static void both_teardown(void)
{
    tally_context_release(ctxs[1]);
    tally_context_release(ctxs[0]);
    ctxs[0] = ctxs[1] = NULL;
}

/* The same bytes on both sides. */
typedef struct dual {
    tally_buffer *b[2];
    size_t n; /* 4-byte elements */
} dual;

static dual d_new(size_t n, const void *init)
{
    dual d = {.n = n};
    for (int s = 0; s < 2; s++) {
        tally_status st = tally_buffer_create(ctxs[s], (n > 0 ? n : 1) * 4u, &d.b[s]);
        ck_assert_msg(st == TALLY_OK, "buffer of %zu elements: %s", n, tally_last_error(ctxs[s]));
        if (init != NULL && n > 0) {
            st = tally_buffer_upload(d.b[s], 0, init, n * 4u);
        } else {
            st = tally_buffer_fill(d.b[s], 0, (n > 0 ? n : 1) * 4u, TT_POISON);
            if (st == TALLY_OK) st = tally_sync(ctxs[s]);
        }
        ck_assert_msg(st == TALLY_OK, "buffer init: %s", tally_last_error(ctxs[s]));
    }
    return d;
}

static void d_free(dual *d)
{
    tally_buffer_release(d->b[0]);
    tally_buffer_release(d->b[1]);
    d->b[0] = d->b[1] = NULL;
}

/* 1 when a and b hold the same bits, or differ only in NaN bits and
 * TALLY_TEST_NAN_PAYLOAD=any (see d_check). */
static int same_bits(const uint32_t *a, const uint32_t *b, size_t n)
{
    const char *nan_env = getenv("TALLY_TEST_NAN_PAYLOAD");
    int any_nan = nan_env != NULL && strcmp(nan_env, "any") == 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] == b[i]) continue;
        if (!(any_nan && tt_float(a[i]) != tt_float(a[i]) && tt_float(b[i]) != tt_float(b[i]))) return 0;
    }
    return 1;
}

/* Both buffers must hold the same bytes. */
static void d_check(const dual *d, const char *what)
{
    uint32_t *h = tt_alloc(d->n * 4u + 4u), *c = tt_alloc(d->n * 4u + 4u);
    tally_status st0 = tally_buffer_download(d->b[0], 0, h, d->n * 4u);
    tally_status st1 = tally_buffer_download(d->b[1], 0, c, d->n * 4u);
    ck_assert_msg(st0 == TALLY_OK && st1 == TALLY_OK, "%s: download failed: %s / %s", what,
                  tally_last_error(ctxs[0]), tally_last_error(ctxs[1]));
    if (memcmp(h, c, d->n * 4u) != 0) {
        size_t i = 0, diff = 0, nan_only = 0;
        while (h[i] == c[i]) i++;
        for (size_t k = i; k < d->n; k++) {
            diff += h[k] != c[k];
            nan_only += h[k] != c[k] && tt_float(h[k]) != tt_float(h[k]) && tt_float(c[k]) != tt_float(c[k]);
        }
        /* NVIDIA GPUs return 0x7fffffff from any arithmetic on a NaN where
         * x86 keeps the operand's payload (or makes 0xffc00000), so NaN
         * results differ in their bits between those two until every
         * backend writes one canonical NaN. TALLY_TEST_NAN_PAYLOAD=any
         * accepts that difference (and only that one). */
        const char *nan_env = getenv("TALLY_TEST_NAN_PAYLOAD");
        if (diff == nan_only && nan_env != NULL && strcmp(nan_env, "any") == 0) {
            fprintf(stderr, "note: %s: %zu NaN results differ only in their NaN bits\n", what, nan_only);
            free(h);
            free(c);
            return;
        }
        uint32_t hv = h[i], cv = c[i];
        free(h);
        free(c);
        ck_abort_msg("%s: %zu of %zu elements differ; first at %zu: host 0x%08" PRIx32 " (%.9g), opencl 0x%08" PRIx32
                     " (%.9g)",
                     what, diff, d->n, i, hv, (double)tt_float(hv), cv, (double)tt_float(cv));
    }
    free(h);
    free(c);
}

static tally_view dv(const dual *d, int side, tally_dtype dtype, int64_t offset, int64_t rows, int64_t cols,
                     int64_t stride)
{
    tally_view v = {.buffer = d->b[side], .offset = offset, .rows = rows, .cols = cols, .stride = stride,
                    .dtype = dtype};
    return v;
}

/* Runs `call` (which uses the loop variable s: 0 host, 1 opencl) on both
 * sides; the statuses must agree. */
#define BOTH(what, call)                                                                                         \
    do {                                                                                                         \
        tally_status st_[2];                                                                                     \
        for (int s = 0; s < 2; s++) st_[s] = (call);                                                             \
        ck_assert_msg(st_[0] == st_[1], "%s: host says %s (%s), opencl says %s (%s)", what,                      \
                      tally_status_name(st_[0]), tally_last_error(ctxs[0]), tally_status_name(st_[1]),           \
                      tally_last_error(ctxs[1]));                                                                \
        ck_assert_msg(tally_sync(ctxs[1]) == TALLY_OK, "%s: sync: %s", what, tally_last_error(ctxs[1]));          \
    } while (0)

/* A 2-D placement: rows x cols at `offset` with row stride `stride`, and
 * `pad` spare elements after it. */
typedef struct shape {
    int64_t rows, cols, offset, stride;
} shape;

static size_t extent(shape s, int64_t pad)
{
    if (s.rows == 0 || s.cols == 0) return (size_t)(s.offset + pad);
    return (size_t)(s.offset + (s.rows - 1) * s.stride + s.cols + pad);
}

static char label[512];

#define LABEL(...) (snprintf(label, sizeof label, __VA_ARGS__), label)

/* A buffer of `n` elements filled by `gen` (poison where gen is NULL). */
typedef float (*gen_fn)(tt_rand *r, size_t i);

static float *make_data(size_t n, uint64_t seed, gen_fn gen)
{
    float *x = tt_alloc((n > 0 ? n : 1) * sizeof *x);
    tt_rand r = tt_rand_seed(seed);
    for (size_t i = 0; i < n; i++) x[i] = gen(&r, i);
    return x;
}

static float gen_normal(tt_rand *r, size_t i)
{
    (void)i;
    double u1 = tt_rand_unit(r), u2 = tt_rand_unit(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Mostly normal, with NaN, infinities and signed zeros sprinkled in. */
static float gen_special(tt_rand *r, size_t i)
{
    uint64_t k = tt_rand_below(r, 97);
    if (k == 0) return tt_float(0x7fc00000u);
    if (k == 1) return tt_float(0x7f800000u);
    if (k == 2) return tt_float(0xff800000u);
    if (k == 3) return -0.0f;
    if (k == 4) return 0.0f;
    if (k == 5) return tt_float(0x00000003u); /* a subnormal */
    return gen_normal(r, i) * 30.0f;
}

/* Large values whose total nearly cancels: element i of the buffer's second
 * half is minus element i of the first half. Tile and lane partials are
 * large while the total is small, so any change in the order of additions
 * shows in the result's low bits instead of vanishing in its rounding. */
static size_t cancel_n;

static float gen_cancel(tt_rand *r, size_t i)
{
    size_t half = cancel_n / 2;
    tt_rand m = tt_rand_seed(0x5eed0000u + (i < half ? i : i - half));
    (void)r;
    float v = gen_normal(&m, 0) * 1.0e4f;
    return i < half ? v : -v;
}

static float gen_zero(tt_rand *r, size_t i)
{
    (void)r;
    (void)i;
    return 0.0f;
}

/* Probabilities with exact zeros and the odd negative value. */
static float gen_prob(tt_rand *r, size_t i)
{
    uint64_t k = tt_rand_below(r, 50);
    if (k < 5) return 0.0f;
    if (k == 5 && i % 7 == 3) return -0.25f;
    return (float)tt_rand_unit(r);
}

/* Counts 0..9 with many zeros, rare negative and fractional ones. */
static float gen_count(tt_rand *r, size_t i)
{
    (void)i;
    uint64_t k = tt_rand_below(r, 400);
    if (k == 0) return -1.0f;
    if (k == 1) return 2.5f;
    if (k == 2) return 255.0f; /* the last count in the kernels' lgamma(n + 1) table */
    if (k == 3) return 256.0f; /* the first one past it */
    if (k == 4) return 1.0e6f;
    if (k < 160) return 0.0f;
    return (float)tt_rand_below(r, 10);
}

/* ------------------------------------------------------------------------
 * Reductions
 * ------------------------------------------------------------------------ */

static const shape reduce_shapes[] = {
    {1, 1, 0, 1},          {1, 3, 1, 3},          {3, 1, 0, 1},          {4, 4, 0, 4},
    {7, 13, 2, 13},        {5, 257, 0, 260},      {2, 1000, 4, 1000},    {1, 16384, 0, 16384},
    {1, 16385, 0, 16385},  {3, 16387, 1, 16390},  {129, 513, 0, 513},    {300, 1000, 5, 1003},
    {1, 70001, 4, 70001},  {40, 4096, 8, 4096},   {2, 0, 0, 0},          {0, 5, 0, 5},
    {64, 17, 3, 20},
};

static void reduce_case(shape sh, gen_fn gen, uint64_t seed)
{
    static const tally_reduce_op ops[] = {TALLY_SUM, TALLY_MEAN, TALLY_MIN, TALLY_MAX, TALLY_LOGSUMEXP, TALLY_SUMSQ};
    static const char *const op_names[] = {"sum", "mean", "min", "max", "logsumexp", "sumsq"};
    size_t n = extent(sh, 3);
    float *data = make_data(n, seed, gen);
    dual x = d_new(n, data);
    for (int a = 0; a < 2; a++) {
        tally_axis axis = a == 0 ? TALLY_AXIS_ALL : TALLY_AXIS_ROW;
        int64_t outputs = axis == TALLY_AXIS_ALL ? 1 : sh.rows;
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            /* Outputs as a strided column (stride 2) after one poisoned
             * element. */
            dual out = d_new((size_t)(1 + 2 * (outputs > 0 ? outputs : 1)), NULL);
            const char *what = LABEL("reduce %s axis %s on %lldx%lld (offset %lld, stride %lld)", op_names[o],
                                     a == 0 ? "all" : "row", (long long)sh.rows, (long long)sh.cols,
                                     (long long)sh.offset, (long long)sh.stride);
            BOTH(what, tally_reduce(ctxs[s], ops[o], axis, dv(&x, s, TALLY_F32, sh.offset, sh.rows, sh.cols, sh.stride),
                                    dv(&out, s, TALLY_F32, 1, outputs, 1, 2)));
            d_check(&out, what);
            d_free(&out);
        }
    }
    d_check(&x, "reduce input untouched");
    d_free(&x);
    free(data);
}

START_TEST(test_reduce_bits)
{
    for (size_t i = 0; i < sizeof reduce_shapes / sizeof reduce_shapes[0]; i++) {
        reduce_case(reduce_shapes[i], gen_normal, 100 + i);
        reduce_case(reduce_shapes[i], gen_special, 200 + i);
        cancel_n = extent(reduce_shapes[i], 3);
        reduce_case(reduce_shapes[i], gen_cancel, 300 + i);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * KL divergence
 * ------------------------------------------------------------------------ */

typedef struct kl_shape {
    shape in, tg, out;
} kl_shape;

static const kl_shape kl_shapes[] = {
    {{1, 1, 0, 1}, {1, 1, 0, 1}, {1, 1, 0, 1}},
    {{1, 5, 1, 5}, {1, 5, 2, 5}, {1, 5, 3, 5}},
    {{3, 7, 0, 7}, {3, 7, 0, 7}, {3, 7, 0, 7}},
    {{4, 16, 0, 16}, {4, 16, 4, 16}, {4, 16, 8, 16}},
    {{16, 1024, 0, 1024}, {16, 1024, 0, 1024}, {16, 1024, 0, 1024}},
    {{16, 1025, 4, 1025}, {16, 1025, 8, 1025}, {16, 1025, 0, 1025}},
    {{64, 4096, 0, 4096}, {64, 4096, 0, 4096}, {64, 4096, 0, 4096}},
    {{64, 4097, 0, 4097}, {64, 4097, 0, 4097}, {64, 4097, 4, 4097}},
    {{64, 4096, 1, 4096}, {64, 4096, 0, 4096}, {64, 4096, 2, 4096}},
    {{50, 999, 3, 1001}, {50, 999, 0, 999}, {50, 999, 1, 1005}},
    {{3, 0, 0, 0}, {3, 0, 0, 0}, {3, 0, 0, 0}},
};

static void kl_case(const kl_shape *k, uint64_t seed)
{
    static const unsigned flag_sets[] = {0, TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB,
                                         TALLY_KL_LOG_TARGET | TALLY_KL_INPUT_IS_PROB};
    for (size_t f = 0; f < 4; f++) {
        unsigned flags = flag_sets[f];
        size_t ni = extent(k->in, 1), nt = extent(k->tg, 1);
        float *xi = make_data(ni, seed + f, (flags & TALLY_KL_INPUT_IS_PROB) ? gen_prob : gen_normal);
        float *xt = make_data(nt, seed + 50 + f, (flags & TALLY_KL_LOG_TARGET) ? gen_normal : gen_prob);
        dual in = d_new(ni, xi), tg = d_new(nt, xt);
        for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
            const shape o = k->out;
            dual out = d_new(red == TALLY_REDUCTION_NONE ? extent(o, 2) : 3, NULL);
            const char *what = LABEL("kl flags %u reduction %d on %lldx%lld (offsets %lld/%lld)", flags, red,
                                     (long long)k->in.rows, (long long)k->in.cols, (long long)k->in.offset,
                                     (long long)k->tg.offset);
            BOTH(what, tally_kl_div(ctxs[s], dv(&in, s, TALLY_F32, k->in.offset, k->in.rows, k->in.cols, k->in.stride),
                                    dv(&tg, s, TALLY_F32, k->tg.offset, k->tg.rows, k->tg.cols, k->tg.stride),
                                    (tally_reduction)red, flags,
                                    red == TALLY_REDUCTION_NONE
                                        ? dv(&out, s, TALLY_F32, o.offset, o.rows, o.cols, o.stride)
                                        : dv(&out, s, TALLY_F32, 1, 1, 1, 1)));
            d_check(&out, what);
            d_free(&out);
        }
        d_free(&in);
        d_free(&tg);
        free(xi);
        free(xt);
    }
}

/* With a log-target of 0 every term is exactly -input, so a nearly
 * cancelling input makes the total sensitive to the order of additions. */
static void kl_cancel_case(const kl_shape *k)
{
    size_t ni = extent(k->in, 1), nt = extent(k->tg, 1);
    cancel_n = ni;
    float *xi = make_data(ni, 1, gen_cancel), *xt = make_data(nt, 2, gen_zero);
    dual in = d_new(ni, xi), tg = d_new(nt, xt);
    for (int red = TALLY_REDUCTION_SUM; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
        dual out = d_new(3, NULL);
        const char *what = LABEL("kl (cancelling) reduction %d on %lldx%lld (offsets %lld/%lld)", red,
                                 (long long)k->in.rows, (long long)k->in.cols, (long long)k->in.offset,
                                 (long long)k->tg.offset);
        BOTH(what, tally_kl_div(ctxs[s], dv(&in, s, TALLY_F32, k->in.offset, k->in.rows, k->in.cols, k->in.stride),
                                dv(&tg, s, TALLY_F32, k->tg.offset, k->tg.rows, k->tg.cols, k->tg.stride),
                                (tally_reduction)red, TALLY_KL_LOG_TARGET, dv(&out, s, TALLY_F32, 1, 1, 1, 1)));
        d_check(&out, what);
        d_free(&out);
    }
    d_free(&in);
    d_free(&tg);
    free(xi);
    free(xt);
}

START_TEST(test_kl_bits)
{
    for (size_t i = 0; i < sizeof kl_shapes / sizeof kl_shapes[0]; i++) {
        kl_case(&kl_shapes[i], 1000 + 10 * i);
        kl_cancel_case(&kl_shapes[i]);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * Dirichlet-multinomial
 * ------------------------------------------------------------------------ */

typedef struct dm_shape {
    int64_t B, V, offset, stride;
} dm_shape;

static const dm_shape dm_shapes[] = {
    {1, 1, 0, 1},    {3, 5, 1, 5},     {7, 64, 0, 64},    {512, 256, 0, 256}, {5, 2049, 0, 2049},
    {4, 3000, 2, 3001}, {2, 20000, 0, 20000}, {33, 0, 0, 0}, {20000, 3, 0, 3}, {17, 300, 3, 307},
    {1, 2048, 0, 2048},
};

/*
 * Counts around the GPU kernels' lgamma(n + a) table for a shared alpha
 * (kernels/abi.h's TALLY_K_DM_TABLE_N, 64: used for calls of at least 256
 * rows, 2^18 elements and rows of V <= 16384): mostly zero and small whole counts, which it
 * holds, with its last row (63), the first count past it (64), counts just
 * off whole numbers on either side of it, fractional and negative zero
 * counts, and rarely a negative one (its row is NaN).
 */
static float gen_count_table(tt_rand *r, size_t i)
{
    (void)i;
    uint64_t k = tt_rand_below(r, 100000);
    if (k == 0) return -1.0f;
    if (k < 1000) return 63.0f;
    if (k < 2000) return 64.0f;
    if (k < 2500) return 65.0f;
    if (k < 3000) return 62.5f;
    if (k < 3300) return nextafterf(64.0f, 0.0f);
    if (k < 3600) return nextafterf(1.0f, 0.0f);
    if (k < 4000) return 0.5f;
    if (k < 4300) return -0.0f;
    if (k < 4500) return 1.0e6f;
    if (k < 4700) return 255.0f;
    if (k < 40000) return 0.0f;
    return (float)tt_rand_below(r, 8);
}

/* Shapes that take the table and tally_k_dm_rows_table: several rows per
 * group; V not a multiple of 4, with offsets and padded rows; quads per
 * lane > 1; a partly active tile; aligned rows read as float4; rows of
 * fewer lanes than a work-item plays. */
static const dm_shape dm_table_shapes[] = {
    {2100, 125, 0, 125},
    {300, 1023, 1, 1027},
    {260, 3001, 0, 3001},
    {600, 508, 0, 508},
    {40000, 7, 0, 7},
};

static void dm_case(dm_shape d, uint64_t seed, gen_fn gen)
{
    shape cs = {d.B, d.V, d.offset, d.stride};
    size_t nc = extent(cs, 2);
    float *counts = make_data(nc, seed, gen);
    dual c = d_new(nc, counts);
    for (int per_row = 0; per_row < 2; per_row++) {
        int64_t arows = per_row ? d.B : 1;
        shape as = {arows, d.V, 1, d.V + 1};
        size_t na = extent(as, 1);
        float *la = make_data(na, seed + 7 + per_row, gen_normal);
        dual a = d_new(na, la);
        for (unsigned flags = 0; flags <= TALLY_DM_WITH_COEFFICIENT; flags++) {
            for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_MEAN; red++) {
                int64_t outputs = red == TALLY_REDUCTION_NONE ? d.B : 1;
                dual out = d_new((size_t)(2 + 3 * (outputs > 0 ? outputs : 1)), NULL);
                const char *what = LABEL("dm %s alpha, flags %u, reduction %d on %lldx%lld", per_row ? "per-row" : "shared",
                                         flags, red, (long long)d.B, (long long)d.V);
                BOTH(what, tally_dirichlet_multinomial(ctxs[s], dv(&c, s, TALLY_F32, cs.offset, cs.rows, cs.cols, cs.stride),
                                                       dv(&a, s, TALLY_F32, as.offset, as.rows, as.cols, as.stride),
                                                       (tally_reduction)red, flags,
                                                       dv(&out, s, TALLY_F32, 2, outputs, 1, 3)));
                d_check(&out, what);
                d_free(&out);
            }
        }
        d_free(&a);
        free(la);
    }
    d_free(&c);
    free(counts);
}

START_TEST(test_dm_bits)
{
    for (size_t i = 0; i < sizeof dm_shapes / sizeof dm_shapes[0]; i++) dm_case(dm_shapes[i], 3000 + 10 * i, gen_count);
    for (size_t i = 0; i < sizeof dm_table_shapes / sizeof dm_table_shapes[0]; i++)
        dm_case(dm_table_shapes[i], 3500 + 10 * i, gen_count_table);
}
END_TEST

/* ------------------------------------------------------------------------
 * Gaussian mixture
 * ------------------------------------------------------------------------ */

typedef struct gmm_shape {
    int64_t B, K, D;
    int64_t offset, pad; /* every input/output row: offset, and stride = width + pad */
    int logits_kind;     /* 0 normal, 1 with -inf, 2 with NaN, 3 with +inf */
} gmm_shape;

static const gmm_shape gmm_shapes[] = {
    {1, 1, 1, 0, 0, 0},     {2, 1, 0, 0, 0, 0},    {7, 1, 5, 1, 3, 0},   {3, 2, 3, 0, 0, 0},
    {256, 4, 64, 0, 0, 0},  {256, 4, 64, 4, 4, 0}, {9, 5, 65, 2, 1, 0},  {5, 40, 8, 0, 0, 0},
    {4, 300, 4, 0, 0, 0},   {3, 1100, 2, 1, 2, 0}, {2, 3, 16385, 0, 0, 0}, {300, 3, 33, 3, 5, 0},
    {6, 4, 16, 0, 0, 1},    {6, 4, 16, 0, 0, 2},   {6, 4, 16, 0, 0, 3},  {40, 8, 128, 0, 0, 0},
};

static void gmm_case(const gmm_shape *g, uint64_t seed)
{
    const int64_t B = g->B, K = g->K, D = g->D, KD = K * D;
    shape zs = {B, D, g->offset, D + g->pad}, ps = {B, KD, g->offset, KD + g->pad};
    size_t nz = extent(zs, 2), np = extent(ps, 2);
    float *zdata = make_data(nz, seed, gen_normal);
    float *mdata = make_data(np, seed + 1, gen_normal);
    float *vdata = make_data(np, seed + 2, gen_normal);
    float *ldata = make_data((size_t)K + 1, seed + 3, gen_normal);
    if (g->logits_kind == 1) ldata[1 + K / 2] = tt_float(0xff800000u);
    if (g->logits_kind == 2) ldata[1 + K / 2] = tt_float(0x7fc00000u);
    if (g->logits_kind == 3) ldata[1 + K / 2] = tt_float(0x7f800000u);
    dual mu = d_new(np, mdata), lv = d_new(np, vdata), logits = d_new((size_t)K + 1, ldata);

    /* Log density of given z. */
    {
        dual z = d_new(nz, zdata), out = d_new((size_t)(1 + 2 * B), NULL);
        const char *what = LABEL("gmm_log_prob B=%lld K=%lld D=%lld offset %lld pad %lld logits %d", (long long)B,
                                 (long long)K, (long long)D, (long long)g->offset, (long long)g->pad, g->logits_kind);
        BOTH(what, tally_gmm_log_prob(ctxs[s], dv(&z, s, TALLY_F32, zs.offset, zs.rows, zs.cols, zs.stride),
                                      dv(&mu, s, TALLY_F32, ps.offset, ps.rows, ps.cols, ps.stride),
                                      dv(&lv, s, TALLY_F32, ps.offset, ps.rows, ps.cols, ps.stride),
                                      dv(&logits, s, TALLY_F32, 1, 1, K, K), K, dv(&out, s, TALLY_F32, 1, B, 1, 2)));
        d_check(&out, what);
        d_free(&z);
        d_free(&out);
    }

    /* Samples at several stream offsets, with and without the component
     * output. */
    static const uint64_t offsets[] = {0, 1, 3, ((uint64_t)1 << 40) + 2};
    for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
        for (int with_comp = 0; with_comp < 2; with_comp++) {
            tally_rng rng = {.seed = 0x1234567890abcdefull + seed, .subsequence = 3 + o, .offset = offsets[o]};
            /* A view without a buffer: no component output. */
            const tally_view no_view = {.buffer = NULL, .dtype = TALLY_I32};
            dual z = d_new(nz, NULL), lq = d_new((size_t)(1 + 2 * B), NULL), comp = d_new((size_t)(2 + 3 * B), NULL);
            uint64_t consumed[2] = {0, 0};
            const char *what = LABEL("gmm_sample B=%lld K=%lld D=%lld offset %lld pad %lld logits %d rng offset %llu comp %d",
                                     (long long)B, (long long)K, (long long)D, (long long)g->offset, (long long)g->pad,
                                     g->logits_kind, (unsigned long long)offsets[o], with_comp);
            BOTH(what, tally_gmm_sample(ctxs[s], dv(&mu, s, TALLY_F32, ps.offset, ps.rows, ps.cols, ps.stride),
                                        dv(&lv, s, TALLY_F32, ps.offset, ps.rows, ps.cols, ps.stride),
                                        dv(&logits, s, TALLY_F32, 1, 1, K, K), K, rng,
                                        dv(&z, s, TALLY_F32, zs.offset, zs.rows, zs.cols, zs.stride),
                                        dv(&lq, s, TALLY_F32, 1, B, 1, 2),
                                        with_comp ? dv(&comp, s, TALLY_I32, 2, B, 1, 3) : no_view,
                                        &consumed[s]));
            d_check(&z, what);
            d_check(&lq, what);
            d_check(&comp, what);
            ck_assert_msg(consumed[0] == consumed[1], "%s: consumed %llu vs %llu", what,
                          (unsigned long long)consumed[0], (unsigned long long)consumed[1]);
            d_free(&z);
            d_free(&lq);
            d_free(&comp);
        }
    }
    d_free(&mu);
    d_free(&lv);
    d_free(&logits);
    free(zdata);
    free(mdata);
    free(vdata);
    free(ldata);
}

START_TEST(test_gmm_bits)
{
    for (size_t i = 0; i < sizeof gmm_shapes / sizeof gmm_shapes[0]; i++) gmm_case(&gmm_shapes[i], 5000 + 10 * i);
}
END_TEST

/* ------------------------------------------------------------------------
 * Random fills and categorical draws
 * ------------------------------------------------------------------------ */

START_TEST(test_rng_fill_bits)
{
    static const shape shapes[] = {{1, 1, 0, 1}, {1, 5, 1, 5}, {3, 7, 2, 9}, {100, 1000, 0, 1000},
                                   {1, (1 << 20) + 3, 3, (1 << 20) + 3}, {17, 33, 1, 40}};
    static const uint64_t offsets[] = {0, 1, 2, 3, 5, ((uint64_t)1 << 62) + 1};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        shape sh = shapes[i];
        for (int dist = TALLY_DIST_RAW; dist <= TALLY_DIST_NORMAL; dist++) {
            for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
                tally_rng rng = {.seed = 42 + i, .subsequence = (uint64_t)dist * 1000003u, .offset = offsets[o]};
                dual out = d_new(extent(sh, 2), NULL);
                uint64_t consumed[2];
                const char *what = LABEL("rng_fill dist %d on %lldx%lld stride %lld, offset %llu", dist,
                                         (long long)sh.rows, (long long)sh.cols, (long long)sh.stride,
                                         (unsigned long long)offsets[o]);
                BOTH(what, tally_rng_fill(ctxs[s], (tally_distribution)dist, rng,
                                          dv(&out, s, dist == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32, sh.offset,
                                             sh.rows, sh.cols, sh.stride),
                                          &consumed[s]));
                d_check(&out, what);
                ck_assert(consumed[0] == consumed[1]);
                d_free(&out);
            }
        }
    }
}
END_TEST

/* Weights with the rows the rule must reject or treat specially. */
static float gen_weight(tt_rand *r, size_t i)
{
    uint64_t k = tt_rand_below(r, 60);
    (void)i;
    if (k == 0) return 0.0f;
    if (k == 1) return -1.0f;
    if (k == 2) return tt_float(0x7f800000u);
    if (k == 3) return tt_float(0x7fc00000u);
    if (k == 4) return tt_float(0x00000001u);
    return (float)tt_rand_unit(r) * 3.0f;
}

START_TEST(test_categorical_bits)
{
    static const shape shapes[] = {{1, 1, 0, 1}, {5, 3, 1, 3}, {300, 17, 0, 17}, {1000, 1, 2, 1},
                                   {3, 5000, 0, 5000}, {10, 7, 3, 9}, {257, 2, 0, 2}};
    static const uint64_t offsets[] = {0, 1, 3, 6};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        shape sh = shapes[i];
        size_t n = extent(sh, 1);
        for (int logits = 0; logits < 2; logits++) {
            float *w = make_data(n, 7000 + i, logits ? gen_special : gen_weight);
            /* A row of zeros, a row with one tiny weight. */
            if (!logits && sh.rows > 2) {
                for (int64_t c = 0; c < sh.cols; c++) w[sh.offset + c] = 0.0f;
                for (int64_t c = 0; c < sh.cols; c++) w[sh.offset + sh.stride + c] = c == sh.cols - 1 ? 1e-45f : 0.0f;
            }
            dual x = d_new(n, w);
            for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; o++) {
                tally_rng rng = {.seed = 99 + i, .subsequence = 1, .offset = offsets[o]};
                dual out = d_new((size_t)(1 + 2 * sh.rows), NULL);
                uint64_t consumed[2];
                const char *what = LABEL("categorical %s on %lldx%lld, offset %llu", logits ? "logits" : "weights",
                                         (long long)sh.rows, (long long)sh.cols, (unsigned long long)offsets[o]);
                BOTH(what, tally_categorical(ctxs[s], dv(&x, s, TALLY_F32, sh.offset, sh.rows, sh.cols, sh.stride),
                                             logits ? TALLY_CATEGORICAL_LOGITS : 0u, rng,
                                             dv(&out, s, TALLY_I32, 1, sh.rows, 1, 2), &consumed[s]));
                d_check(&out, what);
                ck_assert(consumed[0] == consumed[1]);
                d_free(&out);
            }
            d_free(&x);
            free(w);
        }
    }
}
END_TEST

/* Three levels of the tree need more than 2^28 elements: one such vector
 * (1 GiB per side) for sum and max (of nearly cancelling data, so the sum
 * depends on every addition's order) and KL (terms exactly -input with a
 * zero log-target, then with transcendental terms). */
START_TEST(test_three_levels_bits)
{
    const int64_t n = ((int64_t)1 << 28) + 5;
    cancel_n = (size_t)n + 1;
    float *data = make_data((size_t)n + 1, 77, gen_cancel);
    dual x = d_new((size_t)n + 1, data);
    static const tally_reduce_op ops[] = {TALLY_SUM, TALLY_MAX};
    for (int o = 0; o < 2; o++) {
        dual out = d_new(2, NULL);
        const char *what = LABEL("three-level reduce op %d", (int)ops[o]);
        BOTH(what, tally_reduce(ctxs[s], ops[o], TALLY_AXIS_ALL, dv(&x, s, TALLY_F32, 1, 1, n, n),
                                dv(&out, s, TALLY_F32, 1, 1, 1, 1)));
        d_check(&out, what);
        d_free(&out);
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < (size_t)n + 1; i++) data[i] = pass == 0 ? 0.0f : data[(i * 7u) % ((size_t)n + 1)] * 1e-4f;
        dual t = d_new((size_t)n + 1, data);
        dual out = d_new(2, NULL);
        const char *what = LABEL("three-level kl, %s target", pass == 0 ? "zero" : "varied");
        BOTH(what, tally_kl_div(ctxs[s], dv(&x, s, TALLY_F32, 0, 1, n, n), dv(&t, s, TALLY_F32, 1, 1, n, n),
                                TALLY_REDUCTION_MEAN, TALLY_KL_LOG_TARGET, dv(&out, s, TALLY_F32, 1, 1, 1, 1)));
        d_check(&out, what);
        d_free(&out);
        d_free(&t);
        if (pass == 0) {
            free(data);
            data = make_data((size_t)n + 1, 78, gen_normal);
        }
    }
    d_free(&x);
    free(data);
}
END_TEST

/* ------------------------------------------------------------------------
 * The program cache
 * ------------------------------------------------------------------------ */

/* A fresh, empty cache directory for this test process. */
static char cache_root[256];

static void cache_setup(void)
{
    snprintf(cache_root, sizeof cache_root, "/tmp/tally-check-opencl-%ld-XXXXXX", (long)getpid());
    ck_assert_ptr_nonnull(mkdtemp(cache_root));
    setenv("XDG_CACHE_HOME", cache_root, 1);
    unsetenv("TALLY_CACHE");
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(sub);
            else
                unlink(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

static void cache_teardown(void)
{
    remove_tree(cache_root);
}

/* The .bin files in the tally cache directory: count, and the last one's
 * path in `path`. */
static int cache_files(char *path, size_t capacity)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tally", cache_root);
    DIR *d = opendir(dir);
    if (d == NULL) return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".bin") == 0) {
            count++;
            if (path != NULL) snprintf(path, capacity, "%s/%s", dir, e->d_name);
        } else if (e->d_name[0] != '.') {
            ck_abort_msg("unexpected file %s in the cache directory", e->d_name);
        } else if (strncmp(e->d_name, ".tmp-", 5) == 0) {
            ck_abort_msg("a temporary file %s was left behind", e->d_name);
        }
    }
    closedir(d);
    return count;
}

/* A program with every kernel name and trivial bodies: it builds in a
 * moment, so the cache tests do not wait for the real program. `tag`
 * changes the text (and so the cache key). */
static char *stub_program(const char *tag)
{
    size_t cap = 4096 + KERNEL_COUNT * 128;
    char *src = tt_alloc(cap);
    size_t used = (size_t)snprintf(src, cap, "#pragma OPENCL FP_CONTRACT OFF\n/* %s */\n", tag);
    for (size_t k = 0; k < KERNEL_COUNT; k++)
        used += (size_t)snprintf(src + used, cap - used,
                                 "__kernel void %s(__global float *x) { if (x != 0) x[0] = 1.0f; }\n",
                                 kernel_names[k]);
    return src;
}

static tally_context *stub_context(const char *src, int expect_cached)
{
    tally_context *ctx = NULL;
    tally_status st = tally__opencl_context_create_with_source(0, src, &ctx);
    ck_assert_msg(st == TALLY_OK, "stub context: %s: %s", tally_status_name(st), tally_last_error(NULL));
    ck_assert_int_eq(tally__opencl_program_from_cache(ctx), expect_cached);
    return ctx;
}

START_TEST(test_cache_reuse)
{
    ck_assert_ptr_nonnull(tally__opencl_context_create_with_source);
    char *src = stub_program("reuse");
    tally_context_release(stub_context(src, 0));
    ck_assert_int_eq(cache_files(NULL, 0), 1);
    tally_context_release(stub_context(src, 1));
    tally_context_release(stub_context(src, 1));
    ck_assert_int_eq(cache_files(NULL, 0), 1);
    /* Another program text is another key. */
    char *other = stub_program("other");
    tally_context_release(stub_context(other, 0));
    ck_assert_int_eq(cache_files(NULL, 0), 2);
    free(src);
    free(other);
}
END_TEST

static void rewrite(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = tt_alloc((size_t)len + 1);
    ck_assert_uint_eq(fread(data, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return data;
}

START_TEST(test_cache_corrupt)
{
    ck_assert_ptr_nonnull(tally__opencl_context_create_with_source);
    char *src = stub_program("corrupt");
    char path[1024];
    tally_context_release(stub_context(src, 0));
    ck_assert_int_eq(cache_files(path, sizeof path), 1);
    size_t n = 0;
    unsigned char *good = slurp(path, &n);
    ck_assert_uint_gt(n, 80);

    /* Each damaged file is ignored, the program rebuilt from source, and
     * the file overwritten with a good one (the next context loads it). */
    unsigned char *bad = tt_alloc(n);
    for (int kind = 0; kind < 5; kind++) {
        memcpy(bad, good, n);
        size_t len = n;
        switch (kind) {
        case 0: len = n / 2; break;             /* truncated */
        case 1: bad[n - 7] ^= 0x5a; break;      /* payload bit flips (checksum mismatch) */
        case 2: len = 0; break;                 /* empty */
        case 3: memcpy(bad, "GARBAGE!", 8); break; /* not a cache file */
        case 4: bad[9] ^= 1; break;             /* another key's file under this name */
        }
        rewrite(path, bad, len);
        tally_context *ctx = stub_context(src, 0);
        /* The rebuilt context works. */
        tally_buffer *b = NULL;
        ck_assert_int_eq(tally_buffer_create(ctx, 64, &b), TALLY_OK);
        tally_buffer_release(b);
        tally_context_release(ctx);
        ck_assert_int_eq(cache_files(NULL, 0), 1);
        tally_context_release(stub_context(src, 1));
    }

    /* A file whose header and digest are right but whose binary the driver
     * rejects: deleted and rebuilt. The digest (SHA-256 of key, size and
     * payload; backends/opencl/opencl_cache.h) is recomputed so that only
     * the driver can notice. */
    memcpy(bad, good, n);
    for (size_t i = 80; i < n; i++) bad[i] = (unsigned char)(i * 31u + 7u);
    ck_assert_ptr_nonnull(tally__cl_cache_digest);
    tally__cl_cache_digest(bad + 8, bad + 40, bad + 80, n - 80, bad + 48);
    rewrite(path, bad, n);
    tally_context_release(stub_context(src, 0));
    tally_context_release(stub_context(src, 1));

    /* An unreadable file (a directory in its place) is ignored too. */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    tally_context_release(stub_context(src, 0));
    rmdir(path);
    free(bad);
    free(good);
    free(src);
}
END_TEST

START_TEST(test_cache_disabled)
{
    ck_assert_ptr_nonnull(tally__opencl_context_create_with_source);
    setenv("TALLY_CACHE", "0", 1);
    char *src = stub_program("disabled");
    tally_context_release(stub_context(src, 0));
    tally_context_release(stub_context(src, 0));
    ck_assert_int_eq(cache_files(NULL, 0), 0);
    /* Any other value leaves it on. */
    setenv("TALLY_CACHE", "1", 1);
    tally_context_release(stub_context(src, 0));
    tally_context_release(stub_context(src, 1));
    ck_assert_int_eq(cache_files(NULL, 0), 1);
    free(src);
}
END_TEST

/* The real program: the runner's probe (and every earlier test) built it
 * into the user's cache, so contexts of this process load it from there. */
START_TEST(test_cache_real_program)
{
    const char *env = getenv("TALLY_CACHE");
    tally_context *a = NULL, *b = NULL;
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_OPENCL, TALLY_DEVICE_DEFAULT, &a), TALLY_OK);
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_OPENCL, TALLY_DEVICE_DEFAULT, &b), TALLY_OK);
    if (env == NULL || strcmp(env, "0") != 0) ck_assert_int_eq(tally__opencl_program_from_cache(b), 1);
    tally_context_release(a);
    tally_context_release(b);
}
END_TEST

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

START_TEST(test_devices_and_bad_index)
{
    int count = 0;
    ck_assert_int_eq(tally_devices(TALLY_BACKEND_OPENCL, NULL, 0, &count), TALLY_OK);
    ck_assert_int_ge(count, 1);
    tally_device_info *info = tt_alloc((size_t)count * sizeof *info);
    int again = 0;
    ck_assert_int_eq(tally_devices(TALLY_BACKEND_OPENCL, info, count, &again), TALLY_OK);
    ck_assert_int_eq(again, count);
    for (int i = 0; i < count; i++) {
        ck_assert_int_eq(info[i].index, i);
        ck_assert_msg(info[i].name[0] != '\0' && info[i].platform[0] != '\0', "device %d has no name", i);
    }
    free(info);

    tally_context *ctx = (tally_context *)1;
    tally_status st = tally_context_create(TALLY_BACKEND_OPENCL, count + 3, &ctx);
    ck_assert_int_eq(st, TALLY_NO_DEVICE);
    ck_assert_ptr_null(ctx);
    char expect[64];
    snprintf(expect, sizeof expect, "(%d device", count);
    ck_assert_msg(strstr(tally_last_error(NULL), expect) != NULL, "message '%s' lacks the count", tally_last_error(NULL));
}
END_TEST

START_TEST(test_huge_allocation)
{
    tally_context *ctx = ctxs[1];
    tally_buffer *b = (tally_buffer *)1;
    tally_status st = tally_buffer_create(ctx, (size_t)1 << 60, &b);
    ck_assert_int_eq(st, TALLY_OUT_OF_MEMORY);
    ck_assert_ptr_null(b);
    ck_assert_msg(strstr(tally_last_error(ctx), "CL_DEVICE_MAX_MEM_ALLOC_SIZE") != NULL, "%s", tally_last_error(ctx));
    /* The context is still usable. */
    float data[100];
    for (int i = 0; i < 100; i++) data[i] = (float)i * 0.25f;
    dual x = d_new(100, data), out = d_new(2, NULL);
    BOTH("sum after a failed allocation",
         tally_reduce(ctxs[s], TALLY_SUM, TALLY_AXIS_ALL, dv(&x, s, TALLY_F32, 0, 1, 100, 100),
                      dv(&out, s, TALLY_F32, 1, 1, 1, 1)));
    d_check(&out, "sum after a failed allocation");
    ck_assert_float_eq(tt_read1(out.b[1], 1), 1237.5f);
    d_free(&x);
    d_free(&out);
}
END_TEST

START_TEST(test_build_failure_log)
{
    ck_assert_ptr_nonnull(tally__opencl_context_create_with_source);
    setenv("TALLY_CACHE", "0", 1);
    tally_context *ctx = (tally_context *)1;
    tally_status st = tally__opencl_context_create_with_source(
        0, "#pragma OPENCL FP_CONTRACT OFF\n__kernel void k(__global float *x) { x[0] = tally_no_such_symbol; }\n",
        &ctx);
    ck_assert_int_eq(st, TALLY_BUILD_FAILED);
    ck_assert_ptr_null(ctx);
    const char *msg = tally_last_error(NULL);
    ck_assert_msg(strstr(msg, "clBuildProgram failed: CL_BUILD_PROGRAM_FAILURE (-11)") != NULL, "%s", msg);
    ck_assert_msg(strstr(msg, "tally_no_such_symbol") != NULL, "the build log is missing: %s", msg);

    /* A program that builds but lacks tally's kernels. */
    st = tally__opencl_context_create_with_source(0, "__kernel void k(__global float *x) { x[0] = 1.0f; }\n", &ctx);
    ck_assert_int_eq(st, TALLY_BACKEND_ERROR);
    ck_assert_msg(strstr(tally_last_error(NULL), "CL_INVALID_KERNEL_NAME") != NULL, "%s", tally_last_error(NULL));
}
END_TEST

START_TEST(test_context_queries)
{
    ck_assert_ptr_nonnull(tally__opencl_fma_emulated);
    int emulated = tally__opencl_fma_emulated(ctxs[1]);
    ck_assert(emulated == 0 || emulated == 1);
    ck_assert_int_eq(tally__opencl_fma_emulated(ctxs[0]), -1);
    const char *name = tally_context_device_name(ctxs[1]);
    ck_assert(name[0] != '\0');
    ck_assert_int_eq(strstr(name, "fma emulated") != NULL, emulated);
    /* A zero-byte buffer exists and reports 0 bytes. */
    tally_buffer *b = NULL;
    ck_assert_int_eq(tally_buffer_create(ctxs[1], 0, &b), TALLY_OK);
    ck_assert_uint_eq(tally_buffer_size(b), 0);
    tally_buffer_release(b);
}
END_TEST

/* ------------------------------------------------------------------------
 * Interop: the app's own OpenCL objects, made here through libOpenCL.
 * ------------------------------------------------------------------------ */

/* The app's calls go through the same loader as tally's own
 * (backends/opencl/opencl_loader.h); a missing libOpenCL skips this suite
 * before any test runs. */
static void app_load(void)
{
    const char *why = NULL;
    ck_assert_msg(tally__cl_open(&why) == TALLY_OK, "%s", why);
}

/* Device 0 in tally's order: the first device of the first platform that
 * has one. */
static void app_device(cl_platform_id *platform, cl_device_id *device)
{
    cl_platform_id platforms[16];
    cl_uint np = 0;
    ck_assert_int_eq(tally__cl.clGetPlatformIDs(16, platforms, &np), CL_SUCCESS);
    for (cl_uint p = 0; p < np && p < 16; p++) {
        cl_uint nd = 0;
        if (tally__cl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 1, device, &nd) == CL_SUCCESS && nd > 0) {
            *platform = platforms[p];
            return;
        }
    }
    ck_abort_msg("no OpenCL device");
}

/* The reference count of one of the app's objects, as OpenCL reports it:
 * REFCOUNT(clGetMemObjectInfo, m, CL_MEM_REFERENCE_COUNT). */
static cl_uint refcount_value;

static cl_uint refcount_checked(cl_int e)
{
    ck_assert_int_eq(e, CL_SUCCESS);
    return refcount_value;
}

#define REFCOUNT(query, obj, what) \
    refcount_checked(tally__cl.query((obj), (what), sizeof refcount_value, &refcount_value, NULL))

START_TEST(test_interop)
{
    app_load();
    cl_platform_id platform = NULL;
    cl_device_id device = NULL;
    app_device(&platform, &device);
    cl_int err = 0;
    cl_context_properties props[3] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    cl_context context = tally__cl.clCreateContext(props, 1, &device, NULL, NULL, &err);
    ck_assert_int_eq(err, 0);
    cl_command_queue queue = tally__cl.clCreateCommandQueue(context, device, 0, &err);
    ck_assert_int_eq(err, 0);

    enum { ROWS = 37, COLS = 301, N = ROWS * COLS };
    float *x = make_data(N, 11, gen_normal), *t = make_data(N, 12, gen_prob);
    cl_mem mx = tally__cl.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4u, x, &err);
    ck_assert_int_eq(err, 0);
    cl_mem mt = tally__cl.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, N * 4u, t, &err);
    ck_assert_int_eq(err, 0);
    cl_mem mo = tally__cl.clCreateBuffer(context, CL_MEM_READ_WRITE, (N + 8) * 4u, NULL, &err);
    ck_assert_int_eq(err, 0);

    uint32_t queue_refs = REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT);

    tally_context *tc = NULL;
    tally_status st = tally_context_create_opencl(context, device, queue, &tc);
    ck_assert_msg(st == TALLY_OK, "%s", tally_last_error(NULL));
    ck_assert_int_eq(tally_context_backend(tc), TALLY_BACKEND_OPENCL);
    ck_assert_uint_eq(REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT), queue_refs + 1);
    tally_buffer *bx = NULL, *bt = NULL, *bo = NULL, *bs = NULL;
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, mx, &bx), TALLY_OK);
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, mt, &bt), TALLY_OK);
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, mo, &bo), TALLY_OK);
    ck_assert_uint_eq(tally_buffer_size(bx), N * 4u);
    ck_assert_uint_eq(tally_buffer_size(bo), (N + 8) * 4u);
    ck_assert_uint_eq(REFCOUNT(clGetMemObjectInfo, mx, CL_MEM_REFERENCE_COUNT), 2);
    ck_assert_int_eq(tally_buffer_create(tc, 16, &bs), TALLY_OK);

    /* Pointwise KL into the app's buffer (at an offset), batchmean into
     * tally's own. */
    ck_assert_int_eq(tally_kl_div(tc, tally_view_f32(bx, 0, ROWS, COLS), tally_view_f32(bt, 0, ROWS, COLS),
                                  TALLY_REDUCTION_NONE, 0, tally_view_f32(bo, 4, ROWS, COLS)),
                     TALLY_OK);
    ck_assert_int_eq(tally_kl_div(tc, tally_view_f32(bx, 0, ROWS, COLS), tally_view_f32(bt, 0, ROWS, COLS),
                                  TALLY_REDUCTION_BATCHMEAN, 0, tally_view_f32(bs, 1, 1, 1)),
                     TALLY_OK);
    ck_assert_int_eq(tally_sync(tc), TALLY_OK);

    /* The same on the host backend. */
    tally_context *hc = NULL;
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_HOST, 0, &hc), TALLY_OK);
    tally_buffer *hx = tt_upload(hc, x, N), *ht = tt_upload(hc, t, N), *ho = tt_buffer(hc, N), *hs = tt_buffer(hc, 2);
    ck_assert_int_eq(tally_kl_div(hc, tally_view_f32(hx, 0, ROWS, COLS), tally_view_f32(ht, 0, ROWS, COLS),
                                  TALLY_REDUCTION_NONE, 0, tally_view_f32(ho, 0, ROWS, COLS)),
                     TALLY_OK);
    ck_assert_int_eq(tally_kl_div(hc, tally_view_f32(hx, 0, ROWS, COLS), tally_view_f32(ht, 0, ROWS, COLS),
                                  TALLY_REDUCTION_BATCHMEAN, 0, tally_view_f32(hs, 1, 1, 1)),
                     TALLY_OK);
    float *want = tt_alloc(N * 4u), *got = tt_alloc((N + 8) * 4u);
    tt_read(ho, 0, want, N);
    /* Read back by the app itself, on its own queue. */
    ck_assert_int_eq(tally__cl.clEnqueueReadBuffer(queue, mo, 1, 0, (N + 8) * 4u, got, 0, NULL, NULL), 0);
    ck_assert_msg(same_bits((const uint32_t *)(got + 4), (const uint32_t *)want, N),
                  "pointwise KL through the app's cl_mem differs from the host");
    uint32_t red[2] = {tt_bits(tt_read1(bs, 1)), tt_bits(tt_read1(hs, 1))};
    ck_assert_msg(same_bits(&red[0], &red[1], 1), "batchmean 0x%08x vs host 0x%08x", red[0], red[1]);

    /* A cl_mem of another context is refused; so is a queue of another
     * context. */
    cl_context context2 = tally__cl.clCreateContext(props, 1, &device, NULL, NULL, &err);
    ck_assert_int_eq(err, 0);
    cl_command_queue queue2 = tally__cl.clCreateCommandQueue(context2, device, 0, &err);
    ck_assert_int_eq(err, 0);
    cl_mem foreign = tally__cl.clCreateBuffer(context2, CL_MEM_READ_WRITE, 64, NULL, &err);
    ck_assert_int_eq(err, 0);
    tally_buffer *bf = (tally_buffer *)1;
    ck_assert_int_eq(tally_buffer_wrap_opencl(tc, foreign, &bf), TALLY_WRONG_CONTEXT);
    ck_assert_ptr_null(bf);
    tally_context *bad = (tally_context *)1;
    ck_assert_int_eq(tally_context_create_opencl(context, device, queue2, &bad), TALLY_INVALID_ARGUMENT);
    ck_assert_ptr_null(bad);

    /* tally releases only its own references. */
    tally_buffer_release(bx);
    tally_buffer_release(bt);
    tally_buffer_release(bo);
    tally_buffer_release(bs);
    /* Implementations may hold their own references for finished commands
     * a while longer (PoCL does), so the queue's and context's counts must
     * drop by at least tally's one reference rather than return to where
     * they started. */
    uint32_t queue_before = REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT);
    uint32_t ctx_before = REFCOUNT(clGetContextInfo, context, CL_CONTEXT_REFERENCE_COUNT);
    tally_context_release(tc);
    ck_assert_uint_eq(REFCOUNT(clGetMemObjectInfo, mx, CL_MEM_REFERENCE_COUNT), 1);
    ck_assert_uint_eq(REFCOUNT(clGetMemObjectInfo, mo, CL_MEM_REFERENCE_COUNT), 1);
    ck_assert_uint_le(REFCOUNT(clGetContextInfo, context, CL_CONTEXT_REFERENCE_COUNT), ctx_before - 1);
    ck_assert_uint_le(REFCOUNT(clGetCommandQueueInfo, queue, CL_QUEUE_REFERENCE_COUNT), queue_before - 1);
    ck_assert_uint_ge(REFCOUNT(clGetContextInfo, context, CL_CONTEXT_REFERENCE_COUNT), 1);
    ck_assert_int_eq(tally__cl.clFinish(queue), 0);

    tally_buffer_release(hx);
    tally_buffer_release(ht);
    tally_buffer_release(ho);
    tally_buffer_release(hs);
    tally_context_release(hc);
    tally__cl.clReleaseMemObject(foreign);
    tally__cl.clReleaseCommandQueue(queue2);
    tally__cl.clReleaseContext(context2);
    tally__cl.clReleaseMemObject(mx);
    tally__cl.clReleaseMemObject(mt);
    tally__cl.clReleaseMemObject(mo);
    tally__cl.clReleaseCommandQueue(queue);
    tally__cl.clReleaseContext(context);
    free(x);
    free(t);
    free(want);
    free(got);
}
END_TEST

Suite *tally_test_suite(void)
{
    Suite *s = suite_create("opencl");

    TCase *bits = tcase_create("bits");
    tcase_add_checked_fixture(bits, both_setup, both_teardown);
    tcase_set_timeout(bits, 900);
    tcase_add_test(bits, test_reduce_bits);
    tcase_add_test(bits, test_kl_bits);
    tcase_add_test(bits, test_dm_bits);
    tcase_add_test(bits, test_gmm_bits);
    tcase_add_test(bits, test_rng_fill_bits);
    tcase_add_test(bits, test_categorical_bits);
    suite_add_tcase(s, bits);

    /* Over 2^28 elements: several GiB of memory and a minute or more on a
     * CPU device, so only on request. */
    if (getenv("TALLY_TEST_LARGE") != NULL) {
        TCase *large = tcase_create("large");
        tcase_add_checked_fixture(large, both_setup, both_teardown);
        tcase_set_timeout(large, 1800);
        tcase_add_test(large, test_three_levels_bits);
        suite_add_tcase(s, large);
    }

    TCase *cache = tcase_create("cache");
    tcase_add_checked_fixture(cache, cache_setup, cache_teardown);
    tcase_set_timeout(cache, 600);
    tcase_add_test(cache, test_cache_reuse);
    tcase_add_test(cache, test_cache_corrupt);
    tcase_add_test(cache, test_cache_disabled);
    suite_add_tcase(s, cache);

    TCase *real = tcase_create("cache_real");
    tcase_set_timeout(real, 600);
    tcase_add_test(real, test_cache_real_program);
    suite_add_tcase(s, real);

    TCase *errors = tcase_create("errors");
    tcase_set_timeout(errors, 600);
    tcase_add_test(errors, test_devices_and_bad_index);
    tcase_add_test(errors, test_build_failure_log);
    tcase_add_test(errors, test_interop);
    suite_add_tcase(s, errors);

    TCase *errors_ctx = tcase_create("errors_ctx");
    tcase_add_checked_fixture(errors_ctx, both_setup, both_teardown);
    tcase_set_timeout(errors_ctx, 600);
    tcase_add_test(errors_ctx, test_huge_allocation);
    tcase_add_test(errors_ctx, test_context_queries);
    suite_add_tcase(s, errors_ctx);
    return s;
}
