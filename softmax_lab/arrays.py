"""What a call's arrays are, before any launch: describe() reads each array's pointer,
shape, byte strides, dtype and device (CuPy, __cuda_array_interface__, DLPack, a legacy
capsule) and raises a clear TypeError or ValueError for anything softmax cannot take;
plan_call() turns that into rows of unit stride and says whether x must be copied and
whether out may be written; the stream helpers find the stream a call runs on.
Pure Python but for the stream and pointer queries: tests/test_fuzz.py checks the plans
on random layouts with a fake device."""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import cupy
import numpy as np

_ACCEPTED = ("a CuPy array, or a GPU array with __cuda_array_interface__ or DLPack (torch, JAX, ...), "
             "or a DLPack capsule")
_DLPACK_GPU = (2, 13)  # kDLCUDA, kDLCUDAManaged
BFLOAT16 = np.dtype([("bfloat16", "<u2")])  # a stand-in: NumPy has no bfloat16
DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16", BFLOAT16: "bfloat16"}
SUPPORTED = tuple(DTYPE_NAMES)
_TAKES = "softmax_lab takes float32, float16 and bfloat16"
_BF16_ROUTE = "; pass bfloat16 as a torch tensor (torch.from_dlpack(x))"
_TORCH_DTYPES = {"torch.float32": np.float32, "torch.float16": np.float16, "torch.float64": np.float64,
                 "torch.bfloat16": BFLOAT16}
_OPAQUE = {"|V2": "a 2-byte type numpy does not know, such as bfloat16", "<V2": "a 2-byte type numpy does not know, "
           "such as bfloat16", "|V1": "a 1-byte type numpy does not know, such as float8"}


@dataclass(frozen=True)
class ArrayView:
    """What softmax reads of an array: no GPU memory is touched to get it.

    device is None where only the driver can tell (a __cuda_array_interface__
    pointer); obj is the caller's object (None in tests)."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: np.dtype
    device: int | None = None
    kind: str = "cupy"  # cupy | torch | cai
    obj: object = None

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class CallPlan:
    """How one call maps onto a variant's rows (pointers are absolute addresses)."""

    axis: int
    rows: int
    cols: int
    copy_input: bool  # x's layout has no uniform rows: copy it into a contiguous buffer first
    copy_output: bool  # out's layout has no uniform rows: compute into a new buffer, then copy into out
    ld_x: int  # elements between input rows (of the copy, when copy_input)
    ld_y: int  # elements between output rows (of the new buffer, when y_ptr is None)
    x_ptr: int  # row 0 of the input (of x itself unless copy_input)
    y_ptr: int | None  # row 0 of out; None: a new buffer


def dtype_name(dtype) -> str:
    if isinstance(dtype, np.dtype) and dtype in DTYPE_NAMES:
        return DTYPE_NAMES[dtype]
    text = str(dtype)
    return _OPAQUE.get(text, text).replace("torch.", "")


def unsupported_dtype(what: str, dtype) -> TypeError:
    name = dtype_name(dtype)
    route = _BF16_ROUTE if "bfloat16" in name else ""
    return TypeError(f"{what} has dtype {name}; {_TAKES}{route}")


def describe(a, what: str = "x", indices: tuple[np.dtype, ...] | None = None) -> ArrayView:
    """An ArrayView of `a`, or TypeError/ValueError saying why it is not a GPU array softmax can read.

    indices: for an array of indices (cross_entropy's targets), the integer dtypes it may
    have, in place of the float ones; a DLPack array's dtype is checked once it is read."""
    if indices is None:
        accepted, refuse = _ACCEPTED, unsupported_dtype
    else:
        names = [d.name for d in indices]
        accepted = f"a GPU array of integers ({' or '.join(names)}): {_ACCEPTED}"

        def refuse(what, dtype):
            return TypeError(f"{what} has dtype {dtype_name(dtype)}; softmax_lab takes {' and '.join(names)} {what}s")

    if isinstance(a, cupy.ndarray):
        view = ArrayView(a.data.ptr, a.shape, a.strides, a.dtype, a.data.device_id, "cupy", a)
    elif type(a).__module__.startswith("torch") and hasattr(a, "data_ptr") and hasattr(a, "stride"):
        if a.device.type != "cuda":
            raise TypeError(f"{what} is a torch tensor on {a.device}; softmax_lab takes GPU arrays only")
        dtype = _TORCH_DTYPES.get(str(a.dtype)) if indices is None else _numpy_dtype(a.dtype)
        if dtype is None:
            raise refuse(what, a.dtype)
        dtype = np.dtype(dtype)
        strides = tuple(s * dtype.itemsize for s in a.stride())
        view = ArrayView(a.data_ptr(), tuple(a.shape), strides, dtype, a.device.index, "torch", a)
    elif getattr(a, "__cuda_array_interface__", None) is not None:
        view = _describe_cai(a.__cuda_array_interface__, a, what, indices or SUPPORTED, refuse)
    elif hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        device_type, device_id = a.__dlpack_device__()
        if device_type not in _DLPACK_GPU:
            where = "the CPU" if device_type == 1 else f"DLPack device type {device_type}"
            raise TypeError(f"{what} is on {where}, not a CUDA GPU; softmax_lab takes {accepted}")
        dtype = getattr(a, "dtype", None)
        if dtype is not None and _numpy_dtype(dtype) not in (indices or SUPPORTED):
            raise refuse(what, dtype)
        return ArrayView(0, (), (), np.dtype(np.float32), int(device_id), "dlpack", a)  # read after from_dlpack
    elif type(a).__name__ == "PyCapsule":  # a legacy DLPack capsule (to_dlpack()), taken as cupy.from_dlpack takes it
        return ArrayView(0, (), (), np.dtype(np.float32), None, "dlpack", a)
    else:
        raise TypeError(f"softmax_lab takes {accepted} as {what}; got {type(a).__module__}.{type(a).__name__}")
    if indices is not None and view.dtype not in indices:
        raise refuse(what, view.dtype)
    return view


def _numpy_dtype(dtype):
    try:
        return np.dtype(str(dtype).replace("torch.", ""))
    except TypeError:
        return None


def _describe_cai(cai, a, what: str, dtypes=SUPPORTED, refuse=unsupported_dtype) -> ArrayView:
    if not isinstance(cai, dict):
        raise TypeError(f"{what}.__cuda_array_interface__ is a {type(cai).__name__}, not a dict")
    for key in ("shape", "typestr", "data"):
        if key not in cai:
            raise ValueError(f"{what}.__cuda_array_interface__ has no {key!r}")
    typestr = cai["typestr"]
    try:
        dtype = np.dtype(typestr)
    except TypeError:
        raise TypeError(f"{what} has typestr {typestr!r}, which is not a dtype; {_TAKES}") from None
    if dtype.kind == "V" or dtype not in dtypes:
        raise refuse(what, typestr if dtype.kind == "V" else dtype)
    shape = tuple(int(s) for s in cai["shape"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous
        strides, step = [], dtype.itemsize
        for d in reversed(shape):
            strides.append(step)
            step *= max(d, 1)
        strides = tuple(reversed(strides))
    ptr = cai["data"][0] if cai["data"] is not None else 0
    return ArrayView(int(ptr or 0), shape, tuple(int(s) for s in strides), dtype, None, "cai", a)


def _rows_view(shape, strides, axis, itemsize):
    """(rows, cols, ld) if the array, with `axis` moved last, is rows x cols with a
    unit stride along the row and a uniform row stride ld (in elements); else None."""
    shape = list(shape)
    strides = list(strides)
    cols = shape.pop(axis)
    col_stride = strides.pop(axis)
    rows = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if cols > 1 and col_stride != itemsize:
        return None
    lead = [(d, s) for d, s in zip(shape, strides) if d != 1]
    if any(s <= 0 for _, s in lead):
        return None
    if not lead:
        return rows, cols, cols
    for (d0, s0), (d1, s1) in zip(lead, lead[1:]):
        if s0 != s1 * d1:
            return None
    ld_bytes = lead[-1][1]
    if ld_bytes % itemsize:
        return None
    return rows, cols, ld_bytes // itemsize


def check_axis(axis, ndim: int) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"axis must be an integer; got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis!r} is out of range for an array of {ndim} dimension(s)")
    return int(axis) % ndim


def _check_aligned(a: ArrayView, what: str) -> None:
    item = a.dtype.itemsize
    if a.ptr % item or any(s % item for d, s in zip(a.shape, a.strides) if d > 1):
        raise ValueError(f"{what} is not aligned to its element size ({item} bytes): data pointer {a.ptr:#x}, "
                         f"strides {a.strides}; copy it into a fresh array first")


def plan_call(x: ArrayView, out: ArrayView | None, axis: int, what: str = "x") -> CallPlan:
    """Rows, strides and pointers for one call (pure Python; validates layout and aliasing).

    x must be non-empty; axis is already normalised.  ValueError on a
    misaligned pointer or stride, an `out` whose elements overlap each other,
    or an `out` that partly overlaps x where the kernel would read and write
    the same memory.  `what` names x in messages (y or dy for a backward call)."""
    _check_aligned(x, what)
    item = x.dtype.itemsize
    layout = _rows_view(x.shape, x.strides, axis, item)
    copy_input = layout is None
    if copy_input:
        cols = x.shape[axis]
        rows, ld_x = x.size // cols, cols
    else:
        rows, cols, ld_x = layout
    x_ptr = 0 if copy_input else x.ptr
    if out is None:
        return CallPlan(axis, rows, cols, copy_input, False, ld_x, cols, x_ptr, None)
    _check_aligned(out, "out")
    if _may_overlap_itself(out):
        raise ValueError(f"out's elements may overlap each other (shape {out.shape}, strides {out.strides}); "
                         "pass an array whose elements are distinct")
    out_layout = _rows_view(out.shape, out.strides, axis, item)
    if out_layout is None or (out_layout[0] > 1 and out_layout[2] < out_layout[1]):
        # No uniform rows (a transpose, axis not last, negative strides): the
        # kernel writes a new buffer and a copy fills out after it, so any
        # overlap with x is harmless.
        return CallPlan(axis, rows, cols, copy_input, True, ld_x, cols, x_ptr, None)
    if not copy_input and not _same_elements(x, out) and _may_overlap(x, out):
        raise ValueError(f"out overlaps {what} without being the same elements in the same places; "
                         "results would be undefined")
    return CallPlan(axis, rows, cols, copy_input, False, ld_x, out_layout[2], x_ptr, out.ptr)


def _may_overlap_itself(a: ArrayView) -> bool:
    """Whether two indices of a may address the same element.  A nested layout
    (each stride, by size, steps over everything the smaller ones span) cannot;
    others are counted element by element up to 2^22 elements, and refused
    beyond (interleaved layouts that large are not worth the risk)."""
    span = a.dtype.itemsize
    for d, s in sorted(((d, abs(s)) for d, s in zip(a.shape, a.strides) if d > 1), key=lambda t: t[1]):
        if s < span:
            break
        span += (d - 1) * s
    else:
        return False
    if a.size > 1 << 22:
        return True
    offsets = np.zeros((), np.int64)
    for d, s in zip(a.shape, a.strides):
        offsets = np.add.outer(offsets, np.arange(d, dtype=np.int64) * s)
    return np.unique(offsets).size < a.size


def _same_elements(a: ArrayView, b: ArrayView) -> bool:
    """a and b address the same memory for every index (strides of size-1 axes do not matter)."""
    return a.ptr == b.ptr and all(sa == sb for d, sa, sb in zip(a.shape, a.strides, b.strides) if d > 1)


def extent(a: ArrayView) -> tuple[int, int]:
    lo = hi = a.ptr
    for d, s in zip(a.shape, a.strides):
        if s > 0:
            hi += (d - 1) * s
        else:
            lo += (d - 1) * s
    return lo, hi + a.dtype.itemsize


def _may_overlap(a: ArrayView, b: ArrayView) -> bool:
    """Whether a and b share an element: address ranges first, then NumPy's exact
    solver on stand-in arrays over the same addresses (nothing is dereferenced)."""
    lo_a, hi_a = extent(a)
    lo_b, hi_b = extent(b)
    if hi_a <= lo_b or hi_b <= lo_a:
        return False
    base = min(lo_a, lo_b)
    try:
        return bool(np.shares_memory(_stand_in(a, base), _stand_in(b, base), max_work=100_000))
    except np.exceptions.TooHardError:
        return True  # cannot rule it out: refuse


class _Interface:
    def __init__(self, a: ArrayView, base: int):
        # Addresses relative to a fake base keep the stand-in clear of real memory;
        # NumPy only compares them.
        self.__array_interface__ = {"data": (a.ptr - base + 4096, True), "shape": a.shape, "strides": a.strides,
                                    "typestr": a.dtype.str, "version": 3}


def _stand_in(a: ArrayView, base: int) -> np.ndarray:
    return np.asarray(_Interface(a, base))


# ------------------------------------------------------------------ streams
_external_streams: dict[tuple[int, int], cupy.cuda.ExternalStream] = {}


def external_stream(handle: int, device: int) -> cupy.cuda.ExternalStream:
    s = _external_streams.get((handle, device))
    if s is None:
        with warnings.catch_warnings():  # CuPy 14 prefers Stream.from_external, which CuPy 13 lacks
            warnings.simplefilter("ignore", DeprecationWarning)
            s = _external_streams.setdefault((handle, device), cupy.cuda.ExternalStream(handle, device))
    return s


_torch_streams: dict[tuple[int, int], object] = {}


def torch_external_stream(handle: int, device: int):
    """A torch.cuda.ExternalStream of `handle`, made once per handle (making one costs
    more than a small call's launch)."""
    s = _torch_streams.get((handle, device))
    if s is None:
        import torch

        s = _torch_streams.setdefault((handle, device),
                                      torch.cuda.ExternalStream(handle, device=torch.device("cuda", device)))
    return s


def current_stream(torch_tensor: bool, device: int):
    """torch's current stream on `device` for a torch tensor, else CuPy's."""
    if torch_tensor:
        return external_stream(torch_raw_stream(device), device)
    return cupy.cuda.get_current_stream(device)


def torch_raw_stream(device: int) -> int:
    """The handle of torch's current stream on `device`: through the binding
    torch's own compiled code uses (no Stream object per call), or the public
    API where a torch lacks it.  The function is looked up once (an import
    statement per call costs about as much as the lookup it saves)."""
    raw = _torch_raw_stream
    if raw is None:
        raw = _bind_torch_raw_stream()
    return raw(device)


_torch_raw_stream = None


def _bind_torch_raw_stream():
    global _torch_raw_stream
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    _torch_raw_stream = raw if raw is not None else (lambda device: torch.cuda.current_stream(device).cuda_stream)
    return _torch_raw_stream


def resolve_stream(stream, x: ArrayView, device: int):
    """The stream the work runs on: `stream` if given; else torch's current stream
    for a torch tensor (where torch ordered the producer's work), else CuPy's."""
    if stream is None:
        return current_stream(x.kind == "torch", device)
    if isinstance(stream, cupy.cuda.Stream):  # ExternalStream is one too
        stream_device = getattr(stream, "device_id", device)
        if stream_device not in (-1, device):
            raise ValueError(f"stream belongs to device {stream_device}, but x is on device {device}")
        return stream
    if hasattr(stream, "cuda_stream"):  # torch.cuda.Stream
        stream_device = getattr(getattr(stream, "device", None), "index", device)
        if stream_device is not None and stream_device != device:
            raise ValueError(f"stream belongs to device {stream_device}, but x is on device {device}")
        return external_stream(int(stream.cuda_stream), device)
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        return external_stream(int(stream), device)
    raise TypeError(f"stream must be a cupy.cuda.Stream, a torch.cuda.Stream or a raw handle; got {stream!r}")


def wait_for_producer(a: ArrayView | None, stream, device: int) -> None:
    """__cuda_array_interface__ v3 names the stream with the producer's pending
    work on the array (1: legacy default, 2: per-thread default, else a handle):
    order the run after it."""
    if a is None or a.kind != "cai":
        return
    producer = a.obj.__cuda_array_interface__.get("stream")
    if producer:
        with cupy.cuda.Device(device):
            event = cupy.cuda.Event(disable_timing=True)
            event.record(external_stream(int(producer), device))
            stream.wait_event(event)


def check_same_device(device: int, others, name: str) -> None:
    """ValueError if any non-empty array of `others` ((ArrayView or None, what) pairs) is
    on a device other than `device`, that of the array called `name`."""
    for a, what in others:
        a_device = device_of(a) if a is not None and a.size else device
        if a_device != device:
            raise ValueError(f"{what} is on device {a_device}, but {name} is on device {device}")


class LauncherCache:
    """Launchers by key, each made once (make(key) under a lock on a miss) and then
    looked up without one."""

    def __init__(self):
        self._hits: dict = {}
        self._lock = threading.Lock()

    def get(self, key, make):
        hit = self._hits.get(key)
        if hit is None:
            with self._lock:
                hit = self._hits.get(key)
                if hit is None:
                    hit = self._hits[key] = make(key)
        return hit


def device_of(a: ArrayView) -> int:
    if a.device is not None:
        return a.device
    attrs = cupy.cuda.runtime.pointerGetAttributes(a.ptr)
    if attrs.type not in (2, 3):  # cudaMemoryTypeDevice, cudaMemoryTypeManaged
        raise TypeError("the __cuda_array_interface__ pointer is not GPU memory")
    return attrs.device
