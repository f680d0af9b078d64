"""tuner.tracking without a campaign: the missing extra's message and the default store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tuner.errors import TunerError
from tuner.spec import MlflowTracking
from tuner.tracking import mlflow_uri, require


@pytest.mark.parametrize(("module", "extra"), [("mlflow", "mlflow"), ("wandb", "wandb")])
def test_a_missing_tracker_names_the_extra_to_install(
    module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package imports as
    with pytest.raises(TunerError) as err:
        require(module, extra, f"tracking: {module}")
    assert str(err.value) == (
        f"tracking: {module} needs the Python package {module!r}, which is not installed\n"
        f"  To fix: pip install 'tuner[{extra}]'"
    )


def test_the_default_mlflow_store_is_sqlite_in_the_run_folder(tmp_path: Path) -> None:
    assert mlflow_uri(MlflowTracking(), tmp_path) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert mlflow_uri(MlflowTracking("http://h:5000"), tmp_path) == "http://h:5000"
