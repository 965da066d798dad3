#!/bin/bash
# Session 2026-12-06c call 4: tally_k_dm_rows_local (a whole quad's lgamma
# calls side by side) against a5cab1e, with torch on the DM workloads; checks.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; }
nvidia-smi --query-gpu=name --format=csv,noheader >> "$O/x/steps.txt"
( rm -rf /tmp/base && mkdir -p /tmp/base && tar -C /tmp/base -xf .debs/base.tar && cd /tmp/base &&
  sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build &&
  meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && nice -n 19 ninja -C build bench/tally-bench ) > "$O/x/base-build.txt" 2>&1 &
export BENCH_COMMIT=$1 BENCH_VARIANT= BENCH_SCALES=1 BENCH_OPENCL=1 GPU_SANITIZE=0 GPU_CROSSCHECK=0 GPU_DEADLINE=220 \
  BENCH_ARGS="--only dm_small,dm_large,dm_large_row,gmm_small"
bash bench/gpu_bench.sh > "$O/bench.txt" 2>&1
el "bench done"
wait; el "base build: $(tail -1 $O/x/base-build.txt)"
. scripts/gpu_env.sh
B=build-gpu; gpu_opencl_devices $B/tools/tally
T() { local name=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$name.txt" 2>&1; el "$name rc=$? $(grep -E 'Checks|SUMMARY|cases x' $O/x/$name.txt | tail -2 | tr '\n' ' ')"; }
export CK_DEFAULT_TIMEOUT=600
T ops_dm_cuda 60 env CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda $B/tests/check_ops
T half_dm_cuda 60 env CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda $B/tests/check_half
T ops_dm_nvcl 60 env CK_RUN_CASE=dm TALLY_DEVICE=$cl_nvidia TALLY_TEST_BACKEND=opencl $B/tests/check_ops
T bits_cuda 90 env TALLY_TEST_BACKEND=cuda $B/tests/check_bits
T memcheck_dm 60 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_ops
T racecheck_dm 60 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool racecheck --error-exitcode 9 $B/tests/check_ops
T crosscheck 60 $B/tools/tally crosscheck --dtype all --ops dirichlet_multinomial
for r in 1 2 3; do
  for b in base new; do
    bin=/tmp/base/build/bench/tally-bench; [ $b = new ] && bin=$B/bench/tally-bench
    timeout 30 $bin --backend cuda --scales 0.25,1 --no-ceilings --batch-ms 20 --only dm_small,dm_large,dm_large_row > "$O/x/alt-$b-$r.txt" 2>&1
  done
done
el "alternation done"
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
