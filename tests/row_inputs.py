"""Inputs the tests share: a GPU array's interface without memory (for the checks made
before any device), a CuPy array's fields without memory (for the repeated calls' lookups),
a stream with no device behind it, and seeded random rows in any dtype."""

from types import SimpleNamespace

import numpy as np
import pytest


class FakeGpuArray:
    """A __cuda_array_interface__ and no memory: for the checks made before any device."""

    def __init__(self, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (1 << 30, False), "version": 3}


class FakeCupyArray:
    """What a repeated call's lookup reads of a cupy.ndarray, C-contiguous, and no memory: for
    the lookup's tests with `cupy.ndarray` patched to this class."""

    def __init__(self, ptr, shape, dtype="float32"):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        strides, step = [], self.dtype.itemsize
        for n in reversed(self.shape):
            strides.insert(0, step)
            step *= n
        self.strides = tuple(strides)
        self.data = SimpleNamespace(ptr=ptr, device_id=0)


class FakeStream:
    """A CuPy stream's handle, context and synchronize, with no device behind them."""

    ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


def random_rows(shape, dtype="float32", scale=3.0, seed=0):
    """Standard normal draws times `scale`: float32 or float16 as CuPy, bfloat16 as torch."""
    import cupy as cp

    x = cp.random.default_rng(seed).standard_normal(shape, dtype=cp.float32) * scale
    if dtype == "bfloat16":
        torch = pytest.importorskip("torch")
        return torch.from_dlpack(x).to(torch.bfloat16)
    return x.astype(dtype)
