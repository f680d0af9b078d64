"""The public Python API (tuner/__init__.py): what it lists, that importing it is light, that
docs/api.md's examples run, and that a campaign run from Python leaves its process as it
found it (a Ray the caller started, logging, signals, environment, import path)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tuner

ROOT = Path(__file__).resolve().parents[2]
API_DOC = ROOT / "docs" / "api.md"


def _python(code: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "TUNER_NO_REPORT": "1",
    }
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_every_listed_name_resolves_and_is_documented() -> None:
    doc = API_DOC.read_text()
    for name in tuner.__all__:
        assert getattr(tuner, name) is not None
        assert f"`{name}" in doc or name in doc, f"{name} is not in docs/api.md"
    assert set(dir(tuner)) >= set(tuner.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = tuner.nope  # type: ignore[attr-defined]


def test_importing_tuner_and_its_pure_core_loads_neither_ray_nor_torch(tmp_path: Path) -> None:
    proc = _python(
        "import sys\n"
        "import tuner, tuner.spec, tuner.cost, tuner.budget, tuner.report, tuner.results\n"
        "import tuner.finish, tuner.summary, tuner.study, tuner.space, tuner.outcome\n"
        "tuner.Result, tuner.TunerError, tuner.run\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'torch'}))",
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", API_DOC.read_text(), flags=re.S)


@pytest.mark.ray
def test_docs_api_examples_run(tmp_path: Path) -> None:
    (tmp_path / "search_spaces").symlink_to(ROOT / "search_spaces")
    examples = _examples()
    assert len(examples) >= 2
    for code in examples:
        proc = _python(code, tmp_path)
        assert proc.returncode == 0, f"{code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    results = tmp_path / "runs" / "api-example"
    assert [p.name for p in results.iterdir()] == ["digits-cnn"]


@pytest.mark.ray
def test_run_in_a_process_that_started_ray_leaves_it_and_the_process_as_they_were(
    tmp_path: Path,
) -> None:
    code = textwrap.dedent(
        f"""
        import io, logging, os, signal, sys
        import ray
        import tuner
        from tests.conftest import tiny_digits_campaign

        ray.init(address="local", num_cpus=2, include_dashboard=False)
        # tensorboardX sets CRC32C_SW_MODE when it is first imported (Tune's default logger
        # imports it): a library's import, not something the campaign sets.
        import tensorboardX
        root = logging.getLogger()
        before = (list(root.handlers), root.level, dict(os.environ), list(sys.path),
                  signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGUSR1))
        campaign = tiny_digits_campaign(budget={{"trials": 2, "max_epochs": 1}})
        result = tuner.run(campaign, runs_dir={str(tmp_path / "runs")!r}, stream=io.StringIO())
        after = (list(root.handlers), root.level, dict(os.environ), list(sys.path),
                 signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGUSR1))
        assert result.status == tuner.Status.COMPLETED, result.status
        assert len(result.trials) == 2 and result.best is not None
        assert ray.is_initialized(), "the caller's Ray was shut down"
        assert ray.get(ray.remote(lambda: 41).remote()) + 1 == 42
        for name, b, a in zip(("handlers", "level", "env", "path", "SIGINT", "SIGUSR1"),
                              before, after):
            assert b == a, (name, b, a)
        # No module of tuner or trainables holds the campaign's state after it ended.
        from tuner._ray.campaign import Campaign
        from tuner._ray.failures import FailureWatch
        from tuner._ray.guard import BudgetGuard
        state = (Campaign, BudgetGuard, FailureWatch)
        for module_name, module in list(sys.modules.items()):
            if module_name.split(".")[0] not in ("tuner", "trainables"):
                continue
            for key, value in vars(module).items():
                values = list(value.values()) if isinstance(value, dict) else (
                    list(value) if isinstance(value, (list, set, tuple)) else [value])
                held = [v for v in values if isinstance(v, state)]
                assert not held, (module_name, key, held)
        ray.shutdown()
        print("ok")
        """
    )
    proc = _python(code, ROOT)
    assert proc.returncode == 0, f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr[-4000:]}"
    assert proc.stdout.strip().endswith("ok")


def test_open_run_reads_an_unfinished_run_folder_and_refuses_a_wrong_one(tmp_path: Path) -> None:
    from tests.conftest import tiny_digits_campaign
    from tuner import rundir
    from tuner.spec import parse_campaign

    spec = parse_campaign(tiny_digits_campaign(), check_trainable=False)
    folder = tmp_path / "tiny-digits"
    folder.mkdir()
    rundir.write_yaml(folder / rundir.CAMPAIGN_FILE, spec.to_dict())
    result = tuner.open_run(folder)  # started, no trial yet, no summary
    assert result.status is tuner.Status.UNFINISHED and not result.ended
    assert (result.trials, result.best, result.spend) == ((), None, None)
    assert result.trials_requested == spec.budget.trials
    with pytest.raises(tuner.RunFolderError, match="not a tuner run folder") as info:
        tuner.open_run(tmp_path)
    assert info.value.source == str(tmp_path)


def test_bad_overrides_raise_spec_errors_before_anything_runs(tmp_path: Path) -> None:
    from tests.conftest import tiny_digits_campaign

    with pytest.raises(tuner.SpecError) as info:
        tuner.run(tiny_digits_campaign(), trials=0, runs_dir=tmp_path)
    assert (info.value.path, info.value.got) == ("--trials", 0)
    with pytest.raises(tuner.SpecError, match="time_limit"):
        tuner.run(tiny_digits_campaign(), time_limit="soon", runs_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
