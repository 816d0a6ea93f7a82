"""Idempotent-producer bookkeeping for one partition: de-duplicate retried batches by sequence.

Pure: fed batch headers, answers "append", "duplicate of offsets (a, b)" or an error code.
Leaders check before appending; leaders and followers record every appended batch, so a new
leader already knows the sequences (a restarted broker rebuilds the state by scanning its log).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from broker.kafka_errors import INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
KEEP_BATCHES = 5  # Kafka keeps the last 5 batches per producer (max.in.flight for idempotence)


@dataclass(frozen=True, slots=True)
class Duplicate:
    base_offset: int
    last_offset: int


@dataclass(slots=True)
class _Entry:
    epoch: int
    batches: deque[tuple[int, int, int, int]] = field(default_factory=lambda: deque(maxlen=KEEP_BATCHES))
    # each: (first sequence, last sequence, base offset, last offset)


def _last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    return (base_sequence + last_offset_delta) % (2**31)


class ProducerState:
    def __init__(self) -> None:
        self._producers: dict[int, _Entry] = {}

    def check(self, producer_id: int, producer_epoch: int, base_sequence: int) -> Duplicate | int | None:
        """None: append it. Duplicate: already in the log at those offsets. int: a Kafka error code."""
        if producer_id == NO_PRODUCER_ID or base_sequence == NO_SEQUENCE:
            return None
        entry = self._producers.get(producer_id)
        if entry is None:
            return None  # unknown producer (new, or state lost): accept, as Kafka >= 2.5 mostly does
        if producer_epoch < entry.epoch:
            return INVALID_PRODUCER_EPOCH
        if producer_epoch > entry.epoch:
            return None  # a bumped epoch starts afresh
        for first, _last, base_offset, last_offset in entry.batches:
            if first == base_sequence:
                return Duplicate(base_offset, last_offset)
        if entry.batches:
            expected = (entry.batches[-1][1] + 1) % (2**31)
            if base_sequence != expected:
                return OUT_OF_ORDER_SEQUENCE_NUMBER
        return None

    def record(
        self,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        last_offset_delta: int,
        base_offset: int,
    ) -> None:
        if producer_id == NO_PRODUCER_ID or base_sequence == NO_SEQUENCE:
            return
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            entry = self._producers[producer_id] = _Entry(producer_epoch)
        entry.batches.append(
            (
                base_sequence,
                _last_sequence(base_sequence, last_offset_delta),
                base_offset,
                base_offset + last_offset_delta,
            )
        )

    def active(self) -> list[tuple[int, int, int]]:
        """(producer id, epoch, last sequence or -1) of every producer known here (DescribeProducers)."""
        return [
            (pid, entry.epoch, entry.batches[-1][1] if entry.batches else NO_SEQUENCE)
            for pid, entry in sorted(self._producers.items())
        ]

    def fence(self, producer_id: int, producer_epoch: int) -> None:
        """A transaction marker of this epoch: earlier epochs of the producer are fenced from now on."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            self._producers[producer_id] = _Entry(producer_epoch)

    def truncate(self, end_offset: int) -> None:
        """Forget batches at or above `end_offset` (after a log truncation)."""
        for pid in list(self._producers):
            entry = self._producers[pid]
            kept = [b for b in entry.batches if b[3] < end_offset]
            if len(kept) != len(entry.batches):
                entry.batches.clear()
                entry.batches.extend(kept)
            if not entry.batches:
                del self._producers[pid]
