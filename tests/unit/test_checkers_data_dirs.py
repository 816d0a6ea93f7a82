"""The checker's own reader of Kafka's text checkpoints reads them as Kafka's CheckpointFile does."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.storage import OffsetCheckpoint
from checkers.data_dirs import CheckpointError, read_epoch_checkpoint, read_offset_checkpoint


def test_what_the_broker_writes_reads_back(tmp_path: Path) -> None:
    offsets = {("t0", 0): 5, ("t0", 1): 0, ("t1", 3): 2**40}
    OffsetCheckpoint(tmp_path / "replication-offset-checkpoint").write(offsets)
    assert read_offset_checkpoint(tmp_path / "replication-offset-checkpoint") == offsets
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 17\n")
    assert read_epoch_checkpoint(tmp_path / "leader-epoch-checkpoint") == [(0, 0), (3, 17)]


@pytest.mark.parametrize("text", ["", "0\n", "0\n0\n"])
def test_an_empty_file_or_a_version_line_alone_holds_no_entries(tmp_path: Path, text: str) -> None:
    """As Kafka reads them: a checkpoint replaced without fsync comes back empty (KAFKA-16541)."""
    (tmp_path / "ckpt").write_text(text)
    assert read_offset_checkpoint(tmp_path / "ckpt") == {}
    assert read_epoch_checkpoint(tmp_path / "ckpt") == []


def test_a_missing_file_holds_no_entries(tmp_path: Path) -> None:
    assert read_offset_checkpoint(tmp_path / "missing") == {}
    assert read_epoch_checkpoint(tmp_path / "missing") == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("1\n0\n", "unsupported version '1'"),
        ("0\nx\n", "bad count line 'x'"),
        ("0\n2\nt0 0 5\n", "expected 2 entries, found 1"),
        ("0\n1\nt0 0 5\nt0 1 6\n", "expected 1 entries, found 2"),
        ("0\n1\nt0 0 5\n\n", "malformed entry ''"),
        ("0\n1\nt0 0\n", "malformed entry 't0 0'"),
        ("0\n1\nt0 x 5\n", "malformed entry 't0 x 5'"),
        ("0\n1\nt0 1_0 5\n", "malformed entry 't0 1_0 5'"),
        ("0\n1\nt0 2147483648 5\n", "malformed entry 't0 2147483648 5'"),
    ],
)
def test_what_kafka_would_refuse_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "ckpt").write_text(text)
    with pytest.raises(CheckpointError, match=f": {problem}$"):
        read_offset_checkpoint(tmp_path / "ckpt")


def test_an_epoch_entry_is_an_int_epoch_and_a_long_start_offset(tmp_path: Path) -> None:
    (tmp_path / "ckpt").write_text(f"0\n1\n2 {2**40}\n")
    assert read_epoch_checkpoint(tmp_path / "ckpt") == [(2, 2**40)]
    (tmp_path / "ckpt").write_text(f"0\n1\n{2**31} 0\n")
    with pytest.raises(CheckpointError, match="malformed entry"):
        read_epoch_checkpoint(tmp_path / "ckpt")


@pytest.mark.parametrize("magic", [0, 1])
def test_a_message_format_before_v2_is_reported_not_read_as_empty(tmp_path: Path, magic: int) -> None:
    """Kafka before 0.11 writes message sets of v0/v1 (0.10.2's default is v1): the reader does not
    decode them, and says so rather than report a log with no records."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    from checkers.data_dirs import iter_batches

    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for offset in range(3):
        builder.append(offset, timestamp=None if magic == 0 else 1, key=None, value=str(offset).encode())
    partition = tmp_path / "t0-0"
    partition.mkdir()
    (partition / "00000000000000000000.log").write_bytes(bytes(builder.build()))
    problems: list[str] = []
    assert list(iter_batches(partition, problems=problems)) == []
    assert problems == [
        f"00000000000000000000.log: unsupported message format v{magic} (Kafka before 0.11) at position 0; "
        "not read from there on"
    ]
