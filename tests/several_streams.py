"""Launches of one variant on several streams at once, in a child process with a time limit,
for the GPU tests of the persistent variants whose blocks wait for other blocks of their grid."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import cupy as cp, softmax_lab
    from softmax_lab.reference import relative_error, softmax_reference
    variant, rows, cols, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(count)]
    xs = [cp.random.default_rng(i).standard_normal((rows, cols + i), dtype=cp.float32) for i in range(count)]
    ys = [cp.full_like(x, cp.nan) for x in xs]
    for _ in range(20):
        for stream, x, y in zip(streams, xs, ys):
            with stream:
                softmax_lab.softmax(x, variant=variant, out=y)
    cp.cuda.Device().synchronize()
    for x, y in zip(xs, ys):
        assert relative_error(y[::5], softmax_reference(x[::5])) < 1e-6
    print("finished")
    """
)


def assert_finishes_on_several_streams(variant: str, rows: int, cols: int, streams: int, timeout: int = 300) -> None:
    """20 rounds of float32 softmax of rows x (cols + i) on stream i, for `streams` streams, all
    queued before one synchronization; fails if the child has not finished within `timeout`
    seconds (a hang) or its outputs are wrong."""
    args = [sys.executable, "-c", SCRIPT, variant, str(rows), str(cols), str(streams)]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"concurrent {variant} launches did not finish in {timeout} s")
    assert done.returncode == 0 and "finished" in done.stdout, done.stderr[-3000:]
