"""``warm_start:`` in a campaign file and ``--warm-start``: shapes, errors, round trip."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import tiny_digits_campaign
from tuner.errors import SpecError
from tuner.spec import WarmStart, parse_campaign


def _parse(warm: Any) -> Any:
    return parse_campaign(tiny_digits_campaign(warm_start=warm), "c.yaml", check_trainable=False)


def test_a_run_folder_with_top() -> None:
    spec = _parse({"from": "runs/last-week", "top": 2})
    assert spec.warm_start == WarmStart(run="runs/last-week", top=2)
    assert spec.warm_start.label == "runs/last-week"


def test_a_bare_string_is_the_run_folder_and_top_defaults_to_3() -> None:
    assert _parse("runs/x").warm_start == WarmStart(run="runs/x", top=3)


def test_a_study_in_a_store() -> None:
    url = "postgresql+psycopg://tuner@127.0.0.1:5432/studies"
    spec = _parse({"from": {"storage": url, "study": "digits-a1b2"}, "top": 0})
    assert spec.warm_start == WarmStart(storage=url, study="digits-a1b2", top=0)
    assert spec.warm_start.label == f"digits-a1b2 in {url}"


@pytest.mark.parametrize(
    "warm",
    [
        {"from": "runs/x", "top": 1},
        {"from": {"storage": "journal:///tmp/j.log", "study": "s"}, "top": 3},
    ],
)
def test_round_trip(warm: dict[str, Any]) -> None:
    spec = _parse(warm)
    assert spec.to_dict()["warm_start"] == warm
    assert parse_campaign(spec.to_dict(), check_trainable=False) == spec


@pytest.mark.parametrize(
    ("warm", "path", "words"),
    [
        ({"from": "runs/x", "tpo": 2}, "warm_start.tpo", "Did you mean 'top'"),
        ({"top": 2}, "warm_start.from", "required key is missing"),
        ({"from": "runs/x", "top": 9}, "warm_start.top", "more than budget.trials=8"),
        ({"from": "runs/x", "top": -1}, "warm_start.top", "integer >= 0"),
        ({"from": "runs/x", "top": 1.5}, "warm_start.top", "integer"),
        ({"from": ""}, "warm_start.from", "must not be empty"),
        ({"from": 3}, "warm_start.from", "a run folder"),
        ({"from": {"storage": "journal:///j"}}, "warm_start.from.study", "required"),
        ({"from": {"storage": "mongodb://h/db", "study": "s"}}, "warm_start.from.storage", ""),
        (["runs/x"], "warm_start", "must be a mapping"),
    ],
)
def test_bad_values_name_the_key(warm: Any, path: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        _parse(warm)
    found = [e for e in err.value.errors if e.path == path]
    assert found, [e.path for e in err.value.errors]
    assert words in str(found[0]), str(found[0])


def test_a_password_in_the_source_url_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        _parse({"from": {"storage": "postgresql://u:hunter2@h/db", "study": "s"}})
    assert err.value.path == "warm_start.from.storage"
    assert "hunter2" not in str(err.value)


def test_the_flag_overrides_the_source_and_keeps_top() -> None:
    spec = _parse({"from": "runs/a", "top": 2})
    assert spec.with_overrides(warm_start="runs/b").warm_start == WarmStart(run="runs/b", top=2)
    cold = parse_campaign(tiny_digits_campaign(), check_trainable=False)
    assert cold.warm_start is None
    flagged = cold.with_overrides(warm_start="runs/b", trials=2)
    assert flagged.warm_start == WarmStart(run="runs/b", top=2), "top at most the trials"
