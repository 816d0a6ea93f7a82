"""The simulated workload: producers sending unique values to the current leader, one at a time,
remembering what was acknowledged at which offset."""

from __future__ import annotations

from broker.kafka_errors import NONE, REQUEST_TIMED_OUT
from explore.state import Acked, Pending
from explore.world import CLIENT, World


class Workload(World):
    def start_producers(self) -> None:
        """The producers start a second after the cluster, a few ms apart."""
        for i in range(self.settings.producers):
            self.after(1000.0 + i * 7.0, self._produce_next, i)

    # --- the workload -------------------------------------------------------------------------
    def _produce_next(self, producer: int) -> None:
        if not self.producing:
            return
        value = self.next_value
        self.next_value += 1
        state = self.zk_state
        interval = self.settings.produce_interval_ms
        if state is None or state.leader < 0:
            self.after(interval, self._produce_next, producer)
            return
        self.sent += 1
        leader = self.brokers[state.leader]
        pending = Pending()

        def answered(error: int, offset: int = -1) -> None:
            if error == NONE:
                self.acked.append(Acked(value, offset, self.now))
            self.after(interval, self._produce_next, producer)

        pending.on_answer = answered
        pending.on_timeout = lambda: answered(REQUEST_TIMED_OUT)
        self.request(
            CLIENT, leader, lambda respond: self.produce(leader, value, respond), pending.answer, None
        )
        self.in_flight[producer] = (pending, self.now + self.settings.request_timeout_ms)
        if producer not in self._producer_watch:
            self._producer_watch.add(producer)
            self.after(self.settings.request_timeout_ms, self._producer_timeout, producer)

    def _producer_timeout(self, producer: int) -> None:
        pending, deadline = self.in_flight[producer]
        if pending.done:
            self._producer_watch.discard(producer)
        elif self.now >= deadline:
            self._producer_watch.discard(producer)
            pending.timeout()
        else:
            self.after(deadline - self.now, self._producer_timeout, producer)
