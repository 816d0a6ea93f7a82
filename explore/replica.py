"""A simulated broker's replication, driving the broker's own core as broker.replica_manager and
broker.fetcher do: role changes, the leader's produce and fetch, the follower's fetch loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.follower import (
    Append,
    Backoff,
    FollowerAction,
    FollowerReplica,
    ListLeaderOffsets,
    RestartAt,
    Truncate,
)
from broker.kafka_errors import (
    FENCED_LEADER_EPOCH,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
)
from broker.partition_state import PartitionState, leadership_granted
from broker.replication import Action, HighWatermarkAdvanced, Role, RoleChange, WriteIsr, role_change
from explore.state import Parked, Pending, SimBroker, Waiter
from explore.world import CONNECT_REFUSED, World

TICK_MS = 200.0  # broker.app.TICK_SECONDS
RETRY_MS = 100.0  # broker.fetcher.RETRY_SECONDS


class Replica(World):
    # --- a broker: role changes (broker.replica_manager.ReplicaManager.apply_state) -----------
    def apply_state(self, b: SimBroker, state: PartitionState) -> None:
        old = b.state
        if old is not None and old.zk_version > state.zk_version:
            return  # a late notification
        state = leadership_granted(b.id, state, b.registered_zxid)
        b.state = state
        replica = b.replica
        change = role_change(b.id, old, state, replica.role)
        if change is RoleChange.BECOME_LEADER:
            self.stop_following(b)
            b.log.epochs.assign(state.leader_epoch, b.log.log_end_offset)
            actions = replica.become_leader(state, b.log.log_end_offset, self.clock(b))
            self.note(
                f"{b.name}: leader for epoch {state.leader_epoch}, LEO {b.log.log_end_offset}, HW {replica.high_watermark}"
            )
            self.run_actions(b, actions)
            b.tick_gen += 1
            self.broker_after(b, TICK_MS, self._tick, b, b.tick_gen)
        elif change is RoleChange.LEADER_UPDATE:
            self.run_actions(b, replica.state_changed(state))
        elif change is RoleChange.BECOME_FOLLOWER:
            self._fail_waiters(b, NOT_LEADER_OR_FOLLOWER)
            replica.become_follower(state)
            self.note(
                f"{b.name}: follower of {state.leader} for epoch {state.leader_epoch}, LEO {b.log.log_end_offset}, HW {replica.high_watermark}"
            )
            self.stop_following(b)
            if state.leader >= 0:
                self.start_following(b, state.leader, state.leader_epoch)
        elif change is RoleChange.FOLLOWER_UPDATE:
            replica.isr, replica.zk_version, replica.elr = state.isr, state.zk_version, state.elr
        self._wake_parked(b, all_of_them=True)

    def run_actions(self, b: SimBroker, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, HighWatermarkAdvanced):
                self._complete_waiters(b)
            elif isinstance(action, WriteIsr):
                self.write_isr(b, action)

    def _tick(self, b: SimBroker, gen: int) -> None:
        if gen != b.tick_gen or b.replica.role is not Role.LEADER:
            return
        self.run_actions(b, b.replica.on_tick(self.clock(b)))
        self.broker_after(b, TICK_MS, self._tick, b, gen)

    def checkpoint(self, b: SimBroker) -> None:
        b.hw_checkpoint = b.replica.high_watermark
        self.broker_after(b, self.settings.hw_checkpoint_interval_ms, self.checkpoint, b)

    # --- a leader: produce and fetch (broker.replica_manager) ---------------------------------
    def produce(self, b: SimBroker, value: int, respond: Callable[..., None]) -> None:
        s = self.settings
        replica = b.replica
        error = replica.admit_produce(s.acks, s.min_insync_replicas)
        if error != NONE:
            respond(error, -1)
            return
        offset = b.log.log_end_offset
        b.log.append([value], [replica.leader_epoch])
        self.run_actions(b, replica.on_local_append(b.log.log_end_offset))
        self._wake_parked(b)
        if s.acks != -1 or replica.acks_all_done(offset):
            respond(replica.produce_answer(s.acks, s.min_insync_replicas), offset)
            return
        waiter = Waiter(offset, respond, offset)
        b.waiters.append(waiter)

    def _complete_waiters(self, b: SimBroker) -> None:
        hw = b.replica.high_watermark
        if not b.waiters:
            return
        s = self.settings
        remaining = []
        for w in b.waiters:
            if w.last_offset < hw:
                w.reply(b.replica.produce_answer(s.acks, s.min_insync_replicas), w.base_offset)
            else:
                remaining.append(w)
        b.waiters = remaining

    def _fail_waiters(self, b: SimBroker, error: int) -> None:
        for w in b.waiters:
            w.reply(error, -1)
        b.waiters = []

    def _check_leader(self, b: SimBroker, current_epoch: int) -> int:
        replica = b.replica
        if replica.role is not Role.LEADER:
            return NOT_LEADER_OR_FOLLOWER
        if current_epoch < replica.leader_epoch:
            return FENCED_LEADER_EPOCH
        if current_epoch > replica.leader_epoch:
            return UNKNOWN_LEADER_EPOCH
        return NONE

    def serve_fetch(
        self, b: SimBroker, replica_id: int, current_epoch: int, offset: int, respond: Callable[..., None]
    ) -> None:
        error = self._check_leader(b, current_epoch)
        if error != NONE:
            respond(error, [], [], -1, offset)
            return
        self.run_actions(b, b.replica.on_follower_fetch(replica_id, offset, self.clock(b)))
        if offset > b.log.log_end_offset:
            respond(OFFSET_OUT_OF_RANGE, [], [], -1, offset)
            return
        if offset < b.log.log_end_offset:
            self._answer_fetch(b, offset, respond)
            return
        # long poll: until the log end passes the offset, the state changes, or the wait is over
        parked = Parked(replica_id, offset, lambda: self._answer_fetch(b, offset, respond))
        b.parked.append(parked)
        self.broker_after(b, self.settings.fetch_wait_max_ms, self._unpark, b, parked)

    def _answer_fetch(self, b: SimBroker, offset: int, respond: Callable[..., None]) -> None:
        if b.replica.role is not Role.LEADER:
            respond(NOT_LEADER_OR_FOLLOWER, [], [], -1, offset)
            return
        end = b.log.log_end_offset
        if offset > end:
            respond(OFFSET_OUT_OF_RANGE, [], [], -1, offset)
            return
        respond(NONE, b.log.values[offset:end], b.log.epochs_of[offset:end], b.replica.high_watermark, offset)

    def _unpark(self, b: SimBroker, parked: Parked) -> None:
        if not parked.done:
            parked.done = True
            b.parked.remove(parked)
            parked.respond()

    def _wake_parked(self, b: SimBroker, all_of_them: bool = False) -> None:
        if not b.parked:
            return
        end = b.log.log_end_offset
        still = []
        for parked in b.parked:
            if all_of_them or end > parked.fetch_offset:
                parked.done = True
                parked.respond()
            else:
                still.append(parked)
        b.parked = still

    def serve_epoch(
        self, b: SimBroker, current_epoch: int, requested: int, respond: Callable[..., None]
    ) -> None:
        error = self._check_leader(b, current_epoch)
        if error != NONE:
            respond(error, -1, -1)
            return
        epoch, end = b.log.epochs.end_offset_for(requested)
        respond(NONE, epoch, end)

    def serve_list_offsets(self, b: SimBroker, current_epoch: int, respond: Callable[..., None]) -> None:
        error = self._check_leader(b, current_epoch)
        respond(error, 0, b.log.log_end_offset)

    # --- a follower (broker.fetcher.LeaderFetcher) --------------------------------------------
    def stop_following(self, b: SimBroker) -> None:
        b.follower = None
        b.fetch_gen += 1

    def start_following(self, b: SimBroker, leader: int, epoch: int) -> None:
        b.fetch_gen += 1
        follower = b.follower = FollowerReplica(self.settings.truncation, leader, epoch)
        self.carry_out(b, follower.start(b.view), [], [])
        self.broker_after(b, 0.0, self._fetch_step, b, b.fetch_gen)

    def _fetch_step(self, b: SimBroker, gen: int) -> None:
        """One round of the fetch loop: ask the leader for its epoch's end, or fetch."""
        follower = b.follower
        if follower is None or gen != b.fetch_gen:
            return
        if follower.leader_id not in self.registered:
            self.broker_after(b, RETRY_MS, self._fetch_step, b, gen)  # no address for it
            return
        leader = self.brokers[follower.leader_id]
        epoch = follower.leader_epoch
        pending = Pending()
        answer_kind: Callable[..., bool]
        if follower.asks_epoch:
            answer_kind = self._epoch_answered
            requested = follower.epoch_request(b.view)
            self.request(
                b.name,
                leader,
                lambda respond: self.serve_epoch(leader, epoch, requested, respond),
                pending.answer,
                b,
            )
            timeout = 10_000.0
        else:
            answer_kind = self._fetch_answered
            offset = b.log.log_end_offset
            self.request(
                b.name,
                leader,
                lambda respond: self.serve_fetch(leader, b.id, epoch, offset, respond),
                pending.answer,
                b,
            )
            timeout = self.settings.fetch_wait_max_ms + 10_000.0

        def answered(*answer: Any) -> None:
            if gen != b.fetch_gen:
                return
            if answer[0] == CONNECT_REFUSED:
                self.broker_after(b, RETRY_MS, self._fetch_step, b, gen)
                return
            again = answer_kind(b, gen, *answer)
            self.broker_after(b, RETRY_MS if again else 0.0, self._fetch_step, b, gen)

        def timed_out() -> None:
            if gen == b.fetch_gen:
                self._fetch_step(b, gen)

        pending.on_answer, pending.on_timeout = answered, timed_out
        self._arm_watchdog(b, pending, timeout)

    def _arm_watchdog(self, b: SimBroker, pending: Pending, timeout: float) -> None:
        """The fetcher's request timeout, as one timer per broker (fewer events than one per request)."""
        b.pending, b.pending_deadline = pending, self.now + timeout
        if not b.watchdog_armed:
            b.watchdog_armed = True
            self.broker_after(b, timeout, self._watchdog, b)

    def _watchdog(self, b: SimBroker) -> None:
        pending = b.pending
        if pending is None or pending.done:
            b.watchdog_armed = False
            return
        if self.now >= b.pending_deadline:
            b.watchdog_armed = False
            pending.timeout()
            return
        self.broker_after(b, b.pending_deadline - self.now, self._watchdog, b)

    def _epoch_answered(self, b: SimBroker, gen: int, error: int, epoch: int, end: int) -> bool:
        follower = b.follower
        assert follower is not None
        self.carry_out(b, follower.on_epoch_answer(error, epoch, end, b.view), [], [])
        return follower.asks_epoch  # the fetcher pauses while no partition is ready to fetch

    def _fetch_answered(
        self, b: SimBroker, gen: int, error: int, values: list[int], epochs: list[int], hw: int, offset: int
    ) -> bool:
        follower = b.follower
        assert follower is not None
        actions = follower.on_fetch_answer(error, hw)
        if any(isinstance(a, ListLeaderOffsets) for a in actions):
            leader = self.brokers[follower.leader_id]
            epoch = follower.leader_epoch

            def listed(err: int, start: int = 0, end: int = 0) -> None:
                if gen != b.fetch_gen or b.follower is None or err != NONE:
                    return
                self.carry_out(b, b.follower.on_leader_offsets(start, end, b.view), [], [])

            self.request(
                b.name, leader, lambda respond: self.serve_list_offsets(leader, epoch, respond), listed, b
            )
        if any(isinstance(a, Append) for a in actions) and offset != b.log.log_end_offset:
            actions = follower.on_append_out_of_order(offset, hw, b.view) if values else []
        return self.carry_out(b, actions, values, epochs)

    def carry_out(
        self, b: SimBroker, actions: list[FollowerAction], values: list[int], epochs: list[int]
    ) -> bool:
        """The follower's actions on the log (broker.fetcher.LeaderFetcher._carry_out); True: back off."""
        backoff = False
        for action in actions:
            if isinstance(action, Truncate):
                before = b.log.log_end_offset
                b.log.truncate_to(action.offset)
                if action.forget_epochs_from:
                    b.log.epochs.truncate_from_end(action.offset)
                b.replica.on_truncated(b.log.log_end_offset)
                if b.log.log_end_offset < before:
                    self.note(f"{b.name}: truncated {before} -> {b.log.log_end_offset} ({action.reason})")
            elif isinstance(action, Append):
                if values:
                    b.log.append(values, epochs)
                    b.replica.log_end_offset = b.log.log_end_offset
                self.run_actions(b, b.replica.on_leader_high_watermark(action.leader_high_watermark))
            elif isinstance(action, RestartAt):
                b.log.truncate_to(0)
                b.replica.on_truncated(0)
            elif isinstance(action, Backoff):
                backoff = True
        return backoff
