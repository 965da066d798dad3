"""Shared fixtures of tally's Python tests.

The package under test is the installed one (`pip install .`), or a build
tree's: PYTHONPATH=python TALLY_LIBRARY=build/libtally.so (scripts/gpu_python.sh).
`backend` runs a test on the host and on OpenCL (PoCL in CI); OpenCL SKIPs
where it has no device. TALLY_CLI names the `tally` tool for the tests that
compare with its bytes (default: build/tools/tally of this checkout).
"""

import os
import pathlib
import subprocess

import numpy as np
import pytest

import tally

REPO = pathlib.Path(__file__).resolve().parents[2]
_contexts = {}


def context_for(name):
    """One context per backend for the whole session (building OpenCL
    kernels takes seconds the first time); None if the backend is absent."""
    if name not in _contexts:
        try:
            _contexts[name] = tally.Context(name)
        except tally.TallyError as e:
            _contexts[name] = e
    ctx = _contexts[name]
    return ctx if isinstance(ctx, tally.Context) else None


@pytest.fixture(params=["host", "opencl"])
def ctx(request):
    c = context_for(request.param)
    if c is None:
        pytest.skip(f"{request.param}: {_contexts[request.param]}")
    return c


@pytest.fixture
def host():
    return context_for("host")


@pytest.fixture
def opencl():
    c = context_for("opencl")
    if c is None:
        pytest.skip(f"opencl: {_contexts['opencl']}")
    return c


def cli_path():
    p = os.environ.get("TALLY_CLI") or str(REPO / "build" / "tools" / "tally")
    return p if os.path.isfile(p) and os.access(p, os.X_OK) else None


@pytest.fixture
def cli(tmp_path):
    """Runs `tally run OP ...` on the host backend with arrays as raw files;
    returns the named outputs read back with their dtypes."""
    path = cli_path()
    if path is None:
        pytest.skip("the tally CLI is not built (set TALLY_CLI or build build/tools/tally)")

    def run(op, inputs, outputs, *args):
        cmd = [path, "run", op, "--backend", "host"]
        for name, arr in inputs.items():
            f = tmp_path / f"{name}.bin"
            np.ascontiguousarray(arr, dtype="<f4").tofile(f)
            cmd += ["--in", f"{name}={f}"]
        for name in outputs:
            cmd += ["--out", f"{name}={tmp_path / (name + '.out')}"]
        cmd += [str(a) for a in args]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        result = {name: np.fromfile(tmp_path / (name + ".out"), dtype=dt) for name, dt in outputs.items()}
        consumed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("consumed ")]
        if consumed:
            result["consumed"] = int(consumed[0])
        return result

    return run


def bits(a):
    """The raw bits of a float32 array (NaNs compare equal by their bits)."""
    a = np.asarray(a)
    return np.ascontiguousarray(a).view(np.uint32 if a.dtype == np.float32 else a.dtype)
