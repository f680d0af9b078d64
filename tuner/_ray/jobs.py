"""Campaigns on a Ray cluster, from anywhere: Ray's Job Submission API (the dashboard's
HTTP port, 8265) is the only channel, so a laptop needs the cluster's address and token,
no SSH and no shared disk.

- ``tuner submit`` sends ``python -m tuner run ...`` as a Ray job whose working_dir is the
  project (the campaign file and the user's trainables), tagged in the job's metadata.
- The driver, on the head, writes its status document (:mod:`tuner.status`) as one line
  to ``tuner_status_<id>.json`` in the Ray session's log folder as well as to its run
  folder (:func:`status_mirror`); ``tuner list / status --address`` read it through the
  dashboard's log API, a few milliseconds per campaign.
- ``tuner stop --address`` sends a small job that writes the stop request in the run
  folder on the head (:mod:`tuner.stop`); ``--now`` is Ray's own ``stop_job``.
- ``tuner logs --address`` is the job's own log (the driver's output).

Authentication: Ray 2.60 clusters use token authentication. The token is looked up where
Ray looks for it (RAY_AUTH_TOKEN, the file RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token),
whether or not RAY_AUTH_MODE is set here, and sent only when the cluster asks for one.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.errors import ServiceError, closest
from tuner.status import SCHEMA, State

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

__all__ = [
    "EXCLUDES",
    "SUBMISSION_ENV",
    "Cluster",
    "campaign_id",
    "connect",
    "find_token",
    "status_file_name",
]

SUBMISSION_ENV = "TUNER_SUBMISSION_ID"
"""Set in a submitted campaign's driver: its job's submission id (= the campaign's id)."""

KIND_KEY = "tuner"
"""Job metadata key marking tuner's jobs: ``campaign``, ``resume`` or ``stop``."""
ID_KEY = "tuner_id"
NAME_KEY = "tuner_name"

# What a job's working_dir leaves out (gitignore syntax, as Ray reads it): run folders,
# environments, caches and outputs, which are large and of no use to the driver.
EXCLUDES = [
    "runs/",
    ".venv/",
    "venv/",
    "env/",
    "profiles/",
    ".git/",
    "__pycache__/",
    "*.pyc",
    ".mypy_cache/",
    ".ruff_cache/",
    ".pytest_cache/",
    "bench/out/",
    "node_modules/",
    "*.ckpt",
    "*.pt",
]

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 30.0
DEFAULT_RUNS_DIR = "~/tuner-runs"
_TOKEN_PLACES = "RAY_AUTH_TOKEN, the file named by RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token"


def status_file_name(submission_id: str) -> str:
    """The status file of a submitted campaign in the Ray session's log folder."""
    return f"tuner_status_{submission_id}.json"


def campaign_id(name: str, now_unix_s: float | None = None) -> str:
    """A new campaign id: its name and the UTC time, e.g. ``digits-cnn-20261207-181500``
    (Ray's job ids allow letters, digits, ``-`` and ``_``)."""
    stamp = datetime.fromtimestamp(now_unix_s or time.time(), tz=timezone.utc)
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "campaign"
    return f"{safe}-{stamp:%Y%m%d-%H%M%S}"


def find_token() -> tuple[str | None, str]:
    """The cluster token where Ray looks for it, and where it came from."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token, "RAY_AUTH_TOKEN"
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    candidates = [Path(named).expanduser()] if named else []
    candidates.append(Path("~/.ray/auth_token").expanduser())
    for path in candidates:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text:
            return text, str(path)
    return None, _TOKEN_PLACES


def _address(address: str | None) -> str:
    value = (address or os.environ.get("RAY_ADDRESS") or "").strip().rstrip("/")
    if not value:
        raise ServiceError(
            "--address",
            "no cluster address given",
            fix="pass --address http://HEAD:8265 (or set RAY_ADDRESS); through an SSH "
            "tunnel or `ray dashboard cluster.yaml` it is http://127.0.0.1:8265",
        )
    if value == "auto":
        value = "auto://"  # the local cluster's GCS, not a dashboard: refused below
    if "://" not in value:
        value = f"http://{value}"
    if not value.startswith(("http://", "https://")):
        raise ServiceError(
            value,
            "not the address of a Ray dashboard (the Job Submission API is HTTP)",
            fix="use http://HEAD:8265, not the GCS address (HEAD:6379) or ray://",
        )
    return value


def connect(address: str | None) -> Cluster:
    """A client of the cluster at ``address`` (or RAY_ADDRESS), with its token if it asks
    for one. ServiceError, in seconds, when nothing answers or the token is refused."""
    import requests

    url = _address(address)
    try:
        answer = requests.get(
            f"{url}/api/authentication_mode", timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
        )
    except requests.exceptions.RequestException as err:
        reason = "timed out" if isinstance(err, requests.exceptions.Timeout) else "refused"
        raise ServiceError(
            url,
            f"no Ray dashboard answers there (connection {reason})",
            fix="check the address and that the cluster is up (`ray status` on the head); "
            "reach it through an SSH tunnel or `ray dashboard cluster.yaml`",
        ) from None
    mode = ""
    if answer.ok:
        try:
            mode = str(answer.json().get("authentication_mode", ""))
        except ValueError:
            mode = ""
    elif answer.status_code != 404:  # older Ray: no such endpoint, no token either
        raise ServiceError(
            url,
            f"answered HTTP {answer.status_code}, not as a Ray dashboard",
            fix="check the address: the dashboard's port (8265 by default)",
        )
    headers: dict[str, str] = {}
    if mode == "token":
        token, source = find_token()
        if token is None:
            raise ServiceError(
                url,
                f"the cluster wants a token and none was found (looked in {source})",
                fix="copy the head's ~/.ray/auth_token here, or set RAY_AUTH_TOKEN",
            )
        headers["Authorization"] = f"Bearer {token}"
    else:
        source = ""
    client = _client(url, headers, source)
    return Cluster(url, client)


def _client(url: str, headers: dict[str, str], source: str) -> JobSubmissionClient:
    import logging

    from ray.job_submission import JobSubmissionClient

    # The SDK logs each package upload at INFO to stderr; tuner says what it sent itself.
    for name in ("ray.dashboard.modules.dashboard_sdk", "ray._private.runtime_env.packaging"):
        logging.getLogger(name).setLevel(logging.WARNING)

    class _TimedClient(JobSubmissionClient):
        """Ray's client with HTTP timeouts (it sets none: a black-holed address hangs)."""

        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", (CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
            return super()._do_request(method, endpoint, **kwargs)

    try:
        return _TimedClient(url, headers=headers)
    except Exception as err:  # the SDK raises plain Exceptions; the text says which
        text = str(err)
        if "Authentication failed" in text or "403" in text:
            raise ServiceError(
                url,
                f"the cluster refused the token from {source}",
                fix="use the head's current token (~/.ray/auth_token on the head)",
            ) from None
        raise ServiceError(
            url,
            f"the Job Submission API cannot be used: {text.splitlines()[0] if text else err}",
            fix="the head needs ray[default] (the dashboard); see docs/service.md",
        ) from None


@dataclass
class Cluster:
    """tuner's campaigns on one Ray cluster, through its Job Submission API."""

    address: str
    client: Any

    # -- submitting ---------------------------------------------------------------------

    def submit(
        self,
        *,
        submission_id: str,
        name: str,
        argv: list[str],
        working_dir: Path | None,
        kind: str = "campaign",
        env: Mapping[str, str] | None = None,
        campaign: str | None = None,
    ) -> str:
        """Submits ``python -m tuner ARGV`` as a job; returns its submission id."""
        runtime_env: dict[str, Any] = {
            "env_vars": {SUBMISSION_ENV: submission_id, "PYTHONUNBUFFERED": "1", **(env or {})}
        }
        if working_dir is not None:
            runtime_env["working_dir"] = str(working_dir)
            runtime_env["excludes"] = list(EXCLUDES)
        entrypoint = "exec python -m tuner " + " ".join(_quote(a) for a in argv)
        metadata = {KIND_KEY: kind, ID_KEY: campaign or submission_id, NAME_KEY: name}
        return str(
            self.client.submit_job(
                entrypoint=entrypoint,
                submission_id=submission_id,
                runtime_env=runtime_env,
                metadata=metadata,
            )
        )

    # -- reading --------------------------------------------------------------------------

    def _jobs(self) -> list[Any]:
        jobs = [
            job
            for job in self.client.list_jobs()
            if str(getattr(job, "type", "")).endswith("SUBMISSION")
            and (job.metadata or {}).get(KIND_KEY) in ("campaign", "resume")
        ]
        return sorted(jobs, key=lambda job: job.start_time or 0)

    def campaigns(self) -> list[dict[str, Any]]:
        """The status of every campaign submitted to this cluster (its latest job each)."""
        latest: dict[str, Any] = {}
        for job in self._jobs():
            latest[job.metadata[ID_KEY]] = job
        return [self._document(job) for job in latest.values()]

    def job(self, campaign: str) -> Any:
        """The latest job of ``campaign`` (its id); ServiceError naming the closest id."""
        jobs = [job for job in self._jobs() if job.metadata.get(ID_KEY) == campaign]
        if not jobs:
            ids = sorted({job.metadata[ID_KEY] for job in self._jobs()})
            near = closest(campaign, ids)
            raise ServiceError(
                self.address,
                f"no campaign {campaign!r} was submitted to this cluster"
                + (f"; did you mean {near!r}?" if near else ""),
                fix="`tuner list --address ...` shows the campaigns there",
            )
        return jobs[-1]

    def status(self, campaign: str) -> dict[str, Any]:
        """The status document of ``campaign`` on this cluster."""
        return self._document(self.job(campaign))

    def _published(self, job: Any) -> dict[str, Any] | None:
        """What the job's driver last published, read through the dashboard's log API."""
        node = getattr(job, "driver_node_id", None)
        if not node:
            return None
        answer = self.client._do_request(
            "GET",
            f"/api/v0/logs/file?node_id={node}"
            f"&filename={status_file_name(job.submission_id)}&lines=1",
        )
        if answer.status_code != 200:
            return None
        for line in reversed(answer.text.strip().splitlines()):
            try:
                document = json.loads(line)
            except ValueError:
                continue
            if isinstance(document, dict) and document.get("schema") == SCHEMA:
                return document
        return None

    def _document(self, job: Any) -> dict[str, Any]:
        state = str(getattr(job.status, "value", job.status))
        published = None if state == "PENDING" else self._published(job)
        ended = state in ("SUCCEEDED", "FAILED", "STOPPED")
        if published is not None:
            if published.get("state") == State.RUNNING and ended:
                published = {
                    **published,
                    "state": State.DIED,
                    "status": f"driver stopped (job {state}: {job.message or ''}); "
                    f"`tuner submit --resume {job.metadata[ID_KEY]}` continues it".strip(),
                }
            return {**published, "id": job.metadata[ID_KEY], "job": job.submission_id}
        return _job_document(job, state)

    def logs(self, campaign: str) -> str:
        """The driver's output so far."""
        return str(self.client.get_job_logs(self.job(campaign).submission_id))

    def follow(self, campaign: str) -> None:
        """Prints the driver's output as it comes, until the job ends."""
        import asyncio
        import sys

        job_id = self.job(campaign).submission_id

        async def tail() -> None:
            async for chunk in self.client.tail_job_logs(job_id):
                sys.stdout.write(chunk)
                sys.stdout.flush()

        asyncio.run(tail())

    # -- stopping -------------------------------------------------------------------------

    def stop(self, campaign: str, *, now: bool, wait_s: float = 60.0) -> str:
        """Asks ``campaign``'s driver to stop (``now``: Ray's stop_job, as a crash)."""
        job = self.job(campaign)
        state = str(getattr(job.status, "value", job.status))
        if state not in ("PENDING", "RUNNING"):
            raise ServiceError(
                self.address,
                f"campaign {campaign!r} is not running (its job is {state})",
                fix="`tuner status ID --address ...` shows how it ended",
            )
        if now:
            self.client.stop_job(job.submission_id)
            return f"stopped job {job.submission_id} (Ray's stop_job: SIGTERM, then SIGKILL)"
        document = self._published(job)
        if document is not None and document.get("state") != State.RUNNING:
            raise ServiceError(
                self.address,
                f"campaign {campaign!r} is not running ({document.get('state')})",
                fix="`tuner status ID --address ...` shows how it ended",
            )
        if document is None or not document.get("run_dir"):
            raise ServiceError(
                self.address,
                f"campaign {campaign!r} has not published its run folder yet (starting)",
                fix="try again in a few seconds, or `tuner stop --now` to end it at once",
            )
        stopper = self.client.submit_job(
            entrypoint="exec python -m tuner stop " + _quote(str(document["run_dir"])),
            submission_id=f"{job.submission_id}-stop-{int(time.time())}",
            metadata={KIND_KEY: "stop", ID_KEY: campaign, NAME_KEY: campaign},
        )
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            info = self.client.get_job_info(stopper)
            status = str(getattr(info.status, "value", info.status))
            if status == "SUCCEEDED":
                return str(self.client.get_job_logs(stopper)).strip().splitlines()[-1]
            if status in ("FAILED", "STOPPED"):
                said = str(self.client.get_job_logs(stopper)).strip().splitlines()
                errors = [line[len("error: ") :] for line in said if line.startswith("error: ")]
                raise ServiceError(
                    self.address,
                    f"the stop request could not be written: {'; '.join(errors or said[-1:])}",
                    fix="`tuner stop --now` ends the campaign at once (resumable)",
                )
            time.sleep(0.2)
        raise ServiceError(
            self.address,
            f"the stop request was not written within {wait_s:.0f} s (job {stopper})",
            fix="is the cluster busy? `tuner stop --now` ends the campaign at once",
        )


def _quote(arg: str) -> str:
    """Shell-quotes ``arg``, leaving a leading ``~/`` to the head's shell."""
    if arg.startswith("~/"):
        return '"$HOME"/' + shlex.quote(arg[2:])
    return shlex.quote(arg)


def _job_document(job: Any, state: str) -> dict[str, Any]:
    """A status document from the job alone (its driver has published nothing)."""
    meta = job.metadata or {}

    def iso(ms: int | None) -> str | None:
        if not ms:
            return None
        return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="seconds")

    if state in ("PENDING", "RUNNING"):
        ours, wording = State.RUNNING, "starting" if state == "RUNNING" else "pending"
    elif state == "SUCCEEDED":
        ours, wording = State.FINISHED, "finished"
    else:
        code = getattr(job, "driver_exit_code", None)
        ours = State.FAILED if code == 2 else State.DIED
        wording = f"job {state}: {job.message or ''}".strip()
    return {
        "schema": SCHEMA,
        "id": meta.get(ID_KEY, job.submission_id),
        "name": meta.get(NAME_KEY, ""),
        "state": ours,
        "status": wording,
        "trials": {
            "total": 0,
            "done": 0,
            "running": 0,
            "pending": 0,
            "stopped_early": 0,
            "failed": 0,
        },
        "best": None,
        "spend": None,
        "started": iso(job.start_time),
        "updated": None,
        "ended": iso(job.end_time),
        "run_dir": None,
        "host": None,
        "pid": None,
        "job": job.submission_id,
    }
