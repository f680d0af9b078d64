"""The training steps of bench/gpu_check.py: train, profile and mfu (see bench/gpu_steps.py).

Every built-in trainable runs through a :class:`~trainables._session.LocalSession`: no Ray,
no Optuna.
"""

from __future__ import annotations

import importlib
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.gpu_profile import campaign_for, compare, measure_profile, profile_config
from bench.gpu_steps import StepContext, target_gpu

__all__ = ["GPT_MINI", "MODES", "mfu", "mfu_step", "profile", "telemetry_summary", "train"]

# The math each built-in trains in for the train step: the loop's config keys.
MODES: dict[str, dict[str, Any]] = {
    "bf16": {"amp": True, "amp_dtype": "bf16", "tf32": True},
    "fp16": {"amp": True, "amp_dtype": "fp16", "tf32": True},
    "tf32": {"amp": False, "tf32": True},
}
# A GPT-2-like character model large enough to keep an H100 busy (about 25 M parameters).
GPT_MINI: dict[str, Any] = {
    "n_layer": 8,
    "n_head": 8,
    "n_embd": 512,
    "block_size": 256,
    "batch_size": 64,
    "dropout": 0.0,
    "optimizer": "adamw",
    "lr": 3e-4,
}


def _train_fn(name: str) -> Callable[[dict[str, Any], Any], None]:
    from trainables import BUILTINS

    module, _, attr = BUILTINS[name].partition(":")
    fn: Callable[[dict[str, Any], Any], None] = getattr(importlib.import_module(module), attr)
    return fn


def telemetry_summary(metrics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A trial's NVML telemetry over its epochs' reports (see trainables/_telemetry.py).

    ``telemetry`` is the epochs' distinct states (``nvml`` or ``unavailable: ...``); the
    figures average the epochs that have them (energy: their sum; memory: the peak), and
    are None where no epoch had a reading.
    """

    def values(key: str) -> list[float]:
        return [float(m[key]) for m in metrics if isinstance(m.get(key), int | float)]

    util, power = values("gpu_util_pct"), values("gpu_power_w")
    energy, mem = values("gpu_energy_wh"), values("gpu_mem_used_gib")
    return {
        "telemetry": sorted({str(m.get("telemetry")) for m in metrics}),
        "gpu_util_pct": statistics.fmean(util) if util else None,
        "gpu_power_w": statistics.fmean(power) if power else None,
        "gpu_energy_wh": sum(energy) if energy else None,
        "gpu_mem_used_gib": max(mem) if mem else None,
    }


def _finite(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


def train(ctx: StepContext) -> None:
    """Each built-in for a few epochs in bf16 and fp16 AMP and in TF32, with NVML telemetry."""
    from trainables import BUILTINS
    from trainables._session import LocalSession

    epochs = 2 if ctx.quick else 3
    for name in BUILTINS:
        fn = _train_fn(name)
        extra = {"steps_per_epoch": 5} if name == "charlm" and ctx.quick else {}
        for mode, knobs in MODES.items():
            key = f"{name}/{mode}"
            config = {"tuner_max_epochs": epochs, "tuner_device": ctx.device, **extra, **knobs}
            session = LocalSession(ctx.workdir / name / mode, use_gpus=ctx.cuda, cpus=ctx.cpus)
            started = time.perf_counter()
            fn(config, session)
            ms, last = session.metrics, session.metrics[-1]
            peaks = [m["peak_mem_gib"] for m in ms if "peak_mem_gib" in m]
            ctx.result[key] = {
                "epochs": len(ms),
                "wall_s": time.perf_counter() - started,
                "train_loss": [m["train_loss"] for m in ms],
                "val_loss": [m["val_loss"] for m in ms],
                "val_acc": last["val_acc"],
                "samples_per_s": last["samples_per_s"],
                "achieved_tflops": last["achieved_tflops"],
                "precision": last["precision"],
                "peak_mem_gib": max(peaks) if peaks else None,
                **telemetry_summary(ms),
            }
            losses = [m["train_loss"] for m in ms] + [m["val_loss"] for m in ms]
            ctx.check(f"{key}: losses finite", len(ms) == epochs and _finite(losses))
            ctx.check(f"{key}: train loss fell", ms[-1]["train_loss"] < ms[0]["train_loss"])
            if ctx.cuda:
                want = "tf32" if mode == "tf32" else "amp"
                ctx.check(f"{key}: trained in {want}", last["precision"] == want)
                ctx.check(f"{key}: NVML telemetry", ctx.result[key]["telemetry"] == ["nvml"])


def profile(ctx: StepContext) -> None:
    """Each built-in profiled as ``tuner profile`` does, and the cost model against it.

    On CUDA: the GPU profile (3 trials x 3 epochs) is the measurement; a CPU profile of the
    same configuration (1 trial x 2 epochs, the campaign's CPUs) is what the cost model
    predicts the GPU's epoch from (its "absolute" path), as ``tuner recommend`` does with a
    profile measured on a laptop; the GPU profile's predictions for other GPUs are listed
    for a later run on those. On a CPU (the dry run) one CPU profile plays both parts, so
    the error is not a figure of anything.
    """
    from trainables import BUILTINS
    from tuner.cost._transfer import estimate_epoch

    gpu, _ = target_gpu(ctx)
    trials, epochs = (1, 2) if ctx.quick else (3, 3)
    for name in BUILTINS:
        spec = campaign_for(name, ctx.repo / "search_spaces")
        config = profile_config(spec, epochs)
        if name == "charlm" and ctx.quick:
            config["steps_per_epoch"] = 5
        cpus = int(spec.resources.cpus_per_trial) or None
        measured = measure_profile(
            _train_fn(name),
            config,
            campaign=spec.name,
            trainable=name,
            trials=trials,
            device=ctx.device,
            cpus=cpus,
            root=ctx.workdir / name / ctx.device,
        )
        from_cpu = measured
        if ctx.cuda:
            from_cpu = measure_profile(
                _train_fn(name),
                {**config, "tuner_max_epochs": 2},
                campaign=spec.name,
                trainable=name,
                trials=1,
                device="cpu",
                cpus=cpus,
                root=ctx.workdir / name / "cpu",
            )
        entry: dict[str, Any] = {"campaign": spec.name, "config": config}
        entry["measured"] = {**measured.summary(), "device": measured.device}
        entry["measured"].update(gpu_name=measured.gpu_name, precision=measured.precision)
        entry["cpu_profile"] = from_cpu.summary()
        if gpu is not None:
            precision = measured.precision if ctx.cuda else "amp"
            est = estimate_epoch(from_cpu, gpu.name, precision=precision)
            entry["predicted_from_cpu"] = {"gpu": est.gpu, "precision": est.precision}
            entry["epoch_s"] = compare(est.epoch_s, measured.epoch_s)
            entry["mem_gib"] = compare(est.mem_gib, measured.mem_gib)
            ctx.check(f"{name}: predicted from the CPU", entry["epoch_s"]["ratio"] is not None)
        if ctx.cuda and gpu is not None:
            entry["predicted_from_this_gpu"] = {
                other: estimate_epoch(measured, other).epoch_s
                for other in ("A100-SXM4-80GB", "H100-SXM5", "H200-SXM")
                if other != gpu.name
            }
        entry["profiles"] = {"measured": measured.to_dict(), "cpu": from_cpu.to_dict()}
        ctx.result[name] = entry
        ctx.check(f"{name}: profiled", len(measured.trials) == trials)


def mfu(achieved_tflops: float, peak_tflops: float | None) -> float | None:
    """Model FLOPs utilisation: achieved over peak TFLOP/s (None without a peak)."""
    if peak_tflops is None or not peak_tflops > 0:
        return None
    return achieved_tflops / peak_tflops


def mfu_step(ctx: StepContext) -> None:
    """The character transformer's MFU in bf16 AMP: the campaign's model and a larger one.

    Achieved TFLOP/s is the loop's own figure (matmul FLOPs per sample from
    ``FlopCounterMode`` times samples/s), the median over epochs 2..N; the peak is the
    catalog's dense bf16 figure of this GPU.
    """
    from tuner.cost import peak_tflops

    gpu, _ = target_gpu(ctx)
    peak = peak_tflops(gpu, "amp") if ctx.cuda and gpu is not None else None
    ctx.result["peak_bf16_tflops"] = peak
    epochs = 2 if ctx.quick else 3
    fixed = dict(campaign_for("charlm", ctx.repo / "search_spaces").fixed)
    configs = {"charlm": fixed}
    if ctx.cuda:
        configs["gpt_mini"] = {**GPT_MINI, "steps_per_epoch": 10 if ctx.quick else 30}
    elif ctx.quick:
        configs["charlm"] = {**fixed, "steps_per_epoch": 5}
    from trainables import charlm
    from trainables._session import LocalSession

    for name, model in configs.items():
        config = {"tuner_max_epochs": epochs, "tuner_checkpoint_every": epochs, **model}
        config.update({"tuner_device": ctx.device, "amp": True, "amp_dtype": "bf16"})
        session = LocalSession(ctx.workdir / name, use_gpus=ctx.cuda, cpus=ctx.cpus)
        charlm.train(config, session)
        steady = session.metrics[1:] or session.metrics
        achieved = statistics.median(m["achieved_tflops"] for m in steady)
        last = session.metrics[-1]
        ctx.result[name] = {
            "config": model,
            "param_count": last["param_count"],
            "flops_per_sample": last["flops_per_sample"],
            "tokens_per_s": statistics.median(m["samples_per_s"] for m in steady)
            * int(model.get("block_size", 64)),
            "achieved_tflops": achieved,
            "mfu": mfu(achieved, peak),
            "peak_mem_gib": last.get("peak_mem_gib"),
        }
        ok = achieved > 0 and (not ctx.cuda or 0 < (ctx.result[name]["mfu"] or 0) <= 1)
        ctx.check(f"{name}: MFU measured", ok)
