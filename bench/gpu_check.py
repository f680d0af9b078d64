"""The GPU check: one command that exercises tuner's GPU paths and writes one JSON of figures.

Usage (from the repository root; ``make gpu-check`` runs the first)::

    python3 bench/gpu_check.py --out $OUT/gpu_check.json        # on a CUDA machine
    python3 bench/gpu_check.py --device cpu --quick              # the CPU dry run

Six steps, each in a process of its own with a time budget (seconds; the whole run is held
to ``--total-s``, 270 by default, so it ends within 5 minutes), in this order:

- ``env``: Python, torch, CUDA, cuDNN, NCCL, the driver, the GPU and its catalog entry
  (tuner/data/gpus.csv), and a bf16 matrix product's TFLOP/s;
- ``train``: each built-in trainable for a few epochs in bf16 AMP, fp16 AMP (with the
  gradient scaler) and TF32, each trial with its NVML telemetry (utilisation, power,
  energy, memory);
- ``profile``: each built-in measured as ``tuner profile`` measures it, and the cost
  model's prediction of that GPU epoch from a CPU profile set against it (a real
  calibration point: predicted vs measured on that GPU);
- ``mfu``: the character transformer's model FLOPs utilisation in bf16, for the campaign's
  model and a 25 M-parameter one;
- ``nccl``: a one-GPU NCCL process group (all-reduce, broadcast, barrier, a DDP step);
- ``tests``: the CUDA-marked tests (``pytest -m gpu`` over the files that hold CUDA tests),
  last, with what is left of the run.

No Ray and no Optuna: a lent GPU machine has neither (nor room to carry Ray), so the
trainables run through their local session and only tuner's pure core is imported.
Missing prerequisites (pytest, PyYAML, scikit-learn, nvidia-ml-py, CUDA) are checked first:
one line each says what is missing, which steps it stops and what to carry; the other
steps still run. One step failing, crashing or running out of time loses none of the
others: each step's figures, checks and error are in the JSON, which is rewritten after
every step. Exit status 0 when every step passed its checks.

The JSON (``format`` 1): ``started``, ``wall_s``, ``device``, ``quick``, ``total_s``,
``host``, ``prerequisites`` (name, ok, detail, needed_by, wanted_by, fix), ``steps`` (per
step: status ok / failed / timeout / skipped, wall_s, budget_s, result, checks, error) and
``headline`` (the figures worth a glance, drawn from the steps). Non-finite numbers are
written as strings ("nan").
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gpu_headline import headline

REPO = Path(__file__).resolve().parent.parent

FORMAT = 1
DEFAULT_TOTAL_S = 270.0
# A step is not started with less time than this left of the whole run.
MIN_STEP_S = 5.0
STATUSES = ("ok", "failed", "timeout", "skipped")


@dataclass(frozen=True)
class Step:
    """A step of the check and its time budget in seconds."""

    name: str
    budget_s: float


# The tests come last and take what is left: torch.compile's first compile there can take
# a minute or more, and the other steps' figures are safe by then.
STEPS = (
    Step("env", 15),
    Step("train", 50),
    Step("profile", 60),
    Step("mfu", 25),
    Step("nccl", 15),
    Step("tests", 180),
)
ALL = tuple(s.name for s in STEPS)
_WHEEL = (
    "python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 "
    "--implementation cp --platform manylinux2014_x86_64 -d .whl"
)


@dataclass(frozen=True)
class Prerequisite:
    """Something steps need: an importable module, or a capability of torch.

    Attributes:
        name: What to call it in the JSON and the lines printed.
        module: The module to find (None: ``probe`` decides).
        needed_by: Steps that cannot run without it.
        wanted_by: Steps that run without it but lose a part.
        carry: Distributions to carry as wheels when it is missing (empty: cannot be carried).
    """

    name: str
    module: str | None
    needed_by: tuple[str, ...]
    wanted_by: tuple[str, ...] = ()
    carry: tuple[str, ...] = ()


PREREQUISITES = (
    Prerequisite("torch", "torch", ALL),
    Prerequisite("cuda", None, ALL),
    Prerequisite(
        "pytest", "pytest", ("tests",), carry=("pytest", "pluggy", "iniconfig", "packaging")
    ),
    Prerequisite("pyyaml", "yaml", ("profile", "mfu"), carry=("PyYAML",)),
    Prerequisite(
        "scikit-learn",
        "sklearn",
        ("train", "profile"),
        carry=("scikit-learn", "scipy", "joblib", "threadpoolctl"),
    ),
    Prerequisite("nvidia-ml-py", "pynvml", (), ("train",), carry=("nvidia-ml-py",)),
    Prerequisite("torch.distributed", None, ("nccl",)),
)


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _probe_torch(name: str, device: str) -> tuple[bool, str]:
    """The CUDA and distributed prerequisites, asked of torch."""
    import torch

    if name == "cuda":
        if device == "cpu":
            return True, "not needed: the CPU dry run"
        if not torch.cuda.is_available():
            build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU build"
            return False, f"torch {torch.__version__} ({build}) sees no CUDA device"
        return True, f"torch {torch.__version__}, CUDA {torch.version.cuda}"
    import torch.distributed as dist

    if not dist.is_available():
        return False, "this torch build has no torch.distributed"
    if device == "cuda" and not dist.is_nccl_available():
        return False, "this torch build has no NCCL backend"
    return True, "nccl" if device == "cuda" else "gloo (the CPU dry run)"


def _fix(req: Prerequisite) -> str:
    if req.name in {"torch", "cuda"}:
        return "run on a machine whose python3 has a CUDA build of torch, or pass --device cpu"
    if not req.carry:
        return "use a torch build with it"
    pinned = []
    for dist_name in req.carry:
        try:
            pinned.append(f"{dist_name}=={metadata.version(dist_name)}")
        except metadata.PackageNotFoundError:
            pinned.append(dist_name)
    return (
        f"carry wheels: `{_WHEEL} {' '.join(pinned)}`, name .whl in carry and install them "
        "first (docs/performance.md, 'The GPU check')"
    )


def check_prerequisites(
    device: str,
    *,
    has_module: Callable[[str], bool] | None = None,
    probe: Callable[[str, str], tuple[bool, str]] | None = None,
) -> list[dict[str, Any]]:
    """Each prerequisite's state: name, ok, detail, needed_by, wanted_by and fix (when not ok).

    ``has_module`` says whether a module can be imported (default: it can be found);
    ``probe(name, device)`` answers for the prerequisites that are capabilities of torch
    (asked only when torch is there; default: torch is asked).
    """
    has_module = has_module or _has_module
    probe = probe or _probe_torch
    records = []
    torch_ok = has_module("torch")
    for req in PREREQUISITES:
        if req.module is not None:
            ok = has_module(req.module)
            detail = "importable" if ok else f"no module named {req.module!r}"
        elif torch_ok:
            ok, detail = probe(req.name, device)
        else:
            ok, detail = False, "torch is missing"
        record: dict[str, Any] = {
            "name": req.name,
            "ok": ok,
            "detail": detail,
            "needed_by": list(req.needed_by),
            "wanted_by": list(req.wanted_by),
        }
        if not ok:
            record["fix"] = _fix(req)
        records.append(record)
    return records


def blocked_steps(prerequisites: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Step name -> the missing prerequisites that stop it."""
    blocked: dict[str, list[str]] = {}
    for record in prerequisites:
        for name in record["needed_by"] if not record["ok"] else ():
            blocked.setdefault(name, []).append(record["name"])
    return blocked


def missing_line(record: Mapping[str, Any]) -> str:
    """The one line printed for a missing prerequisite."""
    stops = ", ".join(record["needed_by"]) or "none"
    weakens = f"; {', '.join(record['wanted_by'])} run without it" if record["wanted_by"] else ""
    return (
        f"gpu_check: missing {record['name']} ({record['detail']}); steps it stops: "
        f"{stops}{weakens}. To fix: {record.get('fix', '')}"
    )


Execute = Callable[[Step, float], dict[str, Any]]


def run_steps(
    steps: Sequence[Step],
    execute: Execute,
    *,
    blocked: Mapping[str, Sequence[str]],
    total_s: float,
    clock: Callable[[], float] = time.monotonic,
    on_step: Callable[[dict[str, dict[str, Any]]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Runs ``steps`` in order, each within its budget and what is left of ``total_s``.

    Args:
        steps: The steps, in order.
        execute: Runs one step with a timeout in seconds; returns its outcome (``status``,
            ``result``, ``checks``, ``error``). It must not raise.
        blocked: Step name -> the missing prerequisites that stop it (skipped).
        total_s: Seconds the whole run may take; a step gets the smaller of its budget and
            what is left, and is skipped when under :data:`MIN_STEP_S` is left.
        clock: Monotonic seconds.
        on_step: Called with the outcomes so far after each step (to save them).

    Returns:
        Step name -> outcome, with ``wall_s`` and ``budget_s`` added.
    """
    started = clock()
    outcomes: dict[str, dict[str, Any]] = {}
    for step in steps:
        left = total_s - (clock() - started)
        budget = min(step.budget_s, left)
        if blocked.get(step.name):
            outcome = skipped(f"missing prerequisite: {', '.join(blocked[step.name])}")
        elif budget < MIN_STEP_S:
            outcome = skipped(f"only {max(left, 0):.0f} s left of the {total_s:.0f} s run")
        else:
            begun = clock()
            outcome = dict(execute(step, budget))
            outcome["wall_s"] = clock() - begun
        outcomes[step.name] = {**outcome, "budget_s": budget if budget > 0 else 0.0}
        if on_step is not None:
            on_step(outcomes)
    return outcomes


def skipped(reason: str) -> dict[str, Any]:
    """The outcome of a step that did not run."""
    return {"status": "skipped", "result": {}, "checks": {}, "error": reason, "wall_s": 0.0}


def step_command(
    step: Step,
    out: Path,
    scratch: Path,
    timeout_s: float,
    *,
    device: str,
    quick: bool,
    gpu: str | None,
) -> list[str]:
    """The command that runs ``step`` in a process of its own (``--step``)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--step", step.name]
    command += ["--device", device, "--step-out", str(out), "--workdir", str(scratch)]
    command += ["--budget-s", f"{timeout_s:.0f}"]
    return command + (["--quick"] if quick else []) + (["--gpu", gpu] if gpu else [])


CommandFor = Callable[[Step, Path, Path, float], list[str]]


def subprocess_executor(workdir: Path, command_for: CommandFor) -> Execute:
    """Runs each step's command (``command_for(step, out_json, scratch_dir, timeout_s)``) in
    a new session; on timeout the whole session is killed and what the step had saved is
    kept."""
    from bench.gpu_steps import load_step_json

    def execute(step: Step, timeout_s: float) -> dict[str, Any]:
        out, scratch = workdir / f"{step.name}.json", workdir / step.name
        scratch.mkdir(parents=True, exist_ok=True)
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            command_for(step, out, scratch, timeout_s),
            cwd=REPO,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the step and anything it started
            proc.wait()
            saved = load_step_json(out) or {}
            error = f"stopped at its {timeout_s:.0f} s budget"
            return {**_partial(saved), "status": "timeout", "error": error}
        final = load_step_json(out)
        if final is None or final.get("status") not in STATUSES:
            why = f"signal {-code}" if code < 0 else f"exit status {code}"
            error = f"the step's process ended ({why}) before it finished"
            return {**_partial(final or {}), "status": "failed", "error": error}
        return final

    return execute


def _partial(saved: Mapping[str, Any]) -> dict[str, Any]:
    return {"result": saved.get("result", {}), "checks": saved.get("checks", {})}


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as strings ("nan", "inf"), so the JSON is strict."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def exit_status(outcomes: Mapping[str, Mapping[str, Any]]) -> int:
    """0 when every step passed, else 1."""
    return 0 if all(o["status"] == "ok" for o in outcomes.values()) else 1


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--quick", action="store_true", help="fewer epochs, trials and steps")
    parser.add_argument("--gpu", help="catalog GPU for peaks and predictions (default: detected)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "gpu_check.json")
    parser.add_argument("--total-s", type=float, default=DEFAULT_TOTAL_S)
    parser.add_argument("--steps", default=",".join(ALL), help=f"a subset of {','.join(ALL)}")
    parser.add_argument("--step", choices=ALL, help=argparse.SUPPRESS)  # a step's own process
    parser.add_argument("--step-out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--budget-s", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.steps.split(",")) - set(ALL))
    if unknown:
        parser.error(f"--steps: unknown {unknown}; the steps are {','.join(ALL)}")
    return args


def _write(path: Path, report: Mapping[str, Any]) -> None:
    from tuner import atomic

    atomic.write_json(path, json_safe(report), durable=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the check (or, with ``--step``, one step in this process); the exit status."""
    args = _parse(argv)
    if args.step is not None:
        from bench.gpu_steps import StepContext, run_step

        ctx = StepContext(args.device, args.quick, args.gpu, REPO, args.workdir, args.step_out)
        ctx.budget_s = args.budget_s
        return run_step(args.step, ctx)
    started = time.monotonic()
    prerequisites = check_prerequisites(args.device)
    for record in prerequisites:
        if not record["ok"]:
            print(missing_line(record), flush=True)
    report: dict[str, Any] = {
        "format": FORMAT,
        "tool": "bench/gpu_check.py",
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": args.device,
        "quick": args.quick,
        "total_s": args.total_s,
        "host": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "prerequisites": prerequisites,
        "steps": {},
        "headline": {},
    }

    def save(outcomes: dict[str, dict[str, Any]]) -> None:
        report.update(steps=outcomes, headline=headline(outcomes))
        report["wall_s"] = time.monotonic() - started
        _write(args.out, report)
        name, last = next(reversed(outcomes.items()))
        error = f": {last['error']}" if last.get("error") else ""
        print(f"gpu_check: {name} {last['status']} in {last['wall_s']:.1f} s{error}", flush=True)

    selected = [s for s in STEPS if s.name in args.steps.split(",")]
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:

        def command_for(step: Step, out: Path, scratch: Path, timeout_s: float) -> list[str]:
            return step_command(
                step, out, scratch, timeout_s, device=args.device, quick=args.quick, gpu=args.gpu
            )

        execute = subprocess_executor(Path(tmp), command_for)
        outcomes = run_steps(
            selected,
            execute,
            blocked=blocked_steps(prerequisites),
            total_s=args.total_s,
            on_step=save,
        )
    for key, value in report["headline"].items():
        print(f"  {key}: {value}")
    print(f"gpu_check: wrote {args.out} in {time.monotonic() - started:.0f} s", flush=True)
    return exit_status(outcomes)


if __name__ == "__main__":
    sys.exit(main())
