"""`strandline bench` dispatch, the workload bench's input checks and its reading of a history
(no cluster needed)."""

from __future__ import annotations

import argparse
from pathlib import Path

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


def test_zero_runs_is_bad_input() -> None:
    with pytest.raises(BadInput, match="--runs"):
        bench.main(argparse.Namespace(target="workload", keep=None, runs=0))


def test_the_history_gives_acked_sends_per_second_and_the_longest_stretch(tmp_path: Path) -> None:
    from harness.bench_workload import history_figures

    lines = []
    for i, (process, f, kind, t) in enumerate(
        [
            (0, "send", "invoke", 0.0),
            (0, "send", "ok", 1.0),  # first acked send
            (1, "poll", "invoke", 1.0),
            (1, "poll", "ok", 1.2),
            (0, "send", "invoke", 1.5),
            (0, "send", "info", 2.0),  # not acknowledged
            (2, "send", "invoke", 2.0),
            (2, "send", "ok", 3.5),  # 2.5 s after the first: the longest stretch
            (2, "send", "invoke", 3.5),
            (2, "send", "ok", 4.0),
        ]
    ):
        extra = ', "topic": "t0", "partition": 0, "value": 1' if f == "send" else ""
        extra += ', "offset": 0' if f == "send" and kind == "ok" else ""
        extra += ', "records": []' if f == "poll" and kind == "ok" else ""
        extra += ', "error": "timeout"' if kind == "info" else ""
        lines.append(
            f'{{"index": {i}, "time": {int(t * 1e9)}, "process": {process}, "type": "{kind}", "f": "{f}"{extra}}}'
        )
    history = tmp_path / "history.jsonl"
    history.write_text("\n".join(lines) + "\n")
    got = history_figures(history)
    assert (got.acked_sends, got.acked_ops, got.span_s) == (3, 4, 3.0)
    assert got.acked_sends_per_s == 1.0
    assert (got.longest_gap_s, got.longest_gap_at_s) == (2.5, 1.0)
    assert got.max_latency_ms == {"send": 1500.0, "poll": pytest.approx(200.0)}


def test_unknown_target_is_bad_input() -> None:
    with pytest.raises(BadInput, match="unknown bench target"):
        bench.main(argparse.Namespace(target="disk"))


def test_default_client_layout() -> None:
    from foundation.config import TestConfig
    from workloads.workers import default_workers

    assert default_workers(TestConfig(client="confluent-kafka")) == 0  # librdkafka: threads
    assert default_workers(TestConfig(client="kafka-python", concurrency=10)) >= 2
    assert default_workers(TestConfig(client="kafka-python", concurrency=1)) == 1


def test_the_wall_time_is_split_at_the_phases_and_adds_up() -> None:
    from harness.bench_workload import phase_seconds

    split = phase_seconds({"cluster_up": 102.0, "load": 110.0, "report": 150.0}, began=100.0, ended=155.5)
    assert split == {"start-up": 2.0, "cluster_up": 8.0, "load": 40.0, "report": 5.5}
    assert sum(split.values()) == 55.5
