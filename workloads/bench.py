"""`strandline bench workload` and `strandline bench broker`: figures, never assertions.

workload: the queue workload (10 concurrent client processes, unlimited rate) against a 3-broker,
RF=3 own-broker cluster on this machine, for `STRANDLINE_BENCH_SECONDS` (default 20) seconds;
prints the acknowledged operations per second the history recorded (counted from the history
itself, not from the client's counters).
broker: raw producer throughput (pipelined sends, acks=all) against the same cluster, as a ceiling
for the workload figure.

`STRANDLINE_BENCH_CLIENT` names the drivers to measure, in turn (default:
`kafka-python,confluent-kafka`). `STRANDLINE_BOOTSTRAP=host:port,...` benchmarks an existing
cluster instead of starting one (its topics must not exist yet or must have the test's shape).
`STRANDLINE_BENCH_WORKERS=N` runs the client slots in N worker processes (0: as threads of the
controller; default: the workload's own default for the driver, `workloads.workers`).
`--keep FILE` keeps the history (`FILE.<client>` for the second driver on).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter

log = logging.getLogger(__name__)

BROKERS = 3
CONCURRENCY = 10


def _seconds() -> float:
    raw = os.environ.get("STRANDLINE_BENCH_SECONDS", "20")
    try:
        seconds = float(raw)
    except ValueError:
        raise BadInput(f"STRANDLINE_BENCH_SECONDS: expected a number of seconds, got {raw!r}") from None
    if seconds <= 0:
        raise BadInput("STRANDLINE_BENCH_SECONDS: must be positive")
    return seconds


@contextlib.contextmanager
def bench_cluster(work_dir: Path, config: TestConfig) -> Iterator[tuple[list[str], Callable[[], list[int]]]]:
    """The cluster to measure: STRANDLINE_BOOTSTRAP, or a local one (then also its broker pids)."""
    given = os.environ.get("STRANDLINE_BOOTSTRAP")
    if given:
        yield [a.strip() for a in given.split(",") if a.strip()], list
        return
    try:
        from clusters.local import LocalCluster
    except ImportError as e:
        raise InfrastructureError(
            f"the local cluster is not available ({e}); set STRANDLINE_BOOTSTRAP"
        ) from None
    cluster = LocalCluster(
        brokers=BROKERS,
        settings={"min.insync.replicas": config.min_insync, "default.replication.factor": BROKERS},
        base_dir=work_dir / "cluster",
    )
    try:
        cluster.start_all()
    except Exception as e:
        cluster.stop()
        raise InfrastructureError(f"the local {BROKERS}-broker cluster did not start: {e}") from None
    try:
        yield cluster.bootstrap.split(","), lambda: [pid for _, pid in cluster.pids()]
    finally:
        cluster.stop()


def _load() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def count_history(path: Path) -> dict[str, Any]:
    """Acknowledged operations per kind, counted from the journal (what a checker would see)."""
    counts: dict[str, dict[str, int]] = {}
    first = last = None
    for op in iter_ops(path):
        if op["process"] == "nemesis":
            continue
        first = op["time"] if first is None else first
        last = op["time"]
        if op["type"] != "invoke":
            counts.setdefault(op["f"], {"ok": 0, "fail": 0, "info": 0})[op["type"]] += 1
    seconds = ((last or 0) - (first or 0)) / 1e9
    return {"counts": counts, "seconds": seconds}


def _env_count(name: str, what: str, least: int, rule: str) -> int | None:
    """A whole number from the environment (None when unset), or a one-line BadInput."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        count = int(raw)
    except ValueError:
        raise BadInput(f"{name}: expected a number of {what}, got {raw!r}") from None
    if count < least:
        raise BadInput(f"{name}: must be {rule}")
    return count


def _concurrency() -> int:
    count = _env_count("STRANDLINE_BENCH_CONCURRENCY", "clients", 1, "at least 1")
    return CONCURRENCY if count is None else count


def _workers() -> int | None:
    return _env_count("STRANDLINE_BENCH_WORKERS", "processes", 0, "0 (threads) or more")


def bench_workload(
    config: TestConfig, bootstrap: list[str], history_path: Path, seconds: float, workers: int | None = None
) -> dict[str, Any]:
    from workloads.progress import LiveProgress
    from workloads.queue import run_workload
    from workloads.topics import setup_topics
    from workloads.workers import default_workers

    setup_topics(config, bootstrap)
    workers = default_workers(config) if workers is None else workers
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    with HistoryWriter(history_path) as history:
        timer.start()
        try:
            stats = run_workload(
                config, bootstrap, history, stop, LiveProgress(title="bench workload"), workers=workers
            )
        finally:
            timer.cancel()
    recorded = count_history(history_path)
    pairs = pair_problems(history_path)
    ok = sum(c["ok"] for c in recorded["counts"].values())
    acked_sends = recorded["counts"].get("send", {}).get("ok", 0)
    elapsed = max(recorded["seconds"], 1e-9)
    return {
        "client": config.client,
        "concurrency": config.concurrency,
        "workers": workers,
        "seconds": round(elapsed, 2),
        "acked_ops_per_s": round(ok / elapsed, 1),
        "acked_sends_per_s": round(acked_sends / elapsed, 1),
        "counts": recorded["counts"],
        "paired": pairs.complete and not pairs.open_invocations,
        "send_latency_ms": stats.latency_ms(),
    }


def bench_broker(config: TestConfig, bootstrap: list[str], seconds: float) -> dict[str, Any]:
    """Pipelined acks=all sends from one producer: the cluster's ceiling, not a workload figure."""
    from kafka import KafkaProducer

    from workloads.topics import setup_topics

    setup_topics(config, bootstrap)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, enable_idempotence=False, metrics_enabled=False
    )
    acked = 0
    lock = threading.Lock()

    def on_ack(_metadata: Any) -> None:
        nonlocal acked
        with lock:
            acked += 1

    started = time.monotonic()
    n = 0
    try:
        while time.monotonic() - started < seconds:
            for _ in range(100):
                producer.send("t0", value=str(n).encode(), partition=n % config.partitions).add_callback(
                    on_ack
                )
                n += 1
            while n - acked > 5000 and time.monotonic() - started < seconds:
                time.sleep(0.001)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    elapsed = time.monotonic() - started
    return {"sent": n, "acked": acked, "seconds": round(elapsed, 2), "acked_per_s": round(acked / elapsed, 1)}


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used, from /proc; 0 when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _own_cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of its reaped children (the client worker processes)."""
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def _mix() -> str:
    from workloads.generator import ASSIGN_WEIGHT, POLL_WEIGHT, SEND_WEIGHT
    from workloads.queue import MAX_POLL_RECORDS, POLL_TIMEOUT_S

    return (
        f"{SEND_WEIGHT:.0%} send (acks=all, waits for its ack), {POLL_WEIGHT:.0%} poll (up to "
        f"{MAX_POLL_RECORDS} records, {POLL_TIMEOUT_S * 1000:.0f} ms), {ASSIGN_WEIGHT:.0%} assign; "
        "each client runs one operation at a time, unlimited rate"
    )


def _report(r: dict[str, Any], load_before: str) -> str:
    c = r["counts"]
    sends, polls = c.get("send", {}), c.get("poll", {})
    cpu = r.get("cpu_ms_per_op")
    workers = f", client workers {cpu['workers']:.2f} ms" if cpu and r["workers"] else ""
    cpu_line = (
        f"  CPU per operation: controller {cpu['controller']:.2f} ms{workers}, brokers {cpu['brokers']:.2f} ms\n"
        if cpu
        else ""
    )
    layout = f"in {r['workers']} worker processes" if r["workers"] else "as threads"
    return (
        f"workload ({r['client']}, {r['concurrency']} clients {layout}, {BROKERS} brokers, RF={BROKERS}, "
        f"acks=all, {r['seconds']} s):\n"
        f"  mix: {_mix()}\n"
        f"  sends ok/fail/info: {sends.get('ok', 0)}/{sends.get('fail', 0)}/{sends.get('info', 0)}, "
        f"polls ok/info: {polls.get('ok', 0)}/{polls.get('info', 0)}, "
        f"send latency p50 {r['send_latency_ms']['p50']} ms, p99 {r['send_latency_ms']['p99']} ms, "
        f"pairs {'complete' if r['paired'] else 'INCOMPLETE'}\n"
        f"{cpu_line}"
        f"  machine: {os.cpu_count()} cores, load average before/after {load_before} / {_load()} "
        f"(other processes share the cores: figures drop with load)\n"
        f"  acked sends/s: {r['acked_sends_per_s']:.0f}\n"
        f"acked ops/s ({r['client']}): {r['acked_ops_per_s']:.0f}\n"
    )


def main(args: argparse.Namespace) -> int:
    seconds = _seconds()
    workers = _workers()
    if not getattr(args, "verbose", False):
        # The clients log every refused connection; a benchmark's reader wants the figures.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    clients = [
        c.strip()
        for c in os.environ.get("STRANDLINE_BENCH_CLIENT", "kafka-python,confluent-kafka").split(",")
        if c.strip()
    ]
    base = TestConfig(
        seed=1,
        nodes=BROKERS,
        replication_factor=BROKERS,
        min_insync=2,
        topics=1,
        partitions=2,
        rate=1e9,
        concurrency=_concurrency(),
    )
    configs = [base.replace(client=client) for client in clients]  # BadInput names a bad client
    keep = Path(args.keep) if getattr(args, "keep", None) else None
    if keep is not None and keep.exists():
        raise BadInput(f"--keep {keep}: the file exists")
    with tempfile.TemporaryDirectory(prefix="strandline-bench-") as tmp:
        work = Path(tmp)
        with bench_cluster(work, base) as (bootstrap, broker_pids):
            if args.target == "broker":
                r = bench_broker(base, bootstrap, seconds)
                sys.stdout.write(
                    f"broker: {r['acked_per_s']:.0f} acked records/s "
                    f"({r['acked']} of {r['sent']} in {r['seconds']} s, acks=all, RF={BROKERS}, pipelined)\n"
                )
                return 0
            for i, config in enumerate(configs):
                history_path = work / f"history-{config.client}.jsonl"
                if keep is not None:
                    history_path = keep if i == 0 else keep.with_name(f"{keep.name}.{config.client}")
                load_before = _load()
                own_before = _own_cpu()
                brokers_before = sum(_process_cpu(pid) for pid in broker_pids())
                r = bench_workload(config, bootstrap, history_path, seconds, workers)
                ops = sum(sum(c.values()) for c in r["counts"].values())
                if ops and broker_pids():
                    own_after = _own_cpu()
                    r["cpu_ms_per_op"] = {
                        "controller": (own_after[0] - own_before[0]) * 1000 / ops,
                        "workers": (own_after[1] - own_before[1]) * 1000 / ops,
                        "brokers": (sum(_process_cpu(pid) for pid in broker_pids()) - brokers_before)
                        * 1000
                        / ops,
                    }
                sys.stdout.write(_report(r, load_before))
                sys.stdout.flush()
    return 0
