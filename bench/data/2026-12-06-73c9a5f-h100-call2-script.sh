#!/bin/bash
# Session 2026-12-06b call 2: the wide bf16 table and the one-vector tree,
# verified on CUDA and NVIDIA OpenCL and timed against a269bb7 and torch.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; }
( rm -rf /tmp/base && mkdir -p /tmp/base && tar -C /tmp/base -xf .debs/base.tar && cd /tmp/base &&
  sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build &&
  meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && ninja -C build bench/tally-bench ) > "$O/x/base-build.txt" 2>&1 &
export BENCH_COMMIT=$1 BENCH_VARIANT="TALLY_K_KL_BF16_WIDE=0u" BENCH_VARIANT_ONLY=kl_bf16 BENCH_SCALES=0.25,1 BENCH_OPENCL=1 \
  GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=250 BENCH_ARGS="--only kl_bf16,dm_bw,sum_rows_f32,sum_rows_bf16,dm_large_bf16"
bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
el "bench done"
wait; el "base build: $(tail -1 $O/x/base-build.txt)"
. scripts/gpu_env.sh
B=build-gpu; gpu_opencl_devices $B/tools/tally
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x' $O/x/$name.txt | tail -2 | tr '\n' ' ')"; }
export CK_DEFAULT_TIMEOUT=600
T half_kl_cuda 60 env CK_RUN_CASE=kl TALLY_TEST_BACKEND=cuda $B/tests/check_half
T ops_reduce_cuda 60 env CK_RUN_CASE=reduce TALLY_TEST_BACKEND=cuda $B/tests/check_ops
T backward_dm_cuda 60 env CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda $B/tests/check_backward
T bits_cuda 60 env TALLY_TEST_BACKEND=cuda $B/tests/check_bits
T half_kl_nvcl 60 env CK_RUN_CASE=kl TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_half
T racecheck_half_kl 60 env CK_FORK=no CK_RUN_CASE=kl TALLY_TEST_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/check_half
T memcheck_half_kl 60 env CK_FORK=no CK_RUN_CASE=kl TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_half
for r in 1 2 3; do
  for b in base new; do
    bin=/tmp/base/build/bench/tally-bench; [ $b = new ] && bin=$B/bench/tally-bench
    timeout 60 $bin --backend cuda --scales 0.25,1 --no-ceilings --batch-ms 20 --only kl_bf16,dm_bw,sum_rows_f32 > "$O/x/alt-$b-$r.txt" 2>&1
  done
done
el "alternation done"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
timeout 40 "$ncu" --clock-control none --launch-count 16 --metrics gpu__time_duration.sum \
   $B/bench/tally-bench --backend cuda --scales 1 --no-ceilings --reps 1 --calls 2 --only dm_bw > "$O/x/ncu-dm_bw.txt" 2>&1
el "ncu done"
left=$(( 575 - ($(date +%s) - t0) ))
T crosscheck $left $B/tools/tally crosscheck --dtype all --quick --ops kl_div,sum,logsumexp,dirichlet_multinomial_backward
