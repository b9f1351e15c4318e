"""The problem every variant solves: `rows` rows of `cols` elements of one dtype, one op.

The dtypes, ops and reductions are listed here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ITEMSIZE = 4  # float32
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2}  # name -> element size in bytes
OPS = ("softmax", "log_softmax")  # the forward ops
BACKWARD_OPS = ("softmax_backward", "log_softmax_backward")  # dx from (y, dy): see Shape
ALL_OPS = OPS + BACKWARD_OPS
LOSS_OPS = ("cross_entropy", "cross_entropy_grad")  # the lab's loss ops: the loss alone, and with its gradient
REDUCTIONS = ("mean", "sum", "none")  # of a loss over rows (softmax_lab.cross_entropy), as torch's


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
    x_offset: int = 0  # byte offset of the input's data pointer mod 128 bytes
    y_offset: int = 0  # byte offset of the output's data pointer mod 16
    itemsize: int = ITEMSIZE
    dtype: str = "float32"  # a key of DTYPES, of element size itemsize
    op: str = "softmax"  # one of ALL_OPS
    ld_g: int = 0  # backward ops: elements from one dy row to the next
    g_offset: int = 0  # backward ops: byte offset of dy's data pointer mod 128 bytes

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
