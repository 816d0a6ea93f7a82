"""Consumer groups and crashing clients with real clients on real brokers.

- fast (a 3-broker own-broker cluster on 127.0.0.1, ~15 s of load per driver): kafka-python and
  confluent-kafka both work as group members: the history shows subscribes, rebalances and commits
  (explicit and automatic), `--crash-clients` kills client processes that are journaled as
  `crash` and replaced under new numbers, every invocation is completed, and the reference
  checker finds nothing (a non-idempotent producer's duplicates aside) after a complete drain;
- slow (`strandline run` end to end on netns, 30 s of load each): a subscribe run with kill and
  partition faults on the safe settings is valid and shows rebalances and commits; a run with
  `--crash-clients 5` is valid and shows crashes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
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


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    """A fresh cluster per test: groups must not find offsets an earlier test committed."""
    with LocalCluster(brokers=3, settings={"min.insync.replicas": 2}) as c:
        yield c


def outcomes(path: Path) -> Counter[str]:
    return Counter(f"{op['f']}:{op['type']}" for op in iter_ops(path) if op["process"] != "nemesis")


def enough(path: Path) -> bool:
    """Crashes and their replacements, rebalances, both kinds of commit, and some load: what the
    test looks at (six slots: each crash adds a process)."""
    counts: Counter[str] = Counter()
    processes = set()
    for op in iter_ops(path, problems=[]):
        if op["process"] != "nemesis":
            processes.add(op["process"])
        if op["type"] == "ok" and op["f"] == "commit":
            counts[f"commit:{op['mode']}"] += 1
        elif op["type"] != "invoke":
            counts[f"{op['f']}:{op['type']}"] += 1
    return (
        counts["crash:info"] >= 1
        and counts["rebalance:ok"] >= 3
        and counts["commit:auto"] >= 1
        and counts["commit:explicit"] >= 1
        and counts["poll:ok"] >= 30
        and counts["send:ok"] >= 30
        # every crashed process's replacement has started (a new worker process: slow under load)
        and len(processes) >= 6 + counts["crash:info"]
    )


def stop_when_enough(path: Path, stop: threading.Event, seconds: float) -> None:
    """Load for `seconds`, and on a loaded machine on until there is enough to look at (4 x at most)."""
    started = time.monotonic()
    while not stop.wait(0.5):
        elapsed = time.monotonic() - started
        if elapsed >= 4 * seconds or (elapsed >= seconds and enough(path)):
            stop.set()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_both_clients_work_as_group_members_and_survive_crashes(
    cluster: LocalCluster, tmp_path: Path, client: str
) -> None:
    config = TestConfig(
        seed=23,
        topics=1,
        partitions=4,
        concurrency=6,
        rate=120.0,
        client=client,
        consume="subscribe",
        crash_clients=4.0,
    )
    bootstrap = cluster.bootstrap.split(",")
    path = tmp_path / "history.jsonl"
    setup_topics(config, bootstrap)
    stop = threading.Event()
    watcher = threading.Thread(target=stop_when_enough, args=(path, stop, 15.0), daemon=True)
    with HistoryWriter(path) as history:
        watcher.start()
        try:
            stats = run_workload(config, bootstrap, history, stop)
        finally:
            stop.set()
        drain = final_drain(config, bootstrap, history, timeout=60)
    assert drain.complete, drain.reason
    summary = pair_problems(path)
    assert summary.complete and not summary.open_invocations, summary.problems[:5]

    counts = outcomes(path)
    assert counts["subscribe:ok"] >= 6
    assert counts["rebalance:ok"] >= 3, counts
    assert counts["poll:ok"] >= 30 and counts["send:ok"] >= 30, counts
    assert counts["crash:info"] >= 1 and counts["crash:info"] == stats.as_dict()["crashes"]
    modes = Counter(op["mode"] for op in iter_ops(path) if op["f"] == "commit" and op["type"] == "ok")
    assert modes["auto"] > 0 and modes["explicit"] > 0, modes

    processes: dict[int, str] = {}  # a crashed process is never used again
    crashed = set()
    for op in iter_ops(path):
        process = op["process"]
        if process == "nemesis":
            continue
        assert process not in crashed, f"process {process} used after its crash (index {op['index']})"
        if op["f"] == "crash" and op["type"] == "info":
            crashed.add(process)
        processes.setdefault(process, op["f"])
    assert len(processes) >= 6 + counts["crash:info"]
    sent = [op["value"] for op in iter_ops(path) if op["f"] == "send" and op["type"] == "invoke"]
    assert len(sent) == len(set(sent)), "a replacement process reused a value"

    result = check_history(path)
    found = {name: a["count"] for name, a in result["anomalies"].items() if a["count"]}
    assert set(found) <= {"duplicate", "poll-skip", "nonmonotonic-poll"}, found
    assert not result["incomplete"]


def cli_run(tmp_path: Path, name: str, *flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    store = tmp_path / "store"
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--name", name, "--store", str(store), "--checker", "reference", "--time-limit", "30", "--concurrency", "6", "--seed", "7", *flags],
        capture_output=True, text=True, env=env, timeout=420, check=False,
    )  # fmt: skip
    runs = sorted((store / name).glob("2*"))
    assert runs, out.stderr[-2000:]
    return out, runs[-1]


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_subscribe_run_with_kill_and_partition_faults_is_valid(tmp_path: Path) -> None:
    out, run = cli_run(
        tmp_path,
        "groups",
        "--consume",
        "subscribe",
        "--nemesis",
        "kill,partition",
        "--nemesis-interval",
        "10",
        "--time-limit",
        "40",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == f"verdict: valid {run}"
    counts = outcomes(run / "history.jsonl")
    assert counts["rebalance:ok"] >= 1 and counts["commit:ok"] >= 1, counts
    faults = {op["f"] for op in iter_ops(run / "history.jsonl") if op["process"] == "nemesis"}
    assert faults & {"kill", "partition"}, faults
    results = json.loads((run / "results.json").read_text())
    assert results["anomalies"]["group-skip"]["count"] == 0
    assert results["anomalies"]["nonmonotonic-commit"]["count"] == 0


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_crash_clients_run_is_valid(tmp_path: Path) -> None:
    out, run = cli_run(tmp_path, "crashes", "--crash-clients", "5", "--consume", "mixed")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == f"verdict: valid {run}"
    counts = outcomes(run / "history.jsonl")
    assert counts["crash:info"] >= 2, counts
    assert counts["assign:ok"] > 0 and counts["subscribe:ok"] > 0, counts
