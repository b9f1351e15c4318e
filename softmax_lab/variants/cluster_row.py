"""cluster_row: a cluster per row, the row in registers, several blocks per SM and no
persistent loop, so that one row's loads overlap another's reduction and stores (quack's
structure), merged through distributed shared memory (kernels/cluster_row.cu).

The plan, for `rows` rows of `vecs` 16-byte vectors (of each array; notes/TUNING.md, "cluster_row"):
  1. block shape: the first of BLOCK_SHAPES (threads, most vectors per thread) whose
     cluster of 16 holds the row: 256 threads of at most 13 vectors (three or more blocks
     per SM) first; then 256 of at most 24 (two blocks per SM fill the register file);
     then 512 (the backward: 256 of at most 12 vectors of floats or 8 of halves, then 512 of as many);
  2. cluster: the smallest power of two whose slice ceil(vecs / c) fits a block; while the
     clusters are fewer than the SMs (rows x c < SMs), doubled, as long as each thread keeps
     a vector, so that every SM works;
  3. vpt = ceil(slice / threads); __launch_bounds__ for as many blocks per SM (up to
     MAX_BLOCKS_PER_SM) as the register model allows: REGISTERS_PER_VECTOR x vpt +
     OTHER_REGISTERS, at least MIN_REGISTERS, rounded up to 8 (tests/test_loader.py compiles
     the plans of a grid of shapes and checks that ptxas spills nothing);
  4. the loads evict-last, or evict-first (.cs) for fewer rows than SMs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..device import DeviceInfo
from ..problem import ALL_OPS, BACKWARD_OPS, DTYPES, ITEMSIZE, Shape
from .base import (
    DEVICE_REFUSALS,
    CannotRun,
    HeldRowPlan,
    Launcher,
    Variant,
    cluster_kernel,
    cluster_launcher,
    resident_groups,
)
from .resources import (
    MAX_CLUSTER,
    MAX_GRID_X,
    MAX_GRID_Y,
    REGISTERS_PER_SM,
    VECTOR_BYTES,
    check_cluster_and_threads,
    row_vecs,
)

BLOCK_SHAPES = {  # (arrays, element size) -> (threads, most vectors per thread), in order of preference
    (1, 4): ((256, 13), (256, 24), (512, 13)),
    (1, 2): ((256, 13), (256, 24), (512, 13)),
    (2, 4): ((256, 12), (512, 12)),
    (2, 2): ((256, 8), (512, 8)),
}
# The register model (ptxas, NVRTC 12.9, sm_90: the most registers a plan used without spills):
# per vector (of y and dy together in the backward, halves held packed) and besides the vectors;
# at least MIN_REGISTERS (by arrays); ONE_BLOCK_REGISTERS more for a cluster of one block.
# benchmarks/cluster_row_registers.py compiles every block shape and vector count at the model's
# blocks per SM.
REGISTERS_PER_VECTOR = {(1, 4): 4, (1, 2): 4, (2, 4): 8, (2, 2): 8}
OTHER_REGISTERS = {(1, 4): 24, (1, 2): 32, (2, 4): 32, (2, 2): 40}
MIN_REGISTERS = {1: 32, 2: 48}
ONE_BLOCK_REGISTERS = 8
MAX_BLOCKS_PER_SM = 8


@dataclass(frozen=True)
class RowClusterPlan(HeldRowPlan):
    cluster: int  # thread blocks per row (a power of two, at most 16)
    threads: int
    vpt: int  # 16-byte vectors per thread (of each array)
    blocks_per_sm: int  # what __launch_bounds__ sizes the registers for
    stream_loads: bool = False  # the loads evict-first (.cs) rather than evict-last
    smem_bytes: int = 0  # no dynamic shared memory

    def __post_init__(self):
        check_cluster_and_threads(self.cluster, self.threads)
        if min(self.vpt, self.blocks_per_sm) < 1:
            raise ValueError(f"vpt and blocks_per_sm must be positive: {self}")

    @property
    def cluster_dims(self) -> int:
        """The blocks of the hardware cluster it launches."""
        return self.cluster

    def defines(self, dev: DeviceInfo | None = None) -> dict[str, int]:
        return {"CR_CLUSTER": self.cluster, "CR_THREADS": self.threads, "CR_VPT": self.vpt,
                "CR_BLOCKS_PER_SM": self.blocks_per_sm} | ({"CR_STREAM_LOADS": 1} if self.stream_loads else {})

    def label(self) -> str:
        return f"{self.cluster}x{self.threads}x{self.vpt}x{self.blocks_per_sm}" + ("s" if self.stream_loads else "")


def blocks_per_sm(threads: int, vpt: int, arrays: int, itemsize: int, cluster: int, other: int | None = None) -> int:
    """Blocks per SM of the register model (`other`: the registers besides the vectors, where
    a kernel on this plan needs other than cluster_row's own)."""
    other = OTHER_REGISTERS[arrays, itemsize] if other is None else other
    registers = REGISTERS_PER_VECTOR[arrays, itemsize] * vpt + other
    registers = max(MIN_REGISTERS[arrays], registers + (ONE_BLOCK_REGISTERS if cluster == 1 else 0))
    registers = -(-registers // 8) * 8
    return max(1, min(MAX_BLOCKS_PER_SM, REGISTERS_PER_SM // (threads * registers)))


def cluster_row_plan(cols: int, dev: DeviceInfo, rows: int = 1 << 20, itemsize: int = ITEMSIZE,
                     arrays: int = 1) -> RowClusterPlan | None:
    """cluster_row's plan (the rule above), or None where no cluster holds the row."""
    if dev.compute_capability < 90:
        return None
    vecs = row_vecs(cols, itemsize)
    for threads, most_vpt in BLOCK_SHAPES[arrays, itemsize]:
        cluster = next((c for c in (1, 2, 4, 8, 16) if c <= MAX_CLUSTER and -(-vecs // c) <= threads * most_vpt), None)
        if cluster is not None:
            break
    else:
        return None
    while rows * cluster < dev.sm_count and 2 * cluster <= MAX_CLUSTER and vecs // (2 * cluster) >= threads:
        cluster *= 2
    slice_vecs = -(-vecs // cluster)
    vpt = -(-slice_vecs // threads)
    return RowClusterPlan(cluster, threads, vpt, blocks_per_sm(threads, vpt, arrays, itemsize, cluster),
                          arrays == 1 and rows < dev.sm_count)


def plan(shape: Shape, dev: DeviceInfo) -> RowClusterPlan | None:
    return cluster_row_plan(shape.cols, dev, shape.rows, shape.itemsize, 2 if shape.backward else 1)


def max_cols(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> int:
    """The longest row cluster_row holds: the largest cluster of its largest full blocks."""
    arrays = 2 if op in BACKWARD_OPS else 1
    most = max(t * v for t, v in BLOCK_SHAPES[arrays, DTYPES[dtype]])
    return MAX_CLUSTER * most * VECTOR_BYTES // DTYPES[dtype]


def launch(shape: Shape, dev: DeviceInfo, plan: RowClusterPlan | None) -> Launcher:
    if plan is None or row_vecs(shape.cols, shape.itemsize) > plan.capacity_vecs:
        raise CannotRun(f"variant 'cluster_row': {plan or 'no plan'} does not hold rows of {shape.cols} "
                        f"{shape.dtype} elements on {dev.name}")
    try:
        resident = resident_groups(plan, cluster_kernel("cluster_row.cu", plan, dev, shape), dev)
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant 'cluster_row': {dev.name} cannot run {plan}: {e}") from e
    if resident < 1:
        raise CannotRun(f"variant 'cluster_row': no cluster of {plan} can be resident on {dev.name}")
    per_line = min(shape.rows, MAX_GRID_X // plan.cluster)  # rows of a grid line (a cluster each)
    lines = -(-shape.rows // per_line)
    if lines > MAX_GRID_Y:
        raise CannotRun(f"variant 'cluster_row': {shape.rows} rows are more than a grid of {plan} takes")
    return cluster_launcher("cluster_row.cu", plan, shape, dev, "cluster_row", per_line, lines)


CLUSTER_ROW = Variant(
    name="cluster_row", source="cluster_row.cu", entries=("cluster_row",), reads=1, writes=1,
    min_compute_capability=90,
    summary=("a cluster per row, the row in registers, several blocks per SM and no persistent loop, "
             "combined through distributed shared memory"),
    launch_rule=("the first block shape of BLOCK_SHAPES (threads, most vectors per thread) whose cluster of 16 "
                 "holds the row; the smallest cluster that holds it, doubled while clusters are fewer than SMs; "
                 "blocks per SM from the register model; loads evict-last, or evict-first for fewer rows than SMs "
                 "(cluster_row_plan)"),
    plan=plan, launch=launch, max_cols=max_cols,
    ops=ALL_OPS,  # backward: y and dy of a row held, each read once
)
