"""Cross-GPU throughput prediction: a roofline split of the measured step, scaled per part.

Seconds per sample on a GPU = compute part + memory part + non-scaling part. The compute
part scales with peak FLOP/s(precision) x eff_compute[architecture, math mode], the memory
part with bandwidth x eff_mem[architecture]; the non-scaling part (host, data loading) stays.
A GPU of the calibration set also has its own fitted offset (how much faster or slower it
runs than its generation's efficiencies say: clocks, cache, power limits), and a
prediction to another GPU is discounted by a fitted factor (see :class:`Calibration`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tuner.cost._catalog import GpuSpec, find_gpu, load_gpus
from tuner.errors import SpecError
from tuner.spec._limits import FLAGS, Limit, within

__all__ = [
    "PRECISIONS",
    "Calibration",
    "Prediction",
    "StepParts",
    "load_calibration",
    "peak_tflops",
    "predict_throughput",
    "spec_ratio_baseline",
]

PRECISIONS = ("fp32", "tf32", "amp")
# Architectures without TF32 tensor cores run "tf32" requests as plain FP32.
_NO_TF32 = frozenset({"pascal", "volta", "turing"})
_SOURCE = "<predict>"


@dataclass(frozen=True)
class Calibration:
    """Fitted efficiencies and default arithmetic intensities; see tuner/data/calibration.json.

    Attributes:
        eff_compute: architecture -> math mode (fp32/tf32/amp) -> achieved/peak FLOP/s.
        eff_mem: architecture -> achieved/peak bandwidth.
        default_eff_compute: math mode -> efficiency for architectures not fitted.
        default_eff_mem: bandwidth efficiency for architectures not fitted.
        intensity_flop_per_byte: workload class -> precision -> FLOPs per byte moved,
            used to split a step when FLOPs are unknown; class "default" always exists.
        gpu_speed: GPU name -> math mode -> factor on both effective rates of that GPU
            (exp of its fitted log-time offset, negated); GPUs not listed get 1.
        cross_gpu_discount: Factor (<= 1) on every throughput predicted for a GPU other
            than the measured one. Across workloads it has not seen, the model's ratio
            errors are about log-symmetric, so the point prediction that minimises the
            percentage error sits a little below the log-mean; the factor is the one that
            minimised the p90 in a leave-one-workload-out on the fitting data. It also
            errs on the side of a higher cost, which a budget prefers.
        meta: Free-form provenance (data file, fit settings, residuals).
    """

    eff_compute: Mapping[str, Mapping[str, float]]
    eff_mem: Mapping[str, float]
    default_eff_compute: Mapping[str, float]
    default_eff_mem: float
    intensity_flop_per_byte: Mapping[str, Mapping[str, float]]
    gpu_speed: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    cross_gpu_discount: float = 1.0
    meta: Mapping[str, Any] = field(default_factory=dict)

    def speed(self, gpu: str, mode: str) -> float:
        """The fitted speed factor of one GPU at one math mode (1 when not fitted)."""
        return self.gpu_speed.get(gpu, {}).get(mode, 1.0)

    def compute_efficiency(self, architecture: str, mode: str) -> float:
        """Efficiency of ``mode`` math on ``architecture``, falling back to the default."""
        fitted = self.eff_compute.get(architecture, {}).get(mode)
        return fitted if fitted is not None else self.default_eff_compute[mode]

    def memory_efficiency(self, architecture: str) -> float:
        """Bandwidth efficiency on ``architecture``, falling back to the default."""
        return self.eff_mem.get(architecture, self.default_eff_mem)

    def intensity(self, workload_class: str, precision: str) -> float:
        """Default FLOPs per byte for a workload class (tf32 values serve fp32 too)."""
        if workload_class not in self.intensity_flop_per_byte:
            raise SpecError(
                _SOURCE,
                "workload_class",
                "unknown workload class",
                got=workload_class,
                allowed=", ".join(sorted(self.intensity_flop_per_byte)),
            )
        key = "tf32" if precision == "fp32" else precision
        for values in (
            self.intensity_flop_per_byte[workload_class],
            self.intensity_flop_per_byte["default"],
        ):
            if precision in values or key in values:
                return values.get(precision, values.get(key, 0.0))
        fallback = self.intensity_flop_per_byte["default"]
        return math.exp(sum(math.log(v) for v in fallback.values()) / len(fallback))

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form, the inverse of :meth:`from_dict`."""
        return {
            "eff_compute": {arch: dict(modes) for arch, modes in self.eff_compute.items()},
            "eff_mem": dict(self.eff_mem),
            "default_eff_compute": dict(self.default_eff_compute),
            "default_eff_mem": self.default_eff_mem,
            "intensity_flop_per_byte": {
                name: dict(values) for name, values in self.intensity_flop_per_byte.items()
            },
            "gpu_speed": {gpu: dict(modes) for gpu, modes in self.gpu_speed.items()},
            "cross_gpu_discount": self.cross_gpu_discount,
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> Calibration:
        """Builds a calibration from :meth:`to_dict` output, validating keys and ranges."""
        for key in ("eff_compute", "eff_mem", "default_eff_compute", "default_eff_mem"):
            if key not in data:
                raise SpecError(source, key, "missing key", fix="regenerate the calibration")
        if "default" not in data.get("intensity_flop_per_byte", {}):
            raise SpecError(source, "intensity_flop_per_byte.default", "missing key")
        missing = [mode for mode in PRECISIONS if mode not in data["default_eff_compute"]]
        if missing:
            raise SpecError(source, "default_eff_compute", "missing math mode(s)", got=missing)
        return cls(
            eff_compute={a: dict(m) for a, m in data["eff_compute"].items()},
            eff_mem=dict(data["eff_mem"]),
            default_eff_compute=dict(data["default_eff_compute"]),
            default_eff_mem=float(data["default_eff_mem"]),
            intensity_flop_per_byte={
                k: dict(v) for k, v in data["intensity_flop_per_byte"].items()
            },
            gpu_speed={g: dict(m) for g, m in data.get("gpu_speed", {}).items()},
            cross_gpu_discount=_discount(data.get("cross_gpu_discount", 1.0), source),
            meta=dict(data.get("meta", {})),
        )


def _discount(value: Any, source: str) -> float:
    if not isinstance(value, int | float) or not 0 < value <= 1:
        raise SpecError(
            source, "cross_gpu_discount", "out of range", got=value, allowed="0 < x <= 1"
        )
    return float(value)


def load_calibration(path: str | Path | None = None) -> Calibration:
    """Reads a calibration JSON file (default: the shipped ``tuner/data/calibration.json``)."""
    file = (
        Path(path)
        if path is not None
        else Path(str(resources.files("tuner") / "data" / "calibration.json"))
    )
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise SpecError(str(file), "file", "cannot read calibration", got=str(err)) from err
    return Calibration.from_dict(data, source=str(file))


@dataclass(frozen=True)
class StepParts:
    """Seconds per sample, split into what scales with FLOP/s, with bandwidth, and neither."""

    compute_s: float
    memory_s: float
    non_scaling_s: float

    @property
    def total_s(self) -> float:
        """Seconds per sample."""
        return self.compute_s + self.memory_s + self.non_scaling_s


@dataclass(frozen=True)
class Prediction:
    """A throughput predicted on ``to_gpu`` from one measured on ``from_gpu``.

    Attributes:
        from_gpu: GPU the profile was measured on.
        to_gpu: GPU the prediction is for.
        precision: fp32, tf32 or amp.
        from_samples_per_s: The measured throughput.
        samples_per_s: The predicted throughput.
        source: Per-sample time split on ``from_gpu``.
        target: Per-sample time split on ``to_gpu``.
        compute_share: Compute part / GPU part (compute + memory) on ``from_gpu``.
        method: How the split was made ("roofline" with FLOPs, else "class:<name>").
    """

    from_gpu: str
    to_gpu: str
    precision: str
    from_samples_per_s: float
    samples_per_s: float
    source: StepParts
    target: StepParts
    compute_share: float
    method: str

    @property
    def speedup(self) -> float:
        """Predicted over measured throughput."""
        return self.samples_per_s / self.from_samples_per_s


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise SpecError(
            _SOURCE, "precision", "unknown precision", got=precision, allowed=", ".join(PRECISIONS)
        )


def math_mode(gpu: GpuSpec, precision: str) -> str:
    """The math a precision runs as on ``gpu`` ("tf32" on pre-Ampere runs as "fp32")."""
    _check_precision(precision)
    if precision == "tf32" and gpu.tf32_tflops is None and gpu.architecture in _NO_TF32:
        return "fp32"
    return precision


def peak_tflops(gpu: GpuSpec, precision: str) -> float:
    """Dense datasheet TFLOP/s of ``gpu`` at ``precision``.

    Raises:
        SpecError: Unknown precision, or the catalog lacks the figure for this GPU.
    """
    column = {"fp32": "fp32_tflops", "tf32": "tf32_tflops", "amp": "fp16_bf16_tflops"}
    mode = math_mode(gpu, precision)
    value: float | None = getattr(gpu, column[mode])
    if value is None:
        raise SpecError(
            "gpus.csv",
            f"{gpu.name}.{column[mode]}",
            f"no {mode} peak known, so {precision} throughput cannot be predicted",
            fix=f"add {column[mode]} for {gpu.name} in a GPU catalog, or use another precision",
        )
    return value


def _bandwidth_gb_s(gpu: GpuSpec) -> float:
    if gpu.mem_bw_gb_s is None:
        raise SpecError(
            "gpus.csv",
            f"{gpu.name}.mem_bw_gb_s",
            "no memory bandwidth known",
            fix=f"add mem_bw_gb_s for {gpu.name} in a GPU catalog",
        )
    return gpu.mem_bw_gb_s


def effective_rates(gpu: GpuSpec, precision: str, calibration: Calibration) -> tuple[float, float]:
    """(effective FLOP/s, effective bytes/s) of ``gpu`` at ``precision``."""
    mode = math_mode(gpu, precision)
    speed = calibration.speed(gpu.name, mode)
    eff_c = calibration.compute_efficiency(gpu.architecture, mode)
    flops = peak_tflops(gpu, precision) * 1e12 * eff_c * speed
    bytes_s = _bandwidth_gb_s(gpu) * 1e9 * calibration.memory_efficiency(gpu.architecture)
    return flops, bytes_s * speed


def _positive(name: str, value: float, limit: Limit) -> None:
    """A finite number > 0 and at most ``limit``'s high (the bound and reason otherwise)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not (number and within(Limit("number", 0, math.inf, "", low_open=True), value)):
        raise SpecError(_SOURCE, name, "must be a finite number > 0", got=value)
    if value > limit.high:
        raise SpecError(
            _SOURCE, name, f"must be at most {limit.show(limit.high)}", got=value, fix=limit.fix()
        )


def predict_throughput(
    samples_per_s: float,
    from_gpu: str,
    to_gpu: str,
    precision: str,
    flops_per_sample: float | None = None,
    *,
    workload_class: str = "default",
    non_scaling_share: float = 0.0,
    gpus: Mapping[str, GpuSpec] | None = None,
    calibration: Calibration | None = None,
) -> Prediction:
    """Predicts samples/s on ``to_gpu`` from samples/s measured on ``from_gpu``.

    The measured time per sample minus its non-scaling share is split into a compute part
    and a memory part. With ``flops_per_sample`` the compute part is the time those FLOPs
    take at the calibrated effective FLOP/s (capped at the whole GPU part) and the rest is
    memory-bound; without it the split comes from the class's default arithmetic intensity
    against the GPU's effective ridge point: share = I / (I + FLOP/s / bytes/s). Each part
    is then scaled by the ratio of effective throughput between the two GPUs.

    Args:
        samples_per_s: Measured training throughput on ``from_gpu`` (> 0).
        from_gpu: Catalog name of the measured GPU.
        to_gpu: Catalog name of the GPU to predict for.
        precision: "fp32" (no TF32), "tf32" (PyTorch default math on Ampere+) or "amp".
        flops_per_sample: Training FLOPs per sample (forward + backward), if measured.
        workload_class: Calibrated class for the default split (see calibration.json).
        non_scaling_share: Share of the measured time that does not scale (host, data
            loading), in [0, 1).
        gpus: GPU catalog (default: shipped).
        calibration: Efficiencies (default: shipped).

    Returns:
        The prediction with its per-part breakdown on both GPUs.

    Raises:
        SpecError: Unknown GPU, precision or class; bad numbers; missing catalog figures.
    """
    _positive("samples_per_s", samples_per_s, FLAGS["--samples-per-s"])
    _check_precision(precision)
    if flops_per_sample is not None:
        _positive("flops_per_sample", flops_per_sample, FLAGS["--flops-per-sample"])
    share = FLAGS["--non-scaling-share"]
    if not (isinstance(non_scaling_share, int | float) and within(share, non_scaling_share)):
        raise SpecError(
            _SOURCE,
            "non_scaling_share",
            "out of range",
            got=non_scaling_share,
            allowed="0 <= share < 1",
        )
    known = gpus if gpus is not None else load_gpus()
    cal = calibration if calibration is not None else load_calibration()
    src = find_gpu(known, from_gpu, source=_SOURCE, path="from_gpu")
    dst = find_gpu(known, to_gpu, source=_SOURCE, path="to_gpu")
    src_flops, src_bytes = effective_rates(src, precision, cal)
    dst_flops, dst_bytes = effective_rates(dst, precision, cal)

    total_s = 1.0 / samples_per_s
    non_scaling_s = total_s * non_scaling_share
    gpu_s = total_s - non_scaling_s
    if flops_per_sample is not None:
        compute_s = min(flops_per_sample / src_flops, gpu_s)
        method = "roofline"
    else:
        intensity = cal.intensity(workload_class, precision)
        compute_s = gpu_s * intensity / (intensity + src_flops / src_bytes)
        method = f"class:{workload_class}"
    source = StepParts(compute_s, gpu_s - compute_s, non_scaling_s)
    # The discount slows the GPU part only, and only on another GPU than the measured one.
    slower = 1.0 / cal.cross_gpu_discount if dst.name != src.name else 1.0
    target = StepParts(
        compute_s=source.compute_s * src_flops / dst_flops * slower,
        memory_s=source.memory_s * src_bytes / dst_bytes * slower,
        non_scaling_s=non_scaling_s,
    )
    return Prediction(
        from_gpu=src.name,
        to_gpu=dst.name,
        precision=precision,
        from_samples_per_s=samples_per_s,
        samples_per_s=1.0 / target.total_s,
        source=source,
        target=target,
        compute_share=compute_s / gpu_s,
        method=method,
    )


def spec_ratio_baseline(
    samples_per_s: float,
    from_gpu: str,
    to_gpu: str,
    precision: str,
    *,
    gpus: Mapping[str, GpuSpec] | None = None,
) -> float:
    """Naive prediction: measured samples/s times the ratio of datasheet peak TFLOP/s.

    Args:
        samples_per_s: Measured throughput on ``from_gpu``.
        from_gpu: Catalog name of the measured GPU.
        to_gpu: Catalog name of the GPU to predict for.
        precision: fp32, tf32 or amp.
        gpus: GPU catalog (default: shipped).

    Returns:
        Predicted samples/s on ``to_gpu``.
    """
    _positive("samples_per_s", samples_per_s, FLAGS["--samples-per-s"])
    _check_precision(precision)
    known = gpus if gpus is not None else load_gpus()
    src = find_gpu(known, from_gpu, source=_SOURCE, path="from_gpu")
    dst = find_gpu(known, to_gpu, source=_SOURCE, path="to_gpu")
    return samples_per_s * peak_tflops(dst, precision) / peak_tflops(src, precision)
