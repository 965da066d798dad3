"""tally-bench's CPU table against NumPy (bench/numpy_baseline.py, bench/report.py --numpy), run in
this venv, which has the bench's dependencies (numpy, scipy) that the meson test's python3 may lack:
tests/check_bench_numpy.py does the work and the checking."""

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_cpu_table_pipeline():
    cli = pathlib.Path(os.environ.get("TALLY_CLI") or REPO / "build" / "tools" / "tally")
    bench = cli.parent.parent / "bench" / "tally-bench"
    if not cli.exists() or not bench.exists():
        pytest.skip(f"tally-bench or the tally CLI is not built ({bench}, {cli})")
    r = subprocess.run([sys.executable, str(REPO / "tests" / "check_bench_numpy.py"), str(bench), str(cli)],
                       capture_output=True, text=True, timeout=300)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    assert r.returncode == 0, r.stdout + r.stderr
