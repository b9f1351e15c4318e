"""softmax-lab context: what a softmax adds to a step whose GEMM computes its logits.

A model computes the logits with a GEMM (an LM head: tokens x features @
features x vocabulary) and hands them to softmax.  Timing "GEMM then softmax"
and taking away a GEMM timed on its own misleads: a large GEMM runs at the
power cap, its clocks move with power and heat, and its time wanders from run
to run by more than the softmax costs.

So the steps are interleaved.  Each round times, for each candidate, the GEMM
alone and the GEMM followed by the candidate, next to each other, in an order
that alternates from round to round, then the candidate alone on the logits.
The candidate's cost in context is, round by round, its step's time less the
GEMM beside it; the report gives the median and spread of that difference
over the rounds, beside the candidate's time alone and beside the naive figure
(its steps' median less the median of a block of GEMMs timed before the
rounds).  The SM clock, the board power and the driver's reasons for holding
the clock down are sampled through NVML (nvidia-ml-py) while the rounds run.

Every step runs on one stream, each between its own pair of CUDA events; the
host waits once at the end of each round.  The document follows
context_schema.json.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from .. import reference
from ..problem import DTYPES
from . import candidates as cat
from . import records
from .timing import SAMPLE_INTERVAL_S, ClockSampler, format_clocks, nvml_reader

SCHEMA = "softmax-lab-context/1"
GEMM = (4096, 4096, 128256)  # tokens, features, vocabulary: a bf16 LM head of a 128256-word vocabulary
DEFAULT_DTYPE = "bfloat16"
DEFAULT_NAMES = ("auto", "copy.memcpy", "torch.softmax", "quack.softmax")
ROUNDS = 40
MIN_ROUNDS = 10
WARMUP_ROUNDS = 3
GEMM_BLOCK = 20  # GEMMs timed back to back before the rounds: the naive figure's reference


# ------------------------------------------------------------ the rounds (no GPU of their own)
def interleave(gemm, calls: dict, rounds: int, timer, on_round=None) -> dict:
    """Times, per candidate, `rounds` rounds of: the GEMM alone and the GEMM then the
    candidate (that order in even rounds, the other in odd ones), then the candidate
    alone; the candidates take turns going first.  `calls` maps a name to the
    candidate's call; timer.start(fn) runs fn between a pair of events and returns a
    handle, timer.finish() waits for the round and returns each handle's milliseconds.
    on_round(r) is called as round r begins.  Returns {"gemm"|"step"|"alone": {name: [ms]}}."""
    names = list(calls)
    times = {key: {n: [] for n in names} for key in ("gemm", "step", "alone")}
    for r in range(rounds if names else 0):
        if on_round is not None:
            on_round(r)
        first = r % len(names)
        handles = []
        for name in names[first:] + names[:first]:
            call = calls[name]

            def step(call=call):
                gemm()
                call()

            pair = [("gemm", gemm), ("step", step)]
            for key, fn in (pair if r % 2 == 0 else pair[::-1]) + [("alone", call)]:
                handles.append((key, name, timer.start(fn)))
        for (key, name, _), ms in zip(handles, timer.finish([h for *_, h in handles])):
            times[key][name].append(ms)
    return times


def difference(step_ms, gemm_ms) -> dict:
    """The round-by-round difference step - GEMM: median, quartiles, min, max (ms)."""
    d = np.asarray(step_ms, dtype=np.float64) - np.asarray(gemm_ms, dtype=np.float64)
    if d.size == 0:
        raise ValueError("no rounds to take the difference of")
    q25, median, q75 = (float(v) for v in np.percentile(d, (25, 50, 75)))
    return {"rounds": int(d.size), "median_ms": median, "q25_ms": q25, "q75_ms": q75, "min_ms": float(d.min()),
            "max_ms": float(d.max())}


# ------------------------------------------------------------ on the GPU
class EventTimer:
    """timer.start(fn): fn between a pair of CUDA events on `stream`; finish(handles): one
    wait, then each pair's milliseconds."""

    def __init__(self, stream):
        self.stream = stream

    def start(self, fn):
        import cupy

        begin, end = cupy.cuda.Event(), cupy.cuda.Event()
        begin.record(self.stream)
        fn()
        end.record(self.stream)
        return begin, end

    def finish(self, handles) -> list[float]:
        import cupy

        self.stream.synchronize()
        return [cupy.cuda.get_elapsed_time(begin, end) for begin, end in handles]


def check_gemm(m: int, k: int, n: int, dtype: str) -> None:
    if min(m, k, n) < 1 or dtype not in DTYPES:
        raise ValueError(f"the GEMM is M x K @ K x N of positive sizes in one of {', '.join(DTYPES)}; "
                         f"got {m} x {k} @ {k} x {n} in {dtype!r}")


def run_context(m: int = GEMM[0], k: int = GEMM[1], n: int = GEMM[2], *, dtype: str = DEFAULT_DTYPE, names=None,
                rounds: int = ROUNDS, warmup: int = WARMUP_ROUNDS, seed: int = 0, command: str | None = None,
                progress=None) -> dict:
    """Runs the rounds on the current device (torch is required: the GEMM is torch.matmul
    into a preallocated M x N output); returns a context document."""
    from ..device import device_info, require_device
    from . import bench

    check_gemm(m, k, n, dtype)
    if rounds < 1:
        raise ValueError(f"rounds must be positive; got {rounds}")
    torch, torch_reason = cat.torch_status()
    if torch is None:
        raise RuntimeError(f"softmax-lab context needs torch for its GEMM: {torch_reason}")
    dev = device_info(require_device())
    chosen = cat.select(names, DEFAULT_NAMES, dtype, "softmax")
    quack_reason = cat.quack_status() if any(c.name.startswith("quack.") for c in chosen) else None
    tdtype = getattr(torch, dtype)
    recorded, prepared, kept = {}, {}, {}  # by name
    with cat.timed_stream(torch) as stream:
        g = torch.Generator(device=f"cuda:{dev.id}").manual_seed(seed)
        a = torch.randn(m, k, device=f"cuda:{dev.id}", generator=g).to(tdtype)
        b = (torch.randn(k, n, device=f"cuda:{dev.id}", generator=g) / math.sqrt(k)).to(tdtype)
        logits = torch.empty(m, n, device=f"cuda:{dev.id}", dtype=tdtype)
        arrays = cat.Arrays(logits, torch.empty_like(logits), None, dtype, "softmax")

        def gemm():
            torch.matmul(a, b, out=logits)

        gemm()
        for c in chosen:
            reason = cat.skip_reason(c, n, dev, torch_reason, quack_reason, dtype, "softmax")
            if reason:
                recorded[c.name] = _record(c, "skipped", reason)
                continue
            try:
                c = cat.resolve(c, m, n, dev, dtype, "softmax")
                prep = cat.prepare(c, arrays, dev, torch)
                prep.call()  # a first call (compiling, tuning) outside the rounds
                prepared[c.name], kept[c.name] = prep, c
            except Exception as e:  # a candidate that cannot be set up or run is recorded, the rest run
                recorded[c.name] = _record(c, "failed", f"raised {cat.one_line(e)}")
        calls = {name: prep.call for name, prep in prepared.items()}
        timer = EventTimer(stream)
        for _ in range(max(0, warmup)):
            interleave(gemm, calls, 1, timer)
        block = timer.finish([timer.start(gemm) for _ in range(GEMM_BLOCK)])
        read, clock_reason = nvml_reader(dev.id)
        sampler = ClockSampler(read) if read is not None else None  # None: method.clocks says why

        def on_round(r):
            if sampler is not None:
                sampler.round = r
            if progress is not None:
                progress(r, rounds)

        with sampler or contextlib.nullcontext():
            times = interleave(gemm, calls, rounds, timer, on_round)
        gemm()  # the logits the checks read
        idx = bench.check_rows(m, seed=seed)
        rows64 = reference.to_float64(logits[idx])
        ref = reference.op_reference(rows64, "softmax")
        for name, prep in prepared.items():
            c = kept[name]
            prep.poison()
            check = bench.check_output(prep.call(), logits, idx,
                                       rows64 if c.kind == "copy" else ref, c.kind == "copy", dtype, "softmax")
            if check["passed"]:
                recorded[name] = _record(c, "ok", None, check, {key: times[key][name] for key in times})
            else:
                recorded[name] = _record(c, "failed", f"check failed on a GEMM's logits: relative error "
                                                      f"{check['relative_error']}, row invariant error "
                                                      f"{check['row_sum_error']} (null: NaN or infinite)", check)
    device = records.device_record(dev)
    method = {
        "gemm": {"m": m, "k": k, "n": n, "dtype": dtype, "flop": 2 * m * k * n,
                 "call": "torch.matmul(a, b, out=logits): a standard normal, b standard normal / sqrt(k)"},
        "rounds": rounds, "warmup_rounds": warmup, "seed": seed, "gemm_block": GEMM_BLOCK,
        "order": ("each round, per candidate (taking turns to go first): the GEMM alone and the GEMM then the "
                  "candidate, in that order in even rounds and the other in odd ones, then the candidate alone"),
        "timer": "a pair of CUDA events around each step, steps back to back on one stream, one wait a round",
        "difference": "per round: the step (GEMM then candidate) less the GEMM beside it",
        "naive": "the median of the steps less the median of the GEMM block timed before the rounds",
        "check": ("after the rounds, a GEMM then each candidate into a NaN-poisoned output: the sampled rows "
                  "against float64, every row's sum"),
        "clocks": clock_reason or f"NVML, every {SAMPLE_INTERVAL_S * 1000:g} ms while the rounds run",
    }
    doc = records.make_document("context", [], device, bench.versions(torch), method, command)
    del doc["runs"]
    doc["schema"] = SCHEMA
    doc["gemm_block_ms"] = list(block)
    doc["candidates"] = [recorded[c.name] for c in chosen]  # in the catalogue's order
    doc["clocks"] = sampler.summary() if sampler is not None else None
    return doc


def _record(c, status: str, reason: str | None, check: dict | None = None, times: dict | None = None) -> dict:
    return {"name": c.name, "kind": c.kind, "model": c.model, "status": status, "reason": reason, "check": check,
            "times_ms": times}


# ------------------------------------------------------------ reading the document
def summarize(doc: dict) -> list[dict]:
    """Per candidate that ran: its time alone, in context (the difference) and naive, in ms."""
    block = float(np.median(doc["gemm_block_ms"]))
    rows = []
    for r in doc["candidates"]:
        if r["status"] != "ok":
            rows.append({"name": r["name"], "status": r["status"], "reason": r["reason"]})
            continue
        t = r["times_ms"]
        rows.append({"name": r["name"], "status": "ok", "alone_ms": float(np.median(t["alone"])),
                     "gemm_ms": float(np.median(t["gemm"])), "step_ms": float(np.median(t["step"])),
                     "gemm_spread_ms": float(np.max(t["gemm"]) - np.min(t["gemm"])),
                     "difference": difference(t["step"], t["gemm"]),
                     "naive_ms": float(np.median(t["step"])) - block})
    return rows


def format_context(doc: dict) -> str:
    g = doc["method"]["gemm"]
    block = np.asarray(doc["gemm_block_ms"])
    head = (f"GEMM {g['m']} x {g['k']} @ {g['k']} x {g['n']} {g['dtype']}: alone {np.median(block):.3f} ms "
            f"(a block of {block.size}: {block.min():.3f}..{block.max():.3f}); {doc['method']['rounds']} rounds")
    lines = [f"{doc['kind']} on {doc['device']['name']}, {doc['created']}", f"command: {doc['command']}", "", head,
             (f"{'candidate':<16}{'alone ms':>10}{'in context ms':>15}{'quartiles':>16}{'naive ms':>10}"
              f"{'GEMM beside it ms':>22}")]
    for s in summarize(doc):
        if s["status"] != "ok":
            lines.append(f"{s['name']:<16}{s['status']}: {s['reason']}")
            continue
        d = s["difference"]
        quartiles = f"{d['q25_ms']:.3f}..{d['q75_ms']:.3f}"
        beside = f"{s['gemm_ms']:.3f} ± {s['gemm_spread_ms'] / 2:.3f}"
        lines.append(f"{s['name']:<16}{s['alone_ms']:>10.3f}{d['median_ms']:>15.3f}{quartiles:>16}"
                     f"{s['naive_ms']:>10.3f}{beside:>22}")
    clocks = doc.get("clocks")
    if clocks:
        lines += ["", f"clocks over {clocks['samples']} samples: {format_clocks(clocks)}"]
    else:
        lines += ["", f"clocks: {doc['method']['clocks']}"]
    return "\n".join(lines)


def load(path) -> dict:
    """A context document; ValueError if the file is not one."""
    return records.read_json(path, (SCHEMA,))


def failures(doc: dict) -> list[str]:
    """What makes a run fail (a non-zero exit): a candidate whose output failed its check,
    or one of softmax_lab's own that raised."""
    return [f"{r['name']}: {r['reason']}" for r in doc["candidates"]
            if r["status"] == "failed" and (r["check"] is not None or r["kind"] == "variant")]
