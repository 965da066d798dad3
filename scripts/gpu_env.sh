# Sourced by the GPU-machine scripts (scripts/gpu_*.sh, bench/gpu_bench.sh):
# the environment they share. The GPU machine has no Check and no OpenCL
# headers; they come from the Debian packages in .debs/ (carried by the device
# tool: carry [".debs"]), unpacked once into a private prefix.
#
#   . scripts/gpu_env.sh                          # PATH, prefix, PKG_CONFIG_PATH, LD_LIBRARY_PATH
#   gpu_build BUILD_DIR LOG_DIR [meson options]   # configure (once) and build; 1 on failure
#
# After sourcing, gpu_prefix is the prefix and gpu_c_args holds the meson
# -Dc_args option that finds its headers (empty when .debs/ has none).
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
