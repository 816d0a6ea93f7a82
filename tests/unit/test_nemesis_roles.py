"""Faults aimed at a role of a defined system (`kill:role=zookeeper`, `partition:broker|storage`):
parsing, static checks and resolution (a stand-in system with roles, inside this unit test only)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from foundation.errors import BadInput
from nemesis import schedule, targets


class RoleSystem:
    def roles(self) -> list[str]:
        return ["broker", "storage"]

    def nodes_of_role(self, role: str) -> list[str]:
        return {"broker": ["n1", "n2", "n3"], "storage": ["st2", "st1"]}.get(role, [])

    def node_named(self, name: str) -> Any:
        return None


def test_role_qualifiers_parse_for_targeted_faults_and_partitions() -> None:
    groups = schedule.parse_specs(["kill:role=storage", "pause:role=storage", "partition:broker|storage"])
    assert groups == [
        [("kill", "role=storage")],
        [("pause", "role=storage")],
        [("partition", "broker|storage")],
    ]
    with pytest.raises(BadInput, match="unknown qualifier"):
        schedule.parse_specs(["partition:role=storage"])


def test_a_role_target_resolves_to_the_roles_nodes() -> None:
    names = ["n1", "n2", "n3"]
    targets.check("role=storage", names, RoleSystem(), "kill")
    assert targets.resolve("role=storage", names, RoleSystem(), random.Random(0)) == ["st1", "st2"]


def test_unknown_roles_and_systems_without_roles_are_refused() -> None:
    with pytest.raises(BadInput, match="no role 'cache'"):
        targets.check("role=cache", ["n1"], RoleSystem(), "kill")
    with pytest.raises(BadInput, match="needs a system with roles"):
        targets.check("role=storage", ["n1"], object(), "kill")


class LeaderSystem:
    def partition_state(self) -> dict[tuple[str, int], dict[str, Any]]:
        return {
            ("t0", 0): {"leader": "n2", "isr": ["n2", "n3", "n1"]},
            ("t0", 1): {"leader": "n1", "isr": ["n1"]},
        }


def test_the_successor_is_the_first_isr_member_after_the_leader() -> None:
    names = ["n1", "n2", "n3"]
    rng = random.Random(0)
    assert targets.resolve("successor", names, LeaderSystem(), rng, "t0", 0) == ["n3"]
    assert (
        targets.resolve("successor", names, LeaderSystem(), rng, "t0", 1) == []
    )  # the ISR is the leader alone


class StatelessSystem:
    """Every broker serves every partition (ServesEveryPartition)."""

    def leaderless(self) -> str:
        return "every broker serves every partition"

    def serving(self) -> dict[str, str | None]:
        return {"n1": None, "n2": None}


def test_a_leader_target_on_a_system_without_partition_leaders_is_refused_with_the_reason() -> None:
    for target in ("leader", "controller", "followers"):
        with pytest.raises(
            BadInput, match=f"target '{target}' needs a partition leader.*serves every partition"
        ):
            targets.check(target, ["n1", "n2", "n3"], StatelessSystem(), "kill")
    targets.check("one", ["n1", "n2", "n3"], StatelessSystem(), "kill")  # the rest runs
