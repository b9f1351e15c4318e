"""Figures of results documents, drawn with the Agg backend on figures of their own
(pyplot's global state is never touched).  Every time is shown divided by the
copy of the same bytes, so 1.0 is the floor and nothing can sit above a
ceiling it did not reach; bandwidth, where shown, is useful bandwidth (one read
plus one write / time).

  bench_time(run):  time / copy per candidate, min..max bars, the traffic model's
                    and (from a profile) the measured traffic's time at copy speed;
  sweep(doc):       time / copy against row length, a panel per batch group;
  grid(doc):        heat map of auto / the best peer by shape;
  traffic(profile): model against measured DRAM traffic per candidate and shape.

Families have related colours: softmax_lab's variants greens, copies greys,
libraries blues.  Skipped and failed candidates are marked, never dropped.
write_all() names the files plainly: bench_time.png, sweep.png, grid.png, traffic.png.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib
import matplotlib.ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from . import candidates as cat
from .report import grid_rows

FAMILY_COLORMAPS = {"variant": "Greens", "copy": "Greys", "library": "Blues", "host": "Purples"}
FAILED_COLOR = "tab:red"
SKIPPED_COLOR = "0.45"
CEILING_COLOR = "black"
PEER_SHORT = {"torch.softmax": "torch", "torch.compile": "compile", "quack.softmax": "quack"}


def color(name: str, kind: str):
    """The candidate's colour: a shade of its family's colormap, the same in every figure."""
    family = [c.name for c in cat.candidates() if c.kind == kind]
    i = family.index(name) if name in family else len(family)
    shade = 0.45 + 0.5 * i / max(1, len(family))
    return matplotlib.colormaps[FAMILY_COLORMAPS.get(kind, "Oranges")](min(shade, 0.95))


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path) -> Figure:
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig


def _short(text: str | None, n: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


# ------------------------------------------------------------ one run
def bench_time(run: dict, path=None, doc: dict | None = None, profile_run: dict | None = None) -> Figure:
    """Time / copy per candidate (median; bars min..max), the copy floor at 1,
    with a hollow diamond where the traffic model's bytes would take at copy speed
    and, from a profile of the same shape, a dot for the measured bytes."""
    recs = [r for r in run["candidates"] if r["kind"] != "host"]
    copy = run["copy"]
    rows, cols = run["shape"]
    measured = _measured_passes(profile_run)
    fig = _figure(9, 0.42 * len(recs) + 1.9)
    ax = fig.subplots()
    top = max([r["stats"]["max_ms"] / copy["median_ms"] for r in recs if r["stats"] and copy] or [2.0])
    for y, r in enumerate(recs):
        if r["stats"] is None or copy is None:
            label = (f"FAILED: {_short(r['reason'])}" if r["status"] == "failed" else
                     f"skipped: {_short(r['reason'])}" if r["status"] == "skipped" else "no copy ceiling to compare")
            ax.text(0.02, y, label, va="center", fontsize=7, transform=ax.get_yaxis_transform(),
                    color=FAILED_COLOR if r["status"] == "failed" else SKIPPED_COLOR)
            continue
        s, base = r["stats"], copy["median_ms"]
        ratio = s["median_ms"] / base
        ax.barh(y, ratio, color=color(r["name"], r["kind"]), edgecolor="0.3", linewidth=0.5,
                xerr=[[ratio - s["min_ms"] / base], [s["max_ms"] / base - ratio]], capsize=2,
                error_kw={"elinewidth": 0.8})
        ax.text(max(s["max_ms"] / base, 1.0) + 0.015 * top, y, f"{ratio:.2f}  ({s['median_ms']:.3g} ms)",
                va="center", fontsize=7)
        t = r["traffic"]
        if t["reads"] + t["writes"]:
            ax.plot((t["reads"] + t["writes"]) / 2, y, "D", mfc="none", mec="0.2", ms=5)
        if r["name"] in measured:
            ax.plot(measured[r["name"]] / 2, y, "o", color="tab:orange", ms=4)
    if copy:
        ax.axvline(1.0, color=CEILING_COLOR, linestyle="--", linewidth=1,
                   label=f"copy floor: {copy['name']}, {copy['median_ms']:.3g} ms, "
                         f"{copy['useful_gbps']:.0f} GB/s useful")
    ax.plot([], [], "D", mfc="none", mec="0.2", ms=5, label="traffic model's bytes at copy speed")
    if measured:
        ax.plot([], [], "o", color="tab:orange", ms=4, label="measured DRAM bytes (ncu) at copy speed")
    fig.legend(loc="outside lower center", ncol=2, fontsize=7)
    ax.set_yticks(range(len(recs)), [r["name"] for r in recs], fontsize=8)
    for tick, r in zip(ax.get_yticklabels(), recs):
        tick.set_color("black" if r["status"] == "ok" else FAILED_COLOR if r["status"] == "failed" else SKIPPED_COLOR)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel("time / time of a copy of the same bytes (median; bars min..max)")
    where = f" on {doc['device']['name']}" if doc else ""
    ax.set_title(f"softmax of {rows} x {cols} float32{where}: time against the copy floor", fontsize=10)
    return _save(fig, path)


def _measured_passes(profile_run: dict | None) -> dict[str, float]:
    """name -> measured (read + write) DRAM bytes / the tensor's bytes."""
    if not profile_run:
        return {}
    return {r["name"]: r["measured_passes"]["reads"] + r["measured_passes"]["writes"]
            for r in profile_run["candidates"] if r.get("measured_passes")}


# ------------------------------------------------------------ the sweep
def _groups(doc: dict) -> list:
    return list(dict.fromkeys(run.get("group") for run in doc["runs"]))


def sweep(doc: dict, path=None) -> Figure:
    """Time / copy against row length (log scale), one panel per batch group, one
    line per candidate with min..max bars; crosses mark failed points and hollow
    circles skipped ones, under the floor."""
    groups = [g for g in _groups(doc) if g != "extra"] or [None]  # the extra shapes are in the grid's figure
    fig = _figure(4.3 * len(groups) + 1.8, 5.0)
    axes = fig.subplots(1, len(groups), sharey=True, squeeze=False)[0]
    for ax, group in zip(axes, groups):
        runs = [run for run in doc["runs"] if run.get("group") == group and run["copy"]]
        names = list(dict.fromkeys(r["name"] for run in runs for r in run["candidates"] if r["kind"] != "host"))
        for name in names:
            pts, bad = [], []
            kind = None
            for run in runs:
                r = next((r for r in run["candidates"] if r["name"] == name), None)
                if r is None:
                    continue
                kind = r["kind"]
                if r["stats"]:
                    base = run["copy"]["median_ms"]
                    pts.append((run["shape"][1], r["stats"]["median_ms"] / base, r["stats"]["min_ms"] / base,
                                r["stats"]["max_ms"] / base))
                else:
                    bad.append((run["shape"][1], r["status"]))
            c = color(name, kind)
            if pts:
                pts.sort()
                xs, ys, lo, hi = zip(*pts)
                ax.errorbar(xs, ys, yerr=[[y - v for y, v in zip(ys, lo)], [v - y for y, v in zip(ys, hi)]],
                            color=c, marker="o", ms=3.5, lw=2.2 if name == "auto" else 1.3, capsize=2, label=name,
                            linestyle=":" if kind == "copy" else "-")
            for x, status in bad:
                ax.plot(x, 0.93, "x" if status == "failed" else "o", color=FAILED_COLOR if status == "failed" else c,
                        mfc="none", ms=6)
        ax.axhline(1.0, color=CEILING_COLOR, linestyle="--", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")  # launch-bound peers reach 10-30 x on tiny batches; 1.0-1.6 must stay legible
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("row length (float32 elements)")
        ax.set_title(_group_title(group, runs), fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("time / copy time of the same bytes (1 = the floor)")
    axes[0].set_ylim(bottom=0.9)
    axes[0].plot([], [], "x", color=FAILED_COLOR, label="failed (marked below the floor)")
    axes[0].plot([], [], "o", mfc="none", color="0.3", label="skipped: cannot run (below the floor)")
    axes[0].plot([], [], "--", color=CEILING_COLOR, label="copy floor")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=6, fontsize=7)
    fig.suptitle(f"softmax sweep on {doc['device']['name']}: time against the copy floor", fontsize=10)
    return _save(fig, path)


def _group_title(group, runs) -> str:
    if group is None:
        return "rows chosen so each tensor is the same size"
    return f"batch: {group}" + ("" if "rows" in group else f" per tensor ({len(runs)} shapes)")


def grid(doc: dict, path=None) -> Figure:
    """Heat map of auto's time / the best peer's (torch.softmax, torch.compile,
    quack) by batch group and row length; below 1 auto is faster."""
    table = grid_rows(doc)
    groups = _groups(doc)
    cols = sorted({g["cols"] for g in table})
    fig = _figure(1.05 * len(cols) + 2.5, max(3.4, 0.95 * len(groups) + 1.8))
    ax = fig.subplots()
    values = [[math.nan] * len(cols) for _ in groups]
    norm = TwoSlopeNorm(vmin=0.5, vcenter=1.0, vmax=2.0)
    for g in table:
        i, j = groups.index(g["group"]), cols.index(g["cols"])
        v = g["auto_vs_peer"]
        values[i][j] = v if v is not None else math.nan
        if v is not None:
            text = f"{v:.2f}\n{g['rows']} rows\nvs {PEER_SHORT.get(g['peer_name'], g['peer_name'])}"
        else:
            text = f"auto {g['auto_status']}" if not g["auto"] else "no peer\ntimed"
            text += f"\n{g['rows']} rows"
        ax.text(j, i, text, ha="center", va="center", fontsize=6.5,
                color="black" if v is None or 0.7 < v < 1.5 else "white")
    cmap = matplotlib.colormaps["RdYlGn_r"].with_extremes(bad="0.85")
    image = ax.imshow(values, cmap=cmap, norm=norm, aspect="auto")
    fig.colorbar(image, ax=ax, label="auto / best peer (< 1: auto faster)", shrink=0.9)
    ax.set_xticks(range(len(cols)), [str(c) for c in cols], rotation=45, fontsize=7)
    ax.set_yticks(range(len(groups)), [str(g) if g is not None else "same size" for g in groups], fontsize=8)
    ax.set_xlabel("row length (float32 elements)")
    ax.set_ylabel("batch")
    timed = [p for p in cat.PEERS if any(c["name"] == p and c.get("status") == "ok"
                                     for run in doc["runs"] for c in run["candidates"])]
    absent = [p for p in cat.PEERS if p not in timed]
    title = f"auto against the best of {', '.join(timed) or 'no peer'} on {doc['device']['name']}"
    ax.set_title(title + (f" ({', '.join(absent)}: not timed)" if absent else ""), fontsize=9)
    return _save(fig, path)


# ------------------------------------------------------------ measured traffic
def traffic(profile_doc: dict, path=None) -> Figure:
    """For each shape: the traffic model's passes over the tensor (hollow bars)
    beside the passes ncu measured (reads solid, writes hatched), per candidate."""
    runs = profile_doc["runs"]
    n = len(runs)
    ncols = min(n, 4)
    nrows = -(-n // ncols)
    fig = _figure(4.4 * ncols + 0.5, 3.6 * nrows + 0.8)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, run in zip(axes, runs):
        recs = run["candidates"]
        for y, r in enumerate(recs):
            c = color(r["name"], r["kind"])
            m = r["model"]
            ax.barh(y - 0.2, m["reads"] + m["writes"], height=0.38, fill=False, edgecolor=c, linewidth=1.2)
            p = r.get("measured_passes")
            if p:
                ax.barh(y + 0.2, p["reads"], height=0.38, color=c)
                ax.barh(y + 0.2, p["writes"], left=p["reads"], height=0.38, color=c, hatch="///", edgecolor="white")
                ax.text(p["reads"] + p["writes"], y + 0.2, f" {p['reads']:.2f}r+{p['writes']:.2f}w", va="center",
                        fontsize=6)
            else:
                ax.text(0.05, y + 0.2, f"{r['status']}: {_short(r['reason'], 40)}", va="center", fontsize=6,
                        color=FAILED_COLOR if r["status"] == "failed" else SKIPPED_COLOR)
        ax.set_yticks(range(len(recs)), [r["name"] for r in recs], fontsize=7)
        ax.invert_yaxis()
        rows, cols = run["shape"]
        ax.set_title(f"{rows} x {cols}", fontsize=9)
        ax.set_xlabel("passes over the tensor (bytes / tensor bytes)", fontsize=7)
        ax.grid(True, axis="x", alpha=0.3)
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.legend(handles=[Patch(fill=False, edgecolor="0.3", label="traffic model (reads + writes)"),
                        Patch(color="0.5", label="measured DRAM reads (ncu)"),
                        Patch(facecolor="0.5", hatch="///", edgecolor="white", label="measured DRAM writes")],
               loc="outside lower center", ncol=3, fontsize=7)
    fig.suptitle(f"What the hardware counted on {profile_doc['device']['name']}: model against measured traffic",
                 fontsize=10)
    return _save(fig, path)


# ------------------------------------------------------------ files
def write_all(doc: dict, out_dir, profile_doc: dict | None = None, suffix: str = "") -> list[Path]:
    """The PNGs of one document, named by what they show, with `suffix` before
    ".png": a bench's bench_time.png (bench_time_2.png, ... for further runs), a
    sweep's sweep.png and grid.png, a profile's traffic.png.  `profile_doc` adds
    measured traffic to a bench's figure."""
    out_dir = Path(out_dir)
    if doc["kind"] == "sweep":
        paths = [out_dir / f"sweep{suffix}.png", out_dir / f"grid{suffix}.png"]
        sweep(doc, paths[0])
        grid(doc, paths[1])
        return paths
    if doc["kind"] == "profile":
        paths = [out_dir / f"traffic{suffix}.png"]
        traffic(doc, paths[0])
        return paths
    paths = []
    for i, run in enumerate(doc["runs"]):
        paths.append(out_dir / (f"bench_time{suffix}.png" if i == 0 else f"bench_time{suffix}_{i + 1}.png"))
        bench_time(run, paths[-1], doc, profile_run=matching_run(profile_doc, run["shape"]))
    return paths


def file_suffix(stem: str, kind: str) -> str:
    """"" for bench.json of a bench, "_rows" for profile_rows.json of a profile,
    "_r" for r.json: figures of several files of one kind keep apart."""
    if stem == kind:
        return ""
    return stem[len(kind):] if stem.startswith(kind + "_") else f"_{stem}"


def matching_run(profile_doc: dict | None, shape) -> dict | None:
    """The run of a profile document at `shape`, if any."""
    if not profile_doc:
        return None
    return next((run for run in profile_doc["runs"] if run["shape"] == list(shape)), None)


def to_png(fig: Figure) -> bytes:
    """PNG bytes of a figure, e.g. for IPython.display.Image(data=...)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()
