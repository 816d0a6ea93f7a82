"""The system definition parser (clusters/system_def.py): what it accepts, what it renders, and the
one-line errors (file, key, what is wrong) for bad definitions."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from clusters import system_def
from foundation.config import TestConfig, validate
from foundation.errors import BadInput

REPO = Path(__file__).resolve().parents[2]

MINIMAL = """
[roles.broker]
port = 9092
start = "mybroker --id {id} --listen {address}:{port} --storage {storage.servers}"

[roles.storage]
count = 2
port = 7000
start = ["mystore", "--peers", "{peers}", "--me", "{id}"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sys.toml"
    path.write_text(textwrap.dedent(text))
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as e:
        system_def.load(path)
    message = str(e.value)
    assert "\n" not in message and str(path) in message
    return message


def test_minimal_definition_roles_names_and_defaults(tmp_path: Path) -> None:
    d = system_def.load(write(tmp_path, MINIMAL))
    config = validate({"nodes": 3, "seed": 1})
    assert [r.name for r in d.roles] == ["broker", "storage"]
    assert d.broker_role.ready.kind == "kafka" and d.role("storage").ready.kind == "port"
    assert d.node_names(d.broker_role, config) == ["n1", "n2", "n3"]
    assert d.node_names(d.role("storage"), config) == ["st1", "st2"]
    assert d.broker_role.lazyfs and not d.role("storage").lazyfs  # lose-unsynced: brokers' data dirs


def test_lose_unsynced_needs_data_dirs_on_a_lazyfs_role(tmp_path: Path) -> None:
    """Refused before any node exists; `--nemesis all` just leaves the fault out."""
    from clusters.defined_capabilities import defined_system

    d = system_def.load(write(tmp_path, MINIMAL))
    nodes: dict[str, list[Any]] = {"broker": [], "storage": []}
    with pytest.raises(BadInput, match=r"roles.broker.data_dirs: lose-unsynced needs data dirs"):
        defined_system(
            validate({"nemesis": ["lose-unsynced"], "seed": 1}), d, nodes, python=lambda: "python3"
        )
    system = defined_system(validate({"nemesis": ["all"], "seed": 1}), d, nodes, python=lambda: "python3")
    assert system.lazyfs is False


def test_rendering_fills_values_and_keeps_escaped_braces() -> None:
    values = {"id": "2", "storage.servers": "a:1,b:1"}
    assert system_def.render("x={id} s={storage.servers} j={{}}", values) == "x=2 s=a:1,b:1 j={}"
    assert system_def.placeholders("{{literal}} {id}") == ["id"]


@pytest.mark.parametrize(
    ("text", "key", "what"),
    [
        ("colour = 'red'\n" + MINIMAL, "colour", "unknown key"),
        (MINIMAL.replace("count = 2", "count = 2\nlisten = 1"), "roles.storage.listen", "unknown key"),
        ("[roles.broker]\nport = 9092\n", "roles.broker.start", "missing start command"),
        (
            MINIMAL.replace("{peers}", "{peer_list}"),
            "roles.storage.start",
            "unknown template value {peer_list}",
        ),
        (
            MINIMAL.replace("{storage.servers}", "{db.servers}"),
            "roles.broker.start",
            "unknown template value",
        ),
        (MINIMAL.replace("count = 2", "count = 0"), "roles.storage.count", "must be at least 1"),
        (MINIMAL.replace("port = 9092", "port = 9092\ncount = 3"), "roles.broker.count", "--nodes"),
        (MINIMAL.replace("port = 7000", "port = 70000"), "roles.storage.port", "not a port"),
        ("brokers = 'front'\n" + MINIMAL, "brokers", "no role 'front'"),
        ("name = 'x'\n", "roles", "missing"),
        (MINIMAL + "\n[roles.stash]\nport = 1\nstart = 'x'\n", "roles.stash.node_prefix", "is taken"),
        (
            MINIMAL.replace("count = 2", "count = 2\nready = {kind = 'command'}"),
            "roles.storage.ready.command",
            "missing",
        ),  # fmt: skip
        (
            MINIMAL.replace("count = 2", "count = 2\nstop_signal = 'SIGNOPE'"),
            "roles.storage.stop_signal",
            "unknown signal",
        ),  # fmt: skip
    ],
)
def test_bad_definitions_are_one_line_naming_the_key(tmp_path: Path, text: str, key: str, what: str) -> None:
    message = error_of(tmp_path, text)
    assert f": {key}: " in message and what in message, message


def test_an_upload_from_an_unset_variable_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SL_NO_SUCH_TARBALL", raising=False)
    text = MINIMAL + "upload = [{source = '${SL_NO_SUCH_TARBALL}', dest = '{home}/x.tgz'}]\n"
    message = error_of(tmp_path, text)
    assert "roles.storage.upload[0].source: environment variable SL_NO_SUCH_TARBALL is not set" in message


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="cannot read"):
        system_def.load(tmp_path / "absent.toml")
    assert "malformed system definition" in error_of(tmp_path, "[roles.broker\n")


def test_config_accepts_a_definition_path_and_keeps_it_absolute(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    assert validate({"system": str(path), "seed": 1}).system == str(path.resolve())
    with pytest.raises(BadInput, match="no system definition file"):
        validate({"system": str(tmp_path / "none.toml")})
    with pytest.raises(BadInput, match="config key 'system'"):
        validate({"system": "redpanda"})


@pytest.mark.parametrize(
    "name",
    [
        "own.toml",
        "kafka-kraft.toml",
        "kafka-kraft-split.toml",
        "kafka-zk.toml",
        "tansu-s3.toml",
        "tansu-postgres.toml",
    ],
)
def test_shipped_definitions_parse_and_every_template_renders(name: str) -> None:
    from clusters.defined_capabilities import defined_system
    from clusters.factory import spare_node_names
    from clusters.software import Installed
    from tests.support.nemesis_fakes import FakeNode

    d = system_def.load(REPO / "systems" / name)
    config = validate({"nodes": 3, "seed": 1, "nemesis": "member", "system": str(REPO / "systems" / name)})
    nodes = {
        r.name: [FakeNode(n, f"10.0.{i}.{j}") for j, n in enumerate(d.node_names(r, config))]
        for i, r in enumerate(d.roles)
    }
    spares = [FakeNode(n, "10.0.9.1") for n in spare_node_names(config)]
    assert len(spares) == (0 if d.membership == "none" else 1)
    sut = defined_system(config, d, nodes, python=lambda: "python3", spares=spares)
    for s in d.software:
        sut.installed[s.name] = Installed(s.name, "4.4.0" if "zk" not in name else "3.9.1", Path("/k"))
    for node in [*(n for ns in nodes.values() for n in ns), *spares]:
        role, values = sut.role_of(node), sut.values(node)
        rendered = [system_def.render(f.content, values) for f in role.files]
        rendered += [system_def.render(c, values) for c in role.install]
        assert all("{" not in text or "{{" in text for text in rendered), rendered
        if "kafka" in name and role.name == d.brokers:
            properties = next(text for text in rendered if "listeners=" in text)
            assert f"advertised.listeners=PLAINTEXT://{node.address}:9092" in properties
            if "kraft" in name:  # combined mode: the spare joins as a broker only, not a voter
                assert ("process.roles=broker\n" in properties) == (node in spares or "split" in name)
            else:
                assert f"broker.id={sut.defined_node_id(node)}" in properties
            assert (
                "\nlog.segment.bytes=1073741824\nlog.retention.ms=604800000\n" in properties
            )  # Kafka's defaults


def test_kafka_definitions_take_the_tests_segment_size_and_retention() -> None:
    """A scenario that rolls small segments on real Kafka (its recovery point passes where an
    epoch starts) sets `log_segment_bytes`, and turns retention off (-1); 0 is Kafka's default."""
    values = system_def.config_values(
        validate({"nodes": 3, "seed": 1, "log_segment_bytes": 8192, "log_retention_ms": -1})
    )
    assert (values["config.log_segment_bytes"], values["config.log_retention_ms"]) == ("8192", "-1")
    unset = system_def.config_values(validate({"nodes": 3, "seed": 1}))
    assert (unset["config.log_segment_bytes"], unset["config.log_retention_ms"]) == (
        str(1024**3),
        "604800000",
    )
    with pytest.raises(BadInput, match="log_retention_ms"):
        validate({"nodes": 3, "seed": 1, "log_retention_ms": -2})


def built_in_settings(
    config: TestConfig, broker_id: int, address: str, zookeeper_connect: str, data_dir: str
) -> dict[str, str]:
    """The broker settings the built-in own system wrote for a test config (its broker_settings)."""
    listener = f"PLAINTEXT://{address}:9092"
    settings = {
        "broker.id": str(broker_id),
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": data_dir,
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": str(config.zookeeper_session_timeout_ms),
        "num.partitions": str(config.partitions),
        "default.replication.factor": str(config.replication_factor),
        "min.insync.replicas": str(config.min_insync),
        "unclean.leader.election.enable": "true" if config.unclean_election else "false",
        "eligible.leader.replicas.enable": "true" if config.eligible_leader_replicas else "false",
        "isr.broker.epoch.check.enable": "true" if config.isr_broker_epoch_check else "false",
        "replication.truncation": config.variant,
        "leader.election.policy": config.leader_election_policy,
        "replica.high.watermark.checkpoint.interval.ms": str(
            config.replica_high_watermark_checkpoint_interval_ms
        ),
        "replica.lag.time.max.ms": str(config.replica_lag_time_max_ms),
        "transaction.version": str(config.transaction_version),
        "auto.create.topics.enable": "false",
    }
    if config.log_flush_interval_messages > 0:
        settings["log.flush.interval.messages"] = str(config.log_flush_interval_messages)
    if config.log_segment_bytes > 0:
        settings["log.segment.bytes"] = str(config.log_segment_bytes)
    if not config.leader_epoch_checkpoint_fsync:
        settings["leader.epoch.checkpoint.fsync"] = "false"
    return settings


@pytest.mark.parametrize("settings", [{}, {"log_flush_interval_messages": 1, "eligible_leader_replicas": True,
                                           "variant": "high-watermark", "unclean_election": True},
                                      {"log_segment_bytes": 4096, "leader_epoch_checkpoint_fsync": False}])  # fmt: skip
def test_own_toml_gives_the_broker_every_setting_system_own_does(settings: dict[str, Any]) -> None:
    """`--system own` (systems/own.toml) gives the broker every setting the built-in own system
    (clusters/own.py, before the definition replaced it) wrote, with equal values: `built_in` below."""
    from broker.config import BrokerConfig, parse_properties

    d = system_def.load(REPO / "systems" / "own.toml")
    config = validate({"nodes": 3, "seed": 1, **settings})
    values = system_def.config_values(config)
    for r in d.roles:
        values.update(system_def.role_values(r, [(i + 1, f"10.0.1.{i}") for i in range(d.count(r, config))]))
    values.update(system_def.own_role_values(d.broker_role, values))
    values.update({"id": "2", "address": "10.0.1.1", "home": "/h"})
    (properties,) = [system_def.render_file(f, values) for f in d.broker_role.files]
    from_file = parse_properties(properties)
    built_in = built_in_settings(config, 2, "10.0.1.1", values["zookeeper.servers"], "/h/data")
    assert {k: from_file.get(k) for k in built_in} == built_in
    assert BrokerConfig.from_properties(from_file) == BrokerConfig.from_properties(
        {**built_in, "auto.create.topics.enable": "false"}
    )


@pytest.mark.parametrize(
    ("system", "settings", "refusal"),
    [
        ("kafka", {"kafka_version": "3.2.3"}, "Kafka 3.2.3 cannot run as kafka-kraft.toml: it runs releases >=3.3"),
        ("kafka-zk.toml", {"kafka_version": "4.0.0"}, "Kafka 4.0.0 cannot run as kafka-zk.toml: it runs releases <4.0"),
        ("kafka", {"variant": "high-watermark"}, "variant = high-watermark cannot apply to kafka-kraft"),
        ("kafka", {"kafka_version": "3.9.1", "eligible_leader_replicas": True}, "Kafka 3.9.1 has no eligible"),
        ("kafka-zk.toml", {"kafka_version": "2.0.1", "nemesis": "member"}, "Kafka 2.0.1 cannot reassign"),
        ("kafka", {"kafka_version": "3.9.1", "workload": "txn"}, "Kafka 3.9.1 has no transaction.version 2"),
        ("kafka", {"kafka_version": "4.4"}, "not a Kafka release number"),
        ("kafka", {"kafka_version": "3.9.1", "workload": "txn", "transaction_version": 1}, None),
        ("kafka-zk.toml", {"kafka_version": "0.11.0.3", "nemesis": "kill"}, None),
        ("own.toml", {"log_segment_bytes": 4096, "leader_epoch_checkpoint_fsync": False}, None),
    ],
)  # fmt: skip
def test_what_a_release_cannot_run_is_refused_before_anything_exists(
    system: str, settings: dict[str, Any], refusal: str | None
) -> None:
    from clusters.defined_capabilities import defined_system
    from tests.support.nemesis_fakes import FakeNode

    path = system if system == "kafka" else str(REPO / "systems" / system)
    config = validate({"system": path, "seed": 1, **settings})
    d = system_def.load(path)
    nodes = {r.name: [FakeNode(n, "10.0.0.1") for n in d.node_names(r, config)] for r in d.roles}
    sut = defined_system(config, d, nodes, python=lambda: "python3")
    try:
        why = sut.refusal()
    except BadInput as e:
        why = str(e)
    assert (why is None) if refusal is None else (refusal in str(why)), why


def test_metadata_says_how_the_brokers_list_each_other_and_lead(tmp_path: Path) -> None:
    """Kafka's way by default; brokers that list only themselves lead nothing alone; contradictions
    and membership changes without ids to move partitions between are refused in one line."""
    assert system_def.load(write(tmp_path, MINIMAL)).metadata == system_def.MetadataDef("all", "partition")
    alone = system_def.load(write(tmp_path, '[metadata]\nbrokers = "self"\n' + MINIMAL)).metadata
    assert (alone.brokers, alone.leaders, alone.leaderless) == ("self", "any-broker", True)
    shared = system_def.load(write(tmp_path, '[metadata]\nleaders = "any-broker"\n' + MINIMAL)).metadata
    assert (shared.brokers, shared.leaderless) == ("all", True)
    bad = error_of(tmp_path, '[metadata]\nbrokers = "self"\nleaders = "partition"\n' + MINIMAL)
    assert "metadata.leaders" in bad and "list each other" in bad
    assert "metadata.brokers" in error_of(tmp_path, '[metadata]\nbrokers = "some"\n' + MINIMAL)
    moving = error_of(tmp_path, 'membership = "reassign"\n[metadata]\nleaders = "any-broker"\n' + MINIMAL)
    assert "membership" in moving


def test_an_s3_role_is_reached_through_strandlines_proxy(tmp_path: Path) -> None:
    """`kind = "s3"`: the other roles' `{storage.servers}` name the proxy (`proxy_port`, default the
    store's port + 1), the role's own `{peers}` and `{storage.store_servers}` the store; the broker
    role cannot be one, and only an s3 role has a proxy port."""
    text = MINIMAL.replace("count = 2\nport = 7000\n", 'count = 2\nport = 7000\nkind = "s3"\n')
    d = system_def.load(write(tmp_path, text))
    store = d.role("storage")
    assert (store.kind, store.fronted, store.proxy_port) == ("s3", True, 7001)
    assert d.object_stores() == (store,) and d.needs_node_software()
    seen = system_def.role_values(store, [(1, "10.0.0.1"), (2, "10.0.0.2")])
    assert seen["storage.servers"] == "10.0.0.1:7001,10.0.0.2:7001"
    assert seen["storage.store_servers"] == "10.0.0.1:7000,10.0.0.2:7000"
    assert system_def.own_role_values(store, seen)["peers"] == "10.0.0.1:7000,10.0.0.2:7000"
    assert (
        system_def.load(write(tmp_path, text.replace('kind = "s3"', 'kind = "s3"\nproxy_port = 8000')))
        .role("storage")
        .proxy_port
        == 8000
    )
    assert "proxy_port" in error_of(tmp_path, text.replace('kind = "s3"', 'kind = "s3"\nproxy_port = 7000'))
    plain = error_of(tmp_path, MINIMAL.replace("port = 7000\n", "port = 7000\nproxy_port = 7001\n"))
    assert "roles.storage.proxy_port" in plain and 'kind = "s3"' in plain
    broker = error_of(tmp_path, MINIMAL.replace("port = 9092\n", 'port = 9092\nkind = "s3"\n'))
    assert "roles.broker.kind" in broker
    assert "roles.storage.kind" in error_of(
        tmp_path, MINIMAL.replace("port = 7000\n", 'port = 7000\nkind = "gcs"\n')
    )
