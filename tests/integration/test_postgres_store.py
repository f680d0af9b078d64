"""study_storage on a real PostgreSQL server (tests/postgres.py, loopback): two drivers
run at once on one database, each in a study of its own, both finish with their trial
counts and `tuner list --study-storage` lists both (the shared checks of
test_study_storage.run_two_at_once); a wrong password is one error line that does not
print it; optuna-dashboard's API (its WSGI app, called in-process on the same store) lists
both studies by the names tuner gave them, with the metric name and every trial."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import optuna
import optuna_dashboard
import pytest
import yaml

from tests.conftest import tiny_digits_campaign
from tests.integration.test_study_storage import run_two_at_once
from tests.postgres import PostgresServer, running_postgres
from tuner import rundir
from tuner.study import storage_for

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def _url(server: PostgresServer, db: str) -> str:
    """The database's URL without its password (PGPASSWORD carries it)."""
    return server.create_database(db).replace(f":{server.password}@", "@")


def _get_json(app: Callable[..., Iterable[bytes]], path: str) -> Any:
    """GET ``path`` from the WSGI ``app`` in this process (no socket); its JSON body."""
    started: list[str] = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    body = b"".join(app(environ, lambda status, headers, exc_info=None: started.append(status)))
    assert started and started[0].startswith("200"), (path, started, body[:500])
    return json.loads(body)


def _check_dashboard(url: str, trials_of: dict[str, int]) -> None:
    """optuna-dashboard lists exactly the studies ``trials_of`` names, each with the metric
    name val_acc, maximized, and that many trials, all finished, one best."""
    app = optuna_dashboard.wsgi(storage_for(url))
    listed = _get_json(app, "/api/studies")["study_summaries"]
    ids = {study["study_name"]: study["study_id"] for study in listed}
    assert sorted(ids) == sorted(trials_of)
    for name, trials in trials_of.items():
        detail = _get_json(app, f"/api/studies/{ids[name]}")
        assert detail["name"] == name
        assert detail["objective_names"] == ["val_acc"] and detail["directions"] == ["maximize"]
        assert [t["number"] for t in detail["trials"]] == list(range(trials))
        assert {t["state"] for t in detail["trials"]} <= {"Complete", "Pruned"}
        assert len(detail["best_trials"]) == 1
        assert 0.0 < detail["best_trials"][0]["values"][0] <= 1.0


def test_two_drivers_share_a_postgresql_store(postgres: PostgresServer, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    url = _url(postgres, "studies")
    os.environ["PGPASSWORD"] = postgres.password  # this process reads the store too
    try:
        run_two_at_once(tmp_path, url, env={"PGPASSWORD": postgres.password})
        summaries = optuna.get_all_study_summaries(storage_for(url))
        assert len(summaries) == 2
        for summary in summaries:  # Optuna's own API: names, metric, trials
            study = optuna.load_study(study_name=summary.study_name, storage=storage_for(url))
            assert study.metric_names == ["val_acc"] and summary.n_trials in (3, 4)
        names = {
            json.loads((tmp_path / "runs" / f"shared-{c}" / rundir.RUN_FILE).read_text())[
                "study_name"
            ]: trials
            for c, trials in (("a", 4), ("b", 3))
        }
        _check_dashboard(url, names)
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
