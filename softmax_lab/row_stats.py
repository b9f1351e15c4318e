"""Row statistics in one read of x: logsumexp and the row maximum.

The building block of a loss over a vocabulary (lse is what cross-entropy
subtracts the target's logit from) and what samplers and vocabulary-sharded code
merge across devices.  The kernels are multi_block's partials and a merge that
writes each row's lse and max (kernels/multi_block.cu, multi_block_row_stats;
the plan: variants/multi_block.py, row_stats_plan; its figures:
notes/TUNING.md#row-statistics).
"""

from __future__ import annotations

import contextlib
import math

import cupy
import numpy as np

from .api import _as_cupy, _from_dlpack, _input_ptr, _new_output
from .arrays import (
    DTYPE_NAMES,
    SUPPORTED,
    LauncherCache,
    check_axis,
    describe,
    device_of,
    plan_call,
    resolve_stream,
    unsupported_dtype,
    wait_for_producer,
)
from .device import device_info, require_device
from .problem import Shape
from .scratch import CallMemory
from .variants.multi_block import RowStatsLauncher, row_stats_launch, row_stats_plan
from .variants.resources import LINE_BYTES

_FLOAT32 = np.dtype(np.float32)
_launchers = LauncherCache()


def _make_launcher(key: tuple) -> RowStatsLauncher:
    device, shape = key
    dev = device_info(device)
    return row_stats_launch(shape, dev, row_stats_plan(shape, dev))


def logsumexp(x, axis: int = -1, *, return_max: bool = False, stream=None):
    """log(sum(exp(x))) along `axis`, as torch.logsumexp, in float32 from one read of x.

    x: float32, float16 or bfloat16, any number (>= 1) of dimensions; a CuPy
    array, a torch CUDA tensor, or any GPU array with __cuda_array_interface__
    or DLPack (a legacy DLPack capsule too); bfloat16 as a torch tensor.  Any
    layout: rows of unit stride are read in place, others copied first.
    Returns a float32 array of x's shape without `axis`, whatever x's dtype
    (torch.logsumexp returns x's dtype: the sums of half rows need float32's
    range and precision, and a loss takes them in float32): a torch tensor for
    a torch x (no autograd), a CuPy array otherwise.  With return_max, the pair
    (lse, max), max as torch.amax gives it, in float32.

    Special values, as torch.logsumexp and torch.amax: a row of -inf gives
    -inf (lse and max); a row holding +inf and no NaN gives +inf; a row holding
    a NaN gives NaN.  An axis of length 0 gives lse -inf (as torch); its max
    has no value: ValueError with return_max.

    stream, devices and CUDA graphs: as softmax() (a call may be captured and
    replayed; its scratch is then the graph's own memory).

    Raises, before any launch: TypeError for a non-GPU array, a dtype other than
    float32, float16 or bfloat16, or a non-integer axis; ValueError for a 0-d x,
    an axis out of range, or a pointer or stride not aligned to the element
    size; NoDeviceError (a RuntimeError) where no CUDA device is usable.
    """
    xv = describe(x, "x")
    if xv.kind != "dlpack":
        _check(xv, axis, return_max)
    require_device()
    if xv.kind == "dlpack":
        x = _from_dlpack(x)
        xv = describe(x, "x")
    axis = _check(xv, axis, return_max)
    device = device_of(xv)
    run_stream = resolve_stream(stream, xv, device)
    wait_for_producer(xv, run_stream, device)
    kept = xv.shape[:axis] + xv.shape[axis + 1:]
    on_device = cupy.cuda.Device(device) if device != cupy.cuda.runtime.getDevice() else contextlib.nullcontext()
    with on_device:
        lse, lse_ptr = _new_output(xv.kind == "torch", kept, _FLOAT32, device, None, run_stream)
        row_max, max_ptr = (None, 0)
        if return_max:
            row_max, max_ptr = _new_output(xv.kind == "torch", kept, _FLOAT32, device, None, run_stream)
        if xv.size == 0:  # no rows, or rows of nothing: log(0) = -inf
            if math.prod(kept):
                with run_stream:
                    _as_cupy(lse, _FLOAT32).fill(-np.inf)
        else:
            plan = plan_call(xv, None, axis, "x")
            with CallMemory(run_stream) as memory:
                x_ptr = _input_ptr(x, xv, plan, memory)
                shape = Shape(plan.rows, plan.cols, plan.ld_x, 0, x_ptr % LINE_BYTES, 0, xv.dtype.itemsize,
                              DTYPE_NAMES[xv.dtype])
                _launchers.get((device, shape), _make_launcher)(x_ptr, lse_ptr, max_ptr, run_stream)
    return (lse, row_max) if return_max else lse


def _check(xv, axis, return_max: bool) -> int:
    """What can be checked of x without a device: its dtype, dimensions and axis."""
    if xv.dtype not in SUPPORTED:
        raise unsupported_dtype("x", xv.dtype)
    if len(xv.shape) == 0:
        raise ValueError("logsumexp needs an array of at least one dimension; got a 0-d array")
    axis = check_axis(axis, len(xv.shape))
    if return_max and xv.shape[axis] == 0:
        raise ValueError(f"the max along axis {axis} of length 0 has no value (as torch.amax); "
                         "call without return_max for logsumexp alone (-inf)")
    return axis
