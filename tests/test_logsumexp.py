"""softmax_lab.logsumexp: its validation and plan (no GPU), the kernels' algorithm
emulated against the float64 reference, and on a GPU the kernels themselves."""

import textwrap

import numpy as np
import pytest
from devices import A100, H200, SMALL_HOPPER
from emulate import multi_block_row_stats
from row_inputs import FakeGpuArray, random_rows
from sanitizer import run_sanitized

import softmax_lab
from softmax_lab.problem import DTYPES, Shape
from softmax_lab.reference import logsumexp_reference
from softmax_lab.variants.multi_block import ROW_STATS_BLOCKS_PER_SM, MultiBlockPlan, row_stats_plan


# ------------------------------------------------------------------ no GPU
@pytest.mark.parametrize("bad", [np.ones((2, 3), np.float32), [[1.0]], 3.0, None])
def test_not_a_gpu_array_is_a_type_error(bad):
    with pytest.raises(TypeError, match="CuPy array"):
        softmax_lab.logsumexp(bad)


def test_other_dtypes_are_type_errors():
    with pytest.raises(TypeError, match="int32"):
        softmax_lab.logsumexp(FakeGpuArray((4, 5), "<i4"))


@pytest.mark.parametrize("shape, axis, error, match", [
    ((), -1, ValueError, "0-d"),
    ((4, 5), 2, ValueError, "out of range"),
    ((4, 5), 1.0, TypeError, "integer"),
])
def test_bad_dimensions_and_axes(shape, axis, error, match):
    with pytest.raises(error, match=match):
        softmax_lab.logsumexp(FakeGpuArray(shape), axis=axis)


def test_the_max_of_an_empty_axis_is_refused():
    with pytest.raises(ValueError, match="length 0"):
        softmax_lab.logsumexp(FakeGpuArray((3, 0)), return_max=True)


@pytest.mark.parametrize("dev", [H200, A100, SMALL_HOPPER], ids=lambda d: d.name)
@pytest.mark.parametrize("rows, cols", [(1, 1), (1, 32000), (1, 393216), (8, 151936), (64, 128256),
                                        (4096, 393216), (16384, 32000), (100000, 7), (3, 4194304)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_plan_fills_the_gpu(dev, rows, cols, dtype):
    """Chunks of whole warps' vectors, from one vector a thread up to multi_block's 128 KB,
    and within 10 % of as many items as the GPU holds blocks, wherever the rows have the
    vectors for them."""
    shape = Shape(rows, cols, cols, 0, 0, 0, DTYPES[dtype], dtype)
    plan = row_stats_plan(shape, dev)
    assert plan.threads == MultiBlockPlan.threads
    assert plan.chunk_vecs % 32 == 0 and plan.threads <= plan.chunk_vecs <= MultiBlockPlan.chunk_vecs
    vecs = cols * DTYPES[dtype] // 16
    items = rows * plan.chunks(shape)
    possible = rows * max(1, -(-vecs // plan.threads))
    assert items >= 0.9 * min(dev.sm_count * ROW_STATS_BLOCKS_PER_SM, possible)


def _rows(rng):
    n = rng.integers(1, 3000)
    row = (rng.standard_normal(n) * rng.choice([0.1, 1.0, 30.0])).astype(np.float32)
    return row


SPECIAL = {
    "one element": np.array([3.5], np.float32),
    "all -inf": np.full(37, -np.inf, np.float32),
    "some -inf": np.where(np.arange(41) % 3 == 0, -np.inf, np.arange(41, dtype=np.float32)).astype(np.float32),
    "+inf": np.array([1.0] * 20 + [np.inf] + [2.0] * 19, np.float32),
    "+inf and NaN": np.array([np.inf] + [1.0] * 30 + [np.nan], np.float32),
    "NaN": np.array([1.0] * 10 + [np.nan] + [1.0] * 10, np.float32),
    "NaN and -inf": np.array([-np.inf] * 10 + [np.nan], np.float32),
    "+inf and -inf": np.array([-np.inf, np.inf, -np.inf], np.float32),
    "huge": np.array([3e38, 3e38, -3e38], np.float32),
    "tiny": np.full(50, -1e30, np.float32),
}


def _assert_close(got, want, tol=2e-6):
    got, want = np.float64(got), np.float64(want)
    if np.isnan(want) or np.isinf(want):
        assert got == want or (np.isnan(got) and np.isnan(want)), (got, want)
    else:
        assert abs(got - want) <= tol * max(1.0, abs(want)), (got, want)


@pytest.mark.parametrize("name", SPECIAL)
@pytest.mark.parametrize("misalign", [0, 1, 3])
def test_the_algorithm_gives_torchs_special_values(name, misalign):
    row = SPECIAL[name]
    lse, m = multi_block_row_stats(row, misalign, threads=64, chunk_vecs=2)
    want_lse, want_m = logsumexp_reference(row)
    _assert_close(lse, want_lse)
    _assert_close(m, want_m)  # NaN for a row with a NaN, as torch.amax


def test_the_algorithm_matches_the_reference_on_random_rows():
    rng = np.random.default_rng(48)
    for _ in range(60):
        row = _rows(rng)
        lse, m = multi_block_row_stats(row, int(rng.integers(0, 4)), threads=64,
                                       chunk_vecs=int(rng.integers(1, 40)))
        want_lse, want_m = logsumexp_reference(row)
        _assert_close(lse, want_lse)
        assert m == np.float32(want_m)


# ------------------------------------------------------------------ on a GPU
def _cupy():
    import cupy

    return cupy


def _torch():
    return pytest.importorskip("torch")


def _check(lse, x, axis=-1, row_max=None, tol=2e-6):
    """lse (and max) against float64 by elements, on the host."""
    cp = _cupy()
    host = cp.asnumpy(x).astype(np.float64) if isinstance(x, cp.ndarray) else x.double().cpu().numpy()
    want_lse, want_max = logsumexp_reference(host, axis=axis)
    got = cp.asnumpy(lse) if isinstance(lse, cp.ndarray) else lse.cpu().numpy()
    assert got.dtype == np.float32 and got.shape == want_lse.shape
    finite = np.isfinite(want_lse)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want_lse))
    np.testing.assert_array_equal(got[np.isinf(want_lse)], want_lse[np.isinf(want_lse)])
    err = np.abs(got[finite] - want_lse[finite]) / np.maximum(1.0, np.abs(want_lse[finite]))
    assert err.size == 0 or err.max() <= tol, err.max()
    if row_max is not None:
        got_max = cp.asnumpy(row_max) if isinstance(row_max, cp.ndarray) else row_max.cpu().numpy()
        np.testing.assert_array_equal(got_max, want_max.astype(np.float32))  # NaN rows NaN, as torch.amax


SHAPES = [(1, 1), (3, 7), (1, 32000), (5, 50257), (2, 100003), (8, 151936), (64, 1027), (300, 4099),
          (1, 393216), (2, 1048577)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_against_float64(shape, dtype):
    x = random_rows(shape, dtype, seed=shape[0] * 7 + shape[1])
    lse, m = softmax_lab.logsumexp(x, return_max=True)
    _check(lse, x, row_max=m)


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [1, 2, 3, 5])
def test_views_at_every_alignment(offset):
    cp = _cupy()
    x = random_rows((7, 70001 + 8), "float32", seed=offset)[:, offset:offset + 70001]
    _check(softmax_lab.logsumexp(x), x)
    xh = random_rows((7, 9000), "float16", seed=offset)[:, offset:]
    _check(softmax_lab.logsumexp(xh), xh)
    xt = cp.ascontiguousarray(random_rows((4001, 5), "float32")).T  # rows not contiguous: copied first
    _check(softmax_lab.logsumexp(xt), xt)


@pytest.mark.gpu
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_any_axis_of_a_3d_array(axis):
    x = random_rows((6, 1001, 9), "float32", seed=axis + 5)
    lse = softmax_lab.logsumexp(x, axis=axis)
    _check(lse, x, axis=axis)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_special_rows_as_torch(dtype):
    torch = _torch()
    n = 50257
    rows = []
    for name in ("finite", "all -inf", "one +inf", "+inf and NaN", "one NaN", "NaN in -inf", "-inf and finite"):
        r = torch.randn(n, dtype=torch.float64, device="cuda") * 4
        if name == "all -inf":
            r[:] = -torch.inf
        elif name == "one +inf":
            r[n // 3] = torch.inf
        elif name == "+inf and NaN":
            r[5], r[n - 2] = torch.inf, torch.nan
        elif name == "one NaN":
            r[n - 1] = torch.nan
        elif name == "NaN in -inf":
            r[:] = -torch.inf
            r[77] = torch.nan
        elif name == "-inf and finite":
            r[::2] = -torch.inf
        rows.append(r)
    x = torch.stack(rows).to(getattr(torch, dtype))
    lse, m = softmax_lab.logsumexp(x, return_max=True)
    assert isinstance(lse, torch.Tensor) and lse.dtype == torch.float32 and lse.device == x.device
    want = torch.logsumexp(x.double(), dim=-1).float()
    want_max = torch.amax(x.float(), dim=-1)
    torch.testing.assert_close(lse, want, equal_nan=True, rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(m, want_max, equal_nan=True, rtol=0, atol=0)


@pytest.mark.gpu
def test_empty_inputs():
    cp = _cupy()
    lse = softmax_lab.logsumexp(cp.empty((3, 0), cp.float32))
    assert lse.shape == (3,) and bool(cp.all(lse == -cp.inf))
    assert softmax_lab.logsumexp(cp.empty((0, 5), cp.float16)).shape == (0,)
    torch = _torch()
    t = softmax_lab.logsumexp(torch.empty((2, 0), device="cuda", dtype=torch.bfloat16))
    assert t.dtype == torch.float32 and bool((t == -torch.inf).all())


@pytest.mark.gpu
def test_repeated_calls_on_a_side_stream_are_the_same():
    cp = _cupy()
    x = random_rows((33, 65537), "float32", seed=9)
    first = softmax_lab.logsumexp(x)
    cp.cuda.get_current_stream().synchronize()  # x was made there: a non-blocking stream does not wait for it
    stream = cp.cuda.Stream(non_blocking=True)
    again = softmax_lab.logsumexp(x, stream=stream)
    stream.synchronize()
    assert bool(cp.all(first == again))  # bitwise: a fixed order of merges


@pytest.mark.gpu
@pytest.mark.parametrize("library", ["cupy", "torch"])
def test_captured_graph_replays_with_new_inputs(library):
    """Capture one call, replay it 100 times on changing inputs: every replay right; the
    call's scratch is the graph's own (softmax_lab.scratch)."""
    cp = _cupy()
    rows, cols = 8, 151936
    if library == "torch":
        torch = _torch()
        x = torch.randn(rows, cols, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            softmax_lab.logsumexp(x)  # the first call builds outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            lse = softmax_lab.logsumexp(x)
        for i in range(100):
            x.copy_(torch.randn(rows, cols, device="cuda") * (1 + i % 5))
            graph.replay()
            if i % 25 == 0 or i == 99:
                torch.cuda.synchronize()
                _check(lse, x)
        return
    x = random_rows((rows, cols), "float32", seed=1)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        softmax_lab.logsumexp(x)
        stream.begin_capture()
        lse = softmax_lab.logsumexp(x)
        graph = stream.end_capture()
    for i in range(100):
        with stream:
            x[...] = cp.random.standard_normal((rows, cols), dtype=cp.float32) * (1 + i % 5)
            graph.launch(stream)
        if i % 25 == 0 or i == 99:
            stream.synchronize()
            _check(lse, x)


@pytest.mark.gpu
def test_above_2_to_the_31_elements_logsumexp():
    """4.3 GB of float16: index arithmetic must be 64-bit, in the partials and in the +inf re-read."""
    cp = _cupy()
    rows, cols = 3, 2**30 + 5
    x = cp.empty((rows, cols), cp.float16)
    for r in range(rows):
        x[r] = cp.random.standard_normal(cols, dtype=cp.float32).astype(cp.float16)
    x[2, cols - 1] = cp.inf
    lse, m = softmax_lab.logsumexp(x, return_max=True)
    for r in range(2):
        _check(lse[r:r + 1], x[r:r + 1], row_max=m[r:r + 1], tol=1e-5)
    assert float(lse[2]) == np.inf and float(m[2]) == np.inf


@pytest.mark.gpu
def test_memcheck_sanitizer(tmp_path):
    run_sanitized("memcheck", textwrap.dedent("""
        import cupy as cp
        import softmax_lab
        for shape in [(1, 1), (3, 1029), (2, 393217), (129, 33)]:
            x = cp.random.standard_normal(shape, dtype=cp.float32)
            softmax_lab.logsumexp(x[:, 1:] if shape[1] > 1 else x, return_max=True)
            softmax_lab.logsumexp(x.astype(cp.float16))
        x = cp.full((2, 5000), cp.inf, dtype=cp.float32)
        softmax_lab.logsumexp(x)
        cp.cuda.Device().synchronize()
        print("sanitized")
    """), tmp_path)
