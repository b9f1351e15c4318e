"""The seed's row kernels: one block per row, the row read from device memory on every pass.

three_pass reads a row three times (max, sum of exponentials, write); two_pass twice
(an online max and rescaled sum, then the write).  Rows of up to 16 KB stay in L1/L2
between the passes, so there they move no more device memory than one read."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import loader
from ..device import DeviceInfo
from ..problem import ALL_OPS, Shape, kernel_defines
from .base import Launcher, Variant, one_kernel_launcher
from .resources import MAX_GRID_X

# Threads per block by row length: (largest cols, threads).
BLOCK_THREADS_BY_COLS = ((1024, 128), (4096, 256), (16384, 512), (math.inf, 1024))


@dataclass(frozen=True)
class BlockPerRowPlan:
    threads: int

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        return {}

    def grid(self, rows: int) -> tuple[int]:
        return (min(rows, MAX_GRID_X),)  # blocks loop over rows beyond the grid


def plan(shape: Shape, dev: DeviceInfo) -> BlockPerRowPlan:
    return BlockPerRowPlan(next(t for limit, t in BLOCK_THREADS_BY_COLS if shape.cols <= limit))


def _launch(entry: str):
    def launch(shape: Shape, dev: DeviceInfo, plan: BlockPerRowPlan) -> Launcher:
        function = loader.get_kernel(f"{entry}.cu", entry, kernel_defines(shape.dtype, shape.op), device_id=dev.id)
        return one_kernel_launcher(function.kernel, plan.grid(shape.rows), (plan.threads,), shape.scalars(),
                                   shape.backward)

    return launch


_RULE = "one block per row; threads by row length " + str(BLOCK_THREADS_BY_COLS)

THREE_PASS = Variant(
    name="three_pass", source="three_pass.cu", entries=("three_pass",), reads=3, writes=1, min_compute_capability=0,
    summary="max pass, sum-of-exp pass, write pass; one block per row", launch_rule=_RULE,
    plan=plan, launch=_launch("three_pass"),
    no_backward=("softmax backward has no max pass, so its passes are two_pass's (the dot, then the write); "
                 "use two_pass"),
)
TWO_PASS = Variant(
    name="two_pass", source="two_pass.cu", entries=("two_pass",), reads=2, writes=1, min_compute_capability=0,
    summary="online (max, rescaled sum) in one read, then the write pass; one block per row", launch_rule=_RULE,
    plan=plan, launch=_launch("two_pass"),
    ops=ALL_OPS,  # backward: the row's dot, then the write pass
)
