#!/usr/bin/env bash
# Installs the Debian packages tally needs to build and test, if any are
# missing. The CUDA toolkit is not installed here: when nvcc is present the
# CUDA backend is built, otherwise it is simply left out. python3-venv is for
# the Python package's tests (scripts/test_python.sh makes a venv; NumPy,
# SciPy, pytest and meson-python then come from PyPI).
set -euo pipefail

# clang and libclang-rt-dev: the sanitizer build and the libFuzzer targets
# of scripts/sanitize.sh (without them it falls back to gcc and replays).
packages=(gcc python3 python3-venv meson ninja-build pkg-config check libsubunit-dev
          ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clang libclang-rt-dev
          openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
echo "deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo_cmd=(sudo)
    else
        echo "deps: missing packages (${missing[*]}) and not root; install them and retry" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
