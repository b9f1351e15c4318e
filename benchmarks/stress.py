"""GPU stress fuzzer: threads x streams x random shapes, layouts and variants.

Each case draws a shape (rows, cols: tiny, odd, LLM vocabularies, up to
600K columns), a layout (offset view, padded rows, transposed, 3-D with a
random axis), an out (new, poisoned contiguous, poisoned misaligned by 4 to
12 bytes, in place), special values, and a variant (or auto); the result is
compared, row by row, with a float64 reference.  Refusals must be
ValueError/TypeError for a reason that holds; anything else is a crash.

    python benchmarks/stress.py --seconds 240 --threads 6 --json out.json
    python benchmarks/stress.py --cases 40 --seed 7       # e.g. under compute-sanitizer
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
from softmax_lab.reference import relative_error, softmax_reference

VOCABS = (32000, 50257, 100003, 128256, 151936, 256000)
NAMES = ["auto", *softmax_lab.variants()]


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
    rows = int(rng.integers(1, max(2, min(3000, 24_000_000 // cols))))
    return {
        "rows": rows, "cols": cols, "variant": str(rng.choice(NAMES)),
        "layout": str(rng.choice(["contiguous", "offset", "padded", "transposed", "3d"])),
        "out": str(rng.choice(["new", "poisoned", "misaligned", "in_place"])),
        "special": bool(rng.random() < 0.3), "scale": float(rng.uniform(0.1, 30)), "seed": int(rng.integers(2**31)),
    }


def make_input(c: dict):
    rows, cols, r = c["rows"], c["cols"], np.random.default_rng(c["seed"])
    cp.random.seed(c["seed"])
    axis = -1
    if c["layout"] == "offset":
        x = cp.random.standard_normal((rows, cols + 3), dtype=cp.float32)[:, 1 + int(r.integers(3)) :][:, :cols]
    elif c["layout"] == "padded":
        x = cp.random.standard_normal((rows, cols + int(r.integers(1, 9))), dtype=cp.float32)[:, :cols]
    elif c["layout"] == "transposed":
        x = cp.random.standard_normal((cols, rows), dtype=cp.float32).T
    elif c["layout"] == "3d" and rows % 2 == 0:
        x = cp.random.standard_normal((2, rows // 2, cols), dtype=cp.float32)
        axis = int(r.integers(3))
    else:
        x = cp.random.standard_normal((rows, cols), dtype=cp.float32)
    x *= c["scale"]
    if c["special"]:
        flat = x.reshape(-1, x.shape[-1]) if x.flags.c_contiguous else None
        if flat is not None:
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
    return x, axis


def run_case(c: dict) -> tuple[str, str]:
    """('ok' | 'refused' | 'mismatch' | 'crash', detail)."""
    x, axis = make_input(c)
    ref = softmax_reference(x, axis=axis)
    out = None
    try:
        if c["out"] == "poisoned":
            out = cp.full(x.shape, cp.nan, dtype=cp.float32)
        elif c["out"] == "misaligned":
            k = int(np.random.default_rng(c["seed"]).integers(1, 4))
            buf = cp.full(x.size + 4, cp.nan, dtype=cp.float32)
            out = buf[k : k + x.size].reshape(x.shape)
        elif c["out"] == "in_place":
            out = x.copy() if not x.flags.c_contiguous else x
            x = out
        y = softmax_lab.softmax(x, axis=axis, variant=c["variant"], out=out)
        if out is not None and y is not out:
            return "mismatch", "out was not returned"
        err = relative_error(y, ref)
    except ValueError as e:
        holds = c["variant"] == "single_read" and "at most" in str(e)
        return ("refused" if holds else "crash"), f"ValueError: {e}"
    except Exception as e:  # counted as a crash
        return "crash", f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}"
    return ("ok" if err < 1e-5 else "mismatch"), f"relative error {err:.3g}"


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
                tally.setdefault("by_variant", {}).setdefault(c["variant"], 0)
                tally["by_variant"][c["variant"]] += 1
                if status in ("mismatch", "crash") and len(tally.setdefault("failures", [])) < 20:
                    tally["failures"].append({"case": c, "detail": detail})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0, help="wall-clock budget")
    p.add_argument("--threads", type=int, default=4, help="threads, each on its own stream")
    p.add_argument("--cases", type=int, default=10**9, help="cases per thread at most")
    p.add_argument("--seed", type=int, default=int(time.time()), help="seed of the first thread")
    p.add_argument("--json", help="write the tally here")
    args = p.parse_args(argv)
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
