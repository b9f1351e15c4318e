"""softmax_lab.bench: the candidates and their traffic, the records and their
statistics, the JSON schema, GPU-or-recorded; the GPU runs are marked gpu."""

import json

import numpy as np
import pytest
import synthetic

import softmax_lab
from softmax_lab import bench
from softmax_lab.reference import softmax_reference


def test_candidates_use_the_registry_names_then_copies_and_libraries():
    names = [c.name for c in bench.candidates()]
    assert names[: len(softmax_lab.variants())] == list(softmax_lab.variants())
    assert len(set(names)) == len(names)
    assert set(bench.COPY_NAMES) == {"copy.memcpy", "copy.elementwise", "copy.float4"}


def test_headline_traffic_spans_12_9_to_25_8_gb():
    by_name = {c.name: c.traffic_bytes(*bench.HEADLINE) / 1e9 for c in bench.candidates()}
    assert round(by_name["single_read"], 1) == 12.9
    assert round(by_name["two_pass"], 1) == round(by_name["multi_block"], 1) == 19.3
    assert round(by_name["three_pass"], 1) == 25.8
    assert by_name["copy.float4"] == by_name["single_read"]
    for c, v in zip(bench.candidates(), softmax_lab.variants().values()):
        assert c.traffic_bytes(7, 9) == v.traffic_bytes(7, 9)


def test_select_keeps_the_copies_and_rejects_unknown_names():
    chosen = [c.name for c in bench.select(["two_pass"])]
    assert chosen == ["two_pass", *bench.COPY_NAMES]
    with pytest.raises(ValueError, match="unknown candidate"):
        bench.select(["two_pass", "nope"])


def test_check_rows_include_first_and_last():
    rows = bench.check_rows(4096)
    assert len(rows) == bench.CHECK_ROWS == len(set(rows))
    assert rows[0] == 0 and rows[-1] == 4095 and rows == sorted(rows)
    assert bench.check_rows(3) == [0, 1, 2]


def test_record_statistics_and_the_copy_ceiling():
    rows, cols = 1000, 1000
    cands = {c.name: c for c in bench.candidates()}
    recs = [
        bench.record(cands["two_pass"], rows, cols, times_ms=[3.0, 1.0, 2.0]),
        bench.record(cands["copy.memcpy"], rows, cols, times_ms=[1.0, 1.0, 1.0]),
        bench.record(cands["copy.float4"], rows, cols, times_ms=[0.5, 0.5, 0.5]),
        bench.record(cands["torch.softmax"], rows, cols, status="skipped", reason="no torch"),
    ]
    run = bench.make_run(rows, cols, recs, l2_bytes=10**6)
    two = recs[0]
    assert two["stats"]["median_ms"] == 2.0 and two["stats"]["min_ms"] == 1.0 and two["stats"]["max_ms"] == 3.0
    assert two["stats"]["spread"] == 1.0
    assert two["gbps"] == pytest.approx(12e6 / 2e-3 / 1e9)
    assert run["copy"] == {"name": "copy.float4", "median_ms": 0.5, "gbps": pytest.approx(8e6 / 0.5e-3 / 1e9)}
    assert two["vs_copy_time"] == 4.0
    assert two["copy_bandwidth_fraction"] == pytest.approx(two["gbps"] / run["copy"]["gbps"])
    assert recs[3]["stats"] is None and recs[3]["gbps"] is None
    assert run["l2_multiple"] == 4.0


def test_synthetic_documents_satisfy_the_schema_and_round_trip(tmp_path):
    for path in synthetic.write(tmp_path):
        doc = bench.load(path)
        assert doc == json.loads(path.read_text())
        synthetic.validate(doc)
    assert len(bench.load(tmp_path / "sweep.json")["runs"]) == len(bench.SWEEP_COLS)


def test_schema_rejects_a_document_missing_its_statistics():
    jsonschema = pytest.importorskip("jsonschema")
    doc = synthetic.document("bench")
    del doc["runs"][0]["candidates"][0]["stats"]
    with pytest.raises(jsonschema.ValidationError):
        synthetic.validate(doc)
    doc = synthetic.document("bench")
    doc["device"].pop("l2_bytes")
    with pytest.raises(jsonschema.ValidationError):
        synthetic.validate(doc)


def test_load_rejects_other_json(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a softmax-lab results file"):
        bench.load(path)


def test_load_or_run_falls_back_to_the_recorded_results(tmp_path, monkeypatch):
    monkeypatch.setenv("SOFTMAX_LAB_RECORDED", "1")
    monkeypatch.setenv("SOFTMAX_LAB_RESULTS", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="softmax-lab bench --output"):
        bench.load_or_run("bench")
    synthetic.write(tmp_path)
    doc, note = bench.load_or_run("sweep")
    assert doc["kind"] == "sweep" and "recorded on Synthetic H200" in note
    checks, note = bench.variant_checks(np.zeros((2, 3), np.float32))
    assert set(softmax_lab.variants()) <= set(checks) and "x was not run" in note


def test_tables_name_every_candidate():
    bench_doc, sweep_doc = synthetic.document("bench"), synthetic.document("sweep")
    texts = (bench.format_document(bench_doc), bench.format_document(sweep_doc), bench.format_traffic(64, 4099, 1.0))
    for text in texts:
        for c in bench.candidates():
            assert c.name in text
    assert "skipped: torch is not importable" in bench.format_run(bench_doc["runs"][0])


def test_special_rows_follow_torch_rules():
    with np.errstate(invalid="ignore"):  # inf - inf, on purpose
        ref = softmax_reference(bench.special_rows(7))
    assert np.all(ref[0, ::2] == 0) and np.isclose(ref[0].sum(), 1)
    assert np.isnan(ref[1:4]).all()
    assert np.isclose(ref[4].sum(), 1)


@pytest.mark.gpu
def test_tiny_bench_on_the_gpu(tmp_path):
    doc = bench.run_bench(64, 4099, repeats=3, warmup=1, progress=False)
    assert bench.load(bench.save(doc, tmp_path / "b.json")) == doc
    (run,) = doc["runs"]
    assert run["copy"] is not None
    by_name = {r["name"]: r for r in run["candidates"]}
    for name in softmax_lab.variants():
        assert by_name[name]["status"] in ("ok", "skipped"), by_name[name]["reason"]
    for r in run["candidates"]:
        if r["status"] == "ok":
            assert r["check"]["relative_error"] <= bench.TOLERANCE
            assert r["stats"]["repeats"] == 3 and r["gbps"] > 0
    synthetic.validate(doc)


@pytest.mark.gpu
def test_tiny_sweep_on_the_gpu(tmp_path):
    doc = bench.run_sweep([1024, 4099], elements=2**18, names=["two_pass", "multi_block"], repeats=3, progress=False)
    assert [run["shape"] for run in doc["runs"]] == [[256, 1024], [63, 4099]]
    for run in doc["runs"]:
        assert {r["status"] for r in run["candidates"]} == {"ok"}
    assert bench.load(bench.save(doc, tmp_path / "s.json")) == doc
    synthetic.validate(doc)


@pytest.mark.gpu
def test_variant_checks_on_the_gpu():
    checks = bench.check_variants(bench.special_rows(4099))
    for name, err in checks.items():
        assert isinstance(err, str) or err <= bench.TOLERANCE, name


def test_auto_candidate_takes_the_traffic_of_the_variant_it_picks():
    from softmax_lab.device import DeviceInfo

    h200 = DeviceInfo(0, "NVIDIA H200", 90, 132, 60 * 2**20, 232448, 233472)
    assert bench.AUTO in bench.candidates()
    c = bench.auto_candidate(*bench.HEADLINE, h200)
    assert (c.name, c.kind, c.reads, c.writes) == ("auto", "variant", 1, 1) and "single_read" in c.model
    long_rows = bench.auto_candidate(256, 1 << 22, h200)
    assert (long_rows.reads, long_rows.writes) == (2, 1) and "multi_block" in long_rows.model
