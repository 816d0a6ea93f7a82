"""The Java client driver (`client = "java"`) against a real 3-broker own-broker cluster: the real
kafka-clients in a real JVM, compiled here on first use.

- a mixed run (assigning processes and group members) journals every operation as an invoke and
  one completion, reads back every acknowledged value, commits and rebalances, and the reference
  checker finds it valid;
- its history has the shape of the Python drivers' (one history contract): the same fields, of the
  same types, for every kind of operation and outcome both drivers journal;
- a process killed with SIGKILL takes its JVM with it (PR_SET_PDEATHSIG): what a crash kills;
- client properties the Java client refuses are bad input, before any client of the test exists.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from checkers.api import check_run
from checkers.engines import REFERENCE
from clusters.local import LocalCluster
from foundation.config import TestConfig
from foundation.errors import BadInput
from history.format import validate
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter
from workloads import final_drain, run_workload, setup_topics
from workloads.clients import java

pytestmark = [pytest.mark.integration, pytest.mark.java]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=3, settings={"min.insync.replicas": 2}) as c:
        yield c


def _config(client: str) -> TestConfig:
    base = TestConfig(
        seed=23, topics=1, partitions=2, replication_factor=3, min_insync=2, concurrency=6, rate=80.0
    )
    return base.replace(client=client, consume="mixed")


def _record(config: TestConfig, bootstrap: list[str], run: Path, seconds: float) -> Path:
    """A run directory of `seconds` of load and the final drain, as `strandline run` leaves one."""
    run.mkdir(parents=True)
    (run / "test.json").write_text(json.dumps({"config": config.to_json(), "seed": config.seed}))
    setup_topics(config, bootstrap)
    stop = threading.Event()
    with HistoryWriter(run / "history.jsonl") as history:
        timer = threading.Timer(seconds, stop.set)
        timer.start()
        try:
            run_workload(config, bootstrap, history, stop)
        finally:
            stop.set()
            timer.cancel()
        drain = final_drain(config, bootstrap, history, timeout=60, path=run / "drain.json")
    assert drain.complete, drain.reason
    return run


def _shapes(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """Per (f, type): each field's JSON type; records' fields under `records[]`."""
    shapes: dict[tuple[str, str], dict[str, str]] = {}
    for op in iter_ops(path):
        if op["process"] == "nemesis":
            continue
        fields = {k: type(v).__name__ for k, v in op.items() if k not in ("index", "time")}
        for record in op.get("records") or ():
            fields.update({f"records[].{k}": type(v).__name__ for k, v in record.items()})
        shapes.setdefault((op["f"], op["type"]), {}).update(fields)
    return shapes


@pytest.mark.timeout(300)
def test_a_mixed_java_run_is_valid_and_journals_as_the_python_drivers_do(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap.split(",")
    run = _record(_config("java"), bootstrap, tmp_path / "java", 15)
    history = run / "history.jsonl"
    summary = pair_problems(history)
    assert summary.complete and not summary.open_invocations, summary.problems[:5]
    lines = [json.loads(line) for line in history.read_text().splitlines()]
    assert [validate(op) for op in lines] == [None] * len(lines)
    counts: dict[tuple[str, str], int] = {}
    for op in lines:
        counts[(op["f"], op["type"])] = counts.get((op["f"], op["type"]), 0) + 1
    unexpected = {k: n for k, n in counts.items() if k[1] in ("fail", "info")}
    assert not unexpected, unexpected
    for kind in ("send", "poll", "assign", "subscribe", "commit", "rebalance"):
        assert counts.get((kind, "ok"), 0) > 0, (kind, counts)
    for broker in cluster.broker_ids:  # the replica logs, where `strandline run` collects them
        shutil.copytree(cluster.data_dir(broker), run / "nodes" / f"n{broker}" / "data")
    results = check_run(run, REFERENCE, write=False)
    assert results["valid"] is True, {k: v["count"] for k, v in results["anomalies"].items() if v["count"]}
    assert results["stats"]["sends"]["ok"] == counts[("send", "ok")]

    # The same test with a Python driver: every kind of operation and outcome both journaled has
    # the same fields, of the same JSON types.
    python = _shapes(
        _record(_config("kafka-python"), bootstrap, tmp_path / "kafka-python", 10) / "history.jsonl"
    )
    ours = _shapes(history)
    shared = sorted(set(python) & set(ours))
    assert ("send", "ok") in shared and ("commit", "ok") in shared and ("rebalance", "ok") in shared
    assert {k: ours[k] for k in shared} == {k: python[k] for k in shared}


CHILD = """
import sys, time
from foundation.config import TestConfig
from workloads.clients import java
host = java.start(TestConfig(client="java"))
print(host.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(120)
def test_a_process_killed_with_sigkill_takes_its_jvm_with_it() -> None:
    """What `--crash-clients` kills: the client worker process, and the kernel kills its JVM at the
    same moment (PR_SET_PDEATHSIG), so no Kafka client of the slot survives to send or heartbeat."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True, cwd=REPO, env={**os.environ}
    )
    try:
        assert child.stdout is not None
        jvm = int(child.stdout.readline())
        assert Path(f"/proc/{jvm}").exists()
        child.send_signal(signal.SIGKILL)
        child.wait()
        deadline = time.monotonic() + 5
        while _alive(jvm) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(jvm), "the JVM outlived the process that started it"
    finally:
        child.kill()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_client_properties_the_java_client_refuses_are_bad_input() -> None:
    """Each time: a refusal is not remembered as tried (the JVM is shared by the process's tests)."""
    refused = TestConfig(client="java", java_client_properties=("acks=banana",))
    for _ in range(2):
        with pytest.raises(BadInput, match="java_client_properties.*acks"):
            java.start(refused)


@pytest.mark.timeout(120)
def test_a_client_that_fails_the_brokers_is_its_own_failure_in_one_line(cluster: LocalCluster) -> None:
    """The Java client told to speak TLS to plaintext brokers never gets an answer, while the
    brokers answer strandline's own ApiVersions and Metadata: the client's failure, in one line;
    kafka-python, which talks to them, passes."""
    from workloads.handshake import client_refusal

    bootstrap = cluster.bootstrap.split(",")
    setup_topics(_config("kafka-python"), bootstrap)
    assert client_refusal(_config("kafka-python"), bootstrap) is None
    tls = _config("java").replace(java_client_properties=("security.protocol=SSL",))
    why = client_refusal(tls, bootstrap)
    assert why is not None and "\n" not in why, why
    assert why.startswith("the client kafka-clients ") and "the client's failure, not the system's" in why
    assert all(server in why for server in bootstrap)
