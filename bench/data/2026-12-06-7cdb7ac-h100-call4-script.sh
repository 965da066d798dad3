#!/bin/bash
# Session 2026-12-06f call 4, at its commit (the DM backward's stage running
# on across units, its L2 prefetch one step ahead). On an H200: issue 14's
# closing set (the three gradient workloads with ceilings and torch in the
# same call, the gradient suite with its training loops on CUDA and NVIDIA
# OpenCL, the four-device crosscheck of the gradient ops, the Python autograd
# tests on CUDA). On either card: the gradient suite on CUDA, memcheck over
# the DM cases, and the DM backward's builds alternated: 9810267 (base),
# dd69db5 (prefetch two steps ahead: pf2), this commit (main) and this commit
# with no prefetch (pf0).
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; tar -C "$O" -cf "$O/x.tar" x; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >> "$O/x/steps.txt"
sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build
vb() { # name tarball [define value]
  ( rm -rf /tmp/$1 && mkdir -p /tmp/$1 && tar -C /tmp/$1 -xf $PWD/.debs/v-$2.tar && cd /tmp/$1 &&
    sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build &&
    if [ -n "$3" ]; then sed -i "s|^#define $3 .*|#define $3 $4|" kernels/backward_abi.h && grep "^#define $3 $4" kernels/backward_abi.h; fi &&
    meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && nice -n 19 ninja -j 4 -C build bench/tally-bench ) > "$O/x/build-$1.txt" 2>&1
}
export CK_DEFAULT_TIMEOUT=600
B=build-gpu
T() { local n=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$n.txt" 2>&1; el "$n rc=$? $(grep -E 'Checks|SUMMARY|cases x|passed|failed' $O/x/$n.txt | tail -2 | tr '\n' ' ')"; }
alt() { # rounds
  for r in $(seq 1 $1); do
    for b in base pf2 main pf0; do
      bin=/tmp/$b/build/bench/tally-bench; [ $b = main ] && bin=$B/bench/tally-bench
      timeout 40 $bin --backend cuda --scales 0.25,1 --no-ceilings --batch-ms 20 --only dm_bw > "$O/x/alt-$b-$r.txt" 2>&1
    done
  done
  el "alternation done: $(for b in base pf2 main pf0; do echo "$b:"; grep -h '65536x1024' $O/x/alt-$b-*.txt | awk '{print $3}' | tr '\n' ' '; done)"
}
for v in "base 9810267" "pf2 dd69db5" "pf0 $1 TALLY_K_DM_BW_LANES_PREFETCH 0u"; do vb $v & done
. scripts/gpu_env.sh
case "$name" in
*H200*)
  export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=230
  export BENCH_ARGS="--only kl_bw,dm_bw,gmm_bw"
  bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
  el "bench done"
  gpu_opencl_devices $B/tools/tally
  T backward_cuda 90 env TALLY_TEST_BACKEND=cuda $B/tests/check_backward
  T backward_nvcl 90 env TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_backward
  T crosscheck_bw 150 $B/tools/tally crosscheck --dtype all --ops kl_div_backward,dirichlet_multinomial_backward,gmm_log_prob_backward,gmm_sample_backward
  ( cd tests/python && T pytest_grad 100 env PYTHONPATH=$(cd ../.. && pwd)/python TALLY_LIBRARY=$(cd ../.. && pwd)/$B/libtally.so \
      TALLY_CLI=$(cd ../.. && pwd)/$B/tools/tally TALLY_REQUIRE_CUDA=1 python3 -m pytest -q -rs -p no:cacheprovider test_autograd.py test_backward.py )
  ;;
*)
  gpu_build $B $O/x/logs -Dcuda=enabled -Dopencl=disabled; el "build rc=$?"
  T backward_cuda 90 env TALLY_TEST_BACKEND=cuda $B/tests/check_backward
  T memcheck_dm 90 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_backward
  T crosscheck_dm 60 $B/tools/tally crosscheck --backends host,cuda --dtype all --ops dirichlet_multinomial_backward
  ;;
esac
wait; el "variant builds: $(tail -qn1 $O/x/build-*.txt | tr '\n' ' ')"
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 110 ]; then alt 3; elif [ $left -gt 40 ]; then alt 1; fi
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
