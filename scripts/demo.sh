#!/usr/bin/env bash
# The quick start: installs what is missing, builds, and runs the founding
# workloads (`tally demo`) on the default backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
exec "${TALLY_BUILD_DIR:-build}/tools/tally" demo
