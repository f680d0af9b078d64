"""Before a campaign writes anything: the experiment trackers it names can be reached.

Apart from :mod:`tuner._ray.tracking` (whose Ray callbacks import mlflow and wandb, over a
second, and are loaded only for a campaign that tracks): this check runs at every start.
"""

from __future__ import annotations

from tuner.errors import TunerError
from tuner.spec import CampaignSpec, WandbMode
from tuner.tracking import check_store, require

__all__ = ["check_trackers"]


def check_trackers(spec: CampaignSpec) -> None:
    """Before anything is written: the trackers' packages are installed (else the extra
    to install is named) and an online W&B run has an API key (W&B's own check).

    Raises:
        TunerError: A tracker's package is missing, or W&B online has no API key.
    """
    tracking = spec.tracking
    if tracking is None:
        return
    if tracking.mlflow is not None:
        check_store(spec)
    if tracking.wandb is not None:
        require("wandb", "wandb", "tracking: wandb")
        if tracking.wandb.mode is WandbMode.ONLINE:
            from ray.air.integrations.wandb import _set_api_key

            try:
                _set_api_key()
            except ValueError:
                raise TunerError(
                    "W&B's online mode needs an API key, and none is set",
                    source=spec.source,
                    path="tracking.wandb.mode",
                    got=tracking.wandb.mode.value,
                    fix="set WANDB_API_KEY (or run `wandb login`), or log offline: "
                    "tracking.wandb.mode: offline (`wandb sync` uploads the runs later)",
                ) from None
