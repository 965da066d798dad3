"""PyTorch tensors: CPU tensors like NumPy arrays; CUDA tensors zero-copy on
the caller's current stream (GPU machine only); the torch.library custom ops
and torch.compile with no graph break. SKIPs where torch is absent."""

import os

import numpy as np
import pytest

# scripts/gpu_python.sh sets TALLY_REQUIRE_CUDA=1: there a missing torch or
# GPU is a failure, not a SKIP.
REQUIRE_CUDA = os.environ.get("TALLY_REQUIRE_CUDA") == "1"
if REQUIRE_CUDA:
    import torch
else:
    torch = pytest.importorskip("torch")

import tally  # noqa: E402
from arraykinds import assert_same_bits, inputs, run_all  # noqa: E402
from conftest import context_for  # noqa: E402

cuda = pytest.mark.skipif(not torch.cuda.is_available() and not REQUIRE_CUDA, reason="no CUDA device for torch")


def as_torch(a, device="cpu"):
    return {k: torch.from_numpy(v).to(device) for k, v in a.items()}


def test_custom_ops_are_registered():
    for name in ("kl_div", "dirichlet_multinomial", "gmm_log_prob", "gmm_sample", "reduce", "categorical",
                 "random"):
        assert hasattr(torch.ops.tally, name), name


def test_cpu_tensors_equal_numpy():
    a = inputs()
    host = context_for("host")
    ref = run_all(a, host)
    got = run_all(as_torch(a), host)          # direct path, explicit ctx
    assert_same_bits(ref, got)
    assert_same_bits(ref, run_all(as_torch(a)))   # through torch.ops.tally on the default context
    r = tally.sum(torch.ones(3, 4), axis=1)
    assert isinstance(r, torch.Tensor) and r.device.type == "cpu" and r.dtype == torch.float32
    assert r.tolist() == [4.0] * 3
    s = tally.kl_div(torch.zeros(2, 3), torch.full((2, 3), 1 / 3))
    assert isinstance(s, torch.Tensor) and s.dim() == 0


def test_cpu_random_tensors():
    r = tally.random("raw", (3, 5), seed=2, device="cpu")
    assert r.values.dtype == torch.uint32 and r.consumed == 16
    ref = tally.random("raw", (3, 5), seed=2, ctx=context_for("host")).values
    assert np.array_equal(r.values.numpy(), ref)


def test_requires_grad_inputs_run_forward():
    x = torch.ones(2, 3, requires_grad=True)
    assert float(tally.sum(x).detach()) == 6.0


def test_meta_tensors_give_shapes():
    # Through the custom ops, meta tensors take the fake implementation:
    # shapes without data, as torch's own ops do.
    r = tally.kl_div(torch.ones(4, 5, device="meta"), torch.ones(4, 5, device="meta"), reduction="none")
    assert r.device.type == "meta" and r.shape == (4, 5)
    assert tally.sum(torch.ones(4, 5, device="meta"), axis=1).shape == (4,)


TORCH_ERRORS = [
    ("int64", lambda: tally.sum(torch.arange(6).reshape(2, 3)), TypeError, "int64"),
    ("float64", lambda: tally.sum(torch.ones(2, 3, dtype=torch.float64)), TypeError, "float64"),
    ("transposed", lambda: tally.sum(torch.ones(4, 6).t()), ValueError, "not contiguous"),
    ("columns", lambda: tally.sum(torch.ones(4, 6)[:, ::2]), ValueError, "not contiguous"),
    ("expanded", lambda: tally.sum(torch.ones(6).expand(4, 6)), ValueError, "stride"),
    ("meta_direct", lambda: tally.sum(torch.ones(2, 3, device="meta"), ctx=context_for("host")), ValueError,
     "meta"),
    ("sparse", lambda: tally.sum(torch.ones(2, 3).to_sparse()), TypeError, "sparse"),
    ("shape", lambda: tally.kl_div(torch.ones(2, 3), torch.ones(2, 4)), tally.TallyError, "SHAPE_MISMATCH"),
    ("reduction_type", lambda: tally.kl_div(torch.ones(2, 3), torch.ones(2, 3), reduction=2), TypeError,
     "reduction"),
    ("reduction_value", lambda: tally.kl_div(torch.ones(2, 3), torch.ones(2, 3), reduction="avg"), ValueError,
     "reduction"),
    ("flag_type", lambda: tally.kl_div(torch.ones(2, 3), torch.ones(2, 3), log_target=1), TypeError, "log_target"),
    ("axis", lambda: tally.sum(torch.ones(2, 3), axis=0), ValueError, "axis"),
    ("seed", lambda: tally.categorical(torch.ones(2, 3), seed=-1), ValueError, "seed"),
    ("gmm_no_logits", lambda: tally.gmm_sample(torch.ones(2, 3, 4), torch.ones(2, 3, 4)), ValueError, "logits"),
]


@pytest.mark.parametrize("call,exc,fragment", [e[1:] for e in TORCH_ERRORS], ids=[e[0] for e in TORCH_ERRORS])
def test_torch_errors(call, exc, fragment):
    with pytest.raises(exc) as info:
        call()
    assert fragment in str(info.value)


def test_cpu_tensor_and_numpy_mix():
    # Both live in host memory: the call runs, outputs follow the first array.
    r = tally.kl_div(torch.zeros(2, 3), np.full((2, 3), 0.5, np.float32), reduction="none")
    assert isinstance(r, torch.Tensor) and r.shape == (2, 3)


def test_freed_storage_is_refused():
    x = torch.ones(4, 8)
    x.untyped_storage().resize_(0)
    with pytest.raises(ValueError, match="storage"):
        tally.sum(x, ctx=context_for("host"))


def model(x, target):
    # torch ops around tally's custom ops, through both spellings.
    logq = torch.log_softmax(x * 2.0, dim=1)
    loss = tally.kl_div(logq, target, reduction="batchmean")
    loss = loss + torch.ops.tally.kl_div(logq, target, "sum", False, False)
    s = tally.gmm_sample(x[:, :8].reshape(-1, 2, 4), torch.zeros_like(x[:, :8]).reshape(-1, 2, 4),
                         torch.zeros(2, device=x.device), seed=3)
    return loss + tally.sum(x, axis=1).mean() + tally.logsumexp(s.z) + s.log_q.sum()


def tally_only(logq, target):
    return tally.kl_div(logq, target, reduction="none"), tally.max(logq, axis=1)


def compile_and_check(device, backend):
    x = torch.randn(64, 128, device=device)
    target = torch.softmax(torch.randn(64, 128, device=device), dim=1)
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(model)(x, target)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    got, expect = compiled(x, target), model(x, target)
    assert got.device == x.device
    # The compiler may fuse torch's own ops differently from eager mode;
    # tally's ops give the same bits compiled or not.
    torch.testing.assert_close(got, expect, rtol=1e-5, atol=1e-5)
    logq = torch.log_softmax(x, 1)
    pair = torch.compile(tally_only, fullgraph=True, backend=backend)(logq, target)
    for a, b in zip(pair, tally_only(logq, target)):
        assert torch.equal(a, b)


def test_compile_cpu_no_graph_break():
    compile_and_check("cpu", "aot_eager")


# ------------------------------------------------------------------ CUDA

@cuda
def test_cuda_tensors_equal_host_bits():
    a = inputs()
    ref = run_all(a, context_for("host"))
    got = run_all(as_torch(a, "cuda"))
    for name, v in got.items():
        if isinstance(v, torch.Tensor):
            assert v.device.type == "cuda", name
    assert_same_bits(ref, got)


@cuda
def test_cuda_on_a_side_stream():
    a = inputs()
    ref = run_all(a, context_for("host"))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = as_torch(a, "cuda")  # written on s; tally must run on s too
        got = run_all(t)
    s.synchronize()
    assert_same_bits(ref, got)


@cuda
def test_cuda_default_stream_ordering():
    # The failure: inputs written by torch kernels on the default
    # stream right before the op, no synchronisation in between.
    torch.manual_seed(0)
    for _ in range(3):
        x = torch.randn(4096, 4096, device="cuda")
        y = torch.randn(4096, 4096, device="cuda")
        logq, p = torch.log_softmax(x, 1), torch.softmax(y, 1)
        got = tally.kl_div(logq, p, reduction="batchmean")
        ref = tally.kl_div(logq.cpu().numpy(), p.cpu().numpy(), reduction="batchmean",
                           ctx=context_for("host"))
        assert got.item() == float(ref) and got.item() > 0


@cuda
def test_cuda_random_and_explicit_context():
    r = tally.random("normal", (7, 9), seed=8, offset=4, device="cuda")
    assert r.values.device.type == "cuda" and r.consumed == 64
    ref = tally.random("normal", (7, 9), seed=8, offset=4, ctx=context_for("host")).values
    assert np.array_equal(r.values.cpu().numpy().view(np.uint32), ref.view(np.uint32))
    stream = torch.cuda.current_stream()
    c = tally.Context("cuda", torch.cuda.current_device(), stream=stream)
    x = torch.ones(5, 6, device="cuda")
    assert tally.sum(x, ctx=c).item() == 30.0
    with pytest.raises(ValueError, match="stream"):
        tally.sum(x, ctx=tally.Context("cuda"))
    with pytest.raises(ValueError, match="CUDA array"):
        tally.sum(x, ctx=context_for("host"))
    with pytest.raises(TypeError):
        tally.kl_div(x, torch.ones(5, 6))  # one CUDA, one CPU tensor
    with pytest.raises(TypeError, match="int64"):
        tally.sum(torch.ones(2, 2, dtype=torch.int64, device="cuda"))
    with pytest.raises(ValueError, match="not contiguous"):
        tally.sum(torch.ones(4, 6, device="cuda").t())
    # a numpy array on a CUDA context goes through an upload and a download
    a = np.arange(10, dtype=np.float32)
    assert float(tally.sum(a, ctx=c)) == 45.0


@cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_cuda_tensor_on_another_device():
    x0 = torch.ones(2, 3, device="cuda:0")
    x1 = torch.ones(2, 3, device="cuda:1")
    with pytest.raises(ValueError, match="different GPUs"):
        tally.kl_div(x0, x1)
    assert tally.sum(x1).device == x1.device


@cuda
def test_compile_cuda_no_graph_break():
    # inductor needs triton for CUDA code; without it the graph still has to
    # hold tally's ops with no break, compiled by AOTAutograd alone.
    import importlib.util
    compile_and_check("cuda", "inductor" if importlib.util.find_spec("triton") else "aot_eager")
