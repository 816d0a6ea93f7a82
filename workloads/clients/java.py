"""The Java client driver: Apache Kafka's own client (kafka-clients), in a JVM this process drives.

The clients live in a client host (`java_host`: one JVM per process, a thread per client in it,
`java_src/StrandlineClients.java`); the classes here are their controller-side handles, and they
are `base.Library` classes like the other drivers', so the workloads, the journal, the process
numbering and the drain are the same. A handle sends its operation as one request and waits for
the reply; this module maps the reply, the result or the Java exception (class, message, Kafka
error code), to the history's outcomes, the same way the Python drivers map theirs.

Error mapping for `send` (the history's rule: `fail` only when the write certainly did not happen):

| what happened | outcome |
|---|---|
| the callback has the record's metadata | `ok` with its offset |
| `send()` threw, or failed the record before it reached the producer's buffer (its callback ran inside `send()`: metadata not available within `max.block.ms`, a closed or fatally failed producer, a record too large) | `fail` |
| the callback has a definite broker error (`base.DEFINITE_PRODUCE_ERRORS`, by the exception's Kafka error code) and the producer does not retry (`retries = 0`) | `fail` |
| the same error when the producer retries (the callback reports only the last attempt, as librdkafka's report does) | `info` |
| anything else: TimeoutException (the batch expired in the buffer or in flight), NotLeaderOrFollowerException, NotEnoughReplicasAfterAppendException, OutOfOrderSequenceException, a lost connection, no reply within the wait (the test's `op_timeout`, or the delivery timeout + 5 s), the JVM gone | `info` |

Group members: a commit the coordinator refused (CommitFailedException, RebalanceInProgress,
IllegalGeneration, UnknownMemberId, StaleMemberEpoch under the consumer protocol) is `fail`; a
timeout or anything else `info`. The rebalance listener's calls (`onPartitionsRevoked`,
`onPartitionsAssigned`, `onPartitionsLost` as a revocation) come back with the poll or commit
during which they ran. Transactions: a commit that times out is asked again within the bound (Kafka
says a timed-out commitTransaction may be retried); any other error of a commit is answered with an
abort, and the transaction is `fail` only when that abort succeeds, else `info` (a fatal error:
the producer is replaced). Consumers: an exception from assign or poll is `ClientError(definite=False)`
(the position is no longer known), as in the other drivers.

Settings (Kafka's names; `java_client_properties` entries go over them, for every client): the
producer takes `acks`, `enable.idempotence`, `retries` from the test (the Java client's safe preset
where the test gives none: foundation.config.java_safe_preset), `delivery.timeout.ms` the delivery
bound, linger 2 ms, 5 requests in flight; consumers read from the earliest offset with automatic
commits off, at the workload's isolation level; group members use the test's `group_protocol`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kio.schema.errors import ErrorCode

from foundation.config import TestConfig, delivery_timeout_ms
from foundation.errors import BadInput
from workloads.clients import base
from workloads.clients.java_host import ClientHost, HostGone, HostTimeout, host_for
from workloads.clients.java_program import DEFAULT_VERSION, JavaProgram, Progress, prepare

log = logging.getLogger(__name__)

# How many records one KafkaConsumer.poll hands over (workloads.queue.MAX_POLL_RECORDS, and the
# drain's DRAIN_MAX_RECORDS); what a poll returns beyond what the workload asked for is kept by the
# program for the next poll.
MAX_POLL_RECORDS = 10
BULK_POLL_RECORDS = 1000
# Fetch ahead little per partition: an assign discards what was fetched ahead (1 MiB by default).
PREFETCH_BYTES = 64 * 1024
BULK_PREFETCH_BYTES = 1024 * 1024
# Beyond an operation's own bound, how long to wait for the program's reply (a loaded machine).
REPLY_SLACK_S = 5.0
CLOSE_TIMEOUT_MS = 2000
# Settings the driver owns: they make the client what the workload's journal describes.
OWNED = frozenset(
    {
        "bootstrap.servers",
        "key.serializer",
        "value.serializer",
        "key.deserializer",
        "value.deserializer",
        "group.id",
        "transactional.id",
    }
)
# Exceptions with which the coordinator refuses a commit: nothing was stored.
REFUSED_COMMIT_CLASSES = frozenset({"org.apache.kafka.clients.consumer.CommitFailedException"})
REFUSED_COMMIT_CODES = frozenset(
    int(code)
    for code in (
        ErrorCode.illegal_generation,
        ErrorCode.unknown_member_id,
        ErrorCode.rebalance_in_progress,
        ErrorCode.stale_member_epoch,
    )
)
TIMEOUT_CLASS = "org.apache.kafka.common.errors.TimeoutException"
CONFIG_CLASS = "org.apache.kafka.common.config.ConfigException"


_programs: dict[str, JavaProgram] = {}
_programs_lock = threading.Lock()


def version_of(config: TestConfig) -> str:
    return config.java_client_version or DEFAULT_VERSION


def program(version: str, progress: Progress | None = None) -> JavaProgram:
    """The compiled program for this kafka-clients version (fetched and compiled on first use)."""
    with _programs_lock:
        if version not in _programs:
            _programs[version] = prepare(version, progress=progress)
        return _programs[version]


def host(config: TestConfig) -> ClientHost:
    return host_for(program(version_of(config)))


def start(config: TestConfig) -> ClientHost:
    """The program ready and its JVM started and warmed up with the test's settings: bad settings
    and a missing JDK fail here, at once."""
    overrides(config)
    started = host(config)
    with _programs_lock:
        if config.java_client_properties in started.tried:
            return started
    warm_up(config, started)  # BadInput leaves them untried: the next start refuses them again
    with _programs_lock:
        started.tried.add(config.java_client_properties)
    return started


# Nothing listens there: a client made for it connects to nothing.
NOWHERE = ["127.0.0.1:9"]


def warm_up(config: TestConfig, started: ClientHost) -> None:
    """Make a producer and a consumer that reach nothing, poll once and close them: the JVM loads
    the client's classes now (a second of CPU), not while the test's first clients wait."""
    began = time.monotonic()
    made: list[_Remote] = []
    try:
        made.append(_Remote(started, "producer", producer_settings(config, NOWHERE)))
        made.append(consumer := _Remote(started, "consumer", consumer_settings(config, NOWHERE)))
        consumer.ask("assign", REPLY_SLACK_S * 2, partitions=[["warm-up", 0]], positions=[])
        consumer.ask("poll", REPLY_SLACK_S * 2, timeout_ms=0, max_records=1)
    except base.ClientError as e:
        if e.definite:  # the client refused its settings: the test's java_client_properties
            raise BadInput(
                f"config key 'java_client_properties': the Java client refused them: {e.error}"
            ) from None
        log.info("warming up the Java client failed: %s", e.error)  # only slower without it
    finally:
        for client in made:
            client.close()
    log.info("Java client warmed up in %.1f s", time.monotonic() - began)


def overrides(config: TestConfig) -> dict[str, str]:
    """`java_client_properties` as a dict; a setting the driver owns is BadInput."""
    result: dict[str, str] = {}
    for entry in config.java_client_properties:
        name, _, value = entry.partition("=")
        name = name.strip()
        if name in OWNED:
            raise BadInput(
                f"config key 'java_client_properties': {name} is set by the driver (the workload's"
                " journal depends on it)"
            )
        result[name] = value.strip()
    return result


def classify_send(reply: dict[str, Any], retries: int) -> base.SendOutcome:
    """The outcome of one send from the program's reply (see the module docstring)."""
    if reply.get("ok"):
        return base.SendOutcome("ok", offset=int(reply["offset"]))
    error = str(reply.get("error", "unknown error"))
    if reply.get("appended") is False:
        return base.SendOutcome("fail", error=error)
    if int(reply.get("code", -1)) in base.DEFINITE_PRODUCE_ERRORS and retries == 0:
        return base.SendOutcome("fail", error=error)
    return base.SendOutcome("info", error=error)


def commit_refused(reply: dict[str, Any]) -> bool:
    """Whether a failed commit's reply says the coordinator refused it (nothing was stored)."""
    return reply.get("class") in REFUSED_COMMIT_CLASSES or int(reply.get("code", -1)) in REFUSED_COMMIT_CODES


# --- settings ------------------------------------------------------------------------------------


def quiet(version: str) -> dict[str, str]:
    """Settings that keep a hundred clients cheap to make: no JMX metrics reporter (each client
    registers a hundred MBeans, under one lock: a hundred consumers took 18 s to make at load 30)
    and, from 3.7, no client metrics pushed to the broker (KIP-714). Each only for the releases
    that know it (an unknown setting makes the client warn)."""
    v = tuple(int(p) for p in version.split(".")[:2])
    settings = {"metric.reporters": ""}
    if (3, 4) <= v < (4, 0):
        settings["auto.include.jmx.reporter"] = "false"
    if v >= (3, 7):
        settings["enable.metrics.push"] = "false"
    return settings


def producer_settings(config: TestConfig, bootstrap: list[str]) -> dict[str, Any]:
    """The producer's Kafka properties from the test."""
    return {
        "bootstrap.servers": ",".join(bootstrap),
        "acks": config.acks,
        "enable.idempotence": str(config.idempotence).lower(),
        "retries": config.retries,
        "request.timeout.ms": config.request_timeout_ms,
        "delivery.timeout.ms": delivery_timeout_ms(config),
        "max.block.ms": config.request_timeout_ms,
        "linger.ms": 2,
        "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "metadata.max.age.ms": 10000,
        "max.in.flight.requests.per.connection": 5,
        **quiet(version_of(config)),
        **overrides(config),
    }


def txn_producer_settings(config: TestConfig, bootstrap: list[str], transactional_id: str) -> dict[str, Any]:
    settings = producer_settings(config, bootstrap)
    settings.update(
        {
            "transactional.id": transactional_id,
            "transaction.timeout.ms": config.transaction_timeout_ms,
            "enable.idempotence": "true",
            # initTransactions, commitTransaction and abortTransaction block for up to max.block.ms
            "max.block.ms": int(base.end_bound_s(config) * 1000),
        }
    )
    settings.update(overrides(config))
    return settings


def consumer_settings(
    config: TestConfig, bootstrap: list[str], bulk: bool = False, read_committed: bool = False
) -> dict[str, Any]:
    """An assigning consumer's Kafka properties (no group: it never commits)."""
    return {
        "bootstrap.servers": ",".join(bootstrap),
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
        "isolation.level": base.isolation_level(read_committed),
        "fetch.max.wait.ms": 100,
        "max.poll.records": BULK_POLL_RECORDS if bulk else MAX_POLL_RECORDS,
        "max.partition.fetch.bytes": BULK_PREFETCH_BYTES if bulk else PREFETCH_BYTES,
        "request.timeout.ms": max(config.request_timeout_ms, 1000),
        "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "metadata.max.age.ms": 10000,
        **quiet(version_of(config)),
        **overrides(config),
    }


def group_consumer_settings(config: TestConfig, bootstrap: list[str], group: str) -> dict[str, Any]:
    """A group member's Kafka properties: the classic protocol's membership timeouts
    (base.MEMBERSHIP), or KIP-848's consumer protocol, whose session and heartbeat the broker sets."""
    settings = consumer_settings(config, bootstrap)
    settings["group.id"] = group
    if config.group_protocol == "consumer":
        settings["group.protocol"] = "consumer"
        settings["max.poll.interval.ms"] = base.MEMBERSHIP["max.poll.interval.ms"]
    else:
        settings.update(base.MEMBERSHIP)
    settings.update(overrides(config))
    return settings


# --- the handles ---------------------------------------------------------------------------------


def _lost(e: Exception) -> str:
    """The error of an operation whose reply never came."""
    return f"crashed: {e}" if isinstance(e, HostGone) else str(e)


class _Remote:
    """One client in the host: made on construction, asked by number, closed without waiting."""

    def __init__(self, host: ClientHost, kind: str, props: dict[str, Any], transactional: bool = False,
                 timeout_s: float = 30.0):  # fmt: skip
        self.host = host
        self.number = host.new_client_number()
        request = {"op": kind, "client": self.number, "props": {k: str(v) for k, v in props.items()}}
        if transactional:
            request["transactional"] = True
        try:
            reply = host.call(request, timeout_s + REPLY_SLACK_S)
        except (HostGone, HostTimeout) as e:
            self.close()
            raise base.ClientError(_lost(e)) from None
        if not reply.get("ok"):  # a client refusing its settings never existed
            refused = reply.get("class") == CONFIG_CLASS or "ConfigException" in str(reply.get("error"))
            raise base.ClientError(str(reply.get("error")), definite=refused)

    def call(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        """The reply to one operation; raises HostGone or HostTimeout when none comes."""
        return self.host.call({"op": op, "client": self.number, **fields}, timeout_s)

    def ask(self, op: str, timeout_s: float, **fields: Any) -> dict[str, Any]:
        """The `ok` reply to one operation; `ClientError(definite=False)` otherwise."""
        try:
            reply = self.call(op, timeout_s, **fields)
        except (HostGone, HostTimeout) as e:
            raise base.ClientError(_lost(e)) from None
        if not reply.get("ok"):
            raise base.ClientError(str(reply.get("error")))
        return reply

    def close(self) -> None:
        self.host.ask({"op": "close", "client": self.number, "timeout_ms": CLOSE_TIMEOUT_MS})


def _pairs(partitions: list[base.TopicPartition]) -> list[list[Any]]:
    return [[t, p] for t, p in partitions]


def _offsets(triples: list[list[Any]]) -> dict[base.TopicPartition, int]:
    return {(str(t), int(p)): int(o) for t, p, o in triples}


def _records(reply: dict[str, Any]) -> list[base.Record]:
    return [
        base.Record(str(t), int(p), int(o), None if v is None else base.decode_value(v.encode()))
        for t, p, o, v in reply.get("records", ())
    ]


class JavaProducer:
    def __init__(self, config: TestConfig, bootstrap: list[str]):
        settings = producer_settings(config, bootstrap)
        self._retries = int(settings["retries"])
        self._wait_s = base.send_wait_s(float(settings["delivery.timeout.ms"]), config.op_timeout)
        self._op_timeout = config.op_timeout
        self._client = _Remote(host(config), "producer", settings)

    def send(self, topic: str, partition: int, value: int) -> base.SendOutcome:
        try:
            reply = self._client.call(
                "send", self._wait_s, topic=topic, partition=partition, value=str(value)
            )
        except HostTimeout:
            if self._wait_s == self._op_timeout:
                return base.SendOutcome("info", error=base.op_timeout_error(self._op_timeout))
            return base.SendOutcome("info", error="no acknowledgement within the delivery timeout and 5 s")
        except HostGone as e:
            return base.SendOutcome("info", error=_lost(e))
        return classify_send(reply, self._retries)

    def close(self) -> None:
        self._client.close()


class JavaTxnProducer(JavaProducer):
    """One transactional producer (its own transactional.id); `TxnProducer` of workloads.clients.base."""

    def __init__(self, config: TestConfig, bootstrap: list[str], transactional_id: str):
        settings = txn_producer_settings(config, bootstrap, transactional_id)
        self._retries = int(settings["retries"])
        self._wait_s = base.send_wait_s(float(settings["delivery.timeout.ms"]), config.op_timeout)
        self._op_timeout = config.op_timeout
        self._end_s = base.end_bound_s(config)
        # the creation runs initTransactions, bounded by max.block.ms
        self._client = _Remote(host(config), "producer", settings, transactional=True, timeout_s=self._end_s)

    def begin(self) -> None:
        self._client.ask("begin", REPLY_SLACK_S * 2)

    def _end(self, commit: bool) -> tuple[base.OutcomeType, str | None]:
        def attempt(left: float) -> tuple[base.OutcomeType, str | None] | None:
            try:
                reply = self._client.call("commit_txn" if commit else "abort_txn", left + REPLY_SLACK_S)
            except (HostGone, HostTimeout) as e:
                return "info", _lost(e)
            if reply.get("ok"):
                return ("ok" if commit else "fail"), None
            error = str(reply.get("error"))
            if reply.get("class") == TIMEOUT_CLASS:
                return None  # the same call again: Kafka's producer allows it after a timeout
            if not commit:
                return "info", error  # the abort failed: the producer is unusable
            outcome, abort_error = self._end(commit=False)
            return outcome, f"{error}; aborted" if outcome == "fail" else f"{error}; the abort: {abort_error}"

        return base.end_within(self._end_s, commit, attempt)

    def commit(self) -> tuple[base.OutcomeType, str | None]:
        return self._end(commit=True)

    def abort(self) -> tuple[base.OutcomeType, str | None]:
        return self._end(commit=False)


def _ends(
    client: _Remote, partitions: list[base.TopicPartition], timeout_s: float
) -> dict[base.TopicPartition, int]:
    reply = client.ask(
        "end_offsets",
        timeout_s + REPLY_SLACK_S,
        partitions=_pairs(partitions),
        timeout_ms=int(timeout_s * 1000),
    )
    return _offsets(reply["ends"])


class JavaConsumer(base.ConsumerEnds):
    def __init__(
        self, config: TestConfig, bootstrap: list[str], bulk: bool = False, read_committed: bool = False
    ):
        self._host = host(config)
        self._poll_slack_s = config.request_timeout_ms / 1000 + REPLY_SLACK_S
        super().__init__(
            read_committed,
            _Remote(self._host, "consumer", consumer_settings(config, bootstrap, bulk, read_committed)),
            _ends,
            lambda: _Remote(self._host, "consumer", consumer_settings(config, bootstrap)),
        )

    def assign(
        self, partitions: list[base.TopicPartition], positions: dict[base.TopicPartition, int] | None
    ) -> None:
        at = [[t, p, o] for (t, p), o in sorted((positions or {}).items())]
        self._consumer.ask("assign", REPLY_SLACK_S * 2, partitions=_pairs(partitions), positions=at)

    def poll(self, timeout_s: float, max_records: int) -> list[base.Record]:
        reply = self._consumer.ask(
            "poll", timeout_s + self._poll_slack_s, timeout_ms=int(timeout_s * 1000), max_records=max_records
        )
        return _records(reply)

    def positions(self) -> dict[base.TopicPartition, int]:
        try:
            reply = self._consumer.ask("positions", 1 + REPLY_SLACK_S, timeout_ms=1000)
        except base.ClientError as e:
            log.debug("positions unknown: %s", e.error)
            return {}
        return _offsets(reply["positions"])


class JavaGroupConsumer(base.RebalanceRecorder):
    def __init__(self, config: TestConfig, bootstrap: list[str], group: str):
        super().__init__()
        self._client = _Remote(host(config), "consumer", group_consumer_settings(config, bootstrap, group))
        self._poll_slack_s = config.request_timeout_ms / 1000 + REPLY_SLACK_S
        self._commit_timeout_ms = 2 * max(config.request_timeout_ms, 1000)

    def _heard(self, reply: dict[str, Any]) -> dict[str, Any]:
        for event in reply.get("rebalances", ()):
            partitions = tuple(sorted((str(t), int(p)) for t, p in event["partitions"]))
            self._events.append(base.RebalanceEvent(event["kind"], partitions))
        return reply

    def subscribe(self, topics: list[str]) -> None:
        self._client.ask("subscribe", REPLY_SLACK_S * 2, topics=list(topics))

    def poll(self, timeout_s: float, max_records: int) -> list[base.Record]:
        try:
            reply = self._client.call(
                "poll",
                timeout_s + self._poll_slack_s,
                timeout_ms=int(timeout_s * 1000),
                max_records=max_records,
            )
        except (HostGone, HostTimeout) as e:
            raise base.ClientError(_lost(e)) from None
        if not self._heard(reply).get("ok"):
            raise base.ClientError(str(reply.get("error")))
        return _records(reply)

    def consumed_positions(self) -> dict[base.TopicPartition, int]:
        try:
            reply = self._client.call("positions", REPLY_SLACK_S * 2, timeout_ms=0)
        except (HostGone, HostTimeout) as e:
            log.debug("consumed positions unknown: %s", e)
            return {}
        return _offsets(self._heard(reply).get("positions", []))

    def commit(self, offsets: dict[base.TopicPartition, int]) -> None:
        triples = [[t, p, o] for (t, p), o in sorted(offsets.items())]
        try:
            reply = self._client.call(
                "commit",
                self._commit_timeout_ms / 1000 + REPLY_SLACK_S,
                offsets=triples,
                timeout_ms=self._commit_timeout_ms,
            )
        except (HostGone, HostTimeout) as e:
            raise base.ClientError(_lost(e)) from None
        if not self._heard(reply).get("ok"):
            raise base.ClientError(str(reply.get("error")), definite=commit_refused(reply))

    def close(self) -> None:
        self._client.close()


LIBRARY = base.Library("java", JavaProducer, JavaConsumer, JavaGroupConsumer, JavaTxnProducer)
