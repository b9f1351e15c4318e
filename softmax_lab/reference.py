"""The float64 references (softmax, log_softmax and their backward passes, the
row statistics and the cross-entropy loss with its gradient) and the error
measures every check uses."""

from __future__ import annotations

import numpy as np

from .problem import REDUCTIONS


def softmax_reference(x, axis: int = -1):
    """softmax in float64 with torch's special values: -inf gives 0; a row of all
    -inf, or with a NaN or +inf, gives NaN.  Works on NumPy and CuPy arrays."""
    xp = array_module(x)
    x = to_float64(x)
    m = xp.max(x, axis=axis, keepdims=True)  # NaN propagates
    e = xp.exp(x - m)
    return e / xp.sum(e, axis=axis, keepdims=True)


def log_softmax_reference(x, axis: int = -1):
    """log_softmax in float64 as torch: (x - max) - log(sum e^(x - max)); -inf
    entries give -inf; a row of all -inf, or with a NaN or +inf, gives NaN."""
    xp = array_module(x)
    x = to_float64(x)
    m = xp.max(x, axis=axis, keepdims=True)  # NaN propagates
    shifted = x - m
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # 2^-126, the smallest normal float32


def softmax_backward_reference(dy, y, axis: int = -1):
    """dx = y * (dy - sum(dy * y)) in float64, y the softmax output (torch's
    _softmax_backward_data); NaN and inf propagate as in torch's float32 math."""
    xp = array_module(y)
    dy, y = to_float64(dy), to_float64(y)
    return y * (dy - xp.sum(dy * y, axis=axis, keepdims=True))


def log_softmax_backward_reference(dy, y, axis: int = -1):
    """dx = dy - exp(y) * sum(dy) in float64, y the log_softmax output (torch's
    _log_softmax_backward_data): a -inf y gives dx = dy."""
    xp = array_module(y)
    dy, y = to_float64(dy), to_float64(y)
    return dy - xp.exp(y) * xp.sum(dy, axis=axis, keepdims=True)


def logsumexp_reference(x, axis: int = -1):
    """(lse, max) along axis in float64, as torch.logsumexp: a row of all -inf gives
    -inf, one with +inf gives +inf, one with a NaN gives NaN."""
    xp = array_module(x)
    x = to_float64(x)
    m = xp.max(x, axis=axis, keepdims=True)
    shift = xp.where(xp.isfinite(m), m, 0.0)  # a row's -inf or +inf max is not taken away from itself
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        lse = shift + xp.log(xp.sum(xp.exp(x - shift), axis=axis, keepdims=True))
    return xp.squeeze(lse, axis), xp.squeeze(m, axis)


def cross_entropy_reference(logits, target, *, ignore_index: int = -100, reduction: str = "mean",
                            label_smoothing: float = 0.0, z_loss: float = 0.0, gradient: bool = True) -> dict:
    """torch.nn.functional.cross_entropy of (rows, vocab) logits and integer targets in
    float64, with Liger's z-loss term, and its gradient.

    A row's loss is (1 - s) (lse - x[target]) + s (lse - mean(x)) + z lse^2 (s the label
    smoothing, z the z-loss coefficient); a row whose target is ignore_index has loss 0
    and gradient 0.  reduction: "none" (a loss per row), "sum", or "mean" (the sum over
    the rows not ignored / their number: NaN when every row is ignored, as torch).
    Returns {"loss", "lse" (every row's), "grad"}: grad is d loss / d logits for an
    incoming gradient of 1 (of 1 per row for "none"):
    (softmax (1 + 2 z lse) - (1 - s) onehot(target) - s / vocab) / (the count for "mean");
    None with gradient=False (a float64 tensor of the logits' size not made).
    ValueError for a target outside [0, vocab) that is not ignore_index."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}; got {reduction!r}")
    xp = array_module(logits)
    x = to_float64(logits)
    rows, vocab = x.shape
    t = xp.asarray(target).astype(xp.int64)
    kept = t != ignore_index
    if bool(xp.any(kept & ((t < 0) | (t >= vocab)))):
        raise ValueError(f"a target is outside [0, {vocab}) and is not ignore_index ({ignore_index})")
    lse, _ = logsumexp_reference(x)
    at = xp.arange(rows)
    picked = x[at, xp.where(kept, t, 0)]
    s = float(label_smoothing)
    with np.errstate(invalid="ignore", over="ignore"):
        per_row = (1.0 - s) * (lse - picked) + z_loss * lse * lse
        if s:
            per_row = per_row + s * (lse - x.mean(axis=-1))
        per_row = xp.where(kept, per_row, 0.0)
        count = int(kept.sum())
        if reduction == "none":
            loss, scale = per_row, 1.0
        elif reduction == "sum":
            loss, scale = per_row.sum(), 1.0
        else:
            loss, scale = (per_row.sum() / count if count else xp.asarray(np.nan)), (1.0 / count if count else 0.0)
        if not gradient:
            return {"loss": loss, "lse": lse, "grad": None}
        grad = xp.exp(x - lse[:, None]) * (1.0 + 2.0 * z_loss * lse[:, None]) - s / vocab
        grad[at, xp.where(kept, t, 0)] -= xp.where(kept, 1.0 - s, 0.0)
        grad = xp.where(kept[:, None], grad * scale, 0.0)
    return {"loss": loss, "lse": lse, "grad": grad}


def op_reference(x, op: str, dy=None, axis: int = -1):
    """The float64 reference of `op` along axis: softmax or log_softmax of x,
    or a backward op's dx from y = x (the forward output) and dy."""
    if op == "softmax":
        return softmax_reference(x, axis)
    if op == "log_softmax":
        return log_softmax_reference(x, axis)
    backward = softmax_backward_reference if op == "softmax_backward" else log_softmax_backward_reference
    return backward(dy, x, axis)


def backward_scale(dy, y, op: str, axis: int = -1):
    """The size, element by element, of the terms a float32 backward adds up, in
    float64: |y| (|dy| + sum |dy * y|) for softmax and |dy| + e^y sum |dy| for
    log_softmax.  float32 arithmetic errs by a few 2^-24 of this (the dot's
    rounding reaches every element of the row), however small dx is after
    cancellation, so errors are measured against it (backward_error) and not
    against |dx|.  For log_softmax it is at least FLOAT32_TINY * sum |dy|: where
    e^y is below float32's smallest normal it is subnormal (absolute spacing
    2^-149, a few bits of precision), and the sum multiplies that spacing
    (H200, 2026-11-30: y near -100 gave dx -2.07e-42 against -1.92e-42 in a
    row whose sum |dy| was 2e5)."""
    xp = array_module(y)
    dy, y = xp.abs(to_float64(dy)), to_float64(y)
    if op.startswith("log_softmax"):
        total = xp.sum(dy, axis=axis, keepdims=True)
        return xp.maximum(dy + xp.exp(y) * total, FLOAT32_TINY * total)
    y = xp.abs(y)
    return y * (dy + xp.sum(dy * y, axis=axis, keepdims=True))


def backward_error(out, ref, scale) -> float:
    """The largest |out - ref| / max(scale, float32's smallest normal) (scale:
    backward_scale) over the finite part of ref; inf where the NaN pattern of
    out differs from ref's or an infinite ref is not matched.  Below the
    smallest normal float32 (1.2e-38) a float32 result is subnormal, with an
    absolute spacing of 2^-149, so relative error there means nothing: softmax
    outputs that small come from rows with a wide range (e^-100)."""
    xp = array_module(out)
    out = to_float64(out)
    keep = _finite_where_matched(xp, out, ref)
    if keep is None:
        return float("inf")
    err = xp.where(keep, xp.abs(out - xp.where(keep, ref, 0.0)), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = xp.where(err > 0, err / xp.maximum(xp.where(keep, scale, 1.0), FLOAT32_TINY), 0.0)
    return float(xp.max(rel)) if rel.size else 0.0


BACKWARD_HALF_FLOOR = 4 * 2.0**-24  # times backward_scale: the float32 part of a half's backward error
BACKWARD_BOUNDS = {"float32": 1e-6, "float16": 1.0, "bfloat16": 1.0}  # what backward_op_error passes at


def backward_op_error(out, ref, dy, y, dtype: str, op: str, axis: int = -1) -> float:
    """The checks' error measure of a backward output (dx) against its float64
    reference, from the dy and y it was given: backward_error against
    backward_scale for float32; for float16/bfloat16 ulp_error beyond
    BACKWARD_HALF_FLOOR of backward_scale (the float32 arithmetic's part,
    which cancellation in dy - sum leaves however small dx is).  Passes at
    BACKWARD_BOUNDS[dtype]."""
    with np.errstate(invalid="ignore", over="ignore"):
        scale = backward_scale(dy, y, op, axis)
        if dtype == "float32":
            return backward_error(out, ref, scale)
        return ulp_error(out, ref, dtype, BACKWARD_HALF_FLOOR * scale)


LOG_FLOOR = 2.0**-22  # float32's resolution of log(sum) for sums near 1: log_softmax's absolute error near 0


def op_error(out, ref, dtype: str, op: str) -> float:
    """The checks' error measure of an output against its float64 reference:
    relative_error for float32; for float16/bfloat16 ulp_error, with
    LOG_FLOOR allowed on top for log_softmax (its outputs near 0 carry
    float32's absolute error of log(sum), as torch's do)."""
    if dtype == "float32":
        return relative_error(out, ref)
    return ulp_error(out, ref, dtype, LOG_FLOOR if op == "log_softmax" else 0.0)


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| over the finite part of ref, or inf where the
    NaN pattern of out differs from ref's (an unwritten or wrong NaN fails) or
    an infinite ref (log_softmax's -inf) is not matched exactly."""
    xp = array_module(out)
    out = to_float64(out)
    keep = _finite_where_matched(xp, out, ref)
    if keep is None:
        return float("inf")
    diff = xp.where(keep, out - ref, 0.0)
    norm = float(xp.linalg.norm(xp.where(keep, ref, 0.0)))
    err = float(xp.linalg.norm(diff))
    return err / norm if norm > 0 else err


def _finite_where_matched(xp, out, ref):
    """Where ref is finite (the elements to measure), or None where out's NaN
    pattern differs from ref's or an infinite ref is not matched exactly."""
    nan_ref = xp.isnan(ref)
    if bool(xp.any(xp.isnan(out) != nan_ref)):
        return None
    inf_ref = xp.isinf(ref)
    if bool(xp.any(inf_ref & (out != ref))):
        return None
    return ~nan_ref & ~inf_ref


# (significand bits, least normal exponent, largest finite value) of the half formats
HALF_FORMATS = {"float16": (11, -14, 65504.0), "bfloat16": (8, -126, 3.3895313892515355e38)}


def ulp_error(out, ref, dtype: str, abs_floor: float = 0.0) -> float:
    """The largest |out - ref| over the finite part of ref, less abs_floor, in
    units in the last place of `dtype` (float16, bfloat16) at ref, where out
    holds `dtype` values as float32/float64; inf where the NaN pattern differs,
    an infinite ref is not matched, or out is not finite where ref rounds to
    a finite value (and finite where it rounds to an infinity).

    abs_floor: an absolute error allowed on top, a number or an array like
    out; log_softmax passes float32's resolution of log(sum) there (its
    outputs near 0 carry that absolute error in float32 arithmetic, as
    torch's do), the backward ops a few 2^-24 of backward_scale."""
    xp = array_module(out)
    bits, emin, largest = HALF_FORMATS[dtype]
    out = to_float64(out)
    ref = xp.asarray(ref, dtype=xp.float64)
    nan_ref = xp.isnan(ref)
    if bool(xp.any(xp.isnan(out) != nan_ref)):
        return float("inf")
    finite = ~nan_ref
    mag = xp.abs(xp.where(finite, ref, 0.0))
    ulp = 2.0 ** (xp.maximum(xp.floor(xp.log2(xp.maximum(mag, 1e-300))), emin) - (bits - 1))
    rounds_to_inf = mag >= largest + ulp / 2  # ref itself infinite included
    with np.errstate(invalid="ignore"):  # sign(0) * inf where ref is 0: not compared
        wrong_inf = finite & rounds_to_inf & (out != xp.sign(ref) * xp.inf)
    if bool(xp.any(wrong_inf)):
        return float("inf")
    keep = finite & ~rounds_to_inf
    if bool(xp.any(keep & ~xp.isfinite(out))):
        return float("inf")
    err = xp.where(keep, xp.maximum(xp.abs(out - xp.where(keep, ref, 0.0)) - abs_floor, 0.0) / ulp, 0.0)
    return float(xp.max(err)) if err.size else 0.0


def to_float64(a):
    """a (a NumPy or CuPy array, or a torch CUDA tensor) in float64, exactly, as
    NumPy or CuPy.
    * CuPy builds its kernels with -ftz=true, so its float32 -> float64
      conversion turns subnormal inputs into 0 (softmax of a row with a wide
      range has subnormal outputs, e^-90 of the max): those are rebuilt from
      their bits.
    * torch converts on its stream, which CuPy does not wait for; CuPy copies
      the result on its own stream, which torch's allocator does not wait for
      when the block is freed (the next torch tensor could get it while the
      copy still reads it): both are finished before this returns."""
    if hasattr(a, "data_ptr"):
        import cupy
        import torch

        wide = a.double()
        torch.cuda.current_stream(a.device).synchronize()
        own = cupy.asarray(wide).copy()
        cupy.cuda.get_current_stream().synchronize()
        return own
    xp = array_module(a)
    if xp is np or a.dtype != xp.float32:
        return a.astype(xp.float64)
    bits = a.view(xp.uint32)
    magnitude = (bits & 0x7FFFFF).astype(xp.float64) * 2.0**-149  # right where the exponent field is 0
    subnormal = xp.where(bits >> 31 != 0, -magnitude, magnitude)
    return xp.where((bits & 0x7F800000) == 0, subnormal, a.astype(xp.float64))


def array_module(a):
    import sys

    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    return np
