#!/usr/bin/env bash
# The Python package's tests, as a user gets the package: a fresh venv,
# `pip install .` (meson-python builds libtally into the package), NumPy,
# SciPy and pytest from PyPI, then pytest over tests/python/ against the
# installed package. The CLI of the meson build ($1, default build) is what
# the random-stream tests compare bytes with. Run by scripts/test.sh; writes
# pytest's JUnit report to <build>/pytest.xml for its closing summary.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-${TALLY_BUILD_DIR:-build}}
venv=${TALLY_PY_VENV:-$build_dir/python-venv}

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy scipy pytest ml_dtypes
# A fresh build each time, so the tests always see this checkout's library.
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps .

build_abs=$(cd "$build_dir" && pwd)
venv=$(cd "$venv" && pwd)
status=0
# Run from the tests folder so that `import tally` finds the installed
# package, never the source tree's python/ folder.
(cd tests/python && TALLY_CLI="$build_abs/tools/tally" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider --junitxml="$build_abs/pytest.xml" .) || status=$?
if [ "$status" -eq 5 ]; then
    # pytest's 5 is "no test collected": here that means a broken suite, not a pass.
    echo "python: pytest collected no tests" >&2
fi
exit "$status"
