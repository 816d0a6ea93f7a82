"""The simulated replica log: records in memory, what was fsynced, and what a power loss drops.

One record per offset (a value and the leader epoch it was written in), the broker's own
LeaderEpochCache kept in memory, and the durable checkpoints (high watermark; the epoch
checkpoint is written atomically with fsync on every change, as broker.storage does).
"""

from __future__ import annotations

from broker.storage import LeaderEpochCache


class SimLog:
    __slots__ = ("values", "epochs_of", "flushed", "flush_interval", "epochs")

    def __init__(self, flush_interval: int | None) -> None:
        self.values: list[int] = []
        self.epochs_of: list[int] = []
        self.flushed = 0  # records below this survive a power loss
        self.flush_interval = flush_interval
        self.epochs = LeaderEpochCache(None, lambda: len(self.values))

    @property
    def log_end_offset(self) -> int:
        return len(self.values)

    def append(self, values: list[int], epochs: list[int]) -> None:
        start = len(self.values)
        self.values.extend(values)
        self.epochs_of.extend(epochs)
        last_epoch = self.epochs.latest_epoch()
        for i, epoch in enumerate(epochs):
            if epoch > last_epoch:
                self.epochs.assign(epoch, start + i)
                last_epoch = epoch
        if self.flush_interval is not None and len(self.values) - self.flushed >= self.flush_interval:
            self.flushed = len(self.values)

    def truncate_to(self, offset: int) -> None:
        if offset < len(self.values):
            del self.values[offset:]
            del self.epochs_of[offset:]
            self.flushed = min(self.flushed, offset)
            self.epochs.truncate_from_end(offset)

    def flush(self) -> None:
        self.flushed = len(self.values)

    def power_loss(self) -> int:
        """Drop what was never fsynced; how many records went."""
        lost = len(self.values) - self.flushed
        self.truncate_to(self.flushed)
        return lost

    def recover(self) -> None:
        """At start: epochs past the log end go (as PartitionLog's recovery does)."""
        self.epochs.truncate_from_end(len(self.values))
