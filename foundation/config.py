"""The typed test configuration, validated once at the edge.

Every `strandline run` flag has a config key of the same name (dashes become underscores), so a
TOML file, the flags, and the written-out `test.json` are three spellings of one `TestConfig`.
Validation errors name the key, so a person can fix the file without reading code.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import random
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from foundation.errors import BadInput

SYSTEMS = ("own", "kafka")
BACKENDS = ("netns", "docker", "ssh")
VARIANTS = ("leader-epoch", "high-watermark", "leader-epoch-v0")
ACKS = ("all", "1", "0")
CLIENTS = ("kafka-python", "confluent-kafka", "java")
GROUP_PROTOCOLS = ("classic", "consumer")
# `retries` at this value means "retry until the delivery timeout" (the Java client's default); a
# send's time bound is then what the default number of retries gives (`delivery_timeout_ms`).
RETRY_UNTIL_TIMEOUT = 2**31 - 1
CONSUME_MODES = ("assign", "subscribe", "mixed")
WORKLOADS = ("queue", "txn")
CHECKERS = ("auto", "spark", "reference")
ELECTION_POLICIES = ("first-in-isr", "longest-log")
# The settings that say which system a test runs and what it promises: campaigns name a test by
# them (with its nemesis and seed), `strandline analyze` groups runs by them (with fsync and more).
SYSTEM_SETTINGS = ("system", "variant", "acks", "min_insync", "replication_factor", "unclean_election")


def default_spark_master() -> str:
    """The checker's Spark master when a config names none: the environment's, else local[*]."""
    return os.environ.get("STRANDLINE_SPARK_MASTER") or "local[*]"


@dataclass(frozen=True)
class SshHost:
    """One real host of the ssh backend."""

    host: str
    port: int = 22
    user: str = "root"
    key_file: str = ""
    # Host keys are verified against known_hosts unless the user opts out explicitly.
    known_hosts: str = "~/.ssh/known_hosts"
    insecure_skip_host_key_check: bool = False
    sudo: bool = False


@dataclass(frozen=True)
class TestConfig:
    """One test: cluster, workload, faults, checker. Defaults are the embedded default."""

    __test__ = False  # not a pytest test class

    name: str = "queue"
    # own, kafka, or a system definition file PATH.toml (docs/systems.md)
    system: str = "own"
    backend: Literal["netns", "docker", "ssh"] = "netns"
    nodes: int = 3
    topics: int = 1
    partitions: int = 2
    replication_factor: int = 3
    variant: Literal["leader-epoch", "high-watermark", "leader-epoch-v0"] = "leader-epoch"
    acks: Literal["all", "1", "0"] = "all"
    min_insync: int = 2
    unclean_election: bool = False
    nemesis: tuple[str, ...] = ()
    nemesis_interval: float = 10.0
    time_limit: float = 60.0
    rate: float = 200.0
    concurrency: int = 10
    client: Literal["kafka-python", "confluent-kafka", "java"] = "kafka-python"
    # The official Java client (`client = "java"`): the kafka-clients release, fetched from Maven
    # Central on first use ("": the newest that runs on this machine's Java,
    # workloads/clients/java_program.py); Kafka client properties ("name=value") applied over the
    # driver's own to every client it makes; and the consumer group protocol of its group members
    # (classic, or KIP-848's consumer, where the broker offers it).
    java_client_version: str = ""
    java_client_properties: tuple[str, ...] = ()
    group_protocol: Literal["classic", "consumer"] = "classic"
    # queue: single sends and polls; txn: each operation a transaction of 1-4 sends and polls,
    # committed or (with probability abort_p) aborted, read by read_committed consumers.
    workload: Literal["queue", "txn"] = "queue"
    abort_p: float = 0.1
    # The transactional producer's transaction.timeout.ms: the coordinator aborts a transaction
    # left open longer (a crashed client's), so read_committed consumers are not held up for long.
    transaction_timeout_ms: int = 10000
    # How client processes consume: assign partitions themselves, subscribe as members of consumer
    # groups (committing offsets), or both kinds side by side (docs/workloads.md).
    consume: Literal["assign", "subscribe", "mixed"] = "assign"
    # Every this many seconds on average a random client process is killed abruptly; 0: never.
    crash_clients: float = 0.0
    seed: int = 0
    store: str = "results"
    # Spark by default; `reference` is the pure-Python oracle; `auto` (kept for old test.json files)
    # picks the reference checker below 512 MiB of history (checkers/engines.py).
    checker: Literal["auto", "spark", "reference"] = "spark"
    # Unset in a config: $STRANDLINE_SPARK_MASTER (which --spark-master sets), else local[*].
    spark_master: str = dataclasses.field(default_factory=lambda: default_spark_master())
    # Producer behaviour.
    idempotence: bool = False
    retries: int = 5
    request_timeout_ms: int = 5000
    # Seconds a client waits for one send's acknowledgement before journaling it `info` and moving
    # on as a new process (Jepsen's operation timeout); 0: the producer's own delivery bound.
    op_timeout: float = 0.0
    # Own-broker settings, under Kafka's names where Kafka has one (see docs/broker-variants.md).
    leader_election_policy: Literal["first-in-isr", "longest-log"] = "first-in-isr"
    log_flush_interval_messages: int = 0  # 0: never fsync on append (Kafka's default behaviour)
    # KIP-966 Eligible Leader Replicas (eligible.leader.replicas.enable), own broker only
    eligible_leader_replicas: bool = False
    # KIP-903: a broker that registered again leaves the ISR (isr.broker.epoch.check.enable)
    isr_broker_epoch_check: bool = False
    # KAFKA-16541: fsync the leader-epoch checkpoint (leader.epoch.checkpoint.fsync); false is
    # Kafka 3.7.0's missing fsync, unsafe under an OS crash or power loss
    leader_epoch_checkpoint_fsync: bool = True
    # log.segment.bytes; 0: the broker's default (own broker 64 MiB, Kafka 1 GiB)
    log_segment_bytes: int = 0
    # Kafka's log.retention.ms (the Kafka definitions; the own broker deletes no segment): 0, Kafka's
    # default (7 days); -1, never. A power cut can lose a rolled segment's time index, whose
    # segment then looks 56 years old to retention and is deleted, acknowledged records and all.
    log_retention_ms: int = 0
    # Broker nodes beyond `nodes` that run no broker at the start: the membership fault (`member`)
    # adds them. -1: one when a membership fault is asked for, else none.
    spare_nodes: int = -1
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    # Kafka's transaction.version feature (own broker): 1, one producer epoch spans a producer's
    # transactions (before KIP-890 part 2); 2, EndTxn v5+ bumps it with every transaction.
    transaction_version: int = 2
    zookeeper_session_timeout_ms: int = 6000
    replica_lag_time_max_ms: int = 10000
    # The final drain: how long fresh consumers may take to read every partition to its HW.
    drain_timeout: float = 60.0
    # How long to wait for the cluster to recover after healing.
    recover_timeout: float = 60.0
    # Apache Kafka (`--system kafka`, a definition with [software.kafka]): the release, fetched
    # from Maven Central on first use ("": the default release, clusters/kafka_release.py), or a
    # distribution tarball (a path or an http(s) URL) or, on docker, an image with it in /opt/kafka.
    kafka_version: str = ""
    kafka_tarball: str = ""
    kafka_image: str = ""
    # The JDK a defined system's `{java}` runs ("": the `java` on the nodes' PATH), e.g. a newer
    # one for a release that needs it: /usr/lib/jvm/temurin-25-jdk-amd64.
    java_home: str = ""
    # docker backend: an image of your own for the nodes (default: the cached strandline-node image).
    docker_image: str = ""
    # ssh backend: the real hosts, one per node.
    ssh_hosts: tuple[SshHost, ...] = ()
    # A scripted fault schedule (list of steps, see docs/faults.md); empty: the random schedule.
    schedule: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Every field written out, defaults included, so `--config test.json` reruns the test."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def replace(self, **changes: Any) -> TestConfig:
        return validate({**self.to_json(), **changes})


_CHOICES: dict[str, tuple[str, ...]] = {
    "system": SYSTEMS,
    "backend": BACKENDS,
    "variant": VARIANTS,
    "acks": ACKS,
    "client": CLIENTS,
    "group_protocol": GROUP_PROTOCOLS,
    "consume": CONSUME_MODES,
    "workload": WORKLOADS,
    "checker": CHECKERS,
    "leader_election_policy": ELECTION_POLICIES,
}


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    """Turn a TOML/JSON/flag value into the field's type, or say which key is wrong and why."""
    origin = get_origin(annotation)
    if origin is Literal:
        choices = get_args(annotation)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if text not in choices:
            raise BadInput(f"config key {key!r}: {value!r} is not one of {', '.join(choices)}")
        return text
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise BadInput(f"config key {key!r}: expected true or false, got {value!r}")
    if annotation is int or annotation is float:
        # an integer key takes an integer or its text; a number key also a float
        accepted = (int, str) if annotation is int else (int, float, str)
        expected = f"config key {key!r}: expected {'an integer' if annotation is int else 'a number'}"
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise BadInput(f"{expected}, got {value!r}")
        try:
            return annotation(value)
        except ValueError:
            raise BadInput(f"{expected}, got {value!r}") from None
    if annotation is str:
        if not isinstance(value, str):
            raise BadInput(f"config key {key!r}: expected a string, got {value!r}")
        return value
    if origin is tuple:
        (item_type, _ellipsis) = get_args(annotation)
        if key == "nemesis" and isinstance(value, str):
            value = [] if value.strip() in ("", "none") else [v.strip() for v in value.split(",")]
        if not isinstance(value, list | tuple):
            raise BadInput(f"config key {key!r}: expected a list, got {value!r}")
        if item_type is SshHost:
            return tuple(_ssh_host(f"{key}[{i}]", v) for i, v in enumerate(value))
        if item_type is str:
            return tuple(_coerce(f"{key}[{i}]", v, str) for i, v in enumerate(value))
        for i, v in enumerate(value):
            if not isinstance(v, dict):
                raise BadInput(f"config key {key}[{i}]: expected a table, got {v!r}")
        return tuple(dict(v) for v in value)
    raise AssertionError(f"unhandled config type for {key}: {annotation!r}")


def _ssh_host(key: str, value: Any) -> SshHost:
    if isinstance(value, str):
        value = {"host": value}
    if not isinstance(value, dict):
        raise BadInput(f"config key {key}: expected a host name or a table, got {value!r}")
    hints = typing.get_type_hints(SshHost)
    known = {f.name for f in dataclasses.fields(SshHost)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise BadInput(f"config key {key}.{unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
    if "host" not in value:
        raise BadInput(f"config key {key}.host: missing")
    return SshHost(**{k: _coerce(f"{key}.{k}", v, hints[k]) for k, v in value.items()})


def parse_ssh_host(key: str, value: Any) -> SshHost:
    """One ssh host (a name, or a table of SshHost's keys) read as `ssh_hosts` entries are."""
    return _ssh_host(key, value)


def validate(raw: Mapping[str, Any]) -> TestConfig:
    """Build a TestConfig from plain data, naming the first wrong key. Seed 0 draws a seed."""
    hints = typing.get_type_hints(TestConfig, include_extras=False)
    known = {f.name for f in dataclasses.fields(TestConfig)}
    values: dict[str, Any] = {}
    for raw_key, value in raw.items():
        key = raw_key.replace("-", "_")
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise BadInput(f"config key {raw_key!r}: unknown key ({hint}see `strandline run --help`)")
        annotation = hints[key]
        if isinstance(annotation, types.UnionType):  # not used today; keep the error clear
            raise BadInput(f"config key {raw_key!r}: unsupported type")
        values[key] = _coerce(raw_key, value, annotation)
    if values.get("client") == "java":
        values = {**java_safe_preset(values), **values}
    config = TestConfig(**values)
    if config.spare_nodes < 0:
        config = dataclasses.replace(config, spare_nodes=1 if wants_membership(config) else 0)
    _check_ranges(config)
    if config.system not in SYSTEMS:  # a definition file: kept absolute, so test.json reruns it
        config = dataclasses.replace(config, system=str(Path(config.system).expanduser().resolve()))
    if config.seed == 0:
        config = dataclasses.replace(config, seed=random.SystemRandom().randrange(1, 2**31))
    return config


def java_safe_preset(given: Mapping[str, Any]) -> dict[str, Any]:
    """The Java client's settings where the test gives none: Jepsen's safe preset (acks=all, the
    default already; an idempotent producer; retries until the delivery timeout). Idempotence
    needs acks=all and retries, so a test that sets acks or retries otherwise gets none; the
    resolved values are written to test.json like every other key."""
    acks = given.get("acks", TestConfig.acks)
    retries = given.get("retries", RETRY_UNTIL_TIMEOUT)
    return {"retries": RETRY_UNTIL_TIMEOUT, "idempotence": acks == "all" and retries > 0}


def delivery_timeout_ms(config: TestConfig) -> int:
    """How long a producer may try to deliver one record: every attempt may take a request
    timeout, plus a second. `retries = RETRY_UNTIL_TIMEOUT` retries as often as it likes within the
    bound the default number of retries gives."""
    retries = config.retries
    if retries >= RETRY_UNTIL_TIMEOUT:
        retries = TestConfig.retries
    return config.request_timeout_ms * (retries + 1) + 1000


MEMBERSHIP_FAULT = "member"


def check_local_files(config: TestConfig) -> None:
    """The files this machine reads for a test exist, before anything is created for it (a
    stored test.json whose files are gone still validates: `check` does not need them)."""
    tarball = config.kafka_tarball
    if tarball and not tarball.startswith(("http://", "https://")):
        if not Path(tarball).expanduser().is_file():
            raise BadInput(f"config key 'kafka_tarball': no file {tarball}")
    for i, host in enumerate(config.ssh_hosts):
        if host.key_file and not Path(host.key_file).expanduser().is_file():
            raise BadInput(f"config key ssh_hosts[{i}].key_file: no file {host.key_file}")


def fault_names(config: TestConfig) -> set[str]:
    """The fault kinds `nemesis` names, without qualifiers or groups ("kill:leader", "partition+clock")."""
    return {part.split(":", 1)[0].strip() for spec in config.nemesis for part in spec.split("+")}


def wants_membership(config: TestConfig) -> bool:
    """Does this test ask for the membership fault (so a spare broker node by default)?"""
    return MEMBERSHIP_FAULT in fault_names(config) or any(
        s.get("do") == MEMBERSHIP_FAULT for s in config.schedule
    )


def _check_ranges(c: TestConfig) -> None:
    def need(ok: bool, key: str, what: str) -> None:
        if not ok:
            raise BadInput(f"config key {key!r}: {what}")

    need(
        c.system != "external",
        "system",
        "a cluster strandline did not start is a definition PATH.toml with managed = false, its "
        'brokers and the commands granted for faults (docs/systems.md, "A cluster strandline did not start")',
    )
    need(
        c.system in SYSTEMS or c.system.endswith(".toml"),
        "system",
        f"{c.system!r} is not one of {', '.join(SYSTEMS)} or a system definition PATH.toml",
    )
    if c.system not in SYSTEMS:
        need(Path(c.system).expanduser().is_file(), "system", f"no system definition file {c.system}")
    need(1 <= c.nodes <= 32, "nodes", f"must be between 1 and 32, got {c.nodes}")
    need(
        0 <= c.spare_nodes <= 32 - c.nodes,
        "spare_nodes",
        f"must be between 0 and {32 - c.nodes} (nodes + spare_nodes at most 32), or -1 (auto), got {c.spare_nodes}",
    )
    need(
        c.log_segment_bytes == 0 or c.log_segment_bytes >= 1024,
        "log_segment_bytes",
        f"must be 0 (the broker's default) or at least 1024, got {c.log_segment_bytes}",
    )
    need(
        c.log_retention_ms >= -1,
        "log_retention_ms",
        f"must be 0 (Kafka's default), -1 (never) or a number of ms, got {c.log_retention_ms}",
    )
    need(c.topics >= 1, "topics", f"must be at least 1, got {c.topics}")
    need(c.partitions >= 1, "partitions", f"must be at least 1, got {c.partitions}")
    need(
        1 <= c.replication_factor <= c.nodes,
        "replication_factor",
        f"must be between 1 and nodes ({c.nodes}), got {c.replication_factor}",
    )
    need(
        1 <= c.min_insync <= c.replication_factor,
        "min_insync",
        f"must be between 1 and replication_factor ({c.replication_factor}), got {c.min_insync}",
    )
    need(c.nemesis_interval > 0, "nemesis_interval", "must be positive")
    need(c.time_limit > 0, "time_limit", "must be positive")
    need(c.rate > 0, "rate", "must be positive")
    need(c.concurrency >= 1, "concurrency", "must be at least 1")
    need(c.crash_clients >= 0, "crash_clients", f"must not be negative (0: never), got {c.crash_clients:g}")
    need(c.seed >= 0, "seed", "must not be negative")
    need(0 <= c.abort_p <= 1, "abort_p", f"must be between 0 and 1, got {c.abort_p:g}")
    need(c.transaction_timeout_ms > 0, "transaction_timeout_ms", "must be positive")
    if c.workload == "txn":
        need(
            c.consume == "assign",
            "consume",
            "the txn workload's consumers assign partitions (consume = assign)",
        )
        need(c.acks == "all", "acks", f"a transactional producer needs acks=all, got acks={c.acks}")
        need(c.retries > 0, "retries", "a transactional producer needs retries > 0")
    need(c.retries >= 0, "retries", "must not be negative")
    need(
        c.retries <= RETRY_UNTIL_TIMEOUT,
        "retries",
        f"must be at most {RETRY_UNTIL_TIMEOUT} (retry until the delivery timeout), got {c.retries}",
    )
    bad = [p for p in c.java_client_properties if "=" not in p or not p.split("=", 1)[0].strip()]
    need(not bad, "java_client_properties", f"expected Kafka client properties as name=value, got {bad[:1]}")
    need(
        c.client == "java" or not c.java_client_properties,
        "java_client_properties",
        "only the java client takes Kafka client properties",
    )
    need(
        c.client == "java" or c.group_protocol == "classic",
        "group_protocol",
        f"the consumer group protocol (KIP-848) is driven by the java client only, not {c.client}",
    )
    need(c.op_timeout >= 0, "op_timeout", "must not be negative (0: the producer's delivery bound)")
    need(c.drain_timeout > 0, "drain_timeout", "must be positive")
    need(
        c.transaction_version in (1, 2), "transaction_version", f"must be 1 or 2, got {c.transaction_version}"
    )
    need(bool(c.name) and "/" not in c.name and c.name not in (".", ".."), "name", "must be a plain name")
    if c.backend == "ssh":
        need(len(c.ssh_hosts) >= c.nodes, "ssh_hosts", f"the ssh backend needs {c.nodes} hosts")


def load_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML or JSON (test.json) config file into plain data."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise BadInput(f"cannot read config {p}: {e.strerror}") from None
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            data = tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        raise BadInput(f"malformed config {p}: {e}") from None
    if not isinstance(data, dict):
        raise BadInput(f"malformed config {p}: expected a table of keys")
    if "config" in data and isinstance(data["config"], dict) and "seed" in data:
        # test.json written by `run`: {"config": {...}, "seed": N, ...}
        return {**data["config"], "seed": data["seed"]}
    return data


def resolve(config_file: str | None, overrides: Mapping[str, Any]) -> TestConfig:
    """File first, then flags that were given on the command line (None means not given)."""
    raw: dict[str, Any] = load_file(config_file) if config_file else {}
    raw.update({k: v for k, v in overrides.items() if v is not None})
    return validate(raw)
