"""The headline of a GPU check: the figures worth a glance, drawn from the steps' results.

Pure: reads the outcomes :func:`bench.gpu_check.run_steps` returns; a step that did not
run (or ran only in part) leaves its entries out rather than failing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["headline", "rounded"]


def rounded(value: Any, digits: int = 4) -> Any:
    """A finite float to ``digits`` significant digits; anything else as it is."""
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return round(value, digits - 1 - math.floor(math.log10(abs(value))))
    return value


def _pick(source: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, Any]:
    """``{new: source[old]}`` for the keys present, rounded."""
    return {new: rounded(source[old]) for new, old in keys.items() if old in source}


def headline(outcomes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Status of each step, then the GPU, the tests, training, profiles, MFU and NCCL."""
    out: dict[str, Any] = {"status": ", ".join(f"{n} {o['status']}" for n, o in outcomes.items())}
    results = {name: o.get("result") or {} for name, o in outcomes.items()}
    env = results.get("env", {})
    if env:
        out["gpu"] = env.get("gpu_name", f"none ({env.get('device', '?')})")
        out["catalog_gpu"] = env.get("catalog_gpu")
        if "matmul" in env:
            out["matmul_tflops"] = rounded(env["matmul"].get("tflops"))
    counts = results.get("tests", {}).get("counts")
    if counts:
        out["tests"] = ", ".join(f"{n} {k}" for k, n in counts.items())
    for key, run in results.get("train", {}).items():
        out[f"train.{key}"] = _pick(
            run,
            {
                "samples_per_s": "samples_per_s",
                "gpu_util_pct": "gpu_util_pct",
                "gpu_power_w": "gpu_power_w",
                "gpu_energy_wh": "gpu_energy_wh",
            },
        )
    for name, entry in results.get("profile", {}).items():
        figures: dict[str, Any] = {}
        for what in ("epoch_s", "mem_gib"):
            compared = entry.get(what) or {}
            figures.update(
                _pick(
                    compared,
                    {f"measured_{what}": "measured", f"predicted_{what}": "predicted"},
                )
            )
            if compared.get("error_pct") is not None:
                figures[f"{what}_error_pct"] = rounded(compared["error_pct"], 3)
        out[f"profile.{name}"] = figures
    for name, entry in results.get("mfu", {}).items():
        if isinstance(entry, Mapping):
            out[f"mfu.{name}"] = _pick(entry, {"achieved_tflops": "achieved_tflops", "mfu": "mfu"})
    nccl = results.get("nccl", {})
    if nccl:
        out["nccl"] = _pick(
            nccl,
            {"backend": "backend", "all_reduce_ms": "all_reduce_ms", "gb_s": "all_reduce_gb_s"},
        )
    return out
