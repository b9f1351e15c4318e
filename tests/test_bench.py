"""softmax_lab.lab.bench: the grid, the sampled rows, and the checks around the timed
calls, with fake candidates on NumPy arrays (no GPU); the GPU runs are marked gpu."""

import math
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import synthetic
from emulate import to_bits, widen
from row_inputs import FakeStream

import softmax_lab
from softmax_lab.lab import bench, records, report
from softmax_lab.lab import candidates as cat
from softmax_lab.problem import ALL_OPS
from softmax_lab.reference import backward_scale, softmax_reference

SOFTMAX = cat.Candidate("fake", "variant", 1, 1, "a fake candidate")


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)


def fake_timer(call, repeats, warmup, before_timed):
    """Runs the calls as timing.gpu_times would, with made-up times."""
    for _ in range(warmup):
        call()
    before_timed()
    out = None
    for _ in range(repeats):
        out = call()
    return [1.0] * repeats, out


def measure_fake(call_factory, rows=200, cols=37, repeats=6, warmup=2):
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    y = np.empty_like(x)
    idx = bench.check_rows(rows)
    prep = cat.Prepared(call_factory(x, y), lambda: y.fill(np.nan), "the out buffer")
    return bench.measure(SOFTMAX, prep, x, idx, softmax_reference(x[idx]), fake_timer, repeats, warmup)


def test_a_correct_candidate_is_checked_twice_and_timed():
    def factory(x, y):
        def call():
            y[...] = np_softmax(x)
            return y
        return call

    rec = measure_fake(factory)
    assert rec["status"] == "ok" and rec["stats"]["repeats"] == 6
    assert [c["after"] for c in rec["check"]["calls"]] == ["the first call", "the last of 6 timed calls"]
    assert rec["check"]["relative_error"] < 1e-6
    synthetic.validate(synthetic.document("bench"))


def test_a_candidate_that_breaks_under_repetition_is_failed_not_timed():
    def factory(x, y):
        calls = [0]

        def call():
            calls[0] += 1
            if calls[0] <= 3:  # the checked call and the warm-up are right
                y[...] = np_softmax(x)
            else:  # then one row in the middle is left unwritten
                y[: len(x) // 2] = np_softmax(x)[: len(x) // 2]
                y[len(x) // 2 + 1:] = np_softmax(x)[len(x) // 2 + 1:]
            return y
        return call

    rec = measure_fake(factory)
    assert rec["status"] == "failed" and rec["stats"] is None
    assert "the last of 6 timed calls" in rec["reason"]
    assert rec["check"]["calls"][0]["relative_error"] < 1e-6
    assert rec["check"]["calls"][1]["row_sum_error"] is None  # the poisoned row: NaN


def test_a_wrong_row_between_the_sampled_ones_is_caught_by_the_row_sums():
    rows = 200
    missed = next(r for r in range(rows) if r not in bench.check_rows(rows))

    def factory(x, y):
        def call():
            y[...] = np_softmax(x)
            y[missed] *= 1.01
            return y
        return call

    rec = measure_fake(factory, rows=rows)
    assert rec["status"] == "failed" and "the first call" in rec["reason"]
    assert rec["check"]["calls"][0]["relative_error"] < 1e-6  # the sampled rows alone pass
    assert rec["check"]["calls"][0]["row_sum_error"] > bench.ROW_SUM_TOLERANCE


def test_a_candidate_that_writes_nothing_fails_on_the_poison():
    rec = measure_fake(lambda x, y: (lambda: y))
    assert rec["status"] == "failed" and rec["check"]["relative_error"] is None


def test_a_candidate_that_raises_is_failed_with_the_exception():
    def factory(x, y):
        def call():
            raise MemoryError("out of memory")
        return call

    rec = measure_fake(factory)
    assert rec["status"] == "failed" and rec["reason"] == "raised MemoryError: out of memory"
    assert rec["check"] is None


def test_a_copy_is_checked_against_the_input():
    x = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    idx = bench.check_rows(10)
    good = bench.check_output(x.copy(), x, idx, x[idx].astype(np.float64), is_copy=True)
    assert good == {"relative_error": 0.0, "row_sum_error": 0.0, "passed": True}
    bad = x.copy()
    bad[3, 3] += 1
    assert not bench.check_output(bad, x, idx, x[idx].astype(np.float64), is_copy=True)["passed"]


def test_check_rows_spread_over_the_whole_output():
    rows = bench.check_rows(1_000_000)
    assert len(rows) == bench.CHECK_ROWS == len(set(rows)) and rows == sorted(rows)
    assert rows[0] == 0 and rows[-1] == 999_999
    gaps = np.diff(rows)
    assert gaps.max() < 2 * 1_000_000 / (bench.CHECK_ROWS - 2)  # one in every band
    assert bench.check_rows(3) == [0, 1, 2]
    assert bench.check_rows(33) == sorted(set(bench.check_rows(33)))


def test_the_grid_has_odd_and_vocabulary_lengths_and_few_to_many_rows():
    shapes = bench.grid_shapes()
    cols = {c for _, c, _ in shapes}
    assert {32000, 128256, 151936, 100003, 1024, 4194304} <= cols
    assert len(shapes) == len({(r, c) for r, c, _ in shapes})
    for c in bench.GRID_COLS:
        rows = sorted(r for r, cc, _ in shapes if cc == c)
        assert rows[0] == 32 and 132 in rows
    many = {c: r for r, c, g in shapes if g == "2 GiB"}
    assert many[32000] == 16384 and many[128256] == 4096 and many[151936] == 4096 and many[1024] == 2**19
    for r, c in bench.GRID_EXTRA + ((132, 393216),):
        assert (r, c) in {(r2, c2) for r2, c2, _ in shapes}
    for r, c, _ in shapes:
        assert 2**30 <= r * c * 4 <= 4 * 2**30 or r in (32, 132) or (r, c) in bench.GRID_EXTRA


def test_load_or_run_without_measuring_reads_the_recorded_results(tmp_path):
    doc, note = bench.load_or_run("bench", tmp_path)
    assert doc is None and "No recorded bench results" in note
    synthetic.write(tmp_path)
    doc, note = bench.load_or_run("sweep", tmp_path)
    assert doc["kind"] == "sweep" and "Recorded on Synthetic H200" in note
    with pytest.raises(ValueError):
        bench.load_or_run("nope", tmp_path)

def test_special_rows_follow_torch_rules():
    with np.errstate(invalid="ignore"):  # inf - inf, on purpose
        ref = softmax_reference(bench.special_rows(7))
    assert np.all(ref[0, ::2] == 0) and np.isclose(ref[0].sum(), 1)
    assert np.isnan(ref[1:4]).all()
    assert np.isclose(ref[4].sum(), 1)


def test_recorded_checks_name_every_candidate():
    run = synthetic.run(64, 4099)
    checks = bench.recorded_checks(run)
    assert checks["two_pass"] == 2e-7 and checks["torch.softmax"].startswith("skipped: ")


@pytest.mark.gpu
def test_tiny_bench_on_the_gpu(tmp_path):
    doc = bench.run_bench(64, 4099, repeats=3, warmup=1, host_calls=50, progress=False)
    assert records.load(records.save(doc, tmp_path / "b.json")) == doc
    (run,) = doc["runs"]
    assert run["copy"] is not None
    by_name = {r["name"]: r for r in run["candidates"]}
    for name in [*softmax_lab.variants(), "auto", "host.auto"]:
        assert by_name[name]["status"] in ("ok", "skipped"), by_name[name]["reason"]
    assert by_name["host.auto"]["host"]["median_us"] > 0
    for r in run["candidates"]:
        if r["status"] == "ok" and r["kind"] != "host":
            assert r["check"]["relative_error"] <= bench.TOLERANCE and len(r["check"]["calls"]) == 2
            assert r["stats"]["repeats"] == 3 and r["useful_gbps"] > 0
    assert records.failures(doc) == []
    synthetic.validate(doc)


@pytest.mark.gpu
def test_tiny_sweep_on_the_gpu(tmp_path):
    doc = bench.run_sweep([(256, 1024), (63, 4099, "odd")], names=["auto", "two_pass", "multi_block"], repeats=3,
                          progress=False)
    assert [run["shape"] for run in doc["runs"]] == [[256, 1024], [63, 4099]]
    for run in doc["runs"]:
        assert {r["status"] for r in run["candidates"]} == {"ok"}
    assert records.load(records.save(doc, tmp_path / "s.json")) == doc
    synthetic.validate(doc)


@pytest.mark.gpu
def test_variant_checks_on_the_gpu():
    checks = bench.check_variants(bench.special_rows(4099))
    for name, err in checks.items():
        assert isinstance(err, str) or err <= bench.TOLERANCE, name


# ------------------------------------------------------------ the whole run, on NumPy
class _FakeEvent:
    def record(self, stream=None):
        import time

        self.t = time.perf_counter()


class _FakeCupy(types.ModuleType):
    """CuPy's names that bench uses, over NumPy: the run's logic without a GPU."""

    ndarray = np.ndarray
    __version__ = "fake"

    def __init__(self):
        super().__init__("cupy")
        self.cuda = SimpleNamespace(
            Stream=lambda non_blocking=False: FakeStream(), Event=_FakeEvent,
            get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3 + 1e-3,
            runtime=SimpleNamespace(memGetInfo=lambda: (80 * 2**30, 80 * 2**30), runtimeGetVersion=lambda: 12090,
                                    driverGetVersion=lambda: 13000, CUDARuntimeError=RuntimeError))
        self.random = SimpleNamespace(default_rng=np.random.default_rng)

    def get_default_memory_pool(self):
        return SimpleNamespace(free_all_blocks=lambda: None)

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture
def numpy_gpu(monkeypatch):
    """bench on NumPy arrays: a fake cupy, the reference H200, torch reported absent (so
    that a machine with a GPU and torch runs these tests as one without), fake candidates
    (every softmax a NumPy softmax, `broken` wrong after its third call)."""
    monkeypatch.setitem(sys.modules, "cupy", _FakeCupy())
    monkeypatch.setattr(cat, "torch_status", lambda: (None, "torch sees no CUDA device (the fake GPU)"))
    monkeypatch.setattr(bench, "require_device", lambda: 0)
    monkeypatch.setattr(bench, "device_info", lambda *a: cat.reference_device())
    broken = set()

    def prepare(c, arrays, dev, torch=None):
        x, dy, y = arrays.x, arrays.dy, arrays.out
        calls = [0]

        def call():
            calls[0] += 1
            if c.kind == "copy":
                y[...] = x if dy is None else x + dy
            else:
                y[...] = bench.op_reference(x, arrays.op, dy)
                if c.name in broken and calls[0] > 3:
                    y[-1] = 0
            return y

        return cat.Prepared(call, lambda: y.fill(np.nan), "the out buffer")

    monkeypatch.setattr(cat, "prepare", prepare)
    monkeypatch.setattr(cat, "prepare_host", lambda c, dev, torch=None: (lambda: None))
    return broken


def test_a_whole_bench_run_without_a_gpu(numpy_gpu):
    doc = bench.run_bench(64, 4099, repeats=3, warmup=1, host_calls=20, progress=False, command="test")
    synthetic.validate(doc)
    (run,) = doc["runs"]
    by_name = {r["name"]: r for r in run["candidates"]}
    assert run["shape"] == [64, 4099] and run["copy"]["name"] in cat.COPY_NAMES
    for name in [*softmax_lab.variants(), "auto", *cat.COPY_NAMES, "cupyx.softmax", "host.auto", "host.copy"]:
        assert by_name[name]["status"] == "ok", by_name[name]
    assert by_name["auto"]["traffic"]["model"].startswith("variant='auto' picks")
    assert by_name["host.auto"]["host"]["repeats"] == 20
    assert by_name["torch.softmax"]["status"] == "skipped"  # the fake GPU has no torch
    assert doc["versions"]["runtime"] == "12.9" and doc["method"]["host_calls"] == 20
    assert records.failures(doc) == []


def test_a_sweep_records_a_candidate_broken_under_repetition_as_failed(numpy_gpu):
    numpy_gpu.add("two_pass")
    doc = bench.run_sweep([(64, 1024), (33, 100003, "odd")], names=["auto", "two_pass", "quack.softmax"],
                          repeats=4, warmup=1, progress=False, command="test")
    synthetic.validate(doc)
    assert [run["group"] for run in doc["runs"]] == ["fewer rows than SMs", "odd"]  # a shape without a group: by its rows against the SMs
    for run in doc["runs"]:
        by_name = {r["name"]: r for r in run["candidates"]}
        assert by_name["auto"]["status"] == "ok"
        assert by_name["two_pass"]["status"] == "failed" and "the last of 4 timed calls" in by_name["two_pass"]["reason"]
        assert by_name["quack.softmax"]["status"] == "skipped"
    assert doc["runs"][1]["candidates"][-1]["reason"]  # torch missing (here), quack missing, or N % 4
    assert len(records.failures(doc)) == 2


def test_the_headline_keeps_its_size_and_the_grid_fits_memory(numpy_gpu):
    assert bench._fit_rows(2**20, 4194304) * 4194304 * 4 <= bench.GRID_MAX_BYTES
    assert bench._fit_rows(32, 1024) == 32
    # a shape asked for is fitted to the free memory only (80 GiB here): the headline as asked, past GRID_MAX_BYTES
    assert bench._fit_rows(4096, 393216, grid=False) == 4096
    assert bench._fit_rows(4096, 393216) == 2048
    assert bench._fit_rows(2**20, 4194304, grid=False) * 4194304 * 4 <= 80 * 2**30 // 8


def test_a_sweep_hands_each_shape_to_its_checkpoint(numpy_gpu):
    seen = []
    doc = bench.run_sweep([(16, 1024), (8, 2048)], names=["auto"], repeats=2, warmup=0, progress=False,
                          checkpoint=lambda d: seen.append([run["shape"] for run in d["runs"]]))
    assert seen == [[[16, 1024]], [[16, 1024], [8, 2048]]]
    assert [run["shape"] for run in doc["runs"]] == seen[-1]


# ------------------------------------------------------------ dtypes and ops, on NumPy
def test_backward_reference_and_its_row_invariant():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((40, 301))
    dy = rng.standard_normal((40, 301))
    for op, forward in (("softmax_backward", softmax_reference), ("log_softmax_backward", None)):
        y = forward(z) if forward else z - np.log(np.exp(z).sum(-1, keepdims=True))
        dx = bench.op_reference(y, op, dy)
        if op == "softmax_backward":  # the chain rule through softmax, by finite differences on one row
            eps = 1e-6
            num = np.array([(np.dot(dy[0], softmax_reference(z[0] + eps * np.eye(301)[j]))
                             - np.dot(dy[0], y[0])) / eps for j in range(5)])
            assert np.allclose(num, dx[0, :5], rtol=1e-4, atol=1e-9)
        assert np.allclose(dx.sum(-1), 0, atol=1e-12)
        out = dx.astype(np.float32)
        assert bench.row_invariant_error(out, y.astype(np.float32), op, dy.astype(np.float32)) < 1e-4
        out[7, 3] += 1.0  # one wrong element, in a row no sample may take
        assert bench.row_invariant_error(out, y.astype(np.float32), op, dy.astype(np.float32)) > 1e-3
        out[9] = np.nan
        assert bench.row_invariant_error(out, y.astype(np.float32), op, dy.astype(np.float32)) == math.inf


def test_halves_are_checked_in_ulp_and_log_softmax_by_the_sum_of_its_exp():
    x = np.random.default_rng(4).standard_normal((50, 2000)).astype(np.float32)
    idx = bench.check_rows(50)
    for op in ("softmax", "log_softmax"):
        ref64 = bench.op_reference(x.astype(np.float64), op)
        good = bench.check_output(ref64.astype(np.float16), x, idx, ref64[idx], False, "float16", op)
        assert good["passed"] and good["ulp_error"] <= 0.5 and good["relative_error"] < 1e-3
        bad = ref64.astype(np.float16)
        bad[idx[3]] *= np.float16(1.01)  # about 10 ulp of float16: caught in the sampled rows
        got = bench.check_output(bad, x, idx, ref64[idx], False, "float16", op)
        assert not got["passed"] and got["ulp_error"] > bench.ULP_TOLERANCE
    fp32 = bench.check_output(ref64.astype(np.float32), x, idx, ref64[idx], False, "float32", "log_softmax")
    assert fp32["passed"] and "ulp_error" not in fp32


def _bfloat16(a) -> np.ndarray:
    """a rounded to bfloat16 (to nearest, ties to even), held as float32."""
    return widen(to_bits(a, "bfloat16"), "bfloat16")


def test_the_halves_backward_is_checked_beyond_float32_s_part_of_its_error():
    """dx = y (dy - sum) cancels where dy is near the row's sum: float32's error of the sum, a
    few 2^-24 of the size of the terms, is then many ulp of the small dx, for any
    implementation (the decode record of 2026-12-07, bf16 64 x 128256 softmax backward:
    12 ulp for softmax-lab, 35 for quack).  Rows here cancel exactly at dx_0 = 0: float32's
    part passes, an error of 2^-8 of the terms' size fails."""
    rng = np.random.default_rng(5)
    b, c = rng.integers(-96, 96, (2, 40)) / 64
    y = np.tile(np.float32([0.5, 0.25, 0.25]), (40, 1))
    dy = np.stack([(b + c) / 2, b, c], axis=1).astype(np.float32)  # dy_0 = the sum: bfloat16 values
    assert np.array_equal(_bfloat16(dy), dy)
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    ref = y64 * (dy64 - (y64 * dy64).sum(-1, keepdims=True))
    assert not ref[:, 0].any()
    idx = bench.check_rows(40)
    scale = backward_scale(dy64, y64, "softmax_backward")
    good = _bfloat16(ref + 2 * 2.0**-24 * scale)  # what float32's sum may leave
    strict = bench.op_error(good[idx], ref[idx], "bfloat16", "softmax_backward")
    assert strict > bench.ULP_TOLERANCE  # as the check measured before
    got = bench.check_output(good, y, idx, ref[idx], False, "bfloat16", "softmax_backward", dy)
    assert got["passed"] and got["ulp_error"] <= 0.5, got
    bad = _bfloat16(ref + 2.0**-8 * scale)
    got = bench.check_output(bad, y, idx, ref[idx], False, "bfloat16", "softmax_backward", dy)
    assert not got["passed"] and got["ulp_error"] > bench.ULP_TOLERANCE


def test_a_backward_and_a_log_softmax_run_without_a_gpu(numpy_gpu):
    doc = bench.run_bench(32, 1000, repeats=3, warmup=1, host_calls=20, progress=False, command="test",
                          ops=("softmax", "log_softmax", "softmax_backward"))
    synthetic.validate(doc)
    assert [(run["dtype"], run["op"]) for run in doc["runs"]] == [
        ("float32", "softmax"), ("float32", "log_softmax"), ("float32", "softmax_backward")]
    soft, log, back = ({r["name"]: r for r in run["candidates"]} for run in doc["runs"])
    assert "host.auto" in soft and "host.auto" not in log and "cupyx.softmax" not in log
    assert log["two_pass"]["status"] == "ok" and log["torch.log_softmax"]["status"] == "skipped"
    assert doc["runs"][2]["copy"]["name"] == "floor.cupy_add"
    assert back["floor.cupy_add"]["traffic"]["bytes"] == 3 * 32 * 1000 * 4
    assert back["floor.cupy_add"]["useful_gbps"] == pytest.approx(
        3 * 32 * 1000 * 4 / (back["floor.cupy_add"]["stats"]["median_ms"] * 1e-3) / 1e9)
    assert back["auto"]["status"] == ("ok" if cat.has_op("softmax_backward") else "skipped")
    assert records.failures(doc) == []


def test_halves_without_torch_are_skipped_with_the_reason(numpy_gpu, monkeypatch):
    monkeypatch.setattr(cat, "torch_status", lambda: (None, "torch is not importable (test)"))
    doc = bench.run_sweep([(16, 1024)], repeats=2, warmup=0, progress=False, dtypes=("bfloat16",),
                          ops=("softmax", "softmax_backward"))
    synthetic.validate(doc)
    for run in doc["runs"]:
        assert run["dtype"] == "bfloat16" and run["data_bytes"] == 16 * 1024 * 2 and run["copy"] is None
        assert {r["status"] for r in run["candidates"]} == {"skipped"}
        assert all("made with torch" in r["reason"] for r in run["candidates"])
    assert [r["name"] for r in doc["runs"][1]["candidates"]][-2:] == ["torch.softmax_backward",
                                                                      "quack.softmax_backward"]


@pytest.mark.gpu
def test_tiny_bench_of_every_dtype_and_op_on_the_gpu(tmp_path):
    pytest.importorskip("torch")
    doc = bench.run_bench(64, 4104, repeats=3, warmup=1, host_calls=0, progress=False,
                          dtypes=("float32", "float16", "bfloat16"), ops=ALL_OPS)
    synthetic.validate(doc)
    assert len(doc["runs"]) == 12
    for run in doc["runs"]:
        by_name = {r["name"]: r for r in run["candidates"]}
        assert run["copy"] is not None, run["op"]
        ours = [r for r in run["candidates"] if r["kind"] != "library"]
        for r in ours:  # a peer may fail its check (torch's bf16 softmax backward does on some draws)
            assert r["status"] in ("ok", "skipped"), (run["dtype"], run["op"], r["name"], r["reason"])
        if cat.has_op(run["op"]):
            assert by_name["auto"]["status"] == "ok", (run["dtype"], run["op"], by_name["auto"]["reason"])
        if run["dtype"] != "float32":
            assert all(r["check"]["ulp_error"] <= bench.ULP_TOLERANCE for r in ours if r["stats"])
    peers = {r["name"] for run in doc["runs"] for r in run["candidates"] if r["kind"] == "library"}
    assert all(line.split(": ")[0].split()[-1] in peers for line in records.failures(doc)), records.failures(doc)


def test_the_backward_reference_is_the_formula():
    """dx of softmax: y * (dy - sum(dy * y)); of log_softmax: dy - exp(y) * sum(dy), in float64."""
    rng = np.random.default_rng(3)
    y = rng.random((2, 5)).astype(np.float32)
    dy = rng.standard_normal((2, 5)).astype(np.float32)
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    got = bench.op_reference(y, "softmax_backward", dy)
    assert got.dtype == np.float64
    assert np.allclose(got, y64 * (dy64 - (dy64 * y64).sum(-1, keepdims=True)), rtol=1e-15, atol=0)
    got = bench.op_reference(y, "log_softmax_backward", dy)
    assert np.allclose(got, dy64 - np.exp(y64) * dy64.sum(-1, keepdims=True), rtol=1e-15, atol=0)


CLOCKS = {"samples": 12, "sm_mhz": {"min": 1755.0, "median": 1980.0, "max": 1980.0},
          "mem_mhz": {"min": 3201.0, "median": 3201.0, "max": 3201.0},
          "power_w": {"min": 300.0, "median": 420.0, "max": 520.0}, "temperature_c": None,
          "reasons": {"sw_power_cap": 0.25}}


def test_a_record_with_clocks_follows_the_schema_and_the_report_shows_them():
    from softmax_lab.lab import report

    doc = synthetic.document("bench")
    for r in doc["runs"][0]["candidates"]:
        if r["stats"]:
            r["clocks"] = dict(CLOCKS)
    doc["method"]["clocks"] = "NVML every 5 ms while a candidate's timed calls ran"
    synthetic.validate(doc)
    text = report.format_run(doc["runs"][0])
    assert "clocks while the timed calls ran (NVML):" in text
    assert "  auto                     SM 1755..1980 MHz (median 1980), memory 3201 MHz, 300..520 W; clock held " \
           "down by: sw_power_cap 25%" in text
    assert "clocks while" not in report.format_run(synthetic.document("bench")["runs"][0])  # none recorded


def test_a_run_timed_in_loops_says_so_in_its_method(numpy_gpu):
    doc = bench.run_sweep([(8, 1024)], names=["auto"], repeats=3, warmup=1, progress=False, command="test", loop=4)
    synthetic.validate(doc)
    assert doc["method"]["loop_calls"] == 4 and "loop of 4 back-to-back calls" in doc["method"]["timer"]
    assert all(r["status"] == "ok" and r["stats"]["repeats"] == 3 for r in doc["runs"][0]["candidates"])
    plain = bench.run_sweep([(8, 1024)], names=["auto"], repeats=3, warmup=1, progress=False, command="test")
    assert plain["method"]["loop_calls"] is None and "CUDA events" in plain["method"]["timer"]
    assert "loops of 4" in report.format_document(doc) and "loops of" not in report.format_document(plain)


def test_clocks_is_asked_for_by_the_command_line(monkeypatch):
    from softmax_lab.lab import cli

    asked = {}
    monkeypatch.setattr(bench, "gpu_reason", lambda: None)
    for command, function in (("bench", "run_bench"), ("sweep", "run_sweep")):
        monkeypatch.setattr(bench, function, lambda *a, _f=function, **kw: asked.update({_f: kw["clocks"]})
                            or synthetic.document("bench"))
        for flag in ([], ["--clocks"]):
            assert cli.main([command, *flag, "--json"]) == cli.EXIT_OK
            assert asked[function] is bool(flag)
    monkeypatch.setattr(bench, "run_sweep", lambda *a, **kw: asked.update(loop=kw["loop"]) or synthetic.document("bench"))
    for flag, loop in (([], 0), (["--loop", "300"], 300)):
        assert cli.main(["sweep", *flag, "--json"]) == cli.EXIT_OK and asked["loop"] == loop


@pytest.mark.gpu
def test_the_bench_records_clocks_while_each_candidate_is_timed():
    doc = bench.run_bench(256, 4099, names=["auto"], repeats=20, warmup=1, host_calls=0, progress=False,
                          command="test", clocks=True)
    synthetic.validate(doc)
    timed = [r for r in doc["runs"][0]["candidates"] if r["stats"]]
    assert timed and all("clocks" in r for r in timed)
    if "NVML every" in doc["method"]["clocks"]:  # a call this small may end between two samples
        assert all(r["clocks"]["samples"] == 0 or r["clocks"]["sm_mhz"]["min"] > 0 for r in timed)
    else:
        assert all(r["clocks"] is None for r in timed)
