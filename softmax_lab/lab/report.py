"""Tables of results documents: plain text for people, CSV for tools.

Times are set against the floor of the op: a forward op must read and write
its tensor at least once, so it is set against a copy of the same bytes ("x
copy"); a backward op reads y and dy and writes dx, so it is set against a
two-read, one-write add of the same size ("x floor").  1.00 is the floor.
Useful bandwidth is the floor's bytes / time.  Skipped and failed candidates
are named with why.  dtype_op_table() gives, for each (dtype, op) of a
document, auto and each peer / the floor: the issue's table from one run.
"""

from __future__ import annotations

import csv
import io

from ..problem import DTYPES, LOSS_OPS
from . import candidates as cat
from .timing import format_clocks

PEERS = cat.PEERS


def format_traffic(rows: int, cols: int, copy_ms: float | None = None, dev=None, dtype: str = "float32",
                   op: str = "softmax") -> str:
    """Each candidate's traffic model for a shape, dtype and op (auto's is that of
    the variant it picks on `dev`, the reference H200 when None); with a copy (or
    floor) time, the bandwidth each would need to finish in that time."""
    dev = dev or cat.reference_device()
    itemsize = DTYPES[dtype]
    head = f"{'candidate':<26} {'reads':>5} {'writes':>6} {'B/elem':>6} {'GB':>7}"
    if copy_ms:
        head += f" {'GB/s to match ' + floor_word(op):>20}"
    lines = [f"{rows} x {cols} {dtype} {op} ({rows * cols * itemsize / 1e9:.2f} GB per tensor); "
             f"auto as picked on {dev.name}", head]
    for c in cat.candidates(dtype, op):
        if c.kind == "host":
            continue
        try:
            c = cat.resolve(c, rows, cols, dev, dtype, op)
        except IndexError:  # no variant of the op in this build: auto keeps its nominal traffic
            pass
        gb = c.traffic_bytes(rows, cols, itemsize) / 1e9
        line = f"{c.name:<26} {c.reads:>5} {c.writes:>6} {(c.reads + c.writes) * itemsize:>6} {gb:>7.1f}"
        if copy_ms:
            line += f" {gb / (copy_ms * 1e-3):>20.0f}"
        if c.name == "auto":
            line += f"  ({c.model.split(':')[0]})"
        lines.append(line)
    return "\n".join(lines)


def floor_word(op: str) -> str:
    """What times are set against: "copy" for a forward op (and a loss with its gradient),
    "floor" for a backward one, "read" for a loss alone."""
    if op == "cross_entropy":
        return "read"
    return "floor" if cat.is_backward(op) else "copy"


def run_label(run: dict) -> str:
    """"4096 x 393216 bfloat16 softmax_backward"."""
    return f"{run['shape'][0]} x {run['shape'][1]} {run['dtype']} {run.get('op', 'softmax')}"


def format_run(run: dict) -> str:
    op = run.get("op", "softmax")
    word = floor_word(op)
    head = f"{run_label(run)}: {run['data_bytes'] / 1e9:.2f} GB per tensor, {run['l2_multiple']:.1f}x the L2"
    copy = run["copy"]
    if copy:
        what = {"copy": "copy ceiling", "read": "floor (one read)"}.get(word, "floor (two reads, one write)")
        head += f"; {what} {copy['name']}: {copy['median_ms']:.3f} ms, {copy['useful_gbps']:.0f} GB/s"
    err = "rel err" if run["dtype"] == "float32" else "ulp err"
    columns = (f"{'candidate':<26} {'median ms':>10} {'min..max ms':>17} {'spread':>7} {'x ' + word:>8} "
               f"{'useful GB/s':>11} {err:>8}  traffic model")
    lines = [head, columns]
    for r in run["candidates"]:
        if r["kind"] == "host":
            continue
        t = r["traffic"]
        s = r["stats"]
        if s is None:
            lines.append(f"{r['name']:<26} {r['status'].upper()}: {r['reason']}")
            continue
        ratio = f"{r['vs_copy_time']:.2f}" if r["vs_copy_time"] else "-"
        key = "relative_error" if run["dtype"] == "float32" else "ulp_error"
        e = r["check"].get(key) if r["check"] else None
        shown = "-" if e is None else f"{e:.1e}" if key == "relative_error" else f"{e:.2f}"
        lines.append(f"{r['name']:<26} {s['median_ms']:>10.3f} {s['min_ms']:>8.3f}..{s['max_ms']:<8.3f} "
                     f"{s['spread']:>7.1%} {ratio:>8} {r['useful_gbps']:>11.0f} "
                     f"{shown:>8}  {t['reads']}r+{t['writes']}w")
    hosts = [r for r in run["candidates"] if r["kind"] == "host"]
    if hosts:
        lines.append("host time per call (microseconds, a loop of calls synchronized once):")
        for r in hosts:
            h = r["host"]
            if h is None:
                lines.append(f"  {r['name']:<24} {r['status'].upper()}: {r['reason']}")
            else:
                lines.append(f"  {r['name']:<24} median {h['median_us']:6.1f}  min {h['min_us']:6.1f}  "
                             f"max {h['max_us']:8.1f}  ({h['repeats']} calls; {r['traffic']['model']})")
    sampled = [r for r in run["candidates"] if r.get("clocks")]
    if sampled:
        lines.append("clocks while the timed calls ran (NVML):")
        lines += [f"  {r['name']:<24} {format_clocks(r['clocks'])}" for r in sampled]
    if run["l2_multiple"] < 4:
        lines.append(f"note: the input is only {run['l2_multiple']:.1f}x the L2, so timings may come partly from cache")
    return "\n".join(lines)


def best_peer(run: dict) -> dict | None:
    """The timed peer of the run's op (torch, torch.compile, quack, Liger) with the lowest time / floor."""
    peers = [r for r in run["candidates"] if r["name"] in PEERS and r["vs_copy_time"]]
    return min(peers, key=lambda r: r["vs_copy_time"], default=None)


def grid_rows(doc: dict) -> list[dict]:
    """One row per run: shape, group, auto / copy, best peer / copy and its name,
    auto / best peer (None where not timed)."""
    out = []
    for run in doc["runs"]:
        auto = next((r for r in run["candidates"] if r["name"] == "auto"), None)
        peer = best_peer(run)
        a = auto["vs_copy_time"] if auto else None
        p = peer["vs_copy_time"] if peer else None
        out.append({"rows": run["shape"][0], "cols": run["shape"][1], "group": run.get("group"),
                    "dtype": run["dtype"], "op": run.get("op", "softmax"),
                    "auto": a, "auto_status": auto["status"] if auto else "absent",
                    "peer": p, "peer_name": peer["name"] if peer else None,
                    "auto_vs_peer": a / p if a and p else None})
    return out


def format_grid(doc: dict) -> str:
    """The table "shape | auto / copy | best peer / copy (name) | auto / best peer",
    then, per candidate, every time / copy or why it has none."""
    pairs = list(dict.fromkeys((g["dtype"], g["op"]) for g in grid_rows(doc)))
    labelled = pairs != [cat.DEFAULT]
    lines = [f"{'shape':>17} {'dtype op':<30} | {'auto / floor':>12} | "
             f"{'best peer / floor (name)':<37} | auto / best peer"] if labelled else [
        f"{'shape':>17} | {'auto / copy':>11} | {'best peer / copy (name)':<30} | auto / best peer"]
    for g in grid_rows(doc):
        auto = f"{g['auto']:.2f}" if g["auto"] else g["auto_status"]
        peer = f"{g['peer']:.2f} ({g['peer_name']})" if g["peer"] else "none timed"
        ratio = f"{g['auto_vs_peer']:.2f}" if g["auto_vs_peer"] else "-"
        if labelled:
            lines.append(f"{g['rows']:>7} x {g['cols']:<7} {g['dtype'] + ' ' + g['op']:<30} | {auto:>12} | "
                         f"{peer:<37} | {ratio}")
        else:
            lines.append(f"{g['rows']:>7} x {g['cols']:<7} | {auto:>11} | {peer:<30} | {ratio}")
    lines += ["", "time / copy (backward: / floor) per candidate; why not where not timed:"]
    for run in doc["runs"]:
        rows, cols = run["shape"]
        cells = []
        for r in run["candidates"]:
            if r["vs_copy_time"]:
                cells.append(f"{r['name']} {r['vs_copy_time']:.2f}")
            else:
                cells.append(f"{r['name']} {r['status'].upper()} ({(r['reason'] or '')[:80]})")
        label = run_label(run) if labelled else f"{rows} x {cols}"
        lines.append(f"{label}: " + "; ".join(cells))
    return "\n".join(lines)


def dtype_op_rows(doc: dict) -> list[dict]:
    """One row per run: shape, dtype, op, the floor's name and ms, auto / floor, and
    for each peer role (torch, compile, quack, liger) its time / floor, or None with why
    (the status and reason; "-" where the op has no such peer)."""
    out = []
    for run in doc["runs"]:
        by_name = {r["name"]: r for r in run["candidates"]}
        op = run.get("op", "softmax")
        row = {"rows": run["shape"][0], "cols": run["shape"][1], "dtype": run["dtype"], "op": op,
               "floor": run["copy"]["name"] if run["copy"] else None,
               "floor_ms": run["copy"]["median_ms"] if run["copy"] else None, "cells": {}}
        for role, name in [("auto", "auto")] + [(cat.PEER_ROLE[n], n) for n in cat.PEERS_BY_OP[op]]:
            r = by_name.get(name)
            row["cells"][role] = (r["vs_copy_time"], None) if r and r["vs_copy_time"] else (
                None, f"{r['status']}: {r['reason']}" if r else "not run")
        out.append(row)
    return out


def format_dtype_op_table(doc: dict) -> str:
    """The table by dtype and op: time / floor (a copy of the same bytes forward, a
    two-read, one-write add backward) for auto and each peer, from one document."""
    rows = dtype_op_rows(doc)
    roles = ("auto",) + tuple(r for r in cat.ROLES if any(r in row["cells"] for row in rows))  # the docs' ops' peers
    losses = "cross_entropy: one read of the logits, cross_entropy_grad: a copy; " if any(
        row["op"] in LOSS_OPS for row in rows) else ""
    lines = [f"{'shape':>17} {'dtype':<9} {'op':<21} {'floor (ms)':<27} " + " ".join(f"{r:>8}" for r in roles),
             "time / floor; forward: floor = a copy of the same bytes, backward: a two-read, one-write add; "
             f"{losses}'-': no such peer; 'skip'/'fail': see the run's table"]
    for row in rows:
        floor = f"{row['floor']} ({row['floor_ms']:.3f})" if row["floor"] else "none timed"
        cells = []
        for role in roles:
            if role not in row["cells"]:
                cells.append("-")
                continue
            v, why = row["cells"][role]
            cells.append(f"{v:.2f}" if v else "skip" if why.startswith("skipped") else "fail" if
                         why.startswith("failed") else "-")
        lines.append(f"{row['rows']:>7} x {row['cols']:<7} {row['dtype']:<9} {row['op']:<21} {floor:<27} "
                     + " ".join(f"{c:>8}" for c in cells))
    return "\n".join(lines)


def format_document(doc: dict) -> str:
    d, v = doc["device"], doc["versions"]
    where = f"{d['name']} ({d['sm_count']} SMs, L2 {d['l2_bytes'] / 2**20:.0f} MiB)"
    lines = [f"{doc['kind']} on {where}, {doc['created']}",
             f"driver CUDA {v['driver'] or 'none'}, runtime CUDA {v['runtime']}, CuPy {v['cupy']}, "
             f"NumPy {v['numpy']}, torch {v['torch'] or 'absent'}, quack {v.get('quack') or 'absent'}",
             f"command: {doc['command']}"]
    loop = doc.get("method", {}).get("loop_calls")
    if loop:
        lines.append(f"times: per call, in loops of {loop} back-to-back calls, host included (--loop)")
    lines.append("")
    if doc["kind"] == "sweep":
        lines.append(format_grid(doc))
    else:
        lines.append("\n\n".join(format_run(run) for run in doc["runs"]))
    if {(run["dtype"], run.get("op", "softmax")) for run in doc["runs"]} != {cat.DEFAULT}:
        lines += ["", "by dtype and op:", format_dtype_op_table(doc)]
    return "\n".join(lines)


CSV_FIELDS = ("rows", "cols", "group", "dtype", "op", "name", "kind", "status", "reason", "median_ms", "min_ms", "max_ms",
              "spread", "vs_copy_time", "useful_gbps", "relative_error", "row_sum_error", "host_median_us",
              "model_reads", "model_writes")


def to_csv(doc: dict) -> str:
    """One line per candidate and run, CSV_FIELDS columns; empty where not measured."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for run in doc["runs"]:
        for r in run["candidates"]:
            s, chk, h = r["stats"] or {}, r["check"] or {}, r["host"] or {}
            last = (chk.get("calls") or [{}])[-1]
            w.writerow({"rows": run["shape"][0], "cols": run["shape"][1], "group": run.get("group"),
                        "dtype": run["dtype"], "op": run.get("op", "softmax"),
                        "name": r["name"], "kind": r["kind"], "status": r["status"], "reason": r["reason"],
                        "median_ms": s.get("median_ms"), "min_ms": s.get("min_ms"), "max_ms": s.get("max_ms"),
                        "spread": s.get("spread"), "vs_copy_time": r["vs_copy_time"],
                        "useful_gbps": r["useful_gbps"], "relative_error": chk.get("relative_error"),
                        "row_sum_error": last.get("row_sum_error"), "host_median_us": h.get("median_us"),
                        "model_reads": r["traffic"]["reads"], "model_writes": r["traffic"]["writes"]})
    return buf.getvalue()


def format_checks(checks: dict) -> str:
    return "\n".join(f"{name:<18} {v:.2e}" if isinstance(v, float) else f"{name:<18} {v}" for name, v in checks.items())
