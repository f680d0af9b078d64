"""NVML telemetry of a trial's GPUs, sampled in a background thread and summarised per epoch.

:func:`gpu_telemetry` is a context manager: it yields a :class:`Sampler` (or an
:class:`Unavailable` that says why there is none) and always stops the thread on exit.
Each epoch the loop adds ``sampler.epoch_metrics()`` to its report:

* ``telemetry``: ``"nvml"``, or ``"unavailable: <reason>"``; when unavailable there are
  no ``gpu_*`` keys at all (zeros would look like readings).
* ``gpu_util_pct``: mean utilisation over the epoch's samples and the trial's GPUs.
* ``gpu_mem_used_gib``: peak memory used over the epoch, summed over the GPUs (the whole
  device's usage as NVML sees it, including the CUDA context and the caching allocator).
* ``gpu_power_w``: mean power draw, summed over the GPUs.
* ``gpu_energy_wh``: energy of the epoch, summed over the GPUs, from the total-energy
  counter (Volta and later) or else by integrating power over time (trapezoids).

The reading function is passed in, so the summarising logic is tested without a GPU.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SAMPLE_INTERVAL_S",
    "Reading",
    "Sampler",
    "Unavailable",
    "gpu_telemetry",
    "parse_visible_devices",
    "summarize",
]

SAMPLE_INTERVAL_S = 0.5
_GIB = 2**30


@dataclass(frozen=True)
class Reading:
    """One GPU's state at one moment, in NVML's units.

    Attributes:
        util_pct: GPU utilisation (share of time a kernel ran), 0-100.
        mem_used_bytes: Device memory in use.
        power_mw: Power draw in milliwatts.
        energy_mj: Total energy since driver load in millijoules, or None if unsupported.
    """

    util_pct: float
    mem_used_bytes: int
    power_mw: float
    energy_mj: float | None


# A sample: a monotonic time in seconds and one reading per GPU.
Sample = tuple[float, Sequence[Reading]]


def summarize(samples: Sequence[Sample]) -> dict[str, float]:
    """The ``gpu_*`` metrics of a window of samples (the first one only anchors energy).

    Args:
        samples: At least two samples, oldest first, each with a reading per GPU. The
            first is the previous window's last sample, so consecutive windows share it
            and no energy falls between them.

    Raises:
        ValueError: Fewer than two samples.
    """
    if len(samples) < 2:
        raise ValueError(f"summarize needs at least 2 samples, but got {len(samples)}.")
    window = samples[1:]
    n_gpus = len(window[0][1])
    util = sum(r.util_pct for _, rs in window for r in rs) / (len(window) * n_gpus)
    mem = max(sum(r.mem_used_bytes for r in rs) for _, rs in window) / _GIB
    power_w = sum(r.power_mw for _, rs in window for r in rs) / len(window) / 1e3
    energy_j = 0.0
    for gpu in range(n_gpus):
        first, last = samples[0][1][gpu].energy_mj, samples[-1][1][gpu].energy_mj
        if first is not None and last is not None:
            energy_j += (last - first) / 1e3
            continue
        for (t0, r0), (t1, r1) in itertools.pairwise(samples):
            energy_j += (r0[gpu].power_mw + r1[gpu].power_mw) / 2 / 1e3 * (t1 - t0)
    return {
        "gpu_util_pct": util,
        "gpu_mem_used_gib": mem,
        "gpu_power_w": power_w,
        "gpu_energy_wh": energy_j / 3600,
    }


class Sampler:
    """Reads every GPU each ``interval_s`` in a daemon thread; call :meth:`close` to stop.

    Args:
        read: Returns one :class:`Reading` per GPU (NVML in production).
        interval_s: Seconds between samples.
        clock: Monotonic clock in seconds.
    """

    def __init__(
        self,
        read: Callable[[], Sequence[Reading]],
        interval_s: float = SAMPLE_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._clock, self._interval_s = read, clock, interval_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._error: str | None = None
        self._samples: list[Sample] = []
        self.sample()  # anchors the first epoch's window at the trial's start
        self._thread = threading.Thread(target=self._run, name="gpu-telemetry", daemon=True)
        self._thread.start()

    def sample(self) -> None:
        """Takes one sample now; a failing read is remembered and reported, not raised."""
        try:
            readings = list(self._read())
        except Exception as e:  # NVML raises its own error types; any means no reading
            with self._lock:
                self._error = self._error or f"NVML read failed: {e}"
            return
        with self._lock:
            self._samples.append((self._clock(), readings))

    def epoch_metrics(self) -> dict[str, Any]:
        """``telemetry`` plus the ``gpu_*`` metrics since the last call (see the module)."""
        self.sample()  # an epoch shorter than the interval still gets a reading
        with self._lock:
            samples = self._samples
            self._samples = samples[-1:]
            error = self._error
        if error is not None:
            return {"telemetry": f"unavailable: {error}"}
        if len(samples) < 2:
            return {"telemetry": "unavailable: no NVML samples this epoch"}
        return {"telemetry": "nvml", **summarize(samples)}

    def close(self) -> None:
        """Stops the thread and waits for it."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.sample()


@dataclass(frozen=True)
class Unavailable:
    """Stands in for a :class:`Sampler` where there is nothing to sample, saying why."""

    reason: str

    def epoch_metrics(self) -> dict[str, Any]:
        """Only ``telemetry: "unavailable: <reason>"``; never ``gpu_*`` keys."""
        return {"telemetry": f"unavailable: {self.reason}"}


def parse_visible_devices(cuda_visible_devices: str | None, device_count: int) -> list[int | str]:
    """NVML device ids for the CUDA devices a process sees: indices or UUID strings.

    ``CUDA_VISIBLE_DEVICES`` (which Ray sets to a trial's GPU ids) holds indices or
    ``GPU-``/``MIG-`` UUIDs; unset means devices ``0..device_count-1``. Indices assume
    CUDA and NVML number devices alike (true with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and on
    nodes of identical GPUs); UUIDs are exact.
    """
    if cuda_visible_devices is None:
        return list(range(device_count))
    ids: list[int | str] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not entry:
            continue
        ids.append(int(entry) if entry.isdigit() else entry)
    return ids[:device_count]


def _nvml_reader(device_ids: Sequence[int | str]) -> Callable[[], list[Reading]]:
    import pynvml

    handles = [
        pynvml.nvmlDeviceGetHandleByIndex(i)
        if isinstance(i, int)
        else pynvml.nvmlDeviceGetHandleByUUID(i)
        for i in device_ids
    ]

    def energy(handle: Any) -> float | None:
        try:
            return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except pynvml.NVMLError:  # pre-Volta GPUs: integrate power instead
            return None

    def read() -> list[Reading]:
        return [
            Reading(
                util_pct=float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu),
                mem_used_bytes=int(pynvml.nvmlDeviceGetMemoryInfo(h).used),
                power_mw=float(pynvml.nvmlDeviceGetPowerUsage(h)),
                energy_mj=energy(h),
            )
            for h in handles
        ]

    return read


@contextlib.contextmanager
def gpu_telemetry(
    device_ids: Sequence[int | str], interval_s: float = SAMPLE_INTERVAL_S
) -> Iterator[Sampler | Unavailable]:
    """Samples the given GPUs with NVML until the block exits (see the module docstring).

    Args:
        device_ids: NVML ids of the trial's GPUs (see :func:`parse_visible_devices`);
            empty means the trial has no CUDA device.
        interval_s: Seconds between samples.

    Yields:
        A running :class:`Sampler`, or an :class:`Unavailable` with the reason.
    """
    if not device_ids:
        yield Unavailable("no CUDA device for this trial")
        return
    try:
        import pynvml
    except ImportError as e:
        yield Unavailable(f"pynvml is not installed ({e})")
        return
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError or a missing libnvidia-ml.so
        yield Unavailable(f"NVML init failed: {e}")
        return
    try:
        try:
            read = _nvml_reader(device_ids)
            read()
        except Exception as e:
            yield Unavailable(f"NVML read failed: {e}")
            return
        sampler = Sampler(read, interval_s)
        try:
            yield sampler
        finally:
            sampler.close()
    finally:
        pynvml.nvmlShutdown()
