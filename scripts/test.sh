#!/usr/bin/env bash
# Runs tally's whole test suite: installs what is missing, builds, and runs
# every registered test (host, OpenCL and CUDA suites; a suite whose backend
# is absent reports SKIP). Works on its own on a fresh clone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
build_dir=${TALLY_BUILD_DIR:-build}
status=0
meson test -C "$build_dir" --print-errorlogs --num-processes 2 "$@" || status=$?
# The sanitizer job (issue 15): ASan+UBSan suite on host and PoCL, the
# fuzzers for a bounded time, the TSan thread test. TALLY_SANITIZE=0 skips it.
if [ "${TALLY_SANITIZE:-1}" != 0 ]; then
    bash scripts/sanitize.sh || status=1
fi
# One plain closing line with the counts, read from meson's own log.
python3 - "$build_dir/meson-logs/testlog.json" <<'PY' || true
import json, sys
counts = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    counts[r["result"]] = counts.get(r["result"], 0) + 1
passed = counts.get("OK", 0) + counts.get("EXPECTEDFAIL", 0)
failed = sum(v for k, v in counts.items() if k in ("FAIL", "ERROR", "TIMEOUT", "UNEXPECTEDPASS"))
print(f"tests: {passed} passed, {failed} failed, {counts.get('SKIP', 0)} skipped")
PY
exit $status
