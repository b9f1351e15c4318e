"""softmax_lab.lab.plots: every figure drawn from a results document, saved as PNG under a
plain name; times shown against the copy, never model bytes / time; nothing cut off at
the edges; the same documents give the same bytes, and results/README.md's plot
command gives back every committed PNG."""

import glob
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import matplotlib
import matplotlib.colors as mcolors
import pytest
import synthetic
import test_profile

from softmax_lab.lab import candidates as cat
from softmax_lab.lab import plots, profile, records

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


# ------------------------------------------------------------ the same bytes every time
ROOT = Path(__file__).resolve().parent.parent
RESULTS_README = ROOT / "results" / "README.md"
# A command of results/README.md: a line of an indented code block.
PLOT_COMMAND = re.compile(r"^    (softmax-lab plot .+)$", re.MULTILINE)
DRAWN_BY = re.compile(r"matplotlib \S+, FreeType \S+")


def software(path: Path) -> str | None:
    """The Software text chunk of a PNG file."""
    from PIL import Image

    with Image.open(path) as image:
        return image.info.get("Software")


def every_figure(doc: dict) -> list:
    if doc["kind"] == "sweep":
        return [plots.sweep(doc), plots.grid(doc)]
    if doc["kind"] == "profile":
        return [plots.traffic(doc)]
    return [plots.bench_panels(doc)] if len(doc["runs"]) > 1 else [plots.bench_time(doc["runs"][0], doc=doc)]


def drawn_and_figure(fig):
    """The bounding box of everything drawn, and the figure's, in inches."""
    with matplotlib.style.context("default"):
        fig.canvas.draw()
        return fig.get_tightbbox(fig.canvas.get_renderer()), fig.bbox_inches


def test_no_figure_is_cut_off_at_its_edges():
    """Everything drawn (titles, legends, labels) lies inside the figure, also for
    one panel of a profile or one batch of a sweep, the narrowest figures."""
    one_group = synthetic.document("sweep", torch=True)
    one_group["runs"] = [run for run in one_group["runs"] if run["group"] == "32 rows"]
    figures = [*every_figure(synthetic.document("bench")),
               *every_figure(synthetic.document("bench", torch=True, pairs=PAIRS)),
               *every_figure(synthetic.document("sweep", torch=True)), plots.sweep(one_group),
               plots.sweep(synthetic.document("sweep", torch=True, pairs=PAIRS[:2])), plots.traffic(profile_doc())]
    for fig in figures:
        drawn, size = drawn_and_figure(fig)
        assert size.x0 <= drawn.x0 and drawn.x1 <= size.x1, (fig.get_suptitle(), drawn, size)
        assert size.y0 <= drawn.y0 and drawn.y1 <= size.y1, (fig.get_suptitle(), drawn, size)


def test_a_figure_wider_than_its_size_is_saved_whole(tmp_path):
    """A grid of few row lengths and a long title: the PNG is cropped to what was drawn,
    not to the figure's size."""
    from PIL import Image

    fig = plots.grid(synthetic.document("sweep", torch=True, pairs=PAIRS[:2]), tmp_path / "grid.png")
    drawn, size = drawn_and_figure(fig)
    assert drawn.width > size.width + 1  # the title overhangs the figure on both sides
    with Image.open(tmp_path / "grid.png") as image:
        assert abs(image.size[0] - drawn.width * plots.DPI) < 0.3 * plots.DPI  # the whole title, and a margin


def test_a_figure_is_the_same_bytes_whatever_the_style_and_names_what_drew_it(tmp_path):
    doc = synthetic.document("bench", torch=True)
    plots.write_all(doc, tmp_path / "a", profile_doc=profile_doc())
    with matplotlib.rc_context({"font.size": 17, "lines.linewidth": 4, "figure.dpi": 50, "axes.grid": True}):
        plots.write_all(doc, tmp_path / "b", profile_doc=profile_doc())
    a, b = tmp_path / "a" / "bench_time.png", tmp_path / "b" / "bench_time.png"
    assert a.read_bytes() == b.read_bytes()
    assert software(a) == plots.SOFTWARE and DRAWN_BY.fullmatch(plots.SOFTWARE)


def documented_commands() -> list[str]:
    commands = PLOT_COMMAND.findall(RESULTS_README.read_text())
    assert commands, f"{RESULTS_README} gives no command `    softmax-lab plot ...` (an indented code line)"
    return commands


def test_the_documented_command_draws_every_committed_figure_byte_for_byte(tmp_path):
    """results/README.md's plot command(s), run from the repository's root as the README
    says, but with -o naming a temporary folder: the same PNG files, the same bytes."""
    committed = sorted((ROOT / "results").glob("*.png"))
    for png in committed:
        drawn_by = software(png) or "nothing named"
        assert DRAWN_BY.fullmatch(drawn_by), f"{png.name} was not drawn by softmax_lab.lab.plots ({drawn_by})"
        if drawn_by != plots.SOFTWARE:
            pytest.skip(f"results/{png.name} was drawn with {drawn_by}; this is {plots.SOFTWARE}, "
                        "whose pixels may differ")
    out = tmp_path / "figures"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for command in documented_commands():
        words = shlex.split(command)[2:]  # after `softmax-lab plot`
        option = next(w for w in ("-o", "--output") if w in words)
        at = words.index(option) + 1
        assert words[at] == "results", f"{command!r} does not write to results/"
        words[at] = str(out)
        args = []
        for word in words:  # the shell's globbing: sorted matches, or the word itself when none
            args += (sorted(glob.glob(word, root_dir=ROOT)) or [word]) if "*" in word else [word]
        p = subprocess.run([sys.executable, "-m", "softmax_lab", "plot", *args], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=600, check=False)
        assert p.returncode == 0, p.stderr
    drawn = sorted(out.glob("*.png"))
    how = f"redraw with `{'` and `'.join(documented_commands())}` from the repository's root"
    assert [p.name for p in drawn] == [p.name for p in committed], how
    differ = [p.name for p in committed if p.read_bytes() != (out / p.name).read_bytes()]
    assert not differ, f"{', '.join(differ)} differ from what the JSON files give: {how}"
