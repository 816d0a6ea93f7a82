"""The leader epoch cache (KIP-101): where each leader epoch starts in this replica's log.

Semantics follow Kafka's LeaderEpochFileCache: entries are strictly increasing in both epoch and
start offset; `end_offset_for` answers OffsetForLeaderEpoch. Persisted to `leader-epoch-checkpoint`
on every change, atomically, as Kafka does.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from pathlib import Path

from broker.storage.checkpoints import read_entries, write_entries
from broker.storage.errors import CheckpointError

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
CHECKPOINT_NAME = "leader-epoch-checkpoint"


class LeaderEpochCache:
    """Epoch -> start offset, sorted; `log_end_offset` is asked when the latest epoch is queried."""

    def __init__(self, path: Path | None, log_end_offset: Callable[[], int], *, fsync: bool = True) -> None:
        """`path` None: kept in memory only (the simulator of strandline explore uses that).
        `fsync` False: the checkpoint is replaced without fsync (leader.epoch.checkpoint.fsync)."""
        self.path = Path(path) if path is not None else None
        self.fsync = fsync
        self._log_end_offset = log_end_offset
        self._epochs: list[int] = []
        self._starts: list[int] = []
        if self.path is None:
            return
        try:
            entries = read_entries(self.path, 2)
        except CheckpointError as exc:
            # Written atomically and fsynced, so this happens only when the fsync was left out and
            # the OS crashed (KAFKA-16541: an empty file), or someone else wrote it; recovery
            # re-derives the epochs from the batches past the recovery point only, as Kafka's does.
            log.warning("ignoring unreadable leader epoch checkpoint: %s", exc)
            entries = []
        for epoch, start in entries:
            self._assign(int(epoch), int(start))

    # -- queries ---------------------------------------------------------------------------------
    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start offset) pairs, oldest first."""
        return list(zip(self._epochs, self._starts, strict=True))

    def latest_epoch(self) -> int:
        """The latest epoch with an entry, or UNDEFINED_EPOCH (-1) when the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def end_offset_for(self, requested_epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch answer: (largest epoch <= requested, that epoch's end offset).

        The end offset is the start offset of the next higher epoch, or the log end offset when the
        requested epoch is the latest. (-1, -1) when the epoch is undefined or above every known
        epoch. Below the earliest known epoch Kafka (since KIP-279) answers (requested epoch, start
        offset of the earliest epoch), so the follower truncates to where this log's epochs begin.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, self._log_end_offset()
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # -- updates ---------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; a no-op for the latest epoch at a later offset."""
        if self._assign(epoch, start_offset):
            self._flush()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            removed.append((self._epochs.pop(), self._starts.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            log.warning(
                "%s: epoch entry (%d, %d) removed conflicting entries %s",
                self.path,
                epoch,
                start_offset,
                removed,
            )
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries whose start offset is >= end_offset (after the log was truncated there)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        while self._starts and self._starts[-1] >= end_offset:
            self._epochs.pop()
            self._starts.pop()
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before start_offset; the last of them is kept, moved to start_offset."""
        removed = 0
        while removed < len(self._starts) and self._starts[removed] <= start_offset:
            removed += 1
        if removed == 0:
            return
        epoch = self._epochs[removed - 1]
        del self._epochs[:removed]
        del self._starts[:removed]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._flush()

    def _flush(self) -> None:
        if self.path is not None:
            write_entries(self.path, self.entries(), fsync=self.fsync)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries()})"
