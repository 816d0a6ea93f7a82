"""Node handles: how to reach a node again without the cluster object, as plain JSON.

The fault ledger stores a node's handle next to each heal command, so a controller that starts
after a crash can still run the heal recipe of a fault its predecessor left behind. A handle is
made from a live node (`handle_of`) and turned back into something that runs commands
(`reattach`); `gone` says whether the node vanished with its cluster (nothing left to heal).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Mapping
from typing import Any

from clusters.node import Node

Handle = list[str] | dict[str, Any]


def handle_of(node: Node) -> Handle | None:
    """How to run a command on `node` later without the cluster object (after a controller crash).

    An argv prefix when the node has one (`wrap`, e.g. netns's `nsenter --net=...`; a docker
    container's `docker exec`), or the ssh host to reconnect to; None when there is no way.
    """
    wrap = getattr(node, "wrap", None)
    if callable(wrap):
        try:
            prefix = wrap([])
        except Exception:  # noqa: BLE001 - a node that cannot describe itself has no prefix
            prefix = None
        if isinstance(prefix, list) and all(isinstance(p, str) for p in prefix):
            return list(prefix)
    container = getattr(node, "container", None)
    if isinstance(container, str) and container:
        return ["docker", "exec", container]
    host = getattr(node, "host", None)
    if dataclasses.is_dataclass(host) and not isinstance(host, type):
        return {
            "ssh": dataclasses.asdict(host),
            "cluster": str(getattr(node, "cluster", "")),
            "address": str(node.address),
        }
    return None


def reattach(name: str, handle: Mapping[str, Any]) -> Node | None:
    """A node object for a handle that needs one (an ssh host); None for an argv prefix."""
    if "ssh" not in handle:
        return None
    from clusters.ssh_backend import SshNode
    from foundation.config import SshHost

    node: Node = SshNode(name, SshHost(**handle["ssh"]), handle.get("cluster", ""), handle.get("address"))
    return node


def gone(handle: Any) -> bool:
    """Whether the handle's node has vanished (a netns or a container that no longer exists)."""
    access = handle or []
    if not isinstance(access, list):
        return False
    if len(access) == 3 and access[:2] == ["docker", "exec"]:
        probe = subprocess.run(
            ["docker", "inspect", "--format", "{{.State.Running}}", access[2]],
            capture_output=True,
            text=True,
            check=False,
        )
        return probe.stdout.strip() != "true"
    if len(access) >= 4 and access[:3] == ["ip", "netns", "exec"]:
        return not os.path.exists(f"/run/netns/{access[3]}")
    for arg in access:  # nsenter --net=/run/netns/<ns> ...
        if isinstance(arg, str) and arg.startswith("--net="):
            return not os.path.exists(arg[len("--net=") :])
    return False
