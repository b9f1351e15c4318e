"""softmax(): validation, layout handling and dispatch to a registered variant."""

from __future__ import annotations

import numpy as np

import cupy

from .device import device_info, require_device
from .variants import Problem, choose, get_variant

_DLPACK_GPU = (2, 13)  # kDLCUDA, kDLCUDAManaged
_ACCEPTED = "a CuPy array, or a GPU array with __cuda_array_interface__ or DLPack (torch, JAX, ...)"


class _Meta:
    """Shape, dtype and strides of an input, read without touching the GPU."""

    def __init__(self, shape, dtype, strides):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.strides = None if strides is None else tuple(int(s) for s in strides)


def _meta(x) -> _Meta | None:
    if isinstance(x, cupy.ndarray):
        return _Meta(x.shape, x.dtype, x.strides)
    cai = getattr(x, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        return _Meta(cai["shape"], cai["typestr"], cai.get("strides"))
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        if x.__dlpack_device__()[0] not in _DLPACK_GPU:
            return None
        shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
        try:
            return _Meta(shape, np.dtype(str(dtype).replace("torch.", "")), None)
        except TypeError:
            return _Meta(shape, np.dtype("V1"), None)  # unknown dtype: reported below
    return None


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
    if ld_bytes <= 0 or ld_bytes % itemsize:
        return None
    return rows, cols, ld_bytes // itemsize


def softmax(x, axis: int = -1, *, variant: str = "auto", out: cupy.ndarray | None = None) -> cupy.ndarray:
    """softmax(x) along `axis`, computed on the GPU in float32, as torch.softmax.

    x: float32, any number (>= 1) of dimensions; a CuPy array or any GPU array
    with __cuda_array_interface__ or DLPack (taken zero-copy).  Work runs on
    CuPy's current stream.  Rows along `axis` with a unit element stride and a
    uniform row stride (any contiguous tensor, any slice such as x[:, 1:]) are
    read in place; any other layout is first copied into a contiguous buffer.
    variant: "auto" or a name from variants().
    out: optional float32 CuPy array of x's shape whose rows along `axis` have
    unit stride and do not overlap each other; it may be x itself (in place),
    but must not otherwise overlap x.  Returns `out`, or a new array.
    """
    chosen = None if variant == "auto" else get_variant(variant)
    meta = _meta(x)
    if meta is None:
        raise TypeError(f"softmax_lab.softmax takes {_ACCEPTED}; got {type(x).__module__}.{type(x).__name__}")
    if meta.dtype != np.float32:
        raise TypeError(f"softmax_lab computes float32 only; got dtype {meta.dtype}")
    if len(meta.shape) == 0:
        raise ValueError("softmax needs an array of at least one dimension; got a 0-d array")
    ndim = len(meta.shape)
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis!r} is out of range for an array of {ndim} dimension(s)")
    axis = int(axis) % ndim
    if out is not None:
        if not isinstance(out, cupy.ndarray):
            raise TypeError(f"out must be a CuPy array; got {type(out).__name__}")
        if out.dtype != np.float32:
            raise TypeError(f"out must be float32; got {out.dtype}")
        if out.shape != meta.shape:
            raise ValueError(f"out has shape {out.shape}; expected {meta.shape}")
        layout = _rows_view(out.shape, out.strides, axis, 4)
        if layout is None or (layout[0] > 1 and layout[2] < layout[1]):
            raise ValueError(
                "out must have a unit stride along axis and non-overlapping rows with a uniform stride; "
                "pass a contiguous array"
            )

    dev = device_info(require_device())
    if not isinstance(x, cupy.ndarray):
        x = cupy.asarray(x) if hasattr(x, "__cuda_array_interface__") else cupy.from_dlpack(x)
    if chosen is not None:
        reason = chosen.unsupported_reason(x.shape[axis], dev)
        if reason:
            raise ValueError(reason)
    if out is not None and out is not x and _overlaps(x, out):
        same = out.data.ptr == x.data.ptr and out.strides == x.strides
        if not same:
            raise ValueError("out overlaps x without being x itself; results would be undefined")
    if x.size == 0:
        return out if out is not None else cupy.empty(x.shape, dtype=cupy.float32)

    layout = _rows_view(x.shape, x.strides, axis, 4)
    xin = x
    if layout is None:
        xin = cupy.ascontiguousarray(cupy.moveaxis(x, axis, -1))
        layout = _rows_view(xin.shape, xin.strides, -1, 4)
    rows, cols, ld_x = layout

    if out is None:
        moved_shape = x.shape[:axis] + x.shape[axis + 1 :] + (cols,)
        result = cupy.empty(moved_shape, dtype=cupy.float32)
        y, ld_y = result, cols
        result = cupy.moveaxis(result, -1, axis)
    else:
        result = out
        y, ld_y = out, _rows_view(out.shape, out.strides, axis, 4)[2]

    v = chosen or choose(rows, cols, dev)
    v.run(Problem(xin, y, rows, cols, ld_x, ld_y), dev)
    return result


def _overlaps(a: cupy.ndarray, b: cupy.ndarray) -> bool:
    lo_a, hi_a = _extent(a)
    lo_b, hi_b = _extent(b)
    return lo_a < hi_b and lo_b < hi_a


def _extent(a: cupy.ndarray):
    lo = hi = a.data.ptr
    for d, s in zip(a.shape, a.strides):
        if d == 0:
            return lo, lo
        if s > 0:
            hi += (d - 1) * s
        else:
            lo += (d - 1) * s
    return lo, hi + a.itemsize
