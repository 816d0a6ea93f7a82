"""Read-only access to data dirs for the replica-log checker and the report.

Never modifies anything (no recovery, no truncation): it shows what is on disk, flagging batches
whose CRC fails and stopping at a torn tail.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafka.record.default_records import DefaultRecordBatch

from broker.storage.batches import BatchHeader, check_batch_at
from broker.storage.log import parse_partition_dir
from broker.storage.segment import parse_segment_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchInfo:
    """One batch as found on disk; `records` are (offset, value) decoded with kafka.record."""

    segment: Path
    position: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    crc_ok: bool
    records: list[tuple[int, bytes | None]] = field(default_factory=list)
    header: BatchHeader | None = None


def iter_partition_dirs(data_dir: Path) -> Iterator[tuple[str, int, Path]]:
    """(topic, partition, path) for every `<topic>-<partition>` directory of a data dir, sorted."""
    entries = []
    for path in Path(data_dir).iterdir():
        parsed = parse_partition_dir(path.name) if path.is_dir() else None
        if parsed is not None:
            entries.append((parsed[0], parsed[1], path))
    yield from sorted(entries)


def _decode(data: bytes) -> list[tuple[int, bytes | None]]:
    batch = DefaultRecordBatch(data)
    return [(record.offset, record.value) for record in batch]


def iter_batches(log_dir: Path, *, decode: bool = True) -> Iterator[BatchInfo]:
    """Every batch of a partition directory's segments, in offset order.

    A batch of full length whose CRC fails is yielded with crc_ok=False (records decoded if
    possible, else empty); an incomplete tail or a malformed header ends that segment.
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
            header, problem = check_batch_at(data, pos, check_crc=True)
            crc_ok = header is not None
            if header is None:
                header, _ = check_batch_at(data, pos, check_crc=False)
                if header is None:
                    log.info("%s: stops at position %d: %s", path, pos, problem)
                    break
            records: list[tuple[int, bytes | None]] = []
            if decode:
                try:
                    records = _decode(data[pos : pos + header.size])
                except Exception as exc:  # a corrupt batch may not decode at all
                    log.info("%s: batch at %d does not decode: %s", path, pos, exc)
            yield BatchInfo(
                segment=path,
                position=pos,
                base_offset=header.base_offset,
                last_offset=header.last_offset,
                partition_leader_epoch=header.partition_leader_epoch,
                crc_ok=crc_ok,
                records=records,
                header=header,
            )
            pos += header.size
        del data


def segment_sizes(log_dir: Path) -> dict[str, int]:
    """File name -> size of each segment, for reports."""
    return {
        p.name: os.path.getsize(p) for p in Path(log_dir).iterdir() if parse_segment_name(p.name) is not None
    }
