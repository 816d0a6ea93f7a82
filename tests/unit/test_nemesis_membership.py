"""The membership fault (`member`): add, move, decommission against a recording system, the
draw among what is possible, the spare node default, and the refusals before the run."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from foundation.config import resolve
from foundation.errors import BadInput
from nemesis import build_nemesis, check_config
from nemesis.preflight import system_refusal
from tests.support.nemesis_fakes import FakeNode, FakeSut, cluster, config


class MemberSut(FakeSut):
    """FakeSut + HasMembership: reassignments finish when `settled` is called (or at once)."""

    def __init__(self, names: list[str], spares: list[FakeNode], instant: bool = True) -> None:
        super().__init__(names)
        self.spares = spares
        self.running = set(names)
        self.assigned: dict[tuple[str, int], list[str]] = {
            ("t0", 0): ["n1", "n2", "n3"],
            ("t0", 1): ["n2", "n3", "n1"],
        }
        self.pending: dict[tuple[str, int], list[str]] = {}
        self.instant = instant
        self.nodes: list[Any] = []

    def broker_nodes(self) -> list[Any]:
        return [*self.nodes, *self.spares]

    def members(self) -> list[str]:
        return sorted(self.running)

    def add_broker(self, node: Any) -> None:
        self.events.append(("add", node.name))
        self.running.add(node.name)

    def remove_broker(self, node: Any) -> None:
        self.events.append(("remove", node.name))
        self.running.discard(node.name)

    def assignment(self) -> dict[tuple[str, int], list[str]]:
        return {k: list(v) for k, v in self.assigned.items()}

    def reassign(self, targets: dict[tuple[str, int], list[str]]) -> None:
        self.events.append(("reassign", repr(sorted(targets.items()))))
        self.pending.update(targets)
        if self.instant:
            self.settle()

    def settle(self) -> None:
        self.assigned.update(self.pending)
        self.pending.clear()

    def reassigning(self) -> list[tuple[str, int]]:
        return sorted(self.pending)


def _nemesis(tmp_path: Path, **kw: Any) -> tuple[Any, MemberSut, list[dict[str, Any]]]:
    c = cluster(3)
    spares = [FakeNode("n4", "10.77.9.14")]
    sut = MemberSut([n.name for n in c.nodes], spares)
    sut.nodes = list(c.nodes)
    c.sut = sut
    ops: list[dict[str, Any]] = []

    class History:
        def append(self, op: dict[str, Any]) -> dict[str, Any]:
            ops.append(op)
            return op

    nem = build_nemesis(config(**kw), c, History(), random.Random(1), state_dir=tmp_path)  # type: ignore[arg-type]
    return nem, sut, ops


def test_add_then_move_then_decommission(tmp_path: Path) -> None:
    nem, sut, ops = _nemesis(tmp_path, spare_nodes=1)
    nem.apply({"do": "member", "action": "add"})
    assert ("add", "n4") in sut.events and "n4" in nem.ctx.names
    nem.apply({"do": "member", "action": "move", "topic": "t0", "partition": 0, "from": "n1", "to": "n4"})
    assert sut.assigned[("t0", 0)] == ["n4", "n2", "n3"]
    nem.heal("member")  # the move settles
    nem.apply({"do": "member", "action": "decommission", "target": "n2"})
    assert "n2" not in nem.ctx.names and ("remove", "n2") not in sut.events  # removed at its heal
    nem.heal_all()
    assert ("remove", "n2") in sut.events
    assert all("n2" not in replicas for replicas in sut.assigned.values())
    assert all(len(set(r)) == 3 for r in sut.assigned.values())
    kinds = [(o["f"], o["type"]) for o in ops]
    assert kinds.count(("member", "ok")) == 3 and ("member-settled", "ok") in kinds
    settled = [o["value"] for o in ops if o["f"] == "member-settled" and o["type"] == "ok"]
    assert [v.get("removed") for v in settled] == [None, "n2"]  # the move, then the decommission
    assert "t0-1" in settled[1]["moves"] and settled[0]["moves"]["t0-0"]["to"] == ["n4", "n2", "n3"]


def test_an_unfinished_reassignment_is_journaled_info_at_its_heal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nemesis.packages import membership

    monkeypatch.setattr(membership, "SETTLE_TIMEOUT_S", 0.2)
    nem, sut, ops = _nemesis(tmp_path, spare_nodes=1)
    sut.instant = False
    nem.apply({"do": "member", "action": "add"})
    nem.apply({"do": "member", "action": "move", "topic": "t0", "partition": 1})
    nem.heal()
    assert ops[-1]["f"] == "member-settled" and ops[-1]["type"] == "info"
    assert "not finished" in ops[-1]["error"]


def test_a_decommission_whose_moves_did_not_happen_keeps_the_broker(tmp_path: Path) -> None:
    """A cluster may drop a request: the broker is not stopped, it stays a member."""
    nem, sut, ops = _nemesis(tmp_path, spare_nodes=1)
    nem.apply({"do": "member", "action": "add"})
    sut.reassign = lambda targets: None  # type: ignore[method-assign]  # dropped
    nem.apply({"do": "member", "action": "decommission", "target": "n3"})
    assert "n3" not in nem.ctx.names
    nem.heal_all()
    assert ops[-1]["f"] == "member-settled" and ops[-1]["type"] == "info"
    assert "reassignment not carried out: t0-0 ended on ['n1', 'n2', 'n3']" in ops[-1]["error"]
    assert "n3" in nem.ctx.names and ("remove", "n3") not in sut.events


def test_a_bare_member_draws_what_is_possible_now(tmp_path: Path) -> None:
    nem, sut, ops = _nemesis(tmp_path, spare_nodes=1)
    nem.apply({"do": "member", "pick": 3})  # 3 brokers, RF 3: only add is possible
    assert ops[-1]["value"]["action"] == "add"
    nem, sut, ops = _nemesis(tmp_path, spare_nodes=1)
    nem.apply({"do": "member", "action": "decommission"})
    assert ops[-1]["type"] == "fail" and "fewer than 3" in ops[-1]["error"]


def test_spare_nodes_default_to_one_for_membership_faults() -> None:
    assert resolve(None, {"nemesis": "member"}).spare_nodes == 1
    assert resolve(None, {"nemesis": "kill,member:add"}).spare_nodes == 1
    assert resolve(None, {"nemesis": "kill"}).spare_nodes == 0
    assert resolve(None, {"schedule": [{"do": "member", "action": "add"}]}).spare_nodes == 1
    assert resolve(None, {"nemesis": "member", "spare_nodes": 2}).spare_nodes == 2
    with pytest.raises(BadInput, match="spare_nodes"):
        resolve(None, {"nodes": 31, "spare_nodes": 2})


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        (
            {"nemesis": "member:decommission", "spare_nodes": 0},
            "fault 'member': member:decommission would leave 2 brokers, fewer than the replication "
            "factor 3 (nodes 3 + spare_nodes 0)",
        ),
        (
            {"nemesis": "member:move", "spare_nodes": 0},
            "fault 'member': member:move needs more brokers than the replication factor 3 "
            "(nodes 3 + spare_nodes 0)",
        ),
        (
            {"nemesis": "member:add", "nodes": 4, "spare_nodes": 0},
            "fault 'member': member:add needs a spare node to start a broker on (spare_nodes = 0)",
        ),
        (
            {"schedule": [{"do": "member", "action": "decommission"}], "spare_nodes": 0},
            "schedule[0]: member:decommission would leave 2 brokers, fewer than the replication "
            "factor 3 (nodes 3 + spare_nodes 0)",
        ),
    ],
)
def test_impossible_membership_changes_are_refused_before_the_run(settings: dict[str, Any], why: str) -> None:
    with pytest.raises(BadInput) as e:
        check_config(resolve(None, settings))
    assert str(e.value) == why


def test_a_system_that_cannot_reassign_is_refused() -> None:
    class KillOnly:
        def kill(self, node: Any) -> None: ...
        def start(self, node: Any) -> None: ...
        def restart(self, node: Any) -> None: ...

    why = system_refusal(resolve(None, {"nemesis": "member:add"}), KillOnly())
    assert why == (
        "fault 'member': member needs a system that can add and remove brokers and reassign "
        'partitions (the own system, or a definition with membership = "reassign" such as Kafka\'s); '
        "KillOnly cannot"
    )
    check_config(resolve(None, {"nemesis": "member"}))  # with a spare node, every change can happen
