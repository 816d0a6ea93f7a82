"""The queue workload against a real 3-broker own-broker cluster (ZooKeeper + brokers on 127.0.0.1).

- a 30 s no-fault run (kafka-python) journals every operation as an invoke with one completion,
  and the final drain reads back every acknowledged value at its acknowledged offset;
- the same with the confluent-kafka (librdkafka) driver, shorter;
- a controller killed with SIGKILL mid-run leaves a history the reader loads up to its last
  complete line, and no client worker process outlives it;
- a client worker process killed mid-run: the operations it had open end `info`, its process
  numbers are never used again, and the other worker's slots carry on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.local import LocalCluster
from foundation.config import TestConfig
from history.format import ReadProblem
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter
from workloads import final_drain, run_workload, setup_topics
from workloads.workers import WorkerPool

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=3, settings={"min.insync.replicas": 2}) as c:
        yield c


def _config(client: str, **changes: Any) -> TestConfig:
    base = TestConfig(
        seed=17, topics=1, partitions=2, replication_factor=3, min_insync=2, concurrency=5, rate=60.0
    )
    return base.replace(client=client, **changes)


def _progress(path: Path) -> tuple[int, int]:
    """Distinct acknowledged positions and successful polls journaled so far (a torn tail is skipped)."""
    acked: set[tuple[str, int, int]] = set()
    polls = 0
    for op in iter_ops(path, problems=[]):
        if op["f"] == "send" and op["type"] == "ok":
            acked.add((op["topic"], op["partition"], op["offset"]))
        elif op["f"] == "poll" and op["type"] == "ok":
            polls += 1
    return len(acked), polls


def _run(
    config: TestConfig, bootstrap: list[str], path: Path, seconds: float, acked: int = 0, polls: int = 0
) -> tuple[Any, Any]:
    """Load for at least `seconds`, and on a slow machine on until more than `acked` acknowledged
    sends and `polls` successful polls are journaled (at most 4 x `seconds`)."""
    setup_topics(config, bootstrap)
    stop = threading.Event()
    started = time.monotonic()

    def stop_when_enough() -> None:
        while not stop.wait(0.5):
            elapsed = time.monotonic() - started
            if elapsed >= 4 * seconds:
                stop.set()
            elif elapsed >= seconds:
                done_acked, done_polls = _progress(path)
                if done_acked > acked and done_polls > polls:
                    stop.set()

    watcher = threading.Thread(target=stop_when_enough, daemon=True)
    with HistoryWriter(path) as history:
        watcher.start()
        try:
            stats = run_workload(config, bootstrap, history, stop)
        finally:
            stop.set()
        drain = final_drain(config, bootstrap, history, timeout=60)
    return stats, drain


def _check_history(path: Path) -> dict[str, int]:
    """Pairs complete; no failed or unknown op; every ack read back at its offset with its value."""
    summary = pair_problems(path)
    assert summary.complete, summary.problems[:5]
    assert not summary.open_invocations
    acks: dict[tuple[str, int, int], int] = {}
    reads: dict[tuple[str, int, int], set[Any]] = {}
    outcomes: dict[str, int] = {}
    for op in iter_ops(path):
        if op["type"] != "invoke":
            outcomes[f"{op['f']}:{op['type']}"] = outcomes.get(f"{op['f']}:{op['type']}", 0) + 1
        if op["f"] == "send" and op["type"] == "ok":
            acks[(op["topic"], op["partition"], op["offset"])] = op["value"]
        elif op["f"] == "poll" and op["type"] == "ok":
            for r in op["records"]:
                reads.setdefault((r["topic"], r["partition"], r["offset"]), set()).add(r["value"])
    assert not [k for k in outcomes if k.endswith((":fail", ":info"))], outcomes
    missing = {pos: v for pos, v in acks.items() if reads.get(pos) != {v}}
    assert not missing, f"{len(missing)} acknowledged values not read back, e.g. {list(missing.items())[:5]}"
    return {"acked": len(acks), **outcomes}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_no_fault_run_kafka_python(cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap.split(",")
    stats, drain = _run(
        _config("kafka-python"), bootstrap, tmp_path / "history.jsonl", seconds=30, acked=300, polls=100
    )
    assert drain.complete, drain.reason
    counts = _check_history(tmp_path / "history.jsonl")
    assert counts["acked"] == stats.acked > 300
    assert counts["poll:ok"] > 100 and counts["assign:ok"] >= 5
    for part in drain.per_partition.values():
        assert part["read_to"] == part["high_watermark"]


@pytest.mark.timeout(180)
def test_no_fault_run_confluent(cluster: LocalCluster, tmp_path: Path) -> None:
    bootstrap = cluster.bootstrap.split(",")
    stats, drain = _run(
        _config("confluent-kafka", seed=18), bootstrap, tmp_path / "history.jsonl", seconds=8, acked=50
    )
    assert drain.complete, drain.reason
    counts = _check_history(tmp_path / "history.jsonl")
    assert counts["acked"] == stats.acked > 50


CONTROLLER = """
import sys, threading
from foundation.config import TestConfig
from workloads import run_workload, setup_topics
from history.writer import HistoryWriter
config = TestConfig(seed=5, topics=1, partitions=2, concurrency=5, rate=400.0)
bootstrap = sys.argv[2].split(",")
setup_topics(config, bootstrap)
run_workload(config, bootstrap, HistoryWriter(sys.argv[1]), threading.Event())
"""


def _workers_of(parent: int) -> list[int]:
    """Live client worker processes started by `parent` (their first argument is its pid)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"workloads.worker" in argv and argv[argv.index(b"workloads.worker") + 1] == str(parent).encode():
            found.append(int(entry.name))
    return found


def _complete_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.mark.timeout(240)
def test_history_survives_a_controller_killed_with_sigkill(cluster: LocalCluster, tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, str(path), cluster.bootstrap], env=env, cwd=REPO
    )
    try:
        # Kill once the history holds enough operations, however slowly a loaded machine gets there.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and _complete_lines(path) < 100:
            assert proc.poll() is None, "the controller exited early"
            time.sleep(0.1)
        assert _workers_of(proc.pid), "the kafka-python slots run in client worker processes"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # No orphan: the workers die with their controller.
        deadline = time.monotonic() + 10
        while _workers_of(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _workers_of(proc.pid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
    data = path.read_bytes()
    complete_lines = data.count(b"\n")
    problems: list[ReadProblem] = []
    ops = list(iter_ops(path, problems=problems))
    assert len(ops) == complete_lines > 50
    assert all(p.torn_tail for p in problems), problems
    assert [op["index"] for op in ops] == list(range(len(ops)))
    for line in data.split(b"\n")[:complete_lines]:
        json.loads(line)
    summary = pair_problems(path)
    assert [p for p in summary.problems if not p.torn_tail] == []
    # Only the operations in flight at the kill stay open: at most one per client.
    assert len(summary.open_invocations) <= 5


@pytest.mark.timeout(240)
def test_ctrl_c_completes_every_operation_in_flight(cluster: LocalCluster, tmp_path: Path) -> None:
    """SIGINT (to the whole process group, as a terminal sends it): the slots finish what they
    started, every invoke has its completion, the workers are gone."""
    path = tmp_path / "history.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CONTROLLER, str(path), cluster.bootstrap],
        env=env,
        cwd=REPO,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and _complete_lines(path) < 100:
            assert proc.poll() is None, "the controller exited early"
            time.sleep(0.1)
        assert _workers_of(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _workers_of(proc.pid) == []
    summary = pair_problems(path)
    assert summary.complete and not summary.open_invocations, (summary.problems[:3], summary.open_invocations)


def _open_in(pool: WorkerPool, pid: int) -> set[int]:
    """Processes of worker `pid` with an invocation the controller journaled and holds open.

    Empty while the controller has not yet read all the worker sent (a completion may be waiting).
    """
    (worker,) = [w for w in pool.workers if w.proc.pid == pid]
    if any(conn.poll(0) for conn in worker.conns):
        return set()
    return {
        json.loads(link.open_invoke)["process"]
        for link in list(pool.links.values())
        if link.worker.proc.pid == pid and link.open_invoke is not None
    }


def _stop_with_an_open_operation(pool: WorkerPool, victim: int) -> set[int]:
    """Freeze `victim` (SIGSTOP) at a moment when one of its slots has an operation open.

    Asked of the controller itself (which invocations of the victim's slots await their
    completion), not guessed from the history: a slow operation of the other worker looks open
    there too. Once frozen, the victim sends nothing more; once the controller has read what it
    sent before (nothing unread on its sockets), the answer is final. When its slots happen
    to be between operations, let it run a little and try again.
    """
    for _ in range(50):
        os.kill(victim, signal.SIGSTOP)
        time.sleep(0.3)
        first = _open_in(pool, victim)
        time.sleep(0.3)
        stuck = first & _open_in(pool, victim)
        if stuck:
            return stuck
        os.kill(victim, signal.SIGCONT)
        time.sleep(0.2)
    raise AssertionError("the victim worker never had an operation open")


@pytest.mark.timeout(180)
def test_killed_worker_ends_its_open_ops_info(
    cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pools: list[WorkerPool] = []

    class _Observed(WorkerPool):
        """The real pool, remembered so the test can ask it what is open."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            pools.append(self)

    monkeypatch.setattr("workloads.runner.WorkerPool", _Observed)
    config = _config("kafka-python", seed=21, concurrency=4, rate=400.0)
    bootstrap = cluster.bootstrap.split(",")
    setup_topics(config, bootstrap)
    path = tmp_path / "history.jsonl"
    stop = threading.Event()
    result: list[Any] = []
    with HistoryWriter(path) as history:
        runner = threading.Thread(
            target=lambda: result.append(run_workload(config, bootstrap, history, stop, workers=2))
        )
        runner.start()
        try:
            # Every slot of both workers is running (one process each so far) before the kill: a
            # worker killed while it starts fails the run, which is not what this test is about.
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and (
                _complete_lines(path) < 60
                or len({op["process"] for op in iter_ops(path, problems=[]) if op["type"] != "invoke"}) < 4
            ):
                time.sleep(0.1)
            (pool,) = pools
            victim = pool.workers[0].proc.pid
            stuck = _stop_with_an_open_operation(pool, victim)
            os.kill(victim, signal.SIGKILL)
            killed_at = _complete_lines(path)
            deadline = time.monotonic() + 60
            while _complete_lines(path) < killed_at + 60 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stop.set()
            runner.join(timeout=60)
    assert result, "run_workload returns after a worker died"
    assert _workers_of(os.getpid()) == []
    summary = pair_problems(path)
    assert summary.complete and not summary.open_invocations, summary.problems[:5]
    ops = list(iter_ops(path))
    assert len(ops) > killed_at + 50  # the other worker's slots carried on
    infos = [op for op in ops if op["type"] == "info"]
    assert infos and all(op["error"] == "the client worker process exited" for op in infos)
    assert {op["process"] for op in infos} == stuck
    for info in infos:
        assert not [op for op in ops if op["process"] == info["process"] and op["index"] > info["index"]]
    assert result[0].unknown == len(infos)


@pytest.mark.timeout(60)
def test_drain_is_incomplete_when_the_cluster_is_gone(cluster: LocalCluster, tmp_path: Path) -> None:
    """Runs last in this module: it kills every broker of the shared cluster."""
    config = _config("kafka-python")
    for broker_id in cluster.broker_ids:
        cluster.kill(broker_id)
    started = time.monotonic()
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        drain = final_drain(
            config, cluster.bootstrap.split(","), history, timeout=4, path=tmp_path / "drain.json"
        )
    assert time.monotonic() - started < 15
    assert not drain.complete
    assert "high watermarks unknown" in drain.reason
    assert json.loads((tmp_path / "drain.json").read_text())["complete"] is False
    assert pair_problems(tmp_path / "history.jsonl").complete
