"""From a campaign, a profile and a catalog to a recommendation with its context (Advice).

Joins the pieces of the cost model: every catalog instance gets this profile's predicted
epoch on its GPU (:mod:`tuner.cost._transfer`), the campaign's ASHA geometry and
resources give the needs, and :func:`~tuner.cost._recommend.recommend` ranks them.
Pure: no Ray, no torch. Its report files are written by
:func:`tuner.report.write_recommendation`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.cost._catalog import Catalog, Instance
from tuner.cost._predict import Calibration
from tuner.cost._profile import Profile
from tuner.cost._recommend import CampaignNeeds, InstanceOption, Recommendation, recommend
from tuner.cost._transfer import estimate_epoch
from tuner.cost._work import AshaGeometry, SpotRisk
from tuner.errors import SpecError

__all__ = ["Advice", "advise", "campaign_needs", "instance_options", "option_name"]


def option_name(instance: Instance) -> str:
    """``cloud/region/instance_type``: unique within a catalog."""
    return f"{instance.cloud}/{instance.region}/{instance.instance_type}"


def campaign_needs(
    geometry: AshaGeometry, profile: Profile, *, gpus_per_trial: float, cpus_per_trial: float
) -> CampaignNeeds:
    """Start-up from the profile; geometry, GPUs and CPUs per trial from the campaign."""
    return CampaignNeeds(
        geometry=geometry,
        startup_s=profile.startup_s,
        cold_start_s=profile.cold_start_s,
        gpus_per_trial=gpus_per_trial,
        mem_gib_per_gpu=0.0,  # set once the options are known (see advise)
        cpus_per_trial=cpus_per_trial,
    )


def instance_options(
    catalog: Catalog,
    profile: Profile,
    needs: CampaignNeeds,
    *,
    precision: str | None = None,
    clouds: Sequence[str] = (),
    calibration: Calibration | None = None,
) -> tuple[list[InstanceOption], float]:
    """One option per catalog instance, with the profile's epoch predicted on its GPU.

    Returns:
        The options (an option whose GPU cannot be predicted has an infinite epoch and
        the reason in its note) and the memory one trial needs per GPU (0 if unknown).
    """
    options, mem = [], 0.0
    for instance in catalog.instances:
        if clouds and instance.cloud not in clouds:
            continue
        gpu = catalog.gpus[instance.gpu]
        try:
            est = estimate_epoch(
                profile, gpu.name, precision=precision, gpus=catalog.gpus, calibration=calibration
            )
        except SpecError as err:
            epoch_s, note = math.inf, f"no prediction: {err.problem}"
        else:
            epoch_s = est.shared_epoch_s(needs.trials_per_gpu)
            note = f"{est.method} from {profile.gpu_name or profile.device}, {est.precision}"
            mem = max(mem, est.mem_gib or 0.0)
        options.append(
            InstanceOption(
                name=option_name(instance),
                cloud=instance.cloud,
                region=instance.region,
                gpu=instance.gpu,
                gpu_count=instance.gpu_count,
                usd_per_hour_ondemand=instance.ondemand_usd_per_hour,
                usd_per_hour_spot=instance.spot_usd_per_hour,
                gpu_mem_gib=gpu.memory_gib,
                predicted_epoch_s=epoch_s,
                note=note,
                vcpus=instance.vcpus,
            )
        )
    return options, mem


@dataclass(frozen=True)
class Advice:
    """A recommendation with the context its reports print (see
    :func:`tuner.report.write_recommendation`)."""

    campaign: str
    recommendation: Recommendation
    profile: Profile
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the recommendation, the profile's headline figures, the notes."""
        return {
            "campaign": self.campaign,
            **self.recommendation.to_dict(),
            "profile": {
                "source": self.profile.source,
                "device": self.profile.device,
                "gpu_name": self.profile.gpu_name,
                "precision": self.profile.precision,
                **self.profile.summary(),
            },
            "notes": list(self.notes),
        }


def advise(
    campaign: str,
    geometry: AshaGeometry,
    profile: Profile,
    catalog: Catalog,
    *,
    budget_usd: float,
    deadline_h: float | None = None,
    spot: bool = False,
    gpus_per_trial: float = 1.0,
    cpus_per_trial: float = 0.0,
    precision: str | None = None,
    clouds: Sequence[str] = (),
    max_instances: int = 8,
    spot_risk: SpotRisk | None = None,
    runs: int = 200,
    provision_s: float = 0.0,
    calibration: Calibration | None = None,
) -> Advice:
    """Ranks the catalog's instances for a campaign measured by ``profile``.

    Args:
        campaign: Campaign name (titles).
        geometry: Trials, epochs and ASHA rungs.
        profile: What the trainable measured.
        catalog: GPUs and instances with prices.
        budget_usd: Dollars available.
        deadline_h: Wall-clock hours available, or None.
        spot: Price on spot.
        gpus_per_trial: GPUs each trial holds (a fraction shares a GPU).
        cpus_per_trial: vCPUs each trial holds (0: no limit from the host).
        precision: Math to predict for (default: see :func:`estimate_epoch`).
        clouds: Only these clouds (all when empty).
        max_instances: Most machines of one type to rent for the deadline.
        spot_risk: Preemption model for spot.
        runs: Simulated ASHA runs per estimate.
        provision_s: Billed seconds per machine before its first trial (boot, setup).
        calibration: Prediction efficiencies (default: shipped).

    Raises:
        SpecError: ``clouds`` leaves no instance.
    """
    needs = campaign_needs(
        geometry, profile, gpus_per_trial=gpus_per_trial, cpus_per_trial=cpus_per_trial
    )
    options, mem = instance_options(
        catalog, profile, needs, precision=precision, clouds=clouds, calibration=calibration
    )
    if not options:
        known = sorted({i.cloud for i in catalog.instances})
        raise SpecError(
            "<cli>",
            "--clouds",
            "no instance in the catalog is on these clouds",
            got=",".join(clouds),
            allowed=", ".join(known),
        )
    needs = dataclasses.replace(needs, mem_gib_per_gpu=mem)
    rec = recommend(
        options,
        needs,
        budget_usd=budget_usd,
        deadline_h=deadline_h,
        spot=spot,
        spot_risk=spot_risk,
        max_instances=max_instances,
        runs=runs,
        provision_s=provision_s,
    )
    summary = profile.summary()
    where = profile.gpu_name or profile.device
    notes = [
        f"Profile: {summary['trials']} trial(s) measured by {profile.source} on {where} "
        f"({profile.precision}): {summary['epoch_s']:.3g} s per epoch, "
        f"{summary['startup_s']:.3g} s start-up per trial, {summary['cold_start_s']:.3g} s "
        f"cold start per worker; memory {mem:.3g} GiB per trial"
        + (" (measured)" if summary["mem_measured"] else " (estimated)")
        + ".",
        f"Work: {geometry.trials} trials, <= {geometry.max_epochs} epochs, "
        + (
            f"ASHA rungs at {', '.join(map(str, geometry.decision_epochs()))} "
            f"(reduction factor {geometry.reduction_factor:g})"
            if geometry.asha
            else "FIFO"
        )
        + f"; {gpus_per_trial:g} GPU(s) per trial; each machine billed "
        f"{provision_s / 60:g} min to boot and set up.",
    ]
    if profile.device != "cuda":
        notes.append(
            "Measured on a CPU: GPU epoch times are rebuilt from the trainable's FLOPs, "
            "bytes and operation counts at calibrated GPU efficiencies, not measured. "
            "Profile on a GPU (`tuner profile` there) for a sharper estimate."
        )
    return Advice(campaign=campaign, recommendation=rec, profile=profile, notes=tuple(notes))
