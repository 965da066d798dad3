#!/usr/bin/env bash
# Configures (once) and builds tally in $TALLY_BUILD_DIR (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${TALLY_BUILD_DIR:-build}
# nvcc usually lives outside PATH; meson finds it through the CUDA backend's
# search list, but put it on PATH too for tools that look for it.
if [ -d /usr/local/cuda/bin ]; then export PATH="$PATH:/usr/local/cuda/bin"; fi
if [ ! -f "$build_dir/build.ninja" ]; then
    meson setup "$build_dir" "$@"
elif [ $# -gt 0 ]; then
    meson configure "$build_dir" "$@"
fi
meson compile -C "$build_dir"
