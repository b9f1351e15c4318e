"""Cross-entropy (kernels/cross_entropy_held.cu, kernels/cross_entropy.cu): the loss in one
read of the logits, and with it the gradient.

Two layouts, by row length and device:
  held:    where cluster_row holds the row (sm_90, up to 16 blocks of its block shapes), each
           row in registers across a cluster: the loss from one read, and the gradient
           written from the registers (1 read + 1 write).  cluster_row_plan's plan, the
           gradient's build at the loss's blocks per SM: where it spills a few words there,
           that costs less than a block per SM fewer (notes/TUNING.md#cross-entropy;
           tests/test_loader.py compiles the plans of a grid and bounds the spills).  With
           few rows (no more than a block's threads) a mean's or sum's count and total
           are made in the same launch (XENT_REDUCE), so that such a call is one launch;
  chunked: elsewhere, rows split into chunks (row_stats_plan's, short enough to fill the
           GPU as logsumexp's): the loss from one read, the gradient by a second pass
           (2 reads + 1 write).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import cupy
import numpy as np

from .. import loader
from ..device import DeviceInfo
from ..problem import Shape, kernel_defines
from ..scratch import TICKET_ROWS, CallMemory, ticket
from .base import DEVICE_REFUSALS, PreparedLaunch, cluster_kernel, float_bits, ptr, resident_groups
from .cluster_row import RowClusterPlan, cluster_row_plan
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


LossLauncher = Callable[[LossBuffers, LossOptions, cupy.cuda.Stream], None]


def held_plan(shape: Shape, dev: DeviceInfo) -> RowClusterPlan | None:
    """The held layout's plan for rows of `shape` on `dev` (the loss's, with its gradient or
    not), or None where no cluster holds the row."""
    return cluster_row_plan(shape.cols, dev, shape.rows, shape.itemsize, 1)


def passes(shape: Shape, dev: DeviceInfo, grad: bool) -> tuple[int, int]:
    """(reads, writes) of the logits' size that a call makes: the traffic model."""
    if not grad:
        return 1, 0
    return (1, 1) if held_plan(shape, dev) else (2, 1)


def cross_entropy_launch(shape: Shape, dev: DeviceInfo, target_bytes: int) -> LossLauncher:
    """launcher(buffers, options, stream): the launches of one call (LossBuffers, LossOptions).
    The held kernel, the count and the total launch prepared (PreparedLaunch), so that a small
    call costs little more than its launches; the chunks' kernels through CuPy."""
    defines = kernel_defines(shape.dtype, "softmax") | {"XENT_TARGET_BYTES": target_bytes}
    get = lambda entry: loader.get_kernel("cross_entropy.cu", entry, defines, device_id=dev.id).kernel
    rows, cols, ld_x = np.int64(shape.rows), np.int64(shape.cols), np.int64(shape.ld_x)
    count = PreparedLaunch(get("cross_entropy_count"), (1,), (ONE_BLOCK,), (0, 0, 0, 0, shape.rows))
    total = PreparedLaunch(get("cross_entropy_total"), (1,), (ONE_BLOCK,), (0, 0, 0, shape.rows))

    @functools.cache
    def held(grad: bool, reduce: bool) -> PreparedLaunch | None:
        """The held layout's launch (with the count and the total where `reduce` and the rows
        are few), or None where the device cannot run it."""
        plan = held_plan(shape, dev)
        if plan is None or (reduce and shape.rows > min(plan.threads, TICKET_ROWS)):
            return None
        try:
            kernel = cluster_kernel("cross_entropy_held.cu", plan, dev, shape,
                                    {"SOFTMAX_LOG": 1, "XENT_TARGET_BYTES": target_bytes, "XENT_GRAD": int(grad),
                                     "XENT_REDUCE": int(reduce)})
            if resident_groups(plan, kernel, dev) < 1:
                return None
        except DEVICE_REFUSALS:  # a cluster size or a block the device refuses: the chunks run
            return None
        per_line = min(shape.rows, MAX_GRID_X // plan.cluster)  # rows of a grid line, a cluster each
        grid = (per_line * plan.cluster, -(-shape.rows // per_line))
        return PreparedLaunch(kernel.kernel, grid, (plan.threads,), (0,) * 14 + (shape.rows, shape.cols, shape.ld_x))

    @functools.cache
    def chunked():
        plan = row_stats_plan(shape, dev)
        chunks, item_grid, row_grid = chunk_grids(shape, plan)
        kernels = get("cross_entropy_partials"), get("cross_entropy_rows"), get("cross_entropy_grad")
        return kernels, plan, chunks, item_grid, row_grid

    def launch_chunked(out: LossBuffers, options: LossOptions, scale: int, loss_rows: int, memory, stream) -> None:
        (partials_k, rows_k, grad_k), plan, chunks, item_grid, row_grid = chunked()
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

    def launch(out: LossBuffers, options: LossOptions, stream) -> None:
        mean, grad = options.reduction == "mean", bool(out.grad)
        per_call = (out.x, out.grad, out.target, out.ld_grad, out.ld_target, options.ignore_index,
                    float_bits(options.label_smoothing), float_bits(options.z_loss))
        with CallMemory(stream) as memory:
            one_launch = held(grad, True) if out.total else None
            if one_launch is not None:
                word, room = ticket(memory)
                one_launch(stream, *per_call, 0, out.loss_rows or room, out.lse, word, out.total, int(mean))
                return
            scale = 0  # (1 / count, count) for a mean
            if mean:
                scale = memory.empty(2, cupy.float32).data.ptr
                count(stream, out.target, out.ld_target, options.ignore_index, scale)
            loss_rows = out.loss_rows or memory.empty(shape.rows, cupy.float32).data.ptr
            held_launch = held(grad, False)
            if held_launch is None:
                launch_chunked(out, options, scale, loss_rows, memory, stream)
            else:
                held_launch(stream, *per_call, scale, loss_rows, out.lse, 0, 0, 0)
            if out.total:
                total(stream, loss_rows, scale, out.total)

    return launch
