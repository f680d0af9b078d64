"""``tuner schema``: the campaign file's JSON Schema, for editors and other tools."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_schema_command"]


def add_schema_command(subparsers: Any) -> None:
    """Adds ``tuner schema`` to the CLI's subparsers.

    Args:
        subparsers: What ``ArgumentParser.add_subparsers()`` returned.
    """
    schema: argparse.ArgumentParser = subparsers.add_parser(
        "schema",
        help="print the campaign file's JSON Schema (for editor completion and checks)",
        description="Print the JSON Schema (draft 2020-12) of campaign files, generated from "
        "the same tables the campaign parser checks against. Editors with the YAML language "
        "server read it from a first line '# yaml-language-server: $schema=<path or URL>'; "
        "docs/campaign.schema.json is this output. The parser still checks what a schema "
        "cannot (rules between fields, such as grace_period <= max_epochs).",
    )
    schema.set_defaults(handler=_cmd_schema)


def _cmd_schema(args: argparse.Namespace) -> int:
    from tuner.spec import campaign_schema

    print(json.dumps(campaign_schema(), indent=2))
    return 0
