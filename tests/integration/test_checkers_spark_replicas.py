"""The replica-log checks on Spark (`checkers/spark_replicas.py`) agree with the reference's
(`checkers/replica_logs.py`), finding for finding (`==` on the whole `ReplicaFindings`: anomalies,
examples, per-partition summaries with divergent and absent ranges, incomplete, notes, lost acks by
second), on data dirs of real segment files (v2 batches written with the broker's storage code):
every rule and edge case at once, each on a partition of its own, in one check.

The real data dirs of an own-broker run are compared, results.json for results.json, in
tests/integration/test_checkers_own_broker.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.storage.batches import set_base_offset_and_epoch
from broker.storage.control import build_marker
from checkers import spark_replicas
from checkers.evidence import replica_entries
from checkers.evidence_reference import replica_view
from checkers.parquet import convert
from checkers.replica_logs import ReplicaFindings, check_replica_logs
from checkers.spark_replicas import check_replicas, judged_replicas
from tests.support.checked_runs import values, write_replica
from tests.support.history_builder import HistoryBuilder

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

BROKERS = ("n1", "n2", "n3", "n4")


def write_marker(nodes: Path, node: str, topic: str, partition: int, offset: int) -> None:
    """A commit marker (a control batch: no values) at `offset`, in a segment of its own."""
    log_dir = nodes / node / "data" / f"{topic}-{partition}"
    buf = bytearray(build_marker(7, 0, True, 0))
    set_base_offset_and_epoch(buf, 0, offset, 1)
    (log_dir / f"{offset:020d}.log").write_bytes(bytes(buf))


def scenarios(tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """nodes/, a history of acks, and the final cluster state: one rule per partition of t0."""
    nodes = tmp_path / "nodes"
    b = HistoryBuilder()
    state: list[dict[str, Any]] = []

    def acks(partition: int, *pairs: tuple[int, int], topic: str = "t0") -> None:
        for offset, value in pairs:
            b.send(partition, value, offset=offset, partition=partition, topic=topic)

    def leader(partition: int, node: str | int, isr: list[Any] | None = None) -> None:
        state.append({"topic": "t0", "partition": partition, "leader": node, "isr": isr or [1, 2, 3]})

    # 0: identical replicas, everything acked, HWs known.
    for node in ("n1", "n2", "n3"):
        write_replica(nodes, node, "t0", 0, [(0, values(10, 11)), (2, values(12))], hw=3)
    acks(0, (0, 10), (2, 12))
    leader(0, "n1")
    # 1: a shorter replica diverged at 1 above its HW; offset 4 is beyond every log but n3's.
    write_replica(nodes, "n1", "t0", 1, [(0, values(10, 11, 12, 13))], hw=4)
    write_replica(nodes, "n2", "t0", 1, [(0, values(10, 21))], hw=1)
    write_replica(nodes, "n3", "t0", 1, [(0, values(10, 11, 12, 13, 14))], hw=4)
    acks(1, (0, 110), (1, 11), (3, 13), (9, 119))
    leader(1, 1)
    # 2: the named leader lost 11 and 12 (acked); the others hold them: divergence too.
    write_replica(nodes, "n1", "t0", 2, [(0, values(10, 11, 12))])
    write_replica(nodes, "n2", "t0", 2, [(0, values(10)), (1, values(13, 14))])
    write_replica(nodes, "n3", "t0", 2, [(0, values(10, 11, 12))])
    acks(2, (0, 10), (1, 11), (2, 12))
    leader(2, "n2", ["n2"])
    # 3: a lagging replica outside the ISR: its tail above its HW is a note; below it, divergence.
    write_replica(nodes, "n1", "t0", 3, [(0, values(10, 11, 12, 13))], hw=4)
    write_replica(nodes, "n2", "t0", 3, [(0, values(10, 21, 12, 23, 24))], hw=2)
    write_replica(nodes, "n3", "t0", 3, [(0, values(10, 11, 32, 13))], hw=4)
    leader(3, 1, [1, 3])
    # 4: a batch that fails its CRC, then a torn tail: n1's log ends before them.
    segment = write_replica(nodes, "n1", "t0", 4, [(0, values(10, 11)), (2, values(12))])
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF
    segment.write_bytes(bytes(data) + b"\x00\x00\x00")
    write_replica(nodes, "n2", "t0", 4, [(0, values(10, 11)), (2, values(12))])
    write_replica(nodes, "n3", "t0", 4, [(0, values(10, 11)), (2, values(12))])
    acks(4, (2, 12))
    leader(4, "n1")
    # 5: retention: the leader's log starts at 5; acks below it are not lost.
    write_replica(nodes, "n1", "t0", 5, [(5, values(15, 16))])
    write_replica(nodes, "n2", "t0", 5, [(0, values(10, 11, 12, 13, 14, 15, 16))])
    write_replica(nodes, "n3", "t0", 5, [(3, values(13, 14, 15, 16))])
    acks(5, (1, 11), (6, 16), (4, 99))
    leader(5, "n1")
    # 6: values that are not the workload's: text, a record without value, decimals beyond 64 bits.
    big, bigger = b"99999999999999999999", b"99999999999999999998"
    write_replica(nodes, "n1", "t0", 6, [(0, [b"x y", b"abc", None, big, big, b"7"])], hw=6)
    write_replica(nodes, "n2", "t0", 6, [(0, [b"x y", b"abd", None, big, bigger, None])], hw=6)
    write_replica(nodes, "n3", "t0", 6, [(0, [b"x y", b"abc", b"5", big, big])], hw=6)
    acks(6, (5, 7), (2, 5))
    leader(6, "n1")
    # 7: a log that repeats offsets (a second segment rewrites 1 and 2): the last read wins.
    write_replica(nodes, "n1", "t0", 7, [(0, values(10, 11, 12))])
    write_replica(nodes, "n1", "t0", 7, [(1, values(21, 22))])
    write_replica(nodes, "n2", "t0", 7, [(0, values(10, 21, 22))])
    write_replica(nodes, "n3", "t0", 7, [(0, values(10, 11, 12))])
    acks(7, (1, 21), (2, 12))
    leader(7, "n2")
    # 8: no leader known (absent from the state): the longest log; a commit marker holds no value.
    write_replica(nodes, "n1", "t0", 8, [(0, values(10, 11))])
    write_marker(nodes, "n1", "t0", 8, 2)
    write_replica(nodes, "n2", "t0", 8, [(0, values(10, 11)), (3, values(13))])
    write_replica(nodes, "n3", "t0", 8, [(0, values(10, 31))])
    acks(8, (1, 11), (3, 13))
    # 9: divergent offsets in two runs (ranges), many acks absent on a lagging replica.
    write_replica(nodes, "n1", "t0", 9, [(0, values(*range(100, 130)))], hw=30)
    write_replica(nodes, "n2", "t0", 9, [(0, values(*range(100, 105), 205, 206, 107, 208, 209))], hw=30)
    write_replica(nodes, "n3", "t0", 9, [(0, values(*range(100, 130)))], hw=30)
    acks(9, *[(o, 100 + o) for o in range(30)])
    leader(9, "n3")
    # 10: moved off n3 (the final assignment is n1, n2): n3's stray copy is not judged.
    write_replica(nodes, "n1", "t0", 10, [(0, values(10, 11))])
    write_replica(nodes, "n2", "t0", 10, [(0, values(10, 11))])
    write_replica(nodes, "n3", "t0", 10, [(0, values(10, 99, 98))])
    acks(10, (1, 11))
    state.append({"topic": "t0", "partition": 10, "leader": 2, "isr": [1, 2], "replicas": [1, 2]})
    # t1-0: one replica of three (incomplete), with a lost ack; n4 has no data dir at all.
    write_replica(nodes, "n1", "t1", 0, [(0, values(1))])
    acks(0, (0, 1), (1, 2), topic="t1")
    (nodes / "n4" / "logs").mkdir(parents=True)
    # Kafka's own topics are not the workload's.
    write_replica(nodes, "n1", "__consumer_offsets", 0, [(0, values(1))])
    b.nemesis("kill", ["n1"])
    history = b.write(tmp_path / "history.jsonl")
    return nodes, history, {"partitions": state}


def both(
    spark: Any, nodes: Path, history: Path | None, state: Any, **settings: Any
) -> tuple[ReplicaFindings, ReplicaFindings]:
    converted = convert(history, force=True) if history is not None else None
    got = check_replicas(
        spark,
        nodes,
        str(converted.operations_path) if converted else None,
        converted.topics if converted else [],
        final_state=state,
        **settings,
    )
    return got, check_replica_logs(nodes, history, final_state=state, **settings)


def test_every_replica_rule_agrees_with_the_reference(spark: Any, tmp_path: Path) -> None:
    """The findings, and the replicas' views for evidence.json (at offsets 0..11 of each partition)."""
    nodes, history, state = scenarios(tmp_path)
    expected = [("t0", p) for p in range(11)] + [("t1", 0)]
    converted = convert(history, force=True)
    settings: dict[str, Any] = {"expected": expected, "replication_factor": 3, "brokers": BROKERS}
    with judged_replicas(
        spark, nodes, str(converted.operations_path), converted.topics, final_state=state, **settings
    ) as (got, views):
        offsets = {tp: set(range(12)) for tp in got_partitions(got)}
        got_views = views(offsets)
    want = check_replica_logs(nodes, history, final_state=state, **settings)
    assert got == want
    want_views = {tp: [replica_view(log, offsets[tp]) for log in logs] for tp, logs in want.logs.items()}
    assert replica_entries(got_views) == replica_entries(want_views)
    assert {
        (e["node"], tuple(e["epochs"][0])) for e in replica_entries(got_views) if e["partition"] == 9
    } == {
        ("n1", (1, 0)),
        ("n2", (1, 0)),
        ("n3", (1, 0)),
    }
    counts = {name: a["count"] for name, a in got.anomalies.items()}
    assert counts == {"log-divergence": 16, "lost-committed-on-replicas": 8}
    assert got.partitions["t0-9"]["divergent"] == [[5, 6], [8, 9]]
    assert got.partitions["t0-7"]["replicas"][0]["records"] == 3  # offsets 1 and 2 read twice
    assert any("n2 is outside the final ISR" in n for n in got.notes)
    assert any("fails its CRC" in n for n in got.notes)
    assert any("t0-10: the copy on n3 is not judged" in n for n in got.notes)
    assert any("t1-0: 1 of 3 replicas collected" in r for r in got.incomplete)
    assert any("n4 has no data dir" in r for r in got.incomplete)
    assert got.lost_by_second


def got_partitions(findings: ReplicaFindings) -> list[tuple[str, int]]:
    """The judged partitions, from their summaries' names ("t0-9")."""
    return [(name.rpartition("-")[0], int(name.rpartition("-")[2])) for name in findings.partitions]


def test_without_a_history_or_without_data(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, _, state = scenarios(tmp_path)
    monkeypatch.setattr(spark_replicas, "ON_DRIVER", 0)  # the wrong positions streamed in order
    got, want = both(spark, nodes, None, state)
    assert got == want and got.anomalies["lost-committed-on-replicas"]["count"] == 0
    got, want = both(spark, tmp_path / "nowhere", None, None, expected=[("t0", 0)], replication_factor=3)
    assert got == want and got.incomplete
