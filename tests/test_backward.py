"""The backward passes without a GPU: the kernels' algorithms emulated in NumPy
(tests/emulate.py) against the float64 references, the registry's backward
entries, and the api's checks that fail before any launch.

Error bounds.  dx = y (dy - dot) or dy - e^y dot is a difference, which may
cancel to far below its terms; float32 arithmetic errs by a few 2^-24 of the
terms (backward_scale), not of dx.  So: float32 within 1e-6 of that scale,
element by element; float16 and bfloat16 within 1 ulp of the dtype at dx,
beyond 4 x 2^-24 of the scale (the float32 part, then one rounding)."""

import subprocess
import sys

import numpy as np
import pytest
from devices import H200
from emulate import BACKWARD_ALGORITHMS, run_backward, to_bits, widen
from test_api import FakeGpuArray

import softmax_lab
from softmax_lab.reference import (
    BACKWARD_BOUNDS,
    backward_error,
    backward_op_error,
    backward_scale,
    log_softmax_backward_reference,
    log_softmax_reference,
    softmax_backward_reference,
    softmax_reference,
)
from softmax_lab.variants import (
    BACKWARD_OPS,
    DTYPES,
    Shape,
    get_variant,
    kernel_defines,
    preferences,
)

REFERENCES = {"softmax_backward": softmax_backward_reference, "log_softmax_backward": log_softmax_backward_reference}
FORWARD = {"softmax_backward": softmax_reference, "log_softmax_backward": log_softmax_reference}
ROW_LENGTHS = [1, 2, 3, 7, 8, 9, 31, 129, 1000, 4099]


def backward_inputs(n, dtype, op, rng, scale=3.0):
    """(y, dy) stored as `dtype`: y the forward output of a random row, rounded once."""
    x = (rng.standard_normal(n) * scale).astype(np.float32)
    y = to_bits(FORWARD[op](x).astype(np.float32), dtype)
    dy = to_bits(rng.standard_normal(n).astype(np.float32), dtype)
    return y, dy


def check(out_stored, y_stored, dy_stored, dtype, op):
    y, dy = widen(y_stored, dtype), widen(dy_stored, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = REFERENCES[op](dy, y)
    return backward_op_error(widen(out_stored, dtype), ref, dy, y, dtype, op) <= BACKWARD_BOUNDS[dtype]


@pytest.mark.parametrize("name", BACKWARD_ALGORITHMS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", BACKWARD_OPS)
@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_emulated_backward_matches_the_reference(name, dtype, op, n):
    rng = np.random.default_rng([n, len(dtype), len(op)])
    y, dy = backward_inputs(n, dtype, op, rng)
    for misalign in (0, 1, 3, 5):
        out = run_backward(name, y, dy, dtype, op, misalign)
        assert check(out, y, dy, dtype, op), (misalign,)


@pytest.mark.parametrize("op", BACKWARD_OPS)
def test_multi_block_backward_over_many_chunks(op):
    rng = np.random.default_rng(7)
    y, dy = backward_inputs(20001, "float32", op, rng)
    out = run_backward("multi_block", y, dy, "float32", op, 2, chunk_vecs=16, threads=32)
    assert check(out, y, dy, "float32", op)


@pytest.mark.parametrize("op", BACKWARD_OPS)
def test_cluster_row_backward_line_slices(op):
    """cluster_row's slices on 128-byte lines past every place of the body in its line, and the even
    split where blocks of `capacity` vectors hold no more (a slice left out would leave its terms out
    of the dot)."""
    rng = np.random.default_rng(13)
    y, dy = backward_inputs(4099, "float32", op, rng)  # 1024 vectors and 3 scalars
    for line_shift in range(8):
        for capacity in (None, 256, 263):
            out = run_backward("cluster_row", y, dy, "float32", op, 0, line_shift=line_shift, capacity=capacity)
            assert check(out, y, dy, "float32", op), (line_shift, capacity)


def test_the_bound_is_not_vacuous():
    """A dot off by 1e-5 relative fails the float32 check."""
    rng = np.random.default_rng(1)
    y, dy = backward_inputs(1000, "float32", "softmax_backward", rng)
    dot = np.sum(dy.astype(np.float64) * y) * (1 + 1e-5) + 1e-5
    out = (y * (dy - dot)).astype(np.float32)
    assert not check(out, y, dy, "float32", "softmax_backward")


def _special_rows(n, rng):
    base = rng.standard_normal(n).astype(np.float32)
    rows = {"random": base.copy()}
    r = base.copy(); r[rng.integers(n, size=max(1, n // 3))] = -np.inf; rows["some -inf"] = r
    rows["all -inf"] = np.full(n, -np.inf, np.float32)
    r = base.copy(); r[rng.integers(n)] = np.nan; rows["a NaN"] = r
    r = np.full(n, -np.inf, np.float32); r[-1] = 2.0; rows["-inf then one value"] = r
    return rows


@pytest.mark.parametrize("name", BACKWARD_ALGORITHMS)
@pytest.mark.parametrize("op", BACKWARD_OPS)
@pytest.mark.parametrize("n", [1, 5, 130])
def test_special_values_match_the_reference(name, op, n):
    """Forward outputs of rows with -inf, NaN, and gradients with inf or NaN: the
    NaN pattern and every finite value as the float64 reference (torch's math)."""
    rng = np.random.default_rng(n)
    for label, x in _special_rows(n, rng).items():
        with np.errstate(invalid="ignore"):
            y = FORWARD[op](x).astype(np.float32)
        for dy_label in ("random", "an inf", "a NaN"):
            dy = rng.standard_normal(n).astype(np.float32)
            if dy_label != "random":
                dy[rng.integers(n)] = np.inf if dy_label == "an inf" else np.nan
            out = run_backward(name, y, dy, "float32", op, 1)
            assert check(out, y, dy, "float32", op), (label, dy_label)


def test_log_softmax_backward_of_minus_inf_is_dy():
    y = np.array([0.0, -np.inf, -np.inf], np.float32)
    dy = np.array([1.0, 2.0, -3.0], np.float32)
    out = run_backward("two_pass", y, dy, "float32", "log_softmax_backward")
    assert out.tolist() == [1.0, 2.0, -3.0]  # dx = dy - e^y sum(dy) = dy - 1 * 0 for the first


def test_references_are_the_gradients():
    """The float64 references against finite differences of the forward references."""
    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal((2, 9)), rng.standard_normal((2, 9))
    for op, forward in (("softmax_backward", softmax_reference), ("log_softmax_backward", log_softmax_reference)):
        numeric = np.zeros_like(x)
        for j in range(9):
            e = np.zeros_like(x); e[:, j] = 1e-6
            numeric[:, j] = np.sum(dy * (forward(x + e) - forward(x - e)), axis=1) / 2e-6
        assert np.allclose(REFERENCES[op](dy, forward(x)), numeric, atol=1e-7), op


# ------------------------------------------------------------------ the registry
def test_backward_variants_and_why_three_pass_has_none():
    for name in ("two_pass", "multi_block"):
        for dtype in DTYPES:
            for op in BACKWARD_OPS:
                assert get_variant(name).unsupported_reason(100, H200, dtype, op) is None
    reason = get_variant("three_pass").unsupported_reason(100, H200, "float32", "softmax_backward")
    assert "no backward pass" in reason and "two_pass" in reason
    for op in BACKWARD_OPS:
        for cols in (100, 5000, 50000, 393216):
            names = [v.name for v in preferences(Shape(8, cols, cols, cols, op=op), H200)]
            assert "three_pass" not in names and {"two_pass", "multi_block"} <= set(names)


def test_backward_traffic_reads_two_arrays():
    two_pass = get_variant("two_pass")
    assert two_pass.traffic_bytes(4096, 393216) == 4096 * 393216 * 12  # the forward, called without op
    assert two_pass.traffic_bytes(4096, 393216, 4, op="softmax_backward") == 4096 * 393216 * 20  # 2 + 2 reads + 1
    assert two_pass.traffic_bytes(4096, 393216, 2, op="log_softmax_backward") == 4096 * 393216 * 10
    assert get_variant("single_read").bytes_per_element(2, "softmax_backward") == 6  # 1 + 1 reads + 1 write


def test_backward_shape_scalars_are_in_the_kernels_order():
    shape = Shape(3, 10, 11, 12, op="softmax_backward", ld_g=13)
    assert [int(s) for s in shape.scalars()] == [3, 10, 11, 13, 12]  # rows, n, ld_y, ld_dy, ld_dx
    assert kernel_defines("float16", "log_softmax_backward") == {"SOFTMAX_DTYPE": 1, "SOFTMAX_LOG": 1,
                                                                 "SOFTMAX_BACKWARD": 1}


# ------------------------------------------------------------------ the api, no GPU
BACKWARDS = [softmax_lab.softmax_backward, softmax_lab.log_softmax_backward]


@pytest.mark.parametrize("function", BACKWARDS)
def test_dy_of_another_dtype_is_a_type_error(function):
    with pytest.raises(TypeError, match="dy must be float16, like y; got float32"):
        function(FakeGpuArray((2, 3), "<f4"), FakeGpuArray((2, 3), "<f2"))


@pytest.mark.parametrize("function", BACKWARDS)
def test_dy_of_another_shape_is_a_value_error(function):
    with pytest.raises(ValueError, match=r"dy has shape \(2, 4\); expected \(2, 3\)"):
        function(FakeGpuArray((2, 4)), FakeGpuArray((2, 3)))


@pytest.mark.parametrize("function", BACKWARDS)
def test_out_is_checked_against_y(function):
    with pytest.raises(TypeError, match="out must be float32, like y; got float16"):
        function(FakeGpuArray((2, 3)), FakeGpuArray((2, 3)), out=FakeGpuArray((2, 3), "<f2"))
    with pytest.raises(ValueError, match=r"out has shape \(3, 2\)"):
        function(FakeGpuArray((2, 3)), FakeGpuArray((2, 3)), out=FakeGpuArray((3, 2)))


@pytest.mark.parametrize("function", BACKWARDS)
@pytest.mark.parametrize("which", ["y", "dy"])
@pytest.mark.parametrize("typestr, name", [("<f8", "float64"), ("<V2", "bfloat16"), ("<i4", "int32")])
def test_unsupported_dtypes_are_named(function, which, typestr, name):
    bad, good = FakeGpuArray((2, 3), typestr), FakeGpuArray((2, 3))
    args = (good, bad) if which == "y" else (bad, good)
    with pytest.raises(TypeError, match=f"{which} has dtype .*{name}"):
        function(*args)


@pytest.mark.parametrize("function", BACKWARDS)
def test_other_arguments_are_checked_as_the_forward(function):
    with pytest.raises(ValueError, match="at least one dimension"):
        function(FakeGpuArray(()), FakeGpuArray(()))
    with pytest.raises(ValueError, match="out of range"):
        function(FakeGpuArray((2, 3)), FakeGpuArray((2, 3)), axis=2)
    with pytest.raises(ValueError, match="unknown variant"):
        function(FakeGpuArray((2, 3)), FakeGpuArray((2, 3)), variant="fastest")
    with pytest.raises(TypeError, match="CuPy array"):
        function(np.ones((2, 3), np.float32), FakeGpuArray((2, 3)))


def test_import_softmax_lab_does_not_import_torch():
    code = "import sys, softmax_lab; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_backward_error_ignores_the_spacing_of_subnormal_results():
    """A float32 dx below the smallest normal float has an absolute spacing of 2^-149: an error of
    one such step is no relative error, but one of 1e-6 of a normal-sized scale still counts."""
    y = np.array([[1e-42, 1.0 - 1e-42]])
    dy = np.array([[0.7, 0.1]])
    ref = softmax_backward_reference(dy, y)
    scale = backward_scale(dy, y, "softmax_backward")
    got = np.array([[np.float32(ref[0, 0]) + np.float32(2.0**-149), ref[0, 1]]])
    assert backward_error(got, ref, scale) <= 1e-6
    got[0, 1] += 1e-5 * scale[0, 1]
    assert backward_error(got, ref, scale) > 1e-6


def test_log_backward_measure_floors_subnormal_exponentials_and_still_catches_errors():
    """e^y below float32's smallest normal is subnormal: its spacing times the row's sum of |dy|
    is float32's best, not an error (seen on the H200); a 1e-5 error elsewhere still fails."""
    y = np.concatenate([[-100.0, -1e-4], np.full(200_000, -200.0)]).astype(np.float32)[None]
    dy = np.concatenate([[-1.9e-42, 3.0], np.ones(200_000)]).astype(np.float32)[None]
    ref = log_softmax_backward_reference(dy, y)
    scale = backward_scale(dy, y, "log_softmax_backward")
    off_by_spacings = ref.copy()
    off_by_spacings[0, 0] += 100 * 2.0**-149
    assert backward_error(off_by_spacings, ref, scale) < 1e-9
    wrong = ref.copy()
    wrong[0, 1] *= 1 + 1e-5
    assert backward_error(wrong, ref, scale) > 1e-6
