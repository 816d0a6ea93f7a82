"""The replica-log checker on real segment files (v2 batches written with broker.storage)."""

from __future__ import annotations

from pathlib import Path

from broker.storage.build import build_batch
from checkers.replica_logs import check_replica_logs, decode_value, leaders_from_state
from tests.support.checked_runs import values, write_replica
from tests.support.history_builder import HistoryBuilder


def history(tmp_path: Path, acks: list[tuple[int, int, int]]) -> Path:
    """ok sends (partition, offset, value) on t0."""
    b = HistoryBuilder()
    for partition, offset, value in acks:
        b.send(0, value, offset=offset, partition=partition)
    return b.write(tmp_path / "history.jsonl")


def test_identical_replicas_have_no_anomaly(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    for node in ("n1", "n2", "n3"):
        write_replica(nodes, node, "t0", 0, [(0, values(10, 11)), (2, values(12))], hw=3)
    findings = check_replica_logs(
        nodes, history(tmp_path, [(0, 0, 10), (0, 2, 12)]), expected=[("t0", 0)], replication_factor=3
    )
    assert {k: v["count"] for k, v in findings.anomalies.items()} == {
        "log-divergence": 0,
        "lost-committed-on-replicas": 0,
    }
    assert findings.incomplete == []
    replicas = findings.partitions["t0-0"]["replicas"]
    assert [(r["node"], r["log_end"], r["high_watermark"], r["records"]) for r in replicas] == [
        ("n1", 3, 3, 3),
        ("n2", 3, 3, 3),
        ("n3", 3, 3, 3),
    ]


def test_divergence_below_the_smaller_log_end_only(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(0, values(10, 11, 12, 13))], hw=4)
    write_replica(nodes, "n2", "t0", 0, [(0, values(10, 21))], hw=1)  # diverged at 1, shorter
    write_replica(nodes, "n3", "t0", 0, [(0, values(10, 11, 12, 13, 14))], hw=4)
    findings = check_replica_logs(nodes, None, final_state={("t0", 0): "n1"})
    divergence = findings.anomalies["log-divergence"]
    assert divergence["count"] == 1  # offset 1; offset 4 is beyond n1's log end, n2 ends at 2
    [example] = divergence["examples"]
    assert (example["topic"], example["partition"], example["offset"]) == ("t0", 0, 1)
    assert example["below_high_watermarks"] is False  # n2's checkpointed HW is 1: not committed there
    assert [(r["node"], r["value"], r["log_end"], r["high_watermark"]) for r in example["replicas"]] == [
        ("n1", 11, 4, 4),
        ("n2", 21, 2, 1),
        ("n3", 11, 5, 4),
    ]


def test_lost_committed_on_the_named_leader(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(0, values(10, 11, 12))])
    write_replica(nodes, "n2", "t0", 0, [(0, values(10)), (1, values(13, 14))])  # the leader lost 11, 12
    path = history(tmp_path, [(0, 0, 10), (0, 1, 11), (0, 2, 12)])
    state = {
        "partitions": [{"topic": "t0", "partition": 0, "leader": "n2", "leader_epoch": 3, "isr": ["n2"]}]
    }
    findings = check_replica_logs(nodes, path, final_state=state)
    lost = findings.anomalies["lost-committed-on-replicas"]
    assert lost["count"] == 2
    assert [(e["value"], e["leader"], e["leader_known"], e["leader_log_end"]) for e in lost["examples"]] == [
        (11, "n2", True, 3),
        (12, "n2", True, 3),
    ]
    assert findings.anomalies["log-divergence"]["count"] == 2
    assert findings.partitions["t0-0"]["leader"] == "n2"


def test_unknown_leader_uses_the_longest_log_and_says_so(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(0, values(10))])
    write_replica(nodes, "n2", "t0", 0, [(0, values(10, 13))])
    findings = check_replica_logs(nodes, history(tmp_path, [(0, 1, 11)]))
    [example] = findings.anomalies["lost-committed-on-replicas"]["examples"]
    assert example["leader"] == "n2" and example["leader_known"] is False
    assert any("leader unknown" in n and "n2" in n for n in findings.notes)


def test_missing_data_is_incomplete_never_silent(tmp_path: Path) -> None:
    findings = check_replica_logs(tmp_path / "nodes", None, expected=[("t0", 0)], replication_factor=3)
    assert findings.incomplete and "nodes" in findings.incomplete[0]

    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(0, values(10))])
    (nodes / "n2" / "logs").mkdir(parents=True)  # a node whose data dir was not collected
    findings = check_replica_logs(nodes, None, expected=[("t0", 0), ("t0", 1)], replication_factor=2)
    text = "\n".join(findings.incomplete)
    assert "n2 has no data dir" in text
    assert "t0-0: 1 of 2 replicas collected (n1)" in text
    assert "t0-1: 0 of 2 replicas collected (none)" in text


def test_torn_and_corrupt_batches_end_the_log(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    segment = write_replica(nodes, "n1", "t0", 0, [(0, values(10, 11)), (2, values(12))])
    data = bytearray(segment.read_bytes())
    first_len = len(build_batch(values(10, 11), base_offset=0, leader_epoch=1))
    data[-3] ^= 0xFF  # corrupt the second batch: its CRC fails
    segment.write_bytes(bytes(data) + b"\x00\x00\x00")  # and a torn tail after it
    write_replica(nodes, "n2", "t0", 0, [(0, values(10, 11)), (2, values(12))])
    findings = check_replica_logs(nodes, None)
    n1 = findings.partitions["t0-0"]["replicas"][0]
    assert n1["log_end"] == 2 and n1["records"] == 2 and n1["problems"]
    assert first_len < len(data)
    assert findings.anomalies["log-divergence"]["count"] == 0  # n1 simply ends earlier


def test_internal_topics_and_kafka_style_nested_log_dirs(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "__consumer_offsets", 0, [(0, values(1))])
    # A copy that kept Kafka's log.dirs one level down: nodes/n2/data/kafka-logs/t0-0/
    elsewhere = tmp_path / "elsewhere"
    write_replica(elsewhere, "x", "t0", 0, [(0, values(10))])
    (nodes / "n2" / "data").mkdir(parents=True)
    (elsewhere / "x" / "data").rename(nodes / "n2" / "data" / "kafka-logs")
    findings = check_replica_logs(nodes, None)
    assert list(findings.partitions) == ["t0-0"]
    assert findings.partitions["t0-0"]["replicas"][0]["node"] == "n2"


def test_records_deleted_by_retention_are_not_lost(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(5, values(15, 16))])
    write_replica(nodes, "n2", "t0", 0, [(0, values(10, 11, 12, 13, 14, 15, 16))])
    findings = check_replica_logs(
        nodes, history(tmp_path, [(0, 1, 11), (0, 6, 16)]), final_state={("t0", 0): "n1"}
    )
    assert findings.anomalies["lost-committed-on-replicas"]["count"] == 0
    assert findings.anomalies["log-divergence"]["count"] == 0


def test_decode_value_and_leaders_from_state() -> None:
    assert decode_value(b"42") == 42 and decode_value(None) is None and decode_value(b"x y") == "b'x y'"
    assert leaders_from_state(
        {"partitions": [{"topic": "t0", "partition": 1, "leader": 2}]}, ["n1", "n2"]
    ) == {("t0", 1): "n2"}
    assert leaders_from_state({"partitions": {"t0-0": {"leader": "n3"}, "t0-1": {"leader": -1}}}) == {
        ("t0", 0): "n3"
    }


def test_a_lagging_replicas_tail_above_its_hw_is_a_note_not_divergence(tmp_path: Path) -> None:
    """QA safe-kill: the restarted old leader n2, outside the final ISR, still held its unacked tail."""
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(0, values(10, 11, 12, 13, 14))], hw=2)
    write_replica(nodes, "n2", "t0", 0, [(0, values(10, 11, 22, 23))], hw=2)  # its tail from offset 2
    write_replica(nodes, "n3", "t0", 0, [(0, values(10, 11, 12, 13, 14))], hw=2)
    state = {"partitions": [{"topic": "t0", "partition": 0, "leader": "n1", "isr": ["n1", "n3"]}]}
    findings = check_replica_logs(nodes, None, final_state=state)
    assert findings.anomalies["log-divergence"]["count"] == 0
    assert any("n2 is outside the final ISR [n1, n3]" in n and "2..3" in n for n in findings.notes)
    # The same logs with n2 in the ISR: it should have truncated, so this is divergence.
    state["partitions"][0]["isr"] = ["n1", "n2", "n3"]  # type: ignore[index]
    assert check_replica_logs(nodes, None, final_state=state).anomalies["log-divergence"]["count"] == 2


def test_divergence_below_a_lagging_replicas_hw_still_counts(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(0, values(10, 11, 12, 13))], hw=4)
    write_replica(nodes, "n2", "t0", 0, [(0, values(10, 21, 12, 23))], hw=2)  # 1 is below its HW
    write_replica(nodes, "n3", "t0", 0, [(0, values(10, 11, 32, 13))], hw=4)  # 2 differs inside the ISR
    state = {"partitions": [{"topic": "t0", "partition": 0, "leader": 1, "isr": [1, 3]}]}
    findings = check_replica_logs(nodes, None, final_state=state)
    divergence = findings.anomalies["log-divergence"]
    assert [e["offset"] for e in divergence["examples"]] == [1, 2]  # 3: only n2's pending tail differs
    assert any("n2 is outside" in n and "3..3" in n for n in findings.notes)


def test_partitions_are_judged_where_the_final_assignment_put_them(tmp_path: Path) -> None:
    """After a reassignment the partition lives on n2, n3, n4 (n4 added during the run); a stale
    copy left on n1 would diverge, but it is not a replica any more: set aside, noted."""
    nodes = tmp_path / "nodes"
    write_replica(nodes, "n1", "t0", 0, [(0, values(10, 99))], hw=1)
    for node in ("n2", "n3", "n4"):
        write_replica(nodes, node, "t0", 0, [(0, values(10, 11, 12))], hw=3)
    state = {
        "partitions": [
            {
                "topic": "t0",
                "partition": 0,
                "leader": "n4",
                "isr": ["n2", "n3", "n4"],
                "replicas": ["n4", "n2", "n3"],
            }
        ]
    }
    findings = check_replica_logs(
        nodes,
        history(tmp_path, [(0, 0, 10), (0, 1, 11), (0, 2, 12)]),
        final_state=state,
        expected=[("t0", 0)],
        replication_factor=3,
        brokers=["n1", "n2", "n3", "n4"],
    )
    assert {k: v["count"] for k, v in findings.anomalies.items()} == {
        "log-divergence": 0,
        "lost-committed-on-replicas": 0,
    }
    assert findings.incomplete == []
    assert [r["node"] for r in findings.partitions["t0-0"]["replicas"]] == ["n2", "n3", "n4"]
    assert "t0-0: the copy on n1 is not judged: the partition ended on n2, n3, n4" in findings.notes
    # without the final assignment every copy is judged, and n1's diverges
    judged = check_replica_logs(nodes, None, final_state={("t0", 0): "n4"})
    assert judged.anomalies["log-divergence"]["count"] == 1
