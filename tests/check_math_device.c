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

/* Half the inputs are random bit patterns (every class of float: negative,
 * subnormal, infinite, NaN), half are spread over the function's main
 * domain, where its accuracy matters most. */
static void make_inputs(float *x, uint32_t fn, uint64_t seed)
{
    tt_rand r = tt_rand_seed(seed);
    double lo = 0.0, hi = 1.0;
    switch (fn) {
    case TALLY_K_MATH_EXP: lo = -104.0, hi = 89.0; break;
    case TALLY_K_MATH_LOG: lo = 0.0, hi = 4.0; break;
    case TALLY_K_MATH_LOG1P: lo = -1.0, hi = 3.0; break;
    case TALLY_K_MATH_LGAMMA: lo = 0.0, hi = 40.0; break;
    case TALLY_K_MATH_SQRT: lo = 0.0, hi = 1e6; break;
    case TALLY_K_MATH_RECIP: lo = -8.0, hi = 8.0; break;
    case TALLY_K_MATH_SINPI:
    case TALLY_K_MATH_COSPI: lo = -4.0, hi = 4.0; break;
    case TALLY_K_MATH_DIV: lo = -100.0, hi = 100.0; break;
    case TALLY_K_MATH_DIGAMMA: lo = 0.0, hi = 12.0; break;
    }
    for (uint32_t k = 0; k < COUNT; k++) {
        if (k & 1u)
            x[k] = tt_float((uint32_t)tt_rand_u64(&r));
        else
            x[k] = tt_rand_float(&r, lo, hi);
    }
}

static float host_eval(uint32_t fn, const float *x, uint32_t k)
{
    const float v = x[k];
    switch (fn) {
    case TALLY_K_MATH_EXP: return tally_expf(v);
    case TALLY_K_MATH_LOG: return tally_logf(v);
    case TALLY_K_MATH_LOG1P: return tally_log1pf(v);
    case TALLY_K_MATH_LGAMMA: return tally_lgammaf(v);
    case TALLY_K_MATH_SQRT: return tally_sqrtf(v);
    case TALLY_K_MATH_RECIP: return tally_recipf(v);
    case TALLY_K_MATH_SINPI: return tally_sinpif(v);
    case TALLY_K_MATH_COSPI: return tally_cospif(v);
    case TALLY_K_MATH_DIV: return tally_divf(v, x[COUNT - 1u - k]);
    case TALLY_K_MATH_DIGAMMA: return tally_digammaf(v);
    }
    return TALLY_F32_NAN;
}

static int same_bits(float a, float b)
{
    return tt_bits(a) == tt_bits(b) || (a != a && b != b);
}

static void check_function(uint32_t fn, const char *name)
{
    tally_context *ctx = tt_context();
    float *x = tt_alloc(COUNT * sizeof *x), *y = tt_alloc(COUNT * sizeof *y);
    make_inputs(x, fn, 0x5eed0000u + fn);
    tally_buffer *in = tt_upload(ctx, x, COUNT);
    tally_buffer *out = tt_buffer(ctx, COUNT);
    tt_poison(out);
    tt_assert_status(tally__gpu_math_eval(ctx, fn, in, out, COUNT), TALLY_OK, ctx);
    tt_read(out, 0, y, COUNT);
    uint32_t mismatches = 0, first = 0;
    for (uint32_t k = 0; k < COUNT; k++) {
        if (!same_bits(y[k], host_eval(fn, x, k))) {
            if (mismatches++ == 0) first = k;
        }
    }
    ck_assert_msg(mismatches == 0, "%s: %u of %u results differ from the host; first at x = %a (bits %08x): device %a, host %a",
                  name, mismatches, COUNT, (double)x[first], tt_bits(x[first]), (double)y[first],
                  (double)host_eval(fn, x, first));
    tally_buffer_release(in);
    tally_buffer_release(out);
    free(x);
    free(y);
}

START_TEST(exp_bits) { check_function(TALLY_K_MATH_EXP, "exp"); }
END_TEST
START_TEST(log_bits) { check_function(TALLY_K_MATH_LOG, "log"); }
END_TEST
START_TEST(log1p_bits) { check_function(TALLY_K_MATH_LOG1P, "log1p"); }
END_TEST
START_TEST(lgamma_bits) { check_function(TALLY_K_MATH_LGAMMA, "lgamma"); }
END_TEST
START_TEST(sqrt_bits) { check_function(TALLY_K_MATH_SQRT, "sqrt"); }
END_TEST
START_TEST(recip_bits) { check_function(TALLY_K_MATH_RECIP, "recip"); }
END_TEST
START_TEST(sinpi_bits) { check_function(TALLY_K_MATH_SINPI, "sinpi"); }
END_TEST
START_TEST(cospi_bits) { check_function(TALLY_K_MATH_COSPI, "cospi"); }
END_TEST
START_TEST(div_bits) { check_function(TALLY_K_MATH_DIV, "div"); }
END_TEST
START_TEST(digamma_bits) { check_function(TALLY_K_MATH_DIGAMMA, "digamma"); }
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
         {.name = "bits", TT_FIXTURE, .timeout = 600,
          .tests = {exp_bits, log_bits, log1p_bits, lgamma_bits, sqrt_bits, recip_bits, sinpi_bits, cospi_bits,
                    div_bits, digamma_bits, philox_stream_bits}})
