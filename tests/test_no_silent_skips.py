"""tests/no_silent_skips.py on small test files of its own, in a pytest subprocess: under
CI=true a skip fails unless a GPU marker made it, and the run counts the GPU markers' skips."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.no_silent_skips import cuda_available, nvidia_driver_answers

ROOT = Path(__file__).resolve().parents[1]

CASES = """
import pytest

def test_runs():
    pass

def test_skips_in_its_body():
    pytest.skip("missing frobnicate (apt-get install frobnicate)")

@pytest.mark.skipif(True, reason="needs chromium (apt install chromium)")
def test_skipif_marker():
    pass

@pytest.mark.gpu
def test_on_cuda():
    pass

@pytest.mark.gpu
def test_on_cuda_too():
    pass

@pytest.mark.no_gpu
def test_without_a_gpu():
    pass

@pytest.mark.xfail(reason="a known failure")
def test_expected_failure():
    assert False
"""

MODULE_SKIP = """
import pytest

pytest.importorskip("no_such_module_for_this_test")

def test_never_collected():
    pass
"""


def _pytest(tmp_path: Path, ci: bool) -> tuple[dict[str, str], str]:
    """Runs pytest on the two files; each test's outcome by name, and the output."""
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env.update(PYTHONPATH=str(ROOT), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if ci:
        env["CI"] = "true"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.no_silent_skips", "-p", "no:cacheprovider",
         "--continue-on-collection-errors", "-rA", "--junitxml=out.xml", "."],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = proc.stdout + proc.stderr
    outcomes = {}
    for case in ET.parse(tmp_path / "out.xml").iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes[case.get("name") or case.get("classname", "")] = (kinds or ["passed"])[-1]
    return outcomes, output


def _gpu_outcomes() -> tuple[dict[str, str], list[str]]:
    """What the GPU markers do on this machine, and the summary lines they print."""
    if cuda_available():
        return {
            "test_on_cuda": "passed",
            "test_on_cuda_too": "passed",
            "test_without_a_gpu": "skipped",
        }, ["1 no-GPU test skipped: this machine has a GPU"]
    lines = ["2 GPU tests skipped: no CUDA on this machine"]
    if nvidia_driver_answers():
        return {
            "test_on_cuda": "skipped",
            "test_on_cuda_too": "skipped",
            "test_without_a_gpu": "skipped",
        }, [*lines, "1 no-GPU test skipped: this machine has a GPU"]
    return {
        "test_on_cuda": "skipped",
        "test_on_cuda_too": "skipped",
        "test_without_a_gpu": "passed",
    }, lines


def test_under_ci_only_the_gpu_markers_skip(tmp_path: Path) -> None:
    outcomes, output = _pytest(tmp_path, ci=True)
    gpu, summary = _gpu_outcomes()
    assert outcomes == {
        "test_runs": "passed",
        "test_skips_in_its_body": "failure",  # fails in its call
        "test_skipif_marker": "error",  # fails in its set-up
        "test_expected_failure": "skipped",  # an xfail stays one
        "test_module_skip": "error",  # the module fails to collect
        **gpu,
    }, output
    for reason in ("missing frobnicate (apt-get install frobnicate)", "needs chromium"):
        assert f"skipped ({reason}" in output, output
    assert "but CI=true: only the `gpu` and `no_gpu` markers may skip in CI" in output
    assert (
        "`.ci/run` installs Debian's chromium, openssh-server, rsync and postgresql with apt-get"
        in output
    )
    for line in summary:
        assert line in output.splitlines(), output


def test_outside_ci_a_skip_stays_a_skip(tmp_path: Path) -> None:
    outcomes, output = _pytest(tmp_path, ci=False)
    gpu, summary = _gpu_outcomes()
    assert outcomes == {
        "test_runs": "passed",
        "test_skips_in_its_body": "skipped",
        "test_skipif_marker": "skipped",
        "test_expected_failure": "skipped",
        "test_module_skip": "skipped",
        **gpu,
    }, output
    assert "CI=true" not in output
    for line in summary:
        assert line in output.splitlines(), output


def test_ci_run_sets_ci() -> None:
    assert "\nexport CI=true\n" in (ROOT / ".ci" / "run").read_text()
