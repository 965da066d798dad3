"""Random ops: the streams equal the `tally run` CLI's bytes for the same
(seed, subsequence, offset), follow docs/rng.md's definitions, and report
what they consumed."""

import numpy as np
import pytest

import tally
from conftest import bits

RNG = np.random.default_rng(42)
STREAMS = [
    # seed, subsequence, offset
    (0, 0, 0),
    (1, 0, 3),
    (12345, 7, 1000),
    (2**64 - 1, 2**64 - 1, 2**63 + 5),
]
COUNTS = [1, 4, 7, 1001]


@pytest.mark.parametrize("seed,sub,off", STREAMS, ids=str)
@pytest.mark.parametrize("dist,dtype", [("raw", "<u4"), ("uniform", "<f4"), ("normal", "<f4")])
def test_random_equals_cli(ctx, cli, dist, dtype, seed, sub, off):
    for n in COUNTS:
        ref = cli("rng", {}, {"x": dtype}, "--dist", dist, "--count", n, "--seed", seed,
                  "--subsequence", sub, "--offset", off)
        got = tally.random(dist, n, seed=seed, subsequence=sub, offset=off, ctx=ctx)
        assert got.values.dtype == np.dtype(dtype).newbyteorder("=")
        assert got.values.shape == (n,)
        assert np.array_equal(bits(got.values), bits(ref["x"]))
        assert got.consumed == ref["consumed"] == (n + 3) // 4 * 4


def test_random_shapes_are_row_major(ctx):
    flat = tally.random("raw", 35, seed=9, offset=4, ctx=ctx).values
    grid = tally.random("raw", (5, 7), seed=9, offset=4, ctx=ctx).values
    assert grid.shape == (5, 7) and np.array_equal(grid.ravel(), flat)
    assert tally.random("normal", (0,), ctx=ctx).values.shape == (0,)


def test_uniform_and_normal_follow_raw(ctx):
    # uniform(i) = (float)raw(i) * 2^-32 + 2^-33 exactly (docs/rng.md);
    # normal is Box-Muller over absolute pairs (2k, 2k+1).
    raw = tally.random("raw", 4000, seed=3, subsequence=1, ctx=ctx).values
    uni = tally.random("uniform", 4000, seed=3, subsequence=1, ctx=ctx).values
    expect = raw.astype(np.float32) * np.float32(2.0**-32) + np.float32(2.0**-33)
    assert np.array_equal(bits(uni), bits(expect))
    assert uni.min() > 0 and uni.max() <= 1
    nor = tally.random("normal", 4000, seed=3, subsequence=1, ctx=ctx).values.astype(np.float64)
    u = uni[0::2].astype(np.float64)
    t = raw[1::2].astype(np.float32).astype(np.float64) * 2.0**-31 + 2.0**-32
    s = np.sqrt(-2 * np.log(u))
    ref = np.empty(4000)
    ref[0::2], ref[1::2] = s * np.sin(np.pi * t), s * np.cos(np.pi * t)
    np.testing.assert_allclose(nor, ref, rtol=1e-5, atol=1e-5)


def test_random_out_fills_in_place(host):
    out = np.zeros((3, 8), np.uint32)
    r = tally.random("raw", None, seed=1, out=out, ctx=host)
    assert r.values is out and r.consumed == 24
    assert np.array_equal(out.ravel(), tally.random("raw", 24, seed=1, ctx=host).values)


CAT_CASES = [(5, 3, False), (64, 100, False), (9, 17, True), (1, 1, False)]


@pytest.mark.parametrize("rows,cols,logits", CAT_CASES, ids=str)
def test_categorical_equals_cli_and_rule(ctx, cli, rows, cols, logits):
    w = np.asarray(RNG.random(size=(rows, cols)) ** 3, np.float32)
    if cols > 1:
        w[0, 0] = 0.0  # a zero weight is never drawn
    with np.errstate(divide="ignore"):
        inp = np.log(w).astype(np.float32) if logits else w
    seed, sub, off = 77, 3, 12
    got = tally.categorical(inp, logits=logits, seed=seed, subsequence=sub, offset=off, ctx=ctx)
    args = ["--rows", rows, "--cols", cols, "--seed", seed, "--subsequence", sub, "--offset", off]
    ref = cli("categorical", {"weights": inp}, {"index": "<i4"}, *(args + (["--logits"] if logits else [])))
    assert got.index.dtype == np.int32 and got.index.shape == (rows,)
    assert np.array_equal(got.index, ref["index"])
    assert got.consumed == ref["consumed"] == (rows + 3) // 4 * 4
    if not logits:
        # docs/rng.md: the smallest k with w_k > 0 whose running sum (index
        # order, float32) reaches u * total.
        u = tally.random("uniform", rows, seed=seed, subsequence=sub, offset=off, ctx=ctx).values
        run = np.cumsum(w, axis=1, dtype=np.float32)
        target = (u * run[:, -1]).astype(np.float32)
        expect = [int(np.flatnonzero((run[r] >= target[r]) & (w[r] > 0))[0]) for r in range(rows)]
        assert got.index.tolist() == expect


def test_categorical_bad_rows_give_minus_one(ctx):
    w = np.asarray([[1, 2, 3], [0, 0, 0], [1, -1, 1], [np.nan, 1, 1], [np.inf, 1, 1]], np.float32)
    idx = tally.categorical(w, ctx=ctx).index
    assert idx[0] in (0, 1, 2) and idx[1:].tolist() == [-1, -1, -1, -1]


GMM_SAMPLE_CASES = [(10, 3, 4), (5, 1, 3), (7, 2, 1), (33, 8, 16)]


@pytest.mark.parametrize("B,K,D", GMM_SAMPLE_CASES, ids=str)
def test_gmm_sample_equals_cli_and_definition(ctx, cli, B, K, D):
    mu = np.asarray(RNG.normal(size=(B, K, D)), np.float32)
    lv = np.asarray(RNG.normal(size=(B, K, D)) * 0.4, np.float32)
    lg = np.asarray(RNG.normal(size=K), np.float32)
    seed, sub, off = 2024, 5, 40
    s = tally.gmm_sample(mu, lv, lg, seed=seed, subsequence=sub, offset=off, ctx=ctx)
    assert s.z.shape == (B, D) and s.log_q.shape == (B,) and s.component.shape == (B,)
    assert s.z.dtype == np.float32 and s.component.dtype == np.int32
    ref = cli("gmm_sample", {"mu": mu.reshape(B, K * D), "log_var": lv.reshape(B, K * D), "logits": lg},
              {"z": "<f4", "log_q": "<f4", "component": "<i4"},
              "--batch", B, "--components", K, "--dim", D, "--seed", seed, "--subsequence", sub,
              "--offset", off)
    assert np.array_equal(bits(s.z), bits(ref["z"].reshape(B, D)))
    assert np.array_equal(bits(s.log_q), bits(ref["log_q"]))
    assert np.array_equal(s.component, ref["component"])
    b4, d2 = (B + 3) // 4 * 4, (D + 1) // 2 * 2
    assert s.consumed == ref["consumed"] == b4 + (B * d2 + 3) // 4 * 4
    # z = mu_c + exp(0.5 log_var_c) * eps with eps = normal(offset + B4 + b*D2 + d).
    eps = tally.random("normal", B * d2, seed=seed, subsequence=sub, offset=off + b4, ctx=ctx).values
    eps = eps.reshape(B, d2)[:, :D].astype(np.float64)
    c = s.component
    assert ((c >= 0) & (c < K)).all()
    rows = np.arange(B)
    expect = mu[rows, c].astype(np.float64) + np.exp(0.5 * lv[rows, c].astype(np.float64)) * eps
    np.testing.assert_allclose(s.z, expect, rtol=1e-5, atol=1e-6)
    # and log_q is the mixture's density at z
    lp = tally.gmm_log_prob(s.z, mu, lv, lg, ctx=ctx)
    np.testing.assert_allclose(s.log_q, lp, rtol=1e-5, atol=1e-5)


def test_gmm_sample_one_component_without_logits(ctx):
    mu = np.asarray(RNG.normal(size=(6, 3)), np.float32)
    lv = np.zeros((6, 3), np.float32)
    s = tally.gmm_sample(mu, lv, seed=1, ctx=ctx)
    assert (s.component == 0).all()
    t = tally.gmm_sample(mu[:, None, :], lv[:, None, :], np.zeros(1, np.float32), seed=1, ctx=ctx)
    assert np.array_equal(bits(s.z), bits(t.z)) and s.consumed == t.consumed == 8 + 24


def test_consumed_chains_draws(ctx):
    # Advancing offset by consumed continues the stream without reuse.
    a = tally.random("raw", 10, seed=4, ctx=ctx)
    b = tally.random("raw", 10, seed=4, offset=a.consumed, ctx=ctx)
    whole = tally.random("raw", 22, seed=4, ctx=ctx).values
    assert a.consumed == 12
    assert np.array_equal(a.values, whole[:10]) and np.array_equal(b.values, whole[12:])
