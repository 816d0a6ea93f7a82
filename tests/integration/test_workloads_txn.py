"""The transactional workload (`--workload txn`) on real clusters.

- confluent-kafka against a local 3-broker own cluster: transactions commit and abort, the
  read_committed drain reads every committed send and no aborted one, and the reference checker
  finds the history valid;
- `strandline run --workload txn` (kafka-python, the default) end to end on a netns cluster with a
  broker killed during the load: valid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from checkers.reference import check_history
from clusters.local import LocalCluster
from foundation.config import TestConfig
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter
from workloads import final_drain, run_workload, setup_topics

pytestmark = pytest.mark.integration


@pytest.mark.timeout(240)
def test_confluent_kafka_transactions_commit_abort_and_read_committed(tmp_path: Path) -> None:
    config = TestConfig(
        seed=19, topics=1, partitions=2, concurrency=4, rate=60.0, client="confluent-kafka",
        workload="txn", abort_p=0.3, transaction_timeout_ms=5000,
    )  # fmt: skip
    path = tmp_path / "history.jsonl"
    with LocalCluster(3, settings={"min.insync.replicas": 2}) as cluster:
        bootstrap = cluster.bootstrap.split(",")
        setup_topics(config, bootstrap)
        stop = threading.Event()
        threading.Timer(8, stop.set).start()
        with HistoryWriter(path) as history:
            stats = run_workload(config, bootstrap, history, stop)
            drain = final_drain(config, bootstrap, history, timeout=60)
    assert drain.complete and drain.unsettled == {}, drain.reason
    assert pair_problems(path).complete
    committed: set[int] = set()
    aborted: set[int] = set()
    drained: set[int] = set()
    for op in iter_ops(path):
        if op["f"] == "txn" and op["type"] in ("ok", "fail"):
            sent = {m["value"] for m in op["mops"] if m["f"] == "send"}
            (committed if op["type"] == "ok" else aborted).update(sent)
        elif op["f"] == "poll" and op["type"] == "ok":
            drained.update(r["value"] for r in op["records"])
    assert stats.counts["txn"]["ok"] > 10 and aborted, stats.counts["txn"]
    assert committed <= drained and not aborted & drained
    result = check_history(path)
    assert {
        n: a["count"] for n, a in result["anomalies"].items() if a["count"] and n not in ("G0", "G1c")
    } == {}
    assert result["anomalies"]["G1c"].get("wr_only", 0) == 0


@pytest.mark.timeout(420)
def test_run_txn_workload_with_a_broker_killed_is_valid(tmp_path: Path) -> None:
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    schedule = tmp_path / "test.toml"
    schedule.write_text(
        'schedule = [{wait = 4}, {do = "kill", target = "leader", topic = "__transaction_state", partition = 0},'
        ' {wait = 6}, {heal = "all"}]\n'
    )
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--config", str(schedule), "--workload", "txn",
         "--time-limit", "16", "--rate", "60", "--concurrency", "4", "--checker", "reference",
         "--store", str(tmp_path / "store"), "--seed", "5"],
        capture_output=True, text=True, env=env, timeout=400, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    run = Path(out.stdout.strip().splitlines()[-1].split(" ", 2)[2])
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True
    ops = list(iter_ops(run / "history.jsonl"))
    kills = [op for op in ops if op["process"] == "nemesis" and op["f"] == "kill"]
    assert kills and kills[0]["type"] == "invoke"
    # Transactions commit before the coordinator's broker is killed and again after it (the
    # coordinator moved with __transaction_state's leadership); how many depends on the machine.
    committed = [op["index"] for op in ops if op["f"] == "txn" and op["type"] == "ok"]
    assert min(committed) < kills[0]["index"] < max(committed), (len(committed), kills[0]["index"])
    print(f"txn run: {time.monotonic() - started:.0f} s wall, {results['stats']['txns']}")
