"""Mounting a data dir on clusters.lazyfs on a node: start the FUSE daemon, wait until it is
mounted and answers on its control socket; and whether a test needs it (the power-loss fault)."""

from __future__ import annotations

import time

from clusters import lazyfs
from clusters.node import Node
from clusters.node_files import log_tail
from clusters.system_def import is_definition
from foundation.config import TestConfig, fault_names
from foundation.errors import BadInput, InfrastructureError

MOUNT_TIMEOUT_S = 30.0
LOSE_UNSYNCED = "lose-unsynced"  # the fault that needs data dirs on lazyfs (clusters/lazyfs.py)


def wants_lazyfs(config: TestConfig) -> bool:
    """Does this test ask for the power-loss fault (data dirs must then sit on lazyfs)?"""
    # Fault specs may carry qualifiers and groups: "lose-unsynced:all", "kill+power-loss".
    names = fault_names(config)
    if "all" in names and config.backend == "netns":  # `--nemesis all` takes power loss where it can
        return True
    return bool(names & {LOSE_UNSYNCED, "disk", "power-loss"}) or any(
        s.get("do") == LOSE_UNSYNCED for s in config.schedule
    )


def refuse_lazyfs_off_netns(config: TestConfig, backend: str) -> None:
    """Only netns nodes put data dirs on FUSE: say so before a power-loss test starts elsewhere."""
    if is_definition(config.system) and wants_lazyfs(config):
        raise BadInput(
            f"the power-loss fault (lose-unsynced) needs the netns backend: data dirs on FUSE are "
            f"not set up on the {backend} backend"
        )


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
