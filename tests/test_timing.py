"""softmax_lab.lab.timing: statistics, and the host-time loop (on the CPU); GPU events are marked gpu."""

import time

import pytest

from softmax_lab.lab import timing


def test_stats_of_a_list_of_times():
    s = timing.stats([3.0, 1.0, 2.0])
    assert s == {"repeats": 3, "median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0, "spread": 1.0}
    assert timing.stats([5.0], "us")["median_us"] == 5.0
    with pytest.raises(ValueError):
        timing.stats([])


def test_host_times_measure_each_call_and_synchronize_once_at_the_end():
    calls, syncs = [], []

    def call():
        calls.append(1)
        time.sleep(0.001)

    us = timing.host_times(call, calls=20, warmup=3, synchronize=lambda: syncs.append(len(calls)))
    assert len(us) == 20 and len(calls) == 23
    assert syncs == [3, 23]  # after the warm-up, and once after the loop
    assert min(us) >= 900  # each interval holds one 1 ms call


@pytest.mark.gpu
def test_gpu_times_return_the_last_output():
    import cupy

    x = cupy.ones(1 << 20, cupy.float32)
    stream = cupy.cuda.Stream(non_blocking=True)
    seen = []
    with stream:
        times, out = timing.gpu_times(lambda: x * 2, stream, repeats=5, warmup=2, before_timed=lambda: seen.append(1))
    assert len(times) == 5 and all(t > 0 for t in times) and seen == [1]
    assert float(out[0]) == 2.0
