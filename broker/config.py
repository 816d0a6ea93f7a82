"""Broker settings: a Java-style properties file with Kafka's key names, validated once at the edge."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

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


def _integer(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise BadBrokerConfig(f"{key}: expected an integer, got {raw!r}") from None


def _boolean(key: str, raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise BadBrokerConfig(f"{key}: expected true or false, got {raw!r}")
    return raw.lower() == "true"


def _choice(key: str, raw: str, options: tuple[str, ...]) -> str:
    if raw not in options:
        raise BadBrokerConfig(f"{key}: expected one of {', '.join(options)}, got {raw!r}")
    return raw


def _text(key: str, raw: str) -> str:
    return raw


def _names(key: str, raw: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in raw.split(",") if name.strip())


def _paths(key: str, raw: str) -> tuple[Path, ...]:
    return tuple(Path(d.strip()) for d in raw.split(",") if d.strip())


@dataclass(frozen=True, slots=True)
class Setting:
    """How a BrokerConfig field is read from its Kafka property `key` (or `fallback`, Kafka's older
    key, when `key` is absent): by `parse`, else by the field's default — true or false for a
    bool, one of `options`, an integer of at least `minimum` (from `never` up: Kafka's "never",
    Long.MAX_VALUE, which reads as the broker's never, 0). Absent or empty: the default."""

    key: str
    minimum: int = 0
    options: tuple[str, ...] = ()
    parse: Callable[[str, str], Any] | None = None
    fallback: str | None = None
    never: int | None = None

    def read(self, props: Mapping[str, str], default: Any) -> Any:
        raw = props.get(self.key) or (props.get(self.fallback) if self.fallback else None)
        if not raw:
            return default
        if self.parse is not None:
            return self.parse(self.key, raw)
        if isinstance(default, bool):
            return _boolean(self.key, raw)
        if self.options:
            return type(default)(_choice(self.key, raw, self.options))
        value = _integer(self.key, raw)
        if value < self.minimum:
            raise BadBrokerConfig(f"{self.key}: must be >= {self.minimum}, got {value}")
        return 0 if self.never is not None and value >= self.never else value


SETTING = "kafka"  # where a BrokerConfig field keeps its Setting (dataclasses.field metadata)


def _kafka(key: str, default: Any, **how: Any) -> Any:
    """A field read from the Kafka property `key` (`Setting`), `default` when it is not set."""
    return field(default=default, metadata={SETTING: Setting(key, **how)})


@dataclass(frozen=True)
class BrokerConfig:
    """Every setting the broker reads, each with its Kafka key; defaults are Kafka's
    (docs/broker-variants.md where Kafka has none)."""

    broker_id: int  # broker.id, required (from_properties)
    listener: Listener = _kafka("listeners", Listener("127.0.0.1", 9092), parse=_parse_listener)
    advertised: Listener | None = _kafka("advertised.listeners", None, parse=_parse_listener)
    log_dirs: tuple[Path, ...] = _kafka(
        "log.dirs", (Path("/tmp/strandline-broker-logs"),), parse=_paths, fallback="log.dir"
    )
    zookeeper_connect: str | None = _kafka("zookeeper.connect", None, parse=_text)
    zookeeper_session_timeout_ms: int = _kafka("zookeeper.session.timeout.ms", 6000, minimum=100)
    num_partitions: int = _kafka("num.partitions", 1, minimum=1)
    default_replication_factor: int = _kafka("default.replication.factor", 1, minimum=1)
    min_insync_replicas: int = _kafka("min.insync.replicas", 1, minimum=1)
    unclean_leader_election: bool = _kafka("unclean.leader.election.enable", False)
    eligible_leader_replicas: bool = _kafka("eligible.leader.replicas.enable", False)  # KIP-966
    isr_broker_epoch_check: bool = _kafka("isr.broker.epoch.check.enable", False)  # KIP-903
    truncation: str = _kafka("replication.truncation", "leader-epoch", options=TRUNCATION_MODES)
    election_policy: str = _kafka("leader.election.policy", "first-in-isr", options=ELECTION_POLICIES)
    # 0 = never fsync on append
    flush_interval_messages: int = _kafka("log.flush.interval.messages", 0, minimum=1, never=2**62)
    # a full segment is rolled (and fsynced)
    segment_bytes: int = _kafka("log.segment.bytes", 64 * 1024 * 1024, minimum=1024)
    # KAFKA-16541: fsync the leader-epoch checkpoint when it is replaced (false: Kafka 3.7.0's
    # KAFKA-15046, whose rewrite on truncation skipped it, so an OS crash could lose the file)
    leader_epoch_checkpoint_fsync: bool = _kafka("leader.epoch.checkpoint.fsync", True)
    hw_checkpoint_interval_ms: int = _kafka("replica.high.watermark.checkpoint.interval.ms", 5000, minimum=1)
    replica_lag_time_max_ms: int = _kafka("replica.lag.time.max.ms", 10000, minimum=1)
    replica_fetch_wait_max_ms: int = _kafka("replica.fetch.wait.max.ms", 500, minimum=0)
    auto_create_topics: bool = _kafka("auto.create.topics.enable", False)
    message_max_bytes: int = _kafka("message.max.bytes", 1048588, minimum=1)
    socket_request_max_bytes: int = _kafka("socket.request.max.bytes", 104857600, minimum=1024)
    # transactions (broker.transactions): 1 = Kafka before KIP-890 part 2, 2 = epoch bump per transaction
    transaction_version: int = _kafka("transaction.version", 2, options=TRANSACTION_VERSIONS)
    transaction_max_timeout_ms: int = _kafka("transaction.max.timeout.ms", 900000, minimum=1)
    transaction_abort_check_interval_ms: int = _kafka(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, minimum=1
    )
    transaction_state_replication_factor: int = _kafka(
        "transaction.state.log.replication.factor", 3, minimum=1
    )
    # APIs (Kafka's names, e.g. InitProducerId) this broker leaves out, as a Kafka-compatible
    # system that lacks a feature does: not in ApiVersions, and a request for one closes the
    # connection. For trying how the harness reports what a system refuses.
    unsupported_apis: tuple[str, ...] = _kafka("unsupported.apis", (), parse=_names)
    # APIs this broker offers in ApiVersions but refuses every request of with an authorization
    # error, as Kafka refuses a principal without the ACL (and Redpanda with idempotence off
    # refuses idempotent writes): today InitProducerId, answered CLUSTER_AUTHORIZATION_FAILED.
    denied_apis: tuple[str, ...] = _kafka("denied.apis", (), parse=_names)
    # Not Kafka's: every broker answers Metadata as this one node id, alone, leader of every
    # partition, and serves what it does not lead by passing it on (broker.shared_identity), as
    # stateless third-party brokers over a shared store do (tansu: 111). -1: Kafka's way.
    shared_node_id: int = _kafka("shared.node.id", -1)

    @property
    def elr_min_insync(self) -> int:
        """min.insync.replicas when Eligible Leader Replicas are on (broker.eligible); 0: off."""
        return self.min_insync_replicas if self.eligible_leader_replicas else 0

    @property
    def advertised_listener(self) -> Listener:
        return self.advertised or self.listener

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> BrokerConfig:
        """Every field from its Kafka property (`Setting`); a bad value is an error naming its key."""
        if "broker.id" not in props:
            raise BadBrokerConfig("broker.id: required")
        broker_id = Setting("broker.id").read(props, 0)
        settings = (f for f in fields(cls) if SETTING in f.metadata)
        return cls(broker_id, **{f.name: f.metadata[SETTING].read(props, f.default) for f in settings})

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
