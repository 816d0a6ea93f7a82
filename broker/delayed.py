"""When a parked (long-polling) fetch may complete, sans-IO: the adapters wait, this decides.

Kafka's DelayedFetch completes when enough bytes have accumulated (fetch.min.bytes), when the
fetch's partitions changed role or epoch, or when max wait expires. Reading the log again on
every append to find out costs a log read per waiting fetch per append; instead the fetch
remembers, per partition, the offset it asked for, and the adapter reports how far a partition
has moved (the HW for a consumer, which reads below it; the log end for a follower) together with
the bytes between the two offsets, which `ByteMarks` knows from the appends it has seen.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

# How many appends ByteMarks remembers; a fetch further behind has plenty of bytes to read.
MAX_MARKS = 4096


@dataclass(slots=True)
class ByteMarks:
    """Cumulative bytes appended at batch boundaries, to size [from, to) without a log read."""

    ends: list[int] = field(default_factory=list)  # log end offset after each append
    totals: list[int] = field(default_factory=list)  # bytes appended up to that end
    total: int = 0

    def appended(self, log_end_offset: int, size: int) -> None:
        self.total += size
        self.ends.append(log_end_offset)
        self.totals.append(self.total)
        if len(self.ends) > 2 * MAX_MARKS:
            del self.ends[:MAX_MARKS]
            del self.totals[:MAX_MARKS]

    def truncated(self, log_end_offset: int) -> None:
        """Forget appends past a new (smaller) log end."""
        keep = bisect_right(self.ends, log_end_offset)
        del self.ends[keep:]
        del self.totals[keep:]
        self.total = self.totals[-1] if self.totals else 0

    def bytes_between(self, start: int, end: int) -> int | None:
        """Bytes of whole batches in [start, end); None when `start` is older than the marks."""
        if end <= start:
            return 0
        if not self.ends or start < self.ends[0]:
            return None
        i = bisect_right(self.ends, start) - 1
        j = bisect_right(self.ends, end) - 1
        return self.totals[j] - self.totals[i]


@dataclass(slots=True)
class DelayedFetch:
    """One parked fetch: the offsets it asked for, the bytes it has found, whether it may complete."""

    min_bytes: int
    offsets: dict[tuple[str, int], int]  # partition -> fetch offset
    found_bytes: int = 0
    complete: bool = False
    _seen: dict[tuple[str, int], int] = field(default_factory=dict)  # bytes counted per partition

    def on_found(self, key: tuple[str, int], size: int) -> None:
        """The first read found `size` bytes from this partition's fetch offset."""
        self.found_bytes += size - self._seen.get(key, 0)
        self._seen[key] = size

    def on_progress(self, key: tuple[str, int], readable_end: int, size: int | None) -> bool:
        """The partition's readable end moved to `readable_end`, `size` bytes past the fetch offset
        (None: unknown, assume plenty). True when the fetch should complete now."""
        if self.complete:
            return True
        offset = self.offsets.get(key)
        if offset is None or readable_end <= offset:
            return False
        if size is None or self.min_bytes <= 1:
            self.complete = True
            return True
        # `size` covers everything from the fetch offset, so replace this partition's count
        self.on_found(key, size)
        if self.found_bytes >= self.min_bytes:
            self.complete = True
        return self.complete

    def on_state_change(self) -> bool:
        """Role, epoch or log changed under the fetch: complete now so the client sees it."""
        self.complete = True
        return True
