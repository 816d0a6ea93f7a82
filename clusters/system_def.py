"""A system definition file (`--system PATH.toml`): roles, how each is installed, started, found
ready and stopped, with `{template}` values filled per node. docs/systems.md documents every key.

Parsing is strict and happens before any node exists: an unknown key, a missing start command, a
template value that does not exist or a role count below one is one line naming the file, the key
and what is wrong (BadInput, exit 2).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import signal
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.config import TestConfig
from foundation.errors import BadInput
from foundation.toml_file import read_toml

# zookeeper: the broker listens and is registered in ZooKeeper's /brokers/ids by a session other
# than its previous process's (a killed broker's registration outlives it until its session ends).
READY_KINDS = ("kafka", "port", "command", "none", "zookeeper")
# What a role is: a process of its own (any server), or an S3-compatible store that strandline's S3
# proxy (clusters/s3_proxy.py) fronts on the same node, so the `storage` faults reach its requests.
ROLE_KINDS = ("process", "s3")
DATA_FORMATS = ("kafka", "other")
PAUSE_KINDS = ("auto", "freeze", "sigstop")
NODE_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,2}$")  # node names must stay <= 4 characters
PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
EMPTY_SETTING = re.compile(r"^\s*[^#=\s][^=]*=\s*$")  # `key=` with nothing after it
NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
BROKERS_DEFAULT = "broker"

TOP_KEYS = (
    "name", "description", "brokers", "roles", "software", "controller", "membership", "metadata",
    "state", "startup",
)  # fmt: skip
ROLE_KEYS = (
    "count", "port", "ports", "node_prefix", "files", "upload", "install", "start", "env", "ready",
    "logs", "data_dirs", "data_format", "stop_signal", "stop_timeout", "pause", "faketime", "lazyfs",
    "node_id", "values", "spare_values", "kind", "proxy_port", "output",
)  # fmt: skip
SOFTWARE_KEYS = ("versions",)
METADATA_KEYS = ("brokers", "leaders")
# What a broker's Metadata lists: every live broker (Kafka's), or only itself (brokers that do not
# know each other: stateless brokers over a shared store, each answering for itself).
LISTED_BROKERS = ("all", "self")
# Who leads a partition: one elected broker (Kafka's), or any broker (every broker serves every
# partition: no partition has a leader among the nodes for a fault to aim at).
LEADERSHIPS = ("partition", "any-broker")
CONTROLLER_KEYS = ("kind", "role", "port")
CONTROLLER_KINDS = ("metadata", "describe-quorum")
# reassign: through Kafka's Admin API; zookeeper: through /admin/reassign_partitions (ZooKeeper mode)
MEMBERSHIP_KINDS = ("none", "reassign", "zookeeper")
# Where leaders, epochs, ISRs, replicas, the controller and the registered brokers are read: the
# brokers' Kafka Metadata (as clients see them), or ZooKeeper's znodes (a role named `zookeeper`).
STATE_SOURCES = ("metadata", "zookeeper")
# in-order: each role is ready before the next starts; together: every role starts at once and is
# then waited for in order (brokers that retry their coordinator start while it starts).
STARTUPS = ("in-order", "together")
ZOOKEEPER_ROLE = "zookeeper"
# Test settings whose 0 means "unset": `{optional.KEY}` renders them empty then (FILE_KEYS omit_empty).
OPTIONAL_SETTINGS = ("log_flush_interval_messages", "log_segment_bytes")
# Software strandline fetches on the controller and puts on the nodes (clusters/software.py), with
# the template values each offers as `{NAME.VALUE}`.
SOFTWARE_VALUES: dict[str, tuple[str, ...]] = {
    "kafka": ("home", "classpath", "version", "format_features"),
    "tansu": ("bin", "pg_schema", "version"),
}
FILE_KEYS = ("path", "content", "omit_empty")
UPLOAD_KEYS = ("source", "dest")
READY_KEYS = ("kind", "command", "timeout")


@dataclass(frozen=True)
class FileDef:
    path: str  # template: where on the node
    content: str  # template: what it holds
    omit_empty: bool = False  # drop each `key=value` line whose value renders empty (an unset setting)


@dataclass(frozen=True)
class UploadDef:
    source: Path  # a file or a directory on the controller (relative to the definition file)
    dest: str  # template: where on the node


@dataclass(frozen=True)
class ReadyDef:
    kind: str  # kafka | port | command | none
    command: str = ""  # template, run with sh -c on the node (kind = command)
    timeout: float = 60.0


@dataclass(frozen=True)
class RoleDef:
    name: str
    count: int | None  # None: the broker role's count is the test's `nodes`
    port: int
    ports: dict[str, int]
    node_prefix: str
    start: tuple[str, ...] | str  # argv templates, or one shell command (sh -c, exec'd)
    files: tuple[FileDef, ...] = ()
    upload: tuple[UploadDef, ...] = ()
    install: tuple[str, ...] = ()  # shell commands run once on each node before the first start
    env: dict[str, str] = field(default_factory=dict)
    ready: ReadyDef = ReadyDef("port")
    logs: tuple[str, ...] = ()
    data_dirs: tuple[str, ...] = ()
    data_format: str = "other"
    stop_signal: int = int(signal.SIGTERM)
    stop_timeout: float = 30.0
    pause: str = "auto"
    faketime: bool = False
    lazyfs: bool = False  # data dirs on the lazy-fsync filesystem when a test asks for lose-unsynced
    node_id: int = 1  # the first node's id (`{node_id}`, `{quorum}`); the next nodes count on
    values: dict[str, str] = field(default_factory=dict)  # `{values.NAME}`: the definition's own
    spare_values: dict[str, str] = field(default_factory=dict)  # ... on a node the member fault adds
    kind: str = "process"  # s3: an S3-compatible store, reached by the other roles through the proxy
    proxy_port: int = 0  # kind = s3: the port strandline's S3 proxy serves on, beside the store
    output: str = ""  # template: where the start command's stdout and stderr go ("": logs/<role>.out)

    @property
    def fronted(self) -> bool:
        """Does strandline's S3 proxy sit in front of this role (its `storage` faults)?"""
        return self.kind == "s3"


@dataclass(frozen=True)
class SoftwareDef:
    """Software a definition runs (`[software.kafka]`): fetched on the controller, put on the nodes."""

    name: str
    versions: str = ""  # a PEP 440 specifier of the releases the definition runs ("" : any)


@dataclass(frozen=True)
class ControllerDef:
    """How the cluster's active controller is found (the `controller` target of faults)."""

    kind: str = "metadata"  # Metadata's controller id | describe-quorum: KRaft's quorum leader
    role: str = ""  # whose nodes answer (default: the broker role)
    port: str = ""  # which named port of that role (default: its port)


@dataclass(frozen=True)
class MetadataDef:
    """What the brokers' Kafka Metadata answers mean (`[metadata]`)."""

    brokers: str = "all"  # all: every live broker is listed | self: each broker lists itself only
    leaders: str = "partition"  # partition: one elected leader | any-broker: every broker serves it

    @property
    def leaderless(self) -> bool:
        return self.leaders == "any-broker"


@dataclass(frozen=True)
class SystemDefinition:
    path: Path
    name: str
    brokers: str  # the role clients connect to (its nodes are n1..nN)
    roles: tuple[RoleDef, ...]  # in the file's order: roles start in this order
    software: tuple[SoftwareDef, ...] = ()
    controller: ControllerDef = ControllerDef()
    membership: str = "none"  # reassign | zookeeper: brokers join and leave, partitions move
    metadata: MetadataDef = MetadataDef()
    state: str = "metadata"  # zookeeper: leaders, the controller and the registry read from ZooKeeper
    startup: str = "in-order"  # together: every role starts at once, then each is waited for

    def role(self, name: str) -> RoleDef:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def broker_role(self) -> RoleDef:
        return self.role(self.brokers)

    def object_stores(self) -> tuple[RoleDef, ...]:
        """The roles strandline's S3 proxy fronts (`kind = "s3"`): what the `storage` faults need."""
        return tuple(r for r in self.roles if r.fronted)

    def count(self, role: RoleDef, config: TestConfig) -> int:
        return config.nodes if role.name == self.brokers else (role.count or 1)

    def needs_node_software(self) -> bool:
        """Does a role run strandline's Python (`{python}`, the S3 proxy) or start under the faketime preload?
        (Remote backends then install the project's venv and libfaketime on the hosts.)"""
        return any(
            role.faketime or role.fronted or "python" in role_placeholders(role) for role in self.roles
        )

    def node_names(self, role: RoleDef, config: TestConfig) -> list[str]:
        n = self.count(role, config)
        if role.name == self.brokers:
            return [f"n{i}" for i in range(1, n + 1)]
        if n == 1 and role.node_prefix == "zk":
            return ["zk"]  # the name the cluster and the zk-* partition shapes know ZooKeeper by
        return [f"{role.node_prefix}{i}" for i in range(1, n + 1)]


SYSTEMS_DIR = Path(__file__).resolve().parents[1] / "systems"
# `--system NAME` for a definition shipped in systems/: the one place a system's name is resolved.
SHIPPED = {"own": "own.toml", "kafka": "kafka-kraft.toml"}


def is_definition(system: str) -> bool:
    return system.endswith(".toml") or system in SHIPPED


def definition_path(system: str) -> Path:
    """The file a `--system` value names (a shipped name, or the path itself)."""
    return SYSTEMS_DIR / SHIPPED[system] if system in SHIPPED else Path(system)


def new_cluster_id(seed_bytes: bytes | None = None) -> str:
    """A KRaft cluster id: 16 bytes, URL-safe base64 without padding (what kafka-storage.sh makes),
    never starting with "-" (a command line would read it as an option: Kafka's own ids avoid it)."""
    raw = seed_bytes[:16].ljust(16, b"\0") if seed_bytes is not None else uuid.uuid4().bytes
    while True:
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-"):
            return text
        raw = uuid.uuid4().bytes


# --- template values ---------------------------------------------------------------------------


KAFKA_NEVER = str(2**63 - 1)  # Long.MAX_VALUE: Kafka's default log.flush.interval.messages, "never"
KAFKA_SEGMENT_BYTES = str(1024**3)  # Kafka's default log.segment.bytes (1 GiB)
KAFKA_RETENTION_MS = str(7 * 24 * 3600 * 1000)  # Kafka's default log.retention.ms (7 days)


def config_values(config: TestConfig) -> dict[str, str]:
    """`config.<key>` for every scalar test setting, as Kafka writes it: booleans `true`/`false`,
    `log_flush_interval_messages` 0 (strandline's "never fsync on append") as Kafka's never, and
    `log_segment_bytes` and `log_retention_ms` 0 (the broker's default) as Kafka's defaults."""
    out: dict[str, str] = {}
    for f in dataclasses.fields(TestConfig):
        value = getattr(config, f.name)
        if isinstance(value, bool):
            out[f"config.{f.name}"] = "true" if value else "false"
        elif isinstance(value, int | float | str):
            out[f"config.{f.name}"] = str(value)
    if config.log_flush_interval_messages <= 0:
        out["config.log_flush_interval_messages"] = KAFKA_NEVER
    for key in OPTIONAL_SETTINGS:
        value = getattr(config, key)
        out[f"optional.{key}"] = str(value) if value > 0 else ""
    if config.log_segment_bytes <= 0:
        out["config.log_segment_bytes"] = KAFKA_SEGMENT_BYTES
    if config.log_retention_ms == 0:
        out["config.log_retention_ms"] = KAFKA_RETENTION_MS
    return out


def value_names(definition_roles: Sequence[RoleDef], role: RoleDef, software: Sequence[str] = ()) -> set[str]:
    """Every template value a template of `role` may use (docs/systems.md lists them)."""
    names = {"id", "index", "name", "address", "home", "port", "count", "peers", "addresses", "quorum"}
    names |= {"cluster_id", "python", "clock_file", "bootstrap", "node_id", "java"}
    names |= {f"values.{v}" for v in role.values}
    names |= {f"{s}.{v}" for s in software for v in SOFTWARE_VALUES[s]}
    names |= {f"config.{f.name}" for f in dataclasses.fields(TestConfig)}
    names |= {f"optional.{key}" for key in OPTIONAL_SETTINGS}
    for p in role.ports:
        names |= {f"ports.{p}", f"peers.{p}", f"quorum.{p}"}
    for other in definition_roles:
        q = other.name
        names |= {
            f"{q}.servers",
            f"{q}.addresses",
            f"{q}.quorum",
            f"{q}.count",
            f"{q}.port",
            f"{q}.store_servers",
        }
        for p in other.ports:
            names |= {f"{q}.servers.{p}", f"{q}.quorum.{p}", f"{q}.ports.{p}"}
    return names


def role_values(role: RoleDef, nodes: Sequence[tuple[int, str]]) -> dict[str, str]:
    """The values a role shows to every template: its servers, addresses, quorum, count, ports
    (`nodes`: each node's id and address). An S3 role's servers are its proxies: the other roles
    reach the store through them (the role's own `{port}`, `{peers}` stay the store's)."""
    q = role.name
    port = role.proxy_port if role.fronted else role.port
    out = {
        f"{q}.servers": ",".join(f"{a}:{port}" for _, a in nodes),
        f"{q}.store_servers": ",".join(f"{a}:{role.port}" for _, a in nodes),
        f"{q}.addresses": ",".join(a for _, a in nodes),
        f"{q}.quorum": ",".join(f"{i}@{a}:{role.port}" for i, a in nodes),
        f"{q}.count": str(len(nodes)),
        f"{q}.port": str(role.port),
    }
    for p, port in role.ports.items():
        out[f"{q}.servers.{p}"] = ",".join(f"{a}:{port}" for _, a in nodes)
        out[f"{q}.quorum.{p}"] = ",".join(f"{i}@{a}:{port}" for i, a in nodes)
        out[f"{q}.ports.{p}"] = str(port)
    return out


def own_role_values(role: RoleDef, everything: Mapping[str, str]) -> dict[str, str]:
    """The role's own values without its name: `{peers}`, `{quorum.controller}`, `{port}` ..."""
    q = role.name
    out = {
        "peers": everything[f"{q}.store_servers"],
        "addresses": everything[f"{q}.addresses"],
        "quorum": everything[f"{q}.quorum"],
        "count": everything[f"{q}.count"],
        "port": everything[f"{q}.port"],
    }
    for p in role.ports:
        out[f"peers.{p}"] = everything[f"{q}.servers.{p}"]
        out[f"quorum.{p}"] = everything[f"{q}.quorum.{p}"]
        out[f"ports.{p}"] = everything[f"{q}.ports.{p}"]
    return out


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill `{name}` placeholders; `{{` and `}}` stand for braces. Names were checked at parse."""
    out = []
    for i, part in enumerate(re.split(r"(\{\{|\}\})", template)):
        if i % 2:
            out.append(part[0])
        else:
            out.append(PLACEHOLDER.sub(lambda m: values[m.group(1).strip()], part))
    return "".join(out)


def render_file(f: FileDef, values: Mapping[str, str]) -> str:
    """A file's content filled in; with `omit_empty`, each `key=value` line whose value came out
    empty is left out (a setting the test leaves unset stays at the software's default)."""
    text = render(f.content, values)
    if not f.omit_empty:
        return text
    kept = (line for line in text.splitlines(keepends=True) if not EMPTY_SETTING.match(line))
    return "".join(kept)


def placeholders(template: str) -> list[str]:
    plain = template.replace("{{", "").replace("}}", "")
    return [m.strip() for m in PLACEHOLDER.findall(plain)]


# --- parsing ---------------------------------------------------------------------------------


class _Reader:
    """Reads one file's tables, each error one line naming the file and the key."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, key: str, what: str) -> BadInput:
        return BadInput(f"system definition {self.path}: {key}: {what}")

    def table(self, key: str, value: Any, known: Sequence[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, got {value!r}")
        for k in value:
            if k not in known:
                raise self.fail(f"{key}.{k}" if key else k, f"unknown key (known: {', '.join(known)})")
        return value

    def string(self, key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {value!r}")
        return value

    def strings(self, key: str, value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of strings, got {value!r}")
        return tuple(self.string(f"{key}[{i}]", v) for i, v in enumerate(value))

    def integer(self, key: str, value: Any, least: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {value!r}")
        if value < least:
            raise self.fail(key, f"must be at least {least}, got {value}")
        return value

    def number(self, key: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.fail(key, f"expected a positive number, got {value!r}")
        return float(value)

    def choice(self, key: str, value: Any, choices: Sequence[str]) -> str:
        if value not in choices:
            raise self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return str(value)

    def port(self, key: str, value: Any) -> int:
        port = self.integer(key, value, 1)
        if port > 65535:
            raise self.fail(key, f"not a port: {port}")
        return port


Reader = _Reader  # the cluster definitions of clusters/external_def.py read their files the same way


def load(path: str | Path) -> SystemDefinition:
    """Read and check a definition file (templates are checked against the values that exist);
    a shipped name (`kafka`) reads its file in systems/."""
    p = definition_path(str(path))
    return parse(read_toml(p, "system definition"), p)


def parse(raw: Mapping[str, Any], path: Path) -> SystemDefinition:
    r = _Reader(path)
    top = r.table("", dict(raw), TOP_KEYS)
    roles_raw = top.get("roles")
    if roles_raw is not None and not isinstance(roles_raw, dict):
        raise r.fail("roles", f"expected a table of roles ([roles.broker] ...), got {roles_raw!r}")
    if not roles_raw:
        raise r.fail("roles", "missing: at least one role ([roles.broker] ...)")
    brokers = r.string("brokers", top.get("brokers", BROKERS_DEFAULT))
    if brokers not in roles_raw:
        raise r.fail("brokers", f"no role {brokers!r} (roles: {', '.join(roles_raw)})")
    roles = tuple(_role(r, name, value, brokers) for name, value in roles_raw.items())
    prefixes: dict[str, str] = {}
    for role in roles:
        if role.name != brokers:
            if role.node_prefix in prefixes or role.node_prefix == "n":
                other = prefixes.get(role.node_prefix, brokers)
                raise r.fail(
                    f"roles.{role.name}.node_prefix",
                    f"{role.node_prefix!r} is taken by role {other!r}: set another",
                )
            prefixes[role.node_prefix] = role.name
    software = _software(r, top.get("software", {}))
    for role in roles:
        _check_templates(r, roles, role, [s.name for s in software])
    name = r.string("name", top.get("name", path.stem))
    r.string("description", top.get("description", ""))
    metadata = _metadata(r, top.get("metadata", {}))
    membership = r.choice("membership", top.get("membership", "none"), MEMBERSHIP_KINDS)
    state = r.choice("state", top.get("state", "metadata"), STATE_SOURCES)
    for key, value in (("state", state), ("membership", membership), *_ready_kinds(roles)):
        if value == "zookeeper" and ZOOKEEPER_ROLE not in roles_raw:
            raise r.fail(
                key, f"'zookeeper' reads ZooKeeper's znodes: it needs a role named {ZOOKEEPER_ROLE!r}"
            )
    for role in roles:
        if role.ready.kind == "zookeeper" and role.name != brokers:
            raise r.fail(
                f"roles.{role.name}.ready",
                "'zookeeper' is a broker's registration: only the broker role has one",
            )
    if state == "zookeeper" and (metadata.leaderless or metadata.brokers != "all"):
        raise r.fail("state", "ZooKeeper's znodes name one leader per partition: metadata must say so too")
    if membership != "none" and (metadata.leaderless or metadata.brokers != "all"):
        raise r.fail(
            "membership",
            "partitions move between brokers by their ids: it needs brokers that list each other "
            "and elect partition leaders (metadata.brokers = 'all', metadata.leaders = 'partition')",
        )
    return SystemDefinition(
        path=path.resolve(),
        name=name,
        brokers=brokers,
        roles=roles,
        software=software,
        controller=_controller(r, top.get("controller", "metadata"), roles, brokers),
        membership=membership,
        metadata=metadata,
        state=state,
        startup=r.choice("startup", top.get("startup", "in-order"), STARTUPS),
    )


def _ready_kinds(roles: Sequence[RoleDef]) -> list[tuple[str, str]]:
    return [(f"roles.{role.name}.ready", role.ready.kind) for role in roles]


def _metadata(r: _Reader, value: Any) -> MetadataDef:
    t = r.table("metadata", value, METADATA_KEYS)
    brokers = r.choice("metadata.brokers", t.get("brokers", "all"), LISTED_BROKERS)
    # A broker that lists only itself names itself as every partition's leader: no leader to find.
    leaders = r.choice(
        "metadata.leaders", t.get("leaders", "any-broker" if brokers == "self" else "partition"), LEADERSHIPS
    )
    if brokers == "self" and leaders == "partition":
        raise r.fail(
            "metadata.leaders",
            "'partition' needs brokers that list each other (metadata.brokers = 'all'): a broker "
            "that lists only itself cannot name another as a partition's leader",
        )
    return MetadataDef(brokers, leaders)


def _software(r: _Reader, value: Any) -> tuple[SoftwareDef, ...]:
    out = []
    for name, spec in r.table("software", value, tuple(SOFTWARE_VALUES)).items():
        t = r.table(f"software.{name}", spec, SOFTWARE_KEYS)
        versions = r.string(f"software.{name}.versions", t.get("versions", ""))
        if versions:
            from packaging.specifiers import InvalidSpecifier, SpecifierSet

            try:
                SpecifierSet(versions)
            except InvalidSpecifier:
                raise r.fail(
                    f"software.{name}.versions", f"not a version range such as '>=3.3': {versions!r}"
                ) from None
        out.append(SoftwareDef(name, versions))
    return tuple(out)


def _controller(r: _Reader, value: Any, roles: Sequence[RoleDef], brokers: str) -> ControllerDef:
    if isinstance(value, str):
        value = {"kind": value}
    t = r.table("controller", value, CONTROLLER_KEYS)
    kind = r.choice("controller.kind", t.get("kind", "metadata"), CONTROLLER_KINDS)
    role_name = r.string("controller.role", t.get("role", brokers))
    role = next((x for x in roles if x.name == role_name), None)
    if role is None:
        raise r.fail("controller.role", f"no role {role_name!r} (roles: {', '.join(x.name for x in roles)})")
    port = r.string("controller.port", t.get("port", ""))
    if port and port not in role.ports:
        raise r.fail(
            "controller.port",
            f"role {role_name!r} has no port named {port!r} (ports: {', '.join(role.ports) or 'none'})",
        )
    return ControllerDef(kind, role_name, port)


def _role(r: _Reader, name: str, value: Any, brokers: str) -> RoleDef:
    key = f"roles.{name}"
    if not NAME.match(name):
        raise r.fail(key, "a role name is lowercase letters, digits, - and _")
    t = r.table(key, value, ROLE_KEYS)
    if "start" not in t:
        raise r.fail(f"{key}.start", "missing start command")
    start: tuple[str, ...] | str
    if isinstance(t["start"], str):
        start = t["start"]
        if not start.strip():
            raise r.fail(f"{key}.start", "empty start command")
    else:
        start = r.strings(f"{key}.start", t["start"])
        if not start:
            raise r.fail(f"{key}.start", "empty start command")
    count = r.integer(f"{key}.count", t["count"], 1) if "count" in t else None
    if count is not None and name == brokers:
        raise r.fail(
            f"{key}.count", "the broker role runs on the test's nodes: set `nodes` (--nodes) instead"
        )
    if "port" not in t:
        raise r.fail(f"{key}.port", "missing: the port the role serves on")
    ports_raw = t.get("ports", {})
    if not isinstance(ports_raw, dict):
        raise r.fail(f"{key}.ports", f"expected a table of named ports, got {ports_raw!r}")
    ports = {str(k): r.port(f"{key}.ports.{k}", v) for k, v in ports_raw.items()}
    prefix = r.string(f"{key}.node_prefix", t.get("node_prefix", "zk" if name == "zookeeper" else name[:2]))
    if name != brokers and not NODE_PREFIX.match(prefix):
        raise r.fail(f"{key}.node_prefix", f"{prefix!r}: 1 to 3 lowercase letters or digits, a letter first")
    env_raw = t.get("env", {})
    if not isinstance(env_raw, dict):
        raise r.fail(f"{key}.env", f"expected a table of variables, got {env_raw!r}")
    files = []
    for fk, f in _tables(r, f"{key}.files", t.get("files", []), FILE_KEYS, ("path", "content")):
        omit = _boolean(r, f"{fk}.omit_empty", f.get("omit_empty", False))
        files.append(
            FileDef(r.string(f"{fk}.path", f["path"]), r.string(f"{fk}.content", f["content"]), omit)
        )
    uploads = []
    for uk, u in _tables(r, f"{key}.upload", t.get("upload", []), UPLOAD_KEYS, ("source", "dest")):
        text = r.string(f"{uk}.source", u["source"])
        expanded = os.path.expandvars(text)
        unset = re.search(r"\$\{?(\w+)", expanded)
        if unset:
            raise r.fail(f"{uk}.source", f"environment variable {unset.group(1)} is not set ({text})")
        source = Path(expanded).expanduser()
        source = source if source.is_absolute() else r.path.parent / source
        if not source.exists():
            raise r.fail(f"{uk}.source", f"no file or directory {source}")
        uploads.append(UploadDef(source, r.string(f"{uk}.dest", u["dest"])))
    kind = r.choice(f"{key}.kind", t.get("kind", "process"), ROLE_KINDS)
    proxy_port = 0
    if kind == "s3":
        if name == brokers:
            raise r.fail(
                f"{key}.kind", "the broker role cannot be an S3 store: give the store a role of its own"
            )
        proxy_port = r.port(f"{key}.proxy_port", t.get("proxy_port", r.port(f"{key}.port", t["port"]) + 1))
        if proxy_port == t["port"] or proxy_port in ports.values():
            raise r.fail(
                f"{key}.proxy_port", f"{proxy_port} is already the role's own port: give the proxy another"
            )
    elif "proxy_port" in t:
        raise r.fail(f"{key}.proxy_port", 'only a role of kind = "s3" has a proxy')
    stop_name = r.string(f"{key}.stop_signal", t.get("stop_signal", "SIGTERM"))
    try:
        stop_signal = int(signal.Signals[stop_name if stop_name.startswith("SIG") else f"SIG{stop_name}"])
    except KeyError:
        raise r.fail(f"{key}.stop_signal", f"unknown signal {stop_name!r}") from None
    return RoleDef(
        name=name,
        count=count,
        port=r.port(f"{key}.port", t["port"]),
        ports=ports,
        node_prefix=prefix,
        start=start,
        files=tuple(files),
        upload=tuple(uploads),
        install=r.strings(f"{key}.install", t.get("install", [])),
        env={str(k): r.string(f"{key}.env.{k}", v) for k, v in env_raw.items()},
        ready=_ready(r, f"{key}.ready", t.get("ready", "kafka" if name == brokers else "port")),
        logs=r.strings(f"{key}.logs", t.get("logs", [])),
        data_dirs=r.strings(f"{key}.data_dirs", t.get("data_dirs", [])),
        data_format=r.choice(f"{key}.data_format", t.get("data_format", "other"), DATA_FORMATS),
        stop_signal=stop_signal,
        stop_timeout=r.number(f"{key}.stop_timeout", t.get("stop_timeout", 30.0)),
        pause=r.choice(f"{key}.pause", t.get("pause", "auto"), PAUSE_KINDS),
        faketime=_boolean(r, f"{key}.faketime", t.get("faketime", False)),
        lazyfs=_boolean(r, f"{key}.lazyfs", t.get("lazyfs", name == brokers)),
        node_id=r.integer(f"{key}.node_id", t.get("node_id", 1), 0),
        values=_string_table(r, f"{key}.values", t.get("values", {})),
        spare_values=_string_table(r, f"{key}.spare_values", t.get("spare_values", {})),
        kind=kind,
        proxy_port=proxy_port,
        output=r.string(f"{key}.output", t.get("output", "")),
    )


def _string_table(r: _Reader, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise r.fail(key, f"expected a table of strings, got {value!r}")
    return {str(k): r.string(f"{key}.{k}", v) for k, v in value.items()}


def _tables(
    r: _Reader, key: str, value: Any, known: Sequence[str], needs: tuple[str, str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The tables of a list of tables ([[key]]) with their keys, each checked as it is reached:
    only `known` keys, and both `needs`."""
    if not isinstance(value, list):
        raise r.fail(key, f"expected a list of tables ([[{key}]]), got {value!r}")
    for i, item in enumerate(value):
        item_key = f"{key}[{i}]"
        table = r.table(item_key, item, known)
        if any(k not in table for k in needs):
            raise r.fail(item_key, f"needs {needs[0]} and {needs[1]}")
        yield item_key, table


def _boolean(r: _Reader, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise r.fail(key, f"expected true or false, got {value!r}")
    return value


def _ready(r: _Reader, key: str, value: Any) -> ReadyDef:
    if isinstance(value, str):
        kind = r.choice(key, value, tuple(k for k in READY_KINDS if k != "command"))
        return ReadyDef(kind)
    t = r.table(key, value, READY_KEYS)
    command = r.string(f"{key}.command", t.get("command", ""))
    kind = r.choice(f"{key}.kind", t.get("kind", "command" if command else "kafka"), READY_KINDS)
    if kind == "command" and not command.strip():
        raise r.fail(f"{key}.command", "missing: the command that exits 0 once the role serves")
    return ReadyDef(kind, command, r.number(f"{key}.timeout", t.get("timeout", 60.0)))


def role_placeholders(role: RoleDef) -> set[str]:
    return {name for _where, template in _templates(role) for name in placeholders(template)}


def _check_templates(r: _Reader, roles: Sequence[RoleDef], role: RoleDef, software: Sequence[str]) -> None:
    known = value_names(roles, role, software)
    unknown_spare = sorted(set(role.spare_values) - set(role.values))
    if unknown_spare:
        raise r.fail(
            f"roles.{role.name}.spare_values.{unknown_spare[0]}",
            "not in the role's values: a spare value replaces one of them",
        )
    for where, template in _templates(role):
        for name in placeholders(template):
            if name not in known:
                raise r.fail(where, f"unknown template value {{{name}}} (see docs/systems.md for the values)")


def _templates(role: RoleDef) -> list[tuple[str, str]]:
    """(key, template) of every template of a role."""
    key = f"roles.{role.name}"
    templates: list[tuple[str, str]] = []
    start = [role.start] if isinstance(role.start, str) else list(role.start)
    templates += [(f"{key}.start", s) for s in start]
    templates += [(f"{key}.files[{i}].path", f.path) for i, f in enumerate(role.files)]
    templates += [(f"{key}.files[{i}].content", f.content) for i, f in enumerate(role.files)]
    templates += [(f"{key}.upload[{i}].dest", u.dest) for i, u in enumerate(role.upload)]
    templates += [(f"{key}.install", c) for c in role.install]
    templates += [(f"{key}.env.{k}", v) for k, v in role.env.items()]
    templates += [(f"{key}.ready.command", role.ready.command)]
    templates += [(f"{key}.logs", s) for s in role.logs] + [(f"{key}.data_dirs", s) for s in role.data_dirs]
    templates += [(f"{key}.values.{k}", v) for k, v in role.values.items()]
    templates += [(f"{key}.spare_values.{k}", v) for k, v in role.spare_values.items()]
    templates += [(f"{key}.output", role.output)]
    return templates
