"""single_read for float16, bfloat16 and log_softmax on the GPU: through
softmax_lab.softmax/log_softmax(variant="single_read") and through the
registry's launchers, on random shapes (odd lengths, x[:, k:] views, outputs
misaligned by every 2-byte step), one and 132 rows, -inf/NaN rows, poisoned
outputs, more than 2^31 elements, and compute-sanitizer.  Halves within 1 ulp
of the dtype against float64 (log_softmax: plus float32's resolution of
log(sum), as tests/test_dtypes_gpu.py), float32 within 1e-6 relative."""

import sys
import textwrap
import zlib

import numpy as np
import pytest
from forced import forced_plan
from sanitizer import run_sanitized

import softmax_lab
import softmax_lab.variants
from softmax_lab.reference import log_softmax_reference, op_error, softmax_reference
from softmax_lab.variants import single_read as SR

V = sys.modules["softmax_lab.variants"]
pytestmark = pytest.mark.gpu

DTYPES = ["float32", "float16", "bfloat16"]
OPS = ["softmax", "log_softmax"]
FUNCTIONS = {"softmax": softmax_lab.softmax, "log_softmax": softmax_lab.log_softmax}


def _torch_stream(torch):
    """torch's current stream as a CuPy stream: the library's cached wrapper (it silences CuPy 14's
    deprecation of ExternalStream, whose replacement CuPy 13 lacks)."""
    from softmax_lab.arrays import external_stream

    return external_stream(torch.cuda.current_stream().cuda_stream, torch.cuda.current_device())


def _torch():
    return pytest.importorskip("torch")


def _hopper():
    dev = softmax_lab.device_info()
    if dev.compute_capability < 90:
        pytest.skip("single_read needs sm_90")
    return dev


def _error(out, x, dtype, op):
    x64 = x.detach().double().cpu().numpy()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ref = (softmax_reference if op == "softmax" else log_softmax_reference)(x64)
        return op_error(out.detach().double().cpu().numpy(), ref, dtype, op)


def _ok(err, dtype):
    return err < 1e-6 if dtype == "float32" else err <= 1.0


def _input(torch, rows, cols, dtype, x_off=0, seed=0, scale=4.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    base = (torch.randn(rows, cols + x_off, device="cuda", generator=g) * scale).to(getattr(torch, dtype))
    return base[:, x_off:]


def _poisoned_out(torch, rows, cols, dtype, y_off=0):
    yb = torch.full((rows, cols + y_off), float("nan"), device="cuda", dtype=getattr(torch, dtype))
    return yb[:, y_off:], yb


def _launch(x, y, op, variant="single_read", **knobs):
    """The registry's launcher, as the api builds it (x, y torch views with unit stride in a row)."""
    torch = _torch()
    dev = softmax_lab.device_info()
    dtype = str(x.dtype).removeprefix("torch.")
    shape = V.Shape(x.shape[0], x.shape[1], x.stride(0), y.stride(0), x.data_ptr() % 16, y.data_ptr() % 16,
                    itemsize=x.element_size(), dtype=dtype, op=op)
    launch = V.get_variant(variant).prepare(shape, dev, forced_plan(variant, shape, dev, **knobs) if knobs else None)
    launch(x.data_ptr(), y.data_ptr(), _torch_stream(torch))
    torch.cuda.synchronize()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_random_shapes_through_the_api(dtype, op):
    torch = _torch()
    _hopper()
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{op}-sr".encode()))
    limit = V.get_variant("single_read").max_cols(softmax_lab.device_info(), dtype, op)
    for _ in range(40):
        kind = rng.integers(4)
        cols = [int(rng.integers(1, 3000)), int(rng.integers(3000, 70000)),
                int(np.exp(rng.uniform(np.log(70000), np.log(min(limit, 1_600_000))))),
                2 * int(rng.integers(1, 200_000)) + 1][kind]
        rows = int(rng.integers(1, max(2, min(300, 4_000_000 // cols))))
        x = _input(torch, rows, cols, dtype, int(rng.integers(0, 9)), seed=int(rng.integers(1 << 30)),
                   scale=float(rng.uniform(0.1, 20)))
        if rng.random() < 0.5:
            out, _ = _poisoned_out(torch, rows, cols, dtype)
            assert FUNCTIONS[op](x, variant="single_read", out=out) is out
        else:
            out = FUNCTIONS[op](x, variant="single_read")
        torch.cuda.synchronize()
        err = _error(out, x, dtype, op)
        assert _ok(err, dtype), (dtype, op, tuple(x.shape), x.data_ptr() % 16, err)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("rows, cols", [(3, 37), (5, 2048), (2, 2049), (3, 2816), (2, 2817), (4, 4093), (3, 4096),
                                        (3, 4097), (2, 6007), (2, 12289), (3, 16384),  # blocks of 2-4 warps a row
                                        (7, 32000), (3, 100003), (2, 393216), (1, 786433)])
def test_every_alignment_of_x_and_y(dtype, op, rows, cols):
    """Every 2-byte misalignment of the output (0-7 elements) against three of the input: one test per
    shape, looping over the 24 pairs (672 separate tests did not fit the GPU suite in one device call)."""
    torch = _torch()
    _hopper()
    for x_off in (0, 1, 3):
        x = _input(torch, rows, cols, dtype, x_off, seed=rows * cols + x_off)
        for y_off in range(8):
            y, yb = _poisoned_out(torch, rows, cols, dtype, y_off)
            _launch(x, y, op)
            assert _ok(_error(y, x, dtype, op), dtype), (rows, cols, x_off, y_off)
            assert bool(torch.isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("config", [(1, 128, 4, 2, 1), (2, 64, 3, 1, 2), (4, 96, 5, 3, 1), (16, 32, 2, 1, 1)])
@pytest.mark.parametrize("x_off, y_off", [(0, 0), (1, 2), (3, 7), (2, 5)])
def test_small_configurations_full_and_odd(dtype, op, config, x_off, y_off):
    """Forced small plans, rows filling them to the last vector, odd lengths, a row of one."""
    torch = _torch()
    _hopper()
    cfg = SR.ClusterConfig(*config)
    full = cfg.capacity_vecs * 8
    for rows, cols in ((5, full - 8), (9, 8 * cfg.cluster * 7 + 1), (3, min(1031, full - 8)), (4, 1)):
        x = _input(torch, rows, cols, dtype, x_off, seed=cols)
        y, yb = _poisoned_out(torch, rows, cols, dtype, y_off)
        _launch(x, y, op, config=cfg)
        assert _ok(_error(y, x, dtype, op), dtype), (config, rows, cols)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("config", [(1, 128, 4, 2, 1), (2, 64, 3, 1, 2), (4, 96, 5, 3, 1), (16, 32, 2, 1, 1),
                                    (8, 512, 12, 1, 1)])
@pytest.mark.parametrize("x_off, y_off", [(0, 0), (1, 2), (3, 7), (2, 5)])
def test_small_wide_configurations_full_and_odd(dtype, config, x_off, y_off):
    """The same for forced wide plans (SR_WIDE: half softmax, e in place), special rows among them."""
    torch = _torch()
    _hopper()
    cfg = SR.ClusterConfig(*config, wide=True)
    full = cfg.capacity_vecs * 8
    for rows, cols in ((5, full - 8), (9, 8 * cfg.cluster * 7 + 1), (3, min(1031, full - 8)), (4, 1)):
        x = _input(torch, rows, cols, dtype, x_off, seed=cols)
        x[1, : cols // 2] = float("-inf")
        x[2] = float("-inf")
        y, yb = _poisoned_out(torch, rows, cols, dtype, y_off)
        _launch(x, y, "softmax", config=cfg)
        assert _ok(_error(y, x, dtype, "softmax"), dtype), (config, rows, cols)
        assert bool(torch.isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cols", [80003, 151936, 262147])
def test_two_blocks_per_sm_plans_at_odd_alignments(dtype, op, cols):
    """The halves' plans of two blocks per SM in a cluster (HALVES_ONE_BLOCK_COST), derived for 4096
    rows and run on a few: x and y at different alignments, rows of -inf, all -inf and NaN."""
    torch = _torch()
    dev = _hopper()
    config = SR.single_read_plan(cols, dev, 4096, dtype, op)
    assert config.blocks_per_sm == 2 and config.cluster > 1, config
    for x_off, y_off in ((0, 0), (3, 5), (1, 0)):
        x = _input(torch, 9, cols, dtype, x_off, seed=cols + x_off)
        x[1, : cols // 3] = float("-inf")
        x[2] = float("-inf")
        x[3, cols // 2] = float("nan")
        y, yb = _poisoned_out(torch, 9, cols, dtype, y_off)
        _launch(x, y, op, config=config)
        assert _ok(_error(y, x, dtype, op), dtype), (config, x_off, y_off)
        assert bool(torch.isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols", [(1, 393216), (132, 393216), (132, 151936), (1, 1), (132, 1), (7, 1000)])
def test_one_and_132_rows(dtype, op, rows, cols):
    torch = _torch()
    _hopper()
    x = _input(torch, rows, cols, dtype, seed=rows + cols)
    y, _ = _poisoned_out(torch, rows, cols, dtype)
    _launch(x, y, op)
    assert _ok(_error(y, x, dtype, op), dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 7, 9, 1000, 2049, 70001, 393216])
def test_special_values_follow_torch(dtype, op, cols):
    torch = _torch()
    _hopper()
    inf, nan = float("inf"), float("nan")
    x = _input(torch, 6, cols, dtype, 1, seed=cols)
    x[0, ::3] = -inf
    x[1] = -inf
    x[2, cols // 2] = nan
    x[3, cols - 1] = inf
    x[4, : cols - 1] = -inf
    x[5] = x[5] - 200
    out = FUNCTIONS[op](x, variant="single_read")
    torch.cuda.synchronize()
    want = getattr(torch, op)(x.float(), dim=-1).double().cpu().numpy()
    got = out.double().cpu().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want)), (cols, dtype, op)
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), (cols, dtype, op)
    assert _ok(_error(out, x, dtype, op), dtype)


@pytest.mark.parametrize("variant", [v.name for v in softmax_lab.variants().values() if v.reads == 1])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1000, 70001, 151936, 393216])
def test_outputs_down_to_the_smallest_subnormal(dtype, op, cols, variant):
    """Rows spread over [-95, 0] with a 0 in every 16 elements: each thread holds its max and
    elements whose e^(x - m_t) is below float32's smallest normal, so softmax outputs run through
    bfloat16's (and float32's) subnormals.  The halves' ex2.approx.ftz must not flush them
    (elements.cuh, exp_elem: the shift keeps them normal), and the error stays within 1 ulp
    (of the subnormal spacing there)."""
    torch = _torch()
    _hopper()
    g = torch.Generator(device="cuda").manual_seed(cols)
    x = (torch.rand(5, cols, device="cuda", generator=g) * -95)
    x[:, ::16] = 0
    x = x.to(getattr(torch, dtype))
    y, _ = _poisoned_out(torch, 5, cols, dtype)
    _launch(x, y, op, variant)
    assert _ok(_error(y, x, dtype, op), dtype)
    if dtype == "bfloat16" and op == "softmax":  # the case exists: nonzero outputs below the normal range
        tiny = y.float().abs()
        assert bool(((tiny > 0) & (tiny < 2.0**-126)).any())


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_auto_picks_cluster_row_and_is_bitwise_repeatable(dtype, op):
    torch = _torch()
    dev = _hopper()
    x = _input(torch, 2048, 151936, dtype, 1, seed=5)  # rows 151937 apart: unaligned
    assert V.preferences(V.Shape(2048, 151936, 151937, 151936, x.data_ptr() % 128, 0,
                                 itemsize=x.element_size(), dtype=dtype, op=op), dev)[0].name == "cluster_row"
    a = FUNCTIONS[op](x)
    b = FUNCTIONS[op](x, variant="cluster_row")
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    assert _ok(_error(a, x, dtype, op), dtype)


@pytest.mark.parametrize("dtype, rows, cols", [("bfloat16", 5462, 393216), ("float16", 2731, 786432)])
def test_above_2_to_the_31_elements_halves(dtype, rows, cols):  # 2.15e9 elements
    torch = _torch()
    _hopper()
    try:
        x = torch.randn(rows, cols, device="cuda").to(getattr(torch, dtype))
        y = torch.full_like(x, float("nan"))
    except torch.cuda.OutOfMemoryError:
        pytest.skip("not enough device memory")
    for op in OPS:
        _launch(x, y, op)
        idx = [0, 1, rows // 2, rows - 9, rows - 2, rows - 1]
        assert _ok(_error(y[idx], x[idx], dtype, op), dtype), op
    del x, y
    torch.cuda.empty_cache()


SANITIZER_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np, torch, cupy as cp, softmax_lab
    import softmax_lab.variants
    from softmax_lab.reference import log_softmax_reference, op_error, softmax_reference
    V = sys.modules["softmax_lab.variants"]
    from softmax_lab.variants import cluster_row as CR, multi_block_smem as MBS, single_read as SR  # noqa: F401
    sys.path.insert(0, "tests")
    from forced import forced_plan  # noqa: F401
    dev = softmax_lab.device_info()
    wrong = []

    def run(dtype, op, rows, cols, xo, yo, variant="single_read", **knobs):
        xb = torch.randn(rows, cols + xo, device="cuda").to(getattr(torch, dtype))
        yb = torch.full((rows, cols + yo), float("nan"), device="cuda", dtype=xb.dtype)
        x, y = xb[:, xo:], yb[:, yo:]
        shape = V.Shape(rows, cols, cols + xo, cols + yo, x.data_ptr() % 16, y.data_ptr() % 16,
                        itemsize=x.element_size(), dtype=dtype, op=op)
        V.get_variant(variant).prepare(shape, dev, forced_plan(variant, shape, dev, **knobs) if knobs else None)(
            x.data_ptr(), y.data_ptr(), softmax_lab.arrays.external_stream(torch.cuda.current_stream().cuda_stream, 0))
        torch.cuda.synchronize()
        ref = (softmax_reference if op == "softmax" else log_softmax_reference)(x.double().cpu().numpy())
        got = y.double().cpu().numpy()
        err = op_error(got, ref, dtype, op)
        if not err <= (1e-6 if dtype == "float32" else 1.0):
            wrong.append((dtype, op, rows, cols, xo, yo, knobs, err))

    for dtype in ("float16", "bfloat16", "float32"):
        for op in ("softmax", "log_softmax"):
            for cols in (1000, 2047, 2049, 3071, 4093, 10001, 40000, 393216):
                run(dtype, op, 3, cols, 1, 3)  # derived plans and the warp path (up to 16 vectors a lane), rows of 3
            for cfg in [(1, 128, 4, 2, 1), (2, 64, 3, 1, 2), (16, 32, 2, 1, 1)]:
                c = SR.ClusterConfig(*cfg)
                run(dtype, op, 4, c.capacity_vecs * 16 // V.DTYPES[dtype] - 5, 2, 1, config=c)
            if dtype != "float32":  # a plan of two blocks per SM in a cluster of 4, derived for 4096 rows
                run(dtype, op, 3, 151936, 1, 3, config=SR.single_read_plan(151936, dev, 4096, dtype, op))
                for cols in (1000, 40001, 128256):  # cluster_row's halves: exp_elem in the sums (and outputs)
                    run(dtype, op, 3, cols, 1, 3, variant="cluster_row")
                run(dtype, op, 3, 786431, 1, 3, variant="cluster_row")  # 16 x 256 x 24 x 2: auto's, past 1056 rows
                run(dtype, op, 3, 40001, 1, 3, variant="multi_block_l2")  # the same, over 3 chunks a row
    torch.cuda.synchronize()
    assert not wrong, wrong
    print("sanitized")
    """
)


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer_on_every_dtype_and_op(tool, tmp_path):
    _torch()
    _hopper()
    run_sanitized(tool, SANITIZER_SCRIPT, tmp_path, timeout=1200)
