#!/usr/bin/env python3
"""Turns tally-bench and torch_baseline JSON lines into the markdown of bench/RESULTS.md.

Usage:
  python3 bench/compare.py --tally cuda.jsonl [--tally opencl.jsonl ...] [--torch torch.jsonl]
                           [--ceilings more.jsonl ...] [--out bench/RESULTS.md]

For each tally file (one backend) it prints a table: workload, tally's time, its effective
bandwidth, that bandwidth as a fraction of the measured ceiling, the target from the issues and
whether it is met, torch eager and torch.compile times, and tally's speedup over each.

Each result is shown as a fraction of the ceiling of its kind (read, write or copy) measured by
tally-bench in the same run ("own"), and, when torch ran on the same device, of torch's ceiling
(torch.sum, copy_, fill_) and any --ceilings files. A bandwidth target is judged against the higher
of the two, so a slow ceiling never flatters a result. Targets apply to full-size runs only
(scale 1).
"""
import argparse
import json
import math
import sys

# Targets from the issues. kind: what is compared; see target_status.
TARGETS = {
    "kl": "<= 0.51 ms and >= 95% of read bandwidth",
    "gmm_small": "< 10 us per call",
    "dm_small": "< 10 us per call",
    "gmm_large": "< 150 us",
    "dm_large": "< 100 us",
    "normal_fill": ">= 90% of write bandwidth",
    "sum_4g": "(none: tally's own read rate)",
    "kl_bf16": ">= 90% of read bandwidth (about 0.26 ms)",
    "dm_large_bf16": "(bytes-proportional: compare with dm_large)",
    "sum_rows_bf16": "(bytes-proportional: about half of sum_rows_f32)",
    "sum_rows_f32": "(the fp32 twin of sum_rows_bf16)",
}
ORDER = ["kl", "gmm_small", "gmm_large", "dm_small", "dm_large", "normal_fill", "sum_4g", "kl_bf16",
         "dm_large_bf16", "sum_rows_bf16", "sum_rows_f32"]
CEIL_KIND = {"ceil_read": "read", "ceil_write": "write", "ceil_copy": "copy"}
WORKLOAD_CEILING = {"kl": "read", "sum_4g": "read", "normal_fill": "write",
                    "gmm_small": "copy", "gmm_large": "copy", "dm_small": "copy", "dm_large": "copy",
                    "kl_bf16": "read", "dm_large_bf16": "copy", "sum_rows_bf16": "copy", "sum_rows_f32": "copy"}


def load(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f"compare.py: {path}:{n}: not JSON ({e}); line skipped", file=sys.stderr)
    return recs


def num(v):
    return v if isinstance(v, (int, float)) and v is not None and math.isfinite(v) else None


def fmt_ms(ms):
    if num(ms) is None:
        return "-"
    return f"{ms * 1e3:.1f} us" if ms < 1.0 else f"{ms:.3f} ms"


def fmt_gbps(g):
    if num(g) is None:
        return "-"
    return f"{g:.0f}" if g >= 100 else f"{g:.3g}"


def fmt_pct(f):
    return "-" if num(f) is None else f"{100.0 * f:.1f}%"


def gather_ceilings(sources):
    """{kind: (gbps, label)}: the highest rate of each kind among sources [(label, records)]."""
    best = {}
    for label, recs in sources:
        for r in recs:
            kind = CEIL_KIND.get(r.get("workload"))
            if r.get("record") != "ceiling" or kind is None or not r.get("ok", False):
                continue
            g = num(r.get("gbps"))
            if g is not None and (kind not in best or g > best[kind][0]):
                best[kind] = (g, f"{label} {r['workload']}")
    return best


def per_call_ms(r):
    """The time a workload is judged by: for latency-bound ones, the host wall clock per call over
    a batch of back-to-back calls (what a user sees); otherwise the device-timed median."""
    if r.get("latency_bound") and num(r.get("wall_us_per_call")) is not None:
        return r["wall_us_per_call"] * 1e-3
    return r.get("ms")


def target_status(name, r, frac, scale):
    if name not in TARGETS or name == "sum_4g":
        return "-"
    if scale != 1:
        return "n/a (scaled run)"
    if not r.get("ok", False):
        return "NO (wrong value)"
    ms = r.get("ms")
    if name == "kl":
        met = num(ms) is not None and ms <= 0.51 and num(frac) is not None and frac >= 0.95
    elif name in ("gmm_small", "dm_small"):
        t = per_call_ms(r)
        met = num(t) is not None and t < 0.010
    elif name == "gmm_large":
        met = num(ms) is not None and ms < 0.150
    elif name == "dm_large":
        met = num(ms) is not None and ms < 0.100
    elif name == "normal_fill":
        met = num(frac) is not None and frac >= 0.90
    elif name == "kl_bf16":
        met = num(frac) is not None and frac >= 0.90
    else:
        return "-"
    return "yes" if met else "NO"


def torch_lookup(torch_recs, name, variant):
    """torch's record for a workload; tally's sum_4g is compared with torch.sum (ceil_read)."""
    tname = "ceil_read" if name == "sum_4g" else name
    for r in torch_recs:
        if r.get("workload") == tname and r.get("variant", "eager") == variant and r.get("record") in ("result", "ceiling"):
            return r
    return None


def speedup(torch_rec, tally_ms):
    if torch_rec is None or num(torch_rec.get("ms")) is None or num(tally_ms) is None or tally_ms <= 0:
        return "-"
    return f"{torch_rec['ms'] / tally_ms:.1f}x"


def same_device(tally_meta, torch_meta):
    """Whether torch ran on the device tally ran on (names compared loosely)."""
    t = str((torch_meta or {}).get("device", "")).lower()
    return bool(t) and t in str(tally_meta.get("device", "")).lower()


def tally_table(tally_recs, torch_recs, torch_meta, extra, out):
    meta = next((r for r in tally_recs if r.get("record") == "meta"), {})
    skipped = next((r for r in tally_recs if r.get("record") == "skipped"), None)
    backend = meta.get("backend") or (skipped or {}).get("backend", "?")
    if skipped is not None:
        out.append(f"### tally on {backend}: skipped\n\n{skipped.get('error', '')}\n")
        return
    scale = meta.get("scale", 1)
    label = f"tally-{backend}"
    own = gather_ceilings([(label, tally_recs)])
    shared = same_device(meta, torch_meta)
    other = gather_ceilings([("torch", torch_recs)] + extra) if shared else {}
    out.append(f"### tally on {backend}: {meta.get('device', '?')}\n")
    out.append(f"tally {meta.get('tally_version', '?')}, timer {meta.get('timer', '?')}, scale {scale:g}, "
               f"median of {meta.get('reps', '?')} batches, inputs rotated to {meta.get('rotate_mib', '?'):g} MiB"
               f" ({meta.get('time', '')}).\n")
    if torch_recs and not shared:
        out.append(f"(torch ran on {(torch_meta or {}).get('device', '?')}, another device: "
                   "its times and ceilings are left out of this table.)\n")
    out.append("| workload | shape | tally | GB/s | of own ceiling | of torch ceiling | target | met "
               "| torch eager | torch.compile | vs eager | vs compile | check |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = {r["workload"]: r for r in tally_recs if r.get("record") in ("result", "error")}
    for name in ORDER:
        r = results.get(name)
        if r is None:
            continue
        te = torch_lookup(torch_recs, name, "eager") if shared else None
        tc = torch_lookup(torch_recs, name, "compile") if shared else None
        if r.get("record") == "error":
            out.append(f"| {name} | {r.get('shape', '')} | FAILED | | | | {TARGETS.get(name, '')} | NO | "
                       f"{fmt_ms((te or {}).get('ms'))} | {fmt_ms((tc or {}).get('ms'))} | | | "
                       f"{r.get('error', '')[:160]} |")
            continue
        kind = WORKLOAD_CEILING.get(name)
        gbps = num(r.get("gbps"))
        f_own = gbps / own[kind][0] if gbps is not None and kind in own else None
        f_other = gbps / other[kind][0] if gbps is not None and kind in other else None
        # A target is held to the higher ceiling, so a slow ceiling cannot flatter it.
        fracs = [f for f in (f_own, f_other) if f is not None]
        tally_cell = fmt_ms(r.get("ms"))
        if r.get("latency_bound"):
            tally_cell += f" (wall {fmt_ms(per_call_ms(r))})"
        status = target_status(name, r, min(fracs) if fracs else None, scale)
        out.append(f"| {name} | {r.get('shape', '')} | {tally_cell} | {fmt_gbps(gbps)} | "
                   f"{fmt_pct(f_own)} {kind or ''} | {fmt_pct(f_other)} | {TARGETS.get(name, '')} | {status} | "
                   f"{fmt_ms((te or {}).get('ms'))} | {fmt_ms((tc or {}).get('ms'))} | "
                   f"{speedup(te, r.get('ms'))} | {speedup(tc, r.get('ms'))} | "
                   f"{'ok' if r.get('ok') else 'WRONG'} |")
    out.append("")
    notes = []
    for name in ORDER:
        r = results.get(name)
        if r and r.get("record") == "result":
            extra_note = ""
            if r.get("latency_bound"):
                single = r.get("single_us")
                extra_note = (f" device {fmt_ms(r.get('ms'))}/call in batches of {r.get('calls_per_batch')}, "
                              f"wall {fmt_ms(per_call_ms(r))}/call, isolated call "
                              f"{fmt_ms(single * 1e-3 if num(single) is not None else None)};")
            notes.append(f"- {name}: value {r.get('value')};{extra_note} check: {r.get('check', '')}")
    if notes:
        out.append("\n".join(notes) + "\n")
    rows = []
    for kind in ("read", "copy", "write"):
        cells = [f"{fmt_gbps(c[kind][0])} GB/s ({c[kind][1]})" for c in (own, other) if kind in c]
        if cells:
            rows.append(f"{kind} " + " / ".join(cells))
    out.append("Ceilings: " + ("; ".join(rows) or "none measured") + ".\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tally", action="append", default=[], help="tally-bench --json output (repeatable)")
    ap.add_argument("--torch", help="torch_baseline.py --json output")
    ap.add_argument("--ceilings", action="append", default=[],
                    help="more JSON lines with ceiling records from the torch run's device")
    ap.add_argument("--out", help="write the markdown here instead of stdout")
    args = ap.parse_args(argv)
    if not args.tally and not args.torch:
        ap.error("give at least one --tally or --torch file")

    torch_recs = load(args.torch) if args.torch else []
    extra = [(path, load(path)) for path in args.ceilings]
    out = ["## Benchmark results\n"]
    torch_meta = next((r for r in torch_recs if r.get("record") == "meta"), None)
    if torch_meta:
        out.append(f"PyTorch {torch_meta.get('torch_version')} (CUDA {torch_meta.get('cuda_version')}) on "
                   f"{torch_meta.get('device')}, scale {torch_meta.get('scale', 1):g}, "
                   f"compile mode {torch_meta.get('compile_mode') or 'default'} ({torch_meta.get('time', '')}).\n")

    for path in args.tally:
        tally_table(load(path), torch_recs, torch_meta, extra, out)

    # tally promises the same bits on every backend: the checked values should agree exactly
    # (each is a float32 scalar or the mean of float32 outputs, printed with 9 significant digits).
    if len(args.tally) > 1:
        runs = []
        for path in args.tally:
            recs = load(path)
            if any(r.get("record") == "skipped" for r in recs):
                continue
            backend = next((r.get("backend") for r in recs if r.get("backend")), "?")
            runs.append((backend, {r["workload"]: r for r in recs if r.get("record") == "result"},
                         next((r.get("scale") for r in recs if r.get("record") == "meta"), None)))
        if len(runs) > 1:
            out.append("### Values across backends\n")
            if len({scale for _, _, scale in runs}) > 1:
                out.append("(The runs used different --scale values, so their values differ by design.)\n")
            out.append("| workload | " + " | ".join(b for b, _, _ in runs) + " | identical |")
            out.append("|---|" + "---|" * len(runs) + "---|")
            for name in ORDER:
                vals = [res.get(name, {}).get("value") for _, res, _ in runs]
                if all(v is None for v in vals):
                    continue
                same = "yes" if None not in vals and len(set(vals)) == 1 else "NO"
                out.append(f"| {name} | " + " | ".join(repr(v) for v in vals) + f" | {same} |")
            out.append("")

    # Every ceiling measured, side by side.
    all_ceil = []
    for label, recs in [("tally-" + str(next((r.get("backend") for r in load(p) if r.get("backend")), "?")), load(p))
                        for p in args.tally] + [("torch", torch_recs)] + extra:
        for r in recs:
            if r.get("record") == "ceiling":
                all_ceil.append(f"| {label} | {r['workload']} | {r.get('what', r.get('variant', ''))} | "
                                f"{r.get('shape', '')} | {fmt_ms(r.get('ms'))} | {fmt_gbps(r.get('gbps'))} | "
                                f"{'ok' if r.get('ok') else 'WRONG'} |")
    if all_ceil:
        out.append("### Measured ceilings\n")
        out.append("| source | ceiling | what | size | time | GB/s | check |")
        out.append("|---|---|---|---|---|---|---|")
        out.extend(all_ceil)
        out.append("")

    # torch-only rows for workloads tally did not run, so the torch file alone still makes a table.
    if torch_recs and not args.tally:
        out.append("### PyTorch only\n")
        out.append("| workload | variant | shape | time | GB/s | value | check |")
        out.append("|---|---|---|---|---|---|---|")
        for r in torch_recs:
            if r.get("record") == "result":
                out.append(f"| {r['workload']} | {r.get('variant')} | {r.get('shape')} | {fmt_ms(r.get('ms'))} | "
                           f"{fmt_gbps(r.get('gbps'))} | {r.get('value')} | {'ok' if r.get('ok') else 'WRONG'} |")
        out.append("")

    out.append("Times are per call: device-timed medians (CUDA events / OpenCL markers) of batches after a "
               "warm-up; for the latency-bound shapes the target is judged on the host wall clock per call "
               "over 1000 back-to-back calls, launch overhead included. GB/s counts each input read once and "
               "each output written once. Speedup = torch time / tally time (device-timed, same batching).")
    text = "\n".join(out) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
