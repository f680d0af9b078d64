"""The message format of user-facing errors."""

from __future__ import annotations

import pickle

import pytest

from tuner.errors import SpecError, TunerError, closest


def test_full_message() -> None:
    err = SpecError(
        "c.yaml",
        "sampler.type",
        "unknown sampler",
        got="tpx",
        allowed=["tpe", "random"],
        suggestion="tpe",
        fix="pick one of the allowed samplers",
    )
    assert str(err) == (
        "c.yaml: sampler.type: unknown sampler (got 'tpx'; allowed tpe, random) "
        "Did you mean 'tpe'?\n  To fix: pick one of the allowed samplers"
    )
    assert isinstance(err, TunerError) and isinstance(err, ValueError)
    assert (err.source, err.path, err.problem, err.got, err.allowed) == (
        "c.yaml",
        "sampler.type",
        "unknown sampler",
        "tpx",
        "tpe, random",
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "<cli>: --trials: bad"),
        ({"got": None}, "<cli>: --trials: bad (got None)"),
        ({"got": 0}, "<cli>: --trials: bad (got 0)"),
        ({"allowed": ">= 1"}, "<cli>: --trials: bad (allowed >= 1)"),
        ({"suggestion": "x"}, "<cli>: --trials: bad Did you mean 'x'?"),
        ({"fix": "do y"}, "<cli>: --trials: bad\n  To fix: do y"),
    ],
)
def test_only_present_pieces(kwargs: dict[str, object], message: str) -> None:
    err = SpecError("<cli>", "--trials", "bad", **kwargs)  # type: ignore[arg-type]
    assert str(err) == message
    assert err.has_got == ("got" in kwargs)


def test_pickles_with_all_fields() -> None:
    err = SpecError("a", "b", "c", got=[1], allowed="x", suggestion="s", fix="f")
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err)
    assert (again.got, again.suggestion, again.fix) == ([1], "s", "f")
    bare = pickle.loads(pickle.dumps(SpecError("a", "b", "c")))
    assert not bare.has_got and str(bare) == "a: b: c"


def test_closest() -> None:
    names = ["tpe", "random", "grid", "cmaes", "gp", "qmc"]
    assert closest("tpx", names) == "tpe"
    assert closest("TPE", names) == "tpe"
    assert closest("randm", names) == "random"
    assert closest("hyperband", names) is None
    assert closest(3, names) is None
    assert closest("x", []) is None


def test_every_kind_carries_its_source_and_fix_and_pickles_as_itself() -> None:
    from tuner.errors import ClusterError, FileError, RunFolderError

    errors: list[TunerError] = [
        FileError("c.yaml", "no such campaign file.", fix="pass a YAML file"),
        RunFolderError("runs/x", "run folder exists already.", fix="`tuner resume runs/x`"),
        ClusterError("c.yaml", "each trial asks for 1 GPU, but none fits.", path="resources"),
    ]
    for err in errors:
        assert err.source in ("c.yaml", "runs/x")
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy) is type(err) and str(copy) == str(err)
        assert (copy.source, copy.path, copy.fix) == (err.source, err.path, err.fix)
    assert str(errors[1]) == ("runs/x: run folder exists already.\n  To fix: `tuner resume runs/x`")
    assert str(errors[2]) == "c.yaml: resources: each trial asks for 1 GPU, but none fits."


def test_a_message_alone_is_the_whole_message() -> None:
    err = TunerError("node label tuner.io/market='x': must be spot or on-demand.")
    assert str(err) == err.problem and err.source is None and not err.has_got
