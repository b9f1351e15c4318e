"""Tables of results documents: plain text for people, CSV for tools.

Times are set against the copy of the same bytes (time / copy time): a
softmax must read and write its tensor at least once, so 1.00 is the floor.
Useful bandwidth is one read plus one write of the tensor / time, and can
never exceed the copy's.  Skipped and failed candidates are named with why.
"""

from __future__ import annotations

import csv
import io

from . import candidates as cat

PEERS = cat.PEERS


def format_traffic(rows: int, cols: int, copy_ms: float | None = None, dev=None) -> str:
    """Each candidate's traffic model for a shape (auto's is that of the variant it
    picks on `dev`, the reference H200 when None); with a copy time, the bandwidth
    each would need to finish in that time."""
    dev = dev or cat.reference_device()
    head = f"{'candidate':<18} {'reads':>5} {'writes':>6} {'B/elem':>6} {'GB':>7}"
    if copy_ms:
        head += f" {'GB/s to match copy':>19}"
    lines = [f"{rows} x {cols} float32 ({rows * cols * cat.ITEMSIZE / 1e9:.2f} GB per tensor); "
             f"auto as picked on {dev.name}", head]
    for c in cat.candidates():
        if c.kind == "host":
            continue
        c = cat.resolve(c, rows, cols, dev)
        gb = c.traffic_bytes(rows, cols) / 1e9
        line = f"{c.name:<18} {c.reads:>5} {c.writes:>6} {(c.reads + c.writes) * cat.ITEMSIZE:>6} {gb:>7.1f}"
        if copy_ms:
            line += f" {gb / (copy_ms * 1e-3):>19.0f}"
        if c.name == "auto":
            line += f"  ({c.model.split(':')[0]})"
        lines.append(line)
    return "\n".join(lines)


def format_run(run: dict) -> str:
    rows, cols = run["shape"]
    head = (f"{rows} x {cols} {run['dtype']}: {run['data_bytes'] / 1e9:.2f} GB per tensor, "
            f"{run['l2_multiple']:.1f}x the L2")
    copy = run["copy"]
    if copy:
        head += f"; copy ceiling {copy['name']}: {copy['median_ms']:.3f} ms, {copy['useful_gbps']:.0f} GB/s"
    columns = (f"{'candidate':<18} {'median ms':>10} {'min..max ms':>17} {'spread':>7} {'x copy':>7} "
               f"{'useful GB/s':>11} {'rel err':>8}  traffic model")
    lines = [head, columns]
    for r in run["candidates"]:
        if r["kind"] == "host":
            continue
        t = r["traffic"]
        s = r["stats"]
        if s is None:
            lines.append(f"{r['name']:<18} {r['status'].upper()}: {r['reason']}")
            continue
        ratio = f"{r['vs_copy_time']:.2f}" if r["vs_copy_time"] else "-"
        err = r["check"]["relative_error"] if r["check"] else None
        lines.append(f"{r['name']:<18} {s['median_ms']:>10.3f} {s['min_ms']:>8.3f}..{s['max_ms']:<8.3f} "
                     f"{s['spread']:>7.1%} {ratio:>7} {r['useful_gbps']:>11.0f} "
                     f"{(f'{err:.1e}' if err is not None else '-'):>8}  {t['reads']}r+{t['writes']}w")
    hosts = [r for r in run["candidates"] if r["kind"] == "host"]
    if hosts:
        lines.append("host time per call (microseconds, a loop of calls synchronized once):")
        for r in hosts:
            h = r["host"]
            if h is None:
                lines.append(f"  {r['name']:<20} {r['status'].upper()}: {r['reason']}")
            else:
                lines.append(f"  {r['name']:<20} median {h['median_us']:6.1f}  min {h['min_us']:6.1f}  "
                             f"max {h['max_us']:8.1f}  ({h['repeats']} calls; {r['traffic']['model']})")
    if run["l2_multiple"] < 4:
        lines.append(f"note: the input is only {run['l2_multiple']:.1f}x the L2, so timings may come partly from cache")
    return "\n".join(lines)


def best_peer(run: dict) -> dict | None:
    """The timed peer (torch.softmax, torch.compile, quack) with the lowest time / copy."""
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
                    "auto": a, "auto_status": auto["status"] if auto else "absent",
                    "peer": p, "peer_name": peer["name"] if peer else None,
                    "auto_vs_peer": a / p if a and p else None})
    return out


def format_grid(doc: dict) -> str:
    """The table "shape | auto / copy | best peer / copy (name) | auto / best peer",
    then, per candidate, every time / copy or why it has none."""
    lines = [f"{'shape':>17} | {'auto / copy':>11} | {'best peer / copy (name)':<30} | auto / best peer"]
    for g in grid_rows(doc):
        auto = f"{g['auto']:.2f}" if g["auto"] else g["auto_status"]
        peer = f"{g['peer']:.2f} ({g['peer_name']})" if g["peer"] else "none timed"
        ratio = f"{g['auto_vs_peer']:.2f}" if g["auto_vs_peer"] else "-"
        lines.append(f"{g['rows']:>7} x {g['cols']:<7} | {auto:>11} | {peer:<30} | {ratio}")
    lines += ["", "time / copy per candidate; why not where not timed:"]
    for run in doc["runs"]:
        rows, cols = run["shape"]
        cells = []
        for r in run["candidates"]:
            if r["vs_copy_time"]:
                cells.append(f"{r['name']} {r['vs_copy_time']:.2f}")
            else:
                cells.append(f"{r['name']} {r['status'].upper()} ({(r['reason'] or '')[:80]})")
        lines.append(f"{rows} x {cols}: " + "; ".join(cells))
    return "\n".join(lines)


def format_document(doc: dict) -> str:
    d, v = doc["device"], doc["versions"]
    where = f"{d['name']} ({d['sm_count']} SMs, L2 {d['l2_bytes'] / 2**20:.0f} MiB)"
    lines = [f"{doc['kind']} on {where}, {doc['created']}",
             f"driver CUDA {v['driver'] or 'none'}, runtime CUDA {v['runtime']}, CuPy {v['cupy']}, "
             f"NumPy {v['numpy']}, torch {v['torch'] or 'absent'}, quack {v.get('quack') or 'absent'}",
             f"command: {doc['command']}", ""]
    if doc["kind"] == "sweep":
        lines.append(format_grid(doc))
    else:
        lines.extend(format_run(run) for run in doc["runs"])
    return "\n".join(lines)


CSV_FIELDS = ("rows", "cols", "group", "name", "kind", "status", "reason", "median_ms", "min_ms", "max_ms",
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
                        "name": r["name"], "kind": r["kind"], "status": r["status"], "reason": r["reason"],
                        "median_ms": s.get("median_ms"), "min_ms": s.get("min_ms"), "max_ms": s.get("max_ms"),
                        "spread": s.get("spread"), "vs_copy_time": r["vs_copy_time"],
                        "useful_gbps": r["useful_gbps"], "relative_error": chk.get("relative_error"),
                        "row_sum_error": last.get("row_sum_error"), "host_median_us": h.get("median_us"),
                        "model_reads": r["traffic"]["reads"], "model_writes": r["traffic"]["writes"]})
    return buf.getvalue()


def format_checks(checks: dict) -> str:
    return "\n".join(f"{name:<18} {v:.2e}" if isinstance(v, float) else f"{name:<18} {v}" for name, v in checks.items())
