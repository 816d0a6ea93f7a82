"""The rapid double failover (`kill:failover`): a partition's leader, then, half a session timeout
later, the in-sync replica it fails over to; both stay down until healed.

Recording fakes only (the nemesis alone); the real thing runs in tests/integration/test_nemesis_*.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from foundation.errors import BadInput
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter
from nemesis import build_nemesis
from nemesis.packages import PACKAGES, PlanEnv
from nemesis.packages.process import BUG_FINDING_WEIGHTS, FAILOVER, STALLED_FAILOVER
from nemesis.packages.process_patterns import failover_targets
from tests.support.nemesis_fakes import FakeSut, cluster, config

ENV = PlanEnv(names=("n1", "n2", "n3"), topics=1, partitions=2, has_leaders=True, has_zookeeper=True)


class IsrSut(FakeSut):
    """A FakeSut with per-partition leaders and ISRs (in ISR order)."""

    def __init__(self, states: dict[tuple[str, int], tuple[str, list[str]]], controller: str) -> None:
        super().__init__(["n1", "n2", "n3"])
        self.states = states
        self.controller_name = controller

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return {
            tp: {"leader": leader, "leader_epoch": 3, "isr": isr} for tp, (leader, isr) in self.states.items()
        }


def _states(**kw: tuple[str, list[str]]) -> dict[tuple[str, int], dict[str, Any]]:
    return {("t0", int(k[1:])): {"leader": v[0], "isr": v[1]} for k, v in kw.items()}


def test_successor_is_the_first_in_sync_follower() -> None:
    states = _states(p0=("n2", ["n2", "n3", "n1"]), p1=("n1", ["n3", "n1", "n2"]))
    assert failover_targets(states, None, ("t0", 0)) == (("t0", 0), "n2", "n3")
    assert failover_targets(states, None, ("t0", 1)) == (("t0", 1), "n1", "n3")


def test_a_successor_that_is_the_controller_is_passed_over_when_possible() -> None:
    states = _states(p0=("n2", ["n2", "n3", "n1"]), p1=("n3", ["n3", "n1", "n2"]))
    assert failover_targets(states, "n3", ("t0", 0)) == (("t0", 1), "n3", "n1")
    only = _states(p0=("n2", ["n2", "n3", "n1"]))
    assert failover_targets(only, "n3", ("t0", 0)) == (("t0", 0), "n2", "n3")


def test_no_target_without_an_in_sync_follower() -> None:
    assert failover_targets(_states(p0=("n2", ["n2"])), None, ("t0", 0)) is None
    assert failover_targets({("t0", 0): {"leader": None, "isr": ["n1", "n2"]}}, None, ("t0", 0)) is None
    assert failover_targets({}, None, ("t0", 0)) is None


def test_failover_is_drawn_most_often_and_needs_three_nodes_with_leaders() -> None:
    rng = random.Random(4)
    drawn = Counter(PACKAGES["kill"].plan(rng, ENV, None)["target"] for _ in range(2000))
    assert drawn.most_common(1)[0][0] == FAILOVER
    assert BUG_FINDING_WEIGHTS[FAILOVER] == max(BUG_FINDING_WEIGHTS.values())
    step = PACKAGES["kill"].plan(random.Random(1), ENV, FAILOVER)
    assert step["target"] == FAILOVER and "topic" in step and "partition" in step
    small = PlanEnv(names=("n1", "n2"), topics=1, partitions=1, has_leaders=True, has_zookeeper=True)
    assert FAILOVER not in PACKAGES["kill"].usable_qualifiers(small, None)
    blind = PlanEnv(names=("n1", "n2", "n3"), topics=1, partitions=1, has_leaders=False, has_zookeeper=False)
    assert FAILOVER not in PACKAGES["kill"].usable_qualifiers(blind, None)
    assert FAILOVER not in Counter(PACKAGES["restart"].plan(rng, ENV, None)["target"] for _ in range(300))
    with pytest.raises(BadInput, match="at least 3 nodes"):
        build_nemesis(
            config(nodes=2, replication_factor=2, min_insync=1, nemesis=("kill:failover",)),
            cluster(2),
            None,
            random.Random(1),
            "/x",
        ).validate(probe=False)
    with pytest.raises(BadInput, match="qualifier"):
        build_nemesis(config(nemesis=("pause:failover",)), cluster(), None, random.Random(1), "/x").validate(
            probe=False
        )


def test_failover_kills_the_leader_then_its_successor_half_a_session_later(tmp_path: Path) -> None:
    sut = IsrSut(
        {("t0", 0): ("n2", ["n2", "n1", "n3"]), ("t0", 1): ("n3", ["n3", "n2", "n1"])}, controller="n3"
    )
    c = cluster(3, sut=sut)
    path = tmp_path / "h.jsonl"
    history = HistoryWriter(path)
    cfg = config(zookeeper_session_timeout_ms=400)
    nem = build_nemesis(cfg, c, history, random.Random(1), tmp_path)
    stop = threading.Event()
    nem.execute({"do": "kill", "target": FAILOVER, "topic": "t0", "partition": 0, "pick": 5}, stop)
    assert sut.events == [("kill", "n2"), ("kill", "n1")]
    assert sorted(a["nodes"][0] for a in nem.active_faults()) == ["n1", "n2"]  # down until healed
    nem.heal()
    assert Counter(k for k, _ in sut.events) == {"kill": 2, "start": 2}
    history.close()
    assert pair_problems(path).complete
    ops = list(iter_ops(path))
    kills = [o for o in ops if o["f"] == "kill" and o["type"] == "invoke"]
    assert [k["value"]["target"] for k in kills] == ["n2", "n1"]
    # first the survivor goes deaf to the leader (one way: its fetches still arrive), until the
    # pattern ends (the fake elects nobody: the wait for the survivor's election times out)
    deaf = [o for o in ops if o["f"] == "partition" and o["type"] == "invoke"]
    assert [d["value"]["grudge"] for d in deaf] == [{"n3": ["n2"]}]
    healed = next(o for o in ops if o["f"] == "heal" and o["type"] == "ok")
    assert kills[1]["index"] < healed["index"]
    infos = [o["value"]["pattern"] for o in [*deaf, *kills]]
    assert [i["part"] for i in infos] == [0, 1, 2] and {i["name"] for i in infos} == {FAILOVER}
    aim = infos[0]["aim"]
    assert aim["roles"] == {"leader": "n2", "successor": "n1", "survivor": "n3"} and aim["leader_epoch"] == 3
    assert aim["isr"] == ["n2", "n1", "n3"] and {"wait": 0.2} in infos[0]["plan"]
    oks = [o for o in ops if o["f"] == "kill" and o["type"] == "ok"]
    assert [o["value"]["pattern"]["part"] for o in oks] == [1, 2]
    assert all(k["value"]["topic"] == "t0" and k["value"]["partition"] == 0 for k in kills)
    gap = kills[1]["time"] - [o for o in ops if o["f"] == "kill" and o["type"] == "ok"][0]["time"]
    assert gap >= 0.19e9


class ElectingSut(IsrSut):
    """An IsrSut whose controller elects the successor once the leader is killed."""

    def kill(self, node: Any) -> None:
        super().kill(node)
        for tp, (leader, isr) in list(self.states.items()):
            if leader == node.name:
                self.states[tp] = (next(r for r in isr if r != leader), isr)


def test_failover_past_a_controlling_successor_freezes_the_survivor_across_the_election(
    tmp_path: Path,
) -> None:
    # The only partition's successor (n3) is the controller: killed half a session after the
    # leader, it would take the first election with it. Instead the survivor (n1) is frozen
    # while n3 elects itself, n3 dies, and n1 is thawed to follow a dead leader.
    sut = ElectingSut({("t0", 0): ("n2", ["n2", "n3", "n1"])}, controller="n3")
    path = tmp_path / "h.jsonl"
    history = HistoryWriter(path)
    nem = build_nemesis(
        config(zookeeper_session_timeout_ms=400), cluster(3, sut=sut), history, random.Random(1), tmp_path
    )
    nem.execute(
        {"do": "kill", "target": FAILOVER, "topic": "t0", "partition": 0, "pick": 5}, threading.Event()
    )
    assert sut.events == [("kill", "n2"), ("pause", "n1"), ("kill", "n3"), ("resume", "n1")]
    assert sorted(a["nodes"][0] for a in nem.active_faults()) == ["n2", "n3"]  # down until healed
    nem.heal()
    history.close()
    assert pair_problems(path).complete
    infos = [
        o["value"]["pattern"] for o in iter_ops(path) if o["type"] == "invoke" and "pattern" in o["value"]
    ]
    assert [i["part"] for i in infos] == [0, 1, 2, 3]  # deaf survivor, kill, pause, kill
    assert infos[0]["aim"]["roles"] == {"leader": "n2", "successor": "n3", "survivor": "n1"}
    assert infos[0]["aim"]["variant"] == "past-controller"


def test_failover_without_a_target_is_journaled_as_fail(tmp_path: Path) -> None:
    sut = IsrSut({("t0", 0): ("n2", ["n2"])}, controller="n3")
    path = tmp_path / "h.jsonl"
    history = HistoryWriter(path)
    nem = build_nemesis(config(), cluster(3, sut=sut), history, random.Random(1), tmp_path)
    nem.execute(
        {"do": "kill", "target": FAILOVER, "topic": "t0", "partition": 0, "pick": 5}, threading.Event()
    )
    history.close()
    assert sut.events == []
    assert [(o["type"], o["f"]) for o in iter_ops(path)] == [("invoke", "kill"), ("fail", "kill")]


def test_random_schedule_runs_a_failover_and_heals_both(tmp_path: Path) -> None:
    sut = IsrSut(
        {("t0", 0): ("n1", ["n1", "n3", "n2"]), ("t0", 1): ("n1", ["n1", "n3", "n2"])}, controller="n2"
    )
    c = cluster(3, sut=sut)
    nem = build_nemesis(
        config(nemesis=("kill:failover",), zookeeper_session_timeout_ms=200),
        c,
        None,
        random.Random(2),
        tmp_path,
    )
    steps = nem.steps()
    kinds = []
    for _ in range(4):
        step = next(steps)
        kinds.append(next(k for k in ("do", "wait", "heal") if k in step))
        if "wait" not in step:
            nem.execute(step, threading.Event())
    assert kinds == ["wait", "do", "wait", "heal"]
    assert sut.events == [("kill", "n1"), ("kill", "n3"), ("start", "n1"), ("start", "n3")] or sorted(
        sut.events[2:]
    ) == [("start", "n1"), ("start", "n3")]
    nem.heal_all()


def test_after_a_crash_the_calm_starts_once_every_broker_serves_and_every_isr_is_full() -> None:
    def following_heals(faults: tuple[str, ...]) -> set[tuple[str, ...]]:
        nem = build_nemesis(config(nemesis=faults), cluster(3), None, random.Random(3), "/x")
        steps, seen, after = nem.steps(), set(), None
        for _ in range(60):
            step = next(steps)
            if "heal" in step:
                after = []
            elif after is not None and "wait_until" in step:
                after.append(step["wait_until"])
            elif after is not None:
                seen.add(tuple(after))
                after = None
        return seen

    assert following_heals(("kill",)) == {("brokers-ready", "isrs-full")}
    assert following_heals(("pause",)) == {("isrs-full",)}


def test_brokers_ready_asks_every_node() -> None:
    from nemesis import conditions

    class Ready(FakeSut):
        def __init__(self) -> None:
            super().__init__(["n1", "n2", "n3"])
            self.asked: list[str] = []

        def wait_ready(self, node: Any, timeout: float | None = None) -> None:
            self.asked.append(node.name)

    sut = Ready()
    nem = build_nemesis(config(), cluster(3, sut=sut), None, random.Random(1), "/x")
    assert conditions.brokers_ready(nem.ctx, {"wait_until": "brokers-ready"})[0]
    assert sut.asked == ["n1", "n2", "n3"]
    conditions.check(nem.ctx, {"wait_until": "brokers-ready"})


def test_stalled_failover_freezes_the_successor_kills_the_leader_and_thaws_it(tmp_path: Path) -> None:
    sut = IsrSut(
        {("t0", 0): ("n2", ["n2", "n1", "n3"]), ("t0", 1): ("n3", ["n3", "n2", "n1"])}, controller="n3"
    )
    path = tmp_path / "h.jsonl"
    history = HistoryWriter(path)
    nem = build_nemesis(
        config(zookeeper_session_timeout_ms=400), cluster(3, sut=sut), history, random.Random(1), tmp_path
    )
    nem.execute(
        {"do": "kill", "target": STALLED_FAILOVER, "topic": "t0", "partition": 0, "pick": 5},
        threading.Event(),
    )
    assert sut.events == [("pause", "n1"), ("kill", "n2"), ("resume", "n1")]
    assert [a["nodes"] for a in nem.active_faults()] == [["n2"]]  # the leader stays down until healed
    nem.heal()
    history.close()
    assert pair_problems(path).complete
    ops = list(iter_ops(path))
    assert [(o["type"], o["f"]) for o in ops][:6] == [
        ("invoke", "pause"),
        ("ok", "pause"),
        ("invoke", "kill"),
        ("ok", "kill"),
        ("invoke", "resume"),
        ("ok", "resume"),
    ]
    steps = [o["value"]["pattern"] for o in ops if o["type"] == "invoke" and o["f"] in ("pause", "kill")]
    assert [s["part"] for s in steps] == [0, 1] and steps[0]["name"] == STALLED_FAILOVER
    assert steps[0]["aim"]["roles"]["successor"] == "n1" and steps[0]["aim"]["roles"]["leader"] == "n2"
    pause_ok = next(o for o in ops if o["type"] == "ok" and o["f"] == "pause")
    kill_ok = next(o for o in ops if o["type"] == "ok" and o["f"] == "kill")
    resume = next(o for o in ops if o["type"] == "invoke" and o["f"] == "resume")
    assert kill_ok["time"] - pause_ok["time"] >= 0.09e9 and resume["time"] - kill_ok["time"] >= 0.09e9


def test_stalled_failover_is_drawn_and_does_nothing_once_stopped(tmp_path: Path) -> None:
    rng = random.Random(6)
    drawn = Counter(PACKAGES["kill"].plan(rng, ENV, None)["target"] for _ in range(2000))
    assert drawn[STALLED_FAILOVER] > 1.5 * drawn["one"]
    sut = IsrSut({("t0", 0): ("n2", ["n2", "n1", "n3"])}, controller="n3")
    nem = build_nemesis(config(), cluster(3, sut=sut), None, random.Random(1), tmp_path)
    stop = threading.Event()
    stop.set()
    nem.execute({"do": "kill", "target": STALLED_FAILOVER, "topic": "t0", "partition": 0, "pick": 5}, stop)
    assert sut.events == []  # stopped before it began: nothing frozen, nothing to thaw
