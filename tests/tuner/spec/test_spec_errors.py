"""Every error of a campaign is reported at once; a check that needs a failed value is skipped."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml

from tests.tuner.spec.test_spec_validation import edited
from tuner.cli import main
from tuner.errors import MAX_SHOWN, SpecError, SpecErrors
from tuner.spec import parse_campaign
from tuner.spec._checks import Checker
from tuner.spec._parse_space import parse_space

pytestmark = pytest.mark.usefixtures("pinned_builtins")


def _errors(data: dict[str, object]) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_campaign(data, "c.yaml", check_trainable=False)
    return info.value


def test_errors_in_several_sections_are_all_reported_in_file_order() -> None:
    err = _errors(
        edited(
            {
                "mode": "maxx",
                "space.lr.type": "flaot",
                "space.channels.step": 0,
                "budget.trials": "four",
                "scheduler.type": "ashaa",
                "resources.cpu": -1,
                "checkpoint.keep": 0,
                "sampelr": "tpe",
            }
        )
    )
    assert isinstance(err, SpecErrors)
    assert [e.path for e in err.errors] == [
        "sampelr",
        "mode",
        "space.lr.type",
        "space.channels.step",
        "budget.trials",
        "scheduler.type",
        "resources.cpu",
        "checkpoint.keep",
    ]
    # The attributes are the first error's; the message has one message per error.
    assert (err.path, err.problem) == ("sampelr", "unknown key")
    lines = [line for line in str(err).splitlines() if not line.startswith("  To fix:")]
    assert lines == [e.messages()[0].splitlines()[0] for e in err.errors]
    assert all(line.startswith("c.yaml: ") for line in lines)


def test_every_field_of_a_section_is_checked() -> None:
    err = _errors(
        edited({"budget": {"trials": 0, "max_epochs": "five", "usd": -1, "deadline": "6x"}})
    )
    assert [e.path for e in err.errors] == [
        "budget.trials",
        "budget.max_epochs",
        "budget.usd",
        "budget.deadline",
    ]


def test_a_single_error_is_a_plain_spec_error_with_its_usual_message() -> None:
    err = _errors(edited({"budget.trials": 0}))
    assert type(err) is SpecError
    assert err.errors == (err,)
    assert str(err) == "c.yaml: budget.trials: must be an integer >= 1 (got 0)"


@pytest.mark.parametrize(
    ("edits", "paths"),
    [
        # grace_period is not compared with a max_epochs that failed its own check
        ({"budget.max_epochs": "x", "scheduler.grace_period": 4}, ["budget.max_epochs"]),
        # nor is min_peers' default computed from a reduction_factor that failed
        ({"scheduler.reduction_factor": "x"}, ["scheduler.reduction_factor"]),
        # a condition on a parameter that failed its own check is not "unknown"
        ({"space.optimizer.choices": []}, ["space.optimizer.choices"]),
        # the grid sampler's check of the floats needs the space
        ({"sampler": "grid", "space.channels.low": "x"}, ["space.channels.low"]),
        # a missing required key is reported once, not again as a wrong type
        ({"budget": {"max_epochs": 3}}, ["budget.trials"]),
        ({"space.lr.low": "x", "resources.workers": 0}, ["space.lr.low", "resources.workers"]),
    ],
)
def test_checks_that_need_a_failed_value_are_skipped(
    edits: dict[str, object], paths: list[str]
) -> None:
    assert [e.path for e in _errors(edited(edits)).errors] == paths


def test_missing_required_keys_are_all_reported() -> None:
    data = edited({})
    for key in ("metric", "mode", "budget"):
        del data[key]
    assert [e.path for e in _errors(data).errors] == ["metric", "mode", "budget"]


def test_many_errors_are_capped_in_the_message() -> None:
    space = {f"p{i}": {"type": "float", "low": 1, "high": 0} for i in range(MAX_SHOWN + 5)}
    with pytest.raises(SpecErrors) as info:
        parse_space(Checker("s.yaml"), space)
    err = info.value
    assert len(err.errors) == MAX_SHOWN + 5
    messages = err.messages()
    assert len(messages) == MAX_SHOWN + 1
    assert messages[-1] == f"s.yaml: ... and 5 more errors ({MAX_SHOWN + 5} in all)"


def test_spec_errors_pickle_as_themselves() -> None:
    err = _errors(edited({"budget.trials": 0, "checkpoint.keep": 0}))
    again = pickle.loads(pickle.dumps(err))
    assert isinstance(again, SpecErrors)
    assert str(again) == str(err)
    assert [e.path for e in again.errors] == ["budget.trials", "checkpoint.keep"]


def test_the_cli_prints_every_error_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(edited({"budget.trials": 0, "scheduler.type": "ashaa"})))
    code = main(["run", str(path), "--runs-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        f"error: {path}: budget.trials: must be an integer >= 1 (got 0)",
        f"error: {path}: scheduler.type: unknown scheduler (got 'ashaa'; allowed asha, fifo) "
        "Did you mean 'asha'?",
    ]
    assert not (tmp_path / "runs").exists()
