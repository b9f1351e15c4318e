"""The read-once paths on the GPU: derived single_read plans, store realignment,
few rows, against a float64 reference with NaN-poisoned outputs.
Skipped without a GPU (conftest.py)."""

import sys
import textwrap

import numpy as np
import pytest
from emulate import close_by_elements, lane_spread_row
from forced import forced_plan
from sanitizer import run_sanitized

import softmax_lab
import softmax_lab.variants
from softmax_lab.reference import relative_error, softmax_reference
from softmax_lab.variants import cluster_row as CR
from softmax_lab.variants import single_read as SR

V = sys.modules["softmax_lab.variants"]
pytestmark = pytest.mark.gpu


def _cp():
    import cupy

    return cupy


def _hopper():
    dev = softmax_lab.device_info()
    if dev.compute_capability < 90:
        pytest.skip("single_read and cluster_row need sm_90")
    return dev


def _views(rows, cols, x_off, y_off, seed):
    cp = _cp()
    rng = cp.random.default_rng(seed)
    xb = (rng.standard_normal((rows, cols + x_off), dtype=cp.float32) * 3)
    yb = cp.full((rows, cols + y_off), cp.nan, dtype=cp.float32)
    return xb[:, x_off:], yb[:, y_off:], yb


def _check_rows(y, x, rows=None):
    cp = _cp()
    idx = np.arange(x.shape[0]) if rows is None else np.asarray(rows)
    assert not bool(cp.isnan(y[idx]).any()), "unwritten outputs"
    err = relative_error(cp.asnumpy(y[idx]), softmax_reference(cp.asnumpy(x[idx])))
    assert err < 1e-5, err


def _run(name, x, y, yb, **knobs):
    cp = _cp()
    dev = softmax_lab.device_info()
    shape = V.Shape(x.shape[0], x.shape[1], x.strides[0] // 4, yb.strides[0] // 4, x.data.ptr % 128, y.data.ptr % 16)
    launch = V.get_variant(name).prepare(shape, dev, forced_plan(name, shape, dev, **knobs) if knobs else None)
    launch(x.data.ptr, y.data.ptr, cp.cuda.get_current_stream())
    cp.cuda.get_current_stream().synchronize()


@pytest.mark.parametrize("name", [*(v.name for v in softmax_lab.variants().values() if v.reads == 1), "auto"])
@pytest.mark.parametrize("rows, cols", [(3, 4099), (2, 65536), (2, 151937), (140, 20003)])
def test_float_outputs_far_below_the_max_keep_their_precision(name, rows, cols):
    """Rows whose threads' maxima spread over [-90, 0] (tests/emulate.py lane_spread_row): every
    output within 1e-5 of float64 or 2 subnormal steps, so outputs of 1e-30 keep their digits and the
    subnormal ones are written (cluster_row's exp_elem by ex2.approx.ftz with a shift of 2^24, and its
    two multiplies)."""
    cp = _cp()
    x = cp.asarray(np.stack([lane_spread_row(cols, seed) for seed in range(rows)]))
    y = softmax_lab.softmax(x, variant=name)
    ref = softmax_reference(cp.asnumpy(x).astype(np.float64))
    out = cp.asnumpy(y)
    assert close_by_elements(out, ref), name
    assert ((0 < out) & (out < 2.0**-126)).sum() > rows * cols // 64  # subnormal outputs


@pytest.mark.parametrize("x_off", [0, 1, 2, 3])
@pytest.mark.parametrize("y_off", [0, 1, 2, 3])
@pytest.mark.parametrize("config", [(1, 128, 4, 2, 1), (2, 64, 3, 1, 2), (4, 96, 5, 3, 1), (16, 32, 2, 1, 1)])
def test_single_read_configs_at_every_alignment(config, x_off, y_off):
    _hopper()
    cfg = SR.ClusterConfig(*config)
    for rows, cols in ((5, cfg.capacity_floats - 4), (9, 4 * cfg.cluster * 7 + 1), (3, min(1031, cfg.capacity_floats - 4))):
        x, y, yb = _views(rows, cols, x_off, y_off, seed=cols + x_off)
        _run("single_read", x, y, yb, config=cfg)
        _check_rows(y, x)
        assert bool(_cp().isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("rows, cols, x_off, y_off", [
    (19, 520, 0, 1), (5, 1000, 1, 2), (3, 1024, 3, 1), (2, 37, 2, 3),  # single_read_warp
    (1, 1025, 1, 0), (5, 1536, 1, 2), (3, 2047, 2, 3), (2, 2048, 3, 1),  # its builds of 9-16 vectors a lane
    (4, 2049, 0, 2), (3, 2300, 1, 1), (3, 3071, 2, 1), (5, 3072, 3, 2),  # blocks of two warps a row
    (2, 3073, 1, 3), (3, 4097, 0, 3), (7, 32000, 2, 1), (33, 65537, 3, 2), (5, 100003, 1, 3), (132, 128256, 0, 2),
    (2, 151936, 3, 3), (1, 393217, 0, 1), (40, 500000, 2, 0), (3, 786432, 1, 2),
    (132, 262147, 1, 3), (7, 300001, 2, 1),  # cluster_row's clusters of 16 at two blocks per SM
])
def test_auto_at_odd_lengths_views_and_misaligned_out(rows, cols, x_off, y_off):
    x, y, yb = _views(rows, cols, x_off, y_off, seed=rows * cols)
    softmax_lab.softmax(x, out=y)
    _check_rows(y, x)


@pytest.mark.parametrize("rows, cols", [(1, 393216), (32, 393216), (132, 393216), (133, 262147), (512, 100003)])
def test_few_rows(rows, cols):
    _hopper()
    x, y, yb = _views(rows, cols, 0, 0, seed=rows)
    _run("single_read", x, y, yb)
    _check_rows(y, x)


@pytest.mark.parametrize("rows, cols, x_off, y_off", [(100, 70001, 1, 2), (37, 9000, 0, 3), (5, 151936, 3, 0),
                                                   (20, 262147, 2, 1)])
def test_cluster_row_rows_over_several_grid_lines(monkeypatch, rows, cols, x_off, y_off):
    """More rows than a grid line takes (MAX_GRID_X made small): every line's
    rows written, the last line's spare clusters idle."""
    _hopper()
    plan = CR.cluster_row_plan(cols, softmax_lab.device_info(), rows)
    monkeypatch.setattr(CR, "MAX_GRID_X", 3 * plan.cluster)  # 3 rows a line
    x, y, yb = _views(rows, cols, x_off, y_off, seed=rows + cols)
    _run("cluster_row", x, y, yb)
    _check_rows(y, x)
    assert bool(_cp().isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("name, rows, cols", [("single_read", 5462, 393216)])
def test_beyond_2_31_elements(name, rows, cols):  # 2.15e9 and 2.18e9 elements
    _hopper()
    cp = _cp()
    try:
        x = cp.random.standard_normal((rows, cols), dtype=cp.float32)
        y = cp.full((rows, cols), cp.nan, dtype=cp.float32)
    except cp.cuda.memory.OutOfMemoryError:
        pytest.skip("not enough device memory")
    _run(name, x, y, y)
    _check_rows(y, x, rows=[0, 1, rows // 2, rows - 9, rows - 2, rows - 1])
    del x, y
    cp.get_default_memory_pool().free_all_blocks()


SANITIZER_SCRIPT = textwrap.dedent(
    """
    import sys
    import cupy as cp, softmax_lab
    import softmax_lab.variants
    from softmax_lab.reference import relative_error, softmax_reference
    V = sys.modules["softmax_lab.variants"]
    from softmax_lab.variants import cluster_row as CR, multi_block_smem as MBS, single_read as SR  # noqa: F401
    sys.path.insert(0, "tests")
    from forced import forced_plan  # noqa: F401
    dev = softmax_lab.device_info()
    stream = cp.cuda.get_current_stream()
    wrong = []

    def run(name, rows, cols, xo, yo, **knobs):
        xb = cp.random.standard_normal((rows, cols + xo), dtype=cp.float32)
        yb = cp.full((rows, cols + yo), cp.nan, dtype=cp.float32)
        x, y = xb[:, xo:], yb[:, yo:]
        shape = V.Shape(rows, cols, cols + xo, cols + yo, x.data.ptr % 128, y.data.ptr % 16)
        V.get_variant(name).prepare(shape, dev, forced_plan(name, shape, dev, **knobs) if knobs else None)(x.data.ptr, y.data.ptr, stream)
        if not relative_error(cp.asnumpy(y), softmax_reference(cp.asnumpy(x))) < 1e-5:
            wrong.append((name, rows, cols, xo, yo, knobs))  # reported at the end: every launch is sanitized

    for cols in (1000, 5003, 40000, 393216):
        run("single_read", 3, cols, 1, 2)  # derived plans, rows of 3
    run("single_read", 17, 151936, 3, 1)
    for cfg in [(1, 128, 4, 2, 1), (2, 64, 3, 1, 2), (4, 96, 5, 3, 1), (16, 32, 2, 1, 1)]:
        c = SR.ClusterConfig(*cfg)
        run("single_read", 4, c.capacity_floats - 5, 2, 1, config=c)
    c = SR.ClusterConfig(8, 64, 2, 1)  # the pushed merge, several rows per cluster (both slot sets reused)
    run("single_read", 700, c.capacity_floats - 5, 2, 1, config=c)
    cp.cuda.Device().synchronize()
    assert not wrong, wrong
    print("sanitized")
    """
)


@pytest.mark.parametrize("cfg, rows", [((8, 64, 2, 1), 5000), ((16, 128, 3, 1), 3000), ((8, 512, 6, 1), 1500)])
def test_pushed_merge_over_many_rows_per_cluster_is_right_and_bitwise_repeatable(cfg, rows):
    """single_read's pushed per-row merge (clusters of 8 or more): every cluster runs many rows, so
    each slot set and mbarrier parity is reused many times; every row right, the output the same
    bits on every run."""
    _hopper()
    cp = _cp()
    c = SR.ClusterConfig(*cfg)
    assert c.pushed_merge
    x, y, yb = _views(rows, c.capacity_floats - 3, 1, 2, seed=cfg[0] + rows)
    _run("single_read", x, y, yb, config=c)
    _check_rows(y, x)
    first = y.copy()
    for _ in range(2):
        y.fill(cp.nan)
        _run("single_read", x, y, yb, config=c)
        assert bool((y.view(cp.uint32) == first.view(cp.uint32)).all())


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer_on_the_new_configurations(tool, tmp_path):
    _hopper()
    run_sanitized(tool, SANITIZER_SCRIPT, tmp_path)
