"""Patterns (named step sequences aimed from the cluster's state) and `--nemesis all`.

Recording fakes only (the nemesis alone); the real sequences run in
tests/integration/test_nemesis_faults.py and in campaigns/detection.toml.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from foundation.config import TestConfig
from foundation.errors import BadInput
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter
from nemesis import build_nemesis, check_config
from nemesis.packages import PlanEnv
from nemesis.packages.patterns import PATTERNS
from nemesis.packages.sequence import Sight, Timing
from nemesis.schedule import ALL_MIX, deal
from tests.support.nemesis_fakes import FakeSut, cluster, config

TIMING = Timing(session_s=6.0, lag_s=10.0)


def _sight(power_loss: bool = False, controller: str = "n3") -> Sight:
    states = {("t0", 0): {"leader": "n1", "leader_epoch": 4, "isr": ["n1", "n2", "n3"]}}
    return Sight(states, controller, ("t0", 0), ("n1", "n2", "n3"), random.Random(1), power_loss)


def _plan(fault: str, name: str, power_loss: bool = False) -> list[dict[str, Any]]:
    pattern = PATTERNS[(fault, name)]
    aim = pattern.choose(_sight(power_loss))
    assert aim is not None and aim.topic == "t0" and aim.state["leader_epoch"] == 4
    return pattern.steps(aim, TIMING)


def _faults(plan: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(s["do"], s.get("target", s.get("grudge"))) for s in plan if "do" in s]


def _fake_clock(monkeypatch: Any, time_module: Any, clock: Any) -> None:
    """`time.monotonic` reads `clock` in this test's thread only: the nemesis's `ready` watches of
    earlier tests may still be polling in threads of their own, and must not eat the readings."""
    real, me = time_module.monotonic, threading.get_ident()
    monkeypatch.setattr(
        time_module, "monotonic", lambda: next(clock) if threading.get_ident() == me else real()
    )


def test_each_pattern_is_a_sequence_aimed_at_the_partition_as_clients_see_it() -> None:
    # a follower frozen until it leaves the ISR, then the in-sync replicas crash together
    lagging = _plan("kill", "lagging-follower")
    assert _faults(lagging) == [("pause", "n2"), ("kill", ["n1", "n3"])]
    assert any(s.get("wait_until") == "out-of-isr" and s["required"] for s in lagging)
    waits = [s.get("wait_until") for s in lagging if "wait_until" in s]
    assert waits.index("hw-advancing") == waits.index("out-of-isr") + 1  # the in-sync ones acknowledge again
    powered = _plan("kill", "lagging-follower", power_loss=True)
    assert powered[0] == {"writeback": ["n1", "n2", "n3"]}
    assert ("lose-unsynced", ["n1", "n3"]) in _faults(powered)
    # the ISR shrunk to the leader alone, which then loses power
    lonely = _plan("lose-unsynced", "lonely-leader", power_loss=True)
    assert _faults(lonely) == [
        ("partition", {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}),
        ("lose-unsynced", ["n1"]),
    ]
    # the ISR shrinks to the leader, then it acknowledges alone (its high watermark grows) first
    assert [s.get("wait_until") for s in lonely if "wait_until" in s] == [
        "isr-shrunk-to-leader",
        "hw-advancing",
    ]
    # its page cache is flushed once the ISR has shrunk (what the shrink brought below the high
    # watermark, unacknowledged, is on disk): the power loss takes only what it acknowledged alone
    steps = [next(k for k in ("do", "wait_until", "writeback", "undo") if k in s) for s in lonely]
    assert steps == ["do", "wait_until", "writeback", "wait_until", "do", "undo"]
    # the successor cut off from the leader, then the leader dies
    assert _faults(_plan("partition", "cut-off-failover")) == [
        ("partition", {"n1": ["n2"], "n2": ["n1"]}),
        ("kill", "n1"),
    ]
    # a restarted follower elected before it caught up (if it is still in the ISR once it serves)
    restarted = _plan("kill", "restarted-follower")
    assert _faults(restarted) == [
        ("partition", {"n1": ["n2"], "n2": ["n1"]}),
        ("kill", "n2"),
        ("kill", ["n1", "n3"]),
    ]
    waits = [(s["wait_until"], s.get("required", False)) for s in restarted if "wait_until" in s]
    assert waits == [("broker-ready", False), ("in-isr", True), ("leader-is", False)]
    # the survivor deaf to the leader (its fetches still arrive), the leader dies, then the successor
    failover = _plan("kill", "failover")
    assert _faults(failover) == [("partition", {"n3": ["n1"]}), ("kill", "n1"), ("kill", "n2")]
    # deaf until it is elected (the dead leader's kernel still retransmits what it owed it)
    elected = {"wait_until": "leader-is", "node": "n3", "timeout": 9.0, "topic": "t0", "partition": 0}
    assert failover[-2:] == [elected, {"undo": "deaf"}]
    # the leader isolated from its followers (and from ZooKeeper, or not), then it dies
    isolated = _faults(_plan("partition", "leader-isolated"))
    assert isolated[0][0] == "partition" and set(isolated[0][1]["n1"]) >= {"n2", "n3"}
    assert isolated[1] == ("kill", "n1")


def test_fast_leader_change_elects_the_successor_then_the_survivor_and_is_never_drawn() -> None:
    # assignment order names the successor (Kafka's controller elects the first live ISR replica
    # in assignment order), not ISR order
    states = {("t0", 0): {"leader": "n1", "isr": ["n1", "n2", "n3"], "replicas": ["n1", "n3", "n2"]}}
    pattern = PATTERNS[("kill", "fast-leader-change")]
    aim = pattern.choose(Sight(states, "n3", ("t0", 0), ("n1", "n2", "n3"), random.Random(1), False))
    assert aim is not None and aim.roles == {"leader": "n1", "successor": "n3", "survivor": "n2"}
    plan = pattern.steps(aim, Timing(session_s=15.0, lag_s=10.0))
    assert _faults(plan) == [
        ("partition", {"n1": ["n3"], "n3": ["n1"]}),
        ("kill", "n1"),
        ("pause", "n2"),
        ("kill", "n3"),
    ]
    # frozen from 0.75 T after the leader's kill until the successor's kill: below one session
    frozen = plan.index(next(s for s in plan if s.get("do") == "pause"))
    to_kill = plan[frozen + 1 : plan.index(next(s for s in plan if s.get("as") == "second"))]
    assert sum(s.get("wait", 0) + s.get("timeout", 0) for s in to_kill) < 15.0
    elected = [s["node"] for s in plan if s.get("wait_until") == "leader-is"]
    assert elected == ["n3", "n2"] and all(s["required"] for s in plan if "wait_until" in s)
    # the old leader back first; the successor once the survivor appends in its epoch
    assert [s["undo"] for s in plan if "undo" in s] == ["frozen", "first", "behind", "second"]
    # the survivor as controller (frozen, it would elect nobody) is moved off first
    moved = pattern.choose(Sight(states, "n2", ("t0", 0), ("n1", "n2", "n3"), random.Random(1), False))
    assert moved is not None and moved.variant == "controller-moved"
    moved_plan = pattern.steps(moved, TIMING)
    assert _faults(moved_plan)[0] == ("kill", "n2")
    # started again only once the controller took it out of the ISR (else "back in it" is met at once)
    waits = [s["wait_until"] for s in moved_plan if "wait_until" in s]
    assert waits[:3] == ["broker-gone", "out-of-isr", "in-isr"]
    assert not pattern.drawn


def test_the_follower_a_pattern_faults_leads_no_other_partition_when_one_can() -> None:
    # n2 leads t0-1: freezing or restarting it would stall t0-1 too (and the clients waiting on it)
    states = {
        ("t0", 0): {"leader": "n1", "leader_epoch": 4, "isr": ["n1", "n2", "n3"]},
        ("t0", 1): {"leader": "n2", "leader_epoch": 2, "isr": ["n2", "n3", "n1"]},
    }
    sight = Sight(states, "n3", ("t0", 0), ("n1", "n2", "n3"), random.Random(1), False)
    lagging = PATTERNS[("kill", "lagging-follower")].choose(sight)
    assert lagging is not None and lagging.roles == {"leader": "n1", "lagging": "n3", "in_sync": "n2"}
    restarted = PATTERNS[("kill", "restarted-follower")].choose(sight)
    assert restarted is not None and restarted.roles["restarted"] == "n3"


def test_a_pattern_finds_no_aim_without_the_shape_it_needs() -> None:
    lonely_isr = Sight(
        {("t0", 0): {"leader": "n1", "isr": ["n1"]}},
        None,
        ("t0", 0),
        ("n1", "n2", "n3"),
        random.Random(1),
        True,
    )
    for key in (("kill", "lagging-follower"), ("kill", "failover"), ("lose-unsynced", "lonely-leader")):
        assert PATTERNS[key].choose(lonely_isr) is None


class ShrinkingSut(FakeSut):
    """A FakeSut whose leader drops a frozen follower from the ISR (as after replica.lag.time.max.ms)."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.frozen: set[str] = set()

    def pause(self, node: Any) -> None:
        super().pause(node)
        self.frozen.add(node.name)

    def resume(self, node: Any) -> None:
        super().resume(node)
        self.frozen.discard(node.name)

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        isr = [n for n in self.names if n not in self.frozen]
        return {tp: {"leader": self.leader, "leader_epoch": 1, "isr": isr} for tp in self.leaders()}


def test_lagging_follower_plays_its_parts_as_one_fault(tmp_path: Path) -> None:
    sut = ShrinkingSut(["n1", "n2", "n3"])
    path = tmp_path / "h.jsonl"
    history = HistoryWriter(path)
    nem = build_nemesis(
        config(zookeeper_session_timeout_ms=400), cluster(3, sut=sut), history, random.Random(1), tmp_path
    )
    nem.execute(
        {"do": "kill", "target": "lagging-follower", "topic": "t0", "partition": 0, "pick": 3},
        threading.Event(),
    )
    assert sut.events == [("pause", "n2"), ("kill", "n1"), ("kill", "n3"), ("resume", "n2")]
    assert sorted(a["nodes"] for a in nem.active_faults()) == [["n1", "n3"]]  # down until healed
    nem.heal_all()
    history.close()
    assert pair_problems(path).complete
    parts = [
        o["value"]["pattern"] for o in iter_ops(path) if o["type"] == "invoke" and "pattern" in o["value"]
    ]
    assert [(p["name"], p["part"]) for p in parts] == [("lagging-follower", 0), ("lagging-follower", 1)]
    assert len({p["id"] for p in parts}) == 1
    assert parts[0]["aim"]["roles"] == {"leader": "n1", "lagging": "n2", "in_sync": "n3"}
    assert parts[0]["aim"]["isr"] == ["n1", "n2", "n3"] and parts[0]["plan"]


def test_a_required_condition_not_met_ends_the_pattern_and_heals_its_parts(tmp_path: Path) -> None:
    sut = FakeSut(["n1", "n2", "n3"])  # never shrinks the ISR
    nem = build_nemesis(
        config(replica_lag_time_max_ms=100, zookeeper_session_timeout_ms=200),
        cluster(3, sut=sut),
        None,
        random.Random(1),
        tmp_path,
    )
    nem.execute(
        {"do": "kill", "target": "lagging-follower", "topic": "t0", "partition": 0, "pick": 3},
        threading.Event(),
    )
    assert sut.events == [("pause", "n2"), ("resume", "n2")] and nem.active_faults() == []
    nem.heal_all()


def test_patterns_are_scripted_steps_too_and_checked_like_faults() -> None:
    steps = (
        {"do": "kill", "target": "lagging-follower", "topic": "t0", "partition": 0},
        {"do": "partition", "grudge": "leader-isolated"},
        {"do": "lose-unsynced", "target": "lonely-leader"},
        {"heal": "all"},
    )
    check_config(TestConfig(schedule=steps, seed=1))
    with pytest.raises(BadInput, match="at least 3 nodes"):
        check_config(
            TestConfig(
                nodes=2, replication_factor=2, min_insync=1, nemesis=("kill:lagging-follower",), seed=1
            )
        )
    with pytest.raises(BadInput, match="qualifier"):
        check_config(TestConfig(nemesis=("pause:lagging-follower",), seed=1))


def test_all_draws_every_supported_fault_mostly_as_patterns(tmp_path: Path) -> None:
    # the safe settings (fsync every append): no group is dealt ahead of its rank
    safe = config(nemesis=("all",), log_flush_interval_messages=1)
    nem = build_nemesis(safe, cluster(3), None, random.Random(5), tmp_path)
    nem.validate(probe=False)
    mix = dict(("+".join(f"{n}:{q}" if q else n for n, q in g), w) for g, w in nem.mix())
    # FakeSut has no lazyfs: the power-loss faults are left out, the rest is drawn
    assert "lose-unsynced:lonely-leader" not in mix and "lose-unsynced" not in mix
    assert {"kill:lagging-follower", "kill:failover", "partition:cut-off-failover", "pause", "clock"} <= set(
        mix
    )
    steps = nem.steps()
    dealt = [
        f"{step['do']}:{step.get('target', step.get('grudge'))}"
        for step in (next(steps) for _ in range(3000))
        if "do" in step
    ]
    groups = len(nem.mix())
    top = max(w for _, w in ALL_MIX)
    first_rank = {"kill:lagging-follower", "kill:failover", "corrupt:lonely-leader"}
    assert {k for k, w in ALL_MIX if w == top} == first_rank
    orders = set()
    for start in range(0, len(dealt) - groups, groups):
        cycle = dealt[start : start + groups]
        # a deck: the three broadest patterns first in every cycle, in any order
        assert set(cycle[:3]) == first_rank
        orders.add(tuple(cycle))
    assert len(orders) > 1  # shuffled anew each cycle
    patterns = Counter(k.split(":", 1)[1] in {p for _, p in PATTERNS} for k in dealt)
    assert patterns[True] > patterns[False]


@pytest.mark.parametrize(
    ("settings", "first"),
    [
        ({"min_insync": 1}, {"corrupt:lonely-leader"}),
        ({"unclean_election": True}, {"kill:lagging-follower"}),
        ({"variant": "high-watermark"}, {"kill:failover", "kill:restarted-follower"}),
    ],
)
def test_all_deals_first_what_exposes_the_tests_own_unsafe_setting(
    tmp_path: Path, settings: dict[str, Any], first: set[str]
) -> None:
    unsafe = config(nemesis=("all",), log_flush_interval_messages=1, **settings)
    nem = build_nemesis(unsafe, cluster(3), None, random.Random(11), tmp_path)
    nem.validate(probe=False)
    groups = len(nem.mix())
    steps = nem.steps()
    dealt = [
        f"{step['do']}:{step.get('target', step.get('grudge'))}"
        for step in (next(steps) for _ in range(1500))
        if "do" in step
    ]
    for start in range(0, len(dealt) - groups, groups):
        assert set(dealt[start : start + len(first)]) == first


def test_the_deck_deals_every_group_once_per_cycle_higher_ranks_first() -> None:
    rng = random.Random(7)
    ranks = [1, 10, 3, 1, 10, 2, 3, 1]
    cycles = [deal(rng, ranks) for _ in range(20)]
    for cycle in cycles:
        assert sorted(cycle) == list(range(len(ranks)))
        assert [ranks[i] for i in cycle] == sorted(ranks, reverse=True)
    assert len({tuple(c) for c in cycles}) > 1
    firsts = Counter(c[0] for c in cycles)
    assert set(firsts) == {1, 4}


def test_bare_faults_draw_their_patterns_only_where_they_can_run() -> None:
    small = PlanEnv(names=("n1", "n2"), topics=1, partitions=1, has_leaders=True, has_zookeeper=True)
    from nemesis.packages import PACKAGES

    assert "lagging-follower" not in PACKAGES["kill"].usable_qualifiers(small, None)
    three = PlanEnv(names=("n1", "n2", "n3"), topics=1, partitions=1, has_leaders=True, has_zookeeper=True)
    assert "lonely-leader" not in PACKAGES["lose-unsynced"].usable_qualifiers(three, None)
    powered = PlanEnv(("n1", "n2", "n3"), 1, 1, True, True, power_loss=True)
    assert "lonely-leader" in PACKAGES["lose-unsynced"].usable_qualifiers(powered, None)
    assert "cut-off-failover" in PACKAGES["partition"].usable_qualifiers(three, None)


class LoadedSut(FakeSut):
    """A FakeSut whose partitions report a high watermark that grows by 15 each time it is read."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.hw = 0

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        self.hw += 15
        return {tp: {**s, "high_watermark": self.hw} for tp, s in super().partition_state().items()}


def test_a_pattern_strikes_once_the_load_flows(tmp_path: Path) -> None:
    from nemesis import conditions

    c = cluster(3, sut=LoadedSut(["n1", "n2", "n3"]))
    c.bootstrap_servers = lambda: ["10.77.9.11:9092"]  # type: ignore[method-assign]
    nem = build_nemesis(config(), c, None, random.Random(1), tmp_path)
    step = {"topic": "t0", "partition": 0, "records": 20}
    met = [conditions.hw_advancing(nem.ctx, step)[0] for _ in range(3)]
    assert met == [False, False, True]  # baseline, +15, +30: twenty records acknowledged since
    conditions.close(nem.ctx)
    assert conditions.hw_advancing(nem.ctx, step) == (False, {"high_watermark": 60, "since_wait": 0})


def test_a_pattern_that_holds_its_crash_gets_no_second_hold() -> None:
    from nemesis.schedule import CRASH_MARGIN_S, random_steps

    env = PlanEnv(("n1", "n2", "n3"), 1, 2, True, True, crash_noticed_s=6.0)
    steps = random_steps(
        [[("kill", "lagging-follower")], [("kill", "stalled-failover")]], env, random.Random(3), 10.0, [1, 1]
    )
    drawn = [next(steps) for _ in range(20)]
    seen = set()
    for i, step in enumerate(drawn[:-1]):
        if "do" in step:
            seen.add(step["target"])
            # lagging-follower waited for the election itself; stalled-failover's crash is held a session
            if step["target"] == "lagging-follower":
                assert drawn[i + 1] == {"wait": CRASH_MARGIN_S}
            else:
                assert drawn[i + 1]["wait"] >= 6.0 + CRASH_MARGIN_S
    assert seen == {"lagging-follower", "stalled-failover"}
    holding = {name for (_, name), p in PATTERNS.items() if p.holds_crash}
    assert holding == {
        "lagging-follower",
        "failover",
        "restarted-follower",
        "lonely-leader",
        "fast-leader-change",
    }


def test_a_failed_high_watermark_read_keeps_the_wait_baseline(tmp_path: Path, monkeypatch: Any) -> None:
    from nemesis import conditions

    c = cluster(3)
    c.bootstrap_servers = lambda: ["10.77.9.11:9092"]  # type: ignore[method-assign]
    nem = build_nemesis(config(), c, None, random.Random(1), tmp_path)
    ends = iter([100, None, 125])

    def high_watermark_of(host: str, port: int, topic: str, partition: int, timeout: float) -> int | None:
        end = next(ends)
        if end is None:
            raise TimeoutError("a frozen broker does not answer")
        return end

    monkeypatch.setattr(conditions.kafka_metadata, "high_watermark_of", high_watermark_of)
    step = {"topic": "t0", "partition": 0, "records": 20}
    assert not conditions.hw_advancing(nem.ctx, step)[0]  # baseline 100
    assert not conditions.hw_advancing(nem.ctx, step)[0]  # unknown: not yet, the baseline stays
    assert conditions.hw_advancing(nem.ctx, step) == (True, {"high_watermark": 125, "since_wait": 25})
    conditions.close(nem.ctx)


def test_a_frozen_broker_cannot_hang_the_high_watermark_read(tmp_path: Path, monkeypatch: Any) -> None:
    """A frozen broker accepts connections and never answers (a Kafka client bootstrapping to one
    hung for 30 s); the read gives each broker a short timeout and goes on to the next."""
    import socket
    import time

    from nemesis import conditions

    frozen = socket.socket()
    frozen.bind(("127.0.0.1", 0))
    frozen.listen(8)
    try:
        c = cluster(3)
        c.bootstrap_servers = lambda: [f"127.0.0.1:{frozen.getsockname()[1]}"]  # type: ignore[method-assign]
        nem = build_nemesis(config(), c, None, random.Random(1), tmp_path)
        monkeypatch.setattr(conditions, "HW_READ_TIMEOUT_S", 0.3)
        started = time.monotonic()
        assert conditions.high_watermark(nem.ctx, {"topic": "t0", "partition": 0}) is None
        assert time.monotonic() - started < 3
    finally:
        frozen.close()


class FlowingSut(FakeSut):
    """A FakeSut whose high watermark follows a script of read results."""

    def __init__(self, names: list[str], readings: list[int | None]) -> None:
        super().__init__(names)
        self.readings = iter(readings)

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        hw = next(self.readings)
        extra = {} if hw is None else {"high_watermark": hw}
        return {tp: {**s, **extra} for tp, s in super().partition_state().items()}


def test_load_flows_when_the_high_watermark_grows_through_the_whole_window(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """`load-flowing`: half the expected acknowledgements in each half of the window; a burst of
    stuck clients coming back, then nothing, is not load."""
    from nemesis import conditions

    clock = iter([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5])
    _fake_clock(monkeypatch, conditions.time, clock)
    # a burst of 40 at once, then nothing; then 10 every quarter of a second
    readings = [0, 40, 40, 40, 40, 50, 60, 70, 80, 90, 100]
    c = cluster(3, sut=FlowingSut(["n1", "n2", "n3"], readings))
    c.bootstrap_servers = lambda: ["10.77.9.11:9092"]  # type: ignore[method-assign]
    nem = build_nemesis(config(rate=200.0, partitions=2), c, None, random.Random(1), tmp_path)
    assert conditions.expected_records(nem.ctx, 1.0) == 20  # 200 ops/s, half sends, 2 partitions, 40 %
    step = {"topic": "t0", "partition": 0}
    met = [conditions.load_flowing(nem.ctx, step)[0] for _ in readings]
    assert met == [False, False, False, False, False, False, False, True, True, True, True]
    conditions.close(nem.ctx)


def test_the_lonely_leader_loses_its_disk_only_once_it_acknowledges_alone() -> None:
    """`corrupt:lonely-leader`: the cut until the ISR is the leader alone, then (required) the
    leader acknowledging alone, then its disk wiped and the broker started again empty."""
    plan = _plan("corrupt", "lonely-leader")
    assert _faults(plan) == [
        ("partition", {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}),
        ("corrupt", "n1"),
    ]
    wipe = next(s for s in plan if s.get("do") == "corrupt")
    assert wipe["kind"] == "wipe" and wipe["as"] == "wiped"
    gates = [s for s in plan if "wait_until" in s]
    assert [(s["wait_until"], s.get("required", False)) for s in gates] == [
        ("isr-shrunk-to-leader", True),
        ("acknowledged-alone", True),
        ("leader-is", False),
    ]
    kinds = [next(k for k in ("do", "wait_until", "undo") if k in s) for s in plan]
    assert kinds == ["do", "wait_until", "wait_until", "do", "undo", "undo", "wait_until"]
    assert [s["undo"] for s in plan if "undo" in s] == ["cut", "wiped"]


class AloneSut(FakeSut):
    """A FakeSut whose ISR and high watermark are what the test sets them to."""

    isr: list[str]
    hw = 0

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return {
            tp: {**s, "isr": self.isr, "high_watermark": self.hw}
            for tp, s in super().partition_state().items()
        }


def test_acknowledged_alone_is_steady_growth_with_the_leader_alone_in_the_isr(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The shrink's one jump of the high watermark (min.insync.replicas=2 refuses what comes
    after) is not acknowledging alone; steady growth while the ISR is the leader alone is."""
    from nemesis import conditions

    clock = iter([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75])
    _fake_clock(monkeypatch, conditions.time, clock)
    alone, full = ["n1"], ["n1", "n2", "n3"]
    # the ISR shrinks at the second reading, the high watermark jumps by 60 at the third and stands
    # still; from the seventh it grows by 10 every quarter of a second while the leader is alone
    readings = [0, 0, 60, 60, 60, 60, 70, 80, 90, 100, 110, 120]
    isrs = [full, alone, alone, alone, alone, alone, alone, alone, alone, alone, full, alone]
    sut = AloneSut(["n1", "n2", "n3"])
    c = cluster(3, sut=sut)
    c.bootstrap_servers = lambda: ["10.77.9.11:9092"]  # type: ignore[method-assign]
    nem = build_nemesis(config(rate=200.0, partitions=2), c, None, random.Random(1), tmp_path)
    step = {"topic": "t0", "partition": 0, "node": "n1"}
    met = []
    for hw, isr in zip(readings, isrs, strict=True):
        sut.hw, sut.isr = hw, isr
        met.append(conditions.acknowledged_alone(nem.ctx, step)[0])
    # steady through a whole window from the ninth reading on; the full ISR of the eleventh starts over
    assert met == [False] * 8 + [True, True, False, False]
    conditions.close(nem.ctx)


class TwoPartitionsSut(FakeSut):
    """A FakeSut whose two partitions' high watermarks are what the test sets them to."""

    hws = (0, 0)

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        states = super().partition_state()
        return {tp: {**s, "high_watermark": self.hws[tp[1]]} for tp, s in states.items()}


def test_the_schedule_starts_once_acknowledgements_reach_the_cluster(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """`acks-flowing`: the sum of the partitions' high watermarks grows through a whole window,
    however slowly (a transactional workload on a loaded machine acknowledges a few per second)."""
    from nemesis import conditions

    clock = iter([0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0])
    _fake_clock(monkeypatch, conditions.time, clock)
    sut = TwoPartitionsSut(["n1", "n2", "n3"])
    c = cluster(3, sut=sut)
    c.bootstrap_servers = lambda: ["10.77.9.11:9092"]  # type: ignore[method-assign]
    nem = build_nemesis(config(partitions=2), c, None, random.Random(1), tmp_path)
    # nothing for a second, then one record on one partition or the other every quarter second
    readings = [(0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (1, 0), (1, 1), (2, 1), (2, 2)]
    met = []
    for hws in readings:
        sut.hws = hws
        met.append(conditions.acks_flowing(nem.ctx, {"window": 1.0})[0])
    assert met == [False] * 7 + [True, True]
    conditions.close(nem.ctx)


def test_acks_flowing_is_met_when_one_reading_takes_longer_than_half_the_window(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """On a loaded machine one reading of every partition's high watermark can take longer than
    half the window (4 s): the halves are then readings apart, not the first one alone (which
    never grew, so the schedule never started)."""
    from nemesis import conditions

    clock = iter([0.0, 5.0, 10.0, 15.0, 20.0])
    monkeypatch.setattr(conditions.time, "monotonic", lambda: next(clock))
    sut = TwoPartitionsSut(["n1", "n2", "n3"])
    c = cluster(3, sut=sut)
    c.bootstrap_servers = lambda: ["10.77.9.11:9092"]  # type: ignore[method-assign]
    nem = build_nemesis(config(partitions=2), c, None, random.Random(1), tmp_path)
    # steady growth, then one reading that stood still: a stall is still not flowing
    readings = [(0, 0), (5, 5), (10, 10), (10, 10), (20, 10)]
    met = []
    for hws in readings:
        sut.hws = hws
        met.append(conditions.acks_flowing(nem.ctx, {})[0])
    assert met == [False, False, True, False, False]
    conditions.close(nem.ctx)
