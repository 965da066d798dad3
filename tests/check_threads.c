/*
 * tests/check_threads.c - eight threads, a context each, every op at once.
 *
 * The main thread first runs a fixed program of every op (two shapes each,
 * one large enough that the host backend splits it over its own threads) on
 * one context and keeps the output bits. Then eight threads each create
 * their own context on the same backend and run the same program three
 * times; every output must equal the single-threaded bits exactly. Built
 * with -fsanitize=thread by scripts/sanitize.sh, this is also the race test
 * (tally takes no locks: separate contexts must share nothing mutable).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

const int tally_test_needs_backend = 1;

#define THREADS 8
#define ROUNDS 3
#define IN_ELEMS (1u << 19)
#define OUT_ELEMS (1u << 19)

typedef struct program_out {
    uint32_t bits[OUT_ELEMS];
    uint64_t consumed[8];
} program_out;

static float inputs[IN_ELEMS];

/* Every op on two shapes; outputs at disjoint places of `out`. Returns the
 * first failing status (with the message in `why`). */
static tally_status run_program(tally_context *ctx, program_out *res, char *why, size_t why_size)
{
    tally_buffer *in = NULL, *out = NULL;
    tally_status st = tally_buffer_create(ctx, IN_ELEMS * 4u, &in);
    if (st == TALLY_OK) st = tally_buffer_create(ctx, OUT_ELEMS * 4u, &out);
    if (st == TALLY_OK) st = tally_buffer_upload(in, 0, inputs, IN_ELEMS * 4u);
    if (st == TALLY_OK) st = tally_buffer_fill(out, 0, OUT_ELEMS * 4u, TT_POISON);
    tally_rng rng = {.seed = 42, .subsequence = 3, .offset = 8};
    int64_t at = 0;
#define OUT(rows, cols) tally_view_f32(out, (at += (rows) * (cols)) - (rows) * (cols), rows, cols)
#define OUTI(rows) tally_view_typed(out, TALLY_I32, (at += (rows)) - (rows), rows, 1)
    static const int64_t shapes[2][2] = {{3, 37}, {32, 4096}}; /* the second is split over host threads */
    for (int s = 0; s < 2 && st == TALLY_OK; s++) {
        int64_t R = shapes[s][0], C = shapes[s][1];
        tally_view x = tally_view_f32(in, 0, R, C), y = tally_view_f32(in, R * C, R, C);
        for (int op = TALLY_SUM; op <= TALLY_SUMSQ && st == TALLY_OK; op++) {
            st = tally_reduce(ctx, (tally_reduce_op)op, TALLY_AXIS_ALL, x, OUT(1, 1));
            if (st == TALLY_OK) st = tally_reduce(ctx, (tally_reduce_op)op, TALLY_AXIS_ROW, x, OUT(R, 1));
        }
        if (st == TALLY_OK) st = tally_kl_div(ctx, x, y, TALLY_REDUCTION_BATCHMEAN, TALLY_KL_INPUT_IS_PROB, OUT(1, 1));
        if (st == TALLY_OK) st = tally_kl_div(ctx, x, y, TALLY_REDUCTION_NONE, 0, OUT(R, C));
        if (st == TALLY_OK)
            st = tally_dirichlet_multinomial(ctx, x, tally_view_f32(in, 2 * R * C, 1, C), TALLY_REDUCTION_NONE,
                                             TALLY_DM_WITH_COEFFICIENT, OUT(R, 1));
        if (st == TALLY_OK) st = tally_dirichlet_multinomial(ctx, x, y, TALLY_REDUCTION_SUM, 0, OUT(1, 1));
        int64_t K = 4, D = C / 8 > 0 ? C / 8 : 1;
        tally_view mu = tally_view_f32(in, 0, R, K * D), lv = tally_view_f32(in, R * K * D, R, K * D);
        tally_view logits = tally_view_f32(in, 2 * R * K * D, 1, K), z = tally_view_f32(in, 7, R, D);
        if (st == TALLY_OK) st = tally_gmm_log_prob(ctx, z, mu, lv, logits, K, OUT(R, 1));
        if (st == TALLY_OK) {
            tally_view zo = OUT(R, D), lq = OUT(R, 1), comp = OUTI(R);
            st = tally_gmm_sample(ctx, mu, lv, logits, K, rng, zo, lq, comp, &res->consumed[4 * s]);
        }
        if (st == TALLY_OK) st = tally_rng_fill(ctx, TALLY_DIST_NORMAL, rng, OUT(R, C), &res->consumed[4 * s + 1]);
        if (st == TALLY_OK)
            st = tally_rng_fill(ctx, TALLY_DIST_RAW, rng, tally_view_typed(out, TALLY_U32, (at += R * C) - R * C, R, C),
                                &res->consumed[4 * s + 2]);
        if (st == TALLY_OK)
            st = tally_categorical(ctx, x, TALLY_CATEGORICAL_LOGITS, rng, OUTI(R), &res->consumed[4 * s + 3]);
    }
#undef OUT
#undef OUTI
    if (st == TALLY_OK && (uint64_t)at > OUT_ELEMS) st = TALLY_OUT_OF_BOUNDS;
    if (st == TALLY_OK) st = tally_buffer_download(out, 0, res->bits, OUT_ELEMS * 4u);
    if (st != TALLY_OK) snprintf(why, why_size, "%s: %s", tally_status_name(st), tally_last_error(ctx));
    tally_buffer_release(in);
    tally_buffer_release(out);
    return st;
}

static program_out reference;

typedef struct worker {
    int id;
    int mismatches;
    tally_status st;
    char why[512];
    program_out res;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    tally_context *ctx = NULL;
    w->st = tally_context_create(tt_backend(), TALLY_DEVICE_DEFAULT, &ctx);
    if (w->st != TALLY_OK) {
        snprintf(w->why, sizeof w->why, "context: %s", tally_last_error(NULL));
        return NULL;
    }
    for (int round = 0; round < ROUNDS && w->st == TALLY_OK; round++) {
        memset(&w->res, 0, sizeof w->res);
        w->st = run_program(ctx, &w->res, w->why, sizeof w->why);
        if (w->st == TALLY_OK && memcmp(&w->res, &reference, sizeof reference) != 0) w->mismatches++;
    }
    tally_context_release(ctx);
    return NULL;
}

START_TEST(eight_contexts_same_bits)
{
    tt_fill_uniform(inputs, IN_ELEMS, 808, 0.01, 2.0); /* positive: valid probabilities, counts, variances */
    char why[512] = "";
    tally_context *ctx = tt_context();
    memset(&reference, 0, sizeof reference);
    tally_status st = run_program(ctx, &reference, why, sizeof why);
    ck_assert_msg(st == TALLY_OK, "single-threaded program: %s", why);
    tt_context_release();
    /* The reference itself must be a real result: poison left only past the end. */
    int written = 0;
    for (unsigned i = 0; i < OUT_ELEMS; i++) written += reference.bits[i] != TT_POISON;
    ck_assert_int_gt(written, 3 * 32 * 4096);

    static worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) workers[i] = (worker){.id = i};
    tt_run_threads(work, workers, sizeof workers[0], THREADS);
    for (int i = 0; i < THREADS; i++) {
        ck_assert_msg(workers[i].st == TALLY_OK, "thread %d: %s", i, workers[i].why);
        ck_assert_msg(workers[i].mismatches == 0, "thread %d: %d of %d rounds differ from the single-threaded bits",
                      i, workers[i].mismatches, ROUNDS);
    }
}
END_TEST

TT_SUITE("threads", {.name = "threads", .tests = {eight_contexts_same_bits}, .timeout = 600})
