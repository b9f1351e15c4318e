"""softmax(): input validation (no GPU needed) and, on a GPU, every variant
against the float64 reference."""

import textwrap

import numpy as np
import pytest
from row_inputs import FakeGpuArray
from sanitizer import run_sanitized

import softmax_lab
from softmax_lab.reference import relative_error, softmax_reference


# ------------------------------------------------------------------ no GPU
@pytest.mark.parametrize("bad", [np.ones((2, 3), np.float32), [[1.0, 2.0]], 3.0, "x", None])
def test_not_a_gpu_array_is_a_type_error(bad):
    with pytest.raises(TypeError, match="CuPy array"):
        softmax_lab.softmax(bad)


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: 'auto', 'three_pass', 'two_pass', 'multi_block', 'multi_block_l2', 'multi_block_smem', 'single_read'"):
        softmax_lab.softmax(FakeGpuArray((2, 3)), variant="fastest")


@pytest.mark.parametrize("function", [softmax_lab.softmax, softmax_lab.log_softmax])
@pytest.mark.parametrize("typestr, name", [("<f8", "float64"), ("<i4", "int32"), ("|b1", "bool"), ("<i2", "int16")])
def test_unsupported_dtype_is_named(function, typestr, name):
    with pytest.raises(TypeError, match=f"dtype {name}; softmax_lab takes float32, float16 and bfloat16"):
        function(FakeGpuArray((2, 3), typestr))


@pytest.mark.parametrize("function", [softmax_lab.softmax, softmax_lab.log_softmax])
@pytest.mark.parametrize("x_type, out_type, message", [
    ("<f2", "<f4", "out must be float16, like x; got float32"),
    ("<f4", "<f2", "out must be float32, like x; got float16"),
    ("<f4", "<f8", "has dtype float64"),
])
def test_out_of_another_dtype_is_a_type_error_before_any_launch(function, x_type, out_type, message):
    with pytest.raises(TypeError, match=message):  # no device here: raised before asking for one
        function(FakeGpuArray((2, 3), x_type), out=FakeGpuArray((2, 3), out_type))


@pytest.mark.parametrize("function", [softmax_lab.softmax, softmax_lab.log_softmax])
def test_float16_passes_validation_up_to_the_device(function):
    try:
        softmax_lab.device.require_device()
    except RuntimeError:
        with pytest.raises(RuntimeError, match="needs a CUDA device"):
            function(FakeGpuArray((2, 3), "<f2"), out=FakeGpuArray((2, 3), "<f2"))
    else:
        pytest.skip("a GPU is present")


def test_log_softmax_validates_as_softmax():
    with pytest.raises(ValueError, match="at least one dimension"):
        softmax_lab.log_softmax(FakeGpuArray(()))
    with pytest.raises(ValueError, match="out of range"):
        softmax_lab.log_softmax(FakeGpuArray((2, 3)), axis=2)
    with pytest.raises(ValueError, match="known: 'auto'"):
        softmax_lab.log_softmax(FakeGpuArray((2, 3)), variant="fastest")
    with pytest.raises(ValueError, match="out has shape"):
        softmax_lab.log_softmax(FakeGpuArray((2, 3)), out=FakeGpuArray((2, 4)))


def test_zero_dimensional_input():
    with pytest.raises(ValueError, match="at least one dimension"):
        softmax_lab.softmax(FakeGpuArray(()))


@pytest.mark.parametrize("axis", [2, -3])
def test_axis_out_of_range(axis):
    with pytest.raises(ValueError, match="out of range"):
        softmax_lab.softmax(FakeGpuArray((2, 3)), axis=axis)


@pytest.mark.parametrize("axis", [1.0, None, True, np.True_, "1"])
def test_axis_must_be_an_integer(axis):
    with pytest.raises(TypeError, match="axis must be an integer"):
        softmax_lab.softmax(FakeGpuArray((2, 3)), axis=axis)


def test_out_must_be_a_gpu_array():
    with pytest.raises(TypeError, match="out is on the CPU"):
        softmax_lab.softmax(FakeGpuArray((2, 3)), out=np.empty((2, 3), np.float32))


def test_no_device_is_a_runtime_error_that_says_so():
    try:
        softmax_lab.device.require_device()
    except RuntimeError:
        pass
    else:
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        softmax_lab.softmax(FakeGpuArray((2, 3)))


# ------------------------------------------------------------------ GPU
VARIANTS = list(softmax_lab.variants())


def _cupy():
    import cupy

    return cupy


def _check(out, x, axis=-1, tol=1e-6):
    ref = softmax_reference(x, axis=axis)
    err = relative_error(out, ref)
    assert err < tol, err
    return err


def _runnable(name, cols):
    dev = softmax_lab.device_info()
    return softmax_lab.get_variant(name).unsupported_reason(cols, dev) is None


def _random_shape(rng, max_cols):
    kind = rng.integers(6)
    if kind == 0:
        cols = int(rng.integers(1, 9))
    elif kind == 1:
        cols = int(rng.integers(9, 2000))
    elif kind == 2:
        cols = int(rng.integers(2000, 70000))
    else:
        cols = int(np.exp(rng.uniform(np.log(1000), np.log(max_cols))))
    rows = int(rng.integers(1, max(2, min(300, 4_000_000 // cols))))
    return rows, cols


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS + ["auto"])
def test_random_shapes_against_float64(name, record_property):
    """At least 200 random shapes: odd and tiny rows, views with an offset,
    padded row strides, special values; the output is poisoned first."""
    cp = _cupy()
    dev = softmax_lab.device_info()
    rng = np.random.default_rng()
    max_cols = 600_000 if name == "auto" else int(min(600_000, softmax_lab.get_variant(name).max_cols(dev)))
    worst, shapes = 0.0, 0
    while shapes < 200:
        rows, cols = _random_shape(rng, max_cols)
        offset = int(rng.integers(0, 4))
        pad = int(rng.integers(0, 3)) * int(rng.integers(0, 5))
        base = cp.random.standard_normal((rows, cols + offset + pad), dtype=cp.float32) * float(rng.uniform(0.1, 20))
        x = base[:, offset : offset + cols]
        if rng.random() < 0.3:  # special values in some rows
            r = int(rng.integers(rows))
            which = int(rng.integers(4))
            if which == 0:
                x[r, rng.integers(cols, size=max(1, cols // 3))] = -cp.inf
            elif which == 1:
                x[r] = -cp.inf
            elif which == 2:
                x[r, int(rng.integers(cols))] = cp.nan
            else:
                x[r, int(rng.integers(cols))] = cp.inf
        out = cp.full((rows, cols), cp.nan, dtype=cp.float32)  # poisoned
        if rng.random() < 0.5:
            softmax_lab.softmax(x, variant=name, out=out)
        else:
            out = softmax_lab.softmax(x, variant=name)
        worst = max(worst, _check(out, x))
        shapes += 1
    record_property("shapes", shapes)
    record_property("worst_relative_error", worst)
    print(f"{name}: {shapes} shapes, worst relative error {worst:.3g}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS + ["auto"])
@pytest.mark.parametrize("cols", [1, 2, 3, 5, 1023, 1024, 1025, 4097, 393215, 393216])
def test_edge_shapes(name, cols):
    cp = _cupy()
    if name != "auto" and not _runnable(name, cols):
        pytest.skip(f"{name} does not hold rows of {cols}")
    rows = 3
    base = cp.random.standard_normal((rows, cols + 1), dtype=cp.float32) * 4
    for x in (base[:, :cols], base[:, 1:]):  # aligned and 4 bytes past alignment
        out = cp.full((rows, cols), cp.nan, dtype=cp.float32)
        softmax_lab.softmax(x, variant=name, out=out)
        _check(out, x)


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_special_values_match_torch(name):
    torch = pytest.importorskip("torch")
    cp = _cupy()
    n = 5003
    x = cp.random.standard_normal((6, n), dtype=cp.float32)
    x[0, ::7] = -cp.inf
    x[1] = -cp.inf
    x[2, 17] = cp.nan
    x[3, 4000] = cp.inf
    x[4, :-1] = -cp.inf
    x[5] -= 300
    out = softmax_lab.softmax(x, variant=name)
    expected = cp.asarray(torch.softmax(torch.as_tensor(x, device="cuda"), dim=1))
    assert bool(cp.array_equal(cp.isnan(out), cp.isnan(expected)))
    assert cp.isnan(out[1:4]).all() and not cp.isnan(out[0]).any() and not cp.isnan(out[4:]).any()
    assert bool((out[0, ::7] == 0).all())
    assert float(cp.nanmax(cp.abs(out - expected))) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_bitwise_repeatable_and_in_place(name):
    cp = _cupy()
    x = cp.random.standard_normal((37, 300_001), dtype=cp.float32) * 5
    x[3, ::5] = -cp.inf
    a = softmax_lab.softmax(x, variant=name)
    b = softmax_lab.softmax(x, variant=name)
    assert a.view(cp.uint32).tobytes() == b.view(cp.uint32).tobytes()
    ref = softmax_reference(x)
    y = x.copy()
    assert softmax_lab.softmax(y, variant=name, out=y) is y
    assert relative_error(y, ref) < 1e-6
    assert bool(cp.array_equal(y, a))


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_two_streams_at_once(name):
    cp = _cupy()
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    xs, outs = [], []
    for i, s in enumerate(streams):
        with s:
            x = cp.random.standard_normal((64 + i, 200_003 - 7 * i), dtype=cp.float32) * (i + 1)
            xs.append(x)
    cp.cuda.Device().synchronize()
    for _ in range(3):
        for s, x in zip(streams, xs):
            with s:
                outs.append((x, softmax_lab.softmax(x, variant=name)))
    cp.cuda.Device().synchronize()
    for x, out in outs:
        _check(out, x)


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_axes_ndim_and_non_contiguous(name):
    cp = _cupy()
    x = cp.random.standard_normal((5, 6, 1031), dtype=cp.float32)
    for axis in (0, 1, 2, -1):
        _check(softmax_lab.softmax(x, axis=axis, variant=name), x, axis=axis)
    xt = cp.random.standard_normal((2001, 7), dtype=cp.float32).T  # rows not contiguous
    _check(softmax_lab.softmax(xt, variant=name), xt)
    v = cp.random.standard_normal(4099, dtype=cp.float32)
    _check(softmax_lab.softmax(v, variant=name), v)
    neg = cp.random.standard_normal((4, 999), dtype=cp.float32)[:, ::-1]
    _check(softmax_lab.softmax(neg, variant=name), neg)


@pytest.mark.gpu
@pytest.mark.parametrize("name", VARIANTS)
def test_above_2_to_the_31_elements(name):
    """8.6 GB in and out: index arithmetic must be 64-bit."""
    cp = _cupy()
    rows, cols = 5462, 393216  # 2_147_745_792 elements
    assert rows * cols > 2**31
    x = cp.random.standard_normal((rows, cols), dtype=cp.float32)
    out = cp.full((rows, cols), cp.nan, dtype=cp.float32)
    softmax_lab.softmax(x, variant=name, out=out)
    worst = 0.0
    for r0 in range(0, rows, 512):
        worst = max(worst, _check(out[r0 : r0 + 512], x[r0 : r0 + 512]))
    del x, out
    if name in ("two_pass", "multi_block", "three_pass"):
        x = cp.random.standard_normal((2, 2**30 + 3), dtype=cp.float32)  # one row of 2^30 + 3
        out = softmax_lab.softmax(x, variant=name)
        for r in range(2):
            _check(out[r], x[r])


@pytest.mark.gpu
@pytest.mark.parametrize("cols", [2048, 3072])
def test_above_2_to_the_31_elements_in_rows_of_warps(cols):
    """auto's warps per row (single_read_warp: one warp of 16 vectors a lane, two of 12) on
    rows whose index times the row length passes 2^31."""
    cp = _cupy()
    rows = 2**31 // cols + 1
    assert rows * cols > 2**31 and softmax_lab.choose(rows, cols, softmax_lab.device_info()).name == "single_read"
    x = cp.random.standard_normal((rows, cols), dtype=cp.float32)
    out = cp.full((rows, cols), cp.nan, dtype=cp.float32)
    softmax_lab.softmax(x, out=out)
    for r0 in range(0, rows, 1 << 16):
        _check(out[r0 : r0 + (1 << 16)], x[r0 : r0 + (1 << 16)])


@pytest.mark.gpu
def test_torch_and_cai_inputs_zero_copy():
    torch = pytest.importorskip("torch")
    cp = _cupy()
    t = torch.randn(33, 5001, device="cuda")
    out = softmax_lab.softmax(t)
    assert isinstance(out, torch.Tensor) and out.device == t.device and out.dtype == t.dtype  # torch in, torch out
    expected = torch.softmax(t, dim=1)
    assert float((out - expected).abs().max()) < 1e-6
    y = softmax_lab.softmax(cp.asarray(t), axis=0)  # CuPy in, CuPy out
    assert isinstance(y, cp.ndarray)
    assert float((torch.as_tensor(y, device="cuda") - torch.softmax(t, dim=0)).abs().max()) < 1e-6
    t3 = torch.randn(4, 300, 5, device="cuda")
    y3 = softmax_lab.softmax(t3, axis=1)  # a new torch result along a middle axis, again on the repeated path
    for _ in range(2):
        assert isinstance(y3, torch.Tensor) and y3.shape == t3.shape
        assert float((y3 - torch.softmax(t3, dim=1)).abs().max()) < 1e-6
        y3 = softmax_lab.softmax(t3, axis=1)


@pytest.mark.gpu
def test_gpu_validation_errors_write_nothing():
    cp = _cupy()
    x = cp.random.standard_normal((4, 100), dtype=cp.float32)
    out = cp.full((4, 100), 7.0, dtype=cp.float32)
    with pytest.raises(ValueError, match="shape"):
        softmax_lab.softmax(x, out=cp.empty((4, 99), cp.float32))
    with pytest.raises(TypeError, match="float32"):
        softmax_lab.softmax(x, out=cp.empty((4, 100), cp.float64))
    with pytest.raises(ValueError, match="may overlap each other"):
        softmax_lab.softmax(x, out=cp.broadcast_to(cp.empty((1, 100), cp.float32), (4, 100)))
    with pytest.raises(ValueError, match="overlaps"):
        big = cp.random.standard_normal((4, 101), dtype=cp.float32)
        softmax_lab.softmax(big[:, 1:], out=big[:, :100])
    with pytest.raises(TypeError, match="dtype float64"):
        softmax_lab.softmax(x.astype(cp.float64))
    with pytest.raises(TypeError, match="out must be float32"):
        softmax_lab.log_softmax(x, out=cp.empty((4, 100), cp.float16))
    assert bool((out == 7.0).all())
    empty = softmax_lab.softmax(cp.empty((0, 5), cp.float32))
    assert empty.shape == (0, 5)
    assert softmax_lab.softmax(cp.empty((3, 0), cp.float32)).shape == (3, 0)


@pytest.mark.gpu
def test_single_read_refuses_rows_it_cannot_hold():
    cp = _cupy()
    dev = softmax_lab.device_info()
    v = softmax_lab.get_variant("single_read")
    if v.unsupported_reason(10, dev):
        pytest.skip(v.unsupported_reason(10, dev))
    too_long = int(v.max_cols(dev)) + 1
    with pytest.raises(ValueError, match="at most"):
        softmax_lab.softmax(cp.ones((1, too_long), cp.float32), variant="single_read")
    # auto still computes it, with another variant
    x = cp.random.standard_normal((2, too_long), dtype=cp.float32)
    _check(softmax_lab.softmax(x), x)


SANITIZER_SCRIPT = textwrap.dedent(
    """
    import cupy as cp, softmax_lab
    from softmax_lab.reference import relative_error, softmax_reference
    for name in {names!r}:
        for rows, cols, off in ((3, 1, 0), (5, 1027, 1), (4, 40_000, 0), (33, 65_537, 3), (17, 393_216, 0),
                                (140, 20_003, 1),  # cluster_row's evict-last loads (132 rows or more)
                                (20, 262_147, 2)):  # cluster_row's clusters of 16 at two blocks per SM
            if softmax_lab.get_variant(name).unsupported_reason(cols, softmax_lab.device_info()):
                continue
            base = cp.random.standard_normal((rows, cols + off), dtype=cp.float32)
            x = base[:, off:]
            y = softmax_lab.softmax(x, variant=name)
            assert relative_error(y, softmax_reference(x)) < 1e-6, name
    cp.cuda.Device().synchronize()
    print("sanitized", {names!r})
    """
)


@pytest.mark.gpu
@pytest.mark.parametrize("tool, names", [
    ("memcheck", VARIANTS),
    ("racecheck", VARIANTS),
    # the kernels that wait on other threads' work: every one of a single read (clusters, groups, tickets)
    ("synccheck", [v.name for v in softmax_lab.variants().values() if v.reads == 1]),
])
def test_compute_sanitizer(tool, names, tmp_path):
    run_sanitized(tool, SANITIZER_SCRIPT.format(names=names), tmp_path)
