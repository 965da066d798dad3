#!/bin/bash
# Session 2026-12-06f call 1. On an H200: issue 14's closing set (the three
# gradient workloads with ceilings and torch in the same call, the gradient
# suite with its training loops on CUDA and NVIDIA OpenCL, the four-device
# crosscheck of the gradient ops, the Python autograd tests on CUDA).
# On an H100: where tally_k_dm_bw_lanes's warps wait (stall reasons, and the
# sampled stalls of each SASS instruction).
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; tar -C "$O" -cf "$O/x.tar" x; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >> "$O/x/steps.txt"
sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build
export CK_DEFAULT_TIMEOUT=600
B=build-gpu
T() { local n=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$n.txt" 2>&1; el "$n rc=$? $(grep -E 'Checks|SUMMARY|cases x|passed|failed' $O/x/$n.txt | tail -2 | tr '\n' ' ')"; }
case "$name" in
*H200*)
  export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=230
  export BENCH_ARGS="--only kl_bw,dm_bw,gmm_bw"
  bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
  el "bench done"
  . scripts/gpu_env.sh; gpu_opencl_devices $B/tools/tally
  T backward_cuda 90 env TALLY_TEST_BACKEND=cuda $B/tests/check_backward
  T backward_nvcl 90 env TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_backward
  T crosscheck_bw 150 $B/tools/tally crosscheck --dtype all --ops kl_div_backward,dirichlet_multinomial_backward,gmm_log_prob_backward,gmm_sample_backward
  left=$(( 575 - ($(date +%s) - t0) ))
  ( cd tests/python && T pytest_grad $left env PYTHONPATH=$(cd ../.. && pwd)/python TALLY_LIBRARY=$(cd ../.. && pwd)/$B/libtally.so \
      TALLY_CLI=$(cd ../.. && pwd)/$B/tools/tally TALLY_REQUIRE_CUDA=1 python3 -m pytest -q -rs -p no:cacheprovider test_autograd.py test_backward.py )
  ;;
*)
  . scripts/gpu_env.sh
  GPU_BUILD_TARGETS="bench/tally-bench" gpu_build $B $O/x/logs -Dcuda=enabled -Dopencl=disabled -Dtests=false; el "build rc=$?"
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
  $ncu --version > "$O/x/ncu-version.txt" 2>&1
  timeout 150 $ncu --clock-control none -k "regex:tally_k_dm_bw_lanes" --launch-count 1 --import-source no \
    --section WarpStateStats --section SourceCounters --section SchedulerStats --section InstructionStats \
    --metrics "regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$" -o $O/lanes \
    $B/bench/tally-bench --backend cuda --only dm_bw --no-ceilings --reps 1 --calls 1 --rotate-mib 0 > "$O/x/ncu-run.txt" 2>&1
  el "ncu rc=$?"
  $ncu -i $O/lanes.ncu-rep --page details --print-details all > "$O/x/ncu-details.txt" 2>&1; el "details rc=$?"
  $ncu -i $O/lanes.ncu-rep --page raw --csv > "$O/x/ncu-raw.csv" 2>&1; el "raw rc=$?"
  $ncu -i $O/lanes.ncu-rep --page source --csv --print-source sass > "$O/x/ncu-sass.csv" 2>&1; el "source rc=$?"
  gzip -f $O/x/ncu-sass.csv $O/x/ncu-raw.csv
  ls -la $O/x >> "$O/x/steps.txt"
  ;;
esac
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
