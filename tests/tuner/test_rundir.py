"""Run folder helpers: free names, resumability checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner import rundir
from tuner.errors import TunerError


def test_new_run_dir_never_reuses_an_existing_folder(tmp_path: Path) -> None:
    assert rundir.new_run_dir(tmp_path, "c") == tmp_path / "c"
    (tmp_path / "c").mkdir()
    (tmp_path / "c-2").mkdir()
    assert rundir.new_run_dir(tmp_path, "c") == tmp_path / "c-3"
    assert not (tmp_path / "c-3").exists()


def test_check_resumable_explains_a_wrong_folder(tmp_path: Path) -> None:
    with pytest.raises(TunerError, match="no such run folder"):
        rundir.check_resumable(tmp_path / "nope")
    with pytest.raises(TunerError, match=r"not a tuner run folder \(no campaign.yaml inside\)"):
        rundir.check_resumable(tmp_path)
