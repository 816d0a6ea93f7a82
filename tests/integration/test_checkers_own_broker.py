"""The checker on a real run of the own broker: real history, real data dirs, real cluster state.

A 3-broker cluster (ZooKeeper + brokers on 127.0.0.1) takes the queue workload for a few seconds
and a final drain; the run directory is laid out as `strandline run` lays it out. The reference
checker must call it valid, then invalid once the leader's log of a partition is removed, and
unknown once a node's data dir is missing.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from checkers.api import check_run
from checkers.engines import REFERENCE, SPARK
from clusters.local import LocalCluster
from foundation.config import TestConfig
from history.reader import iter_ops
from history.writer import HistoryWriter
from workloads import final_drain, run_workload, setup_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _stop_after_sends(path: Path, stop: threading.Event, seconds: float = 4.0, sends: int = 50) -> None:
    """Stop the load after `seconds`, or later on a slow machine: once more than `sends` sends
    are acknowledged (at most 60 s)."""
    started = time.monotonic()
    while not stop.wait(0.5):
        elapsed = time.monotonic() - started
        if elapsed >= 60 or (
            elapsed >= seconds
            and sum(op["f"] == "send" and op["type"] == "ok" for op in iter_ops(path, problems=[])) > sends
        ):
            stop.set()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("checkers-own")
    run = base / "run"
    run.mkdir()
    config = TestConfig(
        seed=23, topics=1, partitions=2, replication_factor=3, min_insync=2, concurrency=3, rate=80.0, nodes=3
    )
    (run / "test.json").write_text(json.dumps({"config": config.to_json(), "seed": config.seed}))
    with LocalCluster(brokers=3, settings={"min.insync.replicas": 2}, base_dir=base / "cluster") as cluster:
        bootstrap = cluster.bootstrap.split(",")
        setup_topics(config, bootstrap)
        stop = threading.Event()
        watcher = threading.Thread(target=_stop_after_sends, args=(run / "history.jsonl", stop), daemon=True)
        with HistoryWriter(run / "history.jsonl") as history:
            watcher.start()
            try:
                run_workload(config, bootstrap, history, stop)
            finally:
                stop.set()
            drain = final_drain(config, bootstrap, history, timeout=60, path=run / "drain.json")
        assert drain.complete, drain
        partitions = []
        for p in range(config.partitions):
            state = cluster.partition_state("t0", p) or {}
            leader = state.get("leader")
            partitions.append(
                {"topic": "t0", "partition": p, "leader": f"n{leader}", "isr": state.get("isr")}
            )
        (run / "cluster-state.json").write_text(json.dumps({"partitions": partitions}))
        data_dirs = {b: cluster.data_dir(b) for b in cluster.broker_ids}
    for broker_id, data in data_dirs.items():
        shutil.copytree(data, run / "nodes" / f"n{broker_id}" / "data")
    return run


def test_a_clean_run_is_valid(run_dir: Path) -> None:
    results = check_run(run_dir, REFERENCE)
    assert results["valid"] is True, (results["incomplete"], results["explanation"])
    assert results["stats"]["sends"]["ok"] > 50
    assert results["stats"]["records_read"] >= results["stats"]["sends"]["ok"]
    replicas = results["stats"]["replicas"]
    assert sorted(replicas) == ["t0-0", "t0-1"]
    for partition in replicas.values():
        assert partition["leader_known"] is True and len(partition["replicas"]) == 3
        assert len({r["log_end"] for r in partition["replicas"]}) == 1  # in sync after the drain


def same_results(run: Path) -> dict[str, Any]:
    """The run's results.json from Spark, asserted equal to the reference's (but for `checker`);
    so is evidence.json, what the report shows."""
    on_spark = check_run(run, SPARK)
    spark_evidence = json.loads((run / "evidence.json").read_text())
    reference = check_run(run, REFERENCE)
    assert {k: v for k, v in on_spark.items() if k != "checker"} == {
        k: v for k, v in reference.items() if k != "checker"
    }
    assert spark_evidence == json.loads((run / "evidence.json").read_text())
    return on_spark


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_spark_reads_the_real_data_dirs_as_the_reference_does(
    run_dir: Path, spark: Any, tmp_path: Path
) -> None:
    """The replica-log checks on Spark, on real segments: one partition as the run left it, the
    other with its leader's log torn in the middle."""
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    leader = json.loads((broken / "cluster-state.json").read_text())["partitions"][1]["leader"]
    for segment in (broken / "nodes" / leader / "data" / "t0-1").glob("*.log"):
        segment.write_bytes(segment.read_bytes()[: len(segment.read_bytes()) // 2])
    results = same_results(broken)
    assert results["fatal"] == ["lost-committed-on-replicas"]
    replicas = results["stats"]["replicas"]
    assert all(not r["absent_acked"] for r in replicas["t0-0"]["replicas"])
    [on_leader] = [r for r in replicas["t0-1"]["replicas"] if r["node"] == leader]
    assert on_leader["absent_acked"]  # the report's red marks


def test_a_lost_leader_log_is_invalid_and_a_missing_data_dir_unknown(run_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    state = json.loads((broken / "cluster-state.json").read_text())
    leader = state["partitions"][0]["leader"]
    for segment in (broken / "nodes" / leader / "data" / "t0-0").glob("*.log"):
        segment.write_bytes(b"")
    results = check_run(broken, REFERENCE)
    assert results["valid"] is False and results["fatal"] == ["lost-committed-on-replicas"]
    assert results["anomalies"]["lost-committed-on-replicas"]["examples"][0]["leader"] == leader

    missing = tmp_path / "missing"
    shutil.copytree(run_dir, missing)
    shutil.rmtree(missing / "nodes" / "n2" / "data")
    results = check_run(missing, REFERENCE)
    assert results["valid"] == "unknown"
    assert any("n2 has no data dir" in r for r in results["incomplete"])
