"""The Job Submission glue's pure parts (tuner/_ray/jobs.py): campaign ids, where the token
is looked for, shell quoting of the head's paths, the address, and the status of a job
whose driver published nothing. The real head: tests/integration/test_service.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tuner._ray.jobs import (
    EXCLUDES,
    _address,
    _job_document,
    _quote,
    campaign_id,
    find_token,
    status_file_name,
)
from tuner.errors import ServiceError
from tuner.status import SCHEMA, State


def test_campaign_ids_are_the_name_and_the_utc_time() -> None:
    assert campaign_id("digits-cnn", 1_700_000_000.0) == "digits-cnn-20231114-221320"
    assert campaign_id("my campaign/v2", 1_700_000_000.0) == "my-campaign-v2-20231114-221320"
    assert campaign_id("???", 0.5).startswith("campaign-")
    assert status_file_name("x-1") == "tuner_status_x-1.json"


def test_the_token_is_looked_for_where_ray_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    token, where = find_token()
    assert token is None and "RAY_AUTH_TOKEN_PATH" in where and "~/.ray/auth_token" in where
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home-token\n")
    assert find_token() == ("home-token", str(tmp_path / ".ray" / "auth_token"))
    named = tmp_path / "named"
    named.write_text("named-token")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    assert find_token() == ("named-token", str(named))
    monkeypatch.setenv("RAY_AUTH_TOKEN", "env-token")
    assert find_token() == ("env-token", "RAY_AUTH_TOKEN")


def test_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert _address("127.0.0.1:8265/") == "http://127.0.0.1:8265"
    assert _address("https://head:8265") == "https://head:8265"
    monkeypatch.setenv("RAY_ADDRESS", "http://from-env:8265")
    assert _address(None) == "http://from-env:8265"
    for wrong in ("ray://head:10001", "auto"):
        with pytest.raises(ServiceError, match="not the address of a Ray dashboard"):
            _address(wrong)
    monkeypatch.delenv("RAY_ADDRESS")
    with pytest.raises(ServiceError, match="no cluster address given"):
        _address(None)


def test_paths_for_the_heads_shell() -> None:
    assert _quote("~/tuner-runs") == '"$HOME"/tuner-runs'
    assert _quote("/a b/c") == "'/a b/c'"
    assert _quote("--trials") == "--trials"


def test_the_working_dir_leaves_out_bulky_folders() -> None:
    assert {"runs/", ".venv/", "profiles/", ".git/"} <= set(EXCLUDES)


def _job(status: str, **kw: object) -> SimpleNamespace:
    return SimpleNamespace(
        submission_id="c-1",
        metadata={"tuner": "campaign", "tuner_id": "c-1", "tuner_name": "c"},
        status=status,
        start_time=1_700_000_000_000,
        end_time=None,
        message=kw.get("message", ""),
        driver_exit_code=kw.get("driver_exit_code"),
    )


def test_a_job_that_published_nothing_still_has_a_status() -> None:
    pending = _job_document(_job("PENDING"), "PENDING")
    assert pending["schema"] == SCHEMA and pending["id"] == "c-1" and pending["name"] == "c"
    assert (pending["state"], pending["status"]) == (State.RUNNING, "pending")
    assert pending["started"] == "2023-11-14T22:13:20+00:00" and pending["job"] == "c-1"
    refused = _job_document(_job("FAILED", driver_exit_code=2, message="exit 2"), "FAILED")
    assert refused["state"] == State.FAILED and "exit 2" in refused["status"]
    crashed = _job_document(_job("FAILED", driver_exit_code=1), "FAILED")
    assert crashed["state"] == State.DIED
