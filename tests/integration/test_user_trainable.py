"""A user trainable outside the package (docs/examples) tuned through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.conftest import run_cli
from tuner import rundir

pytestmark = pytest.mark.ray

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "user_campaign.yaml"


def test_user_trainable_is_tuned_from_its_own_folder(tmp_path: Path) -> None:
    # Run from an unrelated directory: the trainable imports because it sits beside the
    # campaign file, which `tuner run` puts on the driver's and the workers' import path.
    runs = tmp_path / "runs"
    proc = run_cli(
        ["run", str(EXAMPLE), "--runs-dir", str(runs), "--num-cpus", "2"],
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = runs / "user-linear"
    study = optuna.load_study(study_name="user-linear", storage=rundir.study_url(run_dir))
    states = {t.state for t in study.trials}
    assert len(study.trials) == 8
    assert states <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert TrialState.COMPLETE in states
    summary = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())
    assert summary["best"]["value"] < 0.1  # the noise floor is 0.01; a tuned SGD gets close
    assert json.loads((run_dir / rundir.RUN_FILE).read_text())["code_dirs"][0] == str(
        EXAMPLE.parent
    )
