"""A definition of a cluster strandline did not start (`managed = false`, docs/systems.md, "A
cluster strandline did not start"): its brokers' addresses and, per node, the commands its owner
grants for faults (kill, start, stop, pause, resume, partition, heal), run over ssh.

Parsing is strict and happens before anything is reached: an unknown key, a broker that is not
`host:port`, an unknown template value is one line naming the file and the key (BadInput, exit 2).
Every template value is substituted shell-quoted (a list: one quoted word per item), so an address
or a path can never become shell syntax.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusters import system_def
from clusters.system_def import Reader
from foundation.config import SshHost, parse_ssh_host
from foundation.errors import BadInput
from foundation.toml_file import read_toml

TOP_KEYS = ("name", "description", "managed", "ready_timeout", "ssh", "commands", "nodes")
NODE_KEYS = ("broker", "address", "ssh", "commands", "data_dirs", "logs")
# The commands a node may have, and the template values each may use beyond the node's own.
COMMANDS = ("kill", "start", "stop", "pause", "resume", "partition", "heal")
NODE_VALUES = ("name", "address", "broker", "host", "port", "data_dir", "peers")
EXTRA_VALUES: dict[str, tuple[str, ...]] = {"partition": ("drop",)}
# The faults that run by commands, and the commands each needs (the first does it, the second
# undoes it at heal; restart: stop, then start).
FAULT_COMMANDS: dict[str, tuple[str, str]] = {
    "kill": ("kill", "start"),
    "restart": ("stop", "start"),
    "pause": ("pause", "resume"),
    "partition": ("partition", "heal"),
}


@dataclass(frozen=True)
class ExternalNodeDef:
    name: str  # n1, n2 ... in the file's order
    broker: str  # host:port as the broker advertises it
    address: str  # the node's address ("": the broker's host, resolved)
    ssh: SshHost | None  # None: no command runs there and nothing is collected
    commands: dict[str, str] = field(default_factory=dict)  # templates, run with sh -c
    data_dirs: tuple[str, ...] = ()  # Kafka's segment format: collected for the replica-log checks
    logs: tuple[str, ...] = ()

    @property
    def host(self) -> str:
        return self.broker.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.broker.rpartition(":")[2])


@dataclass(frozen=True)
class ExternalDefinition:
    path: Path
    name: str
    nodes: tuple[ExternalNodeDef, ...]
    ready_timeout: float = 60.0

    def missing(self, fault: str) -> str | None:
        """Why `fault` cannot run against this cluster (a command no node or some node lacks)."""
        needed = FAULT_COMMANDS.get(fault)
        if needed is None:
            granted = ", ".join(FAULT_COMMANDS)
            return (
                f"fault {fault!r} cannot run against {self.name}, a cluster strandline did not start "
                f"({self.path.name}): only {granted} run there, by the commands the definition gives"
            )
        for command in needed:
            lacking = [n.name for n in self.nodes if not n.commands.get(command)]
            if lacking:
                return (
                    f"fault {fault!r} needs the command {command!r} on every node; {', '.join(lacking)} "
                    f"{'has' if len(lacking) == 1 else 'have'} none in {self.path.name} ([commands] or the "
                    "node's commands)"
                )
        return None


def is_external(system: str) -> bool:
    """Does `--system` name a definition file that says `managed = false`?"""
    if not system.endswith(".toml"):
        return False
    try:
        return read_toml(system, "system definition").get("managed") is False
    except BadInput:
        return False  # the definition loader says what is wrong with the file


def render(template: str, values: Mapping[str, str | Sequence[str]]) -> str:
    """Fill `{name}`, each value shell-quoted (a list: quoted words); `{{`/`}}` are braces."""

    def quoted(value: str | Sequence[str]) -> str:
        return shlex.quote(value) if isinstance(value, str) else " ".join(shlex.quote(v) for v in value)

    return system_def.render(template, {k: quoted(v) for k, v in values.items()})


# --- parsing -------------------------------------------------------------------------------------


def load(path: str | Path) -> ExternalDefinition:
    p = Path(path)
    return parse(read_toml(p, "system definition"), p)


def parse(raw: Mapping[str, Any], path: Path) -> ExternalDefinition:
    r = Reader(path)
    top = r.table("", dict(raw), TOP_KEYS)
    if top.get("managed") is not False:
        raise r.fail(
            "managed", f"expected false (a cluster strandline did not start), got {top.get('managed')!r}"
        )
    timeout = top.get("ready_timeout", 60)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise r.fail("ready_timeout", f"expected a positive number of seconds, got {timeout!r}")
    ssh_defaults = r.table("ssh", top.get("ssh", {}), [*_ssh_keys(), "host"])
    commands = _commands(r, "commands", top.get("commands", {}))
    nodes_raw = top.get("nodes")
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise r.fail("nodes", 'missing: at least one [[nodes]] table with its broker = "host:port"')
    nodes = tuple(
        _node(r, f"nodes[{i}]", f"n{i + 1}", value, ssh_defaults, commands)
        for i, value in enumerate(nodes_raw)
    )
    seen: dict[str, str] = {}
    for node in nodes:
        if node.broker in seen:
            raise r.fail(f"{node.name}.broker", f"{node.broker} is also {seen[node.broker]}'s broker")
        seen[node.broker] = node.name
    return ExternalDefinition(
        path=path.resolve(),
        name=r.string("name", top.get("name", path.stem)),
        nodes=nodes,
        ready_timeout=float(timeout),
    )


def _ssh_keys() -> list[str]:
    return [k for k in SshHost.__dataclass_fields__ if k != "host"]


def _commands(r: Reader, key: str, value: Any) -> dict[str, str]:
    table = r.table(key, value, COMMANDS)
    out = {}
    for name, template in table.items():
        text = r.string(f"{key}.{name}", template).strip()
        allowed = {*NODE_VALUES, *EXTRA_VALUES.get(name, ())}
        for value_name in system_def.placeholders(text):
            if value_name not in allowed:
                raise r.fail(
                    f"{key}.{name}",
                    f"unknown template value {{{value_name}}} (known: {', '.join(sorted(allowed))})",
                )
        out[name] = text
    return out


def _node(
    r: Reader, key: str, name: str, value: Any, ssh_defaults: dict[str, Any], commands: dict[str, str]
) -> ExternalNodeDef:
    t = r.table(key, value, NODE_KEYS)
    broker = r.string(f"{key}.broker", t.get("broker"))
    host, _, port = broker.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise r.fail(f"{key}.broker", f"expected host:port, got {broker!r}")
    own = {**commands, **_commands(r, f"{key}.commands", t.get("commands", {}))}
    own = {k: v for k, v in own.items() if v}  # an empty command takes a default away
    data_dirs = r.strings(f"{key}.data_dirs", t.get("data_dirs", []))
    logs = r.strings(f"{key}.logs", t.get("logs", []))
    ssh_value = t.get("ssh")
    ssh: SshHost | None = None
    if ssh_value is not False and (ssh_value is not None or own or data_dirs or logs):
        if isinstance(ssh_value, str):
            ssh_value = {"host": ssh_value}
        merged = {**ssh_defaults, **r.table(f"{key}.ssh", ssh_value or {}, [*_ssh_keys(), "host"])}
        merged.setdefault("host", host.strip("[]"))
        try:
            ssh = parse_ssh_host(f"{key}.ssh", merged)
        except BadInput as e:
            raise r.fail(f"{key}.ssh", str(e).removeprefix("config key ")) from None
    if ssh is None and (own or data_dirs or logs):
        raise r.fail(f"{key}.ssh", "false, but the node has commands or data_dirs, which run over ssh")
    address = r.string(f"{key}.address", t.get("address", ""))
    return ExternalNodeDef(name, broker, address, ssh, own, data_dirs, logs)
