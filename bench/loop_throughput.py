"""Throughput of the shared training loop against a bare hand-written PyTorch loop.

Both train the digits CNN (default hyperparameters) for the same epochs with the same
seed, optimizer, batch size, data on the device and torch threads, and both validate once
per epoch; the shared loop also measures, reports and checkpoints every epoch through a
:class:`~trainables._session.LocalSession`, as in a campaign. Repeats are interleaved so
drift in the machine's speed hits both alike, and the ratio is the median over repeats of
each back-to-back pair's ratio (robust to a single lucky or unlucky run). On CPU the ratio
of process CPU time is printed as well: with one torch thread it measures the loops' own
work even while other processes compete for the cores.

Usage::

    .venv/bin/python bench/loop_throughput.py [--device cpu|cuda] [--epochs N] [--repeats R]

Samples/s is training samples (epochs x train split) per second of wall time of the whole
run, including each loop's setup (data loading, model, optimizer, the shared loop's one-time
FLOP count). The steady-state ratio times epochs 2..N from the end of epoch 1 to the end of
the last epoch (train, validate, and for the shared loop report and checkpoint), which is
what a long trial sees. On CUDA it also
prints MFU: achieved TFLOPS (matmul/conv FLOPs per sample from ``FlopCounterMode``
times samples/s) over the GPU's peak dense bf16 TFLOPS.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import torch
import torch.nn.functional as F

from trainables import digits
from trainables._session import LocalSession

# Peak dense (no sparsity) bf16 tensor-core TFLOPS, from NVIDIA's data sheets: H100 SXM
# and H200 SXM 989 ("H100 Tensor Core GPU" / "H200 Tensor Core GPU" data sheets, 1,979
# with sparsity), A100 SXM 312 ("A100 Tensor Core GPU" data sheet, 624 with sparsity).
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0}
SEED = 0
BATCH_SIZE = 64
LR = 1e-3


class _TimedSession(LocalSession):
    """A LocalSession that notes when each epoch's report (and checkpoint) is done."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.report_times: list[float] = []

    def report(self, metrics: dict[str, Any], checkpoint_dir: str | None) -> None:
        super().report(metrics, checkpoint_dir)
        self.report_times.append(time.perf_counter())


# Epoch-end timestamps of the last run of each loop, for the steady-state figure.
EPOCH_ENDS: dict[str, list[float]] = {"shared": [], "bare": []}


def shared_loop(device: str, epochs: int, threads: int) -> tuple[float, float]:
    """Wall and CPU seconds to train ``epochs`` epochs with ``trainables`` (checkpointing)."""
    config = {
        "tuner_max_epochs": epochs,
        "tuner_seed": SEED,
        "tuner_device": device,
        "batch_size": BATCH_SIZE,
        "lr": LR,
    }
    with tempfile.TemporaryDirectory() as root:
        session = _TimedSession(root, use_gpus=device == "cuda", cpus=threads)
        t0, c0 = time.perf_counter(), time.process_time()
        digits.train(config, session)
        if device == "cuda":
            torch.cuda.synchronize()
        EPOCH_ENDS["shared"] = session.report_times
        return time.perf_counter() - t0, time.process_time() - c0


def bare_loop(device: str, epochs: int, threads: int) -> tuple[float, float]:
    """Wall and CPU seconds to train ``epochs`` epochs with a minimal hand-written loop."""
    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    dev = torch.device(device)
    task = digits.make_task({})
    t0, c0 = time.perf_counter(), time.process_time()
    x, y = task.x_train.to(dev), task.y_train.to(dev)
    xv, yv = task.x_val.to(dev), task.y_val.to(dev)
    model = digits.DigitsCNN(digits.DigitsCNNConfig()).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    order_rng = torch.Generator().manual_seed(SEED)
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else None
    ends: list[float] = []
    for _ in range(epochs):
        model.train()
        order = torch.randperm(len(x), generator=order_rng).to(dev)
        loss_sum = torch.zeros((), device=dev)
        for idx in torch.split(order, BATCH_SIZE):
            optimizer.zero_grad(set_to_none=True)
            if amp is not None:
                with amp:
                    loss = F.cross_entropy(model(x[idx]), y[idx])
            else:
                loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach() * len(idx)
        model.eval()
        with torch.no_grad():
            val_loss = F.cross_entropy(model(xv).float(), yv)
        (loss_sum / len(x)).item(), val_loss.item()  # one sync per epoch, like the shared loop
        ends.append(time.perf_counter())
    EPOCH_ENDS["bare"] = ends
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, time.process_time() - c0


def _peak_tflops(arg: float | None) -> float | None:
    if arg is not None:
        return arg
    name = torch.cuda.get_device_name()
    return next((peak for key, peak in PEAK_BF16_TFLOPS.items() if key in name), None)


def main(argv: list[str] | None = None) -> None:
    """Runs the comparison and prints samples/s, the ratio and (on CUDA) MFU."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both loops")
    parser.add_argument("--peak-tflops", type=float, default=None, help="overrides the table")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch.cuda.is_available() is False here.")

    samples = len(digits.make_task({}).x_train) * args.epochs
    shared_loop(args.device, 1, args.threads)  # warm-up: data load, allocator, kernels
    bare_loop(args.device, 1, args.threads)
    times: dict[str, list[float]] = {"shared": [], "bare": []}
    cpu: dict[str, list[float]] = {"shared": [], "bare": []}
    steady: dict[str, list[float]] = {"shared": [], "bare": []}
    for _ in range(args.repeats):
        for name, loop in (("shared", shared_loop), ("bare", bare_loop)):
            wall, cpu_s = loop(args.device, args.epochs, args.threads)
            times[name].append(wall)
            cpu[name].append(cpu_s)
            ends = EPOCH_ENDS[name]
            steady[name].append(ends[-1] - ends[0])  # epochs 2..N, setup excluded
    rate = {k: samples / statistics.median(v) for k, v in times.items()}
    pair_ratio = statistics.median(
        b / s for s, b in zip(times["shared"], times["bare"], strict=True)
    )
    print(f"device={args.device} epochs={args.epochs} repeats={args.repeats}", end=" ")
    print(f"threads={args.threads}")
    for name in ("shared", "bare"):
        runs = ", ".join(f"{samples / t:,.0f}" for t in times[name])
        print(f"{name:>6}: {rate[name]:>7,.0f} samples/s median (runs: {runs})")
    print(f" ratio: {pair_ratio:.3f} (shared / bare, whole runs incl. setup, median of pairs)")
    if args.epochs > 1:
        steady_ratio = statistics.median(
            b / s for s, b in zip(steady["shared"], steady["bare"], strict=True)
        )
        print(
            f" ratio: {steady_ratio:.3f} steady state (epochs 2..{args.epochs}: train, "
            "validate, report, checkpoint; one-time setup excluded; target >= 0.95 on CPU)"
        )
    if args.device == "cpu":
        cpu_ratio = statistics.median(
            b / s for s, b in zip(cpu["shared"], cpu["bare"], strict=True)
        )
        print(f" ratio: {cpu_ratio:.3f} by process CPU time (median of pairs)")
    if args.device == "cuda":
        from trainables._measure import flops_per_sample

        task = digits.make_task({})
        model = task.make_model().cuda()
        xb, yb = task.x_train[:BATCH_SIZE].cuda(), task.y_train[:BATCH_SIZE].cuda()
        flops = flops_per_sample(model, F.cross_entropy, xb, yb, torch.device("cuda"))
        peak = _peak_tflops(args.peak_tflops)
        for name in ("shared", "bare"):
            achieved = flops * rate[name] / 1e12
            mfu = f"{achieved / peak:.2%}" if peak else "unknown peak (pass --peak-tflops)"
            print(f"{name:>6}: {achieved:.3f} TFLOPS achieved, MFU {mfu}")


if __name__ == "__main__":
    main()
