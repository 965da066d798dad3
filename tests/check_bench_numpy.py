#!/usr/bin/env python3
"""The CPU table's pipeline end to end, at a tiny scale: tally-bench on the host backend,
bench/numpy_baseline.py and bench/report.py --numpy, as bench/cpu_table.sh runs them.

Usage: check_bench_numpy.py TALLY_BENCH TALLY_CLI

Checks, with no timing assertion:
- both runs exit 0: every tally workload and every NumPy formulation passed its own value check
  (each against float64 or a known expectation);
- numpy_baseline.py timed exactly the workloads, shapes and byte counts that tally-bench ran
  (it takes them from `tally-bench --list-workloads`), and gave a `no_formulation` record with a
  reason for the others, which must be the ones its NO_FORMULATION table names;
- the CPU table has one row per workload of `tally-bench --list-workloads`, with a time in both
  columns and a ratio where NumPy has a formulation, "no NumPy formulation" where not;
- the table names the host dispatch path that `tally info` reports for the host device, and
  names "scalar" when TALLY_HOST_IMPL=scalar forces it.
Without numpy or scipy in this Python (the bench's dependencies, not tally's) it runs itself again
with the build's python-venv (scripts/test_python.sh makes it) or, when there is none, exits 77
(SKIP).
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

BENCH_DIR = pathlib.Path(__file__).resolve().parents[1] / "bench"
SCALE = "0.001"
# Tiny batches: this is a check of the pipeline, not a measurement.
TIMING = ["--reps", "1", "--batch-ms", "1", "--small-calls", "5", "--rotate-mib", "1"]
TIME_CELL = re.compile(r"^\d+(\.\d+)? (us|ms)( \(\d+%\))?$")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def run(cmd, env=None):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
    return r


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def table_rows(markdown):
    """workload -> cells of the CPU table (the first table after its heading)."""
    rows, inside = {}, False
    for line in markdown.splitlines():
        if line.startswith("### CPU"):
            inside = True
        elif line.startswith("### "):
            inside = False
        elif inside and line.startswith("| ") and not line.startswith("| workload") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            check(cells[0] not in rows, f"one row per workload: {cells[0]} twice")
            rows[cells[0]] = cells
    return rows


def host_path_from_info(cli, env):
    """The dispatch path in `tally info`'s host device line: "host CPU (2 threads, avx512)"."""
    r = run([cli, "info"], env=env)
    m = re.search(r"host CPU \(\d+ threads?, ([^)]+)\)", r.stdout)
    return m.group(1) if m else None


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import numpy  # noqa: F401, PLC0415 - only whether it is there
        import scipy.special  # noqa: F401, PLC0415
    except ImportError as e:
        # The build's Python venv (scripts/test_python.sh makes it) has them.
        venv = pathlib.Path(sys.argv[1]).resolve().parent.parent / "python-venv" / "bin" / "python"
        if venv.exists() and not os.environ.get("TALLY_BENCH_NUMPY_RERUN"):
            return subprocess.run([str(venv), __file__, *sys.argv[1:]],
                                  env=dict(os.environ, TALLY_BENCH_NUMPY_RERUN="1")).returncode
        print(f"SKIP: this Python ({sys.executable}) has no {e.name}: the bench's dependency "
              f"(and there is no {venv})")
        return 77
    bench, cli = sys.argv[1], sys.argv[2]
    sys.path.insert(0, str(BENCH_DIR))
    import numpy_baseline  # noqa: PLC0415 - needs numpy, imported after the check

    env = {k: v for k, v in os.environ.items() if k != "TALLY_HOST_IMPL"}
    listed = run([bench, "--list-workloads", "--scale", SCALE, "--rotate-mib", "1"])
    check(listed.returncode == 0, "tally-bench --list-workloads exits 0")
    specs = {r["workload"]: r for r in (json.loads(line) for line in listed.stdout.splitlines() if line.strip())}
    check(len(specs) >= 20, f"tally-bench lists its workloads ({len(specs)})")
    check(set(numpy_baseline.NO_FORMULATION) <= set(specs), "every NO_FORMULATION name is a tally-bench workload")

    with tempfile.TemporaryDirectory() as tmp:
        tj, nj, md = (os.path.join(tmp, n) for n in ("tally.jsonl", "numpy.jsonl", "table.md"))
        r = run([bench, "--backend", "host", "--scale", SCALE, *TIMING, "--json", tj], env=env)
        check(r.returncode == 0, "tally-bench --backend host exits 0 (every workload ran and passed its check)")
        r = run([sys.executable, BENCH_DIR / "numpy_baseline.py", "--bench", bench, "--scale", SCALE, *TIMING,
                 "--json", nj])
        check(r.returncode == 0, "numpy_baseline.py exits 0 (every formulation passed its check)")
        r = run([sys.executable, BENCH_DIR / "report.py", "--tally", tj, "--numpy", nj, "--out", md])
        check(r.returncode == 0, "report.py --numpy exits 0")
        tally = {x["workload"]: x for x in load(tj) if x.get("record") == "result"}
        nrecs = load(nj)
        numpy = {x["workload"]: x for x in nrecs if x.get("record") in ("result", "no_formulation", "error")}
        text = pathlib.Path(md).read_text()

        # The same workloads, shapes and bytes on both sides.
        check(set(tally) == set(specs), f"tally-bench ran every listed workload: missing {set(specs) - set(tally)}")
        check(set(numpy) == set(specs), f"numpy_baseline.py covered every listed workload: "
                                        f"missing {set(specs) - set(numpy)}")
        for name, spec in specs.items():
            n = numpy.get(name, {})
            for key in ("shape", "bytes_read", "bytes_written"):
                check(n.get(key) == spec[key] == tally.get(name, {}).get(key),
                      f"{name}: {key} the same in the list, tally's run and NumPy's")
            want = "no_formulation" if name in numpy_baseline.NO_FORMULATION else "result"
            check(n.get("record") == want, f"{name}: NumPy record {n.get('record')}, want {want}")
            if want == "result":
                check(n.get("ok") is True and n.get("formulation"), f"{name}: NumPy result ok and its formulation named")
        check(any(x.get("record") == "ceiling" and x.get("ok") for x in nrecs), "NumPy's bandwidth probe ran")

        # The table: every workload, times and ratios where both exist.
        rows = table_rows(text)
        check(set(rows) == set(specs), f"a table row for every workload: missing {set(specs) - set(rows)}, "
                                       f"extra {set(rows) - set(specs)}")
        for name, cells in rows.items():
            check(len(cells) == 9, f"{name}: 9 cells")
            if len(cells) != 9:
                continue
            check(cells[1] == specs.get(name, {}).get("shape"), f"{name}: shape {cells[1]}")
            check(TIME_CELL.match(cells[3]) is not None, f"{name}: tally host time '{cells[3]}'")
            if name in numpy_baseline.NO_FORMULATION:
                check(cells[4] == "no NumPy formulation", f"{name}: NumPy cell '{cells[4]}'")
            else:
                check(TIME_CELL.match(cells[4]) is not None, f"{name}: NumPy time '{cells[4]}'")
                check(re.match(r"^\d+\.\d\d$", cells[5]) is not None, f"{name}: ratio '{cells[5]}'")
                check(cells[8] == numpy[name].get("formulation"), f"{name}: formulation named")
        for reason in set(numpy_baseline.NO_FORMULATION.values()):
            check(reason in text, f"the table says why a workload has no NumPy row: {reason[:40]}...")
        check(re.search(r"Bandwidth probe of this run[^\n]*read [\d.]+ GB/s[^\n]*write [\d.]+ GB/s", text)
              is not None, "the bandwidth probe is in the table's notes")

        # The dispatch path named, as tally info names it; and a forced one.
        path = host_path_from_info(cli, env)
        check(path is not None, "tally info names the host dispatch path")
        check(f"dispatch path **{path}**" in text, f"the table names the dispatch path {path}")
        scalar_env = dict(env, TALLY_HOST_IMPL="scalar")
        sj, smd = os.path.join(tmp, "scalar.jsonl"), os.path.join(tmp, "scalar.md")
        r = run([bench, "--backend", "host", "--scale", SCALE, *TIMING, "--only", "sum_1n", "--no-ceilings",
                 "--json", sj], env=scalar_env)
        check(r.returncode == 0, "tally-bench with TALLY_HOST_IMPL=scalar exits 0")
        r = run([sys.executable, BENCH_DIR / "report.py", "--tally", sj, "--numpy", nj, "--out", smd])
        check(r.returncode == 0 and "dispatch path **scalar**" in pathlib.Path(smd).read_text(),
              "the table names the forced scalar path")
    if failures:
        print(f"{len(failures)} checks failed", file=sys.stderr)
        return 1
    print(f"ok: {len(rows)} workload rows, {len(specs) - len(numpy_baseline.NO_FORMULATION)} with NumPy times; "
          f"host dispatch path {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
