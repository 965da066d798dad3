"""Every op on one set of inputs, for comparing array kinds (NumPy, torch,
CuPy) and backends bit for bit: the same inputs must give the same bits."""

import numpy as np

import tally


def inputs():
    r = np.random.default_rng(11)

    def f(a):
        return np.asarray(a, np.float32)

    def softmax(a):
        e = np.exp(a - a.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    p, q = softmax(r.normal(size=(19, 77))), softmax(r.normal(size=(19, 77)))
    return {
        "x": f(r.normal(size=(37, 301))),
        "big": f(r.normal(size=(9, 64))),
        "logq": f(np.log(q)),
        "p": f(p),
        "counts": f(r.integers(0, 9, size=(11, 40))),
        "log_alpha": f(r.normal(size=40) * 0.5),
        "mu": f(r.normal(size=(9, 4, 6))),
        "log_var": f(r.normal(size=(9, 4, 6)) * 0.3),
        "logits": f(r.normal(size=4)),
        "z": f(r.normal(size=(9, 6))),
        "w": f(r.random(size=(13, 50))),
    }


REDUCE = ["sum", "mean", "min", "max", "logsumexp", "sumsq"]


def run_all(a, ctx=None):
    """name -> result (arrays of the inputs' kind) for every op; a holds the
    inputs of inputs() converted to one kind."""
    out = {}
    for name in REDUCE:
        fn = getattr(tally, name)
        out[name] = fn(a["x"], ctx=ctx)
        out[name + "_rows"] = fn(a["x"], axis=1, ctx=ctx)
        out[name + "_strided"] = fn(a["big"][1::2, 3:40], axis=1, ctx=ctx)
    for red in ("none", "sum", "mean", "batchmean"):
        out["kl_" + red] = tally.kl_div(a["logq"], a["p"], reduction=red, ctx=ctx)
    out["kl_prob"] = tally.kl_div(a["p"], a["p"], reduction="batchmean", input_is_prob=True, ctx=ctx)
    out["dm"] = tally.dirichlet_multinomial(a["counts"], a["log_alpha"], with_coefficient=True, ctx=ctx)
    out["dm_sum"] = tally.dirichlet_multinomial(a["counts"], a["log_alpha"], reduction="sum", ctx=ctx)
    out["gmm_log_prob"] = tally.gmm_log_prob(a["z"], a["mu"], a["log_var"], a["logits"], ctx=ctx)
    s = tally.gmm_sample(a["mu"], a["log_var"], a["logits"], seed=5, subsequence=2, offset=8, ctx=ctx)
    out.update(gmm_z=s.z, gmm_log_q=s.log_q, gmm_component=s.component, gmm_consumed=s.consumed)
    c = tally.categorical(a["w"], seed=3, offset=4, ctx=ctx)
    out.update(categorical=c.index, categorical_consumed=c.consumed)
    return out


def bits_of(v):
    """Host bits of a result of any kind (NumPy, torch, CuPy, int)."""
    if isinstance(v, int):
        return np.asarray(v)
    if hasattr(v, "detach"):
        v = v.detach().cpu().numpy()
    elif type(v).__module__.split(".")[0] == "cupy":
        v = v.get()
    v = np.ascontiguousarray(np.asarray(v))
    return v.view(np.uint32) if v.dtype == np.float32 else v


def assert_same_bits(a, b):
    assert a.keys() == b.keys()
    for name in a:
        x, y = bits_of(a[name]), bits_of(b[name])
        assert x.shape == y.shape and np.array_equal(x, y), name
