"""softmax_lab.cross_entropy: its validation (no GPU), the kernels' algorithm emulated
against the float64 reference, and on a GPU the kernels themselves against float64 and
torch, through softmax_lab.torch's autograd function, captured graphs and the sanitizer."""

import textwrap

import numpy as np
import pytest
from devices import A100, H200
from emulate import cross_entropy_row
from row_inputs import FakeCupyArray, FakeGpuArray, FakeStream, random_rows
from sanitizer import run_sanitized

import softmax_lab
from softmax_lab.problem import DTYPES, Shape
from softmax_lab.reference import cross_entropy_reference
from softmax_lab.variants import cross_entropy as layouts
from softmax_lab.variants.cluster_row import max_cols


LOGITS = FakeGpuArray((4, 50))
TARGET = FakeGpuArray((4,), "<i8")


# ------------------------------------------------------------------ no GPU
@pytest.mark.parametrize("logits, target, match", [
    (np.ones((2, 3), np.float32), TARGET, "CuPy array"),
    (FakeGpuArray((4, 50), "<i4"), TARGET, "int32"),
    (LOGITS, np.zeros(4, np.int64), "GPU array of integers"),
    (LOGITS, FakeGpuArray((4,), "<f4"), "int64 and int32"),
    (LOGITS, FakeGpuArray((4,), "<i2"), "int64 and int32"),
])
def test_what_is_not_a_gpu_array_of_the_right_dtype_is_a_type_error(logits, target, match):
    with pytest.raises(TypeError, match=match):
        softmax_lab.cross_entropy(logits, target)


@pytest.mark.parametrize("logits, target, grad_out, error, match", [
    (FakeGpuArray((50,)), TARGET, None, ValueError, "2-D"),
    (FakeGpuArray((4, 5, 6)), TARGET, None, ValueError, "2-D"),
    (FakeGpuArray((4, 0)), TARGET, None, ValueError, "vocab of 0"),
    (LOGITS, FakeGpuArray((5,), "<i8"), None, ValueError, "one per row"),
    (LOGITS, FakeGpuArray((4, 1), "<i8"), None, ValueError, "one per row"),
    (LOGITS, TARGET, FakeGpuArray((4, 51)), ValueError, "expected"),
    (LOGITS, TARGET, FakeGpuArray((4, 50), "<f2"), TypeError, "like the logits"),
])
def test_mismatched_shapes_and_dtypes_are_refused_before_any_launch(logits, target, grad_out, error, match):
    with pytest.raises(error, match=match):
        softmax_lab.cross_entropy(logits, target, grad_out=grad_out)


@pytest.mark.parametrize("keywords, match", [
    ({"reduction": "avg"}, "reduction"),
    ({"reduction": None}, "reduction"),
    ({"label_smoothing": -0.1}, "label_smoothing"),
    ({"label_smoothing": 1.5}, "label_smoothing"),
    ({"label_smoothing": float("nan")}, "label_smoothing"),
    ({"label_smoothing": "0.1"}, "label_smoothing"),
    ({"z_loss": -1e-4}, "z_loss"),
    ({"z_loss": float("inf")}, "z_loss"),
    ({"z_loss": 1e39}, "finite in float32"),  # the kernel takes it as a float32
    ({"ignore_index": 1.5}, "ignore_index"),
    ({"ignore_index": True}, "ignore_index"),
    ({"ignore_index": 1 << 64}, "64 bits"),
])
def test_bad_options_are_value_errors(keywords, match):
    with pytest.raises(ValueError, match=match):
        softmax_lab.cross_entropy(LOGITS, TARGET, **keywords)


def test_a_misaligned_target_is_refused():
    t = FakeGpuArray((4,), "<i8")
    t.__cuda_array_interface__["data"] = ((1 << 30) + 4, False)
    with pytest.raises(ValueError, match="aligned"):
        softmax_lab.cross_entropy(LOGITS, t)


# ------------------------------------------------------------------ the algorithm, emulated
def _emulated(x, t, reduction="mean", smoothing=0.0, z=0.0, ignore_index=-100, misalign=0, chunk_vecs=3):
    """cross_entropy.cu's rows, then the count's scale and the total, as the kernels do them."""
    kept = [int(v) != ignore_index for v in t]
    count = np.float32(sum(kept))
    with np.errstate(divide="ignore"):
        scale = np.float32(1) / count if reduction == "mean" else np.float32(1)
    rows = [cross_entropy_row(x[i], int(t[i]), misalign, threads=64, chunk_vecs=chunk_vecs, ignore_index=ignore_index,
                              smoothing=smoothing, z_loss=z, scale=scale) for i in range(len(x))]
    loss = np.array([r[0] for r in rows], np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = {"none": loss, "sum": np.float32(loss.sum(dtype=np.float32)),
                 "mean": np.float32(loss.sum(dtype=np.float32) / count)}[reduction]
    return {"loss": total, "lse": np.array([r[1] for r in rows], np.float32), "grad": np.stack([r[2] for r in rows])}


def _close(got, want, rtol, atol=0.0):
    """|got - want| <= rtol |want| + atol elementwise (atol broadcast to want's shape: one a
    row), NaN and infinities where want has them."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    inf = np.isinf(want)
    np.testing.assert_array_equal(got[inf], want[inf])
    finite = np.isfinite(want)
    atol = np.broadcast_to(np.asarray(atol, np.float64), want.shape)[finite]
    err = np.abs(got[finite] - want[finite]) - rtol * np.abs(want[finite]) - atol
    assert err.size == 0 or err.max() <= 0, (err.max(), np.argmax(err))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing, z", [(0.0, 0.0), (0.1, 0.0), (0.0, 1e-3), (0.3, 2e-2), (1.0, 0.0)])
def test_the_algorithm_matches_the_reference(reduction, smoothing, z):
    rng = np.random.default_rng(int(smoothing * 100 + z * 1e4) + len(reduction))
    for trial in range(6):
        rows, vocab = int(rng.integers(1, 7)), int(rng.integers(1, 900))
        x = (rng.standard_normal((rows, vocab)) * rng.choice([0.1, 1.0, 20.0])).astype(np.float32)
        t = rng.integers(0, vocab, rows)
        if rows > 1:
            t[rng.integers(0, rows)] = -100
        got = _emulated(x, t, reduction, smoothing, z, misalign=trial % 4, chunk_vecs=int(rng.integers(1, 9)))
        want = cross_entropy_reference(x.astype(np.float64), t, reduction=reduction, label_smoothing=smoothing,
                                       z_loss=z)
        _close(got["loss"], want["loss"], 2e-5, 1e-6)
        _close(got["lse"], cross_entropy_reference(x.astype(np.float64), t, reduction="none")["lse"], 2e-6, 2e-6)
        _close(got["grad"], want["grad"], 2e-5, 2e-7)


def test_special_rows_in_the_algorithm():
    """One element (loss 0), -inf logits (the target's -inf: an infinite loss), rows of
    -inf or NaN (NaN), an ignored row (0, and a gradient of 0), a target out of range
    (NaN, where the reference raises)."""
    x = np.array([[2.0, -np.inf, 1.0, 0.5], [-np.inf] * 4, [1.0, np.nan, 0.0, 0.0], [3.0, 1.0, 2.0, 0.0],
                  [3.0, 1.0, 2.0, 0.0], [3.0, 1.0, 2.0, 0.0]], np.float32)
    t = np.array([1, 0, 2, -100, 4, -1])
    got = _emulated(x, t, "none")
    assert got["loss"][0] == np.inf and np.isnan(got["loss"][1]) and np.isnan(got["loss"][2])
    assert got["loss"][3] == 0 and not got["grad"][3].any()
    assert np.isnan(got["loss"][4:]).all() and np.isnan(got["grad"][4:]).all()
    want = cross_entropy_reference(x[:4].astype(np.float64), t[:4], reduction="none")
    _close(got["loss"][:4], want["loss"], 2e-6)
    _close(got["grad"][:4], want["grad"], 2e-6, 1e-7)
    one = _emulated(np.array([[7.5]], np.float32), np.array([0]), "sum", smoothing=0.2)
    assert one["loss"] == 0 and one["grad"][0, 0] == 0 and one["lse"][0] == np.float32(7.5)


@pytest.mark.parametrize("itemsize", [4, 2])
def test_the_layout_and_its_passes_follow_the_row_length_and_device(itemsize):
    """Held (one read, one write) up to the longest row cluster_row holds, chunks (the
    gradient by a second pass) past it and before sm_90; the loss alone one read either way."""
    dtype = "float32" if itemsize == 4 else "bfloat16"
    longest = max_cols(H200, dtype)
    assert longest * itemsize == 425984 * 4  # 16 blocks of 512 threads of 13 vectors
    for rows, cols, dev, grad, want in [(4096, longest, H200, True, (1, 1)), (3, longest + 1, H200, True, (2, 1)),
                                        (4096, 50257, H200, True, (1, 1)), (4096, 128256, A100, True, (2, 1)),
                                        (4, 1 << 21, H200, False, (1, 0)), (4, 50257, A100, False, (1, 0))]:
        shape = Shape(rows, cols, cols, cols, itemsize=itemsize, dtype=dtype)
        assert layouts.passes(shape, dev, grad) == want
        plan = layouts.held_plan(shape, dev)
        assert (plan is not None) == (cols <= longest and dev is H200)
        if plan is not None:
            assert plan.capacity_vecs * 16 >= cols * itemsize


def test_every_row_ignored_is_a_nan_mean_and_a_zero_sum():
    x = np.ones((3, 5), np.float32)
    t = np.full(3, 7)
    assert np.isnan(_emulated(x, t, "mean", ignore_index=7)["loss"])
    both = _emulated(x, t, "sum", ignore_index=7)
    assert both["loss"] == 0 and not both["grad"].any()


@pytest.mark.parametrize("rows", [5, 513], ids=["one-launch", "count-and-total"])
@pytest.mark.parametrize("reduction, smoothing, z, grad", [("mean", 0.0, 0.0, True), ("sum", 0.1, 1e-3, False),
                                                           ("none", 0.2, 0.0, True), ("none", 0.0, 2e-2, False)])
def test_a_repeated_call_launches_the_cells_of_the_general_call(monkeypatch, rows, reduction, smoothing, z, grad):
    """LossLauncher.repeat (the options' cells set once, a call setting the pointers) hands
    the driver the held kernel's arguments that the general call would, launch for launch,
    and under capture takes the general call (the graph's own ticket word).  No GPU: the
    driver and the kernels faked, the cells read back at each launch."""
    import ctypes
    from types import SimpleNamespace

    from softmax_lab import scratch
    from softmax_lab.variants.base import PreparedLaunch

    cp = pytest.importorskip("cupy")
    launches, state = [], {"capturing": 0, "memory": 1 << 40}
    cell_counts = {10: 5, 11: 4}  # the count's and the total's cells; the held kernels' 17

    def launch_kernel(function, *args):
        n = cell_counts.get(function, 17)
        cells = (ctypes.c_void_p * n).from_address(args[-2])
        launches.append((function, [ctypes.c_int64.from_address(cells[i]).value for i in range(n)]))

    def scratch_array(memory, shape, dtype):  # the call's scratch at made-up addresses, in order
        state["memory"] += 1 << 20
        return SimpleNamespace(data=SimpleNamespace(ptr=state["memory"]), nbytes=8)

    monkeypatch.setattr(cp.cuda.driver, "launchKernel", launch_kernel)
    monkeypatch.setattr(cp.cuda.runtime, "streamIsCapturing", lambda s: state["capturing"])
    monkeypatch.setattr(cp.cuda.runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(cp.cuda.runtime, "memsetAsync", lambda *a: None)
    monkeypatch.setattr(scratch.CallMemory, "empty", scratch_array)
    stream = SimpleNamespace(ptr=77)
    monkeypatch.setitem(scratch._tickets, (0, 77, 0), SimpleNamespace(data=SimpleNamespace(ptr=1 << 36)))
    vocab, ld_target, ld_grad = 50257, 3, 50264

    class Launcher(layouts.LossLauncher):  # the held launches of a device that holds the row, and no other
        def __init__(self):
            self.shape = Shape(rows, vocab, vocab, ld_grad, itemsize=4, dtype="float32")
            self._count = PreparedLaunch(SimpleNamespace(ptr=10), (1,), (1024,), (0, 0, 0, 0, rows))
            self._total = PreparedLaunch(SimpleNamespace(ptr=11), (1,), (1024,), (0, 0, 0, rows))

        def held(self, grad, reduce):
            if reduce and rows > 512:
                return None
            return PreparedLaunch(SimpleNamespace(ptr=20 + 2 * grad + reduce), (rows * 4, 1), (512,),
                                  (0,) * 14 + (rows, vocab, vocab))

    launcher = Launcher()
    options = layouts.LossOptions(-7, reduction, smoothing, z)
    per_row = reduction == "none"
    run = launcher.repeat(options, ld_target, grad, ld_grad)
    for capturing in (0, 1):
        state["capturing"] = capturing
        for x, t, g, loss, lse in [(1 << 30, 1 << 31, 1 << 32 if grad else 0, 1 << 33, 0), (5 << 30, 5 << 31,
                                   5 << 32 if grad else 0, 5 << 33, 5 << 34)]:
            buffers = layouts.LossBuffers(x, t, ld_target, loss if per_row else 0, 0 if per_row else loss, lse,
                                          g, ld_grad)
            del launches[:]
            state["memory"] = 1 << 40
            launcher(buffers, options, stream)
            general = list(launches)
            del launches[:]
            state["memory"] = 1 << 40
            run(x, t, g, loss if per_row else 0, 0 if per_row else loss, lse, stream)
            assert launches == general and general
            held = [cells for function, cells in general if function >= 20]
            assert len(held) == 1 and held[0][:3] == [x, g, t] and held[0][4] == lse
            assert held[0][7:12] == [ld_grad, ld_target, -7, layouts.float_bits(smoothing), layouts.float_bits(z)]


def test_a_remembered_loss_call_is_found_only_for_its_layouts_and_keywords(monkeypatch):
    """The loss's repeated call's lookup (cross_entropy._repeat_call), CuPy's array type,
    allocation, device and stream faked: a call with the remembered layouts, alignments and
    keywords and a grad_out clear of the logits runs with its own pointers; another logits
    shape, target dtype, keyword (or a keyword's type), grad_out overlapping the logits or
    none takes the checked path.  No GPU."""
    import importlib

    cupy = pytest.importorskip("cupy")
    CE = importlib.import_module("softmax_lab.cross_entropy")  # the module, not the function of its name

    stream, made = FakeStream(), []

    def empty(shape, dtype="float32"):
        made.append(FakeCupyArray((1 << 40) + 256 * len(made), shape if isinstance(shape, tuple) else (shape,),
                                  dtype))
        return made[-1]

    monkeypatch.setattr(cupy, "ndarray", FakeCupyArray)
    monkeypatch.setattr(cupy, "empty", empty)
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda device=-1: stream)
    monkeypatch.setattr(CE, "_calls", {})
    runs = []

    class Launcher:
        def repeat(self, options, ld_target, grad, ld_grad):
            return lambda x, t, g, loss_rows, total, lse, s: runs.append((x, t, g, loss_rows, s))

    b, rows, vocab = 1 << 30, 6, 50257
    extent = rows * vocab * 4  # the logits' bytes

    def arrays(at):
        return (FakeCupyArray(at, (rows, vocab)), FakeCupyArray(at + (1 << 24), (rows,), "int64"),
                FakeCupyArray(at + (1 << 25), (rows, vocab)))

    x, t, g = arrays(b)
    asked = (int, -100, str, "none", float, 0.0, float, 0.0, False)
    options = CE.loss_options(-100, "none", 0.0, 0.0)
    CE._remember(asked, CE.describe(x, "logits"), CE.describe(t, "target"), CE.describe(g, "grad_out"), options, 0,
                 Launcher(), vocab)

    x2, t2, g2 = arrays(b + (1 << 28))
    loss = softmax_lab.cross_entropy(x2, t2, reduction="none", grad_out=g2)
    assert loss is made[-1] and loss.shape == (rows,)
    assert runs == [(x2.data.ptr, t2.data.ptr, g2.data.ptr, loss.data.ptr, stream)]
    misses = {
        "another vocab": (FakeCupyArray(b, (rows, vocab + 1)), t2, FakeCupyArray(b + (1 << 25), (rows, vocab + 1)),
                          asked),
        "int32 targets": (x2, FakeCupyArray(t2.data.ptr, (rows,), "int32"), g2, asked),
        "a mean": (x2, t2, g2, (int, -100, str, "mean", float, 0.0, float, 0.0, False)),
        "ignore_index True": (x2, t2, g2, (bool, True, str, "none", float, 0.0, float, 0.0, False)),
        "an integer z_loss": (x2, t2, g2, (int, -100, str, "none", float, 0.0, int, 0, False)),
        "return_lse": (x2, t2, g2, asked[:-1] + (True,)),
        "no grad_out": (x2, t2, None, asked),
        # 16-byte aligned as the remembered grad_out, so that only the extents' check refuses it
        "grad_out overlapping": (x2, t2, FakeCupyArray(x2.data.ptr + extent // 16 * 16 - 16, (rows, vocab)), asked),
    }
    for what, (xa, ta, ga, asked_here) in misses.items():
        assert CE._repeat_call(xa, ta, ga, asked_here, None) is CE._MISS, what
    assert len(runs) == 1


# ------------------------------------------------------------------ on a GPU
def _cupy():
    import cupy

    return cupy


def _torch():
    return pytest.importorskip("torch")


def _host(a):
    cp = _cupy()
    if isinstance(a, cp.ndarray):
        return cp.asnumpy(a)
    return a.detach().double().cpu().numpy() if a.dtype.is_floating_point else a.cpu().numpy()


# float32 math: relative to the row's largest value, the gradient's error is that of a
# float32 exp; each dtype then rounds the result once
GRAD_RTOL = {"float32": 2e-5, "float16": 1.5e-3, "bfloat16": 1e-2}


def _check(x, t, got, *, reduction="mean", smoothing=0.0, z=0.0, ignore_index=-100, grad=None, lse=None,
           loss_rtol=2e-5):
    """A call's results against the float64 reference of the same (rounded) inputs."""
    dtype = str(x.dtype).removeprefix("torch.")
    xh, th = _host(x).astype(np.float64), _host(t)
    want = cross_entropy_reference(xh, th, reduction=reduction, label_smoothing=smoothing, z_loss=z,
                                   ignore_index=ignore_index)
    loss = _host(got)
    assert loss.dtype in (np.float32, np.float64) and loss.shape == np.shape(want["loss"])
    _close(loss, want["loss"], loss_rtol, 1e-5)
    if lse is not None:
        _close(_host(lse), want["lse"], 2e-6, 2e-6)
    if grad is not None:
        g = _host(grad).astype(np.float64)
        scale = np.abs(want["grad"]).max(axis=1, keepdims=True)
        _close(g, want["grad"], GRAD_RTOL[dtype], 4e-7 * scale + (6e-8 if dtype == "float16" else 0))


def _targets(rows, vocab, like, dtype="int64", seed=0, ignored=0.2):
    rng = np.random.default_rng(seed)
    t = rng.integers(0, vocab, rows)
    t[rng.random(rows) < ignored] = -100
    if rows:
        t[0] = vocab - 1  # the last element: in the tail of scalars past the last vector
    if rows > 1:
        t[1] = 0  # the first: in the head of scalars where the row starts off a 16-byte boundary
    cp = _cupy()
    if isinstance(like, cp.ndarray):
        return cp.asarray(t.astype(dtype))
    torch = _torch()
    return torch.from_numpy(t.astype(dtype)).to(like.device)


# Rows a cluster holds (kernels/cross_entropy_held.cu on an H200: up to 425984 float32
# elements, 851968 halves) and rows past what it holds (kernels/cross_entropy.cu's chunks)
SHAPES = [(1, 1), (3, 7), (1, 32000), (5, 50257), (2, 100003), (8, 151936), (64, 1027), (300, 4099),
          (1, 393216), (2, 425984), (2, 425985), (3, 851969)]
HELD, CHUNKED = 50257, 900001  # a vocab of each layout in every dtype


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_against_float64(shape, dtype):
    x = random_rows(shape, dtype, seed=shape[0] + shape[1])
    t = _targets(*shape, x, seed=shape[1])
    grad = x.clone() if dtype == "bfloat16" else x.copy()
    grad.fill_(float("nan")) if dtype == "bfloat16" else grad.fill(np.nan)  # poisoned
    loss, lse = softmax_lab.cross_entropy(x, t, return_lse=True, grad_out=grad)
    _check(x, t, loss, grad=grad, lse=lse)


@pytest.mark.gpu
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing, z", [(0.0, 0.0), (0.1, 0.0), (0.0, 1e-4), (0.2, 1e-3)])
@pytest.mark.parametrize("target_dtype", ["int64", "int32"])
@pytest.mark.parametrize("shape", [(37, HELD), (3, CHUNKED)], ids=["held", "chunked"])
def test_every_option(reduction, smoothing, z, target_dtype, shape):
    x = random_rows(shape, "float32", seed=3)
    t = _targets(*shape, x, target_dtype, seed=4)
    grad = _cupy().full(x.shape, np.nan, np.float32)
    loss = softmax_lab.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing, z_loss=z, grad_out=grad)
    _check(x, t, loss, reduction=reduction, smoothing=smoothing, z=z, grad=grad)
    # the same call on new logits and targets: the repeated call's path, with the options set once
    x2, t2 = x * 1.5, _targets(*shape, x, target_dtype, seed=5)
    grad.fill(np.nan)
    again = softmax_lab.cross_entropy(x2, t2, reduction=reduction, label_smoothing=smoothing, z_loss=z, grad_out=grad)
    _check(x2, t2, again, reduction=reduction, smoothing=smoothing, z=z, grad=grad)
    # ignore_index other than torch's, and the loss alone (no gradient pass)
    t2 = t.copy()
    t2[t2 == -100] = 5
    alone = softmax_lab.cross_entropy(x, t2, reduction=reduction, label_smoothing=smoothing, z_loss=z, ignore_index=5)
    _check(x, t2, alone, reduction=reduction, smoothing=smoothing, z=z, ignore_index=5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 100003), (2, CHUNKED)], ids=["held", "chunked"])
def test_the_gradient_over_the_logits_themselves(dtype, shape):
    x = random_rows(shape, dtype, seed=11)
    t = _targets(*shape, x, seed=12)
    kept = x.clone() if dtype == "bfloat16" else x.copy()
    loss = softmax_lab.cross_entropy(x, t, label_smoothing=0.1, z_loss=1e-4, grad_out=x)
    _check(kept, t, loss, smoothing=0.1, z=1e-4, grad=x)


@pytest.mark.gpu
def test_views_strides_and_layouts():
    """Misaligned row views read in place, transposed logits copied first, a grad_out
    without uniform rows written through a buffer, targets at a stride."""
    cp = _cupy()
    for offset in (1, 2, 3, 5):
        base = random_rows((7, 70001 + 8), "float32", seed=offset)
        x = base[:, offset:offset + 70001]
        tt = _targets(14, 70001, x, seed=offset)[::2]
        g = cp.full((7, 70001 + 8), np.nan, np.float32)[:, 8 - offset:8 - offset + 70001]
        _check(x, tt, softmax_lab.cross_entropy(x, tt, grad_out=g), grad=g)
        xh = random_rows((7, 9000), "float16", seed=offset)[:, offset:]
        th = _targets(7, 9000 - offset, xh, "int32", seed=offset)
        _check(xh, th, softmax_lab.cross_entropy(xh, th, reduction="sum"), reduction="sum")
    xt = cp.ascontiguousarray(random_rows((4001, 5), "float32")).T
    t = _targets(5, 4001, xt)
    gt = cp.full((4001, 5), np.nan, np.float32).T
    _check(xt, t, softmax_lab.cross_entropy(xt, t, grad_out=gt), grad=gt)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [HELD, CHUNKED], ids=["held", "chunked"])
def test_special_rows_as_torch(n):
    """Against torch.nn.functional.cross_entropy in float64: -inf logits, rows of -inf,
    +inf, NaN, a row whose target is -inf, and vocab 1."""
    torch = _torch()
    F = torch.nn.functional
    x = torch.randn(7, n, dtype=torch.float64, device="cuda") * 4
    x[1, ::2] = -torch.inf
    x[2] = -torch.inf
    x[3, 17] = torch.inf
    x[4, 5] = torch.nan
    x[5, 123] = -torch.inf
    t = torch.tensor([3, 1, 0, 17, 9, 123, -100], device="cuda")
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        xd = x.to(dtype)
        loss = softmax_lab.cross_entropy(xd, t, reduction="none")
        want = F.cross_entropy(xd.double(), t, reduction="none")
        torch.testing.assert_close(loss, want.float(), equal_nan=True, rtol=2e-6, atol=2e-5)
    one = torch.randn(9, 1, device="cuda")
    g = torch.full_like(one, torch.nan)
    loss = softmax_lab.cross_entropy(one, torch.zeros(9, dtype=torch.int64, device="cuda"), grad_out=g,
                                     label_smoothing=0.3)
    assert float(loss) == 0 and float(g.abs().max()) < 1e-7  # p - s - (1 - s), p = 1: 0 up to rounding


@pytest.mark.gpu
@pytest.mark.parametrize("vocab", [3001, CHUNKED], ids=["held", "chunked"])
def test_a_target_out_of_range_is_a_nan_row_and_the_context_survives(vocab):
    cp = _cupy()
    x = random_rows((5, vocab), "float32", seed=21)
    t = cp.asarray([3, vocab, -1, -100, 1 << 40], dtype=cp.int64)
    g = cp.full(x.shape, 7.0, cp.float32)
    per_row = softmax_lab.cross_entropy(x, t, reduction="none", grad_out=g)
    got = cp.asnumpy(per_row)
    assert np.isfinite(got[0]) and got[3] == 0 and np.isnan(got[[1, 2, 4]]).all()
    assert bool(cp.isnan(g[[1, 2, 4]]).all()) and bool(cp.isfinite(g[0]).all()) and not bool(g[3].any())
    assert np.isnan(float(softmax_lab.cross_entropy(x, t)))
    ok = cp.asarray([3, 0, 1, 2, 4], dtype=cp.int64)
    _check(x, ok, softmax_lab.cross_entropy(x, ok))  # the context is whole
    cp.cuda.Device().synchronize()


@pytest.mark.gpu
def test_all_rows_ignored_and_no_rows():
    cp = _cupy()
    x = random_rows((4, 999), "float16", seed=2)
    t = cp.full(4, -100, cp.int64)
    g = cp.full(x.shape, np.nan, cp.float16)
    assert np.isnan(float(softmax_lab.cross_entropy(x, t, grad_out=g))) and not bool(g.any())
    assert float(softmax_lab.cross_entropy(x, t, reduction="sum")) == 0
    empty = cp.empty((0, 10), cp.float32)
    assert np.isnan(float(softmax_lab.cross_entropy(empty, cp.empty(0, cp.int64))))
    assert softmax_lab.cross_entropy(empty, cp.empty(0, cp.int64), reduction="none").shape == (0,)


@pytest.mark.gpu
def test_mixed_devices_and_libraries():
    cp = _cupy()
    torch = _torch()
    x = random_rows((9, 4099), "float32", seed=8)
    t = torch.from_numpy(np.arange(9) * 400).cuda()  # torch targets for CuPy logits
    loss = softmax_lab.cross_entropy(x, t)
    assert isinstance(loss, cp.ndarray) and loss.shape == ()
    _check(x, t, loss)
    if cp.cuda.runtime.getDeviceCount() > 1:
        with cp.cuda.Device(1):
            t1 = cp.zeros(9, cp.int64)
        with pytest.raises(ValueError, match="device"):
            softmax_lab.cross_entropy(x, t1)


@pytest.mark.gpu
def test_torch_autograd_against_torch():
    """softmax_lab.torch.cross_entropy: loss and logits' gradient as F.cross_entropy's in
    float64, under torch.autograd, for every reduction and with smoothing."""
    torch = _torch()
    import softmax_lab.torch as slt

    F = torch.nn.functional
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for reduction in ("mean", "sum", "none"):
            for smoothing in (0.0, 0.1):
                base = torch.randn(33, 32003, device="cuda") * 3
                t = torch.randint(0, 32003, (33,), device="cuda")
                t[::4] = -100
                x = base.to(dtype).requires_grad_()
                ref = x.detach().double().requires_grad_()
                loss = slt.cross_entropy(x, t, reduction=reduction, label_smoothing=smoothing)
                want = F.cross_entropy(ref, t, reduction=reduction, label_smoothing=smoothing)
                torch.testing.assert_close(loss.double(), want, rtol=2e-5, atol=1e-5)
                upstream = torch.rand_like(want) + 0.5
                (loss.double() * upstream).sum().backward()
                (want * upstream).sum().backward()
                rtol = GRAD_RTOL[str(dtype).removeprefix("torch.")]
                torch.testing.assert_close(x.grad.double(), ref.grad, rtol=rtol,
                                           atol=4e-7 * float(ref.grad.abs().max()) + 1e-7)


@pytest.mark.gpu
def test_torch_z_loss_and_lse():
    torch = _torch()
    import softmax_lab.torch as slt

    x = (torch.randn(16, 50257, device="cuda") * 2).requires_grad_()
    t = torch.randint(0, 50257, (16,), device="cuda")
    ref = x.detach().double().requires_grad_()
    loss, lse = slt.cross_entropy(x, t, z_loss=1e-3, return_lse=True)
    lse_ref = torch.logsumexp(ref, -1)
    want = (torch.nn.functional.cross_entropy(ref, t, reduction="none") + 1e-3 * lse_ref**2).mean()
    torch.testing.assert_close(loss.double(), want, rtol=2e-5, atol=1e-5)
    torch.testing.assert_close(lse.double(), lse_ref.detach(), rtol=2e-6, atol=2e-6)
    loss.backward()
    want.backward()
    torch.testing.assert_close(x.grad.double(), ref.grad, rtol=2e-5, atol=1e-9)
    with torch.no_grad():  # no gradient kept where none is wanted
        assert slt.cross_entropy(x, t).requires_grad is False


@pytest.mark.gpu
def test_torch_compile_opcheck_and_graphs():
    torch = _torch()
    import softmax_lab.torch as slt

    x = torch.randn(7, 5003, device="cuda")
    t = torch.randint(0, 5003, (7,), device="cuda")
    op = torch.ops.softmax_lab.cross_entropy.default
    for reduction in ("mean", "none"):
        torch.library.opcheck(op, (x.clone().requires_grad_(), t, -100, reduction, 0.1, 1e-4, True))
        torch.library.opcheck(op, (x, t, -100, reduction, 0.0, 0.0, False))

    def step(logits, target):
        return slt.cross_entropy(logits, target, label_smoothing=0.1)

    compiled = torch.compile(step, fullgraph=True)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled(a, t).backward()
    step(b, t).backward()
    torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
    with pytest.raises((ValueError, torch._dynamo.exc.TorchRuntimeError), match="reduction"):
        torch.compile(lambda v, u: slt.cross_entropy(v, u, reduction="avg"), fullgraph=True)(x, t)


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_captured_graph_replays_with_new_inputs(library):
    """One call with its gradient captured, replayed 60 times on changing logits and
    targets: every replay right, the scratch the graph's own."""
    cp = _cupy()
    rows, vocab = 8, 151936
    if library == "torch":
        torch = _torch()
        x = torch.randn(rows, vocab, device="cuda")
        t = torch.randint(0, vocab, (rows,), device="cuda")
        g = torch.empty_like(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            softmax_lab.cross_entropy(x, t, grad_out=g)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            loss = softmax_lab.cross_entropy(x, t, grad_out=g, label_smoothing=0.05)
        for i in range(60):
            x.copy_(torch.randn(rows, vocab, device="cuda") * (1 + i % 5))
            t.copy_(torch.randint(0, vocab, (rows,), device="cuda"))
            t[i % rows] = -100
            graph.replay()
            if i % 20 == 0 or i == 59:
                torch.cuda.synchronize()
                _check(x, t, loss, smoothing=0.05, grad=g)
        return
    x = random_rows((rows, vocab), "float32", seed=1)
    t = _targets(rows, vocab, x, seed=1)
    g = cp.empty_like(x)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        softmax_lab.cross_entropy(x, t, grad_out=g, reduction="sum")
        stream.begin_capture()
        loss = softmax_lab.cross_entropy(x, t, grad_out=g, reduction="sum")
        graph = stream.end_capture()
    for i in range(60):
        with stream:
            x[...] = cp.random.standard_normal((rows, vocab), dtype=cp.float32) * (1 + i % 5)
            t[...] = cp.random.randint(0, vocab, rows)
            graph.launch(stream)
        if i % 20 == 0 or i == 59:
            stream.synchronize()
            _check(x, t, loss, reduction="sum", grad=g)


@pytest.mark.gpu
def test_repeated_calls_are_bitwise_the_same():
    cp = _cupy()
    x = random_rows((33, 65537), "bfloat16", seed=9)
    t = _targets(33, 65537, x, seed=9)
    first = softmax_lab.cross_entropy(x, t, reduction="none")
    again = softmax_lab.cross_entropy(x, t, reduction="none")
    assert bool((first == again).all())
    del cp


@pytest.mark.gpu
@pytest.mark.parametrize("grad", [False, True], ids=["loss", "grad"])
def test_few_rows_reduce_in_the_launch_on_many_streams(grad):
    """Rows no more than the held block's threads take the mean's count and the total in the
    one launch (XENT_REDUCE, a ticket word per stream left at 0 by each launch); one row
    more, the count and total kernels.  Both, called over and over on three streams at
    once with changing data, against float64, and bitwise the same on the same data."""
    cp = _cupy()
    from softmax_lab.device import device_info

    vocab = 13001
    dev = device_info(cp.cuda.runtime.getDevice())
    plan = layouts.held_plan(Shape(1, vocab, vocab, vocab, itemsize=4, dtype="float32"), dev)
    if plan is None:
        pytest.skip(f"this device holds no row of {vocab} float32 in a cluster")
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(3)]
    for rows in (1, 7, plan.threads, plan.threads + 1):
        cases = []
        for i, stream in enumerate(streams):
            with stream:
                x = random_rows((rows, vocab), "float32", seed=rows + i)
                t = _targets(rows, vocab, x, seed=i, ignored=0.3)
                g = cp.full(x.shape, np.nan, np.float32) if grad else None
            cases.append((stream, x, t, g))
        for round_ in range(8):
            results = []
            for stream, x, t, g in cases:
                with stream:
                    if round_ % 4 == 3:  # new data, in stream order
                        x *= 1.5
                    reduction = ("mean", "sum")[round_ % 2]
                    results.append((reduction, softmax_lab.cross_entropy(x, t, reduction=reduction, grad_out=g)))
            for (stream, x, t, g), (reduction, loss) in zip(cases, results):
                stream.synchronize()
                _check(x, t, loss, reduction=reduction, grad=g)
        stream, x, t, g = cases[0]
        with stream:
            first = softmax_lab.cross_entropy(x, t, grad_out=g)
            again = softmax_lab.cross_entropy(x, t, grad_out=g)
        stream.synchronize()
        assert float(first) == float(again)


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_a_repeated_call_refuses_what_the_first_would(library):
    """The repeated call's fast path (the launcher of an earlier call of the same layouts
    and keywords) gives the checked path's results on new data, and never takes what the
    checked path refuses: a grad_out overlapping the logits, a bool ignore_index."""
    rows, n = 9, 30011

    def arrays(seed):  # logits in a wider buffer, and a grad_out 4 elements into another
        xbuf = random_rows((rows, n + 8), "float32", seed=seed)
        gbuf = xbuf * np.nan
        if library == "torch":
            xbuf, gbuf = (_torch().as_tensor(a, device="cuda") for a in (xbuf, gbuf))
        t = _targets(rows, n, xbuf, seed=seed)
        t[t == -100] = 1  # ignored rows under ignore_index=1
        return xbuf, xbuf[:, :n], gbuf[:, 4:n + 4], t

    xbuf, x, g, t = arrays(31)
    for _ in range(2):  # the second call takes the fast path
        loss, lse = softmax_lab.cross_entropy(x, t, ignore_index=1, grad_out=g, return_lse=True)
        _check(x, t, loss, ignore_index=1, grad=g, lse=lse)
    with pytest.raises(ValueError, match="overlaps"):  # x's layout, 4 elements in: the same key
        softmax_lab.cross_entropy(x, t, ignore_index=1, grad_out=xbuf[:, 4:n + 4], return_lse=True)
    with pytest.raises(ValueError, match="ignore_index"):
        softmax_lab.cross_entropy(x, t, ignore_index=True, grad_out=g, return_lse=True)
    _, x2, g2, t2 = arrays(33)  # new data at new pointers: the fast path again
    loss, lse = softmax_lab.cross_entropy(x2, t2, ignore_index=1, grad_out=g2, return_lse=True)
    _check(x2, t2, loss, ignore_index=1, grad=g2, lse=lse)


@pytest.mark.gpu
def test_above_2_to_the_31_elements_cross_entropy():
    """3 rows of 2^30 + 5 float16 logits (6.4 GB), the gradient over them: 64-bit indexing
    in every kernel, the targets at both ends of the rows."""
    cp = _cupy()
    rows, vocab = 3, 2**30 + 5
    x = cp.empty((rows, vocab), cp.float16)
    for r in range(rows):
        x[r] = cp.random.standard_normal(vocab, dtype=cp.float32).astype(cp.float16)
    t = cp.asarray([vocab - 1, 0, vocab // 2], cp.int64)
    picks = [x[r, int(t[r])].astype(cp.float64) for r in range(rows)]
    lse_want = [float(cp.log(cp.exp(x[r].astype(cp.float32)).sum(dtype=cp.float64))) for r in range(rows)]
    loss, lse = softmax_lab.cross_entropy(x, t, reduction="none", return_lse=True, grad_out=x)
    for r in range(rows):
        assert abs(float(lse[r]) - lse_want[r]) <= 1e-5 * abs(lse_want[r])
        assert abs(float(loss[r]) - (lse_want[r] - float(picks[r]))) <= 1e-5 * lse_want[r]
        # the target's gradient is p - 1, about -1; the others about 1 / vocab, below float16's
        # smallest normal and rounded to its subnormals
        assert abs(float(x[r, int(t[r])]) + 1) < 1e-3
    assert float(cp.abs(x[:, 1:vocab - 1:4097]).max()) < 1e-6


@pytest.mark.gpu
def test_a_mean_over_more_rows_than_a_float_counts():
    """2^24 + 3 rows of 2 logits, a few ignored: the kept rows' count is exact (a float
    count stops at 2^24) and the total keeps its digits (summed in double)."""
    torch = _torch()
    rows = 2**24 + 3
    x = torch.randn(rows, 2, device="cuda")
    t = torch.randint(0, 2, (rows,), device="cuda")
    t[::1000] = -100
    want = torch.nn.functional.cross_entropy(x.double(), t)
    got = softmax_lab.cross_entropy(x, t)
    assert abs(float(got) - float(want)) <= 2e-6 * abs(float(want))
    g = torch.empty_like(x)
    softmax_lab.cross_entropy(x, t, grad_out=g)
    kept = int((t != -100).sum())
    assert abs(float(g[1].abs().sum()) * kept - float((torch.softmax(x[1].double(), 0) - torch.eye(2, device="cuda",
               dtype=torch.float64)[t[1]]).abs().sum())) < 1e-5


@pytest.mark.gpu
def test_memcheck_sanitizer(tmp_path):
    run_sanitized("memcheck", textwrap.dedent("""
        import cupy as cp
        import softmax_lab
        for rows, vocab in [(1, 1), (3, 1029), (2, 393217), (2, 425985), (129, 33)]:
            x = cp.random.standard_normal((rows, vocab + 1), dtype=cp.float32)[:, 1:]
            t = cp.random.randint(0, vocab, rows).astype(cp.int64)
            t[0] = vocab - 1
            softmax_lab.cross_entropy(x, t, grad_out=cp.empty((rows, vocab), cp.float32), label_smoothing=0.1)
            h = x.astype(cp.float16)
            softmax_lab.cross_entropy(h, t.astype(cp.int32), reduction="none", grad_out=h)
            bad = cp.asarray([-5] + [vocab + 3] * (rows - 1), cp.int64)
            softmax_lab.cross_entropy(x, bad, grad_out=cp.empty((rows, vocab), cp.float32), return_lse=True)
        cp.cuda.Device().synchronize()
        print("sanitized")
    """), tmp_path)
