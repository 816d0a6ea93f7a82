"""The own broker and ZooKeeper started only through systems/own.toml (a system definition file),
on netns: `cluster up` prints the bootstrap line; a run with `kill:role=zookeeper` (and pause, a cut
between the roles, the leader cut off and the leader killed, aimed from Kafka Metadata) is valid,
shows the kill of node zk in the history and heals; a system that never becomes ready is exit 4
with its log's last lines in harness.log and nothing left running; a bad definition (unknown key,
no start command, unknown template value, count below one) is exit 2 in one line;
a system without InitProducerId and group APIs refuses them and the report says so; lose-unsynced puts the
broker role's data dirs on lazyfs (real Apache Kafka through its definitions: test_clusters_kafka.py).
Slow (about a minute each): a kill and partition run with the safe settings is valid, and
kip-101-truncation with the high-watermark variant, run through the definition, is invalid. In CI
the docker test below runs the definition under a leader cut off and killed (valid), and
test_broker_faults.py's scripted KIP-101 scenario loses data with high-watermark truncation.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.scenarios import SEED_SCENARIO, scenario

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
OWN = str(REPO / "systems" / "own.toml")
LOAD = ["--checker", "reference", "--rate", "60", "--concurrency", "4"]


def cli(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=REPO,
    )  # fmt: skip


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}


def run_dir(out: subprocess.CompletedProcess[str]) -> Path:
    return Path(out.stdout.strip().splitlines()[-1].split(" ", 2)[2])


def nothing_left(tmp_path: Path) -> None:
    assert list((tmp_path / "state").glob("*.json")) == []


SIDECAR = """
[roles.cache]
count = 2
port = 8080
start = ["{python}", "-m", "http.server", "{port}", "--bind", "{address}"]
ready = "port"
"""


def test_cluster_up_through_the_definition_prints_the_bootstrap_line(tmp_path: Path) -> None:
    """systems/own.toml plus a third role (two web servers) as `strandline cluster up` runs it."""
    env, state = environment(tmp_path), tmp_path / "cluster.json"
    definition = tmp_path / "own-and-cache.toml"
    definition.write_text(Path(OWN).read_text() + SIDECAR)
    started = time.monotonic()
    out = cli(["cluster", "up", "--system", str(definition), "--nodes", "1", "--replication-factor", "1",
               "--min-insync", "1", "--state", str(state)], env)  # fmt: skip
    try:
        assert out.returncode == 0, out.stderr[-2000:]
        last = out.stdout.strip().splitlines()[-1]
        assert last.startswith("bootstrap: 10.77.") and last.endswith(":9092"), last
        status = cli(["cluster", "status", "--state", str(state), "--json"], env, timeout=60)
        info = json.loads(status.stdout)
        assert status.returncode == 0 and info["controller"] == "n1"
        roles = {
            n["name"]: (n["role"], [p["name"] for p in n["processes"] if p["running"]]) for n in info["nodes"]
        }
        assert roles == {"n1": ("broker", ["broker"]), "zk": ("zookeeper", ["zookeeper"]),
                         "ca1": ("cache", ["cache"]), "ca2": ("cache", ["cache"])}  # fmt: skip
    finally:
        down = cli(["cluster", "down", "--state", str(state)], env, timeout=60)
    assert down.returncode == 0, down.stderr
    nothing_left(tmp_path)
    print(f"cluster up/status/down through systems/own.toml: {time.monotonic() - started:.0f} s")


@pytest.mark.slow
def test_faults_aimed_at_the_zookeeper_role_show_in_the_history_and_heal(tmp_path: Path) -> None:
    """`kill` of the zookeeper role (`role=zookeeper`), `pause` of the role and a cut between the
    roles (`partition` with grudge `broker|zookeeper`): each hits node zk, each heals. Then the
    leader-aimed faults, aimed from Kafka Metadata as clients see it: the leader cut off from
    everyone, and the leader killed: each finds a broker, the run heals and is valid (safe settings)."""
    env = environment(tmp_path)
    config = tmp_path / "roles.toml"
    config.write_text(
        "schedule = [\n"
        '  { wait = 2 }, { do = "kill", target = "role=zookeeper" }, { wait = 2 }, { heal = "all" },\n'
        '  { do = "pause", target = "role=zookeeper" }, { wait = 2 }, { heal = "all" },\n'
        '  { do = "partition", grudge = "broker|zookeeper" }, { wait = 2 }, { heal = "all" },\n'
        '  { do = "partition", grudge = "leader" }, { wait = 2 }, { heal = "all" },\n'
        '  { do = "kill", target = "leader" }, { wait = 2 }, { heal = "all" },\n'
        "]\n"
    )
    started = time.monotonic()
    out = cli(["run", "--config", str(config), "--system", OWN, "--name", "zkrole", "--time-limit", "22",
               "--store", str(tmp_path / "store"), *LOAD], env)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    run = run_dir(out)
    assert out.stdout.strip().splitlines()[-1] == f"verdict: valid {run}"
    nemesis = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    ok = [op for op in nemesis if op["process"] == "nemesis" and op["type"] == "ok"]
    kills = [op["value"]["nodes"] for op in ok if op["f"] == "kill"]
    starts = [op["value"]["nodes"] for op in ok if op["f"] == "start"]
    assert kills[0] == ["zk"] and starts[0] == ["zk"]
    assert len(kills) == 2 and len(kills[1]) == 1 and kills[1][0] in ("n1", "n2", "n3")  # the leader
    assert starts[1] == kills[1]
    cuts = [op["value"]["grudge"] for op in ok if op["f"] == "partition"]
    assert len(cuts) == 2
    brokers = {"n1", "n2", "n3"}
    isolated = [n for n in sorted(brokers) if set(cuts[1].get(n, [])) >= brokers - {n}]
    assert len(isolated) == 1, cuts[1]  # the leader, cut from the other brokers
    done = {op["f"]: op["value"] for op in ok if op["f"] not in ("kill", "start", "partition")}
    done["partition"] = {"grudge": cuts[0]}
    assert done["pause"]["nodes"] == ["zk"] and done["resume"]["nodes"] == ["zk"]
    cut = done["partition"]["grudge"]
    assert cut["zk"] == ["n1", "n2", "n3"] and all(cut[n] == ["zk"] for n in ("n1", "n2", "n3"))
    assert "heal" in done
    assert any((run / "nodes" / "zk" / "logs").iterdir())
    assert any((run / "nodes" / "n1" / "data").glob("t0-*/*.log"))
    nothing_left(tmp_path)
    print(f"faults aimed at the zookeeper role: {time.monotonic() - started:.0f} s")


def test_data_dirs_not_in_kafka_format_leave_the_verdict_to_the_history(tmp_path: Path) -> None:
    """The own broker declared with data_format = "other": no replica-log checks, the verdict is the
    history's (valid, not unknown), and results.json and the report say why."""
    text = Path(OWN).read_text()
    assert 'data_format = "kafka"' in text
    definition = tmp_path / "opaque.toml"
    definition.write_text(text.replace('data_format = "kafka"', 'data_format = "other"'))
    out = cli(["run", "--system", str(definition), "--name", "opaque", "--nodes", "1", "--replication-factor",
               "1", "--min-insync", "1", "--time-limit", "5", "--store", str(tmp_path / "store"), *LOAD],
              environment(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    run = run_dir(out)
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True and results["incomplete"] == []
    assert "not available for this system" in results["replicas_unavailable"]
    assert "Not available: the replica-log checks were not available" in (run / "report.html").read_text()
    nothing_left(tmp_path)


def test_a_system_that_never_becomes_ready_is_exit_4_with_its_log(tmp_path: Path) -> None:
    definition = tmp_path / "stuck.toml"
    definition.write_text(
        "[roles.broker]\nport = 9092\n"
        "start = \"sh -c 'echo the-broker-is-thinking; sleep 600'\"\n"
        'ready = { kind = "kafka", timeout = 3 }\n'
    )
    env = environment(tmp_path)
    out = cli(["run", "--system", str(definition), "--nodes", "1", "--replication-factor", "1",
               "--min-insync", "1", "--time-limit", "5", "--store", str(tmp_path / "store"), *LOAD], env)  # fmt: skip
    assert out.returncode == 4, out.stderr[-2000:]
    logs = list((tmp_path / "store").glob("*/*/harness.log"))
    assert logs and "the-broker-is-thinking" in logs[0].read_text()
    assert "not ready within" in out.stderr
    nothing_left(tmp_path)
    assert not any(ns.startswith("sl-") and "stuck" in ns for ns in namespaces())


GOOD_BROKER = "[roles.broker]\nport = 9092\nstart = 'b --id {id}'\n"


@pytest.mark.parametrize(
    ("text", "key", "what"),
    [
        (GOOD_BROKER + "colour = 'red'\n", "roles.broker.colour", "unknown key"),
        ("[roles.broker]\nport = 9092\n", "roles.broker.start", "missing start command"),
        (GOOD_BROKER.replace("{id}", "{node_number}"), "roles.broker.start", "unknown template value {node_number}"),
        (GOOD_BROKER + "[roles.zookeeper]\ncount = 0\nport = 2181\nstart = 'zk'\n", "roles.zookeeper.count",
         "must be at least 1"),
    ],
)  # fmt: skip
def test_a_bad_definition_is_one_line_and_exit_2(tmp_path: Path, text: str, key: str, what: str) -> None:
    definition = tmp_path / "bad.toml"
    definition.write_text(text)
    store = tmp_path / "store"
    out = cli(["run", "--system", str(definition), "--time-limit", "5", "--store", str(store)],
              environment(tmp_path), timeout=60)  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert f"{definition}: {key}: {what}" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not store.exists()  # refused before a run dir
    nothing_left(tmp_path)


@pytest.mark.slow
def test_a_kill_and_partition_run_with_the_safe_settings_is_valid(tmp_path: Path) -> None:
    out = cli(["run", "--system", OWN, "--name", "defkill", "--time-limit", "30", "--nemesis", "kill,partition",
               "--nemesis-interval", "6", "--store", str(tmp_path / "store"), *LOAD], environment(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].startswith("verdict: valid ")
    nothing_left(tmp_path)


@pytest.mark.slow
def test_kip_101_truncation_through_the_definition_is_invalid_with_high_watermark(tmp_path: Path) -> None:
    config = scenario(SEED_SCENARIO).config(safe=False, seed=1, store=str(tmp_path / "store"))
    config_file = tmp_path / "kip101.json"
    config_file.write_text(json.dumps(config.replace(system=OWN, checker="reference").to_json()))
    out = cli(["run", "--config", str(config_file)], environment(tmp_path), timeout=280)
    assert out.returncode == 1, out.stderr[-3000:]
    run = run_dir(out)
    assert out.stdout.strip().splitlines()[-1] == f"verdict: invalid {run}"
    assert json.loads((run / "test.json").read_text())["config"]["system"] == OWN
    nothing_left(tmp_path)


@pytest.mark.docker
def test_the_definition_runs_on_docker_and_the_zookeeper_role_is_killed_and_healed(tmp_path: Path) -> None:
    """The same file on the docker backend (containers, process groups instead of cgroups), three
    brokers with the safe settings: the zookeeper role killed, the leader cut off from the other
    brokers, the leader killed (both aimed from Kafka Metadata): valid, each healed."""
    config = tmp_path / "docker.toml"
    config.write_text(
        "schedule = [\n"
        '  { wait = 2 }, { do = "kill", target = "role=zookeeper" }, { wait = 2 }, { heal = "all" },\n'
        '  { do = "partition", grudge = "leader" }, { wait = 2 }, { heal = "all" },\n'
        '  { do = "kill", target = "leader" }, { wait = 2 }, { heal = "all" },\n'
        "]\n"
    )
    started = time.monotonic()
    out = cli(["run", "--config", str(config), "--system", OWN, "--backend", "docker", "--name", "dockzk",
               "--time-limit", "16", "--store", str(tmp_path / "store"), *LOAD], environment(tmp_path),
              timeout=280)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    run = run_dir(out)
    assert out.stdout.strip().splitlines()[-1] == f"verdict: valid {run}"
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    ok = [op for op in ops if op["process"] == "nemesis" and op["type"] == "ok"]
    kills = [op["value"]["nodes"] for op in ok if op["f"] == "kill"]
    starts = [op["value"]["nodes"] for op in ok if op["f"] == "start"]
    assert kills[0] == ["zk"] and len(kills) == 2 and kills[1][0] in ("n1", "n2", "n3") and starts == kills
    [cut] = [op["value"]["grudge"] for op in ok if op["f"] == "partition"]
    brokers = {"n1", "n2", "n3"}
    assert len([n for n in brokers if set(cut.get(n, [])) >= brokers - {n}]) == 1, cut
    nothing_left(tmp_path)
    print(f"docker run through systems/own.toml: {time.monotonic() - started:.0f} s")


@pytest.mark.ssh
def test_the_definition_runs_over_ssh(tmp_path: Path) -> None:
    """systems/own.toml on the ssh backend (sshd in namespaces, as test_clusters_ssh.py): the hosts
    get strandline's software because the definition runs `{python}` under faketime; up, Metadata,
    kill and start of the ZooKeeper role, down with nothing left."""
    import secrets

    from clusters.factory import build_cluster
    from foundation.config import validate
    from tests.support.sshd import SshdHosts

    work = tmp_path / "sshd"
    work.mkdir()
    hosts = SshdHosts(2, work)
    started = time.monotonic()
    try:
        hosts.start()
        config = validate({"system": OWN, "backend": "ssh", "nodes": 1, "replication_factor": 1, "min_insync": 1,
                           "seed": 1, "ssh_hosts": [dataclasses.asdict(hosts.host(i)) for i in range(2)]})  # fmt: skip
        c = build_cluster(
            config, tmp_path / "work", name=f"ss{secrets.token_hex(2)}", state_dir=tmp_path / "state"
        )
        with c:
            assert c.bootstrap_servers() == [f"{hosts.addresses[0]}:9092"]
            assert c.sut.registered_brokers() == [1]
            zk = c.node("zk")
            c.sut.kill(zk)
            assert zk.daemon_pid("zookeeper") is None
            c.sut.start(zk, wait_ready=True)
    finally:
        hosts.stop()
    assert hosts.leftovers() == []
    nothing_left(tmp_path)
    print(f"ssh cluster through systems/own.toml: {time.monotonic() - started:.0f} s")


GROUP_APIS = "FindCoordinator,JoinGroup,SyncGroup,Heartbeat,LeaveGroup,OffsetCommit,OffsetFetch"


def test_features_a_system_lacks_are_its_refusals_and_the_report_says_so(tmp_path: Path) -> None:
    """The own broker declared with `unsupported.apis` (a system without the idempotent producer and
    without consumer groups), a test with `idempotence = true` and `--consume subscribe`: every send
    ends `fail` and every group poll `info` with the client's account of the refusal; nothing was
    tested, so the verdict is `unknown` (exit 3, too little load), and results.json's `refused` and
    the report say what was refused."""
    text = Path(OWN).read_text()
    assert "auto.create.topics.enable=false\n" in text
    definition = tmp_path / "lacking.toml"
    definition.write_text(text.replace("auto.create.topics.enable=false\n",
                                       f"auto.create.topics.enable=false\nunsupported.apis=InitProducerId,{GROUP_APIS}\n"))  # fmt: skip
    config = tmp_path / "idempotent.toml"
    config.write_text("idempotence = true\n")
    started = time.monotonic()
    out = cli(["run", "--config", str(config), "--system", str(definition), "--name", "lacking", "--nodes", "1",
               "--replication-factor", "1", "--min-insync", "1", "--consume", "subscribe", "--time-limit", "12",
               "--store", str(tmp_path / "store"), *LOAD], environment(tmp_path))  # fmt: skip
    assert out.returncode == 3, out.stderr[-3000:]
    run = run_dir(out)
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    sends = [op for op in ops if op["f"] == "send" and op["type"] != "invoke"]
    assert sends and {op["type"] for op in sends} == {"fail"}
    assert all("InitProducerId" in op["error"] for op in sends)
    refused_polls = [
        op for op in ops if op["f"] == "poll" and "FindCoordinatorRequest" in op.get("error", "")
    ]
    assert refused_polls and {op["type"] for op in refused_polls} == {"info"}
    results = json.loads((run / "results.json").read_text())
    refused = results["refused"]
    assert results["valid"] == "unknown" and refused["idempotence"]["missing_apis"] == ["InitProducerId"]
    assert any("too little load" in r for r in results["power"]["reasons"])
    assert refused["idempotence"]["ops"] == {"fail": len(sends), "info": 0}
    assert refused["idempotence"]["asked"] == "idempotence = true"
    assert "FindCoordinator" in refused["consumer groups"]["missing_apis"]
    assert refused["consumer groups"]["ops"]["info"] >= len(refused_polls)
    report = (run / "report.html").read_text()
    assert (
        "Refused by the system: idempotence (idempotence = true): its brokers do not offer InitProducerId"
        in report
    )
    assert "Refused by the system: consumer groups (consume = subscribe)" in report
    nothing_left(tmp_path)
    print(f"a run against a system without idempotence and groups: {time.monotonic() - started:.0f} s")


@pytest.mark.slow
def test_lose_unsynced_mounts_the_definitions_data_dirs_on_lazyfs(tmp_path: Path) -> None:
    """systems/own.toml with `lose-unsynced`: the broker role's data dir is mounted on lazyfs, the
    fault drops what the broker never fsynced (Kafka's default: no fsync on append), so with one
    replica acknowledged writes are lost and the run is invalid; the mount is gone afterwards."""
    config = tmp_path / "power-loss.toml"
    config.write_text(
        'schedule = [{ wait = 6 }, { do = "lose-unsynced", target = "all" }, { wait = 2 }, { heal = "all" }]\n'
    )
    started = time.monotonic()
    out = cli(["run", "--config", str(config), "--system", OWN, "--name", "lazy", "--nodes", "1",
               "--replication-factor", "1", "--min-insync", "1", "--time-limit", "12", "--store",
               str(tmp_path / "store"), *LOAD], environment(tmp_path))  # fmt: skip
    assert out.returncode == 1, out.stderr[-3000:]
    run = run_dir(out)
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    drops = [op for op in ops if op["f"] == "lose-unsynced" and op["type"] == "ok"]
    assert len(drops) == 1 and drops[0]["value"]["dropped"]["n1"][0]["bytes"] > 0
    assert any(op["f"] == "start" and op["type"] == "ok" for op in ops if op["process"] == "nemesis")
    assert (run / "nodes" / "n1" / "logs" / "lazyfs0.log").is_file()
    results = json.loads((run / "results.json").read_text())
    losses = {"lost-write", "unseen", "inconsistent-offsets", "lost-committed-on-replicas"}
    assert results["valid"] is False and losses & set(results["fatal"]), results["fatal"]
    mounts = Path("/proc/mounts").read_text()
    assert str(tmp_path) not in mounts
    nothing_left(tmp_path)
    print(f"lose-unsynced through systems/own.toml: {time.monotonic() - started:.0f} s")
