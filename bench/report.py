#!/usr/bin/env python3
"""One comparison of tally and PyTorch from the JSON lines of one GPU run: markdown and plots.

Usage:
  python3 bench/report.py --tally tally-cuda.jsonl --tally tally-opencl.jsonl --torch torch.jsonl \\
                          [--commit SHA] [--out RESULTS-run.md] [--png-dir DIR]
  python3 bench/report.py --tally tally-host.jsonl --numpy numpy.jsonl      # the CPU table

With --numpy (numpy_baseline.py's records) and a tally-bench run on the host backend, it writes the
CPU table instead: each workload's time on tally's host backend (the dispatch path named, from the
device of tally's meta record) beside NumPy/SciPy float32 timed on the same machine, their ratio,
the bytes per second of each and the floor from the bandwidth probe of the same run (tally-bench's
host ceilings and numpy_baseline.py's fill and copy, the highest of each kind).

Reads tally-bench's records (one file per backend) and torch_baseline.py's (eager and
torch.compile), all measured in the same call on the same GPU, and writes:

- the main table at scale 1: for each workload its floor (bytes read / read ceiling + bytes
  written / write ceiling, the ceilings measured in the same run: the higher of tally's and
  torch's of each kind), tally on CUDA and on OpenCL, torch eager and torch.compile, the target
  of issue 9 and whether it is met (and by how much it is missed);
- time against size: every workload at each scale the run used, for every implementation;
- tally's values across backends (the same bits promise: they must be identical);
- every ceiling measured;
- with --png-dir and matplotlib: workloads.png (time per workload at scale 1 for tally CUDA,
  tally OpenCL, torch eager, torch.compile and the floor) and scaling.png (time against bytes
  moved, one panel per workload).

Nothing here is measured: it only reads the files it is given.
"""
import argparse
import json
import math
import re
import sys

# Workloads in report order: (name, what, ceiling kind of the floor).
WORKLOADS = [
    ("uniform_fill", "uniform fill 2^30 fp32", "write"),
    ("raw_fill", "raw uint32 fill 2^30", "write"),
    ("normal_fill", "normal fill 2^30", "write"),
    ("categorical", "categorical over weights [65536, 64]", "read"),
    ("gmm_small", "mixture sample + log q 256x4x64 (back to back)", "copy"),
    ("gmm_large", "mixture sample + log q 65536x8x128", "copy"),
    ("dm_small", "Dirichlet-multinomial 512x256 (back to back)", "copy"),
    ("dm_large", "Dirichlet-multinomial 65536x1024, shared alpha", "copy"),
    ("dm_large_row", "Dirichlet-multinomial 65536x1024, per-row alpha", "copy"),
    ("kl", "KL batchmean 16384^2, input_is_prob", "read"),
    ("kl_log", "KL batchmean 16384^2, log input", "read"),
    ("kl_logits", "KL batchmean 16384^2 from logits (both sides)", "read"),
    ("sum_n1", "sum of 4 GiB as [2^30, 1]", "read"),
    ("sum_1n", "sum of 4 GiB as [1, 2^30]", "read"),
    ("sum_rc", "sum of 4 GiB as [32768, 32768]", "read"),
    ("kl_bf16", "KL batchmean bf16 16384^2, input_is_prob", "read"),
    ("dm_large_bf16", "Dirichlet-multinomial 65536x1024 bf16, shared alpha", "copy"),
    ("sum_rows_f32", "row sums 65536x1024 fp32", "read"),
    ("sum_rows_bf16", "row sums 65536x1024 bf16", "read"),
    ("kl_bw", "KL backward 16384^2, both gradients (torch: forward + backward)", "copy"),
    ("dm_bw", "Dirichlet-multinomial backward 65536x1024, shared alpha (torch: forward + backward)", "copy"),
    ("gmm_bw", "mixture sample backward 65536x8x128 (torch: forward + backward)", "copy"),
]
NAMES = [w[0] for w in WORKLOADS]
WHAT = {w[0]: w[1] for w in WORKLOADS}
CEIL_KIND = {"ceil_read": "read", "ceil_write": "write", "ceil_copy": "copy"}
IMPLS = ["tally CUDA", "tally OpenCL", "torch eager", "torch.compile"]
LATENCY_BOUND = {"gmm_small", "dm_small"}


def load(path):
    recs = []
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    recs.append(json.loads(line))
                except json.JSONDecodeError as e:
                    print(f"report.py: {path}:{n}: not JSON ({e}); line skipped", file=sys.stderr)
    except OSError as e:
        print(f"report.py: {path}: {e}", file=sys.stderr)
    return recs


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def fmt_us(us):
    if num(us) is None:
        return "-"
    if us >= 1000.0:
        return f"{us / 1000.0:.3f} ms"
    return f"{us:.1f} us" if us >= 10.0 else f"{us:.2f} us"


def scale_key(v):
    return round(float(v), 9) if num(v) is not None else None


def frac_str(scale):
    for k in (16, 4, 1):
        if abs(scale * k - 1.0) < 1e-9:
            return f"1/{k}" if k > 1 else "1"
    return f"{scale:g}"


class Run:
    """Every record of one GPU call, indexed by (impl, workload, scale)."""

    def __init__(self, tally_files, torch_file):
        self.meta = {}
        self.results = {}  # (impl, workload, scale) -> record
        self.ceilings = []  # (source, record)
        for path in tally_files:
            recs = load(path)
            meta = next((r for r in recs if r.get("record") == "meta"), None)
            skipped = next((r for r in recs if r.get("record") == "skipped"), None)
            backend = (meta or skipped or {}).get("backend", "?")
            impl = {"cuda": "tally CUDA", "opencl": "tally OpenCL"}.get(backend, f"tally {backend}")
            self.meta[impl] = meta or skipped or {}
            for r in recs:
                self._add(impl, r)
        if torch_file:
            recs = load(torch_file)
            self.meta["torch"] = next((r for r in recs if r.get("record") == "meta"), {})
            for r in recs:
                impl = "torch.compile" if r.get("variant") == "compile" else "torch eager"
                self._add(impl, r, source="torch")

    def _add(self, impl, r, source=None):
        kind = r.get("record")
        if kind == "ceiling":
            self.ceilings.append((source or impl, r))
        elif kind in ("result", "error") and r.get("workload"):
            # Every workload is kept (the CPU table has them all); the GPU tables list NAMES.
            self.results[(impl, r["workload"], scale_key(r.get("scale", 1.0)))] = r

    def scales(self):
        return sorted({k[2] for k in self.results if k[2] is not None and k[1] in NAMES})

    def ref_scale(self):
        """The scale of the main table: 1 when the run has it, else its largest."""
        sc = self.scales()
        return 1.0 if 1.0 in sc or not sc else sc[-1]

    def best_ceiling(self, kind):
        """The highest ceiling of a kind measured in this run (GB/s, label)."""
        best = None
        for source, r in self.ceilings:
            if CEIL_KIND.get(r.get("workload")) != kind or not r.get("ok", False) or num(r.get("gbps")) is None:
                continue
            if best is None or r["gbps"] > best[0]:
                best = (r["gbps"], f"{source} {r['workload']}")
        return best

    def get(self, impl, name, scale):
        return self.results.get((impl, name, scale_key(scale)))

    def floor_us(self, name, scale):
        """bytes read / read ceiling + bytes written / write ceiling, from any record's byte counts."""
        rec = next((r for r in (self.get(i, name, scale) for i in IMPLS) if r and num(r.get("bytes_read")) is not None),
                   None)
        if rec is None:
            return None
        rd, wr = self.best_ceiling("read"), self.best_ceiling("write")
        t = 0.0
        if rec.get("bytes_read"):
            if rd is None:
                return None
            t += rec["bytes_read"] / (rd[0] * 1e9)
        if rec.get("bytes_written"):
            if wr is None:
                return None
            t += rec["bytes_written"] / (wr[0] * 1e9)
        return t * 1e6


def judged_us(r):
    """A record's time per call in us: the wall clock per call of back-to-back calls for the
    latency-bound shapes (what a user sees, launch included), else the device-timed median."""
    if r is None or r.get("record") != "result":
        return None
    if r.get("latency_bound") and num(r.get("wall_us_per_call")) is not None:
        return r["wall_us_per_call"]
    return r["ms"] * 1e3 if num(r.get("ms")) is not None else None


def target(run, name, impl):
    """(target text, status text) for one tally implementation at scale 1."""
    r = run.get(impl, name, run.ref_scale())
    us = judged_us(r)
    if r is None:
        return "", "not run"
    if r.get("record") == "error":
        return "", "FAILED"
    if not r.get("ok", False):
        return "", "NO (wrong value)"
    if run.ref_scale() != 1.0:
        return "", "n/a (scaled run)"
    floor = run.floor_us(name, 1.0)

    def limit(text, bound_us):
        if us is None or bound_us is None:
            return text, "-"
        return text, "met" if us <= bound_us else f"missed by {us / bound_us:.2f}x"

    if name in ("uniform_fill", "raw_fill"):
        return limit(">= 90% of write ceiling", floor / 0.9 if floor else None)
    if name == "normal_fill":
        te = judged_us(run.get("torch eager", name, 1.0))
        text = "faster than torch normal_ (aim 2x)"
        if te is None or us is None:
            return text, "-"
        return text, (f"met ({te / us:.2f}x torch)" if us < te else f"missed ({te / us:.2f}x torch)")
    if name == "categorical":
        return limit("at the read limit (>= 90%)", floor / 0.9 if floor else None)
    if name in ("gmm_small", "dm_small"):
        return limit("<= 5 us per call", 5.0)
    if name == "gmm_large":
        return limit("<= 150 us", 150.0)
    if name == "dm_large":
        return limit("<= 80 us", 80.0)
    if name == "dm_large_row":
        return limit("<= 160 us", 160.0)
    if name in ("kl", "kl_log"):
        return limit(">= 95% of read ceiling", floor / 0.95 if floor else None)
    if name == "kl_logits":
        return limit("<= 1.5x one read of both inputs", 1.5 * floor if floor else None)
    if name == "kl_bf16":
        return limit(">= 90% of read ceiling", floor / 0.9 if floor else None)
    if name == "kl_bw":
        return limit("at the read + write floor", floor)
    if name in ("dm_bw", "gmm_bw"):
        text = "<= 1.5x the floor, faster than torch.compile"
        tc = judged_us(run.get("torch.compile", name, 1.0))
        _, st = limit(text, 1.5 * floor if floor else None)
        if tc is not None and us is not None:
            st += (f"; {tc / us:.2f}x faster than torch.compile" if us < tc
                   else f"; {us / tc:.2f}x slower than torch.compile")
        return text, st
    if name in ("dm_large_bf16", "sum_rows_f32", "sum_rows_bf16"):
        return "time proportional to bytes", "-"
    if name.startswith("sum_"):
        base = judged_us(run.get(impl, "sum_1n", 1.0))
        if base is None or us is None:
            return "same as [1, n]", "-"
        return "same as [1, n] (5%)", ("met" if us <= 1.05 * base else f"missed by {us / base:.2f}x")
    return "", "-"


def main_table(run, out):
    if not any(k[0] in IMPLS for k in run.results):
        return
    ref = run.ref_scale()
    out.append(f"### tally against PyTorch and the floor, scale {frac_str(ref)}\n")
    out.append("Device-timed medians per call (CUDA events for tally CUDA and torch, OpenCL markers for "
               "tally OpenCL); the back-to-back shapes show the host wall clock per call over 1000 calls, "
               "launch included. % = floor / time.\n")
    out.append("| workload | floor | tally CUDA | tally OpenCL | torch eager | torch.compile | target | CUDA | OpenCL |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for name in NAMES:
        cells = []
        floor = run.floor_us(name, ref)
        if all(run.get(i, name, ref) is None for i in IMPLS):
            continue
        for impl in IMPLS:
            r = run.get(impl, name, ref)
            us = judged_us(r)
            if r is not None and r.get("record") == "error":
                cells.append("FAILED")
            elif us is None:
                cells.append("-")
            else:
                pct = f" ({100.0 * floor / us:.0f}%)" if floor else ""
                bad = "" if r.get("ok", False) else " WRONG"
                cells.append(f"{fmt_us(us)}{pct}{bad}")
        text, st_cuda = target(run, name, "tally CUDA")
        _, st_cl = target(run, name, "tally OpenCL")
        out.append(f"| {WHAT[name]} | {fmt_us(floor)} | " + " | ".join(cells) + f" | {text} | {st_cuda} | {st_cl} |")
    out.append("")


def scaling_table(run, out):
    scales = run.scales()
    if len(scales) < 2 or not any(k[0] in IMPLS for k in run.results):
        return
    out.append("### Time against size\n")
    out.append("Each workload at each scale of its batch dimension (or element count); time per call. "
               "The last column is time(4) / time(1): 4.0 is linear.\n")
    out.append("| workload | implementation | " + " | ".join(frac_str(s) for s in scales) + " | x4 / x1 |")
    out.append("|---|---|" + "---|" * len(scales) + "---|")
    for name in NAMES:
        for impl in IMPLS + ["floor"]:
            times = [run.floor_us(name, s) if impl == "floor" else judged_us(run.get(impl, name, s)) for s in scales]
            if all(t is None for t in times):
                continue
            ratio = "-"
            if 1.0 in scales and 4.0 in scales:
                t1, t4 = times[scales.index(1.0)], times[scales.index(4.0)]
                if t1 and t4:
                    ratio = f"{t4 / t1:.2f}"
            out.append(f"| {name} | {impl} | " + " | ".join(fmt_us(t) for t in times) + f" | {ratio} |")
    out.append("")


def values_table(run, out):
    impls = [i for i in ("tally CUDA", "tally OpenCL") if any(k[0] == i for k in run.results)]
    if len(impls) < 2:
        return
    out.append("### tally's values across backends\n")
    out.append("The printed value of each workload (a scalar result, or the mean of the outputs) with 9 "
               "significant digits; tally promises the same bits on every backend.\n")
    out.append("| workload | scale | " + " | ".join(impls) + " | identical |")
    out.append("|---|---|" + "---|" * len(impls) + "---|")
    mismatches = 0
    for name in NAMES:
        for s in run.scales():
            vals = [(run.get(i, name, s) or {}).get("value") for i in impls]
            if all(v is None for v in vals):
                continue
            same = None not in vals and len(set(vals)) == 1
            mismatches += not same
            out.append(f"| {name} | {frac_str(s)} | " + " | ".join(repr(v) for v in vals) +
                       f" | {'yes' if same else 'NO'} |")
    out.append("")
    out.append(f"{'Every value identical.' if mismatches == 0 else f'{mismatches} values DIFFER.'}\n")


def ceilings_table(run, out):
    if not run.ceilings:
        return
    out.append("### Ceilings measured in this run\n")
    out.append("| source | ceiling | what | size | time | GB/s | check |")
    out.append("|---|---|---|---|---|---|---|")
    for source, r in run.ceilings:
        ms, gbps = num(r.get("ms")), num(r.get("gbps"))
        out.append(f"| {source} | {r.get('workload')} | {r.get('what', '')} | {r.get('shape', '')} | "
                   f"{fmt_us(ms * 1e3 if ms is not None else None)} | {f'{gbps:.0f}' if gbps else '-'} | "
                   f"{'ok' if r.get('ok') else 'WRONG'} |")
    best = [f"{k} {run.best_ceiling(k)[0]:.0f} GB/s ({run.best_ceiling(k)[1]})"
            for k in ("read", "write", "copy") if run.best_ceiling(k)]
    out.append("")
    out.append("Floors use the highest of each kind: " + ("; ".join(best) or "none measured") + ".\n")


def variants_table(run, paths, out):
    """tally CUDA at this commit against builds with other kernel switches (kernels/abi.h)."""
    rows = []
    for path in paths:
        recs = load(path)
        meta = next((r for r in recs if r.get("record") == "meta"), {})
        label = meta.get("variant") or path.rsplit("/", 1)[-1]
        for r in recs:
            if r.get("record") not in ("result", "error") or r.get("workload") not in NAMES:
                continue
            base = run.get("tally CUDA", r["workload"], r.get("scale", 1.0))
            tb, tv = judged_us(base), judged_us(r)
            ratio = f"{tv / tb:.2f}" if tb and tv else "-"
            same = "yes" if base and base.get("value") == r.get("value") else "NO"
            rows.append(f"| {r['workload']} | {frac_str(r.get('scale', 1.0))} | {fmt_us(tb)} | {label} | "
                        f"{fmt_us(tv)} | {ratio} | {same} |")
    if rows:
        out.append("### Kernel variants (tally CUDA)\n")
        out.append("The same commit built with other compile-time switches of kernels/abi.h, in the same call; "
                   "the value must not change (the switches move work between work-items, never a bit).\n")
        out.append("| workload | scale | this build | variant | variant time | variant / this | same value |")
        out.append("|---|---|---|---|---|---|---|")
        out.extend(rows)
        out.append("")


class NumpyRun:
    """numpy_baseline.py's records: meta, ceilings, results and the workloads it has no row for."""

    def __init__(self, path):
        recs = load(path)
        self.meta = next((r for r in recs if r.get("record") == "meta"), {})
        self.ceilings = [r for r in recs if r.get("record") == "ceiling"]
        self.results = {(r.get("workload"), scale_key(r.get("scale", 1.0))): r for r in recs
                        if r.get("record") in ("result", "error", "no_formulation")}
        self.order = []
        for r in recs:
            if r.get("record") in ("result", "error", "no_formulation") and r["workload"] not in self.order:
                self.order.append(r["workload"])

    def get(self, name, scale):
        return self.results.get((name, scale_key(scale)))


HOST = "tally host"


def host_dispatch(meta):
    """The host backend's dispatch path and thread count, from its device name
    ("host CPU (2 threads, avx512) (host)"), or the whole name when it has another form."""
    dev = meta.get("device", "")
    m = re.search(r"\((\d+) threads?, ([^)]+)\)", dev)
    return (m.group(2), m.group(1)) if m else (dev or "?", "?")


def cpu_ceilings(run, nrun):
    """kind -> (GB/s, label): the highest ok ceiling of each kind from tally's host run and NumPy's probe."""
    best = {}
    sources = [(HOST, r) for src, r in run.ceilings if src == HOST] + [("NumPy", r) for r in nrun.ceilings]
    for source, r in sources:
        kind, gbps = CEIL_KIND.get(r.get("workload")), num(r.get("gbps"))
        if kind is None or gbps is None or not r.get("ok", False):
            continue
        if kind not in best or gbps > best[kind][0]:
            best[kind] = (gbps, f"{source} {r['workload']} ({r.get('what', '')})")
    return best


def cpu_floor_us(rec, ceil):
    """bytes read / read ceiling + bytes written / write ceiling, in us."""
    t = 0.0
    for key, kind in (("bytes_read", "read"), ("bytes_written", "write")):
        b = num(rec.get(key)) or 0.0
        if b:
            if kind not in ceil:
                return None
            t += b / (ceil[kind][0] * 1e9)
    return t * 1e6


def cpu_cell(r, floor):
    """A time cell with its % of the floor, or why there is no time."""
    if r is None:
        return "not run"
    if r.get("record") == "error":
        return "FAILED"
    if r.get("record") == "no_formulation":
        return "no NumPy formulation"
    us = judged_us(r)
    if us is None:
        return "-"
    pct = f" ({100.0 * floor / us:.0f}%)" if floor else ""
    return f"{fmt_us(us)}{pct}{'' if r.get('ok', False) else ' WRONG'}"


def gbps_cell(r):
    us = judged_us(r)
    if us is None:
        return "-"
    moved = (num(r.get("bytes_read")) or 0.0) + (num(r.get("bytes_written")) or 0.0)
    return f"{moved / (us * 1e-6) / 1e9:.2f}"


def cpu_table(run, nrun, out):
    """tally's host backend beside NumPy/SciPy float32 on the same machine, one table per scale."""
    hmeta = run.meta.get(HOST, {})
    path, threads = host_dispatch(hmeta)
    order = [k[1] for k in run.results if k[0] == HOST]
    names = list(dict.fromkeys(order + nrun.order))
    scales = sorted({k[2] for k in run.results if k[0] == HOST and k[2] is not None} |
                    {k[1] for k in nrun.results if k[1] is not None})
    ceil = cpu_ceilings(run, nrun)
    nm = nrun.meta
    out.append("### CPU: tally's host backend against NumPy / SciPy float32\n")
    out.append(f"- tally host backend: dispatch path **{path}**, {threads} threads; device "
               f"`{hmeta.get('device', '?')}`, tally {hmeta.get('tally_version', '?')}, median of "
               f"{hmeta.get('reps', '?')} batches (wall clock), inputs rotated to {hmeta.get('rotate_mib', '?')} MiB.")
    out.append(f"- NumPy {nm.get('numpy_version', '?')}, SciPy {nm.get('scipy_version', '?')}, Python "
               f"{nm.get('python', '?')}, one process, on {nm.get('device', '?')} ({nm.get('cpus', '?')} CPUs): "
               f"the same shapes, bytes and rotation (from `tally-bench --list-workloads`), timed the same way, "
               f"median of {nm.get('reps', '?')} batches; the fastest of the formulations screened (last column).")
    probe = "; ".join(f"{k} {ceil[k][0]:.1f} GB/s ({ceil[k][1]})" for k in ("read", "write", "copy") if k in ceil)
    out.append(f"- Bandwidth probe of this run, the highest of each kind: {probe or 'none measured'}. "
               "floor = bytes read / read + bytes written / write; % = floor / time.")
    out.append("")
    ratios = []
    for s in scales:
        out.append(f"#### scale {frac_str(s)}\n")
        out.append("| workload | shape | floor | tally host | NumPy / SciPy | tally / NumPy | tally GB/s | "
                   "NumPy GB/s | NumPy formulation |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for name in names:
            t, n = run.get(HOST, name, s), nrun.get(name, s)
            if t is None and n is None:
                continue
            rec = next((r for r in (t, n) if r and num(r.get("bytes_read")) is not None), None)
            floor = cpu_floor_us(rec, ceil) if rec else None
            tu, nu = judged_us(t), judged_us(n)
            ratio = "-"
            if tu and nu and t.get("ok") and n.get("ok"):
                ratio = f"{tu / nu:.2f}"
                ratios.append(tu / nu)
            formulation = (n or {}).get("formulation", "")
            shape = (t or n).get("shape", "")
            out.append(f"| {name} | {shape} | {fmt_us(floor)} | {cpu_cell(t, floor)} | {cpu_cell(n, floor)} | "
                       f"{ratio} | {gbps_cell(t)} | {gbps_cell(n)} | {formulation} |")
        out.append("")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        out.append(f"tally / NumPy over the {len(ratios)} comparisons: geometric mean {geo:.2f}, "
                   f"{sum(r <= 1.0 for r in ratios)} at 1.0 or less (issue 10's target at scale 1).\n")
    missing = {}
    for r in nrun.results.values():
        if r.get("record") == "no_formulation":
            missing.setdefault(r.get("reason", ""), []).append(r["workload"])
    for reason, which in missing.items():
        out.append(f"- No NumPy row for {', '.join(sorted(set(which)))}: {reason}.")
    if missing:
        out.append("")


def problems(run, out):
    lines = []
    for (impl, name, s), r in sorted(run.results.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2] or 0)):
        if r.get("record") == "error":
            lines.append(f"- {impl} {name} at scale {frac_str(s)}: FAILED: {r.get('error', '')[:200]}")
        elif not r.get("ok", False):
            lines.append(f"- {impl} {name} at scale {frac_str(s)}: WRONG: {r.get('check', '')[:200]}")
    if lines:
        out.append("### Failed or wrong results\n")
        out.extend(lines)
        out.append("")


def plots(run, png_dir, title):
    try:
        import matplotlib  # noqa: PLC0415 - optional: the tables do not need it

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as e:
        print(f"report.py: no plots ({e})", file=sys.stderr)
        return []
    colors = {"tally CUDA": "#1f77b4", "tally OpenCL": "#17becf", "torch eager": "#d62728",
              "torch.compile": "#ff7f0e", "floor": "#7f7f7f"}
    made = []
    # 1. Time per workload at the main table's scale.
    ref = run.ref_scale()
    names = [n for n in NAMES if any(run.get(i, n, ref) for i in IMPLS)]
    if names:
        series = IMPLS + ["floor"]
        fig, ax = plt.subplots(figsize=(10, 0.55 * len(names) + 1.5))
        h = 0.8 / len(series)
        for k, impl in enumerate(series):
            ys, xs = [], []
            for j, n in enumerate(names):
                t = run.floor_us(n, ref) if impl == "floor" else judged_us(run.get(impl, n, ref))
                if t:
                    ys.append(j + (k - (len(series) - 1) / 2) * h)
                    xs.append(t)
            ax.barh(ys, xs, height=h, color=colors[impl], label=impl)
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels([WHAT[n] for n in names], fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("time per call (us, log scale)")
        ax.set_title(f"{title}: time per workload at scale {frac_str(ref)}", fontsize=10)
        ax.grid(axis="x", which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        path = f"{png_dir}/workloads.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    # 2. Time against size, one panel per workload.
    scales = run.scales()
    if len(scales) >= 2 and names:
        cols = 4
        rows = (len(names) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
        for j, n in enumerate(names):
            ax = axes[j // cols][j % cols]
            for impl in IMPLS + ["floor"]:
                pts = []
                for s in scales:
                    t = run.floor_us(n, s) if impl == "floor" else judged_us(run.get(impl, n, s))
                    rec = next((run.get(i, n, s) for i in IMPLS if run.get(i, n, s)), None)
                    mb = ((rec or {}).get("bytes_read") or 0) + ((rec or {}).get("bytes_written") or 0)
                    if t and mb:
                        pts.append((mb / 1e6, t))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                            ls="--" if impl == "floor" else "-", color=colors[impl], label=impl)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(n, fontsize=9)
            ax.set_xlabel("MB moved", fontsize=8)
            ax.set_ylabel("us per call", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(which="both", alpha=0.3)
        for j in range(len(names), rows * cols):
            axes[j // cols][j % cols].axis("off")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower right", fontsize=9)
        fig.suptitle(f"{title}: time against size", fontsize=11)
        fig.tight_layout()
        path = f"{png_dir}/scaling.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        made.append(path)
    return made


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tally", action="append", default=[], help="tally-bench --json output (repeatable)")
    ap.add_argument("--torch", help="torch_baseline.py --json output")
    ap.add_argument("--numpy", help="numpy_baseline.py --json output: the CPU table beside a host --tally run")
    ap.add_argument("--commit", default="", help="the commit measured, for the heading")
    ap.add_argument("--out", help="write the markdown here instead of stdout")
    ap.add_argument("--png-dir", help="draw workloads.png and scaling.png here (needs matplotlib)")
    ap.add_argument("--variant", action="append", default=[],
                    help="tally-bench JSON lines of a variant build (its meta may carry a 'variant' label)")
    args = ap.parse_args(argv)
    if not args.tally and not args.torch and not args.numpy:
        ap.error("give at least one --tally, --torch or --numpy file")
    run = Run(args.tally, args.torch)
    dev = next((m.get("device") for m in run.meta.values() if m.get("device")), "?")
    out = [f"## Run: {next((m.get('time') for m in run.meta.values() if m.get('time')), '')}"
           f"{', commit ' + args.commit if args.commit else ''}, {dev}\n"]
    for impl, m in run.meta.items():
        if impl == "torch":
            out.append(f"- PyTorch {m.get('torch_version', '?')} (CUDA {m.get('cuda_version', '?')}), "
                       f"torch.compile at scales {m.get('compile_scales', '?')}.")
        else:
            extra = f" skipped: {m.get('error', '')}" if m.get("record") == "skipped" else ""
            out.append(f"- {impl}: {m.get('device', '?')}, tally {m.get('tally_version', '?')}, timer "
                       f"{m.get('timer', '?')}, median of {m.get('reps', '?')} batches, inputs rotated to "
                       f"{m.get('rotate_mib', '?')} MiB.{extra}")
    out.append("")
    if args.numpy:
        cpu_table(run, NumpyRun(args.numpy), out)
    main_table(run, out)
    scaling_table(run, out)
    values_table(run, out)
    variants_table(run, args.variant, out)
    ceilings_table(run, out)
    problems(run, out)
    if args.png_dir:
        for path in plots(run, args.png_dir, dev):
            out.append(f"Plot: `{path.rsplit('/', 1)[-1]}`")
        out.append("")
    text = "\n".join(out) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
