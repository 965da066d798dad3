/*
 * tests/check_math_device.c - tally's portable math functions and Philox
 * streams evaluated on a device (OpenCL or CUDA) must give the host's bits,
 * function by function, over 2^24 inputs each.
 *
 * The host's bits come from the same headers compiled here as C
 * (include/tally/portable_math.h, philox.h); the device's from the kernel
 * tally_k_math_eval and from tally_rng_fill. NaN results compare equal to any
 * NaN: the raw functions pass a NaN input through arithmetic, and the NaN
 * that arithmetic produces is the hardware's choice (the ops store one
 * canonical NaN; these raw functions do not).
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/gpu/gpu.h"
#include "kernels/abi.h"
#include "tally/philox.h"
#include "testutil.h"

const int tally_test_needs_backend = 1;

#define COUNT (1u << 24)

/* Each function: its kernel code, its main domain [lo, hi) and its host
 * form (one argument, or two: div takes x[k] and x[COUNT - 1 - k]). */
static const struct {
    uint32_t fn;
    const char *name;
    double lo, hi;
    float (*unary)(float x);
    float (*binary)(float a, float b);
} fns[] = {
    {TALLY_K_MATH_EXP, "exp", -104.0, 89.0, tally_expf, NULL},
    {TALLY_K_MATH_LOG, "log", 0.0, 4.0, tally_logf, NULL},
    {TALLY_K_MATH_LOG1P, "log1p", -1.0, 3.0, tally_log1pf, NULL},
    {TALLY_K_MATH_LGAMMA, "lgamma", 0.0, 40.0, tally_lgammaf, NULL},
    {TALLY_K_MATH_SQRT, "sqrt", 0.0, 1e6, tally_sqrtf, NULL},
    {TALLY_K_MATH_RECIP, "recip", -8.0, 8.0, tally_recipf, NULL},
    {TALLY_K_MATH_SINPI, "sinpi", -4.0, 4.0, tally_sinpif, NULL},
    {TALLY_K_MATH_COSPI, "cospi", -4.0, 4.0, tally_cospif, NULL},
    {TALLY_K_MATH_DIV, "div", -100.0, 100.0, NULL, tally_divf},
    {TALLY_K_MATH_DIGAMMA, "digamma", 0.0, 12.0, tally_digammaf, NULL},
};

static float host_eval(size_t f, const float *x, uint32_t k)
{
    return fns[f].unary != NULL ? fns[f].unary(x[k]) : fns[f].binary(x[k], x[COUNT - 1u - k]);
}

static int same_bits(float a, float b)
{
    return tt_bits(a) == tt_bits(b) || (a != a && b != b);
}

/* Half the inputs are random bit patterns (every class of float: negative,
 * subnormal, infinite, NaN), half are spread over the function's main
 * domain, where its accuracy matters most. */
START_TEST(function_bits)
{
    const size_t f = (size_t)_i;
    tally_context *ctx = tt_context();
    float *x = tt_alloc(COUNT * sizeof *x), *y = tt_alloc(COUNT * sizeof *y);
    tt_rand r = tt_rand_seed(0x5eed0000u + fns[f].fn);
    for (uint32_t k = 0; k < COUNT; k++)
        x[k] = (k & 1u) ? tt_float((uint32_t)tt_rand_u64(&r)) : tt_rand_float(&r, fns[f].lo, fns[f].hi);
    tally_buffer *in = tt_upload(ctx, x, COUNT);
    tally_buffer *out = tt_buffer(ctx, COUNT);
    tt_poison(out);
    tt_assert_status(tally__gpu_math_eval(ctx, fns[f].fn, in, out, COUNT), TALLY_OK, ctx);
    tt_read(out, 0, y, COUNT);
    uint32_t mismatches = 0, first = 0;
    for (uint32_t k = 0; k < COUNT; k++) {
        if (!same_bits(y[k], host_eval(f, x, k))) {
            if (mismatches++ == 0) first = k;
        }
    }
    ck_assert_msg(mismatches == 0, "%s: %u of %u results differ from the host; first at x = %a (bits %08x): device %a, host %a",
                  fns[f].name, mismatches, COUNT, (double)x[first], tt_bits(x[first]), (double)y[first],
                  (double)host_eval(f, x, first));
    tally_buffer_release(in);
    tally_buffer_release(out);
    free(x);
    free(y);
}
END_TEST

/* 2^24 raw, uniform and normal draws of one stream from an offset that is
 * not a multiple of 4, against the header evaluated on the host. */
START_TEST(philox_stream_bits)
{
    tally_context *ctx = tt_context();
    const tally_rng rng = {.seed = 0x0123456789abcdefull, .subsequence = 0xfedcba9876543210ull, .offset = 4097};
    uint32_t *got = tt_alloc(COUNT * sizeof *got);
    tally_buffer *out = tt_buffer(ctx, COUNT);
    const tally_distribution dists[] = {TALLY_DIST_RAW, TALLY_DIST_UNIFORM, TALLY_DIST_NORMAL};
    for (size_t d = 0; d < 3; d++) {
        tt_poison(out);
        tally_view v = dists[d] == TALLY_DIST_RAW ? tally_view_typed(out, TALLY_U32, 0, 1024, COUNT / 1024)
                                                  : tally_view_f32(out, 0, 1024, COUNT / 1024);
        tt_assert_status(tally_rng_fill(ctx, dists[d], rng, v, NULL), TALLY_OK, ctx);
        tt_read(out, 0, got, COUNT);
        uint32_t mismatches = 0;
        for (uint32_t k = 0; k < COUNT; k++) {
            const uint64_t i = rng.offset + k;
            uint32_t want;
            if (dists[d] == TALLY_DIST_RAW)
                want = tally_stream_raw(rng.seed, rng.subsequence, i);
            else if (dists[d] == TALLY_DIST_UNIFORM)
                want = tt_bits(tally_stream_uniform(rng.seed, rng.subsequence, i));
            else
                want = tt_bits(tally_stream_normal(rng.seed, rng.subsequence, i));
            mismatches += got[k] != want;
        }
        ck_assert_msg(mismatches == 0, "distribution %d: %u of %u draws differ from the host", (int)dists[d],
                      mismatches, COUNT);
    }
    tally_buffer_release(out);
    free(got);
}
END_TEST

TT_SUITE("math_device",
         {.name = "functions", TT_FIXTURE, .timeout = 600, .tests = {function_bits},
          .loops = (int)(sizeof fns / sizeof fns[0])},
         {.name = "philox", TT_FIXTURE, .timeout = 600, .tests = {philox_stream_bits}})
