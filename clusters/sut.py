"""Small optional protocols a system under test implements (after Jepsen's DB/Kill/Pause/Primary).

A nemesis asks `isinstance(sut, Killable)` and says clearly when a system cannot do a fault.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from clusters.node import Node


@runtime_checkable
class Lifecycle(Protocol):
    def setup(self) -> None:
        """Install, configure and start the whole system on its nodes."""
        ...

    def teardown(self) -> None:
        """Stop everything and remove what setup created."""
        ...

    def bootstrap_servers(self) -> list[str]:
        """host:port addresses the controller's clients connect to."""
        ...


@runtime_checkable
class Killable(Protocol):
    def kill(self, node: Node) -> None:
        """SIGKILL the broker on `node`."""
        ...

    def start(self, node: Node) -> None:
        """(Re)start the broker on `node`; returns once the process runs."""
        ...

    def restart(self, node: Node) -> None:
        """Graceful stop (SIGTERM, wait) and start."""
        ...


@runtime_checkable
class Pausable(Protocol):
    def pause(self, node: Node) -> None: ...

    def resume(self, node: Node) -> None: ...


@runtime_checkable
class HasLeaders(Protocol):
    def leaders(self) -> dict[tuple[str, int], str | None]:
        """(topic, partition) -> name of the node that leads it now (None when leaderless)."""
        ...

    def controller(self) -> str | None:
        """Name of the node that is the cluster controller now."""
        ...

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        """(topic, partition) -> {"leader": node name, "leader_epoch": int, "isr": [node names]}."""
        ...


@runtime_checkable
class HasLogs(Protocol):
    def log_files(self, node: Node) -> list[str]:
        """Paths on the node of the logs worth collecting."""
        ...


@runtime_checkable
class HasDataDirs(Protocol):
    def data_dirs(self, node: Node) -> list[str]:
        """Paths on the node of the broker's data dirs (Kafka's on-disk format)."""
        ...
