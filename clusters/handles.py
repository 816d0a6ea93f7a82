"""Node handles: how to reach a node again without the cluster object, as plain JSON.

The fault ledger stores a node's handle next to each heal command, so a controller that starts
after a crash can still run the heal recipe of a fault its predecessor left behind. A node that
can be reached that way is `Reattachable` (`node.handle()`); `reattach` turns a handle back into
something that runs commands, and `gone` says whether the node vanished with its cluster (its
namespace or container no longer exists: nothing is left to heal there).

Handles (`backend` says which):
- `{"backend": "netns", "netns": NAME, "prefix": ARGV}`: run `ARGV + command` on this machine;
- `{"backend": "docker", "container": NAME, "prefix": ARGV}`: the same, through `docker exec`;
- `{"backend": "ssh", "ssh": {host, port, user, ...}, "cluster": NAME, "address": IP}`;
- `{"backend": "local", "prefix": []}` (`LOCAL`): this machine itself.
A bare list is read as an argv prefix (ledgers written before handles had a backend).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import Any

from clusters.node import ExecResult, Node, Reattachable, RunsCommands
from foundation.errors import InfrastructureError

LOCAL: dict[str, Any] = {"backend": "local", "prefix": []}


class PrefixRunner:
    """Runs commands on this machine behind an argv prefix (`nsenter --net=...`, `docker exec c`).

    A netns node runs its own commands through one too (the prefix its handle records), so a
    re-attached node runs them exactly as the node did. A command that times out or cannot start
    raises subprocess.TimeoutExpired or OSError.
    """

    def __init__(self, prefix: Sequence[str]) -> None:
        self.prefix = [str(p) for p in prefix]

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float = 60.0,
        check: bool = True,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        proc = subprocess.run(
            [*self.prefix, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            env={**os.environ, **env} if env else None,
            check=False,
        )
        result = ExecResult(proc.returncode, proc.stdout, proc.stderr)
        if check and not result.ok:
            raise InfrastructureError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
        return result


def handle_of(node: Node) -> dict[str, Any] | None:
    """The node's handle, or None when it cannot be reached without the cluster object."""
    return node.handle() if isinstance(node, Reattachable) else None


def reattach(name: str, handle: Any) -> RunsCommands | None:
    """Something that runs commands on the node a handle names; None for an unusable handle."""
    if isinstance(handle, list):
        return PrefixRunner(handle)
    if not isinstance(handle, dict):
        return None
    backend = handle.get("backend")
    if backend in ("netns", "docker", "local") and isinstance(handle.get("prefix"), list):
        return PrefixRunner(handle["prefix"])
    if backend == "ssh" or "ssh" in handle:
        from clusters.ssh_backend import SshNode
        from foundation.config import SshHost

        return SshNode(name, SshHost(**handle["ssh"]), str(handle.get("cluster", "")), handle.get("address"))
    return None


def gone(handle: Any) -> bool:
    """Whether the handle's node vanished with its cluster (its namespace or container is gone)."""
    if not isinstance(handle, dict):
        return False
    if handle.get("backend") == "netns":
        return not os.path.exists(f"/run/netns/{handle.get('netns')}")
    if handle.get("backend") == "docker":
        probe = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Running}}", str(handle.get("container"))],
            capture_output=True,
            text=True,
            check=False,
        )
        return probe.stdout.strip() != "true"
    return False
