#!/bin/bash
# Session 2026-12-06e call 3 (call 1 got no machine): issue 14's closing set on whatever card comes:
# the three gradient workloads with the ceilings and torch in the same call,
# the gradient suite (its training loops) on CUDA and NVIDIA OpenCL, the
# crosscheck of the gradient ops over four devices, and the Python autograd
# tests with torch CUDA tensors.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; tar -C "$O" -cf "$O/x.tar" x; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >> "$O/x/steps.txt"
sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build
export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=230
export BENCH_ARGS="--only kl_bw,dm_bw,gmm_bw"
bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
el "bench done"
. scripts/gpu_env.sh
B=build-gpu; gpu_opencl_devices $B/tools/tally
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x|passed|failed' $O/x/$name.txt | tail -2 | tr '\n' ' ')"; }
export CK_DEFAULT_TIMEOUT=600
T backward_cuda 90 env TALLY_TEST_BACKEND=cuda $B/tests/check_backward
T backward_nvcl 90 env TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_backward
T crosscheck_bw 150 $B/tools/tally crosscheck --dtype all --ops kl_div_backward,dirichlet_multinomial_backward,gmm_log_prob_backward,gmm_sample_backward
left=$(( 575 - ($(date +%s) - t0) ))
( cd tests/python && T pytest_grad $left env PYTHONPATH=$(cd ../.. && pwd)/python TALLY_LIBRARY=$(cd ../.. && pwd)/$B/libtally.so \
    TALLY_CLI=$(cd ../.. && pwd)/$B/tools/tally TALLY_REQUIRE_CUDA=1 python3 -m pytest -q -rs -p no:cacheprovider test_autograd.py test_backward.py )
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
