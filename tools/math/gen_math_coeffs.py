#!/usr/bin/env python3
"""Generate the polynomial coefficients used by include/tally/portable_math.h.

Every polynomial in the header is a weighted minimax fit computed here, then
rounded to binary32 one coefficient at a time (lowest power first), refitting
the remaining coefficients after each rounding so that the later ones absorb
the rounding error of the earlier ones.  The fits are Lawson iterations
(iteratively reweighted least squares), which converge to the minimax
solution; reference values come from mpmath at 50 significant digits.

Usage:  python3 tools/math/gen_math_coeffs.py            (prints every fit and constant)
        python3 tools/math/gen_math_coeffs.py log 7      (one fit at another degree:
                                                     exp, log, lgamma, stirling X0 DEG,
                                                     sincos DEGS DEGC, constants)
Needs:  mpmath and numpy (pip install mpmath numpy).

The printed "max weighted error" is measured in float64 with the float32
coefficients, so it is the approximation error alone, before the rounding
errors of evaluating the polynomial in float32.  tools/math/math_accuracy.c
measures the end result.
"""
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 50


def cheb_points(a, b, n):
    """n Chebyshev-distributed points in [a, b], endpoints included."""
    k = np.arange(n)
    x = np.cos(np.pi * k / (n - 1))
    return 0.5 * (a + b) + 0.5 * (b - a) * x[::-1]


def lawson_fit(xs, target, weight, powers, fixed=None, iters=400):
    """Minimise max_i |weight_i * (target_i - sum_k c_k xs_i^p_k)|.

    `fixed` maps a power to an already-rounded coefficient whose contribution
    is subtracted before fitting the others.  Returns a dict power -> coeff.
    The basis is scaled to [-1, 1] so the least-squares systems stay well
    conditioned even for degree 11.
    """
    fixed = dict(fixed or {})
    resid_target = target.copy()
    for p, c in fixed.items():
        resid_target = resid_target - c * xs ** p
    free = [p for p in powers if p not in fixed]
    if not free:
        return dict(fixed)
    scale = max(abs(xs.min()), abs(xs.max()))
    A = np.stack([(xs / scale) ** p for p in free], axis=1)
    Aw = A * weight[:, None]
    bw = resid_target * weight
    u = np.ones_like(xs) / len(xs)
    sol = None
    for _ in range(iters):
        s = np.sqrt(u)
        sol, *_ = np.linalg.lstsq(Aw * s[:, None], bw * s, rcond=None)
        err = np.abs(bw - Aw @ sol)
        u = u * err
        tot = u.sum()
        if tot == 0:
            break
        u = u / tot
    out = dict(fixed)
    for p, c in zip(free, sol):
        out[p] = c / scale ** p
    return out


def sequential_float_fit(xs, target, weight, powers, preset=None):
    """Fit, round the lowest remaining power to float32, refit, repeat."""
    fixed = dict(preset or {})
    for p in powers:
        if p in fixed:
            continue
        c = lawson_fit(xs, target, weight, powers, fixed)
        fixed[p] = float(np.float32(c[p]))
    return fixed


def max_err(xs, target, weight, coeffs):
    approx = sum(c * xs ** p for p, c in coeffs.items())
    e = np.abs(weight * (target - approx))
    i = int(np.argmax(e))
    return e[i], xs[i]


def hexf(c):
    """C hexadecimal float literal for a float32 value (exact everywhere)."""
    h = float(np.float32(c)).hex()  # e.g. '0x1.62e4300000000p-1'
    sign = ''
    if h.startswith('-'):
        sign, h = '-', h[1:]
    mant, exp = h.split('p')
    mant = mant.rstrip('0')
    if mant.endswith('.'):
        mant = mant[:-1]
    return '%s%sp%sf' % (sign, mant, exp)


def report(name, coeffs, err, where, note):
    print('/* %s: %s; max weighted error %.3e at %.6g */' % (name, note, err, where))
    for p in sorted(coeffs):
        print('    %-6s = %s  /* %.9g */' % ('c%d' % p, hexf(coeffs[p]), coeffs[p]))
    print()


def fit_exp():
    # exp(r) ~ 1 + r * P(r), |r| <= ln2/2 plus the rounding slack of the
    # reduction (x*log2e is rounded, so |r| can exceed ln2/2 by ~1e-5).
    xs = cheb_points(-0.3466, 0.3466, 6000)
    xs = xs[xs != 0]
    em1 = np.array([float(mp.expm1(mp.mpf(x))) for x in xs])
    ex = np.array([float(mp.exp(mp.mpf(x))) for x in xs])
    target = em1 / xs                      # (exp(r) - 1) / r
    weight = np.abs(xs) / ex               # relative error of exp(r)
    powers = list(range(6))
    c = sequential_float_fit(xs, target, weight, powers)
    e, w = max_err(xs, target, weight, c)
    report('exp: P(r), exp(r) = 1 + r*P(r)', c, e, w, 'relative error of exp(r)')


def fit_log():
    # log(1+f) = f + f^2 * Q(f) for f in [2/3 - 1, 4/3 - 1].
    lo, hi = -0.33333334, 0.33333334
    xs = cheb_points(lo, hi, 6000)
    xs = xs[np.abs(xs) > 1e-6]
    l1p = np.array([float(mp.log1p(mp.mpf(x))) for x in xs])
    target = np.array([float((mp.log1p(mp.mpf(x)) - mp.mpf(x)) / mp.mpf(x) ** 2) for x in xs])
    weight = xs ** 2 / np.abs(l1p)         # relative error of log(1+f)
    deg = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == 'log' else 8
    powers = list(range(deg + 1))
    c = sequential_float_fit(xs, target, weight, powers)
    e, w = max_err(xs, target, weight, c)
    report('log: Q(f), log(1+f) = f + f^2*Q(f)', c, e, w, 'relative error of log(1+f)')


def fit_lgamma_core():
    # lgamma(2+t) = t (1+t) H(t) for t in [-0.75, 0.25] (a hair wider for
    # the rounding of x + 0.75 in the reduction).  Dividing out both zeros
    # (x = 1 and x = 2) leaves H in [0.39, 0.53], slowly varying, so its
    # Horner evaluation has no cancellation (t R(t) with R = (1+t) H had a
    # cancellation of about 3x near t = -0.75, the minimum of Gamma).
    xs = cheb_points(-0.7501, 0.2501, 6000)
    xs = xs[np.abs(xs) > 1e-7]
    lg = np.array([float(mp.loggamma(2 + mp.mpf(x))) for x in xs])
    target = np.array([float(mp.loggamma(2 + mp.mpf(x)) / (mp.mpf(x) * (1 + mp.mpf(x)))) for x in xs])
    weight = 1.0 / np.abs(target)          # relative error of lgamma(2+t)
    deg = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == 'lgamma' else 8
    powers = list(range(deg + 1))
    # H(0) = 1 - Euler's gamma is kept as a float pair (hi + lo): a single
    # float would bound the relative error near x = 2 at 2^-25.
    c0 = 1 - mp.euler
    c = sequential_float_fit(xs, target, weight, powers, preset={0: float(c0)})
    e, w = max_err(xs, target, weight, c)
    hi = np.float32(float(c0))
    lo = np.float32(float(c0 - mp.mpf(float(hi))))
    print('/* lgamma core H(0) = 1 - Euler gamma as hi + lo: %s + %s */' % (hexf(hi), hexf(lo)))
    report('lgamma core: H(t), lgamma(2+t) = t*(1+t)*H(t)', c, e, w, 'relative error of lgamma(2+t)')


def fit_stirling():
    # lgamma(x) = (x-0.5)*log(x) - x + 0.5*log(2*pi) + G(1/x^2)/x for x >= X0.
    x0 = float(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == 'stirling' else 3.0
    deg = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[1] == 'stirling' else 2
    ws = cheb_points(0.0, 1.0 / (x0 * x0), 3000)
    ws = ws[ws > 1e-12]
    def g(w):
        x = 1 / mp.sqrt(mp.mpf(w))
        return (mp.loggamma(x) - (x - mp.mpf(0.5)) * mp.log(x) + x - mp.log(2 * mp.pi) / 2) * x
    target = np.array([float(g(w)) for w in ws])
    weight = np.sqrt(ws)                   # absolute error of G(w)/x
    powers = list(range(deg + 1))
    c = sequential_float_fit(ws, target, weight, powers)
    e, w = max_err(ws, target, weight, c)
    report('stirling: G(w), w = 1/x^2, x >= %g' % x0, c, e, w, 'absolute error of G/x')


def fit_sincospi():
    # sin(pi t) = t * S(t^2), cos(pi t) = C(t^2) for |t| <= 1/4.
    us = cheb_points(0.0, 0.0625, 4000)
    us = us[us > 0]
    t = np.sqrt(us)
    s = np.array([float(mp.sinpi(mp.sqrt(mp.mpf(u)))) for u in us])
    co = np.array([float(mp.cospi(mp.sqrt(mp.mpf(u)))) for u in us])
    target = s / t
    weight = 1.0 / np.abs(target)
    degs = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[1] == 'sincos' else 3
    degc = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[1] == 'sincos' else 4
    # pi is stored as a float pair for the same reason as 1 - gamma above.
    c = sequential_float_fit(us, target, weight, list(range(degs + 1)),
                             preset={0: float(mp.pi)})
    e, w = max_err(us, target, weight, c)
    hi = np.float32(float(mp.pi))
    lo = np.float32(float(mp.pi - mp.mpf(float(hi))))
    print('/* sinpi c0 = pi as hi + lo: %s + %s */' % (hexf(hi), hexf(lo)))
    report('sinpi: S(u), sin(pi t) = t*S(t^2)', c, e, w, 'relative error')
    # cos: keep the constant term exactly 1 so that cospi is exact at integers.
    c = sequential_float_fit(us, co, 1.0 / co, list(range(degc + 1)), preset={0: 1.0})
    e, w = max_err(us, co, 1.0 / co, c)
    report('cospi: C(u), cos(pi t) = C(t^2)', c, e, w, 'relative error')


def print_constants():
    """The non-polynomial constants of the header, with their derivation."""
    ln2 = mp.log(2)
    # Cody-Waite split for exp and lgamma's log: ln 2 truncated to 15
    # significant bits (so k * LN2_HI is exact for |k| <= 512), and the rest.
    ln2_hi = float.fromhex('0x1.62e4p-1')
    ln2_lo = np.float32(float(ln2 - mp.mpf(ln2_hi)))
    print('/* TALLY_PM_LN2_HI = %s, TALLY_PM_LN2_LO = %s (ln2 - both = %.2e) */'
          % (hexf(ln2_hi), hexf(ln2_lo), float(ln2 - mp.mpf(ln2_hi) - mp.mpf(float(ln2_lo)))))
    # RN(ln 2) and RN(ln 2 - RN(ln 2)) for log and log1p's final fmas.
    rn = np.float32(float(ln2))
    tail = np.float32(float(ln2 - mp.mpf(float(rn))))
    print('/* TALLY_PM_LN2 = %s, TALLY_PM_LN2_TAIL = %s */' % (hexf(rn), hexf(tail)))
    print('/* TALLY_PM_LOG2E = %s (RN(1/ln 2)) */' % hexf(float(1 / ln2)))
    # lgamma's Stirling constant K = log(2 pi)/2 - 1/2 as hi + lo.
    k = mp.log(2 * mp.pi) / 2 - mp.mpf(1) / 2
    kh = np.float32(float(k))
    kl = np.float32(float(k - mp.mpf(float(kh))))
    print('/* lgamma K = log(2 pi)/2 - 1/2 = %s + %s */' % (hexf(kh), hexf(kl)))
    # Reciprocal seed on [1, 2]: the minimax line 24/17 - 8/17 m.
    print('/* recip seed: 24/17 = %s, 8/17 = %s */' % (hexf(24 / 17), hexf(8 / 17)))
    print()


# Each fit by the name the command line gives it, in the order `all` prints them.
FITS = {
    'exp': fit_exp,
    'log': fit_log,
    'lgamma': fit_lgamma_core,
    'stirling': fit_stirling,
    'sincos': fit_sincospi,
    'constants': print_constants,
}

if __name__ == '__main__':
    which = sys.argv[1] if len(sys.argv) > 1 else 'all'
    for name, fit in FITS.items():
        if which in ('all', name):
            fit()
