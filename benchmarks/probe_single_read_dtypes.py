"""Time ÷ copy of single_read (and auto) for fp16, bf16 and fp32, softmax and
log_softmax, beside torch's forward and backward, on the shapes of issue 8.

    PYTHONPATH=. python benchmarks/probe_single_read_dtypes.py [--reps 10]

CUDA events, the median of `reps` timed calls after two warm-up calls.
Forward ÷ a device copy of the same bytes (torch `copy_`); backward ÷ its
floor, a two-read, one-write `torch.add(a, b, out=c)` of the same size.  Each
softmax_lab output is checked against torch's (float32 math) before timing.
Backward columns: softmax_lab.softmax_backward / log_softmax_backward(dy, y,
out=dx) with variant "single_read" (y and dy on chip, each read once; "-"
where it cannot run the shape) and "auto", ÷ the torch.add floor."""

import argparse
import statistics

import torch

import softmax_lab

SHAPES = [(4096, 393216), (4096, 151936), (16384, 32000), (4096, 128256), (512, 100003), (132, 393216)]
DTYPES = ["float16", "bfloat16", "float32"]


def timed(fn, reps):
    fn(), fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def ours(op, variant, x, out):
    f = softmax_lab.softmax if op == "softmax" else softmax_lab.log_softmax
    try:
        f(x, variant=variant, out=out)
    except ValueError as e:  # CannotRun and friends: this variant does not hold the shape
        return None, str(e)[:60]
    torch.cuda.synchronize()
    want = getattr(torch, op)(x.float(), dim=-1)
    err = (out.float() - want).abs().max().item()
    return (lambda: f(x, variant=variant, out=out)), f"max |diff| vs torch {err:.2g}"


def ours_backward(op, variant, g, y, dx):
    f = softmax_lab.softmax_backward if op == "softmax" else softmax_lab.log_softmax_backward
    try:
        f(g, y, variant=variant, out=dx)
    except ValueError as e:
        return None, str(e)[:60]
    torch.cuda.synchronize()
    want = (torch._softmax_backward_data if op == "softmax" else torch._log_softmax_backward_data)(
        g.float(), y.float(), -1, torch.float32)
    err = (dx.float() - want).abs().max().item()
    return (lambda: f(g, y, variant=variant, out=dx)), f"max |diff| vs torch {err:.2g}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    print(f"{'shape':>16} {'dtype':>8} {'op':>11} | {'single_read':>11} {'auto':>6} {'torch':>6} | "
          f"{'sr bwd':>6} {'auto bwd':>8} {'torch bwd':>9}   (÷ copy; bwd ÷ add)")
    for rows, cols in SHAPES:
        for dtype in DTYPES:
            dt = getattr(torch, dtype)
            x = (torch.randn(rows, cols, device="cuda") * 3).to(dt)
            out = torch.empty_like(x)
            copy = timed(lambda: out.copy_(x), args.reps)
            g, dx = torch.randn_like(x), torch.empty_like(x)
            add = timed(lambda: torch.add(x, g, out=dx), args.reps)
            for op in ("softmax", "log_softmax"):
                cells, notes = [], []
                for variant in ("single_read", "auto"):
                    fn, note = ours(op, variant, x, out)
                    cells.append(f"{timed(fn, args.reps) / copy:.2f}" if fn else "-")
                    notes.append(f"{variant}: {note}")
                theirs = timed(lambda: getattr(torch, op)(x, dim=-1), args.reps) / copy
                y = getattr(torch, op)(x, dim=-1)
                bwd = timed(lambda: torch._softmax_backward_data(g, y, -1, dt) if op == "softmax"
                            else torch._log_softmax_backward_data(g, y, -1, dt), args.reps) / add
                bcells = []
                for variant in ("single_read", "auto"):
                    fn, note = ours_backward(op, variant, g, y, dx)
                    bcells.append(f"{timed(fn, args.reps) / add:.2f}" if fn else "-")
                    notes.append(f"{variant} bwd: {note}")
                print(f"{rows:>6} x {cols:<7} {dtype:>8} {op:>11} | {cells[0]:>11} {cells[1]:>6} {theirs:6.2f} | "
                      f"{bcells[0]:>6} {bcells[1]:>8} {bwd:9.2f}   [{'; '.join(notes)}]", flush=True)
                del y
            del x, out, g, dx
            torch.cuda.empty_cache()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, softmax_lab {softmax_lab.__version__}")


if __name__ == "__main__":
    main()
