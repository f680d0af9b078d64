"""Plateau early stop: the tracker's rule, and the loop ending, checkpointing and restoring."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.trainables._support import Preempted, PreemptedSession
from trainables import tabular
from trainables._loop import CHECKPOINT_FILE
from trainables._plateau import Plateau
from trainables._session import LocalSession


def _run(plateau: Plateau, values: list[float]) -> list[str | None]:
    return [plateau.update(epoch, v) for epoch, v in enumerate(values, start=1)]


def test_val_loss_plateau_stops_after_patience_epochs() -> None:
    plateau = Plateau("val_loss", patience=3, min_delta=0.001)
    # Epoch 3 improves by less than min_delta, so the best stays at epoch 2.
    reasons = _run(plateau, [1.0, 0.1234, 0.1230, 0.2, 0.13])
    assert reasons == [
        None,
        None,
        None,
        None,
        "plateau: no val_loss improvement > 0.001 for 3 epochs (best 0.1234 at epoch 2)",
    ]


def test_val_acc_plateau_wants_higher_values() -> None:
    plateau = Plateau("val_acc", patience=2, min_delta=0.0)
    assert _run(plateau, [0.5, 0.6, 0.6, 0.7, 0.65, 0.7])[-1] == (
        "plateau: no val_acc improvement > 0 for 2 epochs (best 0.7000 at epoch 4)"
    )


def test_patience_zero_never_stops() -> None:
    assert _run(Plateau("val_loss", patience=0, min_delta=0.0), [1.0] * 10) == [None] * 10


def test_state_round_trips() -> None:
    plateau = Plateau("val_loss", patience=2, min_delta=0.0)
    _run(plateau, [1.0, 0.5, 0.7])
    restored = Plateau("val_loss", patience=2, min_delta=0.0)
    restored.load_state_dict(plateau.state_dict())
    assert restored.update(4, 0.6) == plateau.update(4, 0.6) is not None


# min_delta far above any change in val_loss: the best stays at epoch 1, the trial ends at 3.
PLATEAU = {"tuner_max_epochs": 6, "plateau_patience": 2, "plateau_min_delta": 10.0}


def test_plateau_ends_trial_with_a_checkpoint(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train(PLATEAU, session)

    assert [m["epoch"] for m in session.metrics] == [1, 2, 3]
    best = session.metrics[0]["val_loss"]
    assert session.metrics[-1]["tuner_stop_reason"] == (
        f"plateau: no val_loss improvement > 10 for 2 epochs (best {best:.4f} at epoch 1)"
    )
    assert session.reports[-1].checkpoint is not None
    assert all("tuner_stop_reason" not in m for m in session.metrics[:-1])


def test_restored_trial_stops_at_the_same_epoch(tmp_path: Path) -> None:
    whole = LocalSession(tmp_path / "whole")
    tabular.train(PLATEAU, whole)

    first = PreemptedSession(tmp_path / "first", after=2)
    with pytest.raises(Preempted):
        tabular.train(PLATEAU, first)
    second = LocalSession(tmp_path / "second", restore_from=first.latest_checkpoint)
    tabular.train(PLATEAU, second)
    # Without the best-so-far in the checkpoint the restored run would start counting anew.
    assert [m["epoch"] for m in second.metrics] == [3]
    assert second.metrics[-1]["tuner_stop_reason"] == whole.metrics[-1]["tuner_stop_reason"]


def test_restarted_plateaued_trial_rereports_without_training(tmp_path: Path) -> None:
    done = LocalSession(tmp_path / "done")
    tabular.train(PLATEAU, done)
    again = LocalSession(tmp_path / "again", restore_from=done.latest_checkpoint)
    tabular.train(PLATEAU, again)
    assert again.metrics == [done.metrics[-1]]


def test_plateau_metric_typo_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"plateau_metric.*Did you mean 'val_acc'"):
        tabular.train({"plateau_metric": "val_accuracy"}, LocalSession(tmp_path))


def test_format_2_checkpoint_without_plateau_state_still_restores(tmp_path: Path) -> None:
    done = LocalSession(tmp_path / "done")
    tabular.train({"tuner_max_epochs": 1}, done)
    assert done.latest_checkpoint is not None
    old = Path(done.latest_checkpoint) / CHECKPOINT_FILE
    state = torch.load(old, weights_only=True)
    del state["plateau"]
    state["format"] = 2
    (tmp_path / "v2").mkdir()
    torch.save(state, tmp_path / "v2" / CHECKPOINT_FILE)

    again = LocalSession(tmp_path / "again", restore_from=tmp_path / "v2")
    tabular.train({"tuner_max_epochs": 2, "plateau_patience": 1}, again)
    assert [m["epoch"] for m in again.metrics] == [2]
