"""Mounting a data dir on clusters.lazyfs on a node: start the FUSE daemon, wait until it is
mounted and answers on its control socket. Shared by the own system and defined systems."""

from __future__ import annotations

import time

from clusters import lazyfs
from clusters.node import Node
from clusters.node_files import log_tail
from foundation.errors import InfrastructureError

MOUNT_TIMEOUT_S = 30.0


def mount(
    node: Node, python: str, daemon: str, backing: str, mountpoint: str, sock: str, log_path: str
) -> None:
    """Put `mountpoint` on lazyfs (contents in `backing`); raises with the daemon's log tail."""
    node.exec(["mkdir", "-p", backing, mountpoint])
    node.start_daemon(daemon, lazyfs.mount_argv(python, backing, mountpoint, sock), log_path=log_path)
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while True:
        ping = node.exec(lazyfs.ctl_argv(python, sock, "ping"), check=False)
        if ping.ok and node.exec(["mountpoint", "-q", mountpoint], check=False).ok:
            return
        if node.daemon_pid(daemon) is None or time.monotonic() > deadline:
            raise InfrastructureError(
                f"lazyfs for {mountpoint} on {node.name} did not come up; log: {log_tail(node, log_path, 8)}"
            )
        time.sleep(0.1)
