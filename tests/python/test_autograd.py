"""Gradients through torch autograd: tally's kl_div and dirichlet_multinomial
(torch.ops.tally.*) have backward passes (tally_kl_div_backward,
tally_dirichlet_multinomial_backward), so loss.backward() works, eagerly and
under torch.compile. References: torch's own float64 autograd of the same
formulas (independent of tally). CPU tensors here; scripts/gpu_python.sh runs
the CUDA ones on the GPU machine. Skipped where torch is absent."""

import math

import numpy as np
import pytest

import tally

torch = pytest.importorskip("torch")
F = torch.nn.functional

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _inputs(device, rows=17, cols=129, seed=0):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(rows, cols, generator=g), -1).to(device)
    t = torch.softmax(torch.randn(rows, cols, generator=g), -1).to(device)
    return p, t


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean", "batchmean"])
@pytest.mark.parametrize("form", ["log_input", "input_is_prob", "log_target"])
def test_kl_div_gradients_match_torch_float64(device, reduction, form):
    p, t = _inputs(device)
    x = (p if form == "input_is_prob" else p.log()).clone().requires_grad_(True)
    y = (t.log() if form == "log_target" else t).clone().requires_grad_(True)
    kw = {"log_target": form == "log_target", "input_is_prob": form == "input_is_prob"}
    out = tally.kl_div(x, y, reduction=reduction, **kw)
    w = torch.linspace(0.5, 1.5, x.numel(), device=device).reshape(x.shape)
    (out * w).sum().backward() if reduction == "none" else out.backward()

    x64 = x.detach().double().requires_grad_(True)
    y64 = y.detach().double().requires_grad_(True)
    logx = x64.log() if form == "input_is_prob" else x64
    ref = F.kl_div(logx, y64, reduction=reduction, log_target=form == "log_target")
    (ref * w.double()).sum().backward() if reduction == "none" else ref.backward()
    for got, want, name in ((x.grad, x64.grad, "input"), (y.grad, y64.grad, "target")):
        assert got.dtype == torch.float32
        scale = want.abs().max().item() + 1e-30
        err = (got.double() - want).abs().max().item()
        assert err <= 1e-5 * scale + 1e-7, f"{name} gradient differs from torch float64 by {err} (scale {scale})"


def test_kl_div_only_the_wanted_gradient():
    p, t = _inputs("cpu")
    x = p.log().requires_grad_(True)
    loss = tally.kl_div(x, t, reduction="batchmean")
    loss.backward()
    assert x.grad is not None and t.grad is None
    want = -(t / t.shape[0])
    assert torch.allclose(x.grad, want, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shared", [True, False])
def test_dirichlet_multinomial_log_alpha_gradient(device, shared):
    g = torch.Generator().manual_seed(3)
    B, V = 40, 23
    counts = torch.floor(5 * torch.rand(B, V, generator=g)).to(device)
    la0 = (torch.randn(V if shared else (B, V), generator=g) * 0.5).to(device)
    la = torch.nn.Parameter(la0.clone())
    loss = -tally.dirichlet_multinomial(counts, la, reduction="mean")
    loss.backward()

    la64 = la0.double().clone().requires_grad_(True)
    a = la64.exp().expand(B, V)
    A, N = a.sum(-1), counts.double().sum(-1)
    rows = torch.lgamma(A) - torch.lgamma(N + A) + (torch.lgamma(counts.double() + a) - torch.lgamma(a)).sum(-1)
    (-rows.mean()).backward()
    err = (la.grad.double() - la64.grad).abs().max().item()
    assert err <= 1e-4 * (la64.grad.abs().max().item() + 1.0), f"log_alpha gradient differs by {err}"


def test_dirichlet_multinomial_counts_gradient_refused():
    counts = torch.ones(3, 4, requires_grad=True)
    la = torch.zeros(4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="counts"):
        tally.dirichlet_multinomial(counts, la, reduction="sum").backward()


def test_training_loop_fits_log_alpha_and_is_deterministic():
    """Gradient descent on log_alpha against counts drawn from a known alpha:
    the loss falls, and two runs give the same bits."""
    g = torch.Generator().manual_seed(11)
    true_alpha = torch.tensor([0.5, 1.0, 2.0, 4.0])
    probs = torch.distributions.Dirichlet(true_alpha).sample((512,))
    counts = torch.stack([torch.bincount(torch.multinomial(p, 20, replacement=True, generator=g),
                                         minlength=4) for p in probs]).float()

    def fit():
        la = torch.nn.Parameter(torch.zeros(4))
        opt = torch.optim.SGD([la], lr=0.5)
        losses = []
        for _ in range(100):
            opt.zero_grad()
            loss = -tally.dirichlet_multinomial(counts, la, reduction="mean")
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return la.detach().clone(), losses

    a1, l1 = fit()
    a2, _ = fit()
    assert l1[-1] < l1[0] - 0.1
    assert torch.equal(a1.view(torch.int32), a2.view(torch.int32))
    # The fitted alpha's ordering follows the true one.
    assert list(torch.argsort(a1)) == [0, 1, 2, 3]


def test_compiled_loss_and_backward_have_no_graph_break():
    """The forward compiled with fullgraph=True (no graph break); its
    backward, which AOTAutograd traces from the registered autograd formula,
    runs tally's backward op and gives the eager bits."""
    p, t = _inputs("cpu")

    def loss_fn(x, y):
        return tally.kl_div(x, y, reduction="batchmean", input_is_prob=True) * 2.0

    compiled = torch.compile(loss_fn, fullgraph=True, backend="aot_eager")
    x = p.clone().requires_grad_(True)
    loss = compiled(x, t)
    loss.backward()
    x_eager = p.clone().requires_grad_(True)
    want = loss_fn(x_eager, t)
    want.backward()
    assert torch.equal(loss.detach().view(torch.int32), want.detach().view(torch.int32))
    assert torch.equal(x.grad.view(torch.int32), x_eager.grad.view(torch.int32))
    assert math.isfinite(loss.item())


def test_numpy_backward_functions_match_torch_path():
    """The array functions (no torch needed) give the same bits as autograd."""
    p, t = _inputs("cpu", rows=5, cols=33, seed=4)
    x = p.log().requires_grad_(True)
    y = t.clone().requires_grad_(True)
    tally.kl_div(x, y, reduction="sum").backward()
    gi, gt = tally.kl_div_backward(p.log().numpy(), t.numpy(), np.float32(1.0), reduction="sum")
    assert np.array_equal(gi.view(np.uint32), x.grad.numpy().view(np.uint32))
    assert np.array_equal(gt.view(np.uint32), y.grad.numpy().view(np.uint32))
