"""single_read for float16, bfloat16 and log_softmax without a GPU: every
(dtype, op) build of every derived plan compiles without spills, the plans
scale with the element size, auto's rules by dtype, and a NumPy emulation of
the realigned 16-byte stores of 8 packed halves."""

import re
import sys

import numpy as np
import pytest

import softmax_lab.variants  # noqa: F401  (the module; softmax_lab.variants is also a function)
from softmax_lab import loader
from softmax_lab.device import DeviceInfo

V = sys.modules["softmax_lab.variants"]
H200 = DeviceInfo(0, "NVIDIA H200", 90, 132, 60 * 2**20, 232448, 233472)
A100 = DeviceInfo(0, "NVIDIA A100", 80, 108, 40 * 2**20, 166912, 167936)
SMALL_HOPPER = DeviceInfo(0, "a smaller sm_90 part", 90, 66, 25 * 2**20, 101376, 102400)
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
            if cols <= V._single_read_limit(dev, dtype):
                found |= {V.single_read_config(cols, dev, rows, itemsize) for rows in ROWS}
    return sorted(found, key=lambda c: (c.cluster, c.threads, c.vpt, c.stages, c.blocks_per_sm))


def _builds():
    for dtype, op in BUILDS:
        defines = V.kernel_defines(dtype, op)
        yield pytest.param({"SR_WARP_VPT": V.WARP_ROW_VPT} | defines, id=f"warp-{dtype}-{op}")
        for c in _plans(dtype):
            yield pytest.param(c.defines() | defines, id=f"{c.label()}-{dtype}-{op}")


@pytest.mark.parametrize("defines", list(_builds()))
def test_every_plan_of_every_dtype_and_op_compiles_without_spills(defines):
    cubin, log = loader.nvrtc_cubin("single_read.cu", "sm_90", defines, ("--ptxas-options=-v",))
    entries = re.findall(r"Compiling entry function '(\w+)'", log)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert entries and len(spills) == len(entries), log
    assert all(s == ("0", "0") for s in spills), log
    assert all(s == "0" for s in re.findall(r"(\d+) bytes stack frame", log)), log


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_builds_move_8_halves_per_vector_and_round_once(dtype):
    from cupy.cuda import nvrtc

    c = V.single_read_config(393216, H200, 4096, 2)
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
    clusters of one block, where halves keep fewer vectors per thread in registers."""
    half, single = V.single_read_config(2 * cols, H200, rows, 2), V.single_read_config(cols, H200, rows, 4)
    if V.single_read_candidates(cols, H200, 4)[0].cluster > 1:
        assert half == single
    else:
        assert half.capacity_vecs >= -(-cols * 4 // 16) and half.vpt <= single.vpt


def test_the_limit_doubles_for_halves():
    for dev in (H200, SMALL_HOPPER):
        assert V._single_read_limit(dev, "bfloat16") == 2 * V._single_read_limit(dev, "float32")
        assert V._single_read_limit(dev, "float16", "log_softmax") == V._single_read_limit(dev, "float16")
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
        c = V.single_read_config(cols, H200, rows, 2)
        vecs = -(-cols * 2 // 16)
        assert -(-vecs // c.cluster) <= c.threads * c.vpt
        assert vecs / c.capacity_vecs >= (0.9 if vecs >= 512 else 0.85), (cols, rows, c)  # as for floats
        assert 4 * c.vpt + V._other_registers(c.cluster, 2) <= V._register_budget(c.threads, c.blocks_per_sm)


def test_a_forced_one_block_plan_beyond_the_halves_registers_is_cannot_run():
    c = V.ClusterConfig(1, 512, 22, 1)  # fits floats (40 others), not halves (48)
    shape = V.Shape(4, 8 * 512 * 22, 8 * 512 * 22, 8 * 512 * 22, itemsize=2, dtype="float16")
    with pytest.raises(V.CannotRun, match="register budget"):
        V.get_variant("single_read").prepare(shape, H200, config=c)


# ------------------------------------------------------------------ auto
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", V.OPS)
@pytest.mark.parametrize("cols, on_h200, on_a100", [
    (1, "single_read", "three_pass"),
    (2048, "single_read", "three_pass"),  # a warp per row: 4 KB
    (2049, "three_pass", "three_pass"),
    (8192, "three_pass", "three_pass"),
    (8193, "single_read", "two_pass"),
    (100003, "single_read", "two_pass"),
    (393216, "single_read", "two_pass"),  # measured: two_pass before multi_block for halves
    (393217, "single_read", "multi_block"),
    (1_572_864, "single_read", "multi_block"),
    (1_572_865, "multi_block", "multi_block"),
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
    assert V.get_variant("long_row").dtypes == ("float32",)  # auto does not pick it: not extended


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
