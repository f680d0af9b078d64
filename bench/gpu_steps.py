"""The steps of bench/gpu_check.py, each run in a process of its own by the driver there:
env, nccl and tests here, train, profile and mfu in bench/gpu_train.py.

A step fills :attr:`StepContext.result` with figures and :attr:`StepContext.checks` with
named pass/fail verdicts, and saves both after each part (:meth:`StepContext.save`), so a
step stopped at its time budget still hands back what it measured. Every step runs on CUDA
(``device="cuda"``) or, as the CPU dry run, on the CPU (``device="cpu"``), through the same
code; ``quick`` shrinks the work (fewer epochs, trials and steps).

No Ray and no Optuna: the trainables run through a
:class:`~trainables._session.LocalSession`, and only the pure core of tuner (``tuner.cost``,
``tuner.spec``) is imported.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.cost import GpuSpec

__all__ = [
    "DRY_RUN_GPU",
    "StepContext",
    "env",
    "gpu_test_files",
    "load_step_json",
    "nccl",
    "outcomes_from_log",
    "parse_junit",
    "run_step",
    "step_function",
    "target_gpu",
    "tests",
]

# The GPU a CPU dry run predicts for and reads peaks of (no GPU to detect there).
DRY_RUN_GPU = "H100-SXM5"
_GIB = 2**30


@dataclass
class StepContext:
    """What a step runs with, and what it hands back.

    Attributes:
        device: "cuda" or "cpu" (the dry run).
        quick: Shrink the work.
        gpu: Catalog GPU to read peaks of and predict for (None: the one detected).
        repo: The repository root (tests/ and search_spaces/ are read from there).
        workdir: A folder of the step's own for scratch files.
        out: Where :meth:`save` writes the step's JSON.
        budget_s: Seconds the driver gives the step before it kills it (None: no limit).
        result: Figures.
        checks: Verdicts by name.
    """

    device: str
    quick: bool
    gpu: str | None
    repo: Path
    workdir: Path
    out: Path
    budget_s: float | None = None
    result: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        """Whether the step runs on CUDA."""
        return self.device == "cuda"

    @property
    def cpus(self) -> int | None:
        """Torch threads of a training run: one in the dry run (tiny models run fastest on
        one), torch's own choice on CUDA."""
        return None if self.cuda else 1

    def check(self, name: str, ok: bool) -> None:
        """Records a verdict and saves."""
        self.checks[name] = bool(ok)
        self.save()

    def save(self, status: str = "running", error: str | None = None) -> None:
        """Writes the step's JSON (status, result, checks, error) atomically."""
        from tuner import atomic

        data = {"status": status, "result": self.result, "checks": self.checks, "error": error}
        atomic.write_json(self.out, data, durable=False)


def target_gpu(ctx: StepContext) -> tuple[GpuSpec | None, str]:
    """The catalog GPU of this run and how it was chosen (``--gpu``, detected, dry run)."""
    from tuner.cost import find_gpu, load_gpus
    from tuner.cost._catalog import resolve_gpu

    gpus = load_gpus()
    if ctx.gpu:
        return find_gpu(gpus, ctx.gpu, source="--gpu"), "--gpu"
    if ctx.cuda:
        import torch

        return resolve_gpu(gpus, torch.cuda.get_device_name(0)), "detected"
    return find_gpu(gpus, DRY_RUN_GPU), "dry-run default"


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def matmul_tflops(device: str, n: int, reps: int) -> float:
    """Achieved TFLOP/s of an n x n x n matrix product (bf16 on CUDA, fp32 on a CPU)."""
    import torch

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    _sync(device)
    started = time.perf_counter()
    for _ in range(reps):
        a @ b
    _sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - started) / 1e12


def _nccl_version() -> str:
    import torch

    return ".".join(str(v) for v in _untyped(torch.cuda.nccl.version)())


def _untyped(fn: Any) -> Any:
    """``fn`` as Any: torch leaves some functions unannotated."""
    return fn


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return str(pynvml.nvmlSystemGetDriverVersion())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no pynvml, or NVML refuses: the version is only informative
        return None


def env(ctx: StepContext) -> None:
    """The machine: Python, torch, CUDA, the GPU and its catalog entry, a matmul's TFLOP/s."""
    import torch

    r = ctx.result
    r.update(
        python=platform.python_version(),
        torch=torch.__version__,
        cuda_runtime=torch.version.cuda,
        cpus=os.cpu_count(),
        device=ctx.device,
    )
    if ctx.cuda:
        props = torch.cuda.get_device_properties(0)
        r.update(
            gpu_name=props.name,
            capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            memory_gib=props.total_memory / _GIB,
            bf16_supported=torch.cuda.is_bf16_supported(),
            cudnn=_untyped(torch.backends.cudnn.version)(),
            nccl=_nccl_version(),
            driver=_driver_version(),
        )
    gpu, how = target_gpu(ctx)
    r["catalog_gpu"], r["catalog_gpu_from"] = (gpu.name if gpu else None), how
    ctx.check("the GPU is in the catalog", gpu is not None)
    n = (4096 if ctx.quick else 8192) if ctx.cuda else 512
    r["matmul"] = {"n": n, "dtype": "bf16" if ctx.cuda else "fp32"}
    r["matmul"]["tflops"] = matmul_tflops(ctx.device, n, reps=10)
    ctx.check("a matrix product runs", r["matmul"]["tflops"] > 0)


def gpu_test_files(tests: Path) -> list[Path]:
    """Test files that hold CUDA tests (``pytest.mark.gpu`` or a CUDA ``skipif``).

    Only these are collected: others may import Ray or Optuna, absent on a lent GPU.
    """
    marks = ("pytest.mark.gpu", "cuda.is_available()")
    return sorted(
        path
        for path in tests.rglob("test_*.py")
        if any(mark in path.read_text(encoding="utf-8") for mark in marks)
    )


def parse_junit(text: str) -> dict[str, Any]:
    """Counts and per-test outcomes of a pytest JUnit XML report.

    Returns:
        ``counts`` (passed, failed, error, skipped) and ``tests``: one dict per test case
        with ``id`` (``module::name``), ``outcome``, ``time_s`` and, unless passed, a
        ``message`` (cut to 300 characters).
    """
    root = ET.fromstring(text)
    counts = dict.fromkeys(("passed", "failed", "error", "skipped"), 0)
    tests = []
    for case in root.iter("testcase"):
        outcome, message = "passed", None
        for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            found = case.find(tag)
            if found is not None:
                outcome, message = name, (found.get("message") or found.text or "")[:300]
                break
        counts[outcome] += 1
        entry: dict[str, Any] = {
            "id": f"{case.get('classname', '')}::{case.get('name', '')}",
            "outcome": outcome,
            "time_s": float(case.get("time") or 0.0),
        }
        if message is not None:
            entry["message"] = message
        tests.append(entry)
    return {"counts": counts, "tests": tests}


# pytest's verbose line for a finished test: "tests/x.py::test_y[a] PASSED    [ 14%]".
_VERBOSE_LINE = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.M)
# Seconds before the driver's kill at which pytest is stopped, to keep what it printed.
_TESTS_MARGIN_S = 10.0


def outcomes_from_log(text: str) -> dict[str, str]:
    """Test id -> outcome (lower case) from pytest's ``-v`` output, as far as it got."""
    return {m.group(1): m.group(2).lower() for m in _VERBOSE_LINE.finditer(text)}


def tests(ctx: StepContext) -> None:
    """The CUDA-marked tests (``-m gpu``) of the files that hold CUDA tests, with pytest.

    pytest is stopped a little before the step's budget runs out; the tests it finished by
    then are read from its verbose output.
    """
    files = gpu_test_files(ctx.repo / "tests")
    report, log = ctx.workdir / "junit.xml", ctx.workdir / "pytest.log"
    ctx.result["files"] = [str(f.relative_to(ctx.repo)) for f in files]
    command = [sys.executable, "-m", "pytest", "-v", "-m", "gpu", "-p", "no:cacheprovider"]
    command += ["--continue-on-collection-errors", f"--junitxml={report}"]
    limit = ctx.budget_s - _TESTS_MARGIN_S if ctx.budget_s is not None else None
    with log.open("w", encoding="utf-8") as out:
        try:
            proc = subprocess.run(
                [*command, *map(str, files)],
                cwd=ctx.repo,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=limit,
            )
            ctx.result["returncode"] = proc.returncode
        except subprocess.TimeoutExpired:
            ctx.result["returncode"] = None
    text = log.read_text(encoding="utf-8", errors="replace")
    ctx.result["output_tail"] = text[-2000:]
    ctx.check("pytest finished within the step's budget", report.is_file())
    if not report.is_file():
        ctx.result["finished"] = outcomes_from_log(text)
        return
    parsed = parse_junit(report.read_text(encoding="utf-8"))
    ctx.result.update(parsed)
    counts = parsed["counts"]
    ctx.check("no CUDA test failed", counts["failed"] == 0 and counts["error"] == 0)
    if ctx.cuda:  # a CUDA test skipped where CUDA exists is a test that did not run
        ctx.check("every CUDA test ran", counts["passed"] > 0 and counts["skipped"] == 0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nccl(ctx: StepContext) -> None:
    """A one-GPU NCCL process group: all-reduce, broadcast, barrier and a DDP step (gloo on a
    CPU)."""
    import copy
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch import nn

    backend = "nccl" if ctx.cuda else "gloo"
    device = torch.device("cuda", 0) if ctx.cuda else torch.device("cpu")
    if ctx.cuda:
        torch.cuda.set_device(device)
    url = f"tcp://127.0.0.1:{_free_port()}"
    dist.init_process_group(
        backend, init_method=url, rank=0, world_size=1, timeout=timedelta(seconds=60)
    )
    try:
        r = ctx.result
        r.update(backend=backend, world_size=dist.get_world_size())
        if ctx.cuda:
            r["nccl_version"] = _nccl_version()
        x = torch.full(((64 if ctx.cuda else 4) * 2**20 // 4,), 2.0, device=device)
        dist.all_reduce(x)
        _sync(ctx.device)
        reps = 20 if ctx.cuda else 5
        started = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(x)
        _sync(ctx.device)
        seconds = (time.perf_counter() - started) / reps
        r.update(all_reduce_bytes=x.numel() * 4, all_reduce_ms=seconds * 1e3)
        r["all_reduce_gb_s"] = x.numel() * 4 / seconds / 1e9
        ctx.check("all_reduce over one rank keeps the tensor", bool((x == 2.0).all()))
        y = torch.arange(8.0, device=device)
        dist.broadcast(y, src=0)
        dist.barrier()
        ctx.check("broadcast and barrier", bool((y == torch.arange(8.0, device=device)).all()))
        torch.manual_seed(0)
        plain = nn.Linear(64, 8).to(device)
        wrapped = copy.deepcopy(plain)
        ddp = nn.parallel.DistributedDataParallel(wrapped, device_ids=[0] if ctx.cuda else None)
        inputs = torch.randn(32, 64, device=device)
        ddp(inputs).square().mean().backward()
        plain(inputs).square().mean().backward()
        same = all(
            a.grad is not None and b.grad is not None and torch.allclose(a.grad, b.grad)
            for a, b in zip(wrapped.parameters(), plain.parameters(), strict=True)
        )
        ctx.check("a DDP step's gradients match a plain step's", same)
    finally:
        dist.destroy_process_group()


def step_function(name: str) -> Callable[[StepContext], None]:
    """The function of the step called ``name``."""
    from bench import gpu_train

    steps: dict[str, Callable[[StepContext], None]] = {
        "env": env,
        "tests": tests,
        "train": gpu_train.train,
        "profile": gpu_train.profile,
        "mfu": gpu_train.mfu_step,
        "nccl": nccl,
    }
    return steps[name]


def run_step(name: str, ctx: StepContext) -> int:
    """Runs one step and saves its final JSON: ok when every check passed, else failed."""
    import traceback

    ctx.save()
    try:
        step_function(name)(ctx)
    except Exception:
        ctx.save("failed", traceback.format_exc()[-3000:])
        return 1
    # The lent GPU machine has neither; a step that needs them would fail there.
    ctx.checks["imports neither ray nor optuna"] = not {"ray", "optuna"} & set(sys.modules)
    failed = [name for name, ok in ctx.checks.items() if not ok]
    ctx.save("failed" if failed else "ok", f"failed checks: {failed}" if failed else None)
    return 0


def load_step_json(path: Path) -> dict[str, Any] | None:
    """A step's saved JSON, or None when it wrote none (or only part of one)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
