"""The benchmark: every softmax candidate, timed on one input, set against a copy.

One run, for a rows x cols float32 input x and an output buffer y:

  1. x is standard normal (seeded, never zeros);
  2. for each candidate: skipped with a recorded reason if it cannot run
     here; otherwise y is poisoned with NaN, one call is checked against the
     float64 reference on CHECK_ROWS sampled rows (the first and last among
     them), then `warmup` calls, then `repeats` calls, each between a pair of
     CUDA events on the benchmark's stream;
  3. the copy ceiling is the copy candidate with the lowest median time;
     every candidate's median time and effective bandwidth (its traffic
     model's bytes / median time) are set against it.

A sweep is one run per row length, rows = SWEEP_ELEMENTS // cols.  Results
are JSON documents described by results_schema.json (SCHEMA names its
version).  Without a GPU, load_or_run() returns the recorded results/*.json.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np

try:
    from tqdm import tqdm
except ImportError:  # the progress bar is a nicety: an offline GPU machine may lack tqdm
    tqdm = None

from . import loader
from .device import NoDeviceError, device_info, require_device
from .reference import relative_error, softmax_reference
from .variants import choose, get_variant
from .variants import variants as registered_variants

SCHEMA = "softmax-lab-results/1"
HEADLINE = (4096, 393216)
SWEEP_COLS = (1024, 4096, 16384, 65536, 262144, 393216, 1048576, 4194304)
SWEEP_ELEMENTS = 2**30  # 4 GiB of float32 per tensor
REPEATS = 30
MIN_REPEATS = 20  # the least the CLI accepts; the API takes fewer for smoke tests
WARMUP = 5
CHECK_ROWS = 8
TOLERANCE = 1e-5  # largest relative error (reference.relative_error) a candidate may have
ITEMSIZE = 4
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"  # a source checkout's results/


@dataclass(frozen=True)
class Candidate:
    name: str
    kind: str  # "variant" (a registry entry), "copy" (a ceiling candidate) or "library"
    reads: int  # passes over a tensor of x's size in device memory
    writes: int
    model: str  # where the passes come from

    def traffic_bytes(self, rows: int, cols: int) -> int:
        return rows * cols * (self.reads + self.writes) * ITEMSIZE


# The candidates that are not softmax_lab variants, with the traffic models
# their effective bandwidth is computed from.
OTHERS = (
    Candidate("copy.memcpy", "copy", 1, 1,
              "cupy.copyto(y, x): cudaMemcpyAsync device to device (y[...] = x takes the same path)"),
    Candidate("copy.elementwise", "copy", 1, 1, "a CuPy ElementwiseKernel y = x"),
    Candidate("copy.float4", "copy", 1, 1, "kernels/copy.cu: 16-byte loads and stores, a scalar tail"),
    Candidate("torch.softmax", "library", 3, 1,
              "PyTorch's CUDA softmax on long rows: a max pass, a sum-of-exp pass, the write pass"),
    Candidate("torch.compile", "library", 2, 1,
              "torch.compile(torch.softmax), Inductor: an online (max, sum) read, then the write pass"),
    Candidate("cupyx.softmax", "library", 5, 3,
              "cupyx.scipy.special.softmax, five array ops: amax (r), x - max (r, w), exp (r, w), sum (r), "
              "divide (r, w)"),
)


def candidates() -> tuple[Candidate, ...]:
    """Every candidate: the registered variants (their own names and traffic), then OTHERS."""
    own = tuple(Candidate(v.name, "variant", v.reads, v.writes, v.summary) for v in registered_variants().values())
    return own + (AUTO,) + OTHERS


# variant="auto": its traffic is that of the variant it picks for the shape (auto_candidate).
AUTO = Candidate("auto", "variant", 0, 0, "softmax_lab.softmax(variant='auto')")


def auto_candidate(rows: int, cols: int, dev) -> Candidate:
    v = choose(rows, cols, dev)
    return Candidate("auto", "variant", v.reads, v.writes, f"variant='auto' picks {v.name}: {v.summary}")


def select(names=None) -> tuple[Candidate, ...]:
    """The candidates named (all when None), in the order of candidates(); the
    copies are always included, since the ceiling is computed from them."""
    every = candidates()
    if names is None:
        return every
    known = {c.name for c in every}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown candidate(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")
    return tuple(c for c in every if c.name in names or c.kind == "copy")


COPY_NAMES = tuple(c.name for c in OTHERS if c.kind == "copy")


# ------------------------------------------------------------ the records
def record(c: Candidate, rows: int, cols: int, *, times_ms=None, check=None, status="ok", reason=None) -> dict:
    """One candidate's entry in a run (see results_schema.json)."""
    rec = {
        "name": c.name, "kind": c.kind, "status": status, "reason": reason,
        "traffic": {"reads": c.reads, "writes": c.writes, "bytes": c.traffic_bytes(rows, cols), "model": c.model},
        "check": check, "stats": None, "gbps": None, "vs_copy_time": None, "copy_bandwidth_fraction": None,
    }
    if times_ms:
        t = np.asarray(times_ms, dtype=np.float64)
        median = float(np.median(t))
        rec["stats"] = {
            "repeats": len(t), "median_ms": median, "min_ms": float(t.min()), "max_ms": float(t.max()),
            "spread": float((t.max() - t.min()) / median), "times_ms": [float(v) for v in t],
        }
        rec["gbps"] = rec["traffic"]["bytes"] / (median * 1e-3) / 1e9
    return rec


def make_run(rows: int, cols: int, records: list[dict], l2_bytes: int) -> dict:
    """A run from its candidates' records: the copy ceiling, and each timed
    candidate's time / copy time and its fraction of the copy bandwidth."""
    copies = [r for r in records if r["kind"] == "copy" and r["stats"]]
    best = min(copies, key=lambda r: r["stats"]["median_ms"], default=None)
    copy = None
    if best is not None:
        copy = {"name": best["name"], "median_ms": best["stats"]["median_ms"], "gbps": best["gbps"]}
    for r in records:
        timed = copy is not None and r["stats"] is not None
        r["vs_copy_time"] = r["stats"]["median_ms"] / copy["median_ms"] if timed else None
        r["copy_bandwidth_fraction"] = r["gbps"] / copy["gbps"] if timed else None
    data_bytes = rows * cols * ITEMSIZE
    return {"shape": [rows, cols], "dtype": "float32", "data_bytes": data_bytes,
            "l2_multiple": data_bytes / l2_bytes, "copy": copy, "candidates": records}


def make_document(kind: str, runs: list[dict], device: dict, versions: dict, method: dict,
                  command: str | None = None, created: str | None = None) -> dict:
    return {
        "schema": SCHEMA, "kind": kind,
        "created": created or datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command if command is not None else shlex.join(sys.argv),
        "device": device, "versions": versions, "method": method, "runs": runs,
    }


def method(repeats: int, warmup: int, seed: int) -> dict:
    return {
        "repeats": repeats, "warmup": warmup, "seed": seed, "check_rows": CHECK_ROWS, "tolerance": TOLERANCE,
        "input": "standard normal float32 (cupy.random.default_rng(seed))",
        "timer": "a pair of CUDA events around each call, on one stream; median, min and max of the repeats",
        "ceiling": "the copy candidate with the lowest median time",
    }


def save(doc: dict, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n")
    return path


def load(path) -> dict:
    """A results document; ValueError if the file is not one (of this SCHEMA)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{path} is not a softmax-lab results file of schema {SCHEMA!r} (found {found!r})")
    return doc


def schema() -> dict:
    """The JSON Schema of results documents."""
    return json.loads((Path(__file__).resolve().parent / "results_schema.json").read_text())


# ------------------------------------------------------------ GPU or recorded
def gpu_reason() -> str | None:
    """None when the benchmark can run here; else why not (no device, or the
    environment variable SOFTMAX_LAB_RECORDED is set to force recorded results)."""
    if os.environ.get("SOFTMAX_LAB_RECORDED"):
        return "SOFTMAX_LAB_RECORDED is set"
    try:
        require_device()
    except NoDeviceError as e:
        return str(e)
    return None


def results_dir() -> Path:
    """Where recorded results live: $SOFTMAX_LAB_RESULTS, else the checkout's results/."""
    return Path(os.environ.get("SOFTMAX_LAB_RESULTS") or RESULTS_DIR)


def load_or_run(kind: str, **kwargs) -> tuple[dict, str]:
    """(results, a note saying where they come from): run_bench(**kwargs) or
    run_sweep(**kwargs) when there is a GPU here, else the recorded
    results/<kind>.json (bench.json or sweep.json)."""
    if kind not in ("bench", "sweep"):
        raise ValueError(f"kind must be 'bench' or 'sweep'; got {kind!r}")
    reason = gpu_reason()
    if reason is None:
        doc = run_bench(**kwargs) if kind == "bench" else run_sweep(**kwargs)
        return doc, f"Measured now on {doc['device']['name']}."
    path = results_dir() / f"{kind}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"Not measuring here ({reason}) and no recorded results at {path}; "
            f"record them on a GPU with: softmax-lab {kind} --output {path}"
        )
    doc = load(path)
    return doc, (f"Not measured here ({reason}): showing the results recorded on {doc['device']['name']} "
                 f"on {doc['created']} ({path}).")


# ------------------------------------------------------------ on the GPU
def run_bench(rows: int = HEADLINE[0], cols: int = HEADLINE[1], *, names=None, repeats: int = REPEATS,
              warmup: int = WARMUP, seed: int = 0, progress: bool = True, command: str | None = None) -> dict:
    """Times the candidates (all, or those named) on one rows x cols input."""
    return _run("bench", [(rows, cols)], names, repeats, warmup, seed, progress, command)


def run_sweep(cols=SWEEP_COLS, *, elements: int = SWEEP_ELEMENTS, names=None, repeats: int = REPEATS,
              warmup: int = WARMUP, seed: int = 0, progress: bool = True, command: str | None = None) -> dict:
    """One run per row length, each of rows = elements // cols rows."""
    shapes = [(max(1, elements // c), c) for c in cols]
    return _run("sweep", shapes, names, repeats, warmup, seed, progress, command)


def _run(kind, shapes, names, repeats, warmup, seed, progress, command):
    import cupy

    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0; got {repeats}, {warmup}")
    for rows, cols in shapes:
        if rows < 1 or cols < 1:
            raise ValueError(f"rows and cols must be positive; got {rows} x {cols}")
    chosen = select(names)
    dev = device_info(require_device())
    torch, torch_reason = _torch()
    runs = []
    total = len(chosen) * len(shapes)
    bar = tqdm(total=total, desc=kind, unit="candidate", file=sys.stderr) if progress and tqdm else _NoBar()
    with bar:
        for rows, cols in shapes:
            runs.append(_measure(rows, cols, chosen, dev, torch, torch_reason, repeats, warmup, seed, bar))
    rt = cupy.cuda.runtime
    device = {"name": dev.name, "compute_capability": dev.compute_capability, "sm_count": dev.sm_count,
              "l2_bytes": dev.l2_bytes}
    versions = {"driver": rt.driverGetVersion(), "runtime": rt.runtimeGetVersion(),
                "python": platform.python_version(), "cupy": cupy.__version__, "numpy": np.__version__,
                "torch": torch.__version__ if torch is not None else None, "softmax_lab": _own_version()}
    return make_document(kind, runs, device, versions, method(repeats, warmup, seed), command)


class _NoBar:
    """Stands in for tqdm when progress is off or tqdm is missing."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_postfix_str(self, text):
        pass

    def update(self, n=1):
        pass


def check_rows(rows: int, k: int = CHECK_ROWS, seed: int = 0) -> list[int]:
    """k sampled row indices, the first and the last among them (all rows when there are at most k)."""
    if rows <= k:
        return list(range(rows))
    inner = np.random.default_rng(seed).choice(np.arange(1, rows - 1), size=k - 2, replace=False)
    return sorted([0, rows - 1, *map(int, inner)])


def _measure(rows, cols, chosen, dev, torch, torch_reason, repeats, warmup, seed, bar) -> dict:
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    records = []
    with stream:
        x = cupy.random.default_rng(seed).standard_normal((rows, cols), dtype=cupy.float32)
        y = cupy.empty_like(x)
        idx = check_rows(rows, seed=seed)
        x_rows = x[idx]
        refs = {"softmax": softmax_reference(x_rows), "copy": x_rows.astype(cupy.float64)}
        for c in chosen:
            c = auto_candidate(rows, cols, dev) if c is AUTO else c
            bar.set_postfix_str(f"{rows}x{cols} {c.name}")
            records.append(_candidate(c, x, y, idx, refs, dev, stream, torch, torch_reason, repeats, warmup))
            _release(torch)
            bar.update()
        stream.synchronize()
        del x, y, x_rows, refs
    _release(torch)
    return make_run(rows, cols, records, dev.l2_bytes)


def _candidate(c, x, y, idx, refs, dev, stream, torch, torch_reason, repeats, warmup) -> dict:
    rows, cols = x.shape
    reason = torch_reason if c.name.startswith("torch.") else None
    if c.kind == "variant" and c.name != AUTO.name:
        reason = get_variant(c.name).unsupported_reason(cols, dev)
    if reason:
        return record(c, rows, cols, status="skipped", reason=reason)
    try:
        call, poison, poisoned = _prepare(c, x, y, dev, torch)
        poison()
        out = _as_cupy(call())[idx]
        err = relative_error(out, refs["copy" if c.kind == "copy" else "softmax"])  # synchronizes
        del out
        check = {"rows": idx, "relative_error": err if math.isfinite(err) else None, "poisoned": poisoned}
        if not err <= TOLERANCE:
            return record(c, rows, cols, check=check, status="failed",
                          reason=f"check failed: relative error {err:.3g} > {TOLERANCE:g} on rows {idx}")
        return record(c, rows, cols, times_ms=_time(call, stream, repeats, warmup), check=check)
    except Exception as e:  # one candidate's failure (out of memory, a compiler missing) is recorded, not fatal
        return record(c, rows, cols, status="error", reason=_one_line(e))


def _time(call, stream, repeats, warmup) -> list[float]:
    import cupy

    for _ in range(warmup):
        call()
    pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(repeats)]
    for start, end in pairs:
        start.record(stream)
        call()
        end.record(stream)
    stream.synchronize()
    return [cupy.cuda.get_elapsed_time(start, end) for start, end in pairs]


def _prepare(c, x, y, dev, torch):
    """(call, poison, what poisoning covers) for one candidate; call() runs it
    once on the current stream and returns its output."""
    import cupy

    def poison_y():
        y.fill(np.float32("nan"))

    if c.kind == "variant":
        from .api import softmax

        return (lambda: softmax(x, variant=c.name, out=y)), poison_y, "out buffer"
    if c.name == "copy.memcpy":
        def call():
            cupy.copyto(y, x)
            return y
        return call, poison_y, "out buffer"
    if c.name == "copy.elementwise":
        copy = cupy.ElementwiseKernel("T x", "T y", "y = x", "softmax_lab_copy")
        return (lambda: copy(x, y)), poison_y, "out buffer"
    if c.name == "copy.float4":
        return _float4_copy(x, y, dev), poison_y, "out buffer"
    if c.name == "cupyx.softmax":
        from cupyx.scipy.special import softmax as cupyx_softmax

        return (lambda: cupyx_softmax(x, axis=-1)), lambda: None, "none: each call allocates its output"
    if c.kind == "library":  # torch.softmax, torch.compile
        xt = torch.as_tensor(x, device=f"cuda:{dev.id}")  # zero-copy, through __cuda_array_interface__
        if xt.data_ptr() != x.data.ptr:
            raise RuntimeError("torch.as_tensor copied the input instead of sharing it")
        fn = torch.softmax if c.name == "torch.softmax" else _compiled_softmax(torch)
        ts = torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)  # torch on the benchmark's stream

        def call():
            with torch.cuda.stream(ts):
                return fn(xt, -1)

        def poison():  # a NaN block of the output's size, freed to torch's cache, where the next output finds it
            with torch.cuda.stream(ts):
                torch.full_like(xt, float("nan"))

        return call, poison, "a NaN block left in torch's allocator cache"
    raise ValueError(f"no way to run candidate {c.name!r}")


def _float4_copy(x, y, dev):
    n = x.size
    if x.data.ptr % 16 or y.data.ptr % 16:
        raise ValueError("copy.float4 needs 16-byte aligned arrays")
    kernel = loader.get_kernel("copy.cu", "copy_f32", device_id=dev.id)
    threads = 256
    grid = min(max(1, -(-(n // 4) // threads)), 2**31 - 1)

    def call():
        kernel((grid,), (threads,), (x, y, np.int64(n)))
        return y

    return call


def _softmax_last(t, dim):
    import torch

    return torch.softmax(t, dim)


def _compiled_softmax(torch):
    """torch.compile(torch.softmax), specialized to the shape: the cache is reset
    so that a sweep's shapes each compile once, never exceeding dynamo's limit."""
    torch._dynamo.reset()
    return torch.compile(_softmax_last, dynamic=False)


def _as_cupy(a):
    import cupy

    return a if isinstance(a, cupy.ndarray) else cupy.asarray(a)


def _torch():
    """(torch, None) if torch can run on the GPU here, else (None, why not)."""
    try:
        import torch
    except Exception as e:
        return None, f"torch is not importable ({_one_line(e)})"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA device"
    return torch, None


def _release(torch) -> None:
    """Hands cached blocks back to the driver between candidates."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    if torch is not None:
        torch.cuda.empty_cache()


def _one_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"[:500]


def _own_version() -> str | None:
    try:
        return metadata.version("softmax-lab")
    except metadata.PackageNotFoundError:
        return None


# ------------------------------------------------------------ examples and checks
def special_rows(cols: int = 6) -> np.ndarray:
    """Rows with torch.softmax's special values: some -inf entries (outputs 0),
    all -inf (a NaN row), one NaN (a NaN row), one +inf (a NaN row), and a plain row."""
    x = np.random.default_rng(0).standard_normal((5, cols)).astype(np.float32)
    x[0, ::2] = -np.inf
    x[1, :] = -np.inf
    x[2, cols // 2] = np.nan
    x[3, cols // 2] = np.inf
    return x


def check_variants(x) -> dict[str, float | str]:
    """On this GPU: name -> relative error of each variant's softmax(x) (the
    output poisoned first) against the float64 reference, or why it cannot run."""
    import cupy

    from .api import softmax

    dev = device_info(require_device())
    xg = cupy.asarray(x, dtype=cupy.float32)
    ref = softmax_reference(xg)
    result = {}
    for v in registered_variants().values():
        reason = v.unsupported_reason(xg.shape[-1], dev)
        if reason:
            result[v.name] = reason
            continue
        y = cupy.full_like(xg, np.nan)
        softmax(xg, variant=v.name, out=y)
        result[v.name] = relative_error(y, ref)
    return result


def recorded_checks(run: dict) -> dict[str, float | str]:
    """The same mapping for every candidate of a recorded run."""
    return {r["name"]: r["check"]["relative_error"] if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
            for r in run["candidates"]}


def variant_checks(x) -> tuple[dict[str, float | str], str]:
    """(checks, a note saying where they come from): check_variants(x) when there
    is a GPU here, else the checks recorded in results/bench.json (of its own input)."""
    reason = gpu_reason()
    if reason is None:
        return check_variants(x), f"Checked now on {device_info().name}."
    doc, note = load_or_run("bench")
    return recorded_checks(doc["runs"][0]), f"{note} These are its checks, of its own input; x was not run."


def format_checks(checks: dict[str, float | str]) -> str:
    return "\n".join(f"{name:<18} {v:.2e}" if isinstance(v, float) else f"{name:<18} {v}" for name, v in checks.items())


# ------------------------------------------------------------ tables
def format_traffic(rows: int, cols: int, copy_ms: float | None = None) -> str:
    """Each candidate's traffic model for a shape; with a copy time, the bandwidth
    each would need to finish in that time."""
    head = f"{'candidate':<18} {'reads':>5} {'writes':>6} {'B/elem':>6} {'GB':>7}"
    if copy_ms:
        head += f" {'GB/s to match copy':>19}"
    lines = [f"{rows} x {cols} float32 ({rows * cols * ITEMSIZE / 1e9:.2f} GB per tensor)", head]
    for c in candidates():
        gb = c.traffic_bytes(rows, cols) / 1e9
        line = f"{c.name:<18} {c.reads:>5} {c.writes:>6} {(c.reads + c.writes) * ITEMSIZE:>6} {gb:>7.1f}"
        if copy_ms:
            line += f" {gb / (copy_ms * 1e-3):>19.0f}"
        lines.append(line)
    return "\n".join(lines)


def format_run(run: dict) -> str:
    rows, cols = run["shape"]
    head = (f"{rows} x {cols} {run['dtype']}: {run['data_bytes'] / 1e9:.2f} GB per tensor, "
            f"{run['l2_multiple']:.0f}x the L2")
    copy = run["copy"]
    if copy:
        head += f"; copy ceiling {copy['name']}: {copy['median_ms']:.3f} ms, {copy['gbps']:.0f} GB/s"
    columns = (f"{'candidate':<18} {'median ms':>10} {'spread':>7} {'min..max ms':>17} {'x copy':>7} "
               f"{'GB/s':>6} {'of copy':>7} {'rel err':>8}  traffic")
    lines = [head, columns]
    for r in run["candidates"]:
        t = r["traffic"]
        model = f"{t['reads']}r+{t['writes']}w {t['bytes'] / 1e9:.1f} GB"
        s = r["stats"]
        if s is None:
            lines.append(f"{r['name']:<18} {r['status']}: {r['reason']}")
            continue
        ratio = f"{r['vs_copy_time']:.2f}" if r["vs_copy_time"] else "-"
        frac = f"{r['copy_bandwidth_fraction']:.0%}" if r["copy_bandwidth_fraction"] else "-"
        err = r["check"]["relative_error"]
        lines.append(f"{r['name']:<18} {s['median_ms']:>10.3f} {s['spread']:>7.1%} "
                     f"{s['min_ms']:>8.3f}..{s['max_ms']:<8.3f} {ratio:>7} {r['gbps']:>6.0f} {frac:>7} "
                     f"{err:>8.1e}  {model}")
    if run["l2_multiple"] < 4:
        lines.append(f"note: the input is only {run['l2_multiple']:.1f}x the L2, so timings may come partly from cache")
    return "\n".join(lines)


def format_sweep(doc: dict) -> str:
    """Effective GB/s per candidate (lines) and row length (columns)."""
    runs = doc["runs"]
    names = list(dict.fromkeys(r["name"] for run in runs for r in run["candidates"]))
    lines = ["effective GB/s by row length; '-': skipped, failed or error (the JSON says why)",
             f"{'cols':<18}" + "".join(f"{run['shape'][1]:>9}" for run in runs),
             f"{'rows':<18}" + "".join(f"{run['shape'][0]:>9}" for run in runs)]
    for name in names:
        cells = []
        for run in runs:
            gbps = next((r["gbps"] for r in run["candidates"] if r["name"] == name), None)
            cells.append(f"{gbps:>9.0f}" if gbps else f"{'-':>9}")
        lines.append(f"{name:<18}" + "".join(cells))
    lines.append(f"{'copy ceiling':<18}" + "".join(f"{run['copy']['gbps']:>9.0f}" if run["copy"] else f"{'-':>9}"
                                                    for run in runs))
    return "\n".join(lines)


def format_document(doc: dict) -> str:
    d, v = doc["device"], doc["versions"]
    where = f"{d['name']} ({d['sm_count']} SMs, L2 {d['l2_bytes'] / 2**20:.0f} MiB)"
    lines = [f"{doc['kind']} on {where}, {doc['created']}",
             f"driver {v['driver']}, runtime {v['runtime']}, CuPy {v['cupy']}, NumPy {v['numpy']}, torch {v['torch']}",
             f"command: {doc['command']}", ""]
    if doc["kind"] == "sweep":
        lines.append(format_sweep(doc))
    else:
        lines.extend(format_run(run) for run in doc["runs"])
    return "\n".join(lines)
