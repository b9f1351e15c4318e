"""Results documents: the records a run is made of, their JSON schema, atomic
saving, loading (files of the previous schema are upgraded on load), and the
results recorded in a folder (bench.load_or_run chooses between them and a live run).

The lower layer of the lab's files: records imports candidates and timing,
never bench, profile or report, which import it.

A document (results_schema.json) is one `softmax-lab bench` (one run per
dtype and op) or `softmax-lab sweep` (one run per shape, dtype and op); each
run says its dtype and op, and its "copy" is the floor of the op (a copy of
the same bytes forward, a two-read, one-write add backward).  Each run has one record per
candidate with a status: "ok" (checked and timed), "skipped" (cannot run here,
known before any call; reason says why) or "failed" (it raised, or its output
failed the check; reason says which).
"""

from __future__ import annotations

import copy
import json
import math
import os
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from ..problem import DTYPES
from .candidates import Candidate, floor_passes
from .timing import stats as time_stats

SCHEMA = "softmax-lab-results/3"
OLD_SCHEMAS = ("softmax-lab-results/1", "softmax-lab-results/2")  # upgraded on load
PACKAGE = Path(__file__).resolve().parent


# ------------------------------------------------------------ records
def record(c: Candidate, rows: int, cols: int, *, times_ms=None, host_us=None, check=None, status: str = "ok",
           reason: str | None = None, dtype: str = "float32", op: str = "softmax") -> dict:
    """One candidate's entry in a run of `dtype` and `op` (traffic in that dtype's bytes)."""
    if status not in ("ok", "skipped", "failed"):
        raise ValueError(f"status must be ok, skipped or failed; got {status!r}")
    itemsize = DTYPES[dtype]
    rec = {
        "name": c.name, "kind": c.kind, "status": status, "reason": reason,
        "traffic": {"reads": c.reads, "writes": c.writes, "bytes": c.traffic_bytes(rows, cols, itemsize),
                    "model": c.model},
        "check": check, "stats": None, "host": None, "vs_copy_time": None, "useful_gbps": None,
    }
    if times_ms:
        rec["stats"] = {**time_stats(times_ms, "ms"), "times_ms": [float(v) for v in times_ms]}
        rec["useful_gbps"] = useful_gbps(rows * cols * itemsize, rec["stats"]["median_ms"], floor_passes(op))
    if host_us:
        rec["host"] = time_stats(host_us, "us")
    return rec


def finite_or_none(v: float) -> float | None:
    """A check's figure as a record holds it: null where it is NaN or infinite."""
    return float(v) if math.isfinite(v) else None


def useful_gbps(data_bytes: int, ms: float, passes: int = 2) -> float:
    """The floor's passes over the tensor (what any implementation must move: one
    read and one write forward, two reads and one write backward) / time, in GB/s."""
    return passes * data_bytes / (ms * 1e-3) / 1e9


def make_run(rows: int, cols: int, records: list[dict], l2_bytes: int, group: str | None = None,
             dtype: str = "float32", op: str = "softmax") -> dict:
    """A run from its records: the floor (the copy, or backward the two-read add,
    with the lowest median) and each timed candidate's time / floor time."""
    copies = [r for r in records if r["kind"] == "copy" and r["stats"]]
    best = min(copies, key=lambda r: r["stats"]["median_ms"], default=None)
    ceiling = None
    if best is not None:
        ceiling = {"name": best["name"], "median_ms": best["stats"]["median_ms"], "useful_gbps": best["useful_gbps"]}
    for r in records:
        timed = ceiling is not None and r["stats"] is not None
        r["vs_copy_time"] = r["stats"]["median_ms"] / ceiling["median_ms"] if timed else None
    data_bytes = rows * cols * DTYPES[dtype]
    return {"shape": [rows, cols], "dtype": dtype, "op": op, "group": group, "data_bytes": data_bytes,
            "l2_multiple": data_bytes / l2_bytes, "copy": ceiling, "candidates": records}


def shape_group(rows: int, sm_count: int) -> str:
    """The group of a sweep's shape given without one (the figures' panels): whether its
    rows fill the device's SMs."""
    return "fewer rows than SMs" if rows < sm_count else "a row an SM or more"


def device_record(dev) -> dict:
    """What a document records of the device it ran on (a DeviceInfo)."""
    return {"name": dev.name, "compute_capability": dev.compute_capability, "sm_count": dev.sm_count,
            "l2_bytes": dev.l2_bytes}


def make_document(kind: str, runs: list[dict], device: dict, versions: dict, method: dict,
                  command: str | None = None, created: str | None = None) -> dict:
    return {
        "schema": SCHEMA, "kind": kind,
        "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command if command is not None else shlex.join(sys.argv),
        "device": device, "versions": versions, "method": method, "runs": runs,
    }


def cuda_version(v: int | None) -> str | None:
    """13000 -> "13.0", 12090 -> "12.9"; None (or 0: no driver) -> None."""
    return f"{v // 1000}.{v % 1000 // 10}" if v else None


def failures(doc: dict) -> list[str]:
    """What makes a run fail (a non-zero exit): any candidate whose output failed
    its check, and any of softmax_lab's own candidates that raised.  A peer that
    raised (quack out of shared memory, say) is recorded as failed but is not ours."""
    bad = []
    for run in doc["runs"]:
        for r in run["candidates"]:
            if r["status"] == "failed" and (r["check"] is not None or r["kind"] == "variant" or r["name"] == "host.auto"):
                bad.append(f"{run['shape'][0]} x {run['shape'][1]}{_label(run)} {r['name']}: {r['reason']}")
    return bad


def _label(run: dict) -> str:
    """" float16 log_softmax" for a run other than float32 softmax; "" for the headline's."""
    pair = (run.get("dtype", "float32"), run.get("op", "softmax"))
    return "" if pair == ("float32", "softmax") else f" {pair[0]} {pair[1]}"


# ------------------------------------------------------------ files
def save(doc: dict, path) -> Path:
    """Writes the document as JSON atomically: a temporary file in the same folder,
    then os.replace, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_json(path, schemas: tuple[str, ...]) -> dict:
    """A JSON document whose "schema" is one of `schemas`; ValueError otherwise."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e})") from None
    found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
    if found not in schemas:
        raise ValueError(f"{path} is not a softmax-lab file of schema {' or '.join(map(repr, schemas))} "
                         f"(found {found!r})")
    return doc


def load(path) -> dict:
    """A results document (of SCHEMA; one of OLD_SCHEMAS is upgraded); ValueError if
    the file is not one."""
    doc = read_json(path, (SCHEMA, *OLD_SCHEMAS))
    if doc["schema"] == OLD_SCHEMAS[0]:
        doc = upgrade_v1(doc)
    if doc["schema"] == OLD_SCHEMAS[1]:
        doc = upgrade_v2(doc)
    if doc["kind"] == "sweep":  # shapes given without a group, recorded before shape_group named them
        for run in doc["runs"]:
            if run.get("group") is None:
                run["group"] = shape_group(run["shape"][0], doc["device"]["sm_count"])
    return doc


def schema(name: str = "results_schema.json") -> dict:
    """A JSON Schema shipped with the package (results_schema.json or profile_schema.json)."""
    return json.loads((PACKAGE / name).read_text())


def validate(doc: dict, name: str = "results_schema.json") -> None:
    """jsonschema.ValidationError if the document does not follow its schema."""
    import jsonschema

    jsonschema.validate(doc, schema(name))


def upgrade_v1(old: dict) -> dict:
    """A softmax-lab-results/1 document (recorded 2026-11-29) in this schema: versions
    as text, "error" as "failed", one-call checks, useful bandwidth for effective."""
    doc = copy.deepcopy(old)
    doc["schema"] = OLD_SCHEMAS[1]
    doc["upgraded_from"] = old["schema"]
    v = doc["versions"]
    v.update(driver=cuda_version(v["driver"]), runtime=cuda_version(v["runtime"]), quack=None)
    doc["method"].update(row_sum_tolerance=None, host_calls=None,
                         check="one call on check_rows sampled rows (schema 1: the timed calls were not checked)")
    for run in doc["runs"]:
        run["group"] = None
        for r in run["candidates"]:
            r.pop("gbps", None)
            r.pop("copy_bandwidth_fraction", None)
            r["status"] = "failed" if r["status"] == "error" else r["status"]
            r["host"] = None
            r["useful_gbps"] = useful_gbps(run["data_bytes"], r["stats"]["median_ms"]) if r["stats"] else None
            old_check = r["check"]
            if old_check is not None:
                err = old_check["relative_error"]
                r["check"] = {"rows": old_check["rows"], "poisoned": old_check["poisoned"], "relative_error": err,
                              "calls": [{"after": "the first call", "relative_error": err, "row_sum_error": None}]}
        if run["copy"] is not None:
            c = run["copy"]
            run["copy"] = {"name": c["name"], "median_ms": c["median_ms"],
                           "useful_gbps": useful_gbps(run["data_bytes"], c["median_ms"])}
    return doc


def upgrade_v2(old: dict) -> dict:
    """A softmax-lab-results/2 document (float32 softmax only) in this schema: each run says its op."""
    doc = copy.deepcopy(old)
    doc["schema"] = SCHEMA
    doc.setdefault("upgraded_from", old["schema"])
    for run in doc["runs"]:
        run["op"] = "softmax"
    return doc


# ------------------------------------------------------------ recorded or live
def recorded(kind: str, results, how: str | None = None) -> tuple[dict | None, str]:
    """(the document recorded in <results>/<kind>.json, a note saying where it comes
    from), or (None, a note saying plainly that none is recorded there and how to
    make it: `how`, or `softmax-lab <kind> --output PATH`)."""
    path = Path(results) / f"{kind}.json"
    if not path.is_file():
        return None, (f"No recorded {kind} results at {path}. Record them on a GPU with: "
                      f"{how or f'softmax-lab {kind} --output {path}'}")
    doc = load(path)
    where = Path(path.resolve().parent.name) / path.name  # results/bench.json: no checkout's absolute path
    return doc, f"Recorded on {doc['device']['name']} on {doc['created']} ({where})."

