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


def _mixture(seed=2, B=7, K=3, D=4):
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 1, (B, K, D)).astype(np.float32)
    lv = rng.normal(0, 0.4, (B, K, D)).astype(np.float32)
    logits = rng.normal(0, 1, K).astype(np.float32)
    z = rng.normal(0, 1, (B, D)).astype(np.float32)
    return z, mu, lv, logits


def _log_q64(z, mu, lv, logits):
    """The mixture's log density per row in float64, from its definition."""
    lw = logits - np.logaddexp.reduce(logits)
    per = -0.5 * (np.log(2 * np.pi) + lv + (z[:, None, :] - mu) ** 2 * np.exp(-lv))
    return np.logaddexp.reduce(lw + per.sum(-1), axis=-1)


def _central_difference(f, x, h=1e-5):
    """d f(x) / dx by central differences in float64 (f gives a scalar)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        g[i] = (f(up) - f(down)) / (2 * h)
    return g


def test_gmm_log_prob_backward_against_finite_differences(ctx):
    z, mu, lv, logits = _mixture()
    w = np.linspace(-1.0, 2.0, z.shape[0]).astype(np.float32)
    grads = tally.gmm_log_prob_backward(z, mu, lv, logits, w, ctx=ctx)
    args = [a.astype(np.float64) for a in (z, mu, lv, logits)]
    for i, (got, name) in enumerate(zip(grads, ("z", "mu", "log_var", "logits"))):
        def f(x, i=i):
            a = list(args)
            a[i] = x
            return float((_log_q64(*a) * w).sum())
        want = _central_difference(f, args[i])
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=name)


def test_gmm_sample_backward_against_finite_differences(ctx):
    """The reparameterised sample's gradient: the forward's components and
    noise eps = (z - mu_c) / exp(log_var_c / 2) held fixed, z(mu, log_var) =
    mu_c + exp(log_var_c / 2) eps and log_q(z) differentiated numerically."""
    _, mu, lv, logits = _mixture(seed=8)
    rng = dict(seed=4, subsequence=1, offset=12)
    s = tally.gmm_sample(mu, lv, logits, ctx=ctx, **rng)
    B = mu.shape[0]
    rows, comp = np.arange(B), s.component.astype(np.int64)
    gz = np.linspace(0.5, 1.5, s.z.size).reshape(s.z.shape).astype(np.float32)
    gq = np.linspace(-1.0, 1.0, B).astype(np.float32)
    grads = tally.gmm_sample_backward(mu, lv, logits, grad_z=gz, grad_log_q=gq, ctx=ctx, **rng)
    m64, v64, l64 = (a.astype(np.float64) for a in (mu, lv, logits))
    eps = (s.z.astype(np.float64) - m64[rows, comp]) / np.exp(0.5 * v64[rows, comp])

    def objective(m, v, lg):
        z = m[rows, comp] + np.exp(0.5 * v[rows, comp]) * eps
        return float((z * gz).sum() + (_log_q64(z, m, v, lg) * gq).sum())

    args = [m64, v64, l64]
    for i, (got, name) in enumerate(zip(grads, ("mu", "log_var", "logits"))):
        def f(x, i=i):
            a = list(args)
            a[i] = x
            return objective(*a)
        np.testing.assert_allclose(got, _central_difference(f, args[i]), rtol=1e-3, atol=1e-4, err_msg=name)


def test_gmm_backward_host_and_opencl_equal_bit_for_bit():
    host, cl = context_for("host"), context_for("opencl")
    if host is None or cl is None:
        pytest.skip("needs both the host and an OpenCL device")
    z, mu, lv, logits = _mixture(seed=6, B=64, K=4, D=9)
    w = np.ones(64, np.float32)
    pairs = [(tally.gmm_log_prob_backward(z, mu, lv, logits, w, ctx=c),
              tally.gmm_sample_backward(mu, lv, logits, 3, 0, 0, grad_z=z, grad_log_q=w, ctx=c))
             for c in (host, cl)]
    for u, v in zip(pairs[0][0] + pairs[0][1], pairs[1][0] + pairs[1][1]):
        np.testing.assert_array_equal(u.view(np.uint32), v.view(np.uint32))
