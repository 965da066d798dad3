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
# The Python package: pip install . into a venv, then pytest (tests/python/);
# not when only some meson suites were asked for, or with TALLY_SKIP_PYTHON=1.
rm -f "$build_dir/pytest.xml"
if [ $# -eq 0 ] && [ "${TALLY_SKIP_PYTHON:-0}" != 1 ]; then
    bash scripts/test_python.sh "$build_dir" || status=$?
fi
# The sanitizer job (issue 15): ASan+UBSan suite on host and PoCL, the
# fuzzers for a bounded time, the TSan thread test. TALLY_SANITIZE=0 skips it.
if [ "${TALLY_SANITIZE:-1}" != 0 ]; then
    bash scripts/sanitize.sh || status=1
fi
# One plain closing line with the counts, read from meson's own log.
python3 - "$build_dir/meson-logs/testlog.json" <<'PY' || true
import json, sys
counts = {}
skipped = []
for line in open(sys.argv[1]):
    r = json.loads(line)
    counts[r["result"]] = counts.get(r["result"], 0) + 1
    if r["result"] == "SKIP":
        # The runner's one-line reason ("SKIP: cuda context: LIBRARY_MISSING: ...").
        text = (r.get("stderr") or "") + (r.get("stdout") or "")
        why = next((l[5:].strip() for l in text.splitlines() if l.startswith("SKIP:")), "no reason given")
        skipped.append((r["name"].split(" / ")[-1], why))
# pytest's JUnit report (scripts/test_python.sh), when it ran.
import os, xml.etree.ElementTree as ET
junit = os.path.join(os.path.dirname(os.path.dirname(sys.argv[1])), "pytest.xml")
if os.path.exists(junit):
    for case in ET.parse(junit).iter("testcase"):
        kinds = {child.tag for child in case}
        key = "FAIL" if kinds & {"failure", "error"} else "SKIP" if "skipped" in kinds else "OK"
        counts[key] = counts.get(key, 0) + 1
        if key == "SKIP":
            reason = next((c.get("message", "") for c in case if c.tag == "skipped"), "")
            skipped.append(("pytest " + case.get("name", "?"), reason or "no reason given"))
for name, why in skipped:
    print(f"skipped {name}: {why}")
passed = counts.get("OK", 0) + counts.get("EXPECTEDFAIL", 0)
failed = sum(v for k, v in counts.items() if k in ("FAIL", "ERROR", "TIMEOUT", "UNEXPECTEDPASS"))
print(f"tests: {passed} passed, {failed} failed, {counts.get('SKIP', 0)} skipped")
PY
exit $status
