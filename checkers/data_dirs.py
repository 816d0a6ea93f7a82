"""Read-only access to Kafka data dirs, with kafka.record (never with the system under test's code).

The run's `nodes/<node>/data/` directories hold Kafka's on-disk format: `<topic>-<partition>/`
directories of `<20-digit base offset>.log` segments of v2 record batches, and text checkpoints
(`replication-offset-checkpoint` per data dir, `leader-epoch-checkpoint` per partition). The own
broker and Apache Kafka write the same files, and the checker judges both with this independent
reader. Nothing is modified (no recovery, no truncation):
a batch whose CRC fails is flagged, a torn or malformed batch ends its segment.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kafka.record.default_records import DefaultRecordBatch

log = logging.getLogger(__name__)

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
SEGMENT_SUFFIX = ".log"
CHECKPOINT_VERSION = 0

_HEADER = DefaultRecordBatch.HEADER_STRUCT  # base offset, length, leader epoch, magic, crc, ...
_LOG_OVERHEAD = 12  # base offset (int64) + length (int32): the bytes the length field does not count
_MIN_LENGTH = _HEADER.size - _LOG_OVERHEAD
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_MAGIC_AT = 16  # base offset (8), length (4), partition leader epoch or v0/v1 CRC (4), then magic
_OLD_MAGIC = (0, 1)
UNSUPPORTED = "unsupported message format"

Entry = TypeVar("Entry")


class CheckpointError(Exception):
    """A checkpoint file that cannot be read as Kafka's format."""


@dataclass(frozen=True)
class BatchInfo:
    """One batch as found on disk; `records` are (offset, value) decoded with kafka.record."""

    segment: Path
    position: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    crc_ok: bool
    is_control: bool = False
    records: list[tuple[int, bytes | None]] = field(default_factory=list)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`t0-3` -> ("t0", 3); None if the name is not `<topic>-<partition>`."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def parse_segment_name(name: str) -> int | None:
    """The base offset of a `<20 digits>.log` segment file name, else None."""
    stem = name[: -len(SEGMENT_SUFFIX)] if name.endswith(SEGMENT_SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def iter_partition_dirs(data_dir: Path) -> Iterator[tuple[str, int, Path]]:
    """(topic, partition, path) for every `<topic>-<partition>` directory of a data dir, sorted."""
    entries = []
    for path in Path(data_dir).iterdir():
        parsed = parse_partition_dir(path.name) if path.is_dir() else None
        if parsed is not None:
            entries.append((parsed[0], parsed[1], path))
    yield from sorted(entries)


def _whole_batch_at(data: bytes, pos: int) -> tuple[tuple[int, ...] | None, str]:
    """The header fields of the whole v2 batch at `pos`, or (None, why it is torn or malformed)."""
    remaining = len(data) - pos
    if remaining > _MAGIC_AT and data[pos + _MAGIC_AT] in _OLD_MAGIC:  # a message set of v0 or v1
        return None, f"{UNSUPPORTED} v{data[pos + _MAGIC_AT]} (Kafka before 0.11) at position {pos}"
    if remaining < _HEADER.size:
        return None, f"torn batch header at position {pos} ({remaining} bytes)"
    header = _HEADER.unpack_from(data, pos)
    length, magic, last_offset_delta, records_count = header[1], header[3], header[6], header[12]
    if length < _MIN_LENGTH:
        return None, f"batch length {length} at position {pos} is below the header size"
    if length + _LOG_OVERHEAD > remaining:
        return None, f"torn batch at position {pos}: length {length}, {remaining} bytes left"
    if magic != 2:
        return None, f"{UNSUPPORTED}: magic {magic} at position {pos}"
    if last_offset_delta < 0 or records_count < 0:
        return None, f"negative last offset delta or record count at position {pos}"
    return header, ""


def iter_batches(
    log_dir: Path, *, decode: bool = True, problems: list[str] | None = None
) -> Iterator[BatchInfo]:
    """Every batch of a partition directory's segments, in offset order.

    A batch of full length whose CRC fails is yielded with crc_ok=False (records decoded if
    possible, else empty); an incomplete tail or a malformed header ends that segment. A message
    format this reader does not know (v0/v1, another magic) ends it too and is said in `problems`:
    what it holds is unknown, not absent.
    """
    segments = sorted(
        (base, path)
        for path in Path(log_dir).iterdir()
        if (base := parse_segment_name(path.name)) is not None and path.is_file()
    )
    for _, path in segments:
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            header, problem = _whole_batch_at(data, pos)
            if header is None:
                log.info("%s: stops at position %d: %s", path, pos, problem)
                if problems is not None and problem.startswith(UNSUPPORTED):
                    problems.append(f"{path.name}: {problem}; not read from there on")
                break
            size = header[1] + _LOG_OVERHEAD
            batch = DefaultRecordBatch(data[pos : pos + size])
            crc_ok = batch.validate_crc()  # before decoding: kafka.record checks the stored bytes
            records: list[tuple[int, bytes | None]] = []
            if decode:
                try:
                    records = [(record.offset, record.value) for record in batch]
                except Exception as exc:  # a corrupt batch may not decode at all
                    log.info("%s: batch at %d does not decode: %s", path, pos, exc)
            yield BatchInfo(
                segment=path,
                position=pos,
                base_offset=batch.base_offset,
                last_offset=batch.last_offset,
                partition_leader_epoch=batch.leader_epoch,
                crc_ok=crc_ok,
                is_control=batch.is_control_batch,
                records=records,
            )
            pos += size
        del data


def _integer(text: str, bits: int) -> int:
    """A field Kafka's checkpoint formatters read with Java's `Integer.parseInt` (`bits` 32) or
    `Long.parseLong` (64): decimal digits with an optional sign, in range; ValueError otherwise."""
    if not _DECIMAL.fullmatch(text):
        raise ValueError(text)
    value = int(text)
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ValueError(text)
    return value


def _checkpoint_entries(path: Path, entry: Callable[[list[str]], Entry]) -> list[Entry] | None:
    """The entries of one of Kafka's text checkpoints, read as Kafka's `CheckpointFile` reads them
    (`CheckpointReadBuffer`); None when the file is missing.

    A version line (0), a count line, then every line to the end of the file is an entry: its
    whitespace-separated fields, which `entry` turns into a value (ValueError: not an entry of this
    file's kind); there must be as many as the count says. An empty file, or one of a version line
    alone, holds no entries (Kafka reads it so: a checkpoint replaced without fsync can come back
    empty, KAFKA-16541).

    Written apart from the own broker's `broker.storage.checkpoints` on purpose: the checker may
    not import the broker (pyproject.toml's layers), and it must not judge a system with that
    system's own parser.
    """
    try:
        # Lines end at \n, \r or \r\n, as Java's BufferedReader.readLine ends them.
        with open(path, encoding="utf-8", newline="") as f:
            lines = [line.rstrip("\r\n") for line in f]
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path}: not UTF-8 text ({e.reason})") from None
    if not lines:
        return []
    version, *rest = lines
    if _integer_or_none(version) != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unsupported version {version!r}")
    if not rest:
        return []
    count_line, *body = rest
    count = _integer_or_none(count_line)
    if count is None:
        raise CheckpointError(f"{path}: bad count line {count_line!r}")
    entries = []
    for line in body:
        try:
            entries.append(entry(line.split()))
        except ValueError:
            raise CheckpointError(f"{path}: malformed entry {line!r}") from None
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def _integer_or_none(line: str) -> int | None:
    """A version or count line's number (a Java int), or None."""
    try:
        return _integer(line, 32)
    except ValueError:
        return None


def _offset_entry(fields: list[str]) -> tuple[tuple[str, int], int]:
    """`topic partition offset`: Kafka's OffsetCheckpointFile entry."""
    topic, partition, offset = fields
    return (topic, _integer(partition, 32)), _integer(offset, 64)


def _epoch_entry(fields: list[str]) -> tuple[int, int]:
    """`epoch start-offset`: Kafka's LeaderEpochCheckpointFile entry."""
    epoch, start_offset = fields
    return _integer(epoch, 32), _integer(start_offset, 64)


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """A `replication-offset-checkpoint`: (topic, partition) -> offset; {} when the file is missing.

    Kafka's text format: a version line (0), a count line, then `topic partition offset` lines.
    """
    return dict(_checkpoint_entries(path, _offset_entry) or [])


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    """A partition's `leader-epoch-checkpoint`: (leader epoch, start offset) entries in file order;
    [] when the file is missing. The same text format, with `epoch start-offset` lines."""
    return _checkpoint_entries(path, _epoch_entry) or []
