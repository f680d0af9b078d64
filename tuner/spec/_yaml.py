"""Loading campaign files: safe YAML without duplicate keys, then validation."""

from __future__ import annotations

import os
from typing import Any

import yaml

from tuner.errors import SpecError, TunerError
from tuner.spec._campaign import CampaignSpec
from tuner.spec._checks import join
from tuner.spec._parse import parse_campaign


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects duplicate mapping keys.

    PyYAML silently keeps the last of two equal keys, so a second ``lr:`` under
    ``space`` would quietly replace the first.
    """

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source

    def check_duplicates(self, node: yaml.Node, path: str = "") -> None:
        """Walk the composed node tree; raise SpecError on a repeated key."""
        if isinstance(node, yaml.MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                line = key_node.start_mark.line + 1
                # "<<" merge keys may repeat; PyYAML merges them in order.
                if isinstance(key, str) and key_node.tag != "tag:yaml.org,2002:merge":
                    # The tag keeps 1 and "1" apart.
                    seen = (key_node.tag, key)
                    if seen in first_line:
                        raise SpecError(
                            self.source,
                            join(path, key),
                            f"duplicate key {key!r} on line {line} "
                            f"(first defined on line {first_line[seen]})",
                            fix="keep one of the two entries",
                        )
                    first_line[seen] = line
                self.check_duplicates(value_node, join(path, key))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.check_duplicates(item, f"{path}[{i}]")


def load_yaml(text: str, source: str) -> Any:
    """Parse YAML text safely; syntax errors and duplicate keys become SpecError."""
    loader = StrictLoader(text, source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        loader.check_duplicates(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "top level"
        problem = exc.problem or exc.context or "invalid YAML"
        raise SpecError(source, where, f"invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(source, "top level", f"invalid YAML: {exc}") from exc
    finally:
        loader.dispose()


def load_campaign(path: str | os.PathLike[str], *, check_trainable: bool = True) -> CampaignSpec:
    """Load and validate a campaign file.

    Args:
        path: The YAML file; used as given as the spec's ``source`` and in messages.
        check_trainable: Also import the trainable (see :func:`parse_campaign`).

    Returns:
        The validated spec.

    Raises:
        TunerError: The file cannot be read.
        SpecError: The file is not valid YAML or violates the campaign schema.
    """
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise TunerError(f"{source}: no such campaign file") from None
    except IsADirectoryError:
        raise TunerError(f"{source}: is a directory, not a campaign file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TunerError(f"{source}: cannot read campaign file: {exc}") from None
    data = load_yaml(text, source)
    if data is None:
        raise SpecError(
            source,
            "top level",
            "the file is empty",
            fix="see search_spaces/ for example campaign files",
        )
    if not isinstance(data, dict):
        raise SpecError(
            source,
            "top level",
            "must be a mapping of campaign keys",
            got=data,
            fix="see search_spaces/ for example campaign files",
        )
    return parse_campaign(data, source, check_trainable=check_trainable)
