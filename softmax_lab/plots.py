"""Figures of benchmark results (softmax_lab.bench documents), drawn with the
Agg backend on figures of their own (pyplot's global state is never touched).

  bandwidth(run): each candidate's traffic model beside its achieved GB/s, with
                  the variants' band of traffic for the shape and the copy ceiling;
  times(run):     median time per candidate (min..max bars) against the copy floor;
  sweep(doc):     effective GB/s against row length, one line per candidate.
"""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .bench import candidates
from .variants import variants as registered_variants

COPY_COLOR = "black"


def _color(name: str):
    """One color per candidate name, the same in every figure."""
    import matplotlib

    order = [c.name for c in candidates()]
    i = order.index(name) if name in order else len(order)
    palette = matplotlib.colormaps["tab20"]  # more colors than candidates: none shared
    return palette((2 * i) % 20 + (2 * i) // 20)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _title(doc: dict | None, run: dict) -> str:
    rows, cols = run["shape"]
    where = f" on {doc['device']['name']}" if doc else ""
    return f"softmax of {rows} x {cols} {run['dtype']}{where}"


def _save(fig: Figure, path) -> Figure:
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig


def bandwidth(run: dict, path=None, doc: dict | None = None) -> Figure:
    """Left: each candidate's traffic (GB) with the band the variants' traffic
    models span for this shape.  Right: its achieved GB/s with the copy ceiling."""
    rows, cols = run["shape"]
    recs = run["candidates"]
    names = [r["name"] for r in recs]
    ypos = range(len(recs))
    fig = _figure(11, 0.45 * len(recs) + 1.8)
    left, right = fig.subplots(1, 2, sharey=True)

    band = [v.traffic_bytes(rows, cols) / 1e9 for v in registered_variants().values()]
    left.axvspan(min(band), max(band), color="tab:green", alpha=0.15,
                 label=f"variants' traffic models: {min(band):.1f}-{max(band):.1f} GB")
    left.barh(ypos, [r["traffic"]["bytes"] / 1e9 for r in recs], color=[_color(n) for n in names])
    for y, r in zip(ypos, recs):
        t = r["traffic"]
        left.text(t["bytes"] / 1e9, y, f" {t['reads']}r+{t['writes']}w", va="center", fontsize=8)
    left.set_xlabel("traffic model (GB moved)")
    left.set_yticks(list(ypos), names)
    left.invert_yaxis()
    left.legend(loc="lower right", fontsize=8)

    for y, r in zip(ypos, recs):
        if r["gbps"]:
            right.barh(y, r["gbps"], color=_color(r["name"]))
            right.text(r["gbps"], y, f" {r['gbps']:.0f}", va="center", fontsize=8)
        else:
            right.text(0, y, f" {r['status']}", va="center", fontsize=8, color="gray")
    if run["copy"]:
        right.axvline(run["copy"]["gbps"], color=COPY_COLOR, linestyle="--",
                      label=f"copy ceiling ({run['copy']['name']}): {run['copy']['gbps']:.0f} GB/s")
        right.legend(loc="lower right", fontsize=8)
    right.set_xlabel("effective bandwidth (traffic model / median time, GB/s)")
    fig.suptitle(_title(doc, run))
    return _save(fig, path)


def times(run: dict, path=None, doc: dict | None = None) -> Figure:
    """Median time per candidate (bars from min to max) against the copy floor;
    a dot marks the time the candidate's traffic would take at copy bandwidth."""
    recs = run["candidates"]
    fig = _figure(8, 0.45 * len(recs) + 1.8)
    ax = fig.subplots()
    copy = run["copy"]
    for y, r in enumerate(recs):
        s = r["stats"]
        if s is None:
            ax.text(0, y, f" {r['status']}", va="center", fontsize=8, color="gray")
            continue
        ax.barh(y, s["median_ms"], color=_color(r["name"]),
                xerr=[[s["median_ms"] - s["min_ms"]], [s["max_ms"] - s["median_ms"]]], capsize=3)
        ax.text(s["max_ms"], y, f" {s['median_ms']:.2f} ms", va="center", fontsize=8)
        if copy:
            ax.plot(r["traffic"]["bytes"] / 1e9 / copy["gbps"] * 1e3, y, "o", color=COPY_COLOR, markersize=4)
    if copy:
        ax.axvline(copy["median_ms"], color=COPY_COLOR, linestyle="--",
                   label=f"copy floor ({copy['name']}): {copy['median_ms']:.2f} ms")
        ax.plot([], [], "o", color=COPY_COLOR, markersize=4, label="its traffic at copy bandwidth")
        ax.legend(loc="best", fontsize=8)
    ax.set_yticks(range(len(recs)), [r["name"] for r in recs])
    ax.invert_yaxis()
    ax.set_xlabel("time per call (ms): median, bars min..max")
    ax.set_title(_title(doc, run))
    return _save(fig, path)


def sweep(doc: dict, path=None) -> Figure:
    """Effective GB/s against row length (log x) for every candidate, with the copy ceiling."""
    fig = _figure(9, 5.5)
    ax = fig.subplots()
    names = list(dict.fromkeys(r["name"] for run in doc["runs"] for r in run["candidates"]))
    for name in names:
        pts = [(run["shape"][1], r["gbps"]) for run in doc["runs"] for r in run["candidates"]
               if r["name"] == name and r["gbps"]]
        if pts:
            xs, ys = zip(*pts)
            kind = next(r["kind"] for run in doc["runs"] for r in run["candidates"] if r["name"] == name)
            ax.plot(xs, ys, marker="o", markersize=4, color=_color(name), label=name,
                    linestyle=":" if kind == "copy" else "-")
    ceiling = [(run["shape"][1], run["copy"]["gbps"]) for run in doc["runs"] if run["copy"]]
    if ceiling:
        xs, ys = zip(*ceiling)
        ax.plot(xs, ys, color=COPY_COLOR, linestyle="--", linewidth=2, label="copy ceiling")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("row length (float32 elements; rows chosen so each tensor is the same size)")
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    ax.set_title(f"softmax sweep on {doc['device']['name']}")
    return _save(fig, path)


def write_all(doc: dict, out_dir, stem: str) -> list[Path]:
    """The PNGs for one results document: a bench's bandwidth and time figures
    (one pair per run), or a sweep's figure.  Returns their paths."""
    out_dir = Path(out_dir)
    if doc["kind"] == "sweep":
        paths = [out_dir / f"{stem}_sweep.png"]
        sweep(doc, paths[0])
        return paths
    paths = []
    for i, run in enumerate(doc["runs"]):
        suffix = "" if len(doc["runs"]) == 1 else f"_{i}"
        paths += [out_dir / f"{stem}{suffix}_bandwidth.png", out_dir / f"{stem}{suffix}_time.png"]
        bandwidth(run, paths[-2], doc)
        times(run, paths[-1], doc)
    return paths


def to_png(fig: Figure) -> bytes:
    """PNG bytes of a figure, e.g. for IPython.display.Image(data=...)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()
