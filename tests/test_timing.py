"""softmax_lab.lab.timing: statistics, the host-time loop and the clock sampler (on the CPU); GPU events
and NVML are marked gpu."""

import threading
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


def test_loop_times_divide_each_loop_by_its_calls_between_two_synchronizations():
    calls, syncs, seen = [], [], []

    def call():
        calls.append(1)
        time.sleep(0.001)
        return len(calls)

    ms, out = timing.loop_times(call, lambda: syncs.append(len(calls)), repeats=4, warmup=2, calls=5,
                                before_timed=lambda: seen.append(len(calls)))
    assert len(ms) == 4 and len(calls) == 30 and out == 30 and seen == [10]  # two untimed loops first
    assert syncs == [10, 15, 15, 20, 20, 25, 25, 30]  # around each loop of 5
    assert all(0.9 <= t < 20 for t in ms)  # about 1 ms a call: the loop's time over its 5 calls


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


def test_the_sampler_tags_each_sample_with_its_round_and_summarizes_the_timed_ones():
    readings = iter(range(10**6))

    def read():
        i = next(readings)
        return {"sm_mhz": 1980 - (i % 3) * 100, "power_w": 500.0 + i % 2, "temperature_c": 50,
                "reasons": 0x4 if i % 2 else 0x0}

    got = threading.Event()
    with timing.ClockSampler(read, interval=0.001) as s:
        while len(s.samples) < 5:
            got.wait(0.002)
        with s.measuring() as token:
            n = len(s.samples)
            while len(s.samples) < n + 20:
                got.wait(0.002)
        with s.measuring() as second:
            pass
    assert (token, second, s.round) == (0, 1, -1)
    summary = s.summary()
    assert summary["samples"] == sum(1 for x in s.samples if x["round"] == 0) >= 20
    assert summary["sm_mhz"]["min"] == 1780 and summary["sm_mhz"]["max"] == 1980
    assert 0.3 < summary["reasons"]["sw_power_cap"] < 0.7 and set(summary["reasons"]) == {"sw_power_cap"}
    assert s.summary(0) == summary and s.summary(1)["samples"] == 0
    empty = timing.ClockSampler(dict).summary()
    assert empty == {"samples": 0, "sm_mhz": None, "mem_mhz": None, "power_w": None, "temperature_c": None,
                     "reasons": {}}


def test_the_clocks_line_says_each_reading_it_has():
    summary = {"samples": 4, "sm_mhz": {"min": 1530.0, "median": 1700.0, "max": 1815.0},
               "mem_mhz": {"min": 2619.0, "median": 2619.0, "max": 2619.0}, "power_w": None, "temperature_c": None,
               "reasons": {"sw_power_cap": 0.5}}
    assert timing.format_clocks(summary) == ("SM 1530..1815 MHz (median 1700), memory 2619 MHz; "
                                             "clock held down by: sw_power_cap 50%")
    assert timing.format_clocks({"samples": 0, "reasons": {}}) == "no readings; clock held down by: nothing"


@pytest.mark.gpu
def test_nvml_reads_this_device_or_says_why_not():
    read, why_not = timing.nvml_reader(0)
    if read is None:
        assert "NVML" in why_not or "pynvml" in why_not
        return
    sample = read()
    assert sample["sm_mhz"] > 0 and sample["mem_mhz"] > 0 and sample["power_w"] > 0


def test_a_reading_that_fails_ends_the_sampling_and_keeps_the_samples():
    calls = iter(range(3))

    def read():
        if next(calls, None) == 2:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return {"sm_mhz": 1980}

    with timing.ClockSampler(read, interval=0.001) as s, s.measuring():
        deadline = time.perf_counter() + 2
        while s._thread.is_alive() and time.perf_counter() < deadline:
            time.sleep(0.002)
    assert not s._thread.is_alive() and [x["sm_mhz"] for x in s.samples] == [1980, 1980]
