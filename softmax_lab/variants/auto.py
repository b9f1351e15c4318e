"""variant="auto": which variant runs a shape, as data.

First a table by row length in bytes (ROW_TABLE, BACKWARD_ROW_TABLE) gives the variants in
order of preference; then each rule of RULES, in order, may reorder that list where its
condition holds.  Every rule says why in one line and where its evidence is, in
notes/TUNING.md.  Last, the variants that run every shape (FALLBACKS), and the list loses
what the device, dtype or op rules out.  The api tries the list in order and takes the first
whose launch does not raise CannotRun, with the plan the rules decided by.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from ..device import DeviceInfo
from ..problem import BACKWARD_OPS, DTYPES, ITEMSIZE, Shape
from . import cluster_row, multi_block_smem, single_read, warp_rows
from .base import Plan, Variant
from .registry import REGISTRY
from .resources import rows_aligned

FLOAT_CLUSTER_ROW_BYTES = 393216 * ITEMSIZE  # where single_read needs clusters of 16
FLOAT_BACKWARD_CLUSTER_ROW_BYTES = 196608 * ITEMSIZE  # the same, y and dy held
# By element size: (longest row in bytes, variants in order of preference); notes/TUNING.md#forward-by-row-length.
ROW_TABLE = {
    4: ((16384, ("three_pass",)),  # rows that stay in L1/L2 between passes: the least overhead
        (262144, ("single_read", "two_pass")),
        (FLOAT_CLUSTER_ROW_BYTES, ("single_read", "multi_block_l2")),
        (math.inf, ("multi_block_smem", "multi_block_l2", "multi_block"))),
    2: ((16384, ("three_pass",)),
        (786432, ("single_read", "two_pass")),  # two_pass measured ahead of multi_block for halves here
        (FLOAT_CLUSTER_ROW_BYTES, ("single_read", "multi_block_l2", "multi_block")),
        (math.inf, ("multi_block_smem", "single_read", "multi_block_l2", "multi_block"))),
}
BACKWARD_ROW_TABLE = {  # notes/TUNING.md#backward-by-row-length
    4: ((16384, ("two_pass",)),
        (262144, ("single_read", "two_pass")),
        (FLOAT_BACKWARD_CLUSTER_ROW_BYTES, ("single_read", "multi_block_l2")),
        (FLOAT_CLUSTER_ROW_BYTES, ("cluster_row", "multi_block_l2")),
        (math.inf, ("multi_block_l2", "multi_block"))),
    2: ((16384, ("two_pass",)),
        (786432, ("single_read", "two_pass")),
        (math.inf, ("single_read", "multi_block"))),  # multi_block beat multi_block_l2 for the halves' backward
}
FALLBACKS = ("two_pass", "multi_block")  # they run every shape on every device

# cluster_row ahead of the table (cluster_row_leads):
CLUSTER_ROW_BACKWARD_MIN_ROW_BYTES = 16384  # backward rows longer than two_pass's L2-resident ones
CLUSTER_ROW_HALVES_ANY_ROWS_CLUSTER = 4  # halves' log_softmax at any row count in clusters this small
CLUSTER_ROW_HALVES_LOG_ALIGNED_CLUSTER = 8  # ... or this small on rows that start on 16 bytes
CLUSTER_ROW_HALVES_BLOCKS_PER_SM = 4  # halves where single_read holds the row in one block
CLUSTER_ROW_HALVES_ROWS_PER_SM = 2
CLUSTER_ROW_HALVES_BYTES_PER_SM = 3 << 19
CLUSTER_ROW_BACKWARD_ANY_ROWS_CLUSTER = 2
CLUSTER_ROW_BACKWARD_ROWS_PER_SM = 2
# single_read's memory-merged groups ahead of multi_block_smem: float32, small groups, many rounds
MEMORY_MERGE_OVER_SMEM_GROUP = 16
MEMORY_MERGE_OVER_SMEM_ROUNDS = 64


class Decision:
    """A shape on a device, and the plans auto decides by, each computed once when first asked."""

    def __init__(self, shape: Shape, dev: DeviceInfo):
        self.shape, self.dev = shape, dev

    @functools.cached_property
    def warp_rows(self) -> warp_rows.WarpRowPlan | None:
        return warp_rows.plan(self.shape)

    @functools.cached_property
    def single_read(self) -> single_read.ClusterConfig | None:
        """single_read's cluster or memory-merged plan for a forward shape past the warps' rows on sm_90."""
        shape = self.shape
        if shape.backward or self.dev.compute_capability < 90 or self.warp_rows is not None:
            return None
        return single_read.single_read_plan(shape.cols, self.dev, shape.rows, shape.dtype, shape.op)

    @functools.cached_property
    def merged(self) -> single_read.ClusterConfig | None:
        return self.single_read if self.single_read is not None and self.single_read.memory_merge else None

    @functools.cached_property
    def cluster_row(self) -> cluster_row.RowClusterPlan | None:
        return cluster_row.plan(self.shape, self.dev)

    @functools.cached_property
    def multi_block_smem(self) -> multi_block_smem.SmemPlan:
        return multi_block_smem.plan(self.shape, self.dev)

    def plan_of(self, name: str) -> Plan | None:
        """The plan of variant `name` that a rule decided by, where one did (its launch takes it as is)."""
        return self.__dict__.get(name) if name in ("single_read", "cluster_row", "multi_block_smem") else None


def cluster_row_leads(d: Decision) -> bool:
    """Whether cluster_row goes first: forward rows past the warps' and backward rows past
    CLUSTER_ROW_BACKWARD_MIN_ROW_BYTES that its 256-thread blocks hold (its first two block shapes);
    float32 forward at any row count; halves where single_read would take a cluster, or a memory-merged
    group of cluster_row's own cluster and blocks per SM holding no more, else by blocks per SM,
    alignment, rows per SM and bytes per SM; the float32 backward in small clusters, on aligned rows,
    or for few rows at two blocks per SM or more; the halves' backward where dy shares y's alignment,
    in 256-thread blocks or for fewer rows than SMs."""
    shape, dev = d.shape, d.dev
    if d.warp_rows is not None or shape.backward and shape.cols * shape.itemsize <= CLUSTER_ROW_BACKWARD_MIN_ROW_BYTES:
        return False
    plan = d.cluster_row
    shapes = cluster_row.BLOCK_SHAPES[2 if shape.backward else 1, shape.itemsize]
    if plan is None or not any(plan.threads == t and plan.vpt <= v for t, v in shapes[:2]):
        return False
    if shape.backward and shape.itemsize != ITEMSIZE:
        return single_read.shares_alignment(shape) and (plan.threads == shapes[0][0] or shape.rows < dev.sm_count)
    if shape.backward:
        return plan.cluster <= CLUSTER_ROW_BACKWARD_ANY_ROWS_CLUSTER or rows_aligned(shape) or (
            shape.rows <= CLUSTER_ROW_BACKWARD_ROWS_PER_SM * dev.sm_count and plan.blocks_per_sm > 1)
    if shape.itemsize == ITEMSIZE:
        return True
    held = d.single_read
    if held is not None:
        if held.cluster_dims > 1:
            return True
        if held.memory_merge and (held.cluster, held.blocks_per_sm) == (plan.cluster, plan.blocks_per_sm) and \
                single_read.holds_per_sm(plan) >= single_read.holds_per_sm(held):
            return True
    if plan.blocks_per_sm >= CLUSTER_ROW_HALVES_BLOCKS_PER_SM and (
            shape.op == "softmax" or plan.cluster <= CLUSTER_ROW_HALVES_ANY_ROWS_CLUSTER or
            (plan.cluster <= CLUSTER_ROW_HALVES_LOG_ALIGNED_CLUSTER and rows_aligned(shape))):
        return True
    return shape.rows <= CLUSTER_ROW_HALVES_ROWS_PER_SM * dev.sm_count or (
        rows_aligned(shape) and
        shape.rows * shape.cols * shape.itemsize <= CLUSTER_ROW_HALVES_BYTES_PER_SM * dev.sm_count)


def one_round_of_clusters(d: Decision) -> bool:
    """Whether single_read holds every row in clusters (not a group) in one round of resident clusters."""
    plan = d.single_read
    return plan is not None and not plan.memory_merge and d.shape.rows <= single_read.estimated_groups(plan, d.dev)


def group_pays(d: Decision, names: tuple[str, ...]) -> bool:
    """Whether single_read's memory-merged group pays (memory_merge_pays); ahead of multi_block_smem
    only for float32 in small groups and many rounds."""
    merged, shape = d.merged, d.shape
    pays = single_read.memory_merge_pays(merged, shape.rows, d.dev, shape.itemsize)
    if "multi_block_smem" in names:
        pays = pays and shape.itemsize == ITEMSIZE and merged.cluster <= MEMORY_MERGE_OVER_SMEM_GROUP and \
            single_read.memory_merge_rounds(merged, shape.rows, d.dev) >= MEMORY_MERGE_OVER_SMEM_ROUNDS
    return pays


Order = Callable[[tuple[str, ...]], tuple[str, ...]]


def first(name: str) -> Order:
    return lambda names: (name,) + tuple(n for n in names if n != name)


def without(name: str) -> Order:
    return lambda names: tuple(n for n in names if n != name)


def after_cluster_row(name: str, keep: bool) -> Order:
    """`name` right after a leading cluster_row (else first) where `keep`, else out of the list."""
    def order(names):
        lead = names[:1] if names[:1] == ("cluster_row",) else ()
        return lead + (name,) * keep + tuple(n for n in names[len(lead):] if n != name)
    return order


@dataclass(frozen=True)
class Rule:
    reason: str  # one line: why
    evidence: str  # its section of notes/TUNING.md
    applies: Callable[[Decision, tuple[str, ...]], bool]
    order: Callable[[Decision], Order]


RULES = (
    Rule("multi_block_smem only where its split holds the rows (with companions where they pay), or float32's "
         "one group", "notes/TUNING.md#multi_block_smem-against-the-rest",
         lambda d, names: "multi_block_smem" in names and not multi_block_smem.leads(d.shape, d.dev,
                                                                                      d.multi_block_smem),
         lambda d: without("multi_block_smem")),
    Rule("halves past a cluster's reach: single_read first where one round of its clusters holds every row",
         "notes/TUNING.md#multi_block_smem-against-the-rest",
         lambda d, names: "multi_block_smem" in names and d.shape.itemsize != ITEMSIZE and one_round_of_clusters(d),
         lambda d: first("single_read")),
    Rule("short forward rows: a block of warps per row, the row in registers (single_read_warp)",
         "notes/TUNING.md#warp-rows",
         lambda d, names: d.warp_rows is not None,
         lambda d: first("single_read")),
    Rule("cluster_row first wherever it holds the row in 256-thread blocks (cluster_row_leads)",
         "notes/TUNING.md#cluster_row-first",
         lambda d, names: cluster_row_leads(d),
         lambda d: first("cluster_row")),
    Rule("single_read's memory-merged group after cluster_row where it pays, else not at all",
         "notes/TUNING.md#memory-merged-groups-against-the-rest",
         lambda d, names: d.merged is not None,
         lambda d: lambda names: after_cluster_row("single_read", group_pays(d, names))(names)),
)


def decide(shape: Shape, dev: DeviceInfo) -> list[tuple[Variant, Plan | None]]:
    """The variants to try for this shape on this device, best first, each with the plan the
    rules decided by (None: the variant's own plan for the shape)."""
    table = BACKWARD_ROW_TABLE if shape.backward else ROW_TABLE
    names = next(names for limit, names in table[shape.itemsize] if shape.cols * shape.itemsize <= limit)
    d = Decision(shape, dev)
    for rule in RULES:
        if rule.applies(d, names):
            names = rule.order(d)(names)
    names = names + tuple(n for n in FALLBACKS if n not in names)
    chosen = [REGISTRY[n] for n in names]
    return [(v, d.plan_of(v.name)) for v in chosen
            if v.unsupported_reason(shape.cols, dev, shape.dtype, shape.op) is None]


def preferences(shape: Shape, dev: DeviceInfo) -> tuple[Variant, ...]:
    """variant="auto": the variants to try for this shape on this device, best first."""
    return tuple(v for v, _ in decide(shape, dev))


def choose(rows: int, cols: int, dev: DeviceInfo, dtype: str = "float32", op: str = "softmax") -> Variant:
    """The variant auto would try first for rows x cols contiguous rows (no launch is prepared).
    Raises nothing: two_pass and multi_block run every shape, dtype and op on every device."""
    shape = Shape(rows, cols, cols, cols, itemsize=DTYPES[dtype], dtype=dtype, op=op,
                  ld_g=cols if op in BACKWARD_OPS else 0)  # dy contiguous too, as y
    return preferences(shape, dev)[0]
