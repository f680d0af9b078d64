"""Trainable references: a built-in name or an importable ``package.module:function``."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any

from tuner.errors import SpecError, closest

TRAINABLE_REF = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*"
_REF = re.compile(TRAINABLE_REF)
_IMPORTABLE_FIX = (
    "make sure the module is importable from where tuner runs "
    "(installed, or its folder on PYTHONPATH)"
)


def builtin_trainables() -> dict[str, str]:
    """Built-in trainable names -> ``module:function`` (importing ``trainables`` is cheap)."""
    # Imported at call time so tests can patch BUILTINS; the package itself is cheap.
    import trainables

    return dict(trainables.BUILTINS)


def check_trainable_ref(ref: Any, *, source: str = "<dict>", path: str = "trainable") -> str:
    """Validate the syntax of a trainable reference without importing anything.

    Args:
        ref: A built-in name (a key of ``trainables.BUILTINS``) or ``package.module:function``.
        source: Where the reference came from, for the error message.
        path: Key path of the reference, for the error message.

    Returns:
        ``ref`` unchanged.

    Raises:
        SpecError: Not a string, an unknown built-in name, or a malformed import path.
    """
    builtins = builtin_trainables()
    if not isinstance(ref, str) or not ref.strip():
        raise SpecError(
            source,
            path,
            "must be a built-in trainable name or 'package.module:function'",
            got=ref,
            allowed=sorted(builtins),
        )
    if ":" not in ref:
        if ref not in builtins:
            raise SpecError(
                source,
                path,
                "unknown built-in trainable",
                got=ref,
                allowed=sorted(builtins),
                suggestion=closest(ref, builtins),
                fix="use a built-in name, or 'package.module:function' for your own trainable",
            )
        return ref
    if not _REF.fullmatch(ref):
        raise SpecError(
            source,
            path,
            "malformed trainable reference",
            got=ref,
            allowed="'package.module:function'",
        )
    return ref


def resolve_trainable(
    ref: str, *, source: str = "<dict>", path: str = "trainable"
) -> Callable[[dict[str, Any]], None]:
    """Import a trainable and return the function.

    Args:
        ref: A built-in name (``"digits_cnn"``) or ``"package.module:function"``; the
            function part may be dotted (``"pkg.mod:Class.method"``).
        source: Where the reference came from, for the error message.
        path: Key path of the reference, for the error message.

    Returns:
        The callable ``fn(config: dict) -> None``.

    Raises:
        SpecError: Unknown built-in, malformed reference, import failure (with the
            exception type and message), missing attribute (closest name suggested), or
            the attribute is not callable.
    """
    check_trainable_ref(ref, source=source, path=path)
    target = builtin_trainables().get(ref, ref)
    module_name, _, attr_path = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any import-time failure is the user's to see
        raise SpecError(
            source,
            path,
            f"import failed: {type(exc).__name__}: {exc}",
            got=ref,
            fix=_IMPORTABLE_FIX,
        ) from exc
    owner = module_name
    for attr in attr_path.split("."):
        if not hasattr(obj, attr):
            public = [name for name in dir(obj) if not name.startswith("_")]
            raise SpecError(
                source,
                path,
                f"{owner!r} has no attribute {attr!r}",
                got=ref,
                suggestion=closest(attr, public),
            )
        obj = getattr(obj, attr)
        owner = f"{owner}.{attr}"
    if not callable(obj):
        raise SpecError(
            source,
            path,
            f"{owner!r} is not callable (it is a {type(obj).__name__})",
            got=ref,
            fix="point at a function fn(config: dict) -> None",
        )
    fn: Callable[[dict[str, Any]], None] = obj
    return fn
