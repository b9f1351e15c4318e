"""softmax_lab.lab.report: the tables name every candidate, tell failed from skipped with
the reason, set times against the copy, and the grid table names the best peer."""

import synthetic

from softmax_lab.lab import candidates as cat
from softmax_lab.lab import report


def test_traffic_table_gives_auto_the_traffic_of_its_pick():
    text = report.format_traffic(4096, 393216)
    (auto,) = [line for line in text.splitlines() if line.startswith("auto ")]
    assert auto.split()[1:3] == ["1", "1"] and "picks cluster_row" in auto
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
    assert lines[0].split(",")[:8] == ["rows", "cols", "group", "dtype", "op", "name", "kind", "status"]
    assert lines[1].split(",")[3:5] == ["float32", "softmax"]
    assert len(lines) == 1 + len(doc["runs"][0]["candidates"])


PAIRS = [("float32", "softmax"), ("bfloat16", "softmax"), ("bfloat16", "log_softmax"),
         ("bfloat16", "softmax_backward"), ("float32", "log_softmax_backward")]


def test_the_dtype_op_table_sets_auto_and_each_peer_against_the_floor_of_the_op():
    doc = synthetic.document("bench", torch=True, pairs=PAIRS)
    synthetic.validate(doc)
    rows = report.dtype_op_rows(doc)
    assert [(r["dtype"], r["op"]) for r in rows] == PAIRS
    back = rows[3]
    assert back["floor"] in cat.FLOOR_NAMES and set(back["cells"]) == {"auto", "torch", "quack"}
    run = doc["runs"][3]
    torch_bwd = next(r for r in run["candidates"] if r["name"] == "torch.softmax_backward")
    assert back["cells"]["torch"] == (torch_bwd["vs_copy_time"], None)
    assert back["cells"]["quack"][0] < back["cells"]["torch"][0]
    run["candidates"][-1].update(status="failed", reason="raised RuntimeError: out of shared memory",
                                 stats=None, vs_copy_time=None)
    assert report.dtype_op_rows(doc)[3]["cells"]["quack"] == (None, "failed: raised RuntimeError: out of shared memory")
    text = report.format_dtype_op_table(doc)
    lines = text.splitlines()
    assert lines[0].split()[-4:] == ["auto", "torch", "compile", "quack"]
    log_bwd = lines[2 + 4].split()
    assert log_bwd[3:5] == ["float32", "log_softmax_backward"] and log_bwd[-2:] == ["-", "-"]  # no compile, quack
    assert lines[2 + 2].split()[-1] == "-"  # quack has no log_softmax
    assert f"{torch_bwd['vs_copy_time']:.2f}" in lines[2 + 3] and lines[2 + 3].split()[-1] == "fail"
    full = report.format_document(doc)
    assert "by dtype and op:" in full and "x floor" in full and "x copy" in full
    assert "4096 x 393216 bfloat16 softmax_backward: 3.22 GB per tensor" in full
    assert "floor (two reads, one write) floor." in full and "ulp err" in full
    assert "by dtype and op" not in report.format_document(synthetic.document("bench"))


def test_the_grid_table_labels_dtype_and_op_when_there_are_several():
    doc = synthetic.document("sweep", torch=True, pairs=PAIRS[:2])
    text = report.format_grid(doc)
    assert "dtype op" in text.splitlines()[0] and "bfloat16 softmax" in text.splitlines()[2]
    assert report.format_grid(synthetic.document("sweep")).splitlines()[0].startswith("            shape | auto / copy")


def test_traffic_by_dtype_and_op():
    text = report.format_traffic(4096, 393216, dtype="bfloat16", op="softmax")
    assert "bfloat16 softmax (3.22 GB per tensor)" in text
    (copy,) = [line for line in text.splitlines() if line.startswith("copy.memcpy ")]
    assert copy.split()[-1] == "6.4"
    back = report.format_traffic(4096, 393216, copy_ms=4.0, dtype="float32", op="softmax_backward")
    (floor,) = [line for line in back.splitlines() if line.startswith("floor.torch_add ")]
    assert floor.split()[1:5] == ["2", "1", "12", "19.3"] and "GB/s to match floor" in back
