#!/bin/bash
# Session 2026-12-06c call 2: the whole benchmark at scale 1 against torch at
# a5cab1e; 143a27d's bench built beside it and alternated on the DM
# backward; checks; launch profiles of the DM backward and the small shapes.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; }
nvidia-smi --query-gpu=name --format=csv,noheader >> "$O/x/steps.txt"
( rm -rf /tmp/base && mkdir -p /tmp/base && tar -C /tmp/base -xf .debs/base.tar && cd /tmp/base &&
  sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build &&
  meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && nice -n 19 ninja -C build bench/tally-bench ) > "$O/x/base-build.txt" 2>&1 &
export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=300
bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
el "bench done"
wait; el "base build: $(tail -1 $O/x/base-build.txt)"
. scripts/gpu_env.sh
B=build-gpu; gpu_opencl_devices $B/tools/tally
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x' $O/x/$name.txt | tail -2 | tr '\n' ' ')"; }
export CK_DEFAULT_TIMEOUT=600
T backward_dm_cuda 60 env CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda $B/tests/check_backward
T backward_dm_nvcl 90 env CK_RUN_CASE=dm TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_backward
T memcheck_dm 90 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_backward
T racecheck_dm 120 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/check_backward
T ops_reduce_cuda 60 env CK_RUN_CASE=reduce TALLY_TEST_BACKEND=cuda $B/tests/check_ops
for r in 1 2 3; do
  for b in base new; do
    bin=/tmp/base/build/bench/tally-bench; [ $b = new ] && bin=$B/bench/tally-bench
    timeout 40 $bin --backend cuda --scales 0.25,1 --no-ceilings --batch-ms 20 --only dm_bw,dm_small,gmm_small > "$O/x/alt-$b-$r.txt" 2>&1
  done
done
el "alternation done"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
for w in dm_bw dm_small gmm_small; do
timeout 40 "$ncu" --clock-control none --launch-count 12 --metrics gpu__time_duration.sum \
   $B/bench/tally-bench --backend cuda --scales 1 --no-ceilings --reps 1 --calls 2 --only $w > "$O/x/ncu-$w.txt" 2>&1
done
el "ncu done"
left=$(( 560 - ($(date +%s) - t0) ))
T crosscheck $left $B/tools/tally crosscheck --dtype all --ops dirichlet_multinomial_backward,dirichlet_multinomial,logsumexp,sum
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
