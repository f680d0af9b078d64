"""Ray's stock OptunaSearch and ours, told the same trial events side by side.

Both are the real classes (Ray 2.x OptunaSearch and our subclass) over real in-memory Optuna
studies, driven through Tune's searcher protocol: suggest -> on_trial_result per epoch ->
on_trial_complete. Stock tells Optuna COMPLETE for a trial ASHA stopped after one epoch with
that one-epoch value; ours tells PRUNED and keeps the per-epoch values keyed by epoch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from ray.tune.search.optuna import OptunaSearch

from tuner._ray.searcher import FidelityOptunaSearch
from tuner.study import ORPHAN_REASON, SEED_ATTR
from tuner.warm_start import FIRST_ATTR

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


def _ours(storage: Any, **kwargs: Any) -> FidelityOptunaSearch:
    return FidelityOptunaSearch(
        space=SPACE,
        metric="val_loss",
        mode="min",
        max_epochs=2,
        storage=storage,
        study_name="s",
        **kwargs,
    )


def test_restore_marks_orphans_failed_and_never_retells_finished(tmp_path: Any) -> None:
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    searcher = _ours(storage, seed=0)
    searcher.suggest("a")
    searcher.suggest("b")
    snapshot = tmp_path / "searcher.pkl"
    searcher.save(str(snapshot))  # Tune's periodic snapshot
    # After the snapshot: "a" finishes, and a new trial "c" is asked for; then the driver dies.
    searcher.on_trial_result("a", {"val_loss": 0.3, "epoch": 1})
    searcher.on_trial_result("a", {"val_loss": 0.2, "epoch": 2})
    searcher.on_trial_complete("a", {"val_loss": 0.2, "epoch": 2})
    searcher.suggest("c")

    restored = _ours(storage)
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


def _experiment_state(folder: Path, trial_ids: list[str]) -> None:
    """Tune's experiment_state file as far as a restore's trial list goes."""
    entries = [[json.dumps({"trial_id": tid}), "{}"] for tid in trial_ids]
    (folder / "experiment_state-2026-01-01_00-00-00.json").write_text(
        json.dumps({"trial_data": entries})
    )


def _finish(searcher: FidelityOptunaSearch, trial_id: str, loss: float) -> None:
    for epoch in (1, 2):
        searcher.on_trial_result(trial_id, {"val_loss": loss, "epoch": epoch})
    searcher.on_trial_complete(trial_id, {"val_loss": loss, "epoch": 2})


def test_restore_tracks_trials_tunes_snapshot_has_but_the_older_pickle_lacks(
    tmp_path: Path,
) -> None:
    # Tune writes experiment_state, then the searcher pickle: a driver killed in between
    # leaves a snapshot that knows trial "c" and a pickle that does not.
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    searcher = _ours(storage, seed=0)
    searcher.suggest("a")
    searcher.suggest("b")
    searcher.save(str(tmp_path / "searcher-state-x.pkl"))
    searcher.suggest("c")
    _experiment_state(tmp_path, ["a", "b", "c"])

    restored = _ours(storage)
    restored.restore(str(tmp_path / "searcher-state-x.pkl"))
    study = optuna.load_study(study_name="s", storage=storage)
    assert [t.state for t in study.trials] == [TrialState.RUNNING] * 3  # no orphan
    # Tune resumes "c": its epochs and completion reach the study.
    _finish(restored, "c", 0.25)
    trial_c = {t.user_attrs["tune_trial_id"]: t for t in study.trials}["c"]
    assert trial_c.state is TrialState.COMPLETE
    assert trial_c.intermediate_values == {1: 0.25, 2: 0.25}


def test_restore_orphans_trials_the_pickle_has_but_tunes_snapshot_lacks(tmp_path: Path) -> None:
    # experiment_state came back from its backup (a crash damaged it): one snapshot older.
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    searcher = _ours(storage, seed=0)
    for tid in ("a", "b"):
        searcher.suggest(tid)
    searcher.save(str(tmp_path / "searcher-state-x.pkl"))
    _experiment_state(tmp_path, ["a"])

    restored = _ours(storage)
    restored.set_max_concurrency(1)
    restored.restore(str(tmp_path / "searcher-state-x.pkl"))
    study = optuna.load_study(study_name="s", storage=storage)
    by_id = {t.user_attrs["tune_trial_id"]: t for t in study.trials}
    assert by_id["b"].state is TrialState.FAIL
    assert by_id["b"].user_attrs["stop_reason"] == ORPHAN_REASON
    # "b" holds no slot: once "a" finishes, the one slot is free for a new trial.
    assert restored.suggest("d") is None
    _finish(restored, "a", 0.3)
    assert restored.suggest("d") is not None


def test_repeated_restores_count_trials_finished_after_a_snapshot_once(tmp_path: Path) -> None:
    # "b" finishes after the snapshot that lists only "a"; the campaign is restored twice,
    # the second time from a pickle the first resumed run wrote. It must still ask for
    # exactly max_trials = 4: a, b (finished, untracked), and two more.
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    searcher = _ours(storage, seed=0, max_trials=4)
    searcher.suggest("a")
    searcher.save(str(tmp_path / "searcher-state-x.pkl"))
    searcher.suggest("b")
    _finish(searcher, "b", 0.4)
    _experiment_state(tmp_path, ["a"])

    first = _ours(storage, max_trials=4)
    first.restore(str(tmp_path / "searcher-state-x.pkl"))
    first.save(str(tmp_path / "searcher-state-x.pkl"))
    second = _ours(storage, max_trials=4)
    second.restore(str(tmp_path / "searcher-state-x.pkl"))
    assert isinstance(second.suggest("c"), dict)
    assert isinstance(second.suggest("d"), dict)
    assert second.suggest("e") == "FINISHED"


def test_concurrency_is_capped_by_the_searcher_itself() -> None:
    searcher = FidelityOptunaSearch(
        space=SPACE, metric="val_loss", mode="min", seed=0, max_epochs=2
    )
    assert searcher.set_max_concurrency(2) is True  # Tune adds no ConcurrencyLimiter
    assert searcher.suggest("a") is not None
    assert searcher.suggest("b") is not None
    assert searcher.suggest("c") is None
    _finish(searcher, "a", 0.5)
    assert searcher.suggest("c") is not None


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


def test_the_campaign_stays_out_of_tunes_pickles_and_a_restore_keeps_this_drivers(
    tmp_path: Path,
) -> None:
    # Tune pickles the searcher into tuner.pkl and its state into searcher-state-*.pkl; the
    # campaign (a guard with a thread and a lock, the terminal) is in neither, and the
    # searcher a resume builds keeps the new driver's campaign through the restore.
    import pickle

    from tests.conftest import live_campaign
    from tuner._ray.campaign import CampaignCallback
    from tuner._ray.progress import ProgressCallback
    from tuner._ray.scheduler import PersistentASHA

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    first = live_campaign(tmp_path, stop_key="stop:first")
    searcher = _ours(storage, seed=0, campaign=first)
    searcher.suggest("a")
    searcher.save(str(tmp_path / "searcher-state-x.pkl"))
    assert searcher._campaign is first  # saving does not drop it here
    saved = pickle.loads((tmp_path / "searcher-state-x.pkl").read_bytes())
    assert saved["_campaign"] is None
    assert pickle.loads(pickle.dumps(searcher))._campaign is None
    scheduler = PersistentASHA(state_path=None, campaign=first, time_attr="epoch", max_t=2)
    assert pickle.loads(pickle.dumps(scheduler))._campaign is None
    progress = ProgressCallback(
        metric="val_loss", maximize=False, total=4, max_epochs=2, campaign=first
    )
    assert pickle.loads(pickle.dumps(progress))._campaign is None
    assert pickle.loads(pickle.dumps(CampaignCallback(first)))._campaign is None

    second = live_campaign(tmp_path, stop_key="stop:first")
    restored = _ours(storage, campaign=second)
    restored.restore(str(tmp_path / "searcher-state-x.pkl"))
    assert restored._campaign is second


def test_warm_start_seeds_are_not_counted_and_its_queued_best_survive_a_restore(
    tmp_path: Path,
) -> None:
    # A warm start put an earlier campaign's trial in the study (not this campaign's) and
    # queued its two best; the driver dies after the first trial took the first of them.
    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path}/study.db")
    study = optuna.create_study(study_name="s", storage=storage, direction="minimize")
    study.add_trial(
        optuna.trial.create_trial(
            value=0.1,
            params={"lr": 0.01},
            distributions=SPACE,
            user_attrs={SEED_ATTR: "runs/old#0"},
        )
    )
    for rank, lr in enumerate((0.01, 0.002), start=1):
        study.enqueue_trial({"lr": lr}, user_attrs={FIRST_ATTR: rank})
    searcher = _ours(storage, seed=0, max_trials=3)
    assert searcher.suggest("a") == {"lr": 0.01}
    searcher.save(str(tmp_path / "searcher-state-x.pkl"))
    _experiment_state(tmp_path, ["a"])

    restored = _ours(storage, max_trials=3)
    restored.restore(str(tmp_path / "searcher-state-x.pkl"))
    assert not [t for t in study.get_trials() if t.state is TrialState.FAIL], "no orphan"
    assert restored.suggest("b") == {"lr": 0.002}, "the queued second best, after the restore"
    assert isinstance(restored.suggest("c"), dict), "a third trial of its own"
    assert restored.suggest("d") == "FINISHED", "3 trials of its own; the seed is not one"
