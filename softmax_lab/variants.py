"""The registry: every softmax variant, its kernel file, launch rule, traffic model
and requirements.  Nothing else in softmax_lab knows variant names.

A variant runs on a 2-D problem, a `Shape`: `rows` rows of `cols` elements
of one dtype (float32, float16 or bfloat16) and one op (softmax or
log_softmax), row r of the input at x + r * ld_x and of the output at y + r * ld_y
(element strides of 1 within a row).  `Variant.prepare(shape, dev)` does
everything that depends only on the shape and the device (compiling, occupancy
queries, grid sizes) and returns a launcher, `launcher(x_ptr, y_ptr, stream)`
(backward ops: `launcher(x_ptr, y_ptr, stream, g_ptr)`), that only launches; softmax_lab.api caches launchers, so a steady-state call is
a lookup plus a launch.  prepare raises CannotRun where the variant cannot run
the shape on the device.  single_read's plan is derived from rows, row length,
element size and device by a short rule (its section below); the constants
there and the small tables of the other variants are the tuning knobs, and
notes/TUNING.md says how they were measured.
"""

from __future__ import annotations

import ctypes
import functools
import math
import threading
import types
from dataclasses import dataclass, field, replace
from typing import NamedTuple
from collections.abc import Callable

import cupy
import numpy as np

from . import loader
from .device import DeviceInfo, max_active_clusters
from .scratch import CallMemory

ITEMSIZE = 4  # float32
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}  # name -> element size in bytes
OPS = ("softmax", "log_softmax")  # the forward ops
BACKWARD_OPS = ("softmax_backward", "log_softmax_backward")  # dx from (y, dy): see Shape
ALL_OPS = OPS + BACKWARD_OPS


def kernel_defines(dtype: str = "float32", op: str = "softmax") -> dict[str, int]:
    """The -D defines of elements.cuh for a dtype and op: none for float32
    softmax, so that build is the float-only kernels' build."""
    defines = {}
    if dtype != "float32":
        defines["SOFTMAX_DTYPE"] = 1 if dtype == "float16" else 2
    if op.startswith("log_softmax"):
        defines["SOFTMAX_LOG"] = 1
    if op in BACKWARD_OPS:
        defines["SOFTMAX_BACKWARD"] = 1
    return defines


@dataclass(frozen=True)
class Shape:
    """What a launch plan depends on: the row layout and the pointers' alignment.

    Forward ops read x and write y.  Backward ops read x = the forward output
    (softmax or log_softmax) and g = the incoming gradient dy, at g + r * ld_g,
    and write y = dx; their launchers take a fourth argument, g_ptr."""

    rows: int
    cols: int
    ld_x: int  # elements from one input row to the next
    ld_y: int  # elements from one output row to the next
    x_offset: int = 0  # byte offset of the input's data pointer mod LINE_BYTES (128)
    y_offset: int = 0  # byte offset of the output's data pointer mod 16
    itemsize: int = ITEMSIZE
    dtype: str = "float32"  # a key of DTYPES, of element size itemsize
    op: str = "softmax"  # one of ALL_OPS
    ld_g: int = 0  # backward ops: elements from one dy row to the next
    g_offset: int = 0  # backward ops: byte offset of dy's data pointer mod LINE_BYTES (128)

    def __post_init__(self):
        if DTYPES.get(self.dtype) != self.itemsize or self.op not in ALL_OPS:
            raise ValueError(f"Shape: dtype {self.dtype!r} of itemsize {self.itemsize}, op {self.op!r}: "
                             f"expected a dtype of {DTYPES} and an op of {ALL_OPS}")

    @property
    def backward(self) -> bool:
        return self.op in BACKWARD_OPS

    def scalars(self):
        """(rows, cols, ld_x, ld_y); backward ops: (rows, cols, ld_x, ld_g, ld_y), as their kernels take them."""
        lds = (self.ld_x, self.ld_g, self.ld_y) if self.backward else (self.ld_x, self.ld_y)
        return (np.int64(self.rows), np.int64(self.cols), *map(np.int64, lds))


class CannotRun(ValueError):
    """A variant cannot run this shape on this device (variant="auto" then tries the next)."""


# What building a kernel or asking the driver about it raises where the device
# refuses a configuration (its cluster size, its shared memory, a small part,
# a MIG slice): the prepares turn these into CannotRun.
DEVICE_REFUSALS = (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError, RuntimeError)


# launcher(x_ptr, y_ptr, stream): one call's launches, everything else resolved.
Launcher = Callable[[int, int, cupy.cuda.Stream], None]


def _ptr(p: int) -> np.uint64:
    return np.uint64(p)


def _prepared_launcher(function, grid: tuple, block: tuple, scalars: tuple, backward: bool,
                       smem: int = 0) -> Launcher:
    """The launcher of one kernel that takes (x, y, *scalars), or for the
    backward ops (x, g, y, *scalars), every argument 8 bytes: the arguments
    laid out once, so that a call writes two or three pointers and launches
    (cuLaunchKernel through cupy.cuda.driver.launchKernel) rather than have
    CuPy pack every argument again.  A lock keeps concurrent calls from
    different threads off each other's pointers until the launch has copied
    them."""
    pointers = 3 if backward else 2
    values = (ctypes.c_int64 * (pointers + len(scalars)))(*([0] * pointers), *map(int, scalars))
    base = ctypes.addressof(values)
    params = (ctypes.c_void_p * len(values))(*(base + 8 * i for i in range(len(values))))
    address = ctypes.addressof(params)
    f = function.ptr
    gx, gy, gz = (*grid, 1, 1)[:3]
    bx, by, bz = (*block, 1, 1)[:3]
    lock = threading.Lock()
    launch_kernel, current_context = cupy.cuda.driver.launchKernel, cupy.cuda.driver.ctxGetCurrent

    def bind_context() -> None:  # a new thread has no current context until the runtime binds one
        if not current_context():
            cupy.cuda.runtime.setDevice(cupy.cuda.runtime.getDevice())

    if backward:
        def launch_backward(x: int, y: int, stream, g: int) -> None:
            bind_context()
            with lock:
                values[0], values[1], values[2] = x, g, y
                launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream.ptr, address, 0)

        launch_backward.keep = (values, params)  # the buffers live as long as the launcher
        return launch_backward

    def launch(x: int, y: int, stream) -> None:
        bind_context()
        with lock:
            values[0], values[1] = x, y
            launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream.ptr, address, 0)

    launch.keep = (values, params)
    return launch


# ------------------------------------------------------------ one block per row
# Threads per block by row length: (largest cols, threads).
BLOCK_THREADS_BY_COLS = ((1024, 128), (4096, 256), (16384, 512), (math.inf, 1024))


def _block_threads(cols: int) -> int:
    return next(t for limit, t in BLOCK_THREADS_BY_COLS if cols <= limit)


def _prepare_block_per_row(entry: str, source: str):
    def prepare(shape: Shape, dev: DeviceInfo, threads: int | None = None) -> Launcher:
        function = loader.get_kernel(source, entry, kernel_defines(shape.dtype, shape.op), device_id=dev.id).kernel
        grid = (min(shape.rows, 2**31 - 1),)  # blocks loop over rows beyond the grid
        block = (threads or _block_threads(shape.cols),)
        return _prepared_launcher(function, grid, block, shape.scalars(), shape.backward)

    return prepare


# ---------------------------------------------------------------- multi-block
MULTI_BLOCK_THREADS = 512
MULTI_BLOCK_CHUNK_VECS = 8192  # 16-byte vectors (128 KB) per block and row
MULTI_BLOCK_MAX_GRID = 1 << 20  # blocks loop over (row, chunk) items beyond it


def _prepare_multi_block(shape: Shape, dev: DeviceInfo, chunk_vecs: int | None = None,
                         threads: int | None = None) -> Launcher:
    chunk_vecs = chunk_vecs or MULTI_BLOCK_CHUNK_VECS
    block = (threads or MULTI_BLOCK_THREADS,)
    chunks = max(1, -(-(shape.cols * shape.itemsize // VECTOR_BYTES) // chunk_vecs))
    defines = kernel_defines(shape.dtype, shape.op)
    get = lambda entry: loader.get_kernel("multi_block.cu", entry, defines, device_id=dev.id).kernel
    partials_k, combine_k, write_k = get("multi_block_partials"), get("multi_block_combine"), get("multi_block_write")
    items = shape.rows * chunks
    item_grid, row_grid = (min(items, MULTI_BLOCK_MAX_GRID),), (min(shape.rows, MULTI_BLOCK_MAX_GRID),)
    n_chunk_vecs, n_chunks = np.int64(chunk_vecs), np.int64(chunks)
    if shape.backward:
        # The same three launches on one float (the dot) per chunk and per row.
        rows, cols, ld_x, ld_g, ld_y = shape.scalars()

        def launch_backward(x: int, y: int, stream, g: int) -> None:
            with CallMemory(stream) as memory:
                partials = memory.empty(items, cupy.float32)
                totals = memory.empty(shape.rows, cupy.float32)
                partials_k(item_grid, block, (_ptr(x), _ptr(g), rows, cols, ld_x, ld_g, n_chunk_vecs, n_chunks,
                                              partials), stream=stream)
                combine_k(row_grid, (256,), (partials, rows, n_chunks, totals), stream=stream)
                write_k(item_grid, block, (_ptr(x), _ptr(g), _ptr(y), rows, cols, ld_x, ld_g, ld_y, n_chunk_vecs,
                                           n_chunks, totals), stream=stream)

        return launch_backward
    rows, cols, ld_x, ld_y = shape.scalars()

    def launch(x: int, y: int, stream) -> None:
        # Per-call scratch (a (max, sum) pair per chunk and per row): concurrent calls share
        # nothing, and a captured call's scratch is the graph's own (softmax_lab.scratch).
        with CallMemory(stream) as memory:
            partials = memory.empty((items, 2), cupy.float32)
            totals = memory.empty((shape.rows, 2), cupy.float32)
            partials_k(item_grid, block, (_ptr(x), rows, cols, ld_x, n_chunk_vecs, n_chunks, partials),
                       stream=stream)
            combine_k(row_grid, (256,), (partials, rows, n_chunks, totals), stream=stream)
            write_k(item_grid, block, (_ptr(x), _ptr(y), rows, cols, ld_x, ld_y, n_chunk_vecs, n_chunks, totals),
                    stream=stream)

    return launch


# ------------------------------------------------------- multi-block, L2 re-read
# multi_block_l2: multi_block's read and write passes as work items of one
# persistent launch, taken in ticket order, each chunk's write item `lag`
# items after its read item, so that its second read is served by L2
# (kernels/multi_block_l2.cu).  lag = a row's chunks + the grid: a write
# item's row has been read by then; L2 holds lag x chunk bytes of x (and dy).
# Block shape (threads, vectors per thread, blocks per SM), measured on the H200
# (notes/TUNING.md, 2026-12-01): what counts is the bytes in flight per SM,
# 128 KB (1024 threads x 8 vectors) forward; within 64-80 registers without
# spills (ptxas, NVRTC 12.9).
MBL2_SHAPES = {  # (forward or backward, element size) -> (threads, vpt, blocks per SM)
    ("forward", 4): (256, 8, 4),  # 1024 x 1048576: 1.29 x copy (512 x 4 x 2: 1.66; 256 x 12 x 3: 1.36)
    ("forward", 2): (256, 8, 4),  # 256 x 16 x 2 spilled on sm_80 once the loads were padded (bf16 1M and
                                  # 4M columns 1.55 and 1.60 x copy with this shape, H200 2026-12-01)
    ("backward", 4): (256, 4, 3),  # y and dy: 4096 x 393216 softmax backward 1.32 x the floor
    ("backward", 2): (256, 4, 3),
}
MBL2_SHAPE_BEFORE_SM90 = (256, 1, 4)  # the sm_80 build spilled at 2 vectors of y and dy


def multi_block_l2_defines(dtype: str, op: str, compute_capability: int, threads: int | None = None,
                           vpt: int | None = None, blocks_per_sm: int | None = None) -> dict[str, int]:
    """The build of multi_block_l2.cu for a dtype, op and device (MBL2_SHAPES), or the knobs given."""
    kind = "backward" if op in BACKWARD_OPS else "forward"
    shape = MBL2_SHAPES[kind, DTYPES[dtype]]
    if kind == "backward" and compute_capability < 90:
        shape = MBL2_SHAPE_BEFORE_SM90
    t, v, b = shape
    return kernel_defines(dtype, op) | {"MBL2_THREADS": threads or t, "MBL2_VPT": vpt or v,
                                        "MBL2_BLOCKS_PER_SM": blocks_per_sm or b}


def _slots_and_tickets(memory: CallMemory, items: int) -> tuple[cupy.ndarray, cupy.ndarray]:
    """A call's scratch for the ticket-ordered launches (multi_block_l2, multi_block_smem):
    a slot word per item, marked unwritten (bytes 0xBF), and the ticket counter at 0."""
    return memory.filled_words(items, 0xBF), memory.filled_words(1, 0)


def _prepare_multi_block_l2(shape: Shape, dev: DeviceInfo, threads: int | None = None, vpt: int | None = None,
                            blocks_per_sm: int | None = None, lag: int | None = None) -> Launcher:
    defines = multi_block_l2_defines(shape.dtype, shape.op, dev.compute_capability, threads, vpt, blocks_per_sm)
    threads, vpt = defines["MBL2_THREADS"], defines["MBL2_VPT"]
    function = loader.get_kernel("multi_block_l2.cu", "multi_block_l2", defines, device_id=dev.id).kernel
    per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, threads, 0)
    if per_sm < 1:
        raise CannotRun(f"variant 'multi_block_l2': no block of {threads} threads can be resident on {dev.name}")
    chunks = max(1, -(-(shape.cols * shape.itemsize // VECTOR_BYTES) // (threads * vpt)))
    items = shape.rows * chunks
    grid = (min(per_sm * dev.sm_count, items),)
    lag = np.int64(chunks + grid[0] if lag is None else lag)
    block, n_chunks, scalars = (threads,), np.int64(chunks), shape.scalars()

    if shape.backward:
        def launch_backward(x: int, y: int, stream, g: int) -> None:
            with CallMemory(stream) as memory:
                slots, tickets = _slots_and_tickets(memory, items)
                function(grid, block, (_ptr(x), _ptr(g), _ptr(y), *scalars, n_chunks, lag, slots, tickets),
                         stream=stream)

        return launch_backward

    def launch(x: int, y: int, stream) -> None:
        with CallMemory(stream) as memory:
            slots, tickets = _slots_and_tickets(memory, items)
            function(grid, block, (_ptr(x), _ptr(y), *scalars, n_chunks, lag, slots, tickets), stream=stream)

    return launch


# multi_block_smem: multi_block's chunks held in shared memory from their read
# to their write, in one persistent launch of resident blocks that take chunks
# in ticket order (kernels/multi_block_smem.cu): each block a ring of `slots`
# chunks of threads x vpt 16-byte vectors, filled by bulk copies; a chunk is
# written once `lag` later chunks are reduced and its row is complete.  The
# resident blocks must hold a row's chunks (grid x slots >= chunks), or with
# companions (below) its held chunks, half of them or more, which sets the
# longest row: on the H200, 2 x 132 x 4 x 56 KB, 60.6 MB (15.1M float32).
# The block shape (notes/TUNING.md, "Long rows held in shared memory"): the
# split schedule (two groups of warps, one reducing while the other writes) in
# one block per SM of MBS_SPLIT_THREADS threads where its slots hold
# MBS_SPLIT_MIN_ROWS rows or more (float32 log_softmax: MBS_SPLIT_MIN_ROWS_LOG);
# its vectors per thread, of MBS_SPLIT_VPTS, the most whose slots hold
# MBS_SPLIT_AMPLE_ROWS rows (larger chunks, fewer per-chunk steps), else those
# whose slots hold the most rows (on the H200 7: four slots of 56 KB, where 8
# leaves three of 64 KB).  Else the one-group schedule in one block per SM of
# MBS_THREADS x MBS_VPT, which waits better on a ring of fewer rows (and
# float32 log_softmax's one group writes without an exponential).
# Probe 62, float32 ÷ copy, the split of 512 x 8 x 3 against the two blocks
# per SM of 256 x 8 x 3 that it replaced: 1024 x 1048576 1.05-1.06 against
# 1.14, 64 x 2097152 1.02 against 1.09, 132 x 600001 1.20 against 1.26.
# Probes 88 and 90 (H200, 2026-12-03), 512 x 7 x 4 split / 512 x 8 x 3 split /
# 448 x 8 x 4 one group, float32: 132 x 3145728 (2.4 rows held) 1.11-1.12 /
# 1.27 / 1.19-1.21, 32 x 3600000 (2.05) 1.20 / - / 1.27, 64 x 2097152 1.06 /
# 1.12 / 1.28, 132 x 1572864 (8 x 3 holds 4.1 rows) 1.05 / 1.07 / -,
# 132 x 1048576 (6.2) 1.07-1.08 / 1.06-1.07 / 1.34, 4194304 (1.84) 1.38-1.40 /
# 1.47 / 1.33-1.36; log_softmax 132 x 3145728 1.23 / - / 1.18.  Halves, split
# 7 x 4 / 8 x 3 / one group / multi_block_l2: bf16 64 x 4194304 1.16 / 1.21 /
# - / 1.45, bf16 132 x 6291456 1.16 / - / 1.37 / 1.48, fp16 log_softmax
# 64 x 6291456 1.23 / - / 1.28 / 1.47, bf16 132 x 7400000 1.24 / - / 1.34 / 1.50.
# The halves' split reducers sum their vectors as two runs of MBS_VPT
# (split_max_sum: one sum of 16 lost the small terms of float16 log_softmax's
# outputs near 0, 2 ulp); their one-group build is slower than multi_block_l2
# (probe 69, H200, 2026-12-02: 132 x 4194304 bf16 1.61 against 1.44), so auto
# takes halves here in the split alone.
# The split's writers refill a slot before its stores (MBS_EARLY_FILL) where
# its ring holds fewer than MBS_EARLY_FILL_ROWS rows (probe 97, H200, split
# 512 x 7 x 4, main / early ÷ copy by rows held: float32 2.10 1.24 / 1.18,
# 2.29 1.18 / 1.12, 2.40 1.13 / 1.07, 2.51 1.15 / 1.10, 2.69 1.10 / 1.07,
# 2.90 1.106 / 1.111, 3.14 1.06 / 1.09, 3.43 1.10 / 1.13; bf16 2.04 1.23 /
# 1.16, 2.75 1.114 / 1.117, 3.02 1.142 / 1.139; fp16 log_softmax 2.40 1.26 /
# 1.20): the bound lies between 3.02 (level) and 3.14 (2.7 % behind).
# Where the split's ring holds fewer than MBS_SPLIT_MIN_ROWS rows, it takes
# companions (MBS_COMPANIONS): a row's first `held` chunks take tickets, half
# the ring's chunks (or half the row's, if more), and chunk c + held goes with
# chunk c, so the ring holds two rows of tickets.  auto takes them where the
# held chunks hold MBS_COMPANIONS_MIN_ROWS rows and the rows fill
# MBS_COMPANIONS_MIN_RINGS rings, else the one group or multi_block_l2 as
# before.  Probes 99-103 (H200, 2026-12-03, ÷ copy, split 512 x 7 x 4 with
# companions and early refills / what auto ran before):
# - float32 32 / 48 / 132 x 4194304 1.23 / 1.20 / 1.17 against the one
#   group's 1.38 / 1.39 / 1.36, log_softmax 128 x 4194304 1.22 against 1.32;
#   8 x 4194304 1.43 against 1.54, 16 x 7000001 1.49 against 1.55;
# - past the one group's row, against multi_block_l2: float32 16 x 8388608
#   1.42-1.44 against 1.49, 16 / 32 x 10000000 1.43 / 1.44 against 1.49 /
#   1.52, 8 / 16 x 11000000 1.49 / 1.46 against 1.51 / 1.51 (1.375 rows
#   held); bf16 64 x 8388608 1.25 against 1.49, 16 x 12582912 1.48 against
#   1.52;
# - behind: 8 / 12 / 16 / 32 x 12000000 float32 (1.26 rows held) 1.59-1.61
#   against 1.51-1.56; in fewer than three rings of rows, 2 x 4194304 and
#   2 x 6000000 (one ring) 8 % and 4 % behind, 4 x 6000000 and 5 x 6000000
#   (two, 2.5) 3 % and 0.7 %, 4 x 10000000 1.3 %, bf16 4 x 8388608 1-3 %;
#   at three rings level (6 x 6000000 1.53 against 1.54) and ahead past them
#   (6 x 4194304 1.50 against 1.54, 8 x 6000000 1.50 against 1.54).
# The bulk copies evict first with companions (the kernel's MBS_COPY_LAST).
MBS_THREADS, MBS_SPLIT_THREADS, MBS_VPT = 448, 512, 8
MBS_SPLIT_VPTS = (8, 7)
MBS_SPLIT_MIN_ROWS, MBS_SPLIT_MIN_ROWS_LOG, MBS_SPLIT_AMPLE_ROWS = 2, 3, 6
MBS_EARLY_FILL_ROWS = 3.1
MBS_COMPANIONS_MIN_ROWS, MBS_COMPANIONS_MIN_RINGS = 1.3, 3
MBS_STATIC_SMEM = 1024  # the kernel's own shared memory (mbarriers, slot records, scratch): 384 / 640 (split) bytes at sm_90


class SmemBlock(NamedTuple):
    """multi_block_smem's block shape and schedule (multi_block_smem_block)."""
    threads: int
    vpt: int
    blocks_per_sm: int
    split: bool  # the two groups' schedule
    held_chunks: int | None = None  # a row's chunks that take tickets, the rest companions; None: all


def _multi_block_smem_slot_bytes(threads: int, vpt: int) -> int:
    """A slot: a chunk of threads x vpt vectors plus a line (the kernel's MBS_SLOT_VECS: the line shift)."""
    return (threads * vpt + LINE_VECS) * VECTOR_BYTES


def multi_block_smem_slots(dev: DeviceInfo, threads: int, vpt: int, blocks_per_sm: int) -> int:
    """Chunks of threads x vpt vectors a block holds in shared memory."""
    budget = min(dev.smem_optin_bytes, dev.smem_per_sm_bytes // blocks_per_sm) - 1024 - MBS_STATIC_SMEM
    return budget // _multi_block_smem_slot_bytes(threads, vpt)


def _multi_block_smem_ring(dev: DeviceInfo, threads: int, vpt: int, blocks_per_sm: int) -> int:
    """Chunks the resident blocks' rings hold together."""
    return dev.sm_count * blocks_per_sm * multi_block_smem_slots(dev, threads, vpt, blocks_per_sm)


def _multi_block_smem_chunks(cols: int, itemsize: int, threads: int, vpt: int) -> int:
    return max(1, -(-_row_vecs(cols, itemsize) // (threads * vpt)))


def multi_block_smem_companion_held(chunks: int, ring: int) -> int:
    """A row's chunks that take tickets with companions: half the ring's, or half the row's if more."""
    return max(-(-chunks // 2), ring // MBS_SPLIT_MIN_ROWS)


def multi_block_smem_block(cols: int, itemsize: int, dev: DeviceInfo, op: str = "softmax",
                           rows: int = 1 << 20) -> SmemBlock:
    """The block shape and schedule for `rows` rows of `cols` elements of `itemsize` bytes (the rule
    above); where nothing else holds a row, the split with companions whether or not they pay."""
    def rows_held(vpt: int) -> float:  # rows the split's ring holds at vpt vectors a thread
        return multi_block_smem_rows_held(cols, itemsize, dev, MBS_SPLIT_THREADS, vpt, 1)

    ample = [v for v in MBS_SPLIT_VPTS if rows_held(v) >= MBS_SPLIT_AMPLE_ROWS]
    vpt = max(ample) if ample else max(MBS_SPLIT_VPTS, key=rows_held)
    least = MBS_SPLIT_MIN_ROWS_LOG if itemsize == ITEMSIZE and op == "log_softmax" else MBS_SPLIT_MIN_ROWS
    if rows_held(vpt) >= least:
        return SmemBlock(MBS_SPLIT_THREADS, vpt, 1, True)
    chunks = _multi_block_smem_chunks(cols, itemsize, MBS_SPLIT_THREADS, vpt)
    ring = _multi_block_smem_ring(dev, MBS_SPLIT_THREADS, vpt, 1)
    held = multi_block_smem_companion_held(chunks, ring)
    companions = SmemBlock(MBS_SPLIT_THREADS, vpt, 1, True, held) if held <= ring and held < chunks else None
    if companions is not None and (_companions_pay(companions, dev, rows) or
                                   multi_block_smem_rows_held(cols, itemsize, dev, MBS_THREADS, MBS_VPT, 1) < 1):
        return companions
    return SmemBlock(MBS_THREADS, MBS_VPT, 1, False)


def _companions_pay(block: SmemBlock, dev: DeviceInfo, rows: int) -> bool:
    """Whether `block`, the split with companions, is ahead for `rows` rows (the rule above)."""
    ring_rows = _multi_block_smem_ring(dev, block.threads, block.vpt, block.blocks_per_sm) / block.held_chunks
    return ring_rows >= MBS_COMPANIONS_MIN_ROWS and rows >= MBS_COMPANIONS_MIN_RINGS * ring_rows


def multi_block_smem_leads(shape: Shape, dev: DeviceInfo) -> bool:
    """Whether auto takes multi_block_smem where its row length lists it: the split, with companions
    where they pay; float32's one group (the halves' is slower than multi_block_l2, probe 69)."""
    block = multi_block_smem_block(shape.cols, shape.itemsize, dev, shape.op, shape.rows)
    if not block.split:
        return shape.itemsize == ITEMSIZE
    return block.held_chunks is None or _companions_pay(block, dev, shape.rows)


def multi_block_smem_rows_held(cols: int, itemsize: int, dev: DeviceInfo, threads: int, vpt: int,
                               blocks_per_sm: int) -> float:
    """Rows of `cols` elements that the resident blocks' rings of threads x vpt chunks hold."""
    return _multi_block_smem_ring(dev, threads, vpt, blocks_per_sm) / _multi_block_smem_chunks(cols, itemsize,
                                                                                                threads, vpt)


def multi_block_smem_early_fill(cols: int, itemsize: int, dev: DeviceInfo, threads: int, vpt: int,
                                blocks_per_sm: int, split: bool) -> bool:
    """Whether the split's writers refill a slot before its stores (the rule above)."""
    return split and multi_block_smem_rows_held(cols, itemsize, dev, threads, vpt, blocks_per_sm) < MBS_EARLY_FILL_ROWS


def multi_block_smem_defines(dtype: str, op: str, threads: int, vpt: int, blocks_per_sm: int, slots: int,
                             split: bool = False, early_fill: bool = False, companions: bool = False) -> dict:
    """The build of multi_block_smem.cu for one block shape, ring and schedule."""
    return kernel_defines(dtype, op) | {"MBS_THREADS": threads, "MBS_VPT": vpt, "MBS_SLOTS": slots,
                                        "MBS_BLOCKS_PER_SM": blocks_per_sm, "MBS_SPLIT": int(split)} | \
        ({"MBS_EARLY_FILL": 1} if early_fill else {}) | ({"MBS_COMPANIONS": 1} if companions else {})


def _multi_block_smem_max_cols(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> int:
    """The longest row it holds: the split's held chunks, a ring's worth, with a companion each."""
    return max(2 * _multi_block_smem_ring(dev, MBS_SPLIT_THREADS, v, 1) * MBS_SPLIT_THREADS * v * VECTOR_BYTES
               // DTYPES[dtype] for v in MBS_SPLIT_VPTS)


def _prepare_multi_block_smem(shape: Shape, dev: DeviceInfo, threads: int | None = None, vpt: int | None = None,
                              slots: int | None = None, blocks_per_sm: int | None = None, lag: int | None = None,
                              grid: int | None = None, split: bool | None = None,
                              early_fill: bool | None = None, held_chunks: int | None = None) -> Launcher:
    """The launch; the keywords force a block shape, ring, lag, grid, schedule, early refill or held
    chunks (probes and tests: with any of the first five forced, no companions unless held_chunks)."""
    rule = multi_block_smem_block(shape.cols, shape.itemsize, dev, shape.op, shape.rows)
    if held_chunks is None and all(k is None for k in (threads, vpt, slots, blocks_per_sm, split)):
        held_chunks = rule.held_chunks
    threads, vpt, blocks_per_sm = threads or rule.threads, vpt or rule.vpt, blocks_per_sm or rule.blocks_per_sm
    split = rule.split if split is None else split
    if split and threads % 64:
        raise CannotRun(f"variant 'multi_block_smem': the split schedule takes two groups of whole warps, "
                        f"not {threads} threads")
    if early_fill is None:
        early_fill = multi_block_smem_early_fill(shape.cols, shape.itemsize, dev, threads, vpt, blocks_per_sm, split)
    elif early_fill and not split:
        raise CannotRun("variant 'multi_block_smem': early refills are the split schedule's")
    slots = slots or multi_block_smem_slots(dev, threads, vpt, blocks_per_sm)
    if slots < 2:
        raise CannotRun(f"variant 'multi_block_smem': {dev.name} cannot hold two chunks of {threads} x {vpt} "
                        f"vectors in a block's shared memory at {blocks_per_sm} blocks per SM")
    chunks = _multi_block_smem_chunks(shape.cols, shape.itemsize, threads, vpt)
    held = chunks if held_chunks is None else min(chunks, held_chunks)
    if held < chunks and not split:
        raise CannotRun("variant 'multi_block_smem': companions are the split schedule's")
    if 2 * held < chunks:
        raise CannotRun(f"variant 'multi_block_smem': {held} held chunks and a companion each cover "
                        f"{2 * held} of a row's {chunks} chunks")
    defines = multi_block_smem_defines(shape.dtype, shape.op, threads, vpt, blocks_per_sm, slots, split, early_fill,
                                       held < chunks)
    smem = slots * _multi_block_smem_slot_bytes(threads, vpt)
    try:
        kernel = loader.get_kernel("multi_block_smem.cu", "multi_block_smem", defines, device_id=dev.id)
        kernel.max_dynamic_shared_size_bytes = smem
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.kernel.ptr, threads, smem)
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant 'multi_block_smem': {dev.name} cannot run {slots} slots of "
                        f"{threads} x {vpt} vectors: {e}") from e
    items = shape.rows * chunks
    resident = per_sm * dev.sm_count if grid is None else min(grid, per_sm * dev.sm_count)
    grid = min(resident, shape.rows * held)
    if min(resident, held) * slots < held:  # the kernel's progress condition
        raise CannotRun(f"variant 'multi_block_smem': {resident} resident blocks of {slots} slots "
                        f"cannot hold a row of {held} chunks on {dev.name}")
    lag = np.int32(lag if lag is not None else min(slots - 1, -(-chunks // grid) + 1))
    function, n_chunks, n_held, scalars = kernel.kernel, np.int64(chunks), np.int64(held), shape.scalars()

    def launch(x: int, y: int, stream) -> None:
        # Cooperative: the driver starts the grid only with every block resident, so that blocks of
        # this launch waiting for a row never hold the SMs its other blocks need (another launch of
        # it on another stream, say; a plain launch could leave each with too few blocks: a hang).
        with CallMemory(stream) as memory:
            slot_words, tickets = _slots_and_tickets(memory, items)
            function((grid,), (threads,), (_ptr(x), _ptr(y), *scalars, n_chunks, n_held, lag, slot_words, tickets),
                     stream=stream, shared_mem=smem, enable_cooperative_groups=True)

    return launch


# ---------------------------------------------------------------- single read
# single_read's launch plan is derived, not tabulated.  The kernel keeps a row
# on chip: the row's 16-byte vectors are split over a cluster of `cluster`
# blocks, each block's slice over `threads` threads holding `vpt` vectors each
# in registers, after a ring of `stages` shared-memory stages.  The rule, for
# `rows` rows of `vecs` vectors (notes/TUNING.md has the measurements, runs 5
# and 6 on the H200):
#   1. cluster: the smallest power of two c_min whose slice P = ceil(vecs / c)
#      fits one block (quack's cluster_n); for few rows also 2 * c_min, which
#      gives more, shorter rounds (if its slices keep MIN_SLICE vectors);
#   2. threads and vpt for the slice: at least MIN_THREADS_PER_SM threads per
#      SM, within the register budget (4 registers per vector plus about 32);
#      of the pairs filled to GOOD_FILL or more, vpt nearest VPT_TARGET, else
#      the fullest;
#   3. stages: one with a cluster (more stages with a cluster ran 1.2-1.7 x
#      copy, one 1.06-1.10); without a cluster as many as fit, at most
#      MAX_STAGES, beyond the first only within STAGES_BYTES;
#   4. one or two blocks per SM and c_min or 2 * c_min: the least estimated
#      time, rounds of resident clusters (plus one to fill and drain the
#      pipeline) x the slice a block moves per round x blocks sharing an SM,
#      x (1 + LARGER_CLUSTER_COST) for 2 * c_min; halves (forward) x (1 +
#      HALVES_ONE_BLOCK_COST) for one block per SM in a cluster, and at two
#      blocks per SM the fewest threads and no cluster of MAX_CLUSTER; ties go
#      to the first of (c_min, one block per SM), (c_min, two), (2 * c_min,
#      one), (2 * c_min, two).
#   5. float16/bfloat16 softmax: the wide plan (ClusterConfig.wide, SR_WIDE:
#      halves widened to floats in registers, 8 registers per vector, so e
#      stays in place and each element takes one exponential, not two) where
#      one holds the row and, against a packed plan of one block per SM, its
#      cluster is no larger or the packed plan's is WIDE_FROM_CLUSTER blocks
#      or more; against one of two blocks per SM, its cluster is smaller, or
#      the same with WIDE_MAX_VPT vectors per thread (measured on the H200,
#      below); else the packed plan (4 registers per
#      vector), which holds rows twice as long (single_read_plan).  The stages
#      hold the halves either way.
VECTOR_BYTES = 16  # every kernel moves 16-byte vectors (4 fp32, 8 fp16/bf16 elements)
REGISTERS_PER_SM = 65536  # every sm_70+ device
OTHER_REGISTERS = 32  # registers per thread besides the row (indices, reductions)
OTHER_REGISTERS_ONE_BLOCK = 40  # the same for clusters of one block (measured with ptxas: 1-8 more)
# ... and for halves: at 128 registers, 14 to 18 vectors per thread spilled (ptxas, NVRTC 12.9), 13 did not
OTHER_REGISTERS_ONE_BLOCK_HALVES = 76
# ... and for halves held wide (SR_WIDE), 8 registers per vector, at most WIDE_MAX_VPT vectors: 40 without a
# cluster (fp16 1 x 512 x 12 spilled at 32), 32 with one (ptxas, NVRTC 12.9; past 12 vectors up to 40)
OTHER_REGISTERS_ONE_BLOCK_WIDE = 40
# The backward (single_read_backward.cu) holds y and dy: 8 registers per vector pair, plus 32 others
# with a cluster, 40 without, 56 for halves without (ptxas, NVRTC 12.9: 1 x 512 x 10 spilled at 48).
BACKWARD_OTHER_REGISTERS_ONE_BLOCK_HALVES = 56
MAX_VPT = 24  # vectors per thread in registers (8 x 512 x 24 is the measured best at 393216)
LINE_BYTES = 128  # an L2 cache line
LINE_VECS = LINE_BYTES // VECTOR_BYTES  # 16-byte vectors per line
WIDE_MAX_VPT = 12  # the same 96 registers of floats, 8 to a vector of widened halves (single_read.cu asserts it)
VPT_TARGET = 16
GOOD_FILL = 0.93
MIN_FILL = 0.9  # what every derived plan reaches (tests/test_variants.py)
MIN_THREADS_PER_SM = 512  # run5: clusters of 256-thread blocks, one per SM, ran 1.28-1.33 x copy
MIN_SLICE = 1024  # vectors (16 KB): slices no shorter are not split over a larger cluster
MAX_STAGES = 3
STAGES_BYTES = 128 * 1024
SMEM_RESERVED = 1024 + 512  # per block: the driver's 1 KB and the kernel's static shared memory
MAX_CLUSTER = 16  # Hopper, with the non-portable cluster size allowed
LARGER_CLUSTER_COST = 0.10  # run5/6: 8 vs 4 at 151936 +12 %, 16 vs 8 at 393216 +10-17 % beyond the rounds
CLUSTER_COST = {1: 0.0, 2: 0.0, 4: 0.0, 8: 0.0, 16: 0.10}  # long_row's measured extra cost of clusters of 16
_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14  # CUfunction_attribute


def _row_vecs(cols: int, itemsize: int = ITEMSIZE) -> int:
    """The 16-byte vectors a row of `cols` elements spans (at least one): what a plan
    must hold of it, whatever its alignment."""
    return max(1, -(-cols * itemsize // VECTOR_BYTES))


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _check_cluster_and_threads(cluster: int, threads: int) -> None:
    """What every cluster kernel needs: a butterfly-mergeable cluster and whole warps."""
    if not (_is_power_of_two(cluster) and cluster <= MAX_CLUSTER):
        raise ValueError(f"cluster {cluster}: the kernel's butterfly merge needs a power of two of at most {MAX_CLUSTER}")
    if not (threads % 32 == 0 and 32 <= threads <= 1024):
        raise ValueError(f"threads {threads}: a multiple of 32, at most 1024")


# single_read's forward merges each row's pairs over the cluster by pushing them into every
# block (SR_PUSHED_MERGE, kernels/cluster.cuh row_exchange) in clusters of 8 or more, and between
# two cluster barriers in smaller ones.  H200, probes 78-79 (notes/TUNING.md), pushed against
# published: clusters of 8 1-5 % faster (bf16 4096 x 393216 1.11 -> 1.05-1.06 x copy, fp16
# log_softmax 1.11 -> 1.08, bf16 4096 x 300000 1.13 -> 1.12, float32 4096 x 393216 level);
# clusters of 4 at 4096 rows 0.5-6.5 % slower (bf16 4096 x 151936 at two blocks per SM 1.12 ->
# 1.20, float32 4096 x 128256 1.056 -> 1.071), with try_wait's suspend hint as well.
PUSHED_MERGE_MIN_CLUSTER = 8


@dataclass(frozen=True)
class ClusterConfig:
    cluster: int  # thread blocks per row (a power of two, at most 16)
    threads: int  # a multiple of 32, at most 1024
    vpt: int  # 16-byte vectors per thread (held in registers)
    stages: int  # shared-memory stages in the load ring
    blocks_per_sm: int = 1  # blocks the register budget is sized for
    arrays: int = 1  # arrays held on chip: 1 forward (x), 2 backward (y and dy; vpt counts vector pairs)
    wide: bool = False  # half softmax with the halves widened in registers (SR_WIDE): 8 registers per vector
    line_shift: bool = False  # each slice placed in its stage at its source's offset in a 128-byte line
    # forward: the row's `cluster` blocks are a group of any resident blocks, merged through
    # device memory (SR_MEMORY_MERGE), not a cluster: any count from 2 to `threads`
    memory_merge: bool = False
    # log_softmax backward: its stages hold dy alone, and each thread loads its vectors of y
    # from device memory into registers (SRB_Y_DIRECT; single_read_backward_plan)
    y_direct: bool = False

    def __post_init__(self):
        if self.memory_merge:
            if not (2 <= self.cluster <= self.threads and self.arrays == 1):
                raise ValueError(f"{self}: a memory-merged group is 2 to `threads` blocks holding one array")
            _check_cluster_and_threads(1, self.threads)
        else:
            _check_cluster_and_threads(self.cluster, self.threads)
        if min(self.vpt, self.stages, self.blocks_per_sm) < 1 or self.arrays not in (1, 2):
            raise ValueError(f"vpt, stages and blocks_per_sm must be positive, arrays 1 or 2: {self}")
        if self.y_direct and self.arrays != 2:
            raise ValueError(f"{self}: y_direct is a backward plan's (arrays=2)")
        if self.wide and (self.arrays != 1 or self.vpt > WIDE_MAX_VPT):
            raise ValueError(f"{self}: wide plans hold one array, at most {WIDE_MAX_VPT} vectors per thread")
        if _registers_needed(self.vpt, self.cluster, ITEMSIZE, self.arrays, self.wide) > \
                _register_budget(self.threads, self.blocks_per_sm):
            raise ValueError(f"{self}: {self.vpt} vectors per thread exceed the register budget")

    @property
    def capacity_vecs(self) -> int:
        """16-byte vectors of a row (of each array) the configuration holds."""
        return self.cluster * self.threads * self.vpt

    @property
    def cluster_dims(self) -> int:
        """The blocks of the hardware cluster it launches: `cluster`, or 1 for a memory-merged
        group (plain blocks)."""
        return 1 if self.memory_merge else self.cluster

    @property
    def pushed_merge(self) -> bool:
        """The forward's per-row merge pushed into every block (SR_PUSHED_MERGE), for clusters of
        PUSHED_MERGE_MIN_CLUSTER or more."""
        return self.arrays == 1 and not self.memory_merge and self.cluster >= PUSHED_MERGE_MIN_CLUSTER

    @property
    def capacity_floats(self) -> int:
        """The longest fp32 row this configuration holds on chip."""
        return self.capacity_vecs * VECTOR_BYTES // ITEMSIZE

    @property
    def staged_arrays(self) -> int:
        """The arrays a shared-memory stage holds: `arrays`, or dy alone for y_direct."""
        return 1 if self.y_direct else self.arrays

    @property
    def smem_bytes(self) -> int:
        return self.stages * (self.threads * self.vpt + LINE_VECS * self.line_shift) * self.staged_arrays * \
            VECTOR_BYTES

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        d = {"SR_CLUSTER": self.cluster_dims, "SR_THREADS": self.threads, "SR_VPT": self.vpt,
             "SR_STAGES": self.stages, "SR_BLOCKS_PER_SM": self.blocks_per_sm}
        if self.memory_merge:
            d["SR_MEMORY_MERGE"] = 1
        if self.wide:
            d["SR_WIDE"] = 1
        if self.line_shift:
            d["SR_LINE_SHIFT"] = 1
        if self.y_direct:
            d["SRB_Y_DIRECT"] = 1
        if self.pushed_merge:
            d["SR_PUSHED_MERGE"] = 1
        if dev is not None:
            d["SR_SMEM_LIMIT"] = dev.smem_optin_bytes
        return d

    def label(self) -> str:
        return f"{self.cluster}x{self.threads}x{self.vpt}x{self.stages}x{self.blocks_per_sm}" + \
            ("b" if self.arrays == 2 else "") + ("w" if self.wide else "") + ("s" if self.line_shift else "") + \
            ("m" if self.memory_merge else "") + ("d" if self.y_direct else "")


def _register_budget(threads: int, blocks_per_sm: int) -> int:
    """Registers per thread when `blocks_per_sm` blocks of `threads` share an SM:
    its 4 partitions hold 16384 registers each and take the warps in turn;
    allocated 8 at a time, at most 255 (what ptxas caps a kernel at under
    __launch_bounds__(threads, blocks_per_sm))."""
    warps_per_partition = -(-(threads // 32) * blocks_per_sm // 4)
    return min(255, REGISTERS_PER_SM // 4 // (32 * warps_per_partition) // 8 * 8)


def _other_registers(cluster: int, itemsize: int = ITEMSIZE, wide: bool = False) -> int:
    if cluster > 1:
        return OTHER_REGISTERS
    if wide:
        return OTHER_REGISTERS_ONE_BLOCK_WIDE
    return OTHER_REGISTERS_ONE_BLOCK if itemsize == ITEMSIZE else OTHER_REGISTERS_ONE_BLOCK_HALVES


def _registers_per_vector(wide: bool) -> int:
    """Registers single_read holds a 16-byte vector in: 4 (4 floats or 8 packed halves), 8 wide."""
    return 8 if wide else 4


def _registers_needed(vpt: int, cluster: int, itemsize: int = ITEMSIZE, arrays: int = 1, wide: bool = False) -> int:
    """Registers per thread of single_read (4 per vector, 8 wide, plus the others) or, arrays=2, of
    single_read_backward (8 per vector pair plus its others; its source includes single_read.cu's
    checks too)."""
    forward = _registers_per_vector(wide) * vpt + _other_registers(cluster, itemsize, wide)
    if arrays == 1:
        return forward
    others = OTHER_REGISTERS if cluster > 1 else (
        OTHER_REGISTERS_ONE_BLOCK if itemsize == ITEMSIZE else BACKWARD_OTHER_REGISTERS_ONE_BLOCK_HALVES)
    return max(forward, 8 * vpt + others)


def _max_vpt(threads: int, blocks_per_sm: int, cluster: int = 2, itemsize: int = ITEMSIZE, arrays: int = 1,
             wide: bool = False) -> int:
    """Vectors per thread in registers: halves stay packed, 4 registers per 16-byte vector as floats;
    wide, 8 (arrays=2: vector pairs of y and dy, 8 registers each)."""
    budget = _register_budget(threads, blocks_per_sm)
    if arrays == 1:
        per_vector = _registers_per_vector(wide)
        return min(WIDE_MAX_VPT if wide else MAX_VPT, (budget - _other_registers(cluster, itemsize, wide)) // per_vector)
    return max([v for v in range(1, MAX_VPT // arrays + 1) if _registers_needed(v, cluster, itemsize, arrays) <= budget],
               default=0)


def _block_smem(threads: int, vpt: int, stages: int, arrays: int = 1) -> int:
    """single_read's shared memory beyond SMEM_RESERVED: the stages (of each array), and each
    warp's first vector per k for realigned stores (1/32 of a stage)."""
    return stages * threads * vpt * VECTOR_BYTES * arrays + threads * vpt // 2


def _smem_budget(dev: DeviceInfo, blocks_per_sm: int) -> int:
    """Dynamic shared memory one block may take when `blocks_per_sm` share an SM."""
    return min(dev.smem_optin_bytes, dev.smem_per_sm_bytes // blocks_per_sm) - SMEM_RESERVED


# single_read.cu's whole path (a slice that holds all but each thread's last
# vector is loaded and stored without index compares, SR_WHOLE_PATH): halves
# always, float32 where its threads keep this many registers (at 96, ptxas
# spilled it: 544 and 608 threads).  H200, 2026-12-02, 4096 rows, float32
# softmax ÷ copy (notes/tune-runs/2026-12-02-float-whole-path-p36.txt, -p37):
# odd lengths 100003-200003 1.08-1.09 against 1.12-1.16, 151936 in 4 x 512 x 19
# 1.06 against 4 x 608 x 16's 1.07, 262147 and 300001 in 512-thread blocks
# 1.09 against 1.10-1.12; 393216 level.
WHOLE_PATH_REGISTERS = 128


def keeps_whole_path(threads: int, blocks_per_sm: int) -> bool:
    """Whether float32 blocks of `threads`, `blocks_per_sm` to an SM, keep the registers
    single_read.cu's whole path takes (its SR_WHOLE_PATH rule)."""
    return _register_budget(threads, blocks_per_sm) >= WHOLE_PATH_REGISTERS


def block_shape(per_block: int, blocks_per_sm: int = 1, vpt_target: int = VPT_TARGET,
                cluster: int = 2, smem_budget: int = 1 << 30, itemsize: int = ITEMSIZE,
                arrays: int = 1, wide: bool = False) -> tuple[int, int] | None:
    """(threads, vpt) for a slice of `per_block` vectors, or None if no block
    holds it: at least MIN_THREADS_PER_SM / blocks_per_sm threads (fewer only
    for shorter slices), within the register budget and a stage of at most
    `smem_budget` bytes; of the pairs filled to GOOD_FILL, vpt nearest
    vpt_target (then the fuller), else the fullest pair.  Forward halves,
    whose instructions per byte set their pace, first take pairs whose warps
    fill the SM's 4 partitions evenly (H200, 2026-12-01, time ÷ bytes at 4.28
    TB/s: 4096 x 151936 bf16 softmax 2x640x15 and 2x512x19 1.18-1.19 against
    2x608x16 1.20-1.26, log_softmax 1.105-1.110 against 1.149; float32,
    bound by memory: 4x640x15 and 4x608x16 equal).  Float32 forward slices first take
    pairs whose threads keep WHOLE_PATH_REGISTERS registers, where single_read.cu
    takes its whole path."""
    best, best_key = None, None
    balance = itemsize != ITEMSIZE and arrays == 1
    whole_path = itemsize == ITEMSIZE and arrays == 1
    fewest = min(MIN_THREADS_PER_SM // blocks_per_sm, -(-per_block // 32) * 32)
    for threads in range(fewest, 1025, 32):
        vpt = max(1, -(-per_block // threads))
        if vpt > _max_vpt(threads, blocks_per_sm, cluster, itemsize, arrays, wide) or \
                _block_smem(threads, vpt, 1, arrays) > smem_budget:
            continue
        fill = per_block / (threads * vpt)
        good = fill >= GOOD_FILL
        even = good and balance and threads // 32 * blocks_per_sm % 4 == 0
        roomy = good and whole_path and keeps_whole_path(threads, blocks_per_sm)
        key = (good, roomy, even, -abs(vpt - vpt_target) if good else 0, fill, threads)
        if best_key is None or key > best_key:
            best, best_key = (threads, vpt), key
    return best


def _config_for(vecs: int, cluster: int, blocks_per_sm: int, dev: DeviceInfo, vpt_target: int = VPT_TARGET,
                itemsize: int = ITEMSIZE, arrays: int = 1, wide: bool = False) -> ClusterConfig | None:
    """Steps 2 and 3 of the rule for one cluster size and blocks per SM."""
    budget = _smem_budget(dev, blocks_per_sm)
    shape = block_shape(-(-vecs // cluster), blocks_per_sm, vpt_target, cluster, budget, itemsize, arrays, wide)
    if shape is None:
        return None
    stage = shape[0] * shape[1] * VECTOR_BYTES * arrays
    fit = max(s for s in range(1, MAX_STAGES + 1) if s == 1 or _block_smem(*shape, s, arrays) <= budget)
    stages = 1 if cluster > 1 else max(1, min(fit, STAGES_BYTES // stage))
    return ClusterConfig(cluster, *shape, stages, blocks_per_sm, arrays, wide)


def single_read_candidates(cols: int, dev: DeviceInfo, itemsize: int = ITEMSIZE,
                           vpt_target: int = VPT_TARGET, arrays: int = 1, wide: bool = False) -> list[ClusterConfig]:
    """The configurations step 4 chooses from: the smallest cluster that holds
    rows of `cols` on `dev` and the next, one or two blocks per SM.  arrays=2:
    the backward's, y and dy on chip (twice the bytes per element; vpt and its
    target count vector pairs).  wide: halves widened in registers (8 registers
    per vector, so vpt and its target are halved as for arrays=2).  Halves
    (forward) at two blocks per SM take the fewest threads, and no cluster of
    MAX_CLUSTER blocks (see HALVES_ONE_BLOCK_COST)."""
    vecs = _row_vecs(cols, itemsize)
    vpt_target = max(1, vpt_target // (arrays * _registers_per_vector(wide) // 4))
    halves_forward = itemsize != ITEMSIZE and arrays == 1
    sizes = [c for c in (1, 2, 4, 8, 16)
             if c <= MAX_CLUSTER and _config_for(vecs, c, 1, dev, vpt_target, itemsize, arrays, wide)]
    sizes = sizes[:1] + [c for c in sizes[1:2] if vecs // c >= MIN_SLICE]
    found = []
    for cluster in sizes:
        for blocks_per_sm in (1, 2):
            if halves_forward and blocks_per_sm == 2 and cluster == MAX_CLUSTER:
                continue
            target = MAX_VPT if halves_forward and blocks_per_sm == 2 else vpt_target
            config = _config_for(vecs, cluster, blocks_per_sm, dev, target, itemsize, arrays, wide)
            if config is not None:
                found.append(config)
    return found


def estimated_groups(config, dev: DeviceInfo) -> int:
    """Resident clusters, estimated without the driver: clusters of 4 or more
    blocks lose about 7 % of the SMs to the GPC layout (runs 5 and 6 on the
    H200: 30 of 4, 15 of 8, 7 of 16 at one block per SM; 62, 30 and 14 at two)."""
    usable = dev.sm_count * config.blocks_per_sm * (0.93 if config.cluster >= 4 else 1.0)
    return max(1, int(usable) // config.cluster)


def plan_cost(config: ClusterConfig, rows: int, cols: int, dev: DeviceInfo, groups: int | None = None,
              smallest_cluster: int | None = None, itemsize: int = ITEMSIZE, one_block_cost: float = 0.0) -> float:
    """Estimated time, in vectors moved by one block: rounds x slice x blocks per SM, times
    1 + LARGER_CLUSTER_COST past the smallest cluster and 1 + one_block_cost for one block
    per SM in a cluster."""
    vecs = _row_vecs(cols, itemsize)
    rounds = -(-rows // (groups or estimated_groups(config, dev))) + 1
    per_block = -(-vecs // config.cluster)
    larger = config.cluster > (smallest_cluster or config.cluster)
    alone = config.blocks_per_sm == 1 and config.cluster > 1
    return rounds * per_block * config.blocks_per_sm * (1 + (LARGER_CLUSTER_COST if larger else 0.0)) * \
        (1 + (one_block_cost if alone else 0.0))


# Packed halves (forward), one block per SM or two (H200, 2026-12-01, eleventh
# session, notes/tune-runs/2026-12-01-two-blocks-p12.txt and -p13.txt, bfloat16
# ÷ copy, 4096 rows): where the row needs a cluster, a second block per SM at
# twice the cluster, 256 threads a block, hides what one block per SM leaves
# exposed (its instructions, the per-row barrier and merge): softmax 100003,
# 128256, 151936 columns 1.22, 1.13, 1.13 against the one-block plans' 1.30,
# 1.22, 1.18 (float16 1.26, 1.12, 1.11 against 1.30, 1.21, 1.17); log_softmax
# 200003, 262144, 393216 1.19, 1.10, 1.11 against 1.28, 1.14-1.15, 1.13, and
# level (within 1 %) at 100003-151936.  Not for single blocks, whose stages
# overlap rows already (log_softmax 50257: 1 x 512 x 13 1.14 against 2 x 256 x
# 13 x 2's 1.24), and not in clusters of 16 (4096 x 393216 softmax 16 x 256 x
# 12 x 2 1.50 against 8 x 256 x 24 x 2's 1.18).  Fewer threads did better at two
# blocks per SM: 4 x 256 x 19 1.12-1.13 against 4 x 320 x 15 1.12-1.14 at 151936,
# 4 x 256 x 16 1.13 against 4 x 384 x 11 1.14 at 128256.  Float32, bound by
# memory, gained nothing (p12: 1.07-1.12 against 1.065-1.11 for 100003-200003).
HALVES_ONE_BLOCK_COST = 0.25


def single_read_config(cols: int, dev: DeviceInfo, rows: int = 1 << 20, itemsize: int = ITEMSIZE,
                       vpt_target: int = VPT_TARGET, arrays: int = 1, wide: bool = False,
                       one_block_cost: float = 0.0) -> ClusterConfig | None:
    """single_read's configuration for `rows` rows of `cols` elements on `dev`, or None
    (arrays=2: the backward's, y and dy on chip; wide: halves widened in registers)."""
    found = single_read_candidates(cols, dev, itemsize, vpt_target, arrays, wide)
    if not found:
        return None
    smallest = found[0].cluster
    return min(found, key=lambda c: plan_cost(c, rows, cols, dev, smallest_cluster=smallest, itemsize=itemsize,
                                              one_block_cost=one_block_cost))


def holds_wide(dtype: str, op: str) -> bool:
    """Whether single_read builds `dtype` `op` wide where a plan holds the row (step 5):
    float16 and bfloat16 softmax, the forward op with two exponentials per element packed."""
    return DTYPES[dtype] == 2 and op == "softmax"


# The wide half softmax saves an exponential per element but holds half the elements per
# register, so its plan may need twice the cluster.  Measured (H200, 2026-11-30, bf16 / fp16 ÷
# copy, benchmarks/probe_single_read_dtypes.py): the same cluster 16384 x 32000 1.03 / 1.06
# against packed 1.26 / 1.21; clusters 4 -> 8 at 4096 x 393216 1.14 / 1.27 against 1.39 / 1.58
# (same run) and 1.30 / 1.22 (earlier); clusters 2 -> 4 no better: 4096 x 128256 1.35 / 1.37
# against 1.29 / 1.27, 4096 x 151936 1.27 / 1.30 against 1.28 / 1.25, 512 x 100003 1.85 / 1.75
# against 1.60 / 1.57.  Against the packed plans of two blocks per SM (eleventh session, p13 above, bf16 softmax, 4096
# rows), wide blocks of one per SM in the same cluster lost where their slices are short: 65536,
# 200003, 262144 columns (8, 5, 8 vectors a thread) 1.20, 1.48, 1.24 against 1.11, 1.30, 1.16;
# at 393216 (12 a thread, WIDE_MAX_VPT) the wide plan won, 1.12 against 1.18.
WIDE_FROM_CLUSTER = 4


def _wide_beats(wide: ClusterConfig, packed: ClusterConfig) -> bool:
    """Step 5: whether half softmax takes the wide plan over the packed one."""
    if packed.blocks_per_sm == 2:
        return wide.cluster < packed.cluster or (wide.cluster == packed.cluster and wide.vpt == WIDE_MAX_VPT)
    return wide.cluster <= packed.cluster or packed.cluster >= WIDE_FROM_CLUSTER


@functools.lru_cache(maxsize=256)  # auto's preferences and the prepare both ask for it
def single_read_plan(cols: int, dev: DeviceInfo, rows: int = 1 << 20, dtype: str = "float32",
                     op: str = "softmax") -> ClusterConfig | None:
    """single_read's plan for a forward op (the rule's five steps): for half softmax the wide
    plan where one holds the row and _wide_beats the packed plan; else the packed (or
    float32) one (halves: HALVES_ONE_BLOCK_COST), or in its place a smaller memory-merged
    group where the packed plan takes a cluster of MAX_CLUSTER blocks and the group pays;
    past a cluster's limit the memory-merged plan; None past every block's.  For halves
    whose packed plan is a cluster at one block per SM, a memory-merged group at two blocks
    per SM takes the place of that plan where the group pays and holds HALVES_MERGE_MIN_HELD
    times its vectors per SM (HALVES_MERGE_BLOCKS_PER_SM)."""
    itemsize = DTYPES[dtype]
    one_block_cost = HALVES_ONE_BLOCK_COST if itemsize != ITEMSIZE else 0.0
    packed = single_read_config(cols, dev, rows, itemsize, one_block_cost=one_block_cost)
    wide = single_read_config(cols, dev, rows, itemsize, wide=True, one_block_cost=one_block_cost) \
        if holds_wide(dtype, op) else None
    if wide is not None and (packed is None or _wide_beats(wide, packed)):
        plan = wide
    else:
        merged = memory_merge_config(cols, dev, rows, itemsize) if packed is None or packed.cluster == MAX_CLUSTER \
            else None
        plan = merged if merged is not None and (packed is None or (
            merged.cluster < packed.cluster and memory_merge_pays(merged, rows, dev, itemsize))) else packed
    if itemsize != ITEMSIZE and packed is not None and packed.blocks_per_sm == 1 and 1 < packed.cluster < MAX_CLUSTER:
        group = memory_merge_config(cols, dev, rows, itemsize, (HALVES_MERGE_BLOCKS_PER_SM,))
        if group is not None and memory_merge_pays(group, rows, dev, itemsize) and \
                _held_per_sm(group) >= HALVES_MERGE_MIN_HELD * _held_per_sm(plan):
            return group
    return plan


def _held_per_sm(config) -> int:
    """16-byte vectors a plan (a ClusterConfig, or cluster_row's RowClusterPlan) holds on each SM (per array)."""
    return config.threads * config.vpt * config.blocks_per_sm


# Memory-merged groups (single_read.cu, SR_MEMORY_MERGE): rows that need a
# cluster of MAX_CLUSTER blocks, or more than one holds, split over a group of
# any resident blocks on any SMs, up to one block on every SM.  The blocks
# publish their (max, sum) pairs in device memory and wait for the group's:
# a round trip through L2, and a wait for the group's slowest block, where a
# cluster merges through distributed shared memory.  The plan, for `rows`
# rows of `vecs` vectors: for one and two blocks per SM and every group size
# from 2 to the resident blocks, the block shape of the slice ceil(vecs /
# group) (block_shape; a group no larger than a block's threads); the least
# estimated time, rounds of resident groups (plus one) x (slice +
# MEMORY_MERGE_ROUND_VECS) x blocks sharing an SM.  Memory-merged plans hold
# halves packed (a wide plan's slices are half as long, so its rounds cost
# twice the merges).
#
# H200, 2026-12-01 (notes/tune-runs/2026-12-01-memory-merge-p5.txt and -p6.txt,
# ÷ copy), float32 softmax, 1024 x 1048576: groups of 22 x 512 x 24 1.21,
# 26 x 640 x 16 1.27, 33 x 512 x 16 1.38, 43 x 512 x 12 1.56 (multi_block_l2
# 1.29): as if each round cost about 4700 vectors more than its slice.  The
# merge pays (memory_merge_pays) for long slices, groups of at most 32 blocks
# and several rounds: float32 256-1024 x 1048576 1.21-1.27 against
# multi_block_l2's 1.28-1.31, 1300 x 500000 1.16 against 1.23 (and the
# 16-block cluster's 1.27), 4096 x 393217 and 500000 1.13-1.15 against
# 1.25; float16 log_softmax 512 x 1048576 1.15 against the cluster's 1.25,
# 1024 x 2097152 1.14 against multi_block_l2's 1.28; bfloat16 softmax 132 and
# 512 x 1048576 1.36 and 1.21 against the cluster's 1.46 and 1.39.  Not with
# short slices, large groups or few rounds: 128-132 x 4194304 float32 (groups
# of 88-132) 1.66-1.75 against multi_block_l2's 1.49-1.50, 256 x 2000003 (44)
# 1.43 against 1.41, 32 x 4194304 bfloat16 (44) 1.60 against 1.53, 32 x
# 1048576 float32 (33 x 512 x 16) 1.56 against 1.42.  At 132 x 1048576 float32
# (22 rounds) the two ran 1.30-1.35 and 1.30-1.33.  A group takes the place
# of a cluster of MAX_CLUSTER blocks only where it is smaller: at 512 x
# 786432 float32 the cluster (16 x 512 x 24, full) ran 1.05 against the same
# blocks in a memory-merged group's 1.08-1.14.
MEMORY_MERGE_ROUND_VECS = 4700
MEMORY_MERGE_MIN_SLICE = 10000  # vectors a block holds (512 threads of 20 or more)
MEMORY_MERGE_MAX_GROUP = 32
MEMORY_MERGE_MIN_ROUNDS = 8
# Where multi_block_smem runs the row (forward), the memory-merged
# plan goes first for float32 only, and only in groups of at most MEMORY_MERGE_OVER_SMEM_GROUP
# blocks (a cluster's size) and from MEMORY_MERGE_OVER_SMEM_ROUNDS rounds.
# H200, 2026-12-02 (notes/tune-runs/2026-12-02-held-chunks-p58.txt, the
# sweep's timing, float32 softmax ÷ copy, multi_block_smem against the
# memory-merged plan): groups of 22 (1048576 columns) 1.15 against 1.27 at
# 132 rows, 1.13-1.14 against 1.18-1.21 at 256-1024; groups of 10-11
# (393217-500000 columns) at 2048 rows (155-171 rounds) 1.16-1.17 against
# 1.12-1.13 and 1300 rows (108) 1.18 against 1.13; 132 x 600001 (groups of
# 13, 10 rounds) 1.20 against 1.33.  Halves: the split schedule against the
# groups (probe 69, bf16 softmax / fp16 log_softmax): 1024 x 1048576 (groups
# of 11, 85 rounds) 1.31 / 1.11 against 1.29 / 1.19, 512 x 2097152 1.31 / 1.10
# against 1.38 / 1.27, 600 x 1500001 1.33 / 1.12 against 1.33 / 1.27.
MEMORY_MERGE_OVER_SMEM_GROUP = 16
MEMORY_MERGE_OVER_SMEM_ROUNDS = 64
# ptxas (NVRTC 12.9) spilled 8 bytes in the float32 build at 22 and 23 vectors
# per thread (512 and 256 threads), none at 24: those plans take 24.
MEMORY_MERGE_FLOAT_SPILLING_VPT = (22, 23)
# Halves whose packed plan is a cluster at one block per SM (rows past the
# 393216 elements a cluster of 8 holds at two blocks per SM, up to 786432) take
# a memory-merged group at two blocks per SM wherever it has
# MEMORY_MERGE_MIN_ROUNDS rounds and holds HALVES_MERGE_MIN_HELD times the
# vectors per SM of the cluster plan (packed or wide) it replaces: every block
# slot busy (resident clusters of 8 and 16 leave 12-20 SMs idle), more bytes
# in flight, and a second block per SM hides the halves' instructions and the
# merge's wait, as for clusters (HALVES_ONE_BLOCK_COST).  Where the cluster
# holds as much per SM, its merge through distributed shared memory beats
# the group's through device memory.
# H200, 2026-12-02 (notes/tune-runs/2026-12-02-memory-merge-halves-log-p65.txt,
# ÷ torch copy_, each plan twice): 4096 x 500000 bfloat16 softmax, groups of
# 11 x 256 x 23, 1.05-1.06 against the wide cluster 16 x 512 x 8's 1.36 (and
# groups at one block per SM, 6 x 512 x 21, 1.16), log_softmax 1.12-1.13
# against the cluster 8 x 512 x 16's 1.16 (float16 1.12 against 1.19); 2048 x
# 786432 bfloat16 softmax 16 x 256 x 24 1.08 against 16 x 512 x 12w's 1.11-1.12,
# log_softmax 1.02-1.03 against 8 x 512 x 24's 1.01 (float16 level at 1.02).
# Shorter rows keep their clusters of two blocks per SM: groups there ran from
# 2 % ahead to 2 % behind (bfloat16 log_softmax 393216 1.09 against 1.11,
# 300000 1.12 against 1.11, 151936 1.01 against 0.99; softmax 393216 1.13
# against the wide 1.10, -p64.txt), and float32 groups of every SM lost 3-7 %
# to the clusters at every length (p64).  By vectors held per SM, group ÷
# cluster (-p66.txt, auto then with the group against the cluster): float16
# log_softmax 4096 and 16384 x 400000 (1.69 x) 1.12 / 1.10-1.13 against 1.18 /
# 1.17, 1024 x 500000 (1.44 x) 1.17 against 1.22, 4096 x 600001 (1.23 x) 1.13-1.14
# against 1.16, but 264 x 700000 (1.05 x) 1.30-1.31 against 1.23 and 528 x
# 786432 (1.0 x) 1.23 against 1.18; bfloat16 softmax, against wide clusters of
# 16 (2-3.5 x), 4096 x 400000 1.18 against 1.74, 4096 x 600001 1.19 against
# 1.43, 1024 x 500000 1.23 against 1.55, 528 x 786432 level (1.26-1.28 against
# 1.28-1.29).  At two rows per SM or fewer, cluster_row stays ahead of the
# groups (264 x 500000 bf16 softmax 1.29-1.30 against 1.36-1.39, 132 x 700000
# 1.26 against 1.44; _cluster_row_first).
HALVES_MERGE_BLOCKS_PER_SM = 2
HALVES_MERGE_MIN_HELD = 1.1


@functools.lru_cache(maxsize=256)
def memory_merge_config(cols: int, dev: DeviceInfo, rows: int = 1 << 20, itemsize: int = ITEMSIZE,
                        blocks_per_sm_choices: tuple[int, ...] = (1, 2)) -> ClusterConfig | None:
    """single_read's memory-merged plan for `rows` rows of `cols` elements on `dev` with one of
    `blocks_per_sm_choices` blocks per SM, or None (a row longer than every resident block holds
    together)."""
    vecs = _row_vecs(cols, itemsize)
    best, best_cost = None, math.inf
    for blocks_per_sm in blocks_per_sm_choices:
        resident = dev.sm_count * blocks_per_sm
        budget = _smem_budget(dev, blocks_per_sm)
        for group in range(2, resident + 1):
            per_block = -(-vecs // group)
            shape = block_shape(per_block, blocks_per_sm, VPT_TARGET, 2, budget, itemsize)
            if shape is None or group > shape[0]:
                continue
            if itemsize == ITEMSIZE and shape[1] in MEMORY_MERGE_FLOAT_SPILLING_VPT:
                shape = (shape[0], max(MEMORY_MERGE_FLOAT_SPILLING_VPT) + 1)
                if shape[1] > _max_vpt(shape[0], blocks_per_sm) or \
                        _block_smem(*shape, 1) > budget or per_block < MIN_FILL * shape[0] * shape[1]:
                    continue
            cost = (-(-rows // (resident // group)) + 1) * (per_block + MEMORY_MERGE_ROUND_VECS) * blocks_per_sm
            if cost < best_cost:
                best, best_cost = ClusterConfig(group, *shape, 1, blocks_per_sm, memory_merge=True), cost
    return best


def memory_merge_pays(config: ClusterConfig, rows: int, dev: DeviceInfo, itemsize: int = ITEMSIZE) -> bool:
    """Whether auto takes a memory-merged plan: slices of MEMORY_MERGE_MIN_SLICE vectors
    or more (any slice for halves at HALVES_MERGE_BLOCKS_PER_SM blocks per SM), groups of at
    most MEMORY_MERGE_MAX_GROUP blocks, and MEMORY_MERGE_MIN_ROUNDS rounds of resident groups
    or more."""
    long_enough = config.threads * config.vpt >= MEMORY_MERGE_MIN_SLICE or (
        itemsize != ITEMSIZE and config.blocks_per_sm == HALVES_MERGE_BLOCKS_PER_SM)
    return long_enough and config.cluster <= MEMORY_MERGE_MAX_GROUP and \
        memory_merge_rounds(config, rows, dev) >= MEMORY_MERGE_MIN_ROUNDS


def memory_merge_rounds(config: ClusterConfig, rows: int, dev: DeviceInfo) -> int:
    """Rounds of resident groups a memory-merged plan takes for `rows` rows."""
    return -(-rows // (dev.sm_count * config.blocks_per_sm // config.cluster))


def memory_merge_slice(config: ClusterConfig, shape: Shape) -> int:
    """The vectors each block of a memory-merged group takes of every row: the
    rows' longest body, ceil(cols / elements per vector), split evenly."""
    return -(-_row_vecs(shape.cols, shape.itemsize) // config.cluster)


def _memory_merge_launcher(make_kernel: Callable, config: ClusterConfig, shape: Shape, dev: DeviceInfo,
                           groups: int | None, name: str) -> Launcher:
    """_cluster_launcher for a memory-merged plan (which holds the row: the caller
    checks its capacity): a persistent, cooperative launch of as many groups as can
    be resident at once (`groups` where given, at most those); each call takes its
    slots (rows x group pairs and the ticket counter) for the call alone, filled with the
    byte 0xBF (softmax_lab.scratch: the graph's own under capture)."""
    try:
        kernel = make_kernel(config, dev)
        resident = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, config.threads, config.smem_bytes) * dev.sm_count
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant {name!r}: {dev.name} cannot run {config}: {e}") from e
    if config.cluster > resident:
        raise CannotRun(f"variant {name!r}: a group of {config.cluster} blocks of {config} cannot be resident "
                        f"at once on {dev.name} ({resident} blocks can)")
    most = resident // config.cluster
    groups = min(shape.rows, groups or most, most)
    words, scalars = shape.rows * config.cluster + 1, shape.scalars()
    extra = (np.int64(config.cluster), np.int64(memory_merge_slice(config, shape)))
    grid, block, function = (groups * config.cluster,), (config.threads,), kernel.kernel

    def launch(x: int, y: int, stream) -> None:
        # Cooperative, as multi_block_smem's launch: a group's blocks wait for each other, so two
        # launches on two streams that each had part of the GPU resident could each hold blocks
        # waiting for blocks of their own that cannot start.  The driver starts a cooperative grid
        # only with every block resident.
        with CallMemory(stream) as memory:
            slots = memory.filled_words(words, 0xBF)
            function(grid, block, (_ptr(x), _ptr(y), *scalars, *extra, slots), stream=stream,
                     shared_mem=config.smem_bytes, enable_cooperative_groups=True)

    return launch


def _cluster_kernel(source: str, config, dev: DeviceInfo, defines: dict[str, int] | None = None) -> cupy.RawKernel:
    """The cluster kernel of kernels/<source> built for `config` (and the dtype and
    op `defines`), with its dynamic shared memory and (past 8 blocks in the hardware
    cluster it launches, `config.cluster_dims`) the non-portable cluster size allowed."""
    kernel = loader.get_kernel(source, source.removesuffix(".cu"), config.defines(dev) | (defines or {}),
                               device_id=dev.id)
    kernel.max_dynamic_shared_size_bytes = config.smem_bytes
    if config.cluster_dims > 8:
        cupy.cuda.driver.funcSetAttribute(kernel.kernel.ptr, _NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    return kernel


def single_read_kernel(config: ClusterConfig, dev: DeviceInfo, dtype: str = "float32",
                       op: str = "softmax") -> cupy.RawKernel:
    return _cluster_kernel("single_read.cu", config, dev, kernel_defines(dtype, op))


def resident_groups(config, kernel: cupy.RawKernel, dev: DeviceInfo) -> int:
    """Clusters (or, for a cluster of one, blocks) that can be resident at once."""
    if config.cluster == 1:
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, config.threads, config.smem_bytes
        )
        return per_sm * dev.sm_count
    return max_active_clusters(kernel, config.cluster, config.threads, config.smem_bytes)


# ---------------------------------------------------------------- cluster_row
# cluster_row: a cluster per row, the row in registers, no persistent loop:
# two or more blocks share an SM, so one row's loads overlap another's
# reduction and stores (quack's structure).  Its plan, for `rows` rows of
# `vecs` 16-byte vectors (of each array):
#   1. block shape: the first of CR_BLOCK_SHAPES (threads, most vectors per
#      thread) whose cluster of 16 holds the row: 256 threads of at most 13
#      vectors (three or more blocks per SM) first; then 256 of at most 24
#      (two blocks per SM fill the register file, where 512 threads of 12 would
#      take one block and half of it); then 512 of 13 (the backward: 256
#      of at most 12, then 512 of 12; step 1b, which took 512-thread blocks
#      in clusters of 8 for some backward rows, is gone: below);
#   2. cluster: the smallest power of two whose slice ceil(vecs / c) fits a
#      block; while the clusters are fewer than the SMs (rows x c < SMs),
#      doubled, as long as each thread keeps a vector, so that every SM works;
#   3. vpt = ceil(slice / threads), which fills the block to within one vector
#      per thread; __launch_bounds__ for as many blocks per SM (up to
#      CR_MAX_BLOCKS_PER_SM) as the register model allows:
#      CR_REGISTERS_PER_VECTOR x vpt + CR_OTHER_REGISTERS, at least
#      CR_MIN_REGISTERS, rounded up to 8 (tests/test_loader.py compiles the
#      plans of a grid of shapes and checks ptxas spills nothing);
#   4. the loads' L2 policy: evict-last (LOAD_KEEP), or evict-first (.cs)
#      for fewer rows than SMs.
#      H200, 2026-12-01 (notes/tune-runs/2026-12-01-policies-p*.txt, float32
#      softmax ÷ copy, evict-last / evict-first): 528-16384 rows of
#      20000-151936 columns 1.00-1.14 / 1.09-1.20 (16384 x 32000 1.00 /
#      1.09, 4096 x 100003 1.10 / 1.19,
#      4096 x 151936 1.11-1.12 / 1.17-1.18); 32 rows 0.88-1.41 / 0.84-1.27;
#      132 rows within 2 % but for 16 x 256 x 24 x 2 (132 x 393216, 1.27 /
#      1.22) and 1056 x 262144 at 16 x 256 x 16 x 2 (1.31 / 1.27).  Skipping
#      L1 alone (ld.global.nc.L1::no_allocate, with no L2 hint or with
#      evict-first) ran as evict-first did: the L2 policy is what counts.
#      Clusters of 16 blocks of 256 threads at two per SM loaded evict-first
#      too, and float32 clusters of 16 whose 256-thread blocks left an SM
#      fewer than 768 threads took 384-thread blocks (step 3b), until the
#      relaxed cluster-barrier arrival (fc28a1e) turned both round (twenty-
#      ninth session, notes/tune-runs/2026-12-03-cluster-row-everywhere-p81.txt,
#      float32 softmax ÷ copy, 256 evict-last / evict-first / 384 evict-last):
#      132-1056 x 262144 1.04-1.12 / 1.07-1.12 / 1.06-1.15; x 300000
#      1.04-1.08 / 1.07-1.10 / 1.04-1.08; x 393216 1.03-1.08 / 1.08-1.11 /
#      1.17-1.20; 8192 x 393216 log_softmax 1.040 / 1.083; half log_softmax
#      1056-4096 x 786432 1.05-1.06 / 1.09-1.10.
# Step 1b (float32 backward, removed in the thirtieth session): where 256-thread
# blocks needed a cluster of 16 and 512-thread blocks held the row in a cluster
# of 8, the latter.  H200, 2026-12-01 (notes/tune-runs/2026-12-01-cluster-row-
# p15.txt, ÷ torch.add, back to back): 4096 x 151936 softmax backward 8 x 512 x
# 10 x 1 1.08 against 16 x 256 x 10 x 2's 1.12.  Since the relaxed cluster-
# barrier arrival (fc28a1e) the clusters of 16 at two blocks per SM run ahead
# (notes/tune-runs/2026-12-03-register-slot-p83.txt and -backward-clusters-
# p84.txt, H200, 2026-12-03, ÷ torch.add, 16 x 256 against 8 x 512): 4096 x
# 151936 0.999-1.000 against 1.005-1.008 (log_softmax 1.004 against 1.009),
# 1056 x 151936 0.91 against 0.92, 132 and 32 x 151936 1.06-1.07 and 1.23-1.25
# against 1.11-1.12 and 1.30, 4096 x 196608 1.013 against 1.018, 528 x 196608
# log_softmax 1.02-1.03 against 1.04-1.05, 4096 x 100000 1.048 against 1.070;
# level at 128256 (4096 rows: 1.011 against 1.004-1.007, log_softmax 1.002
# against 1.003; 1056 rows 1.017-1.021 against 1.016-1.018).
CR_BLOCK_SHAPES = {  # (arrays, element size) -> (threads, most vectors per thread), in order of preference
    (1, 4): ((256, 13), (256, 24), (512, 13)),
    (1, 2): ((256, 13), (256, 24), (512, 13)),
    (2, 4): ((256, 12), (512, 12)),
    (2, 2): ((256, 6), (512, 6)),
}
CR_REGISTERS_PER_VECTOR = {(1, 4): 4, (1, 2): 4, (2, 4): 8, (2, 2): 12}  # halves' dy held widened
# ptxas (NVRTC 12.9, sm_90), the most registers a plan used
# without spills: float forward 4 v + 22 (10 vectors 62, 13 vectors 74, 24
# vectors 122 at two blocks); halves' forward 4 v + 32 (bfloat16 log_softmax:
# 9 vectors spill at 64); float backward 8 v + 24 (softmax), + 32 (log_softmax: 5
# vectors spill at 64); halves' backward 12 v + 40 (4 vectors spill at 80, 7
# at 128); at least 32 registers forward, 48 backward (one float
# log_softmax vector spilled at 40); 8 more for a cluster of one block (13
# float vectors spilled at 80, 4 of bfloat16 log_softmax at 48).
# benchmarks/cluster_row_registers.py compiles every block shape and vector count at the
# model's blocks per SM for clusters of 1 and 16, every dtype and op.
CR_OTHER_REGISTERS = {(1, 4): 24, (1, 2): 32, (2, 4): 32, (2, 2): 40}
CR_MIN_REGISTERS = {1: 32, 2: 48}  # by arrays
CR_ONE_BLOCK_REGISTERS = 8
CR_MAX_BLOCKS_PER_SM = 8
MAX_GRID_X, MAX_GRID_Y = 2**31 - 1, 65535  # CUDA's limits on a grid's x and y dimensions


@dataclass(frozen=True)
class RowClusterPlan:
    cluster: int  # thread blocks per row (a power of two, at most 16)
    threads: int
    vpt: int  # 16-byte vectors per thread (of each array)
    blocks_per_sm: int  # what __launch_bounds__ sizes the registers for
    stream_loads: bool = False  # the loads evict-first (.cs) rather than evict-last: see cluster_row_plan
    smem_bytes: int = 0  # no dynamic shared memory

    def __post_init__(self):
        _check_cluster_and_threads(self.cluster, self.threads)
        if min(self.vpt, self.blocks_per_sm) < 1:
            raise ValueError(f"vpt and blocks_per_sm must be positive: {self}")

    @property
    def capacity_vecs(self) -> int:
        return self.cluster * self.threads * self.vpt

    @property
    def cluster_dims(self) -> int:
        """The blocks of the hardware cluster it launches."""
        return self.cluster

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        return {"CR_CLUSTER": self.cluster, "CR_THREADS": self.threads, "CR_VPT": self.vpt,
                "CR_BLOCKS_PER_SM": self.blocks_per_sm} | ({"CR_STREAM_LOADS": 1} if self.stream_loads else {})

    def label(self) -> str:
        return f"{self.cluster}x{self.threads}x{self.vpt}x{self.blocks_per_sm}" + ("s" if self.stream_loads else "")


def cluster_row_blocks_per_sm(threads: int, vpt: int, arrays: int, itemsize: int, cluster: int) -> int:
    registers = CR_REGISTERS_PER_VECTOR[arrays, itemsize] * vpt + CR_OTHER_REGISTERS[arrays, itemsize]
    registers = max(CR_MIN_REGISTERS[arrays], registers + (CR_ONE_BLOCK_REGISTERS if cluster == 1 else 0))
    registers = -(-registers // 8) * 8
    return max(1, min(CR_MAX_BLOCKS_PER_SM, REGISTERS_PER_SM // (threads * registers)))


def cluster_row_plan(cols: int, dev: DeviceInfo, rows: int = 1 << 20, itemsize: int = ITEMSIZE,
                     arrays: int = 1) -> RowClusterPlan | None:
    """cluster_row's plan (the rule above), or None where no cluster holds the row."""
    if dev.compute_capability < 90:
        return None
    vecs = _row_vecs(cols, itemsize)
    for threads, most_vpt in CR_BLOCK_SHAPES[arrays, itemsize]:
        cluster = next((c for c in (1, 2, 4, 8, 16) if c <= MAX_CLUSTER and -(-vecs // c) <= threads * most_vpt), None)
        if cluster is not None:
            break
    else:
        return None
    while rows * cluster < dev.sm_count and 2 * cluster <= MAX_CLUSTER and vecs // (2 * cluster) >= threads:
        cluster *= 2
    vpt = -(-(-(-vecs // cluster)) // threads)
    blocks_per_sm = cluster_row_blocks_per_sm(threads, vpt, arrays, itemsize, cluster)
    return RowClusterPlan(cluster, threads, vpt, blocks_per_sm, arrays == 1 and rows < dev.sm_count)


def _cluster_row_limit(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> int:
    """The longest row cluster_row holds: the largest cluster of its largest full blocks."""
    arrays = 2 if op in BACKWARD_OPS else 1
    most = max(t * v for t, v in CR_BLOCK_SHAPES[arrays, DTYPES[dtype]])
    return MAX_CLUSTER * most * VECTOR_BYTES // DTYPES[dtype]


def _prepare_cluster_row(shape: Shape, dev: DeviceInfo, plan: RowClusterPlan | None = None) -> Launcher:
    arrays = 2 if shape.backward else 1
    plan = plan or cluster_row_plan(shape.cols, dev, shape.rows, shape.itemsize, arrays)
    if plan is None or _row_vecs(shape.cols, shape.itemsize) > plan.capacity_vecs:
        raise CannotRun(f"variant 'cluster_row': {plan or 'no plan'} does not hold rows of {shape.cols} "
                        f"{shape.dtype} elements on {dev.name}")
    try:
        kernel = _cluster_kernel("cluster_row.cu", plan, dev, kernel_defines(shape.dtype, shape.op))
        resident = resident_groups(plan, kernel, dev)
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant 'cluster_row': {dev.name} cannot run {plan}: {e}") from e
    if resident < 1:
        raise CannotRun(f"variant 'cluster_row': no cluster of {plan} can be resident on {dev.name}")
    per_line = min(shape.rows, MAX_GRID_X // plan.cluster)  # rows of a grid line (a cluster each)
    lines = -(-shape.rows // per_line)
    if lines > MAX_GRID_Y:
        raise CannotRun(f"variant 'cluster_row': {shape.rows} rows are more than a grid of {plan} takes")
    return _cluster_launcher(lambda c, d: kernel, plan, shape, dev, per_line, "cluster_row", lines)


# Rows held in registers by single_read_warp: a block of `warps` warps per row
# (SR_ROW_WARPS), each lane holding as many vectors as the row needs (SR_WARP_VPT):
# warp_row_plan, the fewest warps (a power of two, at most WARP_ROW_MAX_WARPS)
# whose lanes hold the row in at most WARP_ROW_MAX_VPT vectors (the halves'
# log_softmax: WARP_ROW_HALVES_LOG_VPT, past which ptxas (NVRTC 13.0) spills 152
# bytes), for forward rows of up to WARP_ROWS_BYTES; the halves' softmax is
# built wide (8 registers a vector, one exponential an element) up to
# WARP_ROW_WIDE_VPT, packed past it (4 registers a vector, two exponentials).
# Built for fewer vectors, the kernel keeps fewer registers and so more warps
# per SM, and loads no masked vectors.  H200, 2026-12-02, ÷ copy, ~1 GiB of
# rows (notes/tune-runs/2026-12-02-short-halves-p40.txt, -short-rows-p41.txt,
# -float-warp-p42.txt, -row-warps-p45.txt):
# - one warp: 524288 x 1024 bf16 softmax 0.98 at 4 vectors a lane against 1.33
#   at 8 (75 registers against 105), log_softmax 1.06 against 1.34, fp16
#   softmax 0.98 against 1.32; 524288 x 512 float32 0.99 against 1.09; bf16
#   131072 x 4096 softmax 0.99 at 16 packed vectors against three_pass's 1.29;
#   float32 1100, 1536 and 2048 columns (9, 12 and 16 vectors) 0.98-0.99
#   against three_pass's 1.56, 1.31 and 1.09 (at 1056 rows, in L2, level but
#   for 1100 columns: 0.80 against 0.62, a run of ~4 us);
# - the halves' log_softmax: at 3000 columns one warp of 12 vectors (16 bytes
#   spilled) 1.00 against two warps of 6 1.09; at 4096 one warp of 16 (152
#   spilled) 1.16 against two of 8 0.99; bf16 8192 two warps of 16 1.13
#   against four of 8 1.00;
# - two and four warps, float32 2049 and 2600 columns 0.97-0.98 against
#   three_pass's 1.15 and cluster_row's 1.08; at 3000 level with cluster_row
#   (1.00), at 4096 and 5000 behind it (0.98-0.99 against 0.97); bf16 4097-8192
#   softmax 1.16, 1.04, 0.99, 1.00 (4097, 4800, 6000, 8192) against auto's
#   1.69, 1.63, 1.36, 1.19, log_softmax 1.03, 0.99, 1.01, 1.00 against 1.66,
#   1.52, 1.34, 1.13; 12000 and 16384 at four warps 0.99 and 1.01 against
#   cluster_row's and single_read's 1.08 (eight warps: 1.23, 1.13).
WARP_ROW_WIDE_VPT = 8
WARP_ROW_MAX_VPT = 16
WARP_ROW_HALVES_LOG_VPT = 12
WARP_ROW_MAX_WARPS = 4
WARP_ROWS_BYTES = {4: 12 << 10, 2: 32 << 10}  # by element size


def warp_row_plan(cols: int, itemsize: int = ITEMSIZE, op: str = "softmax") -> tuple[int, int] | None:
    """single_read_warp's (warps a row, vectors a lane) for forward rows of `cols` elements
    of `itemsize` bytes, the row held at any alignment; None where it takes no such rows."""
    if op not in OPS or cols * itemsize > WARP_ROWS_BYTES[itemsize]:
        return None
    most = WARP_ROW_HALVES_LOG_VPT if itemsize != ITEMSIZE and op == "log_softmax" else WARP_ROW_MAX_VPT
    vecs, warps = _row_vecs(cols, itemsize), 1
    while 32 * warps * most < vecs:
        warps *= 2
    return (warps, -(-vecs // (32 * warps))) if warps <= WARP_ROW_MAX_WARPS else None


# The configurations derived on an H200 for representative row lengths: the
# builds that the compile checks (tests, `softmax-lab info`) cover.
_H200 = DeviceInfo(0, "NVIDIA H200", 90, 132, 60 * 2**20, 232448, 233472)
REPRESENTATIVE_COLS = (1025, 2048, 4096, 8191, 16384, 32000, 50257, 65536, 100003, 128256, 151936, 262144,
                       393216, 500000, 786432)
SINGLE_READ_CONFIGS = tuple(sorted({single_read_config(c, _H200, rows) for c in REPRESENTATIVE_COLS
                                    for rows in (32, 132, 4096, 1 << 20)}, key=lambda c: c.capacity_vecs))


def _cluster_launcher(make_kernel: Callable, config, shape: Shape, dev: DeviceInfo, groups: int | None,
                      name: str, lines: int = 1) -> Launcher:
    """A persistent launch of as many clusters as can be resident at once
    (`groups` clusters where given, `lines` grid lines of them).  A
    device that refuses the configuration (its cluster size, its shared memory,
    no cluster resident: a small part, a MIG slice, a busy device) is CannotRun,
    so that auto falls back to the next variant."""
    try:
        kernel = make_kernel(config, dev)
        groups = min(shape.rows, groups or resident_groups(config, kernel, dev))
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant {name!r}: {dev.name} cannot run {config}: {e}") from e
    if groups < 1:
        raise CannotRun(f"variant {name!r}: no cluster of {config} can be resident on {dev.name}")
    # The backward kernels take (y, dy, dx, rows, n, ld_y, ld_dy, ld_dx): (x, g, y, *scalars).
    return _prepared_launcher(kernel.kernel, (groups * config.cluster, lines), (config.threads,), shape.scalars(),
                              shape.backward, config.smem_bytes)


def _prepare_single_read(shape: Shape, dev: DeviceInfo, config: ClusterConfig | None = None,
                         groups: int | None = None) -> Launcher:
    if shape.backward:
        return _prepare_single_read_backward(shape, dev, config, groups)
    defines = kernel_defines(shape.dtype, shape.op)
    warp_plan = warp_row_plan(shape.cols, shape.itemsize, shape.op)
    if config is None and warp_plan is not None:
        warps, vpt = warp_plan
        wide = {"SR_WIDE": 1} if holds_wide(shape.dtype, shape.op) and vpt <= WARP_ROW_WIDE_VPT else {}
        build = {"SR_WARP_VPT": vpt} | ({"SR_ROW_WARPS": warps} if warps > 1 else {}) | defines | wide
        function = loader.get_kernel("single_read.cu", "single_read_warp", build, device_id=dev.id).kernel
        return _prepared_launcher(function, (min(shape.rows, 2**31 - 1),), (32 * warps,), shape.scalars(), False)
    config = config or single_read_plan(shape.cols, dev, shape.rows, shape.dtype, shape.op)
    if config is None:
        raise CannotRun(f"variant 'single_read' holds rows of at most "
                        f"{_single_read_max_cols(dev, shape.dtype, shape.op)} {shape.dtype} elements on {dev.name}; "
                        f"got {shape.cols}")
    if config.wide and not holds_wide(shape.dtype, shape.op):
        raise CannotRun(f"variant 'single_read': {config} is a wide plan, for float16 or bfloat16 softmax only; "
                        f"got {shape.dtype} {shape.op}")
    if _row_vecs(shape.cols, shape.itemsize) > config.capacity_vecs or \
            _block_smem(config.threads, config.vpt, config.stages) + SMEM_RESERVED > dev.smem_optin_bytes:
        raise CannotRun(f"variant 'single_read': {config} does not hold rows of {shape.cols} on {dev.name}")
    if _registers_needed(config.vpt, config.cluster, shape.itemsize, 1, config.wide) > \
            _register_budget(config.threads, config.blocks_per_sm):
        raise CannotRun(f"variant 'single_read': {config} exceeds the register budget for {shape.dtype}")
    config = line_shifted(config, shape, dev)
    launcher = _memory_merge_launcher if config.memory_merge else _cluster_launcher
    return launcher(lambda c, d: single_read_kernel(c, d, shape.dtype, shape.op), config, shape, dev, groups,
                    "single_read")


# The line shift (single_read.cu, SR_LINE_SHIFT): a bulk copy whose source and
# shared-memory destination sit at different offsets in a 128-byte line is
# slow.  Where some slice's source does not start on a line (rows whose
# length or start is not a multiple of 128 bytes, or slices that are not),
# each slice goes into its stage at its source's offset in a line.  H200,
# 2026-12-01 (notes/tune-runs/2026-12-01-policies-p2.txt and -p3.txt, 4096
# rows, float32 softmax ÷ copy, the plan without and with the shift):
# 100004 1.31 / 1.18, 128259 1.14-1.16 /
# 1.13, 151939 1.14 / 1.10, 200003 1.25 / 1.15, 262147 1.18 / 1.13, 300001
# 1.42 / 1.11; rows on lines keep the plain build (128256 1.08 / 1.10).
# Float32 plans of MAX_VPT vectors per thread keep theirs: with the shift
# ptxas spilled 36 bytes at 8 x 512 x 24 (4096 x 393215: 1.11 without, 1.20
# with), the only spill over the representative plans of every dtype; so do
# the backward's of MAX_VPT / 2 vector pairs (log_softmax's 8 x 512 x 12
# spilled 16 bytes with it).  The backward shifts y's and dy's slices each
# by its own source's offset: both its rows must be on lines to keep the
# plain build.
def line_shifted(config: ClusterConfig, shape: Shape, dev: DeviceInfo) -> ClusterConfig:
    """config with the line shift where the shape's slices need it and the block still fits."""
    if config.line_shift or (shape.itemsize == ITEMSIZE and config.vpt * config.arrays >= MAX_VPT):
        return config
    per_block = memory_merge_slice(config, shape) if config.memory_merge else \
        -(-(shape.cols * shape.itemsize // VECTOR_BYTES) // config.cluster)
    copied = ((shape.x_offset, shape.ld_x),) * (not config.y_direct) + \
        ((shape.g_offset, shape.ld_g),) * (config.arrays == 2)  # the arrays the bulk copies bring
    on_lines = all(_rows_start_on(LINE_BYTES, shape, offset, ld) for offset, ld in copied)
    if on_lines and (config.cluster == 1 or per_block % LINE_VECS == 0):
        return config
    shifted = replace(config, line_shift=True)
    extra = shifted.smem_bytes - config.smem_bytes
    if _block_smem(config.threads, config.vpt, config.stages, config.staged_arrays) + extra > \
            _smem_budget(dev, config.blocks_per_sm):
        return config
    return shifted


def _shares_alignment(shape: Shape) -> bool:
    """Whether every row of dy starts at the same offset mod 16 bytes as its row of y
    (the backward copies dy's slice by the vectors of y's)."""
    lds_agree = shape.rows <= 1 or ((shape.ld_x - shape.ld_g) * shape.itemsize) % VECTOR_BYTES == 0
    return shape.x_offset % VECTOR_BYTES == shape.g_offset % VECTOR_BYTES and lds_agree


# y loaded directly (SRB_Y_DIRECT): log_softmax's dot is the sum of dy alone,
# so its stages can hold dy alone, each thread loading its vectors of y from
# device memory into registers as it moves its dy from the stage; the plan's
# block shape stays (single_read_config, arrays=2), its stages half the size.
# H200, 2026-12-02 (notes/tune-runs/2026-12-02-log-backward-direct-y-p54.txt
# and -p55.txt, log_softmax backward ÷ torch.add, 4096 rows unless said, the
# plan staged / y direct with plain loads, one stage): bf16 151936 1.18-1.19 /
# 1.13 (fp16 1.17-1.18 / 1.11), 128256 1.07 / 1.02-1.03 (fp16 1.08 / 1.03),
# 100003 1.26 / 1.23, 65536 0.99 / 0.96, 50257 1.17 / 1.15, 200003 1.42 /
# 1.40, 2048 x 262144 1.09 / 1.04, 393216 1.13 / 1.11, 1056 x 151936 1.16 /
# 1.10, 528 x 128256 1.18 / 1.13, 132 x 151936 1.71 / 1.63; but a block
# without a cluster lost (bf16 32000, 1 x 512 x 8: 1.09 / 1.10), as did
# float32 (151936 1.05 / 1.11, 128256 1.04 / 1.06, 65536 1.03 / 1.05; 100003
# and 32000 level).  Two stages of dy: 1-3 % ahead of one at 128256-151936
# and few rows, 8-14 % behind on rows off 128-byte lines (100003, 50257,
# 200003), and ptxas spilled 8 bytes at 608 threads; evict-first loads of y
# ran 1-8 % behind plain ones, evict-last level.
Y_DIRECT_MIN_CLUSTER = 2


def single_read_backward_plan(cols: int, dev: DeviceInfo, rows: int = 1 << 20, dtype: str = "float32",
                              op: str = "softmax_backward") -> ClusterConfig | None:
    """single_read's backward plan: single_read_config with y and dy on chip (arrays=2), y
    loaded directly (y_direct) for the halves' log_softmax in clusters of Y_DIRECT_MIN_CLUSTER
    blocks or more; None where no plan holds the row."""
    config = single_read_config(cols, dev, rows, DTYPES[dtype], arrays=2)
    if config is not None and op == "log_softmax_backward" and DTYPES[dtype] != ITEMSIZE and \
            config.cluster >= Y_DIRECT_MIN_CLUSTER:
        return replace(config, y_direct=True)
    return config


def single_read_backward_kernel(config: ClusterConfig, dev: DeviceInfo, dtype: str = "float32",
                                op: str = "softmax_backward") -> cupy.RawKernel:
    return _cluster_kernel("single_read_backward.cu", config, dev, kernel_defines(dtype, op))


def _prepare_single_read_backward(shape: Shape, dev: DeviceInfo, config: ClusterConfig | None = None,
                                  groups: int | None = None) -> Launcher:
    """single_read_backward.cu: y and dy of a row on chip across a cluster, each read once.
    The plan: single_read_backward_plan (single_read's rule with y and dy on chip, arrays=2;
    y loaded directly for the halves' log_softmax).  Rows of dy that do
    not share y's 16-byte alignment are CannotRun (auto then takes two_pass)."""
    if not _shares_alignment(shape):
        raise CannotRun(f"variant 'single_read': dy does not share y's 16-byte alignment on every row "
                        f"(offsets {shape.x_offset} and {shape.g_offset} bytes, row strides {shape.ld_x} and "
                        f"{shape.ld_g} elements); its backward copies both by the same 16-byte vectors")
    config = config or single_read_backward_plan(shape.cols, dev, shape.rows, shape.dtype, shape.op)
    if config is None:
        raise CannotRun(f"variant 'single_read' holds backward rows of at most "
                        f"{_single_read_limit(dev, shape.dtype, shape.op)} {shape.dtype} elements on {dev.name}; "
                        f"got {shape.cols}")
    if config.arrays != 2:
        raise CannotRun(f"variant 'single_read': {config} is a forward plan; the backward's holds y and dy (arrays=2)")
    if config.y_direct and shape.op != "log_softmax_backward":
        raise CannotRun(f"variant 'single_read': {config} loads y directly, which only log_softmax's backward may "
                        f"(its dot is the sum of dy); got {shape.op}")
    if _row_vecs(shape.cols, shape.itemsize) > config.capacity_vecs or \
            _block_smem(config.threads, config.vpt, config.stages, config.staged_arrays) + SMEM_RESERVED > \
            dev.smem_optin_bytes:
        raise CannotRun(f"variant 'single_read': {config} does not hold backward rows of {shape.cols} on {dev.name}")
    if _registers_needed(config.vpt, config.cluster, shape.itemsize, 2) > \
            _register_budget(config.threads, config.blocks_per_sm):
        raise CannotRun(f"variant 'single_read': {config} exceeds the register budget for {shape.dtype}")
    config = line_shifted(config, shape, dev)
    return _cluster_launcher(lambda c, d: single_read_backward_kernel(c, d, shape.dtype, shape.op), config, shape,
                             dev, groups, "single_read")


def _single_read_limit(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax", wide: bool = False) -> int:
    """The longest row of `dtype` single_read holds on `dev`: the largest cluster,
    the largest slice a block holds in registers (within its shared memory);
    16-byte vectors, so twice as many halves as floats.  The backward holds y and
    dy: about half the forward's row.  wide: the longest row of halves a wide plan
    holds (single_read_plan takes the packed one past it; the limit is the packed one)."""
    return MAX_CLUSTER * _single_read_block_vecs(dev, op, wide) * VECTOR_BYTES // DTYPES[dtype]


def _single_read_block_vecs(dev: DeviceInfo, op: str = "softmax", wide: bool = False) -> int:
    """The most 16-byte vectors (of each array) one single_read block holds, one block per SM."""
    arrays = 2 if op in BACKWARD_OPS else 1
    return max((t * min(_max_vpt(t, 1, 2, ITEMSIZE, arrays, wide),
                        _smem_budget(dev, 1) * 2 // (t * (2 * VECTOR_BYTES * arrays + 1)))
                for t in range(MIN_THREADS_PER_SM, 1025, 32)), default=0)


def _single_read_max_cols(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> int:
    """The longest row single_read runs: the forward ops past a cluster's limit in a
    memory-merged group of up to one block on every SM; the backward ops within a cluster."""
    if op in BACKWARD_OPS:
        return _single_read_limit(dev, dtype, op)
    groups_limit = min(dev.sm_count, MIN_THREADS_PER_SM) * _single_read_block_vecs(dev, op) * VECTOR_BYTES
    return max(_single_read_limit(dev, dtype, op), groups_limit // DTYPES[dtype])


# ------------------------------------------------------------------ long rows
# long_row: rows longer than single_read holds.  A cluster per row; each block
# keeps the first LONG_ROW_THREADS x smem_vpt vectors of its slice in shared
# memory and the next LONG_ROW_THREADS x LONG_ROW_VPT in registers, and reads
# the rest twice (the second time mostly from L2).  The cluster size: the one
# with the least estimated time (long_row_cost).
LONG_ROW_THREADS_PER_SM = 512
LONG_ROW_VPT = 12  # the register part: 12 + LONG_ROW_UNROLL vectors in flight compile without spills at 128 registers
LONG_ROW_UNROLL = 4


@dataclass(frozen=True)
class LongRowConfig:
    cluster: int
    threads: int
    vpt: int  # vectors per thread in registers
    smem_vpt: int  # vectors per thread in shared memory
    unroll: int = LONG_ROW_UNROLL
    blocks_per_sm: int = 1

    def __post_init__(self):
        _check_cluster_and_threads(self.cluster, self.threads)
        if self.vpt < 0 or self.smem_vpt < 1 or self.unroll < 1 or self.blocks_per_sm < 1:
            raise ValueError(f"sizes must be positive: {self}")
        if 4 * (self.vpt + self.unroll) + OTHER_REGISTERS > _register_budget(self.threads, self.blocks_per_sm):
            raise ValueError(f"{self}: the register part exceeds the register budget")

    @property
    def on_chip_vecs(self) -> int:
        return self.cluster * self.threads * (self.vpt + self.smem_vpt)

    @property
    def cluster_dims(self) -> int:
        """The blocks of the hardware cluster it launches."""
        return self.cluster

    @property
    def smem_bytes(self) -> int:
        return self.threads * self.smem_vpt * VECTOR_BYTES

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        d = {"LR_CLUSTER": self.cluster, "LR_THREADS": self.threads, "LR_VPT": self.vpt,
             "LR_SMEM_VPT": self.smem_vpt, "LR_UNROLL": self.unroll, "LR_BLOCKS_PER_SM": self.blocks_per_sm}
        if dev is not None:
            d["LR_SMEM_LIMIT"] = dev.smem_optin_bytes
        return d

    def label(self) -> str:
        return f"{self.cluster}x{self.threads}x{self.vpt}+{self.smem_vpt}x{self.blocks_per_sm}"


def long_row_candidates(dev: DeviceInfo) -> list[LongRowConfig]:
    found = []
    for blocks_per_sm in (1, 2):
        threads = LONG_ROW_THREADS_PER_SM // blocks_per_sm
        smem_vpt = _smem_budget(dev, blocks_per_sm) // (threads * VECTOR_BYTES)
        if smem_vpt >= 1:
            found += [LongRowConfig(c, threads, LONG_ROW_VPT, smem_vpt, blocks_per_sm=blocks_per_sm)
                      for c in (4, 8, 16) if c <= MAX_CLUSTER]
    return found


def long_row_cost(config: LongRowConfig, rows: int, cols: int, dev: DeviceInfo, groups: int | None = None) -> float:
    """Estimated time, in vectors moved by one block: rounds x (slice + the
    re-read part at its cost) x blocks per SM.  A re-read costs REREAD_L2_COST
    where it hits L2 and a full read where it misses; it hits in the share of
    half the L2 that the re-read parts of all resident clusters take.  One block
    per SM runs its loads and stores one after the other (ONE_BLOCK_COST)."""
    vecs = _row_vecs(cols)
    per_block = -(-vecs // config.cluster)
    reread = max(0, per_block - config.on_chip_vecs // config.cluster)
    g = groups or estimated_groups(config, dev)
    in_flight = g * config.cluster * reread * VECTOR_BYTES
    hit = min(1.0, dev.l2_bytes / 2 / in_flight) if in_flight else 1.0
    reread_cost = REREAD_L2_COST * hit + (1 - hit)
    rounds = -(-rows // g) + 1
    serial = ONE_BLOCK_COST if config.blocks_per_sm == 1 else 1.0
    return (rounds * (per_block + reread_cost * reread) * config.blocks_per_sm * serial
            * (1 + CLUSTER_COST[config.cluster]))


REREAD_L2_COST = 0.25  # a re-read served by L2, in reads from device memory
ONE_BLOCK_COST = 1.5  # run5: one block per SM ran 1.65-1.9 x copy where the traffic alone says 1.0-1.3


def long_row_config(cols: int, dev: DeviceInfo, rows: int = 1 << 20) -> LongRowConfig | None:
    return min(long_row_candidates(dev), key=lambda c: long_row_cost(c, rows, cols, dev), default=None)


def long_row_kernel(config: LongRowConfig, dev: DeviceInfo) -> cupy.RawKernel:
    return _cluster_kernel("long_row.cu", config, dev)


def _prepare_long_row(shape: Shape, dev: DeviceInfo, config: LongRowConfig | None = None,
                      groups: int | None = None) -> Launcher:
    config = config or long_row_config(shape.cols, dev, shape.rows)
    if config is None or config.smem_bytes + SMEM_RESERVED > dev.smem_optin_bytes:
        raise CannotRun(f"variant 'long_row': {dev.name} has too little shared memory per block for {config}")
    return _cluster_launcher(long_row_kernel, config, shape, dev, groups, "long_row")


# --------------------------------------------------------------- the registry
@dataclass(frozen=True)
class Variant:
    name: str
    source: str  # file in kernels/
    entries: tuple[str, ...]
    reads: int  # passes over x in device memory
    writes: int  # passes over y
    min_compute_capability: int
    summary: str
    launch_rule: str
    prepare_launch: Callable[..., Launcher] = field(repr=False)
    # max_cols(dev, dtype="float32", op="softmax"): the longest row it holds
    max_cols: Callable[..., float] = field(default=lambda dev, dtype="float32", op="softmax": math.inf, repr=False)
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

    def prepare(self, shape: Shape, dev: DeviceInfo, **knobs) -> Launcher:
        """The launcher for `shape` on `dev`; CannotRun if this variant cannot run it there.
        `knobs` (threads, config, ...) override the launch rule, for tuning."""
        reason = self.unsupported_reason(shape.cols, dev, shape.dtype, shape.op)
        if reason:
            raise CannotRun(reason)
        return self.prepare_launch(shape, dev, **knobs)


_ALL = (
    Variant(
        name="three_pass",
        source="three_pass.cu",
        entries=("three_pass",),
        reads=3, writes=1, min_compute_capability=0,
        summary="max pass, sum-of-exp pass, write pass; one block per row",
        launch_rule="one block per row; threads by row length " + str(BLOCK_THREADS_BY_COLS),
        prepare_launch=_prepare_block_per_row("three_pass", "three_pass.cu"),
        no_backward=("softmax backward has no max pass, so its passes are two_pass's (the dot, then the write); "
                     "use two_pass"),
    ),
    Variant(
        name="two_pass",
        source="two_pass.cu",
        entries=("two_pass",),
        reads=2, writes=1, min_compute_capability=0,
        summary="online (max, rescaled sum) in one read, then the write pass; one block per row",
        launch_rule="one block per row; threads by row length " + str(BLOCK_THREADS_BY_COLS),
        prepare_launch=_prepare_block_per_row("two_pass", "two_pass.cu"),
        ops=ALL_OPS,  # backward: the row's dot, then the write pass
    ),
    Variant(
        name="multi_block",
        source="multi_block.cu",
        entries=("multi_block_partials", "multi_block_combine", "multi_block_write"),
        reads=2, writes=1, min_compute_capability=0,
        summary="a row split over blocks: per-chunk online partials, a fixed-order combine, the write pass",
        launch_rule=f"{MULTI_BLOCK_CHUNK_VECS} 16-byte vectors per block and row, {MULTI_BLOCK_THREADS} threads, three launches",
        prepare_launch=_prepare_multi_block,
        ops=ALL_OPS,  # backward: per-chunk partial dots, a fixed-order sum, the write pass
    ),
    Variant(
        name="multi_block_l2",
        source="multi_block_l2.cu",
        entries=("multi_block_l2",),
        reads=1, writes=1, min_compute_capability=70,  # reads: from device memory, where L2 holds the lag
        summary=("a row split over blocks in one persistent launch: per-chunk partials, then each chunk "
                 "written after a second read served by L2"),
        launch_rule=("resident blocks taking (read, write) chunk items in ticket order, (threads, vectors per "
                     f"thread, blocks per SM) {MBL2_SHAPES[('forward', 4)]} for fp32 (MBL2_SHAPES), "
                     "lag = chunks per row + grid"),
        prepare_launch=_prepare_multi_block_l2,
        ops=ALL_OPS,  # backward: per-chunk partial dots, then dx after the second read of y and dy
    ),
    Variant(
        name="multi_block_smem",
        source="multi_block_smem.cu",
        entries=("multi_block_smem",),
        reads=1, writes=1, min_compute_capability=90,
        summary=("a row split over blocks in one persistent launch, each chunk held in shared memory from its "
                 "read to its write (past what the GPU's shared memory holds of a row, the rest re-read from L2): "
                 "rows up to twice the GPU's shared memory, read once from device memory"),
        launch_rule=("resident blocks taking chunks of threads x vpt vectors in ticket order into a ring of as "
                     "many slots as shared memory holds (bulk copies); one block per SM of "
                     f"{MBS_SPLIT_THREADS} threads in two groups (one reducing, one writing), vpt in "
                     f"{MBS_SPLIT_VPTS} (the most whose slots hold {MBS_SPLIT_AMPLE_ROWS} rows, else those holding "
                     f"the most), where they hold {MBS_SPLIT_MIN_ROWS} rows (float32 log_softmax "
                     f"{MBS_SPLIT_MIN_ROWS_LOG}), else of "
                     f"{MBS_THREADS} x {MBS_VPT} in one group; below two rows the split holds half the ring's "
                     f"chunks of a row and takes the rest as companions (read again from L2) where those hold "
                     f"{MBS_COMPANIONS_MIN_ROWS} rows and the rows fill {MBS_COMPANIONS_MIN_RINGS} rings; a chunk "
                     "written once its row is complete (multi_block_smem_block)"),
        prepare_launch=_prepare_multi_block_smem,
        max_cols=_multi_block_smem_max_cols,
        ops=OPS,
        no_backward="its chunks hold one array; the backward's long rows go to multi_block_l2",
    ),
    Variant(
        name="single_read",
        source="single_read.cu",
        entries=("single_read", "single_read_warp"),
        backward_source="single_read_backward.cu",  # entry single_read_backward: y and dy on chip
        reads=1, writes=1, min_compute_capability=90,
        summary=("row held on chip across a thread-block cluster, combined through distributed shared memory "
                 "(past a cluster's reach: across a group of resident blocks, combined through device memory)"),
        launch_rule=(f"forward rows of <= {WARP_ROWS_BYTES[4]} bytes (halves: {WARP_ROWS_BYTES[2]}): a block of 1-"
                     f"{WARP_ROW_MAX_WARPS} warps per row (warp_row_plan); longer: "
                     "a persistent grid of resident "
                     "clusters, configuration derived from rows, row length, element size and device "
                     "(single_read_config); slices placed at their sources' offsets in 128-byte lines where rows "
                     "or slices start off a line (line_shifted); forward rows past a cluster of 16 (or where a "
                     "smaller group pays): a persistent grid of groups of any resident blocks, merged through "
                     "device memory (memory_merge_config); backward: y and dy on chip (single_read_backward_plan; "
                     "the halves' log_softmax stages dy alone and loads y directly)"),
        prepare_launch=_prepare_single_read,
        max_cols=_single_read_max_cols,
        ops=ALL_OPS,  # backward: y and dy of a row on chip (single_read_backward.cu), each read once
    ),
    Variant(
        name="cluster_row",
        source="cluster_row.cu",
        entries=("cluster_row",),
        reads=1, writes=1, min_compute_capability=90,
        summary=("a cluster per row, the row in registers, several blocks per SM and no persistent loop, "
                 "combined through distributed shared memory"),
        launch_rule=("the first block shape of CR_BLOCK_SHAPES (threads, most vectors per thread) whose cluster of 16 "
                     "holds the row; the smallest cluster that holds it, doubled while clusters are fewer than SMs; "
                     "blocks per SM from the register model; loads evict-last, or evict-first for fewer rows than SMs "
                     "(cluster_row_plan)"),
        prepare_launch=_prepare_cluster_row,
        max_cols=_cluster_row_limit,
        ops=ALL_OPS,  # backward: y and dy of a row held, each read once
    ),
    Variant(
        name="long_row",
        source="long_row.cu",
        entries=("long_row",),
        reads=1, writes=1, min_compute_capability=90,
        summary=("rows longer than a cluster holds: a cluster per row, the row in shared memory and registers, "
                 "the rest read twice (the second time mostly from L2)"),
        launch_rule="a persistent grid of resident clusters of 4, 8 or 16 blocks, 512 threads per SM (long_row_config)",
        prepare_launch=_prepare_long_row,
        # float32 softmax only: auto does not pick it (slower than multi_block,
        # runs 5-6), so its halves and log_softmax builds wait for a faster design.
        dtypes=("float32",),
        ops=("softmax",),
    ),
)

_REGISTRY = types.MappingProxyType({v.name: v for v in _ALL})


def variants() -> types.MappingProxyType:
    """Ordered mapping name -> Variant."""
    return _REGISTRY


def get_variant(name: str) -> Variant:
    """The registered variant called `name`; ValueError, listing the known names, for any other."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown variant {name!r}; known: 'auto', {', '.join(map(repr, _REGISTRY))}") from None


# variant="auto": by element size, (longest row in bytes, variants in order
# of preference).  Forward rows of up to 12 KB of floats (3072) and 32 KB of
# halves (16384; log_softmax 24 KB): first a block of warps per row, the row in
# registers (single_read_warp, warp_row_plan; preferences).  Rows up to 16 KB
# stay in L1/L2 between passes, so three_pass moves no more device memory than
# one read there and has the least overhead (but cluster_row takes forward rows
# past the warps', below).  Longer rows go to single_read where the device has it (its
# plan depends on rows, row length, element size and device), and past what a
# cluster holds (or without Hopper) to the two-read algorithms: for floats
# two_pass up to 256 KB rows, then multi_block_l2 (one launch, the second read
# from L2); for halves two_pass measured faster than multi_block up to 393216
# elements (H200, 2026-11-30, ÷ copy: 4096 x 393216 fp16 1.55 against 1.60,
# 4096 x 151936 bf16 1.41 against 1.51, 512 x 100003 1.53 against 1.90), so
# up to 768 KB, then multi_block_l2 (H200, 2026-12-01, ÷ copy,
# notes/tune-runs/2026-12-01-memory-merge-p6.txt: 32-512 x 1048576-4194304
# bfloat16 softmax 1.38-1.60 against multi_block's 1.47-1.69, 1024 x 2097152
# float16 log_softmax 1.28 against 1.44).  Rows past 1.5 MB (393216 floats,
# where single_read needs clusters of 16; 786432 halves, past a cluster) go to
# multi_block_smem first (the chunks held in shared memory: float32 since the
# twenty-second session, halves in its split schedule since probe 69; halves
# whose rows its split does not hold go on to multi_block_l2), then
# multi_block_l2 (H200, 2026-12-01, ÷ copy: 1300 x 500000 1.23-1.45 against
# single_read's 1.56, 1024 x 1048576 1.29 against multi_block's 1.55).  Past these rules,
# single_read goes first wherever its plan is a memory-merged group that pays
# (memory_merge_pays), and is left out where its plan is one that does not.
# long_row, which reads most of a long row once, measured slower than
# multi_block (runs 5 and 6: 1.65-2.0 against 1.55 x copy); auto does not
# pick it.
SINGLE_READ_FLOAT_ROW_BYTES = 393216 * ITEMSIZE
AUTO_RULES = {
    4: ((16384, ("three_pass",)),
        (262144, ("single_read", "two_pass")),
        (SINGLE_READ_FLOAT_ROW_BYTES, ("single_read", "multi_block_l2")),
        (math.inf, ("multi_block_smem", "multi_block_l2", "multi_block"))),
    2: ((16384, ("three_pass",)),
        (786432, ("single_read", "two_pass")),
        (SINGLE_READ_FLOAT_ROW_BYTES, ("single_read", "multi_block_l2", "multi_block")),
        (math.inf, ("multi_block_smem", "single_read", "multi_block_l2", "multi_block"))),
}


# The backward ops by element size, as AUTO_RULES: rows of up to 16 KB (of y
# and of dy) stay in L1/L2 between two_pass's two passes; longer rows go to
# single_read (y and dy on chip, each read once) where they fit and dy shares
# y's 16-byte alignment (else its prepare is CannotRun), then two_pass and
# multi_block as for the forward.  (The 16 KB bound is the forward's, not yet
# measured for the backward.)  Float rows past 768 KB (196608 elements, where
# single_read needs clusters of 16) go to cluster_row up to 1.5 MB, then
# multi_block_l2 (H200, 2026-12-01, ÷ the floor, with cluster_row's pushed
# exchange, notes/tune-runs/2026-12-01-cluster_row-grid.txt: 4096 x 262144
# softmax backward 1.25 against multi_block_l2's 1.28, 4096 x 393216 1.15
# against 1.30; up to 768 KB single_read, line-shifted, goes first since the
# twelfth session: notes/tune-runs/2026-12-01-backward-shift-p21.txt, 4096 x
# 151936 log_softmax backward 1.05 against cluster_row's 1.11; past
# 1.5 MB multi_block_l2: 1024 x 1048576 1.57 against multi_block's 1.67,
# .probe runs); halves keep multi_block (its 1.36 beat
# multi_block_l2's 1.6-1.7 at 2048 x 1048576 bf16 log_softmax backward).
SINGLE_READ_BACKWARD_FLOAT_ROW_BYTES = 196608 * ITEMSIZE
BACKWARD_AUTO_RULES = {
    4: ((16384, ("two_pass",)),
        (262144, ("single_read", "two_pass")),
        (SINGLE_READ_BACKWARD_FLOAT_ROW_BYTES, ("single_read", "multi_block_l2")),
        (SINGLE_READ_FLOAT_ROW_BYTES, ("cluster_row", "multi_block_l2")),
        (math.inf, ("multi_block_l2", "multi_block"))),
    2: ((16384, ("two_pass",)),
        (786432, ("single_read", "two_pass")),
        (math.inf, ("single_read", "multi_block"))),
}


# Variants that run every shape on every device: auto's last resort.
FALLBACKS = ("two_pass", "multi_block")


# cluster_row before the rules above, for forward rows longer than the warps
# take (warp_row_plan) and backward rows longer than
# CLUSTER_ROW_BACKWARD_MIN_ROW_BYTES (three_pass's and two_pass's 16 KB)
# that its 256-thread blocks hold (its first or its wide block shape):
# - float32 forward: at any number of rows;
# - halves' forward: at any number of rows where single_read's plan is a
#   cluster of two or more blocks, or a memory-merged group of cluster_row's
#   cluster and blocks per SM (below); else (single_read holds the row in one
#   block) at CLUSTER_ROW_HALVES_BLOCKS_PER_SM blocks per SM or more
#   (log_softmax only in clusters of at most CLUSTER_ROW_HALVES_ANY_ROWS_CLUSTER,
#   or of CLUSTER_ROW_HALVES_LOG_ALIGNED_CLUSTER on rows that start on 16-byte
#   boundaries), or for at most CLUSTER_ROW_HALVES_ROWS_PER_SM rows per SM, or
#   CLUSTER_ROW_HALVES_BYTES_PER_SM of rows that start on 16-byte boundaries;
# - float32 backward at any number of rows with clusters of at most
#   CLUSTER_ROW_BACKWARD_ANY_ROWS_CLUSTER or on rows that start on 16-byte
#   boundaries, else for up to CLUSTER_ROW_BACKWARD_ROWS_PER_SM rows per SM at
#   two blocks per SM or more (probe 82, H200, 2026-12-03, ÷ torch.add,
#   cluster_row against single_read, both ops: 4096 x 65536-196608 0.99-1.02
#   against 1.03-1.07, 1056 x 151936 1.03 against 1.08-1.09; odd rows, 528 x
#   100003, one block per SM: 1.12 / 1.22 against 1.10 / 1.23; probe 84, odd
#   rows at 16 x 256 x 7 x 2: 132 x 100003 softmax 1.27-1.29 against
#   1.40-1.42, 264 x 100003 log_softmax 1.11 against 1.16-1.17).
# Since its cluster barrier's arrival went relaxed (fc28a1e: 5-12 % faster,
# notes/TUNING.md), cluster_row runs ahead of single_read's clusters wherever
# both hold the row (twenty-ninth session, notes/tune-runs/2026-12-03-cluster-
# row-or-single-read-p80.txt and -everywhere-p81.txt, H200, ÷ copy, cluster_row
# against single_read, 1056-4096 rows): float32 100003-393216 columns
# 0.98-1.05 against 1.03-1.13 (4096 x 151936 0.98 against 1.07; 262144 level
# at 1.03-1.04), bf16 softmax 0.98-1.17 against 1.04-1.28 but 300000 (1.12-1.13
# against 1.11-1.12), fp16 log_softmax 0.98-1.13 against 1.07-1.18 but 1056-2112
# x 200000 (1.09 against 1.07-1.08); the earlier bounds by rows and bytes
# (below, measured before) are gone but where single_read's block holds the
# row alone.
# H200, 2026-12-01, with evict-last loads (notes/tune-runs/2026-12-01-policies-p2.txt
# and -p3.txt, ÷ copy, cluster_row's
# plan against single_read's):
# - float32, clusters of 1-8: 528-16384 rows of 20000-100003 columns
#   1.00-1.12 against 1.07-1.30;
# - float32, clusters of 16: 128256 and 151936 columns 1.15 and 1.12 against
#   1.18 and 1.16 at 528 rows (2.0-2.4 MB per SM), 1.16 and 1.11 against
#   1.13 and 1.10 at 1056 rows (4-5 MB), 1.16 and 1.12 against 1.08 at 4096;
#   262144 columns at 528 rows (4.2 MB) 1.32 against 1.13, at 132 rows 1.22
#   against 1.24;
# - bfloat16 softmax and float16 log_softmax, 4096 x 65536 and 128256
#   (clusters of 4 and 8 at four blocks per SM): 1.05-1.18 against
#   1.13-1.25; but 4096 x 151936 (8 x 256 x 10, three per SM) 1.19-1.31
#   against 1.09-1.18, 4096 x 100003 (4 x 256 x 13, two) 1.43-1.52 against
#   1.18-1.32.
# Half softmax with exp_elem in cluster_row (eighteenth session,
# notes/tune-runs/2026-12-02-cluster-row-halves-p46.txt, -p47.txt, bf16 ÷
# copy, cluster_row's plan against auto's single_read): its exponentials had
# been exp_approx's (six instructions with the subnormal fixup, two an
# element); with exp_elem's FFMA and ex2.approx.ftz it won at four blocks per
# SM whatever the cluster (4096 x 128256 8 x 256 x 8 0.96 against 1.02,
# float16 0.95 against 1.01; 16384 x 128256 1.06 against 1.11; 2048 x 262144
# 1.10 against 1.16; 528 x 262144 1.12 against 1.26; 4096 x 100003 1.16
# against 1.18), at three it won at 1056 x 151936 (2.4 MB per SM, 1.04 against
# 1.12; left to single_read: the bytes-per-SM bound stays 1.5 MiB, as 4096 x
# 50257 at 3.1 MB lost) and at 4096 x 80000 and 180000 (1.11 and 1.13 against
# 1.13 and 1.15) but lost at 4096 x 151936, 300000 and 393216 (1.16, 1.23,
# 1.12 against 1.11, 1.13, 1.10); at two it lost (4096 x 50257 1.27 against
# 0.98).  Clusters doubled to reach four blocks per SM lost everywhere
# (1.23-1.85), as did e held as floats (CR_WIDE, one exponential, half the
# blocks per SM: 1.24-1.79).  The half log_softmax, its sums by exp_elem since
# (p49), kept clusters of at most 4 that session: at four blocks per SM in
# clusters of 8 it won at 4096 x 128256 (1.05 against 1.09) but lost at 4096 x
# 100003 (1.21 against 1.10); the rule by alignment that followed is below.
# Forward rows of 8-16 KB against three_pass (sixteenth session,
# notes/tune-runs/2026-12-02-short-rows-p41.txt, -float-warp-p42.txt, ÷ copy,
# ~1 GiB of rows): cluster_row won from about 9 KB (float32 2300-4096 columns
# 0.98-1.18 against 1.07-1.21; bf16 4800-8192 1.19-1.62 against 1.35-1.78)
# and lost below (float32 2048-2049 1.19-1.31 against 1.09-1.17, bf16 4096-4097
# 1.51-1.93 against 1.29-1.71); the warps (warp_row_plan) now take all of
# these rows of floats up to 12 KB and of halves, ahead of both.
# Float32 clusters of 8 against single_read's whole path (sixteenth session,
# notes/tune-runs/2026-12-02-cluster-row-or-whole-p39.txt, ÷ copy, back to
# back): at three blocks per SM single_read won at 4096 rows (90000 columns
# 1.06 against 1.10, 100003 1.08 against 1.10, 106000 1.07 against 1.08,
# 95003 level at 1.11) and lost or tied at 1056 rows, 3.0-3.4 MB per SM
# (95003 1.17 against 1.10, 106000 1.10 against 1.08, 100003 and 90000
# level); at four blocks per SM (65536-80000 columns) cluster_row won or tied
# at both (4096 x 80000 1.04 against 1.05, 1056 x 80000 1.06 against 1.10).
# The float32 backward (evict-last loads before and since), with the pushed
# exchange (notes/tune-runs/2026-12-01-cluster_row-grid.txt, ÷ torch.add):
# 132 and 1056 rows of 65536-151936 1.06-1.37 against 1.09-1.46; 4096 x 65536
# 1.05 against 1.04; 8192 x 12000 1.01 against 1.08 (...-grid-short.txt).
# Against single_read line-shifted (twelfth session, ...-backward-shift-p21.txt,
# softmax backward ÷ torch.add): at 132 rows cluster_row won at every length
# of 32000-196608 (1.25-1.42 against 1.31-1.47) but 100003 (its one-block
# plan 8 x 512 x 7: 1.58 against 1.44); from 528 rows single_read won or
# tied (528-4096 x 50257-196608: 1.03-1.28 against 1.07-1.48; cluster_row
# 1-2 % ahead only at 32000 and 528 x 65536), hence one row per SM.
# Halves' backward in cluster_row ran 1.98-2.4 (dy held widened: fewer
# vectors per thread), so auto does not take it for them.
# Halves against single_read's plans of two blocks per SM (eleventh session,
# notes/tune-runs/2026-12-01-two-blocks-p13.txt, bf16 ÷ copy): at 4096 rows
# cluster_row's clusters of 8 lost (128256 softmax 1.16 against 1.13, float16
# 1.13 against 1.12; log_softmax level), its clusters of 4 did not (65536
# softmax 1.12 against 1.11, log_softmax 1.05 against 1.09), hence clusters of
# at most CLUSTER_ROW_HALVES_ANY_ROWS_CLUSTER at any number of rows.  With few
# rows (...-p14.txt, softmax / log_softmax) it won at 32-264 rows (132 x 50257
# 1.11 / 1.06 against 1.30 / 1.22, 32 x 100003 1.02 / 0.88 against 1.40 / 1.33,
# 264 x 450000 softmax 1.42 against 1.60; lost 264 x 200003 1.51 / 1.51
# against 1.42 / 1.31), hence CLUSTER_ROW_HALVES_ROWS_PER_SM; past them by
# input bytes, on rows that start on 16-byte boundaries: it won at 1.0 MB per
# SM (528 x 128256, 1.20 against 1.35), lost at 2.4 (1056 x 151936, 1.34 /
# 1.23 against 1.22 / 1.17) and 3.1 (4096 x 50257, 1.53 / 1.42 against 1.24 /
# 1.15), was level at 2.1 (528 x 262144, 1.29 / 1.18 against 1.31 / 1.20),
# hence CLUSTER_ROW_HALVES_BYTES_PER_SM; on odd lengths it lost from 528 rows
# (528 and 1056 x 100003, 1.53 / 1.48 against 1.36 / 1.33), as at 4096 rows
# in the session before (1.43-1.52 against 1.18-1.32).
# Half softmax takes cluster_row at four blocks per SM whatever the cluster
# (eighteenth session, p46-p47); half log_softmax in clusters of 8 there only
# on rows that start on 16 bytes (nineteenth session, notes/tune-runs/
# 2026-12-02-log-rule-mbl2-p50.txt, bf16 ÷ copy, cluster_row against
# single_read): 4096 x 128256 1.06 against 1.10 (fp16 1.04 against 1.09),
# 16384 x 128256 1.06 against 1.10, 1056 x 128256 0.98 against 1.15, 4096 x
# 128000 1.05 against 1.09; odd rows lost (128255 1.11 against 1.09, 128257
# 1.13 against 1.10, 100003 1.21 against 1.10 in p49), clusters of 16 level
# (2048 x 262144 bf16 1.109 against 1.110, fp16 1.117 against 1.104).
# Ahead of single_read's memory-merged group wherever cluster_row's plan is a
# cluster of the group's blocks at the group's blocks per SM, holding as much
# on each SM: the same slices, merged on chip (twenty-fifth session,
# notes/tune-runs/2026-12-02-halves-group-or-cluster-p67.txt, bf16 softmax ÷
# copy: 396-2112 x 786432, cluster_row's 16 x 256 x 24 x 2 1.14-1.17 against
# the group's 16 x 256 x 24 x 2 1.21-1.35).  On the H200 these are the half
# softmax rows of about 689000-786432 columns; where the group is smaller
# than cluster_row's cluster (500000, 600001: 11 and 13 blocks against 16 of
# fewer vectors) the group won but at 396-528 x 500000 (1-2 % behind there).
CLUSTER_ROW_BACKWARD_MIN_ROW_BYTES = 16384
CLUSTER_ROW_HALVES_ANY_ROWS_CLUSTER = 4
CLUSTER_ROW_HALVES_LOG_ALIGNED_CLUSTER = 8
CLUSTER_ROW_HALVES_BLOCKS_PER_SM = 4
CLUSTER_ROW_HALVES_ROWS_PER_SM = 2
CLUSTER_ROW_HALVES_BYTES_PER_SM = 3 << 19
CLUSTER_ROW_BACKWARD_ANY_ROWS_CLUSTER = 2
CLUSTER_ROW_BACKWARD_ROWS_PER_SM = 2


def _cluster_row_first(shape: Shape, dev: DeviceInfo, single_read: ClusterConfig | None) -> bool:
    """Whether auto tries cluster_row first (forward shapes come here past the warps' rows);
    `single_read` is single_read's plan for the forward shape, else None."""
    if shape.backward and (shape.cols * shape.itemsize <= CLUSTER_ROW_BACKWARD_MIN_ROW_BYTES or
                           shape.itemsize != ITEMSIZE):
        return False
    arrays = 2 if shape.backward else 1
    plan = cluster_row_plan(shape.cols, dev, shape.rows, shape.itemsize, arrays)
    shapes = CR_BLOCK_SHAPES[arrays, shape.itemsize]
    if plan is None or not any(plan.threads == t and plan.vpt <= v for t, v in shapes[:2]):
        return False
    if shape.backward:
        return plan.cluster <= CLUSTER_ROW_BACKWARD_ANY_ROWS_CLUSTER or _rows_aligned(shape) or (
            shape.rows <= CLUSTER_ROW_BACKWARD_ROWS_PER_SM * dev.sm_count and plan.blocks_per_sm > 1)
    if shape.itemsize == ITEMSIZE:
        return True
    if single_read is not None:
        if single_read.cluster_dims > 1:
            return True  # a cluster of single_read's (probes 80-81)
        if single_read.memory_merge and (single_read.cluster, single_read.blocks_per_sm) == (
                plan.cluster, plan.blocks_per_sm) and _held_per_sm(plan) >= _held_per_sm(single_read):
            return True  # the group's own blocks, merged through distributed shared memory, not device memory
    if plan.blocks_per_sm >= CLUSTER_ROW_HALVES_BLOCKS_PER_SM and (
            shape.op == "softmax" or plan.cluster <= CLUSTER_ROW_HALVES_ANY_ROWS_CLUSTER or
            (plan.cluster <= CLUSTER_ROW_HALVES_LOG_ALIGNED_CLUSTER and _rows_aligned(shape))):
        return True
    return shape.rows <= CLUSTER_ROW_HALVES_ROWS_PER_SM * dev.sm_count or (
        _rows_aligned(shape) and shape.rows * shape.cols * shape.itemsize <= CLUSTER_ROW_HALVES_BYTES_PER_SM * dev.sm_count)


def _rows_start_on(boundary: int, shape: Shape, offset: int, ld: int) -> bool:
    """Whether every row of an array of `shape` whose pointer sits `offset` bytes past a
    multiple of `boundary`, rows `ld` elements apart, starts on such a multiple."""
    return offset % boundary == 0 and (shape.rows == 1 or ld * shape.itemsize % boundary == 0)


def _rows_aligned(shape: Shape) -> bool:
    """Whether every input row starts on a 16-byte boundary."""
    return _rows_start_on(VECTOR_BYTES, shape, shape.x_offset, shape.ld_x)


def _one_round_of_clusters(plan: ClusterConfig | None, rows: int, dev: DeviceInfo) -> bool:
    """Whether single_read's plan holds `rows` rows in clusters (not a memory-merged group) and
    all of them in one round of resident clusters.  Past a cluster's 786432 halves, such rows go
    to single_read ahead of multi_block_smem (probe 69, H200, bf16 softmax / fp16 log_softmax ÷
    copy, 1-6 rows of 900001-1500001 columns in clusters of 16, 7 resident: 1.17-2.28 against
    1.73-2.80; at 8 rows, two rounds, 1.81-2.34 against 1.62-2.07)."""
    return plan is not None and not plan.memory_merge and rows <= estimated_groups(plan, dev)


def _single_read_forward_plan(shape: Shape, dev: DeviceInfo) -> ClusterConfig | None:
    """single_read's cluster or memory-merged plan for a forward shape past the warps' rows on
    sm_90, else None."""
    if shape.backward or dev.compute_capability < 90 or warp_row_plan(shape.cols, shape.itemsize, shape.op):
        return None
    return single_read_plan(shape.cols, dev, shape.rows, shape.dtype, shape.op)


def preferences(shape: Shape, dev: DeviceInfo) -> tuple[Variant, ...]:
    """variant="auto": the variants to try for this shape on this device, best first.
    The api takes the first whose prepare() does not raise CannotRun."""
    rules = BACKWARD_AUTO_RULES if shape.backward else AUTO_RULES
    names = next(names for limit, names in rules[shape.itemsize] if shape.cols * shape.itemsize <= limit)
    plan = _single_read_forward_plan(shape, dev)
    merged = plan if plan is not None and plan.memory_merge else None
    if "multi_block_smem" in names:
        if not multi_block_smem_leads(shape, dev):
            names = tuple(n for n in names if n != "multi_block_smem")
        elif shape.itemsize != ITEMSIZE and _one_round_of_clusters(plan, shape.rows, dev):
            names = ("single_read",) + tuple(n for n in names if n != "single_read")
    if warp_row_plan(shape.cols, shape.itemsize, shape.op) is not None:
        names = ("single_read",) + names  # a block of warps per row (single_read_warp)
    elif _cluster_row_first(shape, dev, plan) and "cluster_row" not in names:
        names = ("cluster_row",) + names
    if merged is not None:  # single_read first (after cluster_row) where its memory-merged plan pays, else not at all
        pays = memory_merge_pays(merged, shape.rows, dev, shape.itemsize)
        if "multi_block_smem" in names:  # ahead of it in small groups and many rounds only
            pays = pays and shape.itemsize == ITEMSIZE and merged.cluster <= MEMORY_MERGE_OVER_SMEM_GROUP and \
                memory_merge_rounds(merged, shape.rows, dev) >= MEMORY_MERGE_OVER_SMEM_ROUNDS
        first = names[:1] if names[:1] == ("cluster_row",) else ()  # the halves' groups come after it
        names = first + ("single_read",) * pays + tuple(n for n in names[len(first):] if n != "single_read")
    names = names + tuple(n for n in FALLBACKS if n not in names)
    return tuple(_REGISTRY[n] for n in names
                 if _REGISTRY[n].unsupported_reason(shape.cols, dev, shape.dtype, shape.op) is None)


def choose(rows: int, cols: int, dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> Variant:
    """The variant auto would try first for rows x cols contiguous rows (no launch is prepared).
    Raises nothing: two_pass and multi_block run every shape, dtype and op on every device."""
    return preferences(Shape(rows, cols, cols, cols, itemsize=DTYPES[dtype], dtype=dtype, op=op), dev)[0]
