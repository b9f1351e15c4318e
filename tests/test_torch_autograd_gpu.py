"""softmax_lab.torch: gradients against torch's own on random data for every
dtype, and a small model that trains with them.  (gradcheck needs float64,
which softmax_lab does not take: the comparison is with torch in float32.)"""

import numpy as np
import pytest

from softmax_lab.reference import backward_scale

pytestmark = pytest.mark.gpu

DTYPES = ["float32", "float16", "bfloat16"]
ULP = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}  # at 1


def _modules():
    torch = pytest.importorskip("torch")
    import softmax_lab.torch as slt

    return torch, slt


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((7, 1001), -1), ((3, 129, 5), 1), ((132, 70001), -1), ((1, 1), 0)])
def test_gradients_match_torch(op, dtype, shape, dim):
    """Forward and gradient against torch's own in the same dtype (float32 math
    inside, one rounding, as ours): within 2 ulps of the dtype at the largest
    |dx| and at the terms' size (backward_scale), since the two forwards may
    round y differently and a y differing by an ulp moves dx by about an ulp of
    the terms, however far dx cancels below them; plus float32's own error."""
    torch, slt = _modules()
    t = getattr(torch, dtype)
    x = (torch.randn(shape, device="cuda") * 3).to(t).requires_grad_()
    g = torch.randn(shape, device="cuda").to(t)
    y = getattr(slt, op)(x, dim)
    assert y.dtype == t and y.requires_grad
    y.backward(g)
    x2 = x.detach().clone().requires_grad_()
    y2 = getattr(torch, op)(x2, dim=dim)
    y2.backward(g)
    assert x.grad.dtype == t and x.grad.shape == x.shape
    tol = 2 * ULP[dtype]
    y_scale = 1.0 if op == "softmax" else float(y2.detach().float().abs().max()) + 1
    assert float((y.detach().float() - y2.detach().float()).abs().max()) <= tol * y_scale + 1e-6
    terms = float(backward_scale(g.double().cpu().numpy(), y2.detach().double().cpu().numpy(), op + "_backward",
                                 dim).max())
    want_dx = x2.grad.float()
    bound = tol * (float(want_dx.abs().max()) + terms) + 2e-6 * terms
    assert float((x.grad.float() - want_dx).abs().max()) <= bound


def test_uses_torchs_current_stream():
    torch, slt = _modules()
    s = torch.cuda.Stream()
    x = torch.randn(64, 50000, device="cuda", requires_grad=True)
    s.wait_stream(torch.cuda.current_stream())  # x is made on the default stream: s must not read it before
    with torch.cuda.stream(s):
        loss = slt.log_softmax(x * 2.0, -1)[:, 0].sum()  # produced and consumed on s
        loss.backward()
    s.synchronize()
    want = torch.autograd.grad(torch.log_softmax(x * 2.0, -1)[:, 0].sum(), x)[0]
    assert float((x.grad - want).abs().max()) < 1e-5


def test_import_brings_torch_in_only_with_softmax_lab_torch():
    import subprocess
    import sys

    code = ("import sys, softmax_lab; assert 'torch' not in sys.modules; "
            "import softmax_lab.torch; assert 'torch' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_small_model_trains(dtype):
    """A linear classifier on separable data, cross entropy through
    softmax_lab.torch.log_softmax, and an attention-like softmax layer: the loss falls."""
    torch, slt = _modules()
    torch.manual_seed(0)
    t = getattr(torch, dtype)
    classes, features, n = 10, 64, 512
    centers = torch.randn(classes, features, device="cuda") * 3
    labels = torch.randint(0, classes, (n,), device="cuda")
    data = (centers[labels] + torch.randn(n, features, device="cuda")).to(t)
    w1 = (torch.randn(features, features, device="cuda") * 0.1).to(t).requires_grad_()
    w2 = (torch.randn(features, classes, device="cuda") * 0.1).to(t).requires_grad_()
    opt = torch.optim.Adam([w1, w2], lr=0.02)
    losses = []
    for _ in range(100):
        opt.zero_grad()
        h = data * slt.softmax(data @ w1, -1) * features  # a gate through softmax
        loss = -slt.log_softmax(h @ w2, -1).gather(1, labels[:, None]).float().mean()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0], losses[::10]
