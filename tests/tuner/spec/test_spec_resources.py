"""A trial's resources, defined once (tuner.spec.Resources): the bundle and per-trial totals."""

from __future__ import annotations

from tuner.spec import Resources


def test_a_cpu_trial_asks_for_cpus_only_and_holds_no_gpu() -> None:
    resources = Resources(cpu=2.0)
    assert resources.bundle() == {"CPU": 2.0}
    assert resources.gpus_per_trial == 0.0
    assert resources.cpus_per_trial == 2.0


def test_a_data_parallel_trial_holds_each_workers_share() -> None:
    resources = Resources(cpu=4.0, gpu=0.5, workers=3)
    assert resources.bundle() == {"CPU": 4.0, "GPU": 0.5}  # one worker's bundle
    assert resources.gpus_per_trial == 1.5
    assert resources.cpus_per_trial == 12.0
