"""The controller's partition reassignment (broker.reassignment): Kafka's phases U, A and B, pure."""

from __future__ import annotations

from broker.partition_state import LeaderAndIsr, PartitionState
from broker.reassignment import (
    CompleteReassignment,
    DropRequest,
    MoveLeadershipAndShrinkIsr,
    ReplicaAssignment,
    StartReassignment,
    begin,
    complete,
    encode_request,
    parse_request,
    plan,
)
from broker.zookeeper.layout import decode_assignments, encode_assignments

K = ("t0", 0)
LIVE = {1, 2, 3, 4}


def test_begin_names_kafkas_sets() -> None:
    # ORS {1,2,3}, TRS {4,5,6}: RS = TRS + ORS, AR = TRS, RR = ORS (KafkaController's example)
    a = begin(ReplicaAssignment((1, 2, 3)), (4, 5, 6))
    assert a == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert a.target == (4, 5, 6) and a.original == (1, 2, 3) and a.reassigning
    assert complete(a) == ReplicaAssignment((4, 5, 6))


def test_begin_moving_one_replica_and_a_reorder() -> None:
    assert begin(ReplicaAssignment((1, 2, 3)), (1, 2, 4)) == ReplicaAssignment((1, 2, 4, 3), (4,), (3,))
    assert begin(ReplicaAssignment((1, 2, 3)), (3, 2, 1)) == ReplicaAssignment((3, 2, 1))


def test_begin_supplants_a_running_reassignment_from_its_original_replicas() -> None:
    running = begin(ReplicaAssignment((1, 2, 3)), (1, 2, 4))
    assert begin(running, (1, 2, 5)) == ReplicaAssignment((1, 2, 5, 3), (5,), (3,))
    assert begin(running, (1, 2, 3)) == ReplicaAssignment((1, 2, 3))  # cancelled


def test_a_request_starts_the_reassignment() -> None:
    actions = plan(
        requested={K: (1, 2, 4)},
        assignments={K: ReplicaAssignment((1, 2, 3))},
        states={K: LeaderAndIsr(1, 5, (1, 2, 3), 7)},
        live=LIVE,
    )
    assert actions == [StartReassignment(K, ReplicaAssignment((1, 2, 4, 3), (4,), (3,)))]


def test_phase_a_waits_for_the_adding_replica_to_join_the_isr() -> None:
    running = ReplicaAssignment((1, 2, 4, 3), (4,), (3,))
    states = {K: LeaderAndIsr(1, 5, (1, 2, 3), 7)}
    assert plan(requested={K: (1, 2, 4)}, assignments={K: running}, states=states, live=LIVE) == []


def test_phase_b_shrinks_the_isr_to_the_target_in_a_new_epoch_then_completes() -> None:
    running = ReplicaAssignment((1, 2, 4, 3), (4,), (3,))
    caught_up = {K: LeaderAndIsr(1, 5, (1, 2, 3, 4), 8)}
    actions = plan(requested={K: (1, 2, 4)}, assignments={K: running}, states=caught_up, live=LIVE)
    assert actions == [MoveLeadershipAndShrinkIsr(K, 1, LeaderAndIsr(1, 6, (1, 2, 4), 8))]
    shrunk = {K: LeaderAndIsr(1, 6, (1, 2, 4), 9)}
    actions = plan(requested={K: (1, 2, 4)}, assignments={K: running}, states=shrunk, live=LIVE)
    assert actions == [CompleteReassignment(K, ReplicaAssignment((1, 2, 4)))]
    done = {K: ReplicaAssignment((1, 2, 4))}
    assert plan(requested={K: (1, 2, 4)}, assignments=done, states=shrunk, live=LIVE) == [
        DropRequest(K, "done")
    ]


def test_a_leader_being_removed_hands_over_to_the_first_live_target_replica_in_the_isr() -> None:
    running = ReplicaAssignment((2, 4, 1), (4,), (1,))
    states = {K: LeaderAndIsr(1, 3, (1, 2, 4), 4)}
    actions = plan(requested={}, assignments={K: running}, states=states, live=LIVE)
    assert actions == [MoveLeadershipAndShrinkIsr(K, 1, LeaderAndIsr(2, 4, (2, 4), 4))]
    # the first target replica is dead: the next live one leads
    actions = plan(requested={}, assignments={K: running}, states=states, live={1, 4})
    assert actions == [MoveLeadershipAndShrinkIsr(K, 1, LeaderAndIsr(4, 4, (2, 4), 4))]
    # no live target replica: wait for one
    assert plan(requested={}, assignments={K: running}, states=states, live={1}) == []


def test_an_unfinished_reassignment_goes_on_without_its_request() -> None:
    """A new controller resumes from the topic znode alone (RS is written before anything else)."""
    running = ReplicaAssignment((1, 2, 4, 3), (4,), (3,))
    states = {K: LeaderAndIsr(1, 6, (1, 2, 4), 9)}
    assert plan(requested={}, assignments={K: running}, states=states, live=LIVE) == [
        CompleteReassignment(K, ReplicaAssignment((1, 2, 4)))
    ]


def test_impossible_requests_are_dropped() -> None:
    assignments = {K: ReplicaAssignment((1, 2, 3))}
    states = {K: LeaderAndIsr(1, 1, (1, 2, 3), 1)}
    cases = {
        (): "an empty replica list",
        (1, 1, 2): "replicas [1, 1, 2] name a broker twice",
        (1, 2, 9): "brokers [9] are unknown (neither registered nor holding replicas)",
    }
    for target, reason in cases.items():
        assert plan(requested={K: target}, assignments=assignments, states=states, live=LIVE) == [
            DropRequest(K, reason)
        ]
    assert plan(requested={("t9", 0): (1, 2, 3)}, assignments=assignments, states=states, live=LIVE) == [
        DropRequest(("t9", 0), "no such partition")
    ]
    # a replica's broker that is down (not registered) is still a valid target: it is waited for
    down = plan(requested={K: (1, 3, 2)}, assignments=assignments, states=states, live={1, 2})
    assert down == [StartReassignment(K, ReplicaAssignment((1, 3, 2)))]


def test_the_request_and_topic_znodes_round_trip() -> None:
    targets = {K: (1, 2, 4), ("t1", 3): (4, 5)}
    assert parse_request(encode_request(targets)) == (targets, [])
    assert parse_request({"partitions": [{"topic": "t0"}]})[1] == ["malformed entry {'topic': 't0'}"]
    import json
    import uuid

    topic_id = uuid.uuid4()
    assignments = {0: ReplicaAssignment((1, 2, 4, 3), (4,), (3,)), 1: ReplicaAssignment((2, 3, 1))}
    decoded = decode_assignments("t0", json.loads(encode_assignments(topic_id, assignments)))
    assert decoded == (topic_id, assignments)


def test_the_leader_does_not_add_a_replica_being_removed_back_into_the_isr() -> None:
    from broker.replication import PartitionReplica, WriteIsr

    leader = PartitionReplica(4, lag_time_max_ms=10_000, high_watermark=10)
    leader.become_leader(
        PartitionState(leader=4, leader_epoch=6, isr=(4, 2), replicas=(4, 2, 1), zk_version=3),
        log_end_offset=10,
        now_ms=0,
    )
    leader.removing = (1,)
    assert not [a for a in leader.on_follower_fetch(1, 10, 1.0) if isinstance(a, WriteIsr)]
    leader.removing = ()
    assert [a.state.isr for a in leader.on_follower_fetch(1, 10, 2.0) if isinstance(a, WriteIsr)] == [
        (4, 2, 1)
    ]
