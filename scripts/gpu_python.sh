#!/usr/bin/env bash
# The Python package's tests on an NVIDIA GPU machine, from a build tree (the
# machine has numpy, scipy, pytest, torch and cupy but no package registry,
# so no `pip install .`): builds tally with CUDA (and OpenCL when the headers
# are at hand), then runs tests/python/ with PYTHONPATH=python and
# TALLY_LIBRARY=<build>/libtally.so, torch and CuPy CUDA tests included and
# required (TALLY_REQUIRE_CUDA=1 turns their SKIP into a failure), the
# torch.compile test with zero graph breaks among them.
#
#   bash scripts/gpu_python.sh        # log: $OUT/python-gpu.log, JUnit: $OUT/python-gpu.xml
#
# TALLY_BUILD_DIR (default build-gpu, the one scripts/gpu_session.sh makes)
# is reused when it is already configured.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/tally-gpu-out}
mkdir -p "$out"
log="$out/python-gpu.log"
build=${TALLY_BUILD_DIR:-build-gpu}

{
echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
. scripts/gpu_env.sh
echo "== build $build"
gpu_build "$build" "$out/logs" -Dcuda=enabled || exit 1
python3 - <<'PY'
import numpy, scipy, pytest
print("numpy", numpy.__version__, "scipy", scipy.__version__, "pytest", pytest.__version__)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.device_count(), "GPU(s)")
except ImportError as e:
    print("torch: not importable:", e)
try:
    import cupy
    print("cupy", cupy.__version__)
except ImportError as e:
    print("cupy: not importable:", e)
PY
lib=$(pwd)/$build/libtally.so
echo "== pytest (TALLY_LIBRARY=$lib)"
cd tests/python || exit 1
PYTHONPATH=$(cd ../.. && pwd)/python TALLY_LIBRARY=$lib TALLY_CLI=$(cd ../.. && pwd)/$build/tools/tally \
    TALLY_REQUIRE_CUDA=1 timeout "${PYTEST_TIMEOUT:-480}" \
    python3 -m pytest -q -rs -p no:cacheprovider --junitxml="$out/python-gpu.xml" .
echo "== pytest exit $?"
} 2>&1 | tee "$log"
status=$(grep -o '^== pytest exit [0-9]*' "$log" | awk '{print $4}')
exit "${status:-1}"
