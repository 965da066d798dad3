#!/usr/bin/env bash
# Where the time goes inside tally's CUDA kernels, on an NVIDIA GPU machine:
# Nsight Compute (ncu) over chosen tally-bench workloads, one call each, and
# the SASS instruction count of every kernel. For the "what bounds it" lines
# of bench/RESULTS.md.
#
#   PROFILE_ONLY="kl_bw=kl_backward dm_bw=dm_bw gmm_bw=gmm_bw" bash scripts/gpu_profile.sh
#
# Each PROFILE_ONLY word is workload=kernels: a tally-bench workload and a
# regular expression for the kernels of it to profile (tally_k_ is implied),
# so the bench's own set-up launches (poisoning fills) are left out.
# Files in $OUT (default /tmp/tally-profile-out): ncu-<workload>.txt (the
# speed-of-light, memory, compute and launch sections of each kernel),
# sass-counts.txt (instructions per kernel, sm_90), build logs.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
gpu_out_default=/tmp/tally-profile-out
. scripts/gpu_env.sh
only=${PROFILE_ONLY:-kl_bw=kl_backward dm_bw=dm_bw gmm_bw=gmm_bw}
GPU_BUILD_TARGETS=${GPU_BUILD_TARGETS:-bench/tally-bench} gpu_build "$build" "$out/logs" -Dcuda=enabled -Dopencl=enabled || exit 1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)

# Instructions per kernel in the sm_90 cubin (a static count, not a profile).
obj=$(find "$build" -name 'tally_kernels.fatbin' | head -n 1)
if [ -n "$obj" ]; then
    cuobjdump -sass -arch sm_90 "$obj" 2>/dev/null | awk '
        /Function :/ { if (name) print count, name; name = $3; count = 0; next }
        /^ *\/\*[0-9a-f]+\*\// { count++ }
        END { if (name) print count, name }' | sort -k2 >"$out/sass-counts.txt"
    echo "sass: $(wc -l <"$out/sass-counts.txt") kernels from $obj"
fi

for item in $only; do
    w=${item%%=*}
    kernels=${item#*=}
    echo "== ncu $w (kernels tally_k_$kernels)"
    timeout "${PROFILE_TIMEOUT:-150}" "$ncu" --clock-control none --target-processes all \
        -k "regex:tally_k_$kernels" --launch-count "${PROFILE_LAUNCHES:-6}" \
        --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        --section LaunchStats --section Occupancy --section WarpStateStats \
        "$build/bench/tally-bench" --backend cuda --only "$w" --no-ceilings --reps 1 --calls 1 --rotate-mib 0 \
        >"$out/ncu-$w.txt" 2>&1
    echo "exit $?; $(grep -cE '^  tally_k_' "$out/ncu-$w.txt") kernel launches profiled"
    grep -E '^  tally_k_|Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per Thread|Achieved Occupancy|Issue Slots Busy' \
        "$out/ncu-$w.txt" | head -n 60
done
