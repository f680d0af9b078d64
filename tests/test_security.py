"""Security: YAML loaded safely, the embedded Ray kept to this machine, no credentials in run
folders or messages. (Shipped cluster configs are checked for credentials in
tests/test_cluster_configs.py::test_no_credentials.)"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import tiny_digits_campaign
from tuner.cli import main
from tuner.errors import SpecError
from tuner.rundir import check_storage_uri
from tuner.spec import load_campaign

SENTINEL = "tuner-test-sentinel-0f9a7c"


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch {marker}']",
        "!!python/object/new:os.system ['touch {marker}']",
        "!!python/name:os.system",
    ],
)
def test_yaml_tags_that_run_code_are_refused(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "pwned"
    text = yaml.safe_dump(tiny_digits_campaign()) + f"description: {tag.format(marker=marker)}\n"
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_campaign(path)
    assert str(path) in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    "uri",
    [
        f"s3://AKIAIOSFODNN7EXAMPLE:{SENTINEL}@bucket/runs",
        f"gs://user:{SENTINEL}@bucket/runs",
        f"s3://{SENTINEL}@bucket/runs",
    ],
)
def test_a_storage_uri_with_credentials_is_refused_and_not_echoed(uri: str) -> None:
    with pytest.raises(SpecError) as info:
        check_storage_uri(uri)
    message = str(info.value)
    assert SENTINEL not in message and "AKIAIOSFODNN7EXAMPLE" not in message
    assert "--storage-path" in message and "***@bucket" in message
    assert "To fix:" in message and "AWS_SECRET_ACCESS_KEY" in message


def test_a_storage_uri_without_credentials_passes() -> None:
    assert check_storage_uri("s3://bucket/runs") == "s3://bucket/runs"
    assert check_storage_uri("file:///tmp/x") == "file:///tmp/x"


def test_the_cli_refuses_credentials_in_storage_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    campaign = tmp_path / "c.yaml"
    campaign.write_text(yaml.safe_dump(tiny_digits_campaign()))
    code = main(["run", str(campaign), "--storage-path", f"s3://k:{SENTINEL}@bucket/runs"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err and SENTINEL not in err
    assert "--storage-path" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.ray
def test_the_embedded_ray_dashboard_listens_on_no_outside_address_and_the_gcs_asks_for_a_token(
    tmp_path: Path,
) -> None:
    import ray  # first: Ray puts its bundled psutil on sys.path
    import psutil  # isort: skip
    from ray._private.authentication.authentication_utils import is_token_auth_enabled

    from tuner._ray.cluster import RayOptions, init_ray

    loopback = {"127.0.0.1", "::1"}
    assert init_ray(RayOptions(num_cpus=1))
    try:
        assert is_token_auth_enabled()
        node = ray._private.worker._global_node
        session = node.get_session_dir_path()
        ours = [
            p
            for p in psutil.process_iter(["cmdline"])
            if any(session in part for part in p.info["cmdline"] or [])
        ]
        dashboards = [
            p for p in ours if any(part.endswith("dashboard.py") for part in p.info["cmdline"])
        ]
        # The dashboard head runs (Ray starts it even with include_dashboard=False): what
        # follows is about a process that exists, not about an empty list.
        assert len(dashboards) == 1, [p.info["cmdline"] for p in ours]
        listen = psutil.CONN_LISTEN
        listening = {
            p.pid: [c.laddr for c in p.net_connections(kind="inet") if c.status == listen]
            for p in ours
        }
        # The scan sees sockets: the GCS and the raylet listen (on every interface, Ray's
        # own choice; the token below is what guards them).
        assert sum(map(len, listening.values())) >= 2, listening
        # The dashboard head (Ray's job and state API) listens on loopback or not at all;
        # with include_dashboard=False Ray 2.60 starts it --minimal, serving no port.
        outside = [a for a in listening[dashboards[0].pid] if a.ip not in loopback]
        assert outside == [], outside

        # A client without the token is refused by the GCS, which listens on every
        # interface. (Ray retries for ~20 s before giving up: the first refusal, logged at
        # once, is what is waited for; then the client is killed.)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
        env |= {"RAY_AUTH_MODE": "disabled", "HOME": str(tmp_path)}  # no ~/.ray/auth_token
        code = f"import ray; ray.init(address={node.gcs_address!r}); print('CONNECTED')"
        client = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        lines = []
        try:
            assert client.stdout is not None
            for line in client.stdout:
                lines.append(line)
                if "InvalidAuthToken" in line or "CONNECTED" in line:
                    break
        finally:
            client.kill()
            client.wait()
        refusal = lines[-1] if lines else ""
        assert "Unauthenticated" in refusal and "InvalidAuthToken" in refusal, lines[-5:]
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_no_secret_of_the_environment_reaches_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tuner._ray.cluster import RayOptions
    from tuner._ray.driver import run_campaign
    from tuner.spec import parse_campaign

    # Credentials the way a cloud user has them: in the environment (trials inherit it).
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SENTINEL)
    monkeypatch.setenv("HF_TOKEN", SENTINEL)
    spec = parse_campaign(
        tiny_digits_campaign(budget={"trials": 2, "max_epochs": 1}),
        "c.yaml",
    )
    run_dir = tmp_path / "runs" / spec.name
    run_campaign(spec, run_dir, RayOptions(num_cpus=2), stream=io.StringIO())
    token_file = Path.home() / ".ray" / "auth_token"
    secrets = [SENTINEL.encode()]
    if token_file.is_file() and token_file.read_text().strip():
        secrets.append(token_file.read_text().strip().encode())
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(files) > 5
    leaked = [str(p) for p in files if any(s in p.read_bytes() for s in secrets)]
    assert leaked == []


def test_an_embedded_ray_start_drops_only_rays_token_enabled_notice() -> None:
    # Ray's own notices, logged as ray.init logs them; no Ray is started.
    import logging

    from ray._private.authentication import authentication_token_setup as setup

    from tuner._ray.cluster import _quiet_token_notice

    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger(setup.__name__)
    keep = Keep(level=logging.DEBUG)
    logger.addHandler(keep)
    try:
        with _quiet_token_notice():
            setup._warn_token_auth_enabled()
            setup._warn_token_auth_disabled()
        setup._warn_token_auth_enabled()  # outside an embedded start: shown
    finally:
        logger.removeHandler(keep)
    assert [m.split(" for this")[0] for m in seen] == [
        "Token authentication is disabled",
        "Token authentication is enabled",
    ]
