"""Streams, devices, aliasing, alignment, fallbacks, subnormals, threads and
messages: every case ends in a correct result or a clear exception before any
launch (issue 10).  CPU tests need no GPU; GPU tests are marked."""

import dataclasses
import threading

import numpy as np
import pytest
from row_inputs import FakeCupyArray, FakeStream

import softmax_lab
from softmax_lab import api, arrays, loader
from softmax_lab.reference import (
    backward_error,
    backward_scale,
    log_softmax_backward_reference,
    relative_error,
    softmax_backward_reference,
    softmax_reference,
)
from softmax_lab.variants import CannotRun, Shape, preferences

VARIANTS = list(softmax_lab.variants())


class FakeCai:
    def __init__(self, **cai):
        self.__cuda_array_interface__ = cai


class FakeDlpack:
    """A DLPack producer on a CUDA device with neither shape nor dtype."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kwargs):
        raise BufferError("this producer cannot export")


# ------------------------------------------------------------------ CPU: messages
def test_cai_without_typestr_is_named():
    with pytest.raises(ValueError, match="has no 'typestr'"):
        softmax_lab.softmax(FakeCai(shape=(2, 3), data=(1 << 30, False), version=2))


@pytest.mark.parametrize("typestr", ["<V2", "|V2"])
def test_two_byte_opaque_types_are_named_as_such(typestr):
    with pytest.raises(TypeError, match="bfloat16"):
        softmax_lab.softmax(FakeCai(shape=(2, 3), typestr=typestr, data=(1 << 30, False), version=2))


def test_axis_true_is_not_one():
    with pytest.raises(TypeError, match="axis must be an integer"):
        softmax_lab.softmax(FakeCai(shape=(2, 3), typestr="<f4", data=(1 << 30, False), version=2), axis=True)


def test_dlpack_without_shape_or_dtype_is_a_clear_error():
    try:
        softmax_lab.device.require_device()
    except RuntimeError:
        with pytest.raises(RuntimeError, match="needs a CUDA device"):
            softmax_lab.softmax(FakeDlpack())
    else:
        with pytest.raises(TypeError, match="could not take .*FakeDlpack through DLPack"):
            softmax_lab.softmax(FakeDlpack())


def test_stream_of_an_unknown_type():
    x = api.ArrayView(1 << 30, (2, 3), (12, 4), np.dtype(np.float32), 0)
    with pytest.raises(TypeError, match="stream must be"):
        arrays.resolve_stream("default", x, 0)


# ------------------------------------------------------------------ CPU: plans and fallbacks
F32 = np.dtype(np.float32)


def _view(ptr, shape, strides):
    return api.ArrayView(ptr, shape, strides, F32, 0)


def test_overlap_rules_of_the_issue():
    b = 1 << 30
    # softmax(b[:, :100], out=b[:, 100:]) on a (4, 200) array: interleaved, disjoint
    api.plan_call(_view(b, (4, 100), (800, 4)), _view(b + 400, (4, 100), (800, 4)), 1)
    # softmax(b[::2], out=b[1::2]) on (8, 50)
    api.plan_call(_view(b, (4, 50), (400, 4)), _view(b + 200, (4, 50), (400, 4)), 1)
    # in place through v[None, :] and v.reshape(1, -1)
    plan = api.plan_call(_view(b, (1, 10), (0, 4)), _view(b, (1, 10), (40, 4)), 1)
    assert plan.y_ptr == plan.x_ptr == b
    # a real partial overlap: one element on
    with pytest.raises(ValueError, match="overlaps x"):
        api.plan_call(_view(b, (4, 100), (400, 4)), _view(b + 4, (4, 100), (400, 4)), 1)


def test_misaligned_pointers_and_strides_are_refused():
    b = 1 << 30
    with pytest.raises(ValueError, match="x is not aligned"):
        api.plan_call(_view(b + 1, (2, 8), (32, 4)), None, 1)
    with pytest.raises(ValueError, match="x is not aligned"):
        api.plan_call(_view(b, (2, 8), (34, 4)), None, 1)
    with pytest.raises(ValueError, match="out is not aligned"):
        api.plan_call(_view(b, (2, 8), (32, 4)), _view(b + 4098, (2, 8), (32, 4)), 1)


def test_a_remembered_call_is_found_only_for_its_layouts_and_aliasing(monkeypatch):
    """The repeated call's lookup (api._repeat_call), CuPy's array type, device and stream faked:
    a call with the remembered layouts and alignments and an out clear of x launches with its own
    pointers; another shape, dtype, axis, variant, op, alignment, an out at x's own pointer or one
    that overlaps x's extent takes the checked path.  No GPU."""
    cupy = pytest.importorskip("cupy")
    stream = FakeStream()
    monkeypatch.setattr(cupy, "ndarray", FakeCupyArray)
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(cupy.cuda, "get_current_stream", lambda device=-1: stream)
    monkeypatch.setattr(api, "_calls", {})
    launched = []
    b, rows, cols = 1 << 30, 8, 1000
    x, y = FakeCupyArray(b, (rows, cols)), FakeCupyArray(b + (1 << 20), (rows, cols))

    def view(a):
        return api.ArrayView(a.data.ptr, a.shape, a.strides, a.dtype, 0, "cupy", a)

    plan = api.CallPlan(1, rows, cols, False, False, cols, cols, x.data.ptr, y.data.ptr)
    api._remember(view(x), view(y), plan, 0, "auto", lambda x_ptr, y_ptr, s: launched.append((x_ptr, y_ptr, s)))

    x2, y2 = FakeCupyArray(b + (7 << 20), (rows, cols)), FakeCupyArray(b + (9 << 20), (rows, cols))
    assert softmax_lab.softmax(x2, out=y2) is y2
    assert launched == [(x2.data.ptr, y2.data.ptr, stream)]
    extent = rows * cols * 4
    misses = {
        "another shape": (FakeCupyArray(b, (rows, cols + 1)), -1, "auto", FakeCupyArray(b + extent, (rows, cols + 1)),
                          "softmax"),
        "another dtype": (FakeCupyArray(b, (rows, cols), "float16"), -1, "auto",
                          FakeCupyArray(b + extent, (rows, cols), "float16"), "softmax"),
        "another axis": (x2, 0, "auto", y2, "softmax"),
        "another variant": (x2, -1, "two_pass", y2, "softmax"),
        "another op": (x2, -1, "auto", y2, "log_softmax"),
        "x on another line offset": (FakeCupyArray(b + 16, (rows, cols)), -1, "auto", y2, "softmax"),
        "out at x": (x2, -1, "auto", x2, "softmax"),
        "out overlapping x": (x2, -1, "auto", FakeCupyArray(x2.data.ptr + extent - 16, (rows, cols)), "softmax"),
        "no out": (x2, -1, "auto", None, "softmax"),
    }
    for what, (xa, axis, variant, out, op) in misses.items():
        assert api._repeat_call(xa, axis, variant, out, op) is api._MISS, what
    assert len(launched) == 1
    # just clear of x's extent, on either side: found
    for y_ptr in (x2.data.ptr + extent, x2.data.ptr - extent):
        out = FakeCupyArray(y_ptr, (rows, cols))
        assert api._repeat_call(x2, 1, "auto", out, "softmax") is out
    assert launched[1:] == [(x2.data.ptr, x2.data.ptr + extent, stream), (x2.data.ptr, x2.data.ptr - extent, stream)]


def test_auto_falls_back_when_a_preferred_variant_cannot_run(monkeypatch):
    dev = softmax_lab.device.DeviceInfo(0, "fake H200", 90, 132, 60 << 20, 232448, 233472)
    shape = Shape(4096, 500_000, 500_000, 500_000)  # single_read's memory-merged group
    first = preferences(shape, dev)[0]
    assert first.name == "single_read"
    prepared = []

    def prepare(self, shape, dev, plan=None):
        if self.name == "single_read":
            raise CannotRun("no cluster can be resident (test)")
        prepared.append(self.name)
        return lambda x, y, stream: None

    monkeypatch.setattr(type(first), "prepare", prepare)
    api._launchers.clear()
    try:
        variant, _ = api.launcher_for(shape, dev, "auto")
        assert variant.name != "single_read" and prepared == [variant.name]
        with pytest.raises(ValueError, match="resident"):
            api.launcher_for(shape, dev, "single_read")
    finally:
        api._launchers.clear()


@pytest.mark.parametrize("dtype, op", [("bfloat16", "softmax"), ("float16", "softmax"), ("float32", "log_softmax")])
def test_auto_takes_the_first_that_prepares_and_a_named_one_that_cannot_says_why(monkeypatch, dtype, op):
    from softmax_lab.variants import DTYPES

    dev = softmax_lab.device.DeviceInfo(0, "fake H200", 90, 132, 60 << 20, 232448, 233472)
    shape = Shape(4096, 500_000, 500_000, 500_000, itemsize=DTYPES[dtype], dtype=dtype, op=op)
    prepared = []

    def fake(self, shape, dev):
        prepared.append(self.name)
        return lambda x, y, stream: None

    cls = type(preferences(shape, dev)[0])
    # the real prepare (its dtype and op checks), with a fake launch rule behind it
    monkeypatch.setattr(cls, "launch", property(lambda self: lambda s, d, plan: fake(self, s, d)), raising=False)
    api._launchers.clear()
    try:
        variant, _ = api.launcher_for(shape, dev, "auto")  # auto never raises
        assert variant.name in ("single_read", "two_pass", "multi_block") and prepared == [variant.name]
        backward = dataclasses.replace(shape, op=f"{op}_backward", ld_g=shape.cols)
        with pytest.raises(ValueError, match="no backward pass"):
            api.launcher_for(backward, dev, "multi_block_smem")
    finally:
        api._launchers.clear()


# ------------------------------------------------------------------ GPU
def _cp():
    import cupy

    return cupy


def _check(out, x, axis=-1, tol=1e-6):
    err = relative_error(out, softmax_reference(x, axis=axis))
    assert err < tol, err


@pytest.mark.gpu
def test_torch_side_stream_with_a_long_producer():
    """The producer's work sits on a side stream behind a long kernel; softmax
    must be ordered after it (it runs on torch's current stream), and the
    result usable in order on that stream."""
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    for trial in range(6):
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)  # ~10 ms of spinning ahead of the producer
            t = torch.randn(97, 20_011, device="cuda") * (trial + 1)
            t[3, ::3] = float("-inf")
            y = softmax_lab.softmax(t)
            out = torch.full_like(t, float("nan"))
            softmax_lab.softmax(t, out=out)
            expected = torch.softmax(t.double(), dim=1)
            d1 = (torch.as_tensor(y, device="cuda").double() - expected).abs().max()
            d2 = (out.double() - expected).abs().max()
        side.synchronize()
        assert float(d1) < 1e-6 and float(d2) < 1e-6, (trial, float(d1), float(d2))


@pytest.mark.gpu
def test_explicit_stream_argument():
    cp = _cp()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.random.standard_normal((33, 5001), dtype=cp.float32)
    y = softmax_lab.softmax(x, stream=s)
    s.synchronize()
    _check(y, x)


@pytest.mark.gpu
def test_empty_arrays_with_out():
    cp = _cp()
    for shape in ((0, 5), (5, 0), (0,), (2, 0, 3)):
        out = cp.empty(shape, cp.float32)
        assert softmax_lab.softmax(cp.empty(shape, cp.float32), out=out) is out


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS + ["auto"])
def test_valid_aliasing_is_accepted_and_correct(name):
    cp = _cp()
    b = cp.random.standard_normal((64, 200), dtype=cp.float32)
    x = b[:, :100].copy()
    softmax_lab.softmax(b[:, :100], variant=name, out=b[:, 100:])
    _check(b[:, 100:], x)
    b = cp.random.standard_normal((64, 300), dtype=cp.float32)
    x = b[::2].copy()
    softmax_lab.softmax(b[::2], variant=name, out=b[1::2])
    _check(b[1::2], x)
    v = cp.random.standard_normal(5000, dtype=cp.float32)
    ref = softmax_reference(v[None, :])
    softmax_lab.softmax(v[None, :], variant=name, out=v.reshape(1, -1))
    assert relative_error(v[None, :], ref) < 1e-6
    b = cp.random.standard_normal((8, 101), dtype=cp.float32)
    with pytest.raises(ValueError, match="overlaps x"):
        softmax_lab.softmax(b[:, 1:], variant=name, out=b[:, :100])
    x = cp.random.standard_normal((7, 301), dtype=cp.float32)
    out = cp.full((301, 7), cp.nan, dtype=cp.float32).T  # no unit-stride rows: filled by a copy
    softmax_lab.softmax(x, variant=name, out=out)
    _check(out, x)


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [1, 2, 3])
def test_misaligned_pointer_is_refused_and_the_gpu_stays_usable(offset):
    cp = _cp()
    buf = cp.zeros(4 * 1000 + 4, dtype=cp.uint8)
    bad = buf[offset : offset + 4000].view(cp.float32).reshape(10, 100)
    with pytest.raises(ValueError, match="not aligned"):
        softmax_lab.softmax(bad)
    good = cp.random.standard_normal((10, 100), dtype=cp.float32)
    with pytest.raises(ValueError, match="out is not aligned"):
        softmax_lab.softmax(good, out=bad)
    _check(softmax_lab.softmax(good), good)
    cp.cuda.Device().synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_subnormal_outputs_are_kept_as_torch_keeps_them(name):
    torch = pytest.importorskip("torch")
    cp = _cp()
    for row in ([0.0, -90.0], [0.0, -90.0, -100.0, -87.5, 1.0, -103.0]):
        x = cp.asarray([row], dtype=cp.float32)
        y = softmax_lab.softmax(x, variant=name)
        ref = softmax_reference(x)
        expected = torch.softmax(torch.as_tensor(x, device="cuda"), dim=1)
        got = cp.asnumpy(y)[0]
        assert np.all(got[1:3] > 0) and np.all(got[1:3] < np.finfo(np.float32).tiny)  # subnormal, not 0
        assert np.allclose(got, cp.asnumpy(ref)[0], rtol=1e-3, atol=1e-44)
        assert np.allclose(got, expected.cpu().numpy()[0], rtol=1e-3, atol=1e-44)


@pytest.mark.gpu
def test_threads_compile_a_new_module_once(tmp_path, monkeypatch):
    cp = _cp()
    monkeypatch.setenv("SOFTMAX_LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(loader, "_modules", {})
    monkeypatch.setattr(api, "_launchers", {})
    builds = []
    real = loader.nvrtc_cubin
    monkeypatch.setattr(loader, "nvrtc_cubin", lambda *a, **k: builds.append(a) or real(*a, **k))
    x = cp.random.standard_normal((16, 3001), dtype=cp.float32)
    start = threading.Barrier(8)
    outs, errors = [], []

    def call():
        start.wait()
        try:
            outs.append(softmax_lab.softmax(x, variant="two_pass"))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=call) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(outs) == 8
    assert [b[0] for b in builds] == ["two_pass.cu"]
    for out in outs:
        _check(out, x)


def test_a_prepared_launch_binds_a_context_only_where_the_driver_refuses(monkeypatch):
    """A refused launch in a thread without a context binds the device's and launches again;
    a refusal with a context current is the caller's error; a launch that goes through asks
    for nothing."""
    from types import SimpleNamespace

    from softmax_lab.variants.base import PreparedLaunch

    class Refused(Exception):
        pass

    cp = _cp()
    driver, runtime = cp.cuda.driver, cp.cuda.runtime
    state = {"context": 0, "refuse": 1, "launches": [], "bound": 0}

    def launch_kernel(*args):
        if state["refuse"]:
            state["refuse"] -= 1
            raise Refused()
        state["launches"].append(args[8])

    def ctx_get_current():
        state["asked"] = state.get("asked", 0) + 1
        return state["context"]

    monkeypatch.setattr(driver, "CUDADriverError", Refused)
    monkeypatch.setattr(driver, "launchKernel", launch_kernel)
    monkeypatch.setattr(driver, "ctxGetCurrent", ctx_get_current)
    monkeypatch.setattr(runtime, "getDevice", lambda: 0)
    monkeypatch.setattr(runtime, "setDevice", lambda d: state.update(bound=state["bound"] + 1))
    launch = PreparedLaunch(SimpleNamespace(ptr=1), (1,), (32,), (0, 0, 7))
    launch(SimpleNamespace(ptr=5), 11, 12)
    assert state["launches"] == [5] and state["bound"] == 1 and state["asked"] == 1
    assert list(launch._values) == [11, 12, 7]
    launch(SimpleNamespace(ptr=6), 13)
    assert state["launches"] == [5, 6] and state["asked"] == 1  # not asked when the launch goes through
    state.update(context=1, refuse=1)
    with pytest.raises(Refused):
        launch(SimpleNamespace(ptr=7), 14)
    assert state["bound"] == 1


@pytest.mark.gpu
def test_a_prepared_launch_from_a_thread_without_a_context():
    """A thread whose first CUDA call is a prepared launch has no current context: the launch
    binds the device's and runs (it asks only when the driver refuses, not on every call)."""
    cp = _cp()
    x = cp.random.standard_normal((16, 3001), dtype=cp.float32)
    y = cp.full_like(x, np.nan)
    shape = Shape(16, 3001, 3001, 3001, x.data.ptr % 128, y.data.ptr % 16, 4, "float32", "softmax")
    _, launch = api.launcher_for(shape, softmax_lab.device_info(), "two_pass")
    cp.cuda.runtime.deviceSynchronize()
    seen = []

    def call():
        seen.append(cp.cuda.driver.ctxGetCurrent())
        launch(x.data.ptr, y.data.ptr, cp.cuda.Stream.null)
        cp.cuda.runtime.deviceSynchronize()

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert seen == [0]  # the thread had no context when it launched
    _check(y, x)


@pytest.mark.gpu
def test_forced_variant_that_cannot_run_is_a_value_error():
    cp = _cp()
    dev = softmax_lab.device_info()
    v = softmax_lab.get_variant("single_read")
    reason = v.unsupported_reason(10, dev)
    x = cp.random.standard_normal((2, 10), dtype=cp.float32)
    if reason:
        with pytest.raises(ValueError):
            softmax_lab.softmax(x, variant="single_read")
    too_long = int(min(v.max_cols(dev), 1 << 24)) + 1
    with pytest.raises(ValueError):
        softmax_lab.softmax(cp.ones((1, too_long), cp.float32), variant="single_read")


@pytest.mark.gpu
def test_bfloat16_torch_tensor_is_taken_and_unsupported_torch_dtypes_are_named():
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 3, device="cuda", dtype=torch.bfloat16)
    y = softmax_lab.softmax(x)  # torch in, torch out
    assert isinstance(y, torch.Tensor) and y.dtype == torch.bfloat16 and y.shape == x.shape
    with pytest.raises(TypeError, match="float64"):
        softmax_lab.softmax(torch.randn(2, 3, device="cuda", dtype=torch.float64))
    with pytest.raises(TypeError, match="CPU|cpu"):
        softmax_lab.softmax(torch.randn(2, 3))


def _two_devices():
    cp = _cp()
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    return cp


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS + ["auto"])
def test_input_on_another_device_runs_there(name):
    cp = _two_devices()
    with cp.cuda.Device(1):
        x = cp.random.standard_normal((40, 70_001), dtype=cp.float32)
        out = cp.full(x.shape, cp.nan, dtype=cp.float32)
    assert cp.cuda.runtime.getDevice() == 0
    y = softmax_lab.softmax(x, variant=name)
    softmax_lab.softmax(x, variant=name, out=out)
    assert y.device.id == 1 and cp.cuda.runtime.getDevice() == 0
    with cp.cuda.Device(1):
        cp.cuda.Device(1).synchronize()
        _check(y, x)
        _check(out, x)


@pytest.mark.gpu
def test_input_and_out_on_different_devices_is_refused():
    cp = _two_devices()
    x = cp.random.standard_normal((4, 100), dtype=cp.float32)
    with cp.cuda.Device(1):
        out = cp.empty((4, 100), cp.float32)
    with pytest.raises(ValueError, match="device"):
        softmax_lab.softmax(x, out=out)


@pytest.mark.gpu
def test_torch_tensor_on_the_second_device():
    torch = pytest.importorskip("torch")
    _two_devices()
    side = torch.cuda.Stream(device=1)
    with torch.cuda.device(1), torch.cuda.stream(side):
        torch.cuda._sleep(10_000_000)
        t = torch.randn(50, 30_001, device="cuda:1")
        y = softmax_lab.softmax(t)
        expected = torch.softmax(t.double(), 1)
        diff = (torch.as_tensor(y, device="cuda:1").double() - expected).abs().max()
    side.synchronize()
    assert float(diff) < 1e-6


def _fresh_8x1031(kind):
    """(new, to_cp): a fresh 8 x 1031 float32 standard-normal draw of `kind` (cupy or torch) per
    call, and its CuPy view."""
    cp = _cp()
    if kind == "torch":
        torch = pytest.importorskip("torch")
        return (lambda: torch.randn(8, 1031, device="cuda")), cp.asarray
    return (lambda: cp.random.standard_normal((8, 1031), dtype=cp.float32)), (lambda a: a)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
def test_repeated_calls_reuse_the_plan_and_stay_correct(kind):
    cp = _cp()
    api._calls.clear()
    new, to_cp = _fresh_8x1031(kind)
    y = new()
    for trial in range(3):
        x = new()
        ref = softmax_reference(to_cp(x))
        assert softmax_lab.softmax(x, out=y) is y
        assert relative_error(to_cp(y), ref) < 1e-6
        assert relative_error(to_cp(softmax_lab.softmax(x, axis=-1)), ref) < 1e-6
    assert len(api._calls) == 2  # fresh x each time, same layouts: one plan with out, one without
    with pytest.raises(TypeError, match="axis must be an integer"):
        softmax_lab.softmax(x, axis=True, out=y)  # the cached axis=1 plan is not taken
    with pytest.raises(ValueError, match="unknown variant"):
        softmax_lab.softmax(x, out=y, variant="fastest")
    if kind == "cupy":  # the same layouts at another offset between x and out: checked afresh
        b = cp.random.standard_normal((8, 2000), dtype=cp.float32)
        x = b[:, :1000].copy()
        softmax_lab.softmax(b[:, :1000], out=b[:, 1000:])
        _check(b[:, 1000:], x)
        with pytest.raises(ValueError, match="overlaps x"):
            softmax_lab.softmax(b[:, :1000], out=b[:, 1:1001])
        with pytest.raises(ValueError, match="overlaps x"):  # the layouts of the call that passed, overlapping
            softmax_lab.softmax(b[:, 4:1004], out=b[:, 1000:])


@pytest.mark.gpu
def test_an_explicit_cupy_stream_takes_the_repeated_call_path_on_that_stream(monkeypatch):
    """stream=s (a CuPy stream, as the bench passes) is a lookup and a launch on s after the
    first call, not ~50 us of checks per call; inputs made on s are read after they are made."""
    cp = _cp()
    api._calls.clear()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.random.standard_normal((8, 1031), dtype=cp.float32)
        y = cp.empty_like(x)
    softmax_lab.softmax(x, out=y, stream=s)
    s.synchronize()
    _check(y, x)
    assert len(api._calls) == 1
    monkeypatch.setattr(api, "_softmax", lambda *a, **k: pytest.fail("the checked path was taken"))
    for _ in range(3):
        with s:
            x = cp.random.standard_normal((8, 1031), dtype=cp.float32) * 3
        assert softmax_lab.softmax(x, out=y, stream=s) is y
        s.synchronize()
        _check(y, x)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cupy", "torch"])
@pytest.mark.parametrize("op", ["softmax_backward", "log_softmax_backward"])
def test_repeated_backward_calls_reuse_the_plan_and_stay_correct(kind, op):
    """Backward calls take the repeated-call path too: a plan per layout and aliasing (out new,
    out = dy, out = y, dy = y), right every time on fresh data, and an out that overlaps dy (or y)
    where the cached call's did not is still refused."""
    cp = _cp()
    api._calls.clear()
    f = getattr(softmax_lab, op)
    ref = softmax_backward_reference if op == "softmax_backward" else log_softmax_backward_reference
    scale = (lambda a: a) if op == "softmax_backward" else cp.log
    new, to_cp = _fresh_8x1031(kind)
    torch = pytest.importorskip("torch") if kind == "torch" else None

    def forward():
        return scale(softmax_reference(to_cp(new())).astype(cp.float32))

    def check(dx, dy, y):
        err = backward_error(to_cp(dx).astype(cp.float64), ref(dy, y), backward_scale(dy, y, op))
        assert err < 1e-6, err

    for trial in range(3):
        y, dy, out = forward(), new(), new()
        y = y if kind == "cupy" else torch.as_tensor(y, device="cuda")
        y64, dy64 = to_cp(y).astype(cp.float64), to_cp(dy).astype(cp.float64)
        check(f(dy, y), dy64, y64)
        assert f(dy, y, out=out) is out
        check(out, dy64, y64)
        check(f(y, y), y64, y64)  # dy is y
        assert f(dy, y, out=dy) is dy  # in place on dy
        check(dy, dy64, y64)
        assert f(to_cp(dy64).astype(cp.float32) if kind == "cupy" else torch.as_tensor(dy64, device="cuda").float(),
                 y, out=y) is y  # in place on y
        check(y, dy64, y64)
    assert len(api._calls) == 4, list(api._calls)  # out new (also for dy = y), out clear, out = dy, out = y
    if kind == "cupy":  # cached with out clear of dy; the same layouts with out overlapping dy: checked afresh
        b = cp.random.standard_normal((8, 3000), dtype=cp.float32)
        b[:, :1000] = forward()[:, :1000]
        f(b[:, 1000:2000], b[:, :1000], out=b[:, 2000:])
        with pytest.raises(ValueError, match="overlaps dy"):
            f(b[:, 1000:2000], b[:, :1000], out=b[:, 1004:2004])


class StreamedCai:
    """A __cuda_array_interface__ v3 producer whose pending work is on `stream`."""

    def __init__(self, a, stream):
        cai = dict(a.__cuda_array_interface__)
        cai.update(version=3, stream=stream.ptr)
        self.__cuda_array_interface__ = cai


@pytest.mark.gpu
def test_cai_v3_producer_stream_is_waited_for():
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    s = arrays.external_stream(side.cuda_stream, torch.cuda.current_device())  # CuPy 14 deprecates ExternalStream
    for trial in range(4):
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)
            t = torch.randn(64, 9_999, device="cuda")
        y = softmax_lab.softmax(StreamedCai(t, s))  # runs on CuPy's stream, after side's work
        expected = torch.softmax(t.double(), 1)
        torch.cuda.synchronize()
        assert float((torch.as_tensor(y, device="cuda").double() - expected).abs().max()) < 1e-6, trial


@pytest.mark.gpu
def test_torch_raw_stream_is_the_current_stream():
    """The fast lookup of torch's current stream names the same stream as torch's public API."""
    torch = pytest.importorskip("torch")
    from softmax_lab.arrays import torch_raw_stream

    side = torch.cuda.Stream()
    assert torch_raw_stream(0) == torch.cuda.current_stream(0).cuda_stream
    with torch.cuda.stream(side):
        assert torch_raw_stream(0) == side.cuda_stream != torch.cuda.default_stream(0).cuda_stream


@pytest.mark.gpu
def test_torch_result_for_an_explicit_stream_is_ordered_on_that_stream():
    """The path that allocates a new torch result with stream= current (not torch's current stream)
    runs and gives the right result, and leaves torch's current stream as it was; the race it
    prevents is not provoked here."""
    torch = pytest.importorskip("torch")
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    for trial in range(4):
        t = torch.randn(64, 9_999, device="cuda") * (trial + 1)
        torch.cuda.synchronize()
        current = other if trial % 2 else torch.cuda.default_stream()
        with torch.cuda.stream(current):
            y = softmax_lab.softmax(t, stream=side)
            assert torch.cuda.current_stream() == current
        assert isinstance(y, torch.Tensor)
        side.synchronize()
        assert float((y.double() - torch.softmax(t.double(), 1)).abs().max()) < 1e-6, trial
