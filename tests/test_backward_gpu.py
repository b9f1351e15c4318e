"""softmax_backward and log_softmax_backward on the GPU: every (variant, dtype,
op) and auto on random shapes (odd lengths, rows of one element, 1 and 132
rows, y[:, k:] and dy[:, j:] views of their own alignments, misaligned outs)
with poisoned outputs, in place (out=dy, out=y), dy and y the same array, the
copy paths, special values against torch, more than 2^31 elements, and the
errors.  Bounds as tests/test_backward.py: float32 within 1e-6 of the terms'
size (backward_scale), halves within 1 ulp beyond 4 x 2^-24 of it."""

import sys
import zlib

import numpy as np
import pytest
from sanitizer import run_sanitized

import softmax_lab
from softmax_lab.reference import (
    BACKWARD_BOUNDS,
    backward_error,
    backward_op_error,
    backward_scale,
    log_softmax_backward_reference,
    softmax_backward_reference,
    softmax_reference,
    to_float64,
)
from softmax_lab.variants import cluster_row as CR

pytestmark = pytest.mark.gpu

VARIANTS = ["two_pass", "multi_block", "multi_block_l2", "cluster_row", "auto"]
DTYPES = ["float32", "float16", "bfloat16"]
OPS = ["softmax_backward", "log_softmax_backward"]
FUNCTIONS = {"softmax_backward": softmax_lab.softmax_backward, "log_softmax_backward": softmax_lab.log_softmax_backward}
REFERENCES = {"softmax_backward": softmax_backward_reference, "log_softmax_backward": log_softmax_backward_reference}


def _torch():
    return pytest.importorskip("torch")


def _numpy64(a):
    if type(a).__module__.startswith("torch"):
        return a.detach().double().cpu().numpy()
    import cupy

    return cupy.asnumpy(a).astype(np.float64)


def _error(dx, dy, y, dtype, op):
    """backward_op_error of dx (float32: <= 1e-6 passes; halves: ulps beyond the float32 floor, <= 1)."""
    dy64, y64 = _numpy64(dy), _numpy64(y)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = REFERENCES[op](dy64, y64)
    return backward_op_error(_numpy64(dx), ref, dy64, y64, dtype, op)


def _worst_element(dx, dy, y, op):
    """(row, column, dx, reference, scale) where dx is furthest from the float64 reference, for failure messages."""
    dy64, y64, got = _numpy64(dy), _numpy64(y), _numpy64(dx)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        ref = REFERENCES[op](dy64, y64)
        scale = backward_scale(dy64, y64, op)
        rel = np.where(np.isnan(got) != np.isnan(ref), np.inf, np.nan_to_num(np.abs(got - ref) / scale))
    r, c = np.unravel_index(int(np.argmax(rel)), rel.shape)
    return int(r), int(c), float(got[r, c]), float(ref[r, c]), float(scale[r, c])


def _ok(err, dtype):
    return err <= BACKWARD_BOUNDS[dtype]


def _torch_backward(torch, op):
    """torch's own backward of op: _softmax_backward_data or _log_softmax_backward_data (dy, y, dim, dtype)."""
    return torch._softmax_backward_data if op == "softmax_backward" else torch._log_softmax_backward_data


def _check_special_values(got, dy, y, dtype, op, cols):
    """got (dx) has the NaNs and infinities of torch's backward in float32 and is within the bound
    elsewhere."""
    torch = _torch()
    torch.cuda.synchronize()
    want = _torch_backward(torch, op)(dy.float(), y.float(), -1, torch.float32).double().cpu().numpy()
    g = _numpy64(got)
    assert np.array_equal(np.isnan(g), np.isnan(want)), (cols, dtype, op)
    assert np.array_equal(np.isinf(g), np.isinf(want)), (cols, dtype, op)
    assert _ok(_error(got, dy, y, dtype, op), dtype), (cols, dtype, op)


def _forward(torch, x, op):
    return torch.softmax(x, -1) if op == "softmax_backward" else torch.log_softmax(x, -1)


def _large_arrays(torch, rows, cols, dtype, op, scale=1.0, step=1024):
    """y (the forward op of scale x a normal draw, `step` rows at a time), dy (a normal draw) and a
    NaN-filled out, rows x cols of dtype: the tests past 2^31 elements.  Skips where the device's
    memory is short."""
    assert rows * cols > 2**31
    try:
        y = torch.empty(rows, cols, device="cuda", dtype=getattr(torch, dtype))
        for r0 in range(0, rows, step):
            y[r0 : r0 + step] = _forward(torch, torch.randn(min(step, rows - r0), cols, device="cuda") * scale, op)
        dy = torch.randn(rows, cols, device="cuda").to(y.dtype)
        return y, dy, torch.full_like(y, float("nan"))
    except torch.cuda.OutOfMemoryError:
        pytest.skip("not enough device memory")


def _assert_rows_ok(out, dy, y, dtype, op, starts):
    """Rows r0 .. r0 + 2 of out, for each r0 in starts, within the dtype's bound of the float64 reference."""
    for r0 in starts:
        sl = slice(r0, r0 + 3)
        assert _ok(_error(out[sl], dy[sl], y[sl], dtype, op), dtype), r0


def _view(torch, rng, rows, cols, dtype, make):
    """make(rows, width) as a dtype tensor, then [:, k : k + cols] for a random k: every alignment."""
    k = int(rng.integers(0, 9))
    pad = int(rng.integers(0, 3)) * int(rng.integers(0, 9))
    return make(rows, cols + k + pad).to(getattr(torch, dtype))[:, k : k + cols]


def _random_pair(torch, rng, dtype, op):
    kind = int(rng.integers(6))
    cols = [1, int(rng.integers(2, 20)), int(rng.integers(20, 3000)), int(rng.integers(3000, 70000)),
            int(np.exp(rng.uniform(np.log(1000), np.log(300_000)))), 2 * int(rng.integers(1, 30000)) + 1][kind]
    rows = [1, 132, int(rng.integers(1, max(2, min(200, 2_000_000 // cols))))][int(rng.integers(3))]
    scale = float(rng.uniform(0.1, 20))
    y = _view(torch, rng, rows, cols, dtype, lambda r, c: _forward(torch, torch.randn(r, c, device="cuda") * scale, op))
    dy = _view(torch, rng, rows, cols, dtype, lambda r, c: torch.randn(r, c, device="cuda"))
    return dy, y


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", VARIANTS)
def test_random_shapes_every_variant_dtype_and_op(name, dtype, op):
    torch = _torch()
    rng = np.random.default_rng(zlib.crc32(f"{name}-{dtype}-{op}".encode()))
    worst = 0.0
    for _ in range(60):
        dy, y = _random_pair(torch, rng, dtype, op)
        if rng.random() < 0.5:  # a poisoned out, at its own alignment
            k = int(rng.integers(0, 9))
            base = torch.full((y.shape[0], y.shape[1] + k), float("nan"), dtype=y.dtype, device="cuda")
            out = base[:, k:]
            assert FUNCTIONS[op](dy, y, variant=name, out=out) is out
        else:
            out = FUNCTIONS[op](dy, y, variant=name)
        torch.cuda.synchronize()
        err = _error(out, dy, y, dtype, op)
        assert _ok(err, dtype), (name, dtype, op, tuple(y.shape), y.stride(0), dy.stride(0), y.data_ptr() % 16,
                                 dy.data_ptr() % 16, out.data_ptr() % 16, err, _worst_element(out, dy, y, op))
        worst = max(worst, err)
    print(name, dtype, op, "worst", worst)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", VARIANTS)
def test_matches_torch_and_in_place(name, dtype, op):
    """Against torch's own backward, and out=dy, out=y in place, dy and y the same array."""
    torch = _torch()
    theirs = _torch_backward(torch, op)
    f = FUNCTIONS[op]
    for rows, cols in ((1, 1), (3, 7), (132, 1001), (5, 70001), (2, 300_003)):
        x = torch.randn(rows, cols, device="cuda")
        y = _forward(torch, x, op).to(getattr(torch, dtype))
        dy = torch.randn(rows, cols, device="cuda").to(y.dtype)
        want = theirs(dy.float(), y.float(), -1, torch.float32).to(y.dtype)  # float32 math, one rounding
        got = f(dy, y, variant=name)
        torch.cuda.synchronize()
        assert _ok(_error(got, dy, y, dtype, op), dtype)
        # torch sums in another order: the two agree to the bound's size, not bit for bit
        d, w = _numpy64(got), _numpy64(want)
        assert np.allclose(d, w, rtol=2.0**-6, atol=1e-5 * float(np.abs(w).max() + 1)), (rows, cols)
        for which in ("dy", "y"):
            dy2, y2 = dy.clone(), y.clone()
            target = dy2 if which == "dy" else y2
            assert f(dy2, y2, variant=name, out=target) is target
            torch.cuda.synchronize()
            assert torch.equal(target, got), (which, rows, cols)  # the same result, bit for bit
        same = f(y, y, variant=name)  # dy and y alias: reading only
        torch.cuda.synchronize()
        assert _ok(_error(same, y, y, dtype, op), dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", VARIANTS)
def test_special_values_follow_torch(name, dtype, op):
    torch = _torch()
    inf, nan = float("inf"), float("nan")
    for cols in (1, 7, 9, 1000, 70001):
        x = torch.randn(7, cols, device="cuda")
        x[0, ::3] = -inf
        x[1] = -inf  # all -inf: y is NaN
        x[2, cols // 2] = nan
        x[4, : cols - 1] = -inf  # one finite value at the end
        x[5] = x[5] - 200
        y = _forward(torch, x, op).to(getattr(torch, dtype))
        dy = torch.randn(7, cols, device="cuda").to(y.dtype)
        dy[3, cols // 2] = inf
        dy[6, cols - 1] = nan
        _check_special_values(FUNCTIONS[op](dy, y, variant=name), dy, y, dtype, op, cols)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_copy_paths_axis_and_result_types(dtype, op):
    """Transposed dy and y (copied in), an out without uniform rows (filled by a
    copy), axis 0, a broadcast dy (stride 0), CuPy in gives CuPy out."""
    torch = _torch()
    f = FUNCTIONS[op]
    x = torch.randn(300, 257, device="cuda")
    y = _forward(torch, x.t(), op).to(getattr(torch, dtype))  # rows of y.t() along axis 0
    dy = torch.randn(257, 300, device="cuda").to(y.dtype)
    dx = f(dy, y)
    assert _ok(_error(dx, dy, y, dtype, op), dtype)
    out = torch.full((300, 257), float("nan"), dtype=y.dtype, device="cuda").t()
    assert f(dy.t().contiguous().t(), y, out=out) is out and _ok(_error(out, dy, y, dtype, op), dtype)
    d0 = f(dy.t(), y.t(), axis=0)
    assert _ok(_error(d0.t(), dy, y, dtype, op), dtype)
    ones = torch.ones(1, 1, device="cuda", dtype=y.dtype).expand(257, 300)  # what sum()'s backward gives
    assert _ok(_error(f(ones, y), ones, y, dtype, op), dtype)
    if dtype == "float32":
        import cupy as cp

        r = f(cp.asarray(dy), cp.asarray(y))
        assert isinstance(r, cp.ndarray) and r.dtype == cp.float32
    assert isinstance(dx, torch.Tensor) and dx.dtype == y.dtype and dx.shape == y.shape


def test_errors_before_any_launch():
    torch = _torch()
    y = torch.rand(4, 100, device="cuda")
    poison = torch.full_like(y, float("nan"))
    with pytest.raises(TypeError, match="dy must be float32, like y; got float16"):
        softmax_lab.softmax_backward(y.half(), y, out=poison)
    with pytest.raises(ValueError, match="dy has shape"):
        softmax_lab.softmax_backward(y[:, :50], y, out=poison)
    with pytest.raises(TypeError, match="out must be float32, like y"):
        softmax_lab.log_softmax_backward(y, y, out=poison.bfloat16())
    with pytest.raises(TypeError, match="dy has dtype float64"):
        softmax_lab.softmax_backward(y.double(), y, out=poison)
    with pytest.raises(ValueError, match="no backward pass"):
        softmax_lab.softmax_backward(y, y, variant="three_pass", out=poison)
    with pytest.raises(ValueError, match="no backward pass"):
        softmax_lab.softmax_backward(y.half(), y.half(), variant="multi_block_smem")
    b = torch.rand(4, 200, device="cuda")
    with pytest.raises(ValueError, match="out overlaps dy"):
        softmax_lab.softmax_backward(b[:, :100], y, out=b[:, 50:150])
    with pytest.raises(ValueError, match="out overlaps y"):
        softmax_lab.softmax_backward(y, b[:, 50:150], out=b[:, :100])
    torch.cuda.synchronize()
    assert torch.isnan(poison).all()  # nothing was written
    if torch.cuda.device_count() > 1:
        with pytest.raises(ValueError, match="dy is on device 1"):
            softmax_lab.softmax_backward(y.to("cuda:1"), y)


@pytest.mark.parametrize("op", OPS)
def test_streams(op):
    """torch's current stream for torch tensors, or stream= : the work is ordered on it."""
    torch = _torch()
    s = torch.cuda.Stream()
    y = _forward(torch, torch.randn(64, 100_000, device="cuda"), op)
    dy = torch.randn_like(y)
    want = FUNCTIONS[op](dy, y)
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        dy2 = dy * 1.0  # produced on s
        got = FUNCTIONS[op](dy2, y)
    s.synchronize()
    assert torch.equal(got, want)
    s2 = torch.cuda.Stream()
    got2 = FUNCTIONS[op](dy, y, stream=s2)
    s2.synchronize()
    assert torch.equal(got2, want)


@pytest.mark.parametrize("name", ["two_pass", "multi_block"])
def test_repeatable_bit_for_bit(name):
    torch = _torch()
    y = torch.softmax(torch.randn(8, 1_000_003, device="cuda"), -1)
    dy = torch.randn_like(y)
    first = softmax_lab.softmax_backward(dy, y, variant=name)
    for _ in range(3):
        assert torch.equal(softmax_lab.softmax_backward(dy, y, variant=name), first)


@pytest.mark.parametrize("name", ["two_pass", "multi_block", "cluster_row"])
def test_above_2_to_the_31_elements_backward(name):
    """bf16 y and dy of more than 2^31 elements (4.3 GB each) and one fp32 row of
    2^30 + 3: the backward's index arithmetic is 64-bit."""
    torch = _torch()
    rows, cols = 5462, 393216
    y, dy, out = _large_arrays(torch, rows, cols, "bfloat16", "softmax_backward")
    softmax_lab.softmax_backward(dy, y, variant=name, out=out)
    torch.cuda.synchronize()
    _assert_rows_ok(out, dy, y, "bfloat16", "softmax_backward", list(range(0, rows, 700)) + [rows - 3])
    del y, dy, out
    if name == "cluster_row":  # a row of 2^30 elements is past what a cluster holds
        return
    y = torch.log_softmax(torch.randn(2, 2**30 + 3, device="cuda"), -1)
    dy = torch.randn_like(y)
    dx = softmax_lab.log_softmax_backward(dy, y, variant=name)
    torch.cuda.synchronize()
    for r in range(2):
        tail = slice(2**30 - 5000, None)
        want = dy[r, tail].double() - y[r, tail].double().exp() * dy[r].double().sum()
        assert float((dx[r, tail].double() - want).abs().max()) < 1e-3


SANITIZER_SCRIPT = """
import cupy as cp, softmax_lab
from softmax_lab.reference import backward_error, backward_scale, softmax_backward_reference, log_softmax_backward_reference
refs = {"softmax_backward": softmax_backward_reference, "log_softmax_backward": log_softmax_backward_reference}
for name in ("two_pass", "multi_block", "cluster_row"):
    for op in refs:
        for dtype in (cp.float32, cp.float16):
            for rows, cols, off, g_off, o_off in ((3, 1, 0, 1, 0), (5, 1027, 1, 2, 3), (4, 40_000, 0, 3, 1),
                                                  (33, 65_537, 3, 0, 5), (2, 300_001, 2, 2, 0),
                                                  (3, 151_937, 1, 2, 3),  # cluster_row: 16 blocks of 256 (fp32)
                                                  (3, 151_937, 1, 1, 3)):  # ... y and dy at one alignment
                if name == "cluster_row" and (dtype != cp.float32 or cols < 20_000):
                    continue  # cluster_row's backward: float32 rows past three_pass's 16 KB
                y = cp.random.random((rows, cols + off)).astype(dtype)[:, off:]
                dy = cp.random.standard_normal((rows, cols + g_off)).astype(dtype)[:, g_off:]
                out = cp.full((rows, cols + o_off), cp.nan, dtype)[:, o_off:]
                getattr(softmax_lab, op)(dy, y, variant=name, out=out)
                ref = refs[op](dy.astype(cp.float64), y.astype(cp.float64))
                scale = backward_scale(dy, y, op)
                assert backward_error(out, ref, scale) < (1e-6 if dtype == cp.float32 else 1e-3), (name, op, cols)
cp.cuda.Device().synchronize()
print("sanitized")
"""


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer_backward(tool, tmp_path):
    run_sanitized(tool, SANITIZER_SCRIPT, tmp_path)


@pytest.mark.parametrize("op", OPS)
def test_above_2_to_the_31_elements_float32_backward_in_clusters_of_16(op):
    """float32 y and dy of more than 2^31 elements (8.6 GB each) through auto: cluster_row's
    clusters of 16 blocks of 256 at two blocks per SM (rows of 151936)."""
    torch = _torch()
    dev = softmax_lab.device_info()
    if dev.compute_capability < 90:
        pytest.skip("cluster_row needs sm_90")
    rows, cols = 14200, 151936
    V = sys.modules["softmax_lab.variants"]
    shape = V.Shape(rows, cols, cols, cols, 0, 0, 4, "float32", op, cols, 0)
    assert V.preferences(shape, dev)[0].name == "cluster_row"
    assert CR.cluster_row_plan(cols, dev, rows, 4, 2).cluster == 16
    y, dy, out = _large_arrays(torch, rows, cols, "float32", op, scale=3.0, step=2048)
    assert FUNCTIONS[op](dy, y, out=out) is out
    torch.cuda.synchronize()
    _assert_rows_ok(out, dy, y, "float32", op, list(range(0, rows, 1500)) + [rows - 3])
    del y, dy, out
    torch.cuda.empty_cache()


@pytest.mark.parametrize("dy_offset", [1, 2])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("cols", [98305, 151937, 196608])
def test_cluster_row_float_backward_in_clusters_of_16_blocks_of_256(op, cols, dy_offset):
    """cluster_row's float32 backward rows of 24577-49152 vectors: clusters of 16 blocks of 256
    threads at two blocks per SM (8 blocks of 512 before the thirtieth session); y and dy at one
    alignment (both arrays' vector loads) or two (dy's shifted loads), dx at another, special values."""
    torch = _torch()
    dev = softmax_lab.device_info()
    if dev.compute_capability < 90:
        pytest.skip("cluster_row needs sm_90")
    rows = 300
    plan = CR.cluster_row_plan(cols, dev, rows, 4, 2)
    assert (plan.cluster, plan.threads, plan.blocks_per_sm) == (16, 256, 2), plan
    x = torch.randn(rows, cols + 1, device="cuda")[:, 1:] * 3
    x[0, ::3] = -float("inf")
    x[2, cols // 2] = float("nan")
    y = _forward(torch, x, op)
    dy = torch.randn(rows, cols + dy_offset, device="cuda")[:, dy_offset:]
    dy[3, cols // 2] = float("inf")
    out = torch.full((rows, cols + 3), float("nan"), device="cuda")[:, 3:]
    assert FUNCTIONS[op](dy, y, variant="cluster_row", out=out) is out
    _check_special_values(out, dy, y, "float32", op, cols)


def test_references_on_the_gpu_keep_subnormal_float32():
    """CuPy's kernels flush float32 subnormals (-ftz=true), so its astype(float64)
    turned softmax outputs of e^-90 into 0 and the stress fuzzer's CuPy
    references disagreed with correct kernels; to_float64 and the references
    built on it give NumPy's exact values, for CuPy arrays and torch tensors."""
    import cupy

    torch = _torch()
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((3, 1001)) * 25).astype(np.float32)
    x[:, :7] = [1e-45, -1e-45, 1e-39, -3e-40, 0.0, -0.0, 1.5]
    y = softmax_reference(x).astype(np.float32)
    assert np.count_nonzero((y > 0) & (y < np.finfo(np.float32).tiny)) > 10  # the case at hand
    dy = rng.standard_normal(y.shape).astype(np.float32)
    for a in (x, y, x[:, 1::3]):
        want = a.astype(np.float64)
        assert np.array_equal(cupy.asnumpy(to_float64(cupy.asarray(a))), want)
        assert np.array_equal(cupy.asnumpy(to_float64(cupy.asarray(a)[:, ::2])), want[:, ::2])
        assert np.array_equal(cupy.asnumpy(to_float64(torch.as_tensor(a, device="cuda"))), want)
    got = cupy.asnumpy(softmax_backward_reference(cupy.asarray(dy), cupy.asarray(y)))
    scale = backward_scale(dy, y, "softmax_backward")  # the sums' orders differ: against the terms' size
    assert backward_error(got, softmax_backward_reference(dy, y), scale) < 1e-12  # a flushed e^-90: 1e-2
