"""The benchmark run: every candidate checked, then timed, on one input, set against
a copy of the same bytes (`softmax-lab bench`); the same over a grid of shapes
(`softmax-lab sweep`).

For each shape, x is fresh standard normal float32 (seeded; never zeros) and
each candidate that can run here (else: skipped, with the reason):

  1. its output is poisoned with NaN and one call is checked (check_output):
     CHECK_ROWS rows sampled across the whole output (one from each equal band
     of rows, the first and last included) against the float64 reference, and
     every row's sum against 1 (for a copy: the whole output against x);
  2. `warmup` calls; the output is poisoned again; `repeats` timed calls
     (timing.gpu_times: CUDA events, back to back on one stream);
  3. the last timed call's output is checked the same way, so a kernel that
     fails only under repetition is recorded as failed, never timed as correct.

The copy ceiling is the copy with the lowest median; records.make_run sets each
candidate against it.  The headline bench also times the host candidates:
microseconds per call on a HOST_SHAPE input (timing.host_times).
"""

from __future__ import annotations

import math
import platform
import sys
from importlib import metadata

import numpy as np

try:
    from tqdm import tqdm
except ImportError:  # progress is a nicety: an offline GPU machine may lack tqdm
    tqdm = None

from . import candidates as cat
from . import records, timing
from .device import NoDeviceError, device_info, require_device
from .reference import relative_error, softmax_reference

HEADLINE = (4096, 393216)
REPEATS = 30
MIN_REPEATS = 20  # the least the CLI accepts; the functions take fewer for smoke tests
WARMUP = 5
HOST_CALLS = 2000
HOST_WARMUP = 200
CHECK_ROWS = 32
TOLERANCE = 1e-5  # largest relative error (reference.relative_error) on the sampled rows
ROW_SUM_TOLERANCE = 1e-4  # largest |sum of a row - 1| over every row

# The sweep's grid: row lengths (LLM vocabularies 32000, 128256, 151936; odd
# 100003; 1K to 4M) by batch: fewer rows than SMs (32), about one row per SM
# (132), and many rows (GRID_ELEMENTS per tensor, rows rounded to a power of two).
GRID_COLS = (1024, 4096, 32000, 65536, 100003, 128256, 151936, 262144, 393216, 1048576, 4194304)
GRID_FEW_ROWS = (32, 132)
GRID_ELEMENTS = 2**29  # 2 GiB of float32 per tensor
GRID_EXTRA = ((512, 100003), (1024, 1048576))  # shapes of issue 7's table not on the grid
GRID_MAX_BYTES = 4 * 2**30  # no tensor larger, whatever the device's memory


def grid_shapes(cols=GRID_COLS, few_rows=GRID_FEW_ROWS, elements: int = GRID_ELEMENTS,
                extra=GRID_EXTRA) -> list[tuple[int, int, str]]:
    """(rows, cols, group) of every shape of the grid, without duplicates."""
    shapes = []
    for c in cols:
        shapes += [(r, c, f"{r} rows") for r in few_rows]
        many = 2 ** round(math.log2(max(1.0, elements / c)))
        shapes.append((many, c, f"{elements * 4 / 2**30:g} GiB"))
    shapes += [(r, c, "extra") for r, c in extra]
    seen, unique = set(), []
    for r, c, g in shapes:
        if (r, c) not in seen:
            seen.add((r, c))
            unique.append((r, c, g))
    return unique


def check_rows(rows: int, k: int = CHECK_ROWS, seed: int = 0) -> list[int]:
    """k row indices spread over the whole output: the first, the last, and one
    drawn at random from each of k - 2 equal bands between them (all rows if at most k)."""
    if rows <= k:
        return list(range(rows))
    rng = np.random.default_rng(seed)
    edges = np.linspace(1, rows - 1, k - 1).astype(np.int64)
    inner = [int(rng.integers(lo, max(lo + 1, hi))) for lo, hi in zip(edges[:-1], edges[1:])]
    return sorted({0, rows - 1, *inner})


def check_output(out, x, idx: list[int], ref, is_copy: bool) -> dict:
    """One check of an output: relative error of the sampled rows against `ref`
    (float64), and over every row: for a softmax the largest |row sum - 1|, for a
    copy 0 if the output equals x.  NumPy or CuPy arrays."""
    xp = _xp(out)
    err = relative_error(out[idx], ref)
    if is_copy:
        whole = 0.0 if bool(xp.array_equal(out, x)) else math.inf
    else:
        whole = float(xp.max(xp.abs(out.sum(axis=-1, dtype=xp.float64) - 1.0)))
    passed = err <= TOLERANCE and whole <= ROW_SUM_TOLERANCE  # NaN compares False: fails
    return {"relative_error": _finite(err), "row_sum_error": _finite(whole), "passed": bool(passed)}


def measure(c: cat.Candidate, prep: cat.Prepared, x, idx: list[int], ref, timer, repeats: int,
            warmup: int) -> dict:
    """One candidate's record: check one call, time `repeats` calls after `warmup`
    (timer(call, repeats, warmup, before_timed) -> (times in ms, last output)),
    check the last timed call's output.  Exceptions are recorded as failed."""
    rows, cols = x.shape
    is_copy = c.kind == "copy"
    check = {"rows": idx, "poisoned": prep.poisoned, "relative_error": None, "calls": []}

    def verdict(out, after: str) -> bool:
        result = check_output(_as_array(out, x), x, idx, ref, is_copy)
        check["calls"].append({"after": after, **{k: result[k] for k in ("relative_error", "row_sum_error")}})
        errors = [e["relative_error"] for e in check["calls"]]
        check["relative_error"] = None if None in errors else max(errors)
        return result["passed"]

    try:
        prep.poison()
        if not verdict(prep.call(), "the first call"):
            return records.record(c, rows, cols, check=check, status="failed", reason=_check_reason(check))
        times, last = timer(prep.call, repeats, warmup, prep.poison)
        if not verdict(last, f"the last of {repeats} timed calls"):
            return records.record(c, rows, cols, check=check, status="failed", reason=_check_reason(check))
    except Exception as e:  # one candidate's failure (out of memory, a compiler missing) is recorded, not fatal
        return records.record(c, rows, cols, check=check if check["calls"] else None, status="failed",
                              reason=f"raised {cat.one_line(e)}")
    return records.record(c, rows, cols, times_ms=times, check=check)


def _check_reason(check: dict) -> str:
    last = check["calls"][-1]
    return (f"check failed after {last['after']}: relative error {last['relative_error']} on {len(check['rows'])} "
            f"sampled rows (at most {TOLERANCE:g}), largest |row sum - 1| {last['row_sum_error']} "
            f"(at most {ROW_SUM_TOLERANCE:g}); null means NaN or infinite")


# ------------------------------------------------------------ on the GPU
def gpu_reason() -> str | None:
    """None when the benchmark can run here; else why not, said plainly."""
    if driver_version() == 0:
        return "no NVIDIA driver is installed or loaded on this machine, so there is no GPU to run on"
    try:
        require_device()
    except NoDeviceError as e:
        return " ".join(str(e).split())
    return None


def run_bench(rows: int = HEADLINE[0], cols: int = HEADLINE[1], *, names=None, repeats: int = REPEATS,
              warmup: int = WARMUP, seed: int = 0, host_calls: int = HOST_CALLS, progress: bool = True,
              command: str | None = None) -> dict:
    """Checks and times the candidates (all, or those named) on one rows x cols input;
    the host candidates among them on a HOST_SHAPE input."""
    return _run("bench", [(rows, cols, None)], cat.select(names), repeats, warmup, seed, host_calls, progress,
                command, fit=False)


def run_sweep(shapes=None, *, names=None, repeats: int = REPEATS, warmup: int = WARMUP, seed: int = 0,
              progress: bool = True, command: str | None = None, checkpoint=None) -> dict:
    """The benchmark on each (rows, cols, group) of `shapes` (grid_shapes() by default),
    for the candidates named (GRID_NAMES by default; never the host candidates).
    checkpoint(document so far), when given, is called after each shape (the CLI
    saves it, so a run cut short by a time limit still leaves its shapes)."""
    shapes = grid_shapes() if shapes is None else [tuple(s) if len(s) == 3 else (*s, None) for s in shapes]
    chosen = tuple(c for c in cat.select(names, default=cat.GRID_NAMES) if c.kind != "host")
    return _run("sweep", shapes, chosen, repeats, warmup, seed, 0, progress, command, fit=True, checkpoint=checkpoint)


def _run(kind, shapes, chosen, repeats, warmup, seed, host_calls, progress, command, fit, checkpoint=None):
    if repeats < 1 or warmup < 0:
        raise ValueError(f"need repeats >= 1 and warmup >= 0; got {repeats}, {warmup}")
    for rows, cols, _ in shapes:
        if rows < 1 or cols < 1:
            raise ValueError(f"rows and cols must be positive; got {rows} x {cols}")
    dev = device_info(require_device())
    torch, torch_reason = cat.torch_status()
    quack_reason = cat.quack_status() if any(c.name.startswith("quack.") for c in chosen) else None
    sized = [c for c in chosen if c.kind != "host"]
    hosts = [c for c in chosen if c.kind == "host"] if host_calls else []
    runs = []
    device = {"name": dev.name, "compute_capability": dev.compute_capability, "sm_count": dev.sm_count,
              "l2_bytes": dev.l2_bytes}

    def document():
        return records.make_document(kind, runs, device, versions(torch), method(repeats, warmup, seed, host_calls),
                                     command)

    bar = _bar(progress, len(sized) * len(shapes) + len(hosts), kind)
    with bar:
        for rows, cols, group in shapes:
            rows = _fit_rows(rows, cols) if fit else rows
            runs.append(_shape(rows, cols, group, sized, dev, torch, torch_reason, quack_reason, repeats, warmup,
                               seed, bar))
            if checkpoint is not None:
                checkpoint(document())
        if hosts:
            runs[0]["candidates"] += [_host(c, dev, torch, torch_reason, host_calls, bar) for c in hosts]
    return document()


def _shape(rows, cols, group, chosen, dev, torch, torch_reason, quack_reason, repeats, warmup, seed, bar) -> dict:
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    recs = []
    with stream:
        x = cupy.random.default_rng(seed).standard_normal((rows, cols), dtype=cupy.float32)
        y = cupy.empty_like(x)
        idx = check_rows(rows, seed=seed)
        refs = {"softmax": softmax_reference(x[idx]), "copy": x[idx].astype(cupy.float64)}

        def timer(call, n, w, before):
            return timing.gpu_times(call, stream, n, w, before)

        for c in chosen:
            bar.set_postfix_str(f"{rows}x{cols} {c.name}")
            try:
                c = cat.resolve(c, rows, cols, dev)
            except Exception as e:  # auto's chooser raised: recorded, the run goes on
                recs.append(records.record(c, rows, cols, status="failed", reason=f"raised {cat.one_line(e)}"))
                bar.update()
                continue
            reason = cat.skip_reason(c, cols, dev, torch_reason, quack_reason)
            if reason:
                recs.append(records.record(c, rows, cols, status="skipped", reason=reason))
            else:
                try:
                    prep = cat.prepare(c, x, y, dev, torch)
                except Exception as e:
                    recs.append(records.record(c, rows, cols, status="failed", reason=f"raised {cat.one_line(e)}"))
                else:
                    ref = refs["copy" if c.kind == "copy" else "softmax"]
                    recs.append(measure(c, prep, x, idx, ref, timer, repeats, warmup))
                    del prep
            _release(torch)
            bar.update()
        stream.synchronize()
        del x, y, refs
    _release(torch)
    return records.make_run(rows, cols, recs, dev.l2_bytes, group)


def _host(c, dev, torch, torch_reason, calls, bar) -> dict:
    import cupy

    bar.set_postfix_str(c.name)
    rows, cols = cat.HOST_SHAPE
    reason = cat.skip_reason(c, cols, dev, torch_reason, None)
    try:
        if reason:
            return records.record(c, rows, cols, status="skipped", reason=reason)
        stream = cupy.cuda.Stream(non_blocking=True)
        with stream:
            call = cat.prepare_host(c, dev, torch)
            us = timing.host_times(call, calls, HOST_WARMUP, stream.synchronize)
        return records.record(c, rows, cols, host_us=us)
    except Exception as e:
        return records.record(c, rows, cols, status="failed", reason=f"raised {cat.one_line(e)}")
    finally:
        bar.update()


def _fit_rows(rows: int, cols: int) -> int:
    """rows, halved until a tensor is at most GRID_MAX_BYTES and an eighth of the free memory."""
    import cupy

    free = cupy.cuda.runtime.memGetInfo()[0]
    while rows > 1 and rows * cols * cat.ITEMSIZE > min(GRID_MAX_BYTES, free // 8):
        rows //= 2
    return rows


def driver_version() -> int:
    """The CUDA version the driver supports (e.g. 13000); 0 when there is no driver."""
    import cupy

    rt = cupy.cuda.runtime
    try:
        return rt.driverGetVersion()
    except rt.CUDARuntimeError:
        return 0


def versions(torch=None) -> dict:
    import cupy

    rt = cupy.cuda.runtime
    return {"driver": records.cuda_version(driver_version()), "runtime": records.cuda_version(rt.runtimeGetVersion()),
            "python": platform.python_version(), "cupy": cupy.__version__, "numpy": np.__version__,
            "torch": torch.__version__ if torch is not None else None, "quack": dist_version("quack-kernels"),
            "softmax_lab": dist_version("softmax-lab")}


def method(repeats: int, warmup: int, seed: int, host_calls: int = 0) -> dict:
    return {
        "repeats": repeats, "warmup": warmup, "seed": seed, "check_rows": CHECK_ROWS, "tolerance": TOLERANCE,
        "row_sum_tolerance": ROW_SUM_TOLERANCE, "host_calls": host_calls or None,
        "input": "standard normal float32 (cupy.random.default_rng(seed))",
        "timer": "a pair of CUDA events around each call, calls back to back on one stream; median, min, max",
        "check": ("output poisoned with NaN, then checked after the first call and after the last timed call: "
                  "check_rows rows spread over the output against float64, every row's sum against 1"),
        "ceiling": "the copy candidate with the lowest median time",
    }


def dist_version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


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


def _bar(progress: bool, total: int, desc: str):
    if progress and tqdm is not None:
        return tqdm(total=total, desc=desc, unit="candidate", file=sys.stderr)
    return _NoBar()


def _release(torch) -> None:
    """Hands cached blocks back to the driver between candidates."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    if torch is not None:
        torch.cuda.empty_cache()


def _xp(a):
    cupy = sys.modules.get("cupy")
    return cupy if cupy is not None and isinstance(a, cupy.ndarray) else np


def _as_array(out, like):
    """A candidate's output as an array of x's module (torch tensors through
    __cuda_array_interface__, zero-copy)."""
    xp = _xp(like)
    return out if isinstance(out, xp.ndarray) else xp.asarray(out)


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


# ------------------------------------------------------------ the variants' own checks
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
    from .variants import variants

    dev = device_info(require_device())
    xg = cupy.asarray(x, dtype=cupy.float32)
    ref = softmax_reference(xg)
    result = {}
    for v in variants().values():
        reason = v.unsupported_reason(xg.shape[-1], dev)
        if reason:
            result[v.name] = reason
            continue
        y = cupy.full_like(xg, np.nan)
        softmax(xg, variant=v.name, out=y)
        result[v.name] = relative_error(y, ref)
    return result


def recorded_checks(run: dict) -> dict[str, float | str]:
    """name -> relative error (or status: reason) of every candidate of a recorded run."""
    return {r["name"]: r["check"]["relative_error"] if r["status"] == "ok" and r["check"] else
            f"{r['status']}: {r['reason']}" for r in run["candidates"]}
