"""softmax_lab under CUDA-graph capture: every variant, op and input type is captured
once and replayed REPLAYS times on changing inputs, its output poisoned before
each replay and checked against float64.

Calls that need memory of their own (multi_block's partials, the ticket-ordered
launches' slot words and counters, the memory-merged groups' slots, the copies of
layouts without uniform rows) must keep it for the graph's life
(softmax_lab/scratch.py).  So:
- no block of CuPy's pool is given back while the call is being captured;
- after capture the caller takes, on the capture stream, pool blocks of the sizes
  that an eager call of the same launcher took and gave back (the blocks the pool
  would hand out again), fills them with a poison word, and checks that no replay
  wrote them;
- a compute-sanitizer run replays captured graphs of the variants with scratch.
Skipped without a GPU (conftest.py); the torch cases without torch."""

import textwrap

import numpy as np
import pytest
from sanitizer import run_sanitized

import cupy
import softmax_lab
from softmax_lab.reference import backward_op_error, op_error, op_reference, to_float64
from softmax_lab.variants import BACKWARD_OPS, OPS

pytestmark = pytest.mark.gpu

REPLAYS = 100
POISON_WORD = 0x7FC0DEAD  # a NaN pattern no kernel writes
SHORT = (64, 70001)  # odd, not a multiple of 4: multi_block's chunks, clusters of several blocks
LONG = (8, 1048576)  # past a cluster: multi_block_smem's ring, single_read's memory-merged groups


def _cases():
    """(variant, op, rows, cols) for every variant and op the registry has, then auto at the
    shapes where graph capture was seen to overwrite freed memory."""
    for name, variant in softmax_lab.variants().items():
        for op in OPS + BACKWARD_OPS:
            if op not in variant.ops or (op in BACKWARD_OPS and variant.no_backward):
                continue
            long = name == "multi_block_smem" or (name == "single_read" and op in OPS)
            yield (name, op, *(LONG if long else SHORT))
    yield "auto", "softmax", *LONG
    yield "auto", "softmax", 64, 70001
    yield "auto", "softmax_backward", 8, 524288


CASES = list(_cases())


class PoolLog(cupy.cuda.MemoryHook):
    """CuPy pool blocks taken and given back while it is active (on this thread)."""

    name = "PoolLog"

    def __init__(self):
        self.taken: dict[int, int] = {}
        self.given_back: list[int] = []  # sizes of blocks taken and given back

    def malloc_postprocess(self, **kw):
        self.taken[kw["mem_ptr"]] = kw["mem_size"]

    def free_postprocess(self, **kw):
        size = self.taken.pop(kw["mem_ptr"], None)
        if size is not None:
            self.given_back.append(size)


def _torch():
    return pytest.importorskip("torch")


class Problem:
    """Static inputs and output of one captured call, refilled before each replay."""

    def __init__(self, library, variant, op, rows, cols, dtype, layout):
        self.library, self.variant, self.op, self.dtype, self.layout = library, variant, op, dtype, layout
        # "columns": the rows run along axis 0 of a (cols, rows) array, and out is another such
        # array: the call copies x into rows of unit stride and its result back into out
        self.axis = 0 if layout == "columns" else -1
        self.shape = (cols, rows) if layout == "columns" else (rows, cols)
        self.x = self._empty()
        self.dy = self._empty() if op in BACKWARD_OPS else None
        self.out = self._empty() if layout == "columns" else None

    def _empty(self):
        if self.library == "torch":
            torch = _torch()
            return torch.empty(self.shape, dtype=getattr(torch, self.dtype), device="cuda")
        return cupy.empty(self.shape, dtype=self.dtype)

    def call(self):
        kw = {"variant": self.variant, "out": self.out}
        if self.dy is None:
            return getattr(softmax_lab, self.op)(self.x, self.axis, **kw)
        return getattr(softmax_lab, self.op)(self.dy, self.x, self.axis, **kw)

    def refill(self, seed: int) -> None:
        """Fresh inputs (x, or y and dy for a backward op), finished before this returns."""
        rng = cupy.random.default_rng(seed)
        x = rng.standard_normal(self.shape, dtype=cupy.float64) * 4
        if self.dy is not None:  # y: the forward op's output of that draw
            x = op_reference(x, self.op.removesuffix("_backward"), axis=self.axis)
            self._fill(self.dy, rng.standard_normal(self.shape, dtype=cupy.float64))
        self._fill(self.x, x)
        _synchronize()

    def _fill(self, target, values64) -> None:
        if self.library == "torch":
            torch = _torch()
            values = values64.astype(cupy.float32)
            _synchronize()
            target.copy_(torch.from_dlpack(values))
        else:
            target[...] = values64.astype(target.dtype)

    def error(self, result) -> tuple[float, bool]:
        x = to_float64(self.x)
        if self.dy is None:
            err = op_error(to_float64(result), op_reference(x, self.op, axis=self.axis), self.dtype, self.op)
            return err, err < 1e-6 if self.dtype == "float32" else err <= 1.0
        dy = to_float64(self.dy)
        ref = op_reference(x, self.op, dy, axis=self.axis)
        err = backward_op_error(to_float64(result), ref, dy, x, self.dtype, self.op, self.axis)
        return err, err <= (1e-6 if self.dtype == "float32" else 1.0)


def _synchronize() -> None:
    """The whole device: torch's streams, CuPy's and the capture stream."""
    cupy.cuda.Device().synchronize()


def _poison(result) -> None:
    if hasattr(result, "fill_"):
        result.fill_(float("nan"))
    else:
        result.fill(np.nan)


def _take_poisoned(sizes, stream) -> list:
    """Pool blocks of `sizes` bytes on `stream`, each filled with POISON_WORD."""
    with stream:
        taken = [cupy.full(size // 4, POISON_WORD, dtype=cupy.uint32) for size in sizes for _ in range(2)]
    stream.synchronize()
    return taken


def _capture_cupy(problem, stream):
    with stream:
        stream.begin_capture()
        result = problem.call()
        graph = stream.end_capture()
    return result, lambda: graph.launch(stream)


def _capture_torch(problem, stream):
    torch = _torch()
    graph = torch.cuda.CUDAGraph()
    torch_stream = torch.cuda.ExternalStream(stream.ptr)
    with torch.cuda.graph(graph, stream=torch_stream):
        result = problem.call()
    return result, graph.replay


def _run(library, variant, op, rows, cols, dtype, layout="rows", warm=True):
    dev = softmax_lab.device_info()
    if variant != "auto":
        reason = softmax_lab.variants()[variant].unsupported_reason(cols, dev, dtype, op)
        if reason:
            pytest.skip(reason)
    problem = Problem(library, variant, op, rows, cols, dtype, layout)
    if library == "torch":
        torch = _torch()
        side = torch.cuda.Stream()
        stream = cupy.cuda.ExternalStream(side.cuda_stream)
    else:
        stream = cupy.cuda.Stream(non_blocking=True)
    problem.refill(0)
    eager = PoolLog()
    if warm:  # as torch.cuda.graph's documentation asks: one call before capture, on the side stream
        with eager, stream:
            if library == "torch":
                with torch.cuda.stream(side):
                    problem.call()
            else:
                problem.call()
        _synchronize()
    captured = PoolLog()
    with captured:
        result, replay = (_capture_torch if library == "torch" else _capture_cupy)(problem, stream)
    assert not captured.given_back, f"pool blocks given back during capture: {captured.given_back} bytes"
    taken = _take_poisoned(eager.given_back, stream)
    for i in range(REPLAYS):
        problem.refill(i + 1)
        _poison(result)
        _synchronize()
        replay()
        _synchronize()
        err, ok = problem.error(result)
        assert ok, f"replay {i}: error {err}"
    for block in taken:
        assert bool((block == POISON_WORD).all()), f"a replay wrote {block.nbytes} bytes of memory the caller owns"


@pytest.mark.parametrize("variant, op, rows, cols", CASES)
def test_cupy_capture(variant, op, rows, cols):
    _run("cupy", variant, op, rows, cols, "float32")


@pytest.mark.parametrize("variant, op, rows, cols", CASES)
def test_torch_capture(variant, op, rows, cols):
    halves = variant == "auto" or "bfloat16" in softmax_lab.variants()[variant].dtypes
    _run("torch", variant, op, rows, cols, "bfloat16" if halves else "float32")


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax_backward"])
def test_capture_of_copied_layouts(library, op):
    """Rows along axis 0: x copied into rows of unit stride, the result copied into out."""
    _run(library, "auto", op, 96, 30001, "float16" if library == "cupy" else "bfloat16", layout="columns")


@pytest.mark.parametrize("library", ["cupy", "torch"])
@pytest.mark.parametrize("variant", ["multi_block_l2", "auto"])
def test_first_call_under_capture(library, variant):
    """A shape seen first inside the capture: its launcher is prepared there."""
    _run(library, variant, "softmax", 24, 131071 + (library == "torch") + 2 * (variant == "auto"), "float32",
         warm=False)


SANITIZER_SCRIPT = textwrap.dedent(
    """
    import cupy
    import softmax_lab
    from softmax_lab.reference import op_error, softmax_reference, to_float64

    dev = softmax_lab.device_info()
    cases = [("multi_block", 8, 70001), ("multi_block_l2", 8, 70001), ("two_pass", 8, 70001)]
    if dev.compute_capability >= 90:
        cases += [("multi_block_smem", 4, 300007), ("single_read", 2, 1 << 20), ("cluster_row", 8, 70001)]
    stream = cupy.cuda.Stream(non_blocking=True)
    for variant, rows, cols in cases:
        x = cupy.random.default_rng(rows).standard_normal((rows, cols), dtype=cupy.float32)
        with stream:
            softmax_lab.softmax(x, variant=variant)
            stream.begin_capture()
            y = softmax_lab.softmax(x, variant=variant)
            graph = stream.end_capture()
        for i in range(3):
            with stream:
                x[...] = cupy.random.default_rng(i).standard_normal((rows, cols), dtype=cupy.float32)
                y.fill(float("nan"))
            graph.launch(stream)
            stream.synchronize()
            err = op_error(to_float64(y), softmax_reference(to_float64(x)), "float32", "softmax")
            assert err < 1e-6, (variant, i, err)
    print("sanitized")
    """
)


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer_on_replays(tool, tmp_path):
    run_sanitized(tool, SANITIZER_SCRIPT, tmp_path, timeout=1200)
