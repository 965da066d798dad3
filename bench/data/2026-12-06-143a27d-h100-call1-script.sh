#!/bin/bash
# Session 2026-12-06c call 1: the whole benchmark at scale 1 against torch at
# HEAD; f936e80 (before the DM backward's fused scale) and HEAD with the
# narrow bf16 table built beside it and alternated; checks, profile, crosscheck.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; }
nvidia-smi --query-gpu=name --format=csv,noheader >> "$O/x/steps.txt"
vb() { # name tar [sed on kernels/abi.h]
  ( rm -rf /tmp/$1 && mkdir -p /tmp/$1 && tar -C /tmp/$1 -xf $2 && cd /tmp/$1 &&
    sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build &&
    { [ -z "$3" ] || sed -i "$3" kernels/abi.h; } &&
    meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && nice -n 19 ninja -C build bench/tally-bench ) > "$O/x/$1-build.txt" 2>&1
}
vb base .debs/base.tar "" &
vb narrow .debs/head.tar 's/#define TALLY_K_KL_BF16_WIDE 1u/#define TALLY_K_KL_BF16_WIDE 0u/' &
export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=300
bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
el "bench done"
wait; el "builds: $(tail -1 $O/x/base-build.txt) / $(tail -1 $O/x/narrow-build.txt)"
grep -c "KL_BF16_WIDE 0u" /tmp/narrow/kernels/abi.h >> "$O/x/steps.txt"
. scripts/gpu_env.sh
B=build-gpu; gpu_opencl_devices $B/tools/tally
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x' $O/x/$name.txt | tail -2 | tr '\n' ' ')"; }
export CK_DEFAULT_TIMEOUT=600
T backward_dm_cuda 60 env CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda $B/tests/check_backward
T backward_dm_nvcl 90 env CK_RUN_CASE=dm TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_backward
T memcheck_dm 90 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_backward
for r in 1 2 3; do
  for b in base new narrow; do
    bin=/tmp/$b/build/bench/tally-bench; [ $b = new ] && bin=$B/bench/tally-bench
    timeout 40 $bin --backend cuda --scales 1 --no-ceilings --batch-ms 20 --only dm_bw,kl_bf16 > "$O/x/alt-$b-$r.txt" 2>&1
  done
done
el "alternation done"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
timeout 40 "$ncu" --clock-control none --launch-count 16 --metrics gpu__time_duration.sum \
   $B/bench/tally-bench --backend cuda --scales 1 --no-ceilings --reps 1 --calls 2 --only dm_bw > "$O/x/ncu-dm_bw.txt" 2>&1
el "ncu done"
left=$(( 570 - ($(date +%s) - t0) ))
T crosscheck $left $B/tools/tally crosscheck --dtype all
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
