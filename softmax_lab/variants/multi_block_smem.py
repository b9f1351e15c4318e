"""multi_block_smem: a row split over blocks, each chunk held in shared memory from its read
to its write, in one persistent launch of resident blocks that take chunks in ticket order
(kernels/multi_block_smem.cu).

Each block keeps a ring of `slots` chunks of threads x vpt 16-byte vectors, filled by bulk
copies; a chunk is written once `lag` later chunks are reduced and its row is complete.
The resident blocks must hold a row's chunks (grid x slots >= chunks) or, with companions,
its held chunks, half of them or more: that sets the longest row (on the H200 60.6 MB).

The rule (notes/TUNING.md, multi_block_smem):
- the split schedule (two groups of warps, one reducing while the other writes) in one
  block per SM of SPLIT_THREADS threads, where its slots hold SPLIT_MIN_ROWS rows or more
  (float32 log_softmax: SPLIT_MIN_ROWS_LOG); of SPLIT_VPTS the most vectors per thread
  whose slots hold SPLIT_AMPLE_ROWS rows (larger chunks, fewer per-chunk steps), else
  those whose slots hold the most rows;
- below that, companions: a row's first `held` chunks take tickets (half the ring's
  chunks, or half the row's if more) and chunk c + held goes with chunk c, so the ring
  holds two rows of tickets; taken where the held chunks hold COMPANIONS_MIN_ROWS rows and
  the rows fill COMPANIONS_MIN_RINGS rings, or where nothing else holds the row;
- else the one-group schedule, ONE_GROUP_THREADS x ONE_GROUP_VPT, which waits better on a
  ring of fewer rows (auto takes it for float32 only: the halves' is slower than
  multi_block_l2);
- the split's writers refill a slot before its stores (early fill) where its ring holds
  fewer than EARLY_FILL_ROWS rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import cupy
import numpy as np

from .. import loader
from ..device import DeviceInfo
from ..problem import DTYPES, ITEMSIZE, OPS, Shape, kernel_defines
from ..scratch import CallMemory
from .base import DEVICE_REFUSALS, CannotRun, Launcher, Variant, ptr, slots_and_tickets
from .resources import LINE_VECS, VECTOR_BYTES, row_vecs, smem_budget

ONE_GROUP_THREADS, SPLIT_THREADS, ONE_GROUP_VPT = 448, 512, 8
SPLIT_VPTS = (8, 7)
SPLIT_MIN_ROWS, SPLIT_MIN_ROWS_LOG, SPLIT_AMPLE_ROWS = 2, 3, 6
EARLY_FILL_ROWS = 3.1
COMPANIONS_MIN_ROWS, COMPANIONS_MIN_RINGS = 1.3, 3
STATIC_SMEM = 1024  # the kernel's own shared memory (mbarriers, slot records, scratch): 384 / 640 (split) at sm_90


@dataclass(frozen=True)
class SmemPlan:
    threads: int
    vpt: int  # 16-byte vectors per thread in a chunk
    blocks_per_sm: int
    split: bool  # the two groups' schedule
    slots: int  # chunks a block's ring holds
    early_fill: bool = False  # the split's writers refill a slot before its stores
    held_chunks: int | None = None  # a row's chunks that take tickets, the rest companions; None: all
    lag: int | None = None  # chunks from a read to its write; None: the rule (min(slots - 1, chunks / grid + 1))
    grid: int | None = None  # blocks; None: as many as can be resident

    @property
    def smem_bytes(self) -> int:
        return self.slots * slot_bytes(self.threads, self.vpt)

    def defines(self, dev: DeviceInfo | None = None, companions: bool = False) -> dict[str, int]:
        return {"MBS_THREADS": self.threads, "MBS_VPT": self.vpt, "MBS_SLOTS": self.slots,
                "MBS_BLOCKS_PER_SM": self.blocks_per_sm, "MBS_SPLIT": int(self.split)} | \
            ({"MBS_EARLY_FILL": 1} if self.early_fill else {}) | ({"MBS_COMPANIONS": 1} if companions else {})


def slot_bytes(threads: int, vpt: int) -> int:
    """A slot: a chunk of threads x vpt vectors plus a line (the kernel's MBS_SLOT_VECS: the line shift)."""
    return (threads * vpt + LINE_VECS) * VECTOR_BYTES


def slots_held(dev: DeviceInfo, threads: int, vpt: int, blocks_per_sm: int) -> int:
    """Chunks of threads x vpt vectors a block holds in shared memory."""
    return smem_budget(dev, blocks_per_sm, STATIC_SMEM) // slot_bytes(threads, vpt)


def ring_chunks(dev: DeviceInfo, threads: int, vpt: int, blocks_per_sm: int) -> int:
    """Chunks the resident blocks' rings hold together."""
    return dev.sm_count * blocks_per_sm * slots_held(dev, threads, vpt, blocks_per_sm)


def row_chunks(cols: int, itemsize: int, threads: int, vpt: int) -> int:
    return max(1, -(-row_vecs(cols, itemsize) // (threads * vpt)))


def rows_held(cols: int, itemsize: int, dev: DeviceInfo, threads: int, vpt: int, blocks_per_sm: int) -> float:
    """Rows of `cols` elements that the resident blocks' rings of threads x vpt chunks hold."""
    return ring_chunks(dev, threads, vpt, blocks_per_sm) / row_chunks(cols, itemsize, threads, vpt)


def companion_held(chunks: int, ring: int) -> int:
    """A row's chunks that take tickets with companions: half the ring's, or half the row's if more."""
    return max(-(-chunks // 2), ring // SPLIT_MIN_ROWS)


def early_fill(cols: int, itemsize: int, dev: DeviceInfo, threads: int, vpt: int, blocks_per_sm: int,
               split: bool) -> bool:
    """Whether the split's writers refill a slot before its stores (the rule above)."""
    return split and rows_held(cols, itemsize, dev, threads, vpt, blocks_per_sm) < EARLY_FILL_ROWS


class SmemBlock(NamedTuple):
    """The rule's block shape and schedule (block_rule)."""
    threads: int
    vpt: int
    blocks_per_sm: int
    split: bool  # the two groups' schedule
    held_chunks: int | None = None  # a row's chunks that take tickets, the rest companions; None: all


def block_rule(cols: int, itemsize: int, dev: DeviceInfo, op: str = "softmax", rows: int = 1 << 20) -> SmemBlock:
    """The block shape and schedule by the rule above; where nothing else holds a row, the split
    with companions whether or not they pay."""
    def held_rows(vpt: int) -> float:  # rows the split's ring holds at vpt vectors a thread
        return rows_held(cols, itemsize, dev, SPLIT_THREADS, vpt, 1)

    ample = [v for v in SPLIT_VPTS if held_rows(v) >= SPLIT_AMPLE_ROWS]
    vpt = max(ample) if ample else max(SPLIT_VPTS, key=held_rows)
    least = SPLIT_MIN_ROWS_LOG if itemsize == ITEMSIZE and op == "log_softmax" else SPLIT_MIN_ROWS
    if held_rows(vpt) >= least:
        return SmemBlock(SPLIT_THREADS, vpt, 1, True)
    chunks = row_chunks(cols, itemsize, SPLIT_THREADS, vpt)
    ring = ring_chunks(dev, SPLIT_THREADS, vpt, 1)
    held = companion_held(chunks, ring)
    if held <= ring and held < chunks and (
            companions_pay(dev, SPLIT_THREADS, vpt, held, rows) or
            rows_held(cols, itemsize, dev, ONE_GROUP_THREADS, ONE_GROUP_VPT, 1) < 1):
        return SmemBlock(SPLIT_THREADS, vpt, 1, True, held)
    return SmemBlock(ONE_GROUP_THREADS, ONE_GROUP_VPT, 1, False)


def companions_pay(dev: DeviceInfo, threads: int, vpt: int, held_chunks: int, rows: int) -> bool:
    """Whether the split with companions is ahead for `rows` rows (the rule above)."""
    ring_rows = ring_chunks(dev, threads, vpt, 1) / held_chunks
    return ring_rows >= COMPANIONS_MIN_ROWS and rows >= COMPANIONS_MIN_RINGS * ring_rows


def plan(shape: Shape, dev: DeviceInfo) -> SmemPlan:
    threads, vpt, per_sm, split, held = block_rule(shape.cols, shape.itemsize, dev, shape.op, shape.rows)
    return SmemPlan(threads, vpt, per_sm, split, slots_held(dev, threads, vpt, per_sm),
                    early_fill(shape.cols, shape.itemsize, dev, threads, vpt, per_sm, split), held)


def leads(shape: Shape, dev: DeviceInfo, plan: SmemPlan) -> bool:
    """Whether auto takes multi_block_smem where its row length lists it: the split, with companions
    where they pay; float32's one group."""
    if not plan.split:
        return shape.itemsize == ITEMSIZE
    return plan.held_chunks is None or companions_pay(dev, plan.threads, plan.vpt, plan.held_chunks, shape.rows)


def max_cols(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> int:
    """The longest row it holds: the split's held chunks, a ring's worth, with a companion each."""
    return max(2 * ring_chunks(dev, SPLIT_THREADS, v, 1) * SPLIT_THREADS * v * VECTOR_BYTES // DTYPES[dtype]
               for v in SPLIT_VPTS)


def launch(shape: Shape, dev: DeviceInfo, plan: SmemPlan) -> Launcher:
    threads, vpt, slots = plan.threads, plan.vpt, plan.slots
    if plan.split and threads % 64:
        raise CannotRun(f"variant 'multi_block_smem': the split schedule takes two groups of whole warps, "
                        f"not {threads} threads")
    if plan.early_fill and not plan.split:
        raise CannotRun("variant 'multi_block_smem': early refills are the split schedule's")
    if slots < 2:
        raise CannotRun(f"variant 'multi_block_smem': {dev.name} cannot hold two chunks of {threads} x {vpt} "
                        f"vectors in a block's shared memory at {plan.blocks_per_sm} blocks per SM")
    chunks = row_chunks(shape.cols, shape.itemsize, threads, vpt)
    held = chunks if plan.held_chunks is None else min(chunks, plan.held_chunks)
    if held < chunks and not plan.split:
        raise CannotRun("variant 'multi_block_smem': companions are the split schedule's")
    if 2 * held < chunks:
        raise CannotRun(f"variant 'multi_block_smem': {held} held chunks and a companion each cover "
                        f"{2 * held} of a row's {chunks} chunks")
    defines = kernel_defines(shape.dtype, shape.op) | plan.defines(companions=held < chunks)
    smem = plan.smem_bytes
    try:
        kernel = loader.get_kernel("multi_block_smem.cu", "multi_block_smem", defines, device_id=dev.id)
        kernel.max_dynamic_shared_size_bytes = smem
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, smem)
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant 'multi_block_smem': {dev.name} cannot run {slots} slots of "
                        f"{threads} x {vpt} vectors: {e}") from e
    items = shape.rows * chunks
    resident = per_sm * dev.sm_count if plan.grid is None else min(plan.grid, per_sm * dev.sm_count)
    grid = min(resident, shape.rows * held)
    if min(resident, held) * slots < held:  # the kernel's progress condition
        raise CannotRun(f"variant 'multi_block_smem': {resident} resident blocks of {slots} slots "
                        f"cannot hold a row of {held} chunks on {dev.name}")
    lag = np.int32(plan.lag if plan.lag is not None else min(slots - 1, -(-chunks // grid) + 1))
    function, n_chunks, n_held, scalars = kernel.kernel, np.int64(chunks), np.int64(held), shape.scalars()

    def launch(x: int, y: int, stream) -> None:
        # Cooperative: the driver starts the grid only with every block resident, so that blocks of
        # this launch waiting for a row never hold the SMs its other blocks need (another launch of
        # it on another stream, say; a plain launch could leave each with too few blocks: a hang).
        with CallMemory(stream) as memory:
            slot_words, tickets = slots_and_tickets(memory, items)
            function((grid,), (threads,), (ptr(x), ptr(y), *scalars, n_chunks, n_held, lag, slot_words, tickets),
                     stream=stream, shared_mem=smem, enable_cooperative_groups=True)

    return launch


MULTI_BLOCK_SMEM = Variant(
    name="multi_block_smem", source="multi_block_smem.cu", entries=("multi_block_smem",),
    reads=1, writes=1, min_compute_capability=90,
    summary=("a row split over blocks in one persistent launch, each chunk held in shared memory from its "
             "read to its write (past what the GPU's shared memory holds of a row, the rest re-read from L2): "
             "rows up to twice the GPU's shared memory, read once from device memory"),
    launch_rule=("resident blocks taking chunks of threads x vpt vectors in ticket order into a ring of as "
                 "many slots as shared memory holds (bulk copies); one block per SM of "
                 f"{SPLIT_THREADS} threads in two groups (one reducing, one writing), vpt in "
                 f"{SPLIT_VPTS} (the most whose slots hold {SPLIT_AMPLE_ROWS} rows, else those holding "
                 f"the most), where they hold {SPLIT_MIN_ROWS} rows (float32 log_softmax "
                 f"{SPLIT_MIN_ROWS_LOG}), else of "
                 f"{ONE_GROUP_THREADS} x {ONE_GROUP_VPT} in one group; below two rows the split holds half the "
                 f"ring's chunks of a row and takes the rest as companions (read again from L2) where those hold "
                 f"{COMPANIONS_MIN_ROWS} rows and the rows fill {COMPANIONS_MIN_RINGS} rings; a chunk "
                 "written once its row is complete (softmax_lab/variants/multi_block_smem.py)"),
    plan=plan, launch=launch, max_cols=max_cols,
    ops=OPS, no_backward="its chunks hold one array; the backward's long rows go to multi_block_l2",
)
