#!/bin/bash
# Session 2026-12-06d call 1: every workload with torch in the same call, the
# gradient suite (its training loops) on CUDA and NVIDIA OpenCL, the KL
# backward against two bench-only copies (streaming hints; a pass-through
# with the same traffic), the DM backward against the commit before its
# whole steps, Nsight Compute's warp states over the three backward
# kernels, the crosscheck of the gradient ops on every device.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; tar -C "$O" -cf "$O/x.tar" x; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >> "$O/x/steps.txt"
vb() { # name, tar, then a command that edits the copy
  local n=$1 tarball=$PWD/.debs/$2; shift 2
  ( rm -rf /tmp/$n && mkdir -p /tmp/$n && tar -C /tmp/$n -xf $tarball && cd /tmp/$n &&
    sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build && eval "$*" &&
    meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && nice -n 19 ninja -C build bench/tally-bench ) > "$O/x/build-$n.txt" 2>&1
}
vb base base.tar true &
vb whole head.tar true &
vb stream head.tar "sed -i 's/define TALLY_K_KL_BW_STREAMING 0u/define TALLY_K_KL_BW_STREAMING 1u/' kernels/backward_abi.h" &
vb pass head.tar "sed -i 's/^#if TALLY_K_KL_BW_SHORT_QUADS\$/{ tally_k_grad4 r; r.a = x; r.b = t; (void)g; (void)flags; return r; }\n#if TALLY_K_KL_BW_SHORT_QUADS/' kernels/backward.h" &
export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=230
bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
el "bench done"
. scripts/gpu_env.sh
B=build-gpu; gpu_opencl_devices $B/tools/tally
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x' $O/x/$name.txt | tail -2 | tr '\n' ' ')"; }
export CK_DEFAULT_TIMEOUT=600
T backward_cuda 90 env TALLY_TEST_BACKEND=cuda $B/tests/check_backward
T backward_nvcl 90 env TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_backward
T racecheck_dm 90 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/check_backward
T memcheck_dm 90 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_backward
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
for item in dm_bw=dm_bw_lanes kl_bw=kl_backward 'gmm_bw=gmm_bw_(rows|warp)'; do
  w=${item%%=*}; k=${item#*=}
  timeout 60 $ncu --clock-control none -k "regex:tally_k_$k" --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
    --section WarpStateStats --section SchedulerStats --section InstructionStats \
    $B/bench/tally-bench --backend cuda --only $w --no-ceilings --reps 1 --calls 1 --rotate-mib 0 > "$O/x/ncu-$w.txt" 2>&1
  el "ncu $w rc=$?"
done
wait; el "variant builds: $(tail -qn1 $O/x/build-*.txt | tr '\n' ' ')"
for r in 1 2 3; do
  for b in main base whole stream pass; do
    bin=/tmp/$b/build/bench/tally-bench; [ $b = main ] && bin=$B/bench/tally-bench
    only=kl_bw; [ $b = main ] && only=kl_bw,dm_bw; [ $b = base -o $b = whole ] && only=dm_bw
    timeout 40 $bin --backend cuda --scales 0.25,1 --no-ceilings --batch-ms 20 --only $only > "$O/x/alt-$b-$r.txt" 2>&1
  done
done
el "alternation done"
left=$(( ${DEADLINE:-560} - ($(date +%s) - t0) ))
T crosscheck_bw $left $B/tools/tally crosscheck --dtype all --ops kl_div_backward,dirichlet_multinomial_backward,gmm_log_prob_backward,gmm_sample_backward
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
