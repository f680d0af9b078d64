"""Fits the prediction efficiencies on measured cross-GPU throughput (scipy, offline only).

The fitted file (tuner/data/calibration.json) ships with the package; fitting happens only
in bench/predict_error.py --write and in tests.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from itertools import combinations
from pathlib import Path
from typing import Any

from tuner.cost._catalog import GpuSpec, load_gpus, resolve_gpu
from tuner.cost._predict import PRECISIONS, Calibration, math_mode, peak_tflops

__all__ = [
    "WORKLOAD_CLASSES",
    "Measurement",
    "choose_cross_gpu_discount",
    "fit_calibration",
    "leave_one_workload_out",
    "load_measurements",
    "regenerate_calibration",
]

# Workload -> class whose default arithmetic intensity a new workload of that kind uses.
WORKLOAD_CLASSES: Mapping[str, str] = {
    "resnet50": "cnn",
    "ssd": "cnn",
    "waveglow": "cnn",
    "bert_base_squad": "transformer",
    "bert_large_squad": "transformer",
    "transformerxlbase": "transformer",
    "transformerxllarge": "transformer",
    "gnmt": "rnn",
    "tacotron2": "rnn",
    "ncf": "recsys",
}
_PRIOR_EFF_COMPUTE = 0.5  # weak priors pin the scale the pair ratios cannot see
_PRIOR_EFF_MEM = 0.7
_PRIOR_INTENSITY = 50.0
_PRIOR_WEIGHT = 0.3


@dataclass(frozen=True)
class Measurement:
    """One measured training throughput (samples/s) of a workload on one GPU."""

    software_set: str
    workload: str
    precision: str
    gpu: str
    samples_per_s: float


def _data_path(name: str) -> Path:
    return Path(str(resources.files("tuner") / "data" / name))


def load_measurements(path: str | Path | None = None) -> list[Measurement]:
    """Reads ``throughput_measurements.csv`` (default: the shipped one)."""
    file = Path(path) if path is not None else _data_path("throughput_measurements.csv")
    with file.open(encoding="utf-8", newline="") as handle:
        return [
            Measurement(
                row["software_set"],
                row["workload"],
                row["precision"],
                row["gpu"],
                float(row["samples_per_s"]),
            )
            for row in csv.DictReader(handle)
        ]


def usable(m: Measurement, gpus: Mapping[str, GpuSpec]) -> GpuSpec | None:
    """The catalog GPU of ``m`` when the catalog has every figure a prediction needs."""
    gpu = resolve_gpu(gpus, m.gpu)
    if gpu is None or gpu.mem_bw_gb_s is None or m.precision not in PRECISIONS:
        return None
    try:
        peak_tflops(gpu, m.precision)
    except ValueError:
        return None
    return gpu


def group(
    measurements: Iterable[Measurement], gpus: Mapping[str, GpuSpec]
) -> dict[tuple[str, str, str], dict[str, float]]:
    """(software_set, workload, precision) -> catalog GPU -> geometric-mean samples/s."""
    logs: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for m in measurements:
        gpu = usable(m, gpus)
        if gpu is not None:
            key = (m.software_set, m.workload, m.precision)
            logs[key][gpu.name].append(math.log(m.samples_per_s))
    return {
        key: {gpu: math.exp(sum(v) / len(v)) for gpu, v in by_gpu.items()}
        for key, by_gpu in logs.items()
        if len(by_gpu) >= 2
    }


def fit_calibration(
    measurements: Sequence[Measurement],
    gpus: Mapping[str, GpuSpec],
    classes: Mapping[str, str] = WORKLOAD_CLASSES,
    *,
    choose_discount: bool = True,
) -> Calibration:
    """Least squares on the relative errors of GPU-pair throughput ratios.

    Model: log seconds per sample of workload w on GPU g at precision p is
    ``log(I[w,p] / (peak[g,p] * e_c[arch,mode]) + 1 / (bandwidth[g] * e_m[arch]))
    + delta[g,p]``; every ordered pair of GPUs measured on the same workload contributes
    ``predicted ratio / observed ratio - 1`` (the percentage error a user sees), squared.
    Weak priors pin the scale the ratios cannot see (e_c 0.5, e_m 0.7, I 50 FLOP/byte)
    and pull each GPU's offset ``delta`` to 0; efficiencies cannot exceed the datasheet.
    Class intensities are geometric means of their workloads'; "default" is the mean over
    all workloads (what a workload of unknown kind gets).

    Args:
        measurements: Throughput measurements.
        gpus: GPU catalog.
        classes: Workload -> class for the class intensities.
        choose_discount: Pick ``cross_gpu_discount`` by a leave-one-workload-out on
            ``measurements`` (ten more fits); 1.0 otherwise.
    """
    fit = _fit(group(measurements, gpus), gpus)
    eff_compute: dict[str, dict[str, float]] = defaultdict(dict)
    for (arch, mode), value in fit.values("c").items():
        eff_compute[arch][mode] = round(math.exp(value), 4)
    eff_mem = {arch: round(math.exp(v), 4) for arch, v in fit.values("m").items()}
    gpu_speed: dict[str, dict[str, float]] = defaultdict(dict)
    for (gpu, mode), value in fit.values("d").items():
        gpu_speed[gpu][mode] = round(math.exp(-value), 4)
    per_class: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (workload, precision), value in fit.values("I").items():
        per_class[classes.get(workload, "default")][precision].append(value)
        per_class["default"][precision].append(value)
    intensity = {
        name: {p: round(math.exp(sum(v) / len(v)), 2) for p, v in sorted(by_p.items())}
        for name, by_p in sorted(per_class.items())
    }
    default_c = {
        mode: _geomean([m[mode] for m in eff_compute.values() if mode in m]) or _PRIOR_EFF_COMPUTE
        for mode in PRECISIONS
    }
    calibration = Calibration(
        eff_compute=dict(eff_compute),
        eff_mem=eff_mem,
        default_eff_compute=default_c,
        default_eff_mem=_geomean(list(eff_mem.values())) or _PRIOR_EFF_MEM,
        intensity_flop_per_byte=intensity,
        gpu_speed=dict(gpu_speed),
        meta={
            "pairs": fit.pairs,
            "fit_rms_pct_error": round(fit.rms, 4),
            "workloads": sorted({w for w, _ in fit.keys["I"]}),
        },
    )
    if choose_discount:
        calibration = dataclasses.replace(
            calibration,
            cross_gpu_discount=choose_cross_gpu_discount(measurements, gpus, classes),
        )
    return calibration


@dataclass(frozen=True)
class _Fit:
    x: Any
    keys: dict[str, list[Any]]
    offsets: dict[str, int]
    pairs: int
    rms: float

    def values(self, block: str) -> dict[Any, float]:
        start = self.offsets[block]
        return {k: float(self.x[start + i]) for i, k in enumerate(self.keys[block])}


def _fit(
    groups: Mapping[tuple[str, str, str], Mapping[str, float]], gpus: Mapping[str, GpuSpec]
) -> _Fit:
    import numpy as np
    from scipy.optimize import least_squares

    def arch_mode(g: str, p: str) -> tuple[str, str]:
        return gpus[g].architecture, math_mode(gpus[g], p)

    keys: dict[str, list[Any]] = {
        "c": sorted({arch_mode(g, p) for (_, _, p), by in groups.items() for g in by}),
        "m": sorted({gpus[g].architecture for by in groups.values() for g in by}),
        "I": sorted({(w, p) for (_, w, p) in groups}),
        "d": sorted({(g, math_mode(gpus[g], p)) for (_, _, p), by in groups.items() for g in by}),
    }
    priors = {
        "c": math.log(_PRIOR_EFF_COMPUTE),
        "m": math.log(_PRIOR_EFF_MEM),
        "I": math.log(_PRIOR_INTENSITY),
        "d": 0.0,
    }
    offsets, n = {}, 0
    for block, block_keys in keys.items():
        offsets[block] = n
        n += len(block_keys)
    index = {b: {k: offsets[b] + i for i, k in enumerate(ks)} for b, ks in keys.items()}
    prior = np.concatenate([np.full(len(keys[b]), priors[b]) for b in keys])
    # Efficiencies cannot exceed the datasheet; a lone GPU of an architecture would
    # otherwise soak up host overheads as "bandwidth efficiency" far above 1.
    upper = np.concatenate([np.full(len(keys[b]), 0.0 if b in "cm" else np.inf) for b in keys])
    rows: list[tuple[float, ...]] = []
    by_workload: dict[tuple[str, str], list[int]] = defaultdict(list)
    for (_, w, p), by_gpu in groups.items():
        for g, value in by_gpu.items():
            spec = gpus[g]
            by_workload[(w, p)].append(len(rows))
            rows.append(
                (
                    index["I"][(w, p)],
                    index["c"][arch_mode(g, p)],
                    peak_tflops(spec, p),
                    index["m"][spec.architecture],
                    (spec.mem_bw_gb_s or 0.0) / 1000.0,
                    index["d"][(g, math_mode(spec, p))],
                    math.log(value),
                )
            )
    table = np.array(rows, dtype=float)
    idx = table[:, [0, 1, 3, 5]].astype(int)
    pairs = np.array([ab for rs in by_workload.values() for ab in combinations(rs, 2)])

    def residuals(x: Any) -> Any:
        # log seconds per sample, in units where FLOP/s are TFLOP/s and bytes/s TB/s
        log_t = (
            np.log(
                np.exp(x[idx[:, 0]]) / (table[:, 2] * np.exp(x[idx[:, 1]]))
                + 1 / (table[:, 4] * np.exp(x[idx[:, 2]]))
            )
            + x[idx[:, 3]]
        )
        log_obs = table[:, 6]
        # log(predicted / observed) of s_b / s_a for each pair (a, b)
        d = (log_t[pairs[:, 0]] - log_t[pairs[:, 1]]) - (
            log_obs[pairs[:, 1]] - log_obs[pairs[:, 0]]
        )
        return np.concatenate([np.expm1(d), np.expm1(-d), _PRIOR_WEIGHT * (x - prior)])

    start = np.minimum(prior, upper - 1e-6)
    result = least_squares(residuals, start, bounds=(np.full(n, -np.inf), upper))
    fit_part = residuals(result.x)[: 2 * len(pairs)]
    return _Fit(
        x=result.x,
        keys=keys,
        offsets=offsets,
        pairs=len(pairs),
        rms=float(np.sqrt(np.mean(fit_part**2))),
    )


_DISCOUNT_GRID = tuple(round(0.01 * k, 2) for k in range(17))  # log discounts 0 .. 0.16


def leave_one_workload_out(
    measurements: Sequence[Measurement],
    gpus: Mapping[str, GpuSpec],
    classes: Mapping[str, str] = WORKLOAD_CLASSES,
    *,
    use_class: bool = False,
    choose_discount: bool = False,
) -> list[tuple[str, str, str, str, float]]:
    """Predicts every GPU pair of each workload from a fit without that workload.

    Returns:
        ``(workload, precision, from_gpu, to_gpu, predicted / observed)`` per prediction.
    """
    from tuner.cost._predict import predict_throughput

    groups = group(measurements, gpus)
    out = []
    for held in sorted({w for _, w, _ in groups}):
        cal = fit_calibration(
            [m for m in measurements if m.workload != held],
            gpus,
            classes,
            choose_discount=choose_discount,
        )
        cls = classes.get(held, "default") if use_class else "default"
        cls = cls if cls in cal.intensity_flop_per_byte else "default"
        for (_, w, precision), by_gpu in sorted(groups.items()):
            if w != held:
                continue
            for src, sps in by_gpu.items():
                for dst, observed in by_gpu.items():
                    if src != dst:
                        pred = predict_throughput(
                            sps, src, dst, precision, workload_class=cls, gpus=gpus,
                            calibration=cal,
                        ).samples_per_s  # fmt: skip
                        out.append((w, precision, src, dst, pred / observed))
    return out


def choose_cross_gpu_discount(
    measurements: Sequence[Measurement],
    gpus: Mapping[str, GpuSpec],
    classes: Mapping[str, str] = WORKLOAD_CLASSES,
) -> float:
    """The discount minimising the p90 percentage error of a leave-one-workload-out."""
    ratios = [r for *_, r in leave_one_workload_out(measurements, gpus, classes)]

    def p90(log_discount: float) -> float:
        errors = sorted(abs(r * math.exp(-log_discount) - 1) for r in ratios)
        return errors[min(len(errors) - 1, int(0.9 * len(errors)))]

    return round(math.exp(-min(_DISCOUNT_GRID, key=lambda c: (p90(c), c))), 4)


def _geomean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return round(math.exp(sum(math.log(v) for v in values) / len(values)), 4)


def regenerate_calibration(path: str | Path | None = None) -> Calibration:
    """Fits on the shipped measurements and writes calibration.json (default: shipped)."""
    calibration = fit_calibration(load_measurements(), load_gpus())
    data = calibration.to_dict()
    data["meta"] = {
        "fitted_on": "tuner/data/throughput_measurements.csv (Lambda Labs "
        "PyTorch benchmark, NGC 22.09); regenerate with bench/predict_error.py "
        "--write",
        **data["meta"],
    }
    file = Path(path) if path is not None else _data_path("calibration.json")
    file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return Calibration.from_dict(data)
