"""bf16 and f16 arrays as inputs: read in place, no copy, and defined as the
float32 op on the widened values (docs/ops.md), so every result must equal,
bit for bit, the same call on x.astype(float32). NumPy's float16 always;
bfloat16 through ml_dtypes and torch when they are installed."""

import numpy as np
import pytest

import tally


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def same_bits(got, want):
    assert got.dtype == np.float32
    np.testing.assert_array_equal(bits(got), bits(want))


def halves(kind, x):
    """x (float32) rounded to the half type `kind`, as that library's array."""
    if kind == "float16":
        return x.astype(np.float16)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return x.astype(ml_dtypes.bfloat16)


KINDS = ["float16", "bfloat16"]


@pytest.mark.parametrize("kind", KINDS)
def test_reductions_equal_float32_on_widened_values(ctx, kind):
    rng = np.random.default_rng(7)
    x = halves(kind, rng.uniform(-2, 2, (37, 611)).astype(np.float32))
    wide = x.astype(np.float32)
    for fn in (tally.sum, tally.mean, tally.max, tally.logsumexp, tally.sumsq):
        same_bits(np.asarray(fn(x, ctx=ctx)), np.asarray(fn(wide, ctx=ctx)))
        same_bits(fn(x, axis=1, ctx=ctx), fn(wide, axis=1, ctx=ctx))
    # Independent of tally: the float64 sum of the widened values.
    assert abs(float(tally.sum(x, ctx=ctx)) - wide.astype(np.float64).sum()) < 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_kl_and_dirichlet_multinomial_mixed_dtypes(ctx, kind):
    rng = np.random.default_rng(8)
    p = rng.uniform(0.01, 1, (64, 300)).astype(np.float32)
    t = rng.uniform(0, 1, (64, 300)).astype(np.float32)
    hp = halves(kind, p)
    # Half input with a float32 target: any mix is allowed.
    got = tally.kl_div(hp, t, reduction="batchmean", input_is_prob=True, ctx=ctx)
    want = tally.kl_div(hp.astype(np.float32), t, reduction="batchmean", input_is_prob=True, ctx=ctx)
    same_bits(np.asarray(got), np.asarray(want))
    counts = halves(kind, np.floor(rng.uniform(0, 5, (50, 40))).astype(np.float32))
    log_alpha = halves(kind, rng.uniform(-1, 1, 40).astype(np.float32))
    same_bits(tally.dirichlet_multinomial(counts, log_alpha, ctx=ctx),
              tally.dirichlet_multinomial(counts.astype(np.float32), log_alpha.astype(np.float32), ctx=ctx))


def test_unaligned_half_slice_is_read_in_place(ctx):
    """x[1:] of a float16 array starts 2 bytes into a word: still no copy,
    still the widened values' bits."""
    x = np.arange(1, 2002, dtype=np.float32).astype(np.float16) / np.float16(64)
    sl = x[1:]
    assert sl.ctypes.data % 4 == 2
    same_bits(np.asarray(tally.sum(sl, ctx=ctx)), np.asarray(tally.sum(sl.astype(np.float32), ctx=ctx)))
    rows = x[1:1 + 20 * 100].reshape(20, 100)
    same_bits(tally.logsumexp(rows, axis=1, ctx=ctx), tally.logsumexp(rows.astype(np.float32), axis=1, ctx=ctx))


def test_gmm_and_categorical_take_halves(ctx):
    rng = np.random.default_rng(9)
    B, K, D = 16, 3, 8
    mu = rng.normal(0, 1, (B, K, D)).astype(np.float16)
    lv = rng.normal(-0.5, 0.3, (B, K, D)).astype(np.float16)
    logits = rng.normal(0, 1, K).astype(np.float16)
    z = rng.normal(0, 1, (B, D)).astype(np.float16)
    same_bits(tally.gmm_log_prob(z, mu, lv, logits, ctx=ctx),
              tally.gmm_log_prob(*(a.astype(np.float32) for a in (z, mu, lv, logits)), ctx=ctx))
    a = tally.gmm_sample(mu, lv, logits, seed=3, ctx=ctx)
    b = tally.gmm_sample(mu.astype(np.float32), lv.astype(np.float32), logits.astype(np.float32), seed=3, ctx=ctx)
    same_bits(a.z, b.z)
    same_bits(a.log_q, b.log_q)
    np.testing.assert_array_equal(a.component, b.component)
    w = rng.uniform(0, 1, (40, 7)).astype(np.float16)
    ca = tally.categorical(w, seed=5, ctx=ctx)
    cb = tally.categorical(w.astype(np.float32), seed=5, ctx=ctx)
    np.testing.assert_array_equal(ca[0] if isinstance(ca, tuple) else ca, cb[0] if isinstance(cb, tuple) else cb)


def test_torch_bfloat16_cpu():
    torch = pytest.importorskip("torch")
    x = torch.linspace(-3, 3, 5000, dtype=torch.float32).to(torch.bfloat16).reshape(50, 100)
    got = tally.logsumexp(x, axis=1)
    want = tally.logsumexp(x.float(), axis=1)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_other_dtypes_still_refused():
    with pytest.raises(TypeError, match="float32 or bfloat16 or float16"):
        tally.sum(np.zeros(4, np.float64))
