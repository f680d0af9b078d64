"""Campaign files: YAML problems, the file path in messages, and reading errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tuner.errors import SpecError, TunerError
from tuner.spec import load_campaign

VALID = """\
name: demo
trainable: digits_cnn
metric: val_acc
mode: max
space:
  lr: {type: float, low: 1.0e-4, high: 0.1, log: true}
  optimizer: {choices: [sgd, adam]}
  momentum: {type: float, low: 0.0, high: 0.9, when: {optimizer: sgd}}
budget:
  trials: 4
  max_epochs: 3
  time_limit: 1h30m
"""


def write(tmp_path: Path, text: str, name: str = "campaign.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_loads_a_valid_file_and_keeps_the_path_as_source(tmp_path: Path) -> None:
    path = write(tmp_path, VALID)
    spec = load_campaign(path, check_trainable=False)
    assert spec.source == str(path)
    assert spec.budget.time_limit_s == 5400.0
    assert spec.space.names == ("lr", "optimizer", "momentum")


def test_messages_start_with_the_file_path(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("mode: max", "mode: max\nsampler: {tyep: tpe}"))
    with pytest.raises(SpecError) as info:
        load_campaign(path, check_trainable=False)
    assert str(info.value) == (
        f"{path}: sampler.tyep: unknown key (allowed type, seed, startup_trials) "
        "Did you mean 'type'?"
    )


def test_low_above_high_in_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("low: 0.0, high: 0.9", "low: 0.9, high: 0.1"))
    with pytest.raises(SpecError) as info:
        load_campaign(path, check_trainable=False)
    assert str(info.value) == f"{path}: space.momentum.high: must be greater than low=0.9 (got 0.1)"


def test_duplicate_key_names_key_and_lines(tmp_path: Path) -> None:
    text = VALID.replace("budget:", "  lr: {type: float, low: 0.1, high: 0.2}\nbudget:")
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_campaign(path, check_trainable=False)
    assert str(info.value) == (
        f"{path}: space.lr: duplicate key 'lr' on line 9 (first defined on line 6)\n"
        "  To fix: keep one of the two entries"
    )


def test_duplicate_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, VALID + "name: other\n")
    with pytest.raises(SpecError, match=r"name: duplicate key 'name' on line 13 \(first .* 1\)"):
        load_campaign(path, check_trainable=False)


def test_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    anchors = "  a: &r {type: int, low: 1, high: 3}\n  b: {<<: *r, high: 5}\n  optimizer:"
    path = write(tmp_path, VALID.replace("  optimizer:", anchors))
    spec = load_campaign(path, check_trainable=False)
    assert spec.space["b"].to_dict() == {"type": "int", "low": 1, "high": 5}


def test_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\nspace:\n  lr: {type: float, low: 1\nbudget: 3\n")
    with pytest.raises(SpecError) as info:
        load_campaign(path, check_trainable=False)
    assert (
        str(info.value)
        == f"{path}: line 4, column 7: invalid YAML: expected ',' or '}}', but got ':'"
    )
    assert info.value.path == "line 4, column 7"


def test_tab_indentation_is_a_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, "name: demo\nspace:\n\tlr: 1\n")
    with pytest.raises(SpecError, match=r"line 3, column 1: invalid YAML: found character '\\t'"):
        load_campaign(path, check_trainable=False)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_campaign(path, check_trainable=False)
    assert str(info.value) == (
        f"{path}: top level: the file is empty\n"
        "  To fix: see search_spaces/ for example campaign files"
    )


def test_top_level_list(tmp_path: Path) -> None:
    path = write(tmp_path, "- name: demo\n")
    with pytest.raises(
        SpecError, match=r": top level: must be a mapping of campaign keys \(got \["
    ):
        load_campaign(path, check_trainable=False)


def test_missing_file_is_a_tuner_error(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(TunerError) as info:
        load_campaign(path)
    assert not isinstance(info.value, SpecError)
    assert str(info.value) == f"{path}: no such campaign file"


def test_directory_is_a_tuner_error(tmp_path: Path) -> None:
    with pytest.raises(TunerError, match="is a directory, not a campaign file"):
        load_campaign(tmp_path)


def test_import_failure_of_the_trainable(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("digits_cnn", "nonexistent_pkg.mod:fn"))
    with pytest.raises(SpecError) as info:
        load_campaign(path)
    assert str(info.value) == (
        f"{path}: trainable: import failed: ModuleNotFoundError: No module named "
        "'nonexistent_pkg' (got 'nonexistent_pkg.mod:fn')\n"
        "  To fix: make sure the module is importable from where tuner runs "
        "(installed, or its folder on PYTHONPATH)"
    )


def test_unknown_builtin_in_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("digits_cnn", "digits_ccn"))
    with pytest.raises(
        SpecError, match=r"unknown built-in trainable .* Did you mean 'digits_cnn'\?"
    ):
        load_campaign(path, check_trainable=False)


def test_yaml_booleans_and_bool_where_int_expected(tmp_path: Path) -> None:
    path = write(tmp_path, VALID.replace("trials: 4", "trials: yes"))
    with pytest.raises(SpecError) as info:
        load_campaign(path, check_trainable=False)
    assert str(info.value) == f"{path}: budget.trials: must be an integer >= 1 (got True)"
