"""Conditions a scripted schedule can wait for (`{"wait_until": NAME, "topic", "partition", "timeout"}`).

Each condition is a function of the live cluster returning (met, detail). The detail goes into the
history so a reader sees the offsets the script acted on.

- `leader-elected`: the partition has a leader.
- `isr-full`: every replica of the partition is in its ISR.
- `hw-at-least`: the partition's high watermark is at least `offset`.
- `follower-fetched-past-hw`: a follower holds records above the high watermark it last
  checkpointed (its `replication-offset-checkpoint`): restarting it now makes a pre-KIP-101
  broker truncate acknowledged records (the seed scenario).
- `broker-gone`: the cluster has noticed that the broker on `node` is gone (for the own broker: its
  registration in ZooKeeper has expired; a system that cannot tell: `zookeeper.session.timeout.ms`
  after `since`).
- `broker-ready`: the broker on `node` serves again (the system's `wait_ready`: for the own broker,
  listening and registered in ZooKeeper by its new process). A rolling kill or restart waits for
  it between brokers.
- `hw-advancing`: the partition's high watermark grew by `records` (default 20) since the wait
  began: load flows into it.
- `leader-is`: `node` leads the partition.
- `out-of-isr`: the leader dropped `node` from the partition's ISR.
- `in-isr`: `node` is in the partition's ISR.
- `isr-shrunk-to-leader`: the partition's ISR is its leader alone.
- `acknowledged-alone`: the partition's ISR is its leader alone (`node`, when given) and
  acknowledgements flow steadily into it (`load-flowing`): the leader acknowledges writes only
  its own disk holds (min.insync.replicas=1, acks=1; min.insync.replicas=2 refuses them).
- `brokers-ready`: every broker serves again (`broker-ready` on each node). The random schedule
  waits for it after healing a crash, so the calm before the next fault is load, not restarts.
- `isrs-full`: every partition has a leader and its full ISR: the cluster is whole again. The
  random schedule waits for it after every heal (on a system that reports leaders).
- `load-flowing`: acknowledgements flow steadily into the partition: its high watermark grew by
  half of `records` in each half of the last `window` s (default 1; `records` from the test's
  rate). A pattern waits for it before it strikes.
- `acks-flowing`: acknowledgements reach the cluster steadily: the sum of every partition's high
  watermark grew by half of `records` (default 2) in each half of the last `window` s (default 4:
  one reading of many partitions' high watermarks takes a second on a loaded machine).
  The schedule's clock starts with it: clients that connected and get acknowledgements, whatever
  the rate they reach (a transactional workload on a loaded machine reaches a few per second).
- `leader-elsewhere`: the partition has a leader, and it is not `node` (e.g. the killed leader:
  the cluster elected another).
- `unsynced-writes`: every node `target` names (a target as faults take them: `followers`,
  `leader`, `all`, node names; for the partition of `topic`/`partition`) holds at least `bytes`
  (default 1) written to its data dirs and not fsynced (lazyfs): a power loss now drops something.

A condition's `node` may be `last`: the (first) node of the last fault applied, e.g. the follower
a `kill` of `target = "follower"` chose.

High watermarks are asked of the brokers themselves with ListOffsets, the partition's leader
first, a short timeout each (a frozen broker accepts a connection and never answers; a Kafka
client bootstrapping to it hung for half a minute).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from clusters import kafka_metadata, lazyfs
from clusters.sut import HasBrokerRegistry, HasDataDirs, HasLazyfs, HasLeaders, WaitsReady
from foundation.errors import BadInput
from nemesis import targets
from nemesis.packages.base import Context
from nemesis.packages.disk import sockets

log = logging.getLogger(__name__)

Condition = Callable[[Context, dict[str, Any]], tuple[bool, dict[str, Any]]]


def _state(ctx: Context, step: dict[str, Any]) -> dict[str, Any]:
    topic, partition = ctx.topic_partition(step)
    return dict(ctx.sut.partition_state().get((topic, partition)) or {})


# A high-watermark read gives each broker this long (a frozen one accepts and never answers).
HW_READ_TIMEOUT_S = 2.0


def high_watermark(ctx: Context, step: dict[str, Any]) -> int | None:
    """The partition's high watermark: from the SUT when it reports one, else ListOffsets (latest)
    asked of its leader first, then of the other brokers, each given HW_READ_TIMEOUT_S; None when
    no broker answers for the partition (a frozen leader, an election under way)."""
    state = _state(ctx, step)
    for key in ("high_watermark", "hw"):
        if isinstance(state.get(key), int):
            return int(state[key])
    topic, partition = ctx.topic_partition(step)
    for address in _leader_first(ctx, state.get("leader")):
        host, _, port = address.rpartition(":")
        try:
            hw = kafka_metadata.high_watermark_of(
                host, int(port), topic, partition, timeout=HW_READ_TIMEOUT_S
            )
        except kafka_metadata.NO_ANSWER as e:
            log.debug("high watermark of %s/%d from %s: %s", topic, partition, address, e)
            continue
        if hw is not None:
            return hw
    return None


def _leader_first(ctx: Context, leader: Any) -> list[str]:
    """The bootstrap addresses, the one on the leader's node first."""
    addresses = list(ctx.bootstrap())
    try:
        host = ctx.node(str(leader)).address if leader else None
    except Exception:  # noqa: BLE001 - a leader the nemesis does not know: ask in order
        host = None
    return sorted(addresses, key=lambda a: a.rpartition(":")[0] != host)


def close(ctx: Context) -> None:
    """Forget what a wait remembered (its baseline, its samples)."""
    ctx.cache.pop("hw-baseline", None)
    ctx.cache.pop("hw-samples", None)


def checkpointed_hw(ctx: Context, node_name: str, topic: str, partition: int) -> int | None:
    """The HW a broker last wrote to `replication-offset-checkpoint` (Kafka's format)."""
    node = ctx.node(node_name)
    for data_dir in ctx.sut.data_dirs(node):
        result = node.exec(["cat", f"{data_dir}/replication-offset-checkpoint"], timeout=10, check=False)
        if not result.ok:
            continue
        for line in result.stdout.splitlines()[2:]:
            parts = line.split()
            if len(parts) == 3 and parts[0] == topic and parts[1] == str(partition):
                return int(parts[2])
    return None


def leader_elected(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    state = _state(ctx, step)
    return state.get("leader") is not None, {"leader": state.get("leader")}


def isr_full(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    state = _state(ctx, step)
    isr = list(state.get("isr") or [])  # type: ignore[call-overload]
    want = state.get("replicas") or list(range(ctx.config.replication_factor))
    return len(isr) >= len(want), {"isr": isr}  # type: ignore[arg-type]


def hw_at_least(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    hw = high_watermark(ctx, step)
    return hw is not None and hw >= int(step.get("offset", 1)), {"high_watermark": hw}


def hw_advancing(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the load flows into the partition: its high watermark grew by `records` (default
    20) since the wait began. A pattern waits for it, so that a loss has something to lose."""
    if not ctx.bootstrap() and not isinstance(_state(ctx, step).get("high_watermark"), int):
        return True, {"high_watermark": "unknown (no client can reach the cluster)"}
    hw = high_watermark(ctx, step)
    if hw is None:
        return False, {"high_watermark": None}
    baseline = ctx.cache.setdefault("hw-baseline", hw)
    return hw - baseline >= int(step.get("records", 20)), {"high_watermark": hw, "since_wait": hw - baseline}


# About half of a queue workload's operations are sends; a partition flows when it acknowledges at
# least LOAD_SHARE of its share of them.
SEND_SHARE = 0.5
LOAD_SHARE = 0.4


def expected_records(ctx: Context, window_s: float) -> int:
    """How many acknowledgements a partition flowing at LOAD_SHARE of the test's rate gets in
    `window_s` (at least 4)."""
    config = ctx.config
    per_partition = config.rate * SEND_SHARE / max(1, config.topics * config.partitions)
    return max(4, round(per_partition * LOAD_SHARE * window_s))


def load_flowing(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether acknowledgements flow steadily into the partition now: its high watermark grew by
    at least half of `records` (default: from the test's rate, `expected_records`) in each half of
    the last `window` s (default 1). A burst of clients that were stuck on a dead broker, then
    nothing, is not load; a pattern strikes into this, so that a loss has something to lose."""
    window = float(step.get("window", 1.0))
    records = int(step.get("records", expected_records(ctx, window)))
    if not ctx.bootstrap() and not isinstance(_state(ctx, step).get("high_watermark"), int):
        return True, {"high_watermark": "unknown (no client can reach the cluster)"}
    hw = high_watermark(ctx, step)
    if hw is None:
        ctx.cache.pop("hw-samples", None)  # the partition is in flux: count again from the next answer
        return False, {"high_watermark": None}
    return _steady(ctx, hw, window, records)


def acks_flowing(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether acknowledgements reach the cluster steadily: the sum of the partitions' high
    watermarks grew by half of `records` (default 2) in each half of the last `window` s (default
    4: reading eight partitions' high watermarks took over a second at load 15, and a window
    shorter than two readings never sees both its halves grow)."""
    config = ctx.config
    total = 0
    for t in range(config.topics):
        for p in range(config.partitions):
            part = {"topic": f"t{t}", "partition": p}
            if not ctx.bootstrap() and not isinstance(_state(ctx, part).get("high_watermark"), int):
                return True, {"high_watermarks": "unknown (no client can reach the cluster)"}
            hw = high_watermark(ctx, part)
            if hw is None:
                ctx.cache.pop("hw-samples", None)  # a partition in flux: count again
                return False, {"partition": f"t{t}-{p}", "high_watermark": None}
            total += hw
    return _steady(ctx, total, float(step.get("window", 4.0)), int(step.get("records", 2)))


def _steady(ctx: Context, value: int, window: float, records: int) -> tuple[bool, dict[str, Any]]:
    """Whether `value` (a high watermark, or their sum) grew by half of `records` in each half of
    the last `window` s, from the samples this wait took (`ctx.cache`)."""
    now = time.monotonic()
    samples: list[tuple[float, int]] = ctx.cache.setdefault("hw-samples", [])
    samples.append((now, value))
    # Keep the newest sample at least `window` old, and one at least between it and now: when one
    # reading takes more than half the window (many partitions on a loaded machine), the halves
    # are readings apart, else the first half would be one sample and never grow.
    while len(samples) > 3 and now - samples[1][0] >= window:
        samples.pop(0)
    oldest_t, oldest = samples[0]
    detail: dict[str, Any] = {"high_watermark": value, "records": records, "window": window}
    if now - oldest_t < window or len(samples) < 3:
        return False, detail
    inner = samples[1:-1]
    mid = next((v for t, v in reversed(inner) if now - t >= window / 2), inner[0][1])
    first, second = mid - oldest, value - mid
    detail.update(first_half=first, second_half=second)
    return first >= records / 2 and second >= records / 2, detail


def follower_fetched_past_hw(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    topic, partition = ctx.topic_partition(step)
    state = _state(ctx, step)
    leader = state.get("leader")
    followers = [str(r) for r in (state.get("isr") or []) if r != leader]  # type: ignore[attr-defined]
    if "follower" in step:
        followers = [f for f in followers if f == step["follower"]]
    hw = high_watermark(ctx, step)
    if hw is None or hw < int(step.get("min_offset", 1)):
        return False, {"high_watermark": hw}
    for follower in followers:
        checkpoint = checkpointed_hw(ctx, follower, topic, partition)
        if checkpoint is None or checkpoint < hw:
            return True, {
                "follower": follower,
                "leader": leader,
                "high_watermark": hw,
                "checkpointed_hw": checkpoint,
            }
    return False, {"high_watermark": hw}


def leader_is(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether `node` leads the partition (e.g. the controller elected itself)."""
    state = _state(ctx, step)
    return str(state.get("leader")) == str(step["node"]), {
        "leader": state.get("leader"),
        "leader_epoch": state.get("leader_epoch"),
    }


def out_of_isr(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the leader dropped `node` from the partition's ISR (it lagged too long)."""
    state = _state(ctx, step)
    isr = [str(r) for r in state.get("isr") or []]  # type: ignore[attr-defined]
    return bool(isr) and str(step["node"]) not in isr, {"leader": state.get("leader"), "isr": isr}


def in_isr(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether `node` is in the partition's ISR (a restarted follower whose session expired while
    it started is not: a clean election will not pick it)."""
    state = _state(ctx, step)
    isr = [str(r) for r in state.get("isr") or []]  # type: ignore[attr-defined]
    return str(step["node"]) in isr, {"leader": state.get("leader"), "isr": isr}


def isr_shrunk_to_leader(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the ISR is the leader alone (`node`, when given, must be that leader)."""
    state = _state(ctx, step)
    isr = [str(r) for r in state.get("isr") or []]  # type: ignore[attr-defined]
    leader = state.get("leader")
    met = leader is not None and isr == [str(leader)] and str(step.get("node", leader)) == str(leader)
    return met, {"leader": leader, "isr": isr}


def acknowledged_alone(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the leader, the ISR alone, acknowledges steadily: the high watermark grew in each
    half of the last `window` s while every sample saw the ISR at the leader alone. The one jump
    of the high watermark when the ISR shrinks (over what the leader appended while its
    followers were cut off, unacknowledged under min.insync.replicas=2) is not steady growth."""
    alone, seen = isr_shrunk_to_leader(ctx, step)
    if not alone:
        ctx.cache.pop("hw-samples", None)  # count again from the next sample of the leader alone
        return False, seen
    met, flowing = load_flowing(ctx, step)
    return met, {**seen, **flowing}


def leader_elsewhere(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the partition has a leader other than `node` (the cluster elected another)."""
    state = _state(ctx, step)
    leader = state.get("leader")
    return leader is not None and str(leader) != str(step.get("node")), {
        "leader": leader,
        "leader_epoch": state.get("leader_epoch"),
    }


def unsynced_writes(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether every node the `target` names holds unsynced writes in its data dirs (lazyfs
    `stats`: pending bytes), at least `bytes` each: a power loss of them now drops something."""
    topic, partition = ctx.topic_partition(step)
    names = targets.resolve(step.get("target", "all"), ctx.names, ctx.sut, random.Random(0), topic, partition)
    want = int(step.get("bytes", 1))
    pending: dict[str, int] = {}
    for name in names:
        node = ctx.node(name)
        total = 0
        for sock in sockets(ctx, name):
            result = node.exec(lazyfs.ctl_argv(ctx.python, sock, "stats"), timeout=10, check=False)
            if result.ok:
                total += int(json.loads(result.stdout.strip().splitlines()[-1]).get("pending_bytes", 0))
        pending[name] = total
    return bool(names) and all(v >= want for v in pending.values()), {"unsynced_bytes": pending}


def isrs_full(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether every partition has a leader and its full ISR: the cluster is whole again."""
    states = ctx.sut.partition_state()
    short: dict[str, Any] = {}
    for (topic, partition), state in sorted(states.items()):
        isr = [str(r) for r in state.get("isr") or []]
        want = len(state.get("replicas") or []) or ctx.config.replication_factor
        if state.get("leader") is None or len(isr) < want:
            short[f"{topic}-{partition}"] = {"leader": state.get("leader"), "isr": isr}
    return bool(states) and not short, {"partitions": len(states), "short": short}


READY_SLICE_S = 1.0


def broker_ready(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether `node`'s broker serves again; the system's `wait_ready` raises while it does not."""
    name = str(step["node"])
    if not isinstance(ctx.sut, WaitsReady):
        return True, {"node": name, "ready": "unknown (the system cannot tell)"}
    ctx.sut.wait_ready(ctx.node(name), timeout=READY_SLICE_S)
    return True, {"node": name}


def brokers_ready(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether every broker serves again (raises, via `broker_ready`, while one does not)."""
    for name in ctx.names:
        broker_ready(ctx, {"node": name})
    return True, {"nodes": ctx.names}


def broker_gone(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the cluster noticed that `node`'s broker is gone (its registration expired)."""
    name = str(step["node"])
    if isinstance(ctx.sut, HasBrokerRegistry):
        return ctx.sut.broker_id(ctx.node(name)) not in ctx.sut.registered_brokers(), {"node": name}
    session_s = ctx.config.zookeeper_session_timeout_ms / 1000
    waited = time.monotonic() - float(step.get("since", 0.0))
    return waited >= session_s, {"node": name, "gone": "assumed after the session timeout"}


CONDITIONS: dict[str, Condition] = {
    "broker-gone": broker_gone,
    "broker-ready": broker_ready,
    "brokers-ready": brokers_ready,
    "leader-elected": leader_elected,
    "isr-full": isr_full,
    "hw-at-least": hw_at_least,
    "follower-fetched-past-hw": follower_fetched_past_hw,
    "leader-is": leader_is,
    "hw-advancing": hw_advancing,
    "out-of-isr": out_of_isr,
    "in-isr": in_isr,
    "isr-shrunk-to-leader": isr_shrunk_to_leader,
    "acknowledged-alone": acknowledged_alone,
    "load-flowing": load_flowing,
    "acks-flowing": acks_flowing,
    "isrs-full": isrs_full,
    "leader-elsewhere": leader_elsewhere,
    "unsynced-writes": unsynced_writes,
}


def check(ctx: Context, step: dict[str, Any]) -> None:
    name = step.get("wait_until")
    if name not in CONDITIONS:
        raise BadInput(f"schedule: unknown condition {name!r} (conditions: {', '.join(CONDITIONS)})")
    if name == "brokers-ready":
        return
    if name in ("broker-gone", "broker-ready", "leader-is", "out-of-isr", "in-isr", "leader-elsewhere"):
        if step.get("node") not in (*ctx.names, "last"):
            raise BadInput(f"schedule: condition {name!r} needs a node (one of {', '.join(ctx.names)})")
        if name.startswith("broker-"):
            return
    if not isinstance(ctx.sut, HasLeaders):
        raise BadInput(f"schedule: condition {name!r} needs a system that reports leaders (HasLeaders)")
    if name == "unsynced-writes":
        targets.check(step.get("target", "all"), ctx.names, ctx.sut, "schedule: condition 'unsynced-writes'")
        if not isinstance(ctx.sut, HasLazyfs):
            raise BadInput("schedule: condition 'unsynced-writes' needs data dirs on lazyfs (HasLazyfs)")
    if name == "follower-fetched-past-hw" and not isinstance(ctx.sut, HasDataDirs):
        raise BadInput(
            "schedule: condition 'follower-fetched-past-hw' needs the brokers' data dirs (HasDataDirs)"
        )
