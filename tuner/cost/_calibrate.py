"""Fits the prediction efficiencies on measured cross-GPU throughput (scipy, offline only)."""

from __future__ import annotations

import csv
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
    "fit_calibration",
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
) -> Calibration:
    """Least squares on log throughput ratios of GPU pairs measured in the same set.

    Parameters are log eff_compute per (architecture, math mode), log eff_mem per
    architecture and log intensity per (workload, precision); a soft-L1 loss keeps odd
    pairs from dominating, and weak priors fix the overall scale. Class intensities are
    geometric means of their workloads'; "default" is the mean over all workloads.
    """
    import numpy as np
    from scipy.optimize import least_squares

    groups = group(measurements, gpus)
    comp_keys = sorted(
        {
            (gpus[g].architecture, math_mode(gpus[g], p))
            for (_, _, p), by_gpu in groups.items()
            for g in by_gpu
        }
    )
    mem_keys = sorted({gpus[g].architecture for by_gpu in groups.values() for g in by_gpu})
    work_keys = sorted({(w, p) for (_, w, p) in groups})
    n_c, n_m = len(comp_keys), len(mem_keys)
    ci = {k: i for i, k in enumerate(comp_keys)}
    mi = {k: n_c + i for i, k in enumerate(mem_keys)}
    wi = {k: n_c + n_m + i for i, k in enumerate(work_keys)}
    pairs = []  # (workload idx, comp idx a, peak a, mem idx a, bw a, same for b, log obs)
    for (_, workload, precision), by_gpu in groups.items():
        for a, b in combinations(sorted(by_gpu), 2):
            ga, gb = gpus[a], gpus[b]
            pairs.append(
                (
                    wi[(workload, precision)],
                    ci[(ga.architecture, math_mode(ga, precision))],
                    peak_tflops(ga, precision),
                    mi[ga.architecture],
                    (ga.mem_bw_gb_s or 0.0) / 1000.0,
                    ci[(gb.architecture, math_mode(gb, precision))],
                    peak_tflops(gb, precision),
                    mi[gb.architecture],
                    (gb.mem_bw_gb_s or 0.0) / 1000.0,
                    math.log(by_gpu[b] / by_gpu[a]),
                )
            )
    table = np.array(pairs, dtype=float)
    idx = table[:, [0, 1, 3, 5, 7]].astype(int)
    prior = np.concatenate(
        [
            np.full(n_c, math.log(_PRIOR_EFF_COMPUTE)),
            np.full(n_m, math.log(_PRIOR_EFF_MEM)),
            np.full(len(work_keys), math.log(_PRIOR_INTENSITY)),
        ]
    )

    def residuals(x: Any) -> Any:
        intensity = np.exp(x[idx[:, 0]])
        # seconds per byte moved, in units where FLOP/s are TFLOP/s and bytes/s TB/s
        t_a = intensity / (table[:, 2] * np.exp(x[idx[:, 1]])) + 1 / (
            table[:, 4] * np.exp(x[idx[:, 2]])
        )
        t_b = intensity / (table[:, 6] * np.exp(x[idx[:, 3]])) + 1 / (
            table[:, 8] * np.exp(x[idx[:, 4]])
        )
        fit = np.log(t_a / t_b) - table[:, 9]
        return np.concatenate([fit, _PRIOR_WEIGHT * (x - prior)])

    # Efficiencies cannot exceed the datasheet; a lone GPU of an architecture would
    # otherwise soak up host overheads as "bandwidth efficiency" far above 1.
    upper = np.concatenate([np.zeros(n_c + n_m), np.full(len(work_keys), np.inf)])
    start = np.minimum(prior, upper - 1e-6)
    result = least_squares(
        residuals, start, bounds=(np.full(len(prior), -np.inf), upper), loss="soft_l1", f_scale=0.1
    )
    x = result.x
    eff_compute: dict[str, dict[str, float]] = defaultdict(dict)
    for (arch, mode), i in ci.items():
        eff_compute[arch][mode] = round(float(math.exp(x[i])), 4)
    eff_mem = {arch: round(float(math.exp(x[i])), 4) for arch, i in mi.items()}
    per_class: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (workload, precision), i in wi.items():
        per_class[classes.get(workload, "default")][precision].append(float(x[i]))
        per_class["default"][precision].append(float(x[i]))
    intensity = {
        name: {p: round(math.exp(sum(v) / len(v)), 2) for p, v in sorted(by_p.items())}
        for name, by_p in sorted(per_class.items())
    }
    default_c = {
        mode: _geomean([m[mode] for m in eff_compute.values() if mode in m]) or _PRIOR_EFF_COMPUTE
        for mode in PRECISIONS
    }
    fit_rms = float(np.sqrt(np.mean(residuals(x)[: len(pairs)] ** 2)))
    return Calibration(
        eff_compute=dict(eff_compute),
        eff_mem=eff_mem,
        default_eff_compute=default_c,
        default_eff_mem=_geomean(list(eff_mem.values())) or _PRIOR_EFF_MEM,
        intensity_flop_per_byte=intensity,
        meta={
            "pairs": len(pairs),
            "fit_rms_log_ratio": round(fit_rms, 4),
            "workloads": sorted({w for w, _ in work_keys}),
        },
    )


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
