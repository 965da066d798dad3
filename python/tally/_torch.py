"""tally's ops as torch.library custom ops (torch.ops.tally.*), with fake
(meta) implementations so that torch.compile traces them as single ops with
no graph break. Imported by tally/__init__.py when torch is installed.

Each op's real implementation is the array code in _ops.py: CUDA tensors run
zero-copy on a context for their device and the current stream (the stream
inductor's generated code runs on too), CPU tensors like NumPy arrays.
Random ops take seed, subsequence and offset as int64 in their schema (torch
has no uint64 scalar); values of 2^63 and above are passed as their two's
complement and read back as unsigned.
"""

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _ops

__all__ = ["Tensor", "ops", "gmm_sample", "random", "categorical"]

_U64 = 1 << 64


def _to_i64(name, v):
    v = _ops._u64(name, v)
    return v - _U64 if v >= 1 << 63 else v


def _from_i64(v):
    return v % _U64


def _rows(x):
    return 1 if x.dim() == 1 else x.shape[0]


@torch.library.custom_op("tally::kl_div", mutates_args=())
def _kl_div(input: Tensor, target: Tensor, reduction: str, log_target: bool,
            input_is_prob: bool, input_logits: bool = False, target_logits: bool = False) -> Tensor:
    return _ops.kl_div(input, target, reduction, log_target, input_is_prob, None, input_logits, target_logits)


@_kl_div.register_fake
def _(input, target, reduction, log_target, input_is_prob, input_logits=False, target_logits=False):
    return input.new_empty(input.shape if reduction == "none" else ())


# ---- Gradients (tally_kl_div_backward, tally_dirichlet_multinomial_backward)
# The backward passes are custom ops of their own, so that torch.compile's
# backward graph calls them as single ops too; torch.library.register_autograd
# wires them under the forward ops. Half inputs are widened to float32 for the
# backward (tally's gradients read float32) and the gradients cast back to the
# input's dtype, as torch's own gradients have their input's dtype.

@torch.library.custom_op("tally::kl_div_backward", mutates_args=())
def _kl_div_backward(input: Tensor, target: Tensor, grad: Tensor, reduction: str, log_target: bool,
                     input_is_prob: bool, need_input: bool, need_target: bool) -> Tuple[Tensor, Tensor]:
    gi, gt = _ops.kl_div_backward(input, target, grad, reduction, log_target, input_is_prob,
                                  need_input, need_target)
    empty = input.new_empty((0,))
    return (gi if gi is not None else empty), (gt if gt is not None else empty)


@_kl_div_backward.register_fake
def _(input, target, grad, reduction, log_target, input_is_prob, need_input, need_target):
    return (input.new_empty(input.shape if need_input else (0,)),
            input.new_empty(input.shape if need_target else (0,)))


def _kl_setup(ctx, inputs, output):
    input, target, reduction, log_target, input_is_prob = inputs[:5]
    logits = tuple(inputs[5:7]) + (False,) * (7 - len(inputs))
    ctx.save_for_backward(input, target)
    ctx.opts = (reduction, log_target, input_is_prob) + logits


def _kl_grad(ctx, grad):
    input, target = ctx.saved_tensors
    reduction, log_target, input_is_prob, input_logits, target_logits = ctx.opts
    need_i, need_t = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    if input_logits or target_logits:
        # tally_kl_div_backward refuses the logits flags (docs/ops.md).
        raise RuntimeError("tally.kl_div: input_logits and target_logits have no gradient yet; "
                           "differentiate kl_div of torch.log_softmax / torch.softmax instead")
    gi, gt = _kl_div_backward(input.float(), target.float(), grad.float().contiguous(), reduction, log_target,
                              input_is_prob, need_i, need_t)
    # One gradient per input the forward got (torch passes the logits flags
    # only when they differ from their defaults in some versions).
    return (gi.to(input.dtype) if need_i else None, gt.to(target.dtype) if need_t else None) + \
        (None,) * (len(ctx.needs_input_grad) - 2)


@torch.library.custom_op("tally::dirichlet_multinomial_backward", mutates_args=())
def _dm_backward(counts: Tensor, log_alpha: Tensor, grad: Tensor, reduction: str,
                 with_coefficient: bool) -> Tensor:
    return _ops.dirichlet_multinomial_backward(counts, log_alpha, grad, reduction, with_coefficient)


@_dm_backward.register_fake
def _(counts, log_alpha, grad, reduction, with_coefficient):
    return log_alpha.new_empty(log_alpha.shape)


def _dm_setup(ctx, inputs, output):
    counts, log_alpha, reduction, with_coefficient = inputs
    ctx.save_for_backward(counts, log_alpha)
    ctx.opts = (reduction, with_coefficient)


def _dm_grad(ctx, grad):
    counts, log_alpha = ctx.saved_tensors
    if ctx.needs_input_grad[0]:
        raise NotImplementedError("tally.dirichlet_multinomial has no gradient with respect to counts "
                                  "(only log_alpha); detach the counts")
    reduction, with_coefficient = ctx.opts
    g = _dm_backward(counts.float(), log_alpha.float(), grad.float().contiguous(), reduction, with_coefficient)
    return None, g.to(log_alpha.dtype), None, None


@torch.library.custom_op("tally::dirichlet_multinomial", mutates_args=())
def _dm(counts: Tensor, log_alpha: Tensor, reduction: str, with_coefficient: bool) -> Tensor:
    return _ops.dirichlet_multinomial(counts, log_alpha, reduction, with_coefficient)


@_dm.register_fake
def _(counts, log_alpha, reduction, with_coefficient):
    return counts.new_empty((_rows(counts),) if reduction == "none" else ())


@torch.library.custom_op("tally::gmm_log_prob", mutates_args=())
def _gmm_log_prob(z: Tensor, mu: Tensor, log_var: Tensor, logits: Optional[Tensor]) -> Tensor:
    return _ops.gmm_log_prob(z, mu, log_var, logits)


@_gmm_log_prob.register_fake
def _(z, mu, log_var, logits):
    return z.new_empty((_rows(z),))


@torch.library.custom_op("tally::gmm_sample", mutates_args=())
def _gmm_sample(mu: Tensor, log_var: Tensor, logits: Optional[Tensor], seed: int, subsequence: int,
                offset: int) -> Tuple[Tensor, Tensor, Tensor]:
    r = _ops.gmm_sample(mu, log_var, logits, _from_i64(seed), _from_i64(subsequence), _from_i64(offset))
    return r.z, r.log_q, r.component


@_gmm_sample.register_fake
def _(mu, log_var, logits, seed, subsequence, offset):
    b, d = mu.shape[0], mu.shape[-1]
    return mu.new_empty((b, d)), mu.new_empty((b,)), mu.new_empty((b,), dtype=torch.int32)


@torch.library.custom_op("tally::reduce", mutates_args=())
def _reduce(x: Tensor, op: str, axis: Optional[int]) -> Tensor:
    return _ops.reduce(op, x, axis)


@_reduce.register_fake
def _(x, op, axis):
    return x.new_empty(() if axis is None else (_rows(x),))


@torch.library.custom_op("tally::categorical", mutates_args=())
def _categorical(weights: Tensor, logits: bool, seed: int, subsequence: int, offset: int) -> Tensor:
    return _ops.categorical(weights, logits, _from_i64(seed), _from_i64(subsequence), _from_i64(offset)).index


@_categorical.register_fake
def _(weights, logits, seed, subsequence, offset):
    return weights.new_empty((_rows(weights),), dtype=torch.int32)


@torch.library.custom_op("tally::random", mutates_args=())
def _random(dist: str, shape: list[int], seed: int, subsequence: int, offset: int,
            device: torch.device) -> Tensor:
    dtype = torch.uint32 if dist == "raw" else torch.float32
    rng = (_from_i64(seed), _from_i64(subsequence), _from_i64(offset))
    if device.type == "cpu":
        values = _ops.random(dist, tuple(shape), *rng).values
        return torch.from_numpy(values)
    out = torch.empty(shape, dtype=dtype, device=device)
    _ops.random(dist, tuple(shape), *rng, out=out)
    return out


@_random.register_fake
def _(dist, shape, seed, subsequence, offset, device):
    return torch.empty(shape, dtype=torch.uint32 if dist == "raw" else torch.float32, device=device)


# ---- Mixture gradients (tally_gmm_log_prob_backward, tally_gmm_sample_backward)
# The sample's backward draws the noise and the components again from the
# forward's (seed, subsequence, offset), so autograd saves only the
# parameters. A gradient torch does not need is not computed (its output is
# an empty tensor); a K = 1 mixture has no logits and no logits gradient.

def _empty_or(t, shape, need):
    return t.new_empty(shape if need else (0,))


@torch.library.custom_op("tally::gmm_log_prob_backward", mutates_args=())
def _gmm_log_prob_backward(z: Tensor, mu: Tensor, log_var: Tensor, logits: Optional[Tensor], grad: Tensor,
                           needs: list[bool]) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    got = _ops.gmm_log_prob_backward(z, mu, log_var, logits, grad, *needs)
    # A fresh empty tensor per absent gradient: outputs may not alias.
    return tuple(g if g is not None else z.new_empty((0,)) for g in got)


@_gmm_log_prob_backward.register_fake
def _(z, mu, log_var, logits, grad, needs):
    shapes = (z.shape, mu.shape, log_var.shape, logits.shape if logits is not None else (0,))
    return tuple(_empty_or(z, s, n and (i < 3 or logits is not None)) for i, (s, n) in enumerate(zip(shapes, needs)))


@torch.library.custom_op("tally::gmm_sample_backward", mutates_args=())
def _gmm_sample_backward(mu: Tensor, log_var: Tensor, logits: Optional[Tensor], seed: int, subsequence: int,
                         offset: int, grad_z: Tensor, grad_log_q: Tensor,
                         needs: list[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    rng = (_from_i64(seed), _from_i64(subsequence), _from_i64(offset))
    got = _ops.gmm_sample_backward(mu, log_var, logits, *rng, grad_z, grad_log_q, *needs)
    return tuple(g if g is not None else mu.new_empty((0,)) for g in got)


@_gmm_sample_backward.register_fake
def _(mu, log_var, logits, seed, subsequence, offset, grad_z, grad_log_q, needs):
    shapes = (mu.shape, log_var.shape, logits.shape if logits is not None else (0,))
    return tuple(_empty_or(mu, s, n and (i < 2 or logits is not None)) for i, (s, n) in enumerate(zip(shapes, needs)))


def _f32(t):
    return None if t is None else t.float().contiguous()


def _cast_back(grads, like, needs):
    return tuple(g.to(t.dtype) if need and t is not None and g.numel() else None
                 for g, t, need in zip(grads, like, needs))


def _gmm_log_prob_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _gmm_log_prob_grad(ctx, grad):
    z, mu, log_var, logits = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:4]]
    grads = _gmm_log_prob_backward(_f32(z), _f32(mu), _f32(log_var), _f32(logits), _f32(grad), needs)
    return _cast_back(grads, (z, mu, log_var, logits), needs)


def _gmm_sample_setup(ctx, inputs, output):
    mu, log_var, logits, seed, subsequence, offset = inputs
    ctx.save_for_backward(mu, log_var, logits)
    ctx.rng = (seed, subsequence, offset)


def _gmm_sample_grad(ctx, grad_z, grad_log_q, grad_component):
    mu, log_var, logits = ctx.saved_tensors
    needs = [bool(n) for n in ctx.needs_input_grad[:3]]
    grads = _gmm_sample_backward(_f32(mu), _f32(log_var), _f32(logits), *ctx.rng, _f32(grad_z),
                                 _f32(grad_log_q), needs)
    return _cast_back(grads, (mu, log_var, logits), needs) + (None, None, None)


torch.library.register_autograd("tally::kl_div", _kl_grad, setup_context=_kl_setup)
torch.library.register_autograd("tally::dirichlet_multinomial", _dm_grad, setup_context=_dm_setup)
torch.library.register_autograd("tally::gmm_log_prob", _gmm_log_prob_grad, setup_context=_gmm_log_prob_setup)
torch.library.register_autograd("tally::gmm_sample", _gmm_sample_grad, setup_context=_gmm_sample_setup)


class _Ops:
    """The custom ops by short name, for tally/__init__.py."""
    kl_div = staticmethod(_kl_div)
    dirichlet_multinomial = staticmethod(_dm)
    gmm_log_prob = staticmethod(_gmm_log_prob)
    reduce = staticmethod(_reduce)


ops = _Ops


def gmm_sample(mu, log_var, logits, seed, subsequence, offset):
    s = (_to_i64("seed", seed), _to_i64("subsequence", subsequence), _to_i64("offset", offset))
    z, log_q, comp = _gmm_sample(mu, log_var, logits, *s)
    return _ops.GmmSample(z, log_q, comp, _ops.gmm_sample_consumed(mu.shape[0], mu.shape[-1]))


def categorical(weights, logits, seed, subsequence, offset):
    _ops._flag("logits", logits)
    s = (_to_i64("seed", seed), _to_i64("subsequence", subsequence), _to_i64("offset", offset))
    index = _categorical(weights, logits, *s)
    return _ops.Categorical(index, _ops.categorical_consumed(_rows(weights)))


def random(dist, shape, seed, subsequence, offset, device):
    _ops._choice("dist", dist, _ops.DISTRIBUTIONS)
    shape = _ops._shape(shape)
    s = (_to_i64("seed", seed), _to_i64("subsequence", subsequence), _to_i64("offset", offset))
    values = _random(dist, list(shape), *s, torch.device(device))
    n = 1
    for d in shape:
        n *= d
    return _ops.Random(values, _ops.random_consumed(n))
