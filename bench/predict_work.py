"""Campaign-work prediction against real local campaigns: trial-epochs and trial-seconds.

Each round profiles the trainable (`tuner profile`: 16 configurations x 12 epochs), runs a
real 64-trial ASHA campaign with that profile (real Ray, Optuna and torch on the CPU), and
compares the prediction the campaign wrote before its first trial with what its trials
consumed (Ray's time_total_s). The campaign is the one of
tests/integration/test_work_prediction.py (see its docstring for why this geometry and this
space). Prints each round and, over the rounds, the median and worst absolute error and how
many rounds were within the 10 % target.

The trial-seconds error of one round carries the machine's drift between the profile and
the campaign, minutes apart; that is why this is a bench, run over several rounds, and not
a timed unit test. Each round also prints the mean epoch the profile measured next to the
mean epoch of the campaign's trials: where those differ, the machine (or the load on it)
changed between the two.

    .venv/bin/python bench/predict_work.py [--rounds 3]      # ~2 min a round on 2 cores
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.test_work_prediction import CAMPAIGN


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import tuner
    from tuner import rundir
    from tuner._ray.cluster import RayOptions
    from tuner._ray.driver import run_campaign
    from tuner.spec import parse_campaign

    spec = parse_campaign(CAMPAIGN, "work-prediction.yaml")
    options = RayOptions(num_cpus=2)
    epochs_err: list[float] = []
    seconds_err: list[float] = []
    print(
        f"{'round':>5}  {'epochs pred':>11} {'used':>5} {'err':>7}  "
        f"{'seconds pred':>12} {'used':>6} {'err':>7}  {'epoch profiled':>14} {'in campaign':>11}"
    )
    for n in range(1, args.rounds + 1):
        profile = tuner.profile(spec, trials=16, epochs=12, num_cpus=2)
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp) / spec.name
            run_campaign(spec, run_dir, options, profile=profile, stream=io.StringIO())
            cost = json.loads((run_dir / rundir.SUMMARY_FILE).read_text())["cost"]
        p, a, e = cost["predicted"], cost["actual"], cost["error"]
        epochs_err.append(e["trial_epochs"])
        seconds_err.append(e["trial_s"])
        print(
            f"{n:>5}  {p['trial_epochs']:>11.1f} {a['trial_epochs']:>5} "
            f"{e['trial_epochs']:>+7.1%}  {p['trial_s']:>12.1f} {a['trial_s']:>6.1f} "
            f"{e['trial_s']:>+7.1%}  {p['epoch_s']:>13.4f}s {a['epoch_s']:>10.4f}s",
            flush=True,
        )
    for name, errs in (("trial-epochs", epochs_err), ("trial-seconds", seconds_err)):
        absolute = [abs(x) for x in errs]
        within = sum(x <= 0.10 for x in absolute)
        print(
            f"{name}: median |error| {statistics.median(absolute):.1%}, worst "
            f"{max(absolute):.1%}, mean {statistics.fmean(errs):+.1%}; "
            f"{within}/{len(errs)} rounds within 10 %"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
