"""The random process-fault draw (weighted towards the targets that find bugs) and the rolling
kill / restart (every broker, one after another, each next one once the previous serves again).

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
from nemesis.packages.patterns import PATTERNS
from nemesis.packages.process import (
    BUG_FINDING_WEIGHTS,
    FAILOVER,
    LAGGING_FOLLOWER,
    RESTARTED_FOLLOWER,
    ROLLING,
    STALLED_FAILOVER,
)
from tests.support.nemesis_fakes import FakeSut, PlainSut, cluster, config

ENV = PlanEnv(names=("n1", "n2", "n3"), topics=1, partitions=2, has_leaders=True, has_zookeeper=True)


class ReadySut(FakeSut):
    """A FakeSut whose restarted brokers serve again only after `slow` readiness checks."""

    def __init__(self, names: list[str], slow: int = 0):
        super().__init__(names)
        self.slow = slow
        self.checks: Counter[str] = Counter()
        self.checks_when_done: Counter[str] = Counter()

    def broker_id(self, node: Any) -> int:
        self.events.append(("gone?", node.name))
        return super().broker_id(node)

    def wait_ready(self, node: Any, timeout: float | None = None) -> None:
        self.checks[node.name] += 1
        self.events.append(("ready?", node.name))
        if self.checks[node.name] <= self.slow:
            raise RuntimeError(f"{node.name} not registered yet")


def _targets(seed: int, fault: str = "kill", n: int = 2000) -> Counter[str]:
    rng = random.Random(seed)
    return Counter(PACKAGES[fault].plan(rng, ENV, None)["target"] for _ in range(n))


def test_kill_draw_favours_the_targets_that_find_bugs() -> None:
    drawn = _targets(3)
    assert set(drawn) == {
        "one",
        "minority",
        "majority",
        "all",
        "leader",
        "controller",
        "followers",
        ROLLING,
        FAILOVER,
        STALLED_FAILOVER,
        LAGGING_FOLLOWER,
        RESTARTED_FOLLOWER,
    }
    for strong in (FAILOVER, "all", "majority", "leader"):
        assert BUG_FINDING_WEIGHTS[strong] > 1
        assert drawn[strong] > 1.5 * drawn["one"] and drawn[strong] > 1.5 * drawn["minority"]
    assert drawn[FAILOVER] > drawn["all"] > drawn["majority"] > drawn["leader"] > drawn[ROLLING]
    assert _targets(3) == drawn  # reproducible from the seed


def test_pause_is_not_rolling_and_restart_is() -> None:
    assert ROLLING not in _targets(1, "pause", 300)
    assert ROLLING in _targets(1, "restart", 300)
    with pytest.raises(BadInput, match="qualifier"):
        build_nemesis(config(nemesis=("pause:rolling",)), cluster(), None, random.Random(1), "/x").validate(
            probe=False
        )
    build_nemesis(config(nemesis=("kill:rolling",)), cluster(), None, random.Random(1), "/x").validate(
        probe=False
    )
    scripted = config(schedule=({"do": "kill", "target": "rolling"}, {"do": "restart", "target": "rolling"}))
    build_nemesis(scripted, cluster(), None, random.Random(1), "/x").validate(probe=False)


def test_rolling_without_leaders_still_drawn() -> None:
    env = PlanEnv(names=("n1", "n2", "n3"), topics=1, partitions=1, has_leaders=False, has_zookeeper=False)
    rng = random.Random(5)
    drawn = Counter(PACKAGES["kill"].plan(rng, env, None)["target"] for _ in range(300))
    assert ROLLING in drawn and "leader" not in drawn


def _rolling_run(
    tmp_path: Path, fault: str, pick: int, slow: int = 0
) -> tuple[ReadySut, list[dict[str, Any]]]:
    c = cluster(3, sut=ReadySut(["n1", "n2", "n3"], slow=slow))
    history = HistoryWriter(tmp_path / f"h-{fault}-{pick}.jsonl")
    nem = build_nemesis(config(), c, history, random.Random(1), tmp_path)
    nem.execute({"do": fault, "target": ROLLING, "pick": pick}, threading.Event())
    c.sut.checks_when_done = Counter(c.sut.checks)  # what the step itself waited for
    nem.heal_all()
    history.close()
    assert pair_problems(tmp_path / f"h-{fault}-{pick}.jsonl").complete
    return c.sut, list(iter_ops(tmp_path / f"h-{fault}-{pick}.jsonl"))


def test_rolling_kill_restarts_every_broker_one_after_another(tmp_path: Path) -> None:
    sut, ops = _rolling_run(tmp_path, "kill", pick=11, slow=2)
    acts = [e for e in sut.events if e[0] != "ready?"]
    order = [n for kind, n in acts if kind == "kill"]
    assert sorted(order) == ["n1", "n2", "n3"]
    # kill a, (a noticed gone) start a, (a ready) kill b, (b gone) start b, (b ready) kill c, ...
    assert acts == [(k, n) for n in order for k in ("kill", "gone?", "start")]
    for prev, nxt in zip(order, order[1:], strict=False):
        # the first check that found it serving is its third (two "not yet"s), before the next kill
        # (the nemesis's `ready` watch checks in a thread of its own too, so count the checks)
        checks = [i for i, e in enumerate(sut.events) if e == ("ready?", prev)]
        assert len(checks) >= 3 and checks[2] < sut.events.index(("kill", nxt))
    # the step does not wait for the last one (only the nemesis's `ready` watch checks it, in a
    # thread of its own, and it did not serve before the step returned)
    assert sut.checks_when_done[order[-1]] < 3
    readies = [o for o in ops if o["f"] == "ready" and o["type"] == "invoke"]
    assert [r["value"]["nodes"] for r in readies] == [[n] for n in order]
    kills = [o for o in ops if o["f"] == "kill" and o["type"] == "invoke"]
    assert [k["value"]["target"] for k in kills] == order
    assert [k["value"]["pattern"]["part"] for k in kills] == [0, 1, 2]
    assert {k["value"]["pattern"]["id"] for k in kills} == {kills[0]["value"]["pattern"]["id"]}
    assert kills[0]["value"]["pattern"]["aim"]["roles"]["order"] == order
    assert kills[1]["value"]["after"] == {"condition": "broker-ready", "node": order[0]}
    starts = [o for o in ops if o["f"] == "start" and o["type"] == "ok"]
    assert [s["value"]["nodes"] for s in starts] == [[n] for n in order]
    # the same pick gives the same order; the order depends on the pick
    assert [n for k, n in _rolling_run(tmp_path, "kill", pick=11)[0].events if k == "kill"] == order
    orders = {
        tuple(n for k, n in _rolling_run(tmp_path, "kill", pick=p)[0].events if k == "kill") for p in range(8)
    }
    assert len(orders) > 1


def test_rolling_restart_is_graceful_and_one_shot(tmp_path: Path) -> None:
    sut, ops = _rolling_run(tmp_path, "restart", pick=4)
    assert [k for k, _ in sut.events if k != "ready?"] == ["restart"] * 3  # graceful: nothing to notice
    restarts = [(o["type"], o["f"]) for o in ops if o["f"] != "ready"]
    assert restarts == [("invoke", "restart"), ("ok", "restart")] * 3
    # each restarted broker is watched until it serves again (the history's `ready` op)
    readies = [o["value"]["nodes"] for o in ops if o["f"] == "ready" and o["type"] == "invoke"]
    assert len(readies) == 3 and sorted(n for r in readies for n in r) == ["n1", "n2", "n3"]


def test_random_schedule_runs_a_rolling_kill(tmp_path: Path) -> None:
    c = cluster(3, sut=ReadySut(["n1", "n2", "n3"]))
    nem = build_nemesis(config(nemesis=("kill:rolling",)), c, None, random.Random(2), tmp_path)
    steps = nem.steps()
    for _ in range(4):
        step = next(steps)
        if "wait" not in step:
            nem.execute(step, threading.Event())
    nem.heal_all()
    assert Counter(k for k, _ in c.sut.events) == {"kill": 3, "gone?": 3, "start": 3, "ready?": 2}


def test_broker_gone_without_registrations_waits_a_session_timeout(tmp_path: Path) -> None:
    import time

    from nemesis import conditions

    c = cluster(3, sut=PlainSut())
    nem = build_nemesis(config(zookeeper_session_timeout_ms=6000), c, None, random.Random(1), tmp_path)
    step = {"wait_until": "broker-gone", "node": "n1"}
    assert not conditions.broker_gone(nem.ctx, {**step, "since": time.monotonic()})[0]
    assert conditions.broker_gone(nem.ctx, {**step, "since": time.monotonic() - 6.5})[0]
    with pytest.raises(BadInput, match="needs a node"):
        conditions.check(nem.ctx, {"wait_until": "broker-gone", "node": "n9"})


def test_random_crashes_are_held_until_the_cluster_can_notice() -> None:
    def holds(faults: tuple[str, ...], session_ms: int) -> list[tuple[str, float]]:
        c = config(nemesis=faults, nemesis_interval=4.0, zookeeper_session_timeout_ms=session_ms)
        nem = build_nemesis(c, cluster(3), None, random.Random(8), "/x")
        steps, out, last = nem.steps(), [], ""
        for _ in range(60):
            step = next(steps)
            if "do" in step:
                # a pattern that holds its own crash (it waits for the election) gets no second hold
                pattern = PATTERNS.get((step["do"], step.get("target")))
                last = "" if pattern is not None and pattern.holds_crash else step["do"]
            elif "wait" in step and last:
                out.append((last, step["wait"]))
                last = ""
        return out

    killed = holds(("kill", "pause"), 6000)
    assert {f for f, _ in killed} == {"kill", "pause"}
    assert all(hold >= 7.0 for f, hold in killed if f == "kill")
    assert any(hold < 3.0 for f, hold in killed if f == "pause")  # other faults keep their holds
    # a short session: the ordinary 40-70 % of a 3.2-4.8 s cycle
    assert all(hold <= 0.7 * 1.2 * 4.0 for f, hold in holds(("kill",), 1000))
