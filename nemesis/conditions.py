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
- `isr-shrunk-to-leader`: the partition's ISR is its leader alone.
- `brokers-ready`: every broker serves again (`broker-ready` on each node). The random schedule
  waits for it after healing a crash, so the calm before the next fault is load, not restarts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from clusters.sut import HasBrokerRegistry, HasDataDirs, HasLeaders, WaitsReady
from foundation.errors import BadInput
from nemesis.packages.base import Context

log = logging.getLogger(__name__)

Condition = Callable[[Context, dict[str, Any]], tuple[bool, dict[str, Any]]]


def _state(ctx: Context, step: dict[str, Any]) -> dict[str, Any]:
    topic, partition = ctx.topic_partition(step)
    return dict(ctx.sut.partition_state().get((topic, partition)) or {})


def high_watermark(ctx: Context, step: dict[str, Any]) -> int | None:
    """The partition's high watermark: from the SUT when it reports one, else ListOffsets (latest)."""
    state = _state(ctx, step)
    for key in ("high_watermark", "hw"):
        if isinstance(state.get(key), int):
            return int(state[key])
    from kafka import TopicPartition

    topic, partition = ctx.topic_partition(step)
    try:
        consumer = _consumer(ctx)
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
    except Exception as e:  # noqa: BLE001 - an unreachable leader means "not yet"
        log.debug("high watermark of %s/%d unknown: %s", topic, partition, e)
        # a fresh client next poll (this one may hang on a frozen broker); the baseline stays, so
        # "grew since the wait began" still counts from the wait's start
        _close_client(ctx)
        return None


def _consumer(ctx: Context) -> Any:
    """One Kafka client per wait, kept across polls (closed by `close`)."""
    consumer = ctx.cache.get("consumer")
    if consumer is None:
        from kafka import KafkaConsumer

        consumer = ctx.cache["consumer"] = KafkaConsumer(
            bootstrap_servers=ctx.bootstrap(), request_timeout_ms=5000, client_id="strandline-nemesis"
        )
    return consumer


def close(ctx: Context) -> None:
    ctx.cache.pop("hw-baseline", None)
    _close_client(ctx)


def _close_client(ctx: Context) -> None:
    consumer = ctx.cache.pop("consumer", None)
    if consumer is not None:
        try:
            consumer.close()
        except Exception as e:  # noqa: BLE001
            log.debug("closing the condition's Kafka client: %s", e)


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


def isr_shrunk_to_leader(ctx: Context, step: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """Whether the ISR is the leader alone (`node`, when given, must be that leader)."""
    state = _state(ctx, step)
    isr = [str(r) for r in state.get("isr") or []]  # type: ignore[attr-defined]
    leader = state.get("leader")
    met = leader is not None and isr == [str(leader)] and str(step.get("node", leader)) == str(leader)
    return met, {"leader": leader, "isr": isr}


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
    "isr-shrunk-to-leader": isr_shrunk_to_leader,
}


def check(ctx: Context, step: dict[str, Any]) -> None:
    name = step.get("wait_until")
    if name not in CONDITIONS:
        raise BadInput(f"schedule: unknown condition {name!r} (conditions: {', '.join(CONDITIONS)})")
    if name == "brokers-ready":
        return
    if name in ("broker-gone", "broker-ready", "leader-is", "out-of-isr"):
        if step.get("node") not in ctx.names:
            raise BadInput(f"schedule: condition {name!r} needs a node (one of {', '.join(ctx.names)})")
        if name.startswith("broker-"):
            return
    if not isinstance(ctx.sut, HasLeaders):
        raise BadInput(f"schedule: condition {name!r} needs a system that reports leaders (HasLeaders)")
    if name == "follower-fetched-past-hw" and not isinstance(ctx.sut, HasDataDirs):
        raise BadInput(
            "schedule: condition 'follower-fetched-past-hw' needs the brokers' data dirs (HasDataDirs)"
        )
