"""multi_block_smem on the GPU: rows split over resident blocks, each chunk held
in shared memory from its read to its write.  Forced tight rings (the resident
blocks' slots hold exactly a row's chunks, the kernel's progress condition),
odd lengths, rows of one element, every dtype and forward op, x and y at every
alignment, -inf/NaN rows, NaN-poisoned outputs, both schedules (one group
of warps, and MBS_SPLIT's two, refilling after the stores and before them:
MBS_EARLY_FILL) and the builds of the launch rule on long
rows, bitwise repeatability over grids, more than 2^31 elements and
compute-sanitizer.  Halves within 1 ulp of the dtype against
float64, float32 within 1e-6 relative (tests/test_single_read_dtypes_gpu.py).
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
from softmax_lab.variants import multi_block_smem as MBS

V = sys.modules["softmax_lab.variants"]
pytestmark = pytest.mark.gpu

DTYPES = ["float32", "float16", "bfloat16"]
OPS = ["softmax", "log_softmax"]
# (threads, vectors per thread, slots, blocks per SM, lag, grid, split, early refill): grid x slots = a
# row's chunks for the first two rows below (chunks of threads x vpt vectors), a lag of 1 and of every
# slot; the split schedule in groups of one warp, and of two, refilling after its stores and before
TIGHT_RINGS = [(64, 1, 2, 1, 1, 3, False, False), (64, 1, 3, 1, 2, 2, False, False), (32, 1, 5, 1, 4, 6, False, False),
               (96, 2, 2, 2, 1, 5, False, False), (64, 1, 2, 1, 0, 3, True, False), (64, 2, 3, 1, 0, 2, True, False),
               (128, 1, 2, 2, 0, 5, True, False), (64, 1, 2, 1, 0, 3, True, True), (64, 2, 3, 1, 0, 2, True, True),
               (128, 1, 2, 2, 0, 5, True, True)]


def _special(torch, x):
    rows, cols = x.shape
    if cols > 2:
        x[1 % rows, : cols // 2] = float("-inf")
        x[2 % rows] = float("-inf")
    if rows > 3 and cols > 2:
        x[3, cols // 3] = float("nan")


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ring", TIGHT_RINGS)
@pytest.mark.parametrize("x_off, y_off", [(0, 0), (1, 2), (3, 7)])
def test_tight_rings_odd_lengths_and_special_values(dtype, op, ring, x_off, y_off):
    torch = _torch()
    _hopper()
    threads, vpt, slots, per_sm, lag, grid, split, early = ring
    chunk = threads * vpt * 16 // V.DTYPES[dtype]  # elements
    for rows, cols in ((6, grid * slots * chunk - 3), (9, grid * slots * chunk - chunk // 2 + 1), (5, 1031),
                       (3, 1), (4, 7)):
        x = _input(torch, rows, cols, dtype, x_off, seed=cols + x_off)
        _special(torch, x)
        y, yb = _poisoned_out(torch, rows, cols, dtype, y_off)
        _launch(x, y, op, variant="multi_block_smem", threads=threads, vpt=vpt, slots=slots, blocks_per_sm=per_sm,
                lag=lag, grid=grid, split=split, early_fill=early)
        assert _ok(_error(y, x, dtype, op), dtype), (ring, rows, cols)
        assert bool(torch.isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("threads, vpt, slots, grid", [(64, 1, 2, 3), (64, 2, 3, 2), (128, 1, 2, 5)])
@pytest.mark.parametrize("early", [False, True])
@pytest.mark.parametrize("x_off, y_off", [(0, 0), (3, 7)])
def test_companions_past_the_ring(dtype, op, threads, vpt, slots, grid, early, x_off, y_off):
    """The split with companions (probe 99): the ring holds `held` = grid x slots chunks of a row
    (exactly: a tight ring), chunk c + held rides with chunk c; rows of 2 x held chunks (less 3
    elements), of held + 1, and short rows that need none."""
    torch = _torch()
    _hopper()
    chunk = threads * vpt * 16 // V.DTYPES[dtype]  # elements
    held = grid * slots
    for rows, cols in ((6, 2 * held * chunk - 3), (9, held * chunk + chunk // 2 + 1), (5, 1031), (3, 1)):
        x = _input(torch, rows, cols, dtype, x_off, seed=cols + x_off)
        _special(torch, x)
        y, yb = _poisoned_out(torch, rows, cols, dtype, y_off)
        _launch(x, y, op, variant="multi_block_smem", threads=threads, vpt=vpt, slots=slots, grid=grid, split=True,
                early_fill=early, held_chunks=held)
        assert _ok(_error(y, x, dtype, op), dtype), (rows, cols)
        assert bool(torch.isnan(yb[:, :y_off]).all()), "wrote before the output view"


def test_a_ring_too_small_for_a_row_is_cannot_run():
    torch = _torch()
    _hopper()
    x = _input(torch, 2, 64 * 4 * 7, "float32")
    y, _ = _poisoned_out(torch, 2, 64 * 4 * 7, "float32")
    for split in (False, True):
        with pytest.raises(V.CannotRun, match="cannot hold a row"):  # 3 blocks x 2 slots < 7 chunks
            _launch(x, y, "softmax", variant="multi_block_smem", threads=64, vpt=1, slots=2, grid=3, split=split)
    with pytest.raises(V.CannotRun, match="two groups of whole warps"):
        _launch(x, y, "softmax", variant="multi_block_smem", threads=96, split=True)
    with pytest.raises(V.CannotRun, match="early refills are the split schedule's"):
        _launch(x, y, "softmax", variant="multi_block_smem", threads=64, split=False, early_fill=True)


@pytest.mark.parametrize("dtype, op, rows, cols, x_off, y_off", [
    ("float32", "softmax", 3, (1 << 22) + 5, 1, 3),  # one group of 448 threads (16 MB rows)
    ("float32", "log_softmax", 2, 7_000_001, 0, 1),  # near the longest row the slots hold
    ("float32", "softmax", 17, 1_048_579, 3, 0),  # the split schedule, 512 threads x 8 vectors, 3 slots
    ("float32", "softmax", 5, 3_000_001, 1, 2),  # the split of 512 x 7 x 4 (2.5 rows held), refilling early
    ("float32", "log_softmax", 5, 3_000_001, 2, 0),  # float32 log_softmax there: one group
    ("bfloat16", "softmax", 3, 6_000_007, 2, 1),  # halves' split of 512 x 7 x 4
    ("float32", "log_softmax", 40, 600_001, 2, 2),
    ("bfloat16", "softmax", 5, 1 << 23, 0, 0),  # 16 MB rows of halves
    ("float16", "log_softmax", 9, 2_097_155, 5, 3),
    ("float32", "softmax", 8, (1 << 22) + 5, 1, 3),  # the split with companions (1.84 rows; 264 of 293 held)
    ("float32", "log_softmax", 6, 6_000_001, 3, 1),  # companions for float32 log_softmax too
    ("float32", "softmax", 2, 12_000_001, 0, 1),  # past the one group's row: companions (419 of 838 held)
    ("bfloat16", "softmax", 6, (1 << 23) + 3, 1, 2),  # halves' companions
])
def test_long_rows_by_the_launch_rule(dtype, op, rows, cols, x_off, y_off):
    torch = _torch()
    dev = _hopper()
    x = _input(torch, rows, cols, dtype, x_off, seed=cols)
    _special(torch, x)
    y, yb = _poisoned_out(torch, rows, cols, dtype, y_off)
    _launch(x, y, op, variant="multi_block_smem")
    _assert_every_row(torch, x, y, yb, y_off, op, MBS.block_rule(cols, x.element_size(), dev, op, rows))


def _assert_every_row(torch, x, y, yb, y_off, op, label):
    """torch's NaN and -inf pattern, every row within the dtype's bound, nothing written before
    the output view (y = yb[:, y_off:])."""
    dtype = str(x.dtype).removeprefix("torch.")
    theirs = getattr(torch, op)(x.float(), dim=-1)
    assert bool((torch.isnan(y) == torch.isnan(theirs)).all()) and bool((torch.isneginf(y) == torch.isneginf(theirs)).all())
    for r in range(x.shape[0]):
        assert _ok(_error(y[r : r + 1], x[r : r + 1], dtype, op), dtype), (label, r)
    assert bool(torch.isnan(yb[:, :y_off]).all()), "wrote before the output view"


@pytest.mark.parametrize("dtype, op", [("bfloat16", "softmax"), ("float16", "log_softmax"), ("float16", "softmax")])
def test_auto_runs_long_half_rows_in_the_split_schedule(dtype, op):
    """Half rows past a cluster's 786432 elements: auto takes the split schedule (x[:, 1:] and
    an output off its row's 16-byte boundary, special values, a poisoned output)."""
    torch = _torch()
    dev = _hopper()
    rows, cols = 9, 1_048_579  # more rows than one round of single_read's 7 resident clusters of 16
    x = _input(torch, rows, cols, dtype, 1, seed=cols)
    _special(torch, x)
    y, yb = _poisoned_out(torch, rows, cols, dtype, 3)
    shape = V.Shape(rows, cols, x.stride(0), y.stride(0), x.data_ptr() % 16, y.data_ptr() % 16, 2, dtype, op)
    assert V.preferences(shape, dev)[0].name == "multi_block_smem" and MBS.block_rule(cols, 2, dev)[3]
    assert getattr(softmax_lab, op)(x, out=y) is y
    torch.cuda.synchronize()
    _assert_every_row(torch, x, y, yb, 3, op, "auto")


@pytest.mark.parametrize("split, early, held", [(False, False, None), (True, False, None), (True, True, None),
                                               (True, True, 10)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_bitwise_the_same_whichever_block_holds_which_chunk(dtype, split, early, held):
    """The row's (max, sum) is merged in chunk order, so grids of different sizes (and runs)
    give the same bits; with companions too (10 of a float32 row's 19 chunks held)."""
    torch = _torch()
    _hopper()
    x = _input(torch, 24, 300_017, dtype, 1, seed=3)
    outs = []
    for grid in (None, 40, 13, 4):  # 13 x 3 slots hold the 19 chunks of a float32 row (21 of 448 x 8: 4 slots)
        if grid == 4 and held is None:
            continue  # 4 x 3 slots hold the 10 held chunks only
        y, _ = _poisoned_out(torch, 24, 300_017, dtype)
        _launch(x, y, "softmax", variant="multi_block_smem", grid=grid, split=split, early_fill=early,
                threads=512 if split else 448, held_chunks=held)
        outs.append(y)
    assert all(torch.equal(outs[0], out) for out in outs[1:])


@pytest.mark.parametrize("dtype, rows, cols", [("float32", 520, 1 << 22), ("bfloat16", 1040, 1 << 21)])
def test_above_2_to_the_31_elements(dtype, rows, cols):  # 2.2e9 elements (float32: the split with companions)
    torch = _torch()
    _hopper()
    try:
        x = _input(torch, rows, cols, dtype, seed=5)
        y, _ = _poisoned_out(torch, rows, cols, dtype)
    except torch.cuda.OutOfMemoryError:
        pytest.skip("not enough device memory")
    _launch(x, y, "softmax", variant="multi_block_smem")
    for r in (0, 1, rows // 2, rows - 2, rows - 1):
        assert _ok(_error(y[r : r + 1], x[r : r + 1], dtype, "softmax"), dtype), r
    assert not bool(torch.isnan(y[-1]).any())  # the last row written
    del x, y
    torch.cuda.empty_cache()


def test_launches_on_several_streams_finish():
    """Rows that need more than half of the GPU's slots, on three streams at once: the launches
    are cooperative (every block of a grid resident together), so two grids never each hold part
    of the GPU and wait for blocks of their own that cannot start (run in a child process with a
    timeout, so that a hang fails the test)."""
    _hopper()
    assert_finishes_on_several_streams("multi_block_smem", 6, 1 << 22, 3)


SANITIZER_SCRIPT = textwrap.dedent(
    """
    import sys
    import torch
    sys.path.insert(0, "tests")
    from test_single_read_dtypes_gpu import _error, _input, _launch, _ok, _poisoned_out
    wrong = []
    for dtype, op in (("float32", "softmax"), ("bfloat16", "softmax"), ("float16", "log_softmax")):
        for rows, cols, knobs in ((5, 64 * 2 * 3 * 16 // 4 - 3, dict(threads=64, vpt=2, slots=2, lag=1, grid=3, split=False)),
                                  (5, 64 * 2 * 3 * 16 // 4 - 3, dict(threads=64, vpt=2, slots=2, grid=3, split=True)),
                                  (3, 40_003, dict(grid=4)),  # the launch rule's build (split), a small grid
                                  (2, 3 * 448 * 8 * 4 + 5, dict(threads=448, vpt=8, slots=4, grid=3, split=False)),
                                  (2, 3 * 512 * 8 * 3 + 5, dict(threads=512, vpt=8, slots=3, grid=3, split=True)),
                                  (2, 3 * 512 * 7 * 4 + 5, dict(threads=512, vpt=7, slots=4, grid=3, split=True)),
                                  (2, 3 * 512 * 7 * 4 + 5, dict(threads=512, vpt=7, slots=4, grid=3, split=True,
                                                                early_fill=True)),
                                  (5, 64 * 2 * 3 * 16 // 4 - 3, dict(threads=64, vpt=2, slots=2, grid=3, split=True,
                                                                     early_fill=True))):
            x = _input(torch, rows, cols, dtype, 1, seed=cols)
            y, _ = _poisoned_out(torch, rows, cols, dtype, 2)
            _launch(x, y, op, variant="multi_block_smem", **knobs)
            if not _ok(_error(y, x, dtype, op), dtype):
                wrong.append((dtype, op, rows, cols, knobs))
        size = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
        cols = 10 * 64 * 2 * 16 // size - 3  # 10 chunks of 64 x 2 vectors: 6 in the tight ring, 4 companions
        x = _input(torch, 3, cols, dtype, 1, seed=cols)
        y, _ = _poisoned_out(torch, 3, cols, dtype, 2)
        _launch(x, y, op, variant="multi_block_smem", threads=64, vpt=2, slots=2, grid=3, split=True,
                early_fill=True, held_chunks=6)
        if not _ok(_error(y, x, dtype, op), dtype):
            wrong.append((dtype, op, "companions"))
    torch.cuda.synchronize()
    assert not wrong, wrong
    print("sanitized")
    """
)


@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_compute_sanitizer(tool, tmp_path):
    _torch()
    _hopper()
    run_sanitized(tool, SANITIZER_SCRIPT, tmp_path, timeout=1200)
