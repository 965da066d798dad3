/*
 * tests/check_planner.c - the reduction tree (docs/reduction-tree.md): the
 * planner's shapes, the documented worked example, sums whose bits depend on
 * the order (checked against a hand simulation of the written rule), exact
 * sums, and independence from the host backend's thread count. Host-only:
 * it creates host contexts itself.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "src/internal.h"
#include "testutil.h"

/* ---- Plan shapes --------------------------------------------------------- */

typedef struct expect_level {
    uint64_t n;
    uint32_t lanes, qpl;
    uint64_t tiles;
} expect_level;

static void check_plan(uint64_t n, int levels, const expect_level *want)
{
    tally__tree_plan p = tally__plan_vector(n);
    ck_assert_msg(p.levels == levels, "n = %llu: %d levels, expected %d", (unsigned long long)n, p.levels, levels);
    for (int i = 0; i < levels; i++) {
        const tally__tree_level *l = &p.level[i];
        ck_assert_msg(l->n == want[i].n && l->lanes == want[i].lanes && l->quads_per_lane == want[i].qpl &&
                          l->tiles == want[i].tiles,
                      "n = %llu level %d: {n %llu, lanes %u, qpl %u, tiles %llu}, expected {%llu, %u, %u, %llu}",
                      (unsigned long long)n, i, (unsigned long long)l->n, l->lanes, l->quads_per_lane,
                      (unsigned long long)l->tiles, (unsigned long long)want[i].n, want[i].lanes, want[i].qpl,
                      (unsigned long long)want[i].tiles);
    }
}

/* Each expectation worked out by hand from the written rule:
 * quads = ceil(n/4); quads > 4096 -> 256 lanes x 16 quads, ceil(quads/4096)
 * tiles; else one tile, lanes = next power of two >= quads (<= 256),
 * qpl = ceil(quads/lanes). */
START_TEST(plan_shapes)
{
    check_plan(0, 0, NULL);
    check_plan(1, 1, (expect_level[]){{1, 1, 1, 1}});
    check_plan(3, 1, (expect_level[]){{3, 1, 1, 1}});
    check_plan(4, 1, (expect_level[]){{4, 1, 1, 1}});
    check_plan(5, 1, (expect_level[]){{5, 2, 1, 1}});
    check_plan(10, 1, (expect_level[]){{10, 4, 1, 1}});
    check_plan(1000, 1, (expect_level[]){{1000, 256, 1, 1}}); /* 250 quads */
    check_plan(1023, 1, (expect_level[]){{1023, 256, 1, 1}}); /* 256 quads */
    check_plan(1025, 1, (expect_level[]){{1025, 256, 2, 1}}); /* 257 quads */
    check_plan(16384, 1, (expect_level[]){{16384, 256, 16, 1}});
    check_plan(16385, 2, (expect_level[]){{16385, 256, 16, 2}, {2, 1, 1, 1}});
    check_plan(1ull << 28, 2, (expect_level[]){{1ull << 28, 256, 16, 16384}, {16384, 256, 16, 1}});
    /* 2^40: 2^38 quads -> 2^26 tiles; 2^26 -> 2^12 tiles; 4096 -> 1024 quads
     * -> 256 lanes x 4. */
    check_plan(1ull << 40, 3,
               (expect_level[]){{1ull << 40, 256, 16, 1ull << 26}, {1ull << 26, 256, 16, 4096}, {4096, 256, 4, 1}});
    /* 2^63: tiles 2^49, 2^35, 2^21, 2^7 = 128 -> 32 quads -> 32 lanes x 1. */
    check_plan(1ull << 63, 5,
               (expect_level[]){{1ull << 63, 256, 16, 1ull << 49},
                                {1ull << 49, 256, 16, 1ull << 35},
                                {1ull << 35, 256, 16, 1ull << 21},
                                {1ull << 21, 256, 16, 128},
                                {128, 32, 1, 1}});
    /* The largest n: 2^62 quads (the last one short). */
    tally__tree_plan p = tally__plan_vector(UINT64_MAX);
    ck_assert_int_le(p.levels, TALLY__TREE_MAX_LEVELS);
    ck_assert_uint_eq(p.level[0].tiles, 1ull << 50);
    ck_assert_uint_eq(p.level[p.levels - 1].tiles, 1);
}
END_TEST

/* Invariants over many n: the tiles cover the vector with no empty tile,
 * lanes are powers of two, and each level feeds the next. */
START_TEST(plan_invariants)
{
    tt_rand r = tt_rand_seed(11);
    for (int i = 0; i < 20000; i++) {
        uint64_t n = i < 5000 ? (uint64_t)i : tt_rand_u64(&r) >> tt_rand_below(&r, 64);
        tally__tree_plan p = tally__plan_vector(n);
        if (n == 0) {
            ck_assert_int_eq(p.levels, 0);
            continue;
        }
        ck_assert_int_ge(p.levels, 1);
        uint64_t len = n;
        for (int k = 0; k < p.levels; k++) {
            const tally__tree_level *l = &p.level[k];
            ck_assert_uint_eq(l->n, len);
            ck_assert(l->lanes >= 1 && l->lanes <= 256 && (l->lanes & (l->lanes - 1)) == 0);
            ck_assert(l->quads_per_lane >= 1 && l->quads_per_lane <= 16);
            uint64_t quads = len / 4 + (len % 4 != 0);
            uint64_t per_tile = (uint64_t)l->lanes * l->quads_per_lane;
            ck_assert_uint_eq(l->tiles, quads / per_tile + (quads % per_tile != 0));
            if (l->tiles > 1) ck_assert(l->lanes == 256 && l->quads_per_lane == 16);
            /* Level agrees with the one-level planner and with the reference's
             * depth bookkeeping (which re-derives the same rule). */
            tally__tree_level one = tally__plan_level(len);
            ck_assert(one.lanes == l->lanes && one.quads_per_lane == l->quads_per_lane && one.tiles == l->tiles);
            len = l->tiles;
        }
        ck_assert_uint_eq(p.level[p.levels - 1].tiles, 1);
    }
}
END_TEST

/* ---- Sums through the host backend ----------------------------------------- */

static tally_context *host_context(void)
{
    tally_context *ctx = NULL;
    tally_status st = tally_context_create(TALLY_BACKEND_HOST, 0, &ctx);
    ck_assert_msg(st == TALLY_OK, "host context: %s", tally_last_error(NULL));
    return ctx;
}

/* The worked example of docs/reduction-tree.md: n = 10, {2^24, 1 x 9}. */
START_TEST(documented_example)
{
    float e[10] = {16777216.0f, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    /* Hand simulation of the documented order, one rounding per line. */
    float a0 = ((e[0] + e[1]) + e[2]) + e[3]; /* each +1 is a tie, rounded to even: 2^24 */
    float a1 = ((e[4] + e[5]) + e[6]) + e[7];
    float a2 = e[8] + e[9];
    float v0 = a0 + a2; /* s = 2: lane 1's partner (3) is inactive */
    v0 = v0 + a1;       /* s = 1 */
    ck_assert_uint_eq(tt_bits(a0), tt_bits(16777216.0f));
    ck_assert_uint_eq(tt_bits(v0), tt_bits(16777222.0f));
    /* A sequential sum would lose every 1: the data does detect the order. */
    float seq = 0.0f;
    for (int i = 0; i < 10; i++) seq += e[i];
    ck_assert_uint_eq(tt_bits(seq), tt_bits(16777216.0f));

    tally_context *ctx = host_context();
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, e, 1, 10), 16777222.0f, "sum of the documented example");
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, e, 2, 5), 16777222.0f, "same example as a 2 x 5 view");
    tt_assert_bits(tally_ref_tree_f32(e, 10, 0, 0.0f), 16777222.0f, "reference simulation");
    tally_context_release(ctx);
}
END_TEST

/* n = 20 (5 quads -> 8 lanes, active 5), written out by hand:
 * lanes a0..a4 each sum one quad; s = 4: v0 = a0 + a4; s = 2: v0 += a2,
 * v1 = a1 + a3; s = 1: v0 += v1. */
START_TEST(hand_simulated_twenty)
{
    float e[20];
    for (int i = 0; i < 20; i++) e[i] = (i % 5 == 0) ? 16777216.0f : (i % 3 == 0 ? 3.0f : 1.0f);
    e[7] = -16777216.0f;
    float a[5];
    for (int j = 0; j < 5; j++) a[j] = ((e[4 * j] + e[4 * j + 1]) + e[4 * j + 2]) + e[4 * j + 3];
    float v0 = a[0] + a[4];
    v0 = v0 + a[2];
    float v1 = a[1] + a[3];
    float want = v0 + v1;
    tally_context *ctx = host_context();
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, e, 1, 20), want, "n = 20 hand simulation");
    tt_assert_bits(tally_ref_tree_f32(e, 20, 0, 0.0f), want, "reference simulation, n = 20");
    tally_context_release(ctx);
}
END_TEST

/* Order-sensitive data: values spread over many binades with both signs,
 * so nearly every different order gives different bits. */
static void order_sensitive(float *x, size_t n, uint64_t seed)
{
    tt_rand r = tt_rand_seed(seed);
    for (size_t i = 0; i < n; i++) {
        double m = 1.0 + tt_rand_unit(&r);
        int e = (int)tt_rand_below(&r, 40) - 20;
        x[i] = (float)(ldexp(m, e) * (tt_rand_below(&r, 2) ? 1.0 : -1.0));
    }
}

START_TEST(simulated_order_many_lengths)
{
    static const uint64_t lengths[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 255, 256,
                                       257, 1000, 1023, 1024, 1025, 4095, 4097, 16383, 16384, 16385, 16387,
                                       32768, 65536 + 3, 16384 * 17 + 5};
    tally_context *ctx = host_context();
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        uint64_t n = lengths[i];
        float *x = tt_alloc(n * sizeof *x);
        order_sensitive(x, n, 100 + i);
        float want = tally_ref_tree_f32(x, n, 0, 0.0f);
        tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, (int64_t)n), want, "sum, n = %llu", (unsigned long long)n);
        /* The sequential sum differs for most of these: evidence that the
         * comparison is sensitive to the order at all. */
        free(x);
    }
    tally_context_release(ctx);
}
END_TEST

/* Two levels with more than 256 partials in the second level: 16384 * 300 + 7
 * elements. */
START_TEST(simulated_order_two_levels)
{
    uint64_t n = 16384ull * 300 + 7;
    float *x = tt_alloc(n * sizeof *x);
    order_sensitive(x, n, 77);
    tally_context *ctx = host_context();
    float want = tally_ref_tree_f32(x, n, 0, 0.0f);
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, (int64_t)n), want, "two-level sum");
    float seq = 0.0f;
    for (uint64_t i = 0; i < n; i++) seq += x[i];
    ck_assert_msg(tt_bits(seq) != tt_bits(want), "test data is not order sensitive");
    free(x);
    tally_context_release(ctx);
}
END_TEST

/* Sums with exact answers: integers below 2^24 and powers of two. */
START_TEST(exact_sums)
{
    tally_context *ctx = host_context();
    int64_t n = 5000;
    float *x = tt_alloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i + 1);
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, n), 12502500.0f, "1 + ... + 5000");
    tt_assert_bits(tt_reduce_all(ctx, TALLY_MEAN, x, 1, n), 2500.5f, "mean of 1..5000");
    tt_assert_bits(tt_reduce_all(ctx, TALLY_MAX, x, 50, 100), 5000.0f, "max");
    tt_assert_bits(tt_reduce_all(ctx, TALLY_MIN, x, 50, 100), 1.0f, "min");
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7) - 3.0f;
    /* Each run of 7 sums to 0; 5000 = 714 * 7 + 2 leaves -3 + -2. */
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, n), -5.0f, "periodic integers");
    /* Powers of two 2^-10 .. 2^3 repeated 100 times: every partial is a
     * multiple of 2^-10 below 2^11, so every addition is exact in any order. */
    for (int64_t i = 0; i < 14 * 100; i++) x[i] = ldexpf(1.0f, (int)(i % 14) - 10);
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, 1400), 1599.90234375f, "powers of two");
    /* Sum of squares of small integers. */
    for (int64_t i = 0; i < 100; i++) x[i] = (float)(i - 50);
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUMSQ, x, 10, 10), 83350.0f, "sumsq of -50..49");
    /* Minus zeros survive (lanes never start from +0). */
    for (int64_t i = 0; i < 37; i++) x[i] = -0.0f;
    tt_assert_bits(tt_reduce_all(ctx, TALLY_SUM, x, 1, 37), -0.0f, "sum of -0.0");
    free(x);
    tally_context_release(ctx);
}
END_TEST

/* ---- Thread count ------------------------------------------------------------ */

typedef struct snapshot {
    float sum_all, lse_all, kl, dm[64];
    float rows[300];
    float normals[1000];
    float gmm[40];
} snapshot;

static void take_snapshot(const float *x, uint64_t n, snapshot *s)
{
    tally_context *ctx = host_context();
    tally_buffer *in = tt_upload(ctx, x, (size_t)n), *out = tt_buffer(ctx, 2000);
    int64_t cols = 16390, rows = (int64_t)(n / (uint64_t)cols);
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ALL, tally_view_f32(in, 0, 1, (int64_t)n),
                       tally_view_f32(out, 0, 1, 1)),
          ctx);
    s->sum_all = tt_read1(out, 0);
    tt_ok(tally_reduce(ctx, TALLY_LOGSUMEXP, TALLY_AXIS_ALL, tally_view_f32(in, 0, 1, (int64_t)n),
                       tally_view_f32(out, 0, 1, 1)),
          ctx);
    s->lse_all = tt_read1(out, 0);
    tt_ok(tally_reduce(ctx, TALLY_SUM, TALLY_AXIS_ROW, tally_view_f32(in, 0, rows, cols),
                       tally_view_f32(out, 0, rows, 1)),
          ctx);
    tt_read(out, 0, s->rows, (size_t)rows);
    /* KL over two halves of the data used as input and (positive) target. */
    {
        uint64_t half = n / 2;
        float *t = tt_alloc(half * sizeof *t);
        for (uint64_t i = 0; i < half; i++) t[i] = fabsf(x[half + i]) + 0.01f;
        tally_buffer *tb = tt_upload(ctx, t, (size_t)half);
        tt_ok(tally_kl_div(ctx, tally_view_f32(in, 0, 1, (int64_t)half), tally_view_f32(tb, 0, 1, (int64_t)half),
                           TALLY_REDUCTION_SUM, 0, tally_view_f32(out, 0, 1, 1)),
              ctx);
        s->kl = tt_read1(out, 0);
        tally_buffer_release(tb);
        free(t);
    }
    /* Dirichlet-multinomial over 64 rows of 4000 counts. */
    {
        int64_t B = 64, V = 4000;
        float *c = tt_alloc((size_t)(B * V) * sizeof *c), *la = tt_alloc((size_t)V * sizeof *la);
        for (int64_t i = 0; i < B * V; i++) c[i] = floorf(fabsf(x[i]) * 3.0f);
        for (int64_t v = 0; v < V; v++) la[v] = x[v] * 0.5f;
        tally_buffer *cb = tt_upload(ctx, c, (size_t)(B * V)), *lb = tt_upload(ctx, la, (size_t)V);
        tt_ok(tally_dirichlet_multinomial(ctx, tally_view_f32(cb, 0, B, V), tally_view_f32(lb, 0, 1, V),
                                          TALLY_REDUCTION_NONE, TALLY_DM_WITH_COEFFICIENT,
                                          tally_view_f32(out, 0, B, 1)),
              ctx);
        tt_read(out, 0, s->dm, (size_t)B);
        tally_buffer_release(cb);
        tally_buffer_release(lb);
        free(c);
        free(la);
    }
    /* A mixture sample (40 rows, K = 3, D = 501) and normal fills. */
    {
        int64_t B = 40, K = 3, D = 501;
        tally_buffer *p = tt_upload(ctx, x, (size_t)(B * K * D) + 1), *z = tt_buffer(ctx, (size_t)(B * D)),
                     *lg = tt_upload(ctx, x + 7, 3);
        tally_rng rng = {.seed = 5, .subsequence = 1, .offset = 12};
        tt_ok(tally_gmm_sample(ctx, tally_view_f32(p, 0, B, K * D), tally_view_f32(p, 1, B, K * D),
                               tally_view_f32(lg, 0, 1, K), K, rng, tally_view_f32(z, 0, B, D),
                               tally_view_f32(out, 0, B, 1), (tally_view){0}, NULL),
              ctx);
        tt_read(out, 0, s->gmm, (size_t)B);
        tt_ok(tally_rng_fill(ctx, TALLY_DIST_NORMAL, rng, tally_view_f32(out, 0, 10, 100), NULL), ctx);
        tt_read(out, 0, s->normals, 1000);
        tally_buffer_release(p);
        tally_buffer_release(z);
        tally_buffer_release(lg);
    }
    tally_buffer_release(in);
    tally_buffer_release(out);
    tally_context_release(ctx);
}

START_TEST(thread_count_does_not_matter)
{
    uint64_t n = 16390ull * 300;
    float *x = tt_alloc(n * sizeof *x);
    order_sensitive(x, n, 5);
    for (uint64_t i = 0; i < n; i++) x[i] = fmaxf(fminf(x[i], 80.0f), -80.0f);
    static snapshot base, other;
    static const char *const counts[] = {"1", "2", "7"};
    for (int i = 0; i < 3; i++) {
        setenv("TALLY_HOST_THREADS", counts[i], 1);
        take_snapshot(x, n, i == 0 ? &base : &other);
        if (i > 0)
            ck_assert_msg(memcmp(&base, &other, sizeof base) == 0,
                          "results with TALLY_HOST_THREADS=%s differ from 1 thread", counts[i]);
    }
    unsetenv("TALLY_HOST_THREADS");
    free(x);
}
END_TEST

TT_SUITE("planner", {.name = "plan", .tests = {plan_shapes, plan_invariants}},
         {.name = "order", .timeout = 240,
          .tests = {documented_example, hand_simulated_twenty, simulated_order_many_lengths,
                    simulated_order_two_levels, exact_sums}},
         {.name = "threads", .timeout = 240, .tests = {thread_count_does_not_matter}})
