/*
 * tests/mpi/check_mpi.c - every libtally_mpi op, bit-compared with the
 * single-device op over the whole matrix, under many splits of the rows
 * (even, random, with empty ranks, with every row on one rank, with ranks
 * cut inside reduction tiles) at whatever rank count mpirun starts.
 *
 * Every rank generates the same global inputs from a fixed seed and computes
 * the single-device reference on its own host context; its sharded result
 * (its rows, or the scalar every rank receives) must equal the reference's
 * bits. Ranks choose their backend from TALLY_MPI_TEST_BACKENDS, a comma list
 * indexed by rank modulo its length ("host", "host,opencl"), so host and
 * OpenCL ranks mix in one run. Exit 77 (SKIP) when a requested backend is
 * unavailable, on every rank.
 *
 * The reference itself is checked against independent float64 values for the
 * plain sums (tests/check_ops.c checks every op's single-device bits in depth).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally_mpi.h"

static int rank_, size_;
static tally_context *dev; /* this rank's context (its backend) */
static tally_context *ref; /* host context for the single-device reference */
static long failures, checks;

#define FAIL(...)                                                         \
    do {                                                                  \
        failures++;                                                       \
        if (failures < 20) {                                              \
            fprintf(stderr, "rank %d: FAIL: ", rank_);                    \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

#define OKST(expr)                                                                                   \
    do {                                                                                             \
        tally_status s_ = (expr);                                                                    \
        if (s_ != TALLY_OK) {                                                                        \
            fprintf(stderr, "rank %d: %s:%d: %s -> %s: %s\n", rank_, __FILE__, __LINE__, #expr,      \
                    tally_status_name(s_), tally_mpi_last_error()[0] ? tally_mpi_last_error()        \
                                                                     : tally_last_error(NULL));      \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                            \
        }                                                                                            \
    } while (0)

/* ---- Deterministic data, the same on every rank ------------------------ */

static uint64_t rng_state;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static float uniformf(float lo, float hi) { return lo + (hi - lo) * (float)(next_u32() % 1000003) / 1000003.0f; }

static float *gen(uint64_t n, float lo, float hi)
{
    float *p = malloc(n * 4 + 4);
    for (uint64_t i = 0; i < n; i++) p[i] = uniformf(lo, hi);
    return p;
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* ---- Buffers ------------------------------------------------------------ */

/* A buffer on ctx holding rows [r0, r0 + rows) of a [*, cols] host matrix. */
static tally_buffer *rows_buffer(tally_context *ctx, const void *host, uint64_t r0, uint64_t rows, uint64_t cols)
{
    tally_buffer *b;
    uint64_t n = rows * cols;
    OKST(tally_buffer_create(ctx, n * 4 + 4, &b));
    if (n > 0) OKST(tally_buffer_upload(b, 0, (const char *)host + r0 * cols * 4, n * 4));
    return b;
}

static void *download(tally_buffer *b, uint64_t n)
{
    void *p = malloc(n * 4 + 4);
    if (n > 0) OKST(tally_buffer_download(b, 0, p, n * 4));
    return p;
}

static void compare_words(const char *what, const void *got, const void *want, uint64_t n)
{
    checks++;
    const uint32_t *g = got, *w = want;
    for (uint64_t i = 0; i < n; i++)
        if (g[i] != w[i]) {
            FAIL("%s: word %llu is 0x%08x, single device 0x%08x", what, (unsigned long long)i, g[i], w[i]);
            return;
        }
}

static float scalar_of(tally_context *ctx, tally_buffer *b)
{
    float v;
    OKST(tally_read_scalar(ctx, tally_view_f32(b, 0, 1, 1), &v));
    return v;
}

/* A distributed op's outcome against the single device's: the same status
 * and, when it succeeded, the same bits, either `width` words per row of
 * this rank's lr rows (global rows r0 on of the R-row output) or, for
 * width 0, the one scalar. */
static void compare_outcome(const char *what, tally_status gs, tally_status ls, tally_buffer *gout,
                            tally_buffer *lout, uint64_t R, uint64_t r0, uint64_t lr, uint64_t width)
{
    checks++;
    if (gs != ls) {
        FAIL("%s: status %s, single device %s", what, tally_status_name(ls), tally_status_name(gs));
    } else if (gs == TALLY_OK && width == 0) {
        float g = scalar_of(ref, gout), l = scalar_of(dev, lout);
        if (bits(g) != bits(l)) FAIL("%s: %a, single device %a", what, (double)l, (double)g);
    } else if (gs == TALLY_OK && lr > 0) {
        float *g = download(gout, R * width), *l = download(lout, lr * width);
        compare_words(what, l, g + r0 * width, lr * width);
        free(g);
        free(l);
    }
}

/* ---- Splits ------------------------------------------------------------- */

/* first[q] for q = 0..size (first[size] = R): split number k of R rows. */
static void make_split(int k, uint64_t R, uint64_t *first)
{
    first[0] = 0;
    first[size_] = R;
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(k + 1) ^ R;
    for (int q = 1; q < size_; q++) {
        switch (k) {
        case 0: first[q] = R * (uint64_t)q / (uint64_t)size_; break; /* even */
        case 1: first[q] = 0; break;                                  /* all rows on the last rank */
        case 2: first[q] = R; break;                                  /* all rows on rank 0 */
        default:
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            first[q] = R == 0 ? 0 : s % (R + 1);
        }
    }
    /* Random cut points, sorted: equal neighbours make empty ranks. */
    for (int q = 1; q < size_; q++)
        for (int p = q + 1; p < size_; p++)
            if (first[p] < first[q]) {
                uint64_t t = first[p];
                first[p] = first[q];
                first[q] = t;
            }
}
#define SPLITS 6

typedef struct shape {
    uint64_t rows, cols;
} shape;

/* Multi-tile shapes (111037 and 65536 elements: tiles cut by row and rank
 * boundaries), single-tile ones, one long row, and empty ones. */
static const shape shapes[] = {
    {37, 3001}, {16, 4096}, {5, 1000}, {3, 7}, {1, 40000}, {64, 257}, {0, 8}, {4, 0},
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

/* ---- Axis-all and row reductions ---------------------------------------- */

static const tally_reduce_op reduce_ops[] = {TALLY_SUM, TALLY_MEAN, TALLY_MIN, TALLY_MAX, TALLY_LOGSUMEXP, TALLY_SUMSQ};

static void check_reduce(const shape *sh, const float *x, const uint64_t *first, const char *tag)
{
    const uint64_t R = sh->rows, C = sh->cols, r0 = first[rank_], lr = first[rank_ + 1] - r0;
    tally_buffer *gx = rows_buffer(ref, x, 0, R, C), *lx = rows_buffer(dev, x, r0, lr, C);
    tally_buffer *gout, *lout;
    OKST(tally_buffer_create(ref, (R + 1) * 4, &gout));
    OKST(tally_buffer_create(dev, (lr + 1) * 4, &lout));
    for (size_t i = 0; i < sizeof reduce_ops / sizeof reduce_ops[0]; i++) {
        tally_reduce_op op = reduce_ops[i];
        char what[160];
        /* axis all */
        tally_status gs = tally_reduce(ref, op, TALLY_AXIS_ALL, tally_view_f32(gx, 0, (int64_t)R, (int64_t)C),
                                       tally_view_f32(gout, 0, 1, 1));
        tally_mpi_stats_reset();
        tally_status ls = tally_mpi_reduce(dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0, op, TALLY_AXIS_ALL,
                                           tally_view_f32(lx, 0, (int64_t)lr, (int64_t)C), tally_view_f32(lout, 0, 1, 1));
        tally_mpi_stats stats = tally_mpi_stats_get();
        snprintf(what, sizeof what, "%s reduce op %d all %llux%llu", tag, (int)op, (unsigned long long)R,
                 (unsigned long long)C);
        compare_outcome(what, gs, ls, gout, lout, R, r0, lr, 0);
        /* The design's bound: at most one message of less than a tile per
         * tree level (logsumexp runs two trees). */
        checks++;
        if (stats.messages_sent > stats.tree_levels || stats.bytes_sent > stats.tree_levels * 16383u * 4u)
            FAIL("%s: sent %llu messages, %llu bytes over %llu tree levels", what,
                 (unsigned long long)stats.messages_sent, (unsigned long long)stats.bytes_sent,
                 (unsigned long long)stats.tree_levels);
        /* A strided local view (row stride cols + 3) gives the same bits. */
        if (gs == TALLY_OK && lr > 1) {
            tally_buffer *sx;
            const uint64_t stride = C + 3;
            OKST(tally_buffer_create(dev, (lr * stride + 1) * 4, &sx));
            for (uint64_t r = 0; r < lr; r++)
                OKST(tally_buffer_upload(sx, r * stride * 4, x + (r0 + r) * C, C * 4));
            ls = tally_mpi_reduce(dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0, op, TALLY_AXIS_ALL,
                                  tally_view_f32_strided(sx, 0, (int64_t)lr, (int64_t)C, (int64_t)stride),
                                  tally_view_f32(lout, 0, 1, 1));
            tally_buffer_release(sx);
        } else if (gs == TALLY_OK) {
            ls = tally_mpi_reduce(dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0, op, TALLY_AXIS_ALL,
                                  tally_view_f32(lx, 0, (int64_t)lr, (int64_t)C), tally_view_f32(lout, 0, 1, 1));
        }
        if (gs == TALLY_OK) {
            checks++;
            float g = scalar_of(ref, gout), l = ls == TALLY_OK ? scalar_of(dev, lout) : 0.0f;
            if (ls != TALLY_OK || bits(g) != bits(l))
                FAIL("%s strided: %s %a, single device %a", what, tally_status_name(ls), (double)l, (double)g);
        }
        /* axis row */
        gs = tally_reduce(ref, op, TALLY_AXIS_ROW, tally_view_f32(gx, 0, (int64_t)R, (int64_t)C),
                          tally_view_f32(gout, 0, (int64_t)R, 1));
        ls = tally_mpi_reduce(dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0, op, TALLY_AXIS_ROW,
                              tally_view_f32(lx, 0, (int64_t)lr, (int64_t)C), tally_view_f32(lout, 0, (int64_t)lr, 1));
        snprintf(what, sizeof what, "%s reduce op %d row %llux%llu", tag, (int)op, (unsigned long long)R,
                 (unsigned long long)C);
        compare_outcome(what, gs, ls, gout, lout, R, r0, lr, 1);
    }
    tally_buffer_release(gx);
    tally_buffer_release(lx);
    tally_buffer_release(gout);
    tally_buffer_release(lout);
}

/* ---- KL divergence ------------------------------------------------------- */

static void check_kl(const shape *sh, const float *p, const float *t, const uint64_t *first, const char *tag)
{
    static const unsigned flag_set[] = {0, TALLY_KL_LOG_TARGET, TALLY_KL_INPUT_IS_PROB};
    const uint64_t R = sh->rows, C = sh->cols, r0 = first[rank_], lr = first[rank_ + 1] - r0;
    tally_buffer *gp = rows_buffer(ref, p, 0, R, C), *gt = rows_buffer(ref, t, 0, R, C);
    tally_buffer *lp = rows_buffer(dev, p, r0, lr, C), *lt = rows_buffer(dev, t, r0, lr, C);
    tally_buffer *gout, *lout;
    OKST(tally_buffer_create(ref, (R * C + 1) * 4, &gout));
    OKST(tally_buffer_create(dev, (lr * C + 1) * 4, &lout));
    for (int f = 0; f < 3; f++)
        for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_BATCHMEAN; red++) {
            char what[160];
            snprintf(what, sizeof what, "%s kl flags %u reduction %d %llux%llu", tag, flag_set[f], red,
                     (unsigned long long)R, (unsigned long long)C);
            int none = red == TALLY_REDUCTION_NONE;
            tally_status gs = tally_kl_div(ref, tally_view_f32(gp, 0, (int64_t)R, (int64_t)C),
                                           tally_view_f32(gt, 0, (int64_t)R, (int64_t)C), (tally_reduction)red,
                                           flag_set[f],
                                           none ? tally_view_f32(gout, 0, (int64_t)R, (int64_t)C)
                                                : tally_view_f32(gout, 0, 1, 1));
            tally_status ls = tally_mpi_kl_div(dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0,
                                               tally_view_f32(lp, 0, (int64_t)lr, (int64_t)C),
                                               tally_view_f32(lt, 0, (int64_t)lr, (int64_t)C), (tally_reduction)red,
                                               flag_set[f],
                                               none ? tally_view_f32(lout, 0, (int64_t)lr, (int64_t)C)
                                                    : tally_view_f32(lout, 0, 1, 1));
            /* Rows of no columns have no terms: only the statuses compare (a
             * width of 0 would read the unwritten outputs as scalars). */
            if (none && C == 0) compare_outcome(what, gs, ls, gout, lout, R, r0, 0, 1);
            else compare_outcome(what, gs, ls, gout, lout, R, r0, lr, none ? C : 0);
        }
    tally_buffer_release(gp);
    tally_buffer_release(gt);
    tally_buffer_release(lp);
    tally_buffer_release(lt);
    tally_buffer_release(gout);
    tally_buffer_release(lout);
}

/* ---- Dirichlet-multinomial ----------------------------------------------- */

static void check_dm(const shape *sh, const float *counts, const float *la, const uint64_t *first, const char *tag)
{
    const uint64_t R = sh->rows, V = sh->cols, r0 = first[rank_], lr = first[rank_ + 1] - r0;
    tally_buffer *gc = rows_buffer(ref, counts, 0, R, V), *lc = rows_buffer(dev, counts, r0, lr, V);
    tally_buffer *ga = rows_buffer(ref, la, 0, R > 0 ? R : 1, V), *la_rows = rows_buffer(dev, la, r0, lr, V);
    tally_buffer *la_shared = rows_buffer(dev, la, 0, 1, V);
    tally_buffer *gout, *lout;
    OKST(tally_buffer_create(ref, (R + 1) * 4, &gout));
    OKST(tally_buffer_create(dev, (lr + 1) * 4, &lout));
    for (int per_row = 0; per_row < 2; per_row++)
        for (unsigned flags = 0; flags < 2; flags++)
            for (int red = TALLY_REDUCTION_NONE; red <= TALLY_REDUCTION_MEAN; red++) {
                char what[160];
                snprintf(what, sizeof what, "%s dm per_row %d flags %u reduction %d %llux%llu", tag, per_row, flags,
                         red, (unsigned long long)R, (unsigned long long)V);
                int none = red == TALLY_REDUCTION_NONE;
                uint64_t grows = per_row ? R : 1, lrows = per_row ? lr : 1;
                tally_status gs = tally_dirichlet_multinomial(
                    ref, tally_view_f32(gc, 0, (int64_t)R, (int64_t)V), tally_view_f32(ga, 0, (int64_t)grows, (int64_t)V),
                    (tally_reduction)red, flags,
                    none ? tally_view_f32(gout, 0, (int64_t)R, 1) : tally_view_f32(gout, 0, 1, 1));
                tally_status ls = tally_mpi_dirichlet_multinomial(
                    dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0, tally_view_f32(lc, 0, (int64_t)lr, (int64_t)V),
                    tally_view_f32(per_row ? la_rows : la_shared, 0, (int64_t)lrows, (int64_t)V), (tally_reduction)red,
                    flags, none ? tally_view_f32(lout, 0, (int64_t)lr, 1) : tally_view_f32(lout, 0, 1, 1));
                compare_outcome(what, gs, ls, gout, lout, R, r0, lr, none ? 1 : 0);
            }
    tally_buffer_release(gc);
    tally_buffer_release(lc);
    tally_buffer_release(ga);
    tally_buffer_release(la_rows);
    tally_buffer_release(la_shared);
    tally_buffer_release(gout);
    tally_buffer_release(lout);
}

/* ---- Mixture: log density and sample ----------------------------------- */

static void check_gmm(uint64_t B, uint64_t K, uint64_t D, const uint64_t *first, const char *tag)
{
    const uint64_t r0 = first[rank_], lr = first[rank_ + 1] - r0;
    float *mu = gen(B * K * D, -2.0f, 2.0f), *lv = gen(B * K * D, -1.5f, 1.0f), *z = gen(B * D, -3.0f, 3.0f);
    float *logits = gen(K, -1.0f, 1.0f);
    if (K > 1 && B > 2) logits[K - 1] = -INFINITY; /* a component that is never drawn */
    tally_buffer *gmu = rows_buffer(ref, mu, 0, B, K * D), *glv = rows_buffer(ref, lv, 0, B, K * D);
    tally_buffer *gz = rows_buffer(ref, z, 0, B, D), *glg = rows_buffer(ref, logits, 0, 1, K);
    tally_buffer *lmu = rows_buffer(dev, mu, r0, lr, K * D), *llv = rows_buffer(dev, lv, r0, lr, K * D);
    tally_buffer *lz = rows_buffer(dev, z, r0, lr, D), *llg = rows_buffer(dev, logits, 0, 1, K);
    tally_buffer *gq, *lq, *gzo, *lzo, *gc, *lc;
    OKST(tally_buffer_create(ref, (B + 1) * 4, &gq));
    OKST(tally_buffer_create(dev, (lr + 1) * 4, &lq));
    OKST(tally_buffer_create(ref, (B * D + 1) * 4, &gzo));
    OKST(tally_buffer_create(dev, (lr * D + 1) * 4, &lzo));
    OKST(tally_buffer_create(ref, (B + 1) * 4, &gc));
    OKST(tally_buffer_create(dev, (lr + 1) * 4, &lc));
    char what[160];
    snprintf(what, sizeof what, "%s gmm_log_prob B %llu K %llu D %llu", tag, (unsigned long long)B,
             (unsigned long long)K, (unsigned long long)D);
    OKST(tally_gmm_log_prob(ref, tally_view_f32(gz, 0, (int64_t)B, (int64_t)D),
                            tally_view_f32(gmu, 0, (int64_t)B, (int64_t)(K * D)),
                            tally_view_f32(glv, 0, (int64_t)B, (int64_t)(K * D)), tally_view_f32(glg, 0, 1, (int64_t)K),
                            (int64_t)K, tally_view_f32(gq, 0, (int64_t)B, 1)));
    OKST(tally_mpi_gmm_log_prob(dev, MPI_COMM_WORLD, (int64_t)B, (int64_t)r0, tally_view_f32(lz, 0, (int64_t)lr, (int64_t)D),
                                tally_view_f32(lmu, 0, (int64_t)lr, (int64_t)(K * D)),
                                tally_view_f32(llv, 0, (int64_t)lr, (int64_t)(K * D)),
                                tally_view_f32(llg, 0, 1, (int64_t)K), (int64_t)K, tally_view_f32(lq, 0, (int64_t)lr, 1)));
    float *g = download(gq, B), *l = download(lq, lr);
    compare_words(what, l, g + r0, lr);
    free(g);
    free(l);
    for (int with_comp = 0; with_comp < 2; with_comp++) {
        tally_rng rng = {.seed = 0x1234abcdull + K, .subsequence = 7, .offset = 8 + 4 * (uint64_t)with_comp};
        uint64_t gcons = 0, lcons = 1;
        snprintf(what, sizeof what, "%s gmm_sample B %llu K %llu D %llu comp %d", tag, (unsigned long long)B,
                 (unsigned long long)K, (unsigned long long)D, with_comp);
        OKST(tally_gmm_sample(ref, tally_view_f32(gmu, 0, (int64_t)B, (int64_t)(K * D)),
                              tally_view_f32(glv, 0, (int64_t)B, (int64_t)(K * D)), tally_view_f32(glg, 0, 1, (int64_t)K),
                              (int64_t)K, rng, tally_view_f32(gzo, 0, (int64_t)B, (int64_t)D),
                              tally_view_f32(gq, 0, (int64_t)B, 1), tally_view_typed(gc, TALLY_I32, 0, (int64_t)B, 1),
                              &gcons));
        OKST(tally_mpi_gmm_sample(dev, MPI_COMM_WORLD, (int64_t)B, (int64_t)r0,
                                  tally_view_f32(lmu, 0, (int64_t)lr, (int64_t)(K * D)),
                                  tally_view_f32(llv, 0, (int64_t)lr, (int64_t)(K * D)),
                                  tally_view_f32(llg, 0, 1, (int64_t)K), (int64_t)K, rng,
                                  tally_view_f32(lzo, 0, (int64_t)lr, (int64_t)D), tally_view_f32(lq, 0, (int64_t)lr, 1),
                                  with_comp ? tally_view_typed(lc, TALLY_I32, 0, (int64_t)lr, 1)
                                            : tally_view_typed(NULL, TALLY_I32, 0, 0, 0),
                                  &lcons));
        checks++;
        if (gcons != lcons) FAIL("%s: consumed %llu, single device %llu", what, (unsigned long long)lcons,
                                 (unsigned long long)gcons);
        g = download(gzo, B * D), l = download(lzo, lr * D);
        compare_words(what, l, g + r0 * D, lr * D);
        free(g), free(l);
        g = download(gq, B), l = download(lq, lr);
        compare_words(what, l, g + r0, lr);
        free(g), free(l);
        if (with_comp) {
            g = download(gc, B), l = download(lc, lr);
            compare_words(what, l, g + r0, lr);
            free(g), free(l);
        }
    }
    tally_buffer *bufs[] = {gmu, glv, gz, glg, lmu, llv, lz, llg, gq, lq, gzo, lzo, gc, lc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tally_buffer_release(bufs[i]);
    free(mu), free(lv), free(z), free(logits);
}

/* ---- Random fills and categorical --------------------------------------- */

static void check_random(const shape *sh, const float *w, const uint64_t *first, const char *tag)
{
    const uint64_t R = sh->rows, C = sh->cols, r0 = first[rank_], lr = first[rank_ + 1] - r0;
    tally_buffer *gout, *lout;
    OKST(tally_buffer_create(ref, (R * C + R + 1) * 4, &gout));
    OKST(tally_buffer_create(dev, (lr * C + lr + 1) * 4, &lout));
    char what[160];
    for (int dist = TALLY_DIST_RAW; dist <= TALLY_DIST_NORMAL; dist++) {
        /* An odd offset: normals then start mid-pair, which must still match. */
        tally_rng rng = {.seed = 99, .subsequence = 3, .offset = 5};
        tally_dtype dt = dist == TALLY_DIST_RAW ? TALLY_U32 : TALLY_F32;
        uint64_t gcons = 0, lcons = 1;
        snprintf(what, sizeof what, "%s rng_fill %d %llux%llu", tag, dist, (unsigned long long)R, (unsigned long long)C);
        tally_status gs = tally_rng_fill(ref, (tally_distribution)dist, rng,
                                         tally_view_typed(gout, dt, 0, (int64_t)R, (int64_t)C), &gcons);
        tally_status ls = tally_mpi_rng_fill(dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0, (tally_distribution)dist, rng,
                                             tally_view_typed(lout, dt, 0, (int64_t)lr, (int64_t)C), &lcons);
        checks++;
        if (gs != ls || gcons != lcons) {
            FAIL("%s: status %s consumed %llu, single device %s %llu", what, tally_status_name(ls),
                 (unsigned long long)lcons, tally_status_name(gs), (unsigned long long)gcons);
        } else if (gs == TALLY_OK) {
            float *g = download(gout, R * C), *l = download(lout, lr * C);
            compare_words(what, l, g + r0 * C, lr * C);
            free(g), free(l);
        }
    }
    tally_buffer *gw = rows_buffer(ref, w, 0, R, C), *lw = rows_buffer(dev, w, r0, lr, C);
    for (unsigned flags = 0; flags < 2; flags++) {
        tally_rng rng = {.seed = 5, .subsequence = 11, .offset = 1000};
        uint64_t gcons = 0, lcons = 1;
        snprintf(what, sizeof what, "%s categorical flags %u %llux%llu", tag, flags, (unsigned long long)R,
                 (unsigned long long)C);
        tally_status gs = tally_categorical(ref, tally_view_f32(gw, 0, (int64_t)R, (int64_t)C), flags, rng,
                                            tally_view_typed(gout, TALLY_I32, 0, (int64_t)R, 1), &gcons);
        tally_status ls = tally_mpi_categorical(dev, MPI_COMM_WORLD, (int64_t)R, (int64_t)r0,
                                                tally_view_f32(lw, 0, (int64_t)lr, (int64_t)C), flags, rng,
                                                tally_view_typed(lout, TALLY_I32, 0, (int64_t)lr, 1), &lcons);
        checks++;
        if (gs != ls || gcons != lcons) {
            FAIL("%s: status %s consumed %llu, single device %s %llu", what, tally_status_name(ls),
                 (unsigned long long)lcons, tally_status_name(gs), (unsigned long long)gcons);
        } else if (gs == TALLY_OK) {
            float *g = download(gout, R), *l = download(lout, lr);
            compare_words(what, l, g + r0, lr);
            free(g), free(l);
        }
    }
    tally_buffer_release(gw);
    tally_buffer_release(lw);
    tally_buffer_release(gout);
    tally_buffer_release(lout);
}

/* ---- Errors: every rank gets the same status, no rank hangs ------------- */

static void check_errors(void)
{
    tally_buffer *b, *o;
    OKST(tally_buffer_create(dev, 64 * 4, &b));
    OKST(tally_buffer_create(dev, 4, &o));
    /* Rows that do not add up to global_rows. */
    tally_status st = tally_mpi_reduce(dev, MPI_COMM_WORLD, 1000, 0, TALLY_SUM, TALLY_AXIS_ALL,
                                       tally_view_f32(b, 0, 2, 8), tally_view_f32(o, 0, 1, 1));
    checks++;
    if (st != TALLY_SHAPE_MISMATCH && st != TALLY_INVALID_ARGUMENT) FAIL("bad split gave %s", tally_status_name(st));
    /* One rank's local view reaches outside its buffer: everyone fails. */
    int64_t rows = rank_ == size_ - 1 ? 100 : 1;
    st = tally_mpi_reduce(dev, MPI_COMM_WORLD, (int64_t)size_ - 1 + 100, rank_, TALLY_SUM, TALLY_AXIS_ALL,
                          tally_view_f32(b, 0, rows, 8), tally_view_f32(o, 0, 1, 1));
    checks++;
    if (st != TALLY_OUT_OF_BOUNDS) FAIL("a rank's out-of-bounds view gave %s, want OUT_OF_BOUNDS", tally_status_name(st));
    /* Mean of an empty matrix. */
    st = tally_mpi_reduce(dev, MPI_COMM_WORLD, 0, 0, TALLY_MEAN, TALLY_AXIS_ALL, tally_view_f32(b, 0, 0, 8),
                          tally_view_f32(o, 0, 1, 1));
    checks++;
    if (st != TALLY_EMPTY_INPUT) FAIL("mean of an empty matrix gave %s", tally_status_name(st));
    /* Ranks that disagree on the op. */
    if (size_ > 1) {
        st = tally_mpi_reduce(dev, MPI_COMM_WORLD, size_, rank_, rank_ == 0 ? TALLY_SUM : TALLY_MAX, TALLY_AXIS_ALL,
                              tally_view_f32(b, 0, 1, 8), tally_view_f32(o, 0, 1, 1));
        checks++;
        if (st != TALLY_INVALID_ARGUMENT) FAIL("disagreeing ops gave %s", tally_status_name(st));
    }
    /* A random op whose draws pass 2^64. */
    tally_rng rng = {.seed = 1, .subsequence = 0, .offset = UINT64_MAX - 8};
    st = tally_mpi_rng_fill(dev, MPI_COMM_WORLD, size_, rank_, TALLY_DIST_UNIFORM, rng, tally_view_f32(b, 0, 1, 8), NULL);
    checks++;
    if (size_ * 8 > 8 && st != TALLY_RNG_EXHAUSTED) FAIL("exhausted stream gave %s", tally_status_name(st));
    tally_buffer_release(b);
    tally_buffer_release(o);
}

/* The reference is itself right: its sum of a known vector matches float64. */
static void check_reference_sane(void)
{
    const uint64_t n = 111037;
    float *x = malloc(n * 4);
    double want = 0;
    for (uint64_t i = 0; i < n; i++) {
        x[i] = (float)(int)(i % 97) - 48.0f; /* integers: every partial sum is exact */
        want += x[i];
    }
    tally_buffer *b = rows_buffer(ref, x, 0, 1, n), *o;
    OKST(tally_buffer_create(ref, 4, &o));
    OKST(tally_reduce(ref, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(b, 0, 1, (int64_t)n), tally_view_f32(o, 0, 1, 1)));
    checks++;
    if ((double)scalar_of(ref, o) != want) FAIL("reference sum %g, float64 %g", (double)scalar_of(ref, o), want);
    tally_buffer_release(b);
    tally_buffer_release(o);
    free(x);
}

static tally_backend backend_for_rank(void)
{
    const char *list = getenv("TALLY_MPI_TEST_BACKENDS");
    if (list == NULL || *list == '\0') list = "host";
    char names[8][16];
    int count = 0;
    const char *p = list;
    while (*p && count < 8) {
        size_t len = strcspn(p, ",");
        snprintf(names[count], sizeof names[count], "%.*s", (int)(len < 15 ? len : 15), p);
        count++;
        p += len;
        if (*p == ',') p++;
    }
    tally_backend b = TALLY_BACKEND_HOST;
    if (tally_backend_from_name(names[rank_ % count], &b) != TALLY_OK) {
        fprintf(stderr, "unknown backend '%s' in TALLY_MPI_TEST_BACKENDS\n", names[rank_ % count]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return b;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    tally_backend want = backend_for_rank();
    int ok = tally_context_create(want, TALLY_DEVICE_DEFAULT, &dev) == TALLY_OK, all_ok = 0;
    if (!ok) fprintf(stderr, "rank %d: no %s context (%s): SKIP\n", rank_, tally_backend_name(want), tally_last_error(NULL));
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (dev != NULL) tally_context_release(dev);
        MPI_Finalize();
        return 77;
    }
    /* The single-device reference: the host, or TALLY_MPI_TEST_REFERENCE
     * (for example cuda, to compare two ranks sharing a GPU with that GPU). */
    tally_backend ref_backend = TALLY_BACKEND_HOST;
    const char *ref_name = getenv("TALLY_MPI_TEST_REFERENCE");
    if (ref_name != NULL && tally_backend_from_name(ref_name, &ref_backend) != TALLY_OK) {
        fprintf(stderr, "unknown backend '%s' in TALLY_MPI_TEST_REFERENCE\n", ref_name);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    OKST(tally_context_create(ref_backend, TALLY_DEVICE_DEFAULT, &ref));
    if (rank_ == 0)
        printf("check_mpi: %d ranks, backends %s, reference %s (%s)\n", size_,
               getenv("TALLY_MPI_TEST_BACKENDS") ? getenv("TALLY_MPI_TEST_BACKENDS") : "host",
               tally_backend_name(tally_context_backend(ref)), tally_context_device_name(ref));
    /* Fewer splits for the slower device contexts keep CI short. */
    int splits = want == TALLY_BACKEND_HOST && getenv("TALLY_MPI_TEST_BACKENDS") == NULL ? SPLITS : 4;
    if (getenv("TALLY_MPI_TEST_SPLITS")) splits = atoi(getenv("TALLY_MPI_TEST_SPLITS"));
    uint64_t *first = malloc(((size_t)size_ + 1) * sizeof *first);
    check_reference_sane();
    for (int s = 0; s < NSHAPES; s++) {
        const shape *sh = &shapes[s];
        const uint64_t n = sh->rows * sh->cols;
        rng_state = 0x243F6A8885A308D3ull + (uint64_t)s;
        float *x = gen(n, -30.0f, 30.0f);
        float *p = gen(n, 0.0f, 1.0f), *t = gen(n, 0.0f, 1.0f);
        float *counts = gen(n, 0.0f, 6.0f), *la = gen((sh->rows > 0 ? sh->rows : 1) * sh->cols, -2.0f, 2.0f);
        for (uint64_t i = 0; i < n; i++) counts[i] = floorf(counts[i]);
        /* Special values: zero targets, a -0.0 run, a NaN in one shape. */
        for (uint64_t i = 0; i < n; i += 17) t[i] = 0.0f;
        if (s == 3) x[n / 2] = NAN;
        if (s == 5) x[n - 1] = INFINITY;
        if (s == 2) for (uint64_t i = 0; i < n; i++) x[i] = -0.0f;
        for (int k = 0; k < splits; k++) {
            make_split(k, sh->rows, first);
            char tag[64];
            snprintf(tag, sizeof tag, "split %d", k);
            check_reduce(sh, x, first, tag);
            check_kl(sh, p, t, first, tag);
            check_dm(sh, counts, la, first, tag);
            check_random(sh, p, first, tag);
        }
        free(x), free(p), free(t), free(counts), free(la);
    }
    static const uint64_t gmm_shapes[][3] = {{37, 3, 5}, {9, 1, 64}, {64, 4, 7}, {5, 2, 0}};
    for (size_t g = 0; g < sizeof gmm_shapes / sizeof gmm_shapes[0]; g++)
        for (int k = 0; k < (splits < 4 ? splits : 4); k++) {
            make_split(k + 3, gmm_shapes[g][0], first);
            char tag[64];
            snprintf(tag, sizeof tag, "split %d", k + 3);
            rng_state = 0xB7E151628AED2A6Bull + g;
            check_gmm(gmm_shapes[g][0], gmm_shapes[g][1], gmm_shapes[g][2], first, tag);
        }
    check_errors();
    long totals[2] = {failures, checks}, sums[2];
    MPI_Reduce(totals, sums, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    free(first);
    tally_context_release(ref);
    tally_context_release(dev);
    int bad = failures > 0, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank_ == 0) printf("check_mpi: %ld checks over %d ranks, %ld failures\n", sums[1], size_, sums[0]);
    MPI_Finalize();
    return any_bad ? 1 : 0;
}
