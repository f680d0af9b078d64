"""study_storage on a real PostgreSQL server (tests/postgres.py, loopback): two drivers
run at once on one database, each in a study of its own, both finish with their trial
counts and `tuner list --study-storage` lists both (the shared checks of
test_study_storage.run_two_at_once); a wrong password is one error line that does not
print it; optuna-dashboard-style listing through Optuna's API shows the metric names."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
import yaml

from tests.conftest import tiny_digits_campaign
from tests.integration.test_study_storage import run_two_at_once
from tests.postgres import PostgresServer, running_postgres
from tuner.study import storage_for

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def _url(server: PostgresServer, db: str) -> str:
    """The database's URL without its password (PGPASSWORD carries it)."""
    return server.create_database(db).replace(f":{server.password}@", "@")


def test_two_drivers_share_a_postgresql_store(postgres: PostgresServer, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    url = _url(postgres, "studies")
    os.environ["PGPASSWORD"] = postgres.password  # this process reads the store too
    try:
        run_two_at_once(tmp_path, url, env={"PGPASSWORD": postgres.password})
        summaries = optuna.get_all_study_summaries(storage_for(url))
        assert len(summaries) == 2
        for summary in summaries:  # what optuna-dashboard lists: names, metric, trials
            study = optuna.load_study(study_name=summary.study_name, storage=storage_for(url))
            assert study.metric_names == ["val_acc"] and summary.n_trials in (3, 4)
    finally:
        del os.environ["PGPASSWORD"]


def test_a_wrong_password_is_one_line_without_it(postgres: PostgresServer, tmp_path: Path) -> None:
    url = _url(postgres, "refused")
    data = {**tiny_digits_campaign(name="refused"), "study_storage": url}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    env_password = "not-the-password"
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "run", "c.yaml"],
        cwd=tmp_path,
        env={**os.environ, "PGPASSWORD": env_password},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "study_storage: the study storage cannot be opened" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()
    assert postgres.password not in done.stderr and env_password not in done.stderr
