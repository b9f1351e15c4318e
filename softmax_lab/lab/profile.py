"""softmax-lab profile: what Nsight Compute counts for each candidate at a shape,
beside the traffic model.

For each candidate and shape, a child process (`python -m softmax_lab.lab.profile
--child ...`) makes the input, runs the candidate once (compiling, warming up),
then runs it CALLS times between cudaProfilerStart and cudaProfilerStop.  ncu,
started with --profile-from-start off, profiles exactly the kernels of those
calls, all of them: a variant of several kernels (multi_block, cupyx) is summed
per call.  parse_csv reads ncu's CSV; summarize turns the launches into one
call's measured traffic.  The document follows profile_schema.json.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..problem import DTYPES, ITEMSIZE
from . import candidates as cat
from . import records

SCHEMA = "softmax-lab-profile/1"
CALLS = 2
HEADLINE = (4096, 393216)
# Row lengths for "what three_pass really reads": 1 GiB tensors, rows a power of two.
SWEEP_COLS = (1024, 4096, 32000, 65536, 128256, 393216, 1048576)
SWEEP_ELEMENTS = 2**28
METRICS = {  # ncu metric -> field of the record
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "gpu__time_duration.sum": "duration_ns",
}
UNITS = {"": 1.0, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12, "kibyte": 2**10,
         "mibyte": 2**20, "gibyte": 2**30, "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9,
         "%": 1.0, "register/thread": 1.0}
CHILD_TIMEOUT_S = 600


def sweep_shapes(cols=SWEEP_COLS, elements: int = SWEEP_ELEMENTS) -> list[tuple[int, int]]:
    return [(2 ** round(math.log2(max(1.0, elements / c))), c) for c in cols]


def ncu_command(ncu: str, name: str, rows: int, cols: int, calls: int, result: Path, dtype: str = "float32",
                op: str = "softmax") -> list[str]:
    """The ncu command line that profiles one candidate in a child process."""
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--metrics", ",".join(METRICS),
            "--csv", "--print-units", "base",
            sys.executable, "-m", "softmax_lab.lab.profile", "--child", name, "--rows", str(rows), "--cols", str(cols),
            "--calls", str(calls), "--result", str(result)] + (
                ["--dtype", dtype, "--op", op] if (dtype, op) != cat.DEFAULT else [])


# ------------------------------------------------------------ ncu's CSV
def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_csv(text: str) -> list[dict]:
    """One dict per profiled launch, {"kernel": name, field: value in base units}
    (bytes, ns, %, registers), from ncu's --csv output: the raw page (a column per
    metric, a row of units under the header) or the details page (a row per metric).
    Lines before the header (ncu's ==PROF== messages, the program's output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    col = {name: i for i, name in enumerate(header)}
    if "Metric Name" in col:  # the details page: one row per (launch, metric)
        launches: dict[str, dict] = {}
        for r in body:
            metric = r[col["Metric Name"]]
            if metric not in METRICS:
                continue
            launch = launches.setdefault(r[col["ID"]], {"kernel": r[col["Kernel Name"]]})
            value = _number(r[col["Metric Value"]])
            unit = UNITS.get(r[col["Metric Unit"]].strip().lower(), 1.0)
            launch[METRICS[metric]] = None if value is None else value * unit
        return list(launches.values())
    units = body[0] if body and body[0][col["ID"]] == "" else None  # the raw page's row of units
    launches = []
    for r in body[1:] if units else body:
        launch = {"kernel": r[col["Kernel Name"]]}
        for metric, field in METRICS.items():
            if metric not in col:
                launch[field] = None
                continue
            value = _number(r[col[metric]])
            scale = UNITS.get(units[col[metric]].strip().lower(), 1.0) if units else 1.0
            launch[field] = None if value is None else value * scale
        launches.append(launch)
    return launches


def summarize(launches: list[dict], calls: int) -> dict:
    """One call's measurement from the launches of `calls` calls: bytes and time
    summed per call; L2 hit rate, DRAM throughput and occupancy weighted by each
    launch's duration; the most registers any kernel uses."""
    if not launches or calls < 1:
        raise ValueError("no launches to summarize")
    duration = [launch.get("duration_ns") or 0.0 for launch in launches]
    total = sum(duration)

    def per_call(field):
        values = [launch.get(field) for launch in launches]
        return None if None in values else sum(values) / calls

    def weighted(field):
        pairs = [(launch.get(field), d) for launch, d in zip(launches, duration)]
        if total <= 0 or any(v is None for v, _ in pairs):
            return None
        return sum(v * d for v, d in pairs) / total

    regs = [launch.get("registers_per_thread") for launch in launches if launch.get("registers_per_thread")]
    ns = per_call("duration_ns")
    return {
        "kernels": list(dict.fromkeys(launch["kernel"] for launch in launches)),
        "launches_per_call": len(launches) / calls,
        "dram_read_bytes": per_call("dram_read_bytes"), "dram_write_bytes": per_call("dram_write_bytes"),
        "l2_hit_rate_pct": weighted("l2_hit_rate_pct"), "dram_throughput_pct": weighted("dram_throughput_pct"),
        "registers_per_thread": int(max(regs)) if regs else None, "occupancy_pct": weighted("occupancy_pct"),
        "duration_ms": ns / 1e6 if ns is not None else None,
    }


def candidate_record(c: cat.Candidate, rows: int, cols: int, status: str, reason: str | None = None,
                     measured: dict | None = None, itemsize: int = ITEMSIZE) -> dict:
    data = rows * cols * itemsize
    rec = {"name": c.name, "kind": c.kind, "status": status, "reason": reason,
           "model": {"reads": c.reads, "writes": c.writes, "bytes": c.traffic_bytes(rows, cols, itemsize),
                     "model": c.model},
           "measured": measured, "measured_passes": None}
    if measured and measured["dram_read_bytes"] is not None and measured["dram_write_bytes"] is not None:
        rec["measured_passes"] = {"reads": measured["dram_read_bytes"] / data,
                                  "writes": measured["dram_write_bytes"] / data}
    return rec


# ------------------------------------------------------------ the parent
def run_profile(shapes, names=None, *, ncu: str = "ncu", calls: int = CALLS, progress=print,
                command: str | None = None, dtype: str = "float32", op: str = "softmax") -> dict:
    """Profiles each candidate of `dtype` and `op` (all but the host ones, or those
    named) at each (rows, cols) under ncu; returns a profile document."""
    from ..device import device_info, require_device
    from . import bench

    exe = shutil.which(ncu)
    if exe is None:
        raise FileNotFoundError(f"Nsight Compute ({ncu!r}) is not on PATH; install it or pass --ncu PATH")
    dev = device_info(require_device())
    chosen = [c for c in cat.select(names, dtype=dtype, op=op) if c.kind != "host"]
    itemsize = DTYPES[dtype]
    runs = []
    with tempfile.TemporaryDirectory(prefix="softmax_lab_profile_") as tmp:
        for rows, cols in shapes:
            recs = []
            for c in chosen:
                try:
                    c = cat.resolve(c, rows, cols, dev, dtype, op)
                except Exception as e:  # auto with no variant of the op in this build
                    recs.append(candidate_record(c, rows, cols, "failed", f"raised {cat.one_line(e)}", None,
                                                 itemsize))
                    continue
                result = Path(tmp) / f"{c.name}.json"
                result.unlink(missing_ok=True)
                p = subprocess.run(ncu_command(exe, c.name, rows, cols, calls, result, dtype, op),
                                   capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
                recs.append(_from_child(c, rows, cols, p, result, calls, itemsize))
                if progress:
                    r = recs[-1]
                    progress(f"{rows} x {cols} {c.name}: {r['status']}"
                             + (f" ({r['reason']})" if r["reason"] else ""), file=sys.stderr)
            runs.append({"shape": [rows, cols], "dtype": dtype, "op": op, "data_bytes": rows * cols * itemsize,
                         "candidates": recs})
    torch, _ = cat.torch_status()
    device = records.device_record(dev)
    doc = records.make_document("profile", runs, device, bench.versions(torch),
                                {"calls": calls, "metrics": list(METRICS), "tool": _ncu_version(exe),
                                 "command": " ".join(ncu_command("ncu", "NAME", 0, 0, calls, Path("RESULT"))),
                                 "summed": "bytes and time summed over one call's kernels; rates and occupancy "
                                           "weighted by duration; registers: the most of any kernel"},
                                command)
    doc["schema"] = SCHEMA
    return doc


def _from_child(c, rows, cols, p, result: Path, calls: int, itemsize: int = ITEMSIZE) -> dict:
    child = json.loads(result.read_text()) if result.is_file() else None
    if child is None:
        tail = " ".join((p.stderr or p.stdout).split()[-40:])
        return candidate_record(c, rows, cols, "failed", f"ncu exited {p.returncode} without a result: {tail}",
                                None, itemsize)
    if child["status"] != "ok":
        return candidate_record(c, rows, cols, child["status"], child["reason"], None, itemsize)
    launches = parse_csv(p.stdout)
    if not launches and c.name == "copy.memcpy":
        return candidate_record(c, rows, cols, "skipped", "ncu profiles kernels; cudaMemcpy is a copy-engine "
                                                          "transfer, not a kernel", None, itemsize)
    if not launches:
        said = [line for line in (p.stdout + p.stderr).splitlines() if line.startswith(("==ERROR==", "==WARNING=="))]
        return candidate_record(c, rows, cols, "failed",
                                f"ncu profiled no kernel (exit {p.returncode}): {' '.join(said)[:400] or 'no message'}",
                                None, itemsize)
    return candidate_record(c, rows, cols, "ok", None, summarize(launches, calls), itemsize)


def _ncu_version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "ncu"
    return (out.strip().splitlines() or ["ncu"])[-1]


def load(path) -> dict:
    """A profile document; ValueError if the file is not one."""
    return records.read_json(path, (SCHEMA,))


def load_all(results) -> dict | None:
    """The profile*.json files of a results folder as one document (their runs in
    file-name order, a shape once), or None when there is none."""
    docs = [load(p) for p in sorted(Path(results).glob("profile*.json"))]
    if not docs:
        return None
    doc = dict(docs[0], runs=[])
    for d in docs:
        known = [run["shape"] for run in doc["runs"]]
        doc["runs"] += [run for run in d["runs"] if run["shape"] not in known]
    return doc


# ------------------------------------------------------------ tables
def format_profile(doc: dict) -> str:
    """Per shape and candidate: the model's passes, the measured ones, L2 hit rate,
    DRAM throughput, registers, occupancy, time and kernels (or why none)."""
    lines = [f"profile on {doc['device']['name']}, {doc['created']} ({doc['method']['tool']})"]
    for run in doc["runs"]:
        rows, cols = run["shape"]
        lines += ["", f"{rows} x {cols} {run['dtype']} {run.get('op', 'softmax')}, "
                      f"{run['data_bytes'] / 1e9:.2f} GB per tensor",
                  f"{'candidate':<18} {'model r+w':>9} {'measured r+w':>13} {'L2 hit':>7} {'DRAM %':>7} "
                  f"{'regs':>5} {'occ %':>6} {'ms':>8}  kernels"]
        for r in run["candidates"]:
            m, p = r["measured"], r["measured_passes"]
            model = f"{r['model']['reads']}+{r['model']['writes']}"
            if m is None:
                lines.append(f"{r['name']:<18} {model:>9} {r['status'].upper()}: {r['reason']}")
                continue
            got = f"{p['reads']:.2f}+{p['writes']:.2f}" if p else "-"
            lines.append(f"{r['name']:<18} {model:>9} {got:>13} {_pct(m['l2_hit_rate_pct']):>7} "
                         f"{_pct(m['dram_throughput_pct']):>7} {m['registers_per_thread'] or '-':>5} "
                         f"{_pct(m['occupancy_pct']):>6} {m['duration_ms'] or 0:>8.3f}  "
                         f"{m['launches_per_call']:g} x {', '.join(m['kernels'])[:60]}")
    return "\n".join(lines)


def _pct(v) -> str:
    return f"{v:.1f}" if v is not None else "-"


def format_passes(doc: dict) -> str:
    """Reads and writes per candidate and shape, measured / model, in passes over the tensor."""
    runs = doc["runs"]
    names = list(dict.fromkeys(r["name"] for run in runs for r in run["candidates"]))
    lines = ["measured / model passes over the tensor (reads, then writes); '-': not measured",
             f"{'candidate':<18}" + "".join(f"{str(run['shape'][1]) + ' cols':>22}" for run in runs)]
    for name in names:
        cells = []
        for run in runs:
            r = next((r for r in run["candidates"] if r["name"] == name), None)
            p = r and r["measured_passes"]
            cells.append(f"{p['reads']:.2f}/{r['model']['reads']}r {p['writes']:.2f}/{r['model']['writes']}w"
                         if p else "-")
        lines.append(f"{name:<18}" + "".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


# ------------------------------------------------------------ the child
def child(name: str, rows: int, cols: int, calls: int, result: Path, dtype: str = "float32",
          op: str = "softmax") -> int:
    """Runs one candidate `calls` times inside a profiler range; writes {"status",
    "reason"} to `result`.  Prints nothing on stdout, which carries ncu's CSV."""
    import cupy

    from ..device import device_info, require_device

    def done(status, reason=None):
        result.write_text(json.dumps({"status": status, "reason": reason}))
        return 0

    try:
        dev = device_info(require_device())
        from .bench import make_arrays, prepare

        c = next(c for c in cat.candidates(dtype, op) if c.name == name)
        needs_torch = c.kind == "library" or c.name.startswith("floor.torch") or dtype != "float32"
        torch, torch_reason = cat.torch_status() if needs_torch else (None, None)
        quack_reason = cat.quack_status() if name.startswith("quack.") else None
        reason = cat.skip_reason(c, cols, dev, torch_reason, quack_reason, dtype, op)
        if reason:
            return done("skipped", reason)
        with cat.timed_stream(torch):  # as the benchmark runs them
            arrays = make_arrays(rows, cols, dtype, op, 0, torch)
            prep = prepare(c, arrays, dev, torch)
            prep.call()  # compiles and warms up, outside the profiled range
            cupy.cuda.runtime.deviceSynchronize()
            cupy.cuda.runtime.profilerStart()
            for _ in range(calls):
                prep.call()
            cupy.cuda.runtime.deviceSynchronize()
            cupy.cuda.runtime.profilerStop()
    except Exception as e:
        return done("failed", f"raised {cat.one_line(e)}")
    return done("ok")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m softmax_lab.lab.profile", description="the child of softmax-lab profile")
    p.add_argument("--child", required=True)
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--calls", type=int, default=CALLS)
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--op", default="softmax")
    a = p.parse_args(argv)
    sys.stdout = sys.stderr  # stdout is ncu's CSV: nothing of ours goes there
    return child(a.child, a.rows, a.cols, a.calls, a.result, a.dtype, a.op)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
