#!/usr/bin/env bash
# Runs the CPU benchmark (bench/cpu_bench.py) on this machine and keeps the
# raw data: builds tally without CUDA if needed, finds a Python with numpy and
# scipy (or installs them into a virtual environment when a package index is
# reachable), and writes bench/data/<date>-<commit>-cpu-<host>.json plus the
# markdown table on stdout; then bench/cpu_table.sh (tally-bench on the host
# backend beside bench/numpy_baseline.py, every tally-bench workload at scale
# 1/16, about two minutes on two cores: its JSON lines are
# bench/data/<date>-<commit>-cpu-<host>-{tally-host,numpy}.jsonl) and its
# table. Run from anywhere:
#   bash bench/cpu_run.sh            # host (every path this CPU has) and PoCL
#   CPU_BENCH_ARGS="--only sum" bash bench/cpu_run.sh
#   CPU_TABLE=0 bash bench/cpu_run.sh   # without the tally-bench / NumPy table
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TALLY_BUILD_DIR:-build}
if [ ! -f "$build/libtally.so" ]; then
  meson setup "$build" -Dcuda=disabled >/dev/null
fi
meson compile -C "$build" >/dev/null
py=python3
if ! "$py" -c 'import numpy, scipy' 2>/dev/null; then
  venv=${CPU_BENCH_VENV:-/tmp/tally-cpu-bench-venv}
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  if "$venv/bin/python" -c 'import numpy, scipy' 2>/dev/null || "$venv/bin/pip" install -q numpy scipy; then
    py=$venv/bin/python
  elif python3 -c 'import numpy' 2>/dev/null; then
    # No package index (the GPU machine): NumPy alone; the SciPy baselines are left out.
    echo "no SciPy and no package index: NumPy baselines only"
  else
    echo "bench/cpu_run.sh: needs numpy (and scipy)" >&2
    exit 1
  fi
fi
impls=$("$py" - "$build" <<'PY'
import os, subprocess, sys
# The host paths this CPU runs: every name the library accepts, best first.
names = ["avx512", "avx2", "sse2", "neon", "vector"]
ok = []
for n in names:
    env = dict(os.environ, TALLY_HOST_IMPL=n)
    r = subprocess.run([os.path.join(sys.argv[1], "tools", "tally"), "info"], env=env, capture_output=True, text=True)
    if f", {n})" in r.stdout:
        ok.append(n)
print(",".join(["best"] + ok + ["scalar"]))
PY
)
mkdir -p bench/data
out="bench/data/$(date -u +%Y-%m-%d)-$(git rev-parse --short HEAD)-cpu-$(hostname -s).json"
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set on this kind of machine for
# old OpenBLAS builds; they slow a current numpy, so the benchmark (and only
# the benchmark) runs without them.
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" bench/cpu_bench.py --lib "$build/libtally.so" \
  --impls "$impls" --backends host,opencl --markdown --json "$out" ${CPU_BENCH_ARGS:-}
echo "raw data: $out"
if [ "${CPU_TABLE:-1}" != 0 ]; then
  echo
  CPU_TABLE_PY="$py" TALLY_BUILD_DIR="$build" bash bench/cpu_table.sh
fi
