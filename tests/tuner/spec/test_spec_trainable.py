"""Resolving trainable references: built-ins, import paths and every failure."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import trainables
from tuner.errors import SpecError
from tuner.spec import resolve_trainable


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable module ``tuner_test_user_mod`` with a trainable and a constant."""
    name = "tuner_test_user_mod"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            SCALE = 3

            def train(config):
                config["called"] = True

            class Models:
                @staticmethod
                def fit(config):
                    config["fit"] = True
            """
        )
    )
    (tmp_path / "tuner_test_broken_mod.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        trainables,
        "BUILTINS",
        {"user_fn": f"{name}:train", "digits_cnn": "trainables.digits:train"},
    )
    yield name
    sys.modules.pop(name, None)
    sys.modules.pop("tuner_test_broken_mod", None)


def test_resolves_import_path_and_dotted_attribute(user_module: str) -> None:
    config: dict[str, object] = {}
    resolve_trainable(f"{user_module}:train")(config)
    resolve_trainable(f"{user_module}:Models.fit")(config)
    assert config == {"called": True, "fit": True}


def test_resolves_builtin_name_through_builtins(user_module: str) -> None:
    config: dict[str, object] = {}
    resolve_trainable("user_fn")(config)
    assert config == {"called": True}


def test_unknown_builtin_suggests_closest(user_module: str) -> None:
    with pytest.raises(SpecError) as info:
        resolve_trainable("digits_nn")
    assert str(info.value) == (
        "<dict>: trainable: unknown built-in trainable (got 'digits_nn'; allowed digits_cnn, "
        "user_fn) Did you mean 'digits_cnn'?\n"
        "  To fix: use a built-in name, or 'package.module:function' for your own trainable"
    )


@pytest.mark.parametrize("ref", ["pkg.mod:", ":fn", "pkg..mod:fn", "pkg.mod:fn:x", "a-b:fn"])
def test_malformed_reference(ref: str) -> None:
    with pytest.raises(SpecError, match="malformed trainable reference"):
        resolve_trainable(ref)


def test_module_import_failure_names_exception(user_module: str) -> None:
    with pytest.raises(SpecError) as info:
        resolve_trainable("nonexistent_pkg.mod:fn", source="c.yaml")
    assert str(info.value).startswith(
        "c.yaml: trainable: import failed: ModuleNotFoundError: No module named "
        "'nonexistent_pkg' (got 'nonexistent_pkg.mod:fn')"
    )
    with pytest.raises(SpecError, match="import failed: RuntimeError: boom at import"):
        resolve_trainable("tuner_test_broken_mod:train")


def test_missing_attribute_suggests_closest(user_module: str) -> None:
    with pytest.raises(SpecError) as info:
        resolve_trainable(f"{user_module}:trian")
    assert str(info.value) == (
        f"<dict>: trainable: '{user_module}' has no attribute 'trian' "
        f"(got '{user_module}:trian') Did you mean 'train'?"
    )


def test_not_callable(user_module: str) -> None:
    with pytest.raises(SpecError) as info:
        resolve_trainable(f"{user_module}:SCALE", path="--trainable")
    assert str(info.value) == (
        f"<dict>: --trainable: '{user_module}.SCALE' is not callable (it is a int) "
        f"(got '{user_module}:SCALE')\n  To fix: point at a function fn(config: dict) -> None"
    )


def test_spec_loading_imports_neither_ray_nor_optuna_nor_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        from tuner.spec import parse_campaign
        parse_campaign(
            {"name": "x", "trainable": "digits_cnn", "metric": "m", "mode": "min",
             "space": {"a": {"type": "int", "low": 1, "high": 2}},
             "budget": {"trials": 1, "max_epochs": 1}},
            check_trainable=False,
        )
        print(sorted(m for m in ("ray", "optuna", "torch") if m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert out.stdout.strip() == "[]"
