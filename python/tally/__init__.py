"""tally: portable fused reductions and Philox sampling, bit-identical on CUDA,
OpenCL and the host, for NumPy arrays and PyTorch / CuPy tensors.

    >>> import numpy as np, tally
    >>> p = np.full((2, 3), 1 / 3, np.float32)
    >>> print(tally.kl_div(np.log(p), p, reduction="batchmean"))
    0.0

Every function takes ``ctx=`` (a tally.Context; default: the process's
default context for host arrays, and for CUDA arrays a context on their
device and the caller's current stream). NumPy in gives NumPy out; torch in
gives torch out on the same device. See docs/python.md.
"""

import importlib.util as _importlib_util
import os as _os

from ._lib import library_path as _library_path, lib as _clib
from ._core import TallyError, Context, Device, default_context, devices
from . import _ops
from ._ops import GmmSample, Random, Categorical

__version__ = _clib.tally_version_string().decode()
library_path = _library_path

__all__ = [
    "TallyError", "Context", "Device", "default_context", "devices", "kl_div",
    "dirichlet_multinomial", "gmm_log_prob", "gmm_sample", "sum", "mean", "min", "max",
    "logsumexp", "sumsq", "random", "categorical", "GmmSample", "Random", "Categorical",
    "kl_div_backward", "dirichlet_multinomial_backward", "gmm_log_prob_backward", "gmm_sample_backward",
    "__version__",
]

# torch is used when present and never required: with it, the ops are also
# torch.library custom ops (torch.ops.tally.*) and the functions below route
# torch tensors through them, so torch.compile sees one op, not Python code.
# TALLY_NO_TORCH=1 skips importing torch (it takes a second or two).
_TorchTensor = None
_tops = None
if _os.environ.get("TALLY_NO_TORCH", "") not in ("1", "true", "yes") and \
        _importlib_util.find_spec("torch") is not None:
    try:
        from . import _torch as _torch_ops
        _TorchTensor = _torch_ops.Tensor
        _tops = _torch_ops.ops
    except Exception:  # a broken torch install must not break NumPy users
        _TorchTensor = None
        _tops = None


def _via_torch(ctx, *arrays):
    """True when the call goes through torch.ops.tally: torch is there, no
    explicit context, and every array argument is a tensor (None allowed for
    optional ones). Anything else takes the direct path, which reports mixed
    kinds clearly."""
    if _TorchTensor is None or ctx is not None or not isinstance(arrays[0], _TorchTensor):
        return False
    return all(a is None or isinstance(a, _TorchTensor) for a in arrays)


def kl_div(input, target, reduction="mean", log_target=False, input_is_prob=False, *, input_logits=False,
           target_logits=False, ctx=None, out=None):
    """KL divergence with torch.nn.functional.kl_div's semantics.

    input holds log q (or q with input_is_prob=True), target p (or log p with
    log_target=True). reduction: "none" (the input's shape), "sum", "mean"
    (over all elements) or "batchmean" (over rows). 1-D or 2-D float32 arrays.
    From logits: input_logits=True takes each row's log_softmax of input,
    target_logits=True each row's softmax of target, inside the op, so
    kl_div(x, y, input_logits=True, target_logits=True) is
    F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1)). input_logits excludes
    input_is_prob and target_logits log_target (TallyError); the logits
    forms have no gradient yet.

    out= (reduction="none" only) writes the loss in place into an existing
    array of the input's shape: float32, or bfloat16 / float16 (torch,
    NumPy, ml_dtypes), each value then the float32 loss rounded to nearest
    even. An out= call is not differentiable (as torch's out= ops).
    """
    if out is not None:
        return _ops.kl_div(input, target, reduction, log_target, input_is_prob, ctx, input_logits, target_logits,
                           out)
    if _via_torch(ctx, input, target):
        _ops._choice("reduction", reduction, _ops.REDUCTIONS)
        _ops._flag("log_target", log_target), _ops._flag("input_is_prob", input_is_prob)
        _ops._flag("input_logits", input_logits), _ops._flag("target_logits", target_logits)
        return _tops.kl_div(input, target, reduction, log_target, input_is_prob, input_logits, target_logits)
    return _ops.kl_div(input, target, reduction, log_target, input_is_prob, ctx, input_logits, target_logits)


def dirichlet_multinomial(counts, log_alpha, reduction="none", with_coefficient=False, *, ctx=None):
    """Dirichlet-multinomial log-likelihood of each row of counts [B, V] under
    alpha = exp(log_alpha), log_alpha [V] (shared) or [B, V] (per row).
    reduction "none" gives B values; "sum" and "mean" one. with_coefficient
    adds the multinomial coefficient lgamma(N+1) - sum lgamma(n+1)."""
    if _via_torch(ctx, counts, log_alpha):
        _ops._choice("reduction", reduction, _ops.REDUCTIONS, ["none", "sum", "mean"])
        _ops._flag("with_coefficient", with_coefficient)
        return _tops.dirichlet_multinomial(counts, log_alpha, reduction, with_coefficient)
    return _ops.dirichlet_multinomial(counts, log_alpha, reduction, with_coefficient, ctx)


def kl_div_backward(input, target, grad_out, reduction="mean", log_target=False, input_is_prob=False, *,
                    need_input=True, need_target=True, ctx=None):
    """Gradients of kl_div(input, target, ...) given the loss's gradient
    grad_out (a scalar, or the input's shape for reduction="none"), as
    (grad_input, grad_target); either is None when not asked for. float32
    arrays of any kind (torch users get these through loss.backward())."""
    return _ops.kl_div_backward(input, target, grad_out, reduction, log_target, input_is_prob, need_input,
                                need_target, ctx)


def dirichlet_multinomial_backward(counts, log_alpha, grad_out, reduction="none", with_coefficient=False, *,
                                   ctx=None):
    """Gradient of dirichlet_multinomial with respect to log_alpha (its shape),
    given grad_out (B values for reduction="none", else a scalar)."""
    return _ops.dirichlet_multinomial_backward(counts, log_alpha, grad_out, reduction, with_coefficient, ctx)


def gmm_log_prob_backward(z, mu, log_var, logits, grad_log_q, *, need_z=True, need_mu=True, need_log_var=True,
                          need_logits=True, ctx=None):
    """Gradients of gmm_log_prob(z, mu, log_var, logits) given grad_log_q
    (B values), as (grad_z, grad_mu, grad_log_var, grad_logits), each shaped
    like its input; None where not asked for (and grad_logits when K = 1)."""
    return _ops.gmm_log_prob_backward(z, mu, log_var, logits, grad_log_q, need_z, need_mu, need_log_var,
                                      need_logits, ctx)


def gmm_sample_backward(mu, log_var, logits, seed, subsequence, offset, grad_z=None, grad_log_q=None, *,
                        need_mu=True, need_log_var=True, need_logits=True, ctx=None):
    """Gradients of gmm_sample(mu, log_var, logits, seed, subsequence, offset)'s
    z and log_q through the reparameterisation, given their upstream
    gradients (None means zero), as (grad_mu, grad_log_var, grad_logits). The
    noise is drawn again from the same rng, so pass the forward's."""
    return _ops.gmm_sample_backward(mu, log_var, logits, seed, subsequence, offset, grad_z, grad_log_q,
                                    need_mu, need_log_var, need_logits, ctx)


def gmm_log_prob(z, mu, log_var, logits=None, *, ctx=None):
    """Log density of z [B, D] under the diagonal Gaussian mixture with means
    mu and log-variances log_var, both [B, K, D] (or [B, D] for one
    component), and component logits [K] (None allowed when K = 1). B values."""
    if _via_torch(ctx, z, mu, log_var, logits):
        return _tops.gmm_log_prob(z, mu, log_var, logits)
    return _ops.gmm_log_prob(z, mu, log_var, logits, ctx)


def gmm_sample(mu, log_var, logits=None, seed=0, subsequence=0, offset=0, *, ctx=None, z_out=None):
    """Reparameterised sample of the mixture fused with its log density.
    Returns GmmSample(z [B, D], log_q [B], component [B] int32, consumed):
    consumed is the Philox stream elements used; add it to offset for the
    next draw (docs/rng.md). z_out= writes z in place into an existing
    [B, D] array, float32 or bfloat16 / float16 (each value the float32 z
    rounded to nearest even; log_q is of the float32 z), and returns it as
    z; such a call is not differentiable."""
    if z_out is not None:
        return _ops.gmm_sample(mu, log_var, logits, seed, subsequence, offset, ctx, z_out)
    if _via_torch(ctx, mu, log_var, logits):
        return _torch_ops.gmm_sample(mu, log_var, logits, seed, subsequence, offset)
    return _ops.gmm_sample(mu, log_var, logits, seed, subsequence, offset, ctx)


def _reduction(name, doc):
    def fn(x, axis=None, *, ctx=None):
        if _via_torch(ctx, x):
            _ops.check_axis(axis)
            return _tops.reduce(x, name, None if axis is None else 1)
        return _ops.reduce(name, x, axis, ctx)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{doc} of a 1-D or 2-D float32 array: axis=None gives one value, axis=1 one per "
                  f"row (a 1-D array is one row). The order of every operation is fixed by tally's "
                  f"planner, so the bits are the same on every backend.")
    return fn


sum = _reduction("sum", "Sum")
mean = _reduction("mean", "Mean")
min = _reduction("min", "Minimum (NaN propagates)")
max = _reduction("max", "Maximum (NaN propagates)")
logsumexp = _reduction("logsumexp", "log(sum(exp(x)))")
sumsq = _reduction("sumsq", "Sum of squares")


def random(dist, shape, seed=0, subsequence=0, offset=0, *, ctx=None, out=None, device=None):
    """Philox4x32-10 draws: dist "raw" (uint32), "uniform" ((0, 1], float32) or
    "normal" (float32), stream elements offset, offset + 1, ... in row-major
    order. Returns Random(values, consumed). Values are a NumPy array, or a
    torch tensor when device= names a torch device ("cuda:0", "cpu"); out=
    fills an existing array in place (shape may then be None): uint32 for
    raw draws; float32, or bfloat16 / float16 for uniform and normal ones,
    each value then the float32 draw rounded to nearest even."""
    if device is not None:
        if _TorchTensor is None:
            raise TypeError("device= makes a torch tensor, and torch is not available")
        if out is not None or ctx is not None:
            raise ValueError("device= cannot be combined with out= or ctx=")
        return _torch_ops.random(dist, shape, seed, subsequence, offset, device)
    return _ops.random(dist, shape, seed, subsequence, offset, ctx, out)


def categorical(weights, logits=False, seed=0, subsequence=0, offset=0, *, ctx=None):
    """One index per row of weights [R, C] (non-negative, or logits with
    logits=True); row r uses uniform(offset + r). A row that cannot be sampled
    gives -1. Returns Categorical(index [R] int32, consumed)."""
    if _via_torch(ctx, weights):
        return _torch_ops.categorical(weights, logits, seed, subsequence, offset)
    return _ops.categorical(weights, logits, seed, subsequence, offset, ctx)
