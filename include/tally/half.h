/*
 * tally/half.h - bf16 and f16 (IEEE binary16) conversions, written once for
 * C11, CUDA and OpenCL C with integer operations and bit casts only.
 *
 * Every bf16 and every f16 value is exactly an fp32 value, so reading a half
 * input as fp32 loses nothing: an op on half inputs is the fp32 op on the
 * up-converted values, with the same bits on every backend. The platform's
 * own conversion instructions are not used (OpenCL's vload_half needs the
 * cl_khr_fp16 path on some devices, CUDA's __half2float is a device
 * intrinsic); these functions are plain integer code, so they are the same
 * on every target by construction.
 *
 * NaN inputs keep their sign and payload (the payload's high bits, for f16)
 * when widened; ops store NaN results as the one canonical NaN
 * (tally_canonical in tally/terms.h) as they do for fp32 inputs.
 *
 * The narrowing conversions round to nearest, ties to even, overflow to
 * infinity, keep subnormals, and turn a NaN into a quiet NaN of the same
 * sign (never into an infinity).
 */
#ifndef TALLY_HALF_H
#define TALLY_HALF_H

#include "dialect.h"
#include "flags.h"

/* 16-bit storage type of a half element. */
#if TALLY_TARGET_OPENCL
typedef ushort tally_u16;
#elif TALLY_TARGET_CUDA
typedef unsigned short tally_u16;
#else
typedef uint16_t tally_u16;
#endif

/* Leading zero bits of a nonzero 32-bit word, by each target's integer
 * instruction (the same exact result everywhere). */
#if TALLY_TARGET_OPENCL
TALLY_FN tally_u32 tally_clz32(tally_u32 x) { return clz(x); }
#elif TALLY_TARGET_CUDA
TALLY_FN tally_u32 tally_clz32(tally_u32 x) { return (tally_u32)__clz((int)x); }
#elif defined(__GNUC__)
TALLY_FN tally_u32 tally_clz32(tally_u32 x) { return (tally_u32)__builtin_clz(x); }
#else
TALLY_FN tally_u32 tally_clz32(tally_u32 x)
{
    tally_u32 n = 0u;
    while ((x & 0x80000000u) == 0u) {
        x <<= 1;
        n++;
    }
    return n;
}
#endif

/* bf16 is the high half of an fp32: widening is a shift. */
TALLY_FN float tally_bf16_to_f32(tally_u32 h)
{
    return tally_as_f32((h & 0xffffu) << 16);
}

/* f16: sign 1, exponent 5 (bias 15), mantissa 10. */
TALLY_FN float tally_f16_to_f32(tally_u32 h)
{
    const tally_u32 sign = (h & 0x8000u) << 16;
    const tally_u32 e = (h >> 10) & 0x1fu;
    tally_u32 m = h & 0x3ffu;
    if (e == 0x1fu) return tally_as_f32(sign | 0x7f800000u | (m << 13)); /* inf, NaN with its payload */
    if (e != 0u) return tally_as_f32(sign | ((e + 112u) << 23) | (m << 13)); /* rebias 15 -> 127 */
    if (m == 0u) return tally_as_f32(sign);                                /* +-0 */
    /* Subnormal m * 2^-24: shift m by s so that its leading one reaches
     * bit 10; the exponent drops by s. clz(m) is 22 .. 31 for m < 2^10. */
    const tally_u32 s = tally_clz32(m) - 21u;
    m <<= s;
    return tally_as_f32(sign | ((113u - s) << 23) | ((m & 0x3ffu) << 13));
}

/* fp32 -> bf16, round to nearest even. */
TALLY_FN tally_u32 tally_f32_to_bf16(float f)
{
    const tally_u32 u = tally_as_u32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu; /* quiet NaN */
    /* Adding 0x7fff plus the lowest kept bit rounds ties to even; a carry
     * out of the mantissa correctly bumps the exponent (up to infinity). */
    return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & 0xffffu;
}

/* fp32 -> f16, round to nearest even. */
TALLY_FN tally_u32 tally_f32_to_f16(float f)
{
    const tally_u32 u = tally_as_u32(f);
    const tally_u32 sign = (u >> 16) & 0x8000u;
    const tally_u32 a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu); /* quiet NaN, high payload bits */
    /* 65520 = 0x477ff000 is halfway between the largest f16 (65504, odd
     * mantissa) and 2^16: it and everything above round to infinity. */
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a >= 0x38800000u) {
        /* Normal f16 (>= 2^-14): rebias 127 -> 15, drop 13 bits. */
        tally_u32 h = (a - 0x38000000u) >> 13;
        const tally_u32 rem = a & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
        return sign | h;
    }
    /* 2^-25 (ties to even: to 0) and below: zero. */
    if (a <= 0x33000000u) return sign;
    /* Subnormal f16: the value in units of 2^-24 is mant >> (126 - e), e in
     * [102, 112]; rounding up from 0x3ff gives 0x400, the smallest normal,
     * which is the right encoding. */
    const tally_u32 e = a >> 23;
    const tally_u32 mant = (a & 0x7fffffu) | 0x800000u;
    const tally_u32 shift = 126u - e;
    tally_u32 h = mant >> shift;
    const tally_u32 rem = mant & ((1u << shift) - 1u);
    const tally_u32 halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u) != 0u)) h++;
    return sign | h;
}

/* Widens one stored element of the given dtype code (the low 16 bits of
 * bits for halves, all 32 for f32). */
TALLY_FN float tally_half_to_f32(tally_u32 dtype, tally_u32 bits)
{
    if (dtype == TALLY_BF16) return tally_bf16_to_f32(bits);
    if (dtype == TALLY_F16) return tally_f16_to_f32(bits);
    return tally_as_f32(bits);
}

#endif /* TALLY_HALF_H */
