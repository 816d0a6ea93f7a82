"""The Spark engine agrees with the reference checker, result for result (`==`), on every anomaly,
on damaged histories, and on generated histories with planted anomalies; so do the facts of the
statistics (`checkers.spark_stats`, and `checkers.stats_form` that a Spark check of a local history
takes, against `checkers.stats.history_facts`).

One Spark session (local[2], two shuffle partitions) serves every Spark test of the run (get_session
reuses the process's session); each check is one Spark job, so the property tests use few generated
examples, and the edge cases (every plantable anomaly at once, crashes, the smallest and largest
shapes) are explicit examples run every time.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from checkers import spark as spark_checker
from checkers.catalogue import HISTORY_ANOMALIES, EngineResult, incomplete_kind
from checkers.reference import check_history as reference_check
from checkers.stats import Facts, history_facts
from history.synthetic.generator import generate, generate_ops
from history.synthetic.kinds import ANOMALY_KINDS, PLANTABLE
from tests.support.history_builder import HistoryBuilder, write_history
from tests.support.hypothesis_settings import FEW

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def both(spark: Any, path: Path) -> tuple[EngineResult, EngineResult]:
    """(Spark's result, the reference's result) for one history; the Parquet cache is rebuilt.

    The statistics' facts must agree too (asserted here, for every history of these tests)."""
    got, facts = spark_checker.check(path, reconvert=True, facts=True)
    assert facts == history_facts(path)
    return got, reference_check(path)


def three_facts(spark: Any, path: Path) -> Facts:
    """The statistics' facts by Spark's jobs and by Arrow in the driver, both from the history's
    Parquet form (a Spark check of a local history takes the latter), equal to the reference's."""
    from checkers.parquet import convert
    from checkers.spark_stats import spark_facts
    from checkers.stats_form import form_facts

    form = convert(path)
    options = {
        "max_time": form.max_time,
        "nemesis": form.nemesis,
        "ok_sends_in_order": form.ok_sends_in_order,
    }
    by_spark = spark_facts(spark, str(form.operations_path), latency=form.latency, **options)
    assert by_spark == form_facts(form.operations_path, latency=form.latency, **options)
    assert by_spark == history_facts(path)
    return by_spark


def counts_of(result: EngineResult) -> dict[str, int]:
    return {name: a["count"] for name, a in result["anomalies"].items() if a["count"]}


def scenarios() -> HistoryBuilder:
    """Every anomaly once, each on its own topic with its own processes, plus the edge cases."""
    b = HistoryBuilder()
    # lost-write: acked at 0, a later read reached offset 1 on that partition.
    b.send(0, 10, offset=0, topic="lost")
    b.send(0, 11, offset=1, topic="lost")
    b.poll(1, [("lost", 0, 1, 11)])
    # unseen: acked at 5, no read of the partition reached past it.
    b.send(2, 20, offset=5, topic="unseen")
    b.poll(3, [("unseen", 0, 4, 21)])
    b.send(4, 21, offset=4, topic="unseen")
    # duplicate: one value at two offsets (an ack and a read).
    b.send(5, 30, offset=0, topic="dup")
    b.poll(6, [("dup", 0, 0, 30), ("dup", 0, 1, 30)])
    # inconsistent offsets and the reused offset: 40 acked at 0, a new leader gave 0 to 41.
    b.send(7, 40, offset=0, topic="reuse")
    b.send(8, 41, offset=0, topic="reuse")
    b.send(8, 42, offset=1, topic="reuse")
    b.poll(9, [("reuse", 0, 0, 41), ("reuse", 0, 1, 42)])
    # aborted read: a failed send's value was read; phantom: a value nobody sent.
    b.send(10, 50, outcome="fail", topic="abort")
    b.poll(11, [("abort", 0, 0, 50), ("abort", 0, 1, 999)])
    # poll-skip then nonmonotonic-poll by one process, then an assign forgets the position.
    b.poll(12, [("skip", 0, 0, 60), ("skip", 0, 2, 62)])
    b.poll(12, [("skip", 0, 1, 61)])
    b.assign(12, [("skip", 0)])
    b.poll(12, [("skip", 0, 0, 60)])
    for v, o in ((60, 0), (61, 1), (62, 2)):
        b.send(13, v, offset=o, topic="skip")
    # nonmonotonic-send: one process's later ack at an earlier offset.
    b.send(14, 70, offset=3, topic="nms")
    b.send(14, 71, offset=2, topic="nms")
    b.poll(15, [("nms", 0, 2, 71), ("nms", 0, 3, 70)])
    # Edge cases: read before the send completed; an info send read later; an info send never read.
    b.invoke_send(16, 80, topic="edge")
    b.poll(17, [("edge", 0, 0, 80)])
    b.complete_send(16, 80, offset=0, topic="edge")
    b.send(18, 81, outcome="info", topic="edge")
    b.poll(17, [("edge", 0, 1, 81)])
    b.send(18, 82, outcome="info", topic="edge")
    # A crash completes the open op as info; the crashed process's poll position is forgotten.
    b.invoke_poll(19)
    b.op(process=19, type="info", f="crash")
    b.nemesis("kill", ["n1"])
    b.nemesis("start", ["n1"])
    return b


def test_every_anomaly_and_edge_case_agrees_with_the_reference(spark: Any, tmp_path: Path) -> None:
    path = scenarios().write(tmp_path / "history.jsonl")
    got, want = both(spark, path)
    assert got == want
    assert counts_of(got) == {
        "lost-write": 2,
        "unseen": 1,
        "duplicate": 1,
        "inconsistent-offsets": 1,
        "aborted-read": 1,
        "phantom": 1,
        "poll-skip": 1,
        "nonmonotonic-poll": 1,
        "nonmonotonic-send": 1,
    }
    assert got["incomplete"] == []
    lost = got["anomalies"]["lost-write"]["examples"]
    assert [e["value"] for e in lost] == [10, 40]  # 40: acked at an offset a later leader reused
    assert got["anomalies"]["unseen"]["examples"][0]["value"] == 20


def test_the_plan_of_a_big_history_agrees_with_the_reference(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every anomaly and edge case again, planned as a big history's check is (`size_for` past
    SMALL_OPS: adaptive execution, broadcast joins, generated code), which the other tests' small
    histories never are."""
    from checkers import spark_session

    monkeypatch.setattr(spark_session, "SMALL_OPS", 0)
    path = scenarios().write(tmp_path / "history.jsonl")
    got, _ = spark_checker.check(path, reconvert=True)
    assert got == reference_check(path)
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"  # planned as a big one


def test_damaged_histories_agree_with_the_reference(spark: Any, tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.op(process=0, type="ok", f="send", topic="t0", partition=0, value=1, offset=0)  # orphan
    b.invoke_send(1, 2)
    b.invoke_send(1, 3)  # supersedes the open send of 2
    b.complete_send(1, 3, offset=1)
    b.op(process=2, type="invoke", f="send", topic="t0", partition=0, value="x")  # no integer value
    b.op(process=2, type="fail", f="send", error="no")
    b.op(process=3, type="invoke", f="send", value=4)  # acked without topic and partition
    b.op(process=3, type="ok", f="send", value=4, offset=2)
    b.invoke_poll(4)
    b.op(process=4, type="ok", f="poll", records=5)  # records not a list
    b.invoke_poll(5)
    b.op(process=5, type="ok", f="poll", records=[{"topic": "t0", "partition": 0, "offset": 1}, "x"])
    b.poll(5, [(0, 1), (1, 3)])
    b.invoke_poll(6)  # never completes
    lines = [json.dumps({**op, "index": i}) for i, op in enumerate(b.ops)]
    lines.insert(3, '{"index": 99, "time": 1, "process": 7, "type": "ok", "f": "teleport"}')
    lines.insert(5, '{"index": 100, "time": oops}')
    lines.insert(6, '{"index": 101, "time": 1, "process": "7", "type": "ok", "f": "send"}')
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(lines) + '\n{"index": 200, "ti')
    got, want = both(spark, path)
    assert got == want
    kinds = {incomplete_kind(r) for r in got["incomplete"]}
    assert kinds == {"torn-tail", "malformed-line", "open-invocation", "unpaired", "malformed-op"}


def test_empty_and_nemesis_only_histories(spark: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    got, want = both(spark, empty)
    assert got == want and counts_of(got) == {}
    b = HistoryBuilder()
    b.nemesis("partition", {"grudge": {"n1": ["n2"]}})
    got, want = both(spark, b.write(tmp_path / "nemesis.jsonl"))
    assert got == want and got["stats"]["ops"] == 2


seeds = st.integers(min_value=0, max_value=2**32 - 1)


@FEW
@given(
    seed=seeds,
    shape=st.tuples(st.integers(40, 240), st.integers(1, 4), st.integers(1, 3)),
    kinds=st.lists(st.sampled_from(PLANTABLE), min_size=0, max_size=6),
)
@example(seed=7, shape=(240, 4, 3), kinds=list(PLANTABLE))
@example(seed=3, shape=(40, 1, 1), kinds=[])
def test_simulated_histories_with_planted_anomalies(
    spark: Any, tmp_path: Path, seed: int, shape: tuple[int, int, int], kinds: list[str]
) -> None:
    """Random interleavings, crashes, consumers that time out and re-assign, info sends read
    later, planted anomalies (the consumer-group ones too)."""
    size, clients, partitions = shape
    ops, planted = generate_ops(
        size, seed=seed, plants=dict(Counter(kinds)), concurrency=clients + 1, partitions=partitions
    )
    path = write_history(tmp_path / "history.jsonl", ops)
    got, want = both(spark, path)
    assert got == want
    assert counts_of(got) == {k: n for k, n in planted.counts().items() if n}


@FEW
@given(
    seed=seeds,
    ops=st.integers(1000, 6000),
    plants=st.dictionaries(st.sampled_from(ANOMALY_KINDS), st.integers(0, 3)),
    crash_rate=st.sampled_from([0.0, 0.01, 0.05]),
)
@example(seed=11, ops=2000, plants=dict.fromkeys(ANOMALY_KINDS, 2), crash_rate=0.05)
def test_synthetic_histories_with_planted_anomalies(
    spark: Any, tmp_path: Path, seed: int, ops: int, plants: dict[str, int], crash_rate: float
) -> None:
    path = tmp_path / "history.jsonl"
    planted = generate(path, ops, seed=seed, plants=plants, crash_rate=crash_rate, concurrency=8)
    got, want = both(spark, path)
    assert got == want
    assert counts_of(got) == {k: n for k, n in planted.counts().items() if n}
    for name in HISTORY_ANOMALIES:
        assert len(got["anomalies"][name]["examples"]) == min(20, got["anomalies"][name]["count"])


def test_spark_json_conversion_for_histories_elsewhere(spark: Any, tmp_path: Path) -> None:
    """Histories on filesystems only Spark reaches are converted by Spark itself: same result."""
    from checkers.spark_convert import convert_with_spark
    from checkers.spark_engine import check_parquet

    path = scenarios().write(tmp_path / "history.jsonl")
    form = convert_with_spark(spark, str(path), force=True)
    # Without the conversion's figures and topic names: Spark counts and names them itself.
    got = check_parquet(spark, replace(form, figures=None, topics=None))
    assert got == reference_check(path)
    assert convert_with_spark(spark, str(path)).operations_path == form.operations_path  # cached
    from checkers.spark_stats import spark_facts

    facts = spark_facts(spark, form.operations_path, max_time=form.max_time, nemesis=form.nemesis or [])
    assert facts == history_facts(path)


def test_statistics_by_radix_select_and_many_fault_windows_agree(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The percentiles of big histories (a radix select over the latencies) and the fault windows'
    facts (summed from the seconds they span) equal the reference's, here on a small history."""
    from checkers import spark_stats

    monkeypatch.setattr(spark_stats, "RADIX_FROM", 0)
    path = tmp_path / "history.jsonl"
    generate(path, 5000, seed=13, nemesis_rate=0.01)
    facts = three_facts(spark, path)
    assert len(facts.windows) > 3


def test_statistics_when_ok_sends_go_back_in_time_agree(spark: Any, tmp_path: Path) -> None:
    """Ok sends whose completion times go back in history order (a hand-made history): the
    conversion says so and the statistics sort them by time, as the reference does."""
    path = tmp_path / "history.jsonl"
    generate(path, 3000, seed=5, nemesis_rate=0.01)
    ops = [json.loads(line) for line in path.read_text().splitlines()]
    oks = [op for op in ops if op["type"] == "ok" and op["f"] == "send"]
    oks[10]["time"], oks[11]["time"] = oks[11]["time"], oks[10]["time"] - 1  # back in time
    path.write_text("".join(json.dumps(op) + "\n" for op in ops))
    from checkers.parquet import convert

    assert not convert(path, force=True).ok_sends_in_order
    three_facts(spark, path)


def test_refusals_from_the_lines_spark_finds_agree(spark: Any, tmp_path: Path) -> None:
    """The refusals of a system (checkers/refusals.py) from the few lines Spark finds in the text
    (checkers/spark_lines.py: those that hold an `error`, then match a refusal) equal those of a
    Python pass over the whole history."""
    from checkers.refusals import ERROR_KEY, refusals
    from checkers.spark_lines import ops_matching
    from foundation.config import TestConfig

    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    kafka_python = (
        "IncompatibleBrokerVersion: Kafka broker does not support the 'InitProducerIdRequest' Kafka protocol."
    )
    b.invoke_send(1, 2)
    b.op(process=1, type="fail", f="send", error=kafka_python)
    b.invoke_send(2, 3)
    b.op(
        process=2,
        type="info",
        f="send",
        error="KafkaException: _FATAL (Idempotent producer not supported by any of the 3 connected broker(s))",
    )
    b.op(process=3, type="invoke", f="subscribe", group="g", topics=["t0"])
    b.op(
        process=3,
        type="fail",
        f="subscribe",
        error="Kafka broker does not support the 'JoinGroupRequest' Kafka protocol",
    )
    b.invoke_send(4, 4)
    b.op(process=4, type="fail", f="send", error="NotEnoughReplicas")
    b.op(process=5, type="fail", f="subscribe", group="InitProducerId")  # a refusal's words, no error
    lines = [json.dumps({**op, "index": i}) for i, op in enumerate(b.ops)]
    idempotent = next(i for i, line in enumerate(lines) if "Idempotent producer" in line)
    lines[idempotent] = lines[idempotent].replace('"error": ', '"error" : ')  # the key spelled otherwise
    lines.insert(2, '{"index": 99, "error": "InitProducerId", "oops"')  # malformed: skipped by both
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(lines) + '\n{"index": 200, "type": "fail", "error": "InitProducerId')
    config = TestConfig(idempotence=True, consume="subscribe")
    offered = {"apis": {"0": [0, 13]}}
    on_spark = refusals(
        config, path, offered, lambda patterns: ops_matching(spark, str(path), patterns, words=(ERROR_KEY,))
    )
    assert on_spark == refusals(config, path, offered)
    assert on_spark["idempotence"]["ops"] == {"fail": 1, "info": 1}
    assert on_spark["consumer groups"]["ops"] == {"fail": 1, "info": 0}


def test_the_evidence_the_report_shows_agrees_with_the_reference(spark: Any, tmp_path: Path) -> None:
    """evidence.json (checkers/evidence.py) from Spark equals the reference's on a run with every
    plantable anomaly and replica data: the lines the examples name (read by the conversion's line
    marks), the sends of their values, the replicas' records at the examples' offsets."""
    from checkers.api import check_run
    from checkers.engines import REFERENCE, SPARK
    from tests.support.checked_runs import make_run

    ops, _ = generate_ops(240, seed=7, plants=dict.fromkeys(PLANTABLE, 1), concurrency=5, partitions=2)
    run = make_run(tmp_path, ops)
    check_run(run, SPARK)
    on_spark = json.loads((run / "evidence.json").read_text())
    check_run(run, REFERENCE)
    assert on_spark == json.loads((run / "evidence.json").read_text())
    named = {op["index"] for op in on_spark["ops_named"]}
    assert on_spark["sends"] and named and on_spark["replicas"] and on_spark["latency"]
    results = json.loads((run / "results.json").read_text())
    lost = results["anomalies"]["lost-write"]["examples"][0]
    assert {lost["index"], lost["invoke_index"], lost["max_read_index"]} <= named
