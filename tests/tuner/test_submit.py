"""tuner/submit.py, the script `ray submit cluster.yaml tuner/submit.py ...` runs on the head."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tuner import submit

SCRIPT = Path(submit.__file__).resolve()


def test_help_works_from_any_working_directory(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for flag in ("--budget-usd", "--deadline", "--address", "--cluster-config", "ray job submit"):
        assert flag in proc.stdout, flag


def test_campaign_path_missing_here_is_taken_from_the_shipped_project(
    tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    resolved = submit._resolve_campaign(["search_spaces/default.yaml", "--trials", "2"])
    assert resolved[0] == str(SCRIPT.parent.parent / "search_spaces" / "default.yaml")
    assert resolved[1:] == ["--trials", "2"]
    (tmp_path / "mine.yaml").write_text("name: x\n")
    assert submit._resolve_campaign(["mine.yaml"]) == ["mine.yaml"]  # found here: kept


def test_bad_flag_is_a_clear_error_with_exit_code_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "x.yaml", "--budget-usd", "-3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--budget-usd" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_dry_run_through_the_script_prints_the_plan_and_writes_nothing(tmp_path: Path) -> None:
    # The script parses tuner run's flags with a parser of its own: a flag the run handler
    # reads must be one of them (--dry-run was not, and `ray submit` crashed).
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "search_spaces/default.yaml", "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "plan for campaign digits-cnn" in proc.stdout
    assert "decided by the cluster at auto" in proc.stdout  # it joins the cluster it runs on
    assert list(tmp_path.iterdir()) == []


def test_a_warm_start_id_is_the_run_folder_on_the_head() -> None:
    from tuner.cli.submit import DEFAULT_RUNS, source_on_head

    assert source_on_head("digits-20261207-190625", DEFAULT_RUNS) == (
        "~/tuner-runs/digits-20261207-190625"
    )
    assert source_on_head("/data/runs/digits", DEFAULT_RUNS) == "/data/runs/digits"
    assert source_on_head("runs/digits", "/srv") == "runs/digits"
