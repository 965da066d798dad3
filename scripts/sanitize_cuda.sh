#!/usr/bin/env bash
# scripts/sanitize_cuda.sh - issue 15's checks on an NVIDIA GPU (run by hand
# on the GPU machine; CI has no GPU). Builds with CUDA in $TALLY_BUILD_DIR
# (default build), then runs on the CUDA backend:
#   - the size, API fuzz and thread suites as ordinary tests;
#   - the API fuzz suite and the size suite under compute-sanitizer memcheck
#     (with leak checking) and racecheck, in-process (CK_FORK=no) so the
#     sanitizer sees every call.
# Exits non-zero when any step fails; one line per step.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/cuda/bin"
build_dir=${TALLY_BUILD_DIR:-build}
bash scripts/build.sh -Dcuda=enabled >/dev/null
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
status=0
step() { # label, command...
    local label=$1 log
    shift
    log="$build_dir/sanitize-cuda-$label.log"
    if "$@" >"$log" 2>&1; then
        echo "sanitize_cuda: $label ok ($(grep -E 'fuzz_api|ERROR SUMMARY|Checks' "$log" | tr '\n' ' '))"
    else
        status=1
        tail -30 "$log"
        echo "sanitize_cuda: $label FAILED (log: $log)"
    fi
}
export TALLY_TEST_BACKEND=cuda
step suites meson test -C "$build_dir" sizes_cuda fuzz_api_cuda threads_cuda --print-errorlogs
export CK_FORK=no
step memcheck-fuzz "$cs" --tool memcheck --leak-check full --error-exitcode 3 "$build_dir/tests/check_fuzz_api"
# check_sizes provokes CUDA_ERROR_OUT_OF_MEMORY on purpose (sizes no memory
# holds) to check tally's statuses: those API errors are not reported.
step memcheck-sizes "$cs" --tool memcheck --leak-check full --report-api-errors no --error-exitcode 3 "$build_dir/tests/check_sizes"
step racecheck-fuzz env TALLY_FUZZ_CALLS=2000 "$cs" --tool racecheck --error-exitcode 3 "$build_dir/tests/check_fuzz_api"
exit $status
