"""The trainable contract of the shared loop, driven through the built-ins with LocalSession."""

from __future__ import annotations

import importlib
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainables._support import Preempted, PreemptedSession, checkpoint_weights
from trainables import BUILTINS, digits, tabular
from trainables._checkpoint import MANIFEST_FILE
from trainables._loop import CHECKPOINT_FILE, RESERVED_PREFIX, choose_device
from trainables._session import LocalSession

# Small and fast, but with every stateful part in play: dropout (torch RNG), BatchNorm
# (running stats), Adam moments and a per-step cosine schedule.
TINY_DIGITS: dict[str, Any] = {
    "channels": 8,
    "hidden": 32,
    "dropout": 0.2,
    "batch_norm": True,
    "lr": 3e-3,
    "lr_schedule": "cosine",
    "tuner_seed": 7,
}
# Every knob with state to restore: a warmed-up per-step schedule, augmentation draws,
# pruning masks (pruned before the interruption after epoch 2, or after it at epoch 3).
ALL_KNOBS: dict[str, Any] = {
    "lr_schedule": "onecycle",
    "warmup_epochs": 1.5,
    "augment": 0.5,
    "prune_amount": 0.4,
    "label_smoothing": 0.1,
    "grad_clip": 1.0,
    "grad_accum": 2,
    "batch_size": 32,
}
METRIC_KEYS = {
    "epoch",
    "train_loss",
    "val_loss",
    "val_acc",
    "epoch_time_s",
    "samples_per_s",
    "sparsity",
    "tuner_device",
}
COMPARED = ("epoch", "train_loss", "val_loss", "val_acc", "sparsity")
# On CPU the restored run repeats the same float operations in the same order, so results
# are bitwise equal in practice; 1e-6 is the contract's tolerance.
ATOL = 1e-6


@pytest.mark.parametrize(
    "knobs",
    [{}, {**ALL_KNOBS, "prune_finetune_epochs": 2}, {**ALL_KNOBS, "prune_finetune_epochs": 1}],
    ids=["defaults", "all-knobs-pruned-before", "all-knobs-pruned-after"],
)
def test_restored_run_matches_uninterrupted_run(knobs: dict[str, Any], tmp_path: Path) -> None:
    config = {**TINY_DIGITS, **knobs, "tuner_max_epochs": 4}
    whole = LocalSession(tmp_path / "whole")
    digits.train(config, whole)

    first = PreemptedSession(tmp_path / "first", after=2)
    with pytest.raises(Preempted):
        digits.train(config, first)
    torch.manual_seed(12345)  # the restored run must not depend on the global RNG
    second = LocalSession(tmp_path / "second", restore_from=first.latest_checkpoint)
    digits.train(config, second)

    if knobs:
        assert whole.metrics[-1]["sparsity"] == pytest.approx(0.4, abs=0.01)
    resumed = first.metrics + second.metrics
    assert [m["epoch"] for m in resumed] == [1, 2, 3, 4]
    for got, want in zip(resumed, whole.metrics, strict=True):
        for key in COMPARED:
            assert got[key] == pytest.approx(want[key], abs=ATOL, rel=0), key
    final, expected = (
        checkpoint_weights(second.latest_checkpoint),
        checkpoint_weights(whole.latest_checkpoint),
    )
    assert final.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(final[name], expected[name], atol=ATOL, rtol=0)


def test_digits_learns_and_reports_every_epoch(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    config = {"optimizer": "adam", "lr": 3e-3, "channels": 32, "batch_size": 64}
    before = time.time()
    digits.train({**config, "tuner_max_epochs": 4}, session)
    after = time.time()

    assert [m["epoch"] for m in session.metrics] == [1, 2, 3, 4]
    for m in session.metrics:
        assert m.keys() >= METRIC_KEYS
        assert m["tuner_device"] == "cpu"
        assert m["epoch_time_s"] > 0 and m["samples_per_s"] > 0
    # Each epoch's end, in wall-clock seconds with sub-second resolution, in order.
    ends = [m["tuner_epoch_end_unix_s"] for m in session.metrics]
    assert before < ends[0] < ends[1] < ends[2] < ends[3] < after
    assert session.metrics[-1]["val_acc"] >= 0.9
    # Reaching max epochs is not an early stop: no stop reason (the service counts it COMPLETE).
    assert all("tuner_stop_reason" not in m for m in session.metrics)


def test_tabular_learns(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 8}, session)
    assert session.metrics[-1]["val_acc"] >= 0.9


@pytest.mark.parametrize("train", [digits.train, tabular.train], ids=["digits", "tabular"])
def test_divergence_ends_trial_without_checkpoint(train: Any, tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    config = {"optimizer": "sgd", "lr": 1e6, "tuner_max_epochs": 5, "channels": 8}
    train(config, session)

    last = session.reports[-1]
    assert last.metrics["tuner_stop_reason"].startswith("diverged: train loss is")
    assert math.isnan(last.metrics["val_acc"]) and math.isnan(last.metrics["val_loss"])
    assert last.checkpoint is None
    assert len(session.reports) < 5


@pytest.mark.parametrize("max_epochs", [3, 2])
def test_restored_at_or_after_max_epochs_rereports_without_training(
    max_epochs: int, tmp_path: Path
) -> None:
    done = LocalSession(tmp_path / "done")
    tabular.train({"tuner_max_epochs": 3}, done)

    again = LocalSession(tmp_path / "again", restore_from=done.latest_checkpoint)
    tabular.train({"tuner_max_epochs": max_epochs}, again)
    assert again.metrics == [done.metrics[-1]]
    assert again.reports[0].checkpoint is None


def test_checkpoint_cadence(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 5, "tuner_checkpoint_every": 2}, session)

    saved = [r.metrics["epoch"] for r in session.reports if r.checkpoint is not None]
    assert saved == [2, 4, 5]
    for r in session.reports:
        if r.checkpoint is not None:
            assert sorted(os.listdir(r.checkpoint)) == [MANIFEST_FILE, CHECKPOINT_FILE]


def test_same_session_resumes_from_its_own_checkpoint(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 2}, session)
    tabular.train({"tuner_max_epochs": 4}, session)
    assert [m["epoch"] for m in session.metrics] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (
            {"tuner_max_epoch": 3},
            r"config\['tuner_max_epoch'\] is not a known key.*"
            r"Did you mean 'tuner_max_epochs'\?",
        ),
        ({"optimizer": "adamm"}, r"config\['optimizer'\] must be one of .*Did you mean 'adam'"),
        ({"lr": 0}, r"config\['lr'\] must be > 0.0, but got 0.0"),
        ({"amp": "false"}, r"config\['amp'\] must be true or false, but got 'false'"),
        ({"batch_size": 0}, r"config\['batch_size'\] must be >= 1, but got 0"),
        ({"layers": 1.5}, r"config\['layers'\] must be an int, but got 1.5"),
    ],
)
def test_bad_config_is_rejected_with_the_key(
    config: dict[str, Any], match: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=match):
        tabular.train(config, LocalSession(tmp_path))


def test_unknown_hyperparameters_are_ignored(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    tabular.train({"tuner_max_epochs": 1, "not_a_knob": "x"}, session)
    assert len(session.metrics) == 1


def test_reserved_prefix() -> None:
    assert RESERVED_PREFIX == "tuner_"


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_resolves_to_callable(name: str) -> None:
    module_name, _, attr = BUILTINS[name].partition(":")
    assert callable(getattr(importlib.import_module(module_name), attr))


@pytest.mark.no_gpu
def test_cuda_requested_without_cuda_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"tuner_device'\] is 'cuda'.*To fix"):
        choose_device("cuda", LocalSession(tmp_path))


def test_auto_without_session_gpus_uses_cpu(tmp_path: Path) -> None:
    assert choose_device("auto", LocalSession(tmp_path, use_gpus=False)).type == "cpu"


@pytest.mark.gpu
def test_digits_epoch_on_cuda_with_amp(tmp_path: Path) -> None:
    session = LocalSession(tmp_path)
    digits.train({"tuner_max_epochs": 1, "tuner_device": "auto", "amp": True}, session)
    (metrics,) = session.metrics
    assert metrics["tuner_device"].startswith("cuda")
    assert math.isfinite(metrics["val_loss"]) and metrics["val_acc"] > 0.5
