"""What every family's plan is sized by: 16-byte vectors, the register file, shared memory,
clusters and grid limits.  Device facts come from DeviceInfo; these are the ones every
sm_70+ part shares."""

from __future__ import annotations

from ..device import DeviceInfo
from ..problem import ITEMSIZE, Shape

VECTOR_BYTES = 16  # every kernel moves 16-byte vectors (4 fp32, 8 fp16/bf16 elements)
LINE_BYTES = 128  # an L2 cache line
LINE_VECS = LINE_BYTES // VECTOR_BYTES
REGISTERS_PER_SM = 65536
MAX_CLUSTER = 16  # Hopper, with the non-portable cluster size allowed
MAX_GRID_X, MAX_GRID_Y = 2**31 - 1, 65535  # CUDA's limits on a grid's x and y dimensions
DRIVER_SMEM = 1024  # shared memory the driver keeps per block


def row_vecs(cols: int, itemsize: int = ITEMSIZE) -> int:
    """The 16-byte vectors a row of `cols` elements spans (at least one): what a plan
    must hold of it, whatever its alignment."""
    return max(1, -(-cols * itemsize // VECTOR_BYTES))


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def check_cluster_and_threads(cluster: int, threads: int) -> None:
    """What every cluster kernel needs: a butterfly-mergeable cluster and whole warps."""
    if not (is_power_of_two(cluster) and cluster <= MAX_CLUSTER):
        raise ValueError(f"cluster {cluster}: the kernel's butterfly merge needs a power of two of at most {MAX_CLUSTER}")
    if not (threads % 32 == 0 and 32 <= threads <= 1024):
        raise ValueError(f"threads {threads}: a multiple of 32, at most 1024")


def register_budget(threads: int, blocks_per_sm: int) -> int:
    """Registers per thread when `blocks_per_sm` blocks of `threads` share an SM:
    its 4 partitions hold 16384 registers each and take the warps in turn;
    allocated 8 at a time, at most 255 (what ptxas caps a kernel at under
    __launch_bounds__(threads, blocks_per_sm))."""
    warps_per_partition = -(-(threads // 32) * blocks_per_sm // 4)
    return min(255, REGISTERS_PER_SM // 4 // (32 * warps_per_partition) // 8 * 8)


def smem_budget(dev: DeviceInfo, blocks_per_sm: int, static_bytes: int) -> int:
    """Dynamic shared memory one block may take when `blocks_per_sm` share an SM, beside the
    driver's reserve and the kernel's `static_bytes`."""
    return min(dev.smem_optin_bytes, dev.smem_per_sm_bytes // blocks_per_sm) - DRIVER_SMEM - static_bytes


def rows_start_on(boundary: int, shape: Shape, offset: int, ld: int) -> bool:
    """Whether every row of an array of `shape` whose pointer sits `offset` bytes past a
    multiple of `boundary`, rows `ld` elements apart, starts on such a multiple."""
    return offset % boundary == 0 and (shape.rows == 1 or ld * shape.itemsize % boundary == 0)


def rows_aligned(shape: Shape) -> bool:
    """Whether every input row starts on a 16-byte boundary."""
    return rows_start_on(VECTOR_BYTES, shape, shape.x_offset, shape.ld_x)
