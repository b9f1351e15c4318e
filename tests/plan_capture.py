"""Auto's decision and full launch plan for a shape on a described device, without a GPU.

The driver is replaced at the few places the library meets it: the loader's
get_kernel (a kernel records its source, entry and defines), the occupancy
queries (a deterministic model of blocks per SM from threads, shared memory
and __launch_bounds__'s blocks per SM), the kernel launches (recorded, not
run) and a call's scratch memory.  The library's own code runs unchanged, so
what it records is what it would launch on a device of that description
(given that occupancy model): which variant auto takes, and every launch's
kernel, defines, grid, block, shared memory and scalar arguments.

tests/test_plan_golden.py compares a grid of such records with
tests/data/golden_plans.jsonl.gz, written by `python tests/plan_capture.py`
before the variants were split into one module per family: the layout may
change, the decisions may not.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import itertools
import json
import sys
from pathlib import Path
from typing import ClassVar
from unittest import mock

import numpy as np
from devices import A100, H200

from softmax_lab import api, device, loader, scratch
from softmax_lab.device import DeviceInfo

GOLDEN = Path(__file__).parent / "data" / "golden_plans.jsonl.gz"

DEVICES = {"H200": H200, "A100": A100}

ROWS = (1, 2, 7, 32, 100, 131, 132, 133, 264, 528, 1000, 1056, 4096, 16384, 65537)
COLS = (1, 2, 3, 31, 100, 1000, 1025, 2048, 3072, 3073, 4096, 8191, 12000, 16384, 16385, 32000, 50257, 65536,
        100003, 128256, 151936, 196608, 200003, 262144, 300001, 393216, 393217, 500000, 786432, 786433, 1048576,
        2097152, 4194304, 8388608, 12000000, 16000001)
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}
OPS = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward")
# (name, x byte offset, extra elements of row stride, dy byte offset): contiguous rows on 128-byte
# lines; rows whose starts are off a line but on 16 bytes; rows off 16 bytes (and dy off y's alignment)
LAYOUTS = (("lines", 0, 0, 0), ("padded", 16, 4, 16), ("odd", 4, 1, 8))


class _Function:
    def __init__(self, kernel, ptr):
        self.kernel, self.ptr = kernel, ptr

    def __call__(self, grid, block, args, stream=None, shared_mem=0, enable_cooperative_groups=False):
        self.kernel.recorder.append({"kernel": self.kernel.name, "grid": list(grid), "block": list(block),
                                     "smem": int(shared_mem), "cooperative": bool(enable_cooperative_groups),
                                     "args": [_arg(a) for a in args]})


class _Kernel:
    """What loader.get_kernel returns, for the launchers: .kernel (callable, .ptr) and the shared-memory knob."""

    registry: ClassVar[dict[int, _Kernel]] = {}

    def __init__(self, source, entry, defines, recorder):
        self.name = f"{source}:{entry}"
        self.defines = dict(sorted((defines or {}).items()))
        self.recorder = recorder
        self.max_dynamic_shared_size_bytes = 0
        self.kernel = _Function(self, 1000 + len(_Kernel.registry))
        _Kernel.registry[self.kernel.ptr] = self


def _arg(a):
    if isinstance(a, _Scratch):
        return f"scratch[{a.count}x{a.itemsize}]"
    if isinstance(a, np.uint64):
        return "ptr"
    return int(a)


class _Scratch:
    def __init__(self, shape, dtype):
        self.count = int(np.prod(shape, dtype=np.int64))
        self.itemsize = np.dtype(dtype).itemsize


def _blocks_per_sm(kernel: _Kernel, threads: int, smem: int, dev: DeviceInfo) -> int:
    """The occupancy model: threads (2048 an SM), shared memory (with the driver's 1 KB a block) and the
    blocks per SM a kernel's __launch_bounds__ names, whichever allows fewest."""
    by_threads = 2048 // threads
    by_smem = dev.smem_per_sm_bytes // (smem + 1024) if smem else 32
    bounds = [v for k, v in kernel.defines.items() if k.endswith("BLOCKS_PER_SM")]
    return max(0, min(by_threads, by_smem, 32, *bounds))


class _LibCuda:
    def __init__(self, dev):
        self.dev = dev

    def cuOccupancyMaxActiveClusters(self, count, function, config):
        config = ctypes.cast(config, ctypes.POINTER(device._LaunchConfig)).contents
        kernel = _Kernel.registry[function.value]
        cluster = config.gridDimX
        per_sm = _blocks_per_sm(kernel, config.blockDimX, config.sharedMemBytes, self.dev)
        usable = self.dev.sm_count * per_sm * (0.93 if cluster >= 4 else 1.0)  # the GPC layout's loss
        ctypes.cast(count, ctypes.POINTER(ctypes.c_int)).contents.value = int(usable) // cluster
        return 0


@contextlib.contextmanager
def described(dev: DeviceInfo, recorder: list):
    """The library running against the described device, its launches appended to `recorder`."""

    def get_kernel(source, entry, defines=None, device_id=0):
        return _Kernel(source, entry, defines, recorder)

    def occupancy(ptr, threads, smem):
        return _blocks_per_sm(_Kernel.registry[ptr], threads, smem, dev)

    def launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        _Kernel.registry[f].kernel((gx, gy, gz), (bx, by, bz), (), shared_mem=smem)

    def empty(self, shape, dtype):
        return _Scratch(shape, dtype)

    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        enter(mock.patch.object(loader, "get_kernel", get_kernel))
        enter(mock.patch.object(device, "_libcuda", lambda: _LibCuda(dev)))
        enter(mock.patch("cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor", occupancy))
        enter(mock.patch("cupy.cuda.driver.funcSetAttribute", lambda *a: None))
        enter(mock.patch("cupy.cuda.driver.launchKernel", launch_kernel))
        enter(mock.patch("cupy.cuda.driver.ctxGetCurrent", lambda: 1))
        enter(mock.patch.object(scratch.CallMemory, "__init__", lambda self, stream: None))
        enter(mock.patch.object(scratch.CallMemory, "empty", empty))
        enter(mock.patch.object(scratch.CallMemory, "filled_words",
                                lambda self, count, byte: _Scratch(count, np.uint64)))
        enter(mock.patch.object(scratch.CallMemory, "release", lambda self: None))
        yield


class _Stream:
    ptr = 0


def shape_of(rows: int, cols: int, dtype: str, op: str, layout: tuple):
    _, x_offset, pad, g_offset = layout
    backward = op.endswith("_backward")
    ld = cols + pad
    return api.Shape(rows, cols, ld, cols, x_offset=x_offset, y_offset=0, itemsize=DTYPES[dtype], dtype=dtype, op=op,
                     ld_g=ld if backward else 0, g_offset=g_offset if backward else 0)


def record(dev_name: str, rows: int, cols: int, dtype: str, op: str, layout: tuple) -> dict:
    """Auto's variant for the shape and the launches its launcher makes in one call."""
    dev = DEVICES[dev_name]
    launches: list = []
    shape = shape_of(rows, cols, dtype, op, layout)
    with described(dev, launches):
        variant, launcher = api._prepare(shape, dev, "auto")
        kernels = {k.name: k.defines for k in _Kernel.registry.values() if k.recorder is launches}
        launches.clear()
        args = (1 << 20, 2 << 20, _Stream()) + ((3 << 20,) if shape.backward else ())
        launcher(*args)
    for launch in launches:
        launch["defines"] = kernels[launch["kernel"]]
    return {"device": dev_name, "rows": rows, "cols": cols, "dtype": dtype, "op": op, "layout": layout[0],
            "variant": variant.name, "launches": launches}


def points():
    yield from itertools.product(DEVICES, ROWS, COLS, DTYPES, OPS, LAYOUTS)


def dump(path: Path = GOLDEN) -> int:
    n = 0
    with gzip.open(path, "wt", compresslevel=9) as f:
        for p in points():
            f.write(json.dumps(record(*p), sort_keys=True) + "\n")
            n += 1
    return n


if __name__ == "__main__":
    print(dump(Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN), "records")
