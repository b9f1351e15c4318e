"""softmax_lab.torch's custom ops: torch.library.opcheck on every op, a fullgraph
torch.compile of forward and backward, a CUDA graph of the compiled step, torch.export,
autocast as torch's own softmax, out=, and a legacy DLPack capsule as input.
Skipped without a GPU (conftest.py) or without torch."""

import pytest

import softmax_lab

torch = pytest.importorskip("torch")
import softmax_lab.torch as slt

pytestmark = pytest.mark.gpu

DTYPES = ["float32", "float16", "bfloat16"]


def _ops(torch):
    ops = torch.ops.softmax_lab
    return {"forward": (ops.softmax.default, ops.log_softmax.default),
            "forward_out": (ops.softmax_out.default, ops.log_softmax_out.default),
            "backward": (ops.softmax_backward.default, ops.log_softmax_backward.default),
            "backward_out": (ops.softmax_backward_out.default, ops.log_softmax_backward_out.default)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, dim", [((7, 1001), -1), ((3, 129, 5), 1), ((64, 70001), 1), ((1, 1), 0)])
def test_opcheck(dtype, shape, dim):
    """Schema, fake implementation (shapes, dtypes, strides), autograd registration and
    AOT dispatch, on every op."""
    t = getattr(torch, dtype)
    ops = _ops(torch)
    x = (torch.randn(shape, device="cuda") * 3).to(t)
    dy = torch.randn(shape, device="cuda").to(t)
    for op in ops["forward"]:
        torch.library.opcheck(op, (x.clone().requires_grad_(), dim))
        torch.library.opcheck(op, (x, dim))
    for forward, op in zip(ops["forward"], ops["backward"]):
        y = forward(x, dim)
        torch.library.opcheck(op, (dy, y, dim))
    for op in ops["forward_out"]:
        torch.library.opcheck(op, (x, dim, torch.empty_like(x)))
    for forward, op in zip(ops["forward"], ops["backward_out"]):
        torch.library.opcheck(op, (dy, forward(x, dim), dim, torch.empty_like(x)))


def test_results_match_the_library_and_torch():
    x = torch.randn(33, 5003, device="cuda")
    for op in ("softmax", "log_softmax"):
        y = getattr(slt, op)(x)
        assert torch.equal(y, getattr(softmax_lab, op)(x))
        torch.testing.assert_close(y, getattr(torch, op)(x, -1), rtol=2e-6, atol=1e-7)
        out = torch.full_like(x, float("nan"))
        assert getattr(slt, op)(x, out=out) is out and torch.equal(out, y)


class _Gate(torch.nn.Module):
    """A gate through softmax and a loss through log_softmax, as in a small classifier."""

    def __init__(self, features=257, classes=1001):
        super().__init__()
        self.gate = torch.nn.Linear(features, features)
        self.head = torch.nn.Linear(features, classes)

    def forward(self, x, labels):
        h = x * slt.softmax(self.gate(x), -1)
        return -slt.log_softmax(self.head(h), -1).gather(1, labels[:, None]).mean()


def _gradients(model, x, labels):
    loss = model(x, labels)
    return loss, torch.autograd.grad(loss, list(model.parameters()))


def _assert_close(loss, grads, want_loss, want_grads):
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def _data(seed, rows=64):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(rows, 257, device="cuda", generator=g),
            torch.randint(0, 1001, (rows,), device="cuda", generator=g))


def test_fullgraph_compile_forward_and_backward():
    """No graph break: fullgraph=True compiles the forward (and AOTAutograd its backward,
    through softmax_lab's backward ops); loss and gradients as eager's."""
    torch.manual_seed(0)
    model = _Gate().cuda()
    x, labels = _data(0)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    loss = compiled(x, labels)
    loss.backward()
    want_loss, want_grads = _gradients(model, x, labels)
    _assert_close(loss, [p.grad for p in model.parameters()], want_loss, want_grads)
    explained = torch._dynamo.explain(model)(x, labels)
    assert explained.graph_break_count == 0, explained.break_reasons


def test_cuda_graph_of_the_compiled_step():
    """The compiled forward and its backward captured in one CUDA graph, replayed on new inputs."""
    torch.manual_seed(1)
    model = _Gate().cuda()
    compiled = torch.compile(model, fullgraph=True)
    x, labels = _data(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            compiled(x, labels).backward()
    torch.cuda.current_stream().wait_stream(side)
    model.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = compiled(x, labels)
        loss.backward()
    for seed in range(1, 11):
        new_x, new_labels = _data(seed)
        x.copy_(new_x)
        labels.copy_(new_labels)
        graph.replay()
        torch.cuda.synchronize()
        want_loss, want_grads = _gradients(model, new_x, new_labels)
        _assert_close(loss, [p.grad for p in model.parameters()], want_loss, want_grads)


def test_export():
    model = _Gate().cuda()
    x, labels = torch.randn(8, 257, device="cuda"), torch.randint(0, 1001, (8,), device="cuda")
    exported = torch.export.export(model, (x, labels))
    names = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert {"softmax_lab.softmax.default", "softmax_lab.log_softmax.default"} <= names, names
    torch.testing.assert_close(exported.module()(x, labels), model(x, labels))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_autocast_follows_torch(op, dtype):
    x = torch.randn(16, 3001, device="cuda").to(getattr(torch, dtype)).requires_grad_()
    with torch.autocast("cuda", dtype=torch.float16):
        y = getattr(slt, op)(x, -1)
        want = getattr(torch, op)(x, -1)
    assert y.dtype == want.dtype == torch.float32
    torch.testing.assert_close(y, want, rtol=2e-6, atol=1e-6)
    y.sum().backward()
    assert x.grad.dtype == x.dtype


def test_out_with_grad_and_double_backward_are_clear_errors():
    x = torch.randn(4, 1000, device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        slt.softmax(x, out=torch.empty(4, 1000, device="cuda"))
    y = slt.softmax(x)
    (g,) = torch.autograd.grad(y[:, 0].sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_bad_input_raises_while_tracing():
    with pytest.raises((TypeError, torch._dynamo.exc.TorchRuntimeError), match="float64"):
        torch.compile(lambda t: slt.softmax(t), fullgraph=True)(torch.randn(3, 4, device="cuda", dtype=torch.float64))


def test_legacy_dlpack_capsule():
    x = torch.randn(5, 4099, device="cuda")
    capsule = torch.utils.dlpack.to_dlpack(x)
    y = softmax_lab.softmax(capsule)
    torch.testing.assert_close(torch.from_dlpack(y), torch.softmax(x, -1), rtol=2e-6, atol=1e-7)
