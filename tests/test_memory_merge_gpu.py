"""single_read's memory-merged groups (SR_MEMORY_MERGE) on the GPU: a row over
a group of any resident blocks, merged through device memory.  Forced small
groups (odd sizes, several rows per group, one group, rows of one element),
every dtype and forward op, x and y at every alignment, -inf/NaN rows,
NaN-poisoned outputs, the derived plans of long rows, bitwise repeatability,
more than 2^31 elements and compute-sanitizer.  Halves within 1 ulp of the
dtype against float64, float32 within 1e-6 relative (tests/test_single_read_dtypes_gpu.py).
Skipped without a GPU (conftest.py)."""

import sys
import textwrap

import pytest
from sanitizer import run_sanitized
from several_streams import assert_finishes_on_several_streams
from test_single_read_dtypes_gpu import (
    _error,
    _hopper,
    _input,
    _launch,
    _ok,
    _poisoned_out,
    _torch,
)

import softmax_lab
import softmax_lab.variants
from softmax_lab.variants import single_read as SR

V = sys.modules["softmax_lab.variants"]
pytestmark = pytest.mark.gpu

DTYPES = ["float32", "float16", "bfloat16"]
OPS = ["softmax", "log_softmax"]
# (group, threads, vpt, stages, blocks per SM): odd groups, a group larger than a warp, two blocks per SM
SMALL_GROUPS = [(3, 64, 3, 1, 1), (7, 96, 2, 1, 2), (33, 128, 2, 1, 1), (2, 32, 5, 1, 1)]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", SMALL_GROUPS)
@pytest.mark.parametrize("x_off, y_off", [(0, 0), (1, 2), (3, 7), (2, 5)])
def test_small_groups_full_odd_and_special(dtype, op, config, x_off, y_off):
    """Rows that fill the group to its last vector, odd lengths, a row of one; two
    groups for 9 rows (so each group takes several) and as many groups as rows."""
    torch = _torch()
    _hopper()
    cfg = SR.ClusterConfig(*config, memory_merge=True)
    full = cfg.capacity_vecs * 16 // V.DTYPES[dtype]
    for rows, cols, groups in ((5, full - 8, None), (9, 8 * cfg.cluster * 7 + 1, 2), (3, min(1031, full - 8), 1),
                               (4, 1, None)):
        x = _input(torch, rows, cols, dtype, x_off, seed=cols + x_off)
        if cols > 2:
            x[1, : cols // 2] = float("-inf")
            x[2] = float("-inf")
        if rows > 3 and cols > 2:
            x[3, cols // 3] = float("nan")
        y, yb = _poisoned_out(torch, rows, cols, dtype, y_off)
        _launch(x, y, op, config=cfg, groups=groups)
        assert _ok(_error(y, x, dtype, op), dtype), (config, rows, cols, groups)
        assert bool(torch.isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("dtype, op", [("float32", "softmax"), ("bfloat16", "softmax"), ("float16", "log_softmax"),
                                       ("float32", "log_softmax")])
@pytest.mark.parametrize("rows, cols", [(3, 786433), (40, 1 << 20), (2, 3_000_017), (9, 1 << 22), (300, 500_001)])
def test_derived_plans_of_long_rows(dtype, op, rows, cols):
    """single_read's own plans past a cluster's reach, bitwise the same on a second run."""
    torch = _torch()
    dev = _hopper()
    plan = SR.single_read_plan(cols, dev, rows, dtype, op)
    assert plan is not None
    x = _input(torch, rows, cols, dtype, 1, seed=rows)
    y, yb = _poisoned_out(torch, rows, cols, dtype, 2)
    _launch(x, y, op)
    assert _ok(_error(y, x, dtype, op), dtype), (plan, rows, cols)
    first = y.clone()
    y.fill_(float("nan"))
    _launch(x, y, op)
    assert torch.equal(first, y), "not bitwise repeatable"


def test_auto_takes_the_group_where_it_pays_and_matches_the_reference():
    torch = _torch()
    dev = _hopper()
    rows, cols = 1300, 500000  # groups of 11, 109 rounds: ahead of multi_block_smem (single_read.memory_merge_pays)
    shape = V.Shape(rows, cols, cols, cols)
    assert V.preferences(shape, dev)[0].name == "single_read"
    assert SR.single_read_plan(cols, dev, rows).memory_merge
    x = _input(torch, rows, cols, "float32", seed=7)
    y = softmax_lab.softmax(x)
    assert _ok(_error(y, x, "float32", "softmax"), "float32")


@pytest.mark.parametrize("dtype, rows, cols", [("float32", 2100, 1 << 20), ("bfloat16", 1040, 1 << 21)])
def test_above_2_to_the_31_elements(dtype, rows, cols):  # 2.2e9 elements
    torch = _torch()
    _hopper()
    try:
        x = _input(torch, rows, cols, dtype, seed=5)
        y, _ = _poisoned_out(torch, rows, cols, dtype)
    except torch.cuda.OutOfMemoryError:
        pytest.skip("not enough device memory")
    assert SR.single_read_plan(cols, softmax_lab.device_info(), rows, dtype).memory_merge
    _launch(x, y, "softmax")
    for r in (0, 1, rows // 2, rows - 2, rows - 1):
        assert _ok(_error(y[r : r + 1], x[r : r + 1], dtype, "softmax"), dtype), r
    del x, y
    torch.cuda.empty_cache()


def test_launches_on_several_streams_finish():
    """Groups of more than a third of the GPU's blocks (3M float32 columns: 66 blocks), launched on
    six streams at once.  Three grids could each start fewer blocks than a group and wait for blocks
    of their own that cannot start; the launch is cooperative (every block of a grid resident
    together), so none does (run in a child process with a timeout, so that a hang fails the test)."""
    dev = _hopper()
    rows, cols = 8, 3_000_017
    plan = SR.single_read_plan(cols, dev, rows)
    assert plan.memory_merge and 3 * (plan.cluster - 1) >= dev.sm_count * plan.blocks_per_sm, plan
    assert_finishes_on_several_streams("single_read", rows, cols, 6)


SANITIZER_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch, cupy, softmax_lab
    import softmax_lab.variants
    sys.path.insert(0, "tests")
    from test_single_read_dtypes_gpu import _error, _ok, _torch_stream
    V = sys.modules["softmax_lab.variants"]
    from softmax_lab.variants import cluster_row as CR, multi_block_smem as MBS, single_read as SR  # noqa: F401
    from forced import forced_plan  # noqa: F401
    dev = softmax_lab.device_info()
    stream = _torch_stream(torch)
    wrong = []

    def run(dtype, op, rows, cols, xo, yo, **knobs):
        xb = (torch.randn(rows, cols + xo, device="cuda") * 4).to(getattr(torch, dtype))
        yb = torch.full((rows, cols + yo), float("nan"), device="cuda", dtype=xb.dtype)
        x, y = xb[:, xo:], yb[:, yo:]
        shape = V.Shape(rows, cols, cols + xo, cols + yo, x.data_ptr() % 128, y.data_ptr() % 16,
                        itemsize=x.element_size(), dtype=dtype, op=op)
        V.get_variant("single_read").prepare(shape, dev, forced_plan("single_read", shape, dev, **knobs) if knobs else None)(x.data_ptr(), y.data_ptr(), stream)
        err = _error(y, x, dtype, op)
        if not _ok(err, dtype):
            wrong.append((dtype, op, rows, cols, xo, yo, knobs, err))

    for dtype, op in (("float32", "softmax"), ("bfloat16", "softmax"), ("float16", "log_softmax")):
        for cfg in [(3, 64, 3, 1, 1), (7, 96, 2, 1, 2)]:
            c = SR.ClusterConfig(*cfg, memory_merge=True)
            run(dtype, op, 5, c.capacity_vecs * 16 // V.DTYPES[dtype] - 5, 2, 1, config=c, groups=2)
        run(dtype, op, 3, 1 << 20, 1, 3)  # the derived plan
    torch.cuda.synchronize()
    assert not wrong, wrong
    print("sanitized")
    """
)


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer_on_memory_merged_groups(tool, tmp_path):
    _torch()
    _hopper()
    run_sanitized(tool, SANITIZER_SCRIPT, tmp_path, timeout=1200)
