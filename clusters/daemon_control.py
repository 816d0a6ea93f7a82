"""Stopping, freezing and thawing one daemon on a node: the same for every system under test.

A node that can freeze a whole cgroup (netns) is `PausesDaemons`, which also
stop the daemon's children; elsewhere SIGSTOP/SIGCONT to its process group does the job.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import Protocol

from clusters.node import Node, PausesDaemons

log = logging.getLogger(__name__)


def freeze(node: Node, daemon: str) -> None:
    if isinstance(node, PausesDaemons):
        node.pause_daemon(daemon)
    else:
        node.signal_daemon(daemon, signal.SIGSTOP)


def thaw(node: Node, daemon: str) -> None:
    if isinstance(node, PausesDaemons):
        node.resume_daemon(daemon)
    else:
        node.signal_daemon(daemon, signal.SIGCONT)


def stop_gracefully(node: Node, daemon: str, timeout: float, poll: float = 0.05) -> None:
    """SIGTERM (a controlled shutdown), then SIGKILL when it has not exited within `timeout`."""
    if node.daemon_pid(daemon) is None:
        return
    thaw(node, daemon)  # a frozen process cannot handle SIGTERM
    node.signal_daemon(daemon, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while node.daemon_pid(daemon) is not None:
        if time.monotonic() > deadline:
            log.warning("%s on %s ignored SIGTERM for %gs: killing it", daemon, node.name, timeout)
            node.signal_daemon(daemon, signal.SIGKILL)
            break
        time.sleep(poll)


class TracksDaemons(Protocol):
    def daemon_pid(self, name: str) -> int | None: ...


def wait_gone(node: TracksDaemons, daemon: str, timeout: float) -> bool:
    """Wait until no process of the daemon is left; False on timeout."""
    deadline = time.monotonic() + timeout
    while node.daemon_pid(daemon) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
