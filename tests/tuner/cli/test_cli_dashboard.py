"""`tuner dashboard`'s bad input: exit 2, one error, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "error: <cli>: RUN_DIR: give a run folder or --study-storage, one of them"),
        (
            ["RUN", "--study-storage", "sqlite:///s.db"],
            "error: <cli>: --study-storage: give a run folder or --study-storage, one of them",
        ),
        (["--study-storage", "mongodb://h/db"], "error: <cli>: --study-storage: unknown study"),
        (["empty"], "error: empty: no study.db here and no shared store named in run.json"),
    ],
)
def test_bad_input_exits_2_naming_what_to_give(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["dashboard", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and "Traceback" not in err
