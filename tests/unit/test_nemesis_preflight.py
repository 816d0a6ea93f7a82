"""What a fault needs is asked before any cluster starts: of the system, then of one bare node."""

from __future__ import annotations

from typing import Any

from clusters.node import ExecResult
from foundation.config import resolve
from nemesis.preflight import node_probing_packages, node_refusal, system_refusal


class KillOnly:
    """A system that can kill and start brokers but knows no leaders."""

    def kill(self, node: Any) -> None: ...
    def start(self, node: Any) -> None: ...
    def restart(self, node: Any) -> None: ...


class BareNode:
    """A node whose kernel has no netem: `tc ... netem` fails, everything else works."""

    name, address, hostname = "n1", "192.0.2.1", "n1"

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    def exec(self, argv: list[str], **kw: Any) -> ExecResult:
        self.ran.append(argv)
        if "netem" in " ".join(argv):
            return ExecResult(1, "Error: Specified qdisc kind is unknown.\n", "")
        return ExecResult(0, "", "")


def test_a_role_the_system_does_not_know_is_refused_without_a_node() -> None:
    config = resolve(None, {"nemesis": "kill:leader"})
    why = system_refusal(config, KillOnly())
    assert why is not None and "leader" in why
    assert system_refusal(resolve(None, {"nemesis": "kill"}), KillOnly()) is None
    assert node_probing_packages(resolve(None, {"nemesis": "kill"}), KillOnly()) == []


def test_delay_is_refused_on_a_node_without_netem_and_loss_is_not() -> None:
    config = resolve(None, {"nemesis": "loss,delay"})
    packages = node_probing_packages(config, KillOnly())
    assert [p.name for p in packages] == ["loss", "delay"]
    node = BareNode()
    why = node_refusal(packages, node)
    assert why == (
        "fault 'delay' cannot run here: tc netem is not available on n1 (Error: Specified qdisc kind is "
        "unknown.); loss, bandwidth and partition can run here"
    )
    assert node_refusal(packages[:1], BareNode()) is None


def test_power_loss_is_refused_for_a_system_without_data_dirs() -> None:
    why = system_refusal(resolve(None, {"nemesis": "lose-unsynced"}), KillOnly())
    assert why is not None and "needs a system with data dirs" in why


class NoFuseNode(BareNode):
    def exec(self, argv: list[str], **kw: Any) -> ExecResult:
        self.ran.append(argv)
        return ExecResult(1 if "/dev/fuse" in " ".join(argv) else 0, "", "")


def test_power_loss_is_refused_on_a_node_without_fuse() -> None:
    packages = node_probing_packages(resolve(None, {"nemesis": "lose-unsynced"}), KillOnly())
    assert node_refusal(packages, NoFuseNode()) == (
        "fault 'lose-unsynced' cannot run here: FUSE is not available on n1 (no writable /dev/fuse or no fusermount)"
    )
