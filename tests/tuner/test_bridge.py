"""Ray's stock OptunaSearch and ours, told the same trial events side by side.

Both are the real classes (Ray 2.x OptunaSearch and our subclass) over real in-memory Optuna
studies, driven through Tune's searcher protocol: suggest -> on_trial_result per epoch ->
on_trial_complete. Stock tells Optuna COMPLETE for a trial ASHA stopped after one epoch with
that one-epoch value; ours tells PRUNED and keeps the per-epoch values keyed by epoch.
"""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from ray.tune.search.optuna import OptunaSearch

from tuner._bridge import ORPHAN_REASON, FidelityOptunaSearch

MAX_EPOCHS = 4
SPACE = {"lr": FloatDistribution(1e-4, 1e-1, log=True)}

# (trial id, per-epoch val_loss, errored): t0/t1 stopped by ASHA after 1 epoch,
# t2 trained all 4 epochs, t3 raised in epoch 2.
EVENTS: list[tuple[str, list[float], bool]] = [
    ("t0", [0.9], False),
    ("t1", [0.5], False),
    ("t2", [0.8, 0.6, 0.45, 0.4], False),
    ("t3", [0.7], True),
]


def _drive(searcher: Any) -> optuna.Study:
    for trial_id, losses, errored in EVENTS:
        assert searcher.suggest(trial_id) is not None
        last: dict[str, Any] = {}
        for epoch, loss in enumerate(losses, start=1):
            # Tune's iteration counter is deliberately offset, as after a restore.
            last = {"val_loss": loss, "epoch": epoch, "training_iteration": epoch + 10}
            searcher.on_trial_result(trial_id, last)
        searcher.on_trial_complete(trial_id, result=None if errored else last, error=errored)
    study: optuna.Study = searcher._ot_study
    return study


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def test_stock_and_ours_side_by_side() -> None:
    stock = _drive(OptunaSearch(space=SPACE, metric="val_loss", mode="min", seed=0))
    ours = _drive(
        FidelityOptunaSearch(
            space=SPACE, metric="val_loss", mode="min", seed=0, max_epochs=MAX_EPOCHS
        )
    )
    stock_states = [t.state for t in stock.trials]
    our_states = [t.state for t in ours.trials]
    # Stock: the one-epoch trials are COMPLETE, and t1's one-epoch 0.5 looks like a final value.
    assert stock_states[:3] == [TrialState.COMPLETE] * 3
    assert stock.trials[1].value == 0.5
    # Stock keys intermediate values by Tune's iteration counter, not by epoch.
    assert set(stock.trials[2].intermediate_values) == {11, 12, 13, 14}
    # Ours: stopped early -> PRUNED; full length -> COMPLETE; error -> FAIL.
    assert our_states == [
        TrialState.PRUNED,
        TrialState.PRUNED,
        TrialState.COMPLETE,
        TrialState.FAIL,
    ]
    assert ours.best_trial.number == 2
    assert ours.best_value == 0.4
    assert ours.trials[2].intermediate_values == {1: 0.8, 2: 0.6, 3: 0.45, 4: 0.4}
    assert ours.trials[0].intermediate_values == {1: 0.9}
    assert ours.trials[0].user_attrs["stop_reason"] == "stopped early at epoch 1 of 4"
    assert ours.trials[0].user_attrs["tune_trial_id"] == "t0"
    assert ours.trials[3].user_attrs["stop_reason"].startswith("error")


def test_restore_marks_orphans_failed_and_never_retells_finished(tmp_path: Any) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    searcher = FidelityOptunaSearch(
        space=SPACE,
        metric="val_loss",
        mode="min",
        seed=0,
        max_epochs=2,
        storage=storage,
        study_name="s",
    )
    searcher.suggest("a")
    searcher.suggest("b")
    snapshot = tmp_path / "searcher.pkl"
    searcher.save(str(snapshot))  # Tune's periodic snapshot
    # After the snapshot: "a" finishes, and a new trial "c" is asked for; then the driver dies.
    searcher.on_trial_result("a", {"val_loss": 0.3, "epoch": 1})
    searcher.on_trial_result("a", {"val_loss": 0.2, "epoch": 2})
    searcher.on_trial_complete("a", {"val_loss": 0.2, "epoch": 2})
    searcher.suggest("c")

    restored = FidelityOptunaSearch(
        space=SPACE,
        metric="val_loss",
        mode="min",
        max_epochs=2,
        storage=storage,
        study_name="s",
    )
    restored.restore(str(snapshot))
    study = optuna.load_study(study_name="s", storage=storage)
    states = {t.user_attrs["tune_trial_id"]: t for t in study.trials}
    assert states["c"].state is TrialState.FAIL
    assert states["c"].user_attrs["stop_reason"] == ORPHAN_REASON
    # Tune re-runs "a" (its snapshot said running); its completion must not be told twice.
    restored.on_trial_result("a", {"val_loss": 0.2, "epoch": 2})
    restored.on_trial_complete("a", {"val_loss": 0.2, "epoch": 2})
    assert states["a"].state is TrialState.COMPLETE
    # "b" continues normally after the restore.
    restored.on_trial_result("b", {"val_loss": 0.5, "epoch": 1})
    restored.on_trial_result("b", {"val_loss": 0.4, "epoch": 2})
    restored.on_trial_complete("b", {"val_loss": 0.4, "epoch": 2})
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.state for t in study.trials] == [
        TrialState.COMPLETE,
        TrialState.COMPLETE,
        TrialState.FAIL,
    ]
    assert not [t for t in study.trials if t.state is TrialState.RUNNING]


def test_trial_stopped_without_a_result_is_judged_by_its_reported_epochs() -> None:
    # After a restore Tune stops a trial that finished just before the crash without running
    # it: on_trial_complete arrives with no result. Its epochs are already in the study.
    searcher = FidelityOptunaSearch(
        space=SPACE, metric="val_loss", mode="min", seed=0, max_epochs=MAX_EPOCHS
    )
    searcher.suggest("x")
    searcher.suggest("y")
    searcher.on_trial_result("x", {"val_loss": 0.7, "epoch": 1})
    searcher.on_trial_result("x", {"val_loss": 0.6, "epoch": 2})
    searcher.on_trial_complete("x")
    searcher.on_trial_complete("y")  # never reported anything
    x, y = searcher._ot_study.trials
    assert x.state is TrialState.PRUNED
    assert x.user_attrs["stop_reason"] == "stopped early at epoch 2 of 4"
    assert y.state is TrialState.FAIL
