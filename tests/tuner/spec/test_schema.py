"""The campaign file's JSON Schema (``tuner schema``) against the parser: generated from the
parser's tables, it accepts the documents the parser accepts and rejects the ones with a
broken field, and the committed docs/campaign.schema.json is its current output."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given, settings

from tests import schema_strategies as strategies
from tuner.cli import main
from tuner.errors import SpecError
from tuner.spec import campaign_schema, parse_campaign

ROOT = Path(__file__).resolve().parents[3]
CAMPAIGN_FILES = sorted((ROOT / "search_spaces").glob("*.yaml"))
VALIDATOR = jsonschema.Draft202012Validator(campaign_schema())
PROPERTIES = settings(max_examples=150, deadline=None, database=None)


def _parser_accepts(doc: Any) -> bool:
    try:
        parse_campaign(doc, "c.yaml", check_trainable=False)
    except SpecError:
        return False
    return True


def _schema_accepts(doc: Any) -> bool:
    return VALIDATOR.is_valid(doc)


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(campaign_schema())


def test_committed_schema_is_what_tuner_schema_prints(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    printed = capsys.readouterr().out
    committed = (ROOT / "docs" / "campaign.schema.json").read_text()
    assert printed == committed, "run: tuner schema > docs/campaign.schema.json"


@pytest.mark.parametrize("path", CAMPAIGN_FILES, ids=lambda p: p.name)
def test_every_built_in_campaign_is_accepted_by_both_and_names_the_schema(path: Path) -> None:
    text = path.read_text()
    doc = yaml.safe_load(text)
    assert _parser_accepts(doc) and _schema_accepts(doc)
    assert text.splitlines()[0] == "# yaml-language-server: $schema=../docs/campaign.schema.json"


def _edited(path: str, value: Any) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "search_spaces" / "default.yaml").read_text())
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "valid"),
    [
        ("budget.trials", 0, False),
        ("budget.trials", 100_000, True),
        ("budget.trials", 100_001, False),
        ("budget.usd", 0, False),  # above 0
        ("budget.deadline", "1h30m", True),
        ("budget.deadline", "90 minutes", False),
        ("scheduler", "fifo", True),  # shorthand for {type: fifo}
        ("scheduler", "hyperband", False),
        ("sampler.type", "nsga3", False),
        ("sampler.seed", -1, False),
        ("resources.gpu", "1", False),
        ("pricing.spot", "yes", False),
        ("name", "has space", False),
        ("trainable", "pkg.mod:train", True),
        ("trainable", "no_such_builtin", False),
        ("space.lr", {"type": "float", "low": 1e-4, "high": 1e-1, "lg": True}, False),
        ("space.opt", {"choices": ["a", "b"]}, True),
        ("space.depth", {"value": 3}, True),
        ("fixed.epochs_warmup", 2, True),
        ("fixed.tuner_x", 2, False),
        ("tracking", {"x": 1}, False),  # not a section (yet)
        ("warm_start", "runs/earlier", True),
        ("warm_start.from", {"storage": "sqlite:///s.db"}, False),
    ],
)
def test_hand_picked_documents_get_the_same_verdict(path: str, value: Any, valid: bool) -> None:
    doc = _edited(path, value)
    assert _parser_accepts(doc) is valid
    assert _schema_accepts(doc) is valid


@PROPERTIES
@given(drawn=strategies.campaigns("digits_cnn"))
def test_drawn_campaigns_are_accepted_by_both(drawn: tuple[dict[str, Any], Any]) -> None:
    doc, _ = drawn
    assert _parser_accepts(doc)
    assert _schema_accepts(doc), list(VALIDATOR.iter_errors(doc))[:1]


def _beyond_the_schema(leaf: Any, doc: Any) -> bool:
    """Mutations JSON Schema cannot see: NaN (JSON has none, and NaN compares False with
    every bound) and a duration written as text beyond its range ("366d")."""
    node = doc
    for key in leaf.path:
        node = node[key]
    if isinstance(node, float) and math.isnan(node):
        return True
    return leaf.kind == "duration" and isinstance(node, str)


@PROPERTIES
@given(case=strategies.mutated(strategies.campaigns("digits_cnn")))
def test_campaigns_with_one_broken_field_are_rejected_by_both(case: Any) -> None:
    doc, leaf, where = case
    assert not _parser_accepts(copy.deepcopy(doc)), where
    if where.endswith(strategies.UNKNOWN) or not _beyond_the_schema(leaf, doc):
        assert not _schema_accepts(doc), (where, json.dumps(doc, default=str)[:400])
