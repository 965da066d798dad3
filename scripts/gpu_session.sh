#!/usr/bin/env bash
# One device call on an NVIDIA GPU machine (CUDA, NVIDIA OpenCL and PoCL side
# by side): builds tally with every backend and verifies it.
#
#   bash scripts/gpu_session.sh   # every suite (host, CUDA, NVIDIA OpenCL), the 4-way crosscheck,
#                                 # tally vs CUDA math and cuRAND recording (GPU_MATH=1),
#                                 # compute-sanitizer, the demo; all under a deadline
#                                 # (GPU_DEADLINE seconds, default 540). GPU_BENCH=1 adds a
#                                 # scale-1 tally-bench run on CUDA and NVIDIA OpenCL; the full
#                                 # benchmark (PyTorch in the same call, scaling, plots) is
#                                 # bench/gpu_bench.sh, which shares this build directory.
#
# The machine has no Check and no OpenCL headers: they come from the Debian
# packages in .debs/ (carried by the device tool), unpacked into a private
# prefix. Logs land in $OUT (the device tool's output folder).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
gpu_out_default=/tmp/tally-gpu-out
. scripts/gpu_env.sh
start=$(date +%s)
step() { printf '\n== [%ss] %s\n' "$(($(date +%s) - start))" "$*"; }
summary="$out/summary.txt"
note() { echo "$*" | tee -a "$summary"; }

# ---- Check and OpenCL headers from .debs/, then the build ------------------
step "build"
gpu_build "$build" "$logs" -Dcuda=enabled -Dopencl=enabled || exit 1
tally="$build/tools/tally"


# Every step below runs under the call's deadline: limit N gives a step N
# seconds or what is left, whichever is less (0 when nothing is left).
deadline=${GPU_DEADLINE:-540}
limit() {
    local left=$((deadline - ($(date +%s) - start)))
    if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
run_step() { # name, seconds, command...
    local name=$1 secs
    secs=$(limit "$2")
    shift 2
    if [ "$secs" -eq 0 ]; then note "$name: skipped (out of time)"; return; fi
    step "$name (limit ${secs}s)"
    timeout "$secs" "$@" >"$logs/$name.log" 2>&1
    local rc=$?
    note "$name: exit $rc"
    return $rc
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$summary"
$tally info >"$logs/info.txt" 2>&1
cat "$logs/info.txt"
# OpenCL device indices: the first GPU (NVIDIA) and the first CPU (PoCL).
gpu_opencl_devices "$tally"
note "opencl devices: nvidia=$cl_nvidia pocl=$cl_pocl"

# 1. Every suite: host and CUDA (device 0), then OpenCL on the NVIDIA GPU
# (TALLY_DEVICE picks it among the OpenCL devices; it must not reach the CUDA
# suites, whose device 0 is the GPU).
run_step tests-core-host-cuda 150 meson test -C "$build" --print-errorlogs --num-processes 12 \
    --suite core --suite host --suite cuda
grep -E "^ *[0-9]+/[0-9]+ " "$logs/tests-core-host-cuda.log" | tee -a "$summary"
TALLY_DEVICE=$cl_nvidia run_step tests-opencl-nvidia 150 meson test -C "$build" --print-errorlogs \
    --num-processes 12 --suite opencl
grep -E "^ *[0-9]+/[0-9]+ " "$logs/tests-opencl-nvidia.log" | tee -a "$summary"

# 2. Every op, every device of every backend (host, CUDA, NVIDIA OpenCL, PoCL), bit for bit.
run_step crosscheck 120 $tally crosscheck
tail -n 6 "$logs/crosscheck.log" | tee -a "$summary"
# The same on bf16 and f16 inputs (issue 11), on the smaller shapes.
run_step crosscheck-half 90 $tally crosscheck --quick --dtype bf16,f16
tail -n 6 "$logs/crosscheck-half.log" | tee -a "$summary"

# 3. The portable math against CUDA's built-ins, and cuRAND's streams (GPU_MATH=1; their
# results live in docs/accuracy.md and tests/data/curand_reference.txt).
if [ "${GPU_MATH:-0}" = 1 ]; then
    if nvcc -O2 -fmad=false -Xcompiler -ffp-contract=off -arch=sm_90 -Iinclude -o /tmp/cuda_math_compare \
        tools/math/cuda_math_compare.cu tools/math/math_host_eval.c -lm >"$logs/math-build.log" 2>&1; then
        run_step cuda_math_compare 60 /tmp/cuda_math_compare
        cp "$logs/cuda_math_compare.log" "$out/cuda_math_compare.md"
    else
        note "cuda_math_compare: build failed"
    fi
    if nvcc -O2 -arch=sm_90 -o /tmp/curand_record tools/math/curand_record.cu >"$logs/curand-build.log" 2>&1; then
        /tmp/curand_record >"$out/curand_reference.txt" 2>"$logs/curand.err"
        note "curand_record: exit $?"
    fi
fi

# 4. Benchmarks on request (GPU_BENCH=1): tally on CUDA, then on NVIDIA OpenCL, scale 1 only
# (ceilings measured in the same run). bench/gpu_bench.sh is the full benchmark.
if [ "${GPU_BENCH:-0}" = 1 ]; then
    run_step bench-cuda 100 "$build/bench/tally-bench" --backend cuda --batch-ms 20 --json "$out/tally-cuda.jsonl"
    tail -n 18 "$logs/bench-cuda.log"
    run_step bench-opencl 80 "$build/bench/tally-bench" --backend opencl --device "$cl_nvidia" --batch-ms 20 \
        --json "$out/tally-opencl.jsonl"
    tail -n 18 "$logs/bench-opencl.log"
fi

# 5. compute-sanitizer over the whole CUDA op suite and the interop suite.
# The interop suite provokes driver errors on purpose (a 2^50-byte
# allocation, wrapping a host pointer) to check tally's statuses; memcheck
# would count those API errors, so for it they are not reported.
sanitize() { # tool, seconds, program
    local api=explicit
    [ "$3" = check_cuda_interop ] && api=no
    CK_FORK=no TALLY_TEST_BACKEND=cuda run_step "sanitizer-$1-$3" "$2" \
        compute-sanitizer --tool "$1" --report-api-errors "$api" --error-exitcode 9 "$build/tests/$3"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Checks:" "$logs/sanitizer-$1-$3.log" | tail -n 2 | tee -a "$summary"
}
sanitize racecheck 90 check_kl_logits
sanitize memcheck 150 check_ops
sanitize memcheck 60 check_cuda_interop
sanitize memcheck 90 check_half
sanitize racecheck 150 check_ops
sanitize initcheck 120 check_ops
sanitize synccheck 120 check_ops

# 6. The main job on the default backend.
run_step demo 40 $tally demo
cat "$logs/demo.log"

step "tables"
tally_args=()
for f in "$out"/tally-*.jsonl; do [ -s "$f" ] && tally_args+=(--tally "$f"); done
if [ ${#tally_args[@]} -gt 0 ]; then
    python3 bench/report.py "${tally_args[@]}" --out "$out/RESULTS-run.md" >/dev/null 2>&1
fi
tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$logs"
echo
cat "$summary"
