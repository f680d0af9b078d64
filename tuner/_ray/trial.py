"""The function Ray Tune runs for every trial: resolves the campaign's trainable and calls it.

One wrapper for every campaign keeps actor reuse possible (Tune reuses a worker only for the
same trainable) and keeps the user's function an ordinary ``fn(config) -> None``.
"""

from __future__ import annotations

from typing import Any

from tuner.contract import (
    CHECKPOINT_EVERY_KEY,
    MAX_EPOCHS_KEY,
    SEED_KEY,
    STOP_KEY,
    TRAINABLE_KEY,
    WORKERS_KEY,
)
from tuner.spec import CampaignSpec


def run_trial(config: dict[str, Any]) -> None:
    """Runs one trial of a campaign: ``config[TRAINABLE_KEY]`` names the trainable."""
    from tuner.spec import resolve_trainable

    fn = resolve_trainable(str(config[TRAINABLE_KEY]))
    fn(config)


def data_parallel(spec: CampaignSpec) -> bool:
    return spec.resources.workers > 1


def tune_trainable(spec: CampaignSpec) -> Any:
    if data_parallel(spec):
        # Ray Train V1's TorchTrainer is itself a Tune trainable: rank 0's reports and
        # checkpoints are Tune's, so ASHA stops, retries and resumes work as for one worker.
        # (V2 inside a Tune trial hangs on every stop here: its cleanup needs the dashboard.)
        from ray.train import ScalingConfig
        from ray.train.torch import TorchTrainer

        gpu = spec.resources.gpu
        per_worker = {"CPU": spec.resources.cpu, **({"GPU": gpu} if gpu > 0 else {})}
        return TorchTrainer(
            run_trial,
            scaling_config=ScalingConfig(
                num_workers=spec.resources.workers,
                use_gpu=gpu > 0,
                resources_per_worker=per_worker,
            ),
        )
    from ray import tune

    resources = {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    return tune.with_resources(run_trial, resources)


def service_config(spec: CampaignSpec, stop_key: str) -> dict[str, Any]:
    """The constant part of every trial's config: fixed settings and reserved keys."""
    return {
        STOP_KEY: stop_key,
        **dict(spec.fixed),
        **({WORKERS_KEY: spec.resources.workers} if data_parallel(spec) else {}),
        TRAINABLE_KEY: spec.trainable,
        MAX_EPOCHS_KEY: spec.budget.max_epochs,
        SEED_KEY: spec.sampler.seed if spec.sampler.seed is not None else 0,
        CHECKPOINT_EVERY_KEY: spec.checkpoint.every,
    }
