"""Property-based fuzzing of the validation and launch-planning layer, on the CPU.

Random shapes, strides (padded, permuted, negative, zero), byte offsets,
axes, dtypes (float32, float16, bfloat16) and `out` aliasings go through api.plan_call and variants.preferences
with fake devices.  Every case must give either a plan whose every access
is an element of the arrays, in the right place, or a ValueError whose reason
holds, checked by brute force over every element's address."""

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from softmax_lab import api
from softmax_lab.device import DeviceInfo
from softmax_lab.variants import DTYPES, FALLBACKS, OPS, Shape, preferences

F32 = np.dtype(np.float32)
ELEMENT_TYPES = [F32, np.dtype(np.float16), api.BFLOAT16]
BASE = 1 << 40  # a fake device address, 256-byte aligned like a real allocation

H200 = DeviceInfo(0, "fake H200", 90, 132, 60 << 20, 232448, 233472)
A100 = DeviceInfo(1, "fake A100", 80, 108, 40 << 20, 166912, 167936)
SMALL_HOPPER = DeviceInfo(2, "fake small Hopper slice", 90, 16, 8 << 20, 101376, 102400)


@st.composite
def layouts(draw, shape=None, item=4):
    """(shape, byte strides, byte offset of element 0 from BASE) of a view into a
    buffer of elements of `item` bytes."""
    if shape is None:
        ndim = draw(st.integers(1, 4))
        sizes = st.one_of(st.integers(1, 5), st.just(0)) if draw(st.integers(0, 9)) == 0 else st.integers(1, 5)
        shape = tuple(draw(st.lists(sizes, min_size=ndim, max_size=ndim)))
    ndim = len(shape)
    order = list(range(ndim)) if draw(st.booleans()) else draw(st.permutations(range(ndim)))
    strides = [0] * ndim
    step = item * draw(st.sampled_from([1, 1, 1, 1, 2]))  # an element stride of 1 or 2 elements innermost
    for axis in reversed(order):
        strides[axis] = step
        step *= max(shape[axis], 1) + draw(st.integers(0, 2))  # padding between rows
    for axis in range(ndim):
        kind = draw(st.integers(0, 19))
        if kind == 0:
            strides[axis] = -strides[axis]
        elif kind == 1:
            strides[axis] = 0  # broadcast
    misalign = draw(st.sampled_from([0, 0, 0, 0, item, 2 * item, 3 * item, 1, 2, 3]))
    strides = [s + (misalign if draw(st.integers(0, 19)) == 0 and s else 0) for s in strides]
    lo = sum((d - 1) * s for d, s in zip(shape, strides) if s < 0 and d > 0)
    offset = -lo + draw(st.integers(0, 64)) * item + draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, 2, 3]))
    return shape, tuple(strides), offset


def view(shape, strides, offset, dtype=F32) -> api.ArrayView:
    return api.ArrayView(BASE + offset, tuple(shape), tuple(strides), dtype, 0)


def addresses(a: api.ArrayView) -> np.ndarray:
    """The address of every element of a, indexed like a."""
    idx = np.indices(a.shape, dtype=np.int64) if a.shape else np.zeros((0,), np.int64)
    return a.ptr + sum(i * s for i, s in zip(idx, a.strides))


def row_col(shape, axis):
    """For every index of an array of `shape`: its (row, column) with `axis` moved last."""
    idx = np.indices(shape, dtype=np.int64)
    col = idx[axis]
    others = [idx[d] for d in range(len(shape)) if d != axis]
    other_shape = [shape[d] for d in range(len(shape)) if d != axis]
    row = np.ravel_multi_index(others, other_shape) if others else np.zeros(shape, np.int64)
    return row, col


def aligned(a: api.ArrayView) -> bool:
    item = a.dtype.itemsize
    return a.ptr % item == 0 and all(s % item == 0 for d, s in zip(a.shape, a.strides) if d > 1)


def uniform_rows(a: api.ArrayView, axis: int) -> bool:
    """Brute force: every element sits at ptr0 + item * (row * ld + col) for one ld >= cols (or one row)."""
    item = a.dtype.itemsize
    row, col = row_col(a.shape, axis)
    addr = addresses(a)
    first = addr.flat[0]
    rows, cols = int(row.max()) + 1, a.shape[axis]
    if rows == 1:
        return bool(np.all(addr == first + item * col))
    ld_bytes = int(addr[tuple(np.argwhere(row == 1)[0])] - addr[tuple(np.argwhere(row == 0)[0])])
    return ld_bytes >= item * cols and bool(np.all(addr == first + row * ld_bytes + item * col))


def check_plan(x, out, axis, plan: api.CallPlan):
    item = x.dtype.itemsize
    row, col = row_col(x.shape, axis)
    assert plan.rows == int(row.max()) + 1 and plan.cols == x.shape[axis]
    assert plan.ld_x >= 1  # input rows may overlap (ld_x < cols): the kernels only read them
    if not plan.copy_input:  # the kernel reads row r, column c at x_ptr + item (r ld_x + c): x's element there
        assert np.array_equal(plan.x_ptr + item * (row * plan.ld_x + col), addresses(x))
    else:
        assert not uniform_rows(x, axis) or plan.cols <= 1
    if out is None or plan.copy_output:
        assert plan.y_ptr is None and plan.ld_y == plan.cols
        if out is not None:  # the copy into out needs distinct elements, and out had no uniform rows
            assert len(np.unique(addresses(out))) == out.size
            assert not uniform_rows(out, axis)
        return
    written = plan.y_ptr + item * (row * plan.ld_y + col)
    assert np.array_equal(written, addresses(out))  # every element of out, each once, in its place
    assert len(np.unique(written)) == written.size
    if not plan.copy_input:
        same = np.array_equal(addresses(x), written)
        assert same or not np.intersect1d(addresses(x), written).size  # in place, or disjoint


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plan_call_stays_inside_the_arrays_or_says_why(data):
    dtype = data.draw(st.sampled_from(ELEMENT_TYPES))
    item = dtype.itemsize
    x = view(*data.draw(layouts(item=item)), dtype)
    assume(x.size > 0)
    axis = data.draw(st.integers(0, len(x.shape) - 1))
    kind = data.draw(st.sampled_from(["none", "same", "size1", "disjoint", "shift", "random"]))
    if kind == "none":
        out = None
    elif kind == "same":
        out = x
    elif kind == "size1":  # the same elements; strides changed on axes of length 1 only
        strides = tuple(s if d > 1 else data.draw(st.integers(-64, 64)) * item for d, s in zip(x.shape, x.strides))
        out = api.ArrayView(x.ptr, x.shape, strides, dtype, 0)
    elif kind == "shift":  # the same layout a few elements on: interleaved, or a partial overlap
        out = api.ArrayView(x.ptr + item * data.draw(st.integers(1, 12)), x.shape, x.strides, dtype, 0)
    elif kind == "disjoint":  # contiguous, past x's last element
        strides = tuple(item * int(np.prod(x.shape[d + 1 :])) for d in range(len(x.shape)))
        offset = int(np.abs(addresses(x) - BASE).max()) + item + data.draw(st.integers(0, 8)) * item
        out = api.ArrayView(BASE + offset, x.shape, strides, dtype, 0)
    else:  # another layout of the same shape in the same buffer
        _, strides, offset = data.draw(layouts(x.shape, item))
        out = api.ArrayView(BASE + offset, x.shape, strides, dtype, 0)
    try:
        plan = api.plan_call(x, out, axis)
    except ValueError as e:
        msg = str(e)
        event(f"refused: {msg.split(' (')[0].split(';')[0][:40]}")
        if "not aligned" in msg:
            assert not aligned(x) or (out is not None and not aligned(out))
        elif "overlap each other" in msg:
            assert aligned(out) and len(np.unique(addresses(out))) < out.size
        elif "overlaps" in msg:
            xa, oa = addresses(x), addresses(out)
            assert not np.array_equal(xa, oa) and np.intersect1d(xa, oa).size
        else:
            raise
        return
    assert aligned(x) and (out is None or aligned(out))
    event(f"planned: out={kind} copy_input={plan.copy_input} copy_output={plan.copy_output}")
    check_plan(x, out, axis, plan)


@settings(max_examples=300, deadline=None)
@given(rows=st.integers(1, 10**7), cols=st.integers(1, 1 << 23), ld_pad=st.integers(0, 9),
       x_off=st.sampled_from([0, 2, 4, 8, 12, 14]), y_off=st.sampled_from([0, 2, 4, 8, 12, 14]),
       dev=st.sampled_from([H200, A100, SMALL_HOPPER]), dtype=st.sampled_from(list(DTYPES)),
       op=st.sampled_from(OPS))
def test_auto_always_has_a_variant_that_can_run(rows, cols, ld_pad, x_off, y_off, dev, dtype, op):
    item = DTYPES[dtype]
    shape = Shape(rows, cols, cols + ld_pad, cols, x_off // item * item, y_off // item * item, item, dtype, op)
    prefs = preferences(shape, dev)
    assert prefs, shape
    assert prefs[-1].name in FALLBACKS  # runs every shape, dtype and op on every device
    for v in prefs:
        assert v.unsupported_reason(cols, dev, dtype, op) is None
        assert dtype in v.dtypes and op in v.ops
    if dev.compute_capability < 90:
        assert not {"single_read", "cluster_row", "multi_block_smem"} & {v.name for v in prefs}


def test_fuzzer_can_fail():
    """The checks above are not vacuous: a plan with a wrong row stride is caught."""
    x = view((3, 5), (24, 4), 0)  # padded rows: ld 6
    good = api.plan_call(x, None, 1)
    check_plan(x, None, 1, good)
    bad = api.CallPlan(1, 3, 5, False, False, 5, 5, x.ptr, None)
    with pytest.raises(AssertionError):
        check_plan(x, None, 1, bad)


@pytest.mark.parametrize("shape, axis", list(itertools.product([(2, 3), (1, 7), (4, 1, 3)], [0, -1])))
def test_in_place_through_equal_views(shape, axis):
    strides = tuple(4 * int(np.prod(shape[d + 1 :])) for d in range(len(shape)))
    x = view(shape, strides, 0)
    plan = api.plan_call(x, x, axis % len(shape))
    check_plan(x, x, axis % len(shape), plan)


def test_stress_script_compiles(tmp_path):
    import py_compile
    from pathlib import Path

    # the bytecode into tmp_path: py_compile writes it even where PYTHONDONTWRITEBYTECODE is set
    script = Path(__file__).parent.parent / "benchmarks" / "stress.py"
    py_compile.compile(str(script), cfile=str(tmp_path / "stress.pyc"), doraise=True)
