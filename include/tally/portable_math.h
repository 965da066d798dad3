/*
 * tally/portable_math.h - single-precision math that gives the same bits in
 * C (host), CUDA and OpenCL C 1.2.
 *
 * Vendor libraries disagree: CUDA, PoCL (SLEEF), NVIDIA OpenCL and glibc
 * return different bits for expf, logf, lgammaf, and OpenCL may even round
 * '/' and sqrt to 2.5 and 3 ulp.  Every function here is therefore built
 * only from operations that IEEE 754 defines exactly and that every target
 * implements exactly: + - * on floats (uncontracted: the build turns FMA
 * contraction off everywhere), explicit tally_fma (correctly rounded),
 * tally_rint / tally_floor / tally_trunc, int <-> float conversions,
 * comparisons, selects, and bit casts.  There is no '/', no sqrt, no libm or
 * vendor built-in, no double precision, no recursion, and no table lookup
 * (a per-element index into a constant table serialises on GPUs).  Special
 * cases are selects rather than early returns, so a warp whose lanes hit
 * different cases does not diverge; tally_divf and tally_recipf alone
 * branch to a short path that ordinary operands take (whole warps at once
 * on real data) and that returns the general path's bits.
 *
 * Functions (all defined for every float input; accuracy measured against
 * glibc's double-precision functions rounded to float, see docs/accuracy.md):
 *   tally_expf(x)        <= 1 ulp; overflow to +inf, gradual underflow.
 *   tally_logf(x)        <= 1 ulp, subnormal inputs included.
 *   tally_log1pf(x)      <= 1 ulp.
 *   tally_lgammaf(x)     log|Gamma(x)| for x > 0 only: see its comment.
 *   tally_digammaf(x)    psi(x) for x > 0: about 1 ulp, 2.5 ulp on [1, 6), 2e-8 absolute
 *                        next to its root (docs/accuracy.md).
 *   tally_digammaf_shared(x)  tally_digammaf's bits through a branch, for
 *                        arguments a warp has on one side of 6.
 *   tally_sqrtf(x)       correctly rounded.
 *   tally_recipf(x)      1/x correctly rounded.
 *   tally_divf(a, b)     a/b correctly rounded, subnormal quotients included.
 *   tally_sinpif(x), tally_cospif(x), tally_sincospif(x, &s, &c)
 *                        sin(pi x) and cos(pi x), about 1 ulp for any
 *                        finite x; exact at integers and half-integers.
 *
 * NaN handling: a NaN input is returned unchanged (the same bits), and an
 * invalid operation (log of a negative number, 0/0, sin(pi*inf), ...)
 * returns the quiet NaN 0x7fc00000.  Neither comes from arithmetic on a NaN,
 * because hardware disagrees on which NaN bits such arithmetic produces
 * (x86 propagates an operand's payload, NVIDIA GPUs return 0x7fffffff).
 *
 * Polynomial coefficients come from tools/math/gen_math_coeffs.py (weighted
 * minimax fits, rounded to float one coefficient at a time with refitting);
 * each block below names the fit.  Constants are hexadecimal float literals
 * so that no compiler's decimal conversion can change a bit.
 *
 * Internal helpers are named tally_pm_* and are not part of the API.
 */
#ifndef TALLY_PORTABLE_MATH_H
#define TALLY_PORTABLE_MATH_H

#include "dialect.h"

/* Two floats: a logarithm as an unrounded pair hi + lo (about 40
 * significant bits), passed from the log core to lgamma, or sin and cos
 * returned together. */
typedef struct {
    float hi;
    float lo;
} tally_pm_f2;

/* ---------------------------------------------------------------------
 * Shared constants.
 * ------------------------------------------------------------------- */

/* ln 2 split for Cody-Waite style reduction.  TALLY_PM_LN2_HI is ln 2
 * truncated to 15 significant bits, so k * LN2_HI is exact for every
 * integer |k| <= 512 (15 + 9 bits <= 24); TALLY_PM_LN2_LO is the float
 * nearest to ln 2 - LN2_HI.  The pair is within 5.5e-14 of ln 2, which
 * even multiplied by 150 stays far below one float ulp. */
#define TALLY_PM_LN2_HI 0x1.62e4p-1f
#define TALLY_PM_LN2_LO 0x1.7f7d1cp-20f
/* 1/ln 2 rounded to float; only used to choose the integer k, so its
 * rounding error just moves the reduced argument by a few 1e-6. */
#define TALLY_PM_LOG2E 0x1.715476p+0f

/* c0 x^8 + c1 x^7 + ... + c8 by Horner's rule, one fma a step, highest
 * coefficient first (the order every polynomial here is evaluated in). */
TALLY_FN float tally_pm_horner9(float x, float c0, float c1, float c2, float c3, float c4, float c5, float c6, float c7,
                                float c8)
{
    float p = tally_fma(c0, x, c1);
    p = tally_fma(p, x, c2);
    p = tally_fma(p, x, c3);
    p = tally_fma(p, x, c4);
    p = tally_fma(p, x, c5);
    p = tally_fma(p, x, c6);
    p = tally_fma(p, x, c7);
    return tally_fma(p, x, c8);
}

/* 2^n as a float for integer n in [-126, 127] (normal range only). */
TALLY_FN float tally_pm_pow2i(tally_i32 n)
{
    return tally_as_f32((tally_u32)(n + 127) << 23);
}

/* ---------------------------------------------------------------------
 * exp
 * ------------------------------------------------------------------- */

/* e^x.  x = k ln2 + r with k = rint(x / ln2) and |r| <= ln2/2 (+1e-5);
 * e^r = 1 + r * P(r) with a degree-5 P; the result is scaled by 2^k as two
 * multiplications by 2^k1 and 2^k2 (k1 = floor(k/2), k2 = k - k1), so that
 * both factors are normal floats even when the result is subnormal or
 * infinite.  The first product p * 2^k1 is exact, so only the last
 * multiplication rounds: gradual underflow and overflow to +inf come out
 * correctly rounded from that single rounding.
 *
 * Cost (nvcc -arch=sm_90 PTX, constants folded): 25 instructions: 8 fma,
 * 3 mul, 1 rint, 1 float->int conversion, 8 integer add/sub/shift, and
 * min, max, compare, select for the clamp and NaN. */
/* e^r for x = k ln2 + r, given k as the float kf: the reduction of x and
 * the polynomial, shared by tally_expf and tally_pm_expf_normal. */
TALLY_FN float tally_pm_exp_reduced(float x, float kf)
{
    /* x - k*LN2_HI is exact (k*LN2_HI has <= 23 bits and is within a
     * factor 2 of x when k != 0); only the LN2_LO step rounds. */
    float r = tally_fma(kf, -TALLY_PM_LN2_HI, x);
    r = tally_fma(kf, -TALLY_PM_LN2_LO, r);

    /* P(r) ~ (e^r - 1)/r on |r| <= 0.3466: gen_math_coeffs.py fit_exp,
     * relative error of e^r 3.1e-9 before float evaluation. */
    float p = 0x1.6a5232p-10f;
    p = tally_fma(p, r, 0x1.12396cp-7f);
    p = tally_fma(p, r, 0x1.5558aap-5f);
    p = tally_fma(p, r, 0x1.555492p-3f);
    p = tally_fma(p, r, 0x1.fffffcp-2f);
    p = tally_fma(p, r, 1.0f);
    return tally_fma(p, r, 1.0f);
}

TALLY_FN float tally_expf(float x)
{
    /* Clamp so that k stays in [-150, 129]: e^-104 < 2^-150 rounds to 0 and
     * e^89 > 2^128 rounds to +inf, so the clamp changes no result, and it
     * keeps the float->int conversion defined (a NaN also lands on -104 and
     * is put back at the end). */
    float xc = (x > -104.0f) ? x : -104.0f;
    xc = (xc < 89.0f) ? xc : 89.0f;

    float kf = tally_rint(xc * TALLY_PM_LOG2E);
    const float p = tally_pm_exp_reduced(xc, kf);

    /* k1 = floor(k/2) through an unsigned shift (k + 256 > 0), avoiding the
     * implementation-defined right shift of a negative int. */
    tally_i32 k = (tally_i32)kf;
    tally_i32 k1 = (tally_i32)((tally_u32)(k + 256) >> 1) - 128;
    tally_i32 k2 = k - k1;
    float res = (p * tally_pm_pow2i(k1)) * tally_pm_pow2i(k2);
    return (x == x) ? res : x;
}

/* 1 when tally_pm_expf_normal(x) is tally_expf(x): -87 <= x <= 88 (a NaN
 * fails). Bitwise operators, so that a loop of tests vectorises. */
TALLY_FN int tally_pm_expf_normal_ok(float x)
{
    return (x >= -87.0f) & (x <= 88.0f);
}

/* tally_expf(x) for -87 <= x <= 88, where k = rint(x / ln 2) lies in
 * [-126, 127] so that 2^k is a normal float: one multiplication by 2^k
 * instead of two. Same bits: both ways round the exact product p 2^k once
 * (tally_expf's first scaling is exact), and inside this range the clamp
 * and the NaN select change nothing. Callers test the range first (the
 * softmax statistics of kernels/kl_logits.h, whose shifted arguments are
 * <= 0 and rarely below -87). */
TALLY_FN float tally_pm_expf_normal(float x)
{
    /* rint without a rounding or conversion instruction (quarter-rate on
     * GPUs): adding 1.5 * 2^23 to |v| <= 130 rounds v to an integer, to
     * nearest even as rint does, and leaves it in the low mantissa bits of
     * a float of exponent 23, so the same addition gives k as an integer
     * too. Exact: 1.5 * 2^23 + v is a float of that exponent for every
     * |v| < 2^22, and subtracting 1.5 * 2^23 back is exact. */
    const float magic = 0x1.8p23f;
    const float shifted = x * TALLY_PM_LOG2E + magic;
    const float kf = shifted - magic;
    /* 2^k = tally_pm_pow2i(k) without forming k: bits(shifted) is
     * bits(magic) + k = 0x4b400000 + k, and 0x4b400000 << 23 is 0 modulo
     * 2^32, so (k + 127) << 23 is (bits(shifted) << 23) + (127 << 23) in
     * unsigned arithmetic: one shift-and-add. */
    const float scale = tally_as_f32((tally_as_u32(shifted) << 23) + 0x3f800000u);
    return tally_pm_exp_reduced(x, kf) * scale;
}

/* tally_expf(x), through tally_pm_expf_normal wherever that gives its bits
 * (-87 <= x <= 88): fewer instructions behind a branch. For GPU kernels
 * whose arguments all but always lie in that range, so that a warp takes
 * the branch together (the mixture's exp(-lv/2) and exp(lv/2)). Loops that
 * a CPU compiler should vectorise keep tally_expf: there a branch costs
 * both paths. */
TALLY_FN float tally_expf_split(float x)
{
    if (tally_pm_expf_normal_ok(x)) return tally_pm_expf_normal(x);
    return tally_expf(x);
}

/* ---------------------------------------------------------------------
 * log (shared core)
 * ------------------------------------------------------------------- */

/* Q(f) ~ (log(1+f) - f)/f^2 on |f| <= 1/3: gen_math_coeffs.py fit_log
 * (degree 8), relative error of log(1+f) 4.6e-9 before float evaluation.
 * Degree 7 (2.6e-8) saves one fma but measured 1.11 ulp worst case (with
 * an earlier arrangement of the final sums) against 0.93 with this one, and
 * an error below one ulp is what guarantees that every result is one of
 * the two floats around the true value. */
TALLY_FN float tally_pm_log_q(float f)
{
    return tally_pm_horner9(f, -0x1.07c964p-3f, 0x1.1e678cp-3f, -0x1.f332a6p-4f, 0x1.1ed662p-3f, -0x1.559c46p-3f,
                            0x1.99d044p-3f, -0x1.fffefcp-3f, 0x1.555506p-2f, -0.5f);
}

/* Splits a positive normal float xs as 2^e * m with m in [2/3, 4/3), by
 * subtracting the bit pattern of 2/3 before splitting exponent and
 * mantissa, so that f = m - 1 is exact and |f| <= 1/3.  t = u - bits(2/3)
 * + (128 << 23) stays positive for any positive xs; bits(2/3) = 0x3f2aaaab
 * and 0x00d55555 = 0x40000000 - 0x3f2aaaab.  Returns f; *e gets e. */
TALLY_FN float tally_pm_log_split(float xs, tally_i32 *e)
{
    tally_u32 t = tally_as_u32(xs) + 0x00d55555u;
    *e = (tally_i32)(t >> 23) - 128;
    return tally_as_f32((t & 0x007fffffu) + 0x3f2aaaabu) - 1.0f;
}

/* ln 2 as RN(ln 2) + RN(ln 2 - RN(ln 2)) for the final fma of log and
 * log1p, where e*LN2 is formed exactly inside the fma. */
#define TALLY_PM_LN2 0x1.62e43p-1f
#define TALLY_PM_LN2_TAIL -0x1.05c61p-29f

/* log(2^e * (1+f)) as hi + lo, not rounded to one float, for lgamma, which
 * needs the logarithm to more than float precision.  (Normal xs only; eadj
 * lowers the exponent of a prescaled subnormal.)  log = e ln2 + f +
 * f^2 Q(f); e*LN2_HI is exact, and its sum with f is formed with Fast2Sum
 * (|e*LN2_HI| >= 0.69 > 1/3 >= |f| whenever e != 0), so hi + lo carries
 * the logarithm with an error near 2^-30 relative. */
TALLY_FN tally_pm_f2 tally_pm_log_core(float xs, tally_i32 eadj)
{
    tally_i32 e;
    float f = tally_pm_log_split(xs, &e);
    float ef = (float)(e - eadj);
    float q = tally_pm_log_q(f);
    float a = ef * TALLY_PM_LN2_HI;           /* exact */
    float s = a + f;
    float err = f - (s - a);                   /* Fast2Sum: s + err = a + f */
    float lo = tally_fma(ef, TALLY_PM_LN2_LO, err);
    lo = tally_fma(f * f, q, lo);
    tally_pm_f2 res;
    res.hi = s;
    res.lo = lo;
    return res;
}

/* log of a positive finite float (subnormals included), as hi + lo.
 * Subnormals are scaled by 2^23 first so the bit split sees a normal. */
TALLY_FN tally_pm_f2 tally_pm_log_parts(float x)
{
    int sub = x < 0x1p-126f;
    float xs = sub ? x * 0x1p23f : x;
    return tally_pm_log_core(xs, sub ? 23 : 0);
}

/* tally_logf's two steps after the split xs = 2^e (1 + f): the mantissa's
 * part v = f + f^2 Q(f), rounded once (f is exact), and then e ln2 added to
 * v by two fmas whose products are exact.  v depends on the mantissa bits
 * of xs alone, which lets kernels on bf16 inputs look it up
 * (tally_pm_log_bf16_entry below). */
TALLY_FN float tally_pm_log_mantissa(float f)
{
    return tally_fma(f * f, tally_pm_log_q(f), f);
}

TALLY_FN float tally_pm_log_join(float ef, float v)
{
    return tally_fma(ef, TALLY_PM_LN2, tally_fma(ef, TALLY_PM_LN2_TAIL, v));
}

/* tally_logf's arithmetic for a positive normal float xs, the argument
 * scaled by 2^eadj (eadj = 23 for a prescaled subnormal, else 0): the
 * logarithm of xs 2^-eadj with none of tally_logf's special-value selects.
 * Hot loops whose arguments are known (or tested) to be positive normal
 * floats call tally_pm_logf_normal below and get tally_logf's bits for
 * fewer instructions. */
TALLY_FN float tally_pm_logf_scaled(float xs, tally_i32 eadj)
{
    tally_i32 e;
    float f = tally_pm_log_split(xs, &e);
    return tally_pm_log_join((float)(e - eadj), tally_pm_log_mantissa(f));
}

/* tally_logf(x) for positive normal finite x (2^-126 <= x <= FLT_MAX)
 * only, bit for bit; any other x gives a meaningless value. */
TALLY_FN float tally_pm_logf_normal(float x)
{
    return tally_pm_logf_scaled(x, 0);
}

/* A positive normal float whose low 16 bits are zero (every positive
 * normal bf16 value widened) has one of 128 mantissas, m << 16 for m <
 * 128, and tally_pm_log_split's f depends on the mantissa bits alone (the
 * exponent only moves e), so tally_pm_log_mantissa(f) is one of 128
 * values.  tally_pm_log_bf16_entry(m) is that value for mantissa m, and
 * tally_pm_logf_bf16(x, v) with v = tally_pm_log_bf16_entry((bits(x) >> 16)
 * & 0x7f) performs the rest of tally_pm_logf_normal(x): the same operations
 * on the same values, so the same bits (tests/check_terms.c checks every
 * positive normal bf16 value).  A kernel keeps the 128 entries in local
 * memory, and a logarithm then costs one lookup, an integer add and shift,
 * one conversion and two fmas, where the whole arithmetic takes eleven
 * fmas and the split. */
TALLY_FN float tally_pm_log_bf16_entry(tally_u32 m)
{
    tally_i32 e;
    return tally_pm_log_mantissa(tally_pm_log_split(tally_as_f32(0x3f800000u | (m << 16)), &e));
}

TALLY_FN float tally_pm_logf_bf16(float x, float v)
{
    /* tally_pm_log_split's exponent, without its mantissa. */
    const tally_u32 t = tally_as_u32(x) + 0x00d55555u;
    return tally_pm_log_join((float)((tally_i32)(t >> 23) - 128), v);
}

/* The same logarithm split at the bf16 value's low byte b = h & 0xff (the
 * exponent's lowest bit above the seven mantissa bits), for kernels that
 * look up both parts by that byte. tally_pm_logf_bf16's exponent of h
 * (positive normal) is ((h + 0xd5) >> 7) - 128, and with h = 256 E + b
 * that is 2 E + (((b + 0xd5) >> 7) - 128): the upper seven exponent bits E
 * add linearly, and the rest depends on b alone.
 * tally_pm_log_bf16_bias(b) is that rest less 98304, and
 * tally_pm_logf_bf16_parts(base, v, bias) with base the float 0x4b400000 |
 * (h & 0xff00), that is 12582912 + 256 E, forms e by one fma: base times
 * 1/128 is 98304 + 2 E, plus the bias is e, every step exact (integers
 * below 2^24, a power-of-two scaling). With v = tally_pm_log_bf16_entry(b
 * & 0x7f), the join then gets the operands of tally_pm_logf_bf16: the same
 * bits (tests/check_terms.c checks every positive normal bf16 value). */
TALLY_FN float tally_pm_log_bf16_bias(tally_u32 b)
{
    return (float)((tally_i32)((b + 0xd5u) >> 7) - 128) - 98304.0f;
}

TALLY_FN float tally_pm_logf_bf16_parts(float base, float v, float bias)
{
    return tally_pm_log_join(tally_fma(base, 0.0078125f, bias), v);
}

/* Natural logarithm, within one ulp (0.93 ulp worst case over every
 * float).  log x = e ln2 + f + f^2 Q(f): v = f + f^2 Q(f) is rounded once
 * (f is exact), and e ln2 is added by two fmas whose products are exact.
 * For e = 0 the result is v itself; for e != 0 the rounding of v is at
 * most half an ulp of the result, which leaves the total below one ulp
 * (checked exhaustively for every e where it could matter).
 * log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.
 * Cost (nvcc -arch=sm_90 PTX, constants folded): 31 instructions: 11 fma,
 * 2 mul, 1 add, 1 int->float conversion, 6 integer ops, and 10
 * compares/selects (subnormal scaling, special values). */
TALLY_FN float tally_logf(float x)
{
    /* Subnormals are scaled by 2^23 first so the bit split sees a normal. */
    int sub = x < 0x1p-126f;
    float r = tally_pm_logf_scaled(sub ? x * 0x1p23f : x, sub ? 23 : 0);
    /* (bits - 1) < 0x7f7fffff exactly for positive finite nonzero x. */
    int ok = (tally_as_u32(x) - 1u) < 0x7f7fffffu;
    r = ok ? r : x;                            /* +inf, NaN */
    r = (x < 0.0f) ? TALLY_F32_NAN : r;
    return (x == 0.0f) ? TALLY_F32_NEG_INF : r;
}

/* log(1 + x).  s = 1 + x is formed with TwoSum, so its rounding error c is
 * known exactly; log(1+x) = log(s) + log(1 + c/s), and with s = 2^e m,
 * c/s = d/m = d/(1+f) for d = c 2^-e (|d| <= 2^-24), which is added to
 * the low part as d (1 - f + f^2).  Within one ulp.
 * For tiny x this returns x exactly.  log1p(-1) = -inf, x < -1 -> NaN,
 * +inf -> +inf, +-0 -> +-0. */
TALLY_FN float tally_log1pf(float x)
{
    float s = 1.0f + x;
    float bv = s - 1.0f;
    float av = s - bv;
    float c = (1.0f - av) + (x - bv);          /* TwoSum: s + c = 1 + x */
    /* s >= 2^-24 is normal whenever positive, so no subnormal scaling. */
    tally_i32 e;
    float f = tally_pm_log_split(s, &e);
    float ef = (float)e;
    /* 2^-e, with e capped at 126 (beyond it c/s < 2^-150 is irrelevant). */
    float d = c * tally_pm_pow2i(-((e < 126) ? e : 126));
    /* d/m = d/(1+f) ~ d (1 + f (f - 1)) = d (1 - f + f^2); the neglected
     * d f^3 is below 0.05 ulp (the first-order d (1 - f) measured 1.03 ulp
     * worst case for log1p, against 0.96 with this). */
    float dc = tally_fma(d, tally_fma(f, f, -f), d);
    /* As in tally_logf, with the small correction dc joining f^2 Q(f) so
     * that f + (...) is still the only rounding of the size of f. */
    float v = f + tally_fma(f * f, tally_pm_log_q(f), dc);
    float r = tally_fma(ef, TALLY_PM_LN2, tally_fma(ef, TALLY_PM_LN2_TAIL, v));
    int ok = (x > -1.0f) & (x < TALLY_F32_INF) & (x != 0.0f);
    r = ok ? r : x;                            /* +-0, +inf, NaN */
    r = (x < -1.0f) ? TALLY_F32_NAN : r;
    return (x == -1.0f) ? TALLY_F32_NEG_INF : r;
}

/* ---------------------------------------------------------------------
 * sqrt
 * ------------------------------------------------------------------- */

/* Correctly rounded square root.  A bit-trick seed for 1/sqrt and two
 * Newton steps give ~4.5e-6; one step on the square root itself (with the
 * exact residual xs - s*s from fma) gives a result within one ulp; then the
 * exact residual decides between s - ulp, s and s + ulp against the
 * midpoints (s -+ ulp/2)^2.  The residual and s*ulp are both multiples of
 * ulp^2, so the comparisons are exact, and a square root is never exactly a
 * midpoint, so there are no ties.  sqrt(-0) = -0, sqrt(x < 0) = NaN,
 * sqrt(+inf) = +inf.
 *
 * tally_pm_sqrt_core is the part for a finite xs >= 2^-100, where no
 * scaling is needed; tally_sqrtf wraps it with the scaling and the special
 * values. */
TALLY_FN float tally_pm_sqrt_core(float xs)
{
#if TALLY_HW_DIV_SQRT
    /* For such xs both are RN(sqrt(xs)) (tally/dialect.h); on any other xs
     * the callers' selects drop what this returns. */
    return tally_hw_sqrtf(xs);
#else
    /* Seed: the classic 0x5f3759df estimate, relative error < 3.5%. */
    float y = tally_as_f32(0x5f3759dfu - (tally_as_u32(xs) >> 1));
    float h = 0.5f * xs;
    float e = tally_fma(-(h * y), y, 0.5f);    /* 1/2 - x y^2 / 2 */
    y = tally_fma(y, e, y);
    e = tally_fma(-(h * y), y, 0.5f);
    y = tally_fma(y, e, y);
    float s = xs * y;
    float d = tally_fma(-s, s, xs);
    s = tally_fma(d, 0.5f * y, s);

    /* Rounding check.  u = ulp(s); below a power of two the spacing is
     * u/2, so the lower midpoint there is s - u/4. */
    tally_u32 sb = tally_as_u32(s);
    float u = tally_as_f32(sb & 0x7f800000u) * 0x1p-23f;
    float su = s * u;                          /* exact */
    d = tally_fma(-s, s, xs);                  /* exact */
    float lim_lo = ((sb & 0x007fffffu) == 0u) ? -0.5f * su : -su;
    sb = (d > su) ? sb + 1u : ((d <= lim_lo) ? sb - 1u : sb);
    return tally_as_f32(sb);
#endif
}

/* tally_sqrtf(x) for finite x >= 2^-100 only, bit for bit (there
 * tally_sqrtf scales nothing and selects nothing). */
TALLY_FN float tally_pm_sqrtf_normal(float x)
{
    return tally_pm_sqrt_core(x);
}

TALLY_FN float tally_sqrtf(float x)
{
    /* Below 2^-100 the residual checked at the end (a multiple of ulp^2,
     * about x 2^-46) would fall under the normal range and round, so such x
     * (subnormals included) are scaled by 2^52 first and the root by 2^-26,
     * both exactly. */
    int tiny = x < 0x1p-100f;
    float xs = tiny ? x * 0x1p52f : x;
    float back = tiny ? 0x1p-26f : 1.0f;
    float r = tally_pm_sqrt_core(xs) * back;

    int ok = (x > 0.0f) & (x < TALLY_F32_INF);
    r = ok ? r : x;                            /* +-0, +inf, NaN */
    return (x < 0.0f) ? TALLY_F32_NAN : r;
}

/* ---------------------------------------------------------------------
 * reciprocal and division
 * ------------------------------------------------------------------- */

/* RN(1/m) for m in [1, 2).  Linear seed 24/17 - 8/17 m (relative error
 * <= 1/17, the minimax line), three Newton steps y += y (1 - m y) take it
 * to ~1e-10 before rounding, and a fourth step with the exact residual
 * (Markstein's final step) rounds it correctly but for one m, patched by a
 * select; tools/math/math_accuracy.c checks all 2^32 reciprocals, which covers
 * every m. */
TALLY_FN float tally_pm_recip_core(float m)
{
#if TALLY_HW_DIV_SQRT
    /* RN(1/m), as below for every m in [1, 2) (tally/dialect.h). */
    return tally_hw_recipf(m);
#else
    float y = tally_fma(m, -0x1.e1e1e2p-2f, 0x1.69696ap+0f);
    float e = tally_fma(-m, y, 1.0f);
    y = tally_fma(y, e, y);
    e = tally_fma(-m, y, 1.0f);
    y = tally_fma(y, e, y);
    e = tally_fma(-m, y, 1.0f);
    y = tally_fma(y, e, y);
    e = tally_fma(-m, y, 1.0f);
    y = tally_fma(y, e, y);
    /* Markstein's step is known to fail for exactly one mantissa, all ones
     * (m = 2 - 2^-23): 1/m = 1/2 + 2^-25 + 2^-49 + ... lies just above the
     * midpoint and the step returns 1/2.  The exhaustive check finds no
     * other case. */
    return (m == 0x1.fffffep+0f) ? 0x1.000002p-1f : y;
#endif
}

/* RN(q 2^k) with the sign bit `sign` attached, where q in (1/2, 2) is the
 * correctly rounded quotient of two mantissas and r the exact remainder,
 * whose sign tells on which side of q the true quotient lies.
 *
 * q is scaled as (q 2^k1) 2^k2 with an exact first product, so a normal or
 * overflowing result is correctly rounded by the second product alone.  A
 * subnormal result is rounded a second time, which goes wrong only when
 * q 2^k lies exactly halfway between two subnormals while the true quotient
 * does not (r != 0); that case is detected exactly and moved one step in
 * the direction of r. */
TALLY_FN float tally_pm_scale_rn(float q, float r, tally_i32 k, tally_u32 sign)
{
    /* q < 2, so k <= -152 always rounds to 0 and k >= 129 always overflows;
     * clamping to [-160, 190] keeps both factors normal. */
    k = (k < -160) ? -160 : ((k > 190) ? 190 : k);
    tally_i32 k2 = (k < -100) ? -64 : ((k > 100) ? 64 : 0);
    float t1 = q * tally_pm_pow2i(k - k2);     /* exact */
    float res = t1 * tally_pm_pow2i(k2);
    /* back is res at t1's scale (exact), d = t1 - back is exact, and
     * |d| = 2^-86 is exactly half a subnormal step at that scale (k2 = -64),
     * i.e. t1 was a tie. */
    float back = res * tally_pm_pow2i(-k2);
    float d = t1 - back;
    int tie = (k2 == -64) & ((d == 0x1p-86f) | (d == -0x1p-86f)) & (r != 0.0f);
    tally_u32 rb = tally_as_u32(res);
    rb = (tie & ((r > 0.0f) == (d > 0.0f))) ? ((d > 0.0f) ? rb + 1u : rb - 1u) : rb;
    return tally_as_f32(rb | sign);
}

/* a / b correctly rounded (IEEE round to nearest even) for every input,
 * subnormal operands and quotients included.
 *
 * |a| and |b| are normalised to mantissas ma, mb in [1, 2) with exponent
 * difference k.  y = RN(1/mb); q = RN(ma y) is then corrected twice with
 * the exact remainder r = ma - mb q (fma): the first correction makes q
 * faithful, the second is Markstein's step, which returns RN(ma/mb) when
 * y = RN(1/mb) and q is faithful.  tally_pm_scale_rn applies 2^k.
 *
 * Specials follow IEEE: NaN operands propagate (a first), 0/0 and inf/inf
 * give NaN, x/0 = +-inf, x/inf = +-0, with the sign the XOR of the signs.
 *
 * tally_divf tries tally_pm_divf_normal first: where both operands are
 * normal and finite and their exponents differ by at most 100, the
 * quotient is a normal float and tally_pm_scale_rn's result is q 2^k
 * exactly (k2 = 0, no tie), so the short path returns the same bits for
 * about a third of the instructions. On a GPU a warp whose lanes all take
 * it skips the general path. */
TALLY_FN float tally_pm_divf_general(float a, float b)
{
    tally_u32 ua = tally_as_u32(a);
    tally_u32 ub = tally_as_u32(b);
    tally_u32 sign = (ua ^ ub) & 0x80000000u;
    float aa = tally_as_f32(ua & 0x7fffffffu);
    float ab = tally_as_f32(ub & 0x7fffffffu);
    int suba = aa < 0x1p-126f;
    int subb = ab < 0x1p-126f;
    tally_u32 va = tally_as_u32(suba ? aa * 0x1p24f : aa);
    tally_u32 vb = tally_as_u32(subb ? ab * 0x1p24f : ab);
    tally_i32 k = ((tally_i32)(va >> 23) - (suba ? 24 : 0))
                - ((tally_i32)(vb >> 23) - (subb ? 24 : 0));
    float ma = tally_as_f32((va & 0x007fffffu) | 0x3f800000u);
    float mb = tally_as_f32((vb & 0x007fffffu) | 0x3f800000u);

    float y = tally_pm_recip_core(mb);
    float q = ma * y;
    float r = tally_fma(-mb, q, ma);
    q = tally_fma(r, y, q);
    r = tally_fma(-mb, q, ma);
    q = tally_fma(r, y, q);
    r = tally_fma(-mb, q, ma);                 /* sign: where the truth is */
    float res = tally_pm_scale_rn(q, r, k, sign);

    int azero = aa == 0.0f;
    int bzero = ab == 0.0f;
    int ainf = aa == TALLY_F32_INF;
    int binf = ab == TALLY_F32_INF;
    res = (azero | binf) ? tally_as_f32(sign) : res;
    res = (ainf | bzero) ? tally_as_f32(sign | 0x7f800000u) : res;
    res = ((azero & bzero) | (ainf & binf)) ? TALLY_F32_NAN : res;
    res = (b != b) ? b : res;
    res = (a != a) ? a : res;
    return res;
}

/* 1 when tally_pm_divf_normal(a, b) is a / b: both operands normal and
 * finite (biased exponents 1 .. 254), exponents at most 100 apart. */
TALLY_FN int tally_pm_divf_normal_ok(float a, float b)
{
    const tally_u32 ea = (tally_as_u32(a) >> 23) & 0xffu;
    const tally_u32 eb = (tally_as_u32(b) >> 23) & 0xffu;
    const tally_i32 k = (tally_i32)ea - (tally_i32)eb;
    return (ea - 1u < 254u) & (eb - 1u < 254u) & (k >= -100) & (k <= 100);
}

/* a / b where tally_pm_divf_normal_ok(a, b): the general path's steps with
 * no subnormal scaling, no special values and an exact final scaling by 2^k
 * (q is in [0.5, 2), so q 2^k is normal for |k| <= 100). */
TALLY_FN float tally_pm_divf_normal(float a, float b)
{
#if TALLY_HW_DIV_SQRT
    /* Here the quotient is a normal float, and both are RN(a / b). */
    return tally_hw_divf(a, b);
#else
    const tally_u32 ua = tally_as_u32(a);
    const tally_u32 ub = tally_as_u32(b);
    const tally_i32 k = (tally_i32)((ua >> 23) & 0xffu) - (tally_i32)((ub >> 23) & 0xffu);
    const float ma = tally_as_f32((ua & 0x007fffffu) | 0x3f800000u);
    const float mb = tally_as_f32((ub & 0x007fffffu) | 0x3f800000u);
    const float y = tally_pm_recip_core(mb);
    float q = ma * y;
    float r = tally_fma(-mb, q, ma);
    q = tally_fma(r, y, q);
    r = tally_fma(-mb, q, ma);
    q = tally_fma(r, y, q);
    return tally_as_f32(tally_as_u32(q * tally_pm_pow2i(k)) | ((ua ^ ub) & 0x80000000u));
#endif
}

TALLY_FN float tally_divf(float a, float b)
{
    if (tally_pm_divf_normal_ok(a, b)) return tally_pm_divf_normal(a, b);
    return tally_pm_divf_general(a, b);
}

/* 1/x correctly rounded, including subnormal and overflowing results;
 * 1/+-0 = +-inf, 1/+-inf = +-0, NaN -> the same NaN.  The same steps as
 * tally_divf with a = 1, where y = RN(1/m) already is the rounded quotient
 * of the mantissas and only its remainder is needed. tally_recipf takes a
 * short path where the biased exponent e of x is 27 .. 227: then
 * k = 127 - e is within [-100, 100], y 2^k is normal and exact, and
 * tally_pm_scale_rn returns exactly that (as for tally_divf). */
TALLY_FN float tally_pm_recipf_general(float x)
{
    tally_u32 ux = tally_as_u32(x);
    tally_u32 sign = ux & 0x80000000u;
    float ax = tally_as_f32(ux & 0x7fffffffu);
    int sub = ax < 0x1p-126f;
    tally_u32 v = tally_as_u32(sub ? ax * 0x1p24f : ax);
    tally_i32 k = 127 - ((tally_i32)(v >> 23) - (sub ? 24 : 0));
    float m = tally_as_f32((v & 0x007fffffu) | 0x3f800000u);
    float y = tally_pm_recip_core(m);
    float r = tally_fma(-m, y, 1.0f);
    float res = tally_pm_scale_rn(y, r, k, sign);
    res = (ax == TALLY_F32_INF) ? tally_as_f32(sign) : res;
    res = (ax == 0.0f) ? tally_as_f32(sign | 0x7f800000u) : res;
    return (x != x) ? x : res;
}

TALLY_FN float tally_recipf(float x)
{
    const tally_u32 ux = tally_as_u32(x);
    const tally_u32 e = (ux >> 23) & 0xffu;
    if (e - 27u <= 200u) {
#if TALLY_HW_DIV_SQRT
        return tally_hw_recipf(x); /* a normal result: RN(1/x) either way */
#else
        const float m = tally_as_f32((ux & 0x007fffffu) | 0x3f800000u);
        const float y = tally_pm_recip_core(m);
        return tally_as_f32(tally_as_u32(y * tally_pm_pow2i(127 - (tally_i32)e)) | (ux & 0x80000000u));
#endif
    }
    return tally_pm_recipf_general(x);
}

/* ---------------------------------------------------------------------
 * sin(pi x), cos(pi x)
 * ------------------------------------------------------------------- */

/* Both at once.  j = rint(2x) and t = x - j/2 in [-1/4, 1/4] are exact for
 * |x| < 2^24 (2x is exact and t is a multiple of ulp(x) no larger than x);
 * from 2^24 on every float is an even integer, where sin(pi x) = +-0 and
 * cos(pi x) = 1, so such x are replaced by 0.  sin(pi t) = t S(t^2) with
 * S's leading coefficient pi kept as a float pair, cos(pi t) = C(t^2), and
 * the quadrant j mod 4 picks and signs them.  Zeros follow IEEE 754-2019:
 * sinpi(+-n) = +-0, cospi(n + 1/2) = +0.  Infinities give NaN.
 *
 * tally_pm_sincospi_reduced does the work for a finite |xr| < 2^24, with
 * `sign` (0 or 0x80000000) the sign bit of x that a zero sine takes; for
 * such x, tally_pm_sincospi_reduced(x, sign bit of x) is tally_pm_sincospi(x)
 * bit for bit, without the range and special-value selects. */
TALLY_FN tally_pm_f2 tally_pm_sincospi_reduced(float xr, tally_u32 sign)
{
    float j = tally_rint(xr + xr);
    float t = xr - 0.5f * j;                   /* exact */
    tally_i32 qd = (tally_i32)j;
    float u = t * t;

    /* sin(pi t) = t (PI_HI + PI_LO + s1 u + s2 u^2 + s3 u^3) for
     * |t| <= 1/4: gen_math_coeffs.py fit_sincospi, relative error 4.0e-9;
     * PI_HI = RN(pi) and PI_LO = RN(pi - PI_HI). */
    float v = tally_fma(-0x1.2db5a6p-1f, u, 0x1.465facp+1f);
    v = tally_fma(v, u, -0x1.4abbbep+2f);
    v = tally_fma(v, u, -0x1.777a5cp-24f);
    float sn = tally_fma(t, 0x1.921fb6p+1f, t * v);
    /* cos(pi t) = 1 + c1 u + ... + c4 u^4: same script, relative error
     * 4.4e-10; the constant term is exactly 1 so cos is exact at t = 0. */
    float cs = tally_fma(0x1.d4f7eep-3f, u, -0x1.55b2b6p+0f);
    cs = tally_fma(cs, u, 0x1.03c1bp+2f);
    cs = tally_fma(cs, u, -0x1.3bd3ccp+2f);
    cs = tally_fma(cs, u, 1.0f);

    int odd = (qd & 1) != 0;
    float a = odd ? cs : sn;
    float b = odd ? sn : cs;
    a = ((qd & 2) != 0) ? -a : a;
    b = (((qd + 1) & 2) != 0) ? -b : b;
    /* Zero signs: sin gets the sign of x, cos is +0. */
    a = (a == 0.0f) ? tally_as_f32(sign) : a;
    b = b + 0.0f;
    tally_pm_f2 res;
    res.hi = a;
    res.lo = b;
    return res;
}

TALLY_FN tally_pm_f2 tally_pm_sincospi(float x)
{
    tally_u32 ux = tally_as_u32(x);
    float ax = tally_as_f32(ux & 0x7fffffffu);
    float xr = (ax < 0x1p24f) ? x : 0.0f;
    tally_pm_f2 sc = tally_pm_sincospi_reduced(xr, ux & 0x80000000u);
    float a = sc.hi;
    float b = sc.lo;

    int fin = ax < TALLY_F32_INF;
    float bad = (x != x) ? x : TALLY_F32_NAN;
    tally_pm_f2 res;
    res.hi = fin ? a : bad;
    res.lo = fin ? b : bad;
    return res;
}

/* sin(pi x). */
TALLY_FN float tally_sinpif(float x)
{
    return tally_pm_sincospi(x).hi;
}

/* cos(pi x). */
TALLY_FN float tally_cospif(float x)
{
    return tally_pm_sincospi(x).lo;
}

/* sin(pi x) and cos(pi x) from one reduction.  The pointers may point to
 * private (per-thread) memory; in OpenCL they are plain private pointers. */
TALLY_FN void tally_sincospif(float x, float *s, float *c)
{
    tally_pm_f2 r = tally_pm_sincospi(x);
    *s = r.hi;
    *c = r.lo;
}

/* ---------------------------------------------------------------------
 * lgamma
 * ------------------------------------------------------------------- */

/* Cheap 1/x for x in [1, 2^30], about 1 ulp: a bit-trick seed (relative
 * error below 5.1%, measured over a binade) and three Newton steps
 * (5e-2 -> 2.5e-3 -> 6.4e-6 -> ~4e-11 before rounding).  Only used for the
 * small Stirling correction term, where 1e-7 relative error is plenty. */
TALLY_FN float tally_pm_recip_approx(float x)
{
    float y = tally_as_f32(0x7ef311c3u - tally_as_u32(x));
    float e = tally_fma(-x, y, 1.0f);
    y = tally_fma(y, e, y);
    e = tally_fma(-x, y, 1.0f);
    y = tally_fma(y, e, y);
    e = tally_fma(-x, y, 1.0f);
    return tally_fma(y, e, y);
}

/* log Gamma(x) for x > 0 (where Gamma is positive, so this is also
 * log|Gamma(x)|).  Domain, by design: lgamma(+-0) = +inf, lgamma(+inf) =
 * +inf, lgamma(x < 0) = NaN (the reflection formula is not provided; C99's
 * lgamma would return log|Gamma(x)| there), NaN -> the same NaN.  Results
 * overflow to +inf from x ~ 4.0850e36.
 *
 * Two paths, both computed and then selected (no divergence):
 *
 * x < 3: with n = floor(x + 0.75), t = x - n is exact and lies in
 *   [-0.75, 0.25), and lgamma(2 + t) = t (1 + t) H(t) (degree-8 fit of H,
 *   its constant term 1 - Euler's gamma kept as a float pair, so the result
 *   is accurate relative to itself near the zero at x = 2).  Then
 *     n = 0 (x < 0.25):         lgamma(x) = lgamma(2+t) - log(x + x^2)
 *     n = 1 (0.25 <= x < 1.25): lgamma(x) = lgamma(2+t) - log(x)
 *     n = 2 (1.25 <= x < 2.25): lgamma(x) = lgamma(2+t)
 *     n = 3 (2.25 <= x < 3):    lgamma(x) = lgamma(2+t) + log(x - 1)
 *   Near the zero at x = 1, log(x) = log(1 + t) has hi part exactly t, so
 *   the cancellation with lgamma(2 + t) ~ 0.42 t happens without error.
 * x >= 3: Stirling, lgamma(x) = (x - 1/2)(log x - 1) - 1/2 + log(2 pi)/2
 *   + G(1/x^2)/x with a degree-2 G.  Writing (x-1/2) log x - x as
 *   (x - 1/2)(log x - 1) - 1/2 removes the cancellation; log x - 1 is exact
 *   on log's hi part, and the product is carried as hi + lo with an fma.
 *
 * One logarithm serves both paths: its argument is selected first. */
TALLY_FN float tally_lgammaf(float x)
{
    float n = tally_floor(x + 0.75f);
    float t = x - n;
    /* Sequential selects (not nested ones, which compilers may turn into
     * branches). */
    float arg = tally_fma(x, x, x);
    arg = (n >= 1.0f) ? x : arg;
    arg = (n >= 2.0f) ? 1.0f : arg;
    arg = (n >= 3.0f) ? x - 1.0f : arg;
    int big = x >= 3.0f;
    arg = big ? x : arg;
    tally_pm_f2 lg = tally_pm_log_parts(arg);

    /* Small path.  lgamma(2+t) = t (1+t) H(t), with both zeros (x = 1, 2)
     * divided out so that H (between 0.39 and 0.53 on the interval) has no
     * cancellation in its Horner evaluation.  H(t) - H0 by Horner
     * (gen_math_coeffs.py fit_lgamma_core, relative error 6.5e-9), with
     * H0 = H(0) = 1 - Euler's gamma kept as a float pair so that the result
     * stays accurate relative to itself next to x = 2:
     * t (1+t) H = tt H0_HI + tt (H0_LO + t W(t)), tt = t + t^2 (one fma). */
    float v = tally_pm_horner9(t, 0x1.4dc022p-11f, 0x1.37fd24p-15f, 0x1.0e2d12p-10f, -0x1.18488p-9f, 0x1.46a26cp-8f,
                               -0x1.95cc76p-7f, 0x1.0e0d64p-5f, -0x1.9ae65p-4f, 0x1.c824f4p-28f);
    float tt = tally_fma(t, t, t);
    float core = tally_fma(tt, 0x1.b0ee6p-2f, tt * v);
    float sgn = (n >= 2.0f) ? 1.0f : -1.0f;
    float small = tally_fma(sgn, lg.hi, tally_fma(sgn, lg.lo, core));

    /* Stirling path.  1/x is only needed to ~1e-7 and G/x < 2^-24 ulp of
     * the result beyond x = 2^30, so x is capped there for the reciprocal. */
    float z = tally_pm_recip_approx((x < 0x1p30f) ? x : 0x1p30f);
    float w = z * z;
    /* G(w) ~ x (lgamma(x) - Stirling's main terms), w = 1/x^2, x >= 3:
     * gen_math_coeffs.py fit_stirling, absolute error of G/x 3.2e-9. */
    float g = tally_fma(0x1.6d8cdp-11f, w, -0x1.6b7002p-9f);
    g = tally_fma(g, w, 0x1.555544p-4f);
    /* K = log(2 pi)/2 - 1/2 as KH + KL (RN and RN of the remainder). */
    float corr = tally_fma(z, g, -0x1.e6d052p-27f);
    /* Renormalise the logarithm (Fast2Sum): lg.lo can be as large as 0.06,
     * and leaving it out of the product's high part would let that product
     * overflow before lgamma does. */
    float lh = lg.hi + lg.lo;
    float ll = lg.lo - (lh - lg.hi);
    /* x - 1/2 is exact below 2^23; from there on (x - 1/2)(log x - 1) is
     * formed as x (log x - 1) - (log x - 1)/2 instead, whose second term is
     * then negligible next to the result's ulp.  The small terms are summed
     * first and the constant KH last, so that only two roundings of the
     * result's size happen. */
    int big23 = x >= 0x1p23f;
    float yh = big23 ? x : x - 0.5f;
    float hc = big23 ? -0.5f : 0.0f;
    float lm1 = lh - 1.0f;                     /* exact: lh >= 1 */
    float ph = yh * lm1;
    float pl = tally_fma(yh, lm1, -ph);        /* exact product error */
    float lo = (tally_fma(yh, ll, pl) + tally_fma(hc, lm1, corr)) + 0x1.acfe3ap-2f;
    /* Once ph overflows, pl is -inf; keep the +inf. */
    float large = (ph < TALLY_F32_INF) ? ph + lo : ph;

    float r = big ? large : small;
    int ok = (x > 0.0f) & (x < TALLY_F32_INF);
    r = ok ? r : x;                            /* +inf, NaN */
    r = (x == 0.0f) ? TALLY_F32_INF : r;
    return (x < 0.0f) ? TALLY_F32_NAN : r;
}

/* ---------------------------------------------------------------------
 * digamma (psi), the derivative of lgamma, for the gradients
 * ------------------------------------------------------------------- */

/*
 * psi(x) for x > 0 (the domain of tally_lgammaf and of every gradient that
 * needs it). Below 6 the recurrence psi(x) = psi(x + 1) - 1/x is applied
 * six times under selects (a fixed loop, so GPU lanes whose x differ do not
 * diverge); from y >= 6 on the asymptotic series
 *   psi(y) = log y - 1/(2y) - 1/(12y^2) + 1/(120y^4) - 1/(252y^6) + 1/(240y^8) - 1/(132y^10)
 * whose first omitted term, 691/(32760 y^12) <= 1e-11 at y = 6, is far
 * below a float ulp. The coefficients are the Bernoulli terms B_2k/(2k)
 * rounded to float (hexadecimal, so no decimal conversion can change a bit).
 *
 * Below 6 the result is a difference of two terms near 2 (log y and the sum
 * of the reciprocals), so both are carried to about twice float precision:
 * the steps y + 1 keep their rounding errors (TwoSum) in ylo, each
 * reciprocal 1/(y + ylo) is r plus its residual r (1 - y r - ylo r) (the fma
 * gives 1 - y r exactly), the reciprocals are summed smallest first with
 * TwoSum, log y comes as hi + lo (tally_pm_log_parts), and psi(y + ylo) is
 * psi(y) + ylo / y to first order. Accuracy against a float64 digamma
 * (tools/math/digamma_accuracy.c) is in docs/accuracy.md.
 * Special values: psi(+-0) = -inf (torch's convention), psi(x) below about
 * 3e-39 overflows to -inf, psi(+inf) = +inf, x < 0 gives the quiet NaN (no
 * reflection: no op of tally reads one), a NaN input is returned unchanged.
 */
/* tally_digammaf after its recurrence: psi(x) from y = x shifted up to at
 * least 6 (with the shift's rounding errors ylo) and the sum shi + slo of
 * the reciprocals it stepped over, then the special values of x. */
TALLY_FN float tally_pm_digamma_tail(float x, float y, float ylo, float shi, float slo)
{
    const float w = tally_recipf(y);
    const float w2 = w * w;
    float p = -0x1.f07c20p-8f;                 /* -1/132 */
    p = 0x1.111112p-8f + w2 * p;               /*  1/240 */
    p = -0x1.041042p-8f + w2 * p;              /* -1/252 */
    p = 0x1.111112p-7f + w2 * p;               /*  1/120 */
    p = -0x1.555556p-4f + w2 * p;              /* -1/12 */
    const float series = (0.5f * w) - w2 * p;  /* 1/(2y) + 1/(12y^2) - ... */
    const tally_pm_f2 lg = tally_pm_log_parts(y);
    float res = (lg.hi - shi) + (((lg.lo - slo) - series) + ylo * w);
    res = (shi == TALLY_F32_INF) ? -TALLY_F32_INF : res;
    res = (x == TALLY_F32_INF) ? x : res;
    res = (x == 0.0f) ? -TALLY_F32_INF : res;
    res = (x < 0.0f) ? TALLY_F32_NAN : res;
    return (x != x) ? x : res;
}

TALLY_FN float tally_digammaf(float x)
{
    float y = x, ylo = 0.0f;
    float r[6], c[6];
    for (int i = 0; i < 6; i++) {
        const int step = y < 6.0f;
        const float ri = tally_recipf(y);
        r[i] = step ? ri : 0.0f;
        c[i] = step ? ri * (tally_fma(-y, ri, 1.0f) - ylo * ri) : 0.0f;
        const float s = y + 1.0f;
        const float bp = s - y;
        const float err = (y - (s - bp)) + (1.0f - bp);
        ylo = step ? ylo + err : ylo;
        y = step ? s : y;
    }
    /* The reciprocals, smallest (last) first, as shi + slo. */
    float shi = r[5], slo = c[5];
    for (int i = 4; i >= 0; i--) {
        const float t = shi + r[i];
        const float bp = t - shi;
        slo = slo + (((shi - (t - bp)) + (r[i] - bp)) + c[i]);
        shi = t;
    }
    return tally_pm_digamma_tail(x, y, ylo, shi, slo);
}

/*
 * tally_digammaf with a branch, for arguments that the work-items of a warp
 * taking it have on the same side of 6 as a rule (a row's N + A): at x >=
 * 6, and for a NaN, no step of the recurrence is taken, so y = x and ylo,
 * shi and slo are +0 (the sums of +0s that tally_digammaf forms), and its
 * tail alone gives its bits without the six reciprocals. Where the
 * arguments straddle 6 a warp runs both sides; tally_digammaf has no branch.
 */
TALLY_FN float tally_digammaf_shared(float x)
{
    if (!(x < 6.0f)) return tally_pm_digamma_tail(x, x, 0.0f, 0.0f, 0.0f);
    return tally_digammaf(x);
}

#endif /* TALLY_PORTABLE_MATH_H */
