"""`strandline bench` dispatch and the workload bench's input checks (no cluster needed)."""

from __future__ import annotations

import argparse

import pytest

from foundation.errors import BadInput
from harness.commands import bench


def test_bad_duration_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRANDLINE_BENCH_SECONDS", "soon")
    with pytest.raises(BadInput, match="STRANDLINE_BENCH_SECONDS"):
        bench.main(argparse.Namespace(target="workload", keep=None, verbose=False))


def test_unknown_client_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRANDLINE_BENCH_SECONDS", "1")
    monkeypatch.setenv("STRANDLINE_BENCH_CLIENT", "kafka-java")
    with pytest.raises(BadInput, match="client"):
        bench.main(argparse.Namespace(target="workload", keep=None, verbose=False))


def test_unknown_target_is_bad_input() -> None:
    with pytest.raises(BadInput, match="unknown bench target"):
        bench.main(argparse.Namespace(target="disk"))


def test_bad_worker_count_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from workloads import bench

    monkeypatch.setenv("STRANDLINE_BENCH_WORKERS", "two")
    with pytest.raises(BadInput, match="STRANDLINE_BENCH_WORKERS"):
        bench._workers()
    monkeypatch.setenv("STRANDLINE_BENCH_WORKERS", "-1")
    with pytest.raises(BadInput, match="STRANDLINE_BENCH_WORKERS"):
        bench._workers()
    monkeypatch.setenv("STRANDLINE_BENCH_WORKERS", "0")
    assert bench._workers() == 0


def test_default_client_layout() -> None:
    from foundation.config import TestConfig
    from workloads.workers import default_workers

    assert default_workers(TestConfig(client="confluent-kafka")) == 0  # librdkafka: threads
    assert default_workers(TestConfig(client="kafka-python", concurrency=10)) >= 2
    assert default_workers(TestConfig(client="kafka-python", concurrency=1)) == 1
