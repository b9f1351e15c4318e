"""The float64 reference softmax and the error measure every check uses."""

from __future__ import annotations

import numpy as np


def softmax_reference(x, axis: int = -1):
    """softmax in float64 with torch's special values: -inf gives 0; a row of all
    -inf, or with a NaN or +inf, gives NaN.  Works on NumPy and CuPy arrays."""
    xp = _xp(x)
    x = x.astype(xp.float64)
    m = xp.max(x, axis=axis, keepdims=True)  # NaN propagates
    e = xp.exp(x - m)
    return e / xp.sum(e, axis=axis, keepdims=True)


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| over the finite part of ref, or inf where the
    NaN pattern of out differs from ref's (an unwritten or wrong NaN fails)."""
    xp = _xp(out)
    out = out.astype(xp.float64)
    nan_ref = xp.isnan(ref)
    if bool(xp.any(xp.isnan(out) != nan_ref)):
        return float("inf")
    keep = ~nan_ref
    diff = xp.where(keep, out - ref, 0.0)
    norm = float(xp.linalg.norm(xp.where(keep, ref, 0.0)))
    err = float(xp.linalg.norm(diff))
    return err / norm if norm > 0 else err


def _xp(a):
    import sys

    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    return np
