"""The workload's journaling discipline and the drain's verdict, with an in-memory fake driver.

The fake stands in for Kafka only inside these unit tests; integration tests use real brokers.
"""

from __future__ import annotations

import io
import random
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from foundation.config import TestConfig
from history.format import encode
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter
from workloads import drain as drain_module
from workloads import runner as runner_module
from workloads.clients.base import ClientError, Record, SendOutcome, TopicPartition
from workloads.drain import final_drain
from workloads.progress import LiveProgress
from workloads.runner import run_workload


class FakeLog:
    def __init__(self, flaky: float = 0.0, seed: int = 0):
        self.logs: dict[TopicPartition, list[int]] = {}
        self.lock = threading.Lock()
        self.flaky = flaky
        self.rng = random.Random(seed)

    def roll(self) -> bool:
        with self.lock:
            return self.rng.random() < self.flaky


class FakeProducer:
    def __init__(self, log: FakeLog):
        self.log = log

    def send(self, topic: str, partition: int, value: int) -> SendOutcome:
        if self.log.roll():
            return SendOutcome("info", error="RequestTimedOutError")
        with self.log.lock:
            entries = self.log.logs.setdefault((topic, partition), [])
            entries.append(value)
            return SendOutcome("ok", offset=len(entries) - 1)

    def close(self) -> None:
        pass


class FakeConsumer:
    def __init__(self, log: FakeLog, stuck: bool = False):
        self.log = log
        self.pos: dict[TopicPartition, int] = {}
        self.stuck = stuck

    def assign(self, partitions: list[TopicPartition], positions: dict[TopicPartition, int] | None) -> None:
        self.pos = {tp: (positions or {}).get(tp, 0) for tp in partitions}

    def poll(self, timeout_s: float, max_records: int) -> list[Record]:
        if self.log.roll():
            raise ClientError("KafkaConnectionError")
        if self.stuck:
            return []
        out: list[Record] = []
        with self.log.lock:
            for tp, at in self.pos.items():
                values = self.log.logs.get(tp, [])[at : at + max_records]
                out += [Record(tp[0], tp[1], at + i, v) for i, v in enumerate(values)]
                self.pos[tp] = at + len(values)
        return out

    def positions(self) -> dict[TopicPartition, int]:
        return dict(self.pos)

    def end_offsets(self, partitions: list[TopicPartition], timeout_s: float) -> dict[TopicPartition, int]:
        with self.log.lock:
            return {tp: len(self.log.logs.get(tp, [])) for tp in partitions}

    def close(self) -> None:
        pass


class FakeDriver:
    name = "fake"

    def __init__(self, log: FakeLog, stuck: bool = False):
        self.log, self.stuck = log, stuck

    def producer(self) -> FakeProducer:
        return FakeProducer(self.log)

    def consumer(self, bulk: bool = False) -> FakeConsumer:
        return FakeConsumer(self.log, self.stuck)


def _run(tmp_path: Path, monkeypatch: Any, flaky: float, seconds: float = 0.6) -> tuple[Path, Any, FakeLog]:
    log = FakeLog(flaky=flaky, seed=1)
    monkeypatch.setattr(runner_module, "make_driver", lambda config, bootstrap, **_: FakeDriver(log))
    config = TestConfig(seed=9, rate=2000, concurrency=4, topics=2, partitions=2)
    path = tmp_path / "history.jsonl"
    stop = threading.Event()
    timer = threading.Timer(seconds, stop.set)
    with HistoryWriter(path) as history:
        timer.start()
        stats = run_workload(config, ["fake:1"], history, stop, workers=0)
    return path, stats, log


def test_every_op_is_paired_and_values_unique(tmp_path: Path, monkeypatch: Any) -> None:
    path, stats, _ = _run(tmp_path, monkeypatch, flaky=0.0)
    summary = pair_problems(path)
    assert summary.complete and not summary.open_invocations
    ops = list(iter_ops(path))
    sends = [op for op in ops if op["f"] == "send" and op["type"] == "invoke"]
    assert len(sends) > 50
    assert len({op["value"] for op in sends}) == len(sends)
    acks = [op for op in ops if op["f"] == "send" and op["type"] == "ok"]
    assert all(isinstance(op["offset"], int) for op in acks)
    assert stats.acked == len(acks)
    assert {op["process"] for op in ops} == {0, 1, 2, 3}
    first_ops = {}
    for op in ops:
        first_ops.setdefault(op["process"], op)
    assert all(op["f"] == "assign" for op in first_ops.values())


def test_crashed_processes_are_never_reused(tmp_path: Path, monkeypatch: Any) -> None:
    path, stats, _ = _run(tmp_path, monkeypatch, flaky=0.05)
    summary = pair_problems(path)
    assert summary.complete and not summary.open_invocations
    ops = list(iter_ops(path))
    infos = [op for op in ops if op["type"] == "info"]
    assert infos and stats.unknown == len(infos)
    for info in infos:
        later = [op for op in ops if op["process"] == info["process"] and op["index"] > info["index"]]
        assert later == [], f"process {info['process']} reused after its op crashed"
    assert stats.processes == 4 + len(infos)


def test_drain_reads_everything_and_continues_process_numbers(tmp_path: Path, monkeypatch: Any) -> None:
    log = FakeLog()
    for v in range(2500):
        log.logs.setdefault(("t0", v % 2), []).append(v)
    monkeypatch.setattr(drain_module, "make_driver", lambda config, bootstrap, **_: FakeDriver(log))
    path = tmp_path / "history.jsonl"
    path.write_text('{"index":0,"time":1,"process":6,"type":"invoke","f":"poll"}\n')
    config = TestConfig(seed=1, topics=1, partitions=2)
    with HistoryWriter(path) as history:
        result = final_drain(config, ["fake:1"], history, timeout=10, path=tmp_path / "drain.json")
    assert result.complete, result.reason
    assert result.per_partition == {
        "t0/0": {"high_watermark": 1250, "read_to": 1250},
        "t0/1": {"high_watermark": 1250, "read_to": 1250},
    }
    assert result.processes == [7]
    read = {
        r["value"] for op in iter_ops(path) if op["f"] == "poll" and op["type"] == "ok" for r in op["records"]
    }
    assert read == set(range(2500))
    assert (tmp_path / "drain.json").exists()


def test_unfinished_drain_says_why(tmp_path: Path, monkeypatch: Any) -> None:
    log = FakeLog()
    log.logs[("t0", 0)] = [1, 2, 3]
    monkeypatch.setattr(
        drain_module, "make_driver", lambda config, bootstrap, **_: FakeDriver(log, stuck=True)
    )
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        result = final_drain(TestConfig(seed=1, topics=1, partitions=1), ["fake:1"], history, timeout=1.0)
    assert not result.complete
    assert "t0/0 read to 0 of 3" in result.reason
    assert pair_problems(tmp_path / "history.jsonl").complete


def test_progress_is_silent_without_a_terminal() -> None:
    out = io.StringIO()
    progress = LiveProgress(console=Console(file=out, force_terminal=False))
    assert not progress.enabled
    assert progress.start() is False
    progress.stop()
    assert out.getvalue() == ""


def test_progress_shows_counts_and_faults() -> None:
    from workloads.stats import WorkloadStats

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    progress = LiveProgress(console=console)
    stats = WorkloadStats()
    stats.completed("send", "ok", 0.001)
    stats.completed("send", "info", 0.001)
    progress.attach(stats)
    progress.set_faults(lambda: ["partition n1|n2,n3"])
    console.print(progress)
    text = out.getvalue()
    assert "acked 1" in text and "unknown 1" in text and "partition n1|n2,n3" in text
    progress.set_faults(lambda: 1 / 0)  # type: ignore[arg-type,return-value]
    assert progress.faults_text().startswith("?")


def test_encoded_ops_are_written_as_append_writes_them(tmp_path: Path) -> None:
    """Client worker processes encode their ops; the controller's writer only stamps them."""
    op = {"process": 3, "type": "ok", "f": "poll", "records": [{"topic": "t0", "partition": 1, "offset": 4}]}
    with (
        HistoryWriter(tmp_path / "a.jsonl", start_ns=0) as a,
        HistoryWriter(tmp_path / "b.jsonl", start_ns=0) as b,
    ):
        a.append(op)
        assert b.append_encoded(encode(op)) == 0
    line_a = (tmp_path / "a.jsonl").read_text()
    line_b = (tmp_path / "b.jsonl").read_text()
    strip = re.compile(r'"time":\d+')
    assert strip.sub("", line_a) == strip.sub("", line_b)
    for bad in ("", "{}", "[1]", '{"a":1}\n{"b":2}'):
        with HistoryWriter(tmp_path / "c.jsonl") as c, pytest.raises(ValueError):
            c.append_encoded(bad)
    assert (tmp_path / "c.jsonl").read_text() == ""


def test_a_reader_that_reads_nothing_is_replaced_by_a_patient_one(tmp_path: Path, monkeypatch: Any) -> None:
    """A system that answers a fetch of the whole log slower than the request timeout: the drain's
    reader gets nothing; after two request timeouts a new reader with twice the timeout reads it all."""
    log = FakeLog()
    log.logs[("t0", 0)] = list(range(50))
    timeouts: list[int] = []

    def driver(config: TestConfig, bootstrap: list[str], **_: Any) -> FakeDriver:
        timeouts.append(config.request_timeout_ms)
        return FakeDriver(log, stuck=config.request_timeout_ms < 2000)

    monkeypatch.setattr(drain_module, "make_driver", driver)
    config = TestConfig(seed=1, topics=1, partitions=1, request_timeout_ms=1000)
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        result = final_drain(config, ["fake:1"], history, timeout=20)
    assert result.complete, result.reason
    assert timeouts == [1000, 2000]
    assert len(result.processes) == 2 and result.per_partition["t0/0"]["read_to"] == 50
    assert 2.0 < result.seconds < 10.0
    assert pair_problems(tmp_path / "history.jsonl").complete
