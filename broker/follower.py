"""The follower side of replication for one partition, sans-IO: events in, actions out.

It decides what a follower does; it never touches a socket, a file or a clock. The asyncio
fetcher (broker.fetcher) and the simulator (explore/) feed it the leader's answers and carry out
the actions it returns on their own logs. What it asks of the log is read through `FollowerLog`.

On becoming a follower a partition first truncates, by the configured protocol:
- `high-watermark` (pre-KIP-101): at once, to its own high watermark (after a restart that is
  the checkpointed, possibly stale, HW) — without asking anyone;
- `leader-epoch` (KIP-101): it asks the leader OffsetForLeaderEpoch for its latest epoch and
  truncates only what the leader does not have (several rounds when the epochs differ); a log
  with records but no epochs (its checkpoint lost, KAFKA-16541) falls back to its high watermark,
  as Kafka's fetcher does.
Then it fetches from its log end offset, appends what comes back and takes the leader's HW. A fetch
offset outside the leader's log (OFFSET_OUT_OF_RANGE) makes it ask the leader for its log start and
end: past the end, a leader-epoch follower truncates by epoch again and a high-watermark follower
to the leader's end; before the start, the log restarts empty at the leader's start.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from broker.kafka_errors import NONE, OFFSET_OUT_OF_RANGE

UNDEFINED_EPOCH = -1
TRUNCATIONS = ("leader-epoch", "high-watermark", "leader-epoch-v0")


class FollowerLog(Protocol):
    """What the follower's decisions read from its own replica (queries only)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def latest_epoch(self) -> int: ...

    def end_offset_for(self, epoch: int) -> tuple[int, int]: ...


class _Epochs(Protocol):
    def latest_epoch(self) -> int: ...

    def end_offset_for(self, epoch: int) -> tuple[int, int]: ...


class _Log(Protocol):
    @property
    def log_end_offset(self) -> int: ...

    @property
    def epochs(self) -> _Epochs: ...


class _Replica(Protocol):
    @property
    def high_watermark(self) -> int: ...


class HoldsReplica(Protocol):
    """What holds a replica: a broker's partition (broker.replica_manager), a simulated broker."""

    @property
    def log(self) -> _Log: ...

    @property
    def replica(self) -> _Replica: ...


class ReplicaView:
    """A replica as the follower's decisions read it (`FollowerLog`), through what holds it, afresh
    each time: the broker's fetcher and the simulator read their replicas the same way."""

    __slots__ = ("holder",)

    def __init__(self, holder: HoldsReplica) -> None:
        self.holder = holder

    @property
    def log_end_offset(self) -> int:
        return self.holder.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.holder.replica.high_watermark

    def latest_epoch(self) -> int:
        return self.holder.log.epochs.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.holder.log.epochs.end_offset_for(epoch)


class Phase(Enum):
    ASK_EPOCH = "ask-epoch"  # must ask the leader OffsetForLeaderEpoch before fetching
    FETCH = "fetch"


@dataclass(frozen=True, slots=True)
class Truncate:
    """Cut the log back to `offset` (a no-op at or past its end)."""

    offset: int
    reason: str
    forget_epochs_from: bool = False  # also drop epoch entries starting at or past `offset`


@dataclass(frozen=True, slots=True)
class RestartAt:
    """Our log ends before the leader's starts: drop it and start empty at `offset`."""

    offset: int


@dataclass(frozen=True, slots=True)
class Append:
    """Append the fetched records, then take the leader's high watermark."""

    leader_high_watermark: int


@dataclass(frozen=True, slots=True)
class ListLeaderOffsets:
    """Ask the leader for its log start and end (ListOffsets earliest and latest)."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Wait a little before the next request to this leader."""


FollowerAction = Truncate | RestartAt | Append | ListLeaderOffsets | Backoff


@dataclass(frozen=True, slots=True)
class Truncation:
    offset: int | None  # None: keep the log as it is
    done: bool  # False: truncate, then ask the leader again for the new latest epoch
    reason: str


def _without_leader_epochs(log: FollowerLog) -> Truncation:
    """The leader has no epoch information: Kafka falls back to the high watermark."""
    if log.latest_epoch() == UNDEFINED_EPOCH:
        return Truncation(None, True, "no epochs here: nothing the leader could contradict")
    return Truncation(
        log.high_watermark, True, "leader has no epoch information: truncating to high watermark"
    )


def leader_epoch_truncation(leader_epoch: int, leader_end_offset: int, log: FollowerLog) -> Truncation:
    """A follower's truncation for the leader's OffsetForLeaderEpoch answer (KIP-101, KIP-279).

    The leader answered (largest epoch <= ours it knows, where that epoch ends in its log). If we
    know that epoch too, keep up to the smaller of both ends; if not, cut back to where our own
    largest epoch below it ends and ask again. Without epoch information, Kafka falls back to the HW.
    """
    if leader_end_offset < 0:
        return _without_leader_epochs(log)
    log_end_offset = log.log_end_offset
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True, "leader epoch undefined")
    own_epoch, own_end = log.end_offset_for(leader_epoch)
    if own_epoch == leader_epoch and own_end >= 0:
        return Truncation(
            min(leader_end_offset, own_end),
            True,
            f"leader's epoch {leader_epoch} ends at {leader_end_offset}",
        )
    if own_end >= 0:
        return Truncation(
            min(own_end, log_end_offset),
            False,
            f"no epoch {leader_epoch} here; own epoch {own_epoch} ends at {own_end}",
        )
    return Truncation(
        min(leader_end_offset, log_end_offset),
        True,
        f"leader's epoch {leader_epoch} ends at {leader_end_offset}",
    )


def v0_truncation(leader_epoch: int, leader_end_offset: int, log: FollowerLog) -> Truncation:
    """KIP-101 before KIP-279 (`leader-epoch-v0`, OffsetForLeaderEpoch v0, Kafka 0.11-1.1): the
    answer carries no epoch; the follower cuts back to the leader's end offset for its latest
    epoch in one round. When the leader never had that epoch, the offset it answers (where its
    next larger epoch starts) may lie above records of the follower's epoch that the leader does
    not hold: they stay, and the replicas diverge after fast leader changes (KIP-279's scenarios)."""
    if leader_end_offset < 0:
        return _without_leader_epochs(log)
    return Truncation(
        min(leader_end_offset, log.log_end_offset), True, f"leader's end offset {leader_end_offset} (v0)"
    )


class FollowerReplica:
    """One partition following one leader in one leader epoch."""

    __slots__ = ("truncation", "leader_id", "leader_epoch", "phase")

    def __init__(self, truncation: str, leader_id: int, leader_epoch: int) -> None:
        if truncation not in TRUNCATIONS:
            raise ValueError(f"unknown truncation {truncation!r}")
        self.truncation = truncation
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.phase = Phase.FETCH

    @property
    def asks_epoch(self) -> bool:
        return self.phase is Phase.ASK_EPOCH

    def start(self, log: FollowerLog) -> list[FollowerAction]:
        """We just became a follower of this leader and epoch."""
        if self.truncation == "high-watermark":
            self.phase = Phase.FETCH
            return [Truncate(log.high_watermark, "high-watermark truncation on becoming follower")]
        if log.latest_epoch() == UNDEFINED_EPOCH and log.log_end_offset > 0:
            # Records but no epochs to ask about (a lost leader-epoch checkpoint, KAFKA-16541):
            # Kafka's fetcher truncates such a partition to its high watermark.
            self.phase = Phase.FETCH
            return [
                Truncate(log.high_watermark, "no leader epochs in this log: truncating to the high watermark")
            ]
        self.phase = Phase.ASK_EPOCH
        return []

    def epoch_request(self, log: FollowerLog) -> int:
        """The epoch to ask the leader about (OffsetForLeaderEpoch): our latest."""
        return log.latest_epoch()

    def on_epoch_answer(
        self, error: int, leader_epoch: int, end_offset: int, log: FollowerLog
    ) -> list[FollowerAction]:
        """The leader's OffsetForLeaderEpoch answer; on an error we ask again later."""
        if self.phase is not Phase.ASK_EPOCH or error != NONE:
            return []
        truncation = leader_epoch_truncation if self.truncation == "leader-epoch" else v0_truncation
        decision = truncation(leader_epoch, end_offset, log)
        if decision.done:
            self.phase = Phase.FETCH
        if decision.offset is None:
            return []
        # An epoch that starts at the new log end holds no records but would be asked about again.
        return [Truncate(decision.offset, decision.reason, forget_epochs_from=not decision.done)]

    def on_fetch_answer(self, error: int, leader_high_watermark: int) -> list[FollowerAction]:
        """The partition's part of the leader's Fetch answer."""
        if self.phase is not Phase.FETCH:
            return []
        if error == NONE:
            return [Append(leader_high_watermark)]
        if error == OFFSET_OUT_OF_RANGE:
            return [ListLeaderOffsets()]
        return [Backoff()]

    def on_append_out_of_order(
        self, first_base_offset: int, leader_high_watermark: int, log: FollowerLog
    ) -> list[FollowerAction]:
        """The fetched records do not start at our log end: a batch that straddles it is the
        leader's version of what we hold partly; take it. Anything else is refused (empty)."""
        if first_base_offset < log.log_end_offset:
            return [
                Truncate(first_base_offset, "leader batch straddles log end"),
                Append(leader_high_watermark),
            ]
        return []

    def on_leader_offsets(self, leader_start: int, leader_end: int, log: FollowerLog) -> list[FollowerAction]:
        """The leader's log start and end, asked after OFFSET_OUT_OF_RANGE."""
        if log.log_end_offset > leader_end:
            if self.truncation != "high-watermark" and log.latest_epoch() != UNDEFINED_EPOCH:
                self.phase = Phase.ASK_EPOCH
                return []
            return [Truncate(leader_end, "fetch offset past the leader's log end")]
        if log.log_end_offset < leader_start:
            return [RestartAt(leader_start)]
        return []
