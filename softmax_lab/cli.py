"""softmax-lab (or python -m softmax_lab): bench, sweep, plot, info.

  softmax-lab bench [--rows R --cols C --variants a,b --repeats N --output bench.json]
  softmax-lab sweep [--cols 1024 4096 ... --repeats N --output sweep.json]
  softmax-lab plot RESULTS.json... [--output-dir DIR]
  softmax-lab info
"""

from __future__ import annotations

import argparse
import shlex
import sys
from importlib import metadata
from pathlib import Path

from . import bench
from .device import NoDeviceError, device_info, require_device

RECORDED_HINT = "softmax-lab plot results/*.json"


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    return args.func(args)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="softmax-lab", description="GPU softmax on huge rows: benchmark, plots, checks.")
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    b = sub.add_parser("bench", help="time every candidate on one shape against the copy ceiling")
    b.add_argument("--rows", type=_positive, default=bench.HEADLINE[0])
    b.add_argument("--cols", type=_positive, default=bench.HEADLINE[1])
    _common(b)
    b.set_defaults(func=_bench)

    s = sub.add_parser("sweep", help="the benchmark over row lengths, each tensor about 4 GiB")
    s.add_argument("--cols", type=_positive, nargs="+", default=list(bench.SWEEP_COLS),
                   help=f"row lengths; rows = {bench.SWEEP_ELEMENTS} // cols (default: %(default)s)")
    _common(s)
    s.set_defaults(func=_sweep)

    pl = sub.add_parser("plot", help="PNG figures of results files (no GPU needed)")
    pl.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json")
    pl.add_argument("--output-dir", type=Path, help="where the PNGs go (default: next to each results file)")
    pl.set_defaults(func=_plot)

    i = sub.add_parser("info", help="the device, versions, and a compile check of every kernel (no GPU needed)")
    i.set_defaults(func=_info)
    return p


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variants", type=_names, metavar="NAME,...",
                   help="candidates to time (default: all); the copies always run. "
                        f"Known: {', '.join(c.name for c in bench.candidates())}")
    p.add_argument("--repeats", type=_repeats, default=bench.REPEATS,
                   help=f"timed calls per candidate, at least {bench.MIN_REPEATS} (default: %(default)s)")
    p.add_argument("--output", type=Path, metavar="PATH", help="write the results JSON here")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text}")
    return value


def _repeats(text: str) -> int:
    value = int(text)
    if value < bench.MIN_REPEATS:
        raise argparse.ArgumentTypeError(f"the method takes at least {bench.MIN_REPEATS} repeats; got {text}")
    return value


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    try:
        bench.select(names)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return names


def _no_device(command: str) -> int | None:
    """None if there is a device; else prints one line saying why and what to do instead."""
    try:
        require_device()
    except NoDeviceError as e:
        reason = " ".join(str(e).split())
        print(f"softmax-lab {command}: {reason}. To look at recorded results instead: {RECORDED_HINT}",
              file=sys.stderr)
        return 1
    return None


def _bench(args) -> int:
    failed = _no_device("bench")
    if failed is not None:
        return failed
    doc = bench.run_bench(args.rows, args.cols, names=args.variants, repeats=args.repeats, command=_command())
    return _finish(doc, args.output)


def _sweep(args) -> int:
    failed = _no_device("sweep")
    if failed is not None:
        return failed
    doc = bench.run_sweep(args.cols, names=args.variants, repeats=args.repeats, command=_command())
    return _finish(doc, args.output)


def _command() -> str:
    """The command line as typed: sys.argv, with `python -m softmax_lab` or
    `softmax-lab` in place of the full path of the script."""
    argv = list(sys.argv)
    argv[:1] = ["python", "-m", "softmax_lab"] if Path(argv[0]).name == "__main__.py" else [Path(argv[0]).name]
    return shlex.join(argv)


def _finish(doc: dict, output: Path | None) -> int:
    saved = bench.save(doc, output) if output is not None else None
    print(bench.format_document(doc))
    print(f"\nresults: {saved}" if saved else "\n(results not saved: pass --output PATH)")
    return 0


def _plot(args) -> int:
    from . import plots

    status = 0
    for path in args.results:
        try:
            doc = bench.load(path)
        except (OSError, ValueError) as e:
            print(f"softmax-lab plot: {' '.join(str(e).split())}", file=sys.stderr)
            status = 1
            continue
        for png in plots.write_all(doc, args.output_dir or path.parent, path.stem):
            print(png)
    return status


def _info(args) -> int:
    import cupy
    import numpy

    from . import loader
    from .variants import SINGLE_READ_CONFIGS, variants

    rt = cupy.cuda.runtime
    nvrtc = cupy.cuda.nvrtc.getVersion()
    print(f"softmax-lab {_version('softmax-lab') or '(not installed)'}, CuPy {cupy.__version__}, "
          f"NumPy {numpy.__version__}, torch {_version('torch') or 'not installed'}")
    print(f"CUDA runtime {_cuda_version(rt.runtimeGetVersion())}, NVRTC {nvrtc[0]}.{nvrtc[1]}, "
          f"driver {_cuda_version(_driver_version(rt))}")
    try:
        dev = device_info(require_device())
    except NoDeviceError as e:
        dev = None
        print(f"device: none ({' '.join(str(e).split())})")
    else:
        cc = dev.compute_capability
        print(f"device {dev.id}: {dev.name}, sm_{cc}, {dev.sm_count} SMs, L2 {dev.l2_bytes / 2**20:.0f} MiB, "
              f"{dev.smem_optin_bytes // 1024} KiB shared memory per block")

    print("\nvariants:")
    for v in variants().values():
        reason = v.unsupported_reason(1, dev) if dev else None
        note = f"  [not on this device: {reason}]" if reason else ""
        print(f"  {v.name:<12} {v.reads} read(s) + {v.writes} write, {v.source}: {v.summary}{note}")

    arch = f"sm_{dev.compute_capability}" if dev else "sm_90"
    builds = []
    for source in dict.fromkeys([*(v.source for v in variants().values()), "copy.cu"]):
        if source == "single_read.cu":  # Hopper-only: one build per launch configuration
            builds += [(source, "sm_90", c.defines()) for c in SINGLE_READ_CONFIGS]
        else:
            builds.append((source, arch, {}))
    print("\ncompile check (NVRTC, no GPU needed):")
    failures = 0
    for source, build_arch, defines in builds:
        label = f"{source} {build_arch} {' '.join(f'{k}={v}' for k, v in defines.items())}".rstrip()
        try:
            cubin, _ = loader.nvrtc_cubin(source, build_arch, defines)
        except Exception as e:  # NVRTC errors carry the compile log
            failures += 1
            print(f"  FAILED {label}\n{e}")
        else:
            print(f"  ok     {label} ({len(cubin) / 1024:.0f} KiB cubin)")
    print(f"\n{len(builds) - failures} of {len(builds)} builds compiled")
    return 1 if failures else 0


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _driver_version(rt) -> int:
    try:
        return rt.driverGetVersion()
    except rt.CUDARuntimeError:
        return 0


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}" if v else "none"
