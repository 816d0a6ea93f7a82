"""Broker settings: a Java-style properties file with Kafka's key names, validated once at the edge."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker.errors import BadBrokerConfig

TRUNCATION_MODES = ("leader-epoch", "high-watermark", "leader-epoch-v0")
ELECTION_POLICIES = ("first-in-isr", "longest-log")
TRANSACTION_VERSIONS = ("1", "2")


def parse_properties(text: str) -> dict[str, str]:
    """Parse `key=value` / `key: value` lines; `#` and `!` start comments (no line continuations)."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            props[line] = ""
            continue
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


@dataclass(frozen=True)
class Listener:
    host: str
    port: int


def _parse_listener(key: str, value: str) -> Listener:
    first = value.split(",")[0].strip()
    if "://" in first:
        proto, _, rest = first.partition("://")
        if proto.upper() != "PLAINTEXT":
            raise BadBrokerConfig(f"{key}: only PLAINTEXT listeners are supported, got {proto!r}")
    else:
        rest = first
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        raise BadBrokerConfig(f"{key}: expected PLAINTEXT://host:port, got {value!r}")
    return Listener(host or "127.0.0.1", int(port))


@dataclass(frozen=True)
class BrokerConfig:
    """Every setting the broker reads; defaults are Kafka's (docs/broker-variants.md where Kafka has none)."""

    broker_id: int
    listener: Listener = field(default_factory=lambda: Listener("127.0.0.1", 9092))
    advertised: Listener | None = None
    log_dirs: tuple[Path, ...] = (Path("/tmp/strandline-broker-logs"),)
    zookeeper_connect: str | None = None
    zookeeper_session_timeout_ms: int = 6000
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election: bool = False
    eligible_leader_replicas: bool = False  # KIP-966 (eligible.leader.replicas.enable)
    isr_broker_epoch_check: bool = False  # KIP-903 (isr.broker.epoch.check.enable)
    truncation: str = "leader-epoch"
    election_policy: str = "first-in-isr"
    flush_interval_messages: int = 0  # 0 = never fsync on append
    segment_bytes: int = 64 * 1024 * 1024  # log.segment.bytes: a full segment is rolled (and fsynced)
    # KAFKA-16541: fsync the leader-epoch checkpoint when it is replaced (false: Kafka 3.7.0's
    # KAFKA-15046, whose rewrite on truncation skipped it, so an OS crash could lose the file)
    leader_epoch_checkpoint_fsync: bool = True
    hw_checkpoint_interval_ms: int = 5000
    replica_lag_time_max_ms: int = 10000
    replica_fetch_wait_max_ms: int = 500
    auto_create_topics: bool = False
    message_max_bytes: int = 1048588
    socket_request_max_bytes: int = 104857600
    # transactions (broker.transactions): 1 = Kafka before KIP-890 part 2, 2 = epoch bump per transaction
    transaction_version: int = 2
    transaction_max_timeout_ms: int = 900000
    transaction_abort_check_interval_ms: int = 10000
    transaction_state_replication_factor: int = 3
    # APIs (Kafka's names, e.g. InitProducerId) this broker leaves out, as a Kafka-compatible
    # system that lacks a feature does: not in ApiVersions, and a request for one closes the
    # connection. For trying how the harness reports what a system refuses.
    unsupported_apis: tuple[str, ...] = ()
    # APIs this broker offers in ApiVersions but refuses every request of with an authorization
    # error, as Kafka refuses a principal without the ACL (and Redpanda with idempotence off
    # refuses idempotent writes): today InitProducerId, answered CLUSTER_AUTHORIZATION_FAILED.
    denied_apis: tuple[str, ...] = ()

    @property
    def elr_min_insync(self) -> int:
        """min.insync.replicas when Eligible Leader Replicas are on (broker.eligible); 0: off."""
        return self.min_insync_replicas if self.eligible_leader_replicas else 0

    @property
    def advertised_listener(self) -> Listener:
        return self.advertised or self.listener

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> BrokerConfig:
        def names(key: str) -> tuple[str, ...]:
            return tuple(name.strip() for name in props.get(key, "").split(",") if name.strip())

        def integer(key: str, default: int, minimum: int = 0) -> int:
            raw = props.get(key)
            if raw is None or raw == "":
                return default
            try:
                value = int(raw)
            except ValueError:
                raise BadBrokerConfig(f"{key}: expected an integer, got {raw!r}") from None
            if value < minimum:
                raise BadBrokerConfig(f"{key}: must be >= {minimum}, got {value}")
            return value

        def boolean(key: str, default: bool) -> bool:
            raw = props.get(key)
            if raw is None or raw == "":
                return default
            if raw.lower() not in ("true", "false"):
                raise BadBrokerConfig(f"{key}: expected true or false, got {raw!r}")
            return raw.lower() == "true"

        def choice(key: str, default: str, options: tuple[str, ...]) -> str:
            raw = props.get(key, default) or default
            if raw not in options:
                raise BadBrokerConfig(f"{key}: expected one of {', '.join(options)}, got {raw!r}")
            return raw

        if "broker.id" not in props:
            raise BadBrokerConfig("broker.id: required")
        listener = _parse_listener("listeners", props.get("listeners") or "PLAINTEXT://127.0.0.1:9092")
        advertised = (
            _parse_listener("advertised.listeners", props["advertised.listeners"])
            if props.get("advertised.listeners")
            else None
        )
        dirs = props.get("log.dirs") or props.get("log.dir") or "/tmp/strandline-broker-logs"
        flush_raw = props.get("log.flush.interval.messages")
        flush = 0 if not flush_raw else integer("log.flush.interval.messages", 0, 1)
        if flush >= 2**62:  # Kafka's "never" is Long.MAX_VALUE
            flush = 0
        return cls(
            broker_id=integer("broker.id", 0, 0),
            listener=listener,
            advertised=advertised,
            log_dirs=tuple(Path(d.strip()) for d in dirs.split(",") if d.strip()),
            zookeeper_connect=props.get("zookeeper.connect") or None,
            zookeeper_session_timeout_ms=integer("zookeeper.session.timeout.ms", 6000, 100),
            num_partitions=integer("num.partitions", 1, 1),
            default_replication_factor=integer("default.replication.factor", 1, 1),
            min_insync_replicas=integer("min.insync.replicas", 1, 1),
            unclean_leader_election=boolean("unclean.leader.election.enable", False),
            eligible_leader_replicas=boolean("eligible.leader.replicas.enable", False),
            isr_broker_epoch_check=boolean("isr.broker.epoch.check.enable", False),
            truncation=choice("replication.truncation", "leader-epoch", TRUNCATION_MODES),
            election_policy=choice("leader.election.policy", "first-in-isr", ELECTION_POLICIES),
            flush_interval_messages=flush,
            segment_bytes=integer("log.segment.bytes", 64 * 1024 * 1024, 1024),
            leader_epoch_checkpoint_fsync=boolean("leader.epoch.checkpoint.fsync", True),
            hw_checkpoint_interval_ms=integer("replica.high.watermark.checkpoint.interval.ms", 5000, 1),
            replica_lag_time_max_ms=integer("replica.lag.time.max.ms", 10000, 1),
            replica_fetch_wait_max_ms=integer("replica.fetch.wait.max.ms", 500, 0),
            auto_create_topics=boolean("auto.create.topics.enable", False),
            message_max_bytes=integer("message.max.bytes", 1048588, 1),
            socket_request_max_bytes=integer("socket.request.max.bytes", 104857600, 1024),
            transaction_version=int(choice("transaction.version", "2", TRANSACTION_VERSIONS)),
            transaction_max_timeout_ms=integer("transaction.max.timeout.ms", 900000, 1),
            transaction_abort_check_interval_ms=integer(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, 1
            ),
            transaction_state_replication_factor=integer("transaction.state.log.replication.factor", 3, 1),
            unsupported_apis=names("unsupported.apis"),
            denied_apis=names("denied.apis"),
        )

    @classmethod
    def load(cls, path: Path) -> BrokerConfig:
        try:
            text = path.read_text()
        except OSError as exc:
            raise BadBrokerConfig(f"cannot read broker config {path}: {exc.strerror}") from None
        return cls.from_properties(parse_properties(text))


def render_properties(props: Mapping[str, object], header: str | None = None) -> str:
    """The inverse of parse_properties, for the tools that write broker configs (the one format).

    `header` becomes a leading comment line. A value holding a newline cannot be written.
    """
    lines = [f"# {header}"] if header else []
    for key, value in props.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        text = str(value)
        if "\n" in text:
            raise ValueError(f"property {key} holds a newline")
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"
