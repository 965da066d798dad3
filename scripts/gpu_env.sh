# Sourced by the GPU-machine scripts (scripts/gpu_*.sh, bench/gpu_bench.sh):
# the environment they share. The GPU machine has no Check and no OpenCL
# headers; they come from the Debian packages in .debs/ (carried by the device
# tool: carry [".debs"]), unpacked once into a private prefix.
#
#   . scripts/gpu_env.sh                          # PATH, prefix, PKG_CONFIG_PATH, LD_LIBRARY_PATH
#   gpu_build BUILD_DIR LOG_DIR [meson options]   # configure (once) and build; 1 on failure
#   gpu_opencl_devices TALLY_CLI                  # cl_nvidia, cl_pocl: OpenCL device indices
#   gpu_note TEXT; gpu_run NAME SECONDS COMMAND... # a line of $summary; a step logged in $logs
#   gpu_build_both                                # gpu_build with CUDA and OpenCL, tally, the devices
#
# Sourcing also sets out (OUT, else gpu_out_default, else /tmp/tally-gpu-out),
# logs ($out/logs, created) and build (TALLY_BUILD_DIR, else build-gpu).
#
# After sourcing, gpu_prefix is the prefix and gpu_c_args holds the meson
# -Dc_args option that finds its headers (empty when .debs/ has none).
out=${OUT:-${gpu_out_default:-/tmp/tally-gpu-out}}
logs="$out/logs"
mkdir -p "$logs"
build=${TALLY_BUILD_DIR:-build-gpu}
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
gpu_prefix=/tmp/tally-prefix
if [ ! -d "$gpu_prefix/usr/include/CL" ] && ls .debs/opencl-c-headers*.deb >/dev/null 2>&1; then
    rm -rf "$gpu_prefix" && mkdir -p "$gpu_prefix/pc"
    for deb in .debs/check_*.deb .debs/libsubunit*.deb .debs/opencl-c-headers*.deb; do
        [ -e "$deb" ] && dpkg -x "$deb" "$gpu_prefix"
    done
    for pc in "$gpu_prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; do
        [ -e "$pc" ] && sed "s|^prefix=.*|prefix=$gpu_prefix/usr|" "$pc" >"$gpu_prefix/pc/$(basename "$pc")"
    done
fi
gpu_c_args=()
if [ -d "$gpu_prefix/usr/include/CL" ]; then
    export PKG_CONFIG_PATH="$gpu_prefix/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$gpu_prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    gpu_c_args=(-Dc_args="-I$gpu_prefix/usr/include")
fi

# gpu_build BUILD_DIR LOG_DIR [meson options]: meson setup when BUILD_DIR has
# no build.ninja yet (setup.log), then ninja (build.log); on failure prints
# the first errors and returns 1. GPU_BUILD_TIMEOUT bounds ninja (default 400 s);
# GPU_BUILD_TARGETS names the ninja targets (default: all).
gpu_build() {
    local build=$1 logs=$2
    shift 2
    mkdir -p "$logs"
    if [ ! -f "$build/build.ninja" ]; then
        meson setup "$build" "$@" "${gpu_c_args[@]}" >"$logs/setup.log" 2>&1 ||
            { tail -n 40 "$logs/setup.log"; return 1; }
        grep -A5 "Backends" "$logs/setup.log"
    fi
    # shellcheck disable=SC2086 # the targets are words
    timeout "${GPU_BUILD_TIMEOUT:-400}" ninja -C "$build" ${GPU_BUILD_TARGETS:-} >"$logs/build.log" 2>&1 ||
        { grep -B2 -A10 -E "error|FAILED" "$logs/build.log" | head -60; return 1; }
}

# gpu_note TEXT: prints TEXT and appends it to $summary (the caller's file).
gpu_note() { echo "$*" | tee -a "$summary"; }

# gpu_run NAME SECONDS COMMAND...: runs COMMAND within SECONDS, its output in
# $logs/NAME.log, and notes its exit status with the log's last result line.
gpu_run() {
    local name=$1 secs=$2
    shift 2
    timeout "$secs" "$@" >"$logs/$name.log" 2>&1
    gpu_note "$name: exit $? ($(grep -E 'Checks:|results in|All checks|FAILED' "$logs/$name.log" | tail -n 1))"
}

# gpu_opencl_devices TALLY_CLI: cl_nvidia and cl_pocl, the OpenCL indices of
# the first GPU device (NVIDIA's) and the first CPU device (PoCL's), -1 when
# there is none, from `tally info --json`.
gpu_opencl_devices() {
    read -r cl_nvidia cl_pocl <<<"$("$1" info --json | python3 -c '
import json, sys
info = json.load(sys.stdin)
devs = [d for b in info.get("backends", []) if b.get("name") == "opencl" for d in b.get("devices", [])]
gpu = [d["index"] for d in devs if d.get("gpu")]
cpu = [d["index"] for d in devs if not d.get("gpu")]
print(gpu[0] if gpu else -1, cpu[0] if cpu else -1)')"
}

# gpu_build_both: gpu_build of $build with CUDA and OpenCL, then tally (its
# CLI) and cl_nvidia, cl_pocl (gpu_opencl_devices), noted in $summary.
gpu_build_both() {
    gpu_build "$build" "$logs" -Dcuda=enabled -Dopencl=enabled || return 1
    tally="$build/tools/tally"
    gpu_opencl_devices "$tally"
    gpu_note "opencl devices: nvidia=$cl_nvidia pocl=$cl_pocl"
}
