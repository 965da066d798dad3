"""The ops on any array kind (NumPy, CPU or CUDA torch, CuPy): argument
checks in Python, then one libtally call. The public functions in
tally/__init__.py route torch tensors through the torch.library custom ops,
whose implementations call back into these."""

import ctypes
import operator
from collections import namedtuple

import numpy as np

from . import _core
from ._core import lib, View, _F32, _U32, _I32

GmmSample = namedtuple("GmmSample", ["z", "log_q", "component", "consumed"])
GmmSample.__doc__ = "tally.gmm_sample's result: z [B, D], log_q [B], component [B] (int32), consumed."
Random = namedtuple("Random", ["values", "consumed"])
Random.__doc__ = "tally.random's result: the values and the stream elements consumed."
Categorical = namedtuple("Categorical", ["index", "consumed"])
Categorical.__doc__ = "tally.categorical's result: one int32 index per row and the elements consumed."

REDUCE_OPS = {"sum": 1, "mean": 2, "min": 3, "max": 4, "logsumexp": 5, "sumsq": 6}
REDUCTIONS = {"none": 0, "sum": 1, "mean": 2, "batchmean": 3}
DISTRIBUTIONS = {"raw": 1, "uniform": 2, "normal": 3}
_U64 = 1 << 64


def _choice(name, value, table, allowed=None):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    keys = allowed if allowed is not None else list(table)
    if value not in keys:
        raise ValueError(f"{name} must be one of {', '.join(repr(k) for k in keys)}, not {value!r}")
    return table[value]


def _flag(name, value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def _u64(name, value):
    if isinstance(value, (bool, np.bool_)) or isinstance(value, float):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
    if not 0 <= v < _U64:
        raise ValueError(f"{name} is {v}; it must be in [0, 2^64)")
    return v


def _rng(seed, subsequence, offset):
    return _core._lib.Rng(_u64("seed", seed), _u64("subsequence", subsequence), _u64("offset", offset))


def _scalar(c, arr):
    """A one-value output as the input's kind: a NumPy scalar, a 0-dim tensor."""
    if c.flavour == "numpy":
        return arr[()]
    return arr


def _rows(op):
    """Row count of an operand as the library will see it (1-D is one row)."""
    return 1 if len(op.shape) == 1 else op.shape[0]


# The dtypes an elementwise output given by the caller may have: the
# library writes float32, or rounds each float32 value to the half type
# (round to nearest even, docs/ops.md).
_OUT_FLOATS = ("float32", "bfloat16", "float16")


def _out_operand(name, out, shape):
    """The caller's output array `out` as an operand: float32, bfloat16 or
    float16, of exactly `shape`."""
    o = _core._operand(name, out, accept=_OUT_FLOATS)
    if tuple(o.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(o.shape)} but the result has shape {tuple(shape)}")
    return o


def _out_view(c, o):
    """The view of an output array the call writes in place (no copy: a
    context that cannot use the array's memory refuses it)."""
    if not c.in_place:
        raise ValueError(f"{o.name}= needs an array the context uses in place (a CUDA array, or a host "
                         f"array on a host or shared-memory OpenCL context)")
    return c.view(o)


def kl_div(input, target, reduction="mean", log_target=False, input_is_prob=False, ctx=None, input_logits=False,
           target_logits=False, out=None):
    red = _choice("reduction", reduction, REDUCTIONS)
    if out is not None and red != 0:
        raise ValueError("out= is for reduction='none' (a reduced loss is one float32 value)")
    flags = (1 if _flag("log_target", log_target) else 0) | (2 if _flag("input_is_prob", input_is_prob) else 0)
    # TALLY_KL_INPUT_LOGITS and TALLY_KL_TARGET_LOGITS (tally/flags.h).
    flags |= (4 if _flag("input_logits", input_logits) else 0) | (8 if _flag("target_logits", target_logits) else 0)
    a = _core._operand("input", input)
    b = _core._operand("target", target)
    o = _out_operand("out", out, a.shape) if out is not None else None
    with _core.call(ctx, [a, b, o]) as c:
        va, vb = c.view(a), c.view(b)
        if o is not None:
            vo = _out_view(c, o)
            _core.check(lib.tally_kl_div(c.handle, va, vb, red, flags, vo), c)
            return out
        if red == 0:
            if len(a.shape) not in (1, 2):
                raise ValueError(f"input has {len(a.shape)} dimensions; tally takes 1-D or 2-D arrays")
            out, vo = c.output(tuple(a.shape) if len(a.shape) == 2 else (1, a.shape[0]))
        else:
            out, vo = c.output(())
        _core.check(lib.tally_kl_div(c.handle, va, vb, red, flags, vo), c)
    if red == 0:
        return out.reshape(a.shape) if len(a.shape) == 1 else out
    return _scalar(c, out)


def dirichlet_multinomial(counts, log_alpha, reduction="none", with_coefficient=False, ctx=None):
    red = _choice("reduction", reduction, REDUCTIONS, ["none", "sum", "mean"])
    flags = 1 if _flag("with_coefficient", with_coefficient) else 0
    n = _core._operand("counts", counts)
    la = _core._operand("log_alpha", log_alpha)
    with _core.call(ctx, [n, la]) as c:
        vn, vl = c.view(n), c.view(la)
        if red == 0:
            out, vo = c.output((vn.rows,))
        else:
            out, vo = c.output(())
        _core.check(lib.tally_dirichlet_multinomial(c.handle, vn, vl, red, flags, vo), c)
    return out if red == 0 else _scalar(c, out)


def _grad_out(grad_out, scalar):
    """The upstream gradient as an operand: a scalar loss's gradient becomes a
    one-element row (the C API takes it as a 1x1 view)."""
    if scalar and getattr(grad_out, "ndim", 1) == 0:
        grad_out = grad_out.reshape(1)
    return _core._operand("grad_out", grad_out, accept=("float32",))


def kl_div_backward(input, target, grad_out, reduction="mean", log_target=False, input_is_prob=False,
                    need_input=True, need_target=True, ctx=None):
    """Gradients of kl_div with respect to input (p under input_is_prob) and
    target, as (grad_input, grad_target); a gradient not asked for is None.
    grad_out: the loss's gradient (a scalar for sum, mean and batchmean, the
    input's shape for none). float32 inputs (tally_kl_div_backward)."""
    red = _choice("reduction", reduction, REDUCTIONS)
    flags = (1 if _flag("log_target", log_target) else 0) | (2 if _flag("input_is_prob", input_is_prob) else 0)
    a = _core._operand("input", input, accept=("float32",))
    b = _core._operand("target", target, accept=("float32",))
    g = _grad_out(grad_out, red != 0)
    if len(a.shape) not in (1, 2):
        raise ValueError(f"input has {len(a.shape)} dimensions; tally takes 1-D or 2-D arrays")
    shape2 = tuple(a.shape) if len(a.shape) == 2 else (1, a.shape[0])
    with _core.call(ctx, [a, b, g]) as c:
        va, vb, vg = c.view(a), c.view(b), c.view(g)
        gi, vgi = c.output(shape2) if need_input else (None, View())
        gt, vgt = c.output(shape2) if need_target else (None, View())
        _core.check(lib.tally_kl_div_backward(c.handle, va, vb, vg, red, flags, vgi, vgt), c)
    fix = (lambda o: o.reshape(a.shape)) if len(a.shape) == 1 else (lambda o: o)
    return (fix(gi) if gi is not None else None, fix(gt) if gt is not None else None)


def dirichlet_multinomial_backward(counts, log_alpha, grad_out, reduction="none", with_coefficient=False,
                                   ctx=None):
    """Gradient of dirichlet_multinomial with respect to log_alpha (its
    shape: [V] shared or [B, V] per row). grad_out: B values for none, a
    scalar for sum and mean. float32 inputs."""
    red = _choice("reduction", reduction, REDUCTIONS, ["none", "sum", "mean"])
    flags = 1 if _flag("with_coefficient", with_coefficient) else 0
    n = _core._operand("counts", counts, accept=("float32",))
    la = _core._operand("log_alpha", log_alpha, accept=("float32",))
    g = _grad_out(grad_out, red != 0)
    with _core.call(ctx, [n, la, g]) as c:
        vn, vl, vg = c.view(n), c.view(la), c.view(g)
        out, vo = c.output((vl.rows, vl.cols))
        _core.check(lib.tally_dirichlet_multinomial_backward(c.handle, vn, vl, vg, red, flags, vo), c)
    return out.reshape(la.shape)


def _gmm_params(mu, log_var, logits, accept=None):
    kw = {} if accept is None else {"accept": accept}
    m = _core._operand("mu", mu, **kw)
    lv = _core._operand("log_var", log_var, **kw)
    if len(m.shape) == 3:
        components = m.shape[1]
    elif len(m.shape) == 2:
        components = 1
    else:
        raise ValueError(f"mu has shape {tuple(m.shape)}; it must be [B, K, D] or [B, D] (one component)")
    if tuple(lv.shape) != tuple(m.shape):
        raise ValueError(f"log_var has shape {tuple(lv.shape)} but mu has {tuple(m.shape)}")
    lg = None
    if logits is not None:
        lg = _core._operand("logits", logits, **kw)
    elif components > 1:
        raise ValueError(f"logits is None but mu has K = {components} components")
    return m, lv, lg, components


def gmm_log_prob(z, mu, log_var, logits=None, ctx=None):
    zz = _core._operand("z", z)
    m, lv, lg, k = _gmm_params(mu, log_var, logits)
    with _core.call(ctx, [zz, m, lv, lg]) as c:
        vz = c.view(zz)
        dims = 2 if len(m.shape) == 3 else 1
        vm, vv = c.view(m, dims=dims), c.view(lv, dims=dims)
        vl = c.view(lg) if k > 1 else View()
        out, vo = c.output((vz.rows,))
        _core.check(lib.tally_gmm_log_prob(c.handle, vz, vm, vv, vl, k, vo), c)
    return out


def gmm_sample_consumed(batch, dim):
    """Stream elements a mixture sample of B rows and D dims uses (docs/rng.md)."""
    b4 = (batch + 3) // 4 * 4
    d2 = (dim + 1) // 2 * 2
    return b4 + (batch * d2 + 3) // 4 * 4


def gmm_sample(mu, log_var, logits=None, seed=0, subsequence=0, offset=0, ctx=None, z_out=None):
    rng = _rng(seed, subsequence, offset)
    m, lv, lg, k = _gmm_params(mu, log_var, logits)
    batch, dim = m.shape[0], m.shape[-1]
    zo = _out_operand("z_out", z_out, (batch, dim)) if z_out is not None else None
    with _core.call(ctx, [m, lv, lg, zo]) as c:
        dims = 2 if len(m.shape) == 3 else 1
        vm, vv = c.view(m, dims=dims), c.view(lv, dims=dims)
        vl = c.view(lg) if k > 1 else View()
        if zo is not None:
            z, vz = z_out, _out_view(c, zo)
        else:
            z, vz = c.output((batch, dim))
        log_q, vq = c.output((batch,))
        comp, vc = c.output((batch,), _I32)
        consumed = ctypes.c_uint64(0)
        _core.check(lib.tally_gmm_sample(c.handle, vm, vv, vl, k, rng, vz, vq, vc, ctypes.byref(consumed)), c)
    return GmmSample(z, log_q, comp, int(consumed.value))


def _gmm_grads(c, m, k, need_mu, need_log_var, need_logits):
    """The outputs of a mixture backward: gradients shaped like mu and
    log_var (viewed [B, K*D]) and like the K logits; a gradient not asked for
    is None with an absent view."""
    b = m.shape[0]
    kd = m.shape[-1] * (m.shape[1] if len(m.shape) == 3 else 1)
    gm, vgm = c.output((b, kd)) if need_mu else (None, View())
    gv, vgv = c.output((b, kd)) if need_log_var else (None, View())
    gl, vgl = c.output((k,)) if need_logits and k > 1 else (None, View())
    return (gm, vgm), (gv, vgv), (gl, vgl)


def _reshaped(arr, shape):
    return None if arr is None else arr.reshape(shape)


def gmm_log_prob_backward(z, mu, log_var, logits, grad_log_q, need_z=True, need_mu=True, need_log_var=True,
                          need_logits=True, ctx=None):
    """Gradients of gmm_log_prob with respect to z, mu, log_var and logits,
    as (grad_z, grad_mu, grad_log_var, grad_logits), each shaped like its
    input; a gradient not asked for (or grad_logits with one component) is
    None. grad_log_q: B values. float32 inputs (tally_gmm_log_prob_backward)."""
    f32 = ("float32",)
    zz = _core._operand("z", z, accept=f32)
    m, lv, lg, k = _gmm_params(mu, log_var, logits, accept=f32)
    g = _core._operand("grad_log_q", grad_log_q, accept=f32)
    with _core.call(ctx, [zz, m, lv, lg, g]) as c:
        vz = c.view(zz)
        dims = 2 if len(m.shape) == 3 else 1
        vm, vv = c.view(m, dims=dims), c.view(lv, dims=dims)
        vl = c.view(lg) if k > 1 else View()
        vg = c.view(g)
        gz, vgz = c.output((vz.rows, vz.cols)) if need_z else (None, View())
        (gm, vgm), (gv, vgv), (gl, vgl) = _gmm_grads(c, m, k, need_mu, need_log_var, need_logits)
        _core.check(lib.tally_gmm_log_prob_backward(c.handle, vz, vm, vv, vl, k, vg, vgz, vgm, vgv, vgl), c)
    return (_reshaped(gz, zz.shape), _reshaped(gm, m.shape), _reshaped(gv, lv.shape),
            _reshaped(gl, lg.shape) if lg is not None else None)


def gmm_sample_backward(mu, log_var, logits, seed, subsequence, offset, grad_z=None, grad_log_q=None,
                        need_mu=True, need_log_var=True, need_logits=True, ctx=None):
    """Gradients of gmm_sample's z and log_q with respect to mu, log_var and
    logits, given their upstream gradients (grad_z [B, D], grad_log_q [B];
    None means zero), as (grad_mu, grad_log_var, grad_logits). The noise and
    the components are drawn again from (seed, subsequence, offset), so the
    same rng as the forward's must be passed. float32 inputs
    (tally_gmm_sample_backward)."""
    f32 = ("float32",)
    rng = _rng(seed, subsequence, offset)
    m, lv, lg, k = _gmm_params(mu, log_var, logits, accept=f32)
    gz = _core._operand("grad_z", grad_z, accept=f32) if grad_z is not None else None
    gq = _core._operand("grad_log_q", grad_log_q, accept=f32) if grad_log_q is not None else None
    with _core.call(ctx, [m, lv, lg, gz, gq]) as c:
        dims = 2 if len(m.shape) == 3 else 1
        vm, vv = c.view(m, dims=dims), c.view(lv, dims=dims)
        vl = c.view(lg) if k > 1 else View()
        vgz, vgq = c.view(gz), c.view(gq)
        (gm, vgm), (gv, vgv), (gl, vgl) = _gmm_grads(c, m, k, need_mu, need_log_var, need_logits)
        _core.check(lib.tally_gmm_sample_backward(c.handle, vm, vv, vl, k, rng, vgz, vgq, vgm, vgv, vgl), c)
    return (_reshaped(gm, m.shape), _reshaped(gv, lv.shape), _reshaped(gl, lg.shape) if lg is not None else None)


def check_axis(axis):
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        raise TypeError(f"axis must be None or an int, not {type(axis).__name__}")
    if axis is not None and int(axis) not in (1, -1):
        raise ValueError(f"axis must be None (all elements) or 1 (each row), not {axis}")


def reduce(op, x, axis=None, ctx=None):
    code = REDUCE_OPS[op]
    check_axis(axis)
    a = _core._operand("x", x)
    with _core.call(ctx, [a]) as c:
        va = c.view(a)
        if axis is None:
            out, vo = c.output(())
        else:
            out, vo = c.output((va.rows,))
        _core.check(lib.tally_reduce(c.handle, code, 1 if axis is None else 2, va, vo), c)
    return _scalar(c, out) if axis is None else out


def _shape(shape):
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"shape must be an int or a tuple of ints, not {shape!r}")
    shape = tuple(int(s) for s in shape)
    if len(shape) not in (1, 2) or any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} must have 1 or 2 non-negative dimensions")
    return shape


def random_consumed(count):
    return (count + 3) // 4 * 4


def random(dist, shape, seed=0, subsequence=0, offset=0, ctx=None, out=None):
    d = _choice("dist", dist, DISTRIBUTIONS)
    rng = _rng(seed, subsequence, offset)
    consumed = ctypes.c_uint64(0)
    if out is not None:
        # Uniform and normal draws may be written as halves: each the
        # float32 draw rounded to nearest even, from the same stream elements.
        o = _core._operand("out", out, accept=("uint32",) if d == 1 else _OUT_FLOATS)
        if shape is not None and tuple(_shape(shape)) != tuple(o.shape):
            raise ValueError(f"shape {shape} differs from out's shape {tuple(o.shape)}")
        with _core.call(ctx, [o]) as c:
            vo = _out_view(c, o)
            if d == 1:
                vo.dtype = _U32
            _core.check(lib.tally_rng_fill(c.handle, d, rng, vo, ctypes.byref(consumed)), c)
        return Random(out, int(consumed.value))
    shape = _shape(shape)
    if ctx is None:
        ctx = _core.default_context()
    with _host_call(ctx) as c:
        arr, vo = c.output(shape if len(shape) == 2 else (1, shape[0]), _U32 if d == 1 else _F32)
        _core.check(lib.tally_rng_fill(c.handle, d, rng, vo, ctypes.byref(consumed)), c)
    return Random(arr.reshape(shape), int(consumed.value))


def _host_call(ctx):
    """A call that makes NumPy outputs on ctx with no input array."""
    probe = _core._operand("out", np.empty(0, np.float32))
    return _core.call(ctx, [probe])


def categorical_consumed(rows):
    return (rows + 3) // 4 * 4


def categorical(weights, logits=False, seed=0, subsequence=0, offset=0, ctx=None):
    flags = 1 if _flag("logits", logits) else 0
    rng = _rng(seed, subsequence, offset)
    w = _core._operand("weights", weights)
    consumed = ctypes.c_uint64(0)
    with _core.call(ctx, [w]) as c:
        vw = c.view(w)
        out, vo = c.output((vw.rows,), _I32)
        _core.check(lib.tally_categorical(c.handle, vw, flags, rng, vo, ctypes.byref(consumed)), c)
    return Categorical(out, int(consumed.value))
