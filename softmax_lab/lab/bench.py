"""The benchmark run: every candidate checked, then timed, on one input, set against
a copy of the same bytes (`softmax-lab bench`); the same over a grid of shapes
(`softmax-lab sweep`).

For each shape, dtype and op (float32 softmax unless asked), x is fresh
standard normal (seeded, drawn in float32 by CuPy, then rounded to the dtype
by torch for the halves; never zeros); a backward op's y is the forward op of
such an x and its dy another standard normal draw.  Each candidate that can
run here (else: skipped, with the reason):

  1. its output is poisoned with NaN and one call is checked (check_output):
     CHECK_ROWS rows sampled across the whole output (one from each equal band
     of rows, the first and last included) against the float64 reference
     (float32: relative error; halves: ulp error of the dtype), and every row
     against an invariant of the op (softmax: its sum is 1; log_softmax: the
     sum of its exp is 1; backward: its sum is what float64 gives; a copy
     equals x, an add y + dy);
  2. `warmup` calls; the output is poisoned again; `repeats` timed calls
     (timing.gpu_times: CUDA events, back to back on one stream);
  3. the last timed call's output is checked the same way, so a kernel that
     fails only under repetition is recorded as failed, never timed as correct.

The copy ceiling is the copy with the lowest median; records.make_run sets each
candidate against it.  The headline bench also times the host candidates:
microseconds per call on a HOST_SHAPE input (timing.host_times).
"""

from __future__ import annotations

import contextlib
import functools
import math
import platform
import sys
from importlib import metadata

import numpy as np

try:
    from tqdm import tqdm
except ImportError:  # progress is a nicety: an offline GPU machine may lack tqdm
    tqdm = None

from .. import reference
from ..device import NoDeviceError, device_info, require_device
from ..problem import DTYPES, ITEMSIZE
from ..reference import (
    BACKWARD_HALF_FLOOR,
    array_module,
    backward_op_error,
    op_error,
    op_reference,
    relative_error,
    softmax_reference,
)
from . import candidates as cat
from . import loss, records, timing

HEADLINE = (4096, 393216)
REPEATS = 30
MIN_REPEATS = 20  # the least the CLI accepts; the functions take fewer for smoke tests
WARMUP = 5
HOST_CALLS = 2000
HOST_WARMUP = 200
CHECK_ROWS = 32
TOLERANCE = 1e-5  # float32: largest relative error (reference.relative_error) on the sampled rows
ROW_SUM_TOLERANCE = 1e-4  # float32: largest |row sum - 1| over every row (of the op's invariant)
# Halves: the largest error in ulp of the dtype on the sampled rows (the kernels
# promise 1; a peer's rounding gets 2 here), and the bound on every row's
# invariant (an unwritten, NaN or garbage row breaks it by far more).
ULP_TOLERANCE = 2.0
ROW_TOLERANCE = {"float32": ROW_SUM_TOLERANCE, "float16": 1e-2, "bfloat16": 4e-2}
CHUNK_ELEMENTS = 2**26  # rows checked a block of this many elements at a time (float64 temporaries)

# The sweep's grid: row lengths (LLM vocabularies 32000, 128256, 151936; odd
# 100003; 1K to 4M) by batch: fewer rows than SMs (32), about one row per SM
# (132), and many rows (GRID_ELEMENTS per tensor, rows rounded to a power of two).
GRID_COLS = (1024, 4096, 32000, 65536, 100003, 128256, 151936, 262144, 393216, 1048576, 4194304)
GRID_FEW_ROWS = (32, 132)
GRID_ELEMENTS = 2**29  # 2 GiB of float32 per tensor
GRID_EXTRA = ((512, 100003), (1024, 1048576))  # shapes of issue 7's table not on the grid
GRID_MAX_BYTES = 4 * 2**30  # no tensor larger, whatever the device's memory
EXPLICIT = object()  # the group of a shape the sweep was given without one


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


def tolerance(dtype: str) -> float:
    return TOLERANCE if dtype == "float32" else ULP_TOLERANCE


def check_output(out, x, idx: list[int], ref, is_copy: bool, dtype: str = "float32", op: str = "softmax",
                 dy=None) -> dict:
    """One check of an output: the error of the sampled rows against `ref` (float64;
    relative for float32, in ulp for the halves: a backward op's beyond float32's part,
    backward_op_error's, as the tests measure it), and over every row the op's
    invariant (row_invariant_error; for a copy 0 if the output equals x, for a
    backward floor 0 if it equals x + dy).  NumPy or CuPy arrays, or torch tensors."""
    if hasattr(out, "data_ptr"):  # torch checks on torch's stream: what the timed stream holds is finished first
        sys.modules["cupy"].cuda.get_current_stream().synchronize()
    out_rows = reference.to_float64(out[idx])
    if dy is not None and not is_copy and dtype != "float32":
        # dx = y (dy - sum) cancels where dy is near the sum: float32's error of the sum then
        # exceeds an ulp of the small dx for every implementation (torch's, quack's, ours)
        dy_rows, y_rows = reference.to_float64(dy[idx]), reference.to_float64(x[idx])
        err = backward_op_error(out_rows, ref, dy_rows, y_rows, dtype, op)
    else:
        err = op_error(out_rows, ref, dtype, op)
    if is_copy:
        whole = 0.0 if _equal(out, x, dy) else math.inf
    else:
        whole = row_invariant_error(out, x, op, dy)
    passed = err <= tolerance(dtype) and whole <= ROW_TOLERANCE[dtype]  # NaN compares False: fails
    result = {"relative_error": records.finite_or_none(relative_error(out_rows, ref)), "row_sum_error": records.finite_or_none(whole),
              "passed": bool(passed)}
    if dtype != "float32":
        result["ulp_error"] = records.finite_or_none(err)
    return result


def row_invariant_error(out, x, op: str, dy=None) -> float:
    """Over every row, a block of rows at a time in float64: softmax |sum - 1|;
    log_softmax |sum(exp) - 1|; backward |sum(dx) - sum of float64's dx| / sum |dx|
    (float64's sum: softmax (1 - sum y) * sum(dy y); log_softmax sum(dy) (1 - sum exp y)).
    The largest over the rows; inf where a row is not finite."""
    rows = out.shape[0]
    step = max(1, CHUNK_ELEMENTS // max(1, out.shape[-1]))
    worst = 0.0
    for r in range(0, rows, step):
        o = reference.to_float64(out[r:r + step])
        xp = array_module(o)
        if op == "softmax":
            e = xp.abs(o.sum(axis=-1) - 1.0)
        elif op == "log_softmax":
            e = xp.abs(xp.exp(o).sum(axis=-1) - 1.0)
        else:
            y, g = reference.to_float64(x[r:r + step]), reference.to_float64(dy[r:r + step])
            if op == "softmax_backward":
                expected = (1.0 - y.sum(axis=-1)) * (g * y).sum(axis=-1)
            else:
                expected = g.sum(axis=-1) * (1.0 - xp.exp(y).sum(axis=-1))
            e = xp.abs(o.sum(axis=-1) - expected) / xp.maximum(xp.abs(o).sum(axis=-1), 1e-300)
        m = float(xp.max(xp.where(xp.isfinite(e), e, xp.inf)))
        if not m <= worst:  # NaN or larger
            worst = m if not math.isnan(m) else math.inf
    return worst


def _equal(out, x, dy=None) -> bool:
    """out == x (a copy) or out == x + dy (a backward floor), bit for bit in the dtype."""
    if hasattr(out, "data_ptr"):
        import torch

        want = x if dy is None else torch.add(x, dy)
        return bool(torch.equal(out, want))
    xp = array_module(out)
    return bool(xp.array_equal(out, x if dy is None else x + dy))


def measure(c: cat.Candidate, prep: cat.Prepared, x, idx: list[int], ref, timer, repeats: int,
            warmup: int, dtype: str = "float32", op: str = "softmax", dy=None, checker=None) -> dict:
    """One candidate's record: check one call, time `repeats` calls after `warmup`
    (timer(call, repeats, warmup, before_timed) -> (times in ms, last output)),
    check the last timed call's output (of an in-place candidate, prep.again's: one
    more call from its inputs restored).  checker(output) -> the check's result, where
    given (the loss ops'); check_output's otherwise.  Exceptions are recorded as failed."""
    rows, cols = x.shape
    is_copy = c.kind == "copy"
    check = {"rows": idx, "poisoned": prep.poisoned, "relative_error": None, "calls": []}
    keys = ("relative_error", "row_sum_error") + (("ulp_error",) if dtype != "float32" and checker is None else ())

    def verdict(out, after: str) -> bool:
        if checker is not None:
            result = checker(out)
        else:
            result = check_output(_as_array(out, x), x, idx, ref, is_copy, dtype, op, dy)
        check["calls"].append({"after": after, **{k: result[k] for k in keys}})
        for k in keys[:1] + keys[2:]:
            errors = [e[k] for e in check["calls"]]
            check[k] = None if None in errors else max(errors)
        return result["passed"]

    try:
        prep.poison()
        if not verdict(prep.call(), "the first call"):
            return records.record(c, rows, cols, check=check, status="failed",
                                  reason=_check_reason(check, dtype, checker is not None), dtype=dtype, op=op)
        times, last = timer(prep.call, repeats, warmup, prep.poison)
        after = f"the last of {repeats} timed calls"
        if prep.again is not None:
            prep.poison()
            last, after = prep.again(), f"{repeats} timed calls in place, then one from the inputs restored"
        if not verdict(last, after):
            return records.record(c, rows, cols, check=check, status="failed",
                                  reason=_check_reason(check, dtype, checker is not None), dtype=dtype, op=op)
    except Exception as e:  # one candidate's failure (out of memory, a compiler missing) is recorded, not fatal
        return records.record(c, rows, cols, check=check if check["calls"] else None, status="failed",
                              reason=f"raised {cat.one_line(e)}", dtype=dtype, op=op)
    return records.record(c, rows, cols, times_ms=times, check=check, dtype=dtype, op=op)


def _check_reason(check: dict, dtype: str = "float32", loss: bool = False) -> str:
    last = check["calls"][-1]
    if loss:  # lab/loss.py's check and its tolerances
        return (f"check failed after {last['after']}: relative error {last['relative_error']} on "
                f"{len(check['rows'])} sampled rows, largest error of a row's loss or gradient invariant "
                f"{last['row_sum_error']} (tolerances: lab/loss.py); null means NaN or infinite")
    if dtype == "float32":
        err = f"relative error {last['relative_error']}"
    else:
        err = f"ulp error {last['ulp_error']}"
    return (f"check failed after {last['after']}: {err} on {len(check['rows'])} sampled rows (at most "
            f"{tolerance(dtype):g}), largest row invariant error {last['row_sum_error']} "
            f"(at most {ROW_TOLERANCE[dtype]:g}); null means NaN or infinite")


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
              command: str | None = None, dtypes=("float32",), ops=("softmax",), checkpoint=None,
              clocks: bool = False, loop: int = 0) -> dict:
    """Checks and times the candidates (all, or those named) on one rows x cols input,
    one run per dtype and op; the host candidates (float32 softmax) on a HOST_SHAPE input.
    checkpoint(document so far), when given, is called after each run.  clocks: each
    timed record carries NVML's clocks, power and clock reasons while its calls ran.
    loop: time each of `repeats` samples as the mean of `loop` back-to-back calls, host
    included (timing.loop_times: small calls as a decoding loop sees them), not by events."""
    return _run("bench", [(rows, cols, None)], names, None, dtypes, ops, repeats, warmup, seed, host_calls,
                progress, command, fit=False, checkpoint=checkpoint, clocks=clocks, loop=loop)


def run_sweep(shapes=None, *, names=None, repeats: int = REPEATS, warmup: int = WARMUP, seed: int = 0,
              progress: bool = True, command: str | None = None, checkpoint=None, dtypes=("float32",),
              ops=("softmax",), clocks: bool = False, loop: int = 0) -> dict:
    """The benchmark on each (rows, cols, group) of `shapes` (grid_shapes() by default),
    each dtype and op, for the candidates named (auto and the op's peers by
    default; never the host candidates).  checkpoint(document so far), when given,
    is called after each run (the CLI saves it, so a run cut short by a time limit
    still leaves its shapes).  clocks and loop: as run_bench's."""
    shapes = grid_shapes() if shapes is None else [tuple(s) if len(s) == 3 else (*s, EXPLICIT) for s in shapes]
    return _run("sweep", shapes, names, "grid", dtypes, ops, repeats, warmup, seed, 0, progress, command, fit=True,
                checkpoint=checkpoint, clocks=clocks, loop=loop)


def load_or_run(kind: str, results, measure: bool = False, **kwargs) -> tuple[dict | None, str]:
    """measure=True on a GPU: run `softmax-lab <kind>` now (minutes), with kwargs.
    Otherwise the recorded results, as records.recorded() gives them."""
    if kind not in ("bench", "sweep"):
        raise ValueError(f"kind must be 'bench' or 'sweep'; got {kind!r}")
    if measure:
        reason = gpu_reason()
        if reason is None:
            doc = run_bench(**kwargs) if kind == "bench" else run_sweep(**kwargs)
            return doc, f"Measured now on {doc['device']['name']}."
        doc, note = records.recorded(kind, results)
        return doc, f"Cannot measure here ({reason}). {note}"
    return records.recorded(kind, results)


def _chosen(names, default, dtype, op, hosts: bool):
    if default == "grid" and names is None:
        names = cat.GRID_NAMES if (dtype, op) == cat.DEFAULT else cat.grid_names(op)
    chosen = cat.select(names, dtype=dtype, op=op)
    return tuple(c for c in chosen if hosts or c.kind != "host")


def _run(kind, shapes, names, default, dtypes, ops, repeats, warmup, seed, host_calls, progress, command, fit,
         checkpoint=None, clocks: bool = False, loop: int = 0):
    if repeats < 1 or warmup < 0 or loop < 0:
        raise ValueError(f"need repeats >= 1, warmup >= 0 and loop >= 0; got {repeats}, {warmup}, {loop}")
    for rows, cols, _ in shapes:
        if rows < 1 or cols < 1:
            raise ValueError(f"rows and cols must be positive; got {rows} x {cols}")
    pairs = [(d, o) for d in dtypes for o in ops]
    for d, o in pairs:
        cat.check_dtype_op(d, o)
    dev = device_info(require_device())
    shapes = [(r, c, records.shape_group(r, dev.sm_count) if g is EXPLICIT else g, g is not EXPLICIT)
              for r, c, g in shapes]
    torch, torch_reason = cat.torch_status()
    chosen = {p: _chosen(names, default, *p, hosts=bool(host_calls)) for p in pairs}
    quack_reason = (cat.quack_status() if any(c.name.startswith("quack.") for cs in chosen.values() for c in cs)
                    else None)
    hosts = [c for cs in chosen.values() for c in cs if c.kind == "host"]
    runs = []
    device = records.device_record(dev)

    sampler, clock_method = None, {}
    if clocks:
        read, why_not = timing.nvml_reader(dev.id)
        sampler = timing.ClockSampler(read) if read is not None else None
        clock_method = {"clocks": why_not or (f"NVML every {timing.SAMPLE_INTERVAL_S * 1000:g} ms while a "
                                              "candidate's timed calls ran")}

    def document():
        return records.make_document(kind, runs, device, versions(torch),
                                     method(repeats, warmup, seed, host_calls, loop) | clock_method, command)

    total = sum(len([c for c in cs if c.kind != "host"]) for cs in chosen.values()) * len(shapes) + len(hosts)
    bar = _bar(progress, total, kind)
    with bar, sampler or contextlib.nullcontext():
        for rows, cols, group, of_grid in shapes:
            for dtype, op in pairs:
                sized = [c for c in chosen[dtype, op] if c.kind != "host"]
                r = _fit_rows(rows, cols, dtype, op, of_grid) if fit else rows
                runs.append(_shape(r, cols, group, sized, dev, torch, torch_reason, quack_reason, repeats, warmup,
                                   seed, bar, dtype, op, sampler, loop))
                if clocks and sampler is None:  # asked for, but NVML cannot be read: method.clocks says why
                    for rec in runs[-1]["candidates"]:
                        rec["clocks"] = None
                if checkpoint is not None:
                    checkpoint(document())
        if hosts:
            first = next(run for run in runs if (run["dtype"], run["op"]) == cat.DEFAULT)
            first["candidates"] += [_host(c, dev, torch, torch_reason, host_calls, bar) for c in hosts]
    return document()


def make_arrays(rows: int, cols: int, dtype: str, op: str, seed: int, torch=None) -> cat.Arrays:
    """The input (and dy, backward) and the output buffer: float32 as CuPy arrays;
    float16 and bfloat16 as torch tensors (CuPy has no bfloat16), rounded from the
    same float32 draw.  A backward op's y is the forward op of the draw; a loss op's
    arrays are lab/loss.py's (logits, targets as dy, the gradient's buffer)."""
    import cupy

    if loss.is_loss(op):
        return loss.make_arrays(rows, cols, dtype, op, seed, torch)
    rng = cupy.random.default_rng(seed)
    x = rng.standard_normal((rows, cols), dtype=cupy.float32)
    dy = rng.standard_normal((rows, cols), dtype=cupy.float32) if cat.is_backward(op) else None
    if cat.is_backward(op):  # y = the forward op of x, in float32 then rounded
        m = x.max(axis=-1, keepdims=True)
        x -= m
        if op == "softmax_backward":
            cupy.exp(x, out=x)
            x /= x.sum(axis=-1, keepdims=True)
        else:
            x -= cupy.log(cupy.exp(x).sum(axis=-1, keepdims=True))
    if dtype != "float32":  # torch works on its own stream: the draw is finished first, and the rounding after
        cupy.cuda.get_current_stream().synchronize()
        tdtype = getattr(torch, dtype)
        device = f"cuda:{x.device.id}"
        x = torch.as_tensor(x, device=device).to(tdtype)
        dy = torch.as_tensor(dy, device=device).to(tdtype) if dy is not None else None
        out = torch.empty_like(x)
        torch.cuda.synchronize(device)
    else:
        out = cupy.empty_like(x)
    return cat.Arrays(x, out, dy, dtype, op)


def _shape(rows, cols, group, chosen, dev, torch, torch_reason, quack_reason, repeats, warmup, seed, bar,
           dtype="float32", op="softmax", sampler=None, loop: int = 0) -> dict:
    recs = []
    arrays = None
    with cat.timed_stream(torch) as stream:
        idx = check_rows(rows, seed=seed)
        refs = {}
        if dtype == "float32" or torch is not None:
            arrays = make_arrays(rows, cols, dtype, op, seed, torch)
            x, dy = arrays.x, arrays.dy
            wide = reference.to_float64
            if loss.is_loss(op):  # dy: the targets
                refs = loss.references(x, dy, idx, op == "cross_entropy_grad")
            else:
                refs = {"op": op_reference(wide(x[idx]), op, None if dy is None else wide(dy[idx])),
                        "copy": wide(x[idx]) if dy is None else wide(x[idx]) + wide(dy[idx])}

        tokens = []  # the sampler's tokens of the current candidate's timed calls

        def timed(call, n, w, before):
            if loop:
                return timing.loop_times(call, stream.synchronize, n, w, loop, before)
            return timing.gpu_times(call, stream, n, w, before)

        def timer(call, n, w, before):
            if sampler is None:
                return timed(call, n, w, before)
            with sampler.measuring() as token:
                tokens.append(token)
                return timed(call, n, w, before)

        for c in chosen:
            bar.set_postfix_str(f"{rows}x{cols} {dtype} {op} {c.name}")
            reason = cat.skip_reason(c, cols, dev, torch_reason, quack_reason, dtype, op)
            try:
                c = c if reason else cat.resolve(c, rows, cols, dev, dtype, op)
            except Exception as e:  # auto's chooser raised: recorded, the run goes on
                recs.append(records.record(c, rows, cols, status="failed", reason=f"raised {cat.one_line(e)}",
                                           dtype=dtype, op=op))
                bar.update()
                continue
            if reason:
                recs.append(records.record(c, rows, cols, status="skipped", reason=reason, dtype=dtype, op=op))
            else:
                try:
                    prep = prepare(c, arrays, dev, torch)
                except Exception as e:
                    recs.append(records.record(c, rows, cols, status="failed", reason=f"raised {cat.one_line(e)}",
                                               dtype=dtype, op=op))
                else:
                    tokens.clear()
                    if loss.is_loss(op):
                        checker = functools.partial(loss.check, x=arrays.x, refs=refs, idx=idx, dtype=dtype, op=op, c=c)
                        recs.append(measure(c, prep, arrays.x, idx, None, timer, repeats, warmup, dtype, op,
                                            checker=checker))
                    else:
                        ref = refs["copy" if c.kind == "copy" else "op"]
                        recs.append(measure(c, prep, arrays.x, idx, ref, timer, repeats, warmup, dtype, op, arrays.dy))
                    if sampler is not None:
                        recs[-1]["clocks"] = sampler.summary(tokens[-1]) if recs[-1]["stats"] and tokens else None
                    del prep
            _release(torch)
            bar.update()
        stream.synchronize()
        del arrays, refs
    _release(torch)
    return records.make_run(rows, cols, recs, dev.l2_bytes, group, dtype, op)


def _host(c, dev, torch, torch_reason, calls, bar) -> dict:
    bar.set_postfix_str(c.name)
    rows, cols = cat.HOST_SHAPE
    reason = cat.skip_reason(c, cols, dev, torch_reason, None)
    try:
        if reason:
            return records.record(c, rows, cols, status="skipped", reason=reason)
        with cat.timed_stream(torch) as stream:
            call = cat.prepare_host(c, dev, torch)
            us = timing.host_times(call, calls, HOST_WARMUP, stream.synchronize)
        return records.record(c, rows, cols, host_us=us)
    except Exception as e:
        return records.record(c, rows, cols, status="failed", reason=f"raised {cat.one_line(e)}")
    finally:
        bar.update()


def prepare(c: cat.Candidate, arrays: cat.Arrays, dev, torch=None) -> cat.Prepared:
    """How to run `c` once on `arrays`: the loss ops' candidates by lab/loss.py, the others by candidates.py."""
    if loss.is_loss(arrays.op):
        return loss.prepare_loss(c, arrays.x, arrays.dy, arrays.out, arrays.op, dev, torch)
    return cat.prepare(c, arrays, dev, torch)


def _fit_rows(rows: int, cols: int, dtype: str = "float32", op: str = "softmax", grid: bool = True) -> int:
    """rows, halved until a tensor is at most an eighth of the free memory (a twelfth
    for a backward op, which holds three tensors) and, for a shape of the grid (not
    one asked for by --shape), GRID_MAX_BYTES (in float32 bytes: the halves run the
    same shapes)."""
    import cupy

    free = cupy.cuda.runtime.memGetInfo()[0]
    share = 12 if cat.is_backward(op) or op == "cross_entropy_grad" else 8
    limit = min(GRID_MAX_BYTES, free // share) if grid else free // share
    while rows > 1 and rows * cols * max(ITEMSIZE, DTYPES[dtype]) > limit:
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


def method(repeats: int, warmup: int, seed: int, host_calls: int = 0, loop: int = 0) -> dict:
    timer = ("a pair of CUDA events around each call, calls back to back on one stream; median, min, max" if not loop
             else f"the wall time of a loop of {loop} back-to-back calls on one stream, host included, divided by "
                  f"{loop} (time.perf_counter between two synchronizations), after `warmup` untimed loops; "
                  f"median, min, max of the loops")
    return {
        "repeats": repeats, "warmup": warmup, "seed": seed, "check_rows": CHECK_ROWS, "tolerance": TOLERANCE,
        "row_sum_tolerance": ROW_SUM_TOLERANCE, "host_calls": host_calls or None,
        "input": "standard normal float32 (cupy.random.default_rng(seed))",
        "halves": (f"float16 and bfloat16: the float32 draw rounded by torch (.to(dtype)), torch tensors; checked in "
                   f"ulp of the dtype (at most {ULP_TOLERANCE:g}; the backward ops' beyond "
                   f"{BACKWARD_HALF_FLOOR * 2**24:g} x 2^-24 of the size of the terms they add up), every row's "
                   f"invariant within {ROW_TOLERANCE['float16']:g} (float16), {ROW_TOLERANCE['bfloat16']:g} (bfloat16)"),
        "backward": ("y = the forward op of a standard normal draw (float32, then rounded), dy a second draw; "
                     "the floor is a two-read, one-write add (y + dy) of the same size; every row's sum of dx "
                     "against float64's"),
        "timer": timer, "loop_calls": loop or None,
        "stream": ("one new non-blocking stream, current for CuPy and torch while a shape runs; every candidate "
                   "called as a user writes it, with no stream argument or context of its own"),
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


def _as_array(out, like):
    """A candidate's output as an array of x's module (torch tensors through
    __cuda_array_interface__, zero-copy); torch tensors where x is one (the halves)."""
    if hasattr(like, "data_ptr"):
        return out
    xp = array_module(like)
    return out if isinstance(out, xp.ndarray) else xp.asarray(out)


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

    from ..api import softmax
    from ..variants import variants

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
