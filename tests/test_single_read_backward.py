"""single_read's backward (kernels/single_read_backward.cu) without a GPU: every
dtype x backward op build of the plans derived for a grid of row lengths
compiles at sm_90 without spills, impossible configurations fail to compile,
the plans (y and dy on chip: arrays=2) fill and fit, the limit is half the
forward's, dy of another 16-byte alignment is CannotRun, auto's choice, and a
NumPy emulation of the fixed-order cluster sum of the partial dots."""

import dataclasses
import sys

import numpy as np
import pytest
from devices import A100, H200, SMALL_HOPPER

import softmax_lab.variants  # noqa: F401  (the module; softmax_lab.variants is also a function)
from softmax_lab import loader
from softmax_lab.variants import resources as RES
from softmax_lab.variants import single_read as SR

V = sys.modules["softmax_lab.variants"]
ROWS = (1, 132, 4096, 1 << 20)
FLOAT_LENGTHS = (32000, 100003, 128256, 151936, 196608)
HALF_LENGTHS = FLOAT_LENGTHS + (393216,)
SOURCE = "single_read_backward.cu"


def _lengths(dtype):
    return FLOAT_LENGTHS if dtype == "float32" else HALF_LENGTHS


def _plans(dtype):
    itemsize = V.DTYPES[dtype]
    found = set()
    for dev in (H200, SMALL_HOPPER):
        for cols in _lengths(dtype):
            if cols <= SR.single_read_limit(dev, dtype, "softmax_backward"):
                found |= {SR.single_read_config(cols, dev, rows, itemsize, arrays=2) for rows in ROWS}
    found |= {SR.single_read_config(cols, H200, 64, itemsize, arrays=2) for cols in (1, 1000, 5000)}
    off_line = V.Shape(4096, 3, 3, 3, 16, 0, itemsize, dtype, "softmax_backward", 3, 16)  # rows start off lines
    found |= {SR.line_shifted(c, off_line, H200) for c in found}
    return sorted(found, key=lambda c: (c.cluster, c.threads, c.vpt, c.stages, c.blocks_per_sm, c.line_shift))


def _builds():
    """Every plan's build of every dtype and op; log_softmax's also with y loaded directly (the
    plans take it for halves: single_read_backward_plan)."""
    for dtype in V.DTYPES:
        for op in V.BACKWARD_OPS:
            defines = V.kernel_defines(dtype, op)
            yield pytest.param(defines, id=f"default-{dtype}-{op}")
            for c in _plans(dtype):
                for y_direct in (False, True) if op == "log_softmax_backward" else (False,):
                    c = dataclasses.replace(c, y_direct=y_direct)
                    yield pytest.param(c.defines() | defines, id=f"{c.label()}-{dtype}-{op}")


@pytest.mark.parametrize("defines", list(_builds()))
def test_every_plan_of_every_dtype_and_backward_op_compiles_without_spills(defines):
    (entry, usage), = loader.ptxas_usage(SOURCE, "sm_90", defines).items()
    assert entry == "single_read_backward"
    assert usage.spilled_bytes == 0, usage


def _compile_error(defines):
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(loader.kernel_source(SOURCE), SOURCE, [], [])
    try:
        with pytest.raises(nvrtc.NVRTCError):
            nvrtc.compileProgram(prog, loader.options(defines, "sm_90"))
        return nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


@pytest.mark.parametrize("defines, message", [
    ({"SR_CLUSTER": 3}, "power-of-two cluster"),
    ({"SR_CLUSTER": 32}, "power-of-two cluster"),
    ({"SR_CLUSTER": 8, "SR_THREADS": 512, "SR_VPT": 13}, "register budget"),  # 8 x 13 + 32 > 128
    ({"SR_CLUSTER": 1, "SR_THREADS": 512, "SR_VPT": 10, "SOFTMAX_DTYPE": 1}, "register budget"),  # 80 + 56
    ({"SR_CLUSTER": 8, "SR_THREADS": 256, "SR_VPT": 12, "SR_STAGES": 3}, "shared memory"),
    ({"SR_CLUSTER": 8, "SR_THREADS": 256, "SR_VPT": 12, "SR_STAGES": 5, "SRB_Y_DIRECT": 1, "SOFTMAX_LOG": 1},
     "shared memory"),
    ({"SRB_Y_DIRECT": 1}, "only log_softmax"),  # softmax's dot needs y
])
def test_impossible_configurations_fail_to_compile(defines, message):
    log = _compile_error(defines | {"SOFTMAX_BACKWARD": 1})
    assert "static assertion failed" in log and message in log, log


def test_the_forward_build_of_the_backward_file_fails_to_compile():
    log = _compile_error({})
    assert "SOFTMAX_BACKWARD" in log, log


# ------------------------------------------------------------------ plans
@pytest.mark.parametrize("dtype", list(V.DTYPES))
@pytest.mark.parametrize("rows", ROWS)
def test_backward_plans_fill_and_fit(dtype, rows):
    itemsize = V.DTYPES[dtype]
    for cols in _lengths(dtype):
        c = SR.single_read_config(cols, H200, rows, itemsize, arrays=2)
        assert c is not None and c.arrays == 2, (cols, rows)
        vecs = -(-cols * itemsize // 16)
        assert -(-vecs // c.cluster) <= c.threads * c.vpt
        assert vecs / c.capacity_vecs >= SR.MIN_FILL, (cols, rows, c)
        assert SR._registers_needed(c.vpt, c.cluster, itemsize, 2) <= RES.register_budget(c.threads, c.blocks_per_sm)
        assert SR._block_smem(c.threads, c.vpt, c.stages, 2) + SR.SMEM_RESERVED <= H200.smem_optin_bytes
        assert c.smem_bytes == c.stages * c.threads * c.vpt * 32


def test_the_backward_limit_is_half_the_forward_and_holds_the_issue_targets():
    for dev in (H200, SMALL_HOPPER):
        for dtype in V.DTYPES:
            half = SR.single_read_limit(dev, dtype) / 2  # exactly on the H200; shared memory rounds on smaller parts
            assert 0.9 * half <= SR.single_read_limit(dev, dtype, "softmax_backward") <= 1.1 * half
            assert SR.single_read_limit(H200, dtype, "softmax_backward") * 2 == SR.single_read_limit(H200, dtype)
            assert SR.single_read_limit(dev, dtype, "log_softmax_backward") == \
                SR.single_read_limit(dev, dtype, "softmax_backward")
    v = V.get_variant("single_read")
    assert v.max_cols(H200, "bfloat16", "softmax_backward") >= 393216
    assert v.max_cols(H200, "float16", "log_softmax_backward") >= 393216
    assert v.max_cols(H200, "float32", "softmax_backward") >= 196608
    limit = v.max_cols(H200, "float32", "softmax_backward")
    assert v.unsupported_reason(limit, H200, "float32", "softmax_backward") is None
    assert "at most" in v.unsupported_reason(limit + 1, H200, "float32", "softmax_backward")
    assert SR.single_read_config(limit + 1, H200, 64, 4, arrays=2) is None


def test_y_direct_plans_are_the_halves_log_softmax_in_clusters():
    for rows in ROWS:
        for cols in HALF_LENGTHS:
            for dtype in V.DTYPES:
                for op in V.BACKWARD_OPS:
                    c = SR.single_read_backward_plan(cols, H200, rows, dtype, op)
                    if c is None:  # float32 393216: past the backward's limit
                        assert cols > SR.single_read_limit(H200, dtype, op)
                        continue
                    assert dataclasses.replace(c, y_direct=False) == \
                        SR.single_read_config(cols, H200, rows, V.DTYPES[dtype], arrays=2)  # the same block shape
                    assert c.y_direct == (dtype != "float32" and op == "log_softmax_backward" and c.cluster >= 2)
    c = SR.single_read_backward_plan(151936, H200, 4096, "bfloat16", "log_softmax_backward")
    assert c.y_direct and c.cluster == 4 and c.label().endswith("d") and c.defines()["SRB_Y_DIRECT"] == 1
    assert c.staged_arrays == 1 and c.smem_bytes * 2 == dataclasses.replace(c, y_direct=False).smem_bytes
    assert not SR.single_read_backward_plan(32000, H200, 4096, "bfloat16", "log_softmax_backward").y_direct  # 1 block
    with pytest.raises(ValueError, match="backward"):
        SR.ClusterConfig(4, 512, 8, 1, 1, y_direct=True)
    v = V.get_variant("single_read")
    with pytest.raises(V.CannotRun, match="only log_softmax"):
        v.prepare(_shape(4, 100000, "bfloat16", "softmax_backward"), H200, c)


def test_y_direct_line_shift_follows_dy_alone():
    """y_direct's bulk copies bring dy alone: the line shift depends on dy's rows, not y's."""
    c = SR.single_read_backward_plan(128256, H200, 4096, "bfloat16", "log_softmax_backward")
    assert c.y_direct and not c.line_shift  # 4 x 512 x 8 pairs: slices on lines
    y_off = _shape(4096, 128256, "bfloat16", "log_softmax_backward", x_off=16, g_off=0)
    dy_off = _shape(4096, 128256, "bfloat16", "log_softmax_backward", x_off=16, g_off=16)
    assert not SR.line_shifted(c, y_off, H200).line_shift
    assert SR.line_shifted(c, dy_off, H200).line_shift
    staged = dataclasses.replace(c, y_direct=False)
    assert SR.line_shifted(staged, y_off, H200).line_shift


def test_a_backward_plan_counts_vector_pairs():
    c = SR.ClusterConfig(8, 512, 12, 1, 1, 2)
    assert c.capacity_vecs == 8 * 512 * 12 and c.smem_bytes == 512 * 12 * 32 and c.label().endswith("b")
    with pytest.raises(ValueError, match="register budget"):
        SR.ClusterConfig(8, 512, 13, 1, 1, 2)
    forward = SR.ClusterConfig(8, 512, 24, 1, 1)  # the same bytes on chip as c, one array
    assert forward != c and forward.smem_bytes == c.smem_bytes and forward.capacity_vecs == 2 * c.capacity_vecs


def _shape(rows, cols, dtype, op, x_off=0, g_off=0, ld_x=None, ld_g=None):
    itemsize = V.DTYPES[dtype]
    return V.Shape(rows, cols, ld_x or cols, cols, x_off, 0, itemsize, dtype, op, ld_g or cols, g_off)


@pytest.mark.parametrize("op", V.BACKWARD_OPS)
@pytest.mark.parametrize("dtype", list(V.DTYPES))
def test_dy_of_another_alignment_is_cannot_run_before_any_device_call(dtype, op):
    v = V.get_variant("single_read")
    itemsize = V.DTYPES[dtype]
    for shape in (_shape(4, 50000, dtype, op, x_off=0, g_off=itemsize),
                  _shape(4, 50000, dtype, op, ld_x=50000, ld_g=50001),  # row 1 differs
                  _shape(4, 50000, dtype, op, x_off=2 * itemsize, g_off=0)):
        with pytest.raises(V.CannotRun, match="alignment"):
            v.prepare(shape, H200)
    assert SR.shares_alignment(_shape(1, 50000, dtype, op, ld_x=50000, ld_g=50001))  # one row: row 0 only
    assert SR.shares_alignment(_shape(4, 50000, dtype, op, x_off=4, g_off=4, ld_x=50000 + 16 // itemsize))
    with pytest.raises(V.CannotRun, match="forward plan"):
        v.prepare(_shape(4, 1000, dtype, op), H200, SR.ClusterConfig(1, 128, 4, 2, 1))


@pytest.mark.parametrize("op", V.BACKWARD_OPS)
@pytest.mark.parametrize("dtype", list(V.DTYPES))
def test_auto_picks_single_read_for_the_backward_where_it_fits(dtype, op):
    # float32: rows of one or two cluster_row blocks, rows that start on 16 bytes, and rows
    # past 768 KB, go to cluster_row (then multi_block_l2 past 1.5 MB); the halves' backward
    # where cluster_row's 256-thread blocks hold the row (auto.cluster_row_leads), single_read
    # past them
    limit = SR.single_read_limit(H200, dtype, op) if dtype != "float32" else 196607
    for cols in (1, 1000, 16384 // V.DTYPES[dtype]):
        assert V.choose(4096, cols, H200, dtype, op).name == "two_pass"
    if dtype == "float32":
        first = 2 * 256 * 12 * 4 + 1  # past one or two cluster_row blocks
        single_read_cols = (first, 32001, 65535, limit)  # odd lengths, rows off 16 bytes
    else:
        held = 16 * 256 * 8 * 8  # halves in cluster_row's largest cluster of 256-thread blocks
        for cols in (16384 // V.DTYPES[dtype] + 1, 32001, 65535, held):
            assert V.choose(4096, cols, H200, dtype, op).name == "cluster_row", cols
        single_read_cols = (held + 1, limit)
    for cols in single_read_cols:
        assert V.choose(4096, cols, H200, dtype, op).name == "single_read", cols
        assert V.choose(4096, cols, A100, dtype, op).name in ("two_pass", "multi_block", "multi_block_l2")
        names = [p.name for p in V.preferences(_shape(2048, cols, dtype, op), H200)]
        assert names[0] == "single_read" and {"two_pass", "multi_block"} <= set(names)  # fallbacks for CannotRun
    if dtype == "float32":
        for cols in (4097, first - 1, 32000, 65536, 196608, limit + 2, 262144, 393216):
            assert V.choose(4096, cols, H200, dtype, op).name == "cluster_row", cols
    assert V.choose(4096, limit + 1, H200, dtype, op).name in ("two_pass", "multi_block", "multi_block_l2", "cluster_row")


def test_backward_traffic_of_single_read_is_two_reads_and_a_write():
    v = V.get_variant("single_read")
    assert v.traffic_bytes(4096, 393216, 2, "softmax_backward") == 4096 * 393216 * 6
    assert v.traffic_bytes(4096, 196608, 4, "log_softmax_backward") == 4096 * 196608 * 12
    assert set(V.BACKWARD_OPS) <= set(v.ops) and v.backward_source == SOURCE


# ------------------------------------------------------------------ the cluster sum
def _cluster_sum(partials, lane):
    """cluster_sum (single_read_backward.cu) for one lane: it reads block lane % C's partial,
    then a butterfly over C lanes (float32 additions, lane l adds lane l ^ o's value)."""
    c = len(partials)
    vals = [np.float32(partials[l % c]) for l in range(32)]
    o = c // 2
    while o > 0:
        vals = [np.float32(vals[l] + vals[l ^ o]) for l in range(32)]
        o //= 2
    return vals[lane]


@pytest.mark.parametrize("cluster", [1, 2, 4, 8, 16])
def test_every_lane_of_every_block_gets_bitwise_the_same_dot(cluster):
    rng = np.random.default_rng(cluster)
    for _ in range(50):
        partials = (rng.standard_normal(cluster) * 10.0 ** rng.integers(-5, 5, cluster)).astype(np.float32)
        got = {_cluster_sum(partials, lane).tobytes() for lane in range(32)}
        assert len(got) == 1
        assert abs(float(_cluster_sum(partials, 0)) - float(np.sum(partials, dtype=np.float64))) <= \
            1e-6 * float(np.abs(partials).sum()) + 1e-30
