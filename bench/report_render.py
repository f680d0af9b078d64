"""How long ``tuner report`` takes for a campaign of 100 trials (target: < 10 s, 2 cores).

Runs a real 100-trial TPE + ASHA campaign of a trivial trainable (bench/sleepy.py with
0.05 s epochs, 9 epochs at most, rungs 1 and 3) into a temporary run folder with the
end-of-run report off, then times :func:`tuner.report.write_report` on it (the first call
pays matplotlib's import; the rest are warm) and the whole ``tuner report`` command as a
fresh process (imports included), and prints the seconds.

    .venv/bin/python bench/report_render.py [--trials 100] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ["TUNER_NO_REPORT"] = "1"
    from tuner._ray.cluster import RayOptions
    from tuner._ray.driver import run_campaign
    from tuner.spec import parse_campaign

    data = {
        "name": "report-bench",
        "trainable": "sleepy:train",
        "metric": "val_acc",
        "mode": "max",
        "space": {
            "x": {"type": "float", "low": 0.0, "high": 1.0},
            "y": {"type": "int", "low": 1, "high": 8},
            "z": {"type": "categorical", "choices": ["a", "b", "c"]},
        },
        "budget": {"trials": args.trials, "max_epochs": 9},
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 3},
        "sampler": {"type": "tpe", "seed": 0},
        "resources": {"cpu": 1},
        "fixed": {"epoch_s": 0.05},
    }
    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        run_dir = Path(tmp) / "runs" / "report-bench"
        with open(os.devnull, "w") as quiet:
            run_campaign(
                parse_campaign(data, "report-bench.yaml"),
                run_dir,
                RayOptions(num_cpus=2),
                stream=quiet,
            )
        from tuner.report import write_report

        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            write_report(run_dir)
            times.append(time.perf_counter() - start)
        size = (run_dir / "report.html").stat().st_size
        import subprocess

        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tuner.cli", "report", str(run_dir)],
            check=True,
            capture_output=True,
        )
        cli_s = time.perf_counter() - start
    print(
        f"report of {args.trials} trials: first {times[0]:.2f} s (cold: matplotlib import), "
        f"median {statistics.median(times):.2f} s over {args.rounds} (target < 10 s); "
        f"report.html {size / 1024:.0f} KiB; `tuner report` as a fresh process {cli_s:.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
