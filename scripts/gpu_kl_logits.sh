#!/usr/bin/env bash
# KL divergence from logits (TALLY_KL_INPUT_LOGITS, TALLY_KL_TARGET_LOGITS;
# issue 16) on an NVIDIA GPU machine, in one device call: its suite against
# float64 on CUDA, NVIDIA OpenCL and PoCL; the device-against-host bit
# identity of every op (check_bits, whose "kl from logits" row covers the
# fused and the general shapes) on CUDA and NVIDIA OpenCL; the kl_div
# crosscheck at full size (the logits cases included: 4096x4096, 8x16384,
# 32x2048, ...) with every input dtype on every device; compute-sanitizer
# over the suite on CUDA.
#
#   bash scripts/gpu_kl_logits.sh    # logs in $OUT (default /tmp/tally-gpu-out)
#
# Same setup as scripts/gpu_session.sh (Check and OpenCL headers from .debs/).
# The timings (16384x16384 against one read of both inputs) are bench/'s.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu_env.sh
summary="$out/summary-kl-logits.txt"

gpu_build_both || exit 1

gpu_run kl-logits-cuda 120 env TALLY_TEST_BACKEND=cuda "$build/tests/check_kl_logits"
gpu_run kl-logits-opencl-nvidia 120 env TALLY_TEST_BACKEND=opencl TALLY_DEVICE="$cl_nvidia" "$build/tests/check_kl_logits"
[ "$cl_pocl" -ge 0 ] && gpu_run kl-logits-opencl-pocl 300 env TALLY_TEST_BACKEND=opencl TALLY_DEVICE="$cl_pocl" \
    "$build/tests/check_kl_logits"
gpu_run bits-cuda 300 env TALLY_TEST_BACKEND=cuda "$build/tests/check_bits"
gpu_run bits-opencl-nvidia 300 env TALLY_TEST_BACKEND=opencl TALLY_DEVICE="$cl_nvidia" "$build/tests/check_bits"
gpu_run crosscheck-kl 300 $tally crosscheck --ops kl_div --dtype all
tail -n 3 "$logs/crosscheck-kl.log" | tee -a "$summary"
grep -E "FAIL" -A3 "$logs/crosscheck-kl.log" | head -n 20 | tee -a "$summary"
gpu_run sanitizer-memcheck-kl-logits 300 env CK_FORK=no TALLY_TEST_BACKEND=cuda \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/check_kl_logits"
