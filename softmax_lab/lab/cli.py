"""softmax-lab (or python -m softmax_lab): bench, sweep, profile, context, report, plot, info.

  softmax-lab bench   [--rows R --cols C --dtype D,.. --op OP,.. --variants a,b --repeats N --seed S -o bench.json]
                      [--json | --csv]
  softmax-lab sweep   [--shape RxC ... --dtype D,.. --op OP,.. --variants a,b --repeats N --seed S -o sweep.json]
                      [--json | --csv]
  softmax-lab profile [--shape RxC ... | --sweep] [--dtype D --op OP --variants a,b --calls N --ncu PATH
                      -o profile.json] [--json]
  softmax-lab context [--gemm MxKxN --dtype D --variants a,b --rounds N --seed S -o context.json] [--json]
  softmax-lab report  RESULTS.json ... [--table]
  softmax-lab plot    RESULTS.json ... [-o DIR] [--profile PROFILE.json ...]
  softmax-lab info

plot writes to default_plot_dir() (outside any checkout) unless -o names a
folder, and prints the path of every PNG it wrote; `-o results` redraws the
recorded figures (results/README.md gives the one command).

--dtype takes float32, float16, bfloat16 (a comma list, or all); --op takes
softmax, log_softmax, softmax_backward, log_softmax_backward (a comma list, or
all; forward, backward), and the loss ops cross_entropy (each row's loss, against
one read of the logits) and cross_entropy_grad (the loss and the gradient of the
logits, against a copy) (loss: both).  The defaults, float32 softmax, are the
headline's.

Exit status: one meaning each, the EXIT_* constants below (EXIT_STATUSES is
the table that --help prints).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from pathlib import Path

from ..device import device_info, require_device
from ..problem import ALL_OPS, BACKWARD_OPS, DTYPES, LOSS_OPS, OPS, Shape, kernel_defines
from . import bench, records, report
from . import candidates as cat
from . import context as ctx
from . import profile as prof

RECORDED_HINT = "softmax-lab plot results/*.json"

# Exit statuses: each means one thing, for every command.
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a candidate failed its check (or one of ours raised); info: a kernel did not compile
EXIT_USAGE = 2  # argparse's own status; also an input file that cannot be read, or an -o that cannot be used
EXIT_NO_DEVICE = 3  # nothing here to run on: no usable GPU (profile: or no Nsight Compute)
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (head, less): 128 + SIGPIPE, as a shell reports it
EXIT_STATUSES = f"""exit status:
  {EXIT_OK}    ok
  {EXIT_CHECK_FAILED}    a check failed: a candidate failed its correctness check, or one of
       softmax_lab's own raised (bench, sweep, context); a kernel did not compile (info)
  {EXIT_USAGE}    usage: a bad option or value, an input file that cannot be read or is
       not a results, profile or context document, an -o that cannot be used
  {EXIT_NO_DEVICE}    no usable GPU here (bench, sweep, profile, context), no Nsight Compute (profile),
       or no torch for the GEMM (context)
  {EXIT_BROKEN_PIPE}  the reader of the output went away (e.g. `| head`)"""


class _Help(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default: the value, "off" for a flag, or
    what the help text itself says the default is.  The epilog (EXIT_STATUSES)
    keeps its lines."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default is argparse.SUPPRESS or "default" in text or not action.option_strings:
            return text
        if action.default is False:
            return text + " (default: off)"
        return super()._get_help_string(action)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        status = args.func(args)
        sys.stdout.flush()  # here, so that a closed pipe is caught below rather than at exit
        return status
    except BrokenPipeError:
        # The reader (head, less) closed the pipe: stop quietly, as other command-line
        # tools do, with stdout pointed at devnull so that the exit's flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _parser() -> argparse.ArgumentParser:
    fmt = _Help
    p = argparse.ArgumentParser(prog="softmax-lab", formatter_class=fmt, epilog=EXIT_STATUSES,
                                description="GPU softmax on huge rows: benchmark, measured traffic, plots, checks.")
    p.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, **kw) -> argparse.ArgumentParser:  # every command's --help ends with the exit statuses
        return sub.add_parser(name, formatter_class=fmt, epilog=EXIT_STATUSES, **kw)

    b = command("bench", help="check and time every candidate on one shape against a copy")
    b.add_argument("--rows", type=_positive, default=bench.HEADLINE[0], help="rows of the input")
    b.add_argument("--cols", type=_positive, default=bench.HEADLINE[1], help="row length (softmax over each row)")
    _dtype_op(b, several=True)
    _common(b, "all")
    b.set_defaults(func=_bench)

    s = command("sweep", help="the benchmark over a grid of shapes: auto against copies and peers")
    s.add_argument("--shape", type=_shape, action="append", metavar="ROWSxCOLS",
                   help="a shape to run (repeatable; its rows halved only where its tensors would not fit in "
                        "an eighth of the free memory, a twelfth for a backward op); default: the grid of row lengths "
                        f"{', '.join(map(str, bench.GRID_COLS))} by {', '.join(map(str, bench.GRID_FEW_ROWS))} rows "
                        f"and about {bench.GRID_ELEMENTS * 4 // 2**30} GiB of rows, plus "
                        f"{', '.join(f'{r}x{c}' for r, c in bench.GRID_EXTRA)}")
    _dtype_op(s, several=True)
    _common(s, ",".join(cat.GRID_NAMES) + " for float32 softmax; auto and the op's peers otherwise")
    s.set_defaults(func=_sweep)

    pr = command("profile", help="measured DRAM traffic per candidate with Nsight Compute (ncu), beside the model")
    pr.add_argument("--shape", type=_shape, action="append", metavar="ROWSxCOLS",
                    help=f"a shape to profile (repeatable); default {bench.HEADLINE[0]}x{bench.HEADLINE[1]} "
                         "unless --sweep")
    pr.add_argument("--sweep", action="store_true",
                    help="profile the row lengths " + ", ".join(map(str, prof.SWEEP_COLS)) +
                         " (1 GiB tensors), besides any --shape given (default: off, the headline shape only)")
    _dtype_op(pr, several=False)
    pr.add_argument("--variants", type=_names, metavar="NAME,...", default=None,
                    help="candidates to profile (default: all but the host ones)")
    pr.add_argument("--calls", type=_positive, default=prof.CALLS, help="profiled calls per candidate")
    pr.add_argument("--ncu", default="ncu", help="the Nsight Compute command")
    pr.add_argument("-o", "--output", type=Path, metavar="PATH", help="write the profile JSON here (atomically; default: not saved)")
    pr.add_argument("--json", action="store_true", help="print the JSON document on stdout instead of the table")
    pr.set_defaults(func=_profile)

    cx = command("context", help="what a softmax adds to a step whose GEMM computes its logits: interleaved "
                                 "rounds of the GEMM alone and the GEMM then each candidate, with clocks and power")
    cx.add_argument("--gemm", type=_gemm, default=ctx.GEMM, metavar="MxKxN",
                    help="the GEMM that makes the logits: M x K @ K x N, the softmax over rows of N "
                         f"(default {'x'.join(map(str, ctx.GEMM))}, an LM head)")
    cx.add_argument("--dtype", choices=tuple(DTYPES), default=ctx.DEFAULT_DTYPE, help="element type of the GEMM "
                                                                                     "and the softmax")
    cx.add_argument("--variants", type=_names, metavar="NAME,...", default=None,
                    help=f"candidates (default: {','.join(ctx.DEFAULT_NAMES)}); the copies always run")
    cx.add_argument("--rounds", type=_rounds, default=ctx.ROUNDS, help=f"timed rounds, at least {ctx.MIN_ROUNDS}")
    cx.add_argument("--seed", type=int, default=0, help="seed of the GEMM's standard normal operands")
    cx.add_argument("-o", "--output", type=Path, metavar="PATH",
                    help="write the context JSON here (atomically; default: not saved)")
    cx.add_argument("--json", action="store_true", help="print the JSON document on stdout instead of the table")
    cx.set_defaults(func=_context)

    rp = command("report", help="the tables of recorded results files, with the table by dtype and op (no GPU needed)")
    rp.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json",
                    help="bench, sweep, profile or context JSON files (those plot takes)")
    rp.add_argument("--table", action="store_true",
                    help="only the table by dtype and op: auto and each peer / the floor of the op")
    rp.set_defaults(func=_report)

    pl = command("plot", help="PNG figures of results files (no GPU needed)")
    pl.add_argument("results", nargs="+", type=Path, metavar="RESULTS.json",
                    help="bench, sweep, profile or context JSON files")
    pl.add_argument("-o", "--output", type=_folder, metavar="DIR",
                    help=f"folder for the PNGs, made if missing; never a file (default: {default_plot_dir()}, "
                         "outside the checkout; -o results redraws the recorded figures)")
    pl.add_argument("--profile", type=Path, nargs="+", action="extend", metavar="PROFILE.json",
                    help="profiles whose measured traffic is added to the bench figures of the same shape, dtype "
                         "and op; of several, the first with such a run (default: none)")
    pl.set_defaults(func=_plot)

    i = command("info", help="versions, the device, and a compile check of every kernel (no GPU needed)")
    i.set_defaults(func=_info)
    return p


def _common(p: argparse.ArgumentParser, default_names: str) -> None:
    known = ", ".join(cat.all_names())
    p.add_argument("--variants", type=_names, metavar="NAME,...", default=None,
                   help=f"candidates to time (default: {default_names}); the floor (the copies, backward the "
                        f"two-read adds) always runs; a name of another op is left out. Known: {known}")
    p.add_argument("--repeats", type=_repeats, default=bench.REPEATS,
                   help=f"timed calls per candidate, at least {bench.MIN_REPEATS}")
    p.add_argument("--warmup", type=_non_negative, default=bench.WARMUP,
                   help="untimed calls before the timed ones (with --loop: untimed loops)")
    p.add_argument("--seed", type=int, default=0, help="seed of the standard normal input")
    p.add_argument("-o", "--output", type=Path, metavar="PATH", help="write the results JSON here (atomically; default: not saved)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the JSON document on stdout instead of the table")
    out.add_argument("--csv", action="store_true", help="print one CSV line per candidate and shape on stdout")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--loop", type=_non_negative, default=0, metavar="N",
                   help="time each sample as the mean of N back-to-back calls, host included (a decoding loop's "
                        "view of small calls), in place of CUDA events around each call (default: 0, events)")
    p.add_argument("--clocks", action="store_true",
                   help="record the SM and memory clocks, power and the driver's clock reasons (NVML, nvidia-ml-py) "
                        "while each candidate's timed calls run (default: off)")


FORWARD = ",".join(OPS)
BACKWARD = ",".join(BACKWARD_OPS)


def _dtype_op(p: argparse.ArgumentParser, several: bool) -> None:
    if several:
        p.add_argument("--dtype", type=_list(DTYPES, {"all": tuple(DTYPES)}), default=("float32",),
                       metavar="DTYPE,...", help="element types: " + ", ".join(DTYPES) + " or all "
                       "(halves are made with torch) (default: float32)")
        p.add_argument("--op", type=_list(ALL_OPS + LOSS_OPS, {"all": ALL_OPS, "forward": OPS,
                                                               "backward": BACKWARD_OPS, "loss": LOSS_OPS}),
                       default=("softmax",), metavar="OP,...",
                       help=f"ops: {', '.join(ALL_OPS + LOSS_OPS)}, or all (the softmax ops), forward, backward, "
                            "loss (both cross-entropy ops) (default: softmax)")
    else:
        p.add_argument("--dtype", choices=tuple(DTYPES), default="float32", help="element type")
        p.add_argument("--op", choices=ALL_OPS + LOSS_OPS, default="softmax", help="the op")


def _list(known, groups):
    def parse(text: str) -> tuple[str, ...]:
        out = []
        for part in (t.strip() for t in text.split(",") if t.strip()):
            if part in groups:
                out += groups[part]
            elif part in known:
                out.append(part)
            else:
                raise argparse.ArgumentTypeError(f"{part!r} is not one of {', '.join([*known, *groups])}")
        if not out:
            raise argparse.ArgumentTypeError("give at least one")
        return tuple(dict.fromkeys(out))

    return parse


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be zero or more; got {text}")
    return value


def _repeats(text: str) -> int:
    value = int(text)
    if value < bench.MIN_REPEATS:
        raise argparse.ArgumentTypeError(f"the method takes at least {bench.MIN_REPEATS} repeats; got {text}")
    return value


def _rounds(text: str) -> int:
    value = int(text)
    if value < ctx.MIN_ROUNDS:
        raise argparse.ArgumentTypeError(f"the method takes at least {ctx.MIN_ROUNDS} rounds; got {text}")
    return value


def _gemm(text: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX,]\s*(\d+)\s*[xX,]\s*(\d+)\s*", text)
    if not m or min(int(v) for v in m.groups()) < 1:
        raise argparse.ArgumentTypeError(f"a GEMM is MxKxN of positive integers, e.g. 4096x4096x128256; got {text!r}")
    return int(m[1]), int(m[2]), int(m[3])


def _shape(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX,]\s*(\d+)\s*", text)
    if not m or int(m[1]) < 1 or int(m[2]) < 1:
        raise argparse.ArgumentTypeError(f"a shape is ROWSxCOLS of positive integers, e.g. 4096x393216; got {text!r}")
    return int(m[1]), int(m[2])


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    try:
        cat.select(names)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return names


def _folder(text: str) -> Path:
    """plot's -o: a folder, made if missing.  A name ending in .png, or one that is (or
    lies under) an existing file, is a usage error rather than a folder made or a traceback."""
    path = Path(text)
    if path.suffix.lower() == ".png":
        raise argparse.ArgumentTypeError(f"{text!r} names a PNG file; -o takes the folder the figures go to")
    for p in (path, *path.parents):  # the nearest part that exists must be a folder
        if p.exists():
            if not p.is_dir():
                raise argparse.ArgumentTypeError(f"{str(p)!r} is a file, not a folder; -o takes the folder the "
                                                 "figures go to")
            break
    return path


def default_plot_dir() -> Path:
    """Where plot writes without -o: a folder of the user's cache, outside any checkout,
    so that looking at recorded results never rewrites the committed figures."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "softmax_lab" / "plots"


def _no_device(command: str) -> int | None:
    """None if there is a device; else prints one line saying why and what to do instead."""
    reason = bench.gpu_reason()
    if reason is None:
        return None
    print(f"softmax-lab {command}: {reason}. To look at recorded results instead: softmax-lab report "
          f"results/*.json, or {RECORDED_HINT} (it writes to {default_plot_dir()})", file=sys.stderr)
    return EXIT_NO_DEVICE


def _bench(args) -> int:
    failed = _no_device("bench")
    if failed is not None:
        return failed
    save = (lambda doc: records.save(doc, args.output)) if args.output is not None and len(
        args.dtype) * len(args.op) > 1 else None  # several runs: each saved as it ends
    doc = bench.run_bench(args.rows, args.cols, names=args.variants, repeats=args.repeats, warmup=args.warmup,
                          seed=args.seed, progress=not args.no_progress, command=_command(), dtypes=args.dtype,
                          ops=args.op, checkpoint=save, clocks=args.clocks, loop=args.loop)
    return _finish(doc, args)


def _sweep(args) -> int:
    failed = _no_device("sweep")
    if failed is not None:
        return failed
    save = (lambda doc: records.save(doc, args.output)) if args.output is not None else None
    doc = bench.run_sweep(args.shape, names=args.variants, repeats=args.repeats, warmup=args.warmup, seed=args.seed,
                          progress=not args.no_progress, command=_command(), checkpoint=save, dtypes=args.dtype,
                          ops=args.op, clocks=args.clocks, loop=args.loop)
    return _finish(doc, args)


def _profile(args) -> int:
    failed = _no_device("profile")
    if failed is not None:
        return failed
    shapes = list(args.shape or ([] if args.sweep else [bench.HEADLINE]))
    if args.sweep:
        shapes += [s for s in prof.sweep_shapes() if s not in shapes]
    doc = saved = None
    for shape in shapes:  # saved after each shape: a run cut short by a time limit keeps what it measured
        try:
            part = prof.run_profile([shape], args.variants, ncu=args.ncu, calls=args.calls, command=_command(),
                                    dtype=args.dtype, op=args.op)
        except FileNotFoundError as e:  # no Nsight Compute
            print(f"softmax-lab profile: {e}", file=sys.stderr)
            return EXIT_NO_DEVICE
        doc = part if doc is None else {**doc, "runs": doc["runs"] + part["runs"]}
        saved = records.save(doc, args.output) if args.output else None
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(prof.format_profile(doc))
        print(f"\nresults: {saved}" if saved else "\n(results not saved: pass --output PATH)")
    return EXIT_OK


def _context(args) -> int:
    failed = _no_device("context")
    if failed is not None:
        return failed
    try:
        doc = ctx.run_context(*args.gemm, dtype=args.dtype, names=args.variants, rounds=args.rounds, seed=args.seed,
                              command=_command())
    except RuntimeError as e:  # no torch for the GEMM
        print(f"softmax-lab context: {e}", file=sys.stderr)
        return EXIT_NO_DEVICE
    return _finish(doc, args, ctx.format_context, ctx.failures)


def _command() -> str:
    """The command line as typed: sys.argv, with `python -m softmax_lab` or
    `softmax-lab` in place of the full path of the script."""
    argv = list(sys.argv)
    argv[:1] = ["python", "-m", "softmax_lab"] if Path(argv[0]).name == "__main__.py" else [Path(argv[0]).name]
    return shlex.join(argv)


def _finish(doc: dict, args, table=report.format_document, failures=records.failures) -> int:
    """Saves the document where -o says, prints it (--json, --csv or its table), and
    gives the exit status: a check failed, or ok."""
    saved = records.save(doc, args.output) if args.output is not None else None
    if args.json:
        print(json.dumps(doc, indent=1))
    elif getattr(args, "csv", False):
        print(report.to_csv(doc), end="")
    else:
        print(table(doc))
        print(f"\nresults: {saved}" if saved else "\n(results not saved: pass --output PATH)")
    bad = failures(doc)
    for line in bad:
        print(f"softmax-lab {doc['kind']}: FAILED {line}", file=sys.stderr)
    return EXIT_CHECK_FAILED if bad else EXIT_OK


OWN_TABLES = {"profile": ("measured traffic", prof.format_profile), "context": ("times in context", ctx.format_context)}


def _documents(paths, command: str):
    """(path, document) for each path, in order; (path, None) for a file that cannot be read
    as one, named in one line on stderr."""
    for path in paths:
        try:
            yield path, _load_any(path)
        except (OSError, ValueError) as e:
            print(f"softmax-lab {command}: {' '.join(str(e).split())}", file=sys.stderr)
            yield path, None


def _report(args) -> int:
    """The tables of each file plot takes; a file that cannot be read is named in one
    line, the others are printed all the same."""
    status = EXIT_OK
    for i, (path, doc) in enumerate(_documents(args.results, "report")):
        if doc is None:
            status = EXIT_USAGE
            continue
        if i:
            print()
        print(f"{path}:")
        if doc["kind"] in OWN_TABLES:  # measured traffic, times in context: their own tables, none by dtype and op
            what, table = OWN_TABLES[doc["kind"]]
            print(f"{doc['kind']}: {what}, no table by dtype and op (report without --table prints its table, plot "
                  "draws it)" if args.table else table(doc))
        else:
            print(report.format_dtype_op_table(doc) if args.table else report.format_document(doc))
    return status


def _plot(args) -> int:
    from . import plots

    status = EXIT_OK
    out = args.output if args.output is not None else default_plot_dir()
    profile_doc = None
    if args.profile:
        try:
            profiles = [prof.load(path) for path in args.profile]
        except (OSError, ValueError) as e:
            print(f"softmax-lab plot: {' '.join(str(e).split())}", file=sys.stderr)
            return EXIT_USAGE
        # The bench figures look a run up by shape, dtype and op: the runs of every profile, in order.
        profile_doc = {**profiles[0], "runs": [run for doc in profiles for run in doc["runs"]]}
    for path, doc in _documents(args.results, "plot"):
        if doc is None:
            status = EXIT_USAGE
            continue
        suffix = plots.file_suffix(path.stem, doc["kind"])
        try:
            written = plots.write_all(doc, out, profile_doc=profile_doc, suffix=suffix)
        except OSError as e:  # the folder cannot be made or written (permissions, a full disk)
            print(f"softmax-lab plot: cannot write to {out}: {' '.join(str(e).split())}", file=sys.stderr)
            return EXIT_USAGE
        for png in written:
            print(png)
    return status


def _load_any(path: Path) -> dict:
    """A results, a profile or a context document."""
    try:
        return records.load(path)
    except ValueError as first:
        for load in (prof.load, ctx.load):
            try:
                return load(path)
            except ValueError:
                pass
        raise first from None


def _info(args) -> int:
    import cupy
    import numpy

    from .. import loader
    from ..variants import cross_entropy as cross_entropy_layouts
    from ..variants import registry, single_read

    rt = cupy.cuda.runtime
    major, minor = cupy.cuda.nvrtc.getVersion()
    print(f"softmax-lab {version()}, CuPy {cupy.__version__}, "
          f"NumPy {numpy.__version__}, torch {bench.dist_version('torch') or 'not installed'}, "
          f"quack {bench.dist_version('quack-kernels') or 'not installed'}")
    driver = records.cuda_version(bench.driver_version())
    print(f"CUDA runtime {records.cuda_version(rt.runtimeGetVersion())}, NVRTC {major}.{minor}, "
          f"driver {'supports CUDA ' + driver if driver else 'none: no NVIDIA driver is installed here'}")
    reason = bench.gpu_reason()
    dev = None
    if reason:
        print(f"device: none ({reason})")
    else:
        dev = device_info(require_device())
        cc = dev.compute_capability
        print(f"device {dev.id}: {dev.name}, sm_{cc}, {dev.sm_count} SMs, L2 {dev.l2_bytes / 2**20:.0f} MiB, "
              f"{dev.smem_optin_bytes // 1024} KiB shared memory per block")

    print("\nvariants:")
    for v in registry.variants().values():
        why = v.unsupported_reason(1, dev) if dev else None
        note = f"  [not on this device: {why}]" if why else ""
        print(f"  {v.name:<12} {v.reads} read(s) + {v.writes} write, {v.source}: {v.summary}{note}")

    arch = f"sm_{dev.compute_capability}" if dev else "sm_90"
    configs = single_read.sample_configs(dev or cat.reference_device())
    builds = []
    for source in dict.fromkeys([*(v.source for v in registry.variants().values()), "copy.cu"]):
        if source == "single_read.cu" and configs:  # Hopper-only: one build per launch configuration
            builds += [(source, "sm_90", c.defines()) for c in configs]
        else:
            builds.append((source, "sm_90" if source == "single_read.cu" else arch, {}))
    for v in registry.variants().values():  # the other dtypes and ops of the row kernels
        builds += [(_source_of(v, op), "sm_90" if _source_of(v, op) != v.source else arch,
                    kernel_defines(dtype, op)) for dtype in v.dtypes for op in v.ops
                   if (dtype, op) != ("float32", "softmax")]
    builds += [("single_read.cu", "sm_90", kernel_defines(dtype, "softmax") | {"SR_WIDE": 1})
               for dtype in ("float16", "bfloat16") if single_read.holds_wide(dtype, "softmax")]
    # The kernels besides the variants': the read floor, and the cross-entropy's two layouts
    # (the held one for a language model's rows, with its gradient, on Hopper)
    builds += [("read.cu", arch, {}), ("cross_entropy.cu", arch, {})]
    held = cross_entropy_layouts.held_plan(Shape(4096, 128256, 128256, 128256), dev or cat.reference_device())
    if held is not None:
        builds.append(("cross_entropy_held.cu", "sm_90", held.defines() | {"SOFTMAX_LOG": 1, "XENT_GRAD": 1}))
    # Through the loader's on-disk cache, keyed by the source text, options and NVRTC
    # version: a build compiles once, and a later run (or the kernels' first launch) reads it.
    print(f"\ncompile check (NVRTC, no GPU needed; builds cached in {loader.cache_dir()}):")
    failures = 0
    for source, build_arch, defines in builds:
        label = f"{source} {build_arch} {' '.join(f'{k}={v}' for k, v in defines.items())}".rstrip()
        try:
            cubin = loader.cubin_path(source, build_arch, tuple(sorted(defines.items())))
        except Exception as e:  # NVRTC errors carry the compile log
            failures += 1
            print(f"  FAILED {label}\n{e}")
        else:
            print(f"  ok     {label} ({cubin.stat().st_size / 1024:.0f} KiB cubin)")
    print(f"\n{len(builds) - failures} of {len(builds)} builds compiled")
    return EXIT_CHECK_FAILED if failures else EXIT_OK


def _source_of(v, op: str) -> str:
    """The kernel file of variant v's `op`: its backward_source for a backward op, where it has one."""
    return getattr(v, "backward_source", "") if op.endswith("_backward") and getattr(v, "backward_source", "") \
        else v.source


def version() -> str:
    """softmax_lab.__version__ where the package has one, else the installed
    distribution's version, else the checkout's pyproject.toml."""
    package = sys.modules.get("softmax_lab")
    return getattr(package, "__version__", None) or bench.dist_version("softmax-lab") or _tree()


def _tree() -> str:
    """The version of an uninstalled checkout, from pyproject.toml."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M) if pyproject.is_file() else None
    return f"{m[1]} (uninstalled checkout)" if m else "(version unknown)"
