"""The run lifecycle: one test from an empty machine to a verdict, leaving nothing behind.

    run dir + test.json → heal leftovers → cluster up → topics → load + faults (time limit)
    → heal → wait for recovery → final drain → cluster state → collect → check → report → down

Every step that creates something has its undo in a `finally`, and every step after the load is
attempted even when an earlier one failed (Ctrl-C, an exception): the history is on disk as it
happens, so whatever can be checked and reported still is. A controller killed with SIGKILL
leaves state files behind; the next run (or `strandline cluster down --all`) removes them first.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from foundation import run_files
from foundation.config import TestConfig, delivery_timeout_ms
from foundation.errors import (
    EXIT_BAD_INPUT,
    EXIT_INFRASTRUCTURE,
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    BadInput,
    InfrastructureError,
    StrandlineError,
)
from harness import rundir
from harness.compose import Checks, RunsFaults, RunsLoad, Test
from harness.fetch_progress import fetch_progress

log = logging.getLogger(__name__)

EXIT_INTERRUPTED = 130
VERDICT_EXIT = {"valid": EXIT_VALID, "invalid": EXIT_INVALID, "unknown": EXIT_UNKNOWN}


@dataclass
class RunOutcome:
    """How a run ended: the verdict and exit code of the contract, and the run directory."""

    run_dir: Path
    verdict: str = "unknown"  # valid | invalid | unknown
    status: str = "completed"  # completed | interrupted | failed | refused
    reason: str = ""
    phase: str = ""  # the phase that failed (or refused), e.g. "cluster_up"; "" when none did
    exit_code: int = EXIT_UNKNOWN
    results: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    # After healing: did every partition get a leader and its full replica set in the ISR in time?
    recovery: dict[str, Any] = field(default_factory=dict)
    # Why a scripted schedule did not reach the state it was written for (nemesis `unreached`):
    # a step that did nothing, a required condition not met; a repro does not judge such a run.
    unreached: list[str] = field(default_factory=list)

    @property
    def verdict_line(self) -> str:
        return f"verdict: {self.verdict} {self.run_dir}"


def verdict_of(results: dict[str, Any] | None) -> str:
    valid = (results or {}).get("valid")
    return "valid" if valid is True else "invalid" if valid is False else "unknown"


class Refused(BadInput):
    """A requested fault cannot run on this system or machine: found before any cluster started."""


class _Interrupted(BaseException):
    """SIGTERM, turned into an exception so the run heals and tears down as for Ctrl-C."""


@contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """The first Ctrl-C or SIGTERM interrupts the run; later ones are ignored so the clean-up
    (heal, collect, tear down) finishes. SIGKILL still works: the next run heals what it left."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    interrupted = False

    def handler(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if interrupted:
            log.warning("signal %d ignored: cleaning up (kill -9 abandons; the next run heals)", signum)
            return
        interrupted = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise _Interrupted(f"signal {signum}")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class _ClientNoise(logging.Filter):
    """Kafka and ZooKeeper clients log every refused connection during faults: expected, not news."""

    PREFIXES = ("kafka", "kazoo", "aiokafka", "confluent_kafka")

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.CRITICAL or not record.name.startswith(self.PREFIXES)


@contextmanager
def _harness_log(run: Path) -> Iterator[None]:
    """Everything logged goes to <run>/harness.log (INFO and up); the terminal stays as quiet as asked."""
    handler = logging.FileHandler(run / run_files.HARNESS_LOG, encoding="utf-8")
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    terminal = [h for h in root.handlers if not isinstance(h, logging.FileHandler)]
    old_levels = {h: h.level for h in terminal}
    noise = _ClientNoise()
    verbose = old_level != logging.NOTSET and old_level <= logging.DEBUG
    for h in terminal:
        if h.level == logging.NOTSET:
            h.setLevel(old_level or logging.WARNING)
        if not verbose:
            h.addFilter(noise)
    root.addHandler(handler)
    if old_level == logging.NOTSET or old_level > logging.INFO:
        root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for h in terminal:
            h.setLevel(old_levels[h])
            h.removeFilter(noise)
        handler.close()


class _Phases:
    """Rich progress lines for a person, and timings for outcome.json."""

    def __init__(self, console: Console, timings: dict[str, float]):
        self.console = console
        self.timings = timings
        self.failed = ""  # the key of the first phase that did not finish

    @contextmanager
    def phase(self, key: str, text: str) -> Iterator[None]:
        started = time.monotonic()
        self.console.print(f"[bold cyan]▸[/] {text} …", highlight=False)
        log.info("phase %s: %s", key, text)
        ok = False
        try:
            yield
            ok = True
        finally:
            took = time.monotonic() - started
            self.timings[key] = round(took, 2)
            if not ok and not self.failed:
                self.failed = key
            mark = "[green]✓[/]" if ok else "[red]✗[/]"
            self.console.print(f"  {mark} {text} ({took:.1f} s)", highlight=False)


def wait_for_recovery(
    sut: Any, config: TestConfig, timeout: float, *, full: bool = False
) -> tuple[bool, str]:
    """Until every partition has a leader and an ISR of at least min.insync.replicas, or timeout.

    `full`: until every ISR holds the whole replica set (every broker caught up and truncated its
    unacknowledged tail), so the data dirs collected afterwards show settled logs, not a restarted
    follower's tail it has not truncated yet.
    """
    from clusters.sut import ServesEveryPartition

    if isinstance(sut, ServesEveryPartition):  # no ISR to fill: every broker answering is whole
        return wait_for_serving(sut, timeout)
    expected = {(f"t{t}", p) for t in range(config.topics) for p in range(config.partitions)}
    need = config.replication_factor if full else min(config.min_insync, config.replication_factor)
    deadline = time.monotonic() + timeout
    why = "no partition state yet"
    while True:
        try:
            state = sut.partition_state()
            lacking = []
            for tp in sorted(expected):
                s = state.get(tp)
                if s is None:
                    lacking.append(f"{tp[0]}-{tp[1]}: no state")
                elif s.get("leader") is None:
                    lacking.append(f"{tp[0]}-{tp[1]}: no leader")
                elif len(s.get("isr") or []) < need:
                    lacking.append(f"{tp[0]}-{tp[1]}: ISR {s.get('isr')}")
            if not lacking:
                return True, ""
            why = "; ".join(lacking[:4])
        except Exception as e:  # ZooKeeper may still be coming back
            why = f"{type(e).__name__}: {e}"
        if time.monotonic() >= deadline:
            return False, why
        time.sleep(0.5)


def wait_for_serving(sut: Any, timeout: float) -> tuple[bool, str]:
    """Until every broker of a system whose brokers all serve every partition answers for itself."""
    deadline = time.monotonic() + timeout
    while True:
        lacking = [f"{node}: {why}" for node, why in sorted(sut.serving().items()) if why]
        if not lacking:
            return True, ""
        if time.monotonic() >= deadline:
            return False, "; ".join(lacking[:4])
        time.sleep(0.5)


def final_state_json(sut: Any) -> dict[str, Any]:
    """Leaders, epochs, ISRs and (where the system names them) replica sets at the end, in the shape
    checkers.replica_logs and the report read: the replica-log checks follow the final assignment.
    A system whose every broker serves every partition has no leaders to write down: it says so.
    What stood out in how the brokers name themselves goes along (`broker_identity`: the report)."""
    from clusters.sut import ServesEveryPartition

    identity = {"broker_identity": list(notes)} if (notes := getattr(sut, "identity_notes", None)) else {}
    if isinstance(sut, ServesEveryPartition):
        return {"controller": None, "partitions": [], "leaderless": sut.leaderless(), **identity}
    state = sut.partition_state()
    controller = None
    try:
        controller = sut.controller()
    except Exception as e:
        log.info("controller unknown: %s", e)
    return {
        "controller": controller,
        "partitions": [
            {
                "topic": tp[0],
                "partition": tp[1],
                "leader": s.get("leader"),
                "leader_epoch": s.get("leader_epoch"),
                "isr": list(s.get("isr") or []),
                **({"replicas": list(s["replicas"])} if s.get("replicas") else {}),
            }
            for tp, s in sorted(state.items())
        ],
        **identity,
    }


def heal_leftovers(test: Test) -> list[str]:
    """Undo what a crashed controller left: nemesis faults first, then whole clusters."""
    healed: list[str] = []
    try:
        out = test.leftovers.faults()
        healed += [str(x) for x in (out or [])]
    except Exception as e:
        log.warning("healing leftover faults failed: %s", e)
    try:
        described = _describe_clusters(test.state_dir)
        for name in test.leftovers.clusters() or []:
            healed.append(f"cluster {name}{described.get(str(name), '')}")
    except Exception as e:
        log.warning("cleaning leftover clusters failed: %s", e)
    return healed


def _describe_clusters(state_dir: Path | None) -> dict[str, str]:
    """Cluster name -> ' (2 process, 3 netns)': what its state file holds, said before it is removed."""
    try:
        from clusters.state import list_states, state_dir_default

        out = {}
        for state in list_states(state_dir or state_dir_default()):
            kinds: dict[str, int] = {}
            for r in state.data.get("resources") or []:
                kinds[str(r.get("kind"))] = kinds.get(str(r.get("kind")), 0) + 1
            if kinds:
                out[state.cluster] = " (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")"
        return out
    except Exception as e:  # only a description: never stops the clean-up
        log.info("leftover clusters not described: %s", e)
        return {}


def run_test(
    test: Test,
    *,
    console: Console | None = None,
    live: bool = True,
    screenshot: bool = True,
    on_run_dir: Callable[[Path], None] | None = None,
) -> RunOutcome:
    """Run one test end to end and return its outcome; never leaves a cluster or fault behind.

    `test` is composed (`harness.compose.compose`): bad input ended there, exit 2, before anything
    existed; here every part is an object the test holds, the config only numbers and words."""
    config = test.config
    console = console or Console(stderr=True)
    store = Path(config.store)
    run = rundir.new_run_dir(store, config.name)
    if on_run_dir is not None:
        on_run_dir(run)
    outcome = RunOutcome(run_dir=run)
    rundir.write_json(run / run_files.TEST_JSON, {"config": config.to_json(), "seed": config.seed})
    phases = _Phases(console, outcome.timings)
    console.print(f"[bold]strandline run[/] {config.name} → {run}", highlight=False)
    started = time.monotonic()
    with _harness_log(run), _signals_as_interrupt():
        try:
            _lifecycle(test, run, phases, live, outcome.recovery, outcome.unreached)
        except (KeyboardInterrupt, _Interrupted) as e:
            outcome.status, outcome.reason = "interrupted", f"interrupted ({type(e).__name__} {e})".strip()
            console.print("[yellow]interrupted: healed and tore down; what was written is kept[/]")
        except Refused as e:
            outcome.status, outcome.reason = "refused", str(e)
            outcome.exit_code = e.exit_code
            log.info("run refused: %s", e)
            console.print(f"[red]refused:[/] {e}", highlight=False, soft_wrap=True)
        except StrandlineError as e:
            outcome.status, outcome.reason = "failed", str(e)
            outcome.exit_code = e.exit_code
            log.info("run failed: %s", e)
            console.print(f"[red]failed:[/] {e}", highlight=False, soft_wrap=True)
        except Exception as e:
            outcome.status, outcome.reason = "failed", f"{type(e).__name__}: {e}"
            log.info("run failed:\n%s", traceback.format_exc())
            console.print(
                f"[red]failed:[/] {type(e).__name__}: {e} (traceback in harness.log)",
                highlight=False,
                soft_wrap=True,
            )
        outcome.timings["total"] = round(time.monotonic() - started, 2)
        outcome.phase = phases.failed if outcome.status != "completed" else ""
        _finish(run, outcome, phases, screenshot, test.checker)
    return outcome


def _lifecycle(
    test: Test,
    run: Path,
    phases: _Phases,
    live: bool,
    recovery: dict[str, Any],
    unreached: list[str],
) -> None:
    from clusters.sut import RefusesTests
    from history.writer import HistoryWriter

    config, cluster = test.config, test.cluster
    with phases.phase("heal_leftovers", "healing leftovers of earlier runs"):
        healed = heal_leftovers(test)
        for what in healed:
            log.info("removed leftover %s", what)
            phases.console.print(f"    removed leftover {what}", highlight=False)
        if not healed:
            phases.console.print("    nothing left over", highlight=False)
    cluster.progress = fetch_progress(phases.console)  # a first fetch of Kafka takes a while
    setup = test.load.client_setup()
    if setup is not None:  # before any cluster starts: a bad client version is exit 2 at once
        what, prepare = setup
        with phases.phase("client", what):
            prepare(cluster.progress)
    if test.preflight is not None and (test.faults is not None or isinstance(cluster.sut, RefusesTests)):
        with phases.phase("preflight", "asking what the faults need, before any cluster starts"):
            why = test.preflight(cluster.sut)
            if why:
                raise Refused(why)
    history: Any = None
    columnar: Any = None
    nemesis: RunsFaults | None = None
    up = False
    try:
        with phases.phase("cluster_up", test.cluster_text):
            cluster.up()  # removes what it created itself when it fails
        up = True
        bootstrap = cluster.bootstrap_servers()
        with phases.phase(
            "topics",
            f"topics: {config.topics} × {config.partitions} partitions, RF {config.replication_factor}",
        ):
            test.load.setup_topics(bootstrap)
        with phases.phase("handshake", f"asking the brokers through the test's client ({config.client})"):
            why = test.load.refusal(bootstrap)
            if why:
                raise InfrastructureError(why)
        history = HistoryWriter(run / run_files.HISTORY)
        columnar = test.checker.journal(run / run_files.HISTORY)
        if test.faults is not None:
            nemesis = test.faults(cluster, history)
            nemesis.validate()
        try:
            _load(config, test.load, phases, history, nemesis, bootstrap, live, cluster.sut)
        finally:
            if nemesis is not None:
                unreached += [str(x) for x in getattr(nemesis, "unreached", [])]
                for why in unreached:
                    phases.console.print(f"    [yellow]schedule: {why}[/]", highlight=False, soft_wrap=True)
                with phases.phase("heal", "healing every fault"):
                    nemesis.heal_all()
        with phases.phase("recover", "waiting for every partition to have a leader and its full ISR"):
            recovery.update(_recover(cluster.sut, config, phases.console))
        with phases.phase("drain", "final reads of every partition"):
            drain = test.load.drain(bootstrap, history, config.drain_timeout, path=run / run_files.DRAIN)
            if not drain.complete:
                phases.console.print(f"    [yellow]incomplete: {drain.reason}[/]", highlight=False)
        _guard(
            "cluster state",
            lambda: rundir.write_json(run / run_files.CLUSTER_STATE, final_state_json(cluster.sut)),
        )
    finally:
        if history is not None:
            _guard("close history", history.close)
        if nemesis is not None:
            _guard("heal", nemesis.heal_all)  # idempotent; a no-op after the heal above
        if columnar is not None:  # the tail of the history's Parquet form, once the faults are healed
            _guard("the history's Parquet form", columnar.finish)
        if up:
            with phases.phase("collect", "collecting node logs and data dirs"):
                _guard("collect", lambda: cluster.collect(run / run_files.NODES))
            with phases.phase("down", "tearing the cluster down"):
                cluster.down()


def _recover(sut: Any, config: TestConfig, console: Console) -> dict[str, Any]:
    """Wait (within recover_timeout) for leaders and min ISRs, then for full ISRs; say what was reached.

    The result goes to outcome.json as `recovery`: {"min_isr": bool, "full_isr": bool, "seconds",
    "why"} -- a replica still outside the ISR when the data dirs are collected may hold an
    untruncated, unacknowledged tail, which the replica-log checker does not count as divergence.
    """
    started = time.monotonic()
    ok, why = wait_for_recovery(sut, config, config.recover_timeout)
    full = False
    if ok:
        left = max(0.0, config.recover_timeout - (time.monotonic() - started))
        full, why = wait_for_recovery(sut, config, left, full=True)
    took = round(time.monotonic() - started, 2)
    if not ok:
        log.warning("cluster did not recover within %.0f s: %s", config.recover_timeout, why)
        console.print(f"    [yellow]not recovered: {why}[/]", highlight=False)
    elif not full:
        log.warning(
            "not every replica rejoined the ISR within %.0f s (%s); collecting anyway",
            config.recover_timeout,
            why,
        )
        console.print(f"    [yellow]ISR not full: {why}[/]", highlight=False)
    else:
        log.info("every partition has a leader and its full ISR after %.2f s", took)
    return {"min_isr": ok, "full_isr": full, "seconds": took, "why": why}


def _load(
    config: TestConfig,
    load: RunsLoad,
    phases: _Phases,
    history: Any,
    nemesis: RunsFaults | None,
    bootstrap: list[str],
    live: bool,
    sut: Any = None,
) -> None:
    """Load and faults until the time limit (or Ctrl-C); both threads stop before this returns.

    With faults, the time limit counts from when the load flows (the nemesis's schedule starts:
    a loaded machine's clients may take half a minute to get their first acknowledgement), taken
    at most a time limit after the clients began; a scripted schedule still running then runs on
    to its end (`_schedule_to_its_end`). At the time limit the faults end first: the nemesis heals, and the load goes on until the
    clients got a write acknowledged and a read returned records again (at most the recovery time
    of verdict power, checkers/power.py) and RECOVERY_TAIL_S more, so that a fault healed by the
    time limit is followed by load like every other (its fault window's load, for the verdict)."""
    stop = threading.Event()
    faults_stop = threading.Event()  # the nemesis's: set first at the time limit
    errors: list[BaseException] = []
    progress = load.progress(enabled=live, console=phases.console, title=f"load {config.name}")
    if nemesis is not None:
        active = nemesis.active_faults
        progress.set_faults(lambda: [_fault_text(a) for a in active()])
        if hasattr(progress, "stats") and hasattr(nemesis, "reads_seen"):  # the first fault waits for a read
            nemesis.reads_seen = lambda: progress.stats is not None and progress.stats.records_read > 0

    def guarded(target: Callable[[], Any], name: str) -> Callable[[], None]:
        def body() -> None:
            try:
                target()
            except BaseException as e:  # recorded and re-raised in the main thread
                log.info("%s thread failed:\n%s", name, traceback.format_exc())
                errors.append(e)
                stop.set()

        return body

    ready, go = threading.Event(), threading.Event()
    workload = threading.Thread(
        target=guarded(
            lambda: load.run(bootstrap, history, stop, progress, ready=ready, go=go),
            "workload",
        ),
        name="workload",
        daemon=True,
    )
    threads = [workload]
    if nemesis is not None:
        threads.append(
            threading.Thread(
                target=guarded(lambda: nemesis.run_schedule(faults_stop), "nemesis"),
                name="nemesis",
                daemon=True,
            )
        )
    faults = ", ".join(config.nemesis) or ("scripted" if config.schedule else "none")
    try:
        # The clients start before the load phase: on a loaded machine a worker process takes
        # seconds to import its client library, and those seconds are not load.
        with phases.phase("clients", f"starting {config.concurrency} client processes"):
            workload.start()
            while not ready.wait(0.2) and workload.is_alive() and not stop.is_set():
                pass
        with phases.phase(
            "load", f"load for {config.time_limit:g} s at {config.rate:g} ops/s; faults: {faults}"
        ):
            go.set()
            for t in threads[1:]:
                t.start()
            began = time.monotonic()
            deadline = began + config.time_limit
            said = False
            while not stop.is_set() and time.monotonic() < deadline:
                stop.wait(min(0.5, max(0.0, deadline - time.monotonic())))
                if nemesis is not None and getattr(nemesis, "unreached", None):
                    # the scripted schedule cannot reach its state: the rest of the time limit
                    # would test nothing it was written for (repro tries another attempt)
                    phases.console.print("    the schedule stopped: ending the load early", highlight=False)
                    break
                # The time limit counts from when the load flows (the nemesis's schedule starts),
                # taken at most a time limit after the clients began.
                flowing = getattr(nemesis, "schedule_started", None) if nemesis is not None else None
                if flowing is not None and not said:
                    said = True
                    late = min(flowing, began + config.time_limit) - began
                    deadline = began + late + config.time_limit
                    if late >= LATE_LOAD_S:
                        phases.console.print(
                            f"    the load flowed {late:.0f} s after the clients began: the time limit counts from there",
                            highlight=False,
                        )
            if nemesis is not None and not stop.is_set():
                _schedule_to_its_end(config, nemesis, threads[1], stop, phases.console)
                faults_stop.set()
                threads[1].join(timeout=(delivery_timeout_ms(config) + config.request_timeout_ms) / 1000 + 30)
                _recovery_tail(config, sut, stop, phases.console, progress, nemesis)
    finally:
        faults_stop.set()
        stop.set()
        for t in threads:
            if t.ident is not None:  # a Ctrl-C between two starts leaves the later ones unstarted
                t.join(timeout=(delivery_timeout_ms(config) + config.request_timeout_ms) / 1000 + 30)
        progress.stop()
    if errors:
        e = errors[0]
        if isinstance(e, StrandlineError):
            raise e
        raise InfrastructureError(f"load or faults failed: {type(e).__name__}: {e}")


def _schedule_to_its_end(
    config: TestConfig, nemesis: RunsFaults, thread: threading.Thread, stop: threading.Event, console: Console
) -> None:
    """A scripted schedule still running at the time limit (on a loaded machine its faults and
    heals take seconds each, its gates wait longer) runs on to its end, and the load with it, for
    at most one more time limit: a schedule cut short tests nothing it was written for."""
    if not getattr(nemesis, "scripted", False) or getattr(nemesis, "schedule_started", None) is None:
        return
    cap = time.monotonic() + config.time_limit
    said = False
    while thread.is_alive() and not stop.is_set() and not getattr(nemesis, "unreached", None):
        if time.monotonic() >= cap:
            return
        if not said:
            said = True
            step = len(getattr(nemesis, "executed", []))
            console.print(
                f"    the schedule is at step {step} of {len(config.schedule)} at the time limit: "
                f"the load goes on until it ends (at most {config.time_limit:g} s more)",
                highlight=False,
            )
        thread.join(min(0.5, max(0.0, cap - time.monotonic())))


# A load that flows this late is said on the console (the time limit counts from it).
LATE_LOAD_S = 5.0
# Load kept after the clients got through again, once the faults were healed at the time limit.
RECOVERY_TAIL_S = 1.0


def _recovery_tail(
    config: TestConfig,
    sut: Any,
    stop: threading.Event,
    console: Console,
    progress: Any,
    nemesis: RunsFaults | None = None,
) -> None:
    """The load after the time limit's heal: until the brokers it brought back serve again (the
    nemesis's `ready` ops, at most `nemesis.ready.READY_BOUND_S`), then until the clients got a
    write acknowledged and a read that returned records again (the workload's counts; without
    them, until every partition has a leader and min.insync.replicas in its ISR), at most the
    recovery time verdict power counts after the brokers serve again, then RECOVERY_TAIL_S more."""
    from checkers.power import Asked
    from nemesis.ready import READY_BOUND_S

    begun = time.monotonic()
    wait_served = getattr(nemesis, "wait_served", None)
    if wait_served is not None and not wait_served(READY_BOUND_S, stop):
        log.info(
            "load after the faults' heal: the brokers did not all serve again within %g s", READY_BOUND_S
        )
    started = time.monotonic()
    bound = Asked.of(config, known=True).recovery_s
    stats = getattr(progress, "stats", None)
    if stats is not None:

        def seen() -> tuple[int, int]:
            return stats.counts["send"]["ok"] + stats.counts["txn"]["ok"], stats.records_read

        acked, read = seen()
        ok = False
        while not stop.is_set() and time.monotonic() - started < bound:
            now_acked, now_read = seen()
            if now_acked > acked and now_read > read:
                ok = True
                break
            stop.wait(0.2)
        why = "" if ok else "no acknowledged write and read yet"
    else:
        ok, why = (True, "") if sut is None else wait_for_recovery(sut, config, bound)
    if not stop.is_set():
        stop.wait(RECOVERY_TAIL_S)
    took = time.monotonic() - begun
    said = "the clients get through again" if ok else f"not within {bound:g} s ({why})"
    log.info("load after the faults' heal: %.1f s (%s)", took, said)
    console.print(f"    faults healed at the time limit; load for {took:.1f} s more: {said}", highlight=False)


def _fault_text(active: Any) -> str:
    """'kill n2 (12 s)' from the nemesis's description of an active fault."""
    if not isinstance(active, dict):
        return str(active)
    nodes = " ".join(map(str, active.get("nodes") or []))
    seconds = active.get("seconds")
    return f"{active.get('fault', '?')} {nodes}".strip() + (
        f" ({seconds:.0f} s)" if isinstance(seconds, int | float) else ""
    )


def _guard(what: str, fn: Callable[[], Any]) -> bool:
    """Run a clean-up step; a failure is logged and does not stop the next steps."""
    try:
        fn()
        return True
    except (Exception, KeyboardInterrupt) as e:
        log.warning("%s failed: %s", what, e)
        log.info("%s failed", what, exc_info=True)
        return False


def _finish(
    run: Path,
    outcome: RunOutcome,
    phases: _Phases,
    screenshot: bool,
    checker: Checks,
) -> None:
    """Check and report whatever was written, then settle the verdict and the exit code."""
    from checkers.api import checked_with
    from checkers.power import lines as power_lines
    from harness.report import write_report

    if (run / run_files.HISTORY).exists():
        try:
            with phases.phase("check", f"checking the history ({checker.engine} checker)"):
                outcome.results = checker.check(run)
            phases.console.print(f"  {checked_with(outcome.results)}", highlight=False, markup=False)
            for line in power_lines(outcome.results.get("power")):
                phases.console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
        except (Exception, KeyboardInterrupt) as e:
            log.info("check failed", exc_info=True)
            phases.console.print(f"[red]check failed:[/] {e}", highlight=False, soft_wrap=True)
            if outcome.status == "completed":
                outcome.status, outcome.reason = "failed", f"check failed: {e}"
    outcome.verdict = verdict_of(outcome.results)
    if outcome.status != "completed" and outcome.verdict == "valid":
        outcome.verdict = "unknown"  # nothing wrong was seen, but the test did not run to its end
    rundir.write_json(
        run / run_files.OUTCOME,
        {
            "status": outcome.status,
            "reason": outcome.reason,
            **({"phase": outcome.phase} if outcome.phase else {}),
            "verdict": outcome.verdict,
            "timings": outcome.timings,
            **({"recovery": outcome.recovery} if outcome.recovery else {}),
            **({"unreached": outcome.unreached} if outcome.unreached else {}),
        },
    )
    try:
        with phases.phase("report", "writing the report"):
            report = write_report(run)
            if screenshot:
                from harness.report.shot import keep_screenshot

                keep_screenshot(report)
        phases.console.print(f"report: {report}", highlight=False)
    except (Exception, KeyboardInterrupt) as e:
        log.info("report failed", exc_info=True)
        phases.console.print(f"[red]report failed:[/] {e}", highlight=False, soft_wrap=True)
    if outcome.status == "interrupted":
        outcome.exit_code = EXIT_INTERRUPTED
    elif outcome.status == "refused":
        outcome.exit_code = EXIT_BAD_INPUT
    elif outcome.status == "failed":
        if outcome.exit_code not in (EXIT_BAD_INPUT, EXIT_INFRASTRUCTURE):
            outcome.exit_code = EXIT_INFRASTRUCTURE
    else:
        outcome.exit_code = VERDICT_EXIT[outcome.verdict]
