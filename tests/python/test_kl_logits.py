"""kl_div from logits (input_logits=, target_logits=) against torch's
F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1)) written in NumPy float64,
on the host and on OpenCL, and the refused flag combinations."""

import numpy as np
import pytest

import tally

RNG = np.random.default_rng(20261216)


def f32(a):
    return np.asarray(a, dtype=np.float32)


def log_softmax(z):
    z = z.astype(np.float64)
    m = z.max(axis=-1, keepdims=True)
    return (z - m) - np.log(np.exp(z - m).sum(axis=-1, keepdims=True))


def reference(x, y, reduction, input_logits, target_logits, log_target=False, input_is_prob=False):
    """torch's kl_div in float64, each side normalised as its flag says."""
    lq = log_softmax(x) if input_logits else np.log(x.astype(np.float64)) if input_is_prob else x.astype(np.float64)
    if target_logits:
        lt = log_softmax(y)
        t = np.exp(lt)
    elif log_target:
        lt = y.astype(np.float64)
        t = np.exp(lt)
    else:
        t = y.astype(np.float64)
        with np.errstate(divide="ignore"):
            lt = np.log(t)
    with np.errstate(invalid="ignore"):
        pw = np.where(t == 0, 0.0, t * (lt - lq))
    if reduction == "none":
        return pw
    s = pw.sum()
    return {"sum": s, "mean": s / pw.size, "batchmean": s / (pw.shape[0] if pw.ndim == 2 else 1)}[reduction]


CASES = [
    # reduction, input_logits, target_logits, other flag, shape
    ("none", True, True, None, (4, 9)),
    ("sum", True, True, None, (16, 1024)),
    ("mean", True, True, None, (7, 1000)),
    ("batchmean", True, True, None, (3, 20000)),
    ("batchmean", True, False, None, (8, 50)),
    ("none", True, False, "log_target", (5, 3)),
    ("batchmean", False, True, None, (8, 50)),
    ("sum", False, True, "input_is_prob", (6, 33)),
    ("none", True, True, None, (129,)),
]


@pytest.mark.parametrize("reduction,input_logits,target_logits,other,shape", CASES, ids=str)
def test_kl_div_logits(ctx, reduction, input_logits, target_logits, other, shape):
    x = RNG.normal(scale=2.0, size=shape)
    y = RNG.normal(scale=2.0, size=shape)
    if not input_logits:
        x = np.exp(log_softmax(x)) if other == "input_is_prob" else log_softmax(x)
    if not target_logits:
        y = log_softmax(y) if other == "log_target" else np.exp(log_softmax(y))
    x, y = f32(x), f32(y)
    kw = {other: True} if other else {}
    got = tally.kl_div(x, y, reduction=reduction, input_logits=input_logits, target_logits=target_logits,
                       ctx=ctx, **kw)
    ref = reference(x, y, reduction, input_logits, target_logits, **kw)
    if reduction == "none":
        assert got.shape == x.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6)
    else:
        assert isinstance(got, np.float32)
        np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6)


def test_kl_div_logits_known_answers(ctx):
    # Identical rows: exactly 0; a masked target (-inf logit) contributes
    # exactly 0 even where the input is -inf too; a row with a NaN is NaN.
    x = f32([[0.5, -1.0, 2.0], [1.0, -np.inf, 0.0], [np.nan, 0.0, 1.0]])
    y = f32([[0.5, -1.0, 2.0], [0.0, -np.inf, 3.0], [0.0, 1.0, 2.0]])
    got = tally.kl_div(x, y, reduction="none", input_logits=True, target_logits=True, ctx=ctx)
    assert np.all(got[0] == 0.0) and got[1, 1] == 0.0 and np.all(np.isnan(got[2]))
    np.testing.assert_allclose(got[1], reference(x[1:2], y[1:2], "none", True, True)[0], rtol=2e-5, atol=1e-7)
    # The max shift keeps logits of magnitude 1e4 exact.
    big = tally.kl_div(x[:2] + f32(1e4), y[:2] - f32(1e4), reduction="none", input_logits=True,
                       target_logits=True, ctx=ctx)
    small = tally.kl_div(x[:2], y[:2], reduction="none", input_logits=True, target_logits=True, ctx=ctx)
    assert np.array_equal(big, small)


def test_kl_div_logits_refused(host):
    x = f32(np.zeros((2, 3)))
    with pytest.raises(tally.TallyError, match="TALLY_KL_INPUT_LOGITS"):
        tally.kl_div(x, x, input_logits=True, input_is_prob=True, ctx=host)
    with pytest.raises(tally.TallyError, match="TALLY_KL_TARGET_LOGITS"):
        tally.kl_div(x, x, target_logits=True, log_target=True, ctx=host)
    with pytest.raises(TypeError, match="input_logits"):
        tally.kl_div(x, x, input_logits=1, ctx=host)
