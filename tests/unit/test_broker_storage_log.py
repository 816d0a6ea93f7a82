"""PartitionLog: append, read, truncate, roll, recovery, read back with kafka.record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from broker.storage import (
    InvalidRecordError,
    OffsetOutOfRangeError,
    PartitionLog,
    UnexpectedAppendOffsetError,
)
from broker.storage.build import GZIP, build_batch
from checkers.data_dirs import iter_batches, iter_partition_dirs


def v(i: int) -> bytes:
    """Fixed-width values, so every batch of n records has the same size."""
    return b"%04d" % i


def values(n: int, start: int = 0) -> list[bytes | None]:
    return [v(i) for i in range(start, start + n)]


def decode(data: bytes) -> list[tuple[int, int, bytes | None]]:
    """(offset, partition leader epoch, value) of every record, via kafka.record, CRCs checked."""
    out = []
    for batch in MemoryRecords(data):
        assert batch.validate_crc()
        out.extend((record.offset, batch.leader_epoch, record.value) for record in batch)
    return out


def read_all(log: PartitionLog, max_offset: int | None = None) -> list[tuple[int, int, bytes | None]]:
    out: list[tuple[int, int, bytes | None]] = []
    offset = log.log_start_offset
    while True:
        data = log.read(offset, 1000, max_offset)
        if not data:
            return out
        records = decode(data)
        out.extend(record for record in records if record[0] >= offset)
        offset = records[-1][0] + 1


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "t0-0"


def test_leader_append_assigns_offsets_and_epoch(log_dir: Path) -> None:
    log = PartitionLog(log_dir)
    assert (log.topic, log.partition) == ("t0", 0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.append_as_leader(build_batch(values(3), base_offset=77), 5) == (0, 2)
    two = build_batch(values(1, 3)) + build_batch(values(2, 4), compression=GZIP)
    assert log.append_as_leader(two, 6) == (3, 5)
    assert log.log_end_offset == 6
    assert read_all(log) == [(i, 5 if i < 3 else 6, v(i)) for i in range(6)]
    assert log.epochs.entries() == [(5, 0), (6, 3)]
    assert (log_dir / "00000000000000000000.log").exists()
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n2\n5 0\n6 3\n"


def test_segment_file_reads_back_with_kafka_record(log_dir: Path) -> None:
    log = PartitionLog(log_dir)
    for i in range(10):
        log.append_as_leader(build_batch(values(i + 1)), i // 3)
    log.flush()
    data = (log_dir / "00000000000000000000.log").read_bytes()
    records = decode(data)
    assert [offset for offset, _, _ in records] == list(range(55))


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"\x00" * 10,
        build_batch(values(2))[:-1],
        build_batch(values(2)) + b"\x00\x01",
        bytes([b ^ (0xFF if i == 70 else 0) for i, b in enumerate(build_batch(values(2)))]),
        build_batch(values(1))[:16] + b"\x01" + build_batch(values(1))[17:],  # magic 1
    ],
    ids=["empty", "short", "torn", "trailing-garbage", "bad-crc", "bad-magic"],
)
def test_leader_append_rejects_bad_batches_and_writes_nothing(log_dir: Path, bad: bytes) -> None:
    log = PartitionLog(log_dir)
    log.append_as_leader(build_batch(values(1)), 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(build_batch(values(1)) + bad if bad else bad, 0)
    assert log.log_end_offset == 1
    assert (log_dir / "00000000000000000000.log").stat().st_size == len(build_batch(values(1)))


def test_read_rules(log_dir: Path) -> None:
    log = PartitionLog(log_dir)
    for i in range(4):  # batches [0-2] [3-5] [6-8] [9-11]
        log.append_as_leader(build_batch(values(3, 3 * i)), 1)
    size = len(build_batch(values(3)))
    assert [o for o, _, _ in decode(log.read(4, 10))] == [3, 4, 5]  # the batch containing 4, though too big
    assert len(log.read(0, 2 * size)) == 2 * size
    assert len(log.read(0, 2 * size - 1)) == size
    assert len(log.read(0, 10**9)) == 4 * size
    assert [o for o, _, _ in decode(log.read(0, 10**9, max_offset=9))][-1] == 8
    assert log.read(0, 10**9, max_offset=2) == b""  # the first batch straddles the bound
    assert [o for o, _, _ in decode(log.read(0, 10**9, max_offset=8))][-1] == 5
    assert log.read(12, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(13, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_segments_roll_and_reopen(log_dir: Path) -> None:
    size = len(build_batch(values(2)))
    log = PartitionLog(log_dir, segment_bytes=3 * size)
    for i in range(10):
        log.append_as_leader(build_batch(values(2, 2 * i)), 0)
    names = sorted(p.name for p in log_dir.glob("*.log"))
    assert names == [f"{base:020d}.log" for base in (0, 6, 12, 18)]
    expected = [(i, 0, v(i)) for i in range(20)]
    assert read_all(log) == expected
    log.close()
    reopened = PartitionLog(log_dir, segment_bytes=3 * size)
    assert reopened.log_end_offset == 20 and reopened.recovered_problem is None
    assert read_all(reopened) == expected
    assert reopened.append_as_leader(build_batch(values(1, 20)), 0) == (20, 20)


def test_truncate_to(log_dir: Path) -> None:
    size = len(build_batch(values(2)))
    log = PartitionLog(log_dir, segment_bytes=2 * size)
    for i in range(6):  # segments at 0, 4, 8; epochs 0,0,1,1,2,2
        log.append_as_leader(build_batch(values(2, 2 * i)), i // 2)
    assert log.epochs.entries() == [(0, 0), (1, 4), (2, 8)]
    log.truncate_to(9)  # inside the batch [8, 9]: that batch goes
    assert log.log_end_offset == 8
    assert log.epochs.entries() == [(0, 0), (1, 4)]
    log.truncate_to(4)  # a segment boundary
    assert log.log_end_offset == 4 and log.epochs.entries() == [(0, 0)]
    assert sorted(p.name for p in log_dir.glob("*.log")) == [f"{0:020d}.log", f"{4:020d}.log"]
    log.truncate_to(100)  # beyond the end: nothing
    assert log.log_end_offset == 4
    assert log.append_as_leader(build_batch(values(1, 4)), 3) == (4, 4)
    log.close()
    reopened = PartitionLog(log_dir)
    assert reopened.log_end_offset == 5
    assert reopened.epochs.entries() == [(0, 0), (3, 4)]
    assert [v for _, _, v in read_all(reopened)] == [v(i) for i in range(5)]
    reopened.truncate_to(0)
    assert reopened.log_end_offset == 0 and reopened.epochs.entries() == []


def test_follower_append(log_dir: Path, tmp_path: Path) -> None:
    leader = PartitionLog(tmp_path / "t1-0")
    for i in range(5):
        leader.append_as_leader(build_batch(values(2, 2 * i)), 1 + i // 3)
    follower = PartitionLog(log_dir)
    chunk = leader.read(0, 10**6)
    follower.append_as_follower(chunk[:-5])  # the last batch is cut short, as a fetch may be
    assert follower.log_end_offset == 8
    follower.append_as_follower(leader.read(8, 10**6))
    assert follower.log_end_offset == 10
    assert follower.epochs.entries() == leader.epochs.entries() == [(1, 0), (2, 6)]
    assert read_all(follower) == read_all(leader)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(leader.read(6, 10**6))
    bad = bytearray(leader.read(8, 10**6))
    bad[-1] ^= 1
    follower.truncate_to(8)
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(bytes(bad))
    assert follower.log_end_offset == 8
    follower.append_as_follower(b"")
    assert follower.log_end_offset == 8


def test_flush_interval_moves_recovery_point(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    syncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (syncs.append(fd), real_fsync(fd)))
    log = PartitionLog(log_dir, flush_interval_messages=3)
    log.epochs.assign(0, 0)  # its checkpoint write fsyncs too
    syncs.clear()
    log.append_as_leader(build_batch(values(2)), 0)
    assert log.recovery_point == 0 and not syncs
    log.append_as_leader(build_batch(values(1)), 0)
    assert log.recovery_point == 3 and syncs
    never = PartitionLog(log_dir.with_name("t0-1"))
    never.epochs.assign(0, 0)
    syncs.clear()
    for _ in range(10):
        never.append_as_leader(build_batch(values(1)), 0)
    assert not syncs and never.recovery_point == 0
    never.flush()
    assert syncs and never.recovery_point == 10


def test_recovery_truncates_torn_tail_and_corrupt_batch(log_dir: Path) -> None:
    log = PartitionLog(log_dir)
    for i in range(4):
        log.append_as_leader(build_batch(values(2, 2 * i)), i)
    log.close()
    segment = log_dir / "00000000000000000000.log"
    size = len(build_batch(values(2)))
    with open(segment, "r+b") as f:
        f.truncate(4 * size - 7)
    log = PartitionLog(log_dir)
    assert log.log_end_offset == 6 and log.recovered_problem and "torn" in log.recovered_problem
    assert log.epochs.entries() == [(0, 0), (1, 2), (2, 4)]
    assert segment.stat().st_size == 3 * size
    log.close()
    data = bytearray(segment.read_bytes())
    data[size + 40] ^= 0x10  # inside the second batch's CRC-covered part
    segment.write_bytes(bytes(data))
    log = PartitionLog(log_dir)
    assert log.log_end_offset == 2 and "CRC" in (log.recovered_problem or "")
    assert log.epochs.entries() == [(0, 0)]
    assert [v for _, _, v in read_all(log)] == [v(0), v(1)]


def test_recovery_deletes_segments_after_a_corrupt_one(log_dir: Path) -> None:
    size = len(build_batch(values(1)))
    log = PartitionLog(log_dir, segment_bytes=2 * size)
    for i in range(6):
        log.append_as_leader(build_batch(values(1, i)), 0)
    log.close()
    middle = log_dir / f"{2:020d}.log"
    data = bytearray(middle.read_bytes())
    data[size + 30] ^= 1
    middle.write_bytes(bytes(data))
    log = PartitionLog(log_dir, segment_bytes=2 * size)
    assert log.log_end_offset == 3
    assert sorted(p.name for p in log_dir.glob("*.log")) == [f"{0:020d}.log", f"{2:020d}.log"]
    assert log.append_as_leader(build_batch(values(1)), 1) == (3, 3)


def test_recovery_rebuilds_epochs_without_checkpoint(log_dir: Path) -> None:
    log = PartitionLog(log_dir)
    for epoch in (0, 0, 2, 5):
        log.append_as_leader(build_batch(values(2)), epoch)
    log.close()
    (log_dir / "leader-epoch-checkpoint").unlink()
    assert PartitionLog(log_dir).epochs.entries() == [(0, 0), (2, 4), (5, 6)]


def test_zero_filled_tail_is_cut(log_dir: Path) -> None:
    log = PartitionLog(log_dir)
    log.append_as_leader(build_batch(values(3)), 0)
    log.close()
    with open(log_dir / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00" * 4096)
    log = PartitionLog(log_dir)
    assert log.log_end_offset == 3 and log.recovered_problem
    assert (log_dir / "00000000000000000000.log").stat().st_size == len(build_batch(values(3)))


def test_iter_batches_reports_what_is_on_disk(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t3-2")
    log.append_as_leader(build_batch([b"1", None]), 4)
    log.append_as_leader(build_batch([b"3"], compression=GZIP), 5)
    log.close()
    segment = tmp_path / "t3-2" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-3] ^= 1
    segment.write_bytes(bytes(data) + b"\x00\x00")
    assert list(iter_partition_dirs(tmp_path)) == [("t3", 2, tmp_path / "t3-2")]
    batches = list(iter_batches(tmp_path / "t3-2"))
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch, b.crc_ok) for b in batches] == [
        (0, 1, 4, True),
        (2, 2, 5, False),
    ]
    assert batches[0].records == [(0, b"1"), (1, None)]
    assert segment.stat().st_size == len(data) + 2  # read-only: nothing repaired


def test_truncate_below_start_restarts_log(log_dir: Path) -> None:
    log = PartitionLog(log_dir)
    log.truncate_to(0)
    log.append_as_leader(build_batch(values(2)), 0)
    log._truncate_fully_and_start_at(10)
    assert (log.log_start_offset, log.log_end_offset) == (10, 10)
    log.append_as_follower(build_batch(values(1), base_offset=10, leader_epoch=3))
    log.close()
    reopened = PartitionLog(log_dir)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (10, 11)
    assert reopened.epochs.entries() == [(3, 10)]
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(5, 100)
