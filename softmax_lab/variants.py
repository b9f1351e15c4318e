"""The registry: every softmax variant, its kernel file, launch rule, traffic model
and requirements.  Nothing else in softmax_lab knows variant names.

A variant runs on a 2-D problem, a `Shape`: `rows` rows of `cols` float32
elements, row r of the input at x + r * ld_x and of the output at y + r * ld_y
(element strides of 1 within a row).  `Variant.prepare(shape, dev)` does
everything that depends only on the shape and the device (compiling, occupancy
queries, grid sizes) and returns a launcher, `launcher(x_ptr, y_ptr, stream)`,
that only launches; softmax_lab.api caches launchers, so a steady-state call is
a lookup plus a launch.  prepare raises CannotRun where the variant cannot run
the shape on the device.  The launch tables below are the tuning knobs;
notes/TUNING.md says how they were chosen.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field
from collections.abc import Callable

import cupy
import numpy as np

from . import loader
from .device import DeviceInfo, max_active_clusters

ITEMSIZE = 4  # float32


@dataclass(frozen=True)
class Shape:
    """What a launch plan depends on: the row layout and the pointers' alignment."""

    rows: int
    cols: int
    ld_x: int  # elements from one input row to the next
    ld_y: int  # elements from one output row to the next
    x_offset: int = 0  # byte offset of the input's data pointer mod 16
    y_offset: int = 0  # byte offset of the output's data pointer mod 16
    itemsize: int = ITEMSIZE

    def scalars(self):
        return (np.int64(self.rows), np.int64(self.cols), np.int64(self.ld_x), np.int64(self.ld_y))


class CannotRun(ValueError):
    """A variant cannot run this shape on this device (variant="auto" then tries the next)."""


# launcher(x_ptr, y_ptr, stream): one call's launches, everything else resolved.
Launcher = Callable[[int, int, cupy.cuda.Stream], None]


def _ptr(p: int) -> np.uint64:
    return np.uint64(p)


# ------------------------------------------------------------ one block per row
# Threads per block by row length: (largest cols, threads).
BLOCK_THREADS_BY_COLS = ((1024, 128), (4096, 256), (16384, 512), (math.inf, 1024))


def _block_threads(cols: int) -> int:
    return next(t for limit, t in BLOCK_THREADS_BY_COLS if cols <= limit)


def _prepare_block_per_row(entry: str, source: str):
    def prepare(shape: Shape, dev: DeviceInfo, threads: int | None = None) -> Launcher:
        function = loader.get_kernel(source, entry, device_id=dev.id).kernel
        grid = (min(shape.rows, 2**31 - 1),)  # blocks loop over rows beyond the grid
        block = (threads or _block_threads(shape.cols),)
        scalars = shape.scalars()

        def launch(x: int, y: int, stream) -> None:
            function(grid, block, (_ptr(x), _ptr(y), *scalars), stream=stream)

        return launch

    return prepare


# ---------------------------------------------------------------- multi-block
MULTI_BLOCK_THREADS = 512
MULTI_BLOCK_CHUNK_VECS = 8192  # float4 vectors (128 KB) per block and row
MULTI_BLOCK_MAX_GRID = 1 << 20  # blocks loop over (row, chunk) items beyond it


def _prepare_multi_block(shape: Shape, dev: DeviceInfo, chunk_vecs: int | None = None,
                         threads: int | None = None) -> Launcher:
    chunk_vecs = chunk_vecs or MULTI_BLOCK_CHUNK_VECS
    block = (threads or MULTI_BLOCK_THREADS,)
    chunks = max(1, -(-(shape.cols // 4) // chunk_vecs))
    get = lambda entry: loader.get_kernel("multi_block.cu", entry, device_id=dev.id).kernel
    partials_k, combine_k, write_k = get("multi_block_partials"), get("multi_block_combine"), get("multi_block_write")
    items = shape.rows * chunks
    item_grid, row_grid = (min(items, MULTI_BLOCK_MAX_GRID),), (min(shape.rows, MULTI_BLOCK_MAX_GRID),)
    rows, cols, ld_x, ld_y = shape.scalars()
    n_chunk_vecs, n_chunks = np.int64(chunk_vecs), np.int64(chunks)

    def launch(x: int, y: int, stream) -> None:
        # Per-call scratch (a (max, sum) pair per chunk and per row), taken from
        # CuPy's pool on this stream: concurrent calls share nothing.
        with stream:
            partials = cupy.empty((items, 2), dtype=cupy.float32)
            totals = cupy.empty((shape.rows, 2), dtype=cupy.float32)
        partials_k(item_grid, block, (_ptr(x), rows, cols, ld_x, n_chunk_vecs, n_chunks, partials), stream=stream)
        combine_k(row_grid, (256,), (partials, rows, n_chunks, totals), stream=stream)
        write_k(item_grid, block, (_ptr(x), _ptr(y), rows, cols, ld_x, ld_y, n_chunk_vecs, n_chunks, totals),
                stream=stream)

    return launch


# ---------------------------------------------------------------- single read
@dataclass(frozen=True)
class ClusterConfig:
    cluster: int  # thread blocks per row (a power of two, at most 16)
    threads: int
    vpt: int  # float4 vectors per thread (held in registers)
    stages: int  # shared-memory stages in the load ring
    blocks_per_sm: int = 1  # blocks the register budget is sized for

    @property
    def capacity_floats(self) -> int:
        """The longest row (float32 elements) this configuration holds on chip."""
        return self.cluster * self.threads * self.vpt * 4

    @property
    def smem_bytes(self) -> int:
        return self.stages * self.threads * self.vpt * 16

    def defines(self) -> dict[str, int]:
        return {"SR_CLUSTER": self.cluster, "SR_THREADS": self.threads, "SR_VPT": self.vpt, "SR_STAGES": self.stages,
                "SR_BLOCKS_PER_SM": self.blocks_per_sm}


# The first configuration whose capacity holds the row is used.  Measured on
# the H200 (notes/TUNING.md); columns: cluster, threads, float4 per thread,
# stages, blocks per SM.
SINGLE_READ_CONFIGS = (
    ClusterConfig(1, 128, 8, 3),  # rows <= 4096 (rows <= 1024 go to single_read_warp)
    ClusterConfig(1, 256, 16, 2),  # <= 16384
    ClusterConfig(2, 1024, 8, 1),  # <= 65536
    ClusterConfig(8, 512, 16, 1),  # <= 262144
    ClusterConfig(8, 512, 24, 1),  # <= 393216: 15 clusters of 8 resident on the H200
    ClusterConfig(16, 768, 9, 2),  # <= 442368
)
_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14  # CUfunction_attribute


def single_read_config(cols: int, dev: DeviceInfo) -> ClusterConfig | None:
    vecs = -(-cols // 4)
    for c in SINGLE_READ_CONFIGS:
        if -(-vecs // c.cluster) <= c.threads * c.vpt and c.smem_bytes + 1024 <= dev.smem_optin_bytes:
            return c
    return None


def single_read_kernel(config: ClusterConfig, dev: DeviceInfo) -> cupy.RawKernel:
    kernel = loader.get_kernel("single_read.cu", "single_read", config.defines(), device_id=dev.id)
    kernel.max_dynamic_shared_size_bytes = config.smem_bytes
    if config.cluster > 8:
        cupy.cuda.driver.funcSetAttribute(kernel.kernel.ptr, _NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    return kernel


def resident_groups(config: ClusterConfig, kernel: cupy.RawKernel, dev: DeviceInfo) -> int:
    """Clusters (or, for a cluster of one, blocks) that can be resident at once."""
    if config.cluster == 1:
        per_sm = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, config.threads, config.smem_bytes
        )
        return per_sm * dev.sm_count
    return max_active_clusters(kernel, config.cluster, config.threads, config.smem_bytes)


# Rows of at most WARP_ROW_COLS elements: one warp per row (single_read_warp).
WARP_ROW_VPT = 8
WARP_ROW_COLS = 32 * WARP_ROW_VPT * 4


def _prepare_single_read(shape: Shape, dev: DeviceInfo, config: ClusterConfig | None = None,
                         groups: int | None = None) -> Launcher:
    scalars = shape.scalars()
    if config is None and shape.cols <= WARP_ROW_COLS:
        function = loader.get_kernel("single_read.cu", "single_read_warp", {"SR_WARP_VPT": WARP_ROW_VPT},
                                     device_id=dev.id).kernel
        grid = (min(shape.rows, 2**31 - 1),)

        def launch_warp(x: int, y: int, stream) -> None:
            function(grid, (32,), (_ptr(x), _ptr(y), *scalars), stream=stream)

        return launch_warp
    config = config or single_read_config(shape.cols, dev)
    if config is None:
        raise CannotRun(f"variant 'single_read' holds rows of at most {_single_read_limit(dev)} elements "
                        f"on {dev.name}; got {shape.cols}")
    kernel = single_read_kernel(config, dev)
    groups = min(shape.rows, groups or resident_groups(config, kernel, dev))
    if groups < 1:
        raise CannotRun(f"variant 'single_read': no cluster of {config} can be resident on {dev.name}")
    function, grid, block, smem = kernel.kernel, (groups * config.cluster,), (config.threads,), config.smem_bytes

    def launch(x: int, y: int, stream) -> None:
        function(grid, block, (_ptr(x), _ptr(y), *scalars), shared_mem=smem, stream=stream)

    return launch


def _single_read_limit(dev: DeviceInfo) -> int:
    fitting = [c.capacity_floats for c in SINGLE_READ_CONFIGS if c.smem_bytes + 1024 <= dev.smem_optin_bytes]
    return max(fitting, default=0)


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
    max_cols: Callable[[DeviceInfo], float] = field(default=lambda dev: math.inf, repr=False)

    def bytes_per_element(self, itemsize: int = ITEMSIZE) -> int:
        return (self.reads + self.writes) * itemsize

    def traffic_bytes(self, rows: int, cols: int, itemsize: int = ITEMSIZE) -> int:
        """Bytes this variant moves through device memory for a rows x cols problem."""
        return rows * cols * self.bytes_per_element(itemsize)

    def unsupported_reason(self, cols: int, dev: DeviceInfo) -> str | None:
        """Why this variant cannot run rows of `cols` on `dev`, or None if it can."""
        if dev.compute_capability < self.min_compute_capability:
            cc = self.min_compute_capability
            return (f"variant {self.name!r} needs compute capability {cc // 10}.{cc % 10} or newer; "
                    f"{dev.name} has {dev.compute_capability // 10}.{dev.compute_capability % 10}")
        if cols > self.max_cols(dev):
            return f"variant {self.name!r} holds rows of at most {self.max_cols(dev)} elements on {dev.name}; got {cols}"
        return None

    def prepare(self, shape: Shape, dev: DeviceInfo, **knobs) -> Launcher:
        """The launcher for `shape` on `dev`; CannotRun if this variant cannot run it there.
        `knobs` (threads, config, ...) override the launch rule, for tuning."""
        reason = self.unsupported_reason(shape.cols, dev)
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
    ),
    Variant(
        name="two_pass",
        source="two_pass.cu",
        entries=("two_pass",),
        reads=2, writes=1, min_compute_capability=0,
        summary="online (max, rescaled sum) in one read, then the write pass; one block per row",
        launch_rule="one block per row; threads by row length " + str(BLOCK_THREADS_BY_COLS),
        prepare_launch=_prepare_block_per_row("two_pass", "two_pass.cu"),
    ),
    Variant(
        name="multi_block",
        source="multi_block.cu",
        entries=("multi_block_partials", "multi_block_combine", "multi_block_write"),
        reads=2, writes=1, min_compute_capability=0,
        summary="a row split over blocks: per-chunk online partials, a fixed-order combine, the write pass",
        launch_rule=f"{MULTI_BLOCK_CHUNK_VECS} float4 per block and row, {MULTI_BLOCK_THREADS} threads, three launches",
        prepare_launch=_prepare_multi_block,
    ),
    Variant(
        name="single_read",
        source="single_read.cu",
        entries=("single_read", "single_read_warp"),
        reads=1, writes=1, min_compute_capability=90,
        summary="row held on chip across a thread-block cluster, combined through distributed shared memory",
        launch_rule=(f"rows <= {WARP_ROW_COLS}: one warp per row; longer: a persistent grid of resident "
                     "clusters, configuration by row length from SINGLE_READ_CONFIGS"),
        prepare_launch=_prepare_single_read,
        max_cols=_single_read_limit,
    ),
)

_REGISTRY = types.MappingProxyType({v.name: v for v in _ALL})


def variants() -> types.MappingProxyType:
    """Ordered mapping name -> Variant."""
    return _REGISTRY


def get_variant(name: str) -> Variant:
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown variant {name!r}; known: 'auto', {', '.join(map(repr, _REGISTRY))}") from None


# variant="auto": (longest row, variants in order of preference).  Rows of
# up to 1024 elements: a warp per row (single_read_warp).  Rows up to 4096
# stay in L1/L2 between passes, so three_pass moves no more device memory than
# one read there and has the least overhead.  Longer rows go to single_read
# where the device has it, and past what a cluster holds to the two-read
# algorithms (split over blocks for very long rows).
AUTO_RULES = (
    (WARP_ROW_COLS, ("single_read", "three_pass")),
    (4096, ("three_pass",)),
    (65536, ("single_read", "two_pass")),
    (math.inf, ("single_read", "multi_block")),
)


# Variants that run every shape on every device: auto's last resort.
FALLBACKS = ("two_pass", "multi_block")


def preferences(shape: Shape, dev: DeviceInfo) -> tuple[Variant, ...]:
    """variant="auto": the variants to try for this shape on this device, best first.
    The api takes the first whose prepare() does not raise CannotRun."""
    names = next(names for limit, names in AUTO_RULES if shape.cols <= limit)
    names = names + tuple(n for n in FALLBACKS if n not in names)
    return tuple(_REGISTRY[n] for n in names if _REGISTRY[n].unsupported_reason(shape.cols, dev) is None)


def choose(rows: int, cols: int, dev: DeviceInfo) -> Variant:
    """The variant auto would try first for rows x cols contiguous rows (no launch is prepared)."""
    return preferences(Shape(rows, cols, cols, cols), dev)[0]
