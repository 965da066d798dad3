#!/bin/bash
# Session 2026-12-06b call 3: the static wide bf16 table against the narrow one.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); L=$O/log.txt; mkdir -p /tmp/x
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L"; }
. scripts/gpu_env.sh
B=build-gpu
vb() { rm -rf /tmp/var && mkdir -p /tmp/var && tar --exclude='./build*' --exclude=./.git --exclude=./.debs -cf - . | tar -C /tmp/var -xf - &&
  cd /tmp/var && sed -i 's|^#define TALLY_K_KL_BF16_WIDE 1u|#define TALLY_K_KL_BF16_WIDE 0u|' kernels/abi.h && grep -q "define TALLY_K_KL_BF16_WIDE 0u" kernels/abi.h &&
  sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build &&
  meson setup build -Dcuda=enabled -Dopencl=enabled -Dtests=false "${gpu_c_args[@]}" && ninja -C build bench/tally-bench; }
( vb ) > /tmp/x/var-build.txt 2>&1 &
gpu_build $B /tmp/x -Dcuda=enabled -Dopencl=enabled > /tmp/x/build.txt 2>&1; el "build rc=$?"
wait; el "variant build: $(tail -1 /tmp/x/var-build.txt)"
gpu_opencl_devices $B/tools/tally; el "cl nvidia=$cl_nvidia pocl=$cl_pocl"
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "/tmp/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x' /tmp/x/$name.txt | tail -2 | tr '\n' ' ')"; }
T half_kl_cuda 60 env CK_RUN_CASE=kl TALLY_TEST_BACKEND=cuda $B/tests/check_half
T half_kl_nvcl 60 env CK_RUN_CASE=kl TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_half
T bits_nvcl 60 env TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_bits
T memcheck_half_kl 60 env CK_FORK=no CK_RUN_CASE=kl TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_half
for r in 1 2 3; do
  for b in narrow wide; do
    bin=/tmp/var/build/bench/tally-bench; [ $b = wide ] && bin=$B/bench/tally-bench
    timeout 60 $bin --backend cuda --scales 0.25,1 --no-ceilings --batch-ms 20 --only kl_bf16 2>&1 | grep -E "^kl_bf16" | sed "s/^/cuda $b $r: /" | tee -a "$L"
    TALLY_DEVICE=$cl_nvidia timeout 60 $bin --backend opencl --scales 1 --no-ceilings --batch-ms 20 --only kl_bf16 2>&1 | grep -E "^kl_bf16" | sed "s/^/opencl $b $r: /" | tee -a "$L"
  done
done
el "alternation done"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
for b in narrow wide; do
  bin=/tmp/var/build/bench/tally-bench; [ $b = wide ] && bin=$B/bench/tally-bench
  timeout 60 "$ncu" --clock-control none -k regex:tally_k_kl_tiles_half --launch-count 1 --section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis \
    $bin --backend cuda --scales 1 --no-ceilings --reps 1 --calls 1 --only kl_bf16 > /tmp/x/ncu-$b.txt 2>&1
done
el "ncu done"
T crosscheck 120 $B/tools/tally crosscheck --dtype bf16,f16 --quick --ops kl_div
tar -C /tmp -czf $O/x.tgz x
