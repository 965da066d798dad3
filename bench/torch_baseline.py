#!/usr/bin/env python3
"""PyTorch baseline for tally-bench: the same workloads, eager and torch.compile.

Times each workload with CUDA events (median over several batches after a
warm-up) and writes JSON lines that bench/report.py reads beside
tally-bench's. The shapes, byte counts, rotation among input copies and
workload names match bench/bench_ops.c:

  uniform_fill Tensor.uniform_() over 2^30 floats (write bandwidth)
  raw_fill     Tensor.random_() over 2^30 int32 (torch's nearest to raw 32-bit draws)
  normal_fill  Tensor.normal_() over 2^30 floats
  categorical  torch.multinomial(w, 1) over weights [65536, 64] (read bandwidth)
  gmm_small    mixture reparameterised sample + logsumexp log density, (B, K, D) = (256, 4, 64)
  gmm_large    the same at (65536, 8, 128)
  dm_small     Dirichlet-multinomial log-likelihood per row, (B, V) = (512, 256)
  dm_large     the same at (65536, 1024), shared log_alpha [V]
  dm_large_row the same with a per-row log_alpha [B, V]
  kl           F.kl_div(torch.log(p), t, reduction='batchmean'), p, t softmaxed [16384, 16384]
               (tally's input_is_prob form: the logarithm is part of the work)
  kl_log       F.kl_div(x, t, reduction='batchmean') with x = log p given (tally's log-input form)
  kl_logits    F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction='batchmean') on raw logits
  sum_n1, sum_1n, sum_rc  torch.sum over 2^30 floats viewed as [n, 1], [1, n], [32768, 32768]
  ceil_read    torch.sum over 2^30 floats, 4 GiB (the read ceiling)
  kl_bw        autograd of kl's loss w.r.t. p and t (forward + backward: torch needs the forward's
               graph; tally's backward op needs nothing saved)
  dm_bw        autograd of dm_large's mean w.r.t. a shared log_alpha (forward + backward)
  gmm_bw       autograd of gmm_large's (z, log_q) w.r.t. mu and log_var, given upstream gradients
               of both (forward + backward)
  ceil_copy    a 4 GiB device-to-device copy (bytes read + written)
  ceil_write   Tensor.fill_ over 4 GiB (write-only)

Usage: python3 bench/torch_baseline.py --json torch.jsonl [--only kl,gmm_small] [--scales 0.0625,0.25,1,4]
torch.compile runs at the --compile-scales only (default 1: each shape compiles on its own, which
costs seconds per shape). Fills, sums and categorical are eager only.
Runs with whatever torch is installed; installs nothing. --device cpu smoke-tests it without a GPU.
"""
import argparse
import json
import math
import statistics
import sys
import time
import traceback

import torch
import torch.nn.functional as F

LOG_2PI = math.log(2.0 * math.pi)
GIB = 1024.0 ** 3
CEILINGS = ["ceil_write", "ceil_read", "ceil_copy"]
WORKLOADS = ["uniform_fill", "raw_fill", "normal_fill", "categorical", "gmm_small", "gmm_large",
             "dm_small", "dm_large", "dm_large_row", "kl", "kl_log", "kl_logits", "sum_n1", "sum_1n", "sum_rc",
             "kl_bf16", "dm_large_bf16", "sum_rows_bf16", "sum_rows_f32", "kl_bw", "dm_bw", "gmm_bw"]


# ---------------------------------------------------------------------------
# The computations, written as a user would write them.
# ---------------------------------------------------------------------------
def kl_fn(p, t):
    return F.kl_div(torch.log(p), t, reduction="batchmean")


def kl_log_fn(x, t):
    return F.kl_div(x, t, reduction="batchmean")


def kl_logits_fn(x, y):
    return F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction="batchmean")


def gmm_sample_fn(mu, log_var, logits):
    """Reparameterised sample of a diagonal Gaussian mixture and its log density.

    mu, log_var: [B, K, D]; logits: [K]. Returns z [B, D] and log q(z) [B].
    """
    B, K, D = mu.shape
    w = torch.softmax(logits, dim=-1)
    c = torch.multinomial(w, B, replacement=True)
    eps = torch.randn(B, D, device=mu.device, dtype=mu.dtype)
    idx = c.view(B, 1, 1).expand(B, 1, D)
    mu_c = mu.gather(1, idx).squeeze(1)
    lv_c = log_var.gather(1, idx).squeeze(1)
    z = mu_c + torch.exp(0.5 * lv_c) * eps
    y = (z.unsqueeze(1) - mu) * torch.exp(-0.5 * log_var)
    comp = (-0.5 * y * y - 0.5 * log_var - 0.5 * LOG_2PI).sum(-1)  # [B, K]
    log_q = torch.logsumexp(torch.log_softmax(logits, dim=-1) + comp, dim=-1)
    return z, log_q


def gmm_log_q64(z, mu, log_var, logits):
    z, mu, log_var, logits = z.double(), mu.double(), log_var.double(), logits.double()
    y = (z.unsqueeze(1) - mu) * torch.exp(-0.5 * log_var)
    comp = (-0.5 * y * y - 0.5 * log_var - 0.5 * LOG_2PI).sum(-1)
    return torch.logsumexp(torch.log_softmax(logits, dim=-1) + comp, dim=-1)


def dm_fn(counts, log_alpha):
    """Dirichlet-multinomial log-likelihood of each row of counts [B, V], log_alpha [V] or [B, V]."""
    alpha = torch.exp(log_alpha)
    A = alpha.sum(-1)
    N = counts.sum(-1)
    return (torch.lgamma(A) - torch.lgamma(N + A)
            + (torch.lgamma(counts + alpha) - torch.lgamma(alpha)).sum(-1))


# ---------------------------------------------------------------------------
# Timing.
# ---------------------------------------------------------------------------
class Clock:
    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.name = "cuda_event" if self.cuda else "wall"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def batch(self, fn, first, calls):
        """Runs calls first..first+calls-1; returns (device ms, wall ms) of the batch."""
        self.sync()
        w0 = time.perf_counter()
        if self.cuda:
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
        for i in range(first, first + calls):
            fn(i)
        if self.cuda:
            e1.record()
            e1.synchronize()
        wall = 1e3 * (time.perf_counter() - w0)
        return (e0.elapsed_time(e1) if self.cuda else wall), wall


def measure(clock, fn, args, latency_bound):
    """Warm-up, then args.reps batches; per-call medians. fn(i) performs call i."""
    idx = 0
    for _ in range(2):
        fn(idx)
        idx += 1
    dev, _ = clock.batch(fn, idx, 1)
    idx += 1
    if args.calls:
        calls = args.calls
    elif latency_bound:
        calls = args.small_calls
    else:
        calls = max(1, min(100000, int(math.ceil(args.batch_ms / max(dev, 1e-4)))))
    clock.batch(fn, idx, calls)  # untimed: steady clocks and caches
    idx += calls
    devs, walls = [], []
    for _ in range(args.reps):
        d, w = clock.batch(fn, idx, calls)
        idx += calls
        devs.append(d / calls)
        walls.append(w / calls)
    out = {"ms": statistics.median(devs), "ms_min": min(devs), "ms_max": max(devs),
           "batches": args.reps, "calls_per_batch": calls, "timer": clock.name,
           "wall_us_per_call": 1e3 * statistics.median(walls), "single_us": None}
    if latency_bound:
        singles = []
        for _ in range(50):
            d, _ = clock.batch(fn, idx, 1)
            idx += 1
            singles.append(1e3 * d)
        out["single_us"] = statistics.median(singles)
    return out


# ---------------------------------------------------------------------------
# Workloads. Each yields records; a failure in one variant is reported and
# the run goes on.
# ---------------------------------------------------------------------------
def scaled(args, n):
    return max(1, int(math.floor(n * args.scale + 0.5)))


def rotation_sets(args, set_bytes):
    rot = args.rotate_mib * 1024 * 1024
    if rot <= 0 or set_bytes >= rot:
        return 1
    return min(4096, int(math.ceil(rot / set_bytes)))


def variants(args, fn):
    """(name, callable) for eager and, unless disabled, torch.compile."""
    out = [("eager", fn)]
    if not args.no_compile and any(abs(args.scale - c) < 1e-12 for c in args.compile_scales):
        try:
            # Forget earlier compilations: the same function at a new shape would
            # otherwise be recompiled with dynamic shapes, which is not what a user
            # compiling for one shape gets.
            import torch._dynamo  # noqa: PLC0415 - only needed when compiling

            torch._dynamo.reset()
            kw = {"mode": args.compile_mode} if args.compile_mode else {}
            out.append(("compile", torch.compile(fn, **kw)))
        except Exception as e:  # noqa: BLE001 - torch.compile itself failing is a result
            out.append(("compile", e))
    return out


def run_variants(ctx, name, shape, fn, call, bytes_read, bytes_written, latency_bound, check):
    """Times call(impl, i) for each variant of fn; check(impl) -> (value, ok, text)."""
    args, clock = ctx["args"], ctx["clock"]
    for variant, impl in variants(args, fn):
        rec = {"workload": name, "variant": variant, "shape": shape,
               "bytes_read": bytes_read, "bytes_written": bytes_written,
               "latency_bound": latency_bound}
        try:
            if isinstance(impl, Exception):
                raise impl
            t = measure(clock, lambda i, impl=impl: call(impl, i), args, latency_bound)
            rec.update(t)
            rec["us"] = 1e3 * t["ms"]
            rec["gbps"] = (bytes_read + bytes_written) / (t["ms"] * 1e-3) / 1e9
            value, ok, text = check(impl)
            rec.update({"value": value, "ok": ok, "check": text, "record": "result"})
        except Exception as e:  # noqa: BLE001 - report and continue with the next variant
            rec.update({"record": "error", "error": f"{type(e).__name__}: {e}"})
            print(f"{name} [{variant}] failed: {type(e).__name__}: {e}", file=sys.stderr)
            if args.verbose:
                traceback.print_exc()
        yield rec


def w_kl(ctx, name="kl", fn=kl_fn, log_input=False, logits=False):
    args, dev = ctx["args"], ctx["device"]
    R, C = scaled(args, 16384), 16384
    sets = rotation_sets(args, 2.0 * R * C * 4)
    g = torch.Generator(device=dev).manual_seed(1)
    make = torch.log_softmax if log_input else torch.softmax
    if logits:
        # Both sides raw N(0, 1) logits: the op normalises them itself.
        make = lambda v, dim: v  # noqa: E731
    ps = [make(torch.randn(R, C, device=dev, generator=g), dim=-1) for _ in range(sets)]
    tmake = (lambda v, dim: v) if logits else torch.softmax
    ts = [tmake(torch.randn(R, C, device=dev, generator=g), dim=-1) for _ in range(sets)]
    ref = fn(ps[0].double(), ts[0].double()).item()
    ctx["clock"].sync()

    def check(impl):
        v = impl(ps[0], ts[0]).item()
        ok = math.isfinite(v) and abs(v - ref) <= 1e-4 * abs(ref) + 1e-7
        return v, ok, f"{'ok' if ok else 'WRONG'}: {v:.8g} vs float64 {ref:.12g}"

    yield from run_variants(ctx, name, f"{R}x{C}", fn,
                            lambda impl, i: impl(ps[i % sets], ts[i % sets]),
                            2.0 * R * C * 4, 4.0, False, check)


def w_gmm(ctx, name, B, K, D, latency_bound):
    args, dev = ctx["args"], ctx["device"]
    B = scaled(args, B)
    sets = rotation_sets(args, (2.0 * B * K * D + B * D + B) * 4)
    g = torch.Generator(device=dev).manual_seed(2)
    mus = [torch.randn(B, K, D, device=dev, generator=g) for _ in range(sets)]
    lvs = [torch.rand(B, K, D, device=dev, generator=g) for _ in range(sets)]
    logits = torch.randn(K, device=dev, generator=g)

    def check(impl):
        z, log_q = impl(mus[0], lvs[0], logits)
        ref = gmm_log_q64(z, mus[0], lvs[0], logits)
        err = (log_q.double() - ref).abs().max().item()
        finite = bool(torch.isfinite(z).all().item() and torch.isfinite(log_q).all().item())
        ok = finite and err <= 1e-3 * (1.0 + ref.abs().max().item())
        v = log_q.double().mean().item()
        return v, ok, f"{'ok' if ok else 'WRONG'}: mean log_q {v:.8g}, max |log_q - float64| {err:.3g}"

    yield from run_variants(ctx, name, f"{B}x{K}x{D}", gmm_sample_fn,
                            lambda impl, i: impl(mus[i % sets], lvs[i % sets], logits),
                            (2.0 * B * K * D + K) * 4, (B * D + B) * 4.0, latency_bound, check)


def mean_check(run, ref, rel, note=""):
    """A workload's check of a vector output against its float64 ref: every
    element finite and within rel * (1 + max |ref|); the value is the mean."""
    def check(impl):
        out = run(impl)
        err = (out.double() - ref).abs().max().item()
        ok = bool(torch.isfinite(out).all().item()) and err <= rel * (1.0 + ref.abs().max().item())
        v = out.double().mean().item()
        return v, ok, f"{'ok' if ok else 'WRONG'}: mean {v:.8g}, max |out - float64| {err:.3g}{note}"
    return check


def w_dm(ctx, name, B, V, latency_bound, per_row=False):
    args, dev = ctx["args"], ctx["device"]
    B = scaled(args, B)
    sets = rotation_sets(args, ((2 if per_row else 1) * B * V + B) * 4.0)
    g = torch.Generator(device=dev).manual_seed(3)
    counts = [torch.floor(4.0 * torch.rand(B, V, device=dev, generator=g)) for _ in range(sets)]
    if per_row:
        las = [torch.rand(B, V, device=dev, generator=g) for _ in range(sets)]
    else:
        las = [-2.0 + 3.0 * torch.rand(V, device=dev, generator=g)] * sets
    log_alpha = las[0]
    ref = dm_fn(counts[0].double(), log_alpha.double())

    check = mean_check(lambda impl: impl(counts[0], log_alpha), ref, 1e-4)
    yield from run_variants(ctx, name, f"{B}x{V}", dm_fn,
                            lambda impl, i: impl(counts[i % sets], las[i % sets]),
                            (B * V + (B * V if per_row else V)) * 4.0, B * 4.0, latency_bound, check)


# bf16 workloads: the same ops on bf16 tensors, written as a user would
# (torch computes in bf16 where tally widens to fp32; the checks are
# against float64 on the same bf16 values, with bf16-sized tolerances).
def w_kl_bf16(ctx):
    args, dev = ctx["args"], ctx["device"]
    R, C = scaled(args, 16384), 16384
    sets = rotation_sets(args, 2.0 * R * C * 2)
    g = torch.Generator(device=dev).manual_seed(1)
    ps = [(0.001 + 0.999 * torch.rand(R, C, device=dev, generator=g)).to(torch.bfloat16) for _ in range(sets)]
    ts = [(0.001 + 0.999 * torch.rand(R, C, device=dev, generator=g)).to(torch.bfloat16) for _ in range(sets)]
    ref = kl_fn(ps[0].double(), ts[0].double()).item()
    ctx["clock"].sync()

    def check(impl):
        v = impl(ps[0], ts[0]).float().item()
        ok = math.isfinite(v) and abs(v - ref) <= 2e-2 * abs(ref) + 1e-3
        return v, ok, f"{'ok' if ok else 'WRONG'}: {v:.8g} vs float64 {ref:.12g} (bf16 tolerance)"

    yield from run_variants(ctx, "kl_bf16", f"{R}x{C}", kl_fn,
                            lambda impl, i: impl(ps[i % sets], ts[i % sets]),
                            2.0 * R * C * 2, 2.0, False, check)


def w_dm_half(ctx, name, B, V):
    args, dev = ctx["args"], ctx["device"]
    B = scaled(args, B)
    sets = rotation_sets(args, (B * V + B) * 2.0)
    g = torch.Generator(device=dev).manual_seed(3)
    counts = [torch.floor(4.0 * torch.rand(B, V, device=dev, generator=g)).to(torch.bfloat16) for _ in range(sets)]
    log_alpha = (-2.0 + 3.0 * torch.rand(V, device=dev, generator=g)).to(torch.bfloat16)
    ref = dm_fn(counts[0].double(), log_alpha.double())

    check = mean_check(lambda impl: impl(counts[0], log_alpha), ref, 5e-2, " (bf16 tolerance)")
    yield from run_variants(ctx, name, f"{B}x{V}", dm_fn,
                            lambda impl, i: impl(counts[i % sets], log_alpha),
                            (B * V + V) * 2.0, B * 2.0, False, check)


def sum_rows_fn(x):
    return x.sum(-1)


def w_sum_rows(ctx, name, B, V, dtype):
    args, dev = ctx["args"], ctx["device"]
    B = scaled(args, B)
    size = 2.0 if dtype == torch.bfloat16 else 4.0
    sets = rotation_sets(args, B * V * size)
    g = torch.Generator(device=dev).manual_seed(4)
    xs = [torch.rand(B, V, device=dev, generator=g).to(dtype) for _ in range(sets)]
    ref = xs[0].double().sum(-1)

    check = mean_check(lambda impl: impl(xs[0]), ref, 1e-2 if dtype == torch.bfloat16 else 1e-5)
    yield from run_variants(ctx, name, f"{B}x{V}", sum_rows_fn, lambda impl, i: impl(xs[i % sets]),
                            B * V * size, B * size, False, check)


def eager_only(ctx, name, shape, call, bytes_read, bytes_written, check, record="result", what=None):
    saved = ctx["args"].no_compile
    ctx["args"].no_compile = True
    try:
        for rec in run_variants(ctx, name, shape, None, lambda impl, i: call(i),
                                bytes_read, bytes_written, False, lambda impl: check()):
            if rec["record"] == "result":
                rec["record"] = record
            if what:
                rec["what"] = what
            yield rec
    finally:
        ctx["args"].no_compile = saved


def w_fill(ctx, name):
    """uniform_fill, raw_fill, normal_fill: 2^30 draws into a preallocated tensor."""
    args, dev = ctx["args"], ctx["device"]
    n = (scaled(args, 1 << 30) + 3) // 4 * 4
    sets = rotation_sets(args, n * 4.0)
    dtype = torch.int32 if name == "raw_fill" else torch.float32
    bufs = [torch.empty(n, device=dev, dtype=dtype) for _ in range(sets)]
    fill = {"uniform_fill": lambda x: x.uniform_(), "raw_fill": lambda x: x.random_(),
            "normal_fill": lambda x: x.normal_()}[name]
    # random_ on int32 draws from [0, 2^31 - 1]: mean 2^30, std 2^31 / sqrt(12).
    want_mean, want_std = {"uniform_fill": (0.5, 12 ** -0.5), "raw_fill": (2.0 ** 30, 2.0 ** 31 * 12 ** -0.5),
                           "normal_fill": (0.0, 1.0)}[name]

    def check():
        x = fill(bufs[0])[: 1 << 22].double()
        m, s = x.mean().item(), x.std().item()
        ok = abs(m - want_mean) < 5.0 * want_std / math.sqrt(x.numel()) + 1e-3 * want_std \
            and abs(s / want_std - 1.0) < 1e-2
        return s, ok, f"{'ok' if ok else 'WRONG'}: mean {m:.6g} std {s:.6g}"

    yield from eager_only(ctx, name, str(n), lambda i: fill(bufs[i % sets]), 0.0, n * 4.0, check)


def w_categorical(ctx):
    args, dev = ctx["args"], ctx["device"]
    R, C = scaled(args, 65536), 64
    sets = rotation_sets(args, (R * C + R) * 4.0)
    g = torch.Generator(device=dev).manual_seed(5)
    ws = [torch.rand(R, C, device=dev, generator=g) for _ in range(sets)]

    def check():
        idx = torch.multinomial(ws[0], 1, replacement=True)
        m = idx.double().mean().item()
        ok = bool(((idx >= 0) & (idx < C)).all().item()) and abs(m - 0.5 * (C - 1)) < 5.0 * C / math.sqrt(12.0 * R) + 0.01
        return m, ok, f"{'ok' if ok else 'WRONG'}: mean index {m:.4f} vs ~{0.5 * (C - 1):.1f}"

    yield from eager_only(ctx, "categorical", f"{R}x{C}", lambda i: torch.multinomial(ws[i % sets], 1, replacement=True),
                          R * C * 4.0, R * 8.0, check)


def w_sum(ctx, name):
    args, dev = ctx["args"], ctx["device"]
    if name == "sum_rc":
        rows, cols = scaled(args, 32768), 32768
    else:
        n = (scaled(args, 1 << 30) + 3) // 4 * 4
        rows, cols = (n, 1) if name == "sum_n1" else (1, n)
    n = rows * cols
    sets = rotation_sets(args, n * 4.0)
    g = torch.Generator(device=dev).manual_seed(6)
    xs = [torch.rand(rows, cols, device=dev, generator=g) for _ in range(sets)]

    def check():
        v = torch.sum(xs[0]).item()
        ok = math.isfinite(v) and abs(v / (0.5 * n) - 1.0) < 1e-2
        return v, ok, f"{'ok' if ok else 'WRONG'}: sum {v:.8g} vs ~{0.5 * n:.8g}"

    yield from eager_only(ctx, name, f"{rows}x{cols}", lambda i: torch.sum(xs[i % sets]), n * 4.0, 4.0, check)


def ceil_elems(args):
    return (scaled(args, 1 << 30) + 3) // 4 * 4


def w_ceil_read(ctx):
    args, dev = ctx["args"], ctx["device"]
    n = ceil_elems(args)
    sets = rotation_sets(args, n * 4.0)
    g = torch.Generator(device=dev).manual_seed(4)
    xs = [torch.rand(n, device=dev, generator=g) for _ in range(sets)]

    def check():
        v = torch.sum(xs[0]).item()
        ok = math.isfinite(v) and abs(v / (0.5 * n) - 1.0) < 1e-2
        return v, ok, f"{'ok' if ok else 'WRONG'}: sum {v:.8g} vs ~{0.5 * n:.8g}"

    yield from eager_only(ctx, "ceil_read", f"{n * 4 / GIB:.3f} GiB", lambda i: torch.sum(xs[i % sets]),
                          n * 4.0, 4.0, check, record="ceiling",
                          what="torch.sum, bytes read")


def w_ceil_copy(ctx):
    args, dev = ctx["args"], ctx["device"]
    n = ceil_elems(args)
    src = torch.ones(n, device=dev)
    dst = torch.empty(n, device=dev)

    def check():
        dst.zero_()
        dst.copy_(src)
        ok = bool((dst == 1.0).all().item())
        return float("nan"), ok, "ok" if ok else "WRONG: copy"

    yield from eager_only(ctx, "ceil_copy", f"{n * 4 / GIB:.3f} GiB", lambda i: dst.copy_(src),
                          n * 4.0, n * 4.0, check, record="ceiling",
                          what="Tensor.copy_, bytes read + written")


def w_ceil_write(ctx):
    args, dev = ctx["args"], ctx["device"]
    n = ceil_elems(args)
    buf = torch.empty(n, device=dev)

    def check():
        buf.fill_(1.0)
        ok = bool((buf == 1.0).all().item())
        return float("nan"), ok, "ok" if ok else "WRONG: fill"

    yield from eager_only(ctx, "ceil_write", f"{n * 4 / GIB:.3f} GiB", lambda i: buf.fill_(1.0),
                          0.0, n * 4.0, check, record="ceiling",
                          what="Tensor.fill_, bytes written")


def w_kl_bw(ctx):
    args, dev = ctx["args"], ctx["device"]
    R, C = scaled(args, 16384), 16384
    g = torch.Generator(device=dev).manual_seed(11)
    p = torch.softmax(torch.randn(R, C, device=dev, generator=g), dim=-1).requires_grad_()
    t = torch.softmax(torch.randn(R, C, device=dev, generator=g), dim=-1).requires_grad_()
    p64, t64 = p.detach().double().requires_grad_(), t.detach().double().requires_grad_()
    ref_p, ref_t = torch.autograd.grad(kl_fn(p64, t64), (p64, t64))
    del p64, t64
    ctx["clock"].sync()

    def check(impl):
        gp, gt = torch.autograd.grad(impl(p, t), (p, t))
        err_p = ((gp.double() - ref_p).abs() / (ref_p.abs() + 1e-30)).max().item()
        err_t = ((gt.double() - ref_t).abs() / (ref_t.abs().max() + 1e-30)).max().item()
        ok = err_p <= 1e-4 and err_t <= 1e-4
        return gp[0, 0].item(), ok, f"{'ok' if ok else 'WRONG'}: max rel err grad_p {err_p:.3g}, grad_t {err_t:.3g}"

    yield from run_variants(ctx, "kl_bw", f"{R}x{C}", kl_fn,
                            lambda impl, i: torch.autograd.grad(impl(p, t), (p, t)),
                            2.0 * R * C * 4, 2.0 * R * C * 4, False, check)


def w_dm_bw(ctx):
    args, dev = ctx["args"], ctx["device"]
    B, V = scaled(args, 65536), 1024
    g = torch.Generator(device=dev).manual_seed(13)
    counts = torch.floor(4.0 * torch.rand(B, V, device=dev, generator=g))
    log_alpha = (-2.0 + 3.0 * torch.rand(V, device=dev, generator=g)).requires_grad_()
    la64 = log_alpha.detach().double().requires_grad_()
    (ref,) = torch.autograd.grad(dm_fn(counts.double(), la64).mean(), (la64,))

    def loss(c, la):
        return dm_fn(c, la).mean()

    def check(impl):
        (gl,) = torch.autograd.grad(impl(counts, log_alpha), (log_alpha,))
        err = (gl.double() - ref).abs().max().item()
        ok = bool(torch.isfinite(gl).all().item()) and err <= 1e-4 * (1.0 + ref.abs().max().item())
        return gl[0].item(), ok, f"{'ok' if ok else 'WRONG'}: max |grad - float64| {err:.3g}"

    yield from run_variants(ctx, "dm_bw", f"{B}x{V}", loss,
                            lambda impl, i: torch.autograd.grad(impl(counts, log_alpha), (log_alpha,)),
                            (B * V + V) * 4.0, V * 4.0, False, check)


def w_gmm_bw(ctx):
    args, dev = ctx["args"], ctx["device"]
    B, K, D = scaled(args, 65536), 8, 128
    g = torch.Generator(device=dev).manual_seed(17)
    mu = torch.randn(B, K, D, device=dev, generator=g).requires_grad_()
    lv = torch.rand(B, K, D, device=dev, generator=g).requires_grad_()
    logits = torch.randn(K, device=dev, generator=g)
    gz = torch.randn(B, D, device=dev, generator=g)
    gq = torch.randn(B, device=dev, generator=g)

    def check(impl):
        gmu, glv = torch.autograd.grad(impl(mu, lv, logits), (mu, lv), (gz, gq))
        ok = bool(torch.isfinite(gmu).all().item() and torch.isfinite(glv).all().item())
        return gmu.double().abs().mean().item(), ok, f"{'ok' if ok else 'WRONG'}: gradients finite"

    yield from run_variants(ctx, "gmm_bw", f"{B}x{K}x{D}", gmm_sample_fn,
                            lambda impl, i: torch.autograd.grad(impl(mu, lv, logits), (mu, lv), (gz, gq)),
                            (2.0 * B * K * D + B * D + B) * 4, 2.0 * B * K * D * 4, False, check)


RUNNERS = {
    "kl_bf16": lambda ctx: w_kl_bf16(ctx),
    "dm_large_bf16": lambda ctx: w_dm_half(ctx, "dm_large_bf16", 65536, 1024),
    "sum_rows_bf16": lambda ctx: w_sum_rows(ctx, "sum_rows_bf16", 65536, 1024, torch.bfloat16),
    "sum_rows_f32": lambda ctx: w_sum_rows(ctx, "sum_rows_f32", 65536, 1024, torch.float32),
    "ceil_write": w_ceil_write,
    "ceil_read": w_ceil_read,
    "ceil_copy": w_ceil_copy,
    "uniform_fill": lambda ctx: w_fill(ctx, "uniform_fill"),
    "raw_fill": lambda ctx: w_fill(ctx, "raw_fill"),
    "normal_fill": lambda ctx: w_fill(ctx, "normal_fill"),
    "categorical": w_categorical,
    "gmm_small": lambda ctx: w_gmm(ctx, "gmm_small", 256, 4, 64, True),
    "gmm_large": lambda ctx: w_gmm(ctx, "gmm_large", 65536, 8, 128, False),
    "dm_small": lambda ctx: w_dm(ctx, "dm_small", 512, 256, True),
    "dm_large": lambda ctx: w_dm(ctx, "dm_large", 65536, 1024, False),
    "dm_large_row": lambda ctx: w_dm(ctx, "dm_large_row", 65536, 1024, False, per_row=True),
    "kl": w_kl,
    "kl_log": lambda ctx: w_kl(ctx, "kl_log", kl_log_fn, log_input=True),
    "kl_logits": lambda ctx: w_kl(ctx, "kl_logits", kl_logits_fn, logits=True),
    "sum_n1": lambda ctx: w_sum(ctx, "sum_n1"),
    "sum_1n": lambda ctx: w_sum(ctx, "sum_1n"),
    "sum_rc": lambda ctx: w_sum(ctx, "sum_rc"),
    "kl_bw": w_kl_bw,
    "dm_bw": w_dm_bw,
    "gmm_bw": w_gmm_bw,
}


# ---------------------------------------------------------------------------
# Output.
# ---------------------------------------------------------------------------
def fmt_time(ms):
    if ms is None or not math.isfinite(ms):
        return "-"
    return f"{ms * 1e3:.2f} us" if ms < 1.0 else f"{ms:.3f} ms"


def print_row(rec):
    if rec["record"] == "error":
        print(f"{rec['workload']:<12} {rec['variant']:<8} {rec['shape']:<16} FAILED: {rec['error']}")
        return
    wall = fmt_time(rec["wall_us_per_call"] * 1e-3) if rec.get("latency_bound") else ""
    single = fmt_time(rec["single_us"] * 1e-3) if rec.get("single_us") is not None else ""
    value = rec.get("value")
    value = f"{value:.8g}" if isinstance(value, float) and math.isfinite(value) else "-"
    print(f"{rec['workload']:<12} {rec['variant']:<8} {rec['shape']:<16} {fmt_time(rec['ms']):>11} "
          f"{wall:>11} {single:>11} {rec['gbps']:9.1f}  {value:<14} {'ok' if rec['ok'] else 'WRONG'}")
    if not rec["ok"]:
        print(f"{'':13}check: {rec['check']}")


def clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write JSON lines here")
    ap.add_argument("--only", help="comma-separated workloads: " + " ".join(CEILINGS + WORKLOADS))
    ap.add_argument("--scale", type=float, default=None, help="multiply batch sizes and element counts")
    ap.add_argument("--scales", default=None,
                    help="comma-separated scales, each workload at each in turn (default 1); the ceilings run "
                         "once, at the largest scale up to 1")
    ap.add_argument("--compile-scales", default="1",
                    help="scales at which torch.compile runs too (default 1; 'all' for every scale)")
    ap.add_argument("--reps", type=int, default=5, help="timed batches per measurement (median)")
    ap.add_argument("--calls", type=int, default=0, help="calls per batch (default: sized by --batch-ms)")
    ap.add_argument("--batch-ms", type=float, default=50.0, help="target batch length")
    ap.add_argument("--small-calls", type=int, default=1000, help="calls per batch for gmm_small, dm_small")
    ap.add_argument("--rotate-mib", type=float, default=120.0, help="rotate among input copies of this total")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (cpu: smoke test only)")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--compile-mode", default=None, help="torch.compile mode (default: torch's default)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    args = ap.parse_args(argv)
    if args.scales:
        scales = [float(v) for v in args.scales.split(",") if v]
    else:
        scales = [args.scale if args.scale is not None else 1.0]
    if not scales or any(not v > 0 for v in scales):
        ap.error("scales must be > 0")
    args.compile_scales = scales if args.compile_scales == "all" else \
        [float(v) for v in args.compile_scales.split(",") if v]
    below = [v for v in scales if v <= 1.0]
    ceil_scale = max(below) if below else min(scales)

    names = CEILINGS + WORKLOADS if not args.only else [s for s in args.only.split(",") if s]
    unknown = [s for s in names if s not in RUNNERS]
    if unknown:
        ap.error(f"unknown workload(s): {', '.join(unknown)}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("torch_baseline: CUDA is not available to this torch; use --device cpu for a smoke test",
              file=sys.stderr)
        return 2
    if device.type == "cuda":
        if device.index is None:  # torch.cuda.set_device refuses a device without an index
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        dev_name = torch.cuda.get_device_name(device)
    else:
        dev_name = "cpu"
    ctx = {"args": args, "device": device, "clock": Clock(device)}
    out = open(args.json, "w") if args.json else None
    meta = {"record": "meta", "bench": "torch", "torch_version": torch.__version__,
            "cuda_version": torch.version.cuda, "device": dev_name,
            "scale": scales[0] if len(scales) == 1 else None, "scales": scales,
            "ceiling_scale": ceil_scale, "compile_scales": args.compile_scales,
            "reps": args.reps, "rotate_mib": args.rotate_mib, "compile_mode": args.compile_mode,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if out:
        out.write(json.dumps(meta) + "\n")
        out.flush()
    print(f"torch_baseline: torch {torch.__version__} (CUDA {torch.version.cuda}), device {dev_name}, "
          f"scales {','.join(f'{v:g}' for v in scales)}, {args.reps} batches per median\n")
    print(f"{'workload':<12} {'variant':<8} {'shape':<16} {'time/call':>11} {'wall/call':>11} {'single':>11} "
          f"{'GB/s':>9}  {'value':<14} check")
    failures = 0
    plan = [(ceil_scale, n) for n in names if n in CEILINGS]
    plan += [(sc, n) for sc in scales for n in names if n not in CEILINGS]
    for scale, name in plan:
        args.scale = scale
        try:
            for rec in RUNNERS[name](ctx):
                rec = {"bench": "torch", "backend": "torch-" + device.type, "scale": scale, **rec}
                failures += rec["record"] == "error" or not rec.get("ok", False)
                print_row(rec)
                if out:
                    out.write(json.dumps({k: clean(v) for k, v in rec.items()}) + "\n")
                    out.flush()
        except Exception as e:  # noqa: BLE001 - setup failed (e.g. out of memory): report, go on
            failures += 1
            msg = f"{type(e).__name__}: {e}"
            print(f"{name:<12} setup failed: {msg}")
            if args.verbose:
                traceback.print_exc()
            if out:
                out.write(json.dumps({"record": "error", "bench": "torch", "workload": name, "scale": scale,
                                      "error": msg}) + "\n")
                out.flush()
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if out:
        out.close()
    print("\n" + ("SOME RUNS FAILED OR GAVE WRONG VALUES." if failures else "All checks passed."))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
