"""repro and demo logic with stand-in runs: retries until the unsafe run reproduces, then the safe run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness import repro
from harness.commands import demo
from harness.run import RunOutcome
from harness.scenarios import SCENARIOS, scenario


def fake_runs(tmp_path: Path, verdicts: list[str], seen: list[Any]) -> Any:
    def run(test: Any, console: Any = None) -> RunOutcome:
        seen.append(test.config)
        verdict = verdicts.pop(0)
        results = {"valid": {"valid": True, "invalid": False}.get(verdict, "unknown"), "fatal": ["lost-write"] if verdict == "invalid" else [],
                   "anomalies": {"lost-write": {"count": 3 if verdict == "invalid" else 0}, "duplicate": {"count": 2}}}  # fmt: skip
        return RunOutcome(run_dir=tmp_path / f"run{len(seen)}", verdict=verdict, exit_code=0, results=results)

    return run


def test_reproduce_retries_with_the_next_seed_then_runs_the_safe_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(repro, "run_test", fake_runs(tmp_path, ["valid", "invalid", "valid"], seen))
    result = repro.reproduce(scenario("kip-101-truncation"), seed=7, console=Console(quiet=True), budget=1e6)
    assert [(c.variant, c.seed) for c in seen] == [
        ("high-watermark", 7),
        ("high-watermark", 8),
        ("leader-epoch", 8),
    ]
    assert result.as_expected and result.reproduced_after_s is not None
    assert repro.lost_text(result.unsafe[-1].outcome) == "3 acknowledged writes lost"
    assert repro.lost_text(result.safe.outcome) == "nothing lost" if result.safe else False


def test_demo_exit_code_follows_both_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(repro, "run_test", fake_runs(tmp_path, ["invalid", "valid"], seen))
    assert demo.main(argparse.Namespace(seed=None, store=str(tmp_path))) == 0
    assert [c.seed for c in seen] == [demo.DEMO_SEED, demo.DEMO_SEED]
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(
        "demo: high-watermark invalid (3 acknowledged writes lost, expected invalid) vs leader-epoch valid"
    )
    assert "as expected" in last

    monkeypatch.setattr(repro, "run_test", fake_runs(tmp_path, ["valid", "valid"], []))
    assert demo.main(argparse.Namespace(seed=5, store=str(tmp_path))) == 1
    assert "NOT as expected" in capsys.readouterr().out


def test_an_attempt_that_did_not_reach_its_state_is_retried_not_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that did nothing (or a required condition not met) voids the attempt, unsafe or safe."""
    seen: list[Any] = []
    plain = fake_runs(tmp_path, ["valid", "invalid", "valid", "valid"], seen)
    unreached = {1: ["lose-unsynced n2 n3: dropped 0 bytes on n2, n3: nothing was unsynced"], 3: ["x"]}

    def run(test: Any, console: Any = None) -> RunOutcome:
        outcome: RunOutcome = plain(test, console)
        outcome.unreached = unreached.get(len(seen), [])
        return outcome

    monkeypatch.setattr(repro, "run_test", run)
    result = repro.reproduce(scenario("kip-903-empty-disk"), seed=3, console=Console(quiet=True), budget=1e6)
    assert [(c.isr_broker_epoch_check, c.seed) for c in seen] == [
        (False, 3),
        (False, 4),
        (True, 4),
        (True, 5),
    ]
    summary = result.summary()
    first = summary["attempts"][0]
    assert first["judged"] is False and "dropped 0 bytes" in first["not_judged"]
    assert [a["judged"] for a in summary["safe_attempts"]] == [False, True]
    assert result.as_expected and summary["safe"]["seed"] == 5


def test_a_scenario_on_real_kafka_runs_the_affected_release_then_the_fixed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--system kafka`: the same retries, each twin on its release, with the Kafka trigger fields
    (schedule, time limit, settings) and none of the own broker's settings."""
    seen: list[Any] = []
    monkeypatch.setattr(repro, "run_test", fake_runs(tmp_path, ["valid", "invalid", "valid"], seen))
    s = scenario("kip-101-truncation")
    result = repro.reproduce(s, seed=7, console=Console(quiet=True), budget=1e6, system="kafka")
    assert [(c.kafka_version, c.seed) for c in seen] == [("0.10.2.2", 7), ("0.10.2.2", 8), ("0.11.0.0", 8)]
    first = seen[0]
    assert first.system.endswith("systems/kafka-zk.toml") and Path(first.system).is_absolute()
    assert first.variant == "leader-epoch"  # the own broker's setting is not carried over
    assert first.name == "kip-101-truncation-kafka-unsafe" and first.time_limit == s.kafka.time_limit  # type: ignore[union-attr]
    assert any(step.get("target") == "failover" for step in first.schedule)
    summary = result.summary()
    assert (summary["affected_release"], summary["fixed_release"]) == ("0.10.2.2", "0.11.0.0")
    assert result.as_expected and summary["safe_after_s"] is not None


def test_settings_scenarios_run_on_the_default_release_with_kafka_settings() -> None:
    s = scenario("unclean-election")
    unsafe, safe = s.config(False, seed=1, system="kafka"), s.config(True, seed=1, system="kafka")
    assert unsafe.kafka_version == safe.kafka_version == ""
    assert (unsafe.unclean_election, unsafe.min_insync) == (True, 1)
    assert (safe.unclean_election, safe.min_insync) == (False, 2)
    assert unsafe.schedule == safe.schedule  # its own trigger on Kafka: the heal later (a longer session)
    acks = scenario("acks-1-leader-crash")
    assert acks.config(False, seed=1, system="kafka").schedule == acks.config(False, seed=1).schedule


def test_the_delayed_end_txn_twin_runs_kafkas_java_client_on_one_release_with_both_transaction_versions() -> (
    None
):
    """Transaction version 2 fences a late EndTxn only for a client that speaks it (the Java client
    4.0+): both twins run it, on one release, with the own broker's transactional workload."""
    s = scenario("kafka-17754-delayed-end-txn")
    unsafe, safe = s.config(False, seed=1, system="kafka"), s.config(True, seed=1, system="kafka")
    assert unsafe.client == safe.client == "java" and unsafe.workload == safe.workload == "txn"
    assert unsafe.kafka_version == safe.kafka_version and unsafe.kafka_version.startswith("4.")
    assert (unsafe.transaction_version, safe.transaction_version) == (1, 2)
    own = s.config(False, seed=1)
    for key in ("partitions", "abort_p", "concurrency", "request_timeout_ms", "transaction_timeout_ms"):
        assert getattr(unsafe, key) == getattr(safe, key) == getattr(own, key), key
    assert unsafe.schedule == own.schedule


def test_the_fast_leader_change_twin_runs_kafkas_own_trigger_and_leaves_the_own_schedule() -> None:
    """A ZooKeeper-mode controller is a broker the own schedule's cut would block: the real-Kafka
    twin runs the pattern instead, with a session long enough for the survivor's freeze."""
    s = scenario("kip-279-fast-leader-change")
    unsafe, safe = s.config(False, seed=1, system="kafka"), s.config(True, seed=1, system="kafka")
    assert (unsafe.kafka_version, safe.kafka_version) == ("1.1.1", "2.0.0")
    assert unsafe.schedule == safe.schedule
    assert any(step.get("target") == "fast-leader-change" for step in unsafe.schedule)
    assert unsafe.zookeeper_session_timeout_ms == safe.zookeeper_session_timeout_ms == 15000
    own = s.config(False, seed=1)
    assert not any(step.get("target") == "fast-leader-change" for step in own.schedule)


def test_a_scenario_without_a_kafka_twin_is_bad_input_with_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from foundation.errors import BadInput
    from harness.commands import repro as command

    with pytest.raises(BadInput, match="own broker only"):
        scenario("bitflip-minority").config(False, system="kafka")
    unavailable = [s for s in SCENARIOS.values() if s.kafka is not None and s.kafka.unavailable]
    for s in unavailable:
        with pytest.raises(BadInput, match="cannot run on real Kafka here"):
            command.main(argparse.Namespace(list=False, scenario=s.name, system="kafka", seed=1, store=None))
    assert command.main(argparse.Namespace(list=True, scenario=None)) == 0
    listing = capsys.readouterr().out
    assert (
        "real Kafka (--system kafka, systems/kafka-zk.toml): Kafka 0.10.2.2 (invalid) → Kafka 0.11.0.0 (valid)"
        in " ".join(listing.split())
    )
    # every scenario says where it runs on real Kafka, or why it does not
    assert sum(line.lstrip().startswith("real Kafka") for line in listing.splitlines()) == len(SCENARIOS)


def test_a_failed_run_is_tried_again_once_and_each_retry_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that failed (a cluster that did not come up) is retried, not after two in a row; the
    console says each retry, and why the twin stops short of a verdict that counts."""
    seen: list[Any] = []
    plain = fake_runs(tmp_path, ["unknown", "invalid", "unknown", "unknown"], seen)

    def run(test: Any, console: Any = None) -> RunOutcome:
        outcome: RunOutcome = plain(test, console)
        if outcome.verdict == "unknown":
            outcome.status, outcome.reason = "failed", "cannot reach ZooKeeper"
        return outcome

    monkeypatch.setattr(repro, "run_test", run)
    console = Console(record=True, width=200)
    result = repro.reproduce(scenario("kip-101-divergence"), seed=3, console=console, budget=1e6)
    assert [(c.variant, c.seed) for c in seen] == [
        ("high-watermark", 3),
        ("high-watermark", 4),
        ("leader-epoch", 4),
        ("leader-epoch", 5),
    ]
    said = console.export_text()
    assert "unsafe twin: the run failed, trying again with seed 4" in said
    assert "safe twin: not tried again after 2 failed runs in a row" in said
    assert not result.as_expected


def test_a_retry_that_would_not_fit_the_budget_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    monkeypatch.setattr(repro, "run_test", fake_runs(tmp_path, ["valid"], seen))
    console = Console(record=True, width=200)
    result = repro.reproduce(
        scenario("kip-101-divergence"), seed=3, console=console, budget=0, with_safe=False
    )
    assert len(seen) == 1 and result.reproduced_after_s is None
    assert "unsafe twin: not tried again: another attempt" in console.export_text()


def test_an_interrupted_unsafe_twin_ends_the_repro(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during the unsafe twin's run: no retry, and the safe twin does not start."""
    seen: list[Any] = []
    plain = fake_runs(tmp_path, ["unknown", "valid"], seen)

    def run(test: Any, console: Any = None) -> RunOutcome:
        outcome: RunOutcome = plain(test, console)
        outcome.status, outcome.reason = "interrupted", "interrupted (KeyboardInterrupt)"
        return outcome

    monkeypatch.setattr(repro, "run_test", run)
    console = Console(record=True, width=200)
    result = repro.reproduce(scenario("kip-101-divergence"), seed=3, console=console, budget=1e6)
    assert [(c.variant, c.seed) for c in seen] == [("high-watermark", 3)]
    assert "interrupted: the safe twin is not run" in console.export_text()
    assert not result.as_expected and not result.safe_attempts
