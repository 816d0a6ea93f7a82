"""`strandline bench broker`: figures, never assertions.

Raw producer throughput (pipelined sends, acks=all) against a 3-broker, RF=3 own-broker cluster on
this machine, for `STRANDLINE_BENCH_SECONDS` (default 20) seconds: the cluster's ceiling, beside
`strandline bench workload` (harness/bench_workload.py: the `strandline run` command users wait
for). `STRANDLINE_BOOTSTRAP=host:port,...` benchmarks an existing cluster instead of starting one
(its topics must not exist yet or must have the test's shape).
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

BROKERS = 3


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
def bench_cluster(work_dir: Path, config: TestConfig) -> Iterator[list[str]]:
    """The cluster to measure: STRANDLINE_BOOTSTRAP, or a local one."""
    given = os.environ.get("STRANDLINE_BOOTSTRAP")
    if given:
        yield [a.strip() for a in given.split(",") if a.strip()]
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
        yield cluster.bootstrap.split(",")
    finally:
        cluster.stop()


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


def main(args: argparse.Namespace) -> int:
    seconds = _seconds()
    if not getattr(args, "verbose", False):
        # The clients log every refused connection; a benchmark's reader wants the figures.
        logging.getLogger("kafka").setLevel(logging.CRITICAL)
    config = TestConfig(
        seed=1, nodes=BROKERS, replication_factor=BROKERS, min_insync=2, topics=1, partitions=2, rate=1e9
    )
    with (
        tempfile.TemporaryDirectory(prefix="strandline-bench-") as tmp,
        bench_cluster(Path(tmp), config) as bootstrap,
    ):
        r = bench_broker(config, bootstrap, seconds)
    sys.stdout.write(
        f"broker: {r['acked_per_s']:.0f} acked records/s "
        f"({r['acked']} of {r['sent']} in {r['seconds']} s, acks=all, RF={BROKERS}, pipelined)\n"
    )
    return 0
