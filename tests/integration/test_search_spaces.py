"""Every campaign file in search_spaces/ runs through the real CLI with a tiny budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tuner.spec import load_campaign

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGNS = sorted((ROOT / "search_spaces").glob("*.yaml"))
# Run through the CLI with their whole budget by a test of their own.
RUN_ELSEWHERE = {"digits_pareto.yaml": "tests/integration/test_pareto_campaign.py"}
SMALL = [p for p in CAMPAIGNS if p.name not in RUN_ELSEWHERE]


def test_every_campaign_file_is_run_by_a_test() -> None:
    for name, test_file in RUN_ELSEWHERE.items():
        assert name in {p.name for p in CAMPAIGNS}, name
        assert f'"search_spaces" / "{name}"' in (ROOT / test_file).read_text(), test_file


def test_there_are_campaign_files() -> None:
    assert {p.name for p in CAMPAIGNS} >= {"default.yaml", "tabular_mlp.yaml"}


@pytest.mark.parametrize("campaign", SMALL, ids=[p.stem for p in SMALL])
def test_campaign_file_runs_from_the_cli(campaign: Path, tmp_path: Path) -> None:
    spec = load_campaign(campaign)
    runs = tmp_path / "runs"
    run = run_cli(
        [
            "run",
            str(campaign),
            "--trials",
            "2",
            "--max-epochs",
            "2",
            "--runs-dir",
            str(runs),
            "--num-cpus",
            "2",
        ],
        cwd=tmp_path,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    run_dir = runs / spec.name
    assert f"run folder {run_dir}" in run.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["trials_run"] == 2 and summary["status"] == "completed"
    assert (run_dir / "best.yaml").is_file()

    show = run_cli(["show", str(run_dir), "--json"], cwd=tmp_path, timeout=120)
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["trials"] == 2
