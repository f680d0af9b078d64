"""Orchestration overhead on short trials: useful share of slot time, ours against bare Ray Tune.

Three contenders run the same campaign on an embedded local Ray with 2 CPUs (2 trial slots
of 1 CPU each): 64 trials, ``x`` uniform in [0, 1], TPE (seed 0) and ASHA (grace period 1,
reduction factor 3, at most 9 epochs), metric ``val_acc`` to maximize, every epoch a sleep
of ``epoch_s`` seconds and a report with a checkpoint (bench/sleepy.py's trainable, here
with wall-clock stamps in its reports and a few-byte checkpoint: :func:`train`):

- ``ours``: ``tuner``'s ``run_campaign`` (``RayOptions(num_cpus=2)``);
- ``bare``: ``ray.tune.Tuner`` with Ray's stock ``OptunaSearch`` (seed 0) and
  ``ASHAScheduler(max_t=9, grace_period=1, reduction_factor=3,
  time_attr="training_iteration")``, ``TuneConfig(num_samples=64)``, 1 CPU per trial and
  Ray's defaults otherwise (``reuse_actors=False``, no ``max_concurrent_trials``);
- ``bare+reuse``: the same with ``reuse_actors=True, max_concurrent_trials=2`` (a baseline
  tuned by hand).

Figures, per contender (medians over ``--rounds``; contenders alternate order by round):

- wall time of the tuning phase (first trial start to last trial end, from the trials'
  own stamps) and of the whole call (Ray start to Ray shutdown, everything included);
- slot time = wall x 2 slots; useful = sum over trials of epochs run x ``epoch_s``;
- useful share = useful / slot time; overhead per trial = (slot time - useful) / trials;
- where the phase's overhead goes, per trial: inside trials (between one epoch's end and
  the next one's start: the report round trip), between trials (slot time not covered by
  any trial: turnover, actor start-up, idle slots), and outside the phase (start-up before
  the first trial, the tail after the last, shut-down), as slot-seconds per trial;
- the ratios ours / bare of useful share and of overhead per trial (per round, then the
  median), next to Ray's release-test anchor: 10,000 one-second trials on a 16-CPU node in
  715 s against a 625 s ideal, about 0.14 s of slot time per trial.

``--epoch-s 1`` is the bar; ``--epoch-s 0`` (trivial trials) measures pure overhead, target
<= 0.2 s of slot time per trial for ours; 10 s epochs can be added (``--epoch-s 0,1,10``).
After each ``ours`` run the Optuna study in its run folder is checked: 64 trials, none
RUNNING, each with an intermediate value for every epoch it ran (``study ok``).

    .venv/bin/python bench/overhead.py [--epoch-s 0,1] [--rounds 1]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

TRIALS = 64
MAX_EPOCHS = 9
GRACE_PERIOD = 1
REDUCTION_FACTOR = 3
SLOTS = 2  # num_cpus=2, 1 CPU per trial
SEED = 0
METRIC = "val_acc"
# Ray's release test "tune_scalability_result_throughput"-style anchor: 10,000 trials of
# 1 s on a 16-CPU node in 715 s against a 625 s ideal (10,000 x 1 s / 16 slots).
ANCHOR_TRIALS, ANCHOR_SLOTS, ANCHOR_WALL_S, ANCHOR_IDEAL_S = 10_000, 16, 715.0, 625.0
ANCHOR_S_PER_TRIAL = (ANCHOR_WALL_S - ANCHOR_IDEAL_S) * ANCHOR_SLOTS / ANCHOR_TRIALS
ANCHOR_SHARE = ANCHOR_IDEAL_S / ANCHOR_WALL_S
TRIVIAL_TARGET_S = 0.2  # slot-seconds of overhead per trial for 0-s epochs
SHARE_TARGET = 0.95  # useful share of slot time for 1-s epochs
CONTENDERS = ("ours", "bare", "bare+reuse")


def train(config: dict[str, Any]) -> None:
    """bench/sleepy.py's ``train`` with wall-clock stamps in every report, and a checkpoint
    with each one (a few bytes, as a real trainable saves every epoch; a trial restarted
    from it continues at the next epoch).

    Ray workers import it as ``overhead:train`` (bench/ is on their PYTHONPATH). Each report
    carries the trial's start, the epoch's start and end (before the report), and the
    worker's PID (actor reuse shows as few PIDs).
    """
    from ray import tune

    start = time.time()  # of this run of the function: a restarted trial starts again
    pid = os.getpid()
    x = float(config["x"])
    first = 1
    restored = tune.get_checkpoint()
    if restored is not None:
        with restored.as_directory() as folder:
            first = int(json.loads((Path(folder) / "state.json").read_text())["epoch"]) + 1
    for epoch in range(first, int(config["tuner_max_epochs"]) + 1):
        epoch_start = time.time()
        time.sleep(float(config.get("epoch_s", 1.0)))
        metrics = {
            "epoch": epoch,
            METRIC: x * (1 - 0.5**epoch),
            "bench_start": start,
            "bench_epoch_start": epoch_start,
            "bench_epoch_end": time.time(),
            "bench_pid": pid,
        }
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / "state.json").write_text(json.dumps({"epoch": epoch}))
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))


@dataclass(frozen=True)
class Trial:
    """One trial's reports, as its result.json has them."""

    folder: str
    epochs: int
    start: float
    end: float
    busy_s: float  # in a slot: from each start of the function to its last report
    runs: int  # starts of the function (more than one: paused at a rung and resumed)
    report_gaps_s: float  # sum of (epoch k+1 start - epoch k end) within one run
    pid: int


@dataclass(frozen=True)
class Run:
    """One contender's run: the call's window and the trials' stamps."""

    contender: str
    epoch_s: float
    call_start: float
    call_end: float
    trials: list[Trial]

    @property
    def phase_s(self) -> float:
        return max(t.end for t in self.trials) - min(t.start for t in self.trials)

    @property
    def call_s(self) -> float:
        return self.call_end - self.call_start

    @property
    def useful_s(self) -> float:
        return sum(t.epochs for t in self.trials) * self.epoch_s

    def figures(self) -> dict[str, float]:
        n = len(self.trials)
        phase_slot = self.phase_s * SLOTS
        call_slot = self.call_s * SLOTS
        in_trials = sum(t.busy_s for t in self.trials)
        return {
            "trials": n,
            "epochs": sum(t.epochs for t in self.trials),
            "workers": len({t.pid for t in self.trials}),
            "restarts": sum(t.runs - 1 for t in self.trials),
            "call_s": self.call_s,
            "phase_s": self.phase_s,
            "useful_s": self.useful_s,
            "share_phase": self.useful_s / phase_slot if phase_slot > 0 else 0.0,
            "share_call": self.useful_s / call_slot if call_slot > 0 else 0.0,
            "ovh_phase": (phase_slot - self.useful_s) / n,
            "ovh_call": (call_slot - self.useful_s) / n,
            "inside": (in_trials - self.useful_s) / n,
            "reports": sum(t.report_gaps_s for t in self.trials) / n,
            "between": (phase_slot - in_trials) / n,
            "outside": (call_slot - phase_slot) / n,
        }


def read_trials(folder: Path) -> list[Trial]:
    """Every trial under ``folder`` with at least one stamped report (its result.json)."""
    trials = []
    for path in sorted(folder.rglob("result.json")):
        if any(part.startswith(".") for part in path.relative_to(folder).parts):
            continue  # tuner's kept copies (.snapshot/<slot>/logs, .orphaned), not trials
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if "bench_epoch_end" in r]
        if not rows:
            continue
        rows.sort(key=lambda r: int(r["epoch"]))
        runs: dict[float, list[dict[str, Any]]] = {}
        for row in rows:  # one run of the function per start stamp
            runs.setdefault(float(row["bench_start"]), []).append(row)
        gaps = sum(
            float(b["bench_epoch_start"]) - float(a["bench_epoch_end"])
            for run in runs.values()
            for a, b in itertools.pairwise(run)
        )
        trials.append(
            Trial(
                folder=path.parent.name,
                epochs=len({int(r["epoch"]) for r in rows}),
                start=min(runs),
                end=max(float(r["bench_epoch_end"]) for r in rows),
                busy_s=sum(float(run[-1]["bench_epoch_end"]) - t0 for t0, run in runs.items()),
                runs=len(runs),
                report_gaps_s=gaps,
                pid=int(rows[0]["bench_pid"]),
            )
        )
    return trials


@contextlib.contextmanager
def own_environment() -> Iterator[None]:
    """Restores os.environ afterwards: tuner's settings (snapshot period, output engine...)
    must not leak into the bare Ray Tune runs, which get Ray's defaults."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def campaign_data(epoch_s: float, trials: int) -> dict[str, Any]:
    return {
        "name": "overhead-bench",
        "trainable": "overhead:train",
        "metric": METRIC,
        "mode": "max",
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "budget": {"trials": trials, "max_epochs": MAX_EPOCHS},
        "scheduler": {
            "type": "asha",
            "grace_period": GRACE_PERIOD,
            "reduction_factor": REDUCTION_FACTOR,
        },
        "sampler": {"type": "tpe", "seed": SEED},
        "resources": {"cpu": 1},
        "fixed": {"epoch_s": epoch_s},
    }


def check_study(run_dir: Path, trials: list[Trial], expected: int) -> str | None:
    """None when the study matches the trials (``expected`` of them, none RUNNING, an
    intermediate value for each epoch run, COMPLETE only at max epochs); else what is wrong."""
    from optuna.trial import TrialState

    from tuner.study import open_study

    study = open_study(run_dir)
    found = study.get_trials(deepcopy=False)
    problems = []
    if len(found) != expected:
        problems.append(f"{len(found)} trials, not {expected}")
    running = [t.number for t in found if t.state == TrialState.RUNNING]
    if running:
        problems.append(f"trials {running} RUNNING")
    epochs = {t.folder: t.epochs for t in trials}
    for t in found:
        steps = sorted(t.intermediate_values)
        ran = epochs.get(f"trial_{t.user_attrs.get('tune_trial_id')}")
        if ran is None or steps != list(range(1, ran + 1)):
            problems.append(f"trial {t.number}: intermediate values at {steps}, ran {ran} epochs")
        elif (t.state == TrialState.COMPLETE) != (ran == MAX_EPOCHS):
            problems.append(f"trial {t.number}: {t.state.name} after {ran} epochs")
    return "; ".join(problems[:5]) or None


def run_ours(epoch_s: float, trials: int) -> tuple[Run, str | None]:
    from tuner._ray.cluster import RayOptions
    from tuner._ray.driver import run_campaign
    from tuner.spec import parse_campaign

    spec = parse_campaign(campaign_data(epoch_s, trials), "overhead.yaml")
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp, open(os.devnull, "w") as quiet:
        run_dir = Path(tmp) / "runs" / spec.name
        start = time.time()
        run_campaign(spec, run_dir, RayOptions(num_cpus=SLOTS), stream=quiet)
        end = time.time()
        found = read_trials(run_dir)
        problem = check_study(run_dir, found, trials)
    return Run("ours", epoch_s, start, end, found), problem


def run_bare(epoch_s: float, trials: int, *, tuned: bool) -> Run:
    import overhead
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search.optuna import OptunaSearch

    extra: dict[str, Any] = {"reuse_actors": True, "max_concurrent_trials": SLOTS} if tuned else {}
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        start = time.time()
        ray.init(
            address="local",
            num_cpus=SLOTS,
            include_dashboard=False,
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
        try:
            tuner = tune.Tuner(
                tune.with_resources(overhead.train, {"cpu": 1}),
                param_space={
                    "x": tune.uniform(0.0, 1.0),
                    "tuner_max_epochs": MAX_EPOCHS,
                    "epoch_s": epoch_s,
                },
                tune_config=tune.TuneConfig(
                    metric=METRIC,
                    mode="max",
                    search_alg=OptunaSearch(seed=SEED),
                    scheduler=ASHAScheduler(
                        time_attr="training_iteration",
                        max_t=MAX_EPOCHS,
                        grace_period=GRACE_PERIOD,
                        reduction_factor=REDUCTION_FACTOR,
                    ),
                    num_samples=trials,
                    **extra,
                ),
                # verbose=0: no progress table on the console (ours prints none either).
                run_config=tune.RunConfig(name="bare", storage_path=tmp, verbose=0),
            )
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                tuner.fit()  # Ray's new output engine prints a banner even at verbose=0
        finally:
            ray.shutdown()
        end = time.time()
        found = read_trials(Path(tmp) / "bare")
    return Run("bare+reuse" if tuned else "bare", epoch_s, start, end, found)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def _fmt_ratio(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"


def report(epoch_s: float, trials: int, runs: dict[str, list[Run]]) -> None:
    figs = {name: [r.figures() for r in rs] for name, rs in runs.items()}
    med = {name: {k: _median([f[k] for f in fs]) for k in fs[0]} for name, fs in figs.items()}
    rounds = len(next(iter(figs.values())))
    print(
        f"\nepoch_s = {epoch_s:g} s: {trials} trials x <= {MAX_EPOCHS} epochs, ASHA "
        f"(grace {GRACE_PERIOD}, rf {REDUCTION_FACTOR}), TPE seed {SEED}, {SLOTS} slots"
        + (f"; medians of {rounds} rounds" if rounds > 1 else "")
    )
    print(
        f"{'contender':<11} {'trials':>6} {'epochs':>6} {'workers':>7} {'call s':>7} "
        f"{'phase s':>7} {'useful s':>8} {'share':>6} {'share':>6} "
        f"{'ovh/trial':>9} {'ovh/trial':>9}"
    )
    print(
        f"{'':<11} {'':>6} {'':>6} {'':>7} {'':>7} {'':>7} {'':>8} {'phase':>6} {'call':>6} "
        f"{'phase s':>9} {'call s':>9}"
    )
    for name, m in med.items():
        print(
            f"{name:<11} {m['trials']:>6.0f} {m['epochs']:>6.0f} {m['workers']:>7.0f} "
            f"{m['call_s']:>7.1f} {m['phase_s']:>7.1f} {m['useful_s']:>8.1f} "
            f"{100 * m['share_phase']:>5.1f}% {100 * m['share_call']:>5.1f}% "
            f"{m['ovh_phase']:>9.3f} {m['ovh_call']:>9.3f}"
        )
    print(
        "overhead in slot-seconds per trial: inside trials (of which report round trips) | "
        "between trials | outside the tuning phase (start-up, tail, shut-down)"
    )
    for name, m in med.items():
        print(
            f"  {name:<11} inside {m['inside']:.3f} ({m['reports']:.3f}) | "
            f"between {m['between']:.3f} | outside {m['outside']:.3f}"
            f"  [{m['restarts']:.0f} restarts from a checkpoint]"
        )
    for base in ("bare", "bare+reuse"):
        if base not in figs or "ours" not in figs:
            continue
        pairs = list(zip(figs["ours"], figs[base], strict=True))
        share = _median([_ratio(o["share_phase"], b["share_phase"]) for o, b in pairs])
        share_call = _median([_ratio(o["share_call"], b["share_call"]) for o, b in pairs])
        ovh = _median([_ratio(o["ovh_phase"], b["ovh_phase"]) for o, b in pairs])
        ovh_call = _median([_ratio(o["ovh_call"], b["ovh_call"]) for o, b in pairs])
        print(
            f"ours / {base}: useful share {_fmt_ratio(share)} (call {_fmt_ratio(share_call)}), "
            f"overhead per trial {_fmt_ratio(ovh)} (call {_fmt_ratio(ovh_call)})"
        )
    print(
        f"anchor (Ray release test, constant): {ANCHOR_S_PER_TRIAL:.2f} s of slot time per "
        f"trial ({ANCHOR_TRIALS:,} x 1 s trials, {ANCHOR_SLOTS} CPUs, {ANCHOR_WALL_S:.0f} s "
        f"against {ANCHOR_IDEAL_S:.0f} s ideal: useful share {100 * ANCHOR_SHARE:.1f}%)"
    )
    if epoch_s == 1 and "ours" in med:
        share = med["ours"]["share_phase"]
        verdict = "met" if share >= SHARE_TARGET else "NOT met"
        print(
            f"1 s epochs: ours {100 * share:.1f}% of slot time in training over the tuning "
            f"phase (target >= {100 * SHARE_TARGET:.0f}%: {verdict}; whole call, Ray's start "
            f"and shut-down included, {100 * med['ours']['share_call']:.1f}%)"
        )
    if epoch_s == 0 and "ours" in med:
        ovh = med["ours"]["ovh_phase"]
        verdict = "met" if ovh <= TRIVIAL_TARGET_S else "NOT met"
        print(
            f"trivial trials: ours {ovh:.3f} s of slot time per trial in the tuning phase "
            f"(target <= {TRIVIAL_TARGET_S} s: {verdict}; whole call "
            f"{med['ours']['ovh_call']:.3f} s)"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--epoch-s", default="0,1", help="comma-separated epoch lengths in seconds (e.g. 0,1,10)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="repeats; medians are reported")
    parser.add_argument("--trials", type=int, default=TRIALS, help="trials per campaign")
    parser.add_argument(
        "--contenders", default=",".join(CONTENDERS), help="subset of " + ",".join(CONTENDERS)
    )
    args = parser.parse_args()
    epoch_lengths = [float(v) for v in args.epoch_s.split(",") if v.strip()]
    names = [c for c in args.contenders.split(",") if c]
    unknown = set(names) - set(CONTENDERS)
    if unknown:
        parser.error(f"unknown contenders: {sorted(unknown)}")

    # The driver imports tuner and this module; Ray workers import overhead:train by path.
    for folder in (str(BENCH), str(ROOT)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(BENCH), str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    os.environ.pop("RAY_ADDRESS", None)  # an embedded local Ray, always
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")

    trials = args.trials
    runners: dict[str, Callable[[float], Run]] = {
        "bare": lambda e: run_bare(e, trials, tuned=False),
        "bare+reuse": lambda e: run_bare(e, trials, tuned=True),
    }
    started = time.time()
    failed = False
    for epoch_s in epoch_lengths:
        runs: dict[str, list[Run]] = {name: [] for name in names}
        for round_ in range(args.rounds):
            order = names[round_ % len(names) :] + names[: round_ % len(names)]
            for name in order:
                with own_environment():
                    if name == "ours":
                        run, problem = run_ours(epoch_s, trials)
                        if problem is None:
                            print(f"[epoch_s={epoch_s:g} round {round_ + 1}] ours: study ok")
                        else:
                            failed = True
                            print(
                                f"[epoch_s={epoch_s:g} round {round_ + 1}] ours: "
                                f"study NOT ok: {problem}"
                            )
                    else:
                        run = runners[name](epoch_s)
                if len(run.trials) != trials:
                    failed = True
                    print(f"  {name}: {len(run.trials)} trials reported, not {trials}")
                print(
                    f"[epoch_s={epoch_s:g} round {round_ + 1}] {name}: call {run.call_s:.1f} s, "
                    f"phase {run.phase_s:.1f} s",
                    flush=True,
                )
                runs[name].append(run)
        report(epoch_s, trials, runs)
    print(f"\nbench wall time {time.time() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
