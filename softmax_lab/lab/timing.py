"""Timing: GPU time per call from CUDA events, host time per call from perf_counter,
the statistics every record carries (median, min, max, spread), and the clocks,
power and clock reasons read through NVML while a measurement runs.

Not cupyx.profiler.benchmark: it synchronizes the host after every call, so the
GPU idles between calls and a call of several launches (multi_block, cupyx,
torch.compile) pays host launch latency inside its GPU time on small shapes;
here the calls are queued back to back, each between its own pair of events.
"""

from __future__ import annotations

import contextlib
import threading
import time

import numpy as np

SAMPLE_INTERVAL_S = 0.005
# The bits of NVML's nvmlClocksEventReasons (nvml.h): why the SM clock is below its maximum.
CLOCK_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                 0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
                 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}
CLOCK_READINGS = ("sm_mhz", "mem_mhz", "power_w", "temperature_c")


def gpu_times(call, stream, repeats: int, warmup: int, before_timed=None) -> tuple[list[float], object]:
    """(milliseconds of each of `repeats` calls, the last call's output): `warmup`
    calls, then before_timed() (e.g. poisoning the output), then the timed calls,
    each between a pair of CUDA events on `stream`, with one synchronization at the end."""
    import cupy

    for _ in range(warmup):
        call()
    if before_timed is not None:
        before_timed()
    pairs = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(repeats)]
    out = None
    for start, end in pairs:
        start.record(stream)
        out = call()
        end.record(stream)
    stream.synchronize()
    return [cupy.cuda.get_elapsed_time(start, end) for start, end in pairs], out


def loop_times(call, synchronize, repeats: int, warmup: int, calls: int, before_timed=None) -> tuple[list[float], object]:
    """(milliseconds a call of each of `repeats` loops of `calls` back-to-back calls, host
    included, the last call's output): a small call's cost as a caller's loop sees it, the
    larger of its host time and its GPU time.  `warmup` untimed loops (whole loops, so that a
    GPU that idled has raised its clock before the first timed one), before_timed(), then
    each loop between two synchronize() (which wait for the GPU) and time.perf_counter()."""
    for _ in range(warmup * calls):
        call()
    if before_timed is not None:
        before_timed()
    times, out = [], None
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            out = call()
        synchronize()
        times.append((time.perf_counter() - start) * 1e3 / calls)
    return times, out


def host_times(call, calls: int, warmup: int, synchronize) -> list[float]:
    """Microseconds between consecutive calls of `call` in a loop (its host cost
    while the GPU keeps up), after `warmup` calls; synchronize() once at the end,
    whose wait closes the last interval."""
    for _ in range(warmup):
        call()
    synchronize()
    stamps = np.empty(calls + 1)
    for i in range(calls):
        stamps[i] = time.perf_counter()
        call()
    synchronize()
    stamps[calls] = time.perf_counter()
    return list(np.diff(stamps) * 1e6)


def stats(times, unit: str = "ms") -> dict:
    """median, min, max and spread ((max - min) / median) of a list of times."""
    t = np.asarray(times, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no times to summarize")
    median = float(np.median(t))
    return {"repeats": int(t.size), f"median_{unit}": median, f"min_{unit}": float(t.min()),
            f"max_{unit}": float(t.max()), "spread": float((t.max() - t.min()) / median) if median > 0 else 0.0}


class ClockSampler:
    """Reads `read()` (CLOCK_READINGS and a reasons bit mask) every `interval` seconds on a
    thread while it is entered; each sample carries `round`, what the caller was measuring
    (-1: nothing, the samples a summary leaves out)."""

    def __init__(self, read, interval: float = SAMPLE_INTERVAL_S):
        self.read, self.interval = read, interval
        self.samples: list[dict] = []
        self.round = -1
        self._rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="softmax-lab-clocks", daemon=True)

    def _run(self):
        t0 = time.perf_counter()
        while not self._stop.is_set():
            try:
                reading = self.read()
            except Exception:  # NVML gave up mid-run (a reset, a lost device): the samples so far stand
                return
            self.samples.append({"t_s": time.perf_counter() - t0, "round": self.round, **reading})
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    @contextlib.contextmanager
    def measuring(self):
        """Tags the samples taken inside it with a round of their own, which it yields."""
        token, self._rounds = self._rounds, self._rounds + 1
        self.round = token
        try:
            yield token
        finally:
            self.round = -1

    def summary(self, round_: int | None = None) -> dict:
        """Over the samples of round `round_` (None: of every round): each reading's min,
        median and max, and the share of samples that gave each clock reason."""
        timed = [s for s in self.samples if (s["round"] >= 0 if round_ is None else s["round"] == round_)]
        out = {"samples": len(timed)}
        for key in CLOCK_READINGS:
            values = [s[key] for s in timed if s.get(key) is not None]
            out[key] = ({"min": float(min(values)), "median": float(np.median(values)), "max": float(max(values))}
                        if values else None)
        counts = {name: sum(1 for s in timed if s.get("reasons", 0) & bit) for bit, name in CLOCK_REASONS.items()}
        out["reasons"] = {name: n / len(timed) for name, n in counts.items() if n} if timed else {}
        return out


def nvml_reader(device_id: int):
    """(read, None) for the device's SM and memory clocks, power, temperature and clock
    reasons through NVML, or (None, why not)."""
    try:
        import cupy
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed: no clock or power readings"
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(cupy.cuda.Device(device_id).pci_bus_id.encode())
        reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        reasons(handle)
    except Exception as e:  # NVML missing from the driver, or no permission
        return None, f"NVML could not be read: {type(e).__name__}: {' '.join(str(e).split())}"

    def read() -> dict:
        return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "mem_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
                "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                "temperature_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
                "reasons": int(reasons(handle))}

    return read, None


def format_clocks(summary: dict) -> str:
    """'SM 1530..1815 MHz (median 1700), memory 2619 MHz, 410..520 W, 52..55 C; clock held
    down by: sw_power_cap 90%' from a ClockSampler summary (readings it lacks are left out)."""
    def span(key: str, unit: str) -> str | None:
        r = summary.get(key)
        if r is None:
            return None
        text = f"{r['min']:.0f}" if round(r["min"]) == round(r["max"]) else f"{r['min']:.0f}..{r['max']:.0f}"
        return f"{text} {unit}"

    parts = [f"SM {span('sm_mhz', 'MHz')} (median {summary['sm_mhz']['median']:.0f})" if summary.get("sm_mhz")
             else None, f"memory {span('mem_mhz', 'MHz')}" if summary.get("mem_mhz") else None,
             span("power_w", "W"), span("temperature_c", "C")]
    reasons = ", ".join(f"{k} {v:.0%}" for k, v in summary.get("reasons", {}).items()) or "nothing"
    return f"{', '.join(p for p in parts if p) or 'no readings'}; clock held down by: {reasons}"
