"""Every error path: library statuses raise tally.TallyError with the status
name and the library's message; wrong Python types raise TypeError; bad
values and layouts ValueError. Nothing crashes and nothing is copied."""

import numpy as np
import pytest

import tally

X = np.ones((3, 4), np.float32)
P = np.full((3, 4), 0.25, np.float32)


def kl(**kw):
    return lambda ctx: tally.kl_div(kw.pop("input", X), kw.pop("target", P), ctx=ctx, **kw)


# (id, call taking ctx, exception, status name or message fragment)
LIBRARY_ERRORS = [
    ("kl_shape", lambda c: tally.kl_div(X, np.ones((3, 5), np.float32), ctx=c), "SHAPE_MISMATCH", "kl_div"),
    ("mean_empty", lambda c: tally.mean(np.empty((2, 0), np.float32), ctx=c), "EMPTY_INPUT", "mean"),
    ("min_empty", lambda c: tally.min(np.empty(0, np.float32), ctx=c), "EMPTY_INPUT", "min"),
    ("dm_alpha_len", lambda c: tally.dirichlet_multinomial(X, np.zeros(5, np.float32), ctx=c),
     "SHAPE_MISMATCH", "log_alpha"),
    ("gmm_z_dim", lambda c: tally.gmm_log_prob(np.ones((2, 3), np.float32), np.ones((2, 2, 4), np.float32),
                                               np.ones((2, 2, 4), np.float32), np.zeros(2, np.float32), ctx=c),
     "SHAPE_MISMATCH", "gmm"),
    ("gmm_logits_len", lambda c: tally.gmm_log_prob(np.ones((2, 4), np.float32), np.ones((2, 2, 4), np.float32),
                                                    np.ones((2, 2, 4), np.float32), np.zeros(3, np.float32),
                                                    ctx=c), "SHAPE_MISMATCH", "logits"),
    ("rng_exhausted", lambda c: tally.random("raw", 8, offset=2**64 - 4, ctx=c), "RNG_EXHAUSTED", "2^64"),
    ("cat_exhausted", lambda c: tally.categorical(X, offset=2**64 - 2, ctx=c), "RNG_EXHAUSTED", ""),
]


@pytest.mark.parametrize("call,status,fragment", [e[1:] for e in LIBRARY_ERRORS],
                         ids=[e[0] for e in LIBRARY_ERRORS])
def test_library_status_raises_tally_error(ctx, call, status, fragment):
    with pytest.raises(tally.TallyError) as info:
        call(ctx)
    e = info.value
    assert isinstance(e, RuntimeError)
    assert e.status == status
    assert fragment in e.message and e.message in str(e) and str(e).startswith(status)
    # the context stays usable after an error
    assert tally.sum(X, ctx=ctx) == 12.0


PYTHON_ERRORS = [
    # (id, call taking ctx, exception, message fragment)
    ("list", lambda c: tally.sum([1.0, 2.0], ctx=c), TypeError, "NumPy array"),
    ("scalar", lambda c: tally.sum(3.0, ctx=c), TypeError, "NumPy array"),
    ("int64", lambda c: tally.sum(np.arange(6).reshape(2, 3), ctx=c), TypeError, "int64"),
    ("float64", lambda c: tally.kl_div(X.astype(np.float64), P, ctx=c), TypeError, "float64"),
    ("float64-sum", lambda c: tally.sum(X.astype(np.float64), ctx=c), TypeError, "float64"),
    ("byteswapped", lambda c: tally.sum(X.astype(">f4"), ctx=c), TypeError, "float32"),
    ("int_target", lambda c: tally.kl_div(X, np.ones((3, 4), np.int32), ctx=c), TypeError, "target"),
    ("reduction_type", lambda c: tally.kl_div(X, P, reduction=2, ctx=c), TypeError, "reduction"),
    ("reduction_value", lambda c: tally.kl_div(X, P, reduction="avg", ctx=c), ValueError, "batchmean"),
    ("dm_batchmean", lambda c: tally.dirichlet_multinomial(X, P[0], reduction="batchmean", ctx=c), ValueError,
     "reduction"),
    ("flag_type", lambda c: tally.kl_div(X, P, log_target="yes", ctx=c), TypeError, "log_target"),
    ("coef_type", lambda c: tally.dirichlet_multinomial(X, P[0], with_coefficient=1, ctx=c), TypeError,
     "with_coefficient"),
    ("axis_zero", lambda c: tally.sum(X, axis=0, ctx=c), ValueError, "axis"),
    ("axis_type", lambda c: tally.sum(X, axis="rows", ctx=c), TypeError, "axis"),
    ("three_d", lambda c: tally.sum(np.ones((2, 2, 2), np.float32), ctx=c), ValueError, "dimensions"),
    ("zero_d", lambda c: tally.sum(np.ones((), np.float32), ctx=c), ValueError, "0-d"),
    ("column_stride", lambda c: tally.sum(np.ones((4, 6), np.float32)[:, ::2], ctx=c), ValueError,
     "not contiguous"),
    ("transposed", lambda c: tally.sum(np.ones((4, 6), np.float32).T, ctx=c), ValueError, "not contiguous"),
    ("reversed_rows", lambda c: tally.sum(np.ones((4, 6), np.float32)[::-1], ctx=c), ValueError, "stride"),
    ("broadcast_rows", lambda c: tally.sum(np.broadcast_to(np.ones(6, np.float32), (4, 6)), ctx=c), ValueError,
     "stride"),
    ("unaligned", lambda c: tally.sum(np.frombuffer(bytearray(17), np.float32, 4, offset=1), ctx=c),
     ValueError, "aligned"),
    ("seed_negative", lambda c: tally.random("raw", 4, seed=-1, ctx=c), ValueError, "seed"),
    ("seed_float", lambda c: tally.random("raw", 4, seed=1.0, ctx=c), TypeError, "seed"),
    ("offset_big", lambda c: tally.categorical(X, offset=2**64, ctx=c), ValueError, "offset"),
    ("dist", lambda c: tally.random("gamma", 4, ctx=c), ValueError, "dist"),
    ("shape_type", lambda c: tally.random("raw", "4", ctx=c), TypeError, "shape"),
    ("shape_3d", lambda c: tally.random("raw", (2, 2, 2), ctx=c), ValueError, "shape"),
    ("shape_negative", lambda c: tally.random("raw", -1, ctx=c), ValueError, "shape"),
    ("out_dtype", lambda c: tally.random("raw", None, out=np.zeros(4, np.float32), ctx=c), TypeError, "uint32"),
    ("gmm_no_logits", lambda c: tally.gmm_sample(np.ones((2, 3, 4), np.float32), np.ones((2, 3, 4), np.float32),
                                                 ctx=c), ValueError, "logits"),
    ("gmm_shapes", lambda c: tally.gmm_log_prob(X, np.ones((3, 2, 4), np.float32), np.ones((3, 4), np.float32),
                                                np.zeros(2, np.float32), ctx=c), ValueError, "log_var"),
    ("gmm_1d_mu", lambda c: tally.gmm_sample(np.ones(4, np.float32), np.ones(4, np.float32), ctx=c), ValueError,
     "mu"),
    ("ctx_type", lambda c: tally.sum(X, ctx="host"), TypeError, "ctx"),
    ("mixed_kinds", lambda c: tally.kl_div(X, memoryview(P), ctx=c), TypeError, "target"),
]


@pytest.mark.parametrize("call,exc,fragment", [e[1:] for e in PYTHON_ERRORS], ids=[e[0] for e in PYTHON_ERRORS])
def test_python_errors(ctx, call, exc, fragment):
    with pytest.raises(exc) as info:
        call(ctx)
    assert not isinstance(info.value, tally.TallyError)
    assert fragment in str(info.value)


CONTEXT_ERRORS = [
    (lambda: tally.Context("metal"), ValueError, "backend"),
    (lambda: tally.Context(3), TypeError, "backend"),
    (lambda: tally.Context("host", device="0"), TypeError, "device"),
    (lambda: tally.Context("host", stream=0), ValueError, "cuda"),
    (lambda: tally.Context("cuda", 0, stream="default"), TypeError, "stream"),
    (lambda: tally.devices("metal"), ValueError, "backend"),
]


@pytest.mark.parametrize("call,exc,fragment", CONTEXT_ERRORS)
def test_context_argument_errors(call, exc, fragment):
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value)


def test_bad_device_index_is_a_tally_error():
    with pytest.raises(tally.TallyError) as info:
        tally.Context("host", device=99)
    assert info.value.status in ("NO_DEVICE", "INVALID_ARGUMENT") and info.value.message


def test_absent_backend_is_a_tally_error():
    # CUDA is compiled in or not, has a driver or not: either a context or a
    # TallyError that says why, never a crash.
    try:
        c = tally.Context("cuda")
    except tally.TallyError as e:
        assert e.status in ("BACKEND_NOT_COMPILED", "LIBRARY_MISSING", "NO_DEVICE") and e.message
    else:
        assert c.backend == "cuda"
        c.close()


def test_closed_context():
    c = tally.Context("host")
    c.close()
    c.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        tally.sum(X, ctx=c)
    with pytest.raises(ValueError, match="closed"):
        c.sync()


def test_failed_call_leaves_no_buffer_behind(host):
    # Errors after some buffers were wrapped release them: the context can
    # still be closed (tally_context_release needs every buffer released).
    c = tally.Context("host")
    for _ in range(3):
        with pytest.raises(tally.TallyError):
            tally.kl_div(X, np.ones((2, 4), np.float32), ctx=c)
    assert tally.sum(X, ctx=c) == 12.0
    c.close()


class ForeignGpuArray:
    """An object that offers __cuda_array_interface__ but is no CuPy array
    (numba, say): refused by type, never dereferenced."""

    __cuda_array_interface__ = {"shape": (2, 2), "typestr": "<f4", "data": (0xdead0000, False), "version": 3}


class FakeCupy:
    """Looks like a CuPy array on GPU 0, to check that a CUDA array on a host
    context is refused before anything reads its pointer."""

    __module__ = "cupy"
    __cuda_array_interface__ = {"shape": (2, 2), "typestr": "<f4", "data": (0xdead0000, False), "version": 3}

    class device:
        id = 0


def test_foreign_gpu_arrays_are_refused(host):
    with pytest.raises(TypeError, match="CuPy array"):
        tally.sum(ForeignGpuArray(), ctx=host)
    with pytest.raises(ValueError, match="CUDA array"):
        tally.sum(FakeCupy(), ctx=host)
    with pytest.raises(TypeError, match="host or all on one GPU"):
        tally.kl_div(FakeCupy(), X, ctx=host)
