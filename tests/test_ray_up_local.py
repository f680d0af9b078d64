"""The real `ray up` / `ray submit` / `ray down` path on one machine.

Ray's cluster launcher with its ``local`` (on-premise) provider: the head is 127.0.0.1,
reached over SSH as a dedicated non-root user (``tunerci``, created if missing) through an
``sshd`` of the test's own, bound to 127.0.0.1 on a free port. Ray's SSH runner has no
port setting; its ``auth.ssh_proxy_command`` (ssh's ProxyCommand) joins ssh to that port.
``file_mounts`` ship this project to the user's home and ``setup_commands`` install it as a
node would: a virtual environment and a pip install of the shipped copy. Downloading torch
and Ray into it would take minutes, so the node's venv reads them from this project's
``.venv`` (a ``.pth`` file), while the project itself is pip-installed from the shipped copy.

The node's Ray listens on free ports and keeps its files under the user's home
(``RAY_TMPDIR``), apart from other Rays on the machine; the launcher's state and config
cache go to the test's temporary folder. Needs root (to create the user and run sshd),
Debian's openssh-server and rsync; skips without them, and fails under ``CI=true``
(``tests/no_silent_skips.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import kill_session

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[1]
USER = "tunerci"
SUBMIT = ROOT / "tuner" / "submit.py"
SYSTEM_PYTHON = Path("/usr/bin/python3")
DEPS = Path(sysconfig.get_paths()["purelib"])  # this project's .venv site-packages
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
TOOLS = ("/usr/sbin/sshd", "ssh", "ssh-keygen", "rsync", "useradd")
LOCK = Path("/tmp/tuner-test-ray-up-local.lock")  # one run at a time: the user is shared
CAMPAIGN = {
    "name": "ci-ray-up",
    "trainable": "digits_cnn",
    "metric": "val_acc",
    "mode": "max",
    "space": {
        "lr": {"type": "float", "low": 3.0e-4, "high": 3.0e-2, "log": True},
        "channels": {"type": "int", "low": 8, "high": 16, "step": 8},
    },
    "budget": {"trials": 8, "max_epochs": 3},  # the submit flags cut it to 2 x 1
    "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 3},
    "sampler": {"type": "tpe", "seed": 0, "startup_trials": 2},
    "resources": {"cpu": 1, "gpu": 0},
    "checkpoint": {"every": 1, "keep": 1},
    "fixed": {"batch_size": 64, "optimizer": "adam"},
}
HEAD_LABELS = "tuner.io/usd-per-hour=0.25,tuner.io/cloud=ci"
# Prints what the head's Ray says of its node: run there with `ray exec`.
CHECK_NODE = """\
import json
import ray
ray.init(address="auto", logging_level="ERROR")
print("NODES=" + json.dumps([{"labels": n["Labels"], "alive": n["Alive"]} for n in ray.nodes()]))
"""
# ssh's ProxyCommand: one process joining ssh's stdin/stdout to the sshd's TCP port; it
# dies with ssh (SIGHUP), which closes the connection.
RELAY = """\
import os, selectors, socket, sys
sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(sock, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj == 0:
            data = os.read(0, 65536)
            if data:
                sock.sendall(data)
            else:
                sock.shutdown(socket.SHUT_WR)
                sel.unregister(0)
        else:
            data = sock.recv(65536)
            if not data:
                sys.exit(0)
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]
"""


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root: creates the ssh user and runs an sshd"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (Debian: apt-get install openssh-server rsync)"
    if not SYSTEM_PYTHON.is_file():
        return f"no {SYSTEM_PYTHON} for the node's virtual environment"
    version = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if version != str(sys.version_info[:2]):
        return f"{SYSTEM_PYTHON} is Python {version}; the project's .venv is {PY}"
    for folder in [DEPS, *DEPS.parents]:
        if folder.stat().st_mode & 0o005 != 0o005:
            return f"{folder} is not readable by other users (the ssh user reads {DEPS})"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pids_of_uid(uid: int) -> list[int]:
    """Live (not zombie) processes of ``uid``."""
    pids = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":", 1) for line in status.read_text().splitlines() if ":" in line
            )
        except OSError:
            continue
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            pids.append(int(status.parent.name))
    return pids


def _pids_with_cmdline(text: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if text in cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                pids.append(int(cmdline.parent.name))
    return [pid for pid in pids if pid != os.getpid()]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _wait_gone(uid: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := _pids_of_uid(uid)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _ps(pids: list[int]) -> str:
    if not pids:
        return ""
    return subprocess.run(
        ["ps", "-o", "pid,user,args", "-p", ",".join(map(str, pids))],
        capture_output=True,
        text=True,
    ).stdout


def _ensure_user() -> pwd.struct_passwd:
    """The dedicated ssh user, created if missing, with a password field sshd accepts."""
    try:
        pwd.getpwnam(USER)
    except KeyError:
        # "*": no password login, yet not a locked account ("!"), which sshd without PAM
        # refuses even for key logins.
        subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/bash", "--password", "*", USER],
            check=True,
        )
    shadow = subprocess.run(["getent", "shadow", USER], capture_output=True, text=True)
    if shadow.stdout.split(":")[1:2] and shadow.stdout.split(":")[1].startswith("!"):
        subprocess.run(["usermod", "--password", "*", USER], check=True)
    return pwd.getpwnam(USER)


def _fresh_home(user: pwd.struct_passwd, public_key: str) -> Path:
    """The user's home as a new node's: no project, venv, runs or Ray files; our key."""
    home = Path(user.pw_dir)
    for name in ("tuner", "tuner-venv", "runs", ".ray-tmp", "ci-campaign", ".cache", ".ssh"):
        shutil.rmtree(home / name, ignore_errors=True)
    for name in ("ray_bootstrap_config.yaml", "ray_bootstrap_key.pem", SUBMIT.name):
        (home / name).unlink(missing_ok=True)
    skel = Path("/etc/skel/.bashrc")
    bashrc = skel.read_text() if skel.is_file() else ""
    # This machine's Rays share /tmp/ray: the node's Ray (and `ray stop` on it) use the
    # user's own folder, so the head's address file is not everybody's.
    bashrc += '\nexport RAY_TMPDIR="$HOME/.ray-tmp"; mkdir -p "$RAY_TMPDIR"\n'
    (home / ".bashrc").write_text(bashrc)
    ssh = home / ".ssh"
    ssh.mkdir(mode=0o700)
    (ssh / "authorized_keys").write_text(public_key)
    for path in (home / ".bashrc", ssh, ssh / "authorized_keys"):
        os.chown(path, user.pw_uid, user.pw_gid)
    (ssh / "authorized_keys").chmod(0o600)
    return home


@contextlib.contextmanager
def _sshd(folder: Path, port: int) -> Iterator[None]:
    """An sshd of our own on 127.0.0.1:port (own config and host key); killed after."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "host_key")],
        check=True,
    )
    config = folder / "sshd_config"
    config.write_text(
        f"ListenAddress 127.0.0.1:{port}\n"
        f"HostKey {folder / 'host_key'}\n"
        f"PidFile {folder / 'sshd.pid'}\n"
        f"AllowUsers {USER}\n"
        "PermitRootLogin no\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\n"
        "AuthorizedKeysFile .ssh/authorized_keys\n"
        "UsePAM no\n"
        "MaxStartups 50\n"
        "MaxSessions 50\n"
    )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    log = (folder / "sshd.log").open("w")
    proc = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as sock, contextlib.suppress(OSError):
                sock.connect(("127.0.0.1", port))
                break
            assert proc.poll() is None, (folder / "sshd.log").read_text()
            assert time.monotonic() < deadline, "sshd did not listen"
            time.sleep(0.1)
        yield
    finally:
        _kill(_descendants(proc.pid))  # its sessions
        proc.kill()
        proc.wait()
        log.close()


def _cluster_config(
    name: str, key: Path, relay: Path, sshd_port: int, shipped: Path
) -> dict[str, Any]:
    product = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    path_line = next(c for c in product["setup_commands"] if "tuner-venv/bin:$PATH" in c)
    venv = "~/tuner-venv"
    site = f"{venv}/lib/{PY}/site-packages"
    ports = {
        flag: _free_port()
        for flag in (
            "port",
            "object-manager-port",
            "node-manager-port",
            "dashboard-port",
            "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port",
            "metrics-export-port",
            "runtime-env-agent-port",
        )
    }
    flags = " ".join(f"--{flag}={port}" for flag, port in ports.items())
    ray_script = "import sys\\nfrom ray.scripts.scripts import main\\nsys.exit(main())\\n"
    return {
        "cluster_name": name,
        "provider": {"type": "local", "head_ip": "127.0.0.1", "worker_ips": []},
        "auth": {
            "ssh_user": USER,
            "ssh_private_key": str(key),
            "ssh_proxy_command": f"{sys.executable} {relay} {sshd_port}",
        },
        "max_workers": 0,
        "min_workers": 0,
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": 2,
        "file_mounts": {**product["file_mounts"], "~/ci-campaign": str(shipped)},
        "rsync_exclude": product["rsync_exclude"],
        "rsync_filter": product["rsync_filter"],
        "setup_commands": [
            # The node's own Python, as `python3 -m venv` on a real node; pip, torch, Ray
            # and the other dependencies come from this project's .venv.
            f"python3 -m venv --without-pip {venv}",
            f"echo {DEPS} > {site}/tuner-ci-deps.pth",
            # The `ray` command that pip would install with Ray.
            f"printf '#!%s\\n{ray_script}' \"$HOME/tuner-venv/bin/python\" > {venv}/bin/ray"
            f" && chmod +x {venv}/bin/ray",
            # The project: the copy file_mounts shipped, installed like on a real node.
            f"{venv}/bin/python -m pip install -q --no-deps --no-build-isolation -e ~/tuner",
            path_line,
        ],
        "head_start_ray_commands": [
            product["head_start_ray_commands"][0],
            f"ulimit -n 65536; {venv}/bin/ray start --head {flags}"
            " --min-worker-port=20100 --max-worker-port=20199"
            " --autoscaling-config=~/ray_bootstrap_config.yaml --dashboard-host=127.0.0.1"
            f" --include-dashboard=false --object-store-memory=200000000"
            f" --labels={HEAD_LABELS} --disable-usage-stats",
        ],
        "worker_start_ray_commands": [],
    }


def _ray(args: list[str], env: dict[str, str], log: Path, timeout: float) -> str:
    """Runs the `ray` CLI in its own session; fails with the output's tail."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("ray")), *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kill_session(proc.pid)
            proc.wait()
    text = log.read_text(errors="replace")
    assert code == 0, f"ray {args[0]}: exit {code}\n{text[-6000:]}"
    return text


def test_ray_up_submit_down_over_ssh(tmp_path: Path) -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    LOCK.touch()
    with LOCK.open() as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _run(tmp_path)


def _run(tmp: Path) -> None:
    started = time.monotonic()
    keys = tmp / "ssh"
    keys.mkdir(mode=0o700)
    key = keys / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    user = _ensure_user()
    _kill(_pids_of_uid(user.pw_uid))  # a crashed earlier run's leftovers
    home = _fresh_home(user, (keys / "client_key.pub").read_text())

    shipped = tmp / "ci-campaign"  # ~/ci-campaign on the node
    shipped.mkdir()
    (shipped / "campaign.yaml").write_text(yaml.safe_dump(CAMPAIGN, sort_keys=False))
    (shipped / "check_node.py").write_text(CHECK_NODE)
    relay = keys / "relay.py"
    relay.write_text(RELAY)

    name = f"tuner-ci-{uuid.uuid4().hex[:8]}"
    port = _free_port()
    config = tmp / "cluster.yaml"
    config.write_text(
        yaml.safe_dump(_cluster_config(name, key, relay, port, shipped), sort_keys=False)
    )
    launcher = tmp / "launcher"  # `ray up`'s cluster state, lock and config cache
    launcher.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=str(launcher), TMPDIR=str(launcher), RAY_USAGE_STATS_ENABLED="0")

    # Ray's SSH runner keeps a master connection per cluster here (ControlPersist 10 s).
    def digest(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    control = Path("/tmp") / f"ray_ssh_{digest(getpass.getuser())}" / digest(name)
    times: dict[str, float] = {}
    up = False
    try:
        with _sshd(tmp, port):
            try:
                t0 = time.monotonic()
                up = True  # a half-done `ray up` is taken down too
                _ray(["up", "-y", "--no-config-cache", str(config)], env, tmp / "up.log", 300)
                times["up"] = time.monotonic() - t0

                t0 = time.monotonic()
                args = ["ci-campaign/campaign.yaml", "--trials", "2", "--max-epochs", "1"]
                out = _ray(
                    ["submit", "--no-config-cache", str(config), str(SUBMIT), "--", *args],
                    env,
                    tmp / "submit.log",
                    240,  # about 20 s here
                )
                times["submit"] = time.monotonic() - t0

                # The results are on the head, in the ssh user's home.
                summary = json.loads((home / "runs" / "ci-ray-up" / "summary.json").read_text())
                assert summary["status"] == "completed", out[-4000:]
                assert summary["trials_finished"] == 2, summary
                # ...written by a driver of the cluster `ray up` started (not by a Ray of
                # its own): one Ray session on the node, and its log of that driver.
                sessions = list((home / ".ray-tmp" / "ray").glob("session_2*"))
                assert len(sessions) == 1, sessions
                assert list((sessions[0] / "logs").glob("python-core-driver-*")), sessions

                # The labels `ray start --labels` gave the node (what the ledger reads).
                t0 = time.monotonic()
                out = _ray(
                    ["exec", str(config), "python ci-campaign/check_node.py"],
                    env,
                    tmp / "exec.log",
                    120,
                )
                line = next(x for x in out.splitlines() if x.startswith("NODES="))
                (node,) = json.loads(line[len("NODES=") :])
                for pair in HEAD_LABELS.split(","):
                    key_, value = pair.split("=")
                    assert node["labels"].get(key_) == value, node

                # ... and come back with `ray rsync-down`.
                fetched = tmp / "fetched"
                _ray(
                    ["rsync-down", str(config), "~/runs/ci-ray-up/summary.json", f"{fetched}/"],
                    env,
                    tmp / "rsync.log",
                    120,
                )
                assert json.loads((fetched / "summary.json").read_text()) == summary
                times["exec+rsync-down"] = time.monotonic() - t0
            finally:
                if up:
                    t0 = time.monotonic()
                    _ray(["down", "-y", str(config)], env, tmp / "down.log", 180)
                    times["down"] = time.monotonic() - t0
            # `ray down` ran `ray stop` on the node: once the SSH master connection is
            # closed, nothing of the user is left.
            _kill(_pids_with_cmdline(str(control)))
            left = _wait_gone(user.pw_uid, 20)
            assert not left, "left after ray down:\n" + _ps(left)
    finally:
        _kill(_pids_with_cmdline(str(control)) + _pids_with_cmdline(str(relay)))
        _kill(_pids_of_uid(user.pw_uid))
        shutil.rmtree(control, ignore_errors=True)
        times["total"] = time.monotonic() - started
        print("wall seconds:", {k: round(v, 1) for k, v in times.items()})
