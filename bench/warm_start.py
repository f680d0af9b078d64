"""Warm starts: epochs a warm campaign needs to reach what the cold one found, paired seeds.

For each task and seed, three tuner campaigns on one local Ray (two trials at a time):

- ``source``: a related but different campaign (never the target task itself: replaying
  the same task's best would prove nothing);
- ``cold``: the target campaign from nothing (TPE seed ``s``);
- ``warm``: the same target campaign, same seed, with ``warm_start: {from: <source run>,
  top: 3}`` (the source's trials seed TPE, its 3 best are tried first).

Tasks:

- ``hpolib``: HPOLib FCNet (Klein & Hutter 2019, offline tables, see bench/hpolib_task.py);
  source: 50 evaluations on ``parkinsons_telemonitoring``; target: 50 on
  ``naval_propulsion`` (another dataset; the 4 datasets' values rank configurations alike,
  Spearman 0.84-0.86 with naval over 300 random configurations). One epoch = one lookup.
- ``digits``: the built-in digits campaign (search_spaces/default.yaml, val_acc, ASHA, 108
  trial-epochs as in tuning_efficiency.py); source: the same campaign with max_epochs 3
  (another fidelity: its trials never reach the target's 9 epochs, so all seed as PRUNED)
  and 16 trials.

Arms (``--arms``): ``warm`` is tuner's warm start; ``warm_startup`` the same with TPE's
random start-up phase kept for the campaign's own trials (Optuna counts the seeds toward
it, so ``warm`` skips it), to see whether skipping it is what costs the end result.

Figure per task: ``cold_best`` = the best value the cold campaign reached within its
budget; ``epochs to cold's best`` = trial-epochs (in the order they ended) each campaign
needed to reach it (the cold one's own, and the warm one's, which is budget + 1 when it
never did); per seed the ratio warm/cold; the median over seeds with a 95 % bootstrap
interval (tuning_efficiency.median_interval). Below 1: the warm start got there sooner.
Also in how many seeds the warm campaign ended better (strictly better final best) or
tied, and in how many it was better after a quarter of the budget.

    .venv/bin/python bench/warm_start.py [--tasks hpolib,digits] [--seeds 10] [--continue]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")]
)

import tuning_efficiency as te  # noqa: E402

TOP = 3


def _specs(task: str, seed: int) -> tuple[Any, Any, int]:
    """(source spec, target spec, target budget in trial-epochs) of ``task`` for ``seed``."""
    tasks = te.tasks()
    if task == "hpolib":
        target = te._campaign(tasks["hpolib"], seed, sampler="tpe", scheduler="fifo", trials=50)
        from tuner.spec import parse_campaign

        data = target.to_dict()
        data["name"] = f"{target.name}-source"
        data["fixed"]["dataset"] = "parkinsons_telemonitoring"
        # The source's own seed differs from the target's: a different run, not a replay.
        data["sampler"]["seed"] = seed + 1000
        return parse_campaign(data, "hpolib-source.yaml"), target, 50
    if task == "digits":
        digits = tasks["digits"]
        target = te._campaign(digits, seed, sampler="tpe", scheduler="asha", trials=48)
        source = target.with_overrides(trials=16, max_epochs=3, seed=seed + 1000)
        source = dataclasses.replace(source, name=f"{target.name}-source")
        return source, target, digits.budget_epochs
    raise SystemExit(f"unknown task {task!r} (hpolib, digits)")


def _run(spec: Any, run_dir: Path) -> list[float]:
    from tuner._ray.cluster import RayOptions
    from tuner._ray.driver import run_campaign

    with open(os.devnull, "w") as quiet:
        run_campaign(spec, run_dir, RayOptions(num_cpus=2), stream=quiet)
    return [v for _, v in te._reports_from(run_dir, spec.metric)]


def _keep_startup(spec: Any) -> Any:
    """``spec`` whose TPE still samples its own start-up trials at random: Optuna counts the
    seeds among the trials its start-up phase waits for, so the phase is lengthened by them."""
    from tuner.space import DEFAULT_STARTUP_TRIALS
    from tuner.warm_start import plan_warm_start

    plan = plan_warm_start(spec)
    startup = spec.sampler.startup_trials
    startup = DEFAULT_STARTUP_TRIALS if startup is None else startup
    sampler = dataclasses.replace(spec.sampler, startup_trials=startup + len(plan.seeds))
    return dataclasses.replace(spec, sampler=sampler)


def run_seed(task: str, seed: int, arms: list[str]) -> dict[str, Any]:
    """The campaigns of one seed (source, cold, each warm arm); their values in the order
    their epochs ended. Arms: ``warm`` (as tuner does it), ``warm_startup`` (the same, but
    TPE's random start-up phase is kept for the campaign's own trials)."""
    from tuner.spec import WarmStart

    source, target, budget = _specs(task, seed)
    row: dict[str, Any] = {
        "task": task,
        "seed": seed,
        "budget": budget,
        "maximize": target.mode.value == "max",
    }
    with tempfile.TemporaryDirectory(prefix="warmstart-") as tmp:
        runs = Path(tmp) / "runs"
        _run(source, runs / "source")
        row["cold"] = _run(target, runs / "cold")
        warm_spec = dataclasses.replace(
            target, warm_start=WarmStart(run=str(runs / "source"), top=TOP)
        )
        for arm in arms:
            spec = _keep_startup(warm_spec) if arm == "warm_startup" else warm_spec
            row[arm] = _run(spec, runs / arm)
            summary = json.loads((runs / arm / "summary.json").read_text())
            row.setdefault("warm_start", summary.get("warm_start"))
    return row


def figures(rows: list[dict[str, Any]], arm: str = "warm") -> dict[str, Any]:
    """Per seed epochs to the cold campaign's best, and the median ratio with an interval."""
    ratios, cold_epochs, warm_epochs, better, tied, early = [], [], [], 0, 0, 0
    for row in rows:
        budget, maximize = row["budget"], row["maximize"]
        cold = te.anytime(row["cold"], budget, maximize)
        warm = te.anytime(row[arm], budget, maximize)
        target = cold[-1]
        c = te.epochs_to(cold, target, maximize)
        w = te.epochs_to(warm, target, maximize) or budget + 1
        assert c is not None
        cold_epochs.append(c)
        warm_epochs.append(w)
        ratios.append(w / c)
        quarter = budget // 4 - 1
        if (warm[quarter] > cold[quarter]) if maximize else (warm[quarter] < cold[quarter]):
            early += 1
        if (warm[-1] > cold[-1]) if maximize else (warm[-1] < cold[-1]):
            better += 1
        elif warm[-1] == cold[-1]:
            tied += 1
    low, high = te.median_interval(ratios)
    return {
        "seeds": len(rows),
        "median_ratio": statistics.median(ratios),
        "interval": [low, high],
        "median_cold_epochs": statistics.median(cold_epochs),
        "median_warm_epochs": statistics.median(warm_epochs),
        "warm_better": better,
        "tied": tied,
        "warm_better_at_quarter": early,
        "ratios": ratios,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="hpolib,digits")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "warm_start")
    parser.add_argument("--arms", default="warm", help="warm, warm_startup (comma-separated)")
    parser.add_argument("--continue", dest="resume", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "runs.jsonl"
    done: list[dict[str, Any]] = []
    if args.resume and log.exists():
        done = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    elif log.exists():
        log.unlink()
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for task in args.tasks.split(","):
            for seed in range(args.seeds):
                if any(r["task"] == task and r["seed"] == seed for r in done):  # --continue
                    continue
                row = run_seed(task, seed, args.arms.split(","))
                done.append(row)
                with log.open("a") as out:
                    out.write(json.dumps(row) + "\n")
                fig = figures([r for r in done if r["task"] == task])
                cold_best = te.anytime(row["cold"], row["budget"], row["maximize"])[-1]
                print(
                    f"{task} seed {seed}: cold best {cold_best:.4g}; "
                    f"running median warm/cold {fig['median_ratio']:.2f}",
                    flush=True,
                )
    finally:
        ray.shutdown()
    results: dict[str, Any] = {}
    print(
        "\n| task | arm | seeds | epochs to cold's best, warm/cold (median, 95% CI) | cold "
        "| warm | warm better/tied at the end | warm better at 1/4 budget |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for task in args.tasks.split(","):
        for arm in args.arms.split(","):
            rows = [r for r in done if r["task"] == task and arm in r]
            if not rows:
                continue
            fig = results[f"{task}/{arm}"] = figures(rows, arm)
            low, high = fig["interval"]
            print(
                f"| {task} | {arm} | {fig['seeds']} | {fig['median_ratio']:.2f} "
                f"[{low:.2f}, {high:.2f}] | {fig['median_cold_epochs']:g} | "
                f"{fig['median_warm_epochs']:g} | {fig['warm_better']}/{fig['tied']} | "
                f"{fig['warm_better_at_quarter']} |"
            )
    (args.out / "figures.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if all(math.isfinite(f["median_ratio"]) for f in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
