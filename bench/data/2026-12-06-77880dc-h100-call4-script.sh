#!/bin/bash
# Session 2026-12-06b call 4: the wide bf16 table on NVIDIA's OpenCL (OpenCL-only builds).
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); L=$O/log.txt; mkdir -p /tmp/x
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L"; }
. scripts/gpu_env.sh
mk() { rm -rf /tmp/$1 && mkdir -p /tmp/$1 && tar --exclude='./build*' --exclude=./.git --exclude=./.debs -cf - . | tar -C /tmp/$1 -xf - && cd /tmp/$1 &&
  sed -i "s|^#define TALLY_K_KL_BF16_WIDE 1u|#define TALLY_K_KL_BF16_WIDE $2|" kernels/abi.h &&
  meson setup build -Dcuda=disabled -Dopencl=enabled -Dtests=true "${gpu_c_args[@]}" && ninja -C build tests/check_half tests/check_bits tools/tally bench/tally-bench; }
( mk bo 0u ) > /tmp/x/bo.txt 2>&1 &
( mk bn 1u ) > /tmp/x/bn.txt 2>&1
wait; el "builds: $(tail -1 /tmp/x/bn.txt) / $(tail -1 /tmp/x/bo.txt)"
B=/tmp/bn/build; gpu_opencl_devices $B/tools/tally; el "cl nvidia=$cl_nvidia pocl=$cl_pocl"
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "/tmp/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x|:F:' /tmp/x/$name.txt | head -3 | tr '\n' ' ')"; }
T half_kl_nvcl 60 env CK_RUN_CASE=kl TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_half
for r in 1 2; do for b in bo bn; do
  timeout 40 /tmp/$b/build/bench/tally-bench --backend opencl --scales 1 --no-ceilings --batch-ms 20 --only kl_bf16 2>&1 | grep -E "^kl_bf16" | sed "s/^/opencl $b $r: /" | tee -a "$L"
done; done
T bits_nvcl 40 env TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_bits
T crosscheck 60 $B/tools/tally crosscheck --dtype bf16 --quick --ops kl_div
grep -m3 FAIL -A1 /tmp/x/crosscheck.txt >> $L
tail -c 3000 /tmp/x/half_kl_nvcl.txt >> $L
