"""RaySession in a real (local) Ray Tune run: reports, checkpoints and restores."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray import tune

from trainables import digits
from trainables._checkpoint import MANIFEST_FILE
from trainables._loop import CHECKPOINT_FILE, FALLBACK_KEY
from trainables._session import RaySession

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    yield
    ray.shutdown()


def test_digits_under_ray_tune_reports_and_resumes(local_ray: None, tmp_path: Path) -> None:
    config = {"channels": 8, "hidden": 16, "tuner_max_epochs": 2, "tuner_checkpoint_every": 1}
    tuner = tune.Tuner(
        tune.with_resources(digits.train, {"cpu": 1}),
        param_space=config,
        run_config=tune.RunConfig(name="digits", storage_path=str(tmp_path), verbose=0),
    )
    (result,) = tuner.fit()
    assert result.error is None
    assert result.metrics["epoch"] == 2
    assert result.metrics["tuner_device"] == "cpu"
    assert "tuner_stop_reason" not in result.metrics
    assert result.checkpoint is not None
    with result.checkpoint.as_directory() as directory:
        assert sorted(os.listdir(directory)) == [MANIFEST_FILE, CHECKPOINT_FILE]


def _fit_with_one_retry(train: Any, name: str, storage: Path) -> Any:
    """One three-epoch digits trial under Tune, retried once after a failure."""
    tuner = tune.Tuner(
        tune.with_resources(train, {"cpu": 1}),
        param_space={"channels": 8, "hidden": 16, "tuner_max_epochs": 3},
        run_config=tune.RunConfig(
            name=name,
            storage_path=str(storage),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    )
    (result,) = tuner.fit()
    return result


def test_failed_trial_resumes_from_its_checkpoint(local_ray: None, tmp_path: Path) -> None:
    marker = tmp_path / "failed_once"

    # Defined inside the test so Ray pickles it by value (the test module is not importable).
    def flaky_train(config: dict[str, Any]) -> None:
        class FailOnceSession(RaySession):
            def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
                super().report(metrics, checkpoint_dir)
                if metrics["epoch"] == 1 and not marker.exists():
                    marker.touch()
                    raise RuntimeError("simulated node loss after epoch 1")

        digits.train(config, FailOnceSession())

    result = _fit_with_one_retry(flaky_train, "flaky", tmp_path)
    assert result.error is None and marker.exists()
    # Started from scratch, the retry would report epoch 1 again.
    assert list(result.metrics_dataframe["epoch"]) == [1, 2, 3]


def test_corrupted_latest_checkpoint_falls_back_under_ray(local_ray: None, tmp_path: Path) -> None:
    marker = tmp_path / "failed_once"
    storage = tmp_path / "storage"

    def corrupting_train(config: dict[str, Any]) -> None:
        class CorruptOnceSession(RaySession):
            def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
                super().report(metrics, checkpoint_dir)  # Ray has persisted it on return
                if metrics["epoch"] == 2 and not marker.exists():
                    marker.touch()
                    latest = max(storage.glob("fallback/*/checkpoint_*"))
                    state = latest / CHECKPOINT_FILE
                    data = state.read_bytes()
                    state.write_bytes(data[: len(data) // 2])  # a partly copied state
                    raise RuntimeError("simulated node loss after epoch 2")

        digits.train(config, CorruptOnceSession())

    result = _fit_with_one_retry(corrupting_train, "fallback", storage)
    assert result.error is None and marker.exists()
    rows = [json.loads(line) for line in Path(result.path, "result.json").read_text().splitlines()]
    # The retry was handed epoch 2's (truncated) checkpoint and resumed from epoch 1's.
    assert [r["epoch"] for r in rows] == [1, 2, 2, 3]
    assert [r.get(FALLBACK_KEY) for r in rows] == [
        None,
        None,
        "checkpoint_000001 -> checkpoint_000000",
        None,
    ]
