"""The transactional workload (`--workload txn`): each operation is one Kafka transaction.

A slot runs one client process at a time, as in the queue workload (`workloads.queue.Slot`, whose
pacing, assigns and crash handling it keeps): a transactional producer with the slot's own
transactional.id (`strandline-txn-<slot>`, so a replacement fences the instance before it) and a
read_committed consumer of the partitions it assigned. A transaction's invocation lists its
micro-operations (`history.txn`); they run in order (a send waits for its acknowledgement, a poll
returns what the consumer has); then the transaction commits, or aborts when the generator chose
to (`abort_p`) or a micro-operation failed. Its completion repeats the list with what happened and
is `ok` (committed), `fail` (aborted, certainly) or `info` (unknown: the slot's clients are then
replaced under a new process number, Jepsen's rule).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from foundation.config import TestConfig
from history.journal import Journal
from history.txn import TXN
from workloads.clients.base import (
    ClientError,
    Driver,
    OutcomeType,
    Producer,
    TxnProducer,
    describe,
    records_json,
)
from workloads.generator import Op, SlotGenerator
from workloads.queue import MAX_POLL_RECORDS, POLL_TIMEOUT_S, Slot
from workloads.txn_generator import TxnSlotGenerator, txn_generators
from workloads.workload import Workload

log = logging.getLogger(__name__)


def transactional_id(slot: int) -> str:
    return f"strandline-txn-{slot}"


class TxnSlot(Slot):
    """One client slot of the transactional workload."""

    def __init__(self, gen: TxnSlotGenerator, driver: Driver, journal: Journal, rate: float):
        super().__init__(gen, driver, journal, rate, shared_producer=None)
        self.txn_producer: TxnProducer | None = None

    def _ensure_clients(self, op: Op, stop: threading.Event) -> bool:
        try:
            if op.kind == "txn" and self.txn_producer is None:
                self.txn_producer = self.driver.txn_producer(transactional_id(self.gen.slot))
            if op.kind in ("assign", "txn") and self.consumer is None:
                self.consumer = self.driver.consumer()
            return True
        except Exception as e:  # not journaled: no operation was invoked
            refused = isinstance(e, ClientError) and e.definite  # the library refused its settings
            log.log(
                logging.WARNING if refused else logging.INFO,
                "slot %d: cannot create a client: %s",
                self.gen.slot,
                e,
            )
            stop.wait(0.5)
            return False

    def execute(self, op: Op) -> None:
        if op.kind == TXN:
            self._txn(op)
        else:
            self._assign(op)

    def _txn(self, op: Op) -> None:
        assert self.txn_producer is not None and self.consumer is not None
        invoke: dict[str, Any] = {
            "process": self.process,
            "type": "invoke",
            "f": TXN,
            "mops": [dict(m) for m in op.mops],
            "abort": op.abort,
        }
        self.journal.invoke(invoke)
        started = time.monotonic()
        done = [dict(m) for m in op.mops]
        consumer_lost = False
        failure: str | None = None
        try:
            self.txn_producer.begin()
            for mop in done:
                failure, consumer_lost = self._mop(mop)
                if failure is not None:
                    break
        except ClientError as e:  # begin refused: nothing was written
            failure = e.error
        except Exception as e:  # a driver must not raise; if it does, abort what we can
            failure = describe(e)
        outcome: OutcomeType
        if failure is None and not op.abort:
            outcome, error = self.txn_producer.commit()
        else:
            outcome, error = self.txn_producer.abort()
            why = failure or "aborted as planned (abort_p)"
            error = why if outcome == "fail" else f"{why}; the abort: {error}"
        completion: dict[str, Any] = {**invoke, "type": outcome, "mops": done}
        if outcome != "ok":
            completion["error"] = error
        self.journal.complete(completion, time.monotonic() - started, records=_records(done))
        if outcome == "info":
            self._crash()
        elif consumer_lost:
            self._drop_consumer()

    def _mop(self, mop: dict[str, Any]) -> tuple[str | None, bool]:
        """Run one micro-operation, writing what happened into it; (failure, consumer lost)."""
        assert self.txn_producer is not None and self.consumer is not None
        if mop["f"] == "send":
            sent = self.txn_producer.send(mop["topic"], mop["partition"], mop["value"])
            if sent.type == "ok":
                mop["offset"] = sent.offset
                return None, False
            mop["error"] = sent.error
            return f"send of {mop['value']}: {sent.error}", False
        try:
            records = self.consumer.poll(POLL_TIMEOUT_S, MAX_POLL_RECORDS)
        except Exception as e:
            mop["error"] = e.error if isinstance(e, ClientError) else describe(e)
            return f"poll: {mop['error']}", True
        mop["records"] = records_json(records)
        self._note_read(records)
        return None, False

    def _drop_consumer(self) -> None:
        """The consumer's position is unknown after a failed poll: the next operation assigns anew."""
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None
        self.gen.crashed()

    def close(self) -> None:
        super().close()
        if self.txn_producer is not None:
            self.txn_producer.close()
            self.txn_producer = None


def _records(mops: list[dict[str, Any]]) -> int:
    return sum(len(m.get("records") or ()) for m in mops)


def generators(config: TestConfig) -> list[SlotGenerator]:
    """Each slot's stream of transactions (and the assigns its consumer needs)."""
    return list(
        txn_generators(config.seed, config.concurrency, config.topics, config.partitions, config.abort_p)
    )


def make_slot(
    config: TestConfig, gen: SlotGenerator, driver: Driver, journal: Journal, shared: Producer | None
) -> TxnSlot:
    """A transactional slot (its own transactional producer: `shared` is never given)."""
    assert isinstance(gen, TxnSlotGenerator)
    return TxnSlot(gen, driver, journal, config.rate)


WORKLOAD = Workload("txn", generators, make_slot, shares_producer=False, reads_committed=True)
