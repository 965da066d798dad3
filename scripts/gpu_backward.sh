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
gpu_out_default=/tmp/tally-gpu-out
. scripts/gpu_env.sh
summary="$out/summary-backward.txt"

gpu_build_both || exit 1

gpu_run backward-cuda 120 env TALLY_TEST_BACKEND=cuda "$build/tests/check_backward"
gpu_run backward-opencl-nvidia 120 env TALLY_TEST_BACKEND=opencl TALLY_DEVICE="$cl_nvidia" "$build/tests/check_backward"
[ "$cl_pocl" -ge 0 ] && gpu_run backward-opencl-pocl 300 env TALLY_TEST_BACKEND=opencl TALLY_DEVICE="$cl_pocl" "$build/tests/check_backward"
gpu_run digamma-device-cuda 120 env TALLY_TEST_BACKEND=cuda "$build/tests/check_math_device"
gpu_run crosscheck-backward 300 $tally crosscheck \
    --ops kl_div_backward,dirichlet_multinomial_backward,gmm_log_prob_backward,gmm_sample_backward
tail -n 3 "$logs/crosscheck-backward.log" | tee -a "$summary"
gpu_run sanitizer-memcheck-backward 300 env CK_FORK=no TALLY_TEST_BACKEND=cuda \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/check_backward"
gpu_run bench-backward-cuda 200 "$build/bench/tally-bench" --backend cuda --only kl_bw,dm_bw,gmm_bw \
    --json "$out/tally-backward-cuda.jsonl"
tail -n 8 "$logs/bench-backward-cuda.log" | tee -a "$summary"
gpu_run bench-backward-opencl 200 "$build/bench/tally-bench" --backend opencl --device "$cl_nvidia" \
    --only kl_bw,dm_bw,gmm_bw --json "$out/tally-backward-opencl.jsonl"
gpu_run torch-backward 300 python3 bench/torch_baseline.py --only kl_bw,dm_bw,gmm_bw --json "$out/torch-backward.jsonl"
tail -n 10 "$logs/torch-backward.log" | tee -a "$summary"
