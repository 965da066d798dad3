#!/bin/bash
# Session 2026-12-06b call 1: the whole benchmark at scale 1 against torch,
# then the four-device crosscheck of every op and the DM backward's launches.
cd "$(dirname "$0")/.." || exit 1
O=$OUT
export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=${2:-390}
t0=$(date +%s)
bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
echo "bench done after $(( $(date +%s) - t0 ))s" >> "$O/bench.txt"
mkdir -p "$O/x"
. scripts/gpu_env.sh
gpu_opencl_devices build-gpu/tools/tally >> "$O/x/cc.txt" 2>&1
left=$(( 560 - ($(date +%s) - t0) ))
echo "left $left" >> "$O/x/cc.txt"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
timeout 45 "$ncu" --clock-control none --launch-count 40 --metrics gpu__time_duration.sum \
   build-gpu/bench/tally-bench --backend cuda --scales 1 --no-ceilings --reps 1 --calls 2 --only dm_bw > "$O/x/ncu-dm_bw.txt" 2>&1
left=$(( 565 - ($(date +%s) - t0) ))
[ $left -gt 20 ] && timeout $left build-gpu/tools/tally crosscheck --dtype all > "$O/x/crosscheck.txt" 2>&1
echo "crosscheck rc=$? after $(( $(date +%s) - t0 ))s" >> "$O/x/cc.txt"
tail -5 "$O/x/crosscheck.txt" >> "$O/x/cc.txt"
