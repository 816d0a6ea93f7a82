"""Recording fakes of nodes, systems under test and clusters, for testing the nemesis alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusters.node import ExecResult
from foundation.config import TestConfig


@dataclass
class FakeNode:
    name: str
    address: str
    calls: list[list[str]] = field(default_factory=list)
    ledger: Path | None = None
    ledger_seen: list[bool] = field(default_factory=list)

    @property
    def hostname(self) -> str:
        return self.name

    def exec(
        self,
        argv: list[str],
        *,
        timeout: float = 60.0,
        check: bool = True,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        self.calls.append(list(argv))
        if self.ledger is not None:
            self.ledger_seen.append(any(self.ledger.glob("nemesis/*.json")))
        if argv[:3] == ["ip", "-o", "-4"]:
            return ExecResult(0, f"2: eth0    inet {self.address}/24 brd x scope global eth0\n", "")
        return ExecResult(0, "", "")

    def start_daemon(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_path: str
    ) -> int:
        return 1

    def daemon_pid(self, name: str) -> int | None:
        return None

    def signal_daemon(self, name: str, signal: int) -> None:
        self.calls.append(["signal", name, str(signal)])

    def upload(self, local_path: str, remote_path: str) -> None: ...

    def download(self, remote_path: str, local_path: str) -> None: ...

    def scripts(self) -> str:
        return "\n".join(" ".join(c) for c in self.calls)


class FakeSut:
    """Killable + Pausable + HasLeaders + HasDataDirs, recording what was done to whom."""

    def __init__(self, names: list[str]):
        self.names = names
        self.events: list[tuple[str, str]] = []
        self.leader = names[0]
        self.controller_name = names[-1]

    def kill(self, node: Any) -> None:
        self.events.append(("kill", node.name))

    def start(self, node: Any) -> None:
        self.events.append(("start", node.name))

    def restart(self, node: Any) -> None:
        self.events.append(("restart", node.name))

    def pause(self, node: Any) -> None:
        self.events.append(("pause", node.name))

    def resume(self, node: Any) -> None:
        self.events.append(("resume", node.name))

    def leaders(self) -> dict[tuple[str, int], str | None]:
        return {("t0", 0): self.leader, ("t0", 1): self.leader}

    def controller(self) -> str | None:
        return self.controller_name

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return {
            tp: {"leader": self.leader, "leader_epoch": 1, "isr": list(self.names)} for tp in self.leaders()
        }

    def data_dirs(self, node: Any) -> list[str]:
        return [f"/data/{node.name}"]

    def broker_id(self, node: Any) -> int:
        return int(node.name.lstrip("n"))

    def registered_brokers(self) -> list[int]:
        """Killed brokers are noticed at once (a rolling kill waits for that)."""
        return []

    def clock_file(self, node: Any) -> str:
        return f"/clock/{node.name}"


class PlainSut:
    """Only Killable: no leaders, no clocks."""

    def kill(self, node: Any) -> None: ...

    def start(self, node: Any) -> None: ...

    def restart(self, node: Any) -> None: ...


@dataclass
class FakeCluster:
    nodes: list[FakeNode]
    sut: Any
    zookeeper_node: FakeNode | None = None
    state_dir: Path | None = None

    def bootstrap_servers(self) -> list[str]:
        return []  # no Kafka client reaches a fake cluster (a pattern's load wait is met at once)


def cluster(n: int = 3, sut: Any = None, ledger: Path | None = None, zk: bool = True) -> FakeCluster:
    nodes = [FakeNode(f"n{i}", f"10.77.9.{10 + i}", ledger=ledger) for i in range(1, n + 1)]
    zk_node = FakeNode("zk", "10.77.9.2", ledger=ledger) if zk else None
    return FakeCluster(nodes, sut if sut is not None else FakeSut([x.name for x in nodes]), zk_node)


def config(**kw: Any) -> TestConfig:
    return TestConfig(seed=7, **kw)
