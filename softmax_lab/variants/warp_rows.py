"""Short forward rows held in registers by a block of warps per row (kernels/single_read.cu,
entry single_read_warp): the rows the single_read variant takes below a cluster's.

The plan: the fewest warps (a power of two, at most MAX_WARPS) whose lanes hold the row in
at most MAX_VPT vectors (the halves' log_softmax: HALVES_LOG_VPT, past which ptxas spills),
for rows of up to WARP_ROWS_BYTES; the halves' softmax is built wide (8 registers a vector,
one exponential an element) up to WIDE_VPT, packed past it.  Built for fewer vectors, the
kernel keeps fewer registers and so more warps per SM, and loads no masked vectors
(notes/TUNING.md, "Warp rows")."""

from __future__ import annotations

from dataclasses import dataclass

from .. import loader
from ..device import DeviceInfo
from ..problem import DTYPES, ITEMSIZE, OPS, Shape, kernel_defines
from .base import Launcher, one_kernel_launcher
from .resources import MAX_GRID_X, row_vecs

WIDE_VPT = 8
MAX_VPT = 16
HALVES_LOG_VPT = 12
MAX_WARPS = 4
WARP_ROWS_BYTES = {4: 12 << 10, 2: 32 << 10}  # by element size


@dataclass(frozen=True)
class WarpRowPlan:
    warps: int  # warps a row (a block)
    vpt: int  # 16-byte vectors a lane
    wide: bool = False  # halves widened to floats in registers

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        return {"SR_WARP_VPT": self.vpt} | ({"SR_ROW_WARPS": self.warps} if self.warps > 1 else {}) | \
            ({"SR_WIDE": 1} if self.wide else {})


def warps_and_vpt(cols: int, itemsize: int = ITEMSIZE, op: str = "softmax") -> tuple[int, int] | None:
    """(warps a row, vectors a lane) for forward rows of `cols` elements of `itemsize` bytes,
    the row held at any alignment; None where the warps take no such rows."""
    if op not in OPS or cols * itemsize > WARP_ROWS_BYTES[itemsize]:
        return None
    most = HALVES_LOG_VPT if itemsize != ITEMSIZE and op == "log_softmax" else MAX_VPT
    vecs, warps = row_vecs(cols, itemsize), 1
    while 32 * warps * most < vecs:
        warps *= 2
    return (warps, -(-vecs // (32 * warps))) if warps <= MAX_WARPS else None


def plan(shape: Shape) -> WarpRowPlan | None:
    found = warps_and_vpt(shape.cols, shape.itemsize, shape.op)
    if found is None:
        return None
    warps, vpt = found
    return WarpRowPlan(warps, vpt, DTYPES[shape.dtype] == 2 and shape.op == "softmax" and vpt <= WIDE_VPT)


def launch(shape: Shape, dev: DeviceInfo, plan: WarpRowPlan) -> Launcher:
    defines = plan.defines() | kernel_defines(shape.dtype, shape.op)
    function = loader.get_kernel("single_read.cu", "single_read_warp", defines, device_id=dev.id).kernel
    return one_kernel_launcher(function, (min(shape.rows, MAX_GRID_X),), (32 * plan.warps,), shape.scalars(), False)
