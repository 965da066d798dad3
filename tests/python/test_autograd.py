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


# ---- The mixture: gmm_log_prob and the reparameterised gmm_sample ----------

def _mixture(device, B=19, K=3, D=5, seed=5):
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(B, K, D, generator=g).to(device)
    log_var = (0.4 * torch.randn(B, K, D, generator=g)).to(device)
    logits = torch.randn(K, generator=g).to(device)
    z = torch.randn(B, D, generator=g).to(device)
    return z, mu, log_var, logits


def _log_q64(z, mu, log_var, logits):
    """The mixture's log density in float64, written from its definition."""
    log_w = logits - torch.logsumexp(logits, 0)
    per_dim = -0.5 * (math.log(2 * math.pi) + log_var + (z[:, None, :] - mu) ** 2 * torch.exp(-log_var))
    return torch.logsumexp(log_w + per_dim.sum(-1), -1)


def _close(got, want, name, rel=1e-4):
    assert got is not None, f"{name}: no gradient"
    assert got.dtype == torch.float32 and got.shape == want.shape, name
    err = (got.double() - want).abs().max().item()
    scale = want.abs().max().item() + 1e-30
    assert err <= rel * scale + 1e-6, f"{name} gradient differs from torch float64 by {err} (scale {scale})"


@pytest.mark.parametrize("device", DEVICES)
def test_gmm_log_prob_gradients_match_torch_float64(device):
    params = [t.clone().requires_grad_(True) for t in _mixture(device)]
    w = torch.linspace(-1.0, 2.0, params[0].shape[0], device=device)
    (tally.gmm_log_prob(*params) * w).sum().backward()
    ref = [t.detach().double().requires_grad_(True) for t in params]
    (_log_q64(*ref) * w.double()).sum().backward()
    for got, want, name in zip(params, ref, ("z", "mu", "log_var", "logits")):
        _close(got.grad, want.grad, name)


@pytest.mark.parametrize("device", DEVICES)
def test_gmm_sample_gradients_through_the_reparameterisation(device):
    """The sample's z and log_q differentiated into mu, log_var and logits.
    The reference redraws nothing: it takes the forward's components and its
    noise eps = (z - mu_c) / exp(log_var_c / 2) as constants, as the
    reparameterisation does, and differentiates z = mu_c + exp(log_var_c / 2)
    eps and log_q(z) in float64."""
    _, mu0, lv0, logits0 = _mixture(device)
    mu, lv, logits = (t.clone().requires_grad_(True) for t in (mu0, lv0, logits0))
    s = tally.gmm_sample(mu, lv, logits, seed=9, subsequence=2, offset=40)
    wz = torch.linspace(0.5, 1.5, s.z.numel(), device=device).reshape(s.z.shape)
    wq = torch.linspace(-1.0, 1.0, s.log_q.numel(), device=device)
    ((s.z * wz).sum() + (s.log_q * wq).sum()).backward()

    rows = torch.arange(mu0.shape[0], device=device)
    comp = s.component.long()
    mu64, lv64, lg64 = (t.detach().double().requires_grad_(True) for t in (mu0, lv0, logits0))
    mu_c, lv_c = mu64[rows, comp], lv64[rows, comp]
    eps = ((s.z.detach().double() - mu_c) / torch.exp(0.5 * lv_c)).detach()
    z64 = mu_c + torch.exp(0.5 * lv_c) * eps
    ((z64 * wz.double()).sum() + (_log_q64(z64, mu64, lv64, lg64) * wq.double()).sum()).backward()
    for got, want, name in ((mu.grad, mu64.grad, "mu"), (lv.grad, lv64.grad, "log_var"),
                            (logits.grad, lg64.grad, "logits")):
        _close(got, want, name)


def test_gmm_only_the_wanted_gradients():
    z, mu, lv, logits = _mixture("cpu")
    mu = mu.clone().requires_grad_(True)
    tally.gmm_log_prob(z, mu, lv, logits).sum().backward()
    assert mu.grad is not None and z.grad is None and lv.grad is None and logits.grad is None
    one = torch.zeros(4, 1, 3, requires_grad=True)
    s = tally.gmm_sample(one, torch.zeros(4, 1, 3), None, seed=1)
    s.z.sum().backward()
    assert torch.equal(one.grad, torch.ones(4, 1, 3))  # dz/dmu is 1 with one component


def test_gmm_compiled_backward_matches_eager():
    _, mu0, lv0, logits0 = _mixture("cpu")

    def objective(mu, lv, logits):
        s = tally.gmm_sample(mu, lv, logits, seed=3)
        return (s.z ** 2).sum() - s.log_q.sum()

    compiled = torch.compile(objective, fullgraph=True, backend="aot_eager")
    got = [t.clone().requires_grad_(True) for t in (mu0, lv0, logits0)]
    want = [t.clone().requires_grad_(True) for t in (mu0, lv0, logits0)]
    compiled(*got).backward()
    objective(*want).backward()
    for a, b in zip(got, want):
        assert torch.equal(a.grad.view(torch.int32), b.grad.view(torch.int32))


def test_mixture_training_loop_is_deterministic():
    """A VAE-style objective, 100 SGD steps on mu, log_var and logits: the
    objective falls and two runs give the same bits."""
    _, mu0, lv0, logits0 = _mixture("cpu", B=32, K=4, D=3)
    target = torch.linspace(-1.0, 1.0, 3)

    def fit():
        params = [torch.nn.Parameter(t.clone()) for t in (mu0, lv0, logits0)]
        opt = torch.optim.SGD(params, lr=0.01)
        losses = []
        for step in range(100):
            opt.zero_grad()
            s = tally.gmm_sample(*params, seed=7, offset=step * 1024)
            loss = ((s.z - target) ** 2).sum(-1).mean() + 0.1 * s.log_q.mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return [p.detach().clone() for p in params], losses

    p1, l1 = fit()
    p2, _ = fit()
    assert sum(l1[-10:]) < sum(l1[:10]) - 0.1
    for a, b in zip(p1, p2):
        assert torch.equal(a.view(torch.int32), b.view(torch.int32))
