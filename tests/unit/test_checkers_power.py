"""Verdict power (checkers/power.py): a run is `valid` only when the load flowed before the first
fault and inside every fault window, and what the workload was asked to do happened."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from checkers.api import check_run
from checkers.engines import REFERENCE
from checkers.power import MIN_STRETCH_S, Asked, Tally, evaluate, exact_seconds, intervals, tally_from_times
from checkers.power_history import tally_history
from foundation.config import TestConfig
from tests.support.history_builder import HistoryBuilder
from tests.support.hypothesis_settings import FEW


def run_dir(tmp_path: Path, b: HistoryBuilder, **config: Any) -> Path:
    """A run directory of the history, a complete drain and no data dirs to check."""
    run = tmp_path / "run"
    run.mkdir()
    settings = TestConfig(**{"nodes": 2, "replication_factor": 2, "min_insync": 1, "rate": 10.0, **config})
    (run / "test.json").write_text(json.dumps({"config": settings.to_json(), "seed": 1}))
    b.write(run / "history.jsonl")
    (run / "drain.json").write_text(json.dumps({"complete": True}))
    (run / "nodes").mkdir()
    (run / "nodes" / "replicas-unavailable.txt").write_text("not collected in this test")
    return run


def load(b: HistoryBuilder, seconds: int, first_value: int, offset: int) -> tuple[int, int]:
    """One acknowledged write and one read of it per second, for `seconds` s."""
    value = first_value
    for _ in range(seconds):
        b.send(0, value, offset=offset)
        b.poll(1, [(offset, value)])
        b.advance(1.0)
        value, offset = value + 1, offset + 1
    return value, offset


def test_a_silent_fault_window_makes_a_clean_run_unknown(tmp_path: Path) -> None:
    b = HistoryBuilder()
    value, offset = load(b, 10, 0, 0)
    b.nemesis("kill", {"nodes": ["n1"], "fault_id": "kill-1"})
    b.advance(5.0)
    b.nemesis("start", {"nodes": ["n1"], "fault_id": "kill-1"})
    b.advance(18.0)  # past the heal's recovery time (two session timeouts and a request timeout)
    value, offset = load(b, 10, value, offset)
    b.nemesis("pause", {"nodes": ["n2"], "fault_id": "pause-2"})
    load(b, 3, value, offset)
    b.nemesis("resume", {"nodes": ["n2"], "fault_id": "pause-2"})
    results = check_run(run_dir(tmp_path, b), REFERENCE)
    power = results["power"]
    assert results["valid"] == "unknown" and results["underpowered"] is True
    assert results["anomalies"]["lost-write"]["count"] == 0
    assert [w["loaded"] for w in power["windows"]] == [False, True]
    # counted from a second after each fault struck (what was in flight then is not its load)
    assert power["windows"][0]["acked_writes"] == 0 and power["windows"][1]["acked_writes"] == 2
    assert power["reasons"] == [
        "too little load: none in 1 of 2 fault windows (first: kill n1 at 10.041 s: 0 acknowledged"
        " writes, 0 reads with records)"
    ]
    assert "power: too little load" in results["explanation"][-1]


def test_load_in_every_window_and_before_the_first_fault_is_valid(tmp_path: Path) -> None:
    b = HistoryBuilder()
    value, offset = load(b, 10, 0, 0)
    b.nemesis("kill", {"nodes": ["n1"], "fault_id": "kill-1"})
    value, offset = load(b, 4, value, offset)
    b.nemesis("start", {"nodes": ["n1"], "fault_id": "kill-1"})
    load(b, 10, value, offset)
    results = check_run(run_dir(tmp_path, b), REFERENCE)
    power = results["power"]
    assert results["valid"] is True and "underpowered" not in results
    assert power["enough"] and power["reasons"] == []
    assert power["before_first_fault"]["acked_writes"] == 10
    assert power["windows"][0]["acked_writes"] == 3 + 10  # its 4 s but the first and the load after its heal
    assert power["run"]["acked_writes"] == 24 and 1.0 <= power["run"]["longest_without_ack_s"] < 1.01


def test_too_little_load_over_the_run_names_the_minimum(tmp_path: Path) -> None:
    b = HistoryBuilder()
    load(b, 45, 0, 0)  # 45 acks in 45 s where 200 ops/s asks for at least 2 % of 9000
    results = check_run(run_dir(tmp_path, b, rate=200.0), REFERENCE)
    assert results["valid"] == "unknown"
    assert results["power"]["reasons"] == ["too little load: 45 acknowledged writes in 44 s (at least 177)"]


def test_a_rate_beyond_the_machine_asks_at_most_ten_acks_a_second(tmp_path: Path) -> None:
    """`bench workload` asks 100,000 ops/s: 2 % of it is more than any machine here serves, so the
    minimum is ten acknowledged writes a second; eleven a second is enough, nine is not."""
    for per_second, enough in ((11, True), (9, False)):
        b, value = HistoryBuilder(), 0
        for _ in range(20):
            for _ in range(per_second):
                b.send(0, value, offset=value)
                b.advance(1.0 / per_second)
                value += 1
            b.poll(1, [(value - 1, value - 1)])
        run = tmp_path / str(per_second)
        run.mkdir()
        results = check_run(run_dir(run, b, rate=100_000.0), REFERENCE)
        assert 200 <= results["power"]["minimum"]["acked_writes"] <= 205, results["power"]["minimum"]
        assert "10 per second" in results["power"]["minimum"]["why"]
        assert results["power"]["enough"] is enough, results["power"]["reasons"]


def test_no_load_before_the_first_fault(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.nemesis("partition", {"nodes": ["n1"], "fault_id": "partition-1"})
    load(b, 20, 0, 0)
    results = check_run(run_dir(tmp_path, b), REFERENCE)
    assert results["power"]["reasons"] == ["too little load: none before the first fault"]


def test_workload_options_that_never_happened_are_named(tmp_path: Path) -> None:
    b = HistoryBuilder()
    load(b, 20, 0, 0)
    results = check_run(run_dir(tmp_path, b, crash_clients=8.0, nemesis=("kill",)), REFERENCE)
    assert results["valid"] == "unknown"
    assert results["power"]["reasons"] == [
        "crash_clients = 8: no client process crashed",
        "faults were asked for and none struck",
    ]


def test_faults_in_force_together_are_tested_together(tmp_path: Path) -> None:
    """A fault that struck into the outage another one made counts the load after their heal."""
    b = HistoryBuilder()
    value, offset = load(b, 5, 0, 0)
    b.nemesis("partition", {"nodes": ["n1"], "fault_id": "partition-1"})
    b.advance(2.0)
    b.nemesis("restart", {"nodes": ["n2"], "fault_id": "restart-2"})  # over in an instant
    b.advance(20.0)  # the partition is down through the restart's own recovery time
    b.nemesis("heal", {"nodes": ["n1"], "fault_id": "partition-1"})
    load(b, 5, value, offset)
    results = check_run(run_dir(tmp_path, b), REFERENCE)
    windows = results["power"]["windows"]
    assert [w["fault"] for w in windows] == ["partition", "restart"]
    assert windows[1]["end_s"] == windows[0]["end_s"] and windows[1]["acked_writes"] == 5
    assert results["valid"] is True


def late_restart(b: HistoryBuilder, ready: str | None) -> None:
    """Every broker killed at 10 s and started at 15 s; they serve again (`ready`) only 25 s after
    their start, as real Kafka's JVM brokers on a loaded machine; the load flows again from then.
    `ready`: "ok" (journaled), "info" (awaited, never served), None (a history from before `ready`)."""
    value, offset = load(b, 10, 0, 0)
    nodes = ["n1", "n2"]
    b.nemesis("kill", {"nodes": nodes, "fault_id": "kill-1"})
    b.advance(5.0)
    b.nemesis("start", {"nodes": nodes, "fault_id": "kill-1"})
    if ready is not None:
        b.op(
            process="nemesis",
            type="invoke",
            f="ready",
            value={"fault": "kill", "fault_id": "kill-1", "nodes": nodes},
        )
    b.advance(25.0)  # longer than the recovery time from the start (2 × 6 s sessions + 5 s requests)
    if ready == "ok":
        done = {"fault": "kill", "fault_id": "kill-1", "nodes": nodes, "waited_s": 25.0}
        b.op(process="nemesis", type="ok", f="ready", value=done)
    load(b, 10, value, offset)
    if ready == "info":
        b.op(
            process="nemesis",
            type="info",
            f="ready",
            value={"fault_id": "kill-1"},
            error="n1 n2 did not serve",
        )


def test_recovery_counts_from_when_restarted_brokers_serve_again(tmp_path: Path) -> None:
    """A window's recovery counts from the `ready` op (its brokers serve again), not from the heal;
    a history without it judges as before (the window ends 17 s after the heal: no load in it)."""
    verdicts = {}
    for ready in ("ok", None, "info"):
        b = HistoryBuilder()
        late_restart(b, ready)
        run = tmp_path / str(ready)
        run.mkdir()
        results = check_run(run_dir(run, b), REFERENCE)
        window = results["power"]["windows"][0]
        verdicts[ready] = (results["valid"], window["loaded"], window["acked_writes"], window["ready_s"])
        if ready == "ok":
            assert window["end_s"] == results["power"]["load"]["end_s"]  # 40 s + 17 s is past the load
            assert abs(window["ready_s"] - (window["healed_s"] + 25.0)) < 0.01
        if ready is None:
            assert abs(window["end_s"] - (window["healed_s"] + 17.0)) < 0.001
            assert results["power"]["reasons"][0].startswith("too little load: none in 1 of 1 fault windows")
    # served again and then loaded: valid; no `ready`: unknown, as before; never served: to the load's end
    assert verdicts == {
        "ok": (True, True, 10, verdicts["ok"][3]),
        None: ("unknown", False, 0, None),
        "info": (True, True, 10, None),
    }


def test_the_minimum_leaves_out_the_time_restarted_brokers_did_not_serve(tmp_path: Path) -> None:
    """At 100 ops/s the run needs 2 acknowledged writes a second while the clients issued them, but
    not in the 25 s between the heal and its `ready` (the cluster was being brought back)."""
    b = HistoryBuilder()
    late_restart(b, "ok")
    results = check_run(run_dir(tmp_path, b, rate=100.0), REFERENCE)
    load, minimum = results["power"]["load"], results["power"]["minimum"]
    assert abs(load["restarting_s"] - 25.0) < 0.01 and 48 < load["issued_s"] < 50
    assert minimum["acked_writes"] == math.ceil(0.02 * 100 * (load["issued_s"] - load["restarting_s"]))
    assert "while restarted brokers did not serve yet" in minimum["why"]
    assert results["power"]["reasons"] == [  # 20 acknowledged writes: short of 2 a second all the same
        f"too little load: 20 acknowledged writes in 49 s, 25 s of them restarting (at least {minimum['acked_writes']})"
    ]


def test_invalid_stays_invalid_whatever_the_power(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.nemesis("kill", {"nodes": ["n1"], "fault_id": "kill-1"})
    b.send(0, 1, offset=0)
    b.send(0, 2, offset=1)
    b.poll(1, [(1, 2)])  # the acknowledged value 1 is gone: read past it, never read
    results = check_run(run_dir(tmp_path, b), REFERENCE)
    assert results["valid"] is False and not results["power"]["enough"]


@given(
    st.lists(st.floats(0, 30, allow_nan=False), max_size=60),
    st.lists(st.tuples(st.floats(0, 30), st.floats(0, 30)), min_size=1, max_size=5),
)
@FEW
def test_a_tally_counts_and_measures_stretches_exactly(
    times: list[float], spans: list[tuple[float, float]]
) -> None:
    """Per-second summaries plus the exact times of the bounds' seconds (or those seconds cut at
    the bounds, `Cuts`) give what the times give."""
    import numpy as np

    from checkers.power import Interval, cut_into

    wanted = [Interval(min(a, b), max(a, b)) for a, b in spans]
    tally = tally_from_times({"acked": times}, 0.0, 30.0, exact_seconds(wanted))
    cut = tally_from_times({"acked": times}, 0.0, 30.0, [])
    seconds = np.asarray(sorted(exact_seconds(wanted)), np.int64)
    bounds = np.asarray(sorted({x for span in wanted if span.hi >= span.lo for x in (span.lo, span.hi)}))
    at = np.asarray(times, np.float64)
    cut_into(at[np.isin(at.astype(np.int64), seconds)], bounds, cut.exact.setdefault("acked", {}))
    for values in cut.exact["acked"].values():
        if isinstance(values, list):
            values.sort()
    for span in wanted:
        assert cut.count("acked", span.lo, span.hi) == tally.count("acked", span.lo, span.hi)
        assert cut.longest_gap("acked", span.lo, span.hi) == tally.longest_gap("acked", span.lo, span.hi)
        assert tally.count("acked", span.lo, span.hi) == sum(1 for t in times if span.lo <= t <= span.hi)
        inside = sorted(t for t in times if span.lo <= t <= span.hi)
        bounds = [span.lo, *inside, span.hi]
        longest = max(b - a for a, b in zip(bounds, bounds[1:], strict=False))
        assert tally.longest_gap("acked", span.lo, span.hi) == (
            round(longest, 3) if longest >= MIN_STRETCH_S else 0.0
        )


def test_the_reference_tally_reads_groups_transactions_and_crashes(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.subscribe(3, "g")
    b.send(0, 1, offset=0)
    b.poll(3, [(0, 1)])
    b.commit(3, "g", [("t0", 0, 1)])
    b.commit(3, "g", [("t0", 0, 1)], outcome="fail")
    b.op(process=3, type="invoke", f="rebalance", group="g", revoked=[], assigned=[["t0", 0]])
    b.op(process=3, type="ok", f="rebalance", group="g", revoked=[], assigned=[["t0", 0]])
    b.poll(3, [])  # no records: not a read that returned records
    mops = [{"f": "send", "topic": "t0", "partition": 0, "value": 2}, {"f": "poll"}]
    done = [
        {**mops[0], "offset": 1},
        {"f": "poll", "records": [{"topic": "t0", "partition": 0, "offset": 0, "value": 1}]},
    ]
    b.op(process=5, type="invoke", f="crash")
    b.op(process=5, type="info", f="crash", error="killed abruptly")
    b.op(process=4, type="invoke", f="txn", mops=mops)
    b.op(process=4, type="ok", f="txn", mops=done)
    path = b.write(tmp_path / "history.jsonl")
    asked = Asked(rate=None, crash_clients=1.0, groups=True)
    tally, windows = tally_history(path, asked)
    power = evaluate(tally, windows, asked)
    assert power["run"] == {
        "acked_writes": 2,
        "reads": 2,
        "commits": 1,
        "rebalances": 1,
        "longest_without_ack_s": 0.0,
        "crashes": 1,
    }
    assert power["enough"] and power["minimum"]["acked_writes"] == 1


def test_no_client_operation_is_no_load() -> None:
    power = evaluate(Tally(), [], Asked(rate=200.0))
    assert not power["enough"] and power["reasons"] == ["too little load: no write completed"]
    assert intervals([], Asked(rate=1.0), None, None) == []
