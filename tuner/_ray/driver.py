"""Runs a campaign: a new one into its run folder, or a stopped one resumed from it.

The Ray glue's entry points: :func:`run_campaign` and :func:`resume_campaign` start or join
Ray, build the Tune run (:mod:`tuner._ray.build`), keep the budget guard and the failure
watch for its length, and finish it (:mod:`tuner.finish`). Everything they write lands in
the run folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

import optuna
import ray
from ray import tune

from tuner import atomic, rundir
from tuner._ray.build import (
    build_tuner,
    campaign_environment,
    experiment_path,
    restore_tuner,
)
from tuner._ray.campaign import Campaign, make_guard
from tuner._ray.cluster import (
    ClusterView,
    RayOptions,
    capacity_requested,
    check_prices,
    is_joined,
    max_concurrent_trials,
    ray_session,
    read_cluster,
    refuse_infeasible,
)
from tuner._ray.failures import FailureWatch
from tuner._ray.jobs import SUBMISSION_ENV, status_file_name
from tuner._ray.progress import running_document
from tuner._ray.snapshot import (
    ORPHAN_DIR,
    recover_trial_logs,
    reopen_search,
    repair_snapshot,
    set_aside_orphans,
)
from tuner._ray.tracker_checks import check_trackers
from tuner.budget import Ledger, make_pricer, read_ledger
from tuner.closing import closing_text
from tuner.cost import AshaGeometry, Profile
from tuner.cost._reality import PREDICTION_FILE, predict_cost
from tuner.errors import RunFolderError
from tuner.finish import (
    close_unstarted,
    failed_trial_count,
    final_trial_ids,
    predicted_vs_actual,
    write_report_safely,
    write_summary,
)
from tuner.rundir import is_uri, upload
from tuner.spec import CampaignSpec, Mode, load_campaign
from tuner.standings import Standings
from tuner.status import ended_document
from tuner.stop import clear_stop_request
from tuner.study import check_reachable, checkpoint_study, name_metrics, open_study
from tuner.summary import load_rows, standings
from tuner.terminal import fit, terminal_width
from tuner.tracking import close_parent_run, open_parent_run
from tuner.warm_start import plan_warm_start, seed_study


@dataclass(frozen=True)
class CampaignResult:
    """What a finished (or stopped) campaign produced."""

    run_dir: Path
    summary: dict[str, Any]


def run_campaign(
    spec: CampaignSpec,
    run_dir: Path,
    options: RayOptions | None = None,
    *,
    stream: TextIO | None = None,
    code_dirs: list[str] | None = None,
    profile: Profile | None = None,
    usd_per_gpu_hour: float = 0.0,
    storage: str | None = None,
    watchers: Sequence[tune.Callback] = (),
) -> CampaignResult:
    """Runs a new campaign into ``run_dir`` (which must not exist yet).

    Args:
        spec: The validated campaign.
        run_dir: The run folder to create, e.g. ``runs/<name>``.
        options: Where Ray runs; default an embedded local Ray.
        stream: Where progress goes (default stdout).
        code_dirs: Folders the trainable was imported from (recorded for resume).
        profile: A profile of the trainable; with it the prediction written at the start
            (prediction.json) covers trial-seconds, GPU-hours and dollars, not only work,
            and the budget guard can cap concurrency before the first epoch is measured.
        usd_per_gpu_hour: What a GPU-hour costs here, for the predicted vs actual dollars
            (0 for a local run; the ledger prices nodes itself, see ``pricing``).
        storage: A URI Ray Tune supports (s3://, gs://, file://...) for the experiment's
            checkpoints and state, as ``RunConfig.storage_path``; trials on any node write
            there. The run folder keeps the study and the ledger and is copied to
            ``<storage>/<run folder name>/`` at the end. None: all in the run folder.
        watchers: More Tune callbacks that only watch the run (``tuner profile``'s
            progress); Tune pickles them with the experiment.

    Returns:
        The run folder and its summary.

    Raises:
        TunerError: The run folder exists, or no node can ever hold one trial (nothing is
            written then).
    """
    if run_dir.exists():
        raise RunFolderError(
            str(run_dir),
            "run folder exists already.",
            fix=f"`tuner resume {run_dir}` to continue it, or choose another --name.",
        )
    if is_uri(storage):
        rundir.check_storage_uri(str(storage), source="run_campaign", path="storage")
    if spec.study_storage is not None:  # an unreachable database: an error, nothing written
        check_reachable(spec.study_storage, source=spec.source, path="study_storage")
    warm = plan_warm_start(spec)  # a source that cannot seed it: an error, nothing written
    check_trackers(spec)  # a tracker not installed or not reachable: likewise
    options = options or RayOptions()
    pricer = make_pricer(spec)
    with campaign_environment(spec), ray_session(options):
        joined = is_joined(options)
        cluster = read_cluster(options, joined=joined)
        refuse_infeasible(spec, cluster, autoscaler_unknown=joined and not cluster.autoscaling)
        check_prices(pricer, cluster)
        run_dir.mkdir(parents=True)
        stop_key = f"stop:{spec.name}:{uuid.uuid4().hex}"
        rundir.write_yaml(run_dir / rundir.CAMPAIGN_FILE, spec.to_dict())
        # In a shared store, each run's study has a name of its own.
        study = (
            {
                "study_storage": spec.study_storage,
                "study_name": f"{run_dir.name}-{uuid.uuid4().hex[:8]}",
            }
            if spec.study_storage is not None
            else {}
        )
        atomic.write_json(
            run_dir / rundir.RUN_FILE,
            {
                "code_dirs": list(code_dirs or []),
                "stop_key": stop_key,
                **({"storage": storage} if is_uri(storage) else {}),
                **study,
                **({"warm_start": warm.to_dict()} if warm is not None else {}),
            },
        )
        concurrent = max_concurrent_trials(spec, ray.cluster_resources(), cluster)
        guard = make_guard(
            spec,
            run_dir,
            ledger=Ledger(),
            pricer=pricer,
            cluster=cluster,
            concurrent=concurrent,
            profile=profile,
            stream=stream,
            stop_key=stop_key,
        )
        concurrent = guard.slots
        atomic.write_json(
            run_dir / PREDICTION_FILE,
            predict_cost(
                AshaGeometry.from_spec(spec),
                workers=concurrent,
                gpus_per_trial=spec.resources.gpus_per_trial,
                usd_per_gpu_hour=usd_per_gpu_hour,
                profile=profile,
            ),
        )
        campaign = Campaign(
            spec=spec,
            run_dir=run_dir,
            stop_key=stop_key,
            stream=stream,
            storage=storage if is_uri(storage) else None,
            guard=guard,
            watch=FailureWatch(spec.failure.max_failed_trials, stream),
            study_url=study.get("study_storage"),
            study_name=study.get("study_name"),
            parent_run=open_parent_run(spec, run_dir),
            watchers=tuple(watchers),
        )
        if campaign.study_url is not None or warm is not None:  # listed/seeded from the start
            created = optuna.create_study(
                study_name=campaign.name_of_study,
                storage=campaign.study_storage(),
                directions=["maximize" if o.maximize else "minimize" for o in spec.objectives],
                load_if_exists=True,
            )
            name_metrics(created, list(spec.metrics))
            if warm is not None:
                seed_study(created, warm)
                out = stream or sys.stdout
                print(fit(warm.line(), out), file=out)
        tuner = build_tuner(campaign, concurrent=concurrent)
        result = _fit_and_summarize(campaign, tuner, cluster)
    _finish(result, storage, stream, campaign)
    return result


def resume_campaign(
    run_dir: Path, options: RayOptions | None = None, *, stream: TextIO | None = None
) -> CampaignResult:
    """Continues a campaign whose driver stopped (killed, crashed or interrupted).

    Finished trials are not rerun; unfinished ones continue from their latest checkpoint;
    ASHA's rungs, the Optuna study and the spend ledger carry on from the run folder.
    """
    campaign_file = rundir.check_resumable(run_dir)
    spec = load_campaign(campaign_file)
    final = final_trial_ids(run_dir)
    repaired = repair_snapshot(run_dir)
    if repaired:
        state = [name for name in repaired if "/" not in name]
        logs = len(repaired) - len(state)
        what = ", ".join(state + ([f"{logs} trial result log(s)"] if logs else []))
        print(
            "restored Tune's last whole snapshot over files a crash left damaged or out of "
            f"step: {what}",
            file=stream or sys.stdout,
        )
    recovered = recover_trial_logs(run_dir, final)
    if recovered:
        print(
            f"recovered {len(recovered)} result log(s) of trials that ended after Tune's last "
            "snapshot from the stopped driver's staging folder",
            file=stream or sys.stdout,
        )
    orphans = set_aside_orphans(run_dir, finished=final)
    if orphans:
        print(
            f"{len(orphans)} trial folder(s) of trials started after Tune's last snapshot "
            f"moved to {run_dir / ORPHAN_DIR}: {', '.join(orphans)}",
            file=stream or sys.stdout,
        )
    if clear_stop_request(run_dir):
        print("a stop request left in the run folder was cleared", file=stream or sys.stdout)
    run_info = json.loads((run_dir / rundir.RUN_FILE).read_text())
    storage = run_info.get("storage")
    stop_key = run_info.get("stop_key")
    campaign = Campaign(
        spec=spec,
        run_dir=run_dir,
        stop_key=stop_key,
        stream=stream,
        storage=storage,
        study_url=run_info.get("study_storage"),
        study_name=run_info.get("study_name"),
    )
    if not tune.Tuner.can_restore(experiment_path(campaign)):
        raise RunFolderError(
            str(run_dir),
            "Ray Tune saved no experiment state here (the driver died before its first snapshot).",
            fix="start it again with `tuner run`.",
        )
    check_trackers(spec)
    campaign.parent_run = open_parent_run(spec, run_dir)
    options = options or RayOptions()
    pricer = make_pricer(spec)
    ledger, ledger_file = read_ledger(run_dir)
    if ledger_file.get("user_stop") and not storage:
        # `tuner stop` closed Tune's searcher; the campaign goes on where it stopped.
        reopen_search(run_dir)
    with campaign_environment(spec), ray_session(options):
        cluster = read_cluster(options, joined=is_joined(options))
        if stop_key:  # run folders of older versions have no guard
            concurrent = max_concurrent_trials(spec, ray.cluster_resources(), cluster)
            campaign.guard = make_guard(
                spec,
                run_dir,
                ledger=ledger,
                pricer=pricer,
                cluster=cluster,
                concurrent=concurrent,
                profile=None,
                stream=stream,
                stop_key=stop_key,
            )
            campaign.guard.carry_over(ledger_file)
            campaign.watch = FailureWatch(
                spec.failure.max_failed_trials, stream, earlier=failed_trial_count(run_dir)
            )
        campaign.earlier = _finished_before(run_dir, spec)
        tuner = restore_tuner(campaign)
        print(fit(f"resuming campaign {spec.name} from {run_dir}", campaign.out), file=campaign.out)
        result = _fit_and_summarize(campaign, tuner, cluster)
    _finish(result, storage, stream, campaign)
    return result


def _status_mirror() -> Path | None:
    """Where a submitted campaign's driver also publishes its status: the Ray session's
    log folder on this node, which the dashboard's log API serves (:mod:`tuner._ray.jobs`)."""
    submission = os.environ.get(SUBMISSION_ENV)
    if not submission:
        return None
    from ray._private import worker

    node = worker._global_node
    if node is None:
        return None
    return Path(node.get_logs_dir_path()) / status_file_name(submission)


def _starting(campaign: Campaign) -> dict[str, Any]:
    """status.json before the first trial reports (the live line then takes over)."""
    earlier = campaign.earlier or Standings(maximize=campaign.spec.mode is Mode.MAX)
    return running_document(
        campaign,
        earlier,
        done=earlier.count_not_in(set()),
        failed=campaign.watch.count if campaign.watch is not None else 0,
        money=campaign.guard.live() if campaign.guard is not None else None,
    )


def _finished_before(run_dir: Path, spec: CampaignSpec) -> Standings | None:
    """The trials the study finished before a crash: the resumed live line starts there."""
    try:
        study = open_study(run_dir)
    except FileNotFoundError:  # the driver died before its first trial
        return None
    return standings(load_rows(study), maximize=spec.mode is Mode.MAX)


def _finish(
    result: CampaignResult, storage: str | None, stream: TextIO | None, campaign: Campaign
) -> None:
    """The report, the campaign's MLflow run closed and its W&B run written with it, then the
    copy to storage: after the embedded Ray is shut down, so its workers (and on a GPU
    machine their CUDA memory) are not held while plots are drawn."""
    run_dir = result.run_dir
    write_report_safely(run_dir, stream or sys.stdout)
    if campaign.parent_run is not None:
        close_parent_run(campaign.parent_run, run_dir, result.summary)
    wandb = campaign.spec.tracking.wandb if campaign.spec.tracking is not None else None
    if wandb is not None:
        from tuner.tracking_wandb import write_campaign_run

        write_campaign_run(wandb, run_dir, result.summary)
    upload(run_dir, storage, stream)


def _fit_and_summarize(
    campaign: Campaign, tuner: tune.Tuner, cluster: ClusterView
) -> CampaignResult:
    """Runs the campaign with what it prints also appended to ``driver.log`` in its run
    folder (``tuner logs``)."""
    with (campaign.run_dir / rundir.DRIVER_LOG_FILE).open("a", buffering=1) as log:
        if campaign.stream is None:
            with contextlib.redirect_stdout(cast(TextIO, _Tee(sys.stdout, log))):
                return _fit_and_summarize_logged(campaign, tuner, cluster)
        campaign.stream = cast(TextIO, _Tee(campaign.stream, log))
        if campaign.guard is not None:
            campaign.guard.stream = campaign.stream
        return _fit_and_summarize_logged(campaign, tuner, cluster)


class _Tee(io.TextIOBase):
    """A text stream that writes to two: the terminal (or the caller's stream) and the
    run folder's driver.log. A failed write to the log never stops the campaign."""

    def __init__(self, out: TextIO, log: TextIO) -> None:
        self._out, self._log = out, log

    def write(self, text: str) -> int:
        written = self._out.write(text)
        with contextlib.suppress(OSError, ValueError):
            self._log.write(text)
        return written

    def flush(self) -> None:
        self._out.flush()
        with contextlib.suppress(OSError, ValueError):
            self._log.flush()

    def isatty(self) -> bool:
        try:
            return self._out.isatty()
        except ValueError:  # closed (a library kept this stream past the run)
            return False

    def fileno(self) -> int:
        return self._out.fileno()


def _fit_and_summarize_logged(
    campaign: Campaign, tuner: tune.Tuner, cluster: ClusterView
) -> CampaignResult:
    spec, run_dir, stream = campaign.spec, campaign.run_dir, campaign.stream
    guard, watch = campaign.guard, campaign.watch
    start = time.monotonic()
    campaign.status_mirror = _status_mirror()
    campaign.publish(_starting(campaign))
    campaign.start()
    try:
        with capacity_requested(spec, cluster, guard.slots if guard else 1):
            grid = tuner.fit()
    finally:
        campaign.close()
    wall_s = time.monotonic() - start
    with contextlib.suppress(FileNotFoundError):  # no trial ran: no study
        name_metrics(open_study(run_dir), list(spec.metrics))
    checkpoint_study(run_dir)  # study.db alone is the whole study from here on
    if guard is not None and guard.exhausted is not None:
        close_unstarted(run_dir, spec, guard.exhausted)
    cost = predicted_vs_actual(spec, run_dir, wall_s)
    budget = guard.summary() if guard is not None else None
    summary = write_summary(
        spec,
        run_dir,
        wall_s=wall_s,
        tune_trials=len(grid),
        cost=cost,
        budget=budget,
        failure_limit=watch.summary() if watch is not None else None,
        ended=not campaign.interrupted,
    )
    campaign.publish(
        ended_document(
            run_dir, summary, started_unix_s=campaign.started_unix_s, ended_unix_s=time.time()
        ),
    )
    out = stream or sys.stdout
    text = closing_text(
        spec,
        run_dir,
        summary,
        cost=cost,
        budget=budget,
        interrupted=campaign.interrupted,
        width=terminal_width(out),
    )
    out.write(text)
    out.flush()
    return CampaignResult(run_dir=run_dir, summary=summary)
