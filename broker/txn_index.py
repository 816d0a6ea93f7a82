"""What one partition knows of transactions: the open ones, the aborted ones, the last stable offset.

Pure: fed each appended batch (header, offset, and for a marker its type) in log order, as the
leader appends, a follower replicates, or a restarted broker scans its log. A producer's first
transactional batch opens its transaction at that offset; its marker closes it. The last stable
offset (LSO) is the high watermark or the first offset of the oldest open transaction, whichever
is lower: a read_committed consumer reads only below it. Aborted transactions are remembered as
(producer id, first offset, marker offset), for Fetch's aborted-transactions list (Kafka's
aborted transaction index), so clients drop the aborted records themselves.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import NamedTuple

from broker.storage.control import ABORT


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the abort marker's offset


@dataclass(slots=True)
class TxnIndex:
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset
    aborted: list[AbortedTxn] = field(default_factory=list)  # by marker offset

    def on_batch(self, producer_id: int, base_offset: int, transactional: bool, marker: int | None) -> None:
        """One appended batch; `marker` is ABORT/COMMIT for a control batch, else None."""
        if not transactional or producer_id < 0:
            return
        if marker is None:
            self.open.setdefault(producer_id, base_offset)
            return
        first = self.open.pop(producer_id, None)
        if marker == ABORT and first is not None:
            self.aborted.append(AbortedTxn(producer_id, first, base_offset))

    def last_stable_offset(self, high_watermark: int) -> int:
        if not self.open:
            return high_watermark
        return min(high_watermark, min(self.open.values()))

    def aborted_between(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold records in [fetch_offset, upper)."""
        start = bisect_left(self.aborted, fetch_offset, key=lambda a: a.last_offset)
        return [a for a in self.aborted[start:] if a.first_offset < upper]

    def clear(self) -> None:
        self.open.clear()
        self.aborted.clear()
