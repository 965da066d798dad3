#!/usr/bin/env bash
# The half-input benchmarks of issue 11 on the GPU machine, against PyTorch in
# the same run: KL batchmean over bf16 [16384, 16384], the Dirichlet-
# multinomial and a per-row sum over bf16 [65536, 1024], each next to its fp32
# twin (kl, dm_large, sum_rows_f32), with the bandwidth ceilings measured in
# the same run. A thin wrapper over bench/run_all.sh (same build, outputs,
# tables); extra arguments in BENCH_ARGS are appended.
#
#   bash bench/run_half.sh      # results in $OUT/RESULTS.md (or /tmp/tally-bench-out)
set -euo pipefail
cd "$(dirname "$0")/.."
only="kl,kl_bf16,dm_large,dm_large_bf16,sum_rows_f32,sum_rows_bf16"
BENCH_ARGS="--only $only ${BENCH_ARGS:-}" exec bash bench/run_all.sh
