"""A row split over blocks: the multi-block families whose rows are read twice.

multi_block (the seed's): three launches, per-chunk online (max, sum) partials, a
fixed-order combine per row, then the write pass.  multi_block_l2: the partials and
the writes as work items of one persistent launch taken in ticket order, each chunk's
write item `lag` items after its read item, so that its second read is served by L2
(kernels/multi_block_l2.cu); lag = a row's chunks + the grid, so a write item's row has
been read by then.  Backward ops: the same passes on one float (the dot) per chunk."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cupy
import numpy as np

from .. import loader
from ..device import DeviceInfo
from ..problem import ALL_OPS, BACKWARD_OPS, DTYPES, Shape, kernel_defines
from ..scratch import CallMemory
from .base import CannotRun, Launcher, Variant, ptr, slots_and_tickets
from .resources import VECTOR_BYTES

MULTI_BLOCK_MAX_GRID = 1 << 20  # blocks loop over (row, chunk) items beyond it


@dataclass(frozen=True)
class MultiBlockPlan:
    chunk_vecs: int = 8192  # 16-byte vectors (128 KB) per block and row
    threads: int = 512

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        return {}

    def chunks(self, shape: Shape) -> int:
        return max(1, -(-(shape.cols * shape.itemsize // VECTOR_BYTES) // self.chunk_vecs))


def multi_block_plan(shape: Shape, dev: DeviceInfo) -> MultiBlockPlan:
    return MultiBlockPlan()


def multi_block_launch(shape: Shape, dev: DeviceInfo, plan: MultiBlockPlan) -> Launcher:
    block, chunks = (plan.threads,), plan.chunks(shape)
    defines = kernel_defines(shape.dtype, shape.op)
    get = lambda entry: loader.get_kernel("multi_block.cu", entry, defines, device_id=dev.id).kernel
    partials_k, combine_k, write_k = get("multi_block_partials"), get("multi_block_combine"), get("multi_block_write")
    items = shape.rows * chunks
    item_grid, row_grid = (min(items, MULTI_BLOCK_MAX_GRID),), (min(shape.rows, MULTI_BLOCK_MAX_GRID),)
    n_chunk_vecs, n_chunks = np.int64(plan.chunk_vecs), np.int64(chunks)
    if shape.backward:
        rows, cols, ld_x, ld_g, ld_y = shape.scalars()

        def launch_backward(x: int, y: int, stream, g: int) -> None:
            with CallMemory(stream) as memory:
                partials = memory.empty(items, cupy.float32)
                totals = memory.empty(shape.rows, cupy.float32)
                partials_k(item_grid, block, (ptr(x), ptr(g), rows, cols, ld_x, ld_g, n_chunk_vecs, n_chunks,
                                              partials), stream=stream)
                combine_k(row_grid, (256,), (partials, rows, n_chunks, totals), stream=stream)
                write_k(item_grid, block, (ptr(x), ptr(g), ptr(y), rows, cols, ld_x, ld_g, ld_y, n_chunk_vecs,
                                           n_chunks, totals), stream=stream)

        return launch_backward
    rows, cols, ld_x, ld_y = shape.scalars()

    def launch(x: int, y: int, stream) -> None:
        # Per-call scratch (a (max, sum) pair per chunk and per row): concurrent calls share
        # nothing, and a captured call's scratch is the graph's own (softmax_lab.scratch).
        with CallMemory(stream) as memory:
            partials = memory.empty((items, 2), cupy.float32)
            totals = memory.empty((shape.rows, 2), cupy.float32)
            partials_k(item_grid, block, (ptr(x), rows, cols, ld_x, n_chunk_vecs, n_chunks, partials),
                       stream=stream)
            combine_k(row_grid, (256,), (partials, rows, n_chunks, totals), stream=stream)
            write_k(item_grid, block, (ptr(x), ptr(y), rows, cols, ld_x, ld_y, n_chunk_vecs, n_chunks, totals),
                    stream=stream)

    return launch


# Row statistics (softmax_lab.logsumexp): multi_block's partials, then a merge that writes
# each row's lse and max: one read of x.  A read-only pass needs enough blocks to fill the
# GPU; where the rows alone do not give every SM ROW_STATS_BLOCKS_PER_SM of them, the
# chunks shrink (down to one vector per thread) so that a few long rows still spread.
ROW_STATS_BLOCKS_PER_SM = 4  # blocks of MultiBlockPlan.threads (512): 2048 threads, a Hopper SM's most


def row_stats_plan(shape: Shape, dev: DeviceInfo) -> MultiBlockPlan:
    """The chunks of the partials' pass for rows of `shape` on `dev`."""
    threads, longest = MultiBlockPlan.threads, MultiBlockPlan.chunk_vecs
    vecs = max(1, shape.cols * shape.itemsize // VECTOR_BYTES)
    chunks_wanted = -(-dev.sm_count * ROW_STATS_BLOCKS_PER_SM // shape.rows)
    per_chunk = -(-vecs // chunks_wanted)
    chunk = -(-per_chunk // 32) * 32  # whole warps' worth of vectors
    return MultiBlockPlan(chunk_vecs=min(longest, max(threads, chunk)), threads=threads)


RowStatsLauncher = Callable[[int, int, int, cupy.cuda.Stream], None]  # (x, lse, max, stream)


def chunk_grids(shape: Shape, plan: MultiBlockPlan) -> tuple[int, tuple[int], tuple[int]]:
    """(chunks a row, the grid of the per-chunk kernels, the grid of the per-row ones) of the
    row statistics' launches: a block an item, up to MULTI_BLOCK_MAX_GRID (grid-stride beyond)."""
    chunks = plan.chunks(shape)
    return chunks, (min(shape.rows * chunks, MULTI_BLOCK_MAX_GRID),), (min(shape.rows, MULTI_BLOCK_MAX_GRID),)


def row_stats_launch(shape: Shape, dev: DeviceInfo, plan: MultiBlockPlan) -> RowStatsLauncher:
    """launcher(x_ptr, lse_ptr, max_ptr, stream): float32 lse and max of each row of x, at
    lse_ptr and max_ptr (rows consecutive floats each); max_ptr 0 where the max is not wanted."""
    defines = kernel_defines(shape.dtype, "softmax")
    get = lambda entry: loader.get_kernel("multi_block.cu", entry, defines, device_id=dev.id).kernel
    partials_k, stats_k = get("multi_block_partials"), get("multi_block_row_stats")
    chunks, item_grid, row_grid = chunk_grids(shape, plan)
    rows, cols, ld_x = np.int64(shape.rows), np.int64(shape.cols), np.int64(shape.ld_x)
    n_chunk_vecs, n_chunks = np.int64(plan.chunk_vecs), np.int64(chunks)

    def launch(x: int, lse: int, row_max: int, stream) -> None:
        with CallMemory(stream) as memory:
            partials = memory.empty((shape.rows * chunks, 2), cupy.float32)
            max_out = ptr(row_max) if row_max else memory.empty(shape.rows, cupy.float32)
            partials_k(item_grid, (plan.threads,), (ptr(x), rows, cols, ld_x, n_chunk_vecs, n_chunks, partials),
                       stream=stream)
            stats_k(row_grid, (256,), (partials, ptr(x), rows, cols, ld_x, n_chunks, ptr(lse), max_out),
                    stream=stream)

    return launch


# multi_block_l2's block shape (threads, vectors per thread, blocks per SM): what counts is
# the bytes in flight per SM, 128 KB forward, within 64-80 registers without spills
# (notes/TUNING.md, multi_block_l2).
MBL2_SHAPES = {  # (forward or backward, element size) -> (threads, vpt, blocks per SM)
    ("forward", 4): (256, 8, 4),
    ("forward", 2): (256, 8, 4),
    ("backward", 4): (256, 4, 3),
    ("backward", 2): (256, 4, 3),
}
MBL2_SHAPE_BEFORE_SM90 = (256, 1, 4)  # the sm_80 build spilled at 2 vectors of y and dy


@dataclass(frozen=True)
class MultiBlockL2Plan:
    threads: int
    vpt: int
    blocks_per_sm: int
    lag: int | None = None  # items from a chunk's read to its write; None: a row's chunks + the grid

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        return {"MBL2_THREADS": self.threads, "MBL2_VPT": self.vpt, "MBL2_BLOCKS_PER_SM": self.blocks_per_sm}


def multi_block_l2_plan(shape: Shape, dev: DeviceInfo) -> MultiBlockL2Plan:
    kind = "backward" if shape.op in BACKWARD_OPS else "forward"
    block = MBL2_SHAPES[kind, DTYPES[shape.dtype]]
    if kind == "backward" and dev.compute_capability < 90:
        block = MBL2_SHAPE_BEFORE_SM90
    return MultiBlockL2Plan(*block)


def multi_block_l2_launch(shape: Shape, dev: DeviceInfo, plan: MultiBlockL2Plan) -> Launcher:
    threads, vpt = plan.threads, plan.vpt
    defines = kernel_defines(shape.dtype, shape.op) | plan.defines()
    function = loader.get_kernel("multi_block_l2.cu", "multi_block_l2", defines, device_id=dev.id).kernel
    per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, threads, 0)
    if per_sm < 1:
        raise CannotRun(f"variant 'multi_block_l2': no block of {threads} threads can be resident on {dev.name}")
    chunks = max(1, -(-(shape.cols * shape.itemsize // VECTOR_BYTES) // (threads * vpt)))
    items = shape.rows * chunks
    grid = (min(per_sm * dev.sm_count, items),)
    lag = np.int64(chunks + grid[0] if plan.lag is None else plan.lag)
    block, n_chunks, scalars = (threads,), np.int64(chunks), shape.scalars()

    if shape.backward:
        def launch_backward(x: int, y: int, stream, g: int) -> None:
            with CallMemory(stream) as memory:
                slots, tickets = slots_and_tickets(memory, items)
                function(grid, block, (ptr(x), ptr(g), ptr(y), *scalars, n_chunks, lag, slots, tickets),
                         stream=stream)

        return launch_backward

    def launch(x: int, y: int, stream) -> None:
        with CallMemory(stream) as memory:
            slots, tickets = slots_and_tickets(memory, items)
            function(grid, block, (ptr(x), ptr(y), *scalars, n_chunks, lag, slots, tickets), stream=stream)

    return launch


MULTI_BLOCK = Variant(
    name="multi_block", source="multi_block.cu",
    entries=("multi_block_partials", "multi_block_combine", "multi_block_write"),
    reads=2, writes=1, min_compute_capability=0,
    summary="a row split over blocks: per-chunk online partials, a fixed-order combine, the write pass",
    launch_rule=f"{MultiBlockPlan.chunk_vecs} 16-byte vectors per block and row, {MultiBlockPlan.threads} threads, "
                "three launches",
    plan=multi_block_plan, launch=multi_block_launch,
    ops=ALL_OPS,  # backward: per-chunk partial dots, a fixed-order sum, the write pass
)
MULTI_BLOCK_L2 = Variant(
    name="multi_block_l2", source="multi_block_l2.cu", entries=("multi_block_l2",),
    reads=1, writes=1, min_compute_capability=70,  # reads: from device memory, where L2 holds the lag
    summary=("a row split over blocks in one persistent launch: per-chunk partials, then each chunk "
             "written after a second read served by L2"),
    launch_rule=("resident blocks taking (read, write) chunk items in ticket order, (threads, vectors per "
                 f"thread, blocks per SM) {MBL2_SHAPES[('forward', 4)]} for fp32 (MBL2_SHAPES), "
                 "lag = chunks per row + grid"),
    plan=multi_block_l2_plan, launch=multi_block_l2_launch,
    ops=ALL_OPS,  # backward: per-chunk partial dots, then dx after the second read of y and dy
)
