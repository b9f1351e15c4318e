"""The algorithms, emulated in NumPy float32 (tests/emulate.py), agree with the
float64 reference, special values included.  No GPU needed."""

import numpy as np
import pytest
from emulate import ALGORITHMS, close_by_elements, lane_spread_row

from softmax_lab.reference import relative_error, softmax_reference

ROW_LENGTHS = [1, 2, 3, 4, 5, 7, 31, 64, 129, 1000, 4099]


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("misalign", [0, 1, 3])
def test_random_rows(name, n, misalign):
    rng = np.random.default_rng(n * 10 + misalign)
    row = (rng.standard_normal(n) * 3).astype(np.float32)
    out = ALGORITHMS[name](row, misalign)
    assert relative_error(out, softmax_reference(row)) < 1e-6


def _special_rows(n, rng):
    base = rng.standard_normal(n).astype(np.float32)
    rows = {}
    r = base.copy(); r[rng.integers(n, size=max(1, n // 3))] = -np.inf; rows["some -inf"] = r
    rows["all -inf"] = np.full(n, -np.inf, np.float32)
    r = base.copy(); r[rng.integers(n)] = np.nan; rows["a NaN"] = r
    r = base.copy(); r[rng.integers(n)] = np.inf; rows["a +inf"] = r
    r = np.full(n, -np.inf, np.float32); r[-1] = 2.0; rows["-inf then one value"] = r
    r = base.copy() - 200; rows["all near -200"] = r
    r = base.copy(); r[: n // 2] = -np.inf; rows["leading -inf half"] = r
    return rows


@pytest.mark.parametrize("name", ALGORITHMS)
@pytest.mark.parametrize("n", [1, 5, 130, 1031])
def test_special_values_match_reference(name, n):
    rng = np.random.default_rng(n)
    for label, row in _special_rows(n, rng).items():
        for misalign in (0, 2):
            out = ALGORITHMS[name](row, misalign)
            with np.errstate(invalid="ignore"):
                ref = softmax_reference(row)
            assert relative_error(out, ref) < 1e-6, (label, misalign)


def test_reference_special_values_follow_torch():
    with np.errstate(invalid="ignore"):
        ref = softmax_reference(np.array([[0, -np.inf], [-np.inf, -np.inf], [0, np.nan], [0, np.inf]], np.float32))
    assert ref[0].tolist() == [1.0, 0.0]
    assert np.isnan(ref[1:]).all()


def test_relative_error_fails_on_wrong_nan_pattern():
    ref = np.array([0.5, 0.5])
    assert relative_error(np.array([0.5, np.nan], np.float32), ref) == float("inf")
    assert relative_error(np.array([0.5, 0.5], np.float32), ref) == 0.0
    assert relative_error(np.array([0.4, 0.6], np.float32), ref) > 0.1


@pytest.mark.parametrize("chunk_vecs", [1, 2, 3, 50])
def test_multi_block_any_number_of_chunks(chunk_vecs):
    row = np.random.default_rng(chunk_vecs).standard_normal(403).astype(np.float32)
    out = ALGORITHMS["multi_block"](row, 1, chunk_vecs=chunk_vecs)
    assert relative_error(out, softmax_reference(row)) < 1e-6


@pytest.mark.parametrize("cluster", [1, 2, 8, 16])
def test_single_read_any_cluster(cluster):
    row = np.random.default_rng(cluster).standard_normal(1027).astype(np.float32)
    out = ALGORITHMS["single_read"](row, 3, cluster=cluster)
    assert relative_error(out, softmax_reference(row)) < 1e-6


@pytest.mark.parametrize("group", [2, 3, 7, 33])
@pytest.mark.parametrize("n", [1, 5, 131, 1027])
@pytest.mark.parametrize("misalign", [0, 1, 3])
def test_memory_merged_slices_cover_every_row(group, n, misalign):
    """A memory-merged group's fixed slice, ceil(ceil(n / 4) / group) vectors (the host's
    memory_merge_slice), covers every row's body whatever its alignment; blocks past the
    body hold nothing."""
    row = np.random.default_rng(n + group).standard_normal(n).astype(np.float32)
    slice_vecs = -(-(-(-n // 4)) // group)
    out = ALGORITHMS["single_read"](row, misalign, cluster=group, slices=(slice_vecs, 0))
    assert relative_error(out, softmax_reference(row)) < 1e-6


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("threads, vpt, v0, vecs", [(64, 3, 0, 150), (96, 2, 40, 192), (32, 4, 5, 1), (128, 1, 0, 127)])
def test_realigned_block_stores_write_every_float_once(threads, vpt, v0, vecs, d):
    from emulate import realigned_block_stores

    body = np.random.default_rng(d).standard_normal((v0 + vecs + 3, 4)).astype(np.float32)
    out, writes = realigned_block_stores(body, v0, vecs, threads, vpt, d)
    span = slice(4 * v0, 4 * (v0 + vecs))
    assert (writes["floats"][span] == 1).all() and writes["floats"].sum() == 4 * vecs
    assert np.array_equal(out[span], body[v0 : v0 + vecs].reshape(-1))
    # every vector store lands on a 16-byte boundary of y, and only the slice's ends are scalar
    assert all((p + d) % 4 == 0 for p in writes["vectors"])
    assert len(writes["vectors"]) == vecs - 1


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("vecs, vpt", [(1, 1), (31, 1), (32, 1), (33, 2), (256, 8), (200, 8)])
def test_realigned_warp_stores_write_every_float_once(vecs, vpt, d):
    from emulate import realigned_warp_stores

    body = np.random.default_rng(vecs).standard_normal((vecs, 4)).astype(np.float32)
    out, writes = realigned_warp_stores(body, vpt, d)
    assert (writes["floats"][: 4 * vecs] == 1).all() and writes["floats"].sum() == 4 * vecs
    assert np.array_equal(out[: 4 * vecs], body.reshape(-1))
    assert len(writes["vectors"]) == vecs - -(-vecs // 32)  # one run per warp: 31 of every 32 vectors


def test_shuffle_gives_what_the_source_lane_provides():
    from emulate import shfl

    # lane 31 asking lane 0 gets what lane 0 passes in (run7's bug in a whole-row realignment)
    provided = np.arange(32) * 10
    assert shfl(provided, [(l + 1) % 32 for l in range(32)])[31] == 0


# ------------------------------------------------------------ dtypes and ops (elements.cuh)
from emulate import VEC, run, to_bits, widen

from softmax_lab.reference import log_softmax_reference, op_error, ulp_error

ROW_KERNELS = ["three_pass", "two_pass", "multi_block"]
DTYPES = ["float32", "float16", "bfloat16"]
OPS = ["softmax", "log_softmax"]


def _reference(stored, dtype, op):
    x = widen(stored, dtype)  # exactly the values the kernel reads
    with np.errstate(invalid="ignore", divide="ignore"):
        return (softmax_reference if op == "softmax" else log_softmax_reference)(x)


def check_row(out, stored, dtype, op):
    """fp32: 1e-6 relative (norm over the row); fp16/bf16: within 1 ulp of the dtype."""
    ref = _reference(stored, dtype, op)
    with np.errstate(invalid="ignore", over="ignore"):
        if dtype == "float32":
            return op_error(out, ref, dtype, op) < 1e-6
        return op_error(widen(out, dtype), ref, dtype, op) <= 1.0


@pytest.mark.parametrize("name", ROW_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 3, 7, 8, 9, 15, 17, 129, 1000, 4099])
@pytest.mark.parametrize("misalign", [0, 1, 5, 7])
def test_dtypes_and_ops_against_float64(name, dtype, op, n, misalign):
    rng = np.random.default_rng(n * 100 + misalign)
    stored = to_bits((rng.standard_normal(n) * 4).astype(np.float32), dtype)
    out = run(name, stored, dtype, op, misalign, threads=32)
    assert out.dtype == stored.dtype
    assert check_row(out, stored, dtype, op)


@pytest.mark.parametrize("name", ROW_KERNELS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 9, 130, 1031])
def test_dtypes_and_ops_special_values(name, dtype, op, n):
    rng = np.random.default_rng(n)
    for label, row in _special_rows(n, rng).items():
        stored = to_bits(row, dtype)
        for misalign in (0, 3):
            out = run(name, stored, dtype, op, misalign)
            assert check_row(out, stored, dtype, op), (label, misalign)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_softmax_special_values_follow_torch(dtype):
    rows = np.array([[0, -np.inf, 1], [-np.inf] * 3, [0, np.nan, 1], [0, np.inf, 1]], np.float32)
    for name in ROW_KERNELS:
        out = np.stack([widen(run(name, to_bits(r, dtype), dtype, "log_softmax"), dtype) for r in rows])
        assert out[0, 1] == -np.inf and np.isfinite(out[0, [0, 2]]).all()
        assert np.isnan(out[1:]).all(), name


def test_log_softmax_is_not_log_of_softmax():
    """Far below the max, softmax underflows to 0 but log_softmax stays finite and exact."""
    row = np.array([0.0, -200.0, -1000.0], np.float32)
    for name in ROW_KERNELS:
        out = run(name, row, "float32", "log_softmax")
        assert out.tolist() == [0.0, -200.0, -1000.0], name


def _near_zero_log_rows(dtype, rng, cols=65536):
    """Rows whose log_softmax outputs reach near 0: one element at 0 in the first vector (so
    that thread 0 adds all its other vectors to a sum of 1), the rest at a gap that makes the
    sum 1 + 2^-k (k = 11..13), stored as `dtype`."""
    for k in (11, 12, 13):
        row = np.log(2.0**-k / (cols - 1)) + rng.random(cols) * 0.05
        row[int(rng.integers(8))] = 0.0
        yield to_bits(row.astype(np.float32), dtype)


@pytest.mark.parametrize("name,knobs", [("multi_block", {"threads": 512, "chunk_vecs": 8192}),
                                        ("two_pass", {"threads": 256})])
def test_log_softmax_keeps_the_sum_near_1(name, knobs):
    """log_softmax's outputs near 0 are -log(1 + t): t must survive the threads' running sums
    (online_add_vec_compensated).  The thread holding the row's max adds 15-31 float16 vectors
    whose terms sum to less than half the sum's last place; added plainly they are dropped
    (1.07 ulp past reference.LOG_FLOOR in this emulation, 1.97 on the H200 for multi_block),
    compensated the outputs are rounded once."""
    rng = np.random.default_rng(3)
    for stored in _near_zero_log_rows("float16", rng):
        out = run(name, stored, "float16", "log_softmax", **knobs)
        err = op_error(widen(out, "float16"), _reference(stored, "float16", "log_softmax"), "float16", "log_softmax")
        assert err <= 0.55, err


def test_multi_block_smem_split_sums_two_runs_near_0():
    """The split schedule's reducers hold 16 vectors a chunk: summed as one run, the thread that
    holds the row's max drops the small terms of log_softmax's outputs near 0 (1.97 ulp here,
    2.09 on the H200); as two runs of 8 merged (split_max_sum) they stay within 1 ulp, as the
    one-group build of 8 vectors."""
    rng = np.random.default_rng(3)
    one_run = []
    for stored in _near_zero_log_rows("float16", rng):
        ref = _reference(stored, "float16", "log_softmax")
        for knobs in (dict(threads=256, vpt=8, split=True), dict(threads=512, vpt=8, split=False)):
            out = run("multi_block_smem", stored, "float16", "log_softmax", **knobs)
            assert op_error(widen(out, "float16"), ref, "float16", "log_softmax") <= 1.0, knobs
        out = run("multi_block_l2", stored, "float16", "log_softmax", threads=256, vpt=16)
        one_run.append(op_error(widen(out, "float16"), ref, "float16", "log_softmax"))
    assert max(one_run) > 1.0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_halves_split_into_8_element_vectors(dtype):
    from emulate import row_span

    assert VEC[dtype] == 8
    # a row starting 3 halves (6 bytes) past a 16-byte boundary: 5 head elements
    assert row_span(100, 3, 8) == (5, 11) and row_span(4, 3, 8) == (4, 0) and row_span(16, 0, 8) == (0, 2)


def test_rounding_is_once_and_to_nearest_even():
    # bfloat16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1); just above rounds up
    x = np.array([1 + 2.0**-8, 1 + 2.0**-8 + 2.0**-20, 1 + 3 * 2.0**-8, -0.0, np.inf, np.nan], np.float32)
    b = widen(to_bits(x, "bfloat16"), "bfloat16")
    assert b[:3].tolist() == [1.0, 1 + 2.0**-7, 1 + 2 * 2.0**-7]
    assert np.signbit(b[3]) and b[4] == np.inf and np.isnan(b[5])
    h = widen(to_bits(np.array([1 + 2.0**-11, 70000.0, 2.0**-25 * 1.5], np.float32), "float16"), "float16")
    assert h.tolist() == [1.0, np.inf, 2.0**-24]  # ties to even, overflow, subnormal


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_ulp_error_measures_the_dtype(dtype):
    ref = np.array([1.0, 0.25, 3e-3])
    exact = widen(to_bits(ref.astype(np.float32), dtype), dtype)
    assert ulp_error(exact, ref, dtype) <= 0.5
    bits = 11 if dtype == "float16" else 8
    ulp_of_one = 2.0 ** (1 - bits)
    assert ulp_error(exact + np.array([ulp_of_one, 0, 0]), ref, dtype) == 1.0  # allowed
    assert ulp_error(exact + np.array([2 * ulp_of_one, 0, 0]), ref, dtype) == 2.0  # refused by the checks
    assert ulp_error(np.array([np.nan, 0.25, 3e-3]), ref, dtype) == float("inf")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chunk_vecs", [1, 3, 50])
def test_multi_block_chunks_with_every_dtype(dtype, chunk_vecs):
    rng = np.random.default_rng(chunk_vecs)
    stored = to_bits(rng.standard_normal(403).astype(np.float32), dtype)
    for op in OPS:
        assert check_row(run("multi_block", stored, dtype, op, 1, chunk_vecs=chunk_vecs), stored, dtype, op)


# ------------------------------------------------------------ single_read built wide (SR_WIDE)
WIDE_KERNELS = ["single_read", "single_read_warp"]


@pytest.mark.parametrize("name", WIDE_KERNELS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 17, 129, 1000, 4099])
@pytest.mark.parametrize("misalign", [0, 1, 7])
def test_wide_half_softmax_against_float64(name, dtype, n, misalign):
    """Halves widened once, e^(x - m_t) kept, one exponential per element, the output rounded once
    from the float32 product e * (e^(m_t - M) / S): within 1 ulp of the dtype."""
    rng = np.random.default_rng(n * 10 + misalign)
    stored = to_bits((rng.standard_normal(n) * 4).astype(np.float32), dtype)
    knobs = {"cluster": 4, "threads": 32} if name == "single_read" else {}
    out = run(name, stored, dtype, "softmax", misalign, **knobs)
    assert out.dtype == stored.dtype
    assert check_row(out, stored, dtype, "softmax")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("cluster", [1, 2, 16])
def test_wide_half_softmax_special_values(dtype, cluster):
    rng = np.random.default_rng(cluster)
    for n in (1, 9, 130, 1031):
        for label, row in _special_rows(n, rng).items():
            stored = to_bits(row, dtype)
            for misalign in (0, 3):
                out = run("single_read", stored, dtype, "softmax", misalign, cluster=cluster, threads=32)
                assert check_row(out, stored, dtype, "softmax"), (label, n, misalign)


# ------------------------------------------------------------ halves by exp_elem (cluster_row, multi_block_l2)
EXP_ELEM_KNOBS = {"cluster_row": [dict(cluster=1, threads=32), dict(cluster=4, threads=32)],
                  "multi_block_l2": [dict(threads=32, vpt=2), dict(threads=64, vpt=1)],
                  "multi_block_smem": [dict(threads=32, vpt=2, split=True), dict(threads=64, vpt=1, split=False)]}


@pytest.mark.parametrize("name", EXP_ELEM_KNOBS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 7, 9, 17, 129, 1000, 4099])
@pytest.mark.parametrize("misalign", [0, 1, 7])
def test_exp_elem_halves_against_float64(name, dtype, op, n, misalign):
    """Softmax by exp_elem (ex2.approx.ftz, bfloat16's shift) in the sums and the outputs,
    log_softmax by held_max_sum: within 1 ulp of the dtype."""
    rng = np.random.default_rng(n * 10 + misalign)
    stored = to_bits((rng.standard_normal(n) * 4).astype(np.float32), dtype)
    for knobs in EXP_ELEM_KNOBS[name]:
        out = run(name, stored, dtype, op, misalign, **knobs)
        assert check_row(out, stored, dtype, op), knobs


@pytest.mark.parametrize("name", EXP_ELEM_KNOBS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_exp_elem_half_softmax_special_values(name, dtype):
    rng = np.random.default_rng(5)
    for n in (1, 9, 130, 1031):
        for label, row in _special_rows(n, rng).items():
            stored = to_bits(row, dtype)
            for misalign in (0, 3):
                out = run(name, stored, dtype, "softmax", misalign, **EXP_ELEM_KNOBS[name][0])
                assert check_row(out, stored, dtype, "softmax"), (label, n, misalign)


def test_cluster_row_float_softmax_keeps_each_output():
    """cluster_row's float32 softmax: e = 2^24 e^(x - m_t) by ex2.approx.ftz, y = e * e^(m_t - M) * (1 / S).
    Where a thread's max lies 65-90 below the row's, e^(m_t - M) / S (S with the shift) is below float32's
    normal range: as one factor it would leave a few bits of outputs that are normal.  Without the shift, e
    below 2^-126 flushes to 0 and with it outputs that float32 holds as subnormals."""
    from emulate import cluster_row

    row = lane_spread_row(4099)
    ref = softmax_reference(row.astype(np.float64))
    out = cluster_row(row, 1, threads=32, cluster=4)
    assert close_by_elements(out, ref)
    assert ((0 < out) & (out < 2.0**-126)).sum() > 100  # subnormal outputs written
    assert ((ref > 2.0**-126) & (np.abs(np.log(ref)) > 60)).sum() > 100  # normal outputs of far threads
    assert not close_by_elements(cluster_row(row, 1, threads=32, cluster=4, split_scale=False), ref)
    assert not close_by_elements(cluster_row(row, 1, threads=32, cluster=4, exp_shift=0.0), ref)


@pytest.mark.parametrize("name", EXP_ELEM_KNOBS)
def test_bfloat16_softmax_needs_the_shift_through_its_subnormals(name):
    """One element at 0, the rest from -80 to -95: outputs from 2^-115 down to 2^-137.
    bfloat16 rounds those above 2^-134 to nonzero subnormals; ex2.approx.ftz flushes e below
    2^-126, which the shift of 2^8 keeps clear of."""
    row = -np.linspace(80, 95, 1031).astype(np.float32)
    row[0] = 0
    stored = to_bits(row, "bfloat16")
    knobs = EXP_ELEM_KNOBS[name][0]
    out = run(name, stored, "bfloat16", "softmax", 0, **knobs)
    assert check_row(out, stored, "bfloat16", "softmax")
    y = widen(out, "bfloat16")
    assert ((0 < y) & (y < 2.0**-126)).sum() > 100  # subnormal outputs written
    unshifted = run(name, stored, "bfloat16", "softmax", 0, **knobs, exp_shift=0.0)
    assert not check_row(unshifted, stored, "bfloat16", "softmax")


def test_the_in_place_emulation_is_of_softmax_only():
    with pytest.raises(ValueError, match="softmax"):
        run("single_read", to_bits(np.zeros(9, np.float32), "float16"), "float16", "log_softmax")


@pytest.mark.parametrize("rows, chunks", [(1, 1), (3, 5), (7, 2), (2, 40)])
@pytest.mark.parametrize("grid", [1, 4, 33])
def test_multi_block_l2_tickets_run_every_item_once_without_deadlock(rows, chunks, grid):
    """The kernel's ticket order (read item k at 2k, write item k at 2(k + lag) + 1)
    with blocks advancing in random orders: every item runs once, each write after
    its row's reads, and no block waits forever, whatever the lag asked for (the
    kernel raises it to chunks - 1; the caller's chunks + grid makes waits rare)."""
    from emulate import multi_block_l2_schedule

    rng = np.random.default_rng(rows * 1000 + chunks * 10 + grid)
    for lag in (0, 1, chunks, chunks + grid):
        done, _ = multi_block_l2_schedule(rows, chunks, lag, grid, rng)
        items = rows * chunks
        assert sorted(i for kind, i in done if kind == "read") == list(range(items))
        assert sorted(i for kind, i in done if kind == "write") == list(range(items))
        position = {w: p for p, w in enumerate(done)}
        for k in range(items):
            row = k // chunks
            assert all(position[("read", row * chunks + c)] < position[("write", k)] for c in range(chunks))


def test_multi_block_l2_schedule_detects_a_deadlock(monkeypatch):
    """The check is real: without the kernel's floor on the lag, a row's first
    write item comes before its last read item, and one block hangs."""
    import emulate

    monkeypatch.setattr(emulate, "multi_block_l2_lag", lambda lag, chunks: lag)
    with pytest.raises(RuntimeError, match="deadlock"):
        emulate.multi_block_l2_schedule(3, 5, 0, 1, np.random.default_rng(0))


@pytest.mark.parametrize("rows, chunks, slots, grid", [(1, 1, 2, 1), (3, 5, 2, 3), (7, 12, 3, 4), (2, 40, 5, 8),
                                                       (5, 30, 7, 33)])
def test_multi_block_smem_schedule_writes_every_chunk_once_without_deadlock(rows, chunks, slots, grid):
    """multi_block_smem.cu's loops with blocks advancing in random orders: where the
    blocks hold a row's chunks (grid x slots >= chunks), every chunk is written
    once, whatever the lag, and in the split schedule."""
    from emulate import multi_block_smem_schedule

    rng = np.random.default_rng(rows * 1000 + chunks * 10 + grid)
    for lag, split in ((0, False), (1, False), (slots - 1, False), (slots + 1, False), (0, True)):
        for _ in range(20):
            assert sorted(multi_block_smem_schedule(rows, chunks, slots, lag, grid, rng, split)) == \
                list(range(rows * chunks))


@pytest.mark.parametrize("rows, chunks, held, slots, grid", [(3, 9, 6, 2, 3), (4, 11, 6, 3, 2), (2, 40, 20, 5, 4),
                                                             (6, 13, 7, 7, 1), (5, 3, 2, 2, 1)])
def test_multi_block_smem_schedule_with_companions_writes_every_chunk_once(rows, chunks, held, slots, grid):
    """The split with companions: where the blocks hold a row's held chunks (grid x
    slots >= held), every chunk, held or companion, is written once."""
    from emulate import multi_block_smem_schedule

    rng = np.random.default_rng(rows * 1000 + chunks * 10 + held)
    for _ in range(20):
        assert sorted(multi_block_smem_schedule(rows, chunks, slots, 0, grid, rng, True, held)) == \
            list(range(rows * chunks))
    with pytest.raises(RuntimeError, match="deadlock"):  # one slot fewer than the held chunks
        multi_block_smem_schedule(rows + 1, chunks, held - 1, 0, 1, rng, True, held)


@pytest.mark.parametrize("split", [False, True])
def test_multi_block_smem_schedule_deadlocks_where_the_blocks_cannot_hold_a_row(split):
    """The check is real: with fewer slots than a row's chunks every block ends up
    full, waiting for a row that cannot complete."""
    from emulate import multi_block_smem_schedule

    with pytest.raises(RuntimeError, match="deadlock"):
        multi_block_smem_schedule(2, 7, 2, 1, 3, np.random.default_rng(0), split)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cluster_row_line_slices_cover_the_row(dtype, op):
    """cluster_row's slices on 128-byte lines (notes/TUNING.md#line-slices) at every place of the body in its
    line, down to the even split where the blocks hold no more (capacity): every output within its
    bound, none left unwritten (the output is poisoned by run)."""
    from emulate import line_slices

    rng = np.random.default_rng(11)
    for n in (1, 75, 1031, 4099):
        stored = to_bits((rng.standard_normal(n) * 3).astype(np.float32), dtype)
        vecs = n // VEC[dtype]
        for line_shift in range(8):
            for capacity in (None, -(-vecs // 4), -(-vecs // 4) + 7):
                if capacity is not None and capacity < 1:
                    continue
                out = run("cluster_row", stored, dtype, op, 0, threads=32, cluster=4, line_shift=line_shift,
                          capacity=capacity)
                assert check_row(out, stored, dtype, op), (n, line_shift, capacity)
    assert line_slices(100, 4, 3, 32) == (32, 3) and line_slices(100, 4, 3, 31) == (25, 0)
