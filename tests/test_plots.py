"""softmax_lab.plots: every figure drawn from a results document, saved as PNG under a
plain name; times shown against the copy, never model bytes / time."""

import matplotlib.colors as mcolors
import synthetic
import test_profile

from softmax_lab import candidates as cat
from softmax_lab import plots, profile, records

PNG = b"\x89PNG\r\n\x1a\n"


def profile_doc():
    rows, cols = 4096, 393216
    recs = []
    for c in cat.candidates():
        if c.kind == "host":
            continue
        m = {"kernels": ["k"], "launches_per_call": 1, "dram_read_bytes": rows * cols * 4.0,
             "dram_write_bytes": rows * cols * 4.0, "l2_hit_rate_pct": 1.0, "dram_throughput_pct": 90.0,
             "registers_per_thread": 32, "occupancy_pct": 50.0, "duration_ms": 3.0}
        recs.append(profile.candidate_record(c, rows, cols, "ok", None, m))
    return test_profile.document([{"shape": [rows, cols], "dtype": "float32", "data_bytes": rows * cols * 4,
                                   "candidates": recs}])


def test_bench_figure_shows_time_over_copy_with_the_floor_at_one(tmp_path):
    doc = synthetic.document("bench")
    fig = plots.bench_time(doc["runs"][0], tmp_path / "t.png", doc=doc)
    (ax,) = fig.axes
    assert "copy" in ax.get_xlabel() and "GB/s" not in ax.get_xlabel()
    right = ax.get_xlim()[1]
    ratios = [r["vs_copy_time"] for r in doc["runs"][0]["candidates"] if r["vs_copy_time"]]
    assert max(ratios) < right < 2 * max(ratios)
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("skipped: torch is not importable") for t in texts)
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[0].startswith("copy floor: copy.float4")
    assert (tmp_path / "t.png").read_bytes().startswith(PNG)


def test_bench_figure_marks_failed_candidates_in_red_and_shows_measured_traffic():
    doc = synthetic.document("bench")
    run = doc["runs"][0]
    run["candidates"][0].update(status="failed", reason="check failed after the last timed call", stats=None,
                                vs_copy_time=None)
    fig = plots.bench_time(run, doc=doc, profile_run=profile_doc()["runs"][0])
    ax = fig.axes[0]
    failed = [t for t in ax.texts if t.get_text().startswith("FAILED: check failed")]
    assert failed and mcolors.same_color(failed[0].get_color(), plots.FAILED_COLOR)
    assert any("measured DRAM bytes" in t.get_text() for t in fig.legends[0].get_texts())


def test_families_have_related_colours():
    greens = [plots.color(n, "variant") for n in ("three_pass", "single_read", "auto")]
    for c in greens:
        r, g, b, _ = c
        assert g >= r and g >= b
    for n in cat.COPY_NAMES:
        r, g, b, _ = plots.color(n, "copy")
        assert abs(r - g) < 0.05 and abs(g - b) < 0.05
    r, g, b, _ = plots.color("torch.softmax", "library")
    assert b > r
    assert plots.color("two_pass", "variant") != plots.color("three_pass", "variant")


def test_sweep_figure_has_a_panel_per_batch_and_no_bandwidth_axis(tmp_path):
    doc = synthetic.document("sweep", torch=True)
    fig = plots.sweep(doc, tmp_path / "s.png")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["batch: 32 rows", "batch: 132 rows", "batch: 2 GiB per tensor (11 shapes)"]
    assert "copy" in fig.axes[0].get_ylabel() and "GB/s" not in fig.axes[0].get_ylabel()
    labels = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"auto", "torch.compile", "quack.softmax", "copy floor"} <= labels
    assert any(t.startswith("failed") for t in labels)  # quack past its shared memory
    assert fig.axes[0].get_xscale() == "log"
    assert (tmp_path / "s.png").read_bytes().startswith(PNG)


def test_the_recorded_schema_1_sweep_still_plots(tmp_path):
    import gzip
    import pathlib

    old = pathlib.Path(__file__).parent / "data" / "sweep-schema1-2026-11-29.json.gz"  # the H200 run of 2026-11-29
    path = tmp_path / "sweep.json"
    path.write_bytes(gzip.decompress(old.read_bytes()))
    doc = records.load(path)
    assert doc["upgraded_from"] == "softmax-lab-results/1"
    fig = plots.sweep(doc)
    assert len(fig.axes) == 1
    assert plots.to_png(plots.grid(doc)).startswith(PNG)


def synthetic_recorded_path(kind):
    import pathlib

    path = pathlib.Path(__file__).resolve().parent.parent / "results" / f"{kind}.json"
    if not path.is_file():
        import pytest

        pytest.skip(f"no recorded {path}")
    return path


def test_grid_heat_map_cells_are_auto_over_the_best_peer():
    doc = synthetic.document("sweep", torch=True)
    fig = plots.grid(doc)
    ax = fig.axes[0]
    image = ax.get_images()[0].get_array()
    rows = [r for r in doc["runs"] if r["group"] == "32 rows"]
    first = rows[0]
    auto = next(r for r in first["candidates"] if r["name"] == "auto")["vs_copy_time"]
    peer = min(r["vs_copy_time"] for r in first["candidates"] if r["name"] in cat.PEERS and r["vs_copy_time"])
    assert abs(image[0, 0] - auto / peer) < 1e-12
    assert [t.get_text() for t in ax.get_yticklabels()] == ["32 rows", "132 rows", "2 GiB", "extra"]


def test_traffic_figure_has_a_panel_per_shape():
    fig = plots.traffic(profile_doc())
    assert [ax.get_title() for ax in fig.axes if ax.get_visible()] == ["4096 x 393216"]
    assert plots.to_png(fig).startswith(PNG)


def test_a_run_without_a_copy_ceiling_still_plots():
    run = synthetic.run(64, 4099)
    for r in run["candidates"]:
        if r["kind"] == "copy":
            r.update(status="failed", reason="boom", stats=None)
    run = records.make_run(64, 4099, run["candidates"], l2_bytes=2**20)
    assert run["copy"] is None
    assert plots.to_png(plots.bench_time(run)).startswith(PNG)


def test_write_all_gives_plain_names(tmp_path):
    bench_path, sweep_path = synthetic.write(tmp_path)
    out = tmp_path / "png"
    assert plots.write_all(records.load(bench_path), out) == [out / "bench_time.png"]
    assert plots.write_all(records.load(sweep_path), out) == [out / "sweep.png", out / "grid.png"]
    assert plots.write_all(profile_doc(), out) == [out / "traffic.png"]
    assert all(p.read_bytes().startswith(PNG) for p in out.iterdir())


def test_file_suffixes_keep_figures_of_several_files_apart():
    assert plots.file_suffix("bench", "bench") == ""
    assert plots.file_suffix("profile_rows", "profile") == "_rows"
    assert plots.file_suffix("r", "bench") == "_r"


PAIRS = [("bfloat16", "softmax"), ("bfloat16", "softmax_backward"), ("float32", "log_softmax_backward")]


def test_a_bench_of_several_dtypes_and_ops_is_one_figure_with_a_panel_each(tmp_path):
    doc = synthetic.document("bench", torch=True, pairs=PAIRS)
    assert plots.write_all(doc, tmp_path) == [tmp_path / "bench_time.png"]
    fig = plots.bench_panels(doc)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[0].startswith("softmax, bfloat16, 4096 x 393216: floor copy.")
    assert titles[1].startswith("softmax backward, bfloat16, 4096 x 393216: floor floor.torch_add")
    assert "copy" in fig.axes[0].get_xlabel() and "two-read, one-write add" in fig.axes[2].get_xlabel()
    assert [t.get_text() for t in fig.legends[0].get_texts()][0] == "the floor of the op (1.0)"
    ticks = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert "torch.softmax_backward" in ticks and "copy.memcpy" not in ticks
    # the diamond of torch's backward (4 reads + 1 write) sits at 5 / 3 of the floor
    diamonds = [line for line in fig.axes[1].lines if line.get_marker() == "D" and len(line.get_xdata())]
    assert 5 / 3 in [float(line.get_xdata()[0]) for line in diamonds]


def test_one_bf16_run_is_labelled_with_its_dtype_and_op():
    doc = synthetic.document("bench", torch=True, pairs=PAIRS[1:2])
    fig = plots.bench_time(doc["runs"][0], doc=doc)
    assert fig.axes[0].get_title().startswith("softmax backward of 4096 x 393216 bfloat16 on Synthetic H200")
    assert fig.legends[0].get_texts()[0].get_text().startswith("two-read, one-write floor: floor.torch_add")


def test_a_sweep_of_several_dtypes_and_ops_has_a_row_of_panels_each_and_a_labelled_grid():
    doc = synthetic.document("sweep", torch=True, pairs=PAIRS[:2])
    fig = plots.sweep(doc)
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 6 and titles[0].startswith("bfloat16 softmax, batch: 32 rows")
    assert titles[3].startswith("bfloat16 softmax_backward, batch: 32 rows")
    assert "copy" in fig.axes[0].get_ylabel() and "floor" in fig.axes[3].get_ylabel()
    g = plots.grid(doc)
    labels = [t.get_text() for t in g.axes[0].get_yticklabels()]
    assert labels[0] == "bfloat16 softmax, 32 rows" and "bfloat16 softmax_backward, 32 rows" in labels
    assert "torch.softmax_backward" in g.axes[0].get_title()
    assert plots.to_png(g).startswith(PNG)
