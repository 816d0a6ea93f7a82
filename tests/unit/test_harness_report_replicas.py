"""The report draws the replica logs the replica-log checker judged, as the checker read them (the
same values, the log up to the first batch that fails its CRC, the same log ends): the checker
writes each replica's view into evidence.json and the report reads it back."""

from __future__ import annotations

from pathlib import Path

from checkers.evidence import replica_entries
from checkers.evidence_reference import replica_view
from checkers.replica_logs import check_replica_logs
from harness.report.replicas import partition_logs
from tests.support.checked_runs import values, write_replica


def test_the_report_draws_each_replica_as_the_checker_read_it(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes"
    segment = write_replica(nodes, "n1", "t0", 0, [(0, values(10, 11)), (2, values(12))], hw=2)
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF  # the second batch fails its CRC: the log ends before it
    segment.write_bytes(bytes(data))
    write_replica(nodes, "n2", "t0", 0, [(0, [b"10", b"not a number"]), (2, values(12))], hw=3)
    write_replica(nodes, "n2", "__consumer_offsets", 0, [(0, values(1))])

    findings = check_replica_logs(nodes, None)
    views = {tp: [replica_view(log, {0, 1, 2}) for log in logs] for tp, logs in findings.logs.items()}
    logs = partition_logs({"replicas": replica_entries(views)})

    assert list(logs) == [("t0", 0)]
    replicas = logs[("t0", 0)].replicas
    for summary in findings.partitions["t0-0"]["replicas"]:
        r = replicas[summary["node"]]
        assert (r.log_start, r.log_end, r.high_watermark, len(r.records)) == (
            summary["log_start"],
            summary["log_end"],
            summary["high_watermark"],
            summary["records"],
        )
    assert replicas["n1"].records == {0: (10, 1), 1: (11, 1)}
    assert replicas["n1"].problem is not None and "CRC" in replicas["n1"].problem
    assert replicas["n2"].records == {0: (10, 1), 1: ("b'not a number'", 1), 2: (12, 1)}
    assert replicas["n2"].problem is None
    assert replicas["n1"].epochs == [(1, 0)]  # no leader-epoch-checkpoint: the batches' epochs
