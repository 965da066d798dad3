"""Every deterministic op against an independent float64 reference (NumPy,
SciPy), on the host and on OpenCL, and the host's and OpenCL's bits equal."""

import numpy as np
import pytest
from scipy import special, stats

import tally
from conftest import bits, context_for

RNG = np.random.default_rng(20261201)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def close(got, ref, rtol, atol=0.0):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


# ---------------------------------------------------------------- reductions

REDUCTIONS = [
    # name, float64 reference over a 2-D array and an axis (None or 1)
    ("sum", lambda x, ax: np.sum(x, axis=ax)),
    ("mean", lambda x, ax: np.mean(x, axis=ax)),
    ("min", lambda x, ax: np.min(x, axis=ax)),
    ("max", lambda x, ax: np.max(x, axis=ax)),
    ("logsumexp", lambda x, ax: special.logsumexp(x, axis=ax)),
    ("sumsq", lambda x, ax: np.sum(x * x, axis=ax)),
]
SHAPES = [(1, 1), (7,), (3, 5), (33, 129), (4, 3000)]


@pytest.mark.parametrize("name,ref", REDUCTIONS, ids=[r[0] for r in REDUCTIONS])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reduction(ctx, name, ref, shape):
    x = f32(RNG.normal(size=shape) * 3)
    x64 = x.astype(np.float64).reshape(1, -1) if x.ndim == 1 else x.astype(np.float64)
    fn = getattr(tally, name)
    # Summation error grows with the magnitudes summed; the tree keeps it
    # near log2(n) roundings.
    scale = np.sum(np.abs(x64) * (np.abs(x64) if name == "sumsq" else 1))
    all_ = fn(x, ctx=ctx)
    assert isinstance(all_, np.float32)
    close(all_, ref(x64, None), rtol=2e-6, atol=1e-6 * scale if name in ("sum", "sumsq", "mean") else 0)
    rows = fn(x, axis=1, ctx=ctx)
    assert isinstance(rows, np.ndarray) and rows.dtype == np.float32 and rows.shape == (x64.shape[0],)
    row_scale = np.sum(np.abs(x64) * (np.abs(x64) if name == "sumsq" else 1), axis=1)
    atol = 1e-6 * row_scale if name in ("sum", "sumsq", "mean") else 0
    close(rows, ref(x64, 1), rtol=2e-6, atol=np.max(atol) if np.ndim(atol) else atol)


@pytest.mark.parametrize("name,value", [("sum", 0.0), ("sumsq", 0.0), ("logsumexp", -np.inf)])
def test_empty_reductions(ctx, name, value):
    assert getattr(tally, name)(np.empty((3, 0), np.float32), ctx=ctx) == value
    assert getattr(tally, name)(np.empty((0,), np.float32), ctx=ctx) == value


def test_nan_propagates(ctx):
    x = f32([[1, np.nan, 3], [4, 5, 6]])
    for name in ("sum", "min", "max", "logsumexp"):
        r = getattr(tally, name)(x, axis=1, ctx=ctx)
        assert np.isnan(r[0]) and not np.isnan(r[1]), name


def test_strided_rows_are_read_in_place(ctx):
    big = f32(RNG.normal(size=(9, 40)))
    view = big[1::2, 3:20]  # row stride 80 elements, 17 columns
    assert not view.flags.c_contiguous
    dense = np.ascontiguousarray(view)
    for name, _ in REDUCTIONS:
        fn = getattr(tally, name)
        assert bits(fn(view, ctx=ctx)) == bits(fn(dense, ctx=ctx))
        assert np.array_equal(bits(fn(view, axis=1, ctx=ctx)), bits(fn(dense, axis=1, ctx=ctx)))


# ---------------------------------------------------------------- kl_div

def softmax(a, axis=-1):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def kl_reference(inp, tgt, reduction, log_target, input_is_prob):
    i, t = inp.astype(np.float64), tgt.astype(np.float64)
    if input_is_prob:
        i = np.log(i)
    if log_target:
        pw = np.exp(t) * (t - i)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            pw = np.where(t == 0, 0.0, t * (np.log(np.where(t > 0, t, 1)) - i))
    if reduction == "none":
        return pw
    s = pw.sum()
    return {"sum": s, "mean": s / pw.size, "batchmean": s / (pw.shape[0] if pw.ndim == 2 else 1)}[reduction]


KL_CASES = [
    # reduction, log_target, input_is_prob, shape
    ("none", False, False, (4, 9)),
    ("sum", False, False, (16, 300)),
    ("mean", False, False, (16, 300)),
    ("batchmean", False, False, (16, 300)),
    ("batchmean", True, False, (8, 50)),
    ("batchmean", False, True, (8, 50)),
    ("none", True, True, (3, 7)),
    ("mean", False, False, (129,)),
]


@pytest.mark.parametrize("reduction,log_target,input_is_prob,shape", KL_CASES, ids=str)
def test_kl_div(ctx, reduction, log_target, input_is_prob, shape):
    p = softmax(RNG.normal(size=shape))
    q = softmax(RNG.normal(size=shape))
    p.flat[::7] = 0.0  # zeros in the target give 0, not NaN
    tgt = f32(np.log(np.maximum(p, 1e-30)) if log_target else p)
    inp = f32(q if input_is_prob else np.log(q))
    got = tally.kl_div(inp, tgt, reduction=reduction, log_target=log_target, input_is_prob=input_is_prob,
                       ctx=ctx)
    ref = kl_reference(inp, tgt, reduction, log_target, input_is_prob)
    if reduction == "none":
        assert got.shape == inp.shape and got.dtype == np.float32
        close(got, ref, rtol=1e-5, atol=1e-7)
    else:
        assert isinstance(got, np.float32)
        close(got, ref, rtol=1e-5, atol=1e-6)


def test_kl_div_quick_start():
    # The README's first lines: equal distributions give exactly 0.
    p = np.full((2, 3), 1 / 3, np.float32)
    assert tally.kl_div(np.log(p), p, reduction="batchmean") == 0.0
    assert tally.kl_div(p, p, reduction="batchmean", input_is_prob=True) == 0.0


def test_kl_div_negative_target_is_nan(ctx):
    r = tally.kl_div(f32([[0.0, 0.0]]), f32([[-0.5, 0.5]]), reduction="none", ctx=ctx)
    assert np.isnan(r[0, 0]) and not np.isnan(r[0, 1])


# ---------------------------------------------------------------- Dirichlet-multinomial

def dm_reference(n, log_alpha, with_coefficient):
    n = n.astype(np.float64)
    a = np.broadcast_to(np.exp(log_alpha.astype(np.float64)), n.shape)
    N, A = n.sum(1), a.sum(1)
    r = special.gammaln(A) - special.gammaln(N + A) + (special.gammaln(n + a) - special.gammaln(a)).sum(1)
    if with_coefficient:
        r += special.gammaln(N + 1) - special.gammaln(n + 1).sum(1)
    return r


DM_CASES = [
    # B, V, per-row alpha, reduction, with_coefficient
    (6, 10, False, "none", False),
    (6, 10, True, "none", False),
    (40, 257, False, "none", True),
    (40, 257, True, "sum", True),
    (40, 33, False, "mean", False),
    (1, 5, False, "none", True),
]


@pytest.mark.parametrize("B,V,per_row,reduction,coef", DM_CASES, ids=str)
def test_dirichlet_multinomial(ctx, B, V, per_row, reduction, coef):
    counts = f32(RNG.integers(0, 12, size=(B, V)))
    counts[0, :2] = 70.0  # whole counts past the lgamma table too
    log_alpha = f32(RNG.normal(size=(B, V) if per_row else (V,)) * 0.7)
    got = tally.dirichlet_multinomial(counts, log_alpha, reduction=reduction, with_coefficient=coef, ctx=ctx)
    ref = dm_reference(counts, log_alpha, coef)
    if reduction == "none":
        assert got.shape == (B,) and got.dtype == np.float32
        close(got, ref, rtol=2e-5, atol=2e-4)
        if coef:  # and SciPy's own distribution agrees
            alpha = np.broadcast_to(np.exp(log_alpha.astype(np.float64)), counts.shape)
            sp = [stats.dirichlet_multinomial.logpmf(c, a, c.sum()) for c, a in
                  zip(counts.astype(np.float64), alpha)]
            close(got, sp, rtol=2e-5, atol=2e-4)
    else:
        r = ref.sum() if reduction == "sum" else ref.mean()
        close(got, r, rtol=2e-5, atol=2e-3)


def test_dirichlet_multinomial_negative_count_is_nan(ctx):
    r = tally.dirichlet_multinomial(f32([[1, -1], [1, 1]]), f32([0, 0]), ctx=ctx)
    assert np.isnan(r[0]) and np.isfinite(r[1])


# ---------------------------------------------------------------- mixtures

def gmm_reference(z, mu, log_var, logits):
    z, mu, lv = (a.astype(np.float64) for a in (z, mu, log_var))
    if mu.ndim == 2:
        mu, lv = mu[:, None, :], lv[:, None, :]
        logw = np.zeros(1)
    else:
        lg = logits.astype(np.float64)
        logw = lg - special.logsumexp(lg)
    comp = stats.norm.logpdf(z[:, None, :], mu, np.exp(0.5 * lv)).sum(-1) + logw
    return special.logsumexp(comp, axis=1)


GMM_CASES = [(10, 3, 4), (7, 1, 5), (33, 8, 16), (5, 2, 1)]


def gmm_inputs(B, K, D, three_d=True):
    mu = f32(RNG.normal(size=(B, K, D)))
    log_var = f32(RNG.normal(size=(B, K, D)) * 0.5)
    logits = f32(RNG.normal(size=K))
    if K == 1 and not three_d:
        return mu[:, 0, :].copy(), log_var[:, 0, :].copy(), None
    return mu, log_var, logits


@pytest.mark.parametrize("B,K,D", GMM_CASES, ids=str)
def test_gmm_log_prob(ctx, B, K, D):
    mu, log_var, logits = gmm_inputs(B, K, D)
    z = f32(RNG.normal(size=(B, D)) * 1.5)
    got = tally.gmm_log_prob(z, mu, log_var, logits, ctx=ctx)
    assert got.shape == (B,) and got.dtype == np.float32
    close(got, gmm_reference(z, mu, log_var, logits), rtol=1e-5, atol=1e-5)


def test_gmm_one_component_two_d(ctx):
    mu, log_var, _ = gmm_inputs(6, 1, 3, three_d=False)
    z = f32(RNG.normal(size=(6, 3)))
    got = tally.gmm_log_prob(z, mu, log_var, ctx=ctx)
    close(got, gmm_reference(z, mu, log_var, None), rtol=1e-5, atol=1e-5)
    # the same as a [B, 1, D] mixture with any logit, bit for bit
    same = tally.gmm_log_prob(z, mu[:, None, :], log_var[:, None, :], f32([3.0]), ctx=ctx)
    assert np.array_equal(bits(got), bits(same))


def test_gmm_strided_batch(ctx):
    mu, log_var, logits = gmm_inputs(12, 3, 4)
    z = f32(RNG.normal(size=(12, 4)))
    sl = slice(None, None, 3)  # every third row: a row stride of 3*K*D elements
    a = tally.gmm_log_prob(z[sl], mu[sl], log_var[sl], logits, ctx=ctx)
    b = tally.gmm_log_prob(*(np.ascontiguousarray(t) for t in (z[sl], mu[sl], log_var[sl])), logits, ctx=ctx)
    assert np.array_equal(bits(a), bits(b))


# ---------------------------------------------------------------- host == OpenCL

def every_op(ctx):
    """Runs every op once on fixed data; returns name -> result."""
    r = np.random.default_rng(7)
    x = f32(r.normal(size=(37, 301)))
    p, q = softmax(r.normal(size=(19, 77))), softmax(r.normal(size=(19, 77)))
    counts = f32(r.integers(0, 9, size=(11, 40)))
    la = f32(r.normal(size=40) * 0.5)
    mu, lv = f32(r.normal(size=(9, 4, 6))), f32(r.normal(size=(9, 4, 6)) * 0.3)
    lg = f32(r.normal(size=4))
    z = f32(r.normal(size=(9, 6)))
    w = f32(r.random(size=(13, 50)))
    out = {}
    for name, _ in REDUCTIONS:
        out[name] = getattr(tally, name)(x, ctx=ctx)
        out[name + "_rows"] = getattr(tally, name)(x, axis=1, ctx=ctx)
    for red in ("none", "sum", "mean", "batchmean"):
        out["kl_" + red] = tally.kl_div(f32(np.log(q)), f32(p), reduction=red, ctx=ctx)
    out["dm"] = tally.dirichlet_multinomial(counts, la, with_coefficient=True, ctx=ctx)
    out["gmm_log_prob"] = tally.gmm_log_prob(z, mu, lv, lg, ctx=ctx)
    s = tally.gmm_sample(mu, lv, lg, seed=5, subsequence=2, offset=8, ctx=ctx)
    out.update(gmm_z=s.z, gmm_log_q=s.log_q, gmm_component=s.component)
    for dist in ("raw", "uniform", "normal"):
        out["random_" + dist] = tally.random(dist, (7, 33), seed=11, offset=3, ctx=ctx).values
    out["categorical"] = tally.categorical(w, seed=3, ctx=ctx).index
    out["categorical_logits"] = tally.categorical(f32(np.log(w)), logits=True, seed=3, ctx=ctx).index
    return out


def test_host_and_opencl_bits_equal(host, opencl):
    a, b = every_op(host), every_op(opencl)
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(bits(a[name]), bits(b[name])), name
