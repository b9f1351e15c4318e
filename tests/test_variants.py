"""The registry, traffic model and launch rules: pure functions, no GPU."""

import importlib
import math

import cupy
import pytest
from devices import A100, H200, SINGLE_READ_CONFIGS, SMALL_HOPPER

import softmax_lab
from softmax_lab.variants import auto as AUTO
from softmax_lab.variants import base as BASE
from softmax_lab.variants import choose, get_variant
from softmax_lab.variants import cluster_row as CR
from softmax_lab.variants import multi_block_smem as MBS
from softmax_lab.variants import resources as RES
from softmax_lab.variants import single_read as SR

V = importlib.import_module("softmax_lab.variants")  # the package: softmax_lab.variants is also the registry's function

HEADLINE = (4096, 393216)


def test_registry_order_and_names():
    names = list(softmax_lab.variants())
    assert names[:3] == ["three_pass", "two_pass", "multi_block"]  # the seed's, first: the lab's comparison
    assert len(set(names)) == len(names) and all(get_variant(n).name == n for n in names)
    for name, v in softmax_lab.variants().items():
        assert v.name == name and v.source.endswith(".cu") and v.entries and v.summary and v.launch_rule


def test_traffic_model_for_the_headline_shape():
    gb = {n: v.traffic_bytes(*HEADLINE) / 1e9 for n, v in softmax_lab.variants().items()}
    assert gb["single_read"] == pytest.approx(12.88, abs=0.01)
    assert gb["two_pass"] == pytest.approx(19.33, abs=0.01) and gb["multi_block"] == gb["two_pass"]
    assert gb["three_pass"] == pytest.approx(25.77, abs=0.01)
    assert get_variant("three_pass").bytes_per_element() == 16


def test_single_read_needs_hopper():
    assert "compute capability 9.0" in get_variant("single_read").unsupported_reason(1024, A100)
    assert get_variant("single_read").unsupported_reason(393216, H200) is None
    assert get_variant("two_pass").unsupported_reason(10**9, A100) is None


def test_single_read_limit_and_refusal():
    limit = get_variant("single_read").max_cols(H200)
    assert limit >= 786432
    assert "at most" in get_variant("single_read").unsupported_reason(limit + 1, H200)
    assert SR.single_read_config(limit + 1, H200) is None
    caps = [c.capacity_floats for c in SINGLE_READ_CONFIGS]
    assert caps == sorted(caps)


def test_line_shift_only_where_a_slice_starts_off_a_line():
    def shape(cols, rows=4096, x_offset=0, ld=None, dtype="float32"):
        return V.Shape(rows, cols, ld or cols, ld or cols, x_offset, 0, V.DTYPES[dtype], dtype)

    plan = SR.single_read_config(128256, H200, 4096)  # 4 x 512 x 16: rows and slices on 128-byte lines
    assert plan.cluster == 4 and not plan.line_shift
    assert SR.line_shifted(plan, shape(128256), H200) == plan
    for misaligned in (shape(128259), shape(128256, x_offset=64), shape(128256, ld=128260)):
        shifted = SR.line_shifted(plan, misaligned, H200)
        assert shifted.line_shift and shifted.defines()["SR_LINE_SHIFT"] == 1
        assert shifted.smem_bytes == plan.smem_bytes + 128 * plan.stages and shifted.label().endswith("s")
    assert SR.line_shifted(plan, shape(128256, rows=1, ld=128260), H200) == plan  # one row: its own stride
    # rows on lines but slices of 100000 bytes, a quarter of a 400000-byte row
    assert SR.line_shifted(SR.single_read_config(100000, H200, 4096), shape(100000), H200).line_shift
    headline = SR.single_read_config(393216, H200, 4096)  # float32 at 24 vectors a thread: ptxas spills
    assert headline.vpt == SR.MAX_VPT and SR.line_shifted(headline, shape(393215), H200) == headline
    halves = SR.single_read_plan(262147, H200, 4096, "float16", "log_softmax")
    assert SR.line_shifted(halves, shape(262147, dtype="float16"), H200).line_shift


def test_backward_line_shift_takes_both_rows_and_its_smem_doubles():
    def shape(cols, x_offset=0, g_offset=0, ld_g=None, dtype="bfloat16"):
        return V.Shape(4096, cols, cols, cols, x_offset, 0, V.DTYPES[dtype], dtype, "softmax_backward",
                       ld_g or cols, g_offset)

    plan = SR.single_read_config(128256, H200, 4096, 2, arrays=2)  # 4 x 512 x 8 pairs: slices on lines
    assert plan.cluster == 4 and SR.line_shifted(plan, shape(128256), H200) == plan
    for off_line in (shape(128259), shape(128256, x_offset=64, g_offset=64), shape(128256, g_offset=32),
                     shape(128256, ld_g=128264),  # y on lines, dy not (an offset of 32 bytes, a stride of 16)
                     shape(151936)):  # rows on lines, slices of 4748 vectors not
        shifted = SR.line_shifted(plan, off_line, H200)
        assert shifted.line_shift and shifted.defines()["SR_LINE_SHIFT"] == 1
        assert shifted.smem_bytes == plan.smem_bytes + 2 * 128 * plan.stages  # 7 vectors more for y and for dy
    # float32 pairs at MAX_VPT / 2 keep the plain build (log_softmax's spilled with the shift)
    wide_pairs = SR.ClusterConfig(8, 512, SR.MAX_VPT // 2, 1, 1, 2)
    assert SR.line_shifted(wide_pairs, shape(196607, dtype="float32"), H200) == wide_pairs


# Awkward lengths: LLM vocabularies, primes, powers of two and their neighbours.
LENGTHS = sorted({1025, 1031, 2047, 4096, 4099, 8191, 16384, 16385, 32000, 50257, 65536, 65537, 100003, 128256,
                  151936, 200003, 262144, 262147, 393216, 393217, 500000, 700001} | set(range(5000, 786432, 37717)))


def _registers(c: SR.ClusterConfig) -> int:
    return RES.register_budget(c.threads, c.blocks_per_sm)


@pytest.mark.parametrize("dev", [H200, SMALL_HOPPER], ids=["h200", "small"])
@pytest.mark.parametrize("rows", [1, 32, 132, 512, 4096, 1 << 20])
def test_derived_plans_hold_fill_and_fit(dev, rows):
    for cols in LENGTHS:
        if cols > SR.single_read_limit(dev):  # past a cluster: memory-merged groups (single_read_plan)
            assert SR.single_read_config(cols, dev, rows) is None
            continue
        c = SR.single_read_config(cols, dev, rows)
        vecs = -(-cols // 4)
        assert c is not None, (cols, rows)
        assert c.cluster in (1, 2, 4, 8, 16)
        assert c.threads % 32 == 0 and c.threads <= 1024
        assert -(-vecs // c.cluster) <= c.threads * c.vpt  # the row fits
        # and fills the configuration (whole warps cannot fill slices of a few hundred vectors exactly)
        assert vecs / c.capacity_vecs >= (0.9 if vecs >= 512 else 0.85), (cols, rows, c)
        smem = SR._block_smem(c.threads, c.vpt, c.stages) + SR.SMEM_RESERVED
        assert smem <= min(dev.smem_optin_bytes, dev.smem_per_sm_bytes // c.blocks_per_sm)
        assert 4 * c.vpt + SR.OTHER_REGISTERS <= _registers(c)


@pytest.mark.parametrize("dev", [H200, SMALL_HOPPER], ids=["h200", "small"])
@pytest.mark.parametrize("dtype, op", [("bfloat16", "softmax"), ("float16", "softmax"), ("bfloat16", "log_softmax")])
def test_half_plans_fill_all_but_each_threads_last_vector(dev, dtype, op):
    """single_read's halves load and store a full block's vectors but each thread's last without
    comparing indices (eb30014): the derived cluster plans must leave at most the last vector of
    each thread past the slice, or they lose that path (not correctness: the compares remain)."""
    for cols in LENGTHS + [50257, 100003, 151936, 200003, 262144, 393216]:
        for rows in (132, 4096):
            c = SR.single_read_plan(cols, dev, rows, dtype, op)
            if c is None or c.memory_merge:
                continue
            per_block = -(-RES.row_vecs(cols, 2) // c.cluster)
            assert per_block >= (c.vpt - 1) * c.threads, (cols, rows, c)


@pytest.mark.parametrize("rows, cols, label", [
    # the plans measured best or within 2 % of the best on the H200 (runs 5 and 6)
    (4096, 393216, "8x512x24x1x1"), (132, 393216, "8x512x24x1x1"), (16384, 32000, "1x512x16x1x1"),
    (4096, 128256, "4x512x16x1x1"), (512, 100003, "4x512x13x1x1"),
    (8192, 50257, "2x512x13x1x1"), (32, 393216, "16x512x12x1x1"),
    # 512-thread blocks for the whole path, 2026-12-02 (notes/TUNING.md#the-whole-path):
    # 1.06, 1.09, 1.09 against 4x608x16's 1.07, 8x608x16's 1.10, 8x544x16's 1.12
    (4096, 151936, "4x512x19x1x1"), (4096, 300001, "8x512x19x1x1"), (4096, 262147, "8x512x17x1x1"),
])
def test_plans_on_the_h200_are_the_measured_ones(rows, cols, label):
    assert SR.single_read_config(cols, H200, rows).label() == label


def test_clusters_have_one_stage():
    for cols in LENGTHS:
        for c in SR.single_read_candidates(cols, H200):
            assert c.cluster == 1 or c.stages == 1


def test_clusters_of_8_or_more_push_their_merge_and_smaller_ones_publish_it():
    """SR_PUSHED_MERGE where the cluster has 8 blocks or more, for the forward's clusters only."""
    for cluster, pushed in ((2, False), (4, False), (8, True), (16, True)):
        c = SR.ClusterConfig(cluster, 256, 4, 1)
        assert c.pushed_merge == pushed and ("SR_PUSHED_MERGE" in c.defines()) == pushed
    assert not SR.ClusterConfig(8, 256, 4, 1, arrays=2).pushed_merge  # the backward publishes its dot
    assert not SR.ClusterConfig(8, 256, 4, 1, memory_merge=True).pushed_merge
    assert SR.single_read_plan(393216, H200, 4096, "bfloat16", "softmax").pushed_merge
    assert not SR.single_read_plan(151936, H200, 4096, "bfloat16", "softmax").pushed_merge


def test_old_table_lengths_fill_better():
    # the hand table filled 49 % at 32000 and 128256 columns
    for cols in (32000, 128256):
        c = SR.single_read_config(cols, H200, 4096)
        assert -(-cols // 4) / c.capacity_vecs > 0.95


@pytest.mark.parametrize("bad", [dict(cluster=3), dict(cluster=12), dict(cluster=32), dict(cluster=0),
                                 dict(threads=100), dict(threads=2048), dict(vpt=0), dict(stages=0),
                                 dict(vpt=40), dict(threads=1024, vpt=16)])
def test_cluster_config_rejects_what_the_kernel_cannot_run(bad):
    args = dict(cluster=8, threads=512, vpt=8, stages=1) | bad
    with pytest.raises(ValueError):
        SR.ClusterConfig(**args)


# ------------------------------------------------------------ memory-merged groups
@pytest.mark.parametrize("bad", [dict(cluster=1), dict(cluster=129), dict(arrays=2), dict(threads=512, vpt=40),
                                 dict(threads=100)])
def test_memory_merged_config_rejects_what_the_kernel_cannot_run(bad):
    args = dict(cluster=33, threads=128, vpt=8, stages=1, memory_merge=True) | bad
    with pytest.raises(ValueError):
        SR.ClusterConfig(**args)


def test_memory_merged_config_builds_plain_blocks_of_any_group_size():
    c = SR.ClusterConfig(33, 512, 16, 1, memory_merge=True)  # not a power of two, past a cluster's 16
    assert c.defines()["SR_CLUSTER"] == 1 and c.defines()["SR_MEMORY_MERGE"] == 1
    assert c.label() == "33x512x16x1x1m" and c.capacity_vecs == 33 * 512 * 16
    assert "SR_MEMORY_MERGE" not in SR.ClusterConfig(16, 512, 16, 1).defines()


@pytest.mark.parametrize("dev", [H200, SMALL_HOPPER], ids=["h200", "small"])
@pytest.mark.parametrize("itemsize", [4, 2])
@pytest.mark.parametrize("rows", [1, 32, 132, 4096])
def test_memory_merged_plans_hold_fill_and_fit(dev, itemsize, rows):
    for cols in (393217, 500001, 786433, 1 << 20, 3_000_017, 1 << 22, 6_000_000):
        c = SR.memory_merge_config(cols, dev, rows, itemsize)
        if c is None:
            assert cols * itemsize > dev.sm_count * SR._block_vecs(dev) * 16
            continue
        vecs = -(-cols * itemsize // 16)
        shape = V.Shape(rows, cols, cols, cols, itemsize=itemsize, dtype="float32" if itemsize == 4 else "bfloat16")
        assert c.memory_merge and not c.wide and c.stages == 1
        assert 2 <= c.cluster <= min(c.threads, dev.sm_count * c.blocks_per_sm)  # a group can be resident at once
        assert c.cluster * SR.memory_merge_slice(c, shape) >= vecs
        assert SR.memory_merge_slice(c, shape) <= c.threads * c.vpt  # every slice fits its block
        assert vecs / c.capacity_vecs >= SR.MIN_FILL, (cols, rows, c)
        assert SR._block_smem(c.threads, c.vpt, 1) + SR.SMEM_RESERVED <= \
            min(dev.smem_optin_bytes, dev.smem_per_sm_bytes // c.blocks_per_sm)
        assert SR._registers_needed(c.vpt, c.cluster, itemsize) <= _registers(c)
        assert itemsize != 4 or c.vpt not in SR.MEMORY_MERGE_FLOAT_SPILLING_VPT


def test_memory_merged_groups_pay_with_long_slices_small_groups_and_many_rounds():
    assert SR.memory_merge_pays(SR.ClusterConfig(22, 512, 24, 1, memory_merge=True), 256, H200)
    assert not SR.memory_merge_pays(SR.ClusterConfig(22, 512, 24, 1, memory_merge=True), 32, H200)  # 6 rounds
    assert not SR.memory_merge_pays(SR.ClusterConfig(33, 512, 16, 1, memory_merge=True), 4096, H200)  # short slices
    assert not SR.memory_merge_pays(SR.ClusterConfig(44, 512, 24, 1, memory_merge=True), 4096, H200)  # a large group


def test_single_read_holds_longer_forward_rows_than_a_cluster():
    sr = get_variant("single_read")
    for dtype in ("float32", "bfloat16"):
        assert sr.max_cols(H200, dtype) > SR.single_read_limit(H200, dtype)
        assert sr.max_cols(H200, dtype, "softmax_backward") == SR.single_read_limit(H200, dtype, "softmax_backward")
        assert SR.single_read_plan(sr.max_cols(H200, dtype), H200, 8, dtype).memory_merge
        assert SR.single_read_plan(sr.max_cols(H200, dtype) + 64, H200, 8, dtype) is None


@pytest.mark.parametrize("rows, cols, first", [
    (4096, 500000, "single_read"), (1024, 1 << 20, "multi_block_smem"), (32, 1 << 20, "multi_block_smem"),
    (128, 1 << 22, "multi_block_smem"), (64, 600000, "multi_block_smem"), (4096, 393216, "cluster_row"),
    (1300, 500000, "single_read"),  # groups of 11, 109 rounds
    (396, 600000, "multi_block_smem"),  # groups of 13, 40 rounds: below MEMORY_MERGE_OVER_SMEM_ROUNDS
    (1024, 600000, "single_read"),  # 103 rounds
])
def test_auto_takes_memory_merged_groups_where_they_pay(rows, cols, first):
    shape = V.Shape(rows, cols, cols, cols)
    prefs = [v.name for v in V.preferences(shape, H200)]
    assert prefs[0] == first
    plan = SR.single_read_plan(cols, H200, rows)
    if plan.memory_merge and not SR.memory_merge_pays(plan, rows, H200):
        assert "single_read" not in prefs


@pytest.mark.parametrize("rows, cols, first", [
    (4096, 786432, None),  # what a cluster holds keeps its rules (cluster_row or single_read)
    (4096, 786433, "multi_block_smem"), (132, 1 << 22, "multi_block_smem"), (1, 1 << 21, "multi_block_smem"),
    (1, 1 << 20, "single_read"), (7, 1 << 20, "single_read"),  # one round of 7 resident clusters of 16
    (8, 1 << 20, "multi_block_smem"),  # two rounds
    (1024, 1 << 20, "multi_block_smem"),  # ahead of the groups (11 blocks, 85 rounds) for halves
    (132, 132 * 32768 + 1, "multi_block_smem"), (132, 7_569_408, "multi_block_smem"),  # the longest its split holds
    (132, 7_569_409, "multi_block_smem"), (6, 1 << 23, "multi_block_smem"),  # companions: 2 rows held, three
    (16, 22_000_000, "multi_block_smem"),  # rings of rows; 1.375 rows held (768 chunks, 384 held)
    (5, 1 << 23, "multi_block_l2"), (132, 24_000_000, "multi_block_l2"),  # 2.5 rings; 1.26 rows (the one group is
    (132, 30_277_633, "multi_block_l2"),  # not taken for halves); past what companions cover
])
@pytest.mark.parametrize("dtype, op", [("bfloat16", "softmax"), ("float16", "log_softmax")])
def test_auto_takes_multi_block_smem_split_for_long_half_rows(rows, cols, first, dtype, op):
    prefs = [v.name for v in V.preferences(V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, op), H200)]
    assert prefs[0] == first if first else prefs[0] in ("cluster_row", "single_read")
    assert V.preferences(V.Shape(rows, cols, cols, cols, 0, 0, 2, dtype, op), A100)[0].name != "multi_block_smem"


def test_auto_never_fails_to_offer_a_variant():
    for dev in (H200, SMALL_HOPPER, A100):
        for cols in [1, 1024, 1025, 4097, 65537, 393216, 786432, 786433, 1 << 22]:
            prefs = V.preferences(V.Shape(7, cols, cols, cols), dev)
            assert prefs and prefs[-1].name in V.FALLBACKS


@pytest.mark.parametrize("cols, on_h200, on_a100", [
    (1, "single_read", "three_pass"),
    (1024, "single_read", "three_pass"),
    (1025, "single_read", "three_pass"),
    (2048, "single_read", "three_pass"),  # a warp per row up to 8 KB
    (2049, "single_read", "three_pass"),  # blocks of two warps a row up to 12 KB (WARP_ROWS_BYTES)
    (3072, "single_read", "three_pass"),
    (3073, "cluster_row", "three_pass"),  # forward rows past the warps'
    (4096, "cluster_row", "three_pass"),
    (4097, "cluster_row", "two_pass"),  # a row of one block
    (80000, "cluster_row", "multi_block_l2"),  # clusters of 8 at four blocks per SM
    (100003, "cluster_row", "multi_block_l2"),  # float32 forward: cluster_row wherever it holds the row
    (151936, "cluster_row", "multi_block_l2"),
    (393216, "cluster_row", "multi_block_l2"),
    (393217, "single_read", "multi_block_l2"),  # a memory-merged group of 10 in place of a cluster of 16
    (786433, "multi_block_smem", "multi_block_l2"),  # the group's slices are too short to pay (memory_merge_pays)
    (1 << 20, "multi_block_smem", "multi_block_l2"),  # groups of 22 blocks, larger than a cluster
    (1 << 22, "multi_block_smem", "multi_block_l2"),  # groups of 132 blocks do not pay; chunks held (sm_90)
    (1 << 23, "multi_block_smem", "multi_block_l2"),  # half its chunks held (1.8 rows), a companion each
    (12_000_000, "multi_block_l2", "multi_block_l2"),  # held chunks of 1.26 rows: companions behind
    (1 << 24, "multi_block_l2", "multi_block_l2"),  # longer than companions cover
])
def test_auto_rules(cols, on_h200, on_a100):
    assert choose(4096, cols, H200).name == on_h200
    assert choose(4096, cols, A100).name == on_a100


def test_multi_block_smem_block_shape_follows_the_rows_its_slots_hold():
    assert MBS.slots_held(H200, 448, 8, 1) == 4 and MBS.slots_held(H200, 512, 8, 1) == 3
    assert MBS.slots_held(H200, 512, 7, 1) == 4  # the split's ring: 4 x 56 KB against 3 x 64 KB
    assert MBS.block_rule(1 << 20, 4, H200) == (512, 8, 1, True, None)  # 4 MB rows: 396 slots of 64 KB hold 6.2
    assert MBS.block_rule(1_572_864, 4, H200) == (512, 7, 1, True, None)  # 6 MB: 4.1 in 396, 4.8 in 528
    assert MBS.block_rule(1 << 21, 4, H200) == (512, 7, 1, True, None)  # 8 MB: 3.6
    assert MBS.block_rule(3 << 20, 4, H200) == (512, 7, 1, True, None)  # 12 MB: 2.4
    assert MBS.block_rule(3 << 20, 4, H200, "log_softmax") == (448, 8, 1, False, None)  # float32 log: 3 rows
    assert MBS.block_rule(1 << 21, 4, H200, "log_softmax") == (512, 7, 1, True, None)
    longest = 132 * 4 * 512 * 7 * 4 // 2  # float32 columns of two rows in the split's ring
    assert MBS.block_rule(longest, 4, H200) == (512, 7, 1, True, None)
    # past it the split takes companions (264 held chunks, half the ring's 528) where the rows fill
    # three rings, else the one group while it holds a row
    assert MBS.block_rule(longest + 1, 4, H200) == (512, 7, 1, True, 264)  # 1.99 rows
    assert MBS.block_rule(1 << 22, 4, H200) == (512, 7, 1, True, 264)  # 16 MB: 1.84 rows
    assert MBS.block_rule(1 << 22, 4, H200, rows=6) == (512, 7, 1, True, 264)  # three rings of two rows
    assert MBS.block_rule(1 << 22, 4, H200, rows=5) == (448, 8, 1, False, None)
    assert MBS.block_rule(1 << 22, 4, H200, "log_softmax") == (512, 7, 1, True, 264)
    assert MBS.block_rule(3 << 20, 4, H200, "log_softmax", 6) == (448, 8, 1, False, None)  # 2.4: whole rows
    # past the one group's row: half the row's chunks held, while they hold 1.3 rows
    assert MBS.block_rule(8_388_608, 4, H200) == (512, 7, 1, True, 293)  # 586 chunks: 1.8 rows
    assert MBS.block_rule(11_000_000, 4, H200, rows=5) == (512, 7, 1, True, 384)  # 1.375 rows
    assert MBS.block_rule(1 << 20, 2, H200) == (512, 8, 1, True, None)  # halves by bytes: 2 MB rows
    assert MBS.block_rule(1 << 22, 2, H200) == (512, 7, 1, True, None)  # 8 MB: 3.1 in 396, 3.6 in 528
    assert MBS.block_rule(2 * longest, 2, H200, "log_softmax") == (512, 7, 1, True, None)  # halves: 2 rows
    assert MBS.block_rule(2 * longest + 1, 2, H200) == (512, 7, 1, True, 264)
    assert MBS.block_rule(2 * longest + 1, 2, H200, rows=5) == (448, 8, 1, False, None)
    a100 = MBS.block_rule(1 << 21, 4, A100)  # 163 KB: two slots of 8 vectors hold more than two of 7
    assert a100[1] == 8 and MBS.slots_held(A100, 512, 8, 1) == MBS.slots_held(A100, 512, 7, 1)
    mbs = get_variant("multi_block_smem")
    # the longest row: a ring's worth of held chunks (132 x 4 of 512 x 7 vectors), a companion each
    assert mbs.max_cols(H200) == 2 * 132 * 4 * 512 * 7 * 4 and mbs.max_cols(H200, "bfloat16") == 2 * mbs.max_cols(H200)
    assert mbs.unsupported_reason(1 << 20, H200) is None
    assert mbs.unsupported_reason(mbs.max_cols(H200) + 1, H200)
    assert mbs.unsupported_reason(1 << 20, A100)  # bulk copies: sm_90
    assert mbs.unsupported_reason(1 << 20, H200, "float32", "softmax_backward")


def test_multi_block_smem_refills_early_where_its_split_holds_few_rows():
    def early(cols, itemsize=4, op="softmax", rows=1 << 20):
        block = MBS.block_rule(cols, itemsize, H200, op, rows)
        return MBS.early_fill(cols, itemsize, H200, *block[:4])

    assert MBS.rows_held(3 << 20, 4, H200, 512, 7, 1) == pytest.approx(132 * 4 / 220)  # 2.4
    assert early(3 << 20) and early(3_600_000) and early(2_600_000)  # 2.4, 2.1, 2.9 rows held
    assert not early(2_400_000) and not early(1 << 21) and not early(1 << 20)  # 3.14, 3.6, 6.2 rows
    assert not early(1 << 22, rows=5)  # the one group (1.84 rows): its writes keep the refill after the stores
    assert early(1 << 22)  # the split with companions there
    assert not early(3 << 20, op="log_softmax")  # float32 log_softmax there: the one group
    assert early(6_291_456, 2) and early(7_400_000, 2) and not early(1 << 22, 2)  # bf16: 2.4, 2.04, 3.6 rows


def test_forward_rows_go_to_cluster_row_wherever_single_read_needs_a_cluster():
    """float32 at any number of rows; the halves where single_read's plan is a cluster of two or
    more blocks, and by their own rule where single_read's one block holds the row."""
    for rows in (1056, 4096, 1 << 20):
        assert choose(rows, 100003, H200).name == "cluster_row"
        assert choose(rows, 151936, H200, "bfloat16").name == "cluster_row"
        assert SR.single_read_plan(100003, H200, rows, "bfloat16").cluster > 1
        assert choose(rows, 100003, H200, "float16", "log_softmax").name == "cluster_row"
    assert SR.single_read_plan(50257, H200, 4096, "bfloat16").cluster == 1
    assert CR.cluster_row_plan(50257, H200, 4096, 2).blocks_per_sm < AUTO.CLUSTER_ROW_HALVES_BLOCKS_PER_SM
    assert choose(4096, 50257, H200, "bfloat16").name == "single_read"
    assert choose(132, 50257, H200, "bfloat16").name == "cluster_row"  # up to two rows per SM


# ------------------------------------------------------------------ cluster_row
@pytest.mark.parametrize("dev", [H200, SMALL_HOPPER], ids=["H200", "small"])
@pytest.mark.parametrize("itemsize, arrays", [(4, 1), (2, 1), (4, 2), (2, 2)])
def test_cluster_row_plans_hold_the_row_within_a_vector_per_thread(dev, itemsize, arrays):
    limit = CR.max_cols(dev, "float32" if itemsize == 4 else "bfloat16",
                                 "softmax_backward" if arrays == 2 else "softmax")
    for cols in (4097, 8191, 32000, 50257, 65536, 100003, 128256, 151936, 212993, 262147, 393216, 393217, limit,
                 limit + 1):
        for rows in (1, 7, 132, 4096, 1 << 20):
            plan = CR.cluster_row_plan(cols, dev, rows, itemsize, arrays)
            if cols > limit:
                assert plan is None
                continue
            vecs = -(-cols * itemsize // 16)
            shapes = CR.BLOCK_SHAPES[arrays, itemsize]
            assert plan.cluster in (1, 2, 4, 8, 16)
            # the first block shape whose cluster of 16 holds the row
            t, v = next((t, v) for t, v in shapes if vecs <= 16 * t * v)
            assert plan.threads == t and plan.vpt <= v
            per_block = -(-vecs // plan.cluster)
            assert plan.threads * (plan.vpt - 1) < per_block <= plan.threads * plan.vpt  # the block is filled
            budget = RES.REGISTERS_PER_SM // (plan.threads * plan.blocks_per_sm)
            registers = CR.REGISTERS_PER_VECTOR[arrays, itemsize] * plan.vpt + CR.OTHER_REGISTERS[arrays, itemsize]
            assert registers + (CR.ONE_BLOCK_REGISTERS if plan.cluster == 1 else 0) <= budget


def test_cluster_row_spreads_few_rows_over_every_sm():
    many, few = (CR.cluster_row_plan(65536, H200, rows) for rows in (4096, 8))
    assert few.cluster > many.cluster and 8 * few.cluster >= min(H200.sm_count, 8 * 16) // 2
    assert CR.cluster_row_plan(65536, A100, 8) is None  # clusters need sm_90


def test_cluster_row_loads_evict_last_but_for_fewer_rows_than_sms():
    assert not CR.cluster_row_plan(32000, H200, 4096).stream_loads
    assert not CR.cluster_row_plan(151936, H200, 4096).stream_loads  # 16 x 256 x 10, four blocks per SM
    assert CR.cluster_row_plan(32000, H200, 131).stream_loads  # fewer rows than SMs
    assert not CR.cluster_row_plan(32000, H200, 132).stream_loads
    for cols in (262144, 300000, 393216):  # 256-thread blocks at two per SM, evict-last
        wide = CR.cluster_row_plan(cols, H200, 132)
        assert (wide.cluster, wide.threads, wide.blocks_per_sm, wide.stream_loads) == (16, 256, 2, False)
    assert CR.cluster_row_plan(262144, H200, 32).stream_loads  # fewer rows than SMs
    assert not CR.cluster_row_plan(65536, H200, 8, arrays=2).stream_loads  # the backward: always evict-last
    assert CR.cluster_row_plan(32000, H200, 4096).defines().get("CR_STREAM_LOADS", 0) == 0
    assert CR.cluster_row_plan(32000, H200, 8).defines()["CR_STREAM_LOADS"] == 1


def test_cluster_row_has_no_plan_before_hopper():
    assert "compute capability 9.0" in get_variant("cluster_row").unsupported_reason(65536, A100)


@pytest.mark.parametrize("rows, cols, dtype, op, first", [
    (132, 151936, "float32", "softmax", "cluster_row"),
    (684, 151936, "float32", "softmax", "cluster_row"),
    (32, 65536, "bfloat16", "log_softmax", "cluster_row"),
    (4096, 32000, "bfloat16", "softmax", "cluster_row"),  # clusters of 2: any number of rows
    (1 << 20, 4097, "float32", "softmax", "cluster_row"),
    (8192, 12000, "float32", "softmax_backward", "cluster_row"),
    (4096, 32000, "float32", "softmax", "cluster_row"),  # float32 forward: any number of rows
    (1 << 20, 80000, "float32", "softmax", "cluster_row"),
    (1 << 20, 100003, "float32", "softmax", "cluster_row"),
    (4096, 128256, "float32", "softmax", "cluster_row"),
    (4096, 151936, "float32", "softmax", "cluster_row"),
    (4096, 65536, "bfloat16", "softmax", "cluster_row"),  # halves: single_read's plan a cluster
    (4096, 65536, "float16", "log_softmax", "cluster_row"),
    (4096, 128256, "float16", "log_softmax", "cluster_row"),
    (4096, 128255, "float16", "log_softmax", "cluster_row"),  # odd rows too
    (4096, 100003, "bfloat16", "log_softmax", "cluster_row"),
    (2048, 262144, "bfloat16", "log_softmax", "cluster_row"),  # and clusters of 16
    (1 << 20, 262144, "bfloat16", "softmax", "cluster_row"),
    (4096, 151936, "bfloat16", "softmax", "cluster_row"),  # three blocks per SM
    (4096, 393216, "bfloat16", "softmax", "cluster_row"),
    (4096, 100003, "float16", "log_softmax", "cluster_row"),  # two
    (264, 50257, "bfloat16", "softmax", "cluster_row"),  # single_read's one block: up to 2 rows per SM
    (265, 50257, "bfloat16", "softmax", "single_read"),  # then not on odd lengths
    (528, 50256, "bfloat16", "softmax", "cluster_row"),  # up to 1.5 MiB per SM of aligned rows
    (1 << 14, 20000, "bfloat16", "softmax", "single_read"),
    (132, 2048, "float32", "softmax", "single_read"),  # short rows keep their rules: warps per row
    (132, 3072, "float32", "softmax", "single_read"),
    (132, 4096, "float32", "softmax", "cluster_row"),  # but forward rows past the warps'
    (132, 4096, "float32", "softmax_backward", "two_pass"),  # backward rows up to 16 KB stay with two_pass
    (132, 393216, "float32", "softmax", "cluster_row"),  # the wide blocks too
    (265, 393216, "float32", "softmax", "cluster_row"),
    (32, 425984, "float32", "softmax", "multi_block_smem"),  # 512-thread blocks: not first
    (132, 262144, "float32", "softmax", "cluster_row"),
    (132, 300001, "float32", "softmax", "cluster_row"),
    (132, 65536, "float32", "softmax_backward", "cluster_row"),  # backward: rows on 16 bytes, any number
    (133, 65536, "float32", "softmax_backward", "cluster_row"),
    (1056, 65536, "float32", "softmax_backward", "cluster_row"),
    (132, 50257, "float32", "softmax_backward", "cluster_row"),  # odd rows, two cluster_row blocks per SM:
    (264, 100003, "float32", "log_softmax_backward", "cluster_row"),  # up to two rows per SM
    (265, 100003, "float32", "log_softmax_backward", "single_read"),
    (265, 50257, "float32", "softmax_backward", "single_read"),
    (4096, 151936, "float32", "softmax_backward", "cluster_row"),
    (4096, 196608, "float32", "log_softmax_backward", "cluster_row"),
    (4096, 196609, "float32", "softmax_backward", "cluster_row"),  # float rows past 768 KB
    (132, 151936, "bfloat16", "softmax_backward", "cluster_row"),  # halves' backward: 256-thread blocks
    (4000, 96000, "float16", "log_softmax_backward", "cluster_row"),
    (100, 524288, "bfloat16", "softmax_backward", "cluster_row"),  # 512-thread blocks for fewer rows than SMs
    (264, 300000, "bfloat16", "softmax_backward", "single_read"),  # and not for more
    (132, 8192, "bfloat16", "softmax_backward", "two_pass"),  # 16 KB rows stay with two_pass
    (4096, 393216, "float32", "softmax_backward", "cluster_row"),
    (4096, 393216, "float32", "log_softmax_backward", "cluster_row"),
    (4096, 393217, "float32", "softmax_backward", "multi_block_l2"),
])
def test_auto_takes_cluster_row_for_few_rows_and_long_float_backward_rows(rows, cols, dtype, op, first):
    assert choose(rows, cols, H200, dtype, op).name == first
    assert choose(rows, cols, A100, dtype, op).name != "cluster_row"


def test_auto_takes_cluster_row_for_the_halves_backward_only_where_dy_shares_y_s_alignment():
    def first(g_offset):
        shape = V.Shape(4096, 151936, 151936, 151936, itemsize=2, dtype="bfloat16", op="softmax_backward",
                        ld_g=151936, g_offset=g_offset)
        return V.preferences(shape, H200)[0].name

    assert first(0) == "cluster_row"
    assert first(32) == "cluster_row"  # on 16 bytes, as y
    assert first(2) != "cluster_row"  # dy's vectors element by element: not measured


def test_a_forced_cluster_row_plan_that_does_not_hold_the_row_is_cannot_run():
    with pytest.raises(V.CannotRun, match="does not hold"):
        get_variant("cluster_row").prepare(V.Shape(4, 40000, 40000, 40000), H200, CR.RowClusterPlan(1, 256, 8, 2))


def test_auto_rules_cover_every_length():
    assert set(AUTO.ROW_TABLE) == set(V.DTYPES.values())
    for rules in AUTO.ROW_TABLE.values():
        assert rules[-1][0] == math.inf
        assert all(get_variant(n) for _, names in rules for n in names)


def test_unknown_variant():
    with pytest.raises(ValueError, match="known: 'auto'"):
        get_variant("nope")


@pytest.mark.parametrize("failure", ["none resident", "driver refuses"])
def test_a_plan_the_device_cannot_hold_is_cannot_run(monkeypatch, failure):
    """auto never raises (issue 10 item 6): a cluster that cannot be resident, or
    an occupancy query the driver refuses, is CannotRun, so the api falls back."""
    monkeypatch.setattr(BASE, "cluster_kernel", lambda source, plan, dev, shape: object())

    def groups(config, kernel, dev):
        if failure == "driver refuses":
            raise RuntimeError("cuOccupancyMaxActiveClusters failed with CUresult 1")
        return 0

    monkeypatch.setattr(BASE, "resident_groups", groups)
    with pytest.raises(V.CannotRun):
        get_variant("single_read").prepare(V.Shape(64, 393216, 393216, 393216), H200)
    assert issubclass(V.CannotRun, ValueError)


@pytest.mark.parametrize("failure", ["group too large", "driver refuses"])
def test_a_memory_merged_plan_the_device_cannot_hold_is_cannot_run(monkeypatch, failure):
    """The same for a memory-merged group: more blocks than can be resident at once,
    or an occupancy query the driver refuses."""
    class Kernel:
        kernel = type("Function", (), {"ptr": 0})()

    def occupancy(ptr, threads, smem):
        if failure == "driver refuses":
            raise cupy.cuda.driver.CUDADriverError(1)
        return 0

    monkeypatch.setattr(SR, "cluster_kernel", lambda source, plan, dev, shape: Kernel())
    monkeypatch.setattr(cupy.cuda.driver, "occupancyMaxActiveBlocksPerMultiprocessor", occupancy)
    shape = V.Shape(300, 1 << 20, 1 << 20, 1 << 20)
    assert SR.single_read_plan(shape.cols, H200, shape.rows).memory_merge
    with pytest.raises(V.CannotRun, match="cannot (run|be resident)"):
        get_variant("single_read").prepare(shape, H200)


def test_a_forced_configuration_that_does_not_hold_the_row_is_cannot_run():
    with pytest.raises(V.CannotRun, match="does not hold"):
        get_variant("single_read").prepare(V.Shape(4, 40000, 40000, 40000), H200, SR.ClusterConfig(1, 256, 8, 1))


# ------------------------------------------------------------------ dtypes and ops
def test_traffic_model_takes_the_element_size():
    rows, cols = HEADLINE
    assert get_variant("single_read").traffic_bytes(rows, cols, 2) / 1e9 == pytest.approx(6.44, abs=0.01)
    assert get_variant("two_pass").traffic_bytes(rows, cols, 2) * 2 == get_variant("two_pass").traffic_bytes(rows, cols)
    assert get_variant("three_pass").bytes_per_element(2) == 8


@pytest.mark.parametrize("dtype", list(V.DTYPES))
@pytest.mark.parametrize("op", V.OPS)
def test_row_kernels_take_every_dtype_and_op(dtype, op):
    for name in ("three_pass", "two_pass", "multi_block"):
        assert get_variant(name).unsupported_reason(393216, A100, dtype, op) is None


@pytest.mark.parametrize("cols", [100, 3000, 50_000, 393_216, 2_000_000])
@pytest.mark.parametrize("dtype, op", [("bfloat16", "softmax"), ("float16", "log_softmax"), ("float32", "log_softmax")])
def test_auto_picks_a_variant_that_holds_the_dtype(cols, dtype, op):
    v = choose(8, cols, H200, dtype, op)
    assert dtype in v.dtypes and op in v.ops and v.unsupported_reason(cols, H200, dtype, op) is None
    assert choose(8, cols, A100, dtype, op).name in ("three_pass", "two_pass", "multi_block", "multi_block_l2")


def test_shape_checks_its_dtype_and_op():
    with pytest.raises(ValueError, match="dtype"):
        V.Shape(1, 8, 8, 8, itemsize=4, dtype="float16")
    with pytest.raises(ValueError, match="op"):
        V.Shape(1, 8, 8, 8, itemsize=4, dtype="float32", op="softplus")
    assert V.Shape(1, 8, 8, 8, itemsize=2, dtype="bfloat16") != V.Shape(1, 8, 8, 8, itemsize=2, dtype="float16")
