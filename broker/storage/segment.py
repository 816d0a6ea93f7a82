"""One `.log` segment file: v2 batches back to back, with an in-memory index rebuilt on open.

Kafka also keeps sparse `.index`/`.timeindex` files; here the index (base offset, last offset and
end position of every batch) lives in memory, rebuilt by the recovery scan, so the files on disk
are only the `.log` segments a Kafka tool or the replica-log checker reads.
"""

from __future__ import annotations

import bisect
import os
from array import array
from collections.abc import Sequence
from pathlib import Path

from broker.storage.batches import BatchHeader, scan
from broker.storage.errors import StorageError

SUFFIX = ".log"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class LogSegment:
    """A segment file opened for append and positional reads."""

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.base_offset = base_offset
        self.path = directory / segment_name(base_offset)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = 0
        self._lasts = array("q")  # last offset of each batch
        self._ends = array("q")  # position just past each batch
        self.dirty = False

    # -- recovery --------------------------------------------------------------------------------
    def recover(self) -> tuple[list[tuple[int, int]], str | None]:
        """Scan and validate every batch; cut off a torn or corrupt tail.

        Returns the epoch transitions seen [(partition leader epoch, base offset)] and the problem
        that caused a truncation (None if the file was intact).
        """
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0) if size else b""
        result = scan(data)
        problem = result.problem
        transitions: list[tuple[int, int]] = []
        expected = self.base_offset
        last_epoch = None
        valid_end = 0
        for position, header in result.batches:
            if header.base_offset != expected:
                problem = (
                    f"batch at position {position} has base offset {header.base_offset}, expected {expected}"
                )
                break
            if header.partition_leader_epoch != last_epoch:
                last_epoch = header.partition_leader_epoch
                transitions.append((last_epoch, header.base_offset))
            expected = header.last_offset + 1
            valid_end = position + header.size
            self._lasts.append(header.last_offset)
            self._ends.append(valid_end)
        self.size = valid_end
        if valid_end < size:
            os.ftruncate(self._fd, valid_end)
            os.fsync(self._fd)
        return transitions, problem

    # -- state -----------------------------------------------------------------------------------
    @property
    def next_offset(self) -> int:
        return self._lasts[-1] + 1 if self._lasts else self.base_offset

    @property
    def batch_count(self) -> int:
        return len(self._lasts)

    # -- writes ----------------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, headers: Sequence[BatchHeader]) -> None:
        """Write validated batches (headers describe `data` in order) at the end of the file."""
        view = memoryview(data)
        before = self.size
        try:
            done = 0
            while done < len(view):
                done += os.write(self._fd, view[done:])
        except OSError as exc:
            os.ftruncate(self._fd, before)  # never leave a partial batch behind
            raise StorageError(f"{self.path}: append failed: {exc}") from exc
        end = before
        for header in headers:
            end += header.size
            self._lasts.append(header.last_offset)
            self._ends.append(end)
        self.size = end
        self.dirty = True

    def truncate_to(self, offset: int) -> int:
        """Drop the batch containing `offset` and everything after; returns the new next offset."""
        index = bisect.bisect_left(self._lasts, offset)
        if index >= len(self._lasts):
            return self.next_offset
        position = self._ends[index - 1] if index else 0
        os.ftruncate(self._fd, position)
        os.fsync(self._fd)
        del self._lasts[index:]
        del self._ends[index:]
        self.size = position
        return self.next_offset

    def flush(self) -> None:
        if self.dirty:
            os.fsync(self._fd)
            self.dirty = False

    # -- reads -----------------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, max_offset: int | None) -> bytes:
        """Whole batches from the one containing `offset`, below `max_offset`, within max_bytes
        (but at least one batch)."""
        first = bisect.bisect_left(self._lasts, offset)
        if first >= len(self._lasts):
            return b""
        if max_offset is not None and self._lasts[first] >= max_offset:
            return b""
        start = self._ends[first - 1] if first else 0
        last = bisect.bisect_right(self._ends, start + max(max_bytes, 0)) - 1
        if max_offset is not None:
            last = min(last, bisect.bisect_left(self._lasts, max_offset) - 1)
        last = max(last, first)
        length = self._ends[last] - start
        chunks = []
        while length > 0:
            chunk = os.pread(self._fd, length, start)
            if not chunk:
                raise StorageError(f"{self.path}: short read at position {start}")
            chunks.append(chunk)
            start += len(chunk)
            length -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment({self.path.name}, size={self.size}, next_offset={self.next_offset})"
