"""The final drain: after the faults are healed, read every partition up to its high watermark.

A fresh client process assigns every partition from the beginning and polls until each partition
has been read up to its end offset as the cluster reports it (ListOffsets latest, i.e. the high
watermark; asked until two answers agree, and asked again once reached, in case late retries moved
it). Under the txn workload the drain reads committed records: its end is each partition's last
stable offset, and it first waits (up to the transaction timeout and some) until no transaction is
open, so that every transaction's outcome is in the log; a partition whose last stable offset stays
below the high watermark (a transaction that never ends) is named in `unsettled`. The drain is journaled as ordinary assign/poll operations, its assigns marked `final: true`
(what its processes read is each partition's final log). If a client errors, the process is
replaced (a new number) and resumes at the positions already read. A reader that reads nothing for
two of its request timeouts while behind is replaced the same way by one whose request timeout is
twice as long (up to a minute): a system that serves a whole log from object storage (tansu, reading
an S3 bucket) answers the drain's first fetch of everything in more than the run's
5 s, and a client then times the fetch out, reconnects and asks again, forever. If the time bound passes first,
the result says so (`complete=False` and why): the checker must then say `unknown`, never `valid`.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from foundation.config import TestConfig
from history.processes import process_numbers
from history.writer import HistoryWriter
from workloads.clients import make_driver
from workloads.clients.base import ClientError, Consumer, TopicPartition, describe, records_json
from workloads.generator import topic_partitions
from workloads.kinds import workload_of
from workloads.workload import Workload

log = logging.getLogger(__name__)

DRAIN_POLL_TIMEOUT_S = 0.5
DRAIN_MAX_RECORDS = 1000
STABLE_GAP_S = 0.2
# How long past the transaction timeout the drain waits for open transactions to be aborted.
SETTLE_SLACK_S = 15.0
# A reader that read nothing for this many request timeouts while behind is replaced by a patient one
# (twice the request timeout, at most PATIENT_MAX_MS).
STALL_TIMEOUTS = 2
PATIENT_MAX_MS = 60_000


@dataclass
class DrainResult:
    """Whether every partition was read to its high watermark; `per_partition` keys are `topic/p`."""

    complete: bool
    per_partition: dict[str, dict[str, Any]] = field(default_factory=dict)
    reason: str = ""
    seconds: float = 0.0
    records: int = 0
    processes: list[int] = field(default_factory=list)
    # txn workload: partitions whose last stable offset stayed below the high watermark (a
    # transaction that never ended holds read_committed readers back): {"t0/1": {lso, hw}}
    unsettled: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")


def _key(tp: TopicPartition) -> str:
    return f"{tp[0]}/{tp[1]}"


class _Drainer:
    def __init__(
        self,
        config: TestConfig,
        bootstrap: list[str],
        history: HistoryWriter,
        deadline: float,
        read_committed: bool,
    ):
        self.config = config
        self.bootstrap = bootstrap
        self.read_committed = read_committed
        self.driver = make_driver(config, bootstrap, read_committed=read_committed)
        self.history = history
        self.deadline = deadline
        self.numbers = process_numbers(history)
        self.partitions = topic_partitions(config.topics, config.partitions)
        self.read_up_to: dict[TopicPartition, int] = {}
        self.records = 0
        self.processes: list[int] = []
        self.consumer: Consumer | None = None
        self.process = -1
        self.last_error = ""
        # When the reader last read a record, or was opened (time.monotonic()).
        self.progressed = time.monotonic()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _crash(self, error: str) -> None:
        self.last_error = error
        if self.consumer is not None:
            self.consumer.close()
        self.consumer = None

    def _open(self) -> bool:
        """A fresh process with a consumer assigned to every partition; False if not possible yet."""
        try:
            consumer = self.driver.consumer(bulk=True)
        except Exception as e:
            self.last_error = describe(e)
            return False
        self.process = self.numbers.next()
        self.processes.append(self.process)
        positions = {tp: o for tp, o in self.read_up_to.items() if o > 0}
        invoke: dict[str, Any] = {
            "process": self.process,
            "type": "invoke",
            "f": "assign",
            "partitions": [[t, p] for t, p in self.partitions],
            "seek": "position" if positions else "beginning",
            # The drain's reads are the partitions' final logs (the group-skip rule reads them).
            "final": True,
        }
        if positions:
            invoke["positions"] = [[t, p, o] for (t, p), o in sorted(positions.items())]
        self.history.append(invoke)
        try:
            consumer.assign(self.partitions, positions)
        except Exception as e:
            error = e.error if isinstance(e, ClientError) else describe(e)
            self.history.append({**invoke, "type": "info", "error": error})
            consumer.close()
            self.last_error = error
            return False
        self.history.append({**invoke, "type": "ok"})
        self.consumer = consumer
        self.progressed = time.monotonic()
        return True

    def end_offsets(self) -> dict[TopicPartition, int] | None:
        """End offsets once two answers in a row agree, or None when the deadline passes first."""
        previous: dict[TopicPartition, int] | None = None
        while self.remaining() > 0:
            if self.consumer is None and not self._open():
                time.sleep(min(0.5, max(self.remaining(), 0)))
                continue
            assert self.consumer is not None
            try:
                current = self.consumer.end_offsets(
                    self.partitions, timeout_s=max(1.0, min(5.0, self.remaining()))
                )
            except ClientError as e:
                self.last_error = e.error
                previous = None
                time.sleep(min(0.5, max(self.remaining(), 0)))
                continue
            if set(current) != set(self.partitions):
                self.last_error = "end offsets missing for some partitions"
                previous = None
            elif current == previous:
                return current
            else:
                previous = current
            time.sleep(min(STABLE_GAP_S, max(self.remaining(), 0)))
        return None

    def settle(self, bound_s: float) -> dict[TopicPartition, tuple[int, int]]:
        """Wait (at most `bound_s`) until no transaction is open: each partition's last stable
        offset reaches its high watermark. Returns the partitions still short of it, (lso, hw)."""
        deadline = min(self.deadline, time.monotonic() + bound_s)
        short: dict[TopicPartition, tuple[int, int]] = {}
        while time.monotonic() < deadline:
            if self.consumer is None and not self._open():
                time.sleep(min(0.5, max(self.remaining(), 0)))
                continue
            assert self.consumer is not None
            timeout = max(1.0, min(5.0, deadline - time.monotonic()))
            try:
                stable = self.consumer.end_offsets(self.partitions, timeout_s=timeout)
                high = self.consumer.high_watermarks(self.partitions, timeout_s=timeout)
            except ClientError as e:
                self.last_error = e.error
                time.sleep(min(0.5, max(self.remaining(), 0)))
                continue
            short = {
                tp: (stable[tp], high[tp])
                for tp in self.partitions
                if tp in stable and tp in high and stable[tp] < high[tp]
            }
            if not short and set(stable) == set(self.partitions):
                return {}
            time.sleep(0.5)
        return short

    def poll_once(self) -> None:
        assert self.consumer is not None
        invoke = {"process": self.process, "type": "invoke", "f": "poll"}
        self.history.append(invoke)
        try:
            records = self.consumer.poll(DRAIN_POLL_TIMEOUT_S, DRAIN_MAX_RECORDS)
        except Exception as e:
            error = e.error if isinstance(e, ClientError) else describe(e)
            self.history.append({**invoke, "type": "info", "error": error})
            self._crash(error)
            return
        self.history.append({**invoke, "type": "ok", "records": records_json(records)})
        self.records += len(records)
        if records:
            self.progressed = time.monotonic()
        for r in records:
            tp = (r.topic, r.partition)
            self.read_up_to[tp] = max(self.read_up_to.get(tp, 0), r.offset + 1)
        # Offsets may have gaps (e.g. control records in real Kafka); the client's position knows.
        for tp, position in self.consumer.positions().items():
            self.read_up_to[tp] = max(self.read_up_to.get(tp, 0), position)

    def stalled(self) -> bool:
        """The reader read nothing for STALL_TIMEOUTS of its request timeouts (and may be more patient)."""
        timeout_ms = max(self.config.request_timeout_ms, 1000)
        quiet_s = time.monotonic() - self.progressed
        return (
            self.consumer is not None
            and timeout_ms < PATIENT_MAX_MS
            and quiet_s > STALL_TIMEOUTS * timeout_ms / 1000
        )

    def be_patient(self) -> None:
        """Replace the reader by one whose request timeout is twice as long; it resumes where this one was."""
        quiet_s = time.monotonic() - self.progressed
        timeout_ms = min(2 * max(self.config.request_timeout_ms, 1000), PATIENT_MAX_MS)
        log.warning(
            "final drain: nothing read in %.0f s while behind; reading on with a %d ms request timeout",
            quiet_s,
            timeout_ms,
        )
        self.config = replace(self.config, request_timeout_ms=timeout_ms)
        self.close()
        self.driver = make_driver(self.config, self.bootstrap, read_committed=self.read_committed)
        self.last_error = f"nothing read in {quiet_s:.0f} s; the request timeout raised to {timeout_ms} ms"

    def behind(self, targets: dict[TopicPartition, int]) -> list[TopicPartition]:
        return [tp for tp in self.partitions if self.read_up_to.get(tp, 0) < targets[tp]]

    def close(self) -> None:
        if self.consumer is not None:
            self.consumer.close()
            self.consumer = None


def final_drain(
    config: TestConfig,
    bootstrap: list[str],
    history: HistoryWriter,
    timeout: float,
    *,
    path: str | Path | None = None,
    workload: Workload | None = None,
) -> DrainResult:
    """Read every partition to its high watermark within `timeout` seconds; write `path` if given.

    `workload`: the test's (default: the one its config names, `workloads.kinds`)."""
    workload = workload if workload is not None else workload_of(config)
    started = time.monotonic()
    drainer = _Drainer(config, bootstrap, history, started + timeout, workload.reads_committed)
    targets: dict[TopicPartition, int] | None = None
    complete = False
    reason = ""
    unsettled: dict[TopicPartition, tuple[int, int]] = {}
    try:
        if workload.reads_committed:
            # A transaction a crashed client left open ends at its timeout (the coordinator aborts
            # it); read_committed reads stop below it until then.
            unsettled = drainer.settle(config.transaction_timeout_ms / 1000 + SETTLE_SLACK_S)
            if unsettled:
                log.warning("final drain: transactions still open on %s", sorted(unsettled))
        targets = drainer.end_offsets()
        while targets is not None and drainer.remaining() > 0:
            if drainer.behind(targets):
                if drainer.consumer is None and not drainer._open():
                    time.sleep(min(0.5, max(drainer.remaining(), 0)))
                    continue
                if drainer.stalled():
                    drainer.be_patient()
                    continue
                drainer.poll_once()
                continue
            # Reached: confirm the high watermarks did not move meanwhile.
            again = drainer.end_offsets()
            if again is None:
                break
            if again == targets:
                complete = True
                break
            targets = again  # moved (late retries), or even went back (a truncation): follow it
    finally:
        drainer.close()
    if not complete:
        if targets is None:
            reason = f"high watermarks unknown within {timeout:g} s"
        else:
            late = ", ".join(
                f"{_key(tp)} read to {drainer.read_up_to.get(tp, 0)} of {targets[tp]}"
                for tp in drainer.behind(targets)
            )
            reason = f"time bound of {timeout:g} s passed" + (
                f"; not read to the high watermark: {late}" if late else ""
            )
        if drainer.last_error:
            reason += f" (last error: {drainer.last_error})"
    per_partition = {
        _key(tp): {
            "high_watermark": None if targets is None else targets[tp],
            "read_to": drainer.read_up_to.get(tp, 0),
        }
        for tp in drainer.partitions
    }
    result = DrainResult(
        complete=complete,
        per_partition=per_partition,
        reason=reason,
        seconds=round(time.monotonic() - started, 3),
        records=drainer.records,
        processes=drainer.processes,
        unsettled={_key(tp): {"lso": lso, "hw": hw} for tp, (lso, hw) in sorted(unsettled.items())},
    )
    if path is not None:
        result.write(path)
    log.info("final drain: complete=%s %s", complete, reason)
    return result
