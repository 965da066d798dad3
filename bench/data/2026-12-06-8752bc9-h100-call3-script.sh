#!/bin/bash
# Session 2026-12-06e call 3: the DM backward's L2 prefetch. Builds this
# commit (prefetch 3 steps ahead) with the tests, 6f487a7 (no prefetch) and
# a copy prefetching 6 steps ahead as bench-only sm_90 trees; checks this
# commit's kernel (suite's DM cases, memcheck, crosscheck with the host);
# alternates the three builds twice; the floor from the ceilings.
cd "$(dirname "$0")/.." || exit 1
O=$OUT; t0=$(date +%s); mkdir -p "$O/x"
el() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$O/x/steps.txt"; tar -C "$O" -cf "$O/x.tar" x; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >> "$O/x/steps.txt"
sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build
vb() { # name, tarball, then a command that edits the copy
  local n=$1 tarball=$PWD/.debs/$2; shift 2
  ( rm -rf /tmp/$n && mkdir -p /tmp/$n && tar -C /tmp/$n -xf $tarball && cd /tmp/$n &&
    sed -i '/compute_75\|compute_80\|compute_86\|compute_89/d' backends/cuda/meson.build && eval "$*" &&
    meson setup build -Dcuda=enabled -Dopencl=disabled -Dtests=false && nice -n 19 ninja -C build bench/tally-bench ) > "$O/x/build-$n.txt" 2>&1
}
vb base v-6f487a7.tar true &
vb p6 v-8752bc9.tar "sed -i 's/define TALLY_K_DM_BW_LANES_PREFETCH 3u/define TALLY_K_DM_BW_LANES_PREFETCH 6u/' kernels/backward_abi.h && grep -q 'PREFETCH 6u' kernels/backward_abi.h" &
. scripts/gpu_env.sh
B=build-gpu
gpu_build $B $O/x/logs -Dcuda=enabled -Dopencl=disabled; el "build rc=$?"
export CK_DEFAULT_TIMEOUT=600
T() { local n=$1 secs=$2; shift 2; timeout $secs "$@" > "$O/x/$n.txt" 2>&1; el "$n rc=$? $(grep -E 'Checks|SUMMARY|cases x|passed|failed' $O/x/$n.txt | tail -2 | tr '\n' ' ')"; }
T backward_dm 60 env CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda $B/tests/check_backward
T memcheck_dm 60 env CK_FORK=no CK_RUN_CASE=dm TALLY_TEST_BACKEND=cuda compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/check_backward
wait; el "variant builds: $(tail -qn1 $O/x/build-*.txt | tr '\n' ' ')"
for r in 1 2; do
  for b in base main p6; do
    bin=/tmp/$b/build/bench/tally-bench; [ $b = main ] && bin=$B/bench/tally-bench
    timeout 40 $bin --backend cuda --scales 0.25,1 --no-ceilings --batch-ms 20 --only dm_bw > "$O/x/alt-$b-$r.txt" 2>&1
  done
done
el "alternation: $(for b in base main p6; do echo -n "$b "; grep -h dm_bw $O/x/alt-$b-*.txt | awk '{printf "%s ", $3}'; done)"
T crosscheck_dm 60 $B/tools/tally crosscheck --dtype all --backends host,cuda --ops dirichlet_multinomial_backward
T bench_dm 40 $B/bench/tally-bench --backend cuda --scales 1 --only dm_bw --json $O/x/tally-dm.jsonl
tar -C "$O" -cf "$O/x.tar" x && rm -rf "$O/x"
