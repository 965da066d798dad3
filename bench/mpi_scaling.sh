#!/usr/bin/env bash
# The MPI measurements for the GPU machine (16 cores, one H200), in one call:
#
#   bash bench/mpi_scaling.sh        # results under $OUT (default /tmp/tally-mpi-out)
#
# 1. Byte identity (issue 13's one-GPU part): two ranks sharing the GPU run
#    every libtally_mpi op under many splits and compare each with the
#    single-GPU op (check_mpi with TALLY_MPI_TEST_REFERENCE=cuda); then CUDA
#    and host ranks mixed; then `tally crosscheck --mpi` on CUDA.
# 2. Scaling of KL (batchmean, input_is_prob) and sum: host ranks 1..16 on the
#    CPU cores (one thread each), weak and strong; 1 and 2 ranks sharing the
#    GPU (CUDA), weak and strong; each with the communication time of the
#    slowest rank and the bytes it sent (bench/mpi_bench.c).
# 3. Baselines timed in the same run: NumPy (one core) for the host shapes,
#    PyTorch (GPU) for the GPU shape, when they are installed.
#
# Environment: TALLY_BUILD_DIR (default build-mpi), MPI_BENCH_DEADLINE
# (seconds, default 560), MPI_BENCH_PARTS (default "identity host cuda
# baselines": a subset runs only those steps, for a second call). Every step has its own limit; a failing step is
# reported and the next one runs. The last lines are a summary table.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/tally-mpi-out}
build=${TALLY_BUILD_DIR:-build-mpi}
mkdir -p "$out"
start=$(date +%s)
deadline=${MPI_BENCH_DEADLINE:-560}
step() { printf '\n== [%ss] %s\n' "$(($(date +%s) - start))" "$*"; }
left() { echo $((deadline - ($(date +%s) - start) - 10)); }
lim() { local l; l=$(left); if [ "$l" -lt "$1" ]; then echo $((l > 5 ? l : 5)); else echo "$1"; fi; }
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none

step "machine"
nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/nvidia-smi.txt"
if ! command -v mpirun >/dev/null 2>&1 || ! pkg-config --exists ompi-c 2>/dev/null; then
    step "installing Open MPI"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null 2>&1 ||
        echo "apt-get install openmpi failed (no network?)"
fi
mpirun --version 2>&1 | head -1

step "build ($build)"
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" -Dmpi=enabled -Dcuda=enabled >"$out/setup.log" 2>&1 || { tail -30 "$out/setup.log"; exit 1; }
fi
timeout "$(lim 300)" meson compile -C "$build" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
bench="$build/bench/mpi_bench"
check="$build/tests/mpi/check_mpi"
tally="$build/tools/tally"
run() ( # run NAME LIMIT NP ENV... -- CMD...  (a subshell: the ENV stays local)
    local name=$1 limit=$2 np=$3; shift 3
    local envs=()
    while [ "$1" != "--" ]; do envs+=(-x "$1"); export "${1?}"; shift; done
    shift
    timeout "$(lim "$limit")" mpirun --oversubscribe --bind-to none -np "$np" "${envs[@]}" "$@" \
        >"$out/$name.out" 2>"$out/$name.err"
    local rc=$?
    printf '%-40s rc=%s\n' "$name" "$rc" | tee -a "$out/steps.txt"
    tail -3 "$out/$name.out"
    [ $rc -ne 0 ] && tail -5 "$out/$name.err"
    return 0
)

parts=" ${MPI_BENCH_PARTS:-identity host cuda baselines} "
want() { [[ "$parts" == *" $1 "* ]]; }

want identity && step "1. byte identity: 2 ranks sharing the GPU vs the single-GPU op (issue 13)"
want identity && run identity_cuda2_vs_cuda 240 2 TALLY_MPI_TEST_BACKENDS=cuda TALLY_MPI_TEST_REFERENCE=cuda TALLY_MPI_TEST_SPLITS=7 -- "$check"
want identity && run identity_cuda_host_mixed3 180 3 TALLY_MPI_TEST_BACKENDS=cuda,host TALLY_MPI_TEST_REFERENCE=cuda TALLY_MPI_TEST_SPLITS=4 -- "$check"
want identity && run crosscheck_mpi_cuda2 120 2 TALLY_BACKEND=cuda -- "$tally" crosscheck --mpi --backends cuda

# 16384 x 32771 = 5.4e8 elements: three tree levels, the middle one of three
# tiles split between the ranks, rank boundaries inside tiles (CI's shapes
# stop at two levels). mpi_bench --verify compares with the single device.
want identity && run identity_3levels_cuda2 150 2 TALLY_BACKEND=cuda -- "$bench" --rows 16384 --cols 32771 --reps 2 --verify
want identity && run identity_3levels_host_uneven3 200 3 TALLY_BACKEND=host -- "$bench" --rows 16383 --cols 32771 --reps 1 --verify

want host && step "2a. host ranks (1 thread each): weak (256 x 16384 per rank) and strong (4096 x 16384)"
want host && for np in 1 2 4 8 16; do
    run host_weak_np$np 60 $np TALLY_BACKEND=host TALLY_HOST_THREADS=1 -- "$bench" --rows 256 --cols 16384 --weak --reps 5
    cat "$out/host_weak_np$np.out" >>"$out/scaling.jsonl"
done
want host && for np in 1 2 4 8 16; do
    v=""; [ $np -eq 16 ] && v="--verify"
    run host_strong_np$np 90 $np TALLY_BACKEND=host TALLY_HOST_THREADS=1 -- "$bench" --rows 4096 --cols 16384 --reps 5 $v
    cat "$out/host_strong_np$np.out" >>"$out/scaling.jsonl"
done

want cuda && step "2b. CUDA ranks sharing the GPU: strong (16384 x 16384) and weak (8192 x 16384 per rank)"
want cuda && for np in 1 2; do
    run cuda_strong_np$np 90 $np TALLY_BACKEND=cuda -- "$bench" --rows 16384 --cols 16384 --reps 10 --verify
    cat "$out/cuda_strong_np$np.out" >>"$out/scaling.jsonl"
    run cuda_weak_np$np 90 $np TALLY_BACKEND=cuda -- "$bench" --rows 8192 --cols 16384 --weak --reps 10
    cat "$out/cuda_weak_np$np.out" >>"$out/scaling.jsonl"
done

want baselines && step "3. baselines: NumPy (1 core) on 4096 x 16384, PyTorch on 16384 x 16384"
want baselines && timeout "$(lim 120)" env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python3 - >"$out/baselines.jsonl" 2>"$out/baselines.err" <<'PY'
import json, time
try:
    import numpy as np
    rng = np.random.default_rng(0)
    p = rng.random((4096, 16384), dtype=np.float32) + np.float32(1e-7)
    t = rng.random((4096, 16384), dtype=np.float32) + np.float32(1e-7)
    def med(f, k=5):
        ts = []
        for _ in range(k):
            a = time.perf_counter(); f(); ts.append(time.perf_counter() - a)
        return sorted(ts)[k // 2]
    print(json.dumps({"baseline": "numpy", "op": "sum", "elements": p.size, "median_s": med(lambda: p.sum())}))
    kl = lambda: (t * (np.log(t) - np.log(p))).sum() / p.shape[0]
    print(json.dumps({"baseline": "numpy", "op": "kl_batchmean_input_is_prob", "elements": p.size, "median_s": med(kl)}))
except Exception as e:
    print(json.dumps({"baseline": "numpy", "error": str(e)}))
try:
    import torch
    if torch.cuda.is_available():
        p = torch.rand(16384, 16384, device="cuda") + 1e-7
        t = torch.rand(16384, 16384, device="cuda") + 1e-7
        def tmed(f, k=10):
            f(); torch.cuda.synchronize(); ts = []
            for _ in range(k):
                s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
                s.record(); f(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
            return sorted(ts)[k // 2]
        print(json.dumps({"baseline": "torch", "op": "sum", "elements": p.numel(), "median_s": tmed(lambda: p.sum())}))
        kl = lambda: torch.nn.functional.kl_div(torch.log(p), t, reduction="batchmean")
        print(json.dumps({"baseline": "torch", "op": "kl_batchmean_input_is_prob", "elements": p.numel(), "median_s": tmed(kl)}))
except Exception as e:
    print(json.dumps({"baseline": "torch", "error": str(e)}))
PY
cat "$out/baselines.jsonl" 2>/dev/null

step "summary"
python3 - "$out/scaling.jsonl" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")] if os.path.exists(sys.argv[1]) else []
print("| op | backend | scaling | ranks | elements | median ms | comm ms (slowest rank) | bytes sent (max rank) | levels | identical to 1 device |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %s | %s | %d | %d | %.3f | %.3f | %d | %d | %s |" % (
        r["op"], r["backend"], r["scaling"], r["ranks"], r["elements"], r["median_s"] * 1e3,
        r["comm_s_max_rank"] * 1e3, r["bytes_sent_max_rank"], r["levels"], r.get("identical", "-")))
PY
cat "$out/steps.txt"
