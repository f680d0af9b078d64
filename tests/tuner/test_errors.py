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
