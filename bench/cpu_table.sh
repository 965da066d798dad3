#!/usr/bin/env bash
# The CPU table: tally-bench on the host backend and bench/numpy_baseline.py
# (the same workloads in NumPy/SciPy float32) one after the other on this
# machine, then bench/report.py --numpy. Keeps the JSON lines as
#   bench/data/<date>-<commit>-cpu-<host>-tally-host.jsonl
#   bench/data/<date>-<commit>-cpu-<host>-numpy.jsonl
# and the markdown as ...-cpu-<host>-table.md, and prints the table.
# bench/cpu_run.sh runs it after its own benchmark; it also runs alone:
#   bash bench/cpu_table.sh                      # scale 1/16
#   CPU_TABLE_SCALES=1 bash bench/cpu_table.sh   # issue 10's targets are at scale 1
#   CPU_TABLE_ARGS="--only kl,sum_1n" bash bench/cpu_table.sh
#
# The default scale, 1/16, keeps the pair within a few minutes on two cores
# while every workload stays larger than the caches (the fills write 256 MiB,
# the sums read 256 MiB, each KL 128 MiB; the smaller inputs are rotated to
# 120 MiB by both programs alike), so the times are memory-bound as at
# scale 1. The latency-bound shapes (gmm_small, dm_small) are small at any
# scale.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TALLY_BUILD_DIR:-build}
scales=${CPU_TABLE_SCALES:-0.0625}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dcuda=disabled >/dev/null
fi
meson compile -C "$build" >/dev/null
py=${CPU_TABLE_PY:-python3}
if ! "$py" -c 'import numpy, scipy' 2>/dev/null; then
  venv=${CPU_BENCH_VENV:-/tmp/tally-cpu-bench-venv}
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -c 'import numpy, scipy' 2>/dev/null || "$venv/bin/pip" install -q numpy scipy
  py=$venv/bin/python
fi
mkdir -p bench/data
stem="bench/data/$(date -u +%Y-%m-%d)-$(git rev-parse --short HEAD)-cpu-$(hostname -s)"
status=0
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$build/bench/tally-bench" --backend host --scales "$scales" --json "$stem-tally-host.jsonl" \
  ${CPU_TABLE_ARGS:-} >"$stem-tally-host.txt" || status=1
# As in cpu_run.sh: old-OpenBLAS settings slow a current NumPy, so the
# baseline runs without them.
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$py" bench/numpy_baseline.py --bench "$build/bench/tally-bench" \
  --scales "$scales" --json "$stem-numpy.jsonl" ${CPU_TABLE_ARGS:-} >"$stem-numpy.txt" || status=1
"$py" bench/report.py --tally "$stem-tally-host.jsonl" --numpy "$stem-numpy.jsonl" \
  --commit "$(git rev-parse --short HEAD)" --out "$stem-table.md"
# The load average says how much else ran on the machine meanwhile.
echo "Load average (1, 5, 15 min) before the pair: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)." \
  >>"$stem-table.md"
cat "$stem-table.md"
echo "raw data: $stem-{tally-host,numpy}.jsonl (terminal output: .txt), table: $stem-table.md"
[ "$status" -eq 0 ] || echo "cpu_table: a run failed or a check found a wrong value (see the .txt files)" >&2
exit "$status"
