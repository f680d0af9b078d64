"""The campaign file's JSON Schema (draft 2020-12), generated from the parser's own tables.

Sections and their keys come from :data:`tuner.spec._fields.SECTIONS` (which the parser reads),
the ranges of numbers from :data:`tuner.spec._limits.CAMPAIGN` and ``SIZES``, the choices from
the spec's enums, and names, durations and trainable references from the parser's patterns.
Nothing is written twice: a section or key added to the table is in the schema. What a schema
cannot say (rules between fields such as ``grace_period <= max_epochs``, ``when:`` conditions,
a grid's size) stays with the parser, which an editor's schema only helps, not replaces.

``tuner schema`` prints it; ``docs/campaign.schema.json`` is its committed copy, which the
built-in campaign files name for editors (``# yaml-language-server: $schema=...``).
"""

from __future__ import annotations

from typing import Any

from tuner.spec._checks import NAME_PATTERN, RESERVED_PREFIX
from tuner.spec._durations import DURATION_PATTERN
from tuner.spec._enums import Mode
from tuner.spec._fields import PARAM_KEYS, SECTIONS, Field, Section
from tuner.spec._limits import CAMPAIGN, SIZES, Limit
from tuner.spec._parse_space import IDENTIFIER
from tuner.spec._trainable import TRAINABLE_REF, builtin_trainables

__all__ = ["campaign_schema"]

_DEPTH = int(SIZES["depth"].high)


def _range(limit: Limit) -> dict[str, Any]:
    bounds: dict[str, Any] = {"maximum": _num(limit.high)}
    bounds["exclusiveMinimum" if limit.low_open else "minimum"] = _num(limit.low)
    return bounds


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def _number(limit: Limit, *, integer: bool) -> dict[str, Any]:
    return {"type": "integer" if integer else "number", **_range(limit)}


def _text(limit: Limit = SIZES["text"]) -> dict[str, Any]:
    return {"type": "string", "minLength": int(limit.low), "maxLength": int(limit.high)}


def _duration(limit: Limit) -> dict[str, Any]:
    return {
        "anyOf": [
            _number(limit, integer=False),
            {"type": "string", "pattern": DURATION_PATTERN},
        ],
        "description": "seconds, or a string like '90s', '10m', '2h', '1h30m'",
    }


def _name_list(item: dict[str, Any]) -> dict[str, Any]:
    """One of ``item``, or a list of 2-4 of them (a multi-objective campaign)."""
    count = SIZES["objectives"]
    listed: dict[str, Any] = {"type": "array", "items": item}
    listed |= {"minItems": int(count.low), "maxItems": int(count.high)}
    return {"anyOf": [item, listed]}


def _plain(depth: int) -> dict[str, Any]:
    """Any YAML value nested at most ``depth`` levels (lists, string-keyed mappings)."""
    if depth == 0:
        return {"$ref": "#/$defs/scalar"}
    inner = {"$ref": f"#/$defs/plain{depth - 1}" if depth > 1 else "#/$defs/scalar"}
    return {
        "anyOf": [
            {"$ref": "#/$defs/scalar"},
            {"type": "array", "items": inner},
            {"type": "object", "additionalProperties": inner},
        ]
    }


def _param() -> dict[str, Any]:
    bound = _number(CAMPAIGN["space.*.low"], integer=False)
    step = _number(CAMPAIGN["space.*.step"], integer=False)
    choices = SIZES["space.*.choices"]
    when = {"type": "object", "additionalProperties": True}
    values: dict[str, dict[str, Any]] = {
        "low": bound,
        "high": bound,
        "step": step,
        "log": {"type": "boolean"},
        "when": when,
        "value": {"$ref": f"#/$defs/plain{_DEPTH}"},
        "choices": {
            "type": "array",
            "minItems": int(choices.low),
            "maxItems": int(choices.high),
            "items": {"anyOf": [_text(), {"type": ["number", "boolean", "null"]}]},
        },
    }
    variants = []
    for kind, keys in PARAM_KEYS.items():
        props = {k: values[k] for k in keys if k != "type"}
        if kind == "int":  # whole-number ends and step
            props |= {k: {**props[k], "type": "integer"} for k in ("low", "high", "step")}
        props["type"] = {"const": kind}
        variant: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "additionalProperties": False,
        }
        # The type may be left out where the keys tell it (choices, value).
        implied = {"categorical": "choices", "fixed": "value"}.get(kind)
        variant["required"] = [implied] if implied else ["type", "low", "high"]
        variants.append(variant)
    return {"oneOf": variants}


def _field(path: str, field: Field) -> dict[str, Any]:
    kind = field.kind
    limit = field.limit or CAMPAIGN.get(path)
    if kind in ("int", "number", "duration"):
        if limit is None:
            raise ValueError(f"the field {path!r} has no range in CAMPAIGN")
        out = _duration(limit) if kind == "duration" else _number(limit, integer=kind == "int")
    elif kind == "bool":
        out = {"type": "boolean"}
    elif kind == "text":
        out = _text()
    elif kind == "name":
        out = {"type": "string", "pattern": f"^{NAME_PATTERN.pattern}$"} | _text(SIZES["name"])
    elif kind == "choice":
        out = {"enum": list(field.choices)}
    elif kind == "trainable":
        ref = {"type": "string", "pattern": f"^{TRAINABLE_REF}$"}
        out = {"anyOf": [{"enum": sorted(builtin_trainables())}, ref]}
    elif kind == "metric":
        metric = _text(SIZES["name"]) | {"not": {"pattern": f"^{RESERVED_PREFIX}"}}
        out = _name_list(metric)
    elif kind == "mode":
        out = _name_list({"enum": [m.value for m in Mode]})
    elif kind == "goal":
        out = _name_list(_number(CAMPAIGN["budget.goal"], integer=False))
    elif kind == "space":
        out = {
            "type": "object",
            "minProperties": int(SIZES["space"].low),
            "maxProperties": int(SIZES["space"].high),
            "propertyNames": {
                "pattern": f"^{IDENTIFIER.pattern}$",
                "not": {"pattern": f"^{RESERVED_PREFIX}"},
            },
            "additionalProperties": _param(),
        }
    elif kind == "fixed":
        out = {
            "type": ["object", "null"],
            "propertyNames": {
                "pattern": f"^{IDENTIFIER.pattern}$",
                "not": {"pattern": f"^{RESERVED_PREFIX}"},
            },
            "additionalProperties": {"$ref": f"#/$defs/plain{_DEPTH - 1}"},
        }
    elif kind == "source":
        out = {"anyOf": [_text(), {"$ref": f"#/$defs/{_def_name(path)}"}]}
    elif kind == "section":
        out = {"$ref": f"#/$defs/{_def_name(path)}"}
    else:  # pragma: no cover - a Kind added without its schema
        raise ValueError(f"no schema for field kind {kind!r} ({path})")
    if field.description:
        out = {"description": field.description, **out}
    return out


def _def_name(path: str) -> str:
    return path.replace(".", "_")


def _section(path: str, section: Section) -> dict[str, Any]:
    props = {key: _field(f"{path}.{key}" if path else key, f) for key, f in section.fields.items()}
    out: dict[str, Any] = {
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }
    if section.required:
        out["required"] = list(section.required)
    if section.description:
        out = {"description": section.description, **out}
    if not path:
        return out
    variants: list[dict[str, Any]] = [out]
    if section.shorthand is not None:
        variants.append(props[section.shorthand])
    if section.optional:
        variants.append({"type": "null"})
    return {"anyOf": variants} if len(variants) > 1 else out


def campaign_schema() -> dict[str, Any]:
    """The campaign file's JSON Schema (a JSON-able dict)."""
    defs: dict[str, Any] = {
        "scalar": {"anyOf": [_text(), {"type": ["number", "boolean", "null"]}]},
    }
    for depth in range(1, _DEPTH + 1):
        defs[f"plain{depth}"] = _plain(depth)
    for path, section in SECTIONS.items():
        if path:
            defs[_def_name(path)] = _section(path, section)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "tuner campaign file",
        **_section("", SECTIONS[""]),
        "$defs": defs,
    }
