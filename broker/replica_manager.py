"""The adapter between the replication state machine, the partition logs and the asyncio world.

One `Partition` per replica this broker holds: its PartitionLog (broker.storage), its
PartitionReplica (broker.replication, sans-IO), its producer de-duplication state, and the
futures of requests waiting on it (acks=all produces waiting for the HW, long-polling fetches).
The ReplicaManager applies partition states learnt from the metadata layer, runs the actions the
state machine returns, checkpoints high watermarks, and serves produce/fetch at partition level.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.background import BackgroundTasks
from broker.config import BrokerConfig
from broker.delayed import ByteMarks, DelayedFetch
from broker.kafka_errors import (
    CORRUPT_MESSAGE,
    FENCED_LEADER_EPOCH,
    KAFKA_STORAGE_ERROR,
    MESSAGE_TOO_LARGE,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    REQUEST_TIMED_OUT,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from broker.partition_state import PartitionState
from broker.producer_state import Duplicate, ProducerState
from broker.replication import (
    Action,
    HighWatermarkAdvanced,
    PartitionReplica,
    Role,
    RoleChange,
    WriteIsr,
    role_change,
)
from broker.storage import (
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    InvalidRecordError,
    OffsetCheckpoint,
    OffsetOutOfRangeError,
    PartitionLog,
    StorageError,
    parse_batches,
    parse_partition_dir,
)
from broker.storage.batches import BatchHeader
from broker.storage.control import build_marker, marker_type
from broker.txn_index import TxnIndex

log = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
DEBUG_REPLICA_ID = -2


def monotonic_ms() -> float:
    """The broker's clock for replication (injected, so a test or the simulator can set it)."""
    return time.monotonic() * 1000.0


@dataclass(slots=True)
class ProduceResult:
    error: int
    base_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class _AckWaiter:
    last_offset: int
    future: asyncio.Future[int]


@dataclass(eq=False)
class ParkedFetch:
    """A long-polling fetch waiting on partitions: the decision (sans-IO) and the future to wake."""

    delayed: DelayedFetch
    follower: bool
    future: asyncio.Future[None]
    partitions: list[Partition]

    def wake(self) -> None:
        if not self.future.done():
            self.future.set_result(None)


def _wake_parked(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _resolve(future: asyncio.Future[int], value: int) -> None:
    if not future.done():
        future.set_result(value)


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    log: PartitionLog
    replica: PartitionReplica
    producers: ProducerState = field(default_factory=ProducerState)
    txns: TxnIndex = field(default_factory=TxnIndex)  # open and aborted transactions, the LSO
    state: PartitionState | None = None
    ack_waiters: list[_AckWaiter] = field(default_factory=list)
    # long-polling fetches: a follower's completes when the log end passes its fetch offset,
    # a consumer's when the HW does (and enough bytes lie below it); see broker.delayed
    follower_fetches: set[ParkedFetch] = field(default_factory=set)
    consumer_fetches: set[ParkedFetch] = field(default_factory=set)
    byte_marks: ByteMarks = field(default_factory=ByteMarks)

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.index)

    def wake_readers(self) -> None:
        """Complete every long-polling fetch: role, epoch or log changed under it."""
        for parked in (*self.follower_fetches, *self.consumer_fetches):
            parked.delayed.on_state_change()
            parked.wake()

    def high_watermark_advanced(self) -> None:
        """Complete the consumer fetches the new HW gives enough to read."""
        if self.consumer_fetches:
            self._progress(self.consumer_fetches, self.replica.high_watermark)

    def log_end_advanced(self) -> None:
        """Complete the follower fetches the new log end gives enough to read."""
        if self.follower_fetches:
            self._progress(self.follower_fetches, self.log.log_end_offset)

    def _progress(self, parked_fetches: set[ParkedFetch], end: int) -> None:
        key = self.key
        for parked in parked_fetches:
            delayed = parked.delayed
            offset = delayed.offsets.get(key, end)
            size = self.byte_marks.bytes_between(offset, end) if delayed.min_bytes > 1 else None
            if delayed.on_progress(key, end, size):
                parked.wake()

    def last_stable_offset(self) -> int:
        return self.txns.last_stable_offset(self.replica.high_watermark)

    def observe(self, data: bytes | memoryview, headers: list[BatchHeader], base_offset: int | None) -> None:
        """Learn producer sequences and transactions from appended batches (`data` holds them in
        order); `base_offset` is where the first one landed, None when the headers carry it."""
        position = 0
        offset = base_offset or 0
        for h in headers:
            if base_offset is None:
                offset = h.base_offset
            marker = None
            if h.is_control:
                marker = marker_type(data[position : position + h.size], h)
                self.producers.fence(h.producer_id, h.producer_epoch)
            else:
                self.producers.record(
                    h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta, offset
                )
            self.txns.on_batch(h.producer_id, offset, h.is_transactional, marker)
            position += h.size
            offset += h.last_offset_delta + 1

    def rebuild_producer_state(self) -> None:
        """Scan the log (no CRC: recovery checked it) to learn producer sequences and transactions."""
        self.producers = ProducerState()
        self.txns.clear()
        offset = self.log.log_start_offset
        end = self.log.log_end_offset
        while offset < end:
            try:
                data = self.log.read(offset, 4 * 1024 * 1024)
            except OffsetOutOfRangeError:
                break
            if not data:
                break
            headers = parse_batches(data, check_crc=False, allow_partial_tail=True)
            if not headers:
                break
            self.observe(memoryview(data), headers, None)
            offset = headers[-1].last_offset + 1


IsrWriter = Callable[[str, int, WriteIsr], Awaitable[int | None]]
StateListener = Callable[[Partition, PartitionState, bool], None]


class ReplicaManager:
    """All replicas on this broker; the only place that touches PartitionLogs."""

    def __init__(self, config: BrokerConfig, clock: Callable[[], float] = monotonic_ms) -> None:
        self.config = config
        self.clock = clock  # milliseconds, monotonic
        self.broker_id = config.broker_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.isr_writer: IsrWriter | None = None
        # called as listener(partition, new_state, became_follower) so the fetcher can follow
        self.follower_listener: StateListener | None = None
        self._hw_checkpoint: dict[Path, dict[tuple[str, int], int]] = {}
        self._recovery_checkpoint: dict[Path, dict[tuple[str, int], int]] = {}
        self._tasks = BackgroundTasks()
        self._dir_of: dict[tuple[str, int], Path] = {}

    # --- loading --------------------------------------------------------------------------------
    def load_logs(self) -> None:
        """Open (and so recover) every partition directory; restore HWs from the checkpoint."""
        for log_dir in self.config.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            try:
                checkpoint = OffsetCheckpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT).read()
            except StorageError as exc:
                log.warning("ignoring unreadable HW checkpoint in %s: %s", log_dir, exc)
                checkpoint = {}
            try:
                recovery_points = OffsetCheckpoint(log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).read()
            except StorageError as exc:
                log.warning("ignoring unreadable recovery point checkpoint in %s: %s", log_dir, exc)
                recovery_points = {}
            for child in sorted(log_dir.iterdir()):
                parsed = parse_partition_dir(child.name) if child.is_dir() else None
                if parsed is None:
                    continue
                partition = self._open(log_dir, *parsed, recovery_points.get(parsed, 0))
                hw = checkpoint.get(parsed, 0)
                partition.replica.high_watermark = min(hw, partition.log.log_end_offset)
                log.info(
                    "loaded %s-%d: log [%d, %d), checkpointed HW %d",
                    parsed[0],
                    parsed[1],
                    partition.log.log_start_offset,
                    partition.log.log_end_offset,
                    hw,
                )

    def _open(self, log_dir: Path, topic: str, index: int, recovery_point: int = 0) -> Partition:
        plog = PartitionLog(
            log_dir / f"{topic}-{index}",
            flush_interval_messages=self.config.flush_interval_messages,
            segment_bytes=self.config.segment_bytes,
            recovery_point=recovery_point,
            epoch_checkpoint_fsync=self.config.leader_epoch_checkpoint_fsync,
        )
        replica = PartitionReplica(
            self.broker_id, self.config.replica_lag_time_max_ms, elr_min_insync=self.config.elr_min_insync
        )
        replica.log_end_offset = plog.log_end_offset
        partition = Partition(topic, index, plog, replica)
        partition.rebuild_producer_state()
        self.partitions[(topic, index)] = partition
        self._dir_of[(topic, index)] = log_dir
        return partition

    def get_or_create(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            partition = self._open(self.config.log_dirs[0], topic, index)
        return partition

    # --- partition state from the metadata layer -----------------------------------------------
    def apply_state(self, topic: str, index: int, state: PartitionState) -> None:
        """A (possibly) new leader, epoch or ISR for a partition this broker replicates."""
        if self.broker_id not in state.replicas:
            return
        partition = self.get_or_create(topic, index)
        old = partition.state
        partition.state = state
        replica = partition.replica
        replica.removing = state.removing
        change = role_change(self.broker_id, old, state, replica.role)
        if change is RoleChange.BECOME_LEADER:
            if replica.role is Role.FOLLOWER and self.follower_listener:
                self.follower_listener(partition, state, False)
            partition.log.epochs.assign(state.leader_epoch, partition.log.log_end_offset)
            actions = replica.become_leader(state, partition.log.log_end_offset, self.clock())
            log.info(
                "%s-%d: leader for epoch %d, isr %s, LEO %d, HW %d",
                topic,
                index,
                state.leader_epoch,
                list(state.isr),
                partition.log.log_end_offset,
                replica.high_watermark,
            )
            self._run(partition, actions)
        elif change is RoleChange.LEADER_UPDATE:
            self._run(partition, replica.state_changed(state))
        elif change is RoleChange.BECOME_FOLLOWER:
            # Not the leader: any waiting acks=all producer learns it lost leadership.
            was_leader = replica.role is Role.LEADER
            self._fail_ack_waiters(partition, NOT_LEADER_OR_FOLLOWER)
            replica.become_follower(state)
            log.info(
                "%s-%d: follower of %d for epoch %d (was leader: %s), LEO %d, HW %d",
                topic,
                index,
                state.leader,
                state.leader_epoch,
                was_leader,
                partition.log.log_end_offset,
                replica.high_watermark,
            )
            if self.follower_listener:
                self.follower_listener(partition, state, True)
        else:
            replica.isr, replica.zk_version = state.isr, state.zk_version
        partition.wake_readers()

    def remove_replica(self, topic: str, index: int, reason: str) -> None:
        """Stop replicating a partition this broker no longer holds a replica of and delete its log
        (Kafka's StopReplica with delete=true, sent to the removed replicas of a reassignment)."""
        partition = self.partitions.pop((topic, index), None)
        if partition is None:
            return
        log.warning("%s-%d: deleting this broker's replica (%s)", topic, index, reason)
        self._fail_ack_waiters(partition, NOT_LEADER_OR_FOLLOWER)
        if self.follower_listener and partition.state is not None:
            self.follower_listener(partition, partition.state, False)  # leaves every fetcher
        gone = PartitionState(
            leader=-1, leader_epoch=partition.replica.leader_epoch, isr=(), zk_version=-1, replicas=()
        )
        partition.replica.become_follower(gone)  # of no leader, in no ISR
        partition.wake_readers()
        self._dir_of.pop((topic, index), None)
        try:
            partition.log.delete()
        except OSError:
            log.exception("deleting the log of %s-%d", topic, index)

    # --- the state machine's actions ------------------------------------------------------------
    def _run(self, partition: Partition, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, HighWatermarkAdvanced):
                self._complete_acks(partition)
                partition.high_watermark_advanced()
            elif isinstance(action, WriteIsr):
                log.info(
                    "%s-%d: ISR change %s -> %s (%s)",
                    partition.topic,
                    partition.index,
                    list(partition.replica.isr),
                    list(action.state.isr),
                    action.reason,
                )
                self._tasks.spawn(self._write_isr(partition, action))

    async def _write_isr(self, partition: Partition, action: WriteIsr) -> None:
        new_version = None
        if self.isr_writer is not None:
            try:
                new_version = await self.isr_writer(partition.topic, partition.index, action)
            except Exception:
                log.exception("ISR write for %s-%d failed", partition.topic, partition.index)
        partition.state, actions = partition.replica.on_isr_written(
            partition.state, action.state, new_version
        )
        self._run(partition, actions)

    def _complete_acks(self, partition: Partition) -> None:
        hw = partition.replica.high_watermark
        if not partition.ack_waiters:
            return
        remaining = []
        for waiter in partition.ack_waiters:
            if waiter.last_offset < hw:
                if not waiter.future.done():
                    waiter.future.set_result(NONE)
            else:
                remaining.append(waiter)
        partition.ack_waiters = remaining

    def _fail_ack_waiters(self, partition: Partition, error: int) -> None:
        for waiter in partition.ack_waiters:
            if not waiter.future.done():
                waiter.future.set_result(error)
        partition.ack_waiters = []

    def tick(self) -> None:
        """Timer: ISR shrink checks on every led partition."""
        now = self.clock()
        for partition in self.partitions.values():
            if partition.replica.role is Role.LEADER:
                self._run(partition, partition.replica.on_tick(now))

    # --- produce --------------------------------------------------------------------------------
    async def produce(
        self, topic: str, index: int, records: bytes | None, acks: int, timeout_ms: int
    ) -> ProduceResult:
        partition = self.partitions.get((topic, index))
        if partition is None or partition.state is None:
            return ProduceResult(UNKNOWN_TOPIC_OR_PARTITION if partition is None else NOT_LEADER_OR_FOLLOWER)
        replica = partition.replica
        min_insync = self.config.min_insync_replicas
        admission = replica.admit_produce(acks, min_insync)
        if admission in (NONE, NOT_ENOUGH_REPLICAS) and not records:
            return ProduceResult(CORRUPT_MESSAGE)
        if admission != NONE or records is None:
            return ProduceResult(admission)
        try:
            headers = parse_batches(records, check_crc=False)
        except InvalidRecordError:
            return ProduceResult(CORRUPT_MESSAGE)
        if not headers:
            return ProduceResult(CORRUPT_MESSAGE)
        if any(h.size > self.config.message_max_bytes for h in headers):
            return ProduceResult(MESSAGE_TOO_LARGE)
        first = headers[0]
        verdict = partition.producers.check(first.producer_id, first.producer_epoch, first.base_sequence)
        if isinstance(verdict, Duplicate):
            base, last = verdict.base_offset, verdict.last_offset
        elif verdict is not None:
            return ProduceResult(verdict)
        else:
            try:
                base, last = partition.log.append_as_leader(records, replica.leader_epoch)
            except InvalidRecordError:
                return ProduceResult(CORRUPT_MESSAGE)
            except OSError:
                log.exception("append to %s-%d failed", topic, index)
                return ProduceResult(KAFKA_STORAGE_ERROR)
            partition.observe(memoryview(records), headers, base)
            partition.byte_marks.appended(partition.log.log_end_offset, len(records))
            self._run(partition, replica.on_local_append(partition.log.log_end_offset))
            partition.log_end_advanced()
        result = ProduceResult(NONE, base, partition.log.log_start_offset)
        if acks != -1 or replica.acks_all_done(last):
            result.error = replica.produce_answer(acks, min_insync)
            return result
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        partition.ack_waiters.append(_AckWaiter(last, future))
        # a timer rather than asyncio.wait_for: no task per produce on the hot path
        timer = loop.call_later(max(timeout_ms, 1) / 1000.0, _resolve, future, REQUEST_TIMED_OUT)
        try:
            error = await future
        finally:
            timer.cancel()
        if error == REQUEST_TIMED_OUT:
            return ProduceResult(REQUEST_TIMED_OUT)
        result.error = replica.produce_answer(acks, min_insync) if error == NONE else error
        return result

    async def write_marker(
        self,
        topic: str,
        index: int,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        timeout_ms: int,
    ) -> int:
        """Append a transaction marker as the leader (acks=all); Kafka's error code, NONE when replicated."""
        marker = build_marker(producer_id, producer_epoch, commit, coordinator_epoch)
        return (await self.produce(topic, index, marker, -1, timeout_ms)).error

    # --- reads ----------------------------------------------------------------------------------
    def check_leader(self, topic: str, index: int, current_leader_epoch: int) -> tuple[Partition | None, int]:
        partition = self.partitions.get((topic, index))
        if partition is None:
            return None, UNKNOWN_TOPIC_OR_PARTITION
        replica = partition.replica
        if replica.role is not Role.LEADER:
            return partition, NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch >= 0:
            if current_leader_epoch < replica.leader_epoch:
                return partition, FENCED_LEADER_EPOCH
            if current_leader_epoch > replica.leader_epoch:
                return partition, UNKNOWN_LEADER_EPOCH
        return partition, NONE

    def read(
        self,
        partition: Partition,
        replica_id: int,
        fetch_offset: int,
        max_bytes: int,
        read_committed: bool = False,
    ) -> tuple[int, bytes]:
        """(error, records) for a consumer (below the HW, or the LSO when it reads committed)
        or a follower (below the LEO)."""
        plog = partition.log
        if replica_id >= 0:
            self._run(partition, partition.replica.on_follower_fetch(replica_id, fetch_offset, self.clock()))
            limit = None
        elif read_committed:
            limit = partition.last_stable_offset()
        else:
            limit = partition.replica.high_watermark
        if fetch_offset < plog.log_start_offset or fetch_offset > plog.log_end_offset:
            return OFFSET_OUT_OF_RANGE, b""
        if limit is not None and fetch_offset >= limit:
            return NONE, b""
        try:
            return NONE, plog.read(fetch_offset, max_bytes, limit)
        except OffsetOutOfRangeError:
            return OFFSET_OUT_OF_RANGE, b""

    def park_fetch(
        self,
        watched: list[tuple[Partition, int, int]],
        follower: bool,
        min_bytes: int,
        max_wait_s: float,
    ) -> ParkedFetch:
        """Park a fetch on its partitions (partition, fetch offset, bytes already found) until
        enough data is readable, their state changes or `max_wait_s` passes; `unpark` after."""
        loop = asyncio.get_running_loop()
        delayed = DelayedFetch(min_bytes, {p.key: offset for p, offset, _ in watched})
        for p, _, found in watched:
            delayed.on_found(p.key, found)
        parked = ParkedFetch(delayed, follower, loop.create_future(), [p for p, _, _ in watched])
        for p in parked.partitions:
            (p.follower_fetches if follower else p.consumer_fetches).add(parked)
        timer = loop.call_later(max_wait_s, _wake_parked, parked.future)
        parked.future.add_done_callback(lambda _f: timer.cancel())
        return parked

    @staticmethod
    def unpark(parked: ParkedFetch) -> None:
        for p in parked.partitions:
            p.follower_fetches.discard(parked)
            p.consumer_fetches.discard(parked)
        parked.wake()

    # --- follower side --------------------------------------------------------------------------
    def follower_append(self, partition: Partition, records: bytes, leader_hw: int) -> None:
        if records:
            before = partition.log.log_end_offset
            partition.log.append_as_follower(records)
            if partition.log.log_end_offset != before:
                partition.byte_marks.appended(partition.log.log_end_offset, len(records))
                partition.observe(
                    memoryview(records),
                    parse_batches(records, check_crc=False, allow_partial_tail=True),
                    None,
                )
            partition.replica.log_end_offset = partition.log.log_end_offset
        self._run(partition, partition.replica.on_leader_high_watermark(leader_hw))

    def truncate(self, partition: Partition, offset: int, reason: str) -> None:
        before = partition.log.log_end_offset
        if offset < before:
            log.warning(
                "%s-%d: truncating from %d to %d (%s)",
                partition.topic,
                partition.index,
                before,
                offset,
                reason,
            )
            partition.log.truncate_to(offset)
            if partition.txns.open or partition.txns.aborted:
                partition.rebuild_producer_state()  # transactions may have lost batches or markers
            else:
                partition.producers.truncate(partition.log.log_end_offset)
            partition.byte_marks.truncated(partition.log.log_end_offset)
        partition.replica.on_truncated(partition.log.log_end_offset)

    # --- checkpoints ----------------------------------------------------------------------------
    def checkpoint_high_watermarks(self) -> None:
        by_dir: dict[Path, dict[tuple[str, int], int]] = {}
        recovery: dict[Path, dict[tuple[str, int], int]] = {}
        for key, partition in self.partitions.items():
            directory = self._dir_of[key]
            by_dir.setdefault(directory, {})[key] = partition.replica.high_watermark
            recovery.setdefault(directory, {})[key] = partition.log.recovery_point
        for directory, offsets in by_dir.items():
            if self._hw_checkpoint.get(directory) != offsets:
                OffsetCheckpoint(directory / REPLICATION_OFFSET_CHECKPOINT).write(offsets)
                self._hw_checkpoint[directory] = offsets
            if self._recovery_checkpoint.get(directory) != recovery[directory]:
                OffsetCheckpoint(directory / RECOVERY_POINT_OFFSET_CHECKPOINT).write(recovery[directory])
                self._recovery_checkpoint[directory] = recovery[directory]

    def close(self) -> None:
        for partition in self.partitions.values():
            try:
                partition.log.close()
            except Exception:
                log.exception("closing %s", partition.log)
