"""softmax_lab.report: the tables name every candidate, tell failed from skipped with
the reason, set times against the copy, and the grid table names the best peer."""

import synthetic

from softmax_lab import candidates as cat
from softmax_lab import report


def test_traffic_table_gives_auto_the_traffic_of_its_pick():
    text = report.format_traffic(4096, 393216)
    (auto,) = [line for line in text.splitlines() if line.startswith("auto ")]
    assert auto.split()[1:3] == ["1", "1"] and "picks single_read" in auto
    assert "host." not in text
    with_copy = report.format_traffic(4096, 393216, copy_ms=3.0)
    assert "GB/s to match copy" in with_copy


def test_run_table_tells_failed_from_skipped_and_shows_host_time():
    doc = synthetic.document("bench")
    run = doc["runs"][0]
    run["candidates"][0].update(status="failed", reason="check failed after the first call", stats=None)
    text = report.format_run(run)
    assert "FAILED: check failed after the first call" in text
    assert "SKIPPED: torch is not importable" in text
    assert "host time per call" in text and "host.auto" in text
    for c in cat.candidates():
        assert c.name in text
    assert "useful GB/s" in text and "effective" not in text


def test_grid_table_sets_auto_and_the_best_peer_against_the_copy():
    doc = synthetic.document("sweep", torch=True)
    rows = report.grid_rows(doc)
    assert len(rows) == len(doc["runs"])
    first = doc["runs"][0]
    peers = {r["name"]: r["vs_copy_time"] for r in first["candidates"] if r["name"] in cat.PEERS and r["vs_copy_time"]}
    best = min(peers, key=peers.get)
    assert rows[0]["peer_name"] == best and rows[0]["peer"] == peers[best]
    assert rows[0]["auto_vs_peer"] == rows[0]["auto"] / rows[0]["peer"]
    text = report.format_grid(doc)
    assert text.splitlines()[0].split("|")[1].strip() == "auto / copy"
    assert f"({best})" in text.splitlines()[1]
    assert "quack.softmax FAILED (raised RuntimeError: out of shared memory)" in text


def test_grid_table_without_any_peer_says_so():
    doc = synthetic.document("sweep")  # torch (and so quack) skipped everywhere
    assert all(g["peer"] is None for g in report.grid_rows(doc))
    assert "none timed" in report.format_grid(doc)


def test_document_header_reads_versions_as_people_write_them():
    doc = synthetic.document("bench")
    head = report.format_document(doc).splitlines()[1]
    assert head.startswith("driver CUDA 12.8, runtime CUDA 12.9") and "torch absent" in head


def test_csv_has_a_line_per_candidate():
    doc = synthetic.document("bench")
    lines = report.to_csv(doc).splitlines()
    assert lines[0].split(",")[:6] == ["rows", "cols", "group", "name", "kind", "status"]
    assert len(lines) == 1 + len(doc["runs"][0]["candidates"])
