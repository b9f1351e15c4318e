"""Figures of results documents, drawn with the Agg backend on figures of their own
(pyplot's global state is never touched).  Every time is shown divided by the
floor of its op: a copy of the same bytes forward, a two-read, one-write add
backward, so 1.0 is the floor and nothing can sit above a ceiling it did not
reach; bandwidth, where shown, is useful bandwidth (the floor's bytes / time).
Every figure names the dtype and op of what it shows.

  bench_time(run):  time / floor per candidate, min..max bars, the traffic model's
                    and (from a profile) the measured traffic's time at floor speed;
  bench_panels(doc): the same, a panel per (dtype, op) run of a bench;
  sweep(doc):       time / floor against row length, a panel per batch group
                    (a row of panels per dtype and op);
  grid(doc):        heat map of auto / the best peer by shape (and dtype and op);
  traffic(profile): model against measured DRAM traffic per candidate and shape;
  context(doc):     a softmax after the GEMM of its logits: the GEMM's own wander
                    round by round, and each candidate alone, in context and naive.

Families have related colours: softmax_lab's variants greens, copies greys,
libraries blues.  Skipped and failed candidates are marked, never dropped.
write_all() names the files plainly: bench_time.png, sweep.png, grid.png, traffic.png,
context.png.

The same documents give the same PNG bytes: each figure is drawn under
matplotlib's default style (whatever matplotlibrc or style a session set), at a
fixed size and dpi, and saved cropped to what was drawn, so nothing is cut off
at the edges.  The PNG's Software text chunk, SOFTWARE, names the matplotlib and
FreeType that drew it: the two that can change the pixels.
"""

from __future__ import annotations

import functools
import io
import math
from pathlib import Path

import matplotlib
import matplotlib.style
import matplotlib.ticker
from matplotlib import ft2font
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..problem import ALL_OPS, DTYPES
from . import candidates as cat
from . import context as ctx
from .report import floor_word, grid_rows

FAMILY_COLORMAPS = {"variant": "Greens", "copy": "Greys", "library": "Blues", "host": "Purples"}
FAILED_COLOR = "tab:red"
SKIPPED_COLOR = "0.45"
CEILING_COLOR = "black"
PEER_SHORT = cat.PEER_ROLE
DPI = 120  # of the PNG files; to_png's (notebooks) is 100
# The PNG's Software text chunk: what drew it, in place of matplotlib's own "Matplotlib version...".
SOFTWARE = f"matplotlib {matplotlib.__version__}, FreeType {ft2font.__freetype_version__}"
_KINDS: dict[str, str] = {}


def _kinds() -> dict[str, str]:
    """name -> kind of every candidate of every dtype and op, in catalogue order."""
    if not _KINDS:
        for d in DTYPES:
            for o in ALL_OPS:
                for c in cat.candidates(d, o):
                    _KINDS.setdefault(c.name, c.kind)
    return _KINDS


def color(name: str, kind: str):
    """The candidate's colour: a shade of its family's colormap, the same in every figure."""
    family = [n for n, k in _kinds().items() if k == kind]
    i = family.index(name) if name in family else len(family)
    shade = 0.45 + 0.5 * i / max(1, len(family))
    return matplotlib.colormaps[FAMILY_COLORMAPS.get(kind, "Oranges")](min(shade, 0.95))


def _default_style(draw):
    """Runs a figure function (drawing and saving) under matplotlib's default style,
    so that a matplotlibrc or a notebook's style cannot change the figure."""

    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        with matplotlib.style.context("default"):
            return draw(*args, **kwargs)

    return drawn


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _savefig(fig: Figure, target, dpi: int, **kwargs) -> None:
    """The one way a figure is written: cropped to everything drawn (a title or legend
    wider than the figure is kept whole), with SOFTWARE as the Software text chunk."""
    fig.savefig(target, dpi=dpi, bbox_inches="tight", metadata={"Software": SOFTWARE}, **kwargs)


def _save(fig: Figure, path) -> Figure:
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        _savefig(fig, path, DPI)
    return fig


def _short(text: str | None, n: int = 70) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


# ------------------------------------------------------------ one run
def pair(run: dict) -> tuple[str, str]:
    return run["dtype"], run.get("op", "softmax")


@_default_style
def bench_time(run: dict, path=None, doc: dict | None = None, profile_run: dict | None = None) -> Figure:
    """Time / floor per candidate (median; bars min..max), the floor at 1, with a
    hollow diamond where the traffic model's bytes would take at floor speed and,
    from a profile of the same shape, a dot for the measured bytes."""
    recs = [r for r in run["candidates"] if r["kind"] != "host"]
    fig = _figure(9, 0.42 * len(recs) + 1.9)
    ax = fig.subplots()
    measured = _draw_bench(ax, run, profile_run)
    _bench_legend(fig, ax, measured)
    rows, cols = run["shape"]
    where = f" on {doc['device']['name']}" if doc else ""
    ax.set_title(f"{_op_title(run)} of {rows} x {cols} {run['dtype']}{where}: time against the "
                 f"{floor_word(pair(run)[1])} floor", fontsize=10)
    return _save(fig, path)


@_default_style
def bench_panels(doc: dict, path=None, profile_doc: dict | None = None) -> Figure:
    """bench_time for every run of a bench (one per dtype and op), a panel each, one above the other."""
    runs = doc["runs"]
    heights = [0.42 * len([r for r in run["candidates"] if r["kind"] != "host"]) + 0.9 for run in runs]
    fig = _figure(9, sum(heights) + 1.2)
    axes = fig.subplots(len(runs), 1, squeeze=False, height_ratios=heights)[:, 0]
    measured = {}
    for ax, run in zip(axes, runs):
        measured |= _draw_bench(ax, run, matching_run(profile_doc, run["shape"], pair(run)), label_floor=False)
        rows, cols = run["shape"]
        copy = run["copy"]
        ax.set_title(f"{_op_title(run)}, {run['dtype']}, {rows} x {cols}"
                     + (f": floor {copy['name']} {copy['median_ms']:.3g} ms" if copy else ": no floor timed"),
                     fontsize=9)
    _bench_legend(fig, axes[0], measured, floor_line=False)
    fig.suptitle(f"time against the floor on {doc['device']['name']} (forward: a copy of the same bytes; "
                 "backward: a two-read, one-write add)", fontsize=10)
    return _save(fig, path)


def _op_title(run: dict) -> str:
    return pair(run)[1].replace("_backward", " backward").replace("cross_entropy_grad", "cross-entropy and gradient")


def _draw_bench(ax, run: dict, profile_run: dict | None, label_floor: bool = True) -> dict:
    recs = [r for r in run["candidates"] if r["kind"] != "host"]
    copy = run["copy"]
    passes = cat.floor_passes(pair(run)[1])
    word = floor_word(pair(run)[1])
    measured = _measured_passes(profile_run)
    top = max([r["stats"]["max_ms"] / copy["median_ms"] for r in recs if r["stats"] and copy] or [2.0])
    for y, r in enumerate(recs):
        if r["stats"] is None or copy is None:
            label = (f"FAILED: {_short(r['reason'])}" if r["status"] == "failed" else
                     f"skipped: {_short(r['reason'])}" if r["status"] == "skipped" else f"no {word} to compare")
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
            ax.plot((t["reads"] + t["writes"]) / passes, y, "D", mfc="none", mec="0.2", ms=5)
        if r["name"] in measured:
            ax.plot(measured[r["name"]] / passes, y, "o", color="tab:orange", ms=4)
    if copy:
        what = "copy floor" if word == "copy" else "two-read, one-write floor"
        ax.axvline(1.0, color=CEILING_COLOR, linestyle="--", linewidth=1,
                   label=f"{what}: {copy['name']}, {copy['median_ms']:.3g} ms, "
                         f"{copy['useful_gbps']:.0f} GB/s useful" if label_floor else None)
    ax.set_yticks(range(len(recs)), [r["name"] for r in recs], fontsize=8)
    for tick, r in zip(ax.get_yticklabels(), recs):
        tick.set_color("black" if r["status"] == "ok" else FAILED_COLOR if r["status"] == "failed" else SKIPPED_COLOR)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel("time / time of a two-read, one-write add of the same size (median; bars min..max)"
                  if word == "floor" else
                  "time / time of a copy of the same bytes (median; bars min..max)")
    return measured


def _bench_legend(fig, ax, measured, floor_line: bool = True) -> None:
    if not floor_line:
        ax.plot([], [], "--", color=CEILING_COLOR, linewidth=1, label="the floor of the op (1.0)")
    ax.plot([], [], "D", mfc="none", mec="0.2", ms=5, label="traffic model's bytes at floor speed")
    if measured:
        ax.plot([], [], "o", color="tab:orange", ms=4, label="measured DRAM bytes (ncu) at floor speed")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=7)


def _measured_passes(profile_run: dict | None) -> dict[str, float]:
    """name -> measured (read + write) DRAM bytes / the tensor's bytes."""
    if not profile_run:
        return {}
    return {r["name"]: r["measured_passes"]["reads"] + r["measured_passes"]["writes"]
            for r in profile_run["candidates"] if r.get("measured_passes")}


# ------------------------------------------------------------ the sweep
def _groups(doc: dict) -> list:
    return list(dict.fromkeys(run.get("group") for run in doc["runs"]))


def _pairs(doc: dict) -> list:
    return list(dict.fromkeys(pair(run) for run in doc["runs"]))


@_default_style
def sweep(doc: dict, path=None) -> Figure:
    """Time / floor against row length (log scale), one panel per batch group (and
    a row of panels per dtype and op), one line per candidate with min..max bars;
    crosses mark failed points and hollow circles skipped ones, under the floor."""
    groups = [g for g in _groups(doc) if g != "extra"] or [None]  # the extra shapes are in the grid's figure
    pairs = _pairs(doc)
    labelled = pairs != [cat.DEFAULT]
    # at least the width of a legend of a dozen candidates
    fig = _figure(max(4.3 * len(groups) + 1.8, 10.0), 5.0 * len(pairs) - (0.6 * (len(pairs) - 1)))
    grid_axes = fig.subplots(len(pairs), len(groups), sharey=True, squeeze=False)
    for axes, (dtype, op) in zip(grid_axes, pairs):
        for ax, group in zip(axes, groups):
            runs = [run for run in doc["runs"] if run.get("group") == group and run["copy"] and pair(run) == (dtype, op)]
            _draw_sweep(ax, runs)
            ax.set_xlabel(f"row length ({dtype} elements)")
            title = _group_title(group, runs)
            ax.set_title(f"{dtype} {op}, {title}" if labelled else title, fontsize=9)
        word = floor_word(op)
        axes[0].set_ylabel(f"time / {word} time (1 = the floor)" if labelled else
                           "time / copy time of the same bytes (1 = the floor)")
        axes[0].set_ylim(bottom=0.9)
    first = grid_axes[0][0]
    first.plot([], [], "x", color=FAILED_COLOR, label="failed (marked below the floor)")
    first.plot([], [], "o", mfc="none", color="0.3", label="skipped: cannot run (below the floor)")
    first.plot([], [], "--", color=CEILING_COLOR, label="copy floor" if not labelled else "floor of the op")
    handles = {}
    for ax in grid_axes.ravel():
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=6, fontsize=7)
    what = "softmax" if not labelled else ", ".join(f"{d} {o}" for d, o in pairs)
    fig.suptitle(f"{what} sweep on {doc['device']['name']}: time against the "
                 f"{'copy floor' if not labelled else 'floor of each op'}", fontsize=10)
    return _save(fig, path)


def _draw_sweep(ax, runs: list) -> None:
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
    ax.grid(True, alpha=0.3)


def _group_title(group, runs) -> str:
    if group is None:
        return "rows chosen so each tensor is the same size"
    return f"batch: {group}" + ("" if "rows" in group else f" per tensor ({len(runs)} shapes)")


@_default_style
def grid(doc: dict, path=None) -> Figure:
    """Heat map of auto's time / the best peer's (torch.softmax, torch.compile,
    quack) by batch group and row length; below 1 auto is faster."""
    table = grid_rows(doc)
    pairs = _pairs(doc)
    labelled = pairs != [cat.DEFAULT]
    groups = [(p, g) for p in pairs for g in _groups(doc)
              if any((t["dtype"], t["op"]) == p and t["group"] == g for t in table)]
    cols = sorted({g["cols"] for g in table})
    fig = _figure(1.05 * len(cols) + 2.5, max(3.4, 0.95 * len(groups) + 1.8))
    ax = fig.subplots()
    values = [[math.nan] * len(cols) for _ in groups]
    norm = TwoSlopeNorm(vmin=0.5, vcenter=1.0, vmax=2.0)
    for g in table:
        i, j = groups.index(((g["dtype"], g["op"]), g["group"])), cols.index(g["cols"])
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
    ax.set_yticks(range(len(groups)), [(f"{d} {o}, " if labelled else "") + (str(g) if g is not None else "same size")
                                       for (d, o), g in groups], fontsize=8)
    ax.set_xlabel("row length (elements)" if labelled else "row length (float32 elements)")
    ax.set_ylabel("dtype, op, batch" if labelled else "batch")
    peers = [p for d, o in pairs for p in cat.PEERS_BY_OP[o]]
    peers = list(dict.fromkeys(peers))
    timed = [p for p in peers if any(c["name"] == p and c.get("status") == "ok"
                                     for run in doc["runs"] for c in run["candidates"])]
    absent = [p for p in peers if p not in timed]
    what = "" if not labelled else " (" + "; ".join(f"{d} {o}" for d, o in pairs) + ")"
    title = f"auto against the best of {', '.join(timed) or 'no peer'}{what} on {doc['device']['name']}"
    ax.set_title(title + (f" ({', '.join(absent)}: not timed)" if absent else ""), fontsize=9)
    return _save(fig, path)


# ------------------------------------------------------------ measured traffic
@_default_style
def traffic(profile_doc: dict, path=None) -> Figure:
    """For each shape: the traffic model's passes over the tensor (hollow bars)
    beside the passes ncu measured (reads solid, writes hatched), per candidate."""
    runs = profile_doc["runs"]
    n = len(runs)
    ncols = min(n, 4)
    nrows = -(-n // ncols)
    fig = _figure(max(4.4 * ncols + 0.5, 8.0), 3.6 * nrows + 0.8)  # at least the width of the title and legend
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


# ------------------------------------------------------------ in context
@_default_style
def context(doc: dict, path=None) -> Figure:
    """Left: each round's GEMM alone (one line per candidate it stood beside) against the
    block of GEMMs timed before the rounds, which a naive figure subtracts.  Right: per
    candidate, its time alone (hollow), in context (the round-by-round difference: median,
    bar from the first to the third quartile) and the naive figure (x)."""
    fig = _figure(11.0, 0.45 * len(doc["candidates"]) + 3.2)
    wander, cost = fig.subplots(1, 2, width_ratios=(1.1, 1.0))
    block = doc["gemm_block_ms"]
    wander.axhspan(min(block), max(block), color="0.85", label=f"the block of {len(block)} GEMMs before the rounds")
    rows = ctx.summarize(doc)
    kinds = {r["name"]: r["kind"] for r in doc["candidates"]}
    for s, r in zip(rows, doc["candidates"]):
        if s["status"] == "ok":
            wander.plot(r["times_ms"]["gemm"], color=color(s["name"], kinds[s["name"]]), linewidth=0.8,
                        label=f"beside {s['name']}")
    wander.set_xlabel("round", fontsize=8)
    wander.set_ylabel("the GEMM alone, ms", fontsize=8)
    wander.set_title("The GEMM's own time, round by round", fontsize=9)
    wander.legend(fontsize=6, loc="best")
    for y, s in enumerate(rows):
        c = color(s["name"], kinds[s["name"]])
        if s["status"] != "ok":
            cost.text(0.0, y, f" {s['status']}: {_short(s['reason'], 50)}", va="center", fontsize=6,
                      color=FAILED_COLOR if s["status"] == "failed" else SKIPPED_COLOR)
            continue
        d = s["difference"]
        cost.barh(y - 0.2, s["alone_ms"], height=0.36, fill=False, edgecolor=c, linewidth=1.2)
        cost.barh(y + 0.2, d["median_ms"], height=0.36, color=c, edgecolor="0.3", linewidth=0.5,
                  xerr=[[d["median_ms"] - d["q25_ms"]], [d["q75_ms"] - d["median_ms"]]],
                  error_kw={"elinewidth": 0.8, "capsize": 2})
        cost.plot([s["naive_ms"]], [y + 0.2], marker="x", color=FAILED_COLOR, markersize=6)
        cost.text(max(d["q75_ms"], s["alone_ms"], s["naive_ms"]), y, f"  {d['median_ms']:.3f} ms in context",
                  va="center", fontsize=6)
    cost.axvline(0.0, color="0.3", linewidth=0.6)
    cost.set_yticks(range(len(rows)), [s["name"] for s in rows], fontsize=7)
    cost.set_ylim(len(rows) - 0.4, -0.6)  # the first candidate on top; skipped ones' lines inside
    cost.set_xlabel("ms", fontsize=8)
    cost.set_title("Each candidate: alone, in context, naive", fontsize=9)
    fig.legend(handles=[Patch(fill=False, edgecolor="0.3", label="alone on the logits (median)"),
                        Patch(color="0.5", label="in context: step less the GEMM beside it (median, quartiles)"),
                        Line2D([], [], marker="x", linestyle="", color=FAILED_COLOR,
                               label="naive: steps less the block's median")],
               fontsize=7, loc="outside lower center", ncol=3)
    g = doc["method"]["gemm"]
    fig.suptitle(f"A softmax after the GEMM of its logits ({g['m']} x {g['k']} @ {g['k']} x {g['n']} {g['dtype']}) "
                 f"on {doc['device']['name']}, {doc['method']['rounds']} interleaved rounds", fontsize=10)
    return _save(fig, path)


# ------------------------------------------------------------ files
def write_all(doc: dict, out_dir, profile_doc: dict | None = None, suffix: str = "") -> list[Path]:
    """The PNGs of one document, named by what they show, with `suffix` before
    ".png": a bench's bench_time.png (bench_time_2.png, ... for further shapes;
    a bench of several dtypes or ops: one figure with a panel per run), a
    sweep's sweep.png and grid.png, a profile's traffic.png, a context's context.png.  `profile_doc` adds
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
    if doc["kind"] == "context":
        paths = [out_dir / f"context{suffix}.png"]
        context(doc, paths[0])
        return paths
    if len({pair(run) for run in doc["runs"]}) > 1:  # several dtypes or ops: one figure, a panel each
        paths = [out_dir / f"bench_time{suffix}.png"]
        bench_panels(doc, paths[0], profile_doc)
        return paths
    paths = []
    for i, run in enumerate(doc["runs"]):
        paths.append(out_dir / (f"bench_time{suffix}.png" if i == 0 else f"bench_time{suffix}_{i + 1}.png"))
        bench_time(run, paths[-1], doc, profile_run=matching_run(profile_doc, run["shape"], pair(run)))
    return paths


def file_suffix(stem: str, kind: str) -> str:
    """"" for bench.json of a bench, "_rows" for profile_rows.json of a profile,
    "_r" for r.json: figures of several files of one kind keep apart."""
    if stem == kind:
        return ""
    return stem[len(kind):] if stem.startswith(kind + "_") else f"_{stem}"


def matching_run(profile_doc: dict | None, shape, dtype_op=("float32", "softmax")) -> dict | None:
    """The run of a profile document at `shape` (and dtype and op), if any."""
    if not profile_doc:
        return None
    return next((run for run in profile_doc["runs"] if run["shape"] == list(shape) and pair(run) == tuple(dtype_op)),
                None)


@_default_style
def to_png(fig: Figure) -> bytes:
    """PNG bytes of a figure, e.g. for IPython.display.Image(data=...)."""
    buf = io.BytesIO()
    _savefig(fig, buf, 100, format="png")
    return buf.getvalue()
