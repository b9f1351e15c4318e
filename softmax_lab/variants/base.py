"""What every family shares: the Variant record, CannotRun, and the one launcher.

A family module (block_per_row, multi_block, ...) gives each of its variants two
functions: `plan(shape, dev)`, the launch plan for a shape on a device (a frozen
dataclass: block shape, cluster, defines), and `launch(shape, dev, plan)`, which builds
the kernel, asks the driver what it must (occupancy) and returns a launcher,
`launcher(x_ptr, y_ptr, stream)` (backward ops: `launcher(x_ptr, y_ptr, stream, g_ptr)`),
that only launches.  A plan is computed once: auto hands the plans it decided by to
prepare; an override is `dataclasses.replace(plan, ...)`.
"""

from __future__ import annotations

import ctypes
import math
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cupy
import numpy as np

from .. import loader
from ..device import DeviceInfo, max_active_clusters
from ..problem import BACKWARD_OPS, DTYPES, ITEMSIZE, OPS, Shape, kernel_defines
from ..scratch import CallMemory


class CannotRun(ValueError):
    """A variant cannot run this shape on this device (variant="auto" then tries the next)."""


# What building a kernel or asking the driver about it raises where the device
# refuses a configuration (its cluster size, its shared memory, a small part,
# a MIG slice): the launches turn these into CannotRun.
DEVICE_REFUSALS = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError, RuntimeError)

# launcher(x_ptr, y_ptr, stream): one call's launches, everything else resolved.
Launcher = Callable[[int, int, cupy.cuda.Stream], None]
Plan = Any  # a family's frozen plan dataclass
_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14  # CUfunction_attribute


def ptr(p: int) -> np.uint64:
    return np.uint64(p)


class PreparedLaunch:
    """One kernel's launch with its arguments laid out once, an 8-byte cell each (an integer,
    a pointer, or a float32's bits: float_bits), so that a call writes the cells it changes
    and launches (cuLaunchKernel through cupy.cuda.driver.launchKernel) rather than have
    CuPy pack every argument again.  A lock keeps concurrent calls from different threads
    off each other's cells until the launch has copied them.  A thread that has not used
    CUDA yet has no current context: where the driver refuses a launch for that, the
    runtime binds the device's and the launch runs again (asked on failure only, not
    before every launch)."""

    def __init__(self, function, grid: tuple, block: tuple, values: tuple, smem: int = 0):
        self._values = (ctypes.c_int64 * len(values))(*values)
        base = ctypes.addressof(self._values)
        self._params = (ctypes.c_void_p * len(values))(*(base + 8 * i for i in range(len(values))))
        self._address = ctypes.addressof(self._params)
        self._dims = (function.ptr, *(*grid, 1, 1)[:3], *(*block, 1, 1)[:3], smem)  # launchKernel's first 8
        self._lock = threading.Lock()
        self._made = function, grid, block, smem

    def with_values(self, values: tuple) -> PreparedLaunch:
        """A launch of the same kernel, grid and block with cells of its own: the first
        len(values) set to `values`, the rest as this one's (for a caller that sets some cells
        once and the others on every call)."""
        return PreparedLaunch(*self._made[:3], (*values, *self._values[len(values):]), self._made[3])

    def __call__(self, stream, *values) -> None:
        """Launch on `stream` with the first len(values) arguments set to `values` (the rest
        as they were)."""
        with self._lock:
            self._values[:len(values)] = values
            self._launch(stream)

    def forward(self, x: int, y: int, stream) -> None:
        """The Launcher of a kernel that takes (x, y, *scalars): __call__(stream, x, y) without
        its packing of arguments (a repeated small call is host time: each step in it counts)."""
        with self._lock:
            cells = self._values
            cells[0] = x
            cells[1] = y
            self._launch(stream)

    def backward(self, x: int, y: int, stream, g: int) -> None:
        """The backward Launcher of a kernel that takes (x, g, y, *scalars), x the forward's
        output: __call__(stream, x, g, y) without its packing of arguments."""
        with self._lock:
            cells = self._values
            cells[0] = x
            cells[1] = g
            cells[2] = y
            self._launch(stream)

    def _launch(self, stream) -> None:
        """Launch with the cells as they are (the lock held).  A refused launch in a thread with
        no current context binds the device's and launches again; with one, it stands."""
        try:
            cupy.cuda.driver.launchKernel(*self._dims, stream.ptr, self._address, 0)
        except cupy.cuda.driver.CUDADriverError:
            if cupy.cuda.driver.ctxGetCurrent():
                raise
            cupy.cuda.runtime.setDevice(cupy.cuda.runtime.getDevice())
            cupy.cuda.driver.launchKernel(*self._dims, stream.ptr, self._address, 0)


def float_bits(v: float) -> int:
    """A float32 argument's cell for PreparedLaunch: its bits (the kernel reads the low 4 bytes)."""
    return _FLOAT32_BITS.unpack(_FLOAT32.pack(v))[0]


_FLOAT32, _FLOAT32_BITS = struct.Struct("<f"), struct.Struct("<i")  # float_bits' conversion, a tenth of NumPy's cost


def one_kernel_launcher(function, grid: tuple, block: tuple, scalars: tuple, backward: bool,
                        smem: int = 0) -> Launcher:
    """The launcher of one kernel that takes (x, y, *scalars), or for the backward ops
    (x, g, y, *scalars), every argument 8 bytes: a PreparedLaunch whose calls set the
    pointers."""
    pointers = 3 if backward else 2
    prepared = PreparedLaunch(function, grid, block, (0,) * pointers + tuple(map(int, scalars)), smem)
    return prepared.backward if backward else prepared.forward


def slots_and_tickets(memory: CallMemory, items: int) -> tuple[cupy.ndarray, cupy.ndarray]:
    """A call's scratch for the ticket-ordered launches (multi_block_l2, multi_block_smem):
    a slot word per item, marked unwritten (bytes 0xBF), and the ticket counter at 0."""
    return memory.filled_words(items, 0xBF), memory.filled_words(1, 0)


def cluster_kernel(source: str, plan, dev: DeviceInfo, shape: Shape,
                   defines: dict[str, int] | None = None) -> cupy.RawKernel:
    """The cluster kernel of kernels/<source> built for `plan` and the shape's dtype and op
    (and `defines` besides), with its dynamic shared memory and (past 8 blocks in the
    hardware cluster it launches, `plan.cluster_dims`) the non-portable cluster size allowed."""
    kernel = loader.get_kernel(source, source.removesuffix(".cu"),
                               plan.defines(dev) | kernel_defines(shape.dtype, shape.op) | (defines or {}),
                               device_id=dev.id)
    kernel.max_dynamic_shared_size_bytes = plan.smem_bytes
    if plan.cluster_dims > 8:
        cupy.cuda.driver.funcSetAttribute(kernel.kernel.ptr, _NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    return kernel


def resident_groups(plan, kernel: cupy.RawKernel, dev: DeviceInfo) -> int:
    """Clusters (or, for a cluster of one, blocks) of `plan` that can be resident at once."""
    if plan.cluster == 1:
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, plan.threads,
                                                                             plan.smem_bytes)
        return per_sm * dev.sm_count
    return max_active_clusters(kernel, plan.cluster, plan.threads, plan.smem_bytes)


def cluster_launcher(source: str, plan, shape: Shape, dev: DeviceInfo, name: str, groups: int | None = None,
                     lines: int = 1) -> Launcher:
    """A launch of clusters of `plan`, one row each at a time: `groups` clusters on each of
    `lines` grid lines, or (None) as many as can be resident at once, looping over the rows.
    A device that refuses the plan (its cluster size, its shared memory, no cluster
    resident: a small part, a MIG slice, a busy device) is CannotRun, so that auto falls
    back to the next variant."""
    try:
        kernel = cluster_kernel(source, plan, dev, shape)
        groups = min(shape.rows, groups or resident_groups(plan, kernel, dev))
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant {name!r}: {dev.name} cannot run {plan}: {e}") from e
    if groups < 1:
        raise CannotRun(f"variant {name!r}: no cluster of {plan} can be resident on {dev.name}")
    # The backward kernels take (y, dy, dx, rows, n, ld_y, ld_dy, ld_dx): (x, g, y, *scalars).
    return one_kernel_launcher(kernel.kernel, (groups * plan.cluster, lines), (plan.threads,), shape.scalars(),
                               shape.backward, plan.smem_bytes)


class HeldRowPlan:
    """What a plan that holds each row on chip across a cluster of blocks (cluster_row,
    single_read: their dataclasses' fields cluster, threads and vpt) knows of its size."""

    @property
    def capacity_vecs(self) -> int:
        """16-byte vectors of a row (of each array) the plan holds."""
        return self.cluster * self.threads * self.vpt


def _any_length(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> float:
    return math.inf


@dataclass(frozen=True)
class Variant:
    """A kernel algorithm: its sources, its traffic model, what it runs, and its plan and launch."""

    name: str
    source: str  # file in kernels/
    entries: tuple[str, ...]
    reads: int  # passes over x in device memory
    writes: int  # passes over y
    min_compute_capability: int
    summary: str
    launch_rule: str
    plan: Callable[[Shape, DeviceInfo], Plan] = field(repr=False)  # raises CannotRun where no plan holds the shape
    launch: Callable[[Shape, DeviceInfo, Plan], Launcher] = field(repr=False)
    max_cols: Callable[..., float] = field(default=_any_length, repr=False)  # (dev, dtype, op): the longest row
    dtypes: tuple[str, ...] = tuple(DTYPES)  # the element types its kernels take
    ops: tuple[str, ...] = OPS  # forward and backward ops its kernels compute
    no_backward: str = ""  # why it has no backward kernels, where it has none by design
    backward_source: str = ""  # file in kernels/ of its backward kernels, where not `source`

    def bytes_per_element(self, itemsize: int = ITEMSIZE, op: str = "softmax") -> int:
        """A backward op reads two arrays (y and dy) as often as the forward reads x."""
        reads = 2 * self.reads if op in BACKWARD_OPS else self.reads
        return (reads + self.writes) * itemsize

    def traffic_bytes(self, rows: int, cols: int, itemsize: int = ITEMSIZE, op: str = "softmax") -> int:
        """Bytes this variant moves through device memory for a rows x cols problem of `op`."""
        return rows * cols * self.bytes_per_element(itemsize, op)

    def unsupported_reason(self, cols: int, dev: DeviceInfo, dtype: str = "float32",
                           op: str = "softmax") -> str | None:
        """Why this variant cannot run rows of `cols` `dtype` elements, computing `op`, on `dev`; None if it can."""
        if dtype not in self.dtypes:
            return f"variant {self.name!r} holds {', '.join(self.dtypes)} only; got {dtype}"
        if op in BACKWARD_OPS and self.no_backward:
            return f"variant {self.name!r} has no backward pass: {self.no_backward}"
        if op not in self.ops:
            return f"variant {self.name!r} computes {', '.join(self.ops)} only; got {op}"
        if dev.compute_capability < self.min_compute_capability:
            cc = self.min_compute_capability
            return (f"variant {self.name!r} needs compute capability {cc // 10}.{cc % 10} or newer; "
                    f"{dev.name} has {dev.compute_capability // 10}.{dev.compute_capability % 10}")
        if cols > self.max_cols(dev, dtype, op):
            return (f"variant {self.name!r} holds rows of at most {self.max_cols(dev, dtype, op)} {dtype} elements "
                    f"on {dev.name}; got {cols}")
        return None

    def prepare(self, shape: Shape, dev: DeviceInfo, plan: Plan | None = None) -> Launcher:
        """The launcher for `shape` on `dev` by `plan` (its own plan for the shape where None);
        CannotRun if this variant cannot run it there."""
        reason = self.unsupported_reason(shape.cols, dev, shape.dtype, shape.op)
        if reason:
            raise CannotRun(reason)
        return self.launch(shape, dev, self.plan(shape, dev) if plan is None else plan)
