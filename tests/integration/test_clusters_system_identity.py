"""Systems that are not shaped like Kafka, through a definition of the own broker on netns: brokers
whose advertised address names no node are exit 4 in one line naming what each advertised, with
nothing left running; a system whose every broker serves every partition (`[metadata] brokers =
"self"`: the broker answers for itself alone) comes up, a kill run ends valid with recovery waiting
for brokers that answer (no ISR), the report says the partitions have no leader among the nodes,
and a leader-targeted fault is refused before a cluster starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.netns import nothing_left
from tests.support.standin import through_kafka_protocol

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

REPO = Path(__file__).resolve().parents[2]
OWN = REPO / "systems" / "own.toml"
ONE = ["--nodes", "1", "--replication-factor", "1", "--min-insync", "1", "--checker", "reference",
       "--rate", "40", "--concurrency", "2"]  # fmt: skip


def cli(args: list[str], tmp_path: Path, timeout: float = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=REPO,
    )  # fmt: skip


def definition(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_brokers_advertising_no_node_address_are_exit_4_naming_what_each_advertised(tmp_path: Path) -> None:
    text = through_kafka_protocol(OWN.read_text()).replace("advertised.listeners=PLAINTEXT://{address}:{port}",
                                   "advertised.listeners=PLAINTEXT://127.0.0.1:{port}")  # fmt: skip
    path = definition(tmp_path, "elsewhere", text)
    out = cli(["run", "--system", str(path), "--name", "elsewhere", "--time-limit", "5",
               "--store", str(tmp_path / "store"), *ONE], tmp_path)  # fmt: skip
    assert out.returncode == 4, out.stderr[-2000:]
    line = next((x for x in out.stderr.splitlines() if "cannot be mapped" in x), out.stderr[-2000:])
    assert "the brokers cannot be mapped to nodes" in line and "advertises 1 at 127.0.0.1:9092" in line, line
    assert "Traceback" not in out.stderr
    nothing_left(tmp_path, "elsewhere")


@pytest.mark.slow  # 73 s at load 10-12: a bring-up, a 20 s kill run, its report
def test_a_system_whose_brokers_serve_every_partition_runs_without_leaders(tmp_path: Path) -> None:
    path = definition(
        tmp_path, "alone", through_kafka_protocol(OWN.read_text()) + '\n[metadata]\nbrokers = "self"\n'
    )
    refused = cli(["run", "--system", str(path), "--name", "alone", "--nemesis", "kill:leader",
                   "--time-limit", "5", "--store", str(tmp_path / "store"), *ONE], tmp_path, timeout=60)  # fmt: skip
    assert refused.returncode == 2, refused.stderr[-2000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert (
        "target 'leader' needs a partition leader or a controller" in last
        and "serves every partition" in last
    )
    assert "asking what the faults need, before any cluster starts" in refused.stderr
    out = cli(["run", "--system", str(path), "--name", "alone", "--nemesis", "kill", "--nemesis-interval", "5",
               "--time-limit", "20", "--store", str(tmp_path / "store"), *ONE], tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].startswith("verdict: valid ")
    run = Path(out.stdout.strip().splitlines()[-1].split(" ", 2)[2])
    state = json.loads((run / "cluster-state.json").read_text())
    assert state["partitions"] == [] and "serves every partition" in state["leaderless"]
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert any(op.get("f") == "kill" for op in history if op.get("process") == "nemesis")
    assert "partition leaders" in (run / "report.html").read_text()
    nothing_left(tmp_path, "alone")


@pytest.mark.slow  # 118 s at load 40-50: the refusal, a bring-up, a 20 s kill and partition run, its report
@pytest.mark.timeout(300)
def test_three_brokers_declared_leaderless_run_kill_and_partition_without_leaders(tmp_path: Path) -> None:
    """Three own brokers declared `leaders = "any-broker"` (the harness's side of brokers that all
    serve every partition: nothing aims at a leader, recovery waits for brokers that answer): a
    leader-targeted fault is refused before any cluster starts; kill and partition, drawn on three
    nodes for 20 s of load, end valid, and the partitions have no leader in cluster-state.json."""
    path = definition(
        tmp_path, "anyone", through_kafka_protocol(OWN.read_text()) + '\n[metadata]\nleaders = "any-broker"\n'
    )
    three = [
        "--checker",
        "reference",
        "--rate",
        "60",
        "--concurrency",
        "3",
        "--store",
        str(tmp_path / "store"),
    ]
    refused = cli(["run", "--system", str(path), "--name", "anyone", "--nemesis", "partition:leader",
                   "--time-limit", "5", *three], tmp_path, timeout=60)  # fmt: skip
    assert refused.returncode == 2 and "serves every partition" in refused.stderr.strip().splitlines()[-1]
    out = cli(["run", "--system", str(path), "--name", "anyone", "--nemesis", "kill,partition",
               "--nemesis-interval", "6", "--time-limit", "20", *three], tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    run = Path(out.stdout.strip().splitlines()[-1].split(" ", 2)[2])
    assert "serves every partition" in json.loads((run / "cluster-state.json").read_text())["leaderless"]
    faults = {op["f"] for op in map(json.loads, (run / "history.jsonl").read_text().splitlines())
              if op.get("process") == "nemesis" and op["type"] == "ok"}  # fmt: skip
    assert faults & {"kill", "partition"}, faults
    nothing_left(tmp_path, "anyone")
