"""Cross-entropy (kernels/cross_entropy_held.cu, kernels/cross_entropy.cu): the loss in one
read of the logits, and with it the gradient.

Two layouts, by row length and device:
  held:    where cluster_row holds the row (sm_90, up to 16 blocks of its block shapes), each
           row in registers across a cluster: the loss from one read, and the gradient
           written from the registers (1 read + 1 write).  cluster_row_plan's plan (the loss
           alone with evict-first loads: held_plan), the gradient's build at the loss's
           blocks per SM: where it spills a few words there, that costs less than a block
           per SM fewer (notes/TUNING.md#cross-entropy;
           tests/test_loader.py compiles the plans of a grid and bounds the spills).  With
           few rows (no more than a block's threads) a mean's or sum's count and total
           are made in the same launch (XENT_REDUCE), so that such a call is one launch;
  chunked: elsewhere, rows split into chunks (row_stats_plan's, short enough to fill the
           GPU as logsumexp's): the loss from one read, the gradient by a second pass
           (2 reads + 1 write).
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import cupy
import numpy as np

from .. import loader
from ..device import DeviceInfo
from ..problem import Shape, kernel_defines
from ..scratch import TICKET_ROWS, CallMemory, capturing, stream_ticket, ticket
from .base import DEVICE_REFUSALS, PreparedLaunch, cluster_kernel, float_bits, ptr, resident_groups
from .cluster_row import RowClusterPlan, blocks_per_sm, cluster_row_plan
from .multi_block import chunk_grids, row_stats_plan
from .resources import MAX_GRID_X

ONE_BLOCK = 1024  # threads of the one-block kernels (the count and the total)
ROW_THREADS = 256  # threads of cross_entropy_rows' block per row


@dataclass(frozen=True)
class LossOptions:
    """What a call asks besides the arrays (softmax_lab.cross_entropy's keywords)."""

    ignore_index: int = -100
    reduction: str = "mean"
    label_smoothing: float = 0.0
    z_loss: float = 0.0


class LossBuffers(NamedTuple):  # a tuple: made on every call, where a frozen dataclass costs a microsecond
    """Where one call's results go (device pointers; 0: not wanted).

    x and target are read; loss_rows gets every row's loss (float32, rows of them),
    total the reduced loss (one float32), lse every row's logsumexp, grad the gradient
    (x's dtype and row length, ld_grad elements between rows; it may be x)."""

    x: int
    target: int
    ld_target: int
    loss_rows: int = 0
    total: int = 0
    lse: int = 0
    grad: int = 0
    ld_grad: int = 0


# run(x, target, grad, loss_rows, total, lse, stream): a repeated call's launches, for
# the options and layout it was made for (LossLauncher.repeat), its pointers given
RepeatLaunch = Callable[[int, int, int, int, int, int, cupy.cuda.Stream], None]


# The loss alone's registers besides its vectors (ptxas, NVRTC 13, sm_90, the most registers
# its builds used without spills): fewer than cluster_row's forward, which writes the row back.
# tests/test_loader.py compiles the plans of a grid and finds no spill.
LOSS_OTHER_REGISTERS = {4: 16, 2: 24}


def held_plan(shape: Shape, dev: DeviceInfo, grad: bool = True) -> RowClusterPlan | None:
    """The held layout's plan for rows of `shape` on `dev`, or None where no cluster holds the
    row: cluster_row's forward plan, whose loads keep the logits' lines in L2 (evict-last) for
    the gradient's stores as they keep x's for softmax's.  The loss alone writes nothing: its
    loads evict first (no line of the logits is worth keeping), and it takes the blocks per
    SM of its own register model (notes/TUNING.md#cross-entropy)."""
    plan = cluster_row_plan(shape.cols, dev, shape.rows, shape.itemsize, 1)
    if plan is None or grad:
        return plan
    return dataclasses.replace(plan, stream_loads=True, blocks_per_sm=blocks_per_sm(
        plan.threads, plan.vpt, 1, shape.itemsize, plan.cluster, LOSS_OTHER_REGISTERS[shape.itemsize]))


def passes(shape: Shape, dev: DeviceInfo, grad: bool) -> tuple[int, int]:
    """(reads, writes) of the logits' size that a call makes: the traffic model."""
    if not grad:
        return 1, 0
    return (1, 1) if held_plan(shape, dev) else (2, 1)


class LossLauncher:
    """The launches of a call on logits of one shape on one device: launcher(buffers, options,
    stream).  The held kernel, the count and the total launch prepared (PreparedLaunch), so that
    a small call costs little more than its launches; the chunks' kernels through CuPy."""

    def __init__(self, shape: Shape, dev: DeviceInfo, target_bytes: int):
        self.shape, self.dev, self.target_bytes = shape, dev, target_bytes
        self._defines = kernel_defines(shape.dtype, "softmax") | {"XENT_TARGET_BYTES": target_bytes}
        self._count = PreparedLaunch(self._get("cross_entropy_count"), (1,), (ONE_BLOCK,), (0, 0, 0, 0, shape.rows))
        self._total = PreparedLaunch(self._get("cross_entropy_total"), (1,), (ONE_BLOCK,), (0, 0, 0, shape.rows))
        self._held: dict[tuple[bool, bool], PreparedLaunch | None] = {}
        self._chunked = None

    def _get(self, entry: str):
        return loader.get_kernel("cross_entropy.cu", entry, self._defines, device_id=self.dev.id).kernel

    def held(self, grad: bool, reduce: bool) -> PreparedLaunch | None:
        """The held layout's launch (with the count and the total where `reduce` and the rows
        are few), or None where the device cannot run it."""
        key = grad, reduce
        if key not in self._held:
            self._held[key] = self._held_launch(grad, reduce)
        return self._held[key]

    def _held_launch(self, grad: bool, reduce: bool) -> PreparedLaunch | None:
        shape, dev = self.shape, self.dev
        plan = held_plan(shape, dev, grad)
        if plan is None or (reduce and shape.rows > min(plan.threads, TICKET_ROWS)):
            return None
        try:
            kernel = cluster_kernel("cross_entropy_held.cu", plan, dev, shape,
                                    {"SOFTMAX_LOG": 1, "XENT_TARGET_BYTES": self.target_bytes,
                                     "XENT_GRAD": int(grad), "XENT_REDUCE": int(reduce)})
            if resident_groups(plan, kernel, dev) < 1:
                return None
        except DEVICE_REFUSALS:  # a cluster size or a block the device refuses: the chunks run
            return None
        per_line = min(shape.rows, MAX_GRID_X // plan.cluster)  # rows of a grid line, a cluster each
        grid = (per_line * plan.cluster, -(-shape.rows // per_line))
        return PreparedLaunch(kernel.kernel, grid, (plan.threads,), (0,) * 14 + (shape.rows, shape.cols, shape.ld_x))

    def _chunks(self):
        if self._chunked is None:
            plan = row_stats_plan(self.shape, self.dev)
            kernels = self._get("cross_entropy_partials"), self._get("cross_entropy_rows"), \
                self._get("cross_entropy_grad")
            self._chunked = kernels, plan, *chunk_grids(self.shape, plan)
        return self._chunked

    def _launch_chunked(self, out: LossBuffers, options: LossOptions, scale: int, loss_rows: int, memory,
                        stream) -> None:
        (partials_k, rows_k, grad_k), plan, chunks, item_grid, row_grid = self._chunks()
        shape = self.shape
        rows, cols, ld_x = np.int64(shape.rows), np.int64(shape.cols), np.int64(shape.ld_x)
        ignore, ld_t = np.int64(options.ignore_index), np.int64(out.ld_target)
        n_chunk_vecs, n_chunks = np.int64(plan.chunk_vecs), np.int64(chunks)
        partials = memory.empty((shape.rows * chunks, 3), cupy.float32)
        row_grad = memory.empty((shape.rows, 4), cupy.float32) if out.grad else ptr(0)
        partials_k(item_grid, (plan.threads,), (ptr(out.x), rows, cols, ld_x, n_chunk_vecs, n_chunks, partials),
                   stream=stream)
        rows_k(row_grid, (ROW_THREADS,), (partials, ptr(out.x), ptr(out.target), rows, cols, ld_x, ld_t, n_chunks,
                                          ignore, np.float32(options.label_smoothing), np.float32(options.z_loss),
                                          ptr(scale), ptr(loss_rows), ptr(out.lse), row_grad), stream=stream)
        if out.grad:
            grad_k(item_grid, (plan.threads,), (ptr(out.x), ptr(out.grad), ptr(out.target), rows, cols, ld_x,
                                                np.int64(out.ld_grad), ld_t, n_chunk_vecs, n_chunks, ignore,
                                                row_grad), stream=stream)

    def __call__(self, out: LossBuffers, options: LossOptions, stream) -> None:
        mean, grad = options.reduction == "mean", bool(out.grad)
        with CallMemory(stream) as memory:
            one_launch = self.held(grad, True) if out.total else None
            if one_launch is not None:
                word, room = ticket(memory)
                one_launch(stream, out.x, out.grad, out.target, out.loss_rows or room, out.lse, word, out.total,
                           *_held_options(out.ld_grad, out.ld_target, options), 0, int(mean))
                return
            scale = 0  # (1 / count, count) for a mean
            if mean:
                scale = memory.empty(2, cupy.float32).data.ptr
                self._count(stream, out.target, out.ld_target, options.ignore_index, scale)
            loss_rows = out.loss_rows or memory.empty(self.shape.rows, cupy.float32).data.ptr
            held_launch = self.held(grad, False)
            if held_launch is None:
                self._launch_chunked(out, options, scale, loss_rows, memory, stream)
            else:
                held_launch(stream, out.x, out.grad, out.target, loss_rows, out.lse, 0, 0,
                            *_held_options(out.ld_grad, out.ld_target, options), scale, 0)
            if out.total:
                self._total(stream, loss_rows, scale, out.total)

    def repeat(self, options: LossOptions, ld_target: int, grad: bool, ld_grad: int) -> RepeatLaunch:
        """run(x, target, grad, loss_rows, total, lse, stream): calls with `options`, a target
        of row pitch ld_target, and a gradient (of row pitch ld_grad) or none, their pointers
        given.  Where such a call is one held launch, a launch of its own with the options'
        cells set once: a call sets the seven pointers and launches (with a total, outside
        capture, on the stream's ticket word; under capture the general call)."""
        mean, reduced_here = options.reduction == "mean", options.reduction != "none"
        one_launch = self.held(grad, reduced_here)

        def general(x: int, target: int, g: int, loss_rows: int, total: int, lse: int, stream) -> None:
            self(LossBuffers(x, target, ld_target, loss_rows, total, lse, g, ld_grad), options, stream)

        if one_launch is None:
            return general
        own = one_launch.with_values((0,) * 7 + (*_held_options(ld_grad, ld_target, options), 0, int(mean)))
        if not reduced_here:  # each row's loss: no scratch
            def each_row(x: int, target: int, g: int, loss_rows: int, total: int, lse: int, stream) -> None:
                own(stream, x, g, target, loss_rows, lse, 0, 0)

            return each_row

        def reduced(x: int, target: int, g: int, loss_rows: int, total: int, lse: int, stream) -> None:
            if capturing(stream):
                general(x, target, g, loss_rows, total, lse, stream)
                return
            word, room = stream_ticket(stream)
            own(stream, x, g, target, loss_rows or room, lse, word, total)

        return reduced


def _held_options(ld_grad: int, ld_target: int, options: LossOptions) -> tuple[int, ...]:
    """The held kernel's cells after the seven pointers, up to its scale: the row pitches,
    ignore_index and the two coefficients' float32 bits."""
    return (ld_grad, ld_target, options.ignore_index, float_bits(options.label_smoothing),
            float_bits(options.z_loss))
