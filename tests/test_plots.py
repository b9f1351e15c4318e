"""softmax_lab.plots: every figure drawn from a results document, saved as PNG."""

import synthetic

from softmax_lab import bench, plots

PNG = b"\x89PNG\r\n\x1a\n"


def test_bandwidth_figure_shows_the_variants_band_and_the_copy_ceiling(tmp_path):
    doc = synthetic.document("bench")
    fig = plots.bandwidth(doc["runs"][0], tmp_path / "bw.png", doc=doc)
    left, right = fig.axes
    assert "12.9-25.8 GB" in left.get_legend().get_texts()[0].get_text()
    assert "copy ceiling (copy.float4)" in right.get_legend().get_texts()[0].get_text()
    assert (tmp_path / "bw.png").read_bytes().startswith(PNG)


def test_time_figure(tmp_path):
    doc = synthetic.document("bench")
    plots.times(doc["runs"][0], tmp_path / "t.png", doc=doc)
    assert (tmp_path / "t.png").read_bytes().startswith(PNG)


def test_sweep_figure_has_a_line_per_timed_candidate(tmp_path):
    doc = synthetic.document("sweep")
    fig = plots.sweep(doc, tmp_path / "s.png")
    labels = {line.get_label() for line in fig.axes[0].get_lines()}
    assert {"two_pass", "single_read", "copy.float4", "cupyx.softmax", "copy ceiling"} <= labels
    assert "torch.softmax" not in labels  # skipped everywhere
    assert fig.axes[0].get_xscale() == "log"
    assert (tmp_path / "s.png").read_bytes().startswith(PNG)


def test_a_run_without_a_copy_ceiling_still_plots(tmp_path):
    run = synthetic.run(64, 4099)
    for r in run["candidates"]:
        if r["kind"] == "copy":
            r.update(status="error", reason="boom", stats=None, gbps=None)
    run = bench.make_run(64, 4099, run["candidates"], l2_bytes=2**20)
    assert run["copy"] is None
    assert plots.to_png(plots.bandwidth(run)).startswith(PNG)
    assert plots.to_png(plots.times(run)).startswith(PNG)


def test_write_all_names_the_pngs_after_the_results_file(tmp_path):
    bench_path, sweep_path = synthetic.write(tmp_path)
    out = tmp_path / "png"
    expected = [out / "bench_bandwidth.png", out / "bench_time.png"]
    assert plots.write_all(bench.load(bench_path), out, "bench") == expected
    assert plots.write_all(bench.load(sweep_path), out, "sweep") == [out / "sweep_sweep.png"]
    assert all(p.read_bytes().startswith(PNG) for p in out.iterdir())
