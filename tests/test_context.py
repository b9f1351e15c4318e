"""softmax-lab context: the interleaved rounds, their statistics, the clocks, the
document and what reads it, on made-up times (no GPU), and one small run on a GPU."""

import numpy as np
import pytest
import synthetic

from softmax_lab.lab import cli, plots, records
from softmax_lab.lab import context as ctx


class FakeTimer:
    """A GPU whose GEMM time wanders from step to step (the power cap), by far more than
    a candidate costs; each candidate adds its own fixed time after a GEMM."""

    def __init__(self, cost: dict, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.cost, self.log = cost, []
        self.clock = 6.0  # ms of a GEMM now: drifts by a random walk of 0.05 ms a step

    def gemm(self):
        self.clock = min(7.0, max(5.0, self.clock + self.rng.normal(0, 0.05)))
        self.log.append(("gemm", self.clock))

    def candidate(self, name):
        return lambda: self.log.append((name, self.cost[name]))

    def start(self, fn):
        begin = len(self.log)
        fn()
        return begin, len(self.log)

    def finish(self, handles):
        return [sum(t for _, t in self.log[a:b]) for a, b in handles]


COST = {"auto": 0.50, "copy.memcpy": 0.48, "torch.softmax": 1.10}


def fake_times(rounds=40, seed=0):
    t = FakeTimer(COST, seed)
    return t, ctx.interleave(t.gemm, {n: t.candidate(n) for n in COST}, rounds, t)


def test_each_round_times_the_gemm_beside_each_step_in_alternating_order():
    t = FakeTimer(COST)
    order = []
    rounds = ctx.interleave(t.gemm, {n: t.candidate(n) for n in COST}, 4, t, on_round=order.append)
    assert order == [0, 1, 2, 3]
    assert all(len(rounds[k][n]) == 4 for k in rounds for n in COST)
    names = [e[0] for e in t.log]
    # round 0: auto first, GEMM then step; round 1: copy.memcpy first, step then GEMM
    assert names[:4] == ["gemm", "gemm", "auto", "auto"]
    per_round = 4 * len(COST)  # per candidate: the GEMM, the step (GEMM, candidate), the candidate alone
    assert names[per_round:per_round + 4] == ["gemm", "copy.memcpy", "gemm", "copy.memcpy"]
    assert rounds["alone"]["torch.softmax"] == [COST["torch.softmax"]] * 4


def test_the_difference_finds_each_candidates_cost_where_the_gemm_wanders_by_more():
    _, times = fake_times()
    for name, cost in COST.items():
        d = ctx.difference(times["step"][name], times["gemm"][name])
        gemm = np.asarray(times["gemm"][name])
        assert gemm.max() - gemm.min() > 4 * cost / 10  # the GEMM's own wander is of the cost's order
        assert d["median_ms"] == pytest.approx(cost, abs=0.1)
        assert d["q25_ms"] <= d["median_ms"] <= d["q75_ms"] and d["min_ms"] <= d["q25_ms"] and d["rounds"] == 40
    with pytest.raises(ValueError):
        ctx.difference([], [])


def document(rounds=40) -> dict:
    """A context document as run_context writes it, from the fake GPU's times."""
    _, times = fake_times(rounds)
    cands = [{"name": n, "kind": "variant" if n == "auto" else ("copy" if n.startswith("copy") else "library"),
              "model": "made up", "status": "ok", "reason": None,
              "check": {"relative_error": 1e-7, "row_sum_error": 1e-7, "ulp_error": 0.5, "passed": True},
              "times_ms": {k: times[k][n] for k in times}} for n in COST]
    cands.append({"name": "quack.softmax", "kind": "library", "model": "made up", "status": "skipped",
                  "reason": "quack-kernels is not installed", "check": None, "times_ms": None})
    doc = records.make_document("context", [], dict(synthetic.DEVICE), dict(synthetic.VERSIONS),
                                {"gemm": {"m": 4096, "k": 4096, "n": 128256, "dtype": "bfloat16",
                                          "flop": 2 * 4096 * 4096 * 128256},
                                 "rounds": rounds, "clocks": "NVML, every 5 ms while the rounds run"},
                                command="softmax-lab context (synthetic)")
    del doc["runs"]
    return {**doc, "schema": ctx.SCHEMA, "gemm_block_ms": [5.5, 5.6, 5.4], "candidates": cands,
            "clocks": {"samples": 10, "sm_mhz": {"min": 1530.0, "median": 1700.0, "max": 1815.0}, "mem_mhz": None,
                       "power_w": {"min": 410.0, "median": 500.0, "max": 520.0}, "temperature_c": None,
                       "reasons": {"sw_power_cap": 0.9}}}


def test_the_document_follows_its_schema_and_the_table_says_each_figure():
    doc = document()
    synthetic.validate(doc, "context_schema.json")
    text = ctx.format_context(doc)
    assert "4096 x 4096 @ 4096 x 128256 bfloat16" in text and "40 rounds" in text
    assert "quack.softmax   skipped: quack-kernels is not installed" in text
    assert "sw_power_cap 90%" in text and "SM 1530..1815 MHz" in text
    rows = {r["name"]: r for r in ctx.summarize(doc)}
    assert rows["auto"]["difference"]["median_ms"] == pytest.approx(0.5, abs=0.1)
    assert rows["auto"]["alone_ms"] == 0.5
    # the naive figure subtracts the block's GEMMs (5.5 ms) from steps whose GEMMs ran near 6 ms
    assert abs(rows["auto"]["naive_ms"] - 0.5) > 0.2
    assert ctx.failures(doc) == []
    doc["candidates"][0].update(status="failed", reason="check failed", times_ms=None)
    assert ctx.failures(doc) == ["auto: check failed"]


def test_report_and_plot_take_a_context_file(tmp_path, capsys):
    path = records.save(document(), tmp_path / "context.json")
    assert ctx.load(path)["kind"] == "context"
    assert cli.main(["report", str(path)]) == cli.EXIT_OK
    assert "in context ms" in capsys.readouterr().out
    assert cli.main(["report", "--table", str(path)]) == cli.EXIT_OK
    assert "context: times in context, no table by dtype and op" in capsys.readouterr().out
    assert cli.main(["plot", str(path), "-o", str(tmp_path / "figs")]) == cli.EXIT_OK
    assert capsys.readouterr().out.split() == [str(tmp_path / "figs" / "context.png")]
    assert plots.file_suffix("context_h100", "context") == "_h100"


def test_arguments_are_checked_before_any_device(monkeypatch, capsys):
    monkeypatch.setattr(ctx, "run_context", lambda *a, **kw: pytest.fail("ran"))
    for bad in (["--gemm", "4096x0x5"], ["--gemm", "4096x5"], ["--rounds", "3"], ["--dtype", "int8"],
                ["--variants", "nope"]):
        with pytest.raises(SystemExit) as e:
            cli.main(["context", *bad])
        assert e.value.code == cli.EXIT_USAGE
    capsys.readouterr()
    with pytest.raises(ValueError):
        ctx.check_gemm(1, 0, 1, "bfloat16")
    with pytest.raises(ValueError):
        ctx.check_gemm(1, 1, 1, "int8")


def test_no_gpu_is_exit_status_3(monkeypatch, capsys):
    monkeypatch.setattr(cli.bench, "gpu_reason", lambda: "no GPU, said plainly")
    assert cli.main(["context"]) == cli.EXIT_NO_DEVICE
    assert capsys.readouterr().err.startswith("softmax-lab context: no GPU, said plainly.")


def test_a_failed_check_makes_the_exit_status_non_zero(monkeypatch, capsys):
    doc = document()
    doc["candidates"][0].update(status="failed", reason="check failed on a GEMM's logits", times_ms=None)
    monkeypatch.setattr(cli.bench, "gpu_reason", lambda: None)
    monkeypatch.setattr(ctx, "run_context", lambda *a, **kw: doc)
    assert cli.main(["context"]) == cli.EXIT_CHECK_FAILED
    assert "FAILED auto: check failed" in capsys.readouterr().err


@pytest.mark.gpu
def test_a_small_context_run_on_the_gpu(tmp_path):
    pytest.importorskip("torch")
    doc = ctx.run_context(512, 256, 4099, dtype="bfloat16", names=["auto", "torch.softmax"], rounds=4, warmup=1)
    synthetic.validate(doc, "context_schema.json")
    by_name = {r["name"]: r for r in doc["candidates"]}
    for name in ("auto", "torch.softmax", "copy.memcpy"):
        r = by_name[name]
        assert r["status"] == "ok" and r["check"]["passed"], r
        assert all(len(r["times_ms"][k]) == 4 and min(r["times_ms"][k]) > 0 for k in ("gemm", "step", "alone"))
    assert by_name["copy.float4"]["status"] == "skipped"  # 4099 bf16 is not a whole number of 4-byte words
    assert ctx.failures(doc) == []
    ctx.format_context(doc)
    plots.context(doc, tmp_path / "context.png")


def test_no_candidate_to_run_gives_no_rounds():
    t = FakeTimer(COST)
    assert ctx.interleave(t.gemm, {}, 5, t) == {"gemm": {}, "step": {}, "alone": {}} and t.log == []
