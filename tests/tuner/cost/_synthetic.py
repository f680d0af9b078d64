"""Hand-made GPUs and a flat calibration shared by the cost-model tests."""

from __future__ import annotations

from datetime import date

from tuner.cost import Calibration, GpuSpec


def gpu(name: str, bw: float, tflops: float, mem: float = 40) -> GpuSpec:
    """An Ampere GPU with the same peak at every precision."""
    return GpuSpec(name, "ampere", mem, bw, tflops, tflops, tflops, None, "test", date(2026, 1, 1))


GPUS = {
    "BASE": gpu("BASE", bw=1000, tflops=100),
    "FAST": gpu("FAST", bw=1000, tflops=200),  # 2x compute, same bandwidth
    "WIDE": gpu("WIDE", bw=3000, tflops=100),  # 3x bandwidth, same compute
}
# Every efficiency 1: effective rates are the datasheet's. The ridge point of BASE is
# 100e12 / 1000e9 = 100 FLOP/byte.
FLAT = Calibration(
    eff_compute={},
    eff_mem={},
    default_eff_compute={"fp32": 1.0, "tf32": 1.0, "amp": 1.0},
    default_eff_mem=1.0,
    intensity_flop_per_byte={"default": {"tf32": 100.0, "amp": 100.0}, "compute": {"tf32": 1e9}},
)
