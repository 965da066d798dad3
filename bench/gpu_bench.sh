#!/usr/bin/env bash
# The whole benchmark in one call on an NVIDIA GPU machine (bench/README.md):
# builds tally (CUDA, OpenCL, tests), times every workload on tally CUDA, on
# PyTorch (eager and torch.compile, the torch installed there) and on tally
# over NVIDIA OpenCL, each at 1/16, 1/4, 1 and 4 times its shape, with the
# read/write/copy ceilings measured in the same run; writes one comparison
# table and two plots; then runs compute-sanitizer (memcheck over the CUDA
# op suite, racecheck over its fill, categorical and mixture cases) and
# tally's crosscheck if time is left.
#
#   bash bench/gpu_bench.sh            # everything lands in $OUT (default /tmp/tally-bench-out)
#
# Files in $OUT (few, so the device tool brings all of them back):
#   RESULTS-run.md   the tables (bench/report.py): paste into bench/RESULTS.md
#   workloads.png    time per workload at scale 1: tally CUDA, tally OpenCL, torch eager,
#                    torch.compile and the floor
#   scaling.png      time against size, one panel per workload
#   summary.txt      what ran, exit statuses, sanitizer and crosscheck summaries
#   data.tar.gz      the JSON lines of every run (tally-cuda, tally-opencl, torch) and every log
#
# Environment:
#   GPU_DEADLINE     seconds the whole script may take (default 560; the device tool allows 600)
#   BENCH_SCALES     default 0.0625,0.25,1,4
#   BENCH_ARGS       extra arguments for tally-bench and torch_baseline.py (e.g. "--reps 3")
#   TALLY_BUILD_DIR  build directory (default build-gpu, shared with scripts/gpu_session.sh)
#   BENCH_COMMIT     the commit to name in the report (default: git rev-parse, when .git is there)
#   BENCH_VARIANT    kernel switches of kernels/abi.h, kernels/backward_abi.h or tally/dialect.h for a second CUDA build timed on the workloads
#                    they touch (default "TALLY_K_GMM_LANES_PER_ITEM=1u TALLY_K_RNG_BLOCKS_PER_ITEM=2u":
#                    the one-lane-per-work-item mixture trees, two Philox blocks per fill work-item);
#                    empty: none. BENCH_VARIANT_ONLY: the workloads (default the fills and mixtures)
#   GPU_SANITIZE=0   skip compute-sanitizer; GPU_CROSSCHECK=0 skip the crosscheck; BENCH_OPENCL=0 skip
#                    the NVIDIA OpenCL timings
#
# The machine has no Check and no OpenCL headers: they come from the Debian
# packages in .debs/ (carried by the device tool: carry [".debs"]), unpacked
# into a private prefix, as scripts/gpu_session.sh does.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
gpu_out_default=/tmp/tally-bench-out
. scripts/gpu_env.sh
scales=${BENCH_SCALES:-0.0625,0.25,1,4}
start=$(date +%s)
deadline=${GPU_DEADLINE:-560}
summary="$out/summary.txt"
: >"$summary"
step() { printf '\n== [%ss] %s\n' "$(($(date +%s) - start))" "$*"; }
note() { echo "$*" | tee -a "$summary"; }
# A step's time limit: its own, cut to what is left of the deadline less 20 s
# for the report and the bundle (0: no time left, skip it).
limit() {
    local left=$((deadline - ($(date +%s) - start) - 20))
    if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
run_step() { # name, seconds, command... (output to logs/name.log)
    local name=$1 secs
    secs=$(limit "$2")
    shift 2
    if [ "$secs" -eq 0 ]; then note "$name: skipped (out of time)"; return 124; fi
    step "$name (limit ${secs}s)"
    local t0=$(date +%s)
    timeout "$secs" "$@" >"$logs/$name.log" 2>&1
    local rc=$?
    note "$name: exit $rc after $(($(date +%s) - t0))s"
    return $rc
}

step "machine"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
    git log -1 --format='commit %H %s' 2>/dev/null
} 2>&1 | tee -a "$summary"
commit=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -z "${BENCH_COMMIT:-}" ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    commit="$commit+changes"
fi

# ---- Check and OpenCL headers from .debs/, then the build -------------------
tests=true
[ -e "$gpu_prefix/usr/include/check.h" ] || pkg-config --exists check 2>/dev/null || tests=false
step "build ($build, tests=$tests)"
if ! GPU_BUILD_TIMEOUT=$(limit 240) gpu_build "$build" "$logs" -Dcuda=enabled -Dopencl=enabled -Dtests=$tests; then
    note "build: FAILED"
    exit 1
fi
note "build: ok after $(($(date +%s) - start))s"
bench="$build/bench/tally-bench"
"$bench" --list >"$logs/devices.txt" 2>&1

# ---- Timings: most valuable first ------------------------------------------
# shellcheck disable=SC2086 # BENCH_ARGS is a list on purpose
run_step tally-cuda 150 "$bench" --backend cuda --scales "$scales" --batch-ms 20 ${BENCH_ARGS:-} \
    --json "$out/tally-cuda.jsonl"
tail -n 3 "$logs/tally-cuda.log"
# torch: scale 1 first (with torch.compile), then the other scales, so a cut-off keeps the main row.
torch_scales="1,$(echo "$scales" | tr ',' '\n' | grep -vx '1' | paste -sd,)"
# shellcheck disable=SC2086
run_step torch 210 python3 bench/torch_baseline.py --scales "${torch_scales%,}" --compile-scales 1 --batch-ms 20 \
    ${BENCH_ARGS:-} --json "$out/torch.jsonl"
tail -n 3 "$logs/torch.log"
# shellcheck disable=SC2086
[ "${BENCH_OPENCL:-1}" = 0 ] || run_step tally-opencl 120 "$bench" --backend opencl --scales "$scales" --batch-ms 20 ${BENCH_ARGS:-} \
    --json "$out/tally-opencl.jsonl"
tail -n 3 "$logs/tally-opencl.log"

# ---- A variant build: the same source with other kernel switches ----------
variant=${BENCH_VARIANT-TALLY_K_GMM_LANES_PER_ITEM=1u TALLY_K_RNG_BLOCKS_PER_ITEM=2u}
variant_only=${BENCH_VARIANT_ONLY:-uniform_fill,raw_fill,normal_fill,gmm_small,gmm_large}
build_variant() {
    local src=/tmp/tally-variant def name val
    rm -rf "$src" && mkdir -p "$src"
    tar --exclude='./build*' --exclude=./.git --exclude=./.debs -cf - . | tar -C "$src" -xf - || return 1
    for def in $variant; do
        name=${def%%=*}
        val=${def#*=}
        sed -i "s|^#\( *\)define $name .*|#\1define $name $val|" "$src/kernels/abi.h" \
            "$src/kernels/backward_abi.h" "$src/include/tally/dialect.h"
        grep -q "^# *define $name $val\$" "$src/kernels/abi.h" "$src/kernels/backward_abi.h" \
            "$src/include/tally/dialect.h" ||
            { echo "no switch $name in kernels/abi.h, kernels/backward_abi.h or include/tally/dialect.h"; return 1; }
    done
    (cd "$src" && meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && ninja -C build bench/tally-bench)
}
if [ -n "$variant" ] && [ -s "$out/tally-cuda.jsonl" ]; then
    # timeout runs programs, not shell functions: the function goes to a child bash.
    export -f build_variant
    export variant
    if run_step variant-build 120 bash -c build_variant; then
        # shellcheck disable=SC2086
        run_step tally-cuda-variant 60 /tmp/tally-variant/build/bench/tally-bench --backend cuda --scales 1 \
            --no-ceilings --batch-ms 20 --only "$variant_only" --label "$variant" ${BENCH_ARGS:-} \
            --json "$out/tally-cuda-variant.jsonl"
    fi
fi

report() {
    local args=()
    for f in "$out/tally-cuda.jsonl" "$out/tally-opencl.jsonl"; do [ -s "$f" ] && args+=(--tally "$f"); done
    [ -s "$out/torch.jsonl" ] && args+=(--torch "$out/torch.jsonl")
    [ -s "$out/tally-cuda-variant.jsonl" ] && args+=(--variant "$out/tally-cuda-variant.jsonl")
    [ ${#args[@]} -gt 0 ] || return 1
    python3 bench/report.py "${args[@]}" --commit "$commit" --out "$out/RESULTS-run.md" --png-dir "$out" \
        >"$logs/report.log" 2>&1
}
step "report"
report && note "report: RESULTS-run.md written" || note "report: FAILED (see logs/report.log)"

# ---- compute-sanitizer over the CUDA op suite ------------------------------
if [ "${GPU_SANITIZE:-1}" = 1 ] && [ "$tests" = true ]; then
    CK_FORK=no TALLY_TEST_BACKEND=cuda run_step sanitizer-memcheck-ops 150 \
        compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/check_ops"
    grep -E "ERROR SUMMARY|Checks:" "$logs/sanitizer-memcheck-ops.log" | tail -n 2 | tee -a "$summary"
    # The kernels this work changed that share local memory between work-items.
    for case in rng categorical gmm; do
        CK_FORK=no CK_RUN_CASE=$case TALLY_TEST_BACKEND=cuda run_step "sanitizer-racecheck-$case" 60 \
            compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/check_ops"
        grep -E "RACECHECK SUMMARY|ERROR SUMMARY|Checks:" "$logs/sanitizer-racecheck-$case.log" | tail -n 2 |
            tee -a "$summary"
    done
fi
# ---- every op on every device (host, CUDA, NVIDIA OpenCL, PoCL), bit for bit
if [ "${GPU_CROSSCHECK:-1}" = 1 ]; then
    run_step crosscheck 90 "$build/tools/tally" crosscheck
    tail -n 4 "$logs/crosscheck.log" | tee -a "$summary"
fi

step "bundle"
cp "$summary" "$logs/" 2>/dev/null
tar -C "$out" -czf "$out/data.tar.gz" logs $(cd "$out" && ls ./*.jsonl 2>/dev/null) && rm -rf "$logs" "$out"/*.jsonl
note "done after $(($(date +%s) - start))s"
echo
[ -f "$out/RESULTS-run.md" ] && head -c 9000 "$out/RESULTS-run.md"
