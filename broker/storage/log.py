"""A partition's replica log: `<topic>-<partition>/` with segments, recovery and the epoch cache.

Appends keep batches opaque: one header parse and one CRC check per batch, a rewrite of the two
leader-owned header fields, one write. Reads return whole batches straight from the file.
Not thread-safe by design beyond a lock around each call: the broker drives it from one event loop.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import threading
from pathlib import Path

from broker.storage.batches import BatchHeader, parse_batches, set_base_offset_and_epoch
from broker.storage.checkpoints import fsync_dir
from broker.storage.epochs import CHECKPOINT_NAME, LeaderEpochCache
from broker.storage.errors import InvalidRecordError, OffsetOutOfRangeError, UnexpectedAppendOffsetError
from broker.storage.segment import LogSegment, parse_segment_name, segment_name

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """`t0-3` -> ("t0", 3); None if the name is not `<topic>-<partition>`."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class PartitionLog:
    """The log of one replica of one partition, in Kafka's on-disk format.

    Opening it runs recovery: every batch is checked (length, magic, CRC, contiguous offsets) and a
    torn or corrupt tail is truncated, with all later segments, so it is never served.
    """

    def __init__(
        self,
        dir: Path,
        *,
        flush_interval_messages: int = 0,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        recovery_point: int = 0,
        epoch_checkpoint_fsync: bool = True,
    ) -> None:
        self.dir = Path(dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        parsed = parse_partition_dir(self.dir.name)
        self.topic, self.partition = parsed if parsed else (self.dir.name, -1)
        self.flush_interval_messages = max(0, flush_interval_messages)
        self.segment_bytes = segment_bytes
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._segment_bases: list[int] = []
        self._unflushed_messages = 0
        self._dir_dirty = False
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        self.recovered_problem: str | None = None  # why recovery truncated, if it did
        self.epochs = LeaderEpochCache(
            self.dir / CHECKPOINT_NAME, lambda: self.log_end_offset, fsync=epoch_checkpoint_fsync
        )
        self._recover(max(0, recovery_point))

    # -- recovery --------------------------------------------------------------------------------
    def _recover(self, recovery_point: int) -> None:
        """Check every segment (CRC, offsets; stricter than Kafka, which trusts the segments below
        its recovery point) and cut at the first bad batch. Leader epochs missing from the
        checkpoint are taken only from the segments Kafka's LogLoader recovers: those that reach
        past the last checkpointed recovery point."""
        bases = sorted(
            base for base in (parse_segment_name(p.name) for p in self.dir.iterdir()) if base is not None
        )
        if not bases:
            bases = [0]
            self._dir_dirty = True
        transitions: list[tuple[int, int]] = []
        for i, base in enumerate(bases):
            segment = LogSegment(self.dir, base)
            if self._segments and base != self._segments[-1].next_offset:
                gap = f"segment {segment.path.name} does not continue offset {self._segments[-1].next_offset}"
                self._drop_from(bases[i:], gap, segment)
                break
            self._add_segment(segment)
            seen, problem = segment.recover()
            if segment.next_offset > recovery_point or i == len(bases) - 1:
                transitions.extend(seen)
            if problem is not None:
                log.warning(
                    "%s: truncated %s at %d bytes: %s", self.dir, segment.path.name, segment.size, problem
                )
                self.recovered_problem = problem
                self._drop_from(bases[i + 1 :], problem)
                break
        self.log_start_offset = self._segments[0].base_offset
        self.log_end_offset = self._segments[-1].next_offset
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        for epoch, start in transitions:
            if epoch >= 0 and epoch > self.epochs.latest_epoch() and start < self.log_end_offset:
                self.epochs.assign(epoch, start)
        self._segments[-1].dirty = True
        self.flush()
        log.info(
            "%s: opened, offsets [%d, %d), %d segment(s)",
            self.dir,
            self.log_start_offset,
            self.log_end_offset,
            len(self._segments),
        )

    def _drop_from(self, bases: list[int], problem: str, opened: LogSegment | None = None) -> None:
        """Delete the segments after a recovery problem: nothing past a bad batch is served."""
        self.recovered_problem = problem
        if opened is not None:
            opened.close()
        for base in bases:
            path = self.dir / segment_name(base)
            log.warning("%s: deleting %s after recovery problem: %s", self.dir, path.name, problem)
            path.unlink(missing_ok=True)
        self._dir_dirty = True

    def _add_segment(self, segment: LogSegment) -> None:
        self._segments.append(segment)
        self._segment_bases.append(segment.base_offset)

    # -- appends ---------------------------------------------------------------------------------
    def append_as_leader(self, records: bytes, leader_epoch: int) -> tuple[int, int]:
        """Validate a producer's batches, assign offsets from the LEO and stamp the leader epoch.

        Returns (base offset of the first batch, last offset of the last batch). Raises
        InvalidRecordError (nothing written) if any batch is malformed or fails its CRC.
        """
        if leader_epoch < 0:
            raise ValueError(f"leader epoch must be >= 0, got {leader_epoch}")
        headers = parse_batches(records)
        if not headers:
            raise InvalidRecordError("no record batches")
        with self._lock:
            buf = bytearray(records)
            next_offset = self.log_end_offset
            first = next_offset
            position = 0
            stamped: list[BatchHeader] = []
            for header in headers:
                set_base_offset_and_epoch(buf, position, next_offset, leader_epoch)
                stamped.append(header._replace(base_offset=next_offset, partition_leader_epoch=leader_epoch))
                position += header.size
                next_offset += header.last_offset_delta + 1
            self._append(buf, stamped)
            return first, next_offset - 1

    def append_as_follower(self, records: bytes) -> None:
        """Append batches whose offsets the leader assigned; they must continue the LEO exactly.

        A batch cut short at the end of a fetch response is ignored, as Kafka's fetcher does.
        """
        headers = parse_batches(records, allow_partial_tail=True)
        if not headers:
            return
        with self._lock:
            expected = self.log_end_offset
            size = 0
            for header in headers:
                if header.base_offset != expected:
                    raise UnexpectedAppendOffsetError(
                        f"{self.dir.name}: batch base offset {header.base_offset}, log end offset {expected}"
                    )
                expected = header.last_offset + 1
                size += header.size
            self._append(memoryview(records)[:size], headers)

    def _append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        last_epoch = None
        for header in headers:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch != last_epoch:
                self.epochs.assign(epoch, header.base_offset)
                last_epoch = epoch
        segment = self._segments[-1]
        if segment.size > 0 and segment.size + len(data) > self.segment_bytes:
            segment = self._roll()
        segment.append(data, headers)
        self.log_end_offset = headers[-1].last_offset + 1
        if self.flush_interval_messages:
            self._unflushed_messages += sum(header.records_count for header in headers)
            if self._unflushed_messages >= self.flush_interval_messages:
                self.flush()

    def _roll(self) -> LogSegment:
        """Start a new segment at the LEO; the old one is fsynced, as Kafka flushes rolled segments."""
        self._segments[-1].flush()
        segment = LogSegment(self.dir, self.log_end_offset)
        self._add_segment(segment)
        self._dir_dirty = True
        log.debug("%s: rolled segment %s", self.dir, segment.path.name)
        return segment

    # -- reads -----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from the one containing `offset`, none reaching `max_offset` (exclusive).

        At least one batch is returned even if larger than max_bytes (Kafka's rule), unless it
        reaches max_offset. Reads stay within one segment. b"" at the log end.
        """
        with self._lock:
            if offset < self.log_start_offset or offset > self.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"{self.dir.name}: offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
                )
            if offset == self.log_end_offset:
                return b""
            index = bisect.bisect_right(self._segment_bases, offset) - 1
            for segment in self._segments[index:]:
                data = segment.read(offset, max_bytes, max_offset)
                if data or segment.next_offset > offset:
                    return data
            return b""

    # -- truncation ------------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after `offset` (a batch straddling it goes too); fix the epochs.

        Offsets are batch boundaries in practice (HW, epoch end offsets), so the LEO becomes
        `offset`. Below the log start offset the log is emptied and restarted at `offset`.
        """
        with self._lock:
            if offset >= self.log_end_offset:
                return
            if offset < self.log_start_offset:
                self._truncate_fully_and_start_at(offset)
                return
            while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
                self._segments.pop().delete()
                self._segment_bases.pop()
                self._dir_dirty = True
            self.log_end_offset = self._segments[-1].truncate_to(offset)
            self.epochs.truncate_from_end(self.log_end_offset)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            if self._dir_dirty:
                fsync_dir(self.dir)
                self._dir_dirty = False
            log.info("%s: truncated to %d (asked %d)", self.dir, self.log_end_offset, offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        self._segments.clear()
        self._segment_bases.clear()
        self._add_segment(LogSegment(self.dir, offset))
        fsync_dir(self.dir)
        self.log_start_offset = self.log_end_offset = self.recovery_point = offset
        self.epochs.clear()
        log.info("%s: emptied, restarting at offset %d", self.dir, offset)

    # -- durability ------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment written since the last flush (and the directory if files changed)."""
        with self._lock:
            for segment in self._segments:
                segment.flush()
            if self._dir_dirty:
                fsync_dir(self.dir)
                self._dir_dirty = False
            self._unflushed_messages = 0
            self.recovery_point = self.log_end_offset

    def delete(self) -> None:
        """Close the log and remove its directory (the replica was moved away)."""
        with self._lock:
            self.close()
            shutil.rmtree(self.dir, ignore_errors=True)
            parent = self.dir.parent
            if parent.is_dir():
                fsync_dir(parent)

    def close(self) -> None:
        with self._lock:
            for segment in self._segments:
                segment.close()

    @property
    def segment_paths(self) -> list[Path]:
        return [segment.path for segment in self._segments]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def __repr__(self) -> str:
        return f"PartitionLog({str(self.dir)!r}, [{self.log_start_offset}, {self.log_end_offset}))"
