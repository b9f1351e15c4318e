"""single_read's backward (y and dy on chip, each read once) on the GPU, every
dtype and backward op: through softmax_lab.softmax_backward/log_softmax_backward
(variant="single_read" and auto) and through the registry's launchers, on
random shapes (odd lengths, y[:, k:] and dy[:, k:] views sharing their
16-byte alignment), y and dy at different offsets in their 128-byte lines
(the line shift), one and 132 rows, dx misaligned by every element step,
forced small plans, y loaded directly (log_softmax: bitwise the staged
output), dy of another alignment (forced: ValueError; auto:
right), poisoned outputs, in place, special values against torch, bitwise
repeatable output, more than 2^31 elements, and compute-sanitizer.  Bounds
as tests/test_backward_gpu.py (its _error and _ok)."""

import dataclasses
import sys
import textwrap
import zlib

import numpy as np
import pytest
from forced import forced_plan
from sanitizer import run_sanitized
from test_backward_gpu import (
    FUNCTIONS,
    _assert_rows_ok,
    _check_special_values,
    _error,
    _forward,
    _large_arrays,
    _ok,
)
from test_single_read_dtypes_gpu import _torch_stream

import softmax_lab
import softmax_lab.variants
from softmax_lab.variants import single_read as SR

V = sys.modules["softmax_lab.variants"]
pytestmark = pytest.mark.gpu

DTYPES = ["float32", "float16", "bfloat16"]
OPS = ["softmax_backward", "log_softmax_backward"]


def _torch():
    return pytest.importorskip("torch")


def _hopper():
    dev = softmax_lab.device_info()
    if dev.compute_capability < 90:
        pytest.skip("single_read needs sm_90")
    return dev


def _pair(torch, rows, cols, dtype, op, k=0, width=None, seed=0, scale=3.0, g_k=None, g_width=None):
    """(dy, y): y = the forward of random logits, both [:, k : k + cols] views of rows of `width`
    (dy: g_k, g_width, by default y's, so that the two share their alignment)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    width = width or cols + k
    g_k = k if g_k is None else g_k
    g_width = g_width or max(width, g_k + cols)
    x = torch.randn(rows, width, device="cuda", generator=g) * scale
    y = _forward(torch, x, op).to(getattr(torch, dtype))[:, k : k + cols]
    dy = torch.randn(rows, g_width, device="cuda", generator=g).to(getattr(torch, dtype))[:, g_k : g_k + cols]
    return dy, y


def _poisoned(torch, rows, cols, dtype, off=0):
    base = torch.full((rows, cols + off), float("nan"), device="cuda", dtype=getattr(torch, dtype))
    return base[:, off:], base


def _launch(dy, y, out, op, **knobs):
    """The registry's launcher, as the api builds it."""
    torch = _torch()
    dev = softmax_lab.device_info()
    dtype = str(y.dtype).removeprefix("torch.")
    shape = V.Shape(y.shape[0], y.shape[1], y.stride(0), out.stride(0), y.data_ptr() % 128, out.data_ptr() % 16,
                    y.element_size(), dtype, op, dy.stride(0), dy.data_ptr() % 128)
    launch = V.get_variant("single_read").prepare(shape, dev, forced_plan("single_read", shape, dev, **knobs) if knobs else None)
    launch(y.data_ptr(), out.data_ptr(), _torch_stream(torch),
           dy.data_ptr())
    torch.cuda.synchronize()


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_random_shapes_through_the_api(dtype, op):
    torch = _torch()
    dev = _hopper()
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {op} srb".encode()))
    limit = V.get_variant("single_read").max_cols(dev, dtype, op)
    worst = 0.0
    for _ in range(40):
        kind = int(rng.integers(4))
        cols = [int(rng.integers(1, 3000)), int(rng.integers(3000, 70000)),
                int(np.exp(rng.uniform(np.log(70000), np.log(limit)))), 2 * int(rng.integers(1, 100_000)) + 1][kind]
        rows = [1, 132, int(rng.integers(1, max(2, min(300, 4_000_000 // cols))))][int(rng.integers(3))]
        k = int(rng.integers(0, 9))
        dy, y = _pair(torch, rows, cols, dtype, op, k, cols + k + int(rng.integers(0, 3)) * 8,
                      seed=int(rng.integers(1 << 30)), scale=float(rng.uniform(0.1, 20)))
        if rng.random() < 0.5:
            out, _ = _poisoned(torch, rows, cols, dtype, int(rng.integers(0, 9)))
            assert FUNCTIONS[op](dy, y, variant="single_read", out=out) is out
        else:
            out = FUNCTIONS[op](dy, y, variant="single_read")
        torch.cuda.synchronize()
        err = _error(out, dy, y, dtype, op)
        assert _ok(err, dtype), (dtype, op, tuple(y.shape), y.data_ptr() % 16, out.data_ptr() % 16, err)
        worst = max(worst, err)
    print(dtype, op, "worst", worst)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 37), (5, 4097), (2, 32001), (132, 1), (1, 196608),
                                        (132, 151936), (3, 100003)])
def test_every_alignment_of_dx_one_and_132_rows(dtype, op, rows, cols):
    torch = _torch()
    _hopper()
    vec = 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for k in (0, 1, vec - 1):
        dy, y = _pair(torch, rows, cols, dtype, op, k, seed=rows * cols + k)
        for off in range(vec) if rows * cols < 1_000_000 else (0, 1, vec - 1):
            out, base = _poisoned(torch, rows, cols, dtype, off)
            _launch(dy, y, out, op)
            assert _ok(_error(out, dy, y, dtype, op), dtype), (rows, cols, k, off)
            assert bool(torch.isnan(base[:, :off]).all()), "wrote before the output view"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, cols", [(5, 100003), (132, 151936), (3, 50257), (2, 4099), (4, 128256)])
def test_y_and_dy_at_different_offsets_in_their_lines(dtype, op, rows, cols):
    # the line shift places y's and dy's slices each at its own source's offset in a 128-byte line
    torch = _torch()
    dev = _hopper()
    vec = 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for k, g_k, extra, g_extra in ((0, vec, 0, 0), (1, 1 + 3 * vec, 0, 2 * vec), (vec - 1, vec - 1, vec, 0)):
        dy, y = _pair(torch, rows, cols, dtype, op, k, cols + k + extra, seed=cols + k, g_k=g_k,
                      g_width=cols + g_k + g_extra)
        assert (dy.data_ptr() - y.data_ptr()) % 16 == 0 and (dy.data_ptr() % 128 != y.data_ptr() % 128 or
                                                             dy.stride(0) != y.stride(0))
        plan = SR.single_read_config(cols, dev, rows, y.element_size(), arrays=2)
        for knobs in ({}, {"config": dataclasses.replace(plan, line_shift=True)}):
            out, base = _poisoned(torch, rows, cols, dtype, k % 3)
            _launch(dy, y, out, op, **knobs)
            assert _ok(_error(out, dy, y, dtype, op), dtype), (rows, cols, k, g_k, knobs)
        got = FUNCTIONS[op](dy, y)
        torch.cuda.synchronize()
        assert _ok(_error(got, dy, y, dtype, op), dtype), (rows, cols, k, g_k, "auto")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_halves_at_the_issue_length(dtype, op):
    torch = _torch()
    _hopper()
    for rows in (1, 132):
        dy, y = _pair(torch, rows, 393216, dtype, op, 3, seed=rows)
        out, _ = _poisoned(torch, rows, 393216, dtype, 5)
        assert FUNCTIONS[op](dy, y, variant="single_read", out=out) is out
        torch.cuda.synchronize()
        assert _ok(_error(out, dy, y, dtype, op), dtype), rows


@pytest.mark.parametrize("op, y_direct", [(op, False) for op in OPS] + [("log_softmax_backward", True)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", [(1, 128, 4, 2, 1), (2, 64, 3, 1, 2), (4, 96, 5, 3, 1), (16, 32, 2, 1, 1)])
def test_small_forced_plans_full_and_odd(dtype, op, y_direct, config):
    torch = _torch()
    _hopper()
    cfg = SR.ClusterConfig(*config, arrays=2, y_direct=y_direct)
    vec = 16 // torch.empty((), dtype=getattr(torch, dtype)).element_size()
    full = cfg.capacity_vecs * vec
    for rows, cols, k, off in ((5, full, 0, 1), (5, full - vec + 1, 1, 0), (9, vec * cfg.cluster * 7 + 1, 2, 3),
                               (3, min(1031, full - vec), 3, 2), (4, 1, 0, 0)):
        dy, y = _pair(torch, rows, cols, dtype, op, k, seed=cols)
        out, _ = _poisoned(torch, rows, cols, dtype, off)
        _launch(dy, y, out, op, config=cfg)
        assert _ok(_error(out, dy, y, dtype, op), dtype), (config, rows, cols, k, off)


@pytest.mark.parametrize("dtype", DTYPES)
def test_y_loaded_directly_gives_bitwise_the_staged_output(dtype):
    """log_softmax backward with y loaded straight into registers (y_direct; auto's plan for
    halves in clusters) sums dy in the same order as the staged build: bitwise the same dx, on
    odd lengths, views, rows off 128-byte lines, dx misaligned, poisoned, one to 600 rows."""
    torch = _torch()
    dev = _hopper()
    op = "log_softmax_backward"
    rng = np.random.default_rng(zlib.crc32(f"{dtype} y_direct".encode()))
    limit = V.get_variant("single_read").max_cols(dev, dtype, op)
    for cols in (5000, 32001, 50257, 100003, 128256, 151936, limit):
        rows = int(rng.choice([1, 132, 600])) if cols < 200000 else 3
        k = int(rng.integers(0, 9))
        dy, y = _pair(torch, rows, cols, dtype, op, k, cols + k + int(rng.integers(0, 3)) * 8,
                      seed=cols, scale=float(rng.uniform(0.5, 20)))
        plan = SR.single_read_config(cols, dev, rows, y.element_size(), arrays=2)
        outs = []
        for y_direct in (False, True):
            out, _ = _poisoned(torch, rows, cols, dtype, int(rng.integers(0, 9)))
            _launch(dy, y, out, op, config=dataclasses.replace(plan, y_direct=y_direct))
            outs.append(out)
        assert _ok(_error(outs[1], dy, y, dtype, op), dtype), (rows, cols, k)
        assert torch.equal(outs[0], outs[1]), (rows, cols, k, plan)
        assert SR.single_read_backward_plan(cols, dev, rows, dtype, op).y_direct == \
            (dtype != "float32" and plan.cluster >= SR.Y_DIRECT_MIN_CLUSTER)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dy_of_another_alignment_is_refused_when_forced_and_right_through_auto(dtype, op):
    torch = _torch()
    _hopper()
    f = FUNCTIONS[op]
    for rows, cols, k, g_k, width, g_width in ((4, 50000, 0, 1, None, None),  # another offset
                                               (4, 50000, 2, 2, 50003, 50002),  # another row stride
                                               (3, 9001, 1, 3, None, None)):
        dy, y = _pair(torch, rows, cols, dtype, op, k, width, seed=cols, g_k=g_k, g_width=g_width)
        poison = torch.full((rows, cols), float("nan"), device="cuda", dtype=y.dtype)
        with pytest.raises(ValueError, match="alignment"):
            f(dy, y, variant="single_read", out=poison)
        torch.cuda.synchronize()
        assert bool(torch.isnan(poison).all())
        got = f(dy, y, out=poison)  # auto: two_pass or multi_block
        torch.cuda.synchronize()
        assert _ok(_error(got, dy, y, dtype, op), dtype), (rows, cols, k, g_k)
    dy, y = _pair(torch, 1, 50000, dtype, op, 2, 50003, seed=1, g_k=2, g_width=50002)  # one row: shares it
    got = f(dy, y, variant="single_read")
    torch.cuda.synchronize()
    assert _ok(_error(got, dy, y, dtype, op), dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_special_values_follow_torch(dtype, op):
    torch = _torch()
    _hopper()
    inf, nan = float("inf"), float("nan")
    for cols in (1, 7, 9, 1000, 70001):
        x = torch.randn(8, cols, device="cuda")
        x[0, ::3] = -inf  # -inf in log_softmax's y, zeros in softmax's
        x[1] = -inf  # all -inf: y is NaN
        x[2, cols // 2] = nan
        x[4, : cols - 1] = -inf  # one finite value at the end
        x[5] = x[5] - 200
        x[7, ::2] = x[7, ::2] - 120  # softmax y underflows to 0 (or subnormal) on every other element
        y = _forward(torch, x, op).to(getattr(torch, dtype))
        dy = torch.randn(8, cols, device="cuda").to(y.dtype)
        dy[3, cols // 2] = inf
        dy[6, cols - 1] = nan
        _check_special_values(FUNCTIONS[op](dy, y, variant="single_read"), dy, y, dtype, op, cols)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_auto_picks_single_read_in_place_and_bitwise_repeatable(dtype, op):
    """Rows that start off 16-byte boundaries go to single_read for every dtype (300 of float32,
    past the two rows per SM up to which cluster_row takes them; 300 of halves too long for
    cluster_row's 256-thread blocks: auto.cluster_row_leads), and 64 aligned float32 rows to
    cluster_row."""
    torch = _torch()
    dev = _hopper()
    f = FUNCTIONS[op]
    if dtype == "float32":
        dy, y = _pair(torch, 64, 151936, dtype, op, 0, seed=4)
        shape = V.Shape(64, 151936, 151936, 151936, y.data_ptr() % 128, 0, 4, dtype, op, 151936, dy.data_ptr() % 128)
        assert V.preferences(shape, dev)[0].name == "cluster_row"
    rows, cols = 300, 151936 if dtype == "float32" else 300001
    dy, y = _pair(torch, rows, cols, dtype, op, 1, seed=5)
    shape = V.Shape(rows, cols, y.stride(0), cols, y.data_ptr() % 128, 0, y.element_size(), dtype, op,
                    dy.stride(0), dy.data_ptr() % 128)
    name = "single_read"
    assert V.preferences(shape, dev)[0].name == name
    a = f(dy, y)
    b = f(dy, y, variant=name)
    torch.cuda.synchronize()
    assert torch.equal(a, b)
    assert _ok(_error(a, dy, y, dtype, op), dtype)
    for _ in range(3):
        assert torch.equal(f(dy, y, variant=name), a)
    dyc, yc = dy.contiguous(), y.contiguous()  # the row's split depends on its alignment: compare like with like
    c = f(dyc, yc, variant="single_read")
    for which in ("dy", "y"):  # in place: out=dy, out=y
        dy2, y2 = dyc.clone(), yc.clone()
        target = dy2 if which == "dy" else y2
        assert f(dy2, y2, variant="single_read", out=target) is target
        torch.cuda.synchronize()
        assert torch.equal(target, c), which


@pytest.mark.parametrize("op", OPS)
def test_beyond_2_31_elements(op):
    """bf16 y and dy of more than 2^31 elements (4.3 GB each): 64-bit row offsets (log_softmax:
    y loaded directly, y_direct)."""
    torch = _torch()
    _hopper()
    rows, cols = 5462, 393216
    y, dy, out = _large_arrays(torch, rows, cols, "bfloat16", op)
    FUNCTIONS[op](dy, y, variant="single_read", out=out)
    torch.cuda.synchronize()
    _assert_rows_ok(out, dy, y, "bfloat16", op, [0, 1, rows // 2, rows - 9, rows - 3])
    del y, dy, out
    torch.cuda.empty_cache()


SANITIZER_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np, torch, cupy as cp, softmax_lab
    import softmax_lab.variants
    sys.path.insert(0, "tests")
    from test_backward_gpu import _error, _ok
    V = sys.modules["softmax_lab.variants"]
    from softmax_lab.variants import cluster_row as CR, multi_block_smem as MBS, single_read as SR  # noqa: F401
    from forced import forced_plan  # noqa: F401
    dev = softmax_lab.device_info()
    wrong = []

    def run(dtype, op, rows, cols, k, off, **knobs):
        x = torch.randn(rows, cols + k, device="cuda")
        y = (torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)).to(
            getattr(torch, dtype))[:, k:]
        dy = torch.randn(rows, cols + k, device="cuda").to(y.dtype)[:, k:]
        ob = torch.full((rows, cols + off), float("nan"), device="cuda", dtype=y.dtype)
        out = ob[:, off:]
        shape = V.Shape(rows, cols, cols + k, cols + off, y.data_ptr() % 128, out.data_ptr() % 16,
                        y.element_size(), dtype, op, cols + k, dy.data_ptr() % 128)
        V.get_variant("single_read").prepare(shape, dev, forced_plan("single_read", shape, dev, **knobs) if knobs else None)(
            y.data_ptr(), out.data_ptr(), softmax_lab.arrays.external_stream(torch.cuda.current_stream().cuda_stream, 0),
            dy.data_ptr())
        torch.cuda.synchronize()
        err = _error(out, dy, y, dtype, op)
        if not _ok(err, dtype):
            wrong.append((dtype, op, rows, cols, k, off, knobs, err))

    for dtype in ("float16", "bfloat16", "float32"):
        for op in ("softmax_backward", "log_softmax_backward"):
            for cols in (1000, 20001, 100003):
                run(dtype, op, 3, cols, 1, 3)
            for cfg in [(1, 128, 4, 2, 1), (2, 64, 3, 1, 2), (16, 32, 2, 1, 1)]:
                for y_direct in (False, True) if op == "log_softmax_backward" else (False,):
                    c = SR.ClusterConfig(*cfg, arrays=2, y_direct=y_direct)
                    run(dtype, op, 4, c.capacity_vecs * 16 // V.DTYPES[dtype] - 5, 2, 1, config=c)
    torch.cuda.synchronize()
    assert not wrong, wrong
    print("sanitized")
    """
)


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer_backward(tool, tmp_path):
    _torch()
    _hopper()
    run_sanitized(tool, SANITIZER_SCRIPT, tmp_path, timeout=1200)
