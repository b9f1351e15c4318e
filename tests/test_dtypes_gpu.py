"""float16, bfloat16 and log_softmax on the GPU: every (variant, dtype, op) and
auto on random shapes (odd lengths, x[:, k:] views, padded rows) with poisoned
outputs, special values against torch, the copy paths, in place and repeated
calls.  Halves are checked against a float64 reference of the very inputs
within 1 ulp of the dtype (log_softmax: plus float32's resolution of log(sum)
near 0, reference.LOG_FLOOR); float32 within 1e-6 relative."""

import zlib

import numpy as np
import pytest

import softmax_lab
from softmax_lab.reference import log_softmax_reference, op_error, softmax_reference

pytestmark = pytest.mark.gpu

ROW_VARIANTS = [*softmax_lab.variants(), "auto"]
DTYPES = ["float32", "float16", "bfloat16"]
OPS = ["softmax", "log_softmax"]
FUNCTIONS = {"softmax": softmax_lab.softmax, "log_softmax": softmax_lab.log_softmax}


def _torch():
    return pytest.importorskip("torch")


def _numpy64(a):
    """A result (torch tensor or CuPy array) as float64 NumPy; halves widen exactly."""
    if type(a).__module__.startswith("torch"):
        return a.detach().float().cpu().numpy().astype(np.float64)
    import cupy

    return cupy.asnumpy(a).astype(np.float64)


def _reference(x, op):
    x64 = x.detach().double().cpu().numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return (softmax_reference if op == "softmax" else log_softmax_reference)(x64)


def _error(out, x, dtype, op):
    """In ulps of the dtype for halves (<= 1 passes), relative for float32 (< 1e-6 passes): reference.op_error."""
    ref = _reference(x, op)
    with np.errstate(invalid="ignore", over="ignore"):
        return op_error(_numpy64(out), ref, dtype, op)


def _ok(err, dtype):
    return err < 1e-6 if dtype == "float32" else err <= 1.0


def _random_input(torch, rng, dtype, max_cols=300_000):
    kind = rng.integers(5)
    cols = [int(rng.integers(1, 20)), int(rng.integers(20, 3000)), int(rng.integers(3000, 70000)),
            int(np.exp(rng.uniform(np.log(1000), np.log(max_cols)))), 2 * int(rng.integers(1, 30000)) + 1][kind]
    rows = int(rng.integers(1, max(2, min(200, 2_000_000 // cols))))
    offset = int(rng.integers(0, 9))  # x[:, offset:]: every start alignment of 2-byte elements
    pad = int(rng.integers(0, 3)) * int(rng.integers(0, 9))
    scale = float(rng.uniform(0.1, 20))
    base = (torch.randn(rows, cols + offset + pad, device="cuda") * scale).to(getattr(torch, dtype))
    x = base[:, offset : offset + cols]
    if rng.random() < 0.3:
        r, which = int(rng.integers(rows)), int(rng.integers(4))
        if which == 0:
            x[r, torch.from_numpy(rng.integers(cols, size=max(1, cols // 3))).cuda()] = -float("inf")
        elif which == 1:
            x[r] = -float("inf")
        elif which == 2:
            x[r, int(rng.integers(cols))] = float("nan")
        else:
            x[r, int(rng.integers(cols))] = float("inf")
    return x


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ROW_VARIANTS)
def test_random_shapes_every_variant_dtype_and_op(name, dtype, op):
    torch = _torch()
    seed = zlib.crc32(f"{name}-{dtype}-{op}".encode())
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)  # the inputs too: a failure replays (one was not, 2026-12-02: notes/TUNING.md#compensated-log-sums, p43)
    worst = 0.0
    for _ in range(60):
        x = _random_input(torch, rng, dtype)
        if rng.random() < 0.5:
            out = torch.full(x.shape, float("nan"), dtype=x.dtype, device="cuda")  # poisoned
            assert FUNCTIONS[op](x, variant=name, out=out) is out
        else:
            out = FUNCTIONS[op](x, variant=name)
        torch.cuda.synchronize()
        err = _error(out, x, dtype, op)
        assert _ok(err, dtype), (name, dtype, op, tuple(x.shape), x.stride(), x.data_ptr() % 16, err)
        worst = max(worst, err)
    print(name, dtype, op, "worst", worst)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ROW_VARIANTS)
def test_log_softmax_near_0(name, dtype):
    """Rows of one element at 0 and the rest at a gap that makes the sum 1 + 2^-k: outputs near
    0 are -log(1 + t), and t must survive the running sums (the max in a row's first vector,
    so that its thread adds every other vector of its own after it, or anywhere)."""
    torch = _torch()
    torch.manual_seed(5)
    for cols in (5100, 30001, 65536):
        for k in (8, 11, 12, 14):
            x = float(np.log(2.0**-k / (cols - 1))) + torch.rand(8, cols, device="cuda") * 0.05
            x[torch.arange(4), torch.randint(8, (4,))] = 0.0
            x[torch.arange(4, 8), torch.randint(cols, (4,))] = 0.0
            x = x.to(getattr(torch, dtype))
            out = softmax_lab.log_softmax(x, variant=name)
            torch.cuda.synchronize()
            err = _error(out, x, dtype, "log_softmax")
            assert _ok(err, dtype), (name, dtype, cols, k, err)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ROW_VARIANTS)
def test_special_values_follow_torch(name, dtype, op):
    torch = _torch()
    inf, nan = float("inf"), float("nan")
    for cols in (1, 7, 9, 1000, 70001):
        x = torch.randn(6, cols + 1, device="cuda").to(getattr(torch, dtype))[:, 1:]
        x[0, ::3] = -inf
        x[1] = -inf
        x[2, cols // 2] = nan
        x[3, cols - 1] = inf
        x[4, : cols - 1] = -inf  # one finite value at the end
        x[5] = x[5] - 200
        out = FUNCTIONS[op](x, variant=name)
        torch.cuda.synchronize()
        theirs = getattr(torch, op)(x, dim=-1)
        got, want = _numpy64(out), theirs.double().cpu().numpy()
        assert np.array_equal(np.isnan(got), np.isnan(want)), (cols, dtype, op)
        assert np.array_equal(np.isneginf(got), np.isneginf(want)), (cols, dtype, op)
        assert _ok(_error(out, x, dtype, op), dtype), (cols, dtype, op)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_copy_paths_in_place_and_axis(dtype, op):
    """A transpose (x copied into a contiguous buffer), an out without uniform
    rows (filled by a copy), in place, and axis 0."""
    torch = _torch()
    f = FUNCTIONS[op]
    x = torch.randn(300, 257, device="cuda").to(getattr(torch, dtype))
    t = x.t()  # rows along axis -1 are strided: the copy path
    y = f(t)
    assert _ok(_error(y, t, dtype, op), dtype)
    out = torch.full((257, 300), float("nan"), dtype=x.dtype, device="cuda").t().contiguous().t()
    assert f(t, out=out) is out and _ok(_error(out, t, dtype, op), dtype)
    y0 = f(x, axis=0)
    assert _ok(_error(torch.as_tensor(_numpy64(y0)).t(), x.t(), dtype, op), dtype)
    z = x.clone()
    assert f(z, out=z) is z
    torch.cuda.synchronize()
    assert _ok(_error(z, x, dtype, op), dtype)


def test_result_types():
    """Same dtype out, and the caller's array type: torch in, torch out (bfloat16 too); CuPy in, CuPy out."""
    torch = _torch()
    import cupy as cp

    xb = torch.randn(4, 100, device="cuda", dtype=torch.bfloat16)
    yb = softmax_lab.softmax(xb)
    assert isinstance(yb, torch.Tensor) and yb.dtype == torch.bfloat16 and yb.device == xb.device
    yh = softmax_lab.log_softmax(cp.random.standard_normal((4, 100)).astype(cp.float16))
    assert isinstance(yh, cp.ndarray) and yh.dtype == cp.float16
    yt = softmax_lab.log_softmax(torch.randn(4, 100, device="cuda", dtype=torch.float16))
    assert isinstance(yt, torch.Tensor) and yt.dtype == torch.float16
    assert softmax_lab.softmax(torch.empty(0, 5, device="cuda", dtype=torch.bfloat16)).shape == (0, 5)
    with pytest.raises(TypeError, match="out must be bfloat16"):
        softmax_lab.softmax(xb, out=torch.empty(4, 100, device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="no backward pass"):
        softmax_lab.softmax_backward(xb, xb, variant="multi_block_smem")


@pytest.mark.parametrize("dtype", DTYPES)
def test_repeated_calls_keep_op_and_dtype_apart(dtype):
    """The repeated-call cache keys on the op and dtype: alternate calls on the same arrays stay right."""
    torch = _torch()
    x = torch.randn(64, 5000, device="cuda").to(getattr(torch, dtype))
    out = torch.empty_like(x)
    for _ in range(3):
        for op in OPS:
            y = FUNCTIONS[op](x)
            torch.cuda.synchronize()
            assert _ok(_error(y, x, dtype, op), dtype), (op, dtype)
            assert FUNCTIONS[op](x, out=out) is out
            torch.cuda.synchronize()
            assert _ok(_error(out, x, dtype, op), dtype), (op, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_above_2_to_the_31_elements_where_cluster_row_takes_the_group_s_place(dtype):
    """Half softmax of 786432 columns from 1056 rows is cluster_row's (a cluster of the
    memory-merged group's own blocks, variants._cluster_row_first): 2731 rows, 2.15e9 elements, a
    poisoned output, rows checked at both ends and in the middle; then auto on x[:, 1:] of
    786431 columns (unaligned rows, cluster_row's plan at the same blocks)."""
    torch = _torch()
    dev = softmax_lab.device_info()
    rows, cols = 2731, 786432
    assert rows * cols > 2**31 and softmax_lab.choose(rows, cols, dev, dtype).name == "cluster_row"
    try:
        base = torch.randn(rows, cols, device="cuda").to(getattr(torch, dtype))
        out = torch.full_like(base, float("nan"))
    except torch.cuda.OutOfMemoryError:
        pytest.skip("not enough device memory")
    for x, y in ((base, out), (base[:, 1:], out[:, 1:])):
        softmax_lab.softmax(x, out=y)
        torch.cuda.synchronize()
        idx = [0, 1, rows // 2, rows - 2, rows - 1]
        assert _ok(_error(y[idx], x[idx], dtype, "softmax"), dtype)
    del base, out
    torch.cuda.empty_cache()
