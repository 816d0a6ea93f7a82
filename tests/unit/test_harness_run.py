"""The run lifecycle with stand-ins for the cluster, workload, nemesis and checker.

Each stand-in records what was called, so these tests show the lifecycle's promises: every file of
the run dir is written, faults are healed and the cluster torn down whatever happens (exception,
SIGTERM), the verdict line and the exit code follow the contract, and test.json reruns the test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from foundation import run_files
from foundation.config import load_file, resolve, validate
from harness.compose import Test as ComposedTest
from harness.run import run_test


class FakeSut:
    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return {("t0", p): {"leader": "n1", "leader_epoch": 2, "isr": ["n1", "n2", "n3"]} for p in range(2)}

    def controller(self) -> str:
        return "n1"


class FakeCluster:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.sut = FakeSut()

    def up(self) -> None:
        self.calls.append("up")

    def down(self) -> None:
        self.calls.append("down")

    def bootstrap_servers(self) -> list[str]:
        return ["10.77.1.11:9092"]

    def collect(self, dest: Path) -> None:
        self.calls.append("collect")
        (dest / "n1" / "logs").mkdir(parents=True)
        (dest / "n1" / "logs" / "broker.log").write_text("hello\n")


class FakeNemesis:
    def __init__(self, history: Any, calls: list[str], fail: bool = False) -> None:
        self.history, self.calls, self.fail = history, calls, fail

    def validate(self) -> None:
        self.calls.append("validate")

    def run_schedule(self, stop: threading.Event) -> None:
        stop.wait(0.2)
        if stop.is_set():
            return
        self.history.append({"process": "nemesis", "type": "invoke", "f": "kill", "value": ["n2"]})
        self.history.append({"process": "nemesis", "type": "ok", "f": "kill", "value": ["n2"]})
        if self.fail:
            raise RuntimeError("the nemesis broke")
        stop.wait(0.2)
        self.history.append({"process": "nemesis", "type": "invoke", "f": "start", "value": ["n2"]})
        self.history.append({"process": "nemesis", "type": "ok", "f": "start", "value": ["n2"]})

    def heal_all(self) -> None:
        self.calls.append("heal_all")

    def active_faults(self) -> list[dict[str, Any]]:
        return []


class FakeProgress:
    def __init__(self, **kwargs: Any) -> None:
        pass

    def set_faults(self, faults: Any) -> None:
        pass

    def stop(self) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class Pieces:
    """The stand-ins a fake `Test` is made of (`test_of`)."""

    build_cluster: Any
    cleanup_leftovers: Any
    setup_topics: Any
    run_workload: Any
    final_drain: Any
    check_run: Any
    build_nemesis: Any
    heal_leftovers: Any
    preflight: Any = None


def fake_test(config: Any, p: Pieces, state_dir: Path | None = None) -> ComposedTest:
    """A `Test` of stand-ins, as `harness.compose.compose` builds the real one."""

    class Load:
        def client_setup(self) -> None:
            return None

        def setup_topics(self, bootstrap: list[str]) -> Any:
            return p.setup_topics(config, bootstrap)

        def refusal(self, bootstrap: list[str]) -> None:
            return None

        def progress(self, **kwargs: Any) -> FakeProgress:
            return FakeProgress(**kwargs)

        def run(self, bootstrap: list[str], history: Any, stop: threading.Event, progress: Any, **gate: Any) -> Any:  # fmt: skip
            return p.run_workload(config, bootstrap, history, stop, progress, **gate)

        def drain(self, bootstrap: list[str], history: Any, timeout: float, *, path: Path) -> Any:
            return p.final_drain(config, bootstrap, history, timeout, path=path)

    class Checker:
        engine = config.checker

        def journal(self, history: Path) -> None:
            return None

        def check(self, run: Path) -> dict[str, Any]:
            return p.check_run(run, self.engine, spark_master=config.spark_master)  # type: ignore[no-any-return]

    class Leftovers:
        def faults(self) -> list[Any]:
            return p.heal_leftovers(state_dir)  # type: ignore[no-any-return]

        def clusters(self) -> list[Any]:
            return p.cleanup_leftovers(state_dir)  # type: ignore[no-any-return]

    wants = bool(config.nemesis) or bool(config.schedule)
    return ComposedTest(
        config=config,
        build_cluster=lambda: p.build_cluster(config, Path(config.store) / ".work"),
        load=Load(),
        checker=Checker(),
        leftovers=Leftovers(),
        faults=(lambda cluster, history: p.build_nemesis(config, cluster, history, None)) if wants else None,
        preflight=(lambda sut: p.preflight(config, sut, None, state_dir)) if p.preflight else None,
        state_dir=state_dir,
    )


def pieces(calls: list[str], *, nemesis_fails: bool = False, workload_fails: bool = False) -> Pieces:
    sent: list[tuple[int, int]] = []

    def run_workload(
        config: Any,
        bootstrap: list[str],
        history: Any,
        stop: threading.Event,
        progress: Any,
        ready: threading.Event | None = None,
        go: threading.Event | None = None,
    ) -> None:
        value = 0
        if ready is not None and go is not None:
            ready.set()
            while not go.wait(0.05) and not stop.is_set():
                pass
        while not stop.is_set():
            history.append(
                {"process": 0, "type": "invoke", "f": "send", "topic": "t0", "partition": 0, "value": value}
            )
            history.append({"process": 0, "type": "ok", "f": "send", "topic": "t0", "partition": 0, "value": value, "offset": value})  # fmt: skip
            sent.append((value, value))
            value += 1
            if workload_fails and value == 20:
                raise RuntimeError("client exploded")
            time.sleep(0.005)

    class Drain:
        complete = True
        reason = ""

    def final_drain(config: Any, bootstrap: list[str], history: Any, timeout: float, path: Path) -> Drain:
        calls.append("drain")
        recs = [{"topic": "t0", "partition": 0, "offset": o, "value": v} for v, o in sent]
        history.append({"process": 99, "type": "invoke", "f": "poll"})
        history.append({"process": 99, "type": "ok", "f": "poll", "records": recs})
        Path(path).write_text(json.dumps({"complete": True}))
        return Drain()

    def check_run(run: Path, engine: str, spark_master: str | None = None) -> dict[str, Any]:
        calls.append(f"check:{engine}")
        results = {
            "valid": True,
            "anomalies": {},
            "stats": {"sends": {"ok": len(sent)}},
            "checker": {"engine": engine},
        }
        (run / "results.json").write_text(json.dumps(results))
        return results

    return Pieces(
        build_cluster=lambda config, work, **kw: FakeCluster(calls),
        cleanup_leftovers=lambda state_dir: calls.append("cleanup_leftovers") or [],
        setup_topics=lambda config, bootstrap: calls.append("topics"),
        run_workload=run_workload,
        final_drain=final_drain,
        check_run=check_run,
        build_nemesis=lambda config, cluster, history, rng: FakeNemesis(history, calls, nemesis_fails),
        heal_leftovers=lambda state_dir: calls.append("heal_leftovers") or [],
    )


def quiet() -> Console:
    return Console(stderr=True, quiet=True)


def test_a_completed_run_writes_every_file_and_tears_down(tmp_path: Path) -> None:
    calls: list[str] = []
    config = resolve(
        None, {"store": str(tmp_path), "time_limit": 0.6, "nemesis": "kill", "checker": "reference"}
    )
    outcome = run_test(fake_test(config, pieces(calls)), console=quiet(), screenshot=False)
    assert outcome.exit_code == 0 and outcome.verdict == "valid" and outcome.status == "completed"
    run = outcome.run_dir
    assert outcome.verdict_line == f"verdict: valid {run}"
    assert run.parent == tmp_path / "queue" and (tmp_path / "latest").resolve() == run
    for name in ("test.json", "history.jsonl", "results.json", "report.html", "harness.log", "drain.json",
                 "cluster-state.json", "outcome.json", "nodes/n1/logs/broker.log"):  # fmt: skip
        assert (run / name).exists(), name
    assert calls[:3] == ["heal_leftovers", "cleanup_leftovers", "up"]
    assert calls.index("heal_all") < calls.index("drain") < calls.index("collect") < calls.index("down")
    assert calls[-1] == "check:reference"
    state = json.loads((run / "cluster-state.json").read_text())
    assert state["partitions"][0] == {"topic": "t0", "partition": 0, "leader": "n1", "leader_epoch": 2, "isr": ["n1", "n2", "n3"]}  # fmt: skip
    assert "phase load" in (run / "harness.log").read_text()
    assert 'data-verdict="valid"' in (run / "report.html").read_text()


def test_test_json_reruns_the_same_test(tmp_path: Path) -> None:
    config = resolve(None, {"store": str(tmp_path), "time_limit": 0.3, "seed": 0})
    outcome = run_test(fake_test(config, pieces([])), console=quiet(), screenshot=False)
    again = validate(load_file(outcome.run_dir / "test.json"))
    assert again == config and again.seed == config.seed > 0


@pytest.mark.parametrize("what", ["workload", "nemesis"])
def test_a_failing_piece_still_heals_tears_down_checks_and_reports(tmp_path: Path, what: str) -> None:
    calls: list[str] = []
    config = resolve(None, {"store": str(tmp_path), "time_limit": 5, "nemesis": "kill"})
    p = pieces(calls, workload_fails=what == "workload", nemesis_fails=what == "nemesis")
    started = time.monotonic()
    outcome = run_test(fake_test(config, p), console=quiet(), screenshot=False)
    assert time.monotonic() - started < 4  # the failure stopped the load early
    assert outcome.status == "failed" and outcome.exit_code == 4
    assert ("exploded" if what == "workload" else "broke") in outcome.reason
    assert "heal_all" in calls and calls.index("collect") < calls.index("down")
    assert "drain" not in calls  # no final reads after a failed load: the verdict cannot be valid
    assert outcome.verdict == "unknown"  # the checker saw nothing wrong, but the test did not finish
    assert 'data-verdict="unknown"' in (outcome.run_dir / "report.html").read_text()
    assert json.loads((outcome.run_dir / "outcome.json").read_text())["status"] == "failed"


def test_sigterm_heals_and_tears_down(tmp_path: Path) -> None:
    calls: list[str] = []
    config = resolve(None, {"store": str(tmp_path), "time_limit": 30, "nemesis": "kill"})
    done = threading.Event()

    def terminate_during_load() -> None:
        # Only once the load runs (the SIGTERM handler is installed by then), never after the run.
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            if any(p.stat().st_size > 0 for p in tmp_path.glob("queue/*/history.jsonl")):
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=terminate_during_load, daemon=True)
    killer.start()
    try:
        outcome = run_test(fake_test(config, pieces(calls)), console=quiet(), screenshot=False)
    finally:
        done.set()
        killer.join()
    assert outcome.status == "interrupted" and outcome.exit_code == 130
    assert "heal_all" in calls and "down" in calls
    assert (outcome.run_dir / run_files.HISTORY).stat().st_size > 0


def test_a_cluster_that_cannot_come_up_is_an_infrastructure_failure(tmp_path: Path) -> None:
    from foundation.errors import InfrastructureError

    calls: list[str] = []
    p = pieces(calls)

    class Broken(FakeCluster):
        def up(self) -> None:
            raise InfrastructureError("ZooKeeper on zk exited at start")

    p = dataclasses.replace(p, build_cluster=lambda config, work, **kw: Broken(calls))
    outcome = run_test(
        fake_test(resolve(None, {"store": str(tmp_path)}), p), console=quiet(), screenshot=False
    )
    assert outcome.exit_code == 4 and outcome.verdict == "unknown" and "ZooKeeper" in outcome.reason
    assert "collect" not in calls


def test_recovery_waits_for_the_full_isr_and_records_when_it_is_not_reached(tmp_path: Path) -> None:
    """A restarted broker still outside the ISR at collection time is said in outcome.json."""
    from harness.run import wait_for_recovery

    class LaggingSut(FakeSut):
        def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
            return {("t0", p): {"leader": "n1", "leader_epoch": 2, "isr": ["n1", "n3"]} for p in range(2)}

    config = resolve(None, {"store": str(tmp_path), "time_limit": 0.3, "recover_timeout": 0.6})
    assert wait_for_recovery(LaggingSut(), config, 0.1) == (True, "")
    ok, why = wait_for_recovery(LaggingSut(), config, 0.1, full=True)
    assert not ok and "ISR ['n1', 'n3']" in why
    assert wait_for_recovery(FakeSut(), config, 0.1, full=True) == (True, "")

    p = pieces([])
    p = dataclasses.replace(p, build_cluster=lambda config, work, **kw: type("C", (FakeCluster,), {})([]))
    outcome = run_test(fake_test(config, p), console=quiet(), screenshot=False)
    assert json.loads((outcome.run_dir / "outcome.json").read_text())["recovery"]["full_isr"] is True
    cluster = FakeCluster([])
    cluster.sut = LaggingSut()
    p = dataclasses.replace(p, build_cluster=lambda config, work, **kw: cluster)
    outcome = run_test(fake_test(config, p), console=quiet(), screenshot=False)
    recovery = json.loads((outcome.run_dir / "outcome.json").read_text())["recovery"]
    assert recovery["min_isr"] is True and recovery["full_isr"] is False and "t0-0" in recovery["why"]
    assert "not every replica rejoined the ISR" in (outcome.run_dir / "harness.log").read_text()


def test_healing_leftovers_says_what_it_removed(tmp_path: Path) -> None:
    import io

    p = pieces([])
    p = dataclasses.replace(p, heal_leftovers=lambda state_dir: ["fault 7 on n1, n2"])
    p = dataclasses.replace(p, cleanup_leftovers=lambda state_dir: ["sl-old"])
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sl-old.json").write_text(
        json.dumps({"cluster": "sl-old", "owner": {"pid": 1, "start": 0}, "resources": [
            {"kind": "process", "name": "b1"}, {"kind": "process", "name": "b2"}, {"kind": "netns", "name": "sl1"}]})
    )  # fmt: skip
    out = io.StringIO()
    console = Console(file=out, width=200)
    config = resolve(None, {"store": str(tmp_path), "time_limit": 0.2})
    run_test(
        fake_test(config, p, state_dir=tmp_path / "state"), console=console, screenshot=False, live=False
    )
    text = out.getvalue()
    assert "removed leftover fault 7 on n1, n2\n" in text
    assert "removed leftover cluster sl-old (1 netns, 2 process)\n" in text


def test_a_refused_fault_ends_the_run_before_any_cluster_starts(tmp_path: Path) -> None:
    calls: list[str] = []
    p = dataclasses.replace(
        pieces(calls),
        preflight=lambda config, sut, work, state_dir: "fault 'delay' cannot run here: no tc netem on n1",
    )
    config = resolve(None, {"store": str(tmp_path), "time_limit": 5, "nemesis": "delay"})
    outcome = run_test(fake_test(config, p), console=quiet(), screenshot=False)
    assert outcome.status == "refused" and outcome.exit_code == 2
    assert outcome.reason == "fault 'delay' cannot run here: no tc netem on n1"
    assert "up" not in calls and not any(c.startswith("check") for c in calls)
    ended = json.loads((outcome.run_dir / "outcome.json").read_text())
    assert (ended["status"], ended["phase"], ended["verdict"]) == ("refused", "preflight", "unknown")
    page = (outcome.run_dir / "report.html").read_text()
    assert 'data-verdict="refused"' in page and "no tc netem on n1" in page


def test_a_run_that_fails_during_setup_gets_a_report_naming_the_phase(tmp_path: Path) -> None:
    calls: list[str] = []
    p = pieces(calls)

    class NoCluster(FakeCluster):
        def up(self) -> None:
            raise RuntimeError("zookeeper did not start")

    p = dataclasses.replace(p, build_cluster=lambda config, work, **kw: NoCluster(calls))
    config = resolve(None, {"store": str(tmp_path), "time_limit": 5})
    outcome = run_test(fake_test(config, p), console=quiet(), screenshot=False)
    assert outcome.status == "failed" and outcome.exit_code == 4
    assert json.loads((outcome.run_dir / "outcome.json").read_text())["phase"] == "cluster_up"
    page = (outcome.run_dir / "report.html").read_text()
    assert 'data-verdict="unknown"' in page
    assert (
        "The run failed during set-up (cluster up), before any load: RuntimeError: zookeeper did not start."
        in page
    )


def test_sigterm_as_the_load_starts_is_an_interruption(tmp_path: Path) -> None:
    """A signal between the workload's start and the nemesis's (its thread not started yet) is
    still an interruption: the clean-up joins only the threads that started."""
    calls: list[str] = []
    p = pieces(calls)
    plain = p.run_workload

    def signal_at_once(config: Any, bootstrap: list[str], history: Any, stop: threading.Event, progress: Any, **gate: Any) -> None:  # fmt: skip
        os.kill(os.getpid(), signal.SIGTERM)
        plain(config, bootstrap, history, stop, progress, **gate)

    p = dataclasses.replace(p, run_workload=signal_at_once)
    config = resolve(None, {"store": str(tmp_path), "time_limit": 30, "nemesis": "kill"})
    outcome = run_test(fake_test(config, p), console=quiet(), screenshot=False)
    assert (outcome.status, outcome.exit_code) == ("interrupted", 130), outcome.reason
    assert "heal_all" in calls and "down" in calls


class _Stateless:
    """A system whose every broker serves every partition; one broker is not answering yet."""

    identity_notes = [
        "n1 and n2 report the same broker id 111: brokers are told apart by the address they advertise"
    ]

    def __init__(self) -> None:
        self.asked = 0

    def leaderless(self) -> str:
        return "every broker serves every partition"

    def serving(self) -> dict[str, str | None]:
        self.asked += 1
        return {"n1": None, "n2": None if self.asked > 2 else "no answer"}


def test_a_leaderless_system_recovers_once_every_broker_answers_and_its_state_says_why() -> None:
    from harness.report.panels import settings_rows
    from harness.run import final_state_json, wait_for_recovery

    sut = _Stateless()
    assert wait_for_recovery(
        sut, validate({"nodes": 2, "replication_factor": 1, "min_insync": 1, "seed": 1}), timeout=10
    ) == (True, "")
    assert sut.asked == 3
    state = final_state_json(sut)
    assert state["partitions"] == [] and state["leaderless"] == "every broker serves every partition"
    assert state["broker_identity"] == _Stateless.identity_notes
    rows = dict(settings_rows({}, None, state=state))
    assert rows["partition leaders"] == "every broker serves every partition"
    assert rows["broker identity"].startswith("n1 and n2 report the same broker id 111")
    stuck = _Stateless()
    stuck.asked = -100
    assert wait_for_recovery(
        stuck, validate({"nodes": 2, "replication_factor": 1, "min_insync": 1, "seed": 1}), timeout=0.6
    ) == (
        False,
        "n2: no answer",
    )


def test_a_scripted_schedule_still_running_at_the_time_limit_runs_to_its_end_within_one_more() -> None:
    """On a loaded machine a scripted schedule's faults and gates take longer: the load goes on
    until the schedule ends, at most one more time limit; a random schedule is not waited for."""
    from foundation.config import TestConfig
    from harness.run import _schedule_to_its_end

    class Nemesis:
        def __init__(self, scripted: bool) -> None:
            self.scripted, self.schedule_started = scripted, 1.0
            self.unreached: list[str] = []
            self.executed: list[dict[str, Any]] = [{"wait": 1}, {"do": "kill"}]

    config = TestConfig(seed=1, time_limit=0.6, schedule=({"wait": 1}, {"do": "kill"}, {"heal": "all"}))
    console = Console(record=True, width=200)
    stop = threading.Event()

    def waited(scripted: bool, schedule_s: float) -> float:
        thread = threading.Thread(target=stop.wait, args=(schedule_s,), daemon=True)
        thread.start()
        began = time.monotonic()
        _schedule_to_its_end(config, Nemesis(scripted), thread, stop, console)  # type: ignore[arg-type]
        return time.monotonic() - began

    assert 0.15 <= waited(True, 0.2) <= 0.55  # until the schedule ended
    assert 0.55 <= waited(True, 5.0) <= 0.9  # at most one more time limit
    assert waited(False, 5.0) < 0.1
    assert (
        "the schedule is at step 2 of 3 at the time limit: the load goes on until it ends"
        in console.export_text()
    )
    stop.set()
