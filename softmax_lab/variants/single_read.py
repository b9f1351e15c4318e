"""single_read: a row held on chip, read once from device memory and written once
(kernels/single_read.cu; the backward, y and dy held, kernels/single_read_backward.cu).

The forward's plans, by row length:
- rows of up to WARP_ROWS_BYTES: a block of warps per row (warp_rows.py);
- longer rows: the row's 16-byte vectors split over a cluster of `cluster` blocks, each
  block's slice over `threads` threads holding `vpt` vectors each in registers, after a
  ring of `stages` shared-memory stages, merged through distributed shared memory;
- rows past a cluster's reach (or where a smaller group pays): a group of any resident
  blocks on any SMs, merged through device memory (memory-merged groups).

The cluster plan is derived, not tabulated.  For `rows` rows of `vecs` vectors
(notes/TUNING.md, "single_read"):
  1. cluster: the smallest power of two c_min whose slice ceil(vecs / c) fits one block
     (quack's cluster_n); for few rows also 2 * c_min, which gives more, shorter rounds
     (if its slices keep MIN_SLICE vectors);
  2. threads and vpt for the slice (block_shape): at least MIN_THREADS_PER_SM threads per
     SM, within the register budget; of the pairs filled to GOOD_FILL or more, vpt nearest
     VPT_TARGET, else the fullest;
  3. stages: one with a cluster; without one as many as fit, at most MAX_STAGES, beyond
     the first only within STAGES_BYTES;
  4. one or two blocks per SM and c_min or 2 * c_min: the least estimated time (plan_cost),
     rounds of resident clusters (plus one to fill and drain) x the slice a block moves per
     round x blocks sharing an SM, x (1 + LARGER_CLUSTER_COST) for 2 * c_min; halves
     (forward) x (1 + HALVES_ONE_BLOCK_COST) for one block per SM in a cluster, and at two
     blocks per SM the fewest threads and no cluster of MAX_CLUSTER; ties go to the first of
     (c_min, one block per SM), (c_min, two), (2 * c_min, one), (2 * c_min, two);
  5. float16/bfloat16 softmax: the wide plan (halves widened to floats in registers, 8
     registers a vector, one exponential an element) where one holds the row and
     _wide_beats the packed plan (4 registers a vector), which holds rows twice as long.
Slices go into their stages at their sources' offsets in a 128-byte line where some slice's
source is off a line (line_shifted): a bulk copy between different offsets is slow.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import cupy
import numpy as np

from ..device import DeviceInfo
from ..problem import ALL_OPS, BACKWARD_OPS, DTYPES, ITEMSIZE, Shape
from ..scratch import CallMemory
from . import warp_rows
from .base import (
    DEVICE_REFUSALS,
    CannotRun,
    HeldRowPlan,
    Launcher,
    Variant,
    cluster_kernel,
    cluster_launcher,
    ptr,
)
from .resources import (
    LINE_BYTES,
    LINE_VECS,
    MAX_CLUSTER,
    VECTOR_BYTES,
    check_cluster_and_threads,
    register_budget,
    row_vecs,
    rows_start_on,
    smem_budget,
)

# The register model (ptxas, NVRTC 12.9; notes/TUNING.md, "single_read"): registers per thread
# besides the row's vectors, by cluster and element size.
OTHER_REGISTERS = 32  # with a cluster
OTHER_REGISTERS_ONE_BLOCK = 40  # float32 without one
OTHER_REGISTERS_ONE_BLOCK_HALVES = 76  # halves without one (14-18 vectors spilled at 128 registers, 13 did not)
OTHER_REGISTERS_ONE_BLOCK_WIDE = 40  # halves held wide without one
BACKWARD_OTHER_REGISTERS_ONE_BLOCK_HALVES = 56  # the backward's halves without one (y and dy, 8 a vector pair)
MAX_VPT = 24  # vectors per thread in registers
WIDE_MAX_VPT = 12  # the same 96 registers of floats, 8 to a vector of widened halves (single_read.cu asserts it)
VPT_TARGET = 16
GOOD_FILL = 0.93
MIN_FILL = 0.9  # what every derived plan reaches (tests/test_variants.py)
MIN_THREADS_PER_SM = 512  # fewer hide too little latency (notes/TUNING.md#the-plan-rule)
MIN_SLICE = 1024  # vectors (16 KB): slices no shorter are not split over a larger cluster
MAX_STAGES = 3
STAGES_BYTES = 128 * 1024
STATIC_SMEM = 512  # the kernel's own shared memory
SMEM_RESERVED = 1024 + STATIC_SMEM  # per block: the driver's 1 KB and the kernel's static shared memory
LARGER_CLUSTER_COST = 0.10  # a larger cluster's cost beyond its rounds (notes/TUNING.md#the-plan-rule)
# Halves (forward) at one block per SM in a cluster: a second block per SM at twice the cluster
# hides the instructions and the per-row merge that one block leaves exposed.
HALVES_ONE_BLOCK_COST = 0.25
WIDE_FROM_CLUSTER = 4  # _wide_beats: against a packed plan of one block per SM in clusters this large
# The forward's per-row merge is pushed into every block (SR_PUSHED_MERGE, cluster.cuh row_exchange)
# in clusters of 8 or more; in smaller ones it goes between two cluster barriers.
PUSHED_MERGE_MIN_CLUSTER = 8
# single_read.cu's whole path (a slice that holds all but each thread's last vector loaded and
# stored without index compares, SR_WHOLE_PATH): float32 where its threads keep this many registers.
WHOLE_PATH_REGISTERS = 128

# Memory-merged groups (SR_MEMORY_MERGE): the blocks publish their (max, sum) pairs in device
# memory and wait for the group's, a round trip through L2 where a cluster merges on chip.  The
# plan (memory_merge_config): for one and two blocks per SM and every group size from 2 to the
# resident blocks, the block shape of the slice ceil(vecs / group) (a group no larger than a
# block's threads); the least estimated time, rounds of resident groups (plus one) x (slice +
# MEMORY_MERGE_ROUND_VECS) x blocks sharing an SM.  Groups hold halves packed.  auto takes a
# group (memory_merge_pays) for long slices, small groups and several rounds.
MEMORY_MERGE_ROUND_VECS = 4700  # a round's measured cost beyond its slice
MEMORY_MERGE_MIN_SLICE = 10000  # vectors a block holds (512 threads of 20 or more)
MEMORY_MERGE_MAX_GROUP = 32
MEMORY_MERGE_MIN_ROUNDS = 8
MEMORY_MERGE_FLOAT_SPILLING_VPT = (22, 23)  # the float32 build spilled 8 bytes at these (none at 24): take 24
# Halves whose packed plan is a cluster at one block per SM take a group at two blocks per SM
# where it pays and holds HALVES_MERGE_MIN_HELD times the cluster plan's vectors per SM.
HALVES_MERGE_BLOCKS_PER_SM = 2
HALVES_MERGE_MIN_HELD = 1.1
# The halves' log_softmax backward stages dy alone and loads y into registers directly (its dot
# is the sum of dy) in clusters of this many blocks or more.
Y_DIRECT_MIN_CLUSTER = 2


@dataclass(frozen=True)
class ClusterConfig(HeldRowPlan):
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
    groups: int | None = None  # clusters (groups) launched; None: as many as can be resident

    def __post_init__(self):
        if self.memory_merge:
            if not (2 <= self.cluster <= self.threads and self.arrays == 1):
                raise ValueError(f"{self}: a memory-merged group is 2 to `threads` blocks holding one array")
            check_cluster_and_threads(1, self.threads)
        else:
            check_cluster_and_threads(self.cluster, self.threads)
        if min(self.vpt, self.stages, self.blocks_per_sm) < 1 or self.arrays not in (1, 2):
            raise ValueError(f"vpt, stages and blocks_per_sm must be positive, arrays 1 or 2: {self}")
        if self.y_direct and self.arrays != 2:
            raise ValueError(f"{self}: y_direct is a backward plan's (arrays=2)")
        if self.wide and (self.arrays != 1 or self.vpt > WIDE_MAX_VPT):
            raise ValueError(f"{self}: wide plans hold one array, at most {WIDE_MAX_VPT} vectors per thread")
        if _registers_needed(self.vpt, self.cluster, ITEMSIZE, self.arrays, self.wide) > \
                register_budget(self.threads, self.blocks_per_sm):
            raise ValueError(f"{self}: {self.vpt} vectors per thread exceed the register budget")

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


def _smem_budget(dev: DeviceInfo, blocks_per_sm: int) -> int:
    """Dynamic shared memory one block may take when `blocks_per_sm` share an SM."""
    return smem_budget(dev, blocks_per_sm, STATIC_SMEM)


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
    budget = register_budget(threads, blocks_per_sm)
    if arrays == 1:
        per_vector = _registers_per_vector(wide)
        return min(WIDE_MAX_VPT if wide else MAX_VPT, (budget - _other_registers(cluster, itemsize, wide)) // per_vector)
    return max([v for v in range(1, MAX_VPT // arrays + 1) if _registers_needed(v, cluster, itemsize, arrays) <= budget],
               default=0)


def _block_smem(threads: int, vpt: int, stages: int, arrays: int = 1) -> int:
    """single_read's shared memory beyond SMEM_RESERVED: the stages (of each array), and each
    warp's first vector per k for realigned stores (1/32 of a stage)."""
    return stages * threads * vpt * VECTOR_BYTES * arrays + threads * vpt // 2


def keeps_whole_path(threads: int, blocks_per_sm: int) -> bool:
    """Whether float32 blocks of `threads`, `blocks_per_sm` to an SM, keep the registers
    single_read.cu's whole path takes (its SR_WHOLE_PATH rule)."""
    return register_budget(threads, blocks_per_sm) >= WHOLE_PATH_REGISTERS


def block_shape(per_block: int, blocks_per_sm: int = 1, vpt_target: int = VPT_TARGET,
                cluster: int = 2, smem_budget: int = 1 << 30, itemsize: int = ITEMSIZE,
                arrays: int = 1, wide: bool = False) -> tuple[int, int] | None:
    """(threads, vpt) for a slice of `per_block` vectors, or None if no block
    holds it: at least MIN_THREADS_PER_SM / blocks_per_sm threads (fewer only
    for shorter slices), within the register budget and a stage of at most
    `smem_budget` bytes; of the pairs filled to GOOD_FILL, vpt nearest
    vpt_target (then the fuller), else the fullest pair.  Forward halves,
    whose instructions per byte set their pace, first take pairs whose warps
    fill the SM's 4 partitions evenly (notes/TUNING.md, "single_read").  Float32 forward slices first take
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
    vecs = row_vecs(cols, itemsize)
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
    blocks lose about 7 % of the SMs to the GPC layout (notes/TUNING.md#the-plan-rule)."""
    usable = dev.sm_count * config.blocks_per_sm * (0.93 if config.cluster >= 4 else 1.0)
    return max(1, int(usable) // config.cluster)


def plan_cost(config: ClusterConfig, rows: int, cols: int, dev: DeviceInfo, groups: int | None = None,
              smallest_cluster: int | None = None, itemsize: int = ITEMSIZE, one_block_cost: float = 0.0) -> float:
    """Estimated time, in vectors moved by one block: rounds x slice x blocks per SM, times
    1 + LARGER_CLUSTER_COST past the smallest cluster and 1 + one_block_cost for one block
    per SM in a cluster."""
    vecs = row_vecs(cols, itemsize)
    rounds = -(-rows // (groups or estimated_groups(config, dev))) + 1
    per_block = -(-vecs // config.cluster)
    larger = config.cluster > (smallest_cluster or config.cluster)
    alone = config.blocks_per_sm == 1 and config.cluster > 1
    return rounds * per_block * config.blocks_per_sm * (1 + (LARGER_CLUSTER_COST if larger else 0.0)) * \
        (1 + (one_block_cost if alone else 0.0))


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


# Row lengths that cover single_read's plans: powers of two, odd lengths and vocabulary sizes.
SAMPLE_COLS = (1025, 2048, 4096, 8191, 16384, 32000, 50257, 65536, 100003, 128256, 151936, 262144, 393216, 500000,
               786432)


def sample_configs(dev: DeviceInfo) -> tuple[ClusterConfig, ...]:
    """The float32 softmax configurations single_read plans on `dev` for SAMPLE_COLS at 32 to
    2^20 rows, smallest first: the builds a compile check covers."""
    found = {single_read_config(cols, dev, rows) for cols in SAMPLE_COLS for rows in (32, 132, 4096, 1 << 20)}
    return tuple(sorted(found - {None}, key=lambda c: c.capacity_vecs))


def holds_wide(dtype: str, op: str) -> bool:
    """Whether single_read builds `dtype` `op` wide where a plan holds the row (step 5):
    float16 and bfloat16 softmax, the forward op with two exponentials per element packed."""
    return DTYPES[dtype] == 2 and op == "softmax"


def _wide_beats(wide: ClusterConfig, packed: ClusterConfig) -> bool:
    """Step 5: whether half softmax takes the wide plan over the packed one."""
    if packed.blocks_per_sm == 2:
        return wide.cluster < packed.cluster or (wide.cluster == packed.cluster and wide.vpt == WIDE_MAX_VPT)
    return wide.cluster <= packed.cluster or packed.cluster >= WIDE_FROM_CLUSTER


@functools.lru_cache(maxsize=256)
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
                holds_per_sm(group) >= HALVES_MERGE_MIN_HELD * holds_per_sm(plan):
            return group
    return plan


@functools.lru_cache(maxsize=256)
def memory_merge_config(cols: int, dev: DeviceInfo, rows: int = 1 << 20, itemsize: int = ITEMSIZE,
                        blocks_per_sm_choices: tuple[int, ...] = (1, 2)) -> ClusterConfig | None:
    """single_read's memory-merged plan for `rows` rows of `cols` elements on `dev` with one of
    `blocks_per_sm_choices` blocks per SM, or None (a row longer than every resident block holds
    together)."""
    vecs = row_vecs(cols, itemsize)
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
    return -(-row_vecs(shape.cols, shape.itemsize) // config.cluster)


def holds_per_sm(plan) -> int:
    """16-byte vectors a plan (a ClusterConfig, or cluster_row's RowClusterPlan) holds on each SM (per array)."""
    return plan.threads * plan.vpt * plan.blocks_per_sm


def line_shifted(config: ClusterConfig, shape: Shape, dev: DeviceInfo) -> ClusterConfig:
    """config with the line shift where the shape's slices need it and the block still fits.
    Float32 plans of MAX_VPT vectors per thread (and the backward's of MAX_VPT / 2 pairs) keep
    the plain build: ptxas spilled them with the shift."""
    if config.line_shift or (shape.itemsize == ITEMSIZE and config.vpt * config.arrays >= MAX_VPT):
        return config
    per_block = memory_merge_slice(config, shape) if config.memory_merge else \
        -(-(shape.cols * shape.itemsize // VECTOR_BYTES) // config.cluster)
    copied = ((shape.x_offset, shape.ld_x),) * (not config.y_direct) + \
        ((shape.g_offset, shape.ld_g),) * (config.arrays == 2)  # the arrays the bulk copies bring
    on_lines = all(rows_start_on(LINE_BYTES, shape, offset, ld) for offset, ld in copied)
    if on_lines and (config.cluster == 1 or per_block % LINE_VECS == 0):
        return config
    shifted = replace(config, line_shift=True)
    extra = shifted.smem_bytes - config.smem_bytes
    if _block_smem(config.threads, config.vpt, config.stages, config.staged_arrays) + extra > \
            _smem_budget(dev, config.blocks_per_sm):
        return config
    return shifted


def shares_alignment(shape: Shape) -> bool:
    """Whether every row of dy starts at the same offset mod 16 bytes as its row of y
    (the backward copies dy's slice by the vectors of y's)."""
    lds_agree = shape.rows <= 1 or ((shape.ld_x - shape.ld_g) * shape.itemsize) % VECTOR_BYTES == 0
    return shape.x_offset % VECTOR_BYTES == shape.g_offset % VECTOR_BYTES and lds_agree


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


def _check_alignment(shape: Shape) -> None:
    if shape.backward and not shares_alignment(shape):
        raise CannotRun(f"variant 'single_read': dy does not share y's 16-byte alignment on every row "
                        f"(offsets {shape.x_offset} and {shape.g_offset} bytes, row strides {shape.ld_x} and "
                        f"{shape.ld_g} elements); its backward copies both by the same 16-byte vectors")


def plan(shape: Shape, dev: DeviceInfo) -> ClusterConfig | warp_rows.WarpRowPlan:
    """The shape's plan: a block of warps per row (forward rows of up to a few KB), else a
    cluster or a memory-merged group, line-shifted where its slices need it; CannotRun where
    none holds the row (or, backward, dy is not aligned as y)."""
    if shape.backward:
        _check_alignment(shape)
        config = single_read_backward_plan(shape.cols, dev, shape.rows, shape.dtype, shape.op)
        rows, longest = "backward rows", single_read_limit(dev, shape.dtype, shape.op)
    else:
        warps = warp_rows.plan(shape)
        if warps is not None:
            return warps
        config = single_read_plan(shape.cols, dev, shape.rows, shape.dtype, shape.op)
        rows, longest = "rows", single_read_max_cols(dev, shape.dtype, shape.op)
    if config is None:
        raise CannotRun(f"variant 'single_read' holds {rows} of at most {longest} {shape.dtype} elements on "
                        f"{dev.name}; got {shape.cols}")
    return line_shifted(config, shape, dev)


def _check_holds(shape: Shape, dev: DeviceInfo, config: ClusterConfig) -> None:
    """CannotRun where a (given) plan does not fit the shape's op, row, shared memory or registers."""
    what = "backward rows" if shape.backward else "rows"
    if shape.backward and config.arrays != 2:
        raise CannotRun(f"variant 'single_read': {config} is a forward plan; the backward's holds y and dy (arrays=2)")
    if config.y_direct and shape.op != "log_softmax_backward":
        raise CannotRun(f"variant 'single_read': {config} loads y directly, which only log_softmax's backward may "
                        f"(its dot is the sum of dy); got {shape.op}")
    if config.wide and not holds_wide(shape.dtype, shape.op):
        raise CannotRun(f"variant 'single_read': {config} is a wide plan, for float16 or bfloat16 softmax only; "
                        f"got {shape.dtype} {shape.op}")
    staged = config.staged_arrays if shape.backward else 1
    if row_vecs(shape.cols, shape.itemsize) > config.capacity_vecs or \
            _block_smem(config.threads, config.vpt, config.stages, staged) + SMEM_RESERVED > dev.smem_optin_bytes:
        raise CannotRun(f"variant 'single_read': {config} does not hold {what} of {shape.cols} on {dev.name}")
    if _registers_needed(config.vpt, config.cluster, shape.itemsize, config.arrays if shape.backward else 1,
                         config.wide) > register_budget(config.threads, config.blocks_per_sm):
        raise CannotRun(f"variant 'single_read': {config} exceeds the register budget for {shape.dtype}")


def launch(shape: Shape, dev: DeviceInfo, plan: ClusterConfig | warp_rows.WarpRowPlan) -> Launcher:
    if isinstance(plan, warp_rows.WarpRowPlan):
        return warp_rows.launch(shape, dev, plan)
    _check_alignment(shape)
    _check_holds(shape, dev, plan)
    plan = line_shifted(plan, shape, dev)
    source = "single_read_backward.cu" if shape.backward else "single_read.cu"
    if plan.memory_merge:
        return _memory_merge_launcher(plan, shape, dev)
    return cluster_launcher(source, plan, shape, dev, "single_read", plan.groups)


def _memory_merge_launcher(plan: ClusterConfig, shape: Shape, dev: DeviceInfo) -> Launcher:
    """A persistent, cooperative launch of as many groups as can be resident at once (at most
    plan.groups where given); each call takes its slots (rows x group pairs and the ticket
    counter) for the call alone, filled with the byte 0xBF (softmax_lab.scratch: the graph's
    own under capture)."""
    try:
        kernel = cluster_kernel("single_read.cu", plan, dev, shape)
        resident = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
            kernel.kernel.ptr, plan.threads, plan.smem_bytes) * dev.sm_count
    except DEVICE_REFUSALS as e:
        raise CannotRun(f"variant 'single_read': {dev.name} cannot run {plan}: {e}") from e
    if plan.cluster > resident:
        raise CannotRun(f"variant 'single_read': a group of {plan.cluster} blocks of {plan} cannot be resident "
                        f"at once on {dev.name} ({resident} blocks can)")
    most = resident // plan.cluster
    groups = min(shape.rows, plan.groups or most, most)
    words, scalars = shape.rows * plan.cluster + 1, shape.scalars()
    extra = (np.int64(plan.cluster), np.int64(memory_merge_slice(plan, shape)))
    grid, block, function = (groups * plan.cluster,), (plan.threads,), kernel.kernel

    def launch(x: int, y: int, stream) -> None:
        # Cooperative, as multi_block_smem's launch: a group's blocks wait for each other, so two
        # launches on two streams that each had part of the GPU resident could each hold blocks
        # waiting for blocks of their own that cannot start.  The driver starts a cooperative grid
        # only with every block resident.
        with CallMemory(stream) as memory:
            slots = memory.filled_words(words, 0xBF)
            function(grid, block, (ptr(x), ptr(y), *scalars, *extra, slots), stream=stream,
                     shared_mem=plan.smem_bytes, enable_cooperative_groups=True)

    return launch


def single_read_limit(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax", wide: bool = False) -> int:
    """The longest row of `dtype` single_read holds on `dev` in a cluster: the largest cluster,
    the largest slice a block holds in registers (within its shared memory); 16-byte vectors,
    so twice as many halves as floats.  The backward holds y and dy: about half the forward's
    row.  wide: the longest row of halves a wide plan holds."""
    return MAX_CLUSTER * _block_vecs(dev, op, wide) * VECTOR_BYTES // DTYPES[dtype]


def _block_vecs(dev: DeviceInfo, op: str = "softmax", wide: bool = False) -> int:
    """The most 16-byte vectors (of each array) one single_read block holds, one block per SM."""
    arrays = 2 if op in BACKWARD_OPS else 1
    return max((t * min(_max_vpt(t, 1, 2, ITEMSIZE, arrays, wide),
                        _smem_budget(dev, 1) * 2 // (t * (2 * VECTOR_BYTES * arrays + 1)))
                for t in range(MIN_THREADS_PER_SM, 1025, 32)), default=0)


def single_read_max_cols(dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> int:
    """The longest row single_read runs: the forward ops past a cluster's limit in a
    memory-merged group of up to one block on every SM; the backward ops within a cluster."""
    if op in BACKWARD_OPS:
        return single_read_limit(dev, dtype, op)
    groups_limit = min(dev.sm_count, MIN_THREADS_PER_SM) * _block_vecs(dev, op) * VECTOR_BYTES
    return max(single_read_limit(dev, dtype, op), groups_limit // DTYPES[dtype])


SINGLE_READ = Variant(
    name="single_read", source="single_read.cu", entries=("single_read", "single_read_warp"),
    backward_source="single_read_backward.cu",  # entry single_read_backward: y and dy on chip
    reads=1, writes=1, min_compute_capability=90,
    summary=("row held on chip across a thread-block cluster, combined through distributed shared memory "
             "(past a cluster's reach: across a group of resident blocks, combined through device memory)"),
    launch_rule=(f"forward rows of <= {warp_rows.WARP_ROWS_BYTES[4]} bytes (halves: {warp_rows.WARP_ROWS_BYTES[2]}): "
                 f"a block of 1-{warp_rows.MAX_WARPS} warps per row (warp_rows.plan); longer: "
                 "a persistent grid of resident "
                 "clusters, configuration derived from rows, row length, element size and device "
                 "(single_read_config); slices placed at their sources' offsets in 128-byte lines where rows "
                 "or slices start off a line (line_shifted); forward rows past a cluster of 16 (or where a "
                 "smaller group pays): a persistent grid of groups of any resident blocks, merged through "
                 "device memory (memory_merge_config); backward: y and dy on chip (single_read_backward_plan; "
                 "the halves' log_softmax stages dy alone and loads y directly)"),
    plan=plan, launch=launch, max_cols=single_read_max_cols,
    ops=ALL_OPS,  # backward: y and dy of a row on chip (single_read_backward.cu), each read once
)
