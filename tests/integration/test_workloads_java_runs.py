"""`strandline run --client java` as a user runs it: the official Java client against the own broker
and against real Apache Kafka (`--system kafka`, fetched from Maven Central by the test itself).

In CI: bad input ends before any cluster starts, in one line: no JDK is exit 4 saying what is
missing; a kafka-clients version Maven Central lacks is exit 2 naming it and the nearest releases.
Slow (a minute or two each on a loaded 2-core machine; docs/development.md): against the own
broker, kill and partition faults; subscribing members under faults and client crashes, with
rebalances and commits journaled; transactions under faults. Against real Kafka: a fault-free run
of assigning processes and group members on KIP-848's consumer protocol; kill and partition
faults; subscribing members under faults and client crashes; members on KIP-848's protocol under
faults; transactions under faults. Every one valid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.java, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
LOAD = ["--client", "java", "--checker", "reference", "--rate", "100", "--concurrency", "6"]
FAULTS = ["--nemesis", "kill,partition", "--nemesis-interval", "8"]


def run(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> tuple[int, str, Path | None]:
    """(exit code, stderr, run directory) of one `strandline run`; no cluster may be left behind."""
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state"), **(env or {})}
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--store", str(tmp_path / "store"), *LOAD, *args],
        capture_output=True, text=True, env=env, timeout=560, check=False, cwd=REPO,
    )  # fmt: skip
    assert list((tmp_path / "state").glob("*.json")) == [], "a cluster was left behind"
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    return out.returncode, out.stderr, Path(last.split(" ", 2)[2]) if last.startswith("verdict: ") else None


def valid_run(args: list[str], tmp_path: Path) -> Counter[tuple[str, str]]:
    """Run; assert exit 0 and valid; the history's (f, type) counts of completions."""
    code, err, run_dir = run(args, tmp_path)
    assert run_dir is not None, err[-3000:]
    results = json.loads((run_dir / "results.json").read_text())
    found = {k: v["count"] for k, v in results["anomalies"].items() if v["count"]}
    assert code == 0 and results["valid"] is True, (code, results["valid"], found, err[-2000:])
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    test = json.loads((run_dir / "test.json").read_text())["config"]
    assert (test["client"], test["idempotence"]) == ("java", True)  # the safe preset
    return Counter((op["f"], op["type"]) for op in history if op["type"] != "invoke")


def test_bad_input_ends_before_any_cluster_in_one_line(tmp_path: Path) -> None:
    venv_only = {"PATH": str(Path(sys.executable).parent), "JAVA_HOME": ""}
    code, err, _ = run(["--time-limit", "5"], tmp_path, env=venv_only)
    assert code == 4, err[-2000:]
    assert "--client java needs a JDK: no javac on PATH" in err and "Traceback" not in err

    code, err, _ = run(["--time-limit", "5", "--java-client-version", "4.4.99"], tmp_path)
    assert code == 2, err[-2000:]
    line = next(line for line in err.splitlines() if line.startswith("failed:"))
    assert "kafka-clients 4.4.99 is not on Maven Central (nearest releases:" in line and "4.4.0" in line
    assert "Traceback" not in err

    refused = tmp_path / "refused.toml"
    refused.write_text('java_client_properties = ["acks=banana"]\n')
    code, err, _ = run(["--time-limit", "5", "--config", str(refused)], tmp_path)
    assert code == 2, err[-2000:]
    line = next(line for line in err.splitlines() if line.startswith("failed:"))
    assert "java_client_properties" in line and "acks" in line and "Traceback" not in err
    assert not (tmp_path / "store").exists() or not list((tmp_path / "store").rglob("history.jsonl"))


@pytest.mark.slow
def test_own_broker_kill_and_partition(tmp_path: Path) -> None:
    done = valid_run([*FAULTS, "--time-limit", "30", "--seed", "3"], tmp_path)
    assert done[("send", "ok")] > 0 and done[("poll", "ok")] > 0
    assert done[("kill", "ok")] + done[("partition", "ok")] > 0, done


@pytest.mark.slow
def test_own_broker_subscribe_with_faults_and_crashed_clients(tmp_path: Path) -> None:
    args = ["--consume", "subscribe", "--crash-clients", "10", *FAULTS, "--time-limit", "40", "--seed", "11"]
    done = valid_run(args, tmp_path)
    assert done[("rebalance", "ok")] > 0 and done[("commit", "ok")] > 0, done
    assert done[("crash", "info")] > 0, done


@pytest.mark.slow
def test_own_broker_transactions_with_faults(tmp_path: Path) -> None:
    done = valid_run(["--workload", "txn", *FAULTS, "--time-limit", "30", "--seed", "5"], tmp_path)
    assert done[("txn", "ok")] > 0 and done[("txn", "fail")] > 0, done


@pytest.mark.slow
def test_real_kafka_fault_free_with_the_consumer_group_protocol(release: str, tmp_path: Path) -> None:
    args = ["--system", "kafka", "--consume", "mixed", "--group-protocol", "consumer", "--time-limit", "20"]
    done = valid_run([*args, "--seed", "7"], tmp_path)
    assert done[("assign", "ok")] > 0 and done[("rebalance", "ok")] > 0 and done[("commit", "ok")] > 0, done
    assert not [k for k in done if k[1] in ("fail", "info")], done


# Real Kafka under FAULTS at the default 6 s broker session: three Kafka brokers killed at once serve
# again 18-32 s after their start on a loaded 2-core machine, and verdict power counts each fault
# window's recovery from then (the nemesis's `ready` op), not from the start.
REAL_KAFKA_FAULTS = ["--system", "kafka", *FAULTS]


@pytest.mark.slow
def test_real_kafka_kill_and_partition(release: str, tmp_path: Path) -> None:
    done = valid_run([*REAL_KAFKA_FAULTS, "--time-limit", "30", "--seed", "3"], tmp_path)
    assert done[("send", "ok")] > 0 and done[("kill", "ok")] + done[("partition", "ok")] > 0, done
    assert done[("ready", "ok")] > 0, done  # the healed brokers served again, journaled


@pytest.mark.slow
def test_real_kafka_subscribe_with_faults_and_crashed_clients(release: str, tmp_path: Path) -> None:
    args = [*REAL_KAFKA_FAULTS, "--consume", "subscribe", "--crash-clients", "10"]
    done = valid_run([*args, "--time-limit", "40", "--seed", "11"], tmp_path)
    assert done[("rebalance", "ok")] > 0 and done[("commit", "ok")] > 0, done
    assert done[("crash", "info")] > 0, done


@pytest.mark.slow
def test_real_kafka_consumer_group_protocol_with_faults(release: str, tmp_path: Path) -> None:
    """KIP-848's consumer protocol: the broker assigns, members heartbeat to it; under kills and
    partitions its members still get partitions, commit, and the run is valid."""
    args = [*REAL_KAFKA_FAULTS, "--consume", "subscribe", "--group-protocol", "consumer"]
    done = valid_run([*args, "--time-limit", "30", "--seed", "13"], tmp_path)
    assert done[("rebalance", "ok")] > 0 and done[("commit", "ok")] > 0, done


@pytest.mark.slow
def test_real_kafka_transactions_with_faults(release: str, tmp_path: Path) -> None:
    done = valid_run([*REAL_KAFKA_FAULTS, "--workload", "txn", "--time-limit", "30", "--seed", "5"], tmp_path)
    assert done[("txn", "ok")] > 0 and done[("txn", "fail")] > 0, done
