"""Cross-entropy over rows split into chunks (kernels/cross_entropy.cu): the loss in one
read of the logits, and with it the gradient, written by a second pass over the same
chunks.  The chunks are row_stats_plan's: a read-only pass over a few long rows needs
them short enough to fill the GPU, as logsumexp's does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cupy
import numpy as np

from .. import loader
from ..device import DeviceInfo
from ..problem import Shape, kernel_defines
from ..scratch import CallMemory
from .base import ptr
from .multi_block import MultiBlockPlan, chunk_grids, row_stats_plan

ONE_BLOCK = 1024  # threads of the one-block kernels (the count and the total)
ROW_THREADS = 256  # threads of cross_entropy_rows' block per row


@dataclass(frozen=True)
class LossOptions:
    """What a call asks besides the arrays (softmax_lab.cross_entropy's keywords)."""

    ignore_index: int = -100
    reduction: str = "mean"
    label_smoothing: float = 0.0
    z_loss: float = 0.0


@dataclass(frozen=True)
class LossBuffers:
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


def cross_entropy_plan(shape: Shape, dev: DeviceInfo) -> MultiBlockPlan:
    """The chunks of the partials' and the gradient's passes for rows of `shape` on `dev`."""
    return row_stats_plan(shape, dev)


def cross_entropy_launch(shape: Shape, dev: DeviceInfo, plan: MultiBlockPlan, target_bytes: int) -> LossLauncher:
    """launcher(buffers, options, stream): the launches of one call (LossBuffers, LossOptions)."""
    defines = kernel_defines(shape.dtype, "softmax") | {"XENT_TARGET_BYTES": target_bytes}
    get = lambda entry: loader.get_kernel("cross_entropy.cu", entry, defines, device_id=dev.id).kernel
    count_k, partials_k, rows_k = get("cross_entropy_count"), get("cross_entropy_partials"), get("cross_entropy_rows")
    grad_k, total_k = get("cross_entropy_grad"), get("cross_entropy_total")
    chunks, item_grid, row_grid = chunk_grids(shape, plan)
    rows, cols, ld_x = np.int64(shape.rows), np.int64(shape.cols), np.int64(shape.ld_x)
    n_chunk_vecs, n_chunks = np.int64(plan.chunk_vecs), np.int64(chunks)

    def launch(out: LossBuffers, options: LossOptions, stream) -> None:
        mean = options.reduction == "mean"
        ignore, ld_t = np.int64(options.ignore_index), np.int64(out.ld_target)
        with CallMemory(stream) as memory:
            scale = memory.empty(2, cupy.float32) if mean else ptr(0)  # (1 / count, count)
            if mean:
                count_k((1,), (ONE_BLOCK,), (ptr(out.target), rows, ld_t, ignore, np.int32(1), scale),
                        stream=stream)
            partials = memory.empty((shape.rows * chunks, 3), cupy.float32)
            loss_rows = ptr(out.loss_rows) if out.loss_rows else memory.empty(shape.rows, cupy.float32)
            row_grad = memory.empty((shape.rows, 4), cupy.float32) if out.grad else ptr(0)
            partials_k(item_grid, (plan.threads,), (ptr(out.x), rows, cols, ld_x, n_chunk_vecs, n_chunks, partials),
                       stream=stream)
            rows_k(row_grid, (ROW_THREADS,), (partials, ptr(out.x), ptr(out.target), rows, cols, ld_x, ld_t, n_chunks,
                                              ignore, np.float32(options.label_smoothing),
                                              np.float32(options.z_loss), scale, loss_rows, ptr(out.lse), row_grad),
                   stream=stream)
            if out.grad:
                grad_k(item_grid, (plan.threads,), (ptr(out.x), ptr(out.grad), ptr(out.target), rows, cols, ld_x,
                                                    np.int64(out.ld_grad), ld_t, n_chunk_vecs, n_chunks, ignore,
                                                    row_grad), stream=stream)
            if out.total:
                total_k((1,), (ONE_BLOCK,), (loss_rows, rows, scale, ptr(out.total)), stream=stream)

    return launch
