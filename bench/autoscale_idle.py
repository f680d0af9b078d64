"""GPU-node idle share and ledger accuracy of a campaign on Ray's real autoscaler.

Starts Ray's ``fake_multinode`` autoscaler (logical GPUs; tests/fakecluster.py), runs a
TPE + ASHA campaign whose trials each need a GPU (so every trial runs on an autoscaled GPU
node; epochs are sleeps, see bench/sleepy.py), and prints:

- GPU-node idle time as a share of GPU-node time during the campaign (target <= 10%);
- the ledger's node-seconds against the nodes' real lifetimes, read from /proc
  independently of Ray, both clipped to the campaign's window (target error <= 2%).

    python bench/autoscale_idle.py [--trials 32] [--max-epochs 9] [--epoch-s 2] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakecluster import FakeCluster

RATE = "3.6"  # $/h per GPU node, by label


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--max-epochs", type=int, default=9)
    parser.add_argument("--workers", type=int, default=2, help="GPU nodes at most")
    parser.add_argument("--idle-timeout", type=float, default=6.0, help="seconds")
    parser.add_argument("--epoch-s", type=float, default=2.0, help="seconds per epoch")
    args = parser.parse_args()

    from tuner._ray.cluster import RayOptions
    from tuner._ray.driver import run_campaign
    from tuner.spec import parse_campaign

    node_types = {
        "gpu": {
            "resources": {"CPU": 1, "GPU": 1, "accelerator_type:A100": 1},
            "labels": {"tuner.io/usd-per-hour": RATE},
            "min_workers": 0,
            "max_workers": args.workers,
        }
    }
    data = {
        "name": "autoscale-bench",
        "trainable": "sleepy:train",
        "metric": "val_acc",
        "mode": "max",
        "space": {"x": {"type": "float", "low": 0.0, "high": 1.0}},
        "budget": {"trials": args.trials, "max_epochs": args.max_epochs},
        "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 3},
        "sampler": {"type": "tpe", "seed": 0},
        "resources": {"cpu": 1, "gpu": 1},
        "fixed": {"epoch_s": args.epoch_s},
    }
    spec = parse_campaign(data, "bench.yaml")
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeCluster(
            node_types=node_types, head_resources={"CPU": 1}, idle_timeout_s=args.idle_timeout
        ) as cluster,
    ):
        run_dir = Path(tmp) / "runs" / spec.name
        t0 = time.time()
        result = run_campaign(
            spec,
            run_dir,
            RayOptions(address=cluster.address, cluster_config=cluster.config_path),
        )
        wall = time.time() - t0
        ledger = json.loads((run_dir / "ledger.json").read_text())
        truth = cluster.lifetimes()
    start, end = ledger["sessions"][0]
    ledger_s = true_s = 0.0
    for node in ledger["nodes"]:
        if node["gpus"] <= 0:
            continue
        n_end = node["end"] if node["end"] is not None else max(end, node["last_seen"])
        ledger_s += max(0.0, min(n_end, end) - max(node["start"], start))
    for t_start, t_end in truth.values():
        stop = t_end if t_end is not None else end
        true_s += max(0.0, min(stop, end) - max(t_start, start))
    for node in ledger["nodes"]:
        if node["gpus"] > 0 and node["node_id"] in truth:
            t_start, t_end = truth[node["node_id"]]
            print(
                f"  node {node['node_id'][-6:]}: start ledger-/proc "
                f"{node['start'] - t_start:+.2f} s"
                f", end ledger-/proc "
                + (f"{node['end'] - t_end:+.2f} s" if node["end"] and t_end else "(alive)")
            )
    totals = ledger["totals"]
    idle = totals["gpu_node_idle_share"]
    print(
        f"campaign: {spec.budget.trials} trials x <= {spec.budget.max_epochs} epochs, "
        f"1 GPU each, <= {args.workers} GPU nodes; {wall:.1f} s; "
        f"status {result.summary['status']}"
    )
    print(f"GPU nodes: {len(truth)} launched; ledger ${totals['usd']:.4f} at ${RATE}/h")
    print(f"GPU-node idle share: {100 * idle:.1f}% of GPU-node time (target <= 10%)")
    error = (ledger_s - true_s) / true_s
    print(
        f"GPU node-seconds in the campaign window: ledger {ledger_s:.1f} s, "
        f"/proc lifetimes {true_s:.1f} s, error {100 * error:+.2f}% (target <= 2%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
