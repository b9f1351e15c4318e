"""softmax(), log_softmax() and their backward passes: validation, layout, streams and
devices, and dispatch to a variant.

A call has three steps:

1. `describe()` reads what the call needs of each array (pointer, shape,
   byte strides, dtype, device) without touching the GPU, and raises a clear
   TypeError or ValueError for anything softmax cannot take.
2. `plan_call()` turns that into rows of unit stride: (rows, cols, ld_x,
   ld_y), whether x must first be copied into a contiguous buffer, and
   whether out may be written (element-disjoint from x, or the same elements
   in the same places).  It is pure Python: tests/test_fuzz.py checks it on
   random layouts with a fake device.
   A backward call plans y (the forward output, in x's place) and dy
   alike, each against out: out may be exactly y's or dy's elements, or
   share none with either.
3. The variant's launcher runs on the right stream and device.  Launchers
   depend only on (device, shape with its dtype and op, variant), so they are
   cached: a steady-state call is a dictionary lookup plus a launch.

Dtypes: float32, float16 and bfloat16, the same in and out.  NumPy and CuPy
have no bfloat16: it arrives as a torch tensor, is described here by the
stand-in dtype BFLOAT16 (2 bytes), is handled inside as CuPy int16 views of
the same memory, and a new bfloat16 result is returned as a torch tensor.
"""

from __future__ import annotations

import contextlib
import threading

import cupy
import numpy as np

from .arrays import (
    BFLOAT16,
    DTYPE_NAMES,
    SUPPORTED,
    ArrayView,
    CallPlan,
    check_axis,
    check_same_device,
    current_stream,
    describe,
    device_of,
    dtype_name,
    extent,
    plan_call,
    resolve_stream,
    torch_external_stream,
    torch_raw_stream,
    unsupported_dtype,
    wait_for_producer,
)
from .device import DeviceInfo, device_info, require_device
from .problem import Shape
from .scratch import CallMemory
from .variants import CannotRun, Launcher, Variant, decide, get_variant
from .variants.resources import LINE_BYTES

# ------------------------------------------------------------------ launchers
_launchers: dict[tuple, tuple[Variant, Launcher]] = {}
_launchers_lock = threading.Lock()


def launcher_for(shape: Shape, dev: DeviceInfo, variant: str) -> tuple[Variant, Launcher]:
    """The (variant, launcher) for a shape on a device, prepared once.

    variant="auto" tries auto's order (variants.decide) and takes the first that can
    run here; a variant named explicitly that cannot raises CannotRun (a
    ValueError) before any launch."""
    key = (dev.id, shape, variant)
    hit = _launchers.get(key)
    if hit is not None:
        return hit
    with _launchers_lock:
        hit = _launchers.get(key)
        if hit is None:
            hit = _prepare(shape, dev, variant)
            _launchers[key] = hit
    return hit


def _prepare(shape: Shape, dev: DeviceInfo, variant: str) -> tuple[Variant, Launcher]:
    if variant != "auto":
        v = get_variant(variant)
        return v, v.prepare(shape, dev)
    reasons = []
    for v, plan in decide(shape, dev):
        try:
            return v, v.prepare(shape, dev, plan)
        except CannotRun as e:
            reasons.append(str(e))
    raise AssertionError(f"no variant can run {shape} on {dev.name}: {reasons}")  # two_pass runs anywhere


# ------------------------------------------------------------------ the call
def softmax(x, axis: int = -1, *, variant: str = "auto", out=None, stream=None):
    """softmax(x) along `axis`, computed on the GPU in float32, as torch.softmax.

    x: float32, float16 or bfloat16, any number (>= 1) of dimensions; a CuPy
    array, a torch CUDA tensor, or any GPU array with __cuda_array_interface__
    or DLPack, or a legacy DLPack capsule (taken zero-copy, and a capsule is
    consumed, as cupy.from_dlpack consumes it); bfloat16 as a torch tensor.  The result has
    x's dtype, rounded once from float32.  Rows along `axis` with a unit
    element stride and a uniform row stride (any contiguous array, slices
    such as x[:, 1:]) are read in place; any other layout is first copied
    into a contiguous buffer.

    variant: "auto" or a name from variants().
    out: optional array of x's dtype and shape (CuPy, torch or
      __cuda_array_interface__) on x's device, whose elements are distinct.
      It may share no element with x, or be exactly x's elements in the same
      places (in place, also through a view whose strides differ only on
      axes of length 1).  Rows of unit stride are written in place; any other
      layout is filled by a copy after the kernel.  Returns `out`, or a new
      array of the caller's type on x's device: a torch tensor (from torch's
      allocator) for a torch x, a CuPy array for any other.
    stream: where the work runs.  Default: for a torch tensor torch's current
      stream on x's device, otherwise CuPy's current stream on x's device; a
      cupy.cuda.Stream, torch.cuda.Stream or raw cudaStream_t handle
      overrides it.  The work is ordered after what that stream already
      holds, and the result may be used in order on it.  Work runs on x's
      device, whatever the current device is.
    CUDA graphs: a call may be captured (torch.cuda.graph, or
      cupy.cuda.Stream.begin_capture) and replayed.  Memory the call needs
      for itself (scratch, copies of layouts) is then the graph's own, never
      given back to a pool while the graph can replay.  A new result is
      allocated as any captured allocation is: from the graph's private
      pool for a torch x; from CuPy's pool for a CuPy x, so keep the
      returned array (or pass out=) for as long as the graph is replayed.

    Raises, before any launch and without writing anything:
      TypeError: x or out is not a GPU array, or has a dtype other than
        float32, float16 or bfloat16 (named); out's dtype is not x's; axis is
        not an integer; stream is of an unknown type.
      ValueError: x is 0-d; axis is out of range; out has another shape,
        lives on another device, has overlapping elements, or partly overlaps
        x; a pointer or stride is not aligned to the element size; variant is
        unknown, or cannot run this shape, dtype or op on this device (auto
        never raises for that: it falls back to a variant that can).
      NoDeviceError (a RuntimeError): no CUDA device is usable.
    """
    return _call(x, axis, variant, out, stream, "softmax")


def log_softmax(x, axis: int = -1, *, variant: str = "auto", out=None, stream=None):
    """log_softmax(x) along `axis`, as torch.log_softmax: (x - max) - log(sum
    e^(x - max)) in float32, never the log of the softmax, rounded once to x's
    dtype.  -inf entries give -inf; a row of all -inf, or with a NaN or +inf,
    gives NaN.  Arguments, layouts, streams, devices, aliasing, errors and
    results as softmax()."""
    return _call(x, axis, variant, out, stream, "log_softmax")


def softmax_backward(dy, y, axis: int = -1, *, variant: str = "auto", out=None, stream=None):
    """The gradient of softmax: dx = y * (dy - sum(dy * y)) along `axis`, where y =
    softmax(x) and dy is the gradient of the loss with respect to y (as
    torch._softmax_backward_data).

    dy and y: the same dtype (float32, float16 or bfloat16), shape and
    device; they may be the same array.  Float32 arithmetic, the result
    rounded once to that dtype.  out may be exactly dy's or y's elements (in
    place), or share no element with either.  Layouts, streams (y's kind
    decides: torch's current stream for a torch y), devices, results and
    errors as softmax(), and: TypeError when dy's dtype is not y's,
    ValueError when its shape or device is not y's.  Variants: those with a
    backward pass (three_pass has none: CannotRun).  A repeated call takes the
    forward's fast path (the plan cached by layouts, alignments and aliasing)."""
    return _call(y, axis, variant, out, stream, "softmax_backward", dy)


def log_softmax_backward(dy, y, axis: int = -1, *, variant: str = "auto", out=None, stream=None):
    """The gradient of log_softmax: dx = dy - exp(y) * sum(dy) along `axis`, where
    y = log_softmax(x) (as torch._log_softmax_backward_data).  Arguments,
    rules and errors as softmax_backward()."""
    return _call(y, axis, variant, out, stream, "log_softmax_backward", dy)


def _call(x, axis, variant, out, stream, op: str, g=None):
    """A repeated call's fast path where it applies, else the checked call."""
    fast = _repeat_call(x, axis, variant, out, op, g, stream)
    return fast if fast is not _MISS else _softmax(x, axis, variant, out, stream, op, g)


def _softmax(x, axis, variant: str, out, stream, op: str = "softmax", g=None):
    """One checked call.  Backward ops (g = dy given): x is the forward output y."""
    if variant != "auto":
        get_variant(variant)  # ValueError for an unknown name
    name = "x" if g is None else "y"
    xv = describe(x, name)
    if xv.dtype not in SUPPORTED:
        raise unsupported_dtype(name, xv.dtype)
    gv = ov = None
    if g is not None:
        gv = describe(g, "dy")
        if gv.kind != "dlpack" and gv.dtype not in SUPPORTED:
            raise unsupported_dtype("dy", gv.dtype)
    if out is not None:
        ov = describe(out, "out")
    if all(a is None or a.kind != "dlpack" for a in (xv, gv, ov)):
        _check_like(xv, gv, ov, name)
        _check_shapes(xv, gv, ov, axis, name)  # before asking for a device: these need none
    require_device()
    if xv.kind == "dlpack":
        x = _from_dlpack(x)
        xv = describe(x, name)
    if g is not None and gv.kind == "dlpack":
        g = _from_dlpack(g)
        gv = describe(g, "dy")
    if out is not None and ov.kind == "dlpack":
        out = _from_dlpack(out)
        ov = describe(out, "out")
    _check_like(xv, gv, ov, name)
    axis = _check_shapes(xv, gv, ov, axis, name)
    device = device_of(xv)
    check_same_device(device, ((gv, "dy"), (ov, "out")), name)
    run_stream = resolve_stream(stream, xv, device)
    for a in (xv, gv, ov):
        wait_for_producer(a, run_stream, device)
    if xv.size == 0:
        if out is not None:
            return out
        with cupy.cuda.Device(device):
            return _new_output(xv.kind == "torch", xv.shape, xv.dtype, device, -1, run_stream)[0]

    plan = plan_call(xv, ov, axis, name)
    g_plan = None if g is None else plan_call(gv, ov, axis, "dy")
    on_device = cupy.cuda.Device(device) if device != cupy.cuda.runtime.getDevice() else contextlib.nullcontext()
    with on_device:
        return _execute(x, xv, out, ov, plan, device, variant, run_stream, op, g, gv, g_plan)


def _storage(dtype: np.dtype) -> np.dtype:
    """The CuPy dtype that holds `dtype`'s bits: itself, or int16 for bfloat16."""
    return np.dtype(np.int16) if dtype == BFLOAT16 else dtype


def _as_cupy(a, dtype: np.dtype) -> cupy.ndarray:
    """A CuPy view of a GPU array's memory (a bfloat16 torch tensor: an int16 view;
    a torch tensor that requires grad: its detached view, as the kernels read it)."""
    if isinstance(a, cupy.ndarray):
        return a
    if getattr(a, "requires_grad", False):
        a = a.detach()
    if dtype == BFLOAT16:
        import torch

        return cupy.from_dlpack(a.view(torch.int16))
    return cupy.asarray(a)


def _new_output(torch_tensor: bool, moved: tuple, dtype: np.dtype, device: int, axis: int | None, stream):
    """(the result, its data pointer): a new array of shape `moved` (rows last), in
    the caller's type: a torch tensor from torch's allocator for a torch x (bfloat16
    included), otherwise a CuPy array from CuPy's pool on `stream`; seen with the
    rows moved back to `axis` (None: as it is, for a result of one value per row).
    Called with `device` current (torch.cuda.set_stream also sets the stream's device)."""
    return _output_maker(torch_tensor, moved, dtype, device, axis)(stream)


def _output_maker(torch_tensor: bool, moved: tuple, dtype: np.dtype, device: int, axis: int | None):
    """make(stream, on_torch_stream=None): _new_output's result for these arguments, with what
    does not change from call to call (the dtype's and device's objects) worked out once, for
    a repeated call; on_torch_stream: whether `stream` is torch's current one, where the
    caller knows (None: asked)."""
    if axis is not None and axis == len(moved) - 1:
        axis = None  # rows already last: no view to make
    if torch_tensor:
        import torch

        torch_dtype, where = getattr(torch, DTYPE_NAMES[dtype]), torch.device("cuda", device)

        def make_tensor(stream, on_torch_stream: bool | None = None):
            if on_torch_stream is None:
                on_torch_stream = stream.ptr == torch_raw_stream(device)
            if on_torch_stream:
                y = torch.empty(moved, dtype=torch_dtype, device=where)
            else:
                # torch's allocator hands out a block once torch's current stream is past its last
                # use: a result for another stream is allocated with that stream current (set and
                # restored directly: torch.cuda.stream()'s device checks cost more than a small
                # call's launch)
                previous = torch.cuda.current_stream(device)
                torch.cuda.set_stream(torch_external_stream(stream.ptr, device))
                try:
                    y = torch.empty(moved, dtype=torch_dtype, device=where)
                finally:
                    torch.cuda.set_stream(previous)
            return (y if axis is None else y.movedim(-1, axis)), y.data_ptr()

        return make_tensor
    storage = _storage(dtype)

    def make_array(stream, on_torch_stream: bool | None = None):
        with stream:
            y = cupy.empty(moved, dtype=storage)
        return (y if axis is None else cupy.moveaxis(y, -1, axis)), y.data.ptr

    return make_array


def _check_like(xv: ArrayView, gv: ArrayView | None, ov: ArrayView | None, name: str = "x") -> None:
    """dy (backward calls) and out must have x's dtype."""
    for a, what in ((gv, "dy"), (ov, "out")):
        if a is not None and a.dtype != xv.dtype:
            raise TypeError(f"{what} must be {dtype_name(xv.dtype)}, like {name}; got {dtype_name(a.dtype)}")


def _check_shapes(xv: ArrayView, gv: ArrayView | None, ov: ArrayView | None, axis, name: str = "x") -> int:
    ndim = len(xv.shape)
    if ndim == 0:
        raise ValueError("softmax needs an array of at least one dimension; got a 0-d array")
    axis = check_axis(axis, ndim)
    for a, what in ((gv, "dy"), (ov, "out")):
        if a is not None and a.shape != xv.shape:
            raise ValueError(f"{what} has shape {a.shape}; expected {xv.shape}, {name}'s shape")
    return axis


def _input_ptr(a, av: ArrayView, plan: CallPlan, memory: CallMemory) -> int:
    """Row 0 of the input: a itself, or where plan.copy_input a contiguous copy with
    the rows last, in the call's memory."""
    if not plan.copy_input:
        return plan.x_ptr
    with memory.stream:  # a DLPack view (bfloat16) taken on the call's stream: no wait on another
        moved = cupy.moveaxis(_as_cupy(a, av.dtype), plan.axis, -1)
        copy = memory.empty(moved.shape, moved.dtype)
        cupy.copyto(copy, moved)
    return copy.data.ptr


def _execute(x, xv: ArrayView, out, ov: ArrayView | None, plan: CallPlan, device: int, variant: str, stream,
             op: str = "softmax", g=None, gv: ArrayView | None = None,
             g_plan: CallPlan | None = None):
    # The copies of layouts without uniform rows live for the call (softmax_lab.scratch:
    # back to CuPy's pool in stream order, or under graph capture the graph's own memory).
    with CallMemory(stream) as memory:
        x_ptr = _input_ptr(x, xv, plan, memory)
        g_ptr = ld_g = 0
        if g is not None:
            g_ptr = _input_ptr(g, gv, g_plan, memory)
            ld_g = g_plan.ld_x
        result = out
        y_ptr = plan.y_ptr
        if y_ptr is None:
            moved = xv.shape[: plan.axis] + xv.shape[plan.axis + 1 :] + (plan.cols,)
            if plan.copy_output:  # a temporary, filled into out by a copy below
                temporary = memory.empty(moved, _storage(xv.dtype))
                result, y_ptr = cupy.moveaxis(temporary, -1, plan.axis), temporary.data.ptr
            else:  # the result: a torch tensor for a torch x
                result, y_ptr = _new_output(xv.kind == "torch", moved, xv.dtype, device, plan.axis, stream)
        shape = Shape(plan.rows, plan.cols, plan.ld_x, plan.ld_y, x_ptr % LINE_BYTES, y_ptr % 16,
                      xv.dtype.itemsize, DTYPE_NAMES[xv.dtype], op, ld_g, g_ptr % LINE_BYTES)
        _, launch = launcher_for(shape, device_info(device), variant)
        if g is not None:
            launch(x_ptr, y_ptr, stream, g_ptr)
        else:
            launch(x_ptr, y_ptr, stream)
        if not plan.copy_input and not plan.copy_output and xv.kind in ("cupy", "torch") and \
                (g is None or not g_plan.copy_input):
            _remember(xv, ov, plan, device, variant, launch, op, gv)
        if plan.copy_output:
            with stream:
                cupy.copyto(_as_cupy(out, ov.dtype), result)
            return out
        return result


# ------------------------------------------------------------------ repeated calls
# A call whose arrays have the same type, shape, strides, dtype, device and
# alignment as an earlier call that needed no copies has the same plan, if
# its aliasing is the same too: out is x's own pointer again, or out's extent
# lies clear of x's (backward calls: the same for dy, the second input; the
# inputs themselves are only read, so how they overlap does not matter).
# Such a call skips straight to the launch; any other (an out that overlaps
# an input's extent) takes the checked path.
_MISS = object()
_calls: dict[tuple, tuple] = {}
_CALLS_MAX = 4096
_torch_tensor = _torch_tensor_empty_like = None  # torch.Tensor and torch.empty_like, once a torch tensor has been seen


def _key(a) -> tuple | None:
    """(ptr, shape, strides, dtype, device) of a plain CuPy array or torch tensor."""
    t = type(a)
    if t is cupy.ndarray:
        data = a.data
        return data.ptr, a.shape, a.strides, a.dtype, data.device_id
    if t is _torch_tensor and a.is_cuda:
        return a.data_ptr(), a.shape, a.stride(), a.dtype, a.get_device()  # get_device: no torch.device made
    return None


def _keys(x, stream, a, b) -> tuple | None:
    """(_key of x, of a, of b: None for one not given), or None where an array is not a
    plain CuPy array or torch tensor, or `stream` is another device's."""
    kx = _key(x)
    if kx is None or (stream is not None and getattr(stream, "device_id", -1) not in (-1, kx[4])):
        return None
    ka = None if a is None else _key(a)
    kb = None if b is None else _key(b)
    if (ka is None and a is not None) or (kb is None and b is not None):
        return None
    return kx, ka, kb


def _call_key(kx: tuple, ko: tuple | None, axis: int, variant: str, op: str = "softmax",
              kg: tuple | None = None) -> tuple:
    """Layouts, dtypes, devices and alignments, the op, and whether out is an
    input's pointer: with disjoint extents, what decides a plan (kg: dy's, for
    backward calls)."""
    x_ptr, *x_layout = kx
    key = (*x_layout, axis, variant, op, x_ptr % LINE_BYTES)
    if kg is not None:
        g_ptr, *g_layout = kg
        key += (*g_layout, g_ptr % LINE_BYTES)
    if ko is not None:
        y_ptr, *o_layout = ko
        key += (*o_layout, y_ptr & 15, y_ptr == x_ptr, kg is not None and y_ptr == kg[0])
    return key


def _clear(a_ptr: int, a_lo: int, a_hi: int, y_ptr: int, o_lo: int, o_hi: int) -> bool:
    """Whether out (at y_ptr) is an input's own pointer or lies clear of its extent."""
    return y_ptr == a_ptr or not (y_ptr + o_lo < a_ptr + a_hi and a_ptr + a_lo < y_ptr + o_hi)


def _repeat_call(x, axis: int, variant: str, out, op: str = "softmax", g=None, stream=None):
    """A call whose plan is cached: a lookup, the extents' check and the launch, on
    `stream` (a cupy.cuda.Stream of x's device) or the current stream; _MISS where
    the checked path must decide (also for an axis, variant or stream of a type the
    checks would refuse)."""
    if type(axis) is not int or type(variant) is not str or \
            (stream is not None and not isinstance(stream, cupy.cuda.Stream)):
        return _MISS
    keys = _keys(x, stream, g, out)
    if keys is None:
        return _MISS
    kx, kg, ko = keys
    if axis < 0:
        axis += len(kx[1])  # an axis still out of range finds no entry
    hit = _calls.get(_call_key(kx, ko, axis, variant, op, kg))
    if hit is None or kx[4] != cupy.cuda.runtime.getDevice():
        return _MISS
    call, x_lo, x_hi, o_lo, o_hi, g_lo, g_hi = hit
    x_ptr = kx[0]
    g_ptr = None if kg is None else kg[0]
    if ko is None:
        return call(x, x_ptr, None, None, g_ptr, stream)
    y_ptr = ko[0]
    if not _clear(x_ptr, x_lo, x_hi, y_ptr, o_lo, o_hi) or \
            (kg is not None and not _clear(g_ptr, g_lo, g_hi, y_ptr, o_lo, o_hi)):
        return _MISS  # extents overlap: check the elements
    return call(x, x_ptr, out, y_ptr, g_ptr, stream)


def _repeat_stream(stream, torch_tensor: bool, device: int):
    """(the stream a repeated call runs on, whether it is torch's current stream: None where
    that is not known): `stream` as given, else the current stream of the call's kind."""
    if stream is None:
        return current_stream(torch_tensor, device), torch_tensor
    return stream, None


def _span(a: ArrayView) -> tuple[int, int]:
    lo, hi = extent(a)
    return lo - a.ptr, hi - a.ptr


def _watch_torch() -> None:
    """Let _key take torch tensors (from the first call on one)."""
    global _torch_tensor, _torch_tensor_empty_like
    if _torch_tensor is None:
        import torch

        _torch_tensor, _torch_tensor_empty_like = torch.Tensor, torch.empty_like


def _remember(xv: ArrayView, ov: ArrayView | None, plan: CallPlan, device: int, variant: str, launch,
              op: str = "softmax", gv: ArrayView | None = None) -> None:
    x = xv.obj
    if xv.kind == "torch":
        _watch_torch()
    kx = _key(x)
    ko = None if ov is None else _key(ov.obj)
    kg = None if gv is None else _key(gv.obj)
    if kx is None or (ov is not None and ko is None) or (gv is not None and kg is None):
        return
    key = _call_key(kx, ko, plan.axis, variant, op, kg)
    torch_stream = xv.kind == "torch"
    moved = xv.shape[: plan.axis] + xv.shape[plan.axis + 1 :] + (plan.cols,)
    new_output = _output_maker(torch_stream, moved, xv.dtype, device, plan.axis)
    # a contiguous torch x with its rows last: torch.empty_like(x) is the result on torch's
    # stream, at about half torch.empty's host cost (1.7 against 3.1 µs on an H100)
    like_x = torch_stream and plan.axis == len(xv.shape) - 1 and x.is_contiguous()

    def call(x, x_ptr, out, y_ptr, g_ptr, stream=None):
        stream, on_torch_stream = _repeat_stream(stream, torch_stream, device)
        result = out
        if out is None:
            if like_x and on_torch_stream:
                result = _torch_tensor_empty_like(x)
                y_ptr = result.data_ptr()
            else:
                result, y_ptr = new_output(stream, on_torch_stream)
        if g_ptr is None:
            launch(x_ptr, y_ptr, stream)
        else:
            launch(x_ptr, y_ptr, stream, g_ptr)
        return result

    if len(_calls) >= _CALLS_MAX:
        _calls.clear()
    _calls[key] = (call, *_span(xv), *(_span(ov) if ov is not None else (0, 0)),
                   *(_span(gv) if gv is not None else (0, 0)))


def _from_dlpack(a):
    try:
        return cupy.from_dlpack(a)
    except Exception as e:  # a producer's own error: say what failed
        raise TypeError(f"could not take {type(a).__module__}.{type(a).__name__} through DLPack: {e}") from None
