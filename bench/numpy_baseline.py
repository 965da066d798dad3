#!/usr/bin/env python3
"""NumPy / SciPy float32 baseline for tally-bench on the CPU.

The same workloads as tally-bench, at the same shapes, byte counts and rotation among input copies:
this script asks tally-bench for them (`tally-bench --list-workloads`, each workload sized by its own
run function from the case catalogue), so nothing here repeats a size or a scaling rule. Each workload
is timed in NumPy/SciPy float32 in this one process, the way tally-bench times the host backend
(wall clock; two warm-up calls, one call that sizes the batches to --batch-ms, one untimed batch, then
--reps timed batches; the median per call is reported, min and max kept), and written as JSON lines
of the shape torch_baseline.py writes, so that `report.py --numpy` puts them beside tally's host
backend.

Where a workload has more than one reasonable formulation, each is screened (the best of three
calls) and the fastest is measured; the record names it (`formulation`) and keeps every candidate's
screening time (`candidates`). The formulations:

  uniform_fill   Generator(Philox).random(dtype=float32, out=)
  raw_fill       Generator(Philox).integers(0, 2**32, dtype=uint32), or Philox.random_raw viewed as uint32
  normal_fill    Generator(Philox).standard_normal(dtype=float32, out=)
  categorical    inverse CDF per row: cumsum, one uniform per row, a count of the CDF below it
  gmm_small/large  Generator.choice + standard_normal, gather, z = mu_c + exp(lv_c / 2) eps, the log
                 density of every component summed over D, scipy.special.logsumexp over components
  dm_*           scipy.special.gammaln: lgamma(A) - lgamma(N + A) + sum(lgamma(n + a) - lgamma(a)),
                 or with a shared alpha the sum of lgamma(a) taken once
  kl             sum(t (log t - log p)) / rows, or scipy.special.rel_entr(t, p).sum() / rows
  kl_log         sum(t (log t - x)) / rows, or (scipy.special.xlogy(t, t) - t x).sum() / rows
  kl_logits      sum(softmax(y) (log_softmax(y) - log_softmax(x))) / rows, the log-softmax by hand or
                 by scipy.special.log_softmax
  sum_n1/1n/rc   np.add.reduce over the whole array (pairwise float32), in its [n, 1], [1, n] or
                 [rows, cols] view
  sum_rows_f32   np.add.reduce(x, axis=1, out=)
  kl_bw          the closed form: grad p = -(t / p) / rows, grad t = (log t - log p + 1) / rows, with
                 out= into preallocated gradients, or as plain expressions
  dm_bw          scipy.special.digamma: alpha (mean(psi(A) - psi(N + A)) + mean over rows of
                 (psi(n + a) - psi(a)))
  gmm_bw         the closed form of docs/ops.md (NumPy has no autograd): the component and noise drawn
                 again, z formed again, the responsibility-weighted gradient of the log density plus
                 the reparameterisation's at the drawn component
  ceil_write     ndarray.fill over the ceilings' bytes; ceil_copy: np.copyto (bytes read + written)

Workloads with no NumPy formulation get no result row, only a `no_formulation` record with the
reason (NO_FORMULATION below): the bf16 inputs (NumPy has no bfloat16).

Usage:
  python3 bench/numpy_baseline.py --bench build/bench/tally-bench --scales 0.0625 --json numpy.jsonl
Options mirror tally-bench's (--only, --scale, --scales, --reps, --calls, --batch-ms, --small-calls,
--rotate-mib). numpy and scipy are benchmark dependencies, never the library's.
"""
import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import scipy
import scipy.special as sps

F32 = np.float32
LOG_2PI = math.log(2.0 * math.pi)
GIB = 1024.0 ** 3
CEIL_BYTES = 4.0 * GIB  # tally-bench's ceilings at scale 1 (BENCH_CEIL_BYTES), scaled the same way

NO_FORMULATION = {
    "kl_bf16": "NumPy has no bfloat16 dtype (ml_dtypes emulates one in software, which is no baseline)",
    "dm_large_bf16": "NumPy has no bfloat16 dtype (ml_dtypes emulates one in software, which is no baseline)",
    "sum_rows_bf16": "NumPy has no bfloat16 dtype (ml_dtypes emulates one in software, which is no baseline)",
}


# ---------------------------------------------------------------------------
# The workloads tally-bench runs, from tally-bench itself.
# ---------------------------------------------------------------------------
def bench_workloads(args):
    cmd = [args.bench, "--list-workloads", "--scales", ",".join(f"{s:.9g}" for s in args.scales),
           "--rotate-mib", f"{args.rotate_mib:g}"]
    if args.only:
        cmd += ["--only", args.only]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"numpy_baseline.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    specs = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    for s in specs:
        s["dims"] = [int(v) for v in s["shape"].split("x")]
    return specs


# ---------------------------------------------------------------------------
# Timing, as tally-bench's bench_measure on the host backend.
# ---------------------------------------------------------------------------
MAX_CALLS = 100000
SINGLE_CALLS = 50


def batch_ms(fn, first, calls):
    t0 = time.perf_counter()
    for i in range(first, first + calls):
        fn(i)
    return 1e3 * (time.perf_counter() - t0)


def measure(fn, args, latency_bound):
    idx = 0
    batch_ms(fn, idx, 2)
    idx += 2
    one = batch_ms(fn, idx, 1)
    idx += 1
    if args.calls:
        calls = args.calls
    elif latency_bound:
        calls = args.small_calls
    else:
        calls = max(1, min(MAX_CALLS, int(math.ceil(args.batch_ms / max(one, 1e-4)))))
    batch_ms(fn, idx, calls)  # untimed: steady clocks and caches
    idx += calls
    per = []
    for _ in range(args.reps):
        per.append(batch_ms(fn, idx, calls) / calls)
        idx += calls
    ms = statistics.median(per)
    out = {"ms": ms, "ms_min": min(per), "ms_max": max(per), "us": 1e3 * ms, "batches": args.reps,
           "calls_per_batch": calls, "timer": "wall", "wall_us_per_call": 1e3 * ms, "single_us": None}
    if latency_bound:
        singles = []
        for _ in range(SINGLE_CALLS):
            singles.append(1e3 * batch_ms(fn, idx, 1))
            idx += 1
        out["single_us"] = statistics.median(singles)
    return out


def screen_ms(fn):
    """The best of three calls (after one warm-up): enough to pick among formulations."""
    fn(0)
    best = math.inf
    for i in range(1, 4):
        t0 = time.perf_counter()
        fn(i)
        best = min(best, time.perf_counter() - t0)
    return 1e3 * best


# ---------------------------------------------------------------------------
# Inputs: Philox streams, the distributions tally-bench draws.
# ---------------------------------------------------------------------------
def generator(seed):
    return np.random.Generator(np.random.Philox(seed))


def uniform01(g, shape):
    """Uniform on (0, 1], as tally's uniform fill: positive, so every log is finite."""
    return F32(1.0) - g.random(shape, dtype=F32)


def normal(g, shape):
    return g.standard_normal(shape, dtype=F32)


def rel_ok(got, ref, tol):
    return math.isfinite(got) and abs(got - ref) <= tol


def summary(ok, text):
    return f"{'ok' if ok else 'WRONG'}: {text}"


# ---------------------------------------------------------------------------
# Workloads. Each returns (candidates {formulation: fn(i)}, check(fn) -> (value, ok, text)); call i
# uses input set i % sets, as tally-bench's calls do.
# ---------------------------------------------------------------------------
def fill_check(draw, want_mean, want_var, as_unit=None):
    def check(fn):
        v = np.asarray(draw(fn))
        m = min(v.size, 1 << 22)
        x = v[:m].astype(np.float64)
        if as_unit is not None:
            x = x * as_unit
        finite = bool(np.isfinite(x).all())
        mean, var = float(x.mean()), float(x.var())
        ok = (finite and abs(mean - want_mean) < 5.0 * math.sqrt(want_var / m) + 1e-3
              and abs(var / want_var - 1.0) < 5.0 * math.sqrt(2.0 / m) + 1e-3)
        return math.sqrt(var), ok, summary(ok, f"first {m}: mean {mean:.5f}, std {math.sqrt(var):.5f} "
                                               f"(want {want_mean:.3g}, {math.sqrt(want_var):.4g})")
    return check


def w_uniform_fill(spec):
    n, sets = spec["dims"][0], spec["rotation_sets"]
    g = generator(404)
    outs = [np.empty(n, dtype=F32) for _ in range(sets)]

    def fill(i):
        return g.random(dtype=F32, out=outs[i % sets])
    return ({"Generator(Philox).random(dtype=float32, out=)": fill},
            fill_check(lambda fn: fn(0), 0.5, 1.0 / 12.0))


def w_raw_fill(spec):
    n = spec["dims"][0]
    g = generator(404)
    bitgen = g.bit_generator
    cands = {
        "Generator(Philox).integers(0, 2**32, dtype=uint32)":
            lambda i: g.integers(0, 1 << 32, size=n, dtype=np.uint32),
        "Philox.random_raw(n / 2) viewed as uint32": lambda i: bitgen.random_raw(n // 2).view(np.uint32),
    }
    return cands, fill_check(lambda fn: fn(0), 0.5, 1.0 / 12.0, as_unit=1.0 / 4294967296.0)


def w_normal_fill(spec):
    n, sets = spec["dims"][0], spec["rotation_sets"]
    g = generator(404)
    outs = [np.empty(n, dtype=F32) for _ in range(sets)]

    def fill(i):
        return g.standard_normal(dtype=F32, out=outs[i % sets])
    return {"Generator(Philox).standard_normal(dtype=float32, out=)": fill}, fill_check(lambda fn: fn(0), 0.0, 1.0)


def w_categorical(spec):
    R, C = spec["dims"]
    sets = spec["rotation_sets"]
    g0, g = generator(607), generator(606)
    ws = [uniform01(g0, (R, C)) for _ in range(sets)]

    def draw(i):
        cdf = np.cumsum(ws[i % sets], axis=1)
        u = g.random(R, dtype=F32) * cdf[:, -1]
        return np.count_nonzero(cdf < u[:, None], axis=1)

    def check(fn):
        idx = fn(0)
        in_range = bool(((idx >= 0) & (idx < C)).all())
        mean, want = float(idx.mean()), 0.5 * (C - 1)
        ok = in_range and abs(mean - want) < 5.0 * C / math.sqrt(12.0 * R) + 0.01
        return mean, ok, summary(ok, f"indices {'in range' if in_range else 'OUT OF RANGE'}; "
                                     f"mean index {mean:.4f} vs ~{want:.1f}")
    return {"inverse CDF: cumsum, uniform * total, count_nonzero(cdf < u)": draw}, check


def gmm_log_q64(z, mu, lv, logits):
    z, mu, lv, logits = (a.astype(np.float64) for a in (z, mu, lv, logits))
    y = (z[:, None, :] - mu) * np.exp(-0.5 * lv)
    comp = (-0.5 * y * y - 0.5 * lv - 0.5 * LOG_2PI).sum(-1)
    return sps.logsumexp(sps.log_softmax(logits) + comp, axis=-1)


def w_gmm(spec):
    B, K, D = spec["dims"]
    sets = spec["rotation_sets"]
    g0, g = generator(301), generator(303)
    mus = [normal(g0, (B, K, D)) for _ in range(sets)]
    lvs = [F32(1.0) - g0.random((B, K, D), dtype=F32) for _ in range(sets)]
    logits = normal(g0, K)
    rows = np.arange(B)
    half_d_log_2pi = F32(0.5 * D * LOG_2PI)

    def sample(i):
        mu, lv = mus[i % sets], lvs[i % sets]
        log_w = sps.log_softmax(logits)
        w = np.exp(log_w.astype(np.float64))
        c = g.choice(K, size=B, p=w / w.sum())
        eps = g.standard_normal((B, D), dtype=F32)
        z = mu[rows, c] + np.exp(F32(0.5) * lv[rows, c]) * eps
        y = (z[:, None, :] - mu) * np.exp(F32(-0.5) * lv)
        comp = (F32(-0.5) * y * y - F32(0.5) * lv).sum(-1) - half_d_log_2pi
        return z, sps.logsumexp(log_w + comp, axis=-1)

    def check(fn):
        z, log_q = fn(0)
        ref = gmm_log_q64(z, mus[0], lvs[0], logits)
        err = float(np.abs(log_q.astype(np.float64) - ref).max())
        finite = bool(np.isfinite(z).all() and np.isfinite(log_q).all())
        ok = finite and err <= 1e-3 * (1.0 + float(np.abs(ref).max()))
        v = float(log_q.astype(np.float64).mean())
        return v, ok, summary(ok, f"mean log_q {v:.8g}, max |log_q - float64| {err:.3g} (float64 from the z drawn)")
    return {"choice + standard_normal, gather, log density per component, scipy logsumexp": sample}, check


def dm_ref64(counts, la):
    a = np.exp(la.astype(np.float64))
    c = counts.astype(np.float64)
    A, N = a.sum(-1), c.sum(-1)
    return sps.gammaln(A) - sps.gammaln(N + A) + (sps.gammaln(c + a) - sps.gammaln(a)).sum(-1)


def vector_check(run, ref, rel):
    """Every element finite and within rel * (1 + max |ref|) of float64; the value is the mean."""
    def check(fn):
        out = np.asarray(run(fn))
        err = float(np.abs(out.astype(np.float64) - ref).max())
        ok = bool(np.isfinite(out).all()) and err <= rel * (1.0 + float(np.abs(ref).max()))
        v = float(out.astype(np.float64).mean())
        return v, ok, summary(ok, f"mean {v:.8g}, max |out - float64| {err:.3g}")
    return check


def w_dm(spec):
    B, V = spec["dims"]
    sets = spec["rotation_sets"]
    per_row = spec["workload"] == "dm_large_row"
    g = generator(77)
    counts = [np.floor(F32(4.0) * g.random((B, V), dtype=F32)) for _ in range(sets)]
    if per_row:
        las = [uniform01(g, (B, V)) for _ in range(sets)]
    else:
        las = [F32(-2.0) + F32(3.0) * g.random(V, dtype=F32)] * sets

    def textbook(i):
        c, la = counts[i % sets], las[i % sets]
        a = np.exp(la)
        A, N = a.sum(-1), c.sum(-1)
        return sps.gammaln(A) - sps.gammaln(N + A) + (sps.gammaln(c + a) - sps.gammaln(a)).sum(-1)

    def hoisted(i):
        c, la = counts[i % sets], las[i % sets]
        a = np.exp(la)
        A, N = a.sum(), c.sum(-1)
        return (sps.gammaln(A) - sps.gammaln(a).sum()) - sps.gammaln(N + A) + sps.gammaln(c + a).sum(-1)

    cands = {"gammaln: lgamma(A) - lgamma(N + A) + sum(lgamma(n + a) - lgamma(a))": textbook}
    if not per_row:
        cands["gammaln, shared alpha: sum(lgamma(n + a)) - sum(lgamma(a)) once"] = hoisted
    return cands, vector_check(lambda fn: fn(0), dm_ref64(counts[0], las[0]), 1e-4)


def kl_ref64(form, p, t):
    p, t = p.astype(np.float64), t.astype(np.float64)
    if form == "prob":
        return float(np.sum(t * (np.log(t) - np.log(p))))
    if form == "log":
        return float(np.sum(t * (np.log(t) - p)))
    lq, lt = sps.log_softmax(p, axis=1), sps.log_softmax(t, axis=1)
    return float(np.sum(np.exp(lt) * (lt - lq)))


def w_kl(spec):
    R, Ccols = spec["dims"]
    sets = spec["rotation_sets"]
    form = {"kl": "prob", "kl_log": "log", "kl_logits": "logits"}[spec["workload"]]
    g = generator(101)
    make_p = uniform01 if form == "prob" else normal
    make_t = normal if form == "logits" else uniform01
    ps = [make_p(g, (R, Ccols)) for _ in range(sets)]
    ts = [make_t(g, (R, Ccols)) for _ in range(sets)]
    inv_r = F32(1.0 / R)

    def log_softmax_hand(v):
        s = v - v.max(axis=1, keepdims=True)
        s -= np.log(np.exp(s).sum(axis=1, keepdims=True))
        return s

    def make(body):
        def call(i, p=None, t=None):
            k = i % sets
            return body(ps[k] if p is None else p, ts[k] if t is None else t)
        return call

    if form == "prob":
        cands = {"np.sum(t * (np.log(t) - np.log(p))) / rows":
                     make(lambda p, t: np.sum(t * (np.log(t) - np.log(p))) * inv_r),
                 "scipy.special.rel_entr(t, p).sum() / rows": make(lambda p, t: sps.rel_entr(t, p).sum() * inv_r)}
        expect = 0.25 * Ccols
    elif form == "log":
        cands = {"np.sum(t * (np.log(t) - x)) / rows": make(lambda x, t: np.sum(t * (np.log(t) - x)) * inv_r),
                 "(scipy.special.xlogy(t, t) - t * x).sum() / rows":
                     make(lambda x, t: (sps.xlogy(t, t) - t * x).sum() * inv_r)}
        expect = -0.25 * Ccols
    else:
        def by_hand(x, y):
            lq, lt = log_softmax_hand(x), log_softmax_hand(y)
            return np.sum(np.exp(lt) * (lt - lq)) * inv_r

        def by_scipy(x, y):
            lq, lt = sps.log_softmax(x, axis=1), sps.log_softmax(y, axis=1)
            return np.sum(np.exp(lt) * (lt - lq)) * inv_r
        cands = {"log-softmax by hand (max, exp, sum, log), sum(exp(lt) * (lt - lq)) / rows": make(by_hand),
                 "scipy.special.log_softmax, sum(exp(lt) * (lt - lq)) / rows": make(by_scipy)}
        expect = 1.0

    def check(fn):
        v = float(fn(0))
        ok1 = math.isfinite(v) and abs(v / expect - 1.0) < 0.02
        sub = min(R, 4)
        p, t = ps[0][:sub], ts[0][:sub]
        v_sub = float(fn(0, p, t)) * R / sub
        ref = kl_ref64(form, p, t) / sub
        ok2 = rel_ok(v_sub, ref, 1e-4 * abs(ref) + 1e-6)
        return v, ok1 and ok2, summary(ok1 and ok2, f"batchmean {v:.6g} vs expected ~{expect:.6g} (2%); first {sub} "
                                                    f"rows {v_sub:.8g} vs float64 {ref:.8g}")
    return cands, check


def w_sum(spec):
    rows, cols = spec["dims"]
    sets = spec["rotation_sets"]
    g = generator(505)
    xs = [g.random((rows, cols), dtype=F32) for _ in range(sets)]

    def total(i):
        return np.add.reduce(xs[i % sets], axis=None)

    def check(fn):
        v = float(fn(0))
        n = rows * cols
        ok1 = math.isfinite(v) and abs(v / (0.5 * n) - 1.0) < 1e-3 + 3.0 / math.sqrt(n)
        m = min(n, 1 << 20)
        head = xs[0].reshape(-1)[:m]
        v_sub, ref = float(np.add.reduce(head)), float(head.astype(np.float64).sum())
        ok2 = rel_ok(v_sub, ref, 1e-5 * ref)
        return v, ok1 and ok2, summary(ok1 and ok2, f"sum {v:.8g} vs expected ~{0.5 * n:.8g} (n/2); first {m}: "
                                                    f"{v_sub:.8g} vs float64 {ref:.8g}")
    return {f"np.add.reduce(x, axis=None) over the [{rows}, {cols}] view": total}, check


def w_sum_rows(spec):
    R, Ccols = spec["dims"]
    sets = spec["rotation_sets"]
    g = generator(505)
    xs = [g.random((R, Ccols), dtype=F32) for _ in range(sets)]
    outs = [np.empty(R, dtype=F32) for _ in range(sets)]

    def rows(i):
        return np.add.reduce(xs[i % sets], axis=1, out=outs[i % sets])
    return ({"np.add.reduce(x, axis=1, out=)": rows},
            vector_check(lambda fn: fn(0), xs[0].astype(np.float64).sum(axis=1), 1e-5))


def w_kl_bw(spec):
    R, Ccols = spec["dims"]
    g = generator(505)
    p, t = uniform01(g, (R, Ccols)), uniform01(g, (R, Ccols))
    gp, gt, tmp = (np.empty((R, Ccols), dtype=F32) for _ in range(3))
    scale = F32(1.0 / R)

    def in_place(i):
        np.divide(t, p, out=gp)
        np.multiply(gp, -scale, out=gp)
        np.log(t, out=gt)
        np.subtract(gt, np.log(p, out=tmp), out=gt)
        np.add(gt, F32(1.0), out=gt)
        np.multiply(gt, scale, out=gt)
        return gp, gt

    def expressions(i):
        return -(t / p) * scale, scale * (np.log(t) - np.log(p) + F32(1.0))

    def check(fn):
        a, b = fn(0)
        m = min(p.size, 1024)
        pp, tt = p.reshape(-1)[:m].astype(np.float64), t.reshape(-1)[:m].astype(np.float64)
        gsc = 1.0 / R
        rp, rt = -(tt / pp) * gsc, gsc * (np.log(tt) - np.log(pp) + 1.0)
        e1 = np.abs(a.reshape(-1)[:m] - rp) / (1e-5 * np.abs(rp) + 1e-30)
        e2 = np.abs(b.reshape(-1)[:m] - rt) / (1e-5 * gsc * (np.abs(np.log(tt)) + np.abs(np.log(pp)) + 1.0) + 1e-30)
        worst = float(max(e1.max(), e2.max()))
        ok = worst <= 1.0
        return float(a.reshape(-1)[0]), ok, summary(ok, f"first {m} elements of both gradients vs float64, "
                                                        f"worst {worst:.3f} of tolerance")
    return {"closed form, np.divide / np.log with out= into preallocated gradients": in_place,
            "closed form as expressions: -(t / p) / rows, (log t - log p + 1) / rows": expressions}, check


def w_dm_bw(spec):
    B, V = spec["dims"]
    g = generator(78)
    counts = np.floor(F32(4.0) * g.random((B, V), dtype=F32))
    la = F32(-2.0) + F32(3.0) * g.random(V, dtype=F32)

    def textbook(i):
        a = np.exp(la)
        A, N = a.sum(), counts.sum(-1)
        r = sps.digamma(A) - sps.digamma(N + A)
        return a * (r.mean() + (sps.digamma(counts + a) - sps.digamma(a)).mean(0))

    def hoisted(i):
        a = np.exp(la)
        A, N = a.sum(), counts.sum(-1)
        r = sps.digamma(A) - sps.digamma(N + A)
        return a * ((r.mean() - sps.digamma(a)) + sps.digamma(counts + a).mean(0))

    a64, c64 = np.exp(la.astype(np.float64)), counts.astype(np.float64)
    A64 = a64.sum()
    ref = a64 * ((sps.digamma(A64) - sps.digamma(c64.sum(-1) + A64)).mean() +
                 (sps.digamma(c64 + a64) - sps.digamma(a64)).mean(0))
    return ({"digamma: alpha (mean(psi(A) - psi(N + A)) + mean(psi(n + a) - psi(a)))": textbook,
             "digamma, psi(a) taken once: alpha (mean(psi(A) - psi(N + A)) - psi(a) + mean(psi(n + a)))": hoisted},
            vector_check(lambda fn: fn(0), ref, 1e-4))


def gmm_objective64(mu, lv, log_w, c, eps, gz, gq):
    """sum(grad_z z) + sum(grad_log_q log q(z)) in float64, with the component c and the noise eps
    held fixed: the function whose gradient tally_gmm_sample_backward gives (docs/ops.md)."""
    rows = np.arange(mu.shape[0])
    z = mu[rows, c] + np.exp(0.5 * lv[rows, c]) * eps
    y = (z[:, None, :] - mu) * np.exp(-0.5 * lv)
    comp = (-0.5 * y * y - 0.5 * lv - 0.5 * LOG_2PI).sum(-1)
    return float((gz * z).sum() + (gq * sps.logsumexp(log_w + comp, axis=-1)).sum())


def w_gmm_bw(spec):
    B, K, D = spec["dims"]
    g0, g = generator(707), generator(303)
    mu, lv = normal(g0, (B, K, D)), uniform01(g0, (B, K, D))
    up = normal(g0, B * D + B)
    gz, gq = up[:B * D].reshape(B, D), up[B * D:]
    logits = np.array([0.1, -0.3, 0.5, 0.0, -1.0, 0.2, 0.7, -0.4] * ((K + 7) // 8), dtype=F32)[:K]
    rows = np.arange(B)
    half, log_2pi_d = F32(0.5), F32(0.5 * D * LOG_2PI)

    def backward(i):
        """The component and noise drawn again (as tally draws them again from its stream), z formed
        again, then the documented closed form: the log density's gradient, responsibility-weighted,
        plus the reparameterisation's at the drawn component."""
        log_w = sps.log_softmax(logits)
        w = np.exp(log_w.astype(np.float64))
        c = g.choice(K, size=B, p=w / w.sum())
        eps = g.standard_normal((B, D), dtype=F32)
        std_c = np.exp(half * lv[rows, c])
        z = mu[rows, c] + std_c * eps
        inv_std = np.exp(-half * lv)
        y = (z[:, None, :] - mu) * inv_std
        v = log_w + ((-half * y * y - half * lv).sum(-1) - log_2pi_d)
        resp = gq[:, None] * np.exp(v - sps.logsumexp(v, axis=-1, keepdims=True))
        grad_mu = resp[:, :, None] * (y * inv_std)
        grad_lv = resp[:, :, None] * (half * y * y - half)
        big_g = gz - grad_mu.sum(1)
        grad_mu[rows, c] += big_g
        grad_lv[rows, c] += big_g * (half * std_c * eps)
        return grad_mu, grad_lv, c, eps

    def check(fn):
        grad_mu, grad_lv, c, eps = fn(0)
        finite = bool(np.isfinite(grad_mu).all() and np.isfinite(grad_lv).all())
        # Central differences of the objective in float64 on a few entries of each gradient: the drawn
        # component of the first rows and another one. The objective is a sum over rows, so the
        # first rows' part is enough.
        n = min(B, 4)
        m64, l64 = mu[:n].astype(np.float64), lv[:n].astype(np.float64)
        args = (sps.log_softmax(logits.astype(np.float64)), c[:n], eps[:n].astype(np.float64),
                gz[:n].astype(np.float64), gq[:n].astype(np.float64))
        worst, h = 0.0, 1e-6
        for b in range(n):
            for k in sorted({int(c[b]), (int(c[b]) + 1) % K}):
                for d in range(min(D, 2)):
                    for which, arr, got in ((0, m64, grad_mu), (1, l64, grad_lv)):
                        plus, minus = arr.copy(), arr.copy()
                        plus[b, k, d] += h
                        minus[b, k, d] -= h
                        pm = (plus, l64) if which == 0 else (m64, plus)
                        mm = (minus, l64) if which == 0 else (m64, minus)
                        fd = (gmm_objective64(*pm, *args) - gmm_objective64(*mm, *args)) / (2 * h)
                        worst = max(worst, abs(float(got[b, k, d]) - fd) / (1e-3 * (1.0 + abs(fd))))
        ok = finite and worst <= 1.0
        return float(grad_mu.reshape(-1)[0]), ok, summary(ok, f"gradients {'finite' if finite else 'NOT FINITE'}; "
                                                              f"vs float64 central differences, worst {worst:.3f} "
                                                              "of tolerance")
    return {"closed form (docs/ops.md): responsibilities, y / std, the drawn component's G": backward}, check


WORKLOADS = {
    "uniform_fill": w_uniform_fill, "raw_fill": w_raw_fill, "normal_fill": w_normal_fill,
    "categorical": w_categorical, "gmm_small": w_gmm, "gmm_large": w_gmm,
    "dm_small": w_dm, "dm_large": w_dm, "dm_large_row": w_dm,
    "kl": w_kl, "kl_log": w_kl, "kl_logits": w_kl,
    "sum_n1": w_sum, "sum_1n": w_sum, "sum_rc": w_sum, "sum_rows_f32": w_sum_rows,
    "kl_bw": w_kl_bw, "dm_bw": w_dm_bw, "gmm_bw": w_gmm_bw,
}


# ---------------------------------------------------------------------------
# The bandwidth probe: NumPy's write (fill) and copy over the ceilings' bytes.
# ---------------------------------------------------------------------------
def ceilings(args):
    scale = max([s for s in args.scales if s <= 1.0] or [min(args.scales)])
    nbytes = max(65536, int(CEIL_BYTES * scale) & ~0xFFFF)
    n = nbytes // 4
    a, b = np.empty(n, dtype=F32), np.zeros(n, dtype=F32)
    a.fill(1.0)  # first touch outside the timing
    out = []
    for name, what, fn, moved in (
            ("ceil_write", "ndarray.fill(1.0), bytes written", lambda i: a.fill(F32(1.0)), nbytes),
            ("ceil_copy", "np.copyto, bytes read + written", lambda i: np.copyto(b, a), 2 * nbytes)):
        t = measure(fn, args, False)
        ok = bool(b[0] == 1.0 and b[-1] == 1.0) if name == "ceil_copy" else bool(a[0] == 1.0 and a[-1] == 1.0)
        rec = {"record": "ceiling", "bench": "numpy", "workload": name, "what": what, "scale": scale,
               "shape": f"{nbytes / GIB:.3f} GiB", "ok": ok, **t,
               "bytes_read": moved / 2 if name == "ceil_copy" else 0, "bytes_written": moved / 2 if name == "ceil_copy"
               else moved, "gbps": moved / (t["ms"] * 1e-3) / 1e9, "value": None,
               "check": "ok" if ok else f"WRONG: {name}"}
        out.append(rec)
    return out


def run_workload(spec, args):
    name = spec["workload"]
    base = {"bench": "numpy", "workload": name, "shape": spec["shape"], "scale": spec["scale"],
            "bytes_read": spec["bytes_read"], "bytes_written": spec["bytes_written"],
            "latency_bound": spec["latency_bound"], "rotation_sets": spec["rotation_sets"],
            "ceiling": spec["ceiling"]}
    if name in NO_FORMULATION:
        return {**base, "record": "no_formulation", "reason": NO_FORMULATION[name]}
    if name not in WORKLOADS:
        return {**base, "record": "no_formulation", "reason": "not written in numpy_baseline.py yet"}
    try:
        cands, check = WORKLOADS[name](spec)
        screened = {k: screen_ms(fn) for k, fn in cands.items()}
        best = min(screened, key=screened.get)
        fn = cands[best]
        t = measure(fn, args, spec["latency_bound"])
        value, ok, text = check(fn)
        rec = {**base, "record": "result", "formulation": best, "candidates": screened, **t,
               "gbps": (spec["bytes_read"] + spec["bytes_written"]) / (t["ms"] * 1e-3) / 1e9,
               "value": value, "ok": ok, "check": text}
    except (MemoryError, ValueError, TypeError, FloatingPointError) as e:
        rec = {**base, "record": "error", "error": f"{type(e).__name__}: {e}"}
    return rec


def finite_or_null(v):
    """JSON has no NaN: non-finite numbers become null, NumPy scalars plain numbers."""
    if isinstance(v, dict):
        return {k: finite_or_null(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite_or_null(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    return v


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", default="build/bench/tally-bench", help="tally-bench, for the workloads' sizes")
    ap.add_argument("--json", help="write JSON lines here (default: none; the terminal gets a summary)")
    ap.add_argument("--only", default="", help="comma-separated workload names (tally-bench's)")
    ap.add_argument("--scale", type=float, default=None)
    ap.add_argument("--scales", default="1", help="comma-separated scales, as tally-bench's --scales")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--calls", type=int, default=0)
    ap.add_argument("--batch-ms", type=float, default=50.0)
    ap.add_argument("--small-calls", type=int, default=1000)
    ap.add_argument("--rotate-mib", type=float, default=120.0)
    ap.add_argument("--no-ceilings", action="store_true")
    args = ap.parse_args(argv)
    args.scales = [args.scale] if args.scale is not None else [float(s) for s in args.scales.split(",") if s]
    if not args.scales or min(args.scales) <= 0 or args.reps < 1 or args.small_calls < 1 or args.batch_ms <= 0:
        ap.error("--scale(s) and --batch-ms must be > 0, --reps and --small-calls >= 1")
    specs = bench_workloads(args)
    out = open(args.json, "w") if args.json else None

    def emit(rec):
        if out is not None:
            out.write(json.dumps(finite_or_null(rec), allow_nan=False) + "\n")
            out.flush()

    emit({"record": "meta", "bench": "numpy", "backend": "numpy", "numpy_version": np.__version__,
          "scipy_version": scipy.__version__, "python": platform.python_version(),
          "device": cpu_model() or platform.machine(), "cpus": os.cpu_count(), "timer": "wall",
          "scales": args.scales, "reps": args.reps, "rotate_mib": args.rotate_mib,
          "threads_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS") if k in os.environ},
          "loadavg": os.getloadavg(),  # other work on the machine makes both sides' times noisy
          "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    print(f"numpy_baseline: NumPy {np.__version__}, SciPy {scipy.__version__}, {cpu_model() or platform.machine()}")
    failures = 0
    if not args.no_ceilings:
        for rec in ceilings(args):
            emit(rec)
            failures += not rec["ok"]
            print(f"{rec['workload']:14s} {rec['shape']:>16s} {rec['ms']:10.3f} ms {rec['gbps']:7.1f} GB/s  {rec['what']}")
    for spec in specs:
        rec = run_workload(spec, args)
        emit(rec)
        if rec["record"] == "result":
            failures += not rec["ok"]
            print(f"{rec['workload']:14s} {rec['shape']:>16s} {rec['ms']:10.3f} ms {rec['gbps']:7.1f} GB/s  "
                  f"{rec['check']}  [{rec['formulation']}]", flush=True)
        elif rec["record"] == "error":
            failures += 1
            print(f"{rec['workload']:14s} {rec['shape']:>16s} FAILED: {rec['error']}", flush=True)
        else:
            print(f"{rec['workload']:14s} {rec['shape']:>16s} no row: {rec['reason']}", flush=True)
    if out is not None:
        out.close()
    print("All checks passed." if failures == 0 else f"{failures} RUNS FAILED OR GAVE WRONG VALUES.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
