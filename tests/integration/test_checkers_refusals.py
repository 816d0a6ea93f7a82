"""A real own broker that offers InitProducerId but refuses it with CLUSTER_AUTHORIZATION_FAILED
(`denied.apis`, as Kafka refuses a principal without the IdempotentWrite ACL), driven by each
real client with `idempotence = true`: every send ends `fail` or `info` with the client's account
of the refusal, nothing is appended, and checkers.refusals names idempotence with those operations
(the ApiVersions lack nothing). The `unsupported.apis` shape (the API left out) runs end to end
through `strandline run` in test_clusters_system_own.py."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from checkers.refusals import describe, refusals
from clusters.kafka_metadata import offered_apis
from clusters.local import LocalCluster
from foundation.config import TestConfig
from history.reader import iter_ops
from history.writer import HistoryWriter
from workloads import run_workload, setup_topics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def refusing() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=1, settings={"denied.apis": "InitProducerId", "min.insync.replicas": 1}) as c:
        yield c


def stop_after_sends(path: Path, stop: threading.Event, sends: int, limit: float) -> None:
    """Load until `sends` sends have completed (a loaded machine starts clients slowly)."""
    deadline = time.monotonic() + limit
    while not stop.wait(0.5) and time.monotonic() < deadline:
        done = [op for op in iter_ops(path, problems=[]) if op["f"] == "send" and op["type"] != "invoke"]
        if len(done) >= sends:
            break
    stop.set()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_a_refused_idempotent_producer_is_the_systems_answer(
    refusing: LocalCluster, tmp_path: Path, client: Literal["kafka-python", "confluent-kafka"]
) -> None:
    config = TestConfig(seed=3, topics=1, partitions=1, concurrency=2, rate=40.0, client=client,
                        idempotence=True, replication_factor=1, min_insync=1)  # fmt: skip
    bootstrap = refusing.bootstrap.split(",")
    setup_topics(config, bootstrap)
    path = tmp_path / "history.jsonl"
    stop = threading.Event()
    watcher = threading.Thread(target=stop_after_sends, args=(path, stop, 6, 90.0), daemon=True)
    with HistoryWriter(path) as history:
        watcher.start()
        try:
            run_workload(config, bootstrap, history, stop)
        finally:
            stop.set()
    sends = [op for op in iter_ops(path) if op["f"] == "send" and op["type"] != "invoke"]
    outcomes = Counter(op["type"] for op in sends)
    assert sends and set(outcomes) <= {"fail", "info"}, outcomes
    host, _, port = bootstrap[0].rpartition(":")
    offered = offered_apis(host, int(port))
    assert 22 in offered  # InitProducerId is listed: the refusal is the answer, not a missing API
    found = refusals(
        config, path, {"broker": bootstrap[0], "apis": {str(k): list(v) for k, v in offered.items()}}
    )
    refused = found["idempotence"]
    assert refused["missing_apis"] == [] and sum(refused["ops"].values()) >= len(sends) // 2, refused
    assert "authorization" in refused["error"].lower() or "Authorization" in refused["error"], refused[
        "error"
    ]
    assert describe("idempotence", refused).startswith("idempotence (idempotence = true): ")
