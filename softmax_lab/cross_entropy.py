"""The cross-entropy loss of rows of logits, with its gradient in the same call.

A training step needs the loss and the gradient of the logits.  Computed apart, as
torch's log_softmax, nll_loss and their backward passes do, the logits are read four to
six times.  Here the loss comes from one read of the logits (the row statistics of
logsumexp, plus the target's logit), and the gradient, where asked, is written into a
buffer or over the logits themselves: from the row held on chip where a cluster of
blocks holds it (one read and one write), else by one more pass (kernels/
cross_entropy_held.cu and cross_entropy.cu; the plans: variants/cross_entropy.py).
"""

from __future__ import annotations

import contextlib
import math

import cupy
import numpy as np

from .api import (
    _MISS,
    _as_cupy,
    _clear,
    _from_dlpack,
    _input_ptr,
    _key,
    _keys,
    _new_output,
    _output_maker,
    _repeat_stream,
    _span,
    _watch_torch,
)
from .arrays import (
    DTYPE_NAMES,
    SUPPORTED,
    ArrayView,
    LauncherCache,
    check_same_device,
    describe,
    device_of,
    dtype_name,
    plan_call,
    resolve_stream,
    unsupported_dtype,
    wait_for_producer,
)
from .device import device_info, require_device
from .problem import REDUCTIONS, Shape
from .scratch import CallMemory
from .variants.cross_entropy import LossBuffers, LossLauncher, LossOptions
from .variants.resources import LINE_BYTES

_FLOAT32 = np.dtype(np.float32)
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_TARGET_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))
_launchers = LauncherCache()


def _make_launcher(key: tuple) -> LossLauncher:
    device, shape, target_bytes = key
    dev = device_info(device)
    return LossLauncher(shape, dev, target_bytes)


def cross_entropy(logits, target, *, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0, z_loss: float = 0.0, return_lse: bool = False,
                  grad_out=None, stream=None):
    """torch.nn.functional.cross_entropy(logits, target) with its gradient, in float32 math.

    logits: (rows, vocab), float32, float16 or bfloat16, any layout (rows of unit stride
    are read in place, others copied first); target: (rows,) int64 or int32, any stride.
    Both a CuPy array, a torch CUDA tensor, or any GPU array with __cuda_array_interface__
    or DLPack (bfloat16 logits as a torch tensor), on one device.

    A row's loss, x its logits, t its target, s = label_smoothing, z = z_loss:
    (1 - s) (lse - x[t]) + s (lse - mean(x)) + z lse^2, lse = logsumexp(x), as torch's
    label smoothing and Liger's z-loss.  A row whose target is ignore_index has loss 0
    and gradient 0.  reduction: "mean" (the sum over the rows not ignored / their
    number, NaN when every row is ignored, as torch), "sum", or "none" (a loss per row).

    A target outside [0, vocab) that is not ignore_index is never read past: that row's
    loss is NaN (so is a "mean" or "sum"), and so is its gradient.  No error is raised,
    since telling would wait for the GPU; to find such rows, call with reduction="none"
    and look for NaN, or check the targets first.  A row of -inf, or one holding +inf or
    NaN, also gives NaN, as in torch.

    Returns the loss in float32 (a 0-d array for "mean" and "sum", one per row for
    "none"), and with return_lse the pair (loss, lse), lse float32 for every row
    (ignored rows too): torch tensors for torch logits (no autograd: see
    softmax_lab.torch.cross_entropy), CuPy arrays otherwise.

    grad_out: where to write d loss / d logits, for an incoming gradient of 1 (for
    "none", 1 per row): an array of logits' shape and dtype on its device, or the logits
    themselves, which are then overwritten by their gradient once the loss has read
    them.  Computed in the same call (from the row held on chip where it fits, else by one
    more pass over the logits): (softmax(x) (1 + 2 z lse) - s / vocab - (1 - s) onehot(t)),
    divided for "mean" by the number of rows not ignored.

    stream, devices and CUDA graphs: as softmax() (a call may be captured and replayed;
    its scratch is then the graph's own memory).

    Raises, before any launch: TypeError for a non-GPU array or a dtype it does not take
    (logits, target, grad_out); ValueError for logits that are not 2-D, a vocab of 0, a
    target that is not 1-D of one entry per row, a grad_out of another shape or one that
    partly overlaps the logits, arrays on different devices, a reduction other than
    "mean", "sum" and "none", a label_smoothing outside [0, 1], a z_loss that is negative
    or not finite in float32, or an ignore_index that is not an integer.
    """
    asked = (type(ignore_index), ignore_index, type(reduction), reduction, type(label_smoothing), label_smoothing,
             type(z_loss), z_loss, return_lse)
    if stream is None or isinstance(stream, cupy.cuda.Stream):
        fast = _repeat_call(logits, target, grad_out, asked, stream)
        if fast is not _MISS:
            return fast
    options = loss_options(ignore_index, reduction, label_smoothing, z_loss)
    xv = describe(logits, "logits")
    gv = None if grad_out is None else describe(grad_out, "grad_out")
    if all(a is None or a.kind != "dlpack" for a in (xv, gv)):
        _check_logits(xv, gv)
        tv = describe(target, "target", _TARGET_DTYPES)
        if tv.kind != "dlpack":  # a DLPack target is read, and checked, once there is a device
            _check_target(tv, xv.shape[0])
    require_device()
    if xv.kind == "dlpack":
        logits = _from_dlpack(logits)
        xv = describe(logits, "logits")
    if gv is not None and gv.kind == "dlpack":
        grad_out = _from_dlpack(grad_out)
        gv = describe(grad_out, "grad_out")
    _check_logits(xv, gv)
    rows, vocab = xv.shape
    tv = _describe_target(target, rows)
    device = device_of(xv)
    check_same_device(device, ((tv, "target"), (gv, "grad_out")), "logits")
    run_stream = resolve_stream(stream, xv, device)
    for a in (xv, tv, gv):
        wait_for_producer(a, run_stream, device)
    torch_out = xv.kind == "torch"
    on_device = cupy.cuda.Device(device) if device != cupy.cuda.runtime.getDevice() else contextlib.nullcontext()
    with on_device:
        per_row = options.reduction == "none"
        loss, loss_ptr = _new_output(torch_out, (rows,) if per_row else (), _FLOAT32, device, None, run_stream)
        lse, lse_ptr = (None, 0)
        if return_lse:
            lse, lse_ptr = _new_output(torch_out, (rows,), _FLOAT32, device, None, run_stream)
        if rows == 0:  # the sum of nothing is 0, its mean NaN (as torch)
            if not per_row:
                with run_stream:
                    _as_cupy(loss, _FLOAT32).fill(np.nan if options.reduction == "mean" else 0.0)
        else:
            buffers = LossBuffers(x=0, target=tv.ptr, ld_target=tv.strides[0] // tv.dtype.itemsize,
                                  loss_rows=loss_ptr if per_row else 0, total=0 if per_row else loss_ptr, lse=lse_ptr)
            ran = _run(logits, xv, tv, grad_out, gv, options, buffers, device, run_stream)
            if ran is not None and all(a is None or a.kind in ("cupy", "torch") for a in (xv, tv, gv)):
                _remember(asked, xv, tv, gv, options, device, *ran)
    return (loss, lse) if return_lse else loss


def _run(logits, xv: ArrayView, tv: ArrayView, grad_out, gv: ArrayView | None, options: LossOptions,
         buffers: LossBuffers, device: int, stream) -> tuple[LossLauncher, int] | None:
    """The launches of one call with rows, into `buffers` (x and grad filled in here): the
    launcher and grad_out's row pitch where the arrays were used in place (a call a repeat
    may take straight to the launcher), else None."""
    plan = plan_call(xv, gv, 1, "logits")  # validates grad_out's layout and its overlap with the logits
    with CallMemory(stream) as memory:
        x_ptr = _input_ptr(logits, xv, plan, memory)
        grad_ptr, ld_grad, grad_buffer = 0, 0, None
        if gv is not None:
            grad_ptr, ld_grad = plan.y_ptr, plan.ld_y
            if grad_ptr is None:  # grad_out without uniform rows: written through a contiguous buffer
                grad_buffer = memory.empty((plan.rows, plan.cols), _as_cupy(grad_out, gv.dtype).dtype)
                grad_ptr, ld_grad = grad_buffer.data.ptr, plan.cols
        shape = Shape(plan.rows, plan.cols, plan.ld_x, ld_grad or plan.cols, x_ptr % LINE_BYTES,
                      grad_ptr % 16, xv.dtype.itemsize, DTYPE_NAMES[xv.dtype])
        launch = _launchers.get((device, shape, tv.dtype.itemsize), _make_launcher)
        launch(buffers._replace(x=x_ptr, grad=grad_ptr, ld_grad=ld_grad), options, stream)
        if grad_buffer is not None:
            with stream:
                cupy.copyto(_as_cupy(grad_out, gv.dtype), grad_buffer)
    return None if plan.copy_input or grad_buffer is not None else (launch, ld_grad)


# ------------------------------------------------------------------ repeated calls
# A call whose logits, target and grad_out have the type, shape, strides, dtype, device
# and alignment of an earlier call that used them in place, with the same keywords
# (types included, so that a value the checks would refuse never matches) and grad_out
# again the logits themselves or clear of their extent, has that call's launcher: it
# skips straight to the outputs and the launches.  Any other call takes the checked path.
_calls: dict[tuple, tuple] = {}
_CALLS_MAX = 4096


def _call_key(kx: tuple, kt: tuple, kg: tuple | None, asked: tuple) -> tuple:
    g = None if kg is None else (*kg[1:], kg[0] & 15, kg[0] == kx[0])
    return (*kx[1:], kx[0] % LINE_BYTES, *kt[1:], kt[0] % 8, g, asked)


def _repeat_call(logits, target, grad_out, asked: tuple, stream):
    keys = _keys(logits, stream, target, grad_out)
    if keys is None or keys[1] is None:
        return _MISS
    kx, kt, kg = keys
    hit = _calls.get(_call_key(kx, kt, kg, asked))
    if hit is None or kx[4] != cupy.cuda.runtime.getDevice():
        return _MISS
    call, x_lo, x_hi, g_lo, g_hi = hit
    if kg is not None and not _clear(kx[0], x_lo, x_hi, kg[0], g_lo, g_hi):
        return _MISS  # grad_out overlaps the logits: the checked path refuses it
    return call(kx[0], kt[0], 0 if kg is None else kg[0], stream)


def _remember(asked: tuple, xv: ArrayView, tv: ArrayView, gv: ArrayView | None, options: LossOptions, device: int,
              launch: LossLauncher, ld_grad: int) -> None:
    if "torch" in (xv.kind, tv.kind, gv and gv.kind):
        _watch_torch()
    kx, kt, kg = _key(xv.obj), _key(tv.obj), None if gv is None else _key(gv.obj)
    if kx is None or kt is None or (gv is not None and kg is None):
        return
    torch_out, rows, return_lse = xv.kind == "torch", xv.shape[0], asked[-1]
    per_row = options.reduction == "none"
    ld_target = tv.strides[0] // tv.dtype.itemsize

    new_loss = _output_maker(torch_out, (rows,) if per_row else (), _FLOAT32, device, None)
    new_lse = _output_maker(torch_out, (rows,), _FLOAT32, device, None) if return_lse else None
    run = launch.repeat(options, ld_target, gv is not None, ld_grad)

    def call(x_ptr: int, t_ptr: int, g_ptr: int, stream):
        stream, on_torch_stream = _repeat_stream(stream, torch_out, device)
        loss, loss_ptr = new_loss(stream, on_torch_stream)
        lse, lse_ptr = new_lse(stream, on_torch_stream) if return_lse else (None, 0)
        if per_row:
            run(x_ptr, t_ptr, g_ptr, loss_ptr, 0, lse_ptr, stream)
        else:
            run(x_ptr, t_ptr, g_ptr, 0, loss_ptr, lse_ptr, stream)
        return (loss, lse) if return_lse else loss

    if len(_calls) >= _CALLS_MAX:
        _calls.clear()
    _calls[_call_key(kx, kt, kg, asked)] = (call, *_span(xv), *(_span(gv) if gv is not None else (0, 0)))


def loss_options(ignore_index, reduction, label_smoothing, z_loss) -> LossOptions:
    """The keywords of a call, checked (ValueError naming the one that is wrong)."""
    if isinstance(ignore_index, (bool, np.bool_)) or not isinstance(ignore_index, (int, np.integer)):
        raise ValueError(f"ignore_index must be an integer; got {ignore_index!r}")
    if not -(1 << 63) <= int(ignore_index) < 1 << 63:
        raise ValueError(f"ignore_index {ignore_index} does not fit in 64 bits")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}; got {reduction!r}")
    smoothing, z = _real(label_smoothing, "label_smoothing"), _real(z_loss, "z_loss")
    if not 0.0 <= smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1] (as torch); got {label_smoothing!r}")
    if not (math.isfinite(z) and 0.0 <= z <= _FLOAT32_MAX):
        raise ValueError(f"z_loss must be a coefficient >= 0 that is finite in float32; got {z_loss!r}")
    return LossOptions(int(ignore_index), reduction, smoothing, z)


def _real(value, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{what} must be a real number; got {value!r}")
    return float(value)


def _check_logits(xv: ArrayView, gv: ArrayView | None) -> None:
    """What can be checked of the logits and grad_out without a device."""
    if xv.dtype not in SUPPORTED:
        raise unsupported_dtype("logits", xv.dtype)
    if len(xv.shape) != 2:
        raise ValueError(f"logits must be 2-D (rows, vocab); got shape {xv.shape}")
    if xv.shape[1] == 0 and xv.shape[0]:
        raise ValueError(f"logits have a vocab of 0 (shape {xv.shape}): no target can be in it")
    if gv is not None:
        if gv.dtype != xv.dtype:
            raise TypeError(f"grad_out must be {dtype_name(xv.dtype)}, like the logits; got {dtype_name(gv.dtype)}")
        if gv.shape != xv.shape:
            raise ValueError(f"grad_out has shape {gv.shape}; expected {xv.shape}, the logits' shape")


def _describe_target(target, rows: int) -> ArrayView:
    """An ArrayView of the targets: 1-D, one per row, int64 or int32, on a GPU (one read
    through DLPack is made a CuPy array or torch tensor first, which needs the device)."""
    view = describe(target, "target", _TARGET_DTYPES)
    if view.kind == "dlpack":
        view = describe(_from_dlpack(target), "target", _TARGET_DTYPES)
    _check_target(view, rows)
    return view


def _check_target(view: ArrayView, rows: int) -> None:
    if view.shape != (rows,):
        raise ValueError(f"target has shape {view.shape}; expected ({rows},), one per row of the logits")
    if view.ptr % view.dtype.itemsize or (rows > 1 and view.strides[0] % view.dtype.itemsize):
        raise ValueError(f"target is not aligned to its element size: pointer {view.ptr:#x}, strides {view.strides}")
