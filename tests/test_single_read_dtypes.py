"""single_read for float16, bfloat16 and log_softmax without a GPU: every
(dtype, op) build of every derived plan compiles without spills, the plans
scale with the element size, auto's rules by dtype, and a NumPy emulation of
the realigned 16-byte stores of 8 packed halves."""

import sys

import numpy as np
import pytest
from devices import A100, H200, SMALL_HOPPER

import softmax_lab.variants  # noqa: F401  (the module; softmax_lab.variants is also a function)
from softmax_lab import loader
from softmax_lab.variants import cluster_row as CR
from softmax_lab.variants import resources as RES
from softmax_lab.variants import single_read as SR
from softmax_lab.variants import warp_rows as WR

V = sys.modules["softmax_lab.variants"]
BUILDS = [(d, o) for d in V.DTYPES for o in V.OPS if (d, o) != ("float32", "softmax")]
LENGTHS = (2049, 8193, 20000, 32000, 50257, 100003, 128256, 151936, 262147, 393216, 600001, 786432, 1_000_003,
           1_572_864)
ROWS = (1, 132, 4096, 1 << 20)
COMPILED_LENGTHS = (8193, 32000, 100003, 128256, 151936, 393216, 786432)  # the compile checks' grid


def _plans(dtype):
    """The derived plans of the grid on the H200 and on a smaller part (auto's choices)."""
    itemsize = V.DTYPES[dtype]
    found = set()
    for dev in (H200, SMALL_HOPPER):
        for cols in COMPILED_LENGTHS:
            if cols <= SR.single_read_limit(dev, dtype):
                found |= {SR.single_read_config(cols, dev, rows, itemsize) for rows in ROWS}
    return sorted(found, key=lambda c: (c.cluster, c.threads, c.vpt, c.stages, c.blocks_per_sm))


# The halves' log_softmax warp builds of 11 and 12 vectors a lane spill (ptxas, NVRTC 13.0: 8-24
# bytes) and ran at 1.00-1.01 x copy (notes/TUNING.md#vectors-a-lane; at 16 vectors,
# 152 bytes, 1.13-1.16, hence WARP_ROW_HALVES_LOG_VPT): the spill allowed them, in bytes.
HALF_LOG_WARP_SPILL = 24


def _warp_plans(dtype, op):
    """The (warps, vectors a lane) that warp_row_plan gives for `dtype` and `op`: for each number of
    warps the fewest and the most vectors, and 4, 8 and 11-12 where it gives them (registers grow with
    the vectors; compiling all of them took CI 100 s)."""
    isz = V.DTYPES[dtype]
    plans = {WR.warps_and_vpt(cols, isz, op) for cols in range(1, WR.WARP_ROWS_BYTES[isz] // isz + 1)} - {None}
    ends = {(w, f(v for w2, v in plans if w2 == w)) for w, _ in plans for f in (min, max)}
    return sorted(p for p in plans if p in ends or p[1] in (4, 8, 11, 12))


def _builds():
    for dtype, op in BUILDS:
        defines = V.kernel_defines(dtype, op)
        for warps, vpt in _warp_plans(dtype, op):
            spill = HALF_LOG_WARP_SPILL if dtype != "float32" and op == "log_softmax" and vpt > 10 else 0
            rows = {"SR_ROW_WARPS": warps} if warps > 1 else {}
            yield pytest.param({"SR_WARP_VPT": vpt} | rows | defines, spill, id=f"warp{warps}x{vpt}-{dtype}-{op}")
        for c in _plans(dtype):
            yield pytest.param(c.defines() | defines, 0, id=f"{c.label()}-{dtype}-{op}")


@pytest.mark.parametrize("defines, spill", list(_builds()))
def test_every_plan_of_every_dtype_and_op_compiles_without_spills(defines, spill):
    usage = loader.ptxas_usage("single_read.cu", "sm_90", defines)
    assert all(u.spilled_bytes <= spill for u in usage.values()), usage


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_builds_move_8_halves_per_vector_and_round_once(dtype):
    from cupy.cuda import nvrtc

    c = SR.single_read_config(393216, H200, 4096, 2)
    prog = nvrtc.createProgram(loader.kernel_source("single_read.cu"), "single_read.cu", [], [])
    try:
        nvrtc.compileProgram(prog, loader.options(c.defines() | V.kernel_defines(dtype, "softmax"), "sm_90"))
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    kind = "f16" if dtype == "float16" else "bf16"
    assert f"cvt.rn.{kind}.f32" in ptx and f"max.{kind}x2" in ptx
    assert "st.global.L2::cache_hint.v4.u32" in ptx and "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32" in ptx


# ------------------------------------------------------------------ plans
@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("cols", [32000, 100003, 128256, 151936, 196608, 393216])
def test_plans_scale_with_the_element_size(rows, cols):
    """A half row of 2n elements gets the plan of a float row of n (same bytes), but for
    clusters of one block, where halves keep fewer vectors per thread in registers, and for
    the block shape, where halves prefer warps that fill the SM's 4 partitions evenly and
    float32 blocks whose threads keep the registers of its whole path."""
    half, single = SR.single_read_config(2 * cols, H200, rows, 2), SR.single_read_config(cols, H200, rows, 4)
    if SR.single_read_candidates(cols, H200, 4)[0].cluster > 1:
        assert (half.cluster, half.stages, half.blocks_per_sm) == (single.cluster, single.stages, single.blocks_per_sm)
        assert half.capacity_vecs >= -(-cols * 4 // 16)
        even = half.threads // 32 * half.blocks_per_sm % 4 == 0
        roomy = SR.keeps_whole_path(single.threads, single.blocks_per_sm)
        assert half == single or even or roomy  # another shape only where one of the preferences asks for it
    else:
        assert half.capacity_vecs >= -(-cols * 4 // 16) and half.vpt <= single.vpt


def test_the_limit_doubles_for_halves():
    for dev in (H200, SMALL_HOPPER):
        assert SR.single_read_limit(dev, "bfloat16") == 2 * SR.single_read_limit(dev, "float32")
        assert SR.single_read_limit(dev, "float16", "log_softmax") == SR.single_read_limit(dev, "float16")
    v = V.get_variant("single_read")
    limit = v.max_cols(H200, "bfloat16")
    assert limit >= 1_572_864
    assert v.unsupported_reason(limit, H200, "bfloat16") is None
    assert "at most" in v.unsupported_reason(limit + 1, H200, "bfloat16")
    assert "at most" in v.unsupported_reason(limit // 2 + 1, H200, "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("rows", [1, 132, 4096])
def test_half_plans_fill_and_fit_the_halves_register_model(dtype, rows):
    for cols in LENGTHS:
        c = SR.single_read_config(cols, H200, rows, 2)
        vecs = -(-cols * 2 // 16)
        assert -(-vecs // c.cluster) <= c.threads * c.vpt
        assert vecs / c.capacity_vecs >= (0.9 if vecs >= 512 else 0.85), (cols, rows, c)  # as for floats
        assert 4 * c.vpt + SR._other_registers(c.cluster, 2) <= RES.register_budget(c.threads, c.blocks_per_sm)


def test_a_forced_one_block_plan_beyond_the_halves_registers_is_cannot_run():
    c = SR.ClusterConfig(1, 512, 22, 1)  # fits floats (40 others), not halves (48)
    shape = V.Shape(4, 8 * 512 * 22, 8 * 512 * 22, 8 * 512 * 22, itemsize=2, dtype="float16")
    with pytest.raises(V.CannotRun, match="register budget"):
        V.get_variant("single_read").prepare(shape, H200, c)


# ------------------------------------------------------------------ auto
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", V.OPS)
@pytest.mark.parametrize("cols, on_h200, on_a100", [
    (1, "single_read", "three_pass"),
    (2048, "single_read", "three_pass"),  # a warp per row: softmax wide up to 4 KB
    (4096, "single_read", "three_pass"),  # packed up to 8 KB
    (4097, "single_read", "three_pass"),  # blocks of two warps a row
    (8192, "single_read", "three_pass"),
    (8193, "single_read", "two_pass"),  # four (log_softmax to 24 KB)
    (16385, "single_read", "two_pass"),  # past the warps: single_read's one block at 4096 rows
    (100003, "cluster_row", "two_pass"),  # single_read's plan a cluster: cluster_row
    (393216, "cluster_row", "two_pass"),  # measured: two_pass before multi_block for halves
    (393217, "single_read", "multi_block_l2"),  # multi_block_l2 measured ahead of multi_block
    # past 1.5 MB, multi_block_smem's split schedule (tests/test_variants.py has its few-row rule):
    (786433, "multi_block_smem", "multi_block_l2"),
    (1_572_864, "multi_block_smem", "multi_block_l2"),  # ahead of single_read's full cluster of 16
    (1_572_865, "multi_block_smem", "multi_block_l2"),  # and of its memory-merged group of 18
    (1 << 22, "multi_block_smem", "multi_block_l2"),
    (132 * 32768 + 1, "multi_block_smem", "multi_block_l2"),  # its split of 4 slots holds two rows up to 7569408
    (7_569_409, "multi_block_smem", "multi_block_l2"),  # past what its split holds: with companions
    (24_000_000, "multi_block_l2", "multi_block_l2"),  # companions of 1.26 rows held (groups of 44 do not pay)
])
def test_auto_for_halves(dtype, op, cols, on_h200, on_a100):
    assert V.choose(4096, cols, H200, dtype, op).name == on_h200
    assert V.choose(4096, cols, A100, dtype, op).name == on_a100


@pytest.mark.parametrize("cols", [1, 1024, 4096, 4097, 65536, 65537, 393216, 786432])
def test_auto_for_float32_log_softmax_is_that_of_softmax(cols):
    for dev in (H200, A100):
        assert V.choose(64, cols, dev, "float32", "log_softmax") == V.choose(64, cols, dev)


def test_registry_holds_every_dtype_and_op_for_single_read_only():
    v = V.get_variant("single_read")
    assert set(v.dtypes) == set(V.DTYPES) and set(V.OPS) <= set(v.ops)


# ------------------------------------------------------------------ realigned stores
def _store_run_emulated(val, nxt, d):
    """The aligned vector store_run (single_read.cu) builds from 8 + 8 packed halves at y_shift d:
    word selection q = (8 - d) / 2, then a 16-bit funnel shift when d is odd."""
    w = [int(a) | int(b) << 16 for a, b in zip(np.r_[val, nxt][0::2], np.r_[val, nxt][1::2])]
    q = (8 - d) >> 1
    u = [w[min(i + q, 7)] for i in range(5)]
    if d & 1:
        words = [((u[i] >> 16) | (u[i + 1] << 16)) & 0xFFFFFFFF for i in range(4)]
    else:
        words = u[:4]
    return np.array([h for word in words for h in (word & 0xFFFF, word >> 16)], dtype=np.uint16)


@pytest.mark.parametrize("d", range(1, 8))
def test_realigned_half_vector_is_the_next_8_halves_at_the_boundary(d):
    rng = np.random.default_rng(d)
    val, nxt = rng.integers(0, 1 << 16, 8, dtype=np.uint16), rng.integers(0, 1 << 16, 8, dtype=np.uint16)
    # output half e of the body lands on a 16-byte boundary when e % 8 == 8 - d
    assert np.array_equal(_store_run_emulated(val, nxt, d), np.r_[val, nxt][8 - d : 16 - d])


@pytest.mark.parametrize("d", range(1, 8))
@pytest.mark.parametrize("vecs", [1, 2, 5, 33])
def test_a_run_of_realigned_stores_writes_every_half_once(d, vecs):
    """A run of `vecs` vectors: the first stores its first 8 - d halves one by one, each vector with a
    next the aligned vector, the last its last d halves one by one: every output half exactly once."""
    writes = np.zeros(8 * vecs, dtype=int)
    for j in range(vecs):
        if j == 0:
            writes[: 8 - d] += 1
        if j + 1 < vecs:
            writes[8 * j + 8 - d : 8 * j + 16 - d] += 1
        else:
            writes[8 * j + 8 - d : 8 * j + 8] += 1
    assert (writes == 1).all()


# ------------------------------------------------------------------ wide half softmax (SR_WIDE)
WIDE_LENGTHS = (4097, 8193, 20000, 32000, 50257, 100003, 128256, 151936, 262147, 393216, 600001, 786432)
WIDE_ROWS = (1, 132, 4096)
HALVES = ("float16", "bfloat16")


def _wide_plans():
    """single_read_plan's wide plans for half softmax over the grid, on the H200 and a smaller part."""
    found = {SR.single_read_plan(cols, dev, rows, "bfloat16") for dev in (H200, SMALL_HOPPER)
             for cols in WIDE_LENGTHS for rows in WIDE_ROWS}
    return sorted((c for c in found if c and c.wide), key=lambda c: c.label())


def test_the_wide_grid_has_plans_of_every_kind():
    plans = _wide_plans()
    assert len(plans) >= 15
    assert {c.cluster for c in plans} == {1, 2, 4, 8, 16} and {c.stages for c in plans} >= {1, 2, 3}
    assert all(c.vpt <= SR.WIDE_MAX_VPT and c.defines()["SR_WIDE"] == 1 and c.label().endswith("w") for c in plans)


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("config", _wide_plans(), ids=lambda c: c.label())
def test_every_wide_plan_compiles_without_spills(config, dtype):
    used = loader.ptxas_usage("single_read.cu", "sm_90", config.defines() | V.kernel_defines(dtype, "softmax"))
    assert all(u.spilled_bytes == 0 for u in used.values()), used
    budget = RES.register_budget(config.threads, config.blocks_per_sm)
    assert used["single_read"].registers <= budget
    assert SR._registers_needed(config.vpt, config.cluster, 2, 1, True) <= budget


@pytest.mark.parametrize("dtype", HALVES)
def test_the_wide_warp_kernel_fits_its_128_registers(dtype):
    used = loader.ptxas_usage("single_read.cu", "sm_90",
                              {"SR_WARP_VPT": WR.WIDE_VPT, "SR_WIDE": 1} | V.kernel_defines(dtype, "softmax"))
    u = used["single_read_warp"]
    assert u.registers <= 128 and u.spilled_bytes == 0


def _entry_ptx(defines, entry="single_read"):
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(loader.kernel_source("single_read.cu"), "single_read.cu", [], [])
    try:
        nvrtc.compileProgram(prog, loader.options(defines, "sm_90"))
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    body = ptx.split(f".entry {entry}(")[1]
    return body.split(".entry ")[0]


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("entry, vpt_define", [("single_read", "SR_VPT"), ("single_read_warp", "SR_WARP_VPT")])
def test_wide_softmax_takes_one_exponential_per_element(dtype, entry, vpt_define):
    """The packed build computes e^(x - m_t) for the sum and e^(x - M) for the output (two ex2 per
    element), the wide one keeps e: one ex2 per element, plus a few for the scalars and the merges;
    and it rounds each output once, from the float product (cvt.rn.<half>.f32 per element)."""
    vpt = 8
    base = {"SR_CLUSTER": 4, "SR_THREADS": 512, "SR_VPT": vpt, "SR_STAGES": 1, "SR_BLOCKS_PER_SM": 1,
            "SR_WARP_VPT": vpt} | V.kernel_defines(dtype, "softmax")
    wide, packed = _entry_ptx(base | {"SR_WIDE": 1}, entry), _entry_ptx(base, entry)
    per_thread = 8 * vpt  # halves held per thread
    merges = packed.count("ex2.approx") - 2 * per_thread  # the scalar's and the (max, sum) merges' (26 at 4 blocks)
    assert 0 < merges < 32
    assert wide.count("ex2.approx") == per_thread + merges
    kind = "f16" if dtype == "float16" else "bf16"
    assert wide.count(f"cvt.rn.{kind}.f32") >= per_thread
    assert wide.count(f"max.{kind}x2") >= 4 * vpt  # the max of the packed halves (half2 maxima), before widening
    # every element's exponential is one ex2.approx.ftz (ex2.approx.f32 adds a compare and two multiplies)
    assert wide.count("ex2.approx.ftz.f32") >= per_thread


@pytest.mark.parametrize("dtype", V.DTYPES)
@pytest.mark.parametrize("op", V.ALL_OPS)
def test_the_wide_define_is_chosen_for_half_softmax_only(dtype, op):
    """Every plan of single_read: SR_WIDE (in its defines) only for float16/bfloat16 softmax, never
    for log_softmax, float32 or the backward."""
    wanted = SR.holds_wide(dtype, op)
    assert wanted == (dtype != "float32" and op == "softmax")
    backward = op in V.BACKWARD_OPS
    for dev in (H200, SMALL_HOPPER):
        for cols in (8193, 32000, 100003, 151936, 393216):
            for rows in WIDE_ROWS:
                c = (SR.single_read_config(cols, dev, rows, V.DTYPES[dtype], arrays=2) if backward
                     else SR.single_read_plan(cols, dev, rows, dtype, op))
                if c is not None:
                    assert not c.wide or wanted, (dev.name, cols, rows, c)
                    assert ("SR_WIDE" in c.defines()) == c.wide


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("rows, cols, wide", [
    (16384, 32000, True),  # the same cluster (one block): measured 1.03-1.06 x copy against 1.21-1.26 packed
    (4096, 393216, True),  # 4 -> 8 blocks: 1.14-1.27 against 1.22-1.58
    (132, 393216, True),
    (4096, 128256, False),  # 2 -> 4 blocks: no better (1.35 against 1.29)
    (4096, 151936, False),
    (512, 100003, False),
    (4096, 65536, False),  # short wide slices against two packed blocks per SM: 1.20 against 1.11
    (4096, 262144, False),  # 1.24 against 1.16
    (32, 786433, False),  # no wide plan holds it (the wide limit is 786432 halves)
])
def test_half_softmax_takes_the_wide_plan_where_it_was_measured_faster(dtype, rows, cols, wide):
    c = SR.single_read_plan(cols, H200, rows, dtype, "softmax")
    assert c.wide == wide, c
    if not wide:
        assert c == SR.single_read_config(cols, H200, rows, V.DTYPES[dtype], one_block_cost=SR.HALVES_ONE_BLOCK_COST)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", HALVES)
def test_halves_take_groups_of_two_blocks_per_sm_where_the_cluster_has_one(dtype, op):
    """Halves past the 393216 elements a cluster of 8 holds at two blocks per SM (packed
    clusters of 8, or wide of 16, at one block per SM) take a memory-merged group at two
    blocks per SM where it has MEMORY_MERGE_MIN_ROUNDS rounds and holds HALVES_MERGE_MIN_HELD
    times the cluster's vectors per SM; auto takes it first, after cluster_row where that goes
    first.  Too few rows, and full clusters, keep the cluster; shorter rows keep their clusters
    of two blocks per SM; float32 keeps its groups of any blocks per SM."""
    for rows, cols in ((4096, 500000), (4096, 400000), (1300, 393217), (1024, 600001), (300, 500001)):
        c = SR.single_read_plan(cols, H200, rows, dtype, op)
        assert c.memory_merge and c.blocks_per_sm == SR.HALVES_MERGE_BLOCKS_PER_SM, (rows, cols, c)
        assert c.capacity_vecs >= -(-cols // 8) and SR.memory_merge_rounds(c, rows, H200) >= SR.MEMORY_MERGE_MIN_ROUNDS
        assert SR.memory_merge_pays(c, rows, H200, 2) and not SR.memory_merge_pays(c, rows, H200)
        assert V.preferences(V.Shape(rows, cols, cols, cols, itemsize=2, dtype=dtype, op=op), H200)[0].name == \
            "single_read"
    few = SR.single_read_plan(500000, H200, 32, dtype, op)
    assert not few.memory_merge and few.blocks_per_sm == 1
    first = V.preferences(V.Shape(264, 500000, 500000, 500000, itemsize=2, dtype=dtype, op=op), H200)
    assert [v.name for v in first[:2]] == ["cluster_row", "single_read"]
    full = SR.single_read_plan(786432, H200, 4096, dtype, op)  # a full cluster of 8 x 512 x 24 packed; wide of 16 x 512 x 12
    assert full.memory_merge == (op == "softmax"), full
    for cols in (151936, 393216):
        c = SR.single_read_plan(cols, H200, 4096, dtype, op)
        assert not c.memory_merge and (c.blocks_per_sm == 2 or c.wide), c
    assert SR.single_read_plan(500000, H200, 4096, "float32", op) == SR.memory_merge_config(500000, H200, 4096)


@pytest.mark.parametrize("dtype", HALVES)
def test_cluster_row_goes_ahead_of_a_group_of_its_own_blocks(dtype):
    """Half softmax whose memory-merged group is a cluster_row cluster (16 blocks of 256 x 22-24
    vectors at two per SM, about 690000-786432 columns): cluster_row first, the same slices
    merged on chip; single_read's group next.  Where the group has fewer blocks (600001) the
    group stays first; log_softmax (single_read's cluster of 8 at one block per SM there) takes
    cluster_row as every single_read cluster does."""
    for rows, cols in ((4096, 786432), (528, 786432), (1056, 750001), (16384, 737281)):
        shape = V.Shape(rows, cols, cols, cols, itemsize=2, dtype=dtype, op="softmax")
        merged, plan = SR.single_read_plan(cols, H200, rows, dtype), CR.cluster_row_plan(cols, H200, rows, 2)
        assert merged.memory_merge and (merged.cluster, merged.blocks_per_sm) == (plan.cluster, plan.blocks_per_sm)
        assert [v.name for v in V.preferences(shape, H200)[:2]] == ["cluster_row", "single_read"], (rows, cols)
    for rows, cols, op in ((4096, 600001, "softmax"), (1056, 500000, "softmax"), (4096, 786432, "log_softmax")):
        shape = V.Shape(rows, cols, cols, cols, itemsize=2, dtype=dtype, op=op)
        assert V.preferences(shape, H200)[0].name == ("cluster_row" if op == "log_softmax" else "single_read")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_memory_merged_groups_take_the_place_of_clusters_of_16_where_they_pay(dtype):
    """4096 rows of 786433 halves (393217 floats): a group of 9-10 blocks; 32 rows: too few
    rounds, the cluster of 16; 1572864 halves (786432 floats): the cluster is full, no smaller
    group."""
    cols = 786433 if dtype != "float32" else 393217
    merged = SR.single_read_plan(cols, H200, 4096, dtype, "log_softmax")
    assert merged.memory_merge and merged.cluster < RES.MAX_CLUSTER and SR.memory_merge_pays(merged, 4096, H200)
    assert not SR.single_read_plan(cols, H200, 32, dtype, "log_softmax").memory_merge
    full = SR.single_read_plan((3 << 20) // V.DTYPES[dtype], H200, 4096, dtype, "log_softmax")
    assert not full.memory_merge and full.cluster == RES.MAX_CLUSTER


@pytest.mark.parametrize("dtype", V.DTYPES)
@pytest.mark.parametrize("op", V.ALL_OPS)
@pytest.mark.parametrize("cols", [1000, 2048, 2049, 2817, 4096, 4097, 12000, 16385, 32000, 393216, 786432, 786433])
def test_launches_build_wide_for_half_softmax_only(monkeypatch, dtype, op, cols):
    """What prepare hands the loader (no GPU: the fake loader records the defines and refuses)."""
    seen = []

    def fake_get_kernel(source, entry, defines=None, device_id=0):
        seen.append((source, entry, dict(defines or {})))
        raise RuntimeError("no GPU in this test")

    monkeypatch.setattr(loader, "get_kernel", fake_get_kernel)
    isz = V.DTYPES[dtype]
    shape = V.Shape(8, cols, cols, cols, itemsize=isz, dtype=dtype, op=op, ld_g=cols if op in V.BACKWARD_OPS else 0)
    with pytest.raises((RuntimeError, V.CannotRun)):
        V.get_variant("single_read").prepare(shape, H200)
    if cols > SR.single_read_max_cols(H200, dtype, op):
        assert not seen
        return
    (source, entry, defines), = seen
    assert source == ("single_read_backward.cu" if op in V.BACKWARD_OPS else "single_read.cu")
    warp = WR.warps_and_vpt(cols, isz, op)
    assert entry == ("single_read_warp" if warp else source[:-3])
    if warp:  # wide while a lane holds at most 8 widened vectors
        wide = SR.holds_wide(dtype, op) and warp[1] <= WR.WIDE_VPT
        assert (defines.get("SR_ROW_WARPS", 1), defines["SR_WARP_VPT"]) == warp
    else:
        wide = SR.holds_wide(dtype, op) and cols <= SR.single_read_limit(H200, dtype, op, wide=True)
    assert defines.get("SR_WIDE", 0) == (1 if wide else 0), (source, entry, defines)


@pytest.mark.parametrize("cols, itemsize, op, plan", [
    (1, 4, "softmax", (1, 1)), (4, 4, "softmax", (1, 1)), (128, 4, "softmax", (1, 1)), (129, 4, "log_softmax", (1, 2)),
    (520, 4, "softmax", (1, 5)), (1024, 4, "softmax", (1, 8)), (1025, 4, "softmax", (1, 9)), (2048, 4, "softmax", (1, 16)),
    (2049, 4, "softmax", (2, 9)), (3072, 4, "log_softmax", (2, 12)),
    (1, 2, "softmax", (1, 1)), (1000, 2, "softmax", (1, 4)), (2049, 2, "softmax", (1, 9)), (4096, 2, "softmax", (1, 16)),
    (4097, 2, "softmax", (2, 9)), (8193, 2, "softmax", (4, 9)), (16384, 2, "softmax", (4, 16)),
    (3072, 2, "log_softmax", (1, 12)), (3073, 2, "log_softmax", (2, 7)),  # halves' log_softmax: at most 12 a lane
    (12288, 2, "log_softmax", (4, 12)),
])
def test_the_warps_hold_the_row_in_as_few_warps_and_vectors_as_it_needs(cols, itemsize, op, plan):
    assert WR.warps_and_vpt(cols, itemsize, op) == plan
    warps, vpt = plan
    assert 32 * warps * vpt * 16 >= cols * itemsize  # the row fits at any alignment (head and tail are scalars)


@pytest.mark.parametrize("cols, itemsize, op", [(3073, 4, "softmax"), (16385, 2, "softmax"), (12289, 2, "log_softmax"),
                                                (1 << 20, 2, "softmax"), (64, 4, "softmax_backward")])
def test_no_warps_hold_rows_past_warp_rows_bytes_nor_backward_rows(cols, itemsize, op):
    assert WR.warps_and_vpt(cols, itemsize, op) is None


@pytest.mark.parametrize("dev", [H200, SMALL_HOPPER], ids=lambda d: d.name)
@pytest.mark.parametrize("dtype", HALVES)
def test_rows_past_the_wide_limit_get_the_packed_plan(dev, dtype):
    wide_limit = SR.single_read_limit(dev, dtype, wide=True)
    limit = SR.single_read_limit(dev, dtype)
    assert SR.single_read_limit(dev, "float32") <= wide_limit < limit  # wide holds at least float32's row
    assert limit == SR.single_read_limit(dev, dtype, "log_softmax")
    assert V.get_variant("single_read").max_cols(dev, dtype) == SR.single_read_max_cols(dev, dtype) > limit
    for rows in WIDE_ROWS:
        for cols in (wide_limit - 1, wide_limit):  # wide, or where it has the rounds the halves' group
            c = SR.single_read_plan(cols, dev, rows, dtype)
            assert c.wide or (c.memory_merge and c.blocks_per_sm == SR.HALVES_MERGE_BLOCKS_PER_SM), c
        for cols in (wide_limit + 1, (wide_limit + limit) // 2, limit):
            c = SR.single_read_plan(cols, dev, rows, dtype)
            assert not c.wide and (c == SR.single_read_config(cols, dev, rows, 2) or c.memory_merge)
            assert c.capacity_vecs * 8 >= cols
        assert SR.single_read_plan(limit + 1, dev, rows, dtype).memory_merge  # past a cluster: a group


@pytest.mark.parametrize("defines, why", [
    ({"SR_CLUSTER": 8, "SR_THREADS": 512, "SR_VPT": 13}, "register budget"),  # 8 x 13 + 32 > 128
    ({"SR_CLUSTER": 1, "SR_THREADS": 512, "SR_VPT": 12}, "register budget"),  # 8 x 12 + 40 > 128
    ({"SR_CLUSTER": 2, "SR_THREADS": 256, "SR_VPT": 13}, "at most 12 vectors"),  # fits 248, past the measured 12
    ({"SR_CLUSTER": 2, "SR_THREADS": 512, "SR_VPT": 4, "SOFTMAX_LOG": 1}, "softmax"),
    ({"SR_CLUSTER": 2, "SR_THREADS": 512, "SR_VPT": 4, "SOFTMAX_DTYPE": 0}, "softmax"),
    ({"SR_CLUSTER": 2, "SR_THREADS": 512, "SR_VPT": 4, "SR_WIDE": 2}, "softmax"),
])
def test_an_impossible_wide_configuration_fails_to_compile(defines, why):
    defines = {"SOFTMAX_DTYPE": 2, "SR_STAGES": 1, "SR_BLOCKS_PER_SM": 1, "SR_WIDE": 1} | defines
    with pytest.raises(Exception, match=why):
        loader.nvrtc_cubin("single_read.cu", "sm_90", defines)


def test_the_backward_refuses_the_wide_define():
    defines = {"SOFTMAX_DTYPE": 2, "SOFTMAX_BACKWARD": 1, "SR_WIDE": 1, "SR_CLUSTER": 2, "SR_THREADS": 512, "SR_VPT": 4}
    with pytest.raises(Exception, match="softmax"):
        loader.nvrtc_cubin("single_read_backward.cu", "sm_90", defines)


def test_wide_configurations_are_checked_in_python_too():
    assert SR.ClusterConfig(8, 512, 12, 1, wide=True).defines()["SR_WIDE"] == 1
    with pytest.raises(ValueError, match="register budget"):
        SR.ClusterConfig(1, 512, 12, 1, wide=True)  # 8 x 12 + 40 > 128
    with pytest.raises(ValueError, match="at most 12"):
        SR.ClusterConfig(2, 256, 13, 1, wide=True)
    with pytest.raises(ValueError, match="one array"):
        SR.ClusterConfig(2, 256, 4, 1, 1, 2, True)
    wide = SR.ClusterConfig(2, 512, 4, 1, wide=True)
    for dtype, op in (("float32", "softmax"), ("bfloat16", "log_softmax")):
        shape = V.Shape(4, 20000, 20000, 20000, itemsize=V.DTYPES[dtype], dtype=dtype, op=op)
        with pytest.raises(V.CannotRun, match="wide plan"):
            V.get_variant("single_read").prepare(shape, H200, wide)


def test_half_plans_prefer_warps_that_fill_the_partitions_evenly():
    """Measured at 4096 x 151936 (notes/TUNING.md): 2x640x15 over the float plan's 19 warps, one block per SM."""
    assert SR.block_shape(9496, 1, SR.VPT_TARGET, 2, 1 << 30, 2) == (640, 15)
    assert SR.single_read_config(151936, H200, 4096, 2).threads == 640
    assert SR.single_read_config(151936, H200, 4096, 4).threads == 512  # float32: the whole path's registers


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("cols, label", [
    (80000, "2x256x20x1x2"),  # measured (notes/TUNING.md, eleventh session): 1.15 against 2x640x8w's 1.19
    (128256, "4x256x16x1x2"),  # 1.13 against 2x512x16's 1.22
    (151936, "4x256x19x1x2"),  # 1.13 against 2x640x15's 1.18; 4x320x15x1x2 1.14
    (200003, "8x256x13x1x2"),  # 1.30 against 8x640x5w's 1.48; log_softmax 1.20 against 4x512x13's 1.29
    (262144, "8x256x16x1x2"),
])
def test_half_plans_in_clusters_take_two_blocks_per_sm_of_the_fewest_threads(dtype, op, cols, label):
    assert SR.single_read_plan(cols, H200, 4096, dtype, op).label() == label


def test_half_plans_keep_one_block_per_sm_for_single_blocks_wide_full_blocks_and_clusters_of_16():
    assert SR.single_read_plan(50257, H200, 4096, "bfloat16", "log_softmax").label() == "1x512x13x1x1"  # 1.14 / 1.24
    assert SR.single_read_plan(393216, H200, 4096, "bfloat16", "softmax").label() == "8x512x12x1x1w"  # 1.12 / 1.18
    assert SR.single_read_plan(393216, H200, 4096, "bfloat16", "log_softmax").label() == "8x256x24x1x2"
    for dev in (H200, SMALL_HOPPER):
        for cols in range(8193, 786433, 4099):
            for dtype, op in (("bfloat16", "softmax"), ("float16", "log_softmax")):
                plan = SR.single_read_plan(cols, dev, 4096, dtype, op)
                if plan is not None and not plan.memory_merge:
                    assert plan.blocks_per_sm == 1 or plan.cluster < RES.MAX_CLUSTER, (dev.name, cols, plan)
