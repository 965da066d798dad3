/*
 * tests/check_contraction.c - no backend may contract a*b + c into an fma.
 *
 * A fused multiply-add rounds once where tally's definition rounds twice,
 * so a backend compiled with contraction on (nvcc's default -fmad=true,
 * OpenCL's default FP_CONTRACT ON, gcc on aarch64) returns different bits.
 * Each test runs an op on the backend named by TALLY_TEST_BACKEND with
 * inputs for which the fused and the unfused evaluations differ, and
 * asserts the unfused bits. Every test also shows, in C here, that the fused
 * evaluation would give other bits, so a pass is never vacuous.
 *
 * This file is compiled with -ffp-contract=off (a project argument), so
 * every a*b + c written below rounds the product first.
 *
 * Two kinds of expectation:
 * - Hard-coded bits for ops made only of * and + (sum of squares), worked
 *   out once with this file's own unfused arithmetic and written down, so
 *   they do not depend on anything in the library.
 * - For ops whose terms use tally's portable exp/log/sinpi, the unfused
 *   evaluation of the shared definitions (include/tally/terms.h, compiled
 *   here as C with contraction off): these also catch contraction inside the
 *   portable math's own polynomials on a device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tally/terms.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

/* sumsq of a fresh 1 x n input. */
static float sumsq_of(const float *v, int64_t n)
{
    return tt_reduce_all(tt_context(), TALLY_SUMSQ, v, 1, n);
}

/*
 * sumsq of {a, b}: one lane computes a*a, then acc + b*b. Unfused:
 * round(round(a*a) + round(b*b)); fused: round(round(a*a) + b*b).
 *   {1.3f, 4.1f}: unfused 18.5 (0x41940000), fused 0x4193ffff.
 *   {3.7f, 0.9f}: unfused 14.5 (0x41680000), fused 0x41680001.
 */
START_TEST(sumsq_pairs)
{
    static const struct {
        float a, b;
        uint32_t unfused, fused;
    } cases[] = {{1.3f, 4.1f, 0x41940000u, 0x4193ffffu}, {3.7f, 0.9f, 0x41680000u, 0x41680001u}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float a = cases[i].a, b = cases[i].b;
        float aa = a * a;
        float unfused = aa + b * b;
        ck_assert_uint_eq(tt_bits(unfused), cases[i].unfused);
        ck_assert_uint_eq(tt_bits(fmaf(b, b, aa)), cases[i].fused);
        float v[2] = {a, b};
        tt_assert_bits(sumsq_of(v, 2), tt_float(cases[i].unfused), "sumsq {%.9g, %.9g}", (double)a, (double)b);
    }
}
END_TEST

/*
 * Eight elements: two lanes of one quad each (acc = x0^2, then three
 * acc + x^2), then one add of the lane partials.
 * {2.3, 2.3, 5.1, 5.1, 2.3, 1.9, 1.7, 1.1}: unfused 75.5999908
 * (0x42973332); with fused lanes 75.5999985 (0x42973333).
 */
START_TEST(sumsq_lanes)
{
    const float v[8] = {2.3f, 2.3f, 5.1f, 5.1f, 2.3f, 1.9f, 1.7f, 1.1f};
    float l0 = v[0] * v[0], l1 = v[4] * v[4], f0 = l0, f1 = l1;
    for (int i = 1; i < 4; i++) {
        l0 = l0 + v[i] * v[i];
        l1 = l1 + v[4 + i] * v[4 + i];
        f0 = fmaf(v[i], v[i], f0);
        f1 = fmaf(v[4 + i], v[4 + i], f1);
    }
    ck_assert_uint_eq(tt_bits(l0 + l1), 0x42973332u);
    ck_assert_uint_eq(tt_bits(f0 + f1), 0x42973333u);
    tt_assert_bits(sumsq_of(v, 8), tt_float(0x42973332u), "sumsq of eight");

    /* The same vector as rows of a by-row reduction, and repeated across
     * many tiles (so every lane of every tile has the pattern). */
    tally_context *ctx = tt_context();
    int64_t rows = 300, cols = 8;
    float *m = tt_alloc((size_t)(rows * cols) * 4);
    for (int64_t r = 0; r < rows; r++) memcpy(m + r * cols, v, sizeof v);
    tally_buffer *in = tt_upload(ctx, m, (size_t)(rows * cols)), *out = tt_buffer(ctx, (size_t)rows);
    tt_ok(tally_reduce(ctx, TALLY_SUMSQ, TALLY_AXIS_ROW, tally_view_f32(in, 0, rows, cols),
                       tally_view_f32(out, 0, rows, 1)),
          ctx);
    float *got = tt_alloc((size_t)rows * 4);
    tt_read(out, 0, got, (size_t)rows);
    for (int64_t r = 0; r < rows; r++) tt_assert_bits(got[r], tt_float(0x42973332u), "row %lld", (long long)r);
    free(m);
    free(got);
    tally_buffer_release(in);
    tally_buffer_release(out);
}
END_TEST

/* Pairs (x, t) whose two-term KL sum differs between term0 + t1*(log t1 - x1)
 * and fma(t1, log t1 - x1, term0); each is run as its own 1 x 2 sum. */
START_TEST(kl_sum_pairs)
{
    tally_context *ctx = tt_context();
    tally_buffer *in = tt_buffer(ctx, 2), *tg = tt_buffer(ctx, 2), *out = tt_buffer(ctx, 1);
    tt_rand r = tt_rand_seed(500);
    int differing = 0;
    for (int tries = 0; tries < 20000 && differing < 40; tries++) {
        float x[2] = {tt_rand_float(&r, -6.0, 0.0), tt_rand_float(&r, -6.0, 0.0)};
        float t[2] = {tt_rand_float(&r, 0.01, 1.0), tt_rand_float(&r, 0.01, 1.0)};
        float term0 = tally_kl_term(x[0], t[0], 0);
        float unfused = term0 + tally_kl_term(x[1], t[1], 0);
        float fused = fmaf(t[1], tally_logf(t[1]) - x[1], term0);
        if (tt_bits(unfused) == tt_bits(fused)) continue;
        differing++;
        tt_write(in, 0, x, 2);
        tt_write(tg, 0, t, 2);
        tt_ok(tally_kl_div(ctx, tally_view_f32(in, 0, 1, 2), tally_view_f32(tg, 0, 1, 2), TALLY_REDUCTION_SUM, 0,
                           tally_view_f32(out, 0, 1, 1)),
              ctx);
        tt_assert_bits(tt_read1(out, 0), unfused, "kl sum of (%a, %a), (%a, %a)", (double)x[0], (double)t[0],
                       (double)x[1], (double)t[1]);
    }
    ck_assert_int_eq(differing, 40);
    tally_buffer_release(in);
    tally_buffer_release(tg);
    tally_buffer_release(out);
}
END_TEST

/* Elementwise KL terms for every flag set equal the shared definition's
 * unfused bits (exp, log and the products inside them included). */
START_TEST(kl_terms)
{
    tally_context *ctx = tt_context();
    enum { N = 4096 };
    float *x = tt_alloc(N * 4), *t = tt_alloc(N * 4), *got = tt_alloc(N * 4);
    tally_buffer *out = tt_buffer(ctx, N);
    for (unsigned flags = 0; flags < 4; flags++) {
        tt_rand r = tt_rand_seed(600 + flags);
        for (int i = 0; i < N; i++) {
            x[i] = (flags & TALLY_KL_INPUT_IS_PROB) ? tt_rand_float(&r, 1e-6, 1.0) : tt_rand_float(&r, -9, 0);
            t[i] = (flags & TALLY_KL_LOG_TARGET) ? tt_rand_float(&r, -12, 0) : tt_rand_float(&r, 0, 1);
        }
        tally_buffer *bx = tt_upload(ctx, x, N), *bt = tt_upload(ctx, t, N);
        tt_poison(out);
        tt_ok(tally_kl_div(ctx, tally_view_f32(bx, 0, 64, 64), tally_view_f32(bt, 0, 64, 64), TALLY_REDUCTION_NONE,
                           flags, tally_view_f32(out, 0, 64, 64)),
              ctx);
        tt_read(out, 0, got, N);
        for (int i = 0; i < N; i++)
            tt_assert_bits(got[i], tally_kl_term(x[i], t[i], flags), "kl term %d, flags %u", i, flags);
        tally_buffer_release(bx);
        tally_buffer_release(bt);
    }
    free(x);
    free(t);
    free(got);
    tally_buffer_release(out);
}
END_TEST

/* The reparameterised sample z = mu + std * eps is the textbook a*b + c. */
START_TEST(gmm_sample_z)
{
    tally_context *ctx = tt_context();
    const int64_t B = 64, D = 16;
    float *mu = tt_alloc((size_t)(B * D) * 4), *lv = tt_alloc((size_t)(B * D) * 4), *z = tt_alloc((size_t)(B * D) * 4);
    tt_fill_normal(mu, (size_t)(B * D), 700, 0.0, 3.0);
    tt_fill_uniform(lv, (size_t)(B * D), 701, -4.0, 3.0);
    tally_buffer *bm = tt_upload(ctx, mu, (size_t)(B * D)), *bl = tt_upload(ctx, lv, (size_t)(B * D)),
                 *bz = tt_buffer(ctx, (size_t)(B * D)), *bq = tt_buffer(ctx, (size_t)B), *empty = NULL;
    tt_ok(tally_buffer_create(ctx, 0, &empty), ctx);
    tally_rng rng = {.seed = 31, .subsequence = 4, .offset = 8};
    tt_ok(tally_gmm_sample(ctx, tally_view_f32(bm, 0, B, D), tally_view_f32(bl, 0, B, D), tally_view_f32(empty, 0, 0, 0),
                           1, rng, tally_view_f32(bz, 0, B, D), tally_view_f32(bq, 0, B, 1), (tally_view){0}, NULL),
          ctx);
    tt_read(bz, 0, z, (size_t)(B * D));
    const uint64_t B4 = (uint64_t)(B + 3) / 4 * 4, D2 = (uint64_t)D + (uint64_t)(D & 1);
    int differing = 0;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t d = 0; d < D; d++) {
            float eps = tally_stream_normal(rng.seed, rng.subsequence, rng.offset + B4 + (uint64_t)b * D2 + (uint64_t)d);
            float sd = tally_gauss_std(lv[b * D + d]);
            float unfused = mu[b * D + d] + sd * eps;
            differing += tt_bits(unfused) != tt_bits(fmaf(sd, eps, mu[b * D + d]));
            tt_assert_bits(z[b * D + d], unfused, "z[%lld][%lld]", (long long)b, (long long)d);
        }
    }
    ck_assert_msg(differing > 0, "no element distinguishes fused from unfused");
    free(mu);
    free(lv);
    free(z);
    tally_buffer_release(bm);
    tally_buffer_release(bl);
    tally_buffer_release(bz);
    tally_buffer_release(bq);
    tally_buffer_release(empty);
}
END_TEST

/* log densities, logsumexp rows, DM rows and normal draws: each compared with
 * the shared definition evaluated here without contraction. */
START_TEST(transcendental_ops)
{
    tally_context *ctx = tt_context();
    /* gmm_log_prob, K = 1, D = 3: one lane folds the three terms in order. */
    enum { B = 128, D = 3, R = 256 };
    float z[B * D], mu[B * D], lv[B * D], out[R];
    tt_fill_normal(z, B * D, 800, 0.0, 2.0);
    tt_fill_normal(mu, B * D, 801, 0.0, 2.0);
    tt_fill_uniform(lv, B * D, 802, -3.0, 3.0);
    tally_buffer *bz = tt_upload(ctx, z, B * D), *bm = tt_upload(ctx, mu, B * D), *bl = tt_upload(ctx, lv, B * D),
                 *bo = tt_buffer(ctx, R), *empty = NULL;
    tt_ok(tally_buffer_create(ctx, 0, &empty), ctx);
    tt_ok(tally_gmm_log_prob(ctx, tally_view_f32(bz, 0, B, D), tally_view_f32(bm, 0, B, D), tally_view_f32(bl, 0, B, D),
                             tally_view_f32(empty, 0, 0, 0), 1, tally_view_f32(bo, 0, B, 1)),
          ctx);
    tt_read(bo, 0, out, B);
    for (int b = 0; b < B; b++) {
        float s = tally_gauss_term(z[b * D], mu[b * D], lv[b * D]);
        for (int d = 1; d < D; d++) s = s + tally_gauss_term(z[b * D + d], mu[b * D + d], lv[b * D + d]);
        tt_assert_bits(out[b], s, "gmm log_prob row %d", b);
    }

    /* logsumexp of rows of two: max, exp of the shifted values, log. */
    float x[R * 2];
    tt_fill_normal(x, R * 2, 803, 0.0, 5.0);
    tally_buffer *bx = tt_upload(ctx, x, R * 2);
    tt_ok(tally_reduce(ctx, TALLY_LOGSUMEXP, TALLY_AXIS_ROW, tally_view_f32(bx, 0, R, 2), tally_view_f32(bo, 0, R, 1)),
          ctx);
    tt_read(bo, 0, out, R);
    for (int r = 0; r < R; r++) {
        float m = tally_max_nan(x[2 * r], x[2 * r + 1]);
        float s = tally_expf(x[2 * r] - m) + tally_expf(x[2 * r + 1] - m);
        tt_assert_bits(out[r], tally_lse_finish(m, s), "logsumexp row %d", r);
    }

    /* Dirichlet-multinomial rows of two categories, with the coefficient. */
    float counts[R * 2], la[R * 2];
    tt_rand rr = tt_rand_seed(804);
    for (int i = 0; i < R * 2; i++) {
        counts[i] = (float)tt_rand_below(&rr, 20);
        la[i] = tt_rand_float(&rr, -2.0, 2.0);
    }
    tally_buffer *bc = tt_upload(ctx, counts, R * 2), *ba = tt_upload(ctx, la, R * 2);
    tt_ok(tally_dirichlet_multinomial(ctx, tally_view_f32(bc, 0, R, 2), tally_view_f32(ba, 0, R, 2),
                                      TALLY_REDUCTION_NONE, TALLY_DM_WITH_COEFFICIENT, tally_view_f32(bo, 0, R, 1)),
          ctx);
    tt_read(bo, 0, out, R);
    for (int r = 0; r < R; r++) {
        float a0 = tally_expf(la[2 * r]), a1 = tally_expf(la[2 * r + 1]);
        float A = a0 + a1, N = counts[2 * r] + counts[2 * r + 1];
        float S = tally_dm_term(counts[2 * r], a0, TALLY_DM_WITH_COEFFICIENT) +
                  tally_dm_term(counts[2 * r + 1], a1, TALLY_DM_WITH_COEFFICIENT);
        tt_assert_bits(out[r], tally_dm_row(A, N, S, TALLY_DM_WITH_COEFFICIENT), "dm row %d", r);
    }

    /* Normal draws: s * sinpi(t) after sqrt(-2 log u). */
    tt_ok(tally_rng_fill(ctx, TALLY_DIST_NORMAL, (tally_rng){.seed = 9, .subsequence = 8, .offset = 7},
                         tally_view_f32(bo, 0, 1, R), NULL),
          ctx);
    tt_read(bo, 0, out, R);
    for (int i = 0; i < R; i++) tt_assert_bits(out[i], tally_stream_normal(9, 8, 7 + (uint64_t)i), "normal %d", i);

    tally_buffer_release(bz);
    tally_buffer_release(bm);
    tally_buffer_release(bl);
    tally_buffer_release(bo);
    tally_buffer_release(bx);
    tally_buffer_release(bc);
    tally_buffer_release(ba);
    tally_buffer_release(empty);
}
END_TEST

TT_SUITE("contraction",
         {.name = "contraction", TT_FIXTURE, .timeout = 240,
          .tests = {sumsq_pairs, sumsq_lanes, kl_sum_pairs, kl_terms, gmm_sample_z, transcendental_ops}})
