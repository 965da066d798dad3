/*
 * tools/math/math_ref.h - the float64 side of the math-accuracy tools
 * (math_accuracy.c on the host, cuda_math_compare.cu on a GPU): the exact
 * sin(pi x) / cos(pi x) reference, a float's ordinal and the float ulp of a
 * double. Written once for C11 and CUDA C++ (nvcc), as static functions.
 */
#ifndef TALLY_MATH_REF_H
#define TALLY_MATH_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* sin(pi x) or cos(pi x) in double with exact argument reduction: x is a
 * float, so 2x, rint(2x) and t = x - j/2 are exact in double, and
 * sin(M_PI * t) for |t| <= 1/4 is accurate to a few 1e-17. */
static inline double math_ref_sincospi(float xf, int want_cos)
{
    double x = xf;
    if (x != x || fabs(x) == HUGE_VAL) return NAN;
    if (fabs(x) >= 0x1p24) return want_cos ? 1.0 : copysign(0.0, x);
    double j = rint(2.0 * x), t = x - 0.5 * j;
    long q = ((long)j) & 3;
    double s = sin(M_PI * t), c = cos(M_PI * t);
    switch (q) {
    case 0: return want_cos ? c : s;
    case 1: return want_cos ? -s : c;
    case 2: return want_cos ? -c : -s;
    default: return want_cos ? s : -c;
    }
}

/* Position on the number line in float steps (+0 and -0 both map to 0). */
static inline int64_t math_ref_ordinal(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

/* The float ulp at the magnitude of v (subnormal spacing below 2^-126,
 * capped at the largest binade). */
static inline double math_ref_ulp(double v)
{
    double a = fabs(v);
    if (a < 0x1p-126) return 0x1p-149;
    int e;
    frexp(a, &e); /* a = m 2^e, m in [0.5, 1) */
    if (e > 128) e = 128;
    return ldexp(1.0, e - 24);
}

#endif /* TALLY_MATH_REF_H */
