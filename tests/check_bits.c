/*
 * tests/check_bits.c - every GPU backend gives the host backend's bits.
 *
 * Registered once per GPU backend (TALLY_TEST_BACKEND=opencl or cuda; the
 * runner skips a backend that is absent). Every op, with every flag and
 * reduction, on many shapes (tiny, odd, multi-tile and multi-level, strided
 * with stride > cols, unaligned and aligned offsets, empty) runs on the host
 * backend (device 0, the reference bits) and on the backend under test with
 * the same inputs, and every output buffer must be equal byte for byte
 * (memcmp, never a tolerance), poisoned gaps included, so a stray write on
 * either side also fails.
 *
 * The cases are the rows of `rows` below: an op's runner, its shape table,
 * the input generator and the seeds. Each row is one loop-test iteration
 * (its own process), so a failure names its row.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_names.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------------------
 * Two contexts: [0] the host (the reference bits), [1] the backend under test.
 * ------------------------------------------------------------------------ */

static tally_context *ctxs[2];
static const char *side_name[2] = {"host", "device"};

static void both_setup(void)
{
    ck_assert_msg(tt_backend() != TALLY_BACKEND_HOST,
                  "check_bits compares a GPU backend with the host: set TALLY_TEST_BACKEND to opencl or cuda");
    /* Host reference contexts are device 0 whatever TALLY_DEVICE says. */
    tally_status st = tally_context_create(TALLY_BACKEND_HOST, 0, &ctxs[0]);
    ck_assert_msg(st == TALLY_OK, "host context: %s", tally_last_error(NULL));
    ctxs[1] = tt_context();
    side_name[1] = tally_backend_name(tt_backend());
}

static void both_teardown(void)
{
    tt_context_release();
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
        ck_abort_msg("%s: %zu of %zu elements differ; first at %zu: host 0x%08" PRIx32 " (%.9g), %s 0x%08" PRIx32
                     " (%.9g)",
                     what, diff, d->n, i, hv, (double)tt_float(hv), side_name[1], cv, (double)tt_float(cv));
    }
    free(h);
    free(c);
}

/* A 2-D placement: rows x cols at `offset` with row stride `stride`. */
typedef struct shape {
    int64_t rows, cols, offset, stride;
} shape;

static tally_view dv(const dual *d, int side, tally_dtype dtype, shape p)
{
    tally_view v = {.buffer = d->b[side], .offset = p.offset, .rows = p.rows, .cols = p.cols, .stride = p.stride,
                    .dtype = dtype};
    return v;
}

/* A strided column of `rows` outputs at `offset`, stride `stride`. */
static shape column(int64_t offset, int64_t rows, int64_t stride)
{
    return (shape){rows, 1, offset, stride};
}

/* Runs `call` (which uses the loop variable s: 0 host, 1 device) on both
 * sides; the statuses must agree. */
#define BOTH(what, call)                                                                                    \
    do {                                                                                                    \
        tally_status st_[2];                                                                                \
        for (int s = 0; s < 2; s++) st_[s] = (call);                                                        \
        ck_assert_msg(st_[0] == st_[1], "%s: host says %s (%s), %s says %s (%s)", what,                     \
                      tally_status_name(st_[0]), tally_last_error(ctxs[0]), side_name[1],                   \
                      tally_status_name(st_[1]), tally_last_error(ctxs[1]));                                \
        ck_assert_msg(tally_sync(ctxs[1]) == TALLY_OK, "%s: sync: %s", what, tally_last_error(ctxs[1]));     \
    } while (0)

/* Elements a placement spans, plus `pad` spare ones after it. */
static size_t extent(shape s, int64_t pad)
{
    if (s.rows == 0 || s.cols == 0) return (size_t)(s.offset + pad);
    return (size_t)(s.offset + (s.rows - 1) * s.stride + s.cols + pad);
}

static char label[512];

#define LABEL(...) (snprintf(label, sizeof label, __VA_ARGS__), label)

/* ------------------------------------------------------------------------
 * Inputs: element i of n, from a generator seeded per buffer.
 * ------------------------------------------------------------------------ */

typedef float (*gen_fn)(tt_rand *r, size_t i, size_t n);

static float *make_data(size_t n, uint64_t seed, gen_fn gen)
{
    float *x = tt_alloc((n > 0 ? n : 1) * sizeof *x);
    tt_rand r = tt_rand_seed(seed);
    for (size_t i = 0; i < n; i++) x[i] = gen(&r, i, n);
    return x;
}

/* Both sides' copy of n generated elements. */
static dual d_data(size_t n, uint64_t seed, gen_fn gen)
{
    float *x = make_data(n, seed, gen);
    dual d = d_new(n, x);
    free(x);
    return d;
}

static float gen_normal(tt_rand *r, size_t i, size_t n)
{
    (void)i;
    (void)n;
    double u1 = tt_rand_unit(r), u2 = tt_rand_unit(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Special values drawn with fixed odds: k uniform below `range`, the first
 * row with k < below gives its value; past the last row the generator
 * draws its ordinary value (NULL). */
typedef struct special {
    uint64_t below;
    float value;
} special;

static const special *pick(tt_rand *r, uint64_t range, const special *rows, size_t n)
{
    uint64_t k = tt_rand_below(r, range);
    for (size_t j = 0; j < n; j++)
        if (k < rows[j].below) return &rows[j];
    return NULL;
}

/* Mostly normal, with NaN, infinities, signed zeros and a subnormal. */
static float gen_special(tt_rand *r, size_t i, size_t n)
{
    static const special rows[] = {{1, NAN}, {2, INFINITY}, {3, -INFINITY}, {4, -0.0f}, {5, 0.0f}, {6, 0x1.8p-148f}};
    const special *s = pick(r, 97, rows, COUNT(rows));
    return s != NULL ? s->value : gen_normal(r, i, n) * 30.0f;
}

/* Large values whose total nearly cancels: element i of the buffer's second
 * half is minus element i of the first half. Tile and lane partials are
 * large while the total is small, so any change in the order of additions
 * shows in the result's low bits instead of vanishing in its rounding. */
static float gen_cancel(tt_rand *r, size_t i, size_t n)
{
    size_t half = n / 2;
    tt_rand m = tt_rand_seed(0x5eed0000u + (i < half ? i : i - half));
    (void)r;
    float v = gen_normal(&m, 0, n) * 1.0e4f;
    return i < half ? v : -v;
}

static float gen_zero(tt_rand *r, size_t i, size_t n)
{
    (void)r;
    (void)i;
    (void)n;
    return 0.0f;
}

/* Zeros of both signs among negative values (and the odd -inf): a row's
 * maximum is then +0 or -0, whose sign depends on the order of the
 * comparisons. Negative values, the odd -inf and a rare NaN with its sign
 * bit set, which a maximum taken on the bits would rank lowest. A backend
 * that takes a maximum in its own order (the host's and the PoCL twins'
 * direct maximum) must leave both kinds of row to the tree. */
static float gen_signed_zeros(tt_rand *r, size_t i, size_t n)
{
    (void)i;
    (void)n;
    const uint64_t k = tt_rand_below(r, 40);
    if (k < 8) return k % 2 ? -0.0f : 0.0f;
    if (k == 8) return -INFINITY;
    return -(float)tt_rand_unit(r) * 3.0f;
}

static float gen_negative_nan(tt_rand *r, size_t i, size_t n)
{
    (void)i;
    (void)n;
    const uint64_t k = tt_rand_below(r, 400);
    if (k == 0) return -INFINITY;
    if (k == 1) return tt_float(0xffc00001u);
    return -(float)tt_rand_unit(r) * 3.0f - 0.25f;
}

/* Probabilities with exact zeros and the odd negative value. */
static float gen_prob(tt_rand *r, size_t i, size_t n)
{
    (void)n;
    uint64_t k = tt_rand_below(r, 50);
    if (k < 5) return 0.0f;
    if (k == 5 && i % 7 == 3) return -0.25f;
    return (float)tt_rand_unit(r);
}

/* Logits: normal * 3 with about 1% -inf (masked elements), runs of 997
 * offset by 1e4, and a NaN and a +inf at rare fixed positions (each makes
 * its row NaN, so most rows stay finite). */
static float gen_logit(tt_rand *r, size_t i, size_t n)
{
    if (i % 65537 == 5003) return NAN;
    if (i % 80021 == 777) return INFINITY;
    if (tt_rand_below(r, 100) == 0) return -INFINITY;
    return gen_normal(r, i, n) * 3.0f + ((i / 997) % 5 == 4 ? 1.0e4f : 0.0f);
}

/* Counts 0..9 with many zeros, rare negative and fractional ones, 255 (the
 * last count in the kernels' lgamma(n + 1) table), 256 (the first one past
 * it) and a huge one. */
static float gen_count(tt_rand *r, size_t i, size_t n)
{
    static const special rows[] = {{1, -1.0f}, {2, 2.5f}, {3, 255.0f}, {4, 256.0f}, {5, 1.0e6f}, {160, 0.0f}};
    (void)i;
    (void)n;
    const special *s = pick(r, 400, rows, COUNT(rows));
    return s != NULL ? s->value : (float)tt_rand_below(r, 10);
}

/*
 * Counts around the GPU kernels' lgamma(n + a) table for a shared alpha
 * (kernels/abi.h's TALLY_K_DM_TABLE_N, 64: used for calls of at least 256
 * rows, 2^18 elements and rows of V <= 16384): mostly zero and small whole
 * counts, which it holds, with its last row (63), the first count past it
 * (64), counts just off whole numbers on either side of it, fractional and
 * negative zero counts, and rarely a negative one (its row is NaN). Also
 * the edges of tally_k_dm_rows_table's local terms: its rows end at 4, 8
 * or 32 on dm_table_shapes (R = 4096 / (4 * quads rounded up to 32)), and
 * its test for a whole count adds 2^23, so tiny, subnormal and 2^23 - 1
 * and 2^23 counts.
 */
static float gen_count_table(tt_rand *r, size_t i, size_t n)
{
    static const special rows[] = {
        {1, -1.0f},    {2, -1.0e-30f},        {1000, 63.0f},         {2000, 64.0f},  {2500, 65.0f},
        {3000, 62.5f}, {3300, 0x1.fffffep5f /* below 64 */}, {3600, 0x1.fffffep-1f /* below 1 */},
        {4000, 0.5f},  {4300, -0.0f},         {4500, 1.0e6f},        {4700, 255.0f}, {4800, 8.0f},
        {4900, 31.0f}, {5000, 32.0f},         {5050, 1.0e-30f},      {5100, 0x1p-140f /* subnormal */},
        {5150, 0x1.fffffcp22f /* 2^23 - 1 */}, {5200, 0x1p23f},      {40000, 0.0f},
    };
    (void)i;
    (void)n;
    const special *s = pick(r, 100000, rows, COUNT(rows));
    return s != NULL ? s->value : (float)tt_rand_below(r, 8);
}

/* Categorical weights with the rows the rule must reject or treat
 * specially. */
static float gen_weight(tt_rand *r, size_t i, size_t n)
{
    static const special rows[] = {{1, 0.0f}, {2, -1.0f}, {3, INFINITY}, {4, NAN}, {5, 0x1p-149f}};
    (void)i;
    (void)n;
    const special *s = pick(r, 60, rows, COUNT(rows));
    return s != NULL ? s->value : (float)tt_rand_unit(r) * 3.0f;
}

/* ------------------------------------------------------------------------
 * The ops' runners: one shape of the row's table, both sides, every flag
 * and reduction.
 * ------------------------------------------------------------------------ */

static const shape reduce_shapes[] = {
    {1, 1, 0, 1},         {1, 3, 1, 3},         {3, 1, 0, 1},         {4, 4, 0, 4},     {7, 13, 2, 13},
    {5, 257, 0, 260},     {2, 1000, 4, 1000},   {1, 16384, 0, 16384}, {1, 16385, 0, 16385},
    {3, 16387, 1, 16390}, {129, 513, 0, 513},   {300, 1000, 5, 1003}, {1, 70001, 4, 70001},
    {40, 4096, 8, 4096},  {2, 0, 0, 0},         {0, 5, 0, 5},         {64, 17, 3, 20},
};

static void reduce_case(const void *p, uint64_t seed, gen_fn gen)
{
    static const tally_reduce_op ops[] = {TALLY_SUM, TALLY_MEAN, TALLY_MIN, TALLY_MAX, TALLY_LOGSUMEXP, TALLY_SUMSQ};
    const shape sh = *(const shape *)p;
    dual x = d_data(extent(sh, 3), seed, gen);
    for (int a = 0; a < 2; a++) {
        tally_axis axis = a == 0 ? TALLY_AXIS_ALL : TALLY_AXIS_ROW;
        int64_t outputs = axis == TALLY_AXIS_ALL ? 1 : sh.rows;
        for (size_t o = 0; o < COUNT(ops); o++) {
            /* Outputs as a strided column (stride 2) after one poisoned
             * element. */
            dual out = d_new((size_t)(1 + 2 * (outputs > 0 ? outputs : 1)), NULL);
            const char *what = LABEL("reduce %s axis %s on %lldx%lld (offset %lld, stride %lld)",
                                     harness_op_name((harness_op)harness_op_of_reduce(ops[o])),
                                     a == 0 ? "all" : "row", (long long)sh.rows, (long long)sh.cols,
                                     (long long)sh.offset, (long long)sh.stride);
            BOTH(what, tally_reduce(ctxs[s], ops[o], axis, dv(&x, s, TALLY_F32, sh),
                                    dv(&out, s, TALLY_F32, column(1, outputs, 2))));
            d_check(&out, what);
            d_free(&out);
        }
    }
    d_check(&x, "reduce input untouched");
    d_free(&x);
}

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

/* Every flag set of `flag_sets` and every reduction; the generators follow
 * the flags (log inputs are normal, probabilities from gen_prob, logits from
 * gen_logit below). */
static void kl_flag_sets_case(const kl_shape *k, uint64_t seed, const unsigned *flag_sets, size_t n_sets)
{
    for (size_t f = 0; f < n_sets; f++) {
        const unsigned flags = flag_sets[f];
        const gen_fn gx = (flags & TALLY_KL_INPUT_LOGITS)    ? gen_logit
                          : (flags & TALLY_KL_INPUT_IS_PROB) ? gen_prob
                                                             : gen_normal;
        const gen_fn gy = (flags & TALLY_KL_TARGET_LOGITS) ? gen_logit
                          : (flags & TALLY_KL_LOG_TARGET)  ? gen_normal
                                                           : gen_prob;
        dual in = d_data(extent(k->in, 1), seed + f, gx);
        dual tg = d_data(extent(k->tg, 1), seed + 50 + f, gy);
        for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
            const shape o = red == TALLY_REDUCTION_NONE ? k->out : column(1, 1, 1);
            dual out = d_new(red == TALLY_REDUCTION_NONE ? extent(o, 2) : 3, NULL);
            const char *what = LABEL("kl flags %u reduction %d on %lldx%lld (offsets %lld/%lld)", flags, red,
                                     (long long)k->in.rows, (long long)k->in.cols, (long long)k->in.offset,
                                     (long long)k->tg.offset);
            BOTH(what, tally_kl_div(ctxs[s], dv(&in, s, TALLY_F32, k->in), dv(&tg, s, TALLY_F32, k->tg),
                                    (tally_reduction)red, flags, dv(&out, s, TALLY_F32, o)));
            d_check(&out, what);
            d_free(&out);
        }
        d_free(&in);
        d_free(&tg);
    }
}

static void kl_case(const void *p, uint64_t seed, gen_fn gen)
{
    static const unsigned flag_sets[] = {0, TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB,
                                         TALLY_KL_LOG_TARGET | TALLY_KL_INPUT_IS_PROB};
    (void)gen;
    kl_flag_sets_case(p, seed, flag_sets, COUNT(flag_sets));
}

/* With a log-target of 0 every term is exactly -input, so a nearly
 * cancelling input (the row's generator) makes the total sensitive to the
 * order of additions. */
static void kl_cancel_case(const void *p, uint64_t seed, gen_fn gen)
{
    const kl_shape *k = p;
    dual in = d_data(extent(k->in, 1), seed, gen), tg = d_data(extent(k->tg, 1), seed + 1, gen_zero);
    for (int red = TALLY_REDUCTION_SUM; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
        dual out = d_new(3, NULL);
        const char *what = LABEL("kl (cancelling) reduction %d on %lldx%lld (offsets %lld/%lld)", red,
                                 (long long)k->in.rows, (long long)k->in.cols, (long long)k->in.offset,
                                 (long long)k->tg.offset);
        BOTH(what, tally_kl_div(ctxs[s], dv(&in, s, TALLY_F32, k->in), dv(&tg, s, TALLY_F32, k->tg),
                                (tally_reduction)red, TALLY_KL_LOG_TARGET, dv(&out, s, TALLY_F32, column(1, 1, 1))));
        d_check(&out, what);
        d_free(&out);
    }
    d_free(&in);
    d_free(&tg);
}

/* KL from logits: the GPU's fused path (contiguous rows whose width is a
 * power of two in [1024, 16384], rows * cols a multiple of 16384) and, on
 * the same and other shapes with offsets, strides or odd widths, the
 * general one. */
/* Input, target and output contiguous at offset 0. */
#define KL_DENSE(r, c) {{r, c, 0, c}, {r, c, 0, c}, {r, c, 0, c}}
static const kl_shape kl_logits_shapes[] = {
    KL_DENSE(16, 1024), KL_DENSE(32, 2048), KL_DENSE(8, 16384), KL_DENSE(4, 4096),
    {{16, 1024, 3, 1029}, {16, 1024, 1, 1024}, {16, 1024, 2, 1031}},
    KL_DENSE(7, 1000),
    {{3, 20000, 1, 20003}, {3, 20000, 2, 20000}, {3, 20000, 0, 20000}},
    {{5, 3, 1, 5}, {5, 3, 2, 3}, {5, 3, 3, 4}},
    KL_DENSE(1, 1),
    {{2, 16387, 0, 16387}, {2, 16387, 4, 16387}, {2, 16387, 0, 16387}},
    KL_DENSE(3, 0),
};
#undef KL_DENSE

/* Every flag set with a logits flag (the sides without one get the
 * generators of kl_case) and every reduction. */
static void kl_logits_case(const void *p, uint64_t seed, gen_fn gen)
{
    static const unsigned flag_sets[] = {
        TALLY_KL_INPUT_LOGITS, TALLY_KL_TARGET_LOGITS, TALLY_KL_INPUT_LOGITS | TALLY_KL_TARGET_LOGITS,
        TALLY_KL_INPUT_LOGITS | TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB | TALLY_KL_TARGET_LOGITS,
    };
    (void)gen;
    kl_flag_sets_case(p, seed, flag_sets, COUNT(flag_sets));
}

/* Dirichlet-multinomial counts: B rows of V at offset, row stride. */
static const shape dm_shapes[] = {
    {1, 1, 0, 1},       {3, 5, 1, 5},         {7, 64, 0, 64}, {512, 256, 0, 256}, {5, 2049, 0, 2049},
    {4, 3000, 2, 3001}, {2, 20000, 0, 20000}, {33, 0, 0, 0},  {20000, 3, 0, 3},   {17, 300, 3, 307},
    {1, 2048, 0, 2048},
};

/* Shapes that take the lgamma table and tally_k_dm_rows_table: several rows
 * per group; V not a multiple of 4, with offsets and padded rows; quads per
 * lane > 1; a partly active tile; aligned rows read as float4; rows of
 * fewer lanes than a work-item plays; full tiles of whole aligned quads
 * (CUDA's warp a row, its float4 loads), and rows of 1024 (a quad a lane)
 * more than an H200's warps take in one round (2112), which load the next
 * row ahead. */
static const shape dm_table_shapes[] = {
    {2100, 125, 0, 125}, {300, 1023, 1, 1027}, {260, 3001, 0, 3001}, {600, 508, 0, 508},
    {40000, 7, 0, 7},    {300, 2048, 0, 2048}, {3500, 1024, 0, 1024},
};

/* Shared and per-row log-alpha, every flag and reduction. */
static void dm_case(const void *p, uint64_t seed, gen_fn gen)
{
    const shape cs = *(const shape *)p;
    dual c = d_data(extent(cs, 2), seed, gen);
    for (int per_row = 0; per_row < 2; per_row++) {
        const shape as = {per_row ? cs.rows : 1, cs.cols, 1, cs.cols + 1};
        dual a = d_data(extent(as, 1), seed + 7 + per_row, gen_normal);
        for (unsigned flags = 0; flags <= TALLY_DM_WITH_COEFFICIENT; flags++) {
            for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_MEAN; red++) {
                int64_t outputs = red == TALLY_REDUCTION_NONE ? cs.rows : 1;
                dual out = d_new((size_t)(2 + 3 * (outputs > 0 ? outputs : 1)), NULL);
                const char *what = LABEL("dm %s alpha, flags %u, reduction %d on %lldx%lld",
                                         per_row ? "per-row" : "shared", flags, red, (long long)cs.rows,
                                         (long long)cs.cols);
                BOTH(what, tally_dirichlet_multinomial(ctxs[s], dv(&c, s, TALLY_F32, cs), dv(&a, s, TALLY_F32, as),
                                                       (tally_reduction)red, flags,
                                                       dv(&out, s, TALLY_F32, column(2, outputs, 3))));
                d_check(&out, what);
                d_free(&out);
            }
        }
        d_free(&a);
    }
    d_free(&c);
}

typedef struct gmm_shape {
    int64_t B, K, D;
    int64_t offset, pad; /* every input/output row: offset, and stride = width + pad */
    int logits_kind;     /* 0 normal, 1 with -inf, 2 with NaN, 3 with +inf */
} gmm_shape;

static const gmm_shape gmm_shapes[] = {
    {1, 1, 1, 0, 0, 0},    {2, 1, 0, 0, 0, 0},    {7, 1, 5, 1, 3, 0},      {3, 2, 3, 0, 0, 0},
    {256, 4, 64, 0, 0, 0}, {256, 4, 64, 4, 4, 0}, {9, 5, 65, 2, 1, 0},     {5, 40, 8, 0, 0, 0},
    {4, 300, 4, 0, 0, 0},  {3, 1100, 2, 1, 2, 0}, {2, 3, 16385, 0, 0, 0},  {300, 3, 33, 3, 5, 0},
    {6, 4, 16, 0, 0, 1},   {6, 4, 16, 0, 0, 2},   {6, 4, 16, 0, 0, 3},     {40, 8, 128, 0, 0, 0},
    {6000, 2, 32, 0, 0, 0}, /* more rows than a one-wave grid has warps (several rows a CUDA warp) */
    {100000, 3, 4, 0, 0, 0}, /* more than 32 rows a warp (CUDA's warp kernel draws its uniforms again) */
};

/* The log density of given z, then samples at several stream offsets with
 * and without the component output. */
static void gmm_case(const void *p, uint64_t seed, gen_fn gen)
{
    const gmm_shape *g = p;
    const int64_t B = g->B, K = g->K, D = g->D, KD = K * D;
    const shape zs = {B, D, g->offset, D + g->pad}, ps = {B, KD, g->offset, KD + g->pad};
    const shape ls = {1, K, 1, K}, col = column(1, B, 2);
    size_t nz = extent(zs, 2), np = extent(ps, 2);
    float *ldata = make_data((size_t)K + 1, seed + 3, gen);
    static const uint32_t special_logit[] = {0, 0xff800000u, 0x7fc00000u, 0x7f800000u};
    if (g->logits_kind > 0) ldata[1 + K / 2] = tt_float(special_logit[g->logits_kind]);
    dual mu = d_data(np, seed + 1, gen), lv = d_data(np, seed + 2, gen), logits = d_new((size_t)K + 1, ldata);
    free(ldata);
    char where[160];
    snprintf(where, sizeof where, "B=%lld K=%lld D=%lld offset %lld pad %lld logits %d", (long long)B, (long long)K,
             (long long)D, (long long)g->offset, (long long)g->pad, g->logits_kind);

    dual z = d_data(nz, seed, gen), out = d_new((size_t)(1 + 2 * B), NULL);
    const char *what = LABEL("gmm_log_prob %s", where);
    BOTH(what, tally_gmm_log_prob(ctxs[s], dv(&z, s, TALLY_F32, zs), dv(&mu, s, TALLY_F32, ps),
                                  dv(&lv, s, TALLY_F32, ps), dv(&logits, s, TALLY_F32, ls), K,
                                  dv(&out, s, TALLY_F32, col)));
    d_check(&out, what);
    d_free(&z);
    d_free(&out);

    static const uint64_t offsets[] = {0, 1, 3, ((uint64_t)1 << 40) + 2};
    for (size_t o = 0; o < COUNT(offsets); o++) {
        for (int with_comp = 0; with_comp < 2; with_comp++) {
            tally_rng rng = {.seed = 0x1234567890abcdefull + seed, .subsequence = 3 + o, .offset = offsets[o]};
            /* A view without a buffer: no component output. */
            const tally_view no_view = {.buffer = NULL, .dtype = TALLY_I32};
            dual zo = d_new(nz, NULL), lq = d_new((size_t)(1 + 2 * B), NULL), comp = d_new((size_t)(2 + 3 * B), NULL);
            uint64_t consumed[2] = {0, 0};
            what = LABEL("gmm_sample %s rng offset %llu comp %d", where, (unsigned long long)offsets[o], with_comp);
            BOTH(what, tally_gmm_sample(ctxs[s], dv(&mu, s, TALLY_F32, ps), dv(&lv, s, TALLY_F32, ps),
                                        dv(&logits, s, TALLY_F32, ls), K, rng, dv(&zo, s, TALLY_F32, zs),
                                        dv(&lq, s, TALLY_F32, col),
                                        with_comp ? dv(&comp, s, TALLY_I32, column(2, B, 3)) : no_view,
                                        &consumed[s]));
            d_check(&zo, what);
            d_check(&lq, what);
            d_check(&comp, what);
            ck_assert_msg(consumed[0] == consumed[1], "%s: consumed %llu vs %llu", what,
                          (unsigned long long)consumed[0], (unsigned long long)consumed[1]);
            d_free(&zo);
            d_free(&lq);
            d_free(&comp);
        }
    }
    d_free(&mu);
    d_free(&lv);
    d_free(&logits);
}

static const shape fill_shapes[] = {{1, 1, 0, 1},         {1, 5, 1, 5},
                                    {3, 7, 2, 9},         {100, 1000, 0, 1000},
                                    {1, (1 << 20) + 3, 3, (1 << 20) + 3}, {17, 33, 1, 40}};

/* Every distribution at several stream offsets (the generator is unused:
 * the outputs are the random bits). */
static void rng_fill_case(const void *p, uint64_t seed, gen_fn gen)
{
    static const uint64_t offsets[] = {0, 1, 2, 3, 5, ((uint64_t)1 << 62) + 1};
    const shape sh = *(const shape *)p;
    (void)gen;
    for (int dist = TALLY_DIST_RAW; dist <= TALLY_DIST_NORMAL; dist++) {
        for (size_t o = 0; o < COUNT(offsets); o++) {
            tally_rng rng = {.seed = seed, .subsequence = (uint64_t)dist * 1000003u, .offset = offsets[o]};
            dual out = d_new(extent(sh, 2), NULL);
            uint64_t consumed[2];
            const char *what = LABEL("rng_fill dist %d on %lldx%lld stride %lld, offset %llu", dist,
                                     (long long)sh.rows, (long long)sh.cols, (long long)sh.stride,
                                     (unsigned long long)offsets[o]);
            BOTH(what, tally_rng_fill(ctxs[s], (tally_distribution)dist, rng,
                                      dv(&out, s, dist == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32, sh), &consumed[s]));
            d_check(&out, what);
            ck_assert_msg(consumed[0] == consumed[1], "%s: consumed %llu vs %llu", what,
                          (unsigned long long)consumed[0], (unsigned long long)consumed[1]);
            d_free(&out);
        }
    }
}

static const shape categorical_shapes[] = {{1, 1, 0, 1},      {5, 3, 1, 3}, {300, 17, 0, 17}, {1000, 1, 2, 1},
                                           {3, 5000, 0, 5000}, {10, 7, 3, 9}, {257, 2, 0, 2}};

/* Weights (gen_weight, with a row of zeros and a row of one tiny weight)
 * and logits (gen_special), at several stream offsets. */
static void categorical_case(const void *p, uint64_t seed, gen_fn gen)
{
    static const uint64_t offsets[] = {0, 1, 3, 6};
    const shape sh = *(const shape *)p;
    size_t n = extent(sh, 1);
    (void)gen;
    for (int logits = 0; logits < 2; logits++) {
        float *w = make_data(n, seed, logits ? gen_special : gen_weight);
        if (!logits && sh.rows > 2) {
            for (int64_t c = 0; c < sh.cols; c++) w[sh.offset + c] = 0.0f;
            for (int64_t c = 0; c < sh.cols; c++) w[sh.offset + sh.stride + c] = c == sh.cols - 1 ? 1e-45f : 0.0f;
        }
        dual x = d_new(n, w);
        free(w);
        for (size_t o = 0; o < COUNT(offsets); o++) {
            tally_rng rng = {.seed = seed, .subsequence = 1, .offset = offsets[o]};
            dual out = d_new((size_t)(1 + 2 * sh.rows), NULL);
            uint64_t consumed[2];
            const char *what = LABEL("categorical %s on %lldx%lld, offset %llu", logits ? "logits" : "weights",
                                     (long long)sh.rows, (long long)sh.cols, (unsigned long long)offsets[o]);
            BOTH(what, tally_categorical(ctxs[s], dv(&x, s, TALLY_F32, sh), logits ? TALLY_CATEGORICAL_LOGITS : 0u,
                                         rng, dv(&out, s, TALLY_I32, column(1, sh.rows, 2)), &consumed[s]));
            d_check(&out, what);
            ck_assert_msg(consumed[0] == consumed[1], "%s: consumed %llu vs %llu", what,
                          (unsigned long long)consumed[0], (unsigned long long)consumed[1]);
            d_free(&out);
        }
        d_free(&x);
    }
}

/* ------------------------------------------------------------------------
 * The case table: every row runs its runner on each shape of its table,
 * shape i with seed `seed + i * seed_step`.
 * ------------------------------------------------------------------------ */

typedef struct bits_row {
    const char *name;
    void (*run)(const void *shape, uint64_t seed, gen_fn gen);
    const void *shapes;
    size_t count, size; /* shapes in the table, bytes per shape */
    gen_fn gen;
    uint64_t seed, seed_step;
} bits_row;

#define SHAPES(table) (table), COUNT(table), sizeof((table)[0])

static const bits_row rows[] = {
    {"reduce, normal", reduce_case, SHAPES(reduce_shapes), gen_normal, 100, 1},
    {"reduce, special values", reduce_case, SHAPES(reduce_shapes), gen_special, 200, 1},
    {"reduce, cancelling", reduce_case, SHAPES(reduce_shapes), gen_cancel, 300, 1},
    {"reduce, zeros of both signs", reduce_case, SHAPES(reduce_shapes), gen_signed_zeros, 400, 1},
    {"reduce, negative NaN", reduce_case, SHAPES(reduce_shapes), gen_negative_nan, 450, 1},
    {"kl", kl_case, SHAPES(kl_shapes), NULL, 1000, 10},
    {"kl, cancelling", kl_cancel_case, SHAPES(kl_shapes), gen_cancel, 1, 0},
    {"kl from logits", kl_logits_case, SHAPES(kl_logits_shapes), NULL, 1500, 10},
    {"dirichlet-multinomial", dm_case, SHAPES(dm_shapes), gen_count, 3000, 10},
    {"dirichlet-multinomial, lgamma table", dm_case, SHAPES(dm_table_shapes), gen_count_table, 3500, 10},
    {"gmm", gmm_case, SHAPES(gmm_shapes), gen_normal, 5000, 10},
    {"rng_fill", rng_fill_case, SHAPES(fill_shapes), NULL, 42, 1},
    {"categorical", categorical_case, SHAPES(categorical_shapes), NULL, 7000, 1},
};

START_TEST(row_bits)
{
    const bits_row *row = &rows[_i];
    fprintf(stderr, "%s: %zu shapes\n", row->name, row->count);
    for (size_t i = 0; i < row->count; i++)
        row->run((const char *)row->shapes + i * row->size, row->seed + i * row->seed_step, row->gen);
}
END_TEST

/* Three levels of the tree need more than 2^28 elements: one such vector
 * (1 GiB per side) for sum and max (of nearly cancelling data, so the sum
 * depends on every addition's order) and KL (terms exactly -input with a
 * zero log-target, then with transcendental terms). */
START_TEST(three_levels_bits)
{
    const int64_t n = ((int64_t)1 << 28) + 5;
    const shape vec = {1, n, 1, n}, at0 = {1, n, 0, n}, one = column(1, 1, 1);
    float *data = make_data((size_t)n + 1, 77, gen_cancel);
    dual x = d_new((size_t)n + 1, data);
    static const tally_reduce_op ops[] = {TALLY_SUM, TALLY_MAX};
    for (size_t o = 0; o < COUNT(ops); o++) {
        dual out = d_new(2, NULL);
        const char *what = LABEL("three-level reduce op %d", (int)ops[o]);
        BOTH(what, tally_reduce(ctxs[s], ops[o], TALLY_AXIS_ALL, dv(&x, s, TALLY_F32, vec),
                                dv(&out, s, TALLY_F32, one)));
        d_check(&out, what);
        d_free(&out);
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < (size_t)n + 1; i++) data[i] = pass == 0 ? 0.0f : data[(i * 7u) % ((size_t)n + 1)] * 1e-4f;
        dual t = d_new((size_t)n + 1, data);
        dual out = d_new(2, NULL);
        const char *what = LABEL("three-level kl, %s target", pass == 0 ? "zero" : "varied");
        BOTH(what, tally_kl_div(ctxs[s], dv(&x, s, TALLY_F32, at0), dv(&t, s, TALLY_F32, vec), TALLY_REDUCTION_MEAN,
                                TALLY_KL_LOG_TARGET, dv(&out, s, TALLY_F32, one)));
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

TT_SUITE("bits",
         {.name = "bits", .tests = {row_bits}, .loops = (int)COUNT(rows), .setup = both_setup,
          .teardown = both_teardown, .timeout = 900},
         /* Over 2^28 elements: several GiB of memory and a minute or more on
          * a CPU device, so only on request. */
         {.name = "large", .tests = {three_levels_bits}, .setup = both_setup, .teardown = both_teardown,
          .timeout = 1800, .only_with = "TALLY_TEST_LARGE"})
