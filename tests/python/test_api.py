"""Contexts, devices, the default context, output kinds, threads and the
upload path for devices that do not share host memory."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tally
from conftest import bits

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_version_and_library():
    assert tally.__version__.count(".") == 2
    assert os.path.isfile(tally.library_path)


def test_devices_lists_the_host():
    devs = tally.devices()
    hosts = [d for d in devs if d.backend == "host"]
    assert len(hosts) == 1 and hosts[0].index == 0 and hosts[0].is_gpu is False and hosts[0].name
    assert tally.devices("host") == hosts
    for d in devs:
        assert d.backend in ("cuda", "opencl", "host") and isinstance(d.index, int)
        b, i, n, p, g = d  # a tuple, like tally info's columns
        assert (b, i, n, p, g) == (d.backend, d.index, d.name, d.platform, d.is_gpu)


def test_context_properties(ctx):
    assert ctx.backend in ("host", "opencl") and ctx.device_name
    assert ctx.backend in repr(ctx)
    ctx.sync()
    with tally.Context(ctx.backend) as c:
        assert tally.sum(X, ctx=c) == 66.0
    with pytest.raises(ValueError):
        tally.sum(X, ctx=c)


def run_python(code, **env):
    full = dict(os.environ, TALLY_NO_TORCH="1", **env)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_default_context_honours_tally_backend():
    code = "import tally; c = tally.default_context(); print(c.backend, c is tally.default_context())"
    assert run_python(code, TALLY_BACKEND="host") == "host True"
    code = "import tally, numpy as np; print(tally.sum(np.ones(5, np.float32)))"
    assert run_python(code, TALLY_BACKEND="host") == "5.0"


def test_default_context_error_is_a_tally_error():
    code = ("import tally\ntry:\n    tally.default_context()\nexcept tally.TallyError as e:\n"
            "    print(e.status)")
    assert run_python(code, TALLY_BACKEND="nonsense") in ("INVALID_ARGUMENT",)


def test_outputs_are_numpy_and_new(ctx):
    r = tally.sum(X, axis=1, ctx=ctx)
    assert type(r) is np.ndarray and r.dtype == np.float32 and r.flags.c_contiguous and r.flags.owndata
    assert r.tolist() == [6.0, 22.0, 38.0]
    assert type(tally.max(X, ctx=ctx)) is np.float32
    assert tally.max(X[0], axis=1, ctx=ctx).shape == (1,)


def test_inputs_are_not_modified(ctx):
    p = np.full((4, 5), 0.2, np.float32)
    q = np.log(np.full((4, 5), 0.2, np.float32))
    before = (p.copy(), q.copy())
    tally.kl_div(q, p, reduction="none", ctx=ctx)
    assert np.array_equal(p, before[0]) and np.array_equal(q, before[1])


def test_upload_path_equals_in_place(host):
    # Devices that do not share host memory (GPU OpenCL, CUDA) get NumPy
    # arrays through a buffer, an upload and a download: run that path on a
    # host context and compare with the in-place path bit for bit.
    import test_ops
    c = tally.Context("host")
    c._shares_host = False
    try:
        a, b = test_ops.every_op(host), test_ops.every_op(c)
        for name in a:
            assert np.array_equal(bits(a[name]), bits(b[name])), name
        big = np.ones((6, 50), np.float32)
        assert tally.sum(big[::2, 5:30], axis=1, ctx=c).tolist() == [25.0] * 3
        with pytest.raises(ValueError, match="in place"):
            tally.random("raw", None, out=np.zeros(4, np.uint32), ctx=c)
    finally:
        c.close()


def test_threads_share_a_context(ctx):
    # Calls on one context from several threads are serialised by its lock.
    x = np.random.default_rng(3).normal(size=(64, 257)).astype(np.float32)
    expect = bits(tally.logsumexp(x, axis=1, ctx=ctx))
    errors = []

    def work():
        try:
            for _ in range(20):
                if not np.array_equal(bits(tally.logsumexp(x, axis=1, ctx=ctx)), expect):
                    errors.append("different bits")
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_done_when_one_liner():
    # The acceptance line, on the default context of a fresh process.
    code = ("import tally, numpy as np; print(tally.kl_div(np.full((2,3),1/3,np.float32), "
            "np.full((2,3),1/3,np.float32), reduction='batchmean', input_is_prob=True))")
    assert run_python(code) == "0.0"


def test_tally_library_variable():
    code = "import tally; print(tally.library_path)"
    assert run_python(code, TALLY_LIBRARY=tally.library_path) == tally.library_path
    full = dict(os.environ, TALLY_NO_TORCH="1", TALLY_LIBRARY="/nonexistent/libtally.so")
    proc = subprocess.run([sys.executable, "-c", "import tally"], capture_output=True, text=True, env=full)
    assert proc.returncode != 0 and "TALLY_LIBRARY" in proc.stderr and "ImportError" in proc.stderr


def test_without_gpu_drivers_auto_is_the_host():
    # As on a machine with neither CUDA nor OpenCL: no OpenCL platform (an
    # empty ICD folder) and no libcuda here in CI; AUTO falls back to the host.
    code = ("import tally, numpy as np; c = tally.default_context(); p = np.full((2, 3), 1 / 3, np.float32); "
            "print(c.backend, tally.kl_div(np.log(p), p, reduction='batchmean'), "
            "sorted({d.backend for d in tally.devices()}))")
    if tally.devices("cuda"):
        pytest.skip("this machine has a CUDA device")
    out = run_python(code, OCL_ICD_VENDORS="/nonexistent-icd-dir", OCL_ICD_FILENAMES="")
    assert out == "host 0.0 ['host']"
