"""The gradient functions on NumPy arrays (no torch needed), on the host and
on OpenCL: against float64 formulas computed here, and host equal to OpenCL
bit for bit (test_autograd.py covers the torch autograd path)."""

import numpy as np
import pytest
from scipy.special import digamma

import tally

from conftest import context_for


def _pt(seed=1, rows=9, cols=70):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 1, (rows, cols)).astype(np.float32)
    t = rng.uniform(0.0, 1, (rows, cols)).astype(np.float32)
    return p, t


@pytest.mark.parametrize("reduction", ["sum", "batchmean", "none"])
def test_kl_div_backward_log_input(ctx, reduction):
    p, t = _pt()
    x = np.log(p)
    g = np.full_like(x, 0.75) if reduction == "none" else np.float32(0.75)
    gi, gt = tally.kl_div_backward(x, t, g, reduction=reduction, ctx=ctx)
    scale = 0.75 / (x.shape[0] if reduction == "batchmean" else 1)
    t64, x64 = t.astype(np.float64), x.astype(np.float64)
    np.testing.assert_allclose(gi, -t64 * scale, rtol=1e-6, atol=1e-9)
    with np.errstate(divide="ignore"):
        want_t = np.where(t64 > 0, (np.log(t64) - x64 + 1.0) * scale, -np.inf)
    np.testing.assert_allclose(gt, want_t, rtol=2e-5, atol=1e-6)


def test_kl_div_backward_only_one_gradient(ctx):
    p, t = _pt()
    gi, gt = tally.kl_div_backward(p, t, np.float32(1.0), reduction="sum", input_is_prob=True,
                                   need_target=False, ctx=ctx)
    assert gt is None
    np.testing.assert_allclose(gi, -(t.astype(np.float64) / p), rtol=1e-5)


@pytest.mark.parametrize("shared", [True, False])
def test_dirichlet_multinomial_backward(ctx, shared):
    rng = np.random.default_rng(5)
    B, V = 12, 17
    counts = np.floor(rng.uniform(0, 6, (B, V))).astype(np.float32)
    la = rng.normal(0, 0.5, V if shared else (B, V)).astype(np.float32)
    g = tally.dirichlet_multinomial_backward(counts, la, np.float32(1.0), reduction="sum", ctx=ctx)
    assert g.shape == la.shape
    a = np.broadcast_to(np.exp(la.astype(np.float64)), (B, V))
    A, N = a.sum(-1, keepdims=True), counts.sum(-1, keepdims=True)
    per = a * (digamma(A) - digamma(N + A) + digamma(counts + a) - digamma(a))
    want = per.sum(0) if shared else per
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_host_and_opencl_gradients_equal_bit_for_bit():
    host, cl = context_for("host"), context_for("opencl")
    if host is None or cl is None:
        pytest.skip("needs both the host and an OpenCL device")
    p, t = _pt(seed=3, rows=40, cols=500)
    a = tally.kl_div_backward(p, t, np.float32(1.0), reduction="batchmean", input_is_prob=True, ctx=host)
    b = tally.kl_div_backward(p, t, np.float32(1.0), reduction="batchmean", input_is_prob=True, ctx=cl)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u.view(np.uint32), v.view(np.uint32))
