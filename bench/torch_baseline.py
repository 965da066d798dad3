#!/usr/bin/env python3
"""PyTorch baseline for tally-bench: the same workloads, eager and torch.compile.

Times each workload with CUDA events (median over several batches after a
warm-up) and writes JSON lines that bench/compare.py reads beside
tally-bench's. The shapes, byte counts, rotation among input copies and
workload names match bench/bench_ops.c:

  kl           F.kl_div(torch.log(p), t, reduction='batchmean'), p, t softmaxed [16384, 16384]
  gmm_small    mixture reparameterised sample + logsumexp log density, (B, K, D) = (256, 4, 64)
  gmm_large    the same at (65536, 8, 128)
  dm_small     Dirichlet-multinomial log-likelihood per row, (B, V) = (512, 256)
  dm_large     the same at (65536, 1024)
  normal_fill  Tensor.normal_() over 2^28 floats (write bandwidth)
  kl_bw        autograd of kl's loss w.r.t. p and t (forward + backward: torch needs the forward's
               graph; tally's backward op needs nothing saved)
  dm_bw        autograd of dm_large's mean w.r.t. a shared log_alpha (forward + backward)
  gmm_bw       autograd of gmm_large's (z, log_q) w.r.t. mu and log_var, given upstream gradients
               of both (forward + backward)
  ceil_read    torch.sum over 2^30 floats, 4 GiB (the read ceiling; tally's sum_4g)
  ceil_copy    a 4 GiB device-to-device copy (bytes read + written)
  ceil_write   Tensor.fill_ over 4 GiB (write-only)

Usage: python3 bench/torch_baseline.py --json torch.jsonl [--only kl,gmm_small] [--scale 0.01]
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
WORKLOADS = ["ceil_write", "ceil_read", "ceil_copy", "kl", "gmm_small", "gmm_large",
             "dm_small", "dm_large", "normal_fill", "kl_bw", "dm_bw", "gmm_bw"]


# ---------------------------------------------------------------------------
# The computations, written as a user would write them.
# ---------------------------------------------------------------------------
def kl_fn(p, t):
    return F.kl_div(torch.log(p), t, reduction="batchmean")


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
    """Dirichlet-multinomial log-likelihood of each row of counts [B, V], shared log_alpha [V]."""
    alpha = torch.exp(log_alpha)
    A = alpha.sum()
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
    if not args.no_compile:
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


def w_kl(ctx):
    args, dev = ctx["args"], ctx["device"]
    R, C = scaled(args, 16384), 16384
    sets = rotation_sets(args, 2.0 * R * C * 4)
    g = torch.Generator(device=dev).manual_seed(1)
    ps = [torch.softmax(torch.randn(R, C, device=dev, generator=g), dim=-1) for _ in range(sets)]
    ts = [torch.softmax(torch.randn(R, C, device=dev, generator=g), dim=-1) for _ in range(sets)]
    ref = kl_fn(ps[0].double(), ts[0].double()).item()
    ctx["clock"].sync()

    def check(impl):
        v = impl(ps[0], ts[0]).item()
        ok = math.isfinite(v) and abs(v - ref) <= 1e-4 * abs(ref) + 1e-7
        return v, ok, f"{'ok' if ok else 'WRONG'}: {v:.8g} vs float64 {ref:.12g}"

    yield from run_variants(ctx, "kl", f"{R}x{C}", kl_fn,
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


def w_dm(ctx, name, B, V, latency_bound):
    args, dev = ctx["args"], ctx["device"]
    B = scaled(args, B)
    sets = rotation_sets(args, (B * V + B) * 4.0)
    g = torch.Generator(device=dev).manual_seed(3)
    counts = [torch.floor(4.0 * torch.rand(B, V, device=dev, generator=g)) for _ in range(sets)]
    log_alpha = -2.0 + 3.0 * torch.rand(V, device=dev, generator=g)
    ref = dm_fn(counts[0].double(), log_alpha.double())

    def check(impl):
        out = impl(counts[0], log_alpha)
        err = (out.double() - ref).abs().max().item()
        ok = bool(torch.isfinite(out).all().item()) and err <= 1e-4 * (1.0 + ref.abs().max().item())
        v = out.double().mean().item()
        return v, ok, f"{'ok' if ok else 'WRONG'}: mean {v:.8g}, max |out - float64| {err:.3g}"

    yield from run_variants(ctx, name, f"{B}x{V}", dm_fn,
                            lambda impl, i: impl(counts[i % sets], log_alpha),
                            (B * V + V) * 4.0, B * 4.0, latency_bound, check)


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


def w_normal_fill(ctx):
    args, dev = ctx["args"], ctx["device"]
    n = (scaled(args, 1 << 28) + 3) // 4 * 4
    sets = rotation_sets(args, n * 4.0)
    bufs = [torch.empty(n, device=dev) for _ in range(sets)]

    def check():
        x = bufs[0].normal_()
        m, s = x.double().mean().item(), x.double().std().item()
        ok = abs(m) < 5.0 / math.sqrt(n) + 1e-3 and abs(s - 1.0) < 5.0 / math.sqrt(n) + 1e-3
        return s, ok, f"{'ok' if ok else 'WRONG'}: mean {m:.5f} std {s:.5f}"

    yield from eager_only(ctx, "normal_fill", str(n), lambda i: bufs[i % sets].normal_(), 0.0, n * 4.0, check)


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
    "ceil_write": w_ceil_write,
    "ceil_read": w_ceil_read,
    "ceil_copy": w_ceil_copy,
    "kl": w_kl,
    "gmm_small": lambda ctx: w_gmm(ctx, "gmm_small", 256, 4, 64, True),
    "gmm_large": lambda ctx: w_gmm(ctx, "gmm_large", 65536, 8, 128, False),
    "dm_small": lambda ctx: w_dm(ctx, "dm_small", 512, 256, True),
    "dm_large": lambda ctx: w_dm(ctx, "dm_large", 65536, 1024, False),
    "normal_fill": w_normal_fill,
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
    ap.add_argument("--only", help="comma-separated workloads: " + " ".join(WORKLOADS))
    ap.add_argument("--scale", type=float, default=1.0, help="multiply batch sizes and element counts")
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

    names = WORKLOADS if not args.only else [s for s in args.only.split(",") if s]
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
            "cuda_version": torch.version.cuda, "device": dev_name, "scale": args.scale,
            "reps": args.reps, "rotate_mib": args.rotate_mib, "compile_mode": args.compile_mode,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if out:
        out.write(json.dumps(meta) + "\n")
        out.flush()
    print(f"torch_baseline: torch {torch.__version__} (CUDA {torch.version.cuda}), device {dev_name}, "
          f"scale {args.scale:g}, {args.reps} batches per median\n")
    print(f"{'workload':<12} {'variant':<8} {'shape':<16} {'time/call':>11} {'wall/call':>11} {'single':>11} "
          f"{'GB/s':>9}  {'value':<14} check")
    failures = 0
    for name in names:
        try:
            for rec in RUNNERS[name](ctx):
                rec = {"bench": "torch", "backend": "torch-" + device.type, **rec}
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
                out.write(json.dumps({"record": "error", "bench": "torch", "workload": name, "error": msg}) + "\n")
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
