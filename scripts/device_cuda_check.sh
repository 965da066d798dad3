#!/usr/bin/env bash
# Builds tally with the CUDA backend on a machine with an NVIDIA GPU and runs
# the CUDA test suites: check_cuda (the driver outcome, which there must be
# success) and check_cuda_interop (tally on an app's memory and stream).
# Exits non-zero when a test fails and also when the interop suite is
# skipped: on a GPU machine a skip means the backend could not be used.
#
#   bash scripts/device_cuda_check.sh [extra meson setup options]
#
# With TALLY_DEVICE_ALL_SUITES=1 it also builds everything and runs every
# suite meson registers for the cuda backend (ops_cuda, errors_cuda, ...),
# whose failures then count too.
#
# TALLY_BUILD_DIR (default build-cuda-device) is the build directory. Logs go
# to $OUT when it is set (the device tool's output folder), else to
# /tmp/tally-device-logs.
# Works without pkg-config's Check: the Debian packages in .debs/ (check,
# libsubunit) are unpacked into a private prefix when Check is not installed.
set -uo pipefail
cd "$(dirname "$0")/.."
build_dir=${TALLY_BUILD_DIR:-build-cuda-device}
log_dir=${OUT:-/tmp/tally-device-logs}
mkdir -p "$log_dir"
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi

step() { printf '\n== %s\n' "$*"; }

step "machine"
nvidia-smi -L 2>&1 || echo "nvidia-smi failed"
command -v nvcc >/dev/null && nvcc --version | tail -n 2
for tool in gcc meson ninja pkg-config; do
    printf '%s: %s\n' "$tool" "$(command -v "$tool" || echo missing)"
done

# Check (and the OpenCL headers) from .debs/ when the system lacks them.
if ! pkg-config --exists check 2>/dev/null; then
    . scripts/gpu_env.sh
fi

step "configure ($build_dir, -Dcuda=enabled $*)"
start=$(date +%s)
rm -rf "$build_dir"
if ! meson setup "$build_dir" -Dcuda=enabled "$@" >"$log_dir/device_cuda_setup.log" 2>&1; then
    tail -n 40 "$log_dir/device_cuda_setup.log"
    exit 1
fi
grep -A6 -i "Backends" "$log_dir/device_cuda_setup.log"

step "build (libtally and the CUDA test programs)"
targets=(tally:shared_library tally:static_library)
have_tests=0
if meson introspect "$build_dir" --targets | grep -q '"name": "check_cuda_interop"'; then
    targets+=(check_cuda check_cuda_interop)
    have_tests=1
fi
all_suites=${TALLY_DEVICE_ALL_SUITES:-0}
if [ "$all_suites" = 1 ]; then targets=(); fi
if ! meson compile -C "$build_dir" "${targets[@]}" >"$log_dir/device_cuda_build.log" 2>&1; then
    grep -E "error|FAILED" -A4 "$log_dir/device_cuda_build.log" | head -n 60
    exit 1
fi
echo "configure + build: $(( $(date +%s) - start )) s"

fatbin="$build_dir/backends/cuda/tally_kernels.fatbin"
if command -v cuobjdump >/dev/null && [ -f "$fatbin" ]; then
    step "fatbin contents"
    cuobjdump --list-elf --list-ptx "$fatbin"
fi
step "libtally's NEEDED libraries (no libcuda, no libcudart)"
readelf -d "$build_dir"/libtally.so | grep NEEDED
if readelf -d "$build_dir"/libtally.so | grep -q -E "libcuda|libcudart"; then
    echo "FAIL: libtally links the CUDA driver or runtime"
    exit 1
fi

# Without pkg-config meson cannot see Check and defines no tests; the two
# programs are then compiled here, against the static library.
if [ "$have_tests" = 0 ]; then
    step "meson found no Check: compiling the CUDA test programs directly"
    check_root=/tmp/tally-check-root/usr
    mkdir -p "$build_dir/tests"
    for name in check_cuda check_cuda_interop; do
        if ! gcc -std=c11 -O2 -ffp-contract=off -D_POSIX_C_SOURCE=200809L -pthread \
            -DTALLY_TEST_DATA_DIR="\"$PWD/tests/data\"" \
            -Iinclude -I. -I"$build_dir" -Itests -Iharness -I"$check_root/include" \
            "tests/$name.c" tests/runner.c tests/testutil.c harness/reference.c \
            "$build_dir/libtally.a" -L"$check_root/lib/x86_64-linux-gnu" \
            -lcheck_pic -lsubunit -lrt -lm -ldl -o "$build_dir/tests/$name"; then
            echo "FAIL: could not compile $name (no Check headers or library?)"
            exit 1
        fi
    done
fi

step "tests"
status=0
"$build_dir/tests/check_cuda" 2>&1 | tee "$log_dir/device_check_cuda.log" || status=1
TALLY_TEST_BACKEND=cuda "$build_dir/tests/check_cuda_interop" 2>&1 | tee "$log_dir/device_check_cuda_interop.log"
rc=${PIPESTATUS[0]}
if [ "$rc" = 77 ]; then
    echo "FAIL: check_cuda_interop skipped: no usable CUDA device on this machine"
    status=1
elif [ "$rc" != 0 ]; then
    status=1
fi

# The fatbin's compute_90 PTX is what GPUs newer than sm_90 run, after the
# driver compiles it. Forcing that path here checks that the PTX loads and
# gives the same results as the machine code.
step "check_cuda_interop again on JIT-compiled PTX (CUDA_FORCE_PTX_JIT=1)"
CUDA_FORCE_PTX_JIT=1 TALLY_TEST_BACKEND=cuda "$build_dir/tests/check_cuda_interop" 2>&1 |
    tee "$log_dir/device_check_cuda_interop_jit.log"
[ "${PIPESTATUS[0]}" = 0 ] || status=1

if [ "$all_suites" = 1 ]; then
    step "every suite registered for the cuda backend"
    meson test -C "$build_dir" --suite cuda --print-errorlogs --num-processes 1 2>&1 |
        tee "$log_dir/device_meson_test_cuda.log" || status=1
fi

step "result"
if [ "$status" = 0 ]; then echo "device_cuda_check: all CUDA tests passed"; else echo "device_cuda_check: FAILED"; fi
exit $status
