#!/usr/bin/env bash
# One device call on an NVIDIA GPU machine (CUDA, NVIDIA OpenCL and PoCL side
# by side): builds tally with every backend and verifies it.
#
#   bash scripts/gpu_session.sh verify   # tests on every backend and device, 4-way crosscheck,
#                                        # compute-sanitizer, math comparison, cuRAND recording
#   bash scripts/gpu_session.sh bench    # bench/run_all.sh on the same build
#
# The machine has no Check and no OpenCL headers: they come from the Debian
# packages in .debs/ (carried by the device tool), unpacked into a private
# prefix. Logs land in $OUT (the device tool's output folder).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
phase=${1:-verify}
out=${OUT:-/tmp/tally-gpu-out}
logs="$out/logs"
mkdir -p "$logs"
build=${TALLY_BUILD_DIR:-build-gpu}
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
start=$(date +%s)
step() { printf '\n== [%ss] %s\n' "$(($(date +%s) - start))" "$*"; }
summary="$out/summary.txt"
note() { echo "$*" | tee -a "$summary"; }

# ---- Check and OpenCL headers from .debs/ --------------------------------
root=/tmp/tally-prefix
if [ ! -d "$root/usr/include/CL" ]; then
    rm -rf "$root" && mkdir -p "$root/pc"
    for deb in .debs/check_*.deb .debs/libsubunit*.deb .debs/opencl-c-headers*.deb; do
        dpkg -x "$deb" "$root"
    done
    for pc in "$root"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
        sed "s|^prefix=.*|prefix=$root/usr|" "$pc" >"$root/pc/$(basename "$pc")"
    done
fi
export PKG_CONFIG_PATH="$root/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ ! -f "$build/build.ninja" ]; then
    step "configure"
    meson setup "$build" -Dcuda=enabled -Dopencl=enabled -Dc_args="-I$root/usr/include" \
        >"$logs/setup.log" 2>&1 || { tail -n 40 "$logs/setup.log"; exit 1; }
    grep -A5 "Backends" "$logs/setup.log"
fi
step "build"
ninja -C "$build" >"$logs/build.log" 2>&1 || { grep -B2 -A10 -E "error|FAILED" "$logs/build.log" | head -60; exit 1; }
tally="$build/tools/tally"

if [ "$phase" = bench ]; then
    TALLY_BUILD_DIR="$build" TALLY_MESON_ARGS="" BENCH_DEADLINE=${BENCH_DEADLINE:-560} \
        BENCH_POCL=${BENCH_POCL:-} bash bench/run_all.sh
    exit $?
fi

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"
$tally info >"$logs/info.txt" 2>&1
cat "$logs/info.txt"
# OpenCL device indices: the first GPU (NVIDIA) and the first CPU (PoCL).
cl_gpu=$($tally info --json | python3 -c '
import json, sys
info = json.load(sys.stdin)
def devs(name):
    for b in info.get("backends", []):
        if b.get("name") == name:
            return b.get("devices", [])
    return []
gpu = [d["index"] for d in devs("opencl") if d.get("gpu")]
cpu = [d["index"] for d in devs("opencl") if not d.get("gpu")]
print(gpu[0] if gpu else -1, cpu[0] if cpu else -1)')
read -r cl_nvidia cl_pocl <<<"$cl_gpu"
note "opencl devices: nvidia=$cl_nvidia pocl=$cl_pocl"

step "test suites: host, cuda, opencl on the NVIDIA GPU"
TALLY_DEVICE=$cl_nvidia meson test -C "$build" --print-errorlogs --num-processes 8 \
    >"$logs/test-main.log" 2>&1
note "meson test (host, cuda, opencl=nvidia): exit $?"
grep -E "^ *[0-9]+/[0-9]+ " "$logs/test-main.log" | tee -a "$summary"

step "opencl suites on PoCL"
TALLY_DEVICE=$cl_pocl meson test -C "$build" --suite opencl --print-errorlogs --num-processes 8 \
    >"$logs/test-pocl.log" 2>&1
note "meson test --suite opencl (pocl): exit $?"
grep -E "^ *[0-9]+/[0-9]+ " "$logs/test-pocl.log" | tee -a "$summary"

step "crosscheck: every device of every backend against host"
timeout 240 $tally crosscheck >"$logs/crosscheck.txt" 2>"$logs/crosscheck.err"
note "tally crosscheck (all backends, all devices): exit $?"
tail -n 8 "$logs/crosscheck.txt" | tee -a "$summary"

step "compute-sanitizer on the CUDA suites"
sanitize() { # tool, time limit, program, test-case...
    local tool=$1 secs=$2 prog=$3
    shift 3
    CK_FORK=no TALLY_TEST_BACKEND=cuda timeout "$secs" compute-sanitizer --tool "$tool" \
        --error-exitcode 9 "$build/tests/$prog" "$@" >"$logs/sanitizer-$tool-$prog.log" 2>&1
    local rc=$?
    note "compute-sanitizer --tool $tool $prog $*: exit $rc ($(grep -E 'ERROR SUMMARY' \
        "$logs/sanitizer-$tool-$prog.log" | tail -n 1))"
}
sanitize memcheck 150 check_ops
sanitize memcheck 60 check_cuda_interop
sanitize racecheck 120 check_ops
sanitize initcheck 120 check_ops
sanitize synccheck 120 check_ops

step "portable math on the GPU against the host"
if nvcc -O2 -fmad=false -Xcompiler -ffp-contract=off -arch=sm_90 -Iinclude -o /tmp/cuda_math_compare \
    tools/cuda_math_compare.cu tools/math_host_eval.c -lm >"$logs/math-build.log" 2>&1; then
    timeout 180 /tmp/cuda_math_compare >"$out/cuda_math_compare.md" 2>&1
    note "cuda_math_compare: exit $?"
    tail -n 30 "$out/cuda_math_compare.md"
else
    note "cuda_math_compare: build failed"
    tail -n 20 "$logs/math-build.log"
fi

step "cuRAND reference streams"
if nvcc -O2 -arch=sm_90 -o /tmp/curand_record tools/curand_record.cu >"$logs/curand-build.log" 2>&1; then
    /tmp/curand_record >"$out/curand_reference.txt" 2>&1
    note "curand_record: exit $?"
else
    note "curand_record: build failed"
fi

step "demo on the default backend"
timeout 120 $tally demo >"$logs/demo.txt" 2>&1
note "tally demo: exit $?"
cat "$logs/demo.txt"

step "pack logs"
tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$logs"
echo
cat "$summary"
