/*
 * tests/check_host_dispatch.c - every host implementation of the dispatch
 * chain (backends/host/host_simd.h) gives the scalar reference's bits.
 *
 * Two halves:
 *   - terms: each implementation's vector kernels (element terms, the KL
 *     map, the random fills) against the scalar functions of tally/terms.h
 *     and tally/philox.h, element by element, bit for bit (NaN payloads
 *     included): one-input terms on every 127th float bit pattern (every
 *     pattern with TALLY_TERMS_EXHAUSTIVE=1), the others on edge-value
 *     grids and random inputs from every float class;
 *   - ops: every op through the public API on a table of shapes (single
 *     tiles, partial quads, multi-level trees, strided views), data kinds
 *     (ordinary, with NaN/inf/-0/subnormal sprinkled in) and flags, run
 *     once per implementation this CPU supports (forced with
 *     TALLY_HOST_IMPL, which a context reads when it is created), every
 *     output byte compared with the scalar path's.
 * An implementation the CPU lacks is reported and skipped; the scalar and
 * the baseline implementation always run.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/host/host_simd.h"
#include "tally/terms.h"
#include "tally/terms_backward.h"
#include "testutil.h"

/* ---- Mismatch bookkeeping: count them, keep the first. ---- */

typedef struct mismatch {
    uint64_t count;
    char first[256];
} mismatch;

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float ffrom(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void note(mismatch *m, uint32_t got, uint32_t want, const char *impl, const char *what, uint64_t at)
{
    if (got != want && m->count++ == 0)
        snprintf(m->first, sizeof m->first, "%s: %s at %llu: got 0x%08x, want 0x%08x", impl, what,
                 (unsigned long long)at, got, want);
}

/* A term the tree folds is compared up to its NaN payload: x86 returns
 * the first NaN operand of an operation, and a compiler may swap the
 * operands of a commutative one in either form, but every stored result
 * passes through tally_canonical (terms.h), so only NaN-ness can reach an
 * output. Everything else is compared bit for bit. */
static uint32_t nan_as_one(float f) { return f != f ? 0x7fc00000u : fbits(f); }

#define ASSERT_NONE(m) \
    ck_assert_msg((m)->count == 0, "%llu mismatches, first: %s", (unsigned long long)(m)->count, (m)->first)

/* splitmix64 with a fixed seed per call site. */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Edge values of every float class. */
static const uint32_t edge_bits[] = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x00800000u, 0x80800000u,
    0x3f800000u, 0xbf800000u, 0x3f7fffffu, 0x3f800001u, 0x40000000u, 0x3f000000u, 0x42b17218u,
    0x42b20000u, 0xc2ce8ed0u, 0xc2d00000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u,
    0x7fc00000u, 0xffc00000u, 0x7fa00001u, 0x7fbadbadu, 0x4b000000u, 0x4b800000u, 0x5f800000u,
    0x0d800000u, 0x3e800000u, 0x3fa00000u, 0x40400000u, 0x41000000u,
};
#define N_EDGES (sizeof edge_bits / sizeof edge_bits[0])

/* A float from a random class: edge, tiny, ordinary, huge, any pattern. */
static float random_float(uint64_t *s)
{
    uint64_t r = mix(s);
    switch (r % 6) {
    case 0: return ffrom(edge_bits[(r >> 8) % N_EDGES]);
    case 1: return ffrom((uint32_t)(r >> 32));
    case 2: return ffrom((uint32_t)(r >> 32) & 0x807fffffu); /* zero or subnormal */
    case 3: return (float)((double)(r >> 40) / (double)(1ull << 24) * 8.0 - 4.0);
    case 4: return (float)((r >> 40) % 70);
    default: return ffrom(0x3c000000u + (uint32_t)((r >> 32) % 0x07000000u));
    }
}

/* The implementations with vector kernels that this CPU runs. */
static size_t vector_impls(const tally__host_impl **out, const tally__host_impl **all)
{
    size_t n = tally__host_impls(all), m = 0;
    for (size_t i = 0; i < n; i++)
        if ((*all)[i].kernels != NULL && (*all)[i].supported()) out[m++] = &(*all)[i];
    return m;
}

#define MAX_IMPLS 8
#define CHUNK 65536u

/* ---- Terms ---- */

typedef float (*unary_fn)(float x, float shift);
static float ref_square(float x, float s) { (void)s; return x * x; }
static float ref_shifted_exp(float x, float s) { return tally_expf(x - s); }
static float ref_exp(float x, float s) { (void)s; return tally_expf(x); }

static const struct {
    const char *name;
    tally__host_term term;
    unary_fn ref;
    float shift;
} unary_rows[] = {
    {"square", TALLY__HOST_TERM_SQUARE, ref_square, 0.0f},
    {"shifted_exp(0)", TALLY__HOST_TERM_SHIFTED_EXP, ref_shifted_exp, 0.0f},
    {"shifted_exp(3.25)", TALLY__HOST_TERM_SHIFTED_EXP, ref_shifted_exp, 3.25f},
    {"shifted_exp(-88)", TALLY__HOST_TERM_SHIFTED_EXP, ref_shifted_exp, -88.0f},
    {"exp", TALLY__HOST_TERM_EXP, ref_exp, 0.0f},
};

START_TEST(test_unary_terms)
{
    const tally__host_impl *impls[MAX_IMPLS], *all;
    size_t n_impls = vector_impls(impls, &all);
    const char *ex = getenv("TALLY_TERMS_EXHAUSTIVE");
    const uint64_t step = (ex != NULL && ex[0] == '1') ? 1u : 127u;
    float *x = malloc(CHUNK * sizeof *x), *got = malloc(CHUNK * sizeof *got), *want = malloc(CHUNK * sizeof *want);
    ck_assert(x && got && want);
    mismatch m = {0};
    const tally__host_term row = (tally__host_term)_i;
    for (uint64_t b = 0; b < (1ull << 32);) {
        uint64_t n = 0;
        for (; n < CHUNK && b < (1ull << 32); b += step) x[n++] = ffrom((uint32_t)b);
        if (b >= (1ull << 32))
            for (size_t e = 0; e < N_EDGES && n < CHUNK; e++) x[n++] = ffrom(edge_bits[e]);
        for (uint64_t i = 0; i < n; i++) want[i] = unary_rows[row].ref(x[i], unary_rows[row].shift);
        tally__host_src src = {.term = unary_rows[row].term, .shift = unary_rows[row].shift,
                               .in = {{.p = x, .cols = n, .stride = n}}};
        for (size_t k = 0; k < n_impls; k++) {
            impls[k]->kernels->terms(&src, 0, n, got);
            for (uint64_t i = 0; i < n; i++)
                note(&m, nan_as_one(got[i]), nan_as_one(want[i]), impls[k]->name, unary_rows[row].name, fbits(x[i]));
        }
    }
    free(x);
    free(got);
    free(want);
    ASSERT_NONE(&m);
}
END_TEST

/* Two- and three-input terms: every pair (triple) of edge values, then
 * random inputs. The inputs are strided views (cols 37, stride 41) half the
 * time, so the kernels' gather of a chunk across rows is covered too. */
static void check_multi(tally__host_term term, uint32_t flags, int inputs, uint64_t random_count, uint64_t seed)
{
    const tally__host_impl *impls[MAX_IMPLS], *all;
    size_t n_impls = vector_impls(impls, &all);
    const uint64_t cols = 37, stride = 41, rows = CHUNK / stride;
    const uint64_t n = rows * cols;
    float *in[3], *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want), *got_b = malloc(n * sizeof *got_b);
    for (int j = 0; j < 3; j++) in[j] = malloc(rows * stride * sizeof *in[j]);
    ck_assert(got && want && got_b && in[0] && in[1] && in[2]);
    mismatch m = {0};
    uint64_t s = seed, edge_at = 0;
    const uint64_t edge_total = inputs == 2 ? N_EDGES * N_EDGES : N_EDGES * N_EDGES * N_EDGES;
    for (uint64_t done = 0; done < random_count + edge_total; done += n) {
        int strided = (done / n) % 2;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t at = strided ? (k / cols) * stride + k % cols : k;
            if (edge_at < edge_total) {
                uint64_t e = edge_at++;
                in[0][at] = ffrom(edge_bits[e % N_EDGES]);
                in[1][at] = ffrom(edge_bits[(e / N_EDGES) % N_EDGES]);
                in[2][at] = ffrom(edge_bits[(e / N_EDGES / N_EDGES) % N_EDGES]);
            } else {
                for (int j = 0; j < 3; j++) in[j][at] = random_float(&s);
            }
            float a = in[0][at], b = in[1][at], c = in[2][at];
            switch (term) {
            case TALLY__HOST_TERM_KL: want[k] = tally_kl_term(a, b, flags); break;
            case TALLY__HOST_TERM_DM: want[k] = tally_dm_term(a, tally_expf(b), flags); break;
            default: want[k] = tally_gauss_term(a, b, c); break;
            }
        }
        tally__host_src src = {.term = term, .flags = flags};
        for (int j = 0; j < 3; j++)
            src.in[j] = (tally__host_vec){.p = in[j], .cols = cols, .stride = strided ? stride : cols};
        for (size_t k = 0; k < n_impls; k++) {
            impls[k]->kernels->terms(&src, 0, n, got);
            for (uint64_t i = 0; i < n; i++)
                note(&m, nan_as_one(got[i]), nan_as_one(want[i]), impls[k]->name, "term", done + i);
            if (term == TALLY__HOST_TERM_KL && !strided) {
                impls[k]->kernels->kl_map(in[0], in[1], flags, n, got);
                for (uint64_t i = 0; i < n; i++)
                    note(&m, fbits(got[i]), fbits(tally_canonical(want[i])), impls[k]->name, "kl_map", done + i);
                /* The gradients, with the third input as the upstream
                 * gradient of each element, then with one scalar. */
                for (int scalar = 0; scalar < 2; scalar++) {
                    const float gs = 0.75f;
                    impls[k]->kernels->kl_grad_map(in[0], in[1], scalar ? NULL : in[2], gs, flags, n, got, got_b);
                    for (uint64_t i = 0; i < n; i++) {
                        const tally_grad2 d = tally_kl_grad(in[0][i], in[1][i], scalar ? gs : in[2][i], flags);
                        note(&m, fbits(got[i]), fbits(tally_canonical(d.a)), impls[k]->name, "kl_grad_map input",
                             done + i);
                        note(&m, fbits(got_b[i]), fbits(tally_canonical(d.b)), impls[k]->name, "kl_grad_map target",
                             done + i);
                    }
                }
            }
            if (term == TALLY__HOST_TERM_GAUSS && !strided) {
                /* The mixture's gradients of each element, with a weight. */
                const float c = -0.625f;
                impls[k]->kernels->gmm_grad_map(in[0], in[1], in[2], c, n, got, got_b);
                for (uint64_t i = 0; i < n; i++) {
                    const tally_grad2 d = tally_gmm_grad_elem(in[0][i], in[1][i], in[2][i], c);
                    note(&m, nan_as_one(got[i]), nan_as_one(d.a), impls[k]->name, "gmm_grad_map mu", done + i);
                    note(&m, nan_as_one(got_b[i]), nan_as_one(d.b), impls[k]->name, "gmm_grad_map log_var",
                         done + i);
                }
            }
        }
    }
    for (int j = 0; j < 3; j++) free(in[j]);
    free(got);
    free(want);
    free(got_b);
    ASSERT_NONE(&m);
}

START_TEST(test_kl_terms) { check_multi(TALLY__HOST_TERM_KL, (uint32_t)_i, 2, 1u << 22, 11u + (uint64_t)_i); }
END_TEST
START_TEST(test_dm_terms) { check_multi(TALLY__HOST_TERM_DM, (uint32_t)_i, 2, 1u << 21, 21u + (uint64_t)_i); }
END_TEST
START_TEST(test_gauss_terms) { check_multi(TALLY__HOST_TERM_GAUSS, 0u, 3, 1u << 21, 31u); }
END_TEST

/* The DM term through a shared alpha's table, for whole counts (table
 * lookups) and rows where some count is not (the kernels fall back to the
 * full term for that chunk). */
START_TEST(test_dm_table_terms)
{
    const tally__host_impl *impls[MAX_IMPLS], *all;
    size_t n_impls = vector_impls(impls, &all);
    const uint32_t flags = (uint32_t)_i;
    const uint64_t V = 1000 + N_EDGES;
    float *la = malloc(V * sizeof *la), *cn = malloc(V * sizeof *cn), *got = malloc(V * sizeof *got);
    ck_assert(la && cn && got);
    uint64_t s = 41u + flags;
    for (uint64_t v = 0; v < V; v++)
        la[v] = v < N_EDGES ? ffrom(edge_bits[v])
                            : (float)((double)(mix(&s) >> 11) / (double)(1ull << 53) * 12.0 - 6.0);
    mismatch m = {0};
    for (size_t k = 0; k < n_impls; k++) {
        float *table = malloc(TALLY__HOST_DM_TABLE_SIZE(V) * sizeof *table);
        ck_assert(table != NULL);
        impls[k]->kernels->dm_table(la, V, table);
        for (int row = 0; row < 200; row++) {
            for (uint64_t v = 0; v < V; v++) {
                uint64_t r = mix(&s);
                cn[v] = (float)(r % 64);
                /* Some rows hold a count the table does not cover. */
                if (row % 4 == 3 && r % 101 == 0) cn[v] = random_float(&s);
            }
            tally__host_src src = {.term = TALLY__HOST_TERM_DM_TABLE, .flags = flags, .table = table,
                                   .in = {{.p = cn, .cols = V, .stride = V}, {.p = la, .cols = V, .stride = V}}};
            impls[k]->kernels->terms(&src, 0, V, got);
            for (uint64_t v = 0; v < V; v++)
                note(&m, nan_as_one(got[v]), nan_as_one(tally_dm_term(cn[v], tally_expf(la[v]), flags)),
                     impls[k]->name, "dm_table term", (uint64_t)row * V + v);
        }
        free(table);
    }
    free(la);
    free(cn);
    free(got);
    ASSERT_NONE(&m);
}
END_TEST

/* Fills against tally_stream_*: start offsets on and off the stream's
 * blocks of four, near 2^32 (the counter's word boundary) and beyond. */
START_TEST(test_fills)
{
    const tally__host_impl *impls[MAX_IMPLS], *all;
    size_t n_impls = vector_impls(impls, &all);
    static const uint64_t starts[] = {0, 1, 2, 3, 5, 4 * 1023 + 2, (1ull << 34) - 6, (1ull << 34) + 1,
                                      0xfffffffffffff000ull};
    static const uint64_t lengths[] = {1, 2, 3, 4, 5, 7, 1021, 4096 + 3};
    static const tally_distribution dists[] = {TALLY_DIST_RAW, TALLY_DIST_UNIFORM, TALLY_DIST_NORMAL};
    const uint64_t seeds[][2] = {{0, 0}, {0x123456789abcdefull, 7}, {~0ull, ~0ull}};
    float got[4096 + 3];
    mismatch m = {0};
    for (size_t d = 0; d < 3; d++)
        for (size_t sd = 0; sd < 3; sd++)
            for (size_t a = 0; a < sizeof starts / sizeof starts[0]; a++)
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
                    for (size_t k = 0; k < n_impls; k++) {
                        uint64_t seed = seeds[sd][0], sub = seeds[sd][1], i0 = starts[a], n = lengths[l];
                        impls[k]->kernels->fill(dists[d], seed, sub, i0, n, got);
                        for (uint64_t c = 0; c < n; c++) {
                            uint64_t i = i0 + c;
                            uint32_t want = dists[d] == TALLY_DIST_RAW ? tally_stream_raw(seed, sub, i)
                                            : dists[d] == TALLY_DIST_UNIFORM
                                                ? fbits(tally_stream_uniform(seed, sub, i))
                                                : fbits(tally_stream_normal(seed, sub, i));
                            note(&m, fbits(got[c]), want, impls[k]->name, "fill", i);
                        }
                    }
    ASSERT_NONE(&m);
}
END_TEST

/* ---- Ops through the public API, per implementation ---- */

/* Everything an op wrote, as bytes. */
typedef struct blob {
    unsigned char *p;
    size_t n, cap;
} blob;

static void blob_add(blob *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        ck_assert(b->p != NULL);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void blob_add_buffer(blob *b, const tally_buffer *buf, size_t n)
{
    void *tmp = malloc(n * 4 + 4);
    ck_assert(tmp != NULL);
    tt_read(buf, 0, tmp, n);
    blob_add(b, tmp, n * 4);
    free(tmp);
}

/* Data kinds for op inputs. */
enum { DATA_NORMAL, DATA_PROB, DATA_SPECIAL, DATA_COUNTS, DATA_KINDS };

static void fill_data(float *x, size_t n, int kind, uint64_t seed)
{
    uint64_t s = seed * 7919u + (uint64_t)kind;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mix(&s);
        double u = (double)(r >> 11) / (double)(1ull << 53);
        switch (kind) {
        case DATA_NORMAL: x[i] = (float)(u * 12.0 - 6.0); break;
        case DATA_PROB: x[i] = (r % 17 == 0) ? 0.0f : (float)u; break;
        case DATA_SPECIAL:
            x[i] = (r % 23 == 0) ? ffrom(edge_bits[(r >> 5) % N_EDGES]) : (float)(u * 4.0 - 2.0);
            break;
        default:
            x[i] = (r % 3 == 0) ? 0.0f : (float)((r >> 8) % 12);
            if (r % 97 == 0) x[i] = ffrom(edge_bits[(r >> 5) % N_EDGES]);
            if (r % 89 == 0) x[i] = 63.0f + (float)((r >> 9) % 3);
            break;
        }
    }
}

/* An input buffer of rows x stride floats with view rows x cols. */
static tally_view input_view(tally_context *ctx, uint64_t rows, uint64_t cols, uint64_t stride, int kind,
                             uint64_t seed, tally_buffer **keep)
{
    size_t n = rows * stride > 0 ? rows * stride : 1;
    float *x = malloc(n * sizeof *x);
    ck_assert(x != NULL);
    fill_data(x, n, kind, seed);
    *keep = tt_upload(ctx, x, n);
    free(x);
    return tally_view_f32_strided(*keep, 0, (int64_t)rows, (int64_t)cols, (int64_t)stride);
}

typedef struct shape {
    uint64_t rows, cols, pad; /* stride = cols + pad */
} shape;

static const shape shapes[] = {
    {1, 1, 0},     {1, 3, 0},     {1, 5, 0},      {3, 17, 0},    {7, 1000, 3}, {2, 16384, 0},
    {3, 16385, 5}, {1, 70001, 0}, {5, 40000, 11}, {33, 513, 0},  {1, 4096, 0}, {4, 4097, 1},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* A host context on implementation `impl` with `threads` threads (NULL:
 * the default), both read at creation. */
static tally_context *context_for(const char *impl, const char *threads)
{
    setenv("TALLY_HOST_IMPL", impl, 1);
    if (threads != NULL) setenv("TALLY_HOST_THREADS", threads, 1);
    tally_context *ctx = NULL;
    tally_status st = tally_context_create(TALLY_BACKEND_HOST, 0, &ctx);
    ck_assert_msg(st == TALLY_OK, "host context with TALLY_HOST_IMPL=%s: %s", impl, tally_last_error(NULL));
    unsetenv("TALLY_HOST_IMPL");
    unsetenv("TALLY_HOST_THREADS");
    /* The device name reports the implementation chosen. */
    ck_assert_msg(strstr(tally_context_device_name(ctx), impl) != NULL, "%s", tally_context_device_name(ctx));
    return ctx;
}

static void run_reduce(tally_context *ctx, const shape *sh, int kind, blob *out)
{
    static const tally_reduce_op ops[] = {TALLY_SUM, TALLY_MEAN, TALLY_MIN, TALLY_MAX, TALLY_LOGSUMEXP,
                                          TALLY_SUMSQ};
    tally_buffer *xb, *ob = tt_buffer(ctx, sh->rows);
    tally_view x = input_view(ctx, sh->rows, sh->cols, sh->cols + sh->pad, kind, sh->cols, &xb);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        tt_ok(tally_reduce(ctx, ops[o], TALLY_AXIS_ALL, x, tally_view_f32(ob, 0, 1, 1)), ctx);
        blob_add_buffer(out, ob, 1);
        tt_ok(tally_reduce(ctx, ops[o], TALLY_AXIS_ROW, x, tally_view_f32(ob, 0, 1, (int64_t)sh->rows)), ctx);
        blob_add_buffer(out, ob, sh->rows);
    }
    tally_buffer_release(xb);
    tally_buffer_release(ob);
}

static void run_kl(tally_context *ctx, const shape *sh, int kind, blob *out)
{
    const uint64_t stride = sh->cols + sh->pad;
    tally_buffer *ib, *tb, *ob = tt_buffer(ctx, sh->rows * sh->cols);
    tally_view in = input_view(ctx, sh->rows, sh->cols, stride, kind == DATA_NORMAL ? DATA_PROB : kind, 3, &ib);
    tally_view tg = input_view(ctx, sh->rows, sh->cols, stride, kind, 4, &tb);
    for (unsigned flags = 0; flags < 4; flags++) {
        tt_ok(tally_kl_div(ctx, in, tg, TALLY_REDUCTION_NONE, flags,
                           tally_view_f32(ob, 0, (int64_t)sh->rows, (int64_t)sh->cols)), ctx);
        blob_add_buffer(out, ob, sh->rows * sh->cols);
        for (int red = TALLY_REDUCTION_SUM; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
            tt_ok(tally_kl_div(ctx, in, tg, (tally_reduction)red, flags, tally_view_f32(ob, 0, 1, 1)), ctx);
            blob_add_buffer(out, ob, 1);
        }
    }
    tally_buffer_release(ib);
    tally_buffer_release(tb);
    tally_buffer_release(ob);
}

static void run_dm(tally_context *ctx, const shape *sh, int kind, blob *out)
{
    const uint64_t stride = sh->cols + sh->pad;
    tally_buffer *cb, *ab, *sb, *ob = tt_buffer(ctx, sh->rows);
    tally_view counts = input_view(ctx, sh->rows, sh->cols, stride, kind == DATA_SPECIAL ? kind : DATA_COUNTS, 5, &cb);
    tally_view per_row = input_view(ctx, sh->rows, sh->cols, stride, DATA_NORMAL, 6, &ab);
    tally_view shared = input_view(ctx, 1, sh->cols, sh->cols, DATA_NORMAL, 7, &sb);
    for (unsigned flags = 0; flags < 2; flags++)
        for (int a = 0; a < 2; a++) {
            tally_view la = a ? per_row : shared;
            tt_ok(tally_dirichlet_multinomial(ctx, counts, la, TALLY_REDUCTION_NONE, flags,
                                              tally_view_f32(ob, 0, 1, (int64_t)sh->rows)), ctx);
            blob_add_buffer(out, ob, sh->rows);
            for (int red = TALLY_REDUCTION_SUM; red <= TALLY_REDUCTION_MEAN; red++) {
                tt_ok(tally_dirichlet_multinomial(ctx, counts, la, (tally_reduction)red, flags,
                                                  tally_view_f32(ob, 0, 1, 1)), ctx);
                blob_add_buffer(out, ob, 1);
            }
        }
    tally_buffer_release(cb);
    tally_buffer_release(ab);
    tally_buffer_release(sb);
    tally_buffer_release(ob);
}

static void run_gmm(tally_context *ctx, const shape *sh, int kind, blob *out)
{
    /* rows = B, cols = D; K from the shape so that K = 1 is covered too. */
    const uint64_t B = sh->rows, D = sh->cols > 20000 ? 20000 : sh->cols, K = 1 + sh->rows % 3;
    tally_buffer *zb, *mb, *lb, *gb, *qb = tt_buffer(ctx, B), *cb = tt_buffer(ctx, B);
    tally_view z = input_view(ctx, B, D, D, kind, 8, &zb);
    tally_view mu = input_view(ctx, B, K * D, K * D, kind, 9, &mb);
    tally_view lv = input_view(ctx, B, K * D, K * D, DATA_NORMAL, 10, &lb);
    tally_view lg = input_view(ctx, 1, K, K, kind, 11, &gb);
    tt_ok(tally_gmm_log_prob(ctx, z, mu, lv, lg, (int64_t)K, tally_view_f32(qb, 0, 1, (int64_t)B)), ctx);
    blob_add_buffer(out, qb, B);
    tally_rng rng = {.seed = 99, .subsequence = 1, .offset = 6};
    tt_ok(tally_gmm_sample(ctx, mu, lv, lg, (int64_t)K, rng, z, tally_view_f32(qb, 0, 1, (int64_t)B),
                           tally_view_typed(cb, TALLY_I32, 0, 1, (int64_t)B), NULL), ctx);
    blob_add_buffer(out, zb, B * D);
    blob_add_buffer(out, qb, B);
    blob_add_buffer(out, cb, B);
    tally_buffer_release(zb);
    tally_buffer_release(mb);
    tally_buffer_release(lb);
    tally_buffer_release(gb);
    tally_buffer_release(qb);
    tally_buffer_release(cb);
}

static void run_fill(tally_context *ctx, const shape *sh, int kind, blob *out)
{
    const uint64_t stride = sh->cols + sh->pad;
    static const uint64_t offsets[] = {0, 1, 3, (1ull << 33) + 2};
    tally_buffer *ob = tt_buffer(ctx, sh->rows * stride);
    for (int dist = TALLY_DIST_RAW; dist <= TALLY_DIST_NORMAL; dist++) {
        tally_rng rng = {.seed = 5 + (uint64_t)kind, .subsequence = 2, .offset = offsets[kind % 4]};
        tally_view v = tally_view_f32_strided(ob, 0, (int64_t)sh->rows, (int64_t)sh->cols, (int64_t)stride);
        if (dist == TALLY_DIST_RAW) v.dtype = TALLY_U32;
        tt_poison(ob);
        tt_ok(tally_rng_fill(ctx, (tally_distribution)dist, rng, v, NULL), ctx);
        blob_add_buffer(out, ob, sh->rows * stride);
    }
    tally_buffer_release(ob);
}

typedef void (*op_runner)(tally_context *ctx, const shape *sh, int kind, blob *out);

static const struct {
    const char *name;
    op_runner run;
} op_rows[] = {
    {"reduce", run_reduce}, {"kl_div", run_kl}, {"dirichlet_multinomial", run_dm},
    {"gmm", run_gmm},       {"rng_fill", run_fill},
};

START_TEST(test_ops)
{
    const tally__host_impl *impls[MAX_IMPLS], *all;
    size_t n_impls = vector_impls(impls, &all);
    size_t n_all = tally__host_impls(&all);
    for (size_t i = 0; i < n_all; i++)
        if (!all[i].supported()) fprintf(stderr, "host_dispatch: %s not supported by this CPU, skipped\n", all[i].name);
    ck_assert(n_impls >= 1);
    const size_t row = (size_t)_i;
    for (size_t s = 0; s < N_SHAPES; s++)
        for (int kind = 0; kind < DATA_KINDS; kind++) {
            if (op_rows[row].run == run_dm && kind == DATA_PROB) continue;
            blob want = {0};
            tally_context *ctx = context_for("scalar", NULL);
            op_rows[row].run(ctx, &shapes[s], kind, &want);
            tally_context_release(ctx);
            /* Each implementation, and the best one also on 1 and 5 threads
             * (the pool splits tiles differently; the bits must not move). */
            static const char *const thread_counts[] = {NULL, "1", "5"};
            for (size_t run = 0; run < n_impls + 2; run++) {
                size_t k = run < n_impls ? run : 0;
                const char *threads = run < n_impls ? NULL : thread_counts[run - n_impls + 1];
                blob got = {0};
                ctx = context_for(impls[k]->name, threads);
                op_rows[row].run(ctx, &shapes[s], kind, &got);
                tally_context_release(ctx);
                ck_assert_uint_eq(got.n, want.n);
                size_t at = 0;
                while (at < got.n && got.p[at] == want.p[at]) at++;
                ck_assert_msg(at == got.n,
                              "%s on %llux%llu (pad %llu), data kind %d: %s (threads %s) differs from scalar "
                              "at byte %zu",
                              op_rows[row].name, (unsigned long long)shapes[s].rows,
                              (unsigned long long)shapes[s].cols, (unsigned long long)shapes[s].pad, kind,
                              impls[k]->name, threads ? threads : "default", at);
                free(got.p);
            }
            free(want.p);
        }
}
END_TEST

/* ---- The direct maximum (max_direct) ---- */

/* A vector's maximum as the tree takes it, in index order (any order gives
 * these bits where max_direct may answer). */
static float max_in_order(const float *p, uint64_t n)
{
    float m = p[0];
    for (uint64_t i = 1; i < n; i++) m = tally_max_nan(m, p[i]);
    return m;
}

/* Vectors of every float class and of non-positive values with both zeros
 * (a zero maximum, whose sign depends on the order), NaNs of several
 * payloads and infinities: max_direct answers exactly where the order
 * cannot matter (no NaN, a maximum other than zero), with the in-order
 * maximum's bits, and declines everywhere else. Then MAX and LOGSUMEXP by
 * rows over such rows through every implementation, against scalar. */
START_TEST(test_max_direct)
{
    static const uint32_t low[] = {0x80000000u, 0x00000000u, 0xbf800000u, 0xff800000u, 0xc2ce8ed0u, 0x80000001u};
    static const uint64_t lengths[] = {1, 2, 3, 15, 16, 17, 33, 257, 1000};
    const tally__host_impl *impls[MAX_IMPLS], *all;
    const size_t n_impls = vector_impls(impls, &all);
    float p[1000];
    uint64_t seed = 77;
    for (int kind = 0; kind < 4; kind++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
            for (int rep = 0; rep < 40; rep++) {
                const uint64_t n = lengths[l];
                int has_nan = 0;
                for (uint64_t i = 0; i < n; i++) {
                    const uint64_t r = mix(&seed);
                    /* 0: any class; 1: non-positive with zeros; 2: the same
                     * with one positive value; 3: a NaN in ordinary values. */
                    p[i] = kind == 0 ? random_float(&seed) : ffrom(low[r % 6]);
                    if (kind == 3) p[i] = (float)((double)(r >> 40) / 1e6 - 8.0);
                }
                if (kind == 2) p[mix(&seed) % n] = 0.5f;
                if (kind == 3 && rep % 2 == 0) p[mix(&seed) % n] = ffrom(rep % 4 ? 0x7fc00000u : 0xffa00001u);
                for (uint64_t i = 0; i < n; i++) has_nan |= p[i] != p[i];
                const float want = max_in_order(p, n);
                for (size_t k = 0; k < n_impls; k++) {
                    float got = 42.0f;
                    const int ok = impls[k]->kernels->max_direct(p, n, &got);
                    ck_assert_msg(ok == (!has_nan && want != 0.0f), "%s: max_direct answered %d on a vector "
                                  "of %llu (kind %d, NaN %d, maximum 0x%08x)", impls[k]->name, ok,
                                  (unsigned long long)n, kind, has_nan, fbits(want));
                    if (ok)
                        ck_assert_msg(fbits(got) == fbits(want), "%s: max_direct 0x%08x, in order 0x%08x",
                                      impls[k]->name, fbits(got), fbits(want));
                }
            }
    /* Through the op: rows of 37 whose maxima are -0, +0, -inf, NaN or 1. */
    enum { R = 24, C = 37 };
    float x[R * C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) x[r * C + c] = ffrom(low[mix(&seed) % 6]);
    for (int r = 0; r < R; r += 4) x[r * C + (r % C)] = r % 8 ? 1.0f : ffrom(0x7fa00001u);
    for (int c = 0; c < C; c++) x[1 * C + c] = ffrom(0xff800000u);
    const tally_reduce_op ops[] = {TALLY_MAX, TALLY_LOGSUMEXP};
    for (size_t o = 0; o < 2; o++) {
        float want[R], got[R];
        for (size_t k = 0; k <= n_impls; k++) {
            tally_context *ctx = context_for(k == 0 ? "scalar" : impls[k - 1]->name, NULL);
            tally_buffer *xb = tt_upload(ctx, x, R * C), *ob = tt_buffer(ctx, R);
            tt_ok(tally_reduce(ctx, ops[o], TALLY_AXIS_ROW, tally_view_f32(xb, 0, R, C), tally_view_f32(ob, 0, 1, R)),
                  ctx);
            tt_read(ob, 0, k == 0 ? want : got, R);
            tally_buffer_release(xb);
            tally_buffer_release(ob);
            tally_context_release(ctx);
            for (int r = 0; k > 0 && r < R; r++)
                ck_assert_msg(fbits(got[r]) == fbits(want[r]), "%s, op %d, row %d: 0x%08x, scalar 0x%08x",
                              impls[k - 1]->name, (int)ops[o], r, fbits(got[r]), fbits(want[r]));
        }
    }
}
END_TEST

/* A forced implementation the CPU lacks, or an unknown name, is a clear
 * error at context creation. */
START_TEST(test_bad_impl)
{
    tally_context *ctx = NULL;
    setenv("TALLY_HOST_IMPL", "no-such-isa", 1);
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_HOST, 0, &ctx), TALLY_INVALID_ARGUMENT);
    ck_assert_msg(strstr(tally_last_error(NULL), "TALLY_HOST_IMPL") != NULL, "%s", tally_last_error(NULL));
    const tally__host_impl *all;
    size_t n = tally__host_impls(&all);
    for (size_t i = 0; i < n; i++)
        if (!all[i].supported()) {
            setenv("TALLY_HOST_IMPL", all[i].name, 1);
            ck_assert_int_eq(tally_context_create(TALLY_BACKEND_HOST, 0, &ctx),
                             TALLY_INVALID_ARGUMENT);
        }
    unsetenv("TALLY_HOST_IMPL");
    ck_assert_int_eq(tally_context_create(TALLY_BACKEND_HOST, 0, &ctx), TALLY_OK);
    tally_context_release(ctx);
}
END_TEST

TT_SUITE("host_dispatch",
         {.name = "unary_terms", .tests = {test_unary_terms}, .loops = (int)(sizeof unary_rows / sizeof unary_rows[0]),
          .timeout = 600},
         {.name = "kl_terms", .tests = {test_kl_terms}, .loops = 4, .timeout = 600},
         {.name = "dm_terms", .tests = {test_dm_terms}, .loops = 2, .timeout = 600},
         {.name = "dm_table_terms", .tests = {test_dm_table_terms}, .loops = 2, .timeout = 600},
         {.name = "gauss_terms", .tests = {test_gauss_terms}, .loops = 1, .timeout = 600},
         {.name = "fills", .tests = {test_fills}, .loops = 1, .timeout = 600},
         {.name = "ops", .tests = {test_ops}, .loops = (int)(sizeof op_rows / sizeof op_rows[0]), .timeout = 600},
         {.name = "max_direct", .tests = {test_max_direct}, .loops = 1, .timeout = 600},
         {.name = "bad_impl", .tests = {test_bad_impl}, .loops = 1, .timeout = 600})
