"""GPU stress fuzzer: threads x streams x random shapes, layouts, dtypes, ops and variants.

Each case draws a shape (rows, cols: tiny, odd, LLM vocabularies, up to
600K columns), a layout (offset view, padded rows, transposed, 3-D with a
random axis), an out (new, poisoned contiguous, poisoned misaligned by 1 to
3 elements, in place), special values, a dtype (float32 as CuPy arrays;
float16 and bfloat16 as torch tensors, when torch is here), an op (softmax,
log_softmax, and softmax_backward / log_softmax_backward where softmax_lab
has them: y is the forward op of the input, in the same layout, dy a fresh
draw) and a variant that holds the dtype and op (or auto); the result is
compared with a float64 reference by the checks' measures: within 1e-5
relative for float32 and 1 ulp for the halves (log_softmax: plus LOG_FLOOR)
forward (reference.op_error), the backward ops' backward_op_error (float32
within 1e-6 of the terms' size, the halves within 1 ulp beyond 4 x 2^-24 of
it).  A variant named explicitly may refuse with CannotRun (auto may not);
anything else is a crash.

    python benchmarks/stress.py --seconds 240 --threads 6 --json out.json
    python benchmarks/stress.py --cases 40 --seed 7 --max-elements 2000000   # under compute-sanitizer
    python benchmarks/stress.py --seconds 120 --dtypes bfloat16 --ops softmax_backward
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import traceback

import numpy as np

import cupy as cp
import softmax_lab
from softmax_lab.reference import (BACKWARD_BOUNDS, backward_op_error, log_softmax_reference, op_error, op_reference,
                                   softmax_reference, to_float64)

try:
    import torch
except ImportError:  # float32 only
    torch = None

VOCABS = (32000, 50257, 100003, 128256, 151936, 256000)
DTYPES = ("float32", "float16", "bfloat16") if torch is not None and torch.cuda.is_available() else ("float32",)
OPS = ("softmax", "log_softmax") + tuple(op for op in ("softmax_backward", "log_softmax_backward")
                                          if callable(getattr(softmax_lab, op, None)))


def names(dtype: str, op: str) -> list[str]:
    """auto and the variants that hold dtype and op."""
    return ["auto", *(v.name for v in softmax_lab.variants().values()
                      if dtype in getattr(v, "dtypes", ("float32",)) and op in getattr(v, "ops", ("softmax",)))]


MAX_ELEMENTS = 24_000_000  # per case; --max-elements lowers it (under compute-sanitizer)


def draw_case(rng: np.random.Generator) -> dict:
    kind = rng.integers(5)
    if kind == 0:
        cols = int(rng.integers(1, 40))
    elif kind == 1:
        cols = int(rng.integers(40, 5000))
    elif kind == 2:
        cols = int(rng.choice(VOCABS)) + int(rng.integers(-3, 4))
    else:
        cols = int(np.exp(rng.uniform(np.log(5000), np.log(600_000))))
    rows = int(rng.integers(1, max(2, min(3000, MAX_ELEMENTS // cols))))
    dtype, op = str(rng.choice(DTYPES)), str(rng.choice(OPS))
    outs = ["new", "poisoned", "misaligned"] + ([] if op.endswith("backward") else ["in_place"])
    return {
        "rows": rows, "cols": cols, "dtype": dtype, "op": op, "variant": str(rng.choice(names(dtype, op))),
        "layout": str(rng.choice(["contiguous", "offset", "padded", "transposed", "3d"])),
        "out": str(rng.choice(outs)),
        "special": bool(rng.random() < 0.3), "scale": float(rng.uniform(0.1, 30)), "seed": int(rng.integers(2**31)),
    }


def make_input(c: dict):
    """(x, axis, dy): x in the case's layout and dtype (a backward op's y: the forward
    op of the draw, written into that layout), dy (backward) a contiguous draw."""
    rows, cols, r = c["rows"], c["cols"], np.random.default_rng(c["seed"])
    cp.random.seed(c["seed"])
    axis = -1
    k = 1 + int(r.integers(3))
    if c["layout"] == "offset":
        base, view = cp.random.standard_normal((rows, cols + 3), dtype=cp.float32), lambda b: b[:, k:][:, :cols]
    elif c["layout"] == "padded":
        base, view = cp.random.standard_normal((rows, cols + int(r.integers(1, 9))), dtype=cp.float32), \
            lambda b: b[:, :cols]
    elif c["layout"] == "transposed":
        base, view = cp.random.standard_normal((cols, rows), dtype=cp.float32), lambda b: b.T
    elif c["layout"] == "3d" and rows % 2 == 0:
        base, view = cp.random.standard_normal((2, rows // 2, cols), dtype=cp.float32), lambda b: b
        axis = int(r.integers(3))
    else:
        base, view = cp.random.standard_normal((rows, cols), dtype=cp.float32), lambda b: b
    base *= c["scale"]
    if c["special"]:
        flat = base.reshape(-1, base.shape[-1])
        row = int(r.integers(flat.shape[0]))
        which = int(r.integers(4))
        if which == 0:
            flat[row, r.integers(flat.shape[1], size=max(1, flat.shape[1] // 3))] = -cp.inf
        elif which == 1:
            flat[row] = -cp.inf
        elif which == 2:
            flat[row, int(r.integers(flat.shape[1]))] = cp.nan
        else:
            flat[row, int(r.integers(flat.shape[1]))] = cp.inf
    dy = None
    if c["op"].endswith("backward"):  # y = the forward op, in the layout
        forward = softmax_reference if c["op"] == "softmax_backward" else log_softmax_reference
        v = view(base)
        with np.errstate(invalid="ignore"):
            v[...] = forward(v, axis=axis).astype(cp.float32)
        dy = cp.random.standard_normal(v.shape, dtype=cp.float32)
    if c["dtype"] != "float32":  # torch rounds on its stream of this thread: the draw is finished first
        cp.cuda.get_current_stream().synchronize()
        tdtype = getattr(torch, c["dtype"])
        base = torch.as_tensor(base, device=f"cuda:{base.device.id}").to(tdtype)
        dy = torch.as_tensor(dy, device=f"cuda:{base.device.index}").to(tdtype) if dy is not None else None
        torch.cuda.current_stream().synchronize()
    return view(base), axis, dy


def error(y, ref, dtype: str, op: str, x64, dy64, axis: int) -> tuple[float, float]:
    """(the error, its bound): the forward ops' op_error (bound 1e-5 relative for
    float32, 1 ulp for the halves), the backward ops' backward_op_error."""
    got = to_float64(y)
    if op.endswith("backward"):
        return backward_op_error(got, ref, dy64, x64, dtype, op, axis), BACKWARD_BOUNDS[dtype]
    return op_error(got, ref, dtype, op), (1e-5 if dtype == "float32" else 1.0)


def empty(x, fill: bool):
    if hasattr(x, "data_ptr"):
        out = torch.empty(tuple(x.shape), dtype=x.dtype, device=x.device)
        return out.fill_(float("nan")) if fill else out
    return cp.full(x.shape, cp.nan, dtype=x.dtype)


def misaligned(x, k: int):
    n = int(np.prod(x.shape))
    if hasattr(x, "data_ptr"):
        buf = torch.full((n + 4,), float("nan"), dtype=x.dtype, device=x.device)
    else:
        buf = cp.full(n + 4, cp.nan, dtype=x.dtype)
    return buf[k : k + n].reshape(tuple(x.shape))


def run_case(c: dict) -> tuple[str, str]:
    """('ok' | 'refused' | 'mismatch' | 'crash', detail)."""
    x, axis, dy = make_input(c)
    x64, dy64 = to_float64(x), (to_float64(dy) if dy is not None else None)
    with np.errstate(invalid="ignore"):
        ref = op_reference(x64, c["op"], dy64, axis)
    out = None
    fn = getattr(softmax_lab, c["op"])
    try:
        if c["out"] == "poisoned":
            out = empty(x, fill=True)
        elif c["out"] == "misaligned":
            out = misaligned(x, int(np.random.default_rng(c["seed"]).integers(1, 4)))
        elif c["out"] == "in_place":
            contiguous = x.is_contiguous() if hasattr(x, "data_ptr") else x.flags.c_contiguous
            out = x if contiguous else (x.clone() if hasattr(x, "data_ptr") else x.copy())
            x = out
        if c["op"].endswith("backward"):
            y = fn(dy, x, axis=axis, variant=c["variant"], out=out)
        else:
            y = fn(x, axis=axis, variant=c["variant"], out=out)
        if out is not None and y is not out:
            return "mismatch", "out was not returned"
        err, bound = error(y, ref, c["dtype"], c["op"], x64, dy64, axis)
    except softmax_lab.CannotRun as e:  # a variant named explicitly refusing what it does not hold (auto never may)
        return ("refused" if c["variant"] != "auto" else "crash"), f"CannotRun: {e}"
    except Exception as e:  # counted as a crash
        return "crash", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    return ("ok" if err <= bound else "mismatch"), f"error {err:.3g} (bound {bound:g})"


def worker(seed: int, deadline: float, max_cases: int, tally: dict, lock: threading.Lock) -> None:
    rng = np.random.default_rng(seed)
    stream = cp.cuda.Stream(non_blocking=True)
    done = 0
    with stream:
        while time.time() < deadline and done < max_cases:
            c = draw_case(rng)
            status, detail = run_case(c)
            stream.synchronize()
            done += 1
            with lock:
                tally[status] = tally.get(status, 0) + 1
                for key in ("variant", "dtype", "op"):
                    by = tally.setdefault(f"by_{key}", {})
                    by[c[key]] = by.get(c[key], 0) + 1
                if status in ("mismatch", "crash") and len(tally.setdefault("failures", [])) < 20:
                    tally["failures"].append({"case": c, "detail": detail})


def main(argv=None) -> int:
    global MAX_ELEMENTS, DTYPES, OPS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="wall-clock budget")
    p.add_argument("--threads", type=int, default=4, help="threads, each on its own stream")
    p.add_argument("--cases", type=int, default=10**9, help="cases per thread at most")
    p.add_argument("--seed", type=int, default=int(time.time()), help="seed of the first thread")
    p.add_argument("--max-elements", type=int, default=MAX_ELEMENTS, help="elements per case at most (about)")
    p.add_argument("--dtypes", default=",".join(DTYPES), help="dtypes to draw from (comma list)")
    p.add_argument("--ops", default=",".join(OPS), help="ops to draw from (comma list)")
    p.add_argument("--json", help="write the tally here")
    args = p.parse_args(argv)
    MAX_ELEMENTS = args.max_elements
    dtypes, ops = tuple(args.dtypes.split(",")), tuple(args.ops.split(","))
    if not set(dtypes) <= set(DTYPES) or not set(ops) <= set(OPS):
        p.error(f"dtypes from {', '.join(DTYPES)} and ops from {', '.join(OPS)} here")
    DTYPES, OPS = dtypes, ops
    tally: dict = {}
    lock = threading.Lock()
    start = time.time()
    threads = [threading.Thread(target=worker, args=(args.seed + i, start + args.seconds, args.cases, tally, lock))
               for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cp.cuda.Device().synchronize()
    tally.update(seconds=round(time.time() - start, 1), threads=args.threads, seed=args.seed,
                 device=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                 cases=sum(tally.get(k, 0) for k in ("ok", "refused", "mismatch", "crash")))
    text = json.dumps(tally, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    print({k: v for k, v in tally.items() if k != "failures"})
    for f in tally.get("failures", [])[:5]:
        print("FAILURE", f)
    return 0 if not tally.get("mismatch") and not tally.get("crash") else 1


if __name__ == "__main__":
    sys.exit(main())
