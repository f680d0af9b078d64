"""Loading YAML files: safe YAML without duplicate keys, then validation (campaign files,
and the configuration files ``tuner profile --config`` reads)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tuner.errors import FileError, SpecError
from tuner.spec._campaign import CampaignSpec
from tuner.spec._checks import join
from tuner.spec._limits import SIZES
from tuner.spec._parse import parse_campaign


class _BadScalarError(yaml.constructor.ConstructorError):
    """A value that its (implicit or explicit) tag cannot read; ``tag`` is its short name."""

    def __init__(self, problem: str, mark: yaml.Mark, tag: str) -> None:
        super().__init__(None, None, problem, mark)
        self.tag = tag


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects duplicate mapping keys.

    PyYAML silently keeps the last of two equal keys, so a second ``lr:`` under
    ``space`` would quietly replace the first.
    """

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source
        # Nodes being walked (an alias back to one of them is a cycle) and walked already
        # (an alias repeated many times is walked once).
        self._walking: set[int] = set()
        self._walked: set[int] = set()

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """PyYAML's, but a scalar its tag cannot read (``2024-13-45``, ``!!int abc``)
        raises a ConstructorError at the node instead of ValueError, KeyError, ..."""
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
            tag = str(node.tag).rsplit(":", 1)[-1]
            what = repr(node.value) if isinstance(node, yaml.ScalarNode) else "the value"
            detail = f": {exc}" if str(exc) and not isinstance(exc, KeyError) else ""
            raise _BadScalarError(
                f"cannot read {what} as {tag}{detail}", node.start_mark, tag
            ) from exc

    def check_duplicates(self, node: yaml.Node, path: str = "") -> None:
        """Walk the composed node tree; raise SpecError on a repeated key or a cycle."""
        if id(node) in self._walking:
            raise SpecError(
                self.source,
                path or "top level",
                "an alias refers to a mapping or list that contains it (a recursive value)",
                fix="replace the alias by a copy of the values it should stand for",
            )
        if id(node) in self._walked or not isinstance(node, yaml.CollectionNode):
            return
        self._walking.add(id(node))
        self._check_children(node, path)
        self._walking.discard(id(node))
        self._walked.add(id(node))

    def _check_children(self, node: yaml.CollectionNode, path: str) -> None:
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
    loader = None
    try:
        # The reader rejects control characters (NUL, ...) as soon as it is made.
        loader = StrictLoader(text, source)
        node = loader.get_single_node()
        if node is None:
            return None
        loader.check_duplicates(node)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "top level"
        problem = exc.problem or exc.context or "invalid YAML"
        fix = None
        if isinstance(exc, _BadScalarError):
            fix = f"quote the value to keep it a string, or write a valid {exc.tag}"
        raise SpecError(source, where, f"invalid YAML: {problem}", fix=fix) from exc
    except yaml.reader.ReaderError as exc:  # a control character; it has no mark
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        raise SpecError(
            source,
            f"line {line}, column {column}",
            f"invalid YAML: unacceptable character #x{exc.character:04x} "
            "(control characters are not allowed)",
            fix="delete the character",
        ) from exc
    except yaml.YAMLError as exc:
        raise SpecError(source, "top level", f"invalid YAML: {exc}") from exc
    except RecursionError:
        raise SpecError(
            source,
            "top level",
            "invalid YAML: nested too deeply",
            fix="flatten the nesting of lists and mappings",
        ) from None
    finally:
        if loader is not None:
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
        raise FileError(source, "no such campaign file") from None
    except IsADirectoryError:
        raise FileError(source, "is a directory, not a campaign file") from None
    except UnicodeDecodeError as exc:
        raise FileError(
            source, f"cannot read campaign file: {exc}", fix="save it with UTF-8 encoding"
        ) from None
    except OSError as exc:
        raise FileError(source, f"cannot read campaign file: {exc}") from None
    size = SIZES["file"]
    if len(text) > size.high:
        raise SpecError(
            source,
            "top level",
            f"is {len(text)} characters long; at most {size.show(size.high)} are allowed",
            fix=size.reason,
        )
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


def load_config_file(path: Path) -> dict[str, Any]:
    """The configuration in a ``best.yaml`` (its ``config:``) or a plain YAML mapping.

    Args:
        path: The YAML file.

    Returns:
        The hyperparameter names and values.

    Raises:
        SpecError: Unreadable file, bad YAML, or not a mapping of names to values.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise SpecError(str(path), "file", "cannot read config file", got=err.strerror) from None
    except UnicodeDecodeError as err:
        raise SpecError(
            str(path),
            "file",
            "not a UTF-8 text file",
            got=str(err),
            fix="save the config file as YAML with UTF-8 encoding",
        ) from None
    data = load_yaml(text, str(path))
    if isinstance(data, Mapping) and isinstance(data.get("config"), Mapping):
        data = data["config"]
    if not isinstance(data, Mapping) or not data:
        empty = data is None or isinstance(data, Mapping)
        raise SpecError(
            str(path),
            "config",
            "names no hyperparameter"
            if empty
            else "expected a mapping of hyperparameter names to values",
            got=data if empty else type(data).__name__,
            fix="pass a best.yaml written by `tuner run`, or a YAML mapping like `lr: 0.01`",
        )
    return {str(k): v for k, v in data.items()}
