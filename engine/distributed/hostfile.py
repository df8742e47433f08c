"""Read and check an `mlx.launch` hostfile, and write the copy Corral launches with.

The hostfile is MLX's own format: a JSON list of hosts, or an object with `hosts`, an optional
`backend` ("ring", the default, or "jaccl"/"jaccl-ring" for RDMA over Thunderbolt) and `envs`.
Each host has `ssh` (how `mlx.launch` reaches it; the name `127.0.0.1` is started locally) and,
for the ring backend, `ips` (the addresses the ranks talk over). Corral adds one optional
top-level key, `python`: the interpreter to run on every host (default: this one's path).

Rank 0 runs the engine and talks to this process over a local socket, so the first host must be
this machine; the launch copy names it `127.0.0.1` so that `mlx.launch` starts it locally.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import CorralError

BACKENDS = ("ring", "jaccl", "jaccl-ring")
LOCAL = "127.0.0.1"
MAX_HOSTS = 64


class HostfileError(CorralError):
    """A hostfile that cannot be used: the message names the file and the entry at fault."""


@dataclass(frozen=True)
class Host:
    """One rank's machine: how to reach it and the addresses it talks over."""

    ssh: str
    ips: tuple[str, ...] = ()
    rdma: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Hostfile:
    """A checked hostfile: one Host per rank, in rank order."""

    hosts: tuple[Host, ...]
    backend: str = "ring"
    envs: tuple[str, ...] = ()
    python: str | None = None
    path: str = field(default="", compare=False)

    @property
    def size(self) -> int:
        return len(self.hosts)

    def host_name(self, rank: int) -> str:
        """How messages name rank `rank`'s machine: its ssh name, or its first address when
        that is the local placeholder."""
        if not 0 <= rank < len(self.hosts):
            return "unknown host"
        host = self.hosts[rank]
        if host.ssh == LOCAL and host.ips and host.ips[0] != LOCAL:
            return host.ips[0]
        return "this machine" if host.ssh == LOCAL and rank == 0 else host.ssh

    def launch_json(self) -> dict[str, Any]:
        """The hostfile `mlx.launch` gets: rank 0 named `127.0.0.1` so it starts here."""
        hosts = []
        for rank, h in enumerate(self.hosts):
            entry: dict[str, Any] = {"ssh": LOCAL if rank == 0 else h.ssh, "ips": list(h.ips)}
            if h.rdma:
                entry["rdma"] = list(h.rdma)
            hosts.append(entry)
        return {"backend": self.backend, "envs": list(self.envs), "hosts": hosts}


def is_this_machine(name: str) -> bool:
    """Whether an ssh host name points at the machine this process runs on."""
    lowered = name.strip().lower()
    if lowered in (LOCAL, "localhost", "::1"):
        return True
    here = socket.gethostname().lower()
    return lowered in (here, here.split(".")[0], here.split(".")[0] + ".local")


def loopback_hostfile(ranks: int = 2) -> Hostfile:
    """A hostfile that runs `ranks` ranks on this machine over loopback (tests, benchmarks)."""
    return Hostfile(tuple(Host(LOCAL, (LOCAL,)) for _ in range(ranks)), path="(loopback)")


def parse_hostfile(data: Any, where: str = "hostfile") -> Hostfile:
    """Check parsed hostfile JSON; raise HostfileError naming `where` and the entry at fault.

    Args:
        data: the JSON value (a list of hosts, or an object with `hosts`).
        where: the file's name, for messages.
    """
    backend, envs, python = "ring", [], None
    if isinstance(data, dict):
        unknown = set(data) - {"hosts", "backend", "envs", "python"}
        if unknown:
            raise HostfileError(f"{where}: unknown key {sorted(unknown)[0]!r}")
        backend = data.get("backend") or "ring"
        envs = data.get("envs", [])
        python = data.get("python")
        hosts_data = data.get("hosts")
    else:
        hosts_data = data
    if backend not in BACKENDS:
        choices = ", ".join(BACKENDS)
        raise HostfileError(f"{where}: backend must be one of {choices}, not {backend!r}")
    if not isinstance(envs, list) or not all(isinstance(e, str) and "=" in e for e in envs):
        raise HostfileError(f"{where}: envs must be a list of NAME=VALUE strings")
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise HostfileError(f"{where}: python must be the path of an interpreter")
    if not isinstance(hosts_data, list) or len(hosts_data) < 2:
        raise HostfileError(f"{where}: needs a list of at least two hosts (one per rank)")
    if len(hosts_data) > MAX_HOSTS:
        raise HostfileError(f"{where}: at most {MAX_HOSTS} hosts, not {len(hosts_data)}")
    hosts = [_parse_host(h, f"{where}: host {i}", backend) for i, h in enumerate(hosts_data)]
    if not is_this_machine(hosts[0].ssh):
        raise HostfileError(
            f"{where}: the first host ({hosts[0].ssh!r}) must be this machine: rank 0 runs the "
            "engine here (name it 127.0.0.1, localhost or this machine's host name)"
        )
    return Hostfile(tuple(hosts), backend, tuple(envs), python, where)


def _parse_host(entry: Any, where: str, backend: str) -> Host:
    if not isinstance(entry, dict):
        raise HostfileError(f"{where}: must be an object with 'ssh' and 'ips'")
    ssh = entry.get("ssh")
    if not isinstance(ssh, str) or not ssh.strip() or ssh.startswith("-") or " " in ssh:
        raise HostfileError(f"{where}: 'ssh' must be a host name (got {ssh!r})")
    ips = entry.get("ips", [])
    if not isinstance(ips, list) or not all(isinstance(ip, str) for ip in ips):
        raise HostfileError(f"{where}: 'ips' must be a list of IP addresses")
    for ip in ips:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise HostfileError(f"{where}: {ip!r} is not an IP address") from None
    if backend == "ring" and not ips:
        raise HostfileError(
            f"{where} ({ssh}): the ring backend needs 'ips' (the addresses "
            "the ranks connect over, e.g. the Thunderbolt bridge's)"
        )
    rdma = entry.get("rdma", [])
    if not isinstance(rdma, list):
        raise HostfileError(f"{where}: 'rdma' must be a list of RDMA device names")
    return Host(ssh.strip(), tuple(ips), tuple(rdma))


def read_hostfile(path: str | os.PathLike[str]) -> Hostfile:
    """Read and check the hostfile at `path`."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HostfileError(f"{p}: no such hostfile") from None
    except OSError as exc:
        raise HostfileError(f"{p}: cannot read the hostfile: {exc.strerror or exc}") from None
    if len(text) > 1 << 20:
        raise HostfileError(f"{p}: too large for a hostfile")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HostfileError(f"{p}: not valid JSON: {exc}") from None
    return parse_hostfile(data, str(p))
