"""The kafka-python group driver's rebalance listener, on kafka-python's own subscription state.

An eager revocation must drop the revoked partitions' positions (as Kafka's Java consumer does), so
that a partition the member gets back is fetched from the group's committed offset: kafka-python
3.0.12 alone keeps them (docs/workloads.md; the end-to-end case is
tests/integration/test_workloads_group_positions.py).
"""

from __future__ import annotations

from typing import Any

from kafka.consumer.subscription_state import SubscriptionState
from kafka.structs import TopicPartition

from workloads.clients.base import RebalanceEvent
from workloads.clients.kafka_python import RevokingListener, forget_positions

T0, T1 = TopicPartition("t0", 0), TopicPartition("t0", 1)


def consuming(*positions: tuple[TopicPartition, int]) -> tuple[SubscriptionState, RevokingListener]:
    events: list[RebalanceEvent] = []
    state = SubscriptionState()
    listener = RevokingListener(events, state)
    state.subscribe(topics=["t0"], listener=listener)
    state.assign_from_subscribed([tp for tp, _ in positions])
    for tp, offset in positions:
        state.seek(tp, offset)
    return state, listener


def test_a_partition_given_back_after_an_eager_revocation_has_no_position() -> None:
    state, listener = consuming((T0, 10), (T1, 4))
    listener.on_partitions_revoked({T0, T1})  # what _on_join_prepare does under EAGER
    assert state.assigned_partitions() == set()
    assert state.all_consumed_offsets() == {}  # nothing left to commit for partitions it gave up
    state.assign_from_subscribed([T0])  # the next generation gives t0-0 back
    listener.on_partitions_assigned({T0})
    assert set(state.missing_fetch_positions()) == {T0}  # so it asks the coordinator (OffsetFetch)
    assert listener.events == [
        RebalanceEvent("revoked", (("t0", 0), ("t0", 1))),
        RebalanceEvent("assigned", (("t0", 0),)),
    ]


def test_partitions_kept_under_the_cooperative_protocol_keep_their_positions() -> None:
    state, listener = consuming((T0, 10), (T1, 4))
    state.assign_from_subscribed([T1])  # cooperative: kafka-python removes T0 first, then tells
    listener.on_partitions_revoked({T0})
    assert state.assigned_partitions() == {T1}
    assert state.all_consumed_offsets()[T1].offset == 4


def test_moved_internals_leave_the_state_alone_and_say_so(caplog: Any) -> None:
    class Moved:
        def assigned_partitions(self) -> set[TopicPartition]:
            raise AttributeError("assignment moved")

    forget_positions(Moved(), {T0})
    assert "could not drop the positions" in caplog.text
