"""The definition of a cluster strandline did not start: strict parsing (one line naming the file
and the key), the commands each fault needs, and template values that never become shell syntax."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from clusters.external_def import is_external, load, render
from foundation.errors import BadInput

GOOD = """
name = "ops"
managed = false
[ssh]
user = "ops"
known_hosts = "/dev/null"
[commands]
kill = "systemctl kill -s KILL kafka"
start = "systemctl start kafka"
partition = "for a in {drop}; do iptables -A INPUT -s \\"$a\\" -j DROP; done"
heal = "iptables -F INPUT"
[[nodes]]
broker = "k1.example:9092"
data_dirs = ["/var/lib/kafka"]
[[nodes]]
broker = "k2.example:9092"
ssh = { host = "10.0.0.2", port = 2222 }
commands = { kill = "" }
[[nodes]]
broker = "k3.example:9093"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ops.toml"
    path.write_text(text)
    return path


def test_a_definition_reads_its_nodes_ssh_and_commands(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    assert is_external(str(path))
    d = load(path)
    n1, n2, n3 = d.nodes
    assert (n1.name, n1.host, n1.port, n1.data_dirs) == ("n1", "k1.example", 9092, ("/var/lib/kafka",))
    assert n1.ssh is not None and (n1.ssh.host, n1.ssh.user, n1.ssh.port) == ("k1.example", "ops", 22)
    assert n2.ssh is not None and (n2.ssh.host, n2.ssh.port, n2.ssh.user) == ("10.0.0.2", 2222, "ops")
    assert "kill" not in n2.commands and n3.commands["start"] == "systemctl start kafka"
    assert d.missing("partition") is None
    assert d.missing("kill") == (
        "fault 'kill' needs the command 'kill' on every node; n2 has none in ops.toml "
        "([commands] or the node's commands)"
    )
    assert "cannot run against ops, a cluster strandline did not start" in str(d.missing("clock"))
    assert "'pause' on every node; n1, n2, n3 have none" in str(d.missing("pause"))


@pytest.mark.parametrize(
    ("change", "key", "what"),
    [
        (("managed = false", "managed = true"), "managed", "expected false"),
        (('broker = "k1.example:9092"', 'broker = "k1.example"'), "nodes[0].broker", "expected host:port"),
        (("heal = ", "hael = "), "commands.hael", "unknown key"),
        (("systemctl start kafka", "start {drop}"), "commands.start", "unknown template value {drop}"),
        (('broker = "k3.example:9093"', 'broker = "k1.example:9092"'), "n3.broker", "also n1's broker"),
        (("port = 2222", "port = 'x'"), "nodes[1].ssh", "expected"),
    ],
)
def test_a_bad_definition_is_one_line_naming_the_key(
    tmp_path: Path, change: tuple[str, str], key: str, what: str
) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(BadInput) as e:
        load(path)
    message = str(e.value)
    assert message.startswith(f"system definition {path}: {key}") and what in message, message
    assert "\n" not in message


def test_template_values_are_shell_quoted_words() -> None:
    hostile = "10.0.0.1; rm -rf /"
    words = render("iptables-each {drop} -- {name}", {"drop": [hostile, "10.0.0.3"], "name": "n$(id)"})
    assert shlex.split(words) == ["iptables-each", hostile, "10.0.0.3", "--", "n$(id)"]
    assert render("echo {{literal}}", {}) == "echo {literal}"


def test_nemesis_all_draws_only_granted_faults_and_a_missing_command_is_refused(tmp_path: Path) -> None:
    """Asked before anything is reached (no host is connected to): `all` narrows to the granted
    faults; a named fault without its command is refused in one line."""
    import dataclasses
    import random

    from clusters.external import ExternalNetwork, external_system
    from foundation.config import TestConfig
    from harness.compose import precheck
    from nemesis.core import Nemesis
    from nemesis.static import ShapeCluster

    path = write(tmp_path, GOOD.replace('commands = { kill = "" }', ""))
    config = TestConfig(system=str(path), nemesis=("all",))
    definition = load(path)
    sut = external_system(config, definition, ExternalNetwork("unit", definition, None))
    nemesis = Nemesis(config, ShapeCluster(3, sut), None, random.Random(0), state_dir=tmp_path)
    nemesis.validate(probe=True)  # probes nothing on the hosts: kill and partition need no probe there
    assert {name for group, _ in nemesis.mix() for name, _ in group} == {"kill", "partition"}
    precheck(config)
    with pytest.raises(
        BadInput, match=r"^fault 'pause' needs the command 'pause' on every node; n1, n2, n3 have"
    ):
        precheck(dataclasses.replace(config, nemesis=("kill", "pause")))
