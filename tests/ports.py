"""Ports for the test servers: free ones on 127.0.0.1, whether one accepts, and which
ones given processes listen on (from ``/proc``). Standard library only."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import socket
from pathlib import Path
from typing import Any

from tests.processes import read_cmdline


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_block(size: int, rng: random.Random | None = None) -> int:
    """First port of ``size`` consecutive free TCP ports below the ephemeral range."""
    rng = random.Random() if rng is None else rng
    try:
        low_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low_ephemeral = 32768
    # clear of Ray's fixed defaults (6379, 8265, 10001, 52365, ...) and of the range its
    # workers take ports from by default (10002-19999), so another Ray cannot grab one
    hi = max(low_ephemeral, 30000) - size
    for _ in range(200):
        base = rng.randrange(20000, hi)
        if all(port_free(p) for p in range(base, base + size)):
            return base
    raise RuntimeError(f"no {size} consecutive free ports found")


def accepts(port: int) -> bool:
    """Whether 127.0.0.1:``port`` accepts a TCP connection."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def listening_sockets(pids: set[int]) -> list[dict[str, Any]]:
    """The TCP sockets in LISTEN state that processes ``pids`` hold: ``pid``, ``cmd``
    (its command line, shortened), ``ip`` (IPv4-mapped IPv6 addresses as IPv4) and
    ``port``; from ``/proc/PID/fd`` and ``/proc/net/tcp`` and ``tcp6``."""
    inodes: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:["):
                        inodes[int(link[8:-1])] = pid
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f)  # header
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], int(fields[9])
                if state != "0A" or inode not in inodes:  # 0A: TCP_LISTEN
                    continue
                hex_ip, hex_port = local.split(":")
                pid = inodes[inode]
                out.append(
                    {
                        "pid": pid,
                        "cmd": " ".join(read_cmdline(pid))[:100],
                        "ip": str(_proc_net_ip(hex_ip)),
                        "port": int(hex_port, 16),
                    }
                )
    return sorted(out, key=lambda s: (s["port"], s["pid"]))


def _proc_net_ip(hex_ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as /proc/net/tcp{,6} writes it: 32-bit words in host (little) order."""
    raw = bytes.fromhex(hex_ip)
    host = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(host) == 4:
        return ipaddress.IPv4Address(host)
    v6 = ipaddress.IPv6Address(host)
    return v6.ipv4_mapped or v6
