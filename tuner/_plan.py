"""What a campaign would do, before it costs anything: ``tuner run --dry-run``.

The plan comes from the validated spec and the cost model alone: no Ray is started, no
folder is created, no file is written. Trials at once are what this machine's CPUs and GPUs
fit (or ``num_cpus`` / ``num_gpus``), capped by ``resources.max_concurrent``; joining a
cluster (``address``) they are decided by the cluster when the campaign starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner import rundir
from tuner.cost import AshaGeometry, Profile
from tuner.cost._reality import predict_cost
from tuner.spec import CampaignSpec, format_duration

__all__ = ["format_plan", "make_plan"]


def _local_gpus() -> int:
    """GPUs NVML sees here (0 without a driver): what an embedded Ray would count."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    finally:
        pynvml.nvmlShutdown()


def _slots(spec: CampaignSpec, cpus: float, gpus: float) -> int:
    """Trials at once on ``cpus`` and ``gpus`` (the arithmetic of the embedded Ray)."""
    res = spec.resources
    if res.max_concurrent is not None:
        return min(res.max_concurrent, spec.budget.trials)
    fits = cpus / res.cpus_per_trial
    if res.gpu > 0:
        fits = min(fits, gpus / res.gpus_per_trial)
    return max(0, min(spec.budget.trials, math.floor(fits + 1e-9)))


def make_plan(
    spec: CampaignSpec,
    *,
    runs_dir: Path,
    profile: Profile | None = None,
    usd_per_gpu_hour: float = 0.0,
    address: str | None = None,
    num_cpus: int | None = None,
    num_gpus: float | None = None,
) -> dict[str, Any]:
    """The plan of ``spec`` (already validated, overrides applied), JSON-able."""
    geometry = AshaGeometry.from_spec(spec)
    joined = address is not None
    cpus = float(num_cpus if num_cpus is not None else os.cpu_count() or 1)
    gpus = float(num_gpus if num_gpus is not None else _local_gpus())
    slots = None if joined else _slots(spec, cpus, gpus)
    scheduler = spec.scheduler
    predicted = predict_cost(
        geometry,
        workers=max(1, slots or 1),
        gpus_per_trial=spec.resources.gpus_per_trial,
        usd_per_gpu_hour=usd_per_gpu_hour,
        profile=profile,
    )
    budget = spec.budget
    return {
        "campaign": spec.name,
        "source": spec.source,
        "run_dir": str(rundir.new_run_dir(runs_dir, spec.name)),
        "trainable": spec.trainable,
        "objective": ", ".join(f"{o.mode.value} {o.metric}" for o in spec.objectives),
        "search": f"{spec.sampler.type.value} + {scheduler.type.value}",
        "trials": budget.trials,
        "max_epochs": budget.max_epochs,
        "rungs": list(geometry.decision_epochs()),
        "per_trial": {
            "workers": spec.resources.workers,
            "cpu": spec.resources.cpus_per_trial,
            "gpu": spec.resources.gpus_per_trial,
        },
        "cluster": address if joined else {"cpus": cpus, "gpus": gpus},
        "slots": slots,
        "budget": {
            "usd": budget.usd,
            "gpu_hours": budget.gpu_hours,
            "deadline_s": budget.deadline_s,
            "time_limit_s": budget.time_limit_s,
        },
        "predicted": predicted,
    }


def format_plan(plan: Mapping[str, Any]) -> str:
    """The plan as ``tuner run --dry-run`` prints it."""
    p = plan["predicted"]
    per = plan["per_trial"]
    lines = [
        f"plan for campaign {plan['campaign']} (dry run: nothing started, nothing written)",
        f"  trainable   {plan['trainable']}; {plan['objective']}; {plan['search']}",
        f"  trials      {plan['trials']} x <= {plan['max_epochs']} epochs"
        + (f"; ASHA rungs at epochs {', '.join(map(str, plan['rungs']))}" if plan["rungs"] else ""),
        f"  per trial   {per['workers']} worker(s) x {per['cpu']:g} CPU, {per['gpu']:g} GPU",
    ]
    cluster = plan["cluster"]
    if isinstance(cluster, str):
        lines.append(f"  at once     decided by the cluster at {cluster} when it starts")
    elif plan["slots"] == 0:
        lines.append(
            f"  at once     0: this machine ({cluster['cpus']:g} CPUs, {cluster['gpus']:g} GPUs) "
            "cannot hold one trial; join a cluster with --address"
        )
    else:
        lines.append(
            f"  at once     {plan['slots']} (this machine: {cluster['cpus']:g} CPUs, "
            f"{cluster['gpus']:g} GPUs)"
        )
    sd = p.get("trial_epochs_sd") or 0.0
    lines.append(f"  work        {p['trial_epochs']:.0f} trial-epochs predicted (sd {sd:.1f})")
    if p.get("profile"):
        lines.append(
            f"  time        {format_duration(p['wall_s'])} wall, {p['trial_s'] / 3600:.2f} "
            f"trial-hours at {p['epoch_s']:.3g} s/epoch ({p['profile']})"
        )
        lines.append(f"  money       {p['gpu_h']:.3g} GPU-hours, ${p['usd']:.2f}")
    else:
        lines.append("  time, money need a profile: --profile P (from `tuner profile`)")
    budget = plan["budget"]
    limits = [
        f"${budget['usd']:g}" if budget["usd"] is not None else "",
        f"{budget['gpu_hours']:g} GPU-hours" if budget["gpu_hours"] is not None else "",
        f"deadline {format_duration(budget['deadline_s'])}" if budget["deadline_s"] else "",
        f"time limit {format_duration(budget['time_limit_s'])}" if budget["time_limit_s"] else "",
    ]
    lines.append(f"  budget      {', '.join(x for x in limits if x) or 'none'}")
    lines.append(f"  run folder  {plan['run_dir']} (not created)")
    return "\n".join(lines)
