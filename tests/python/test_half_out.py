"""bf16 and f16 arrays as the elementwise outputs (kl_div with reduction
"none", uniform and normal draws, gmm_sample's z), written in place: each
value is defined as the float32 result rounded to nearest even (docs/ops.md),
so it must equal the float32 call's result converted by NumPy's astype
(float16), ml_dtypes' or torch's (bfloat16) - conversions written
independently of tally's. NumPy's float16 always; bfloat16 through ml_dtypes
and torch when they are installed."""

import numpy as np
import pytest

import tally

GAP = 0x7E5A  # a NaN in both formats, in the halves no call may write


def narrowed(kind, x):
    """float32 x rounded to the half type `kind` by that library, as uint16 bits."""
    if kind == "float16":
        with np.errstate(over="ignore"):  # overflow to infinity is the rounding's rule
            return x.astype(np.float16).view(np.uint16)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return x.astype(ml_dtypes.bfloat16).view(np.uint16)


def half_array(kind, shape, pad=0):
    """A half array of `shape` whose rows sit in a wider buffer filled with
    GAP (pad extra halves a row, and the view starting at an odd element, so
    it begins between two 32-bit words), and that buffer."""
    rows, cols = shape if len(shape) == 2 else (1, shape[0])
    if kind == "float16":
        dt = np.float16
    else:
        dt = pytest.importorskip("ml_dtypes").bfloat16
    base = np.full(rows * (cols + pad) + 2, GAP, np.uint16)
    view = base[1:1 + rows * (cols + pad)].reshape(rows, cols + pad)[:, :cols].view(dt)
    return (view if len(shape) == 2 else view[0]), base


def outside_untouched(base, shape, pad):
    rows, cols = shape if len(shape) == 2 else (1, shape[0])
    mask = np.ones(base.shape, bool)
    inner = mask[1:1 + rows * (cols + pad)].reshape(rows, cols + pad)
    inner[:, :cols] = False
    assert np.all(base[mask] == GAP), "a half outside the output view was written"


KINDS = ["float16", "bfloat16"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape,pad", [((7,), 0), ((5, 33), 3), ((64, 256), 0)])
def test_kl_div_none_into_halves(ctx, kind, shape, pad):
    rng = np.random.default_rng(3)
    x = np.log(rng.uniform(1e-3, 1.0, shape)).astype(np.float32)
    t = rng.uniform(0.0, 1.0, shape).astype(np.float32)
    flat_t = t.reshape(-1)
    flat_x = x.reshape(-1)
    flat_t[0], flat_x[0] = 1.0, -1e5  # 1e5: infinite as f16, finite as bf16
    flat_t[1] = -0.5  # NaN
    flat_t[2] = 0.0  # a zero term
    want = tally.kl_div(x, t, reduction="none", ctx=ctx)
    out, base = half_array(kind, shape, pad)
    got = tally.kl_div(x, t, reduction="none", ctx=ctx, out=out)
    assert got is out
    np.testing.assert_array_equal(np.asarray(out).view(np.uint16), narrowed(kind, want))
    if kind == "float16":
        assert np.asarray(out).reshape(-1)[0] == np.inf
    outside_untouched(base, shape, pad)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dist", ["uniform", "normal"])
def test_random_into_halves(ctx, kind, dist):
    shape = (9, 37)
    want = tally.random(dist, shape, seed=11, subsequence=2, offset=5, ctx=ctx)
    out, base = half_array(kind, shape, pad=2)
    got = tally.random(dist, None, seed=11, subsequence=2, offset=5, ctx=ctx, out=out)
    assert got.values is out and got.consumed == want.consumed == 9 * 37 + 3
    np.testing.assert_array_equal(np.asarray(out).view(np.uint16), narrowed(kind, want.values))
    outside_untouched(base, shape, 2)


@pytest.mark.parametrize("kind", KINDS)
def test_gmm_sample_z_into_halves(ctx, kind):
    rng = np.random.default_rng(5)
    B, K, D = 6, 3, 11
    mu = rng.normal(0, 1.5, (B, K, D)).astype(np.float32)
    lv = rng.normal(-0.5, 0.5, (B, K, D)).astype(np.float32)
    lg = rng.normal(0, 1, K).astype(np.float32)
    want = tally.gmm_sample(mu, lv, lg, seed=4, offset=8, ctx=ctx)
    z, base = half_array(kind, (B, D), pad=1)
    got = tally.gmm_sample(mu, lv, lg, seed=4, offset=8, ctx=ctx, z_out=z)
    assert got.z is z and got.consumed == want.consumed
    np.testing.assert_array_equal(np.asarray(z).view(np.uint16), narrowed(kind, want.z))
    np.testing.assert_array_equal(got.log_q.view(np.uint32), want.log_q.view(np.uint32))
    np.testing.assert_array_equal(got.component, want.component)
    outside_untouched(base, (B, D), 1)


def test_half_outputs_refused_elsewhere(host):
    x = np.zeros((2, 3), np.float32)
    out = np.zeros((2, 3), np.float16)
    with pytest.raises(ValueError, match="reduction='none'"):
        tally.kl_div(x, x, reduction="sum", ctx=host, out=out)
    with pytest.raises(ValueError, match="shape"):
        tally.kl_div(x, x, reduction="none", ctx=host, out=np.zeros((3, 2), np.float16))
    with pytest.raises(TypeError, match="uint32"):
        tally.random("raw", None, ctx=host, out=np.zeros(4, np.float16))
    with pytest.raises(TypeError, match="float64"):
        tally.random("uniform", None, ctx=host, out=np.zeros(4, np.float64))
    with pytest.raises(ValueError, match="not contiguous"):
        tally.random("normal", None, ctx=host, out=np.zeros((4, 4), np.float16)[:, ::2])


def test_torch_half_outputs(host):
    torch = pytest.importorskip("torch")
    x = torch.log(torch.rand(4, 9) + 0.01)
    t = torch.rand(4, 9)
    want = tally.kl_div(x, t, reduction="none", ctx=host)
    for dt in (torch.bfloat16, torch.float16):
        out = torch.empty(4, 9, dtype=dt)
        got = tally.kl_div(x, t, reduction="none", ctx=host, out=out)
        assert got is out
        assert torch.equal(out.view(torch.int16), want.to(dt).view(torch.int16))
        r = torch.empty(3, 5, dtype=dt)
        tally.random("normal", None, seed=2, ctx=host, out=r)
        ref = tally.random("normal", (3, 5), seed=2, ctx=host).values
        assert torch.equal(r.view(torch.int16), torch.from_numpy(ref).to(dt).view(torch.int16))
