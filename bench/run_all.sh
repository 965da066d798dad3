#!/usr/bin/env bash
# One call on the GPU machine: builds tally-bench, runs it on CUDA and on
# OpenCL, runs the PyTorch baseline and writes bench/RESULTS.md's tables.
#
#   bash bench/run_all.sh            # everything lands in $OUT (or /tmp/tally-bench-out)
#
# Environment:
#   TALLY_BUILD_DIR    build directory (default build-bench); reused when it holds tally-bench
#   TALLY_MESON_ARGS   extra `meson setup` arguments (default: -Dcuda=enabled -Dtests=false, plus
#                      -Dc_args=-I/usr/local/cuda/include when only CUDA ships CL/cl.h)
#   BENCH_ARGS         extra tally-bench and torch_baseline arguments (e.g. "--scale 0.1")
#   BENCH_POCL=N       also run tally-bench on OpenCL device N (e.g. PoCL) at --scale 0.1
#   BENCH_SKIP_TORCH=1 skip the PyTorch baseline
#   BENCH_DEADLINE     seconds the whole script may take (default 570: the device tool allows 600)
#
# Each step has its own time limit, so one hang cannot eat the call; a step
# that fails is reported and the next one runs. The end of the output is the
# markdown table (the device tool returns the last 12,000 characters).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/tally-bench-out}
build=${TALLY_BUILD_DIR:-build-bench}
mkdir -p "$out"
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
start=$(date +%s)
deadline=${BENCH_DEADLINE:-570}
step() { printf '\n== [%ss] %s\n' "$(($(date +%s) - start))" "$*"; }
# The time limit of a step: its own, cut to what is left of the deadline less
# 15 s for the comparison at the end (0: no time left, skip the step).
limit() {
    local left=$((deadline - ($(date +%s) - start) - 15))
    if [ "$left" -lt 20 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1

bench="$build/bench/tally-bench"
if [ ! -x "$bench" ]; then
    step "configure and build ($build)"
    if [ -z "${TALLY_MESON_ARGS+x}" ]; then
        TALLY_MESON_ARGS="-Dcuda=enabled -Dtests=false"
        if [ ! -e /usr/include/CL/cl.h ] && [ -e /usr/local/cuda/include/CL/cl.h ]; then
            TALLY_MESON_ARGS="$TALLY_MESON_ARGS -Dc_args=-I/usr/local/cuda/include"
        fi
    fi
    # shellcheck disable=SC2086 # the arguments are a list on purpose
    if ! timeout "$(limit 120)" meson setup "$build" $TALLY_MESON_ARGS >"$out/meson-setup.log" 2>&1; then
        tail -n 40 "$out/meson-setup.log"
        echo "run_all: meson setup failed"
        exit 1
    fi
    grep -A4 'Backends' "$out/meson-setup.log"
fi
if ! timeout "$(limit 300)" ninja -C "$build" bench/tally-bench >"$out/ninja.log" 2>&1; then
    tail -n 40 "$out/ninja.log"
    echo "run_all: build failed"
    exit 1
fi
"$bench" --list 2>&1 | tee "$out/devices.txt"

# shellcheck disable=SC2086
run_tally() { # name, time limit, tally-bench arguments...
    local name=$1 secs
    secs=$(limit "$2")
    shift 2
    step "tally-bench $* (limit ${secs}s)"
    if [ "$secs" -eq 0 ]; then echo "skipped: out of time"; return; fi
    timeout "$secs" "$bench" "$@" ${BENCH_ARGS:-} --json "$out/tally-$name.jsonl" >"$out/tally-$name.txt" 2>&1
    echo "exit status $?"
    tail -n 16 "$out/tally-$name.txt"
}

# Most valuable first: tally on CUDA, then the PyTorch baseline, then OpenCL.
run_tally cuda 150 --backend cuda

torch_arg=()
if [ -z "${BENCH_SKIP_TORCH:-}" ]; then
    secs=$(limit 240)
    step "torch_baseline.py (limit ${secs}s)"
    if [ "$secs" -gt 0 ]; then
        # shellcheck disable=SC2086
        timeout "$secs" python3 bench/torch_baseline.py ${BENCH_ARGS:-} --json "$out/torch.jsonl" >"$out/torch.txt" 2>&1
        echo "exit status $?"
        tail -n 22 "$out/torch.txt"
        [ -s "$out/torch.jsonl" ] && torch_arg=(--torch "$out/torch.jsonl")
    fi
fi

run_tally opencl 120 --backend opencl
if [ -n "${BENCH_POCL:-}" ]; then
    run_tally pocl 120 --backend opencl --device "$BENCH_POCL" --scale 0.1
fi

step "compare"
tally_args=()
for f in "$out"/tally-*.jsonl; do [ -s "$f" ] && tally_args+=(--tally "$f"); done
python3 bench/compare.py "${tally_args[@]}" "${torch_arg[@]}" --out "$out/RESULTS.md"
echo "exit status $?"
echo
cat "$out/RESULTS.md"
