#!/usr/bin/env bash
# The gradient ops (issue 14) on an NVIDIA GPU machine, in one device call:
# their suite on CUDA, NVIDIA OpenCL and PoCL (each also compares its bits with
# the host backend in the same process, and runs the 100-step Dirichlet-
# multinomial training loop), digamma's device bits, the crosscheck of every
# backward op on every device, compute-sanitizer over the suite on CUDA, and
# the H200 timings of kl_bw, dm_bw and gmm_bw against PyTorch in the same run.
#
#   bash scripts/gpu_backward.sh    # logs and JSON in $OUT (default /tmp/tally-gpu-out)
#
# Same setup as scripts/gpu_session.sh (Check and OpenCL headers from .debs/).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/tally-gpu-out}
logs="$out/logs"
mkdir -p "$logs"
build=${TALLY_BUILD_DIR:-build-gpu}
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
summary="$out/summary-backward.txt"
note() { echo "$*" | tee -a "$summary"; }

root=/tmp/tally-prefix
if [ ! -d "$root/usr/include/CL" ]; then
    rm -rf "$root" && mkdir -p "$root/pc"
    for deb in .debs/check_*.deb .debs/libsubunit*.deb .debs/opencl-c-headers*.deb; do dpkg -x "$deb" "$root"; done
    for pc in "$root"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
        sed "s|^prefix=.*|prefix=$root/usr|" "$pc" >"$root/pc/$(basename "$pc")"
    done
fi
export PKG_CONFIG_PATH="$root/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" -Dcuda=enabled -Dopencl=enabled -Dc_args="-I$root/usr/include" >"$logs/setup.log" 2>&1 ||
        { tail -n 40 "$logs/setup.log"; exit 1; }
fi
ninja -C "$build" >"$logs/build.log" 2>&1 || { grep -B2 -A10 -E "error|FAILED" "$logs/build.log" | head -60; exit 1; }
tally="$build/tools/tally"
read -r cl_nvidia cl_pocl <<<"$($tally info --json | python3 -c '
import json, sys
info = json.load(sys.stdin)
devs = [d for b in info.get("backends", []) if b.get("name") == "opencl" for d in b.get("devices", [])]
gpu = [d["index"] for d in devs if d.get("gpu")]
cpu = [d["index"] for d in devs if not d.get("gpu")]
print(gpu[0] if gpu else -1, cpu[0] if cpu else -1)')"
note "opencl devices: nvidia=$cl_nvidia pocl=$cl_pocl"

run() { # name, seconds, command...
    local name=$1 secs=$2
    shift 2
    timeout "$secs" "$@" >"$logs/$name.log" 2>&1
    note "$name: exit $? ($(grep -E 'Checks:|results in|All checks|FAILED' "$logs/$name.log" | tail -n 1))"
}
run backward-cuda 120 env TALLY_TEST_BACKEND=cuda "$build/tests/check_backward"
run backward-opencl-nvidia 120 env TALLY_TEST_BACKEND=opencl TALLY_DEVICE="$cl_nvidia" "$build/tests/check_backward"
[ "$cl_pocl" -ge 0 ] && run backward-opencl-pocl 300 env TALLY_TEST_BACKEND=opencl TALLY_DEVICE="$cl_pocl" "$build/tests/check_backward"
run digamma-device-cuda 120 env TALLY_TEST_BACKEND=cuda "$build/tests/check_math_device"
run crosscheck-backward 300 $tally crosscheck \
    --ops kl_div_backward,dirichlet_multinomial_backward,gmm_log_prob_backward,gmm_sample_backward
tail -n 3 "$logs/crosscheck-backward.log" | tee -a "$summary"
run sanitizer-memcheck-backward 300 env CK_FORK=no TALLY_TEST_BACKEND=cuda \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/check_backward"
run bench-backward-cuda 200 "$build/bench/tally-bench" --backend cuda --only kl_bw,dm_bw,gmm_bw \
    --json "$out/tally-backward-cuda.jsonl"
tail -n 8 "$logs/bench-backward-cuda.log" | tee -a "$summary"
run bench-backward-opencl 200 "$build/bench/tally-bench" --backend opencl --device "$cl_nvidia" \
    --only kl_bw,dm_bw,gmm_bw --json "$out/tally-backward-opencl.jsonl"
run torch-backward 300 python3 bench/torch_baseline.py --only kl_bw,dm_bw,gmm_bw --json "$out/torch-backward.jsonl"
tail -n 10 "$logs/torch-backward.log" | tee -a "$summary"
