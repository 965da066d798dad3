"""CuPy arrays on the GPU: zero-copy through __cuda_array_interface__ on the
current CuPy stream, CuPy arrays out, the host's bits. SKIPs without CuPy
or a GPU (scripts/gpu_python.sh requires them)."""

import os

import numpy as np
import pytest

REQUIRE_CUDA = os.environ.get("TALLY_REQUIRE_CUDA") == "1"
try:
    import cupy
    MISSING = None if cupy.cuda.runtime.getDeviceCount() > 0 else "CuPy sees no GPU"
except Exception as e:  # not installed, or no driver
    cupy, MISSING = None, f"CuPy is not usable: {e}"
if MISSING and not REQUIRE_CUDA:
    pytest.skip(MISSING, allow_module_level=True)

import tally  # noqa: E402
from arraykinds import assert_same_bits, inputs, run_all  # noqa: E402
from conftest import context_for  # noqa: E402


def test_cupy_is_usable():
    # Where CuPy is required (scripts/gpu_python.sh), its absence fails here.
    assert MISSING is None, MISSING


def as_cupy(a):
    return {k: cupy.asarray(v) for k, v in a.items()}


def test_cupy_arrays_equal_host_bits():
    a = inputs()
    ref = run_all(a, context_for("host"))
    got = run_all(as_cupy(a))
    for name, v in got.items():
        if not isinstance(v, int):
            assert isinstance(v, cupy.ndarray), name
    assert_same_bits(ref, got)


def test_cupy_on_a_side_stream():
    a = inputs()
    ref = run_all(a, context_for("host"))
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        got = run_all(as_cupy(a))
    s.synchronize()
    assert_same_bits(ref, got)


def test_cupy_errors():
    with pytest.raises(TypeError, match="int64"):
        tally.sum(cupy.arange(6).reshape(2, 3))
    with pytest.raises(ValueError, match="not contiguous"):
        tally.sum(cupy.ones((4, 6), cupy.float32).T)
    with pytest.raises(TypeError):
        tally.kl_div(cupy.ones((2, 3), cupy.float32), np.ones((2, 3), np.float32))
    r = tally.sum(cupy.ones((3, 4), cupy.float32), axis=1)
    assert isinstance(r, cupy.ndarray) and r.get().tolist() == [4.0] * 3
