"""softmax_lab.lab.records: records and the copy ceiling, the schema, atomic saving,
the upgrade of recorded schema-1 files, recorded or live."""

import json
import os

import pytest
import synthetic

from softmax_lab.lab import records
from softmax_lab.lab import candidates as cat

RESULTS = os.path.join(os.path.dirname(__file__), "..", "results")


def test_record_statistics_and_the_copy_ceiling():
    rows, cols = 1000, 1000
    by_name = {c.name: c for c in cat.candidates()}
    recs = [
        records.record(by_name["two_pass"], rows, cols, times_ms=[3.0, 1.0, 2.0]),
        records.record(by_name["copy.memcpy"], rows, cols, times_ms=[1.0, 1.0, 1.0]),
        records.record(by_name["copy.float4"], rows, cols, times_ms=[0.5, 0.5, 0.5]),
        records.record(by_name["torch.softmax"], rows, cols, status="skipped", reason="no torch"),
        records.record(by_name["host.auto"], 8, 1024, host_us=[10.0, 12.0, 11.0]),
    ]
    run = records.make_run(rows, cols, recs, l2_bytes=10**6)
    two = recs[0]
    assert two["stats"]["median_ms"] == 2.0 and two["stats"]["spread"] == 1.0
    assert two["useful_gbps"] == pytest.approx(8e6 / 2e-3 / 1e9)  # one read + one write, not the model's three
    assert run["copy"] == {"name": "copy.float4", "median_ms": 0.5, "useful_gbps": pytest.approx(8e6 / 0.5e-3 / 1e9)}
    assert two["vs_copy_time"] == 4.0
    assert recs[3]["stats"] is None and recs[3]["vs_copy_time"] is None
    assert recs[4]["host"]["median_us"] == 11.0 and recs[4]["stats"] is None
    assert run["l2_multiple"] == 4.0
    with pytest.raises(ValueError, match="status"):
        records.record(by_name["two_pass"], 1, 1, status="error")


def test_synthetic_documents_satisfy_the_schema_and_round_trip(tmp_path):
    for path in synthetic.write(tmp_path, torch=True):
        doc = records.load(path)
        assert doc == json.loads(path.read_text())
        synthetic.validate(doc)


def test_schema_rejects_a_document_missing_its_statistics():
    jsonschema = pytest.importorskip("jsonschema")
    doc = synthetic.document("bench")
    del doc["runs"][0]["candidates"][0]["stats"]
    with pytest.raises(jsonschema.ValidationError):
        synthetic.validate(doc)
    doc = synthetic.document("bench")
    doc["versions"]["driver"] = 13000  # versions are text: "13.0"
    with pytest.raises(jsonschema.ValidationError):
        synthetic.validate(doc)


def test_the_schemas_resolve_their_refs_without_a_base_uri():
    # A relative "$id" such as "softmax-lab-results/3" becomes the base against which
    # jsonschema before 4.18 resolves "#/$defs/...", and it fails to fetch it (seen on a
    # device with 4.17.3); without an "$id" the refs resolve within the document under
    # every version.
    for name in ("results_schema.json", "profile_schema.json", "context_schema.json"):
        schema = records.schema(name)
        assert "$id" not in schema, name
        assert schema["properties"]["schema"]["const"].startswith("softmax-lab-"), name


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "bench.json"
    records.save({"a": 1}, path)

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        records.save({"a": 2}, path)
    assert json.loads(path.read_text()) == {"a": 1}  # the old file, whole
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]
    with pytest.raises(ValueError):
        records.save({"a": float("nan")}, tmp_path / "nan.json")
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]


def test_load_rejects_other_json(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(ValueError, match="not a softmax-lab file"):
        records.load(path)
    path.write_text("not json")
    with pytest.raises(ValueError, match="not JSON"):
        records.load(path)


def test_schema_1_files_are_upgraded_on_load(tmp_path):
    doc = synthetic.document("bench")
    old = json.loads(json.dumps(doc))
    old["schema"] = "softmax-lab-results/1"
    old["versions"].update(driver=13000, runtime=13020)
    del old["versions"]["quack"]
    for key in ("row_sum_tolerance", "host_calls", "check"):
        del old["method"][key]
    for run in old["runs"]:
        del run["group"]
        run["copy"]["gbps"] = run["copy"].pop("useful_gbps")
        for r in run["candidates"]:
            r["gbps"] = 1.0
            r["copy_bandwidth_fraction"] = 1.0
            del r["useful_gbps"], r["host"]
            if r["check"]:
                r["check"] = {"rows": r["check"]["rows"], "relative_error": 2e-7, "poisoned": "out buffer"}
            if r["status"] == "skipped":
                r["status"] = "error"
    old["runs"][0]["candidates"] = [r for r in old["runs"][0]["candidates"] if r["kind"] != "host"]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(old))
    new = records.load(path)
    synthetic.validate(new)
    assert new["versions"]["driver"] == "13.0" and new["versions"]["runtime"] == "13.2"
    assert new["upgraded_from"] == "softmax-lab-results/1"
    assert "error" not in {r["status"] for r in new["runs"][0]["candidates"]}


def test_the_recorded_results_load_and_satisfy_the_schema():
    for kind in ("bench", "sweep"):
        path = os.path.join(RESULTS, f"{kind}.json")
        if not os.path.isfile(path):
            pytest.skip(f"no recorded {path}")
        synthetic.validate(records.load(path))


def test_recorded_says_plainly_when_there_is_nothing(tmp_path):
    doc, note = records.recorded("bench", tmp_path)
    assert doc is None and "No recorded bench results" in note and "softmax-lab bench --output" in note
    synthetic.write(tmp_path)
    doc, note = records.recorded("sweep", tmp_path)
    assert doc["kind"] == "sweep" and "Recorded on Synthetic H200" in note


def test_failures_are_wrong_outputs_and_our_own_errors_not_a_peers_limits():
    doc = synthetic.document("sweep", torch=True)
    assert records.failures(doc) == []  # quack out of shared memory is recorded, not a failure of ours
    r = doc["runs"][0]["candidates"][0]
    r.update(status="failed", reason="check failed", stats=None)
    assert records.failures(doc) == [f"{doc['runs'][0]['shape'][0]} x {doc['runs'][0]['shape'][1]} auto: check failed"]


def test_versions_are_read_as_people_write_them():
    assert records.cuda_version(13000) == "13.0" and records.cuda_version(12090) == "12.9"
    assert records.cuda_version(0) is None and records.cuda_version(None) is None
