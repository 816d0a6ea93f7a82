"""The Nemesis: runs a schedule, journals every fault, heals (what it was asked, and whether the
cluster can do it, is nemesis/requested.py; a pattern's step sequence is played by
nemesis/choreography.py).

Every fault is journaled as process "nemesis": `invoke` (what was asked), then `ok` (what it did:
nodes, grudge, probability, offsets), `fail` (it certainly did not happen: e.g. no leader to
kill) or `info` (unknown: it raised half-way). Each fault's value carries its `fault_id`, and its
heal op carries the same id, so a report can draw the window between them.

Every fault is written to the ledger (state.py) before it is applied; `heal_all` heals what is
active, then whatever the ledger still lists, then removes our chains everywhere: it is idempotent
and safe to call from a signal handler's thread or twice.
"""

from __future__ import annotations

import logging
import math
import random
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from clusters.node import Node
from clusters.sut import ClusterView, FaultsByCommand, HasLeaders, RunsOnPython
from foundation.config import TestConfig
from foundation.errors import BadInput
from history.writer import HistoryWriter
from nemesis import choreography, conditions, net
from nemesis.packages import Active, Context, NoTarget, lookup
from nemesis.packages.patterns import pattern_of
from nemesis.packages.process import start_node
from nemesis.packages.sequence import Pattern, Timing
from nemesis.ready import ReadyWatch
from nemesis.requested import Requested
from nemesis.state import FaultLedger, default_state_dir, run_recipe

log = logging.getLogger(__name__)

NEMESIS = "nemesis"
# Heal order: the network first (so restarted brokers can reach each other), processes last.
# A membership change settles last: its reassignment needs the target brokers running again.
HEAL_ORDER = (
    "clock",
    "partition",
    "loss",
    "bandwidth",
    "delay",
    "hold",
    "pause",
    "kill",
    "lose-unsynced",
    "corrupt",
    "member",
)


class Nemesis(Requested):
    def __init__(
        self,
        config: TestConfig,
        cluster: ClusterView,
        history: HistoryWriter | None,
        rng: random.Random,
        state_dir: str | Path | None = None,
    ) -> None:
        self.config = config
        self.history = history
        self.rng = rng
        sut = cluster.sut
        python = (sut.python if isinstance(sut, RunsOnPython) else None) or sys.executable
        # The ledger lives beside the cluster's state (so one `heal_leftovers(state_dir)` finds both).
        state = Path(state_dir) if state_dir is not None else (cluster.state_dir or default_state_dir())
        self.ledger = FaultLedger(state)
        self.ctx = Context(
            config=config,
            nodes=list(cluster.nodes),
            sut=sut,
            zookeeper=cluster.zookeeper_node,
            bootstrap=cluster.bootstrap_servers,
            ledger=self.ledger,
            python=str(python),
        )
        self._lock = threading.RLock()
        self._active: dict[str, Active] = {}
        self.ctx.busy = lambda: {n for a in list(self._active.values()) for n in a.nodes}
        # After each heal (and restart): when its brokers serve again (the history's `ready` op).
        self.ready = ReadyWatch(self.ctx, self._journal, self._history_closed)
        self._counter = 0
        self._closing = False
        self._touched_qdisc = False
        self._after: dict[str, Any] | None = None  # what the last wait_until saw
        self._unprobed: set[str] = set()  # packages `all` leaves out: their probe failed
        self.executed: list[dict[str, Any]] = []  # the decisions, in order, as they were taken
        # The nodes of the last fault applied or broker started or resumed (`node = "last"`).
        self._last_nodes: list[str] = []
        # Brokers a start of part of a fault started (and no fault struck since): running, so a
        # later `start` of every broker leaves them be.
        self._started_alone: set[str] = set()
        # Why a scripted schedule did not reach the state it was written for: a step that did
        # nothing, a required condition not met, the time limit before its last fault.
        self.unreached: list[str] = []
        # When (time.monotonic()) the load flowed and the schedule's clock started; None: not yet.
        self.schedule_started: float | None = None
        # Whether a client's read returned records yet (the run sets it from its workload's counts;
        # None: not known, and not waited for).
        self.reads_seen: Callable[[], bool] | None = None

    # --- running ------------------------------------------------------------------------------

    def run_schedule(self, stop_event: threading.Event) -> None:
        """Thread target: run the schedule until it ends or `stop_event` is set. Never raises.

        When stopped (the time limit), it heals what is active at once, from this thread, so
        clients blocked on a paused or cut-off broker finish while the workload winds down.
        """
        steps = list(self.config.schedule) if self.scripted else []
        done = 0
        try:
            if not self._await_load(stop_event):
                log.warning("nemesis: the load never flowed before the time limit: no fault struck")
            for step in self.steps():
                if stop_event.is_set() or self._closing:
                    break
                self.executed.append(dict(step))
                try:
                    if not self.execute(step, stop_event):
                        break
                except Exception as e:  # noqa: BLE001 - one failed fault must not end the test
                    log.warning("nemesis step %s failed: %s", step, e)
                done += 1
        except Exception:  # noqa: BLE001
            log.exception("nemesis schedule crashed")
        left = [s for s in steps[done:] if "do" in s or "wait_until" in s]
        if left and not self.unreached:
            self.unreached.append(
                f"the time limit came before step {done + 1} of {len(steps)} ({_step_text(left[0])})"
            )
        if stop_event.is_set() and not self._closing:
            try:
                self.heal()
            except Exception:  # noqa: BLE001 - heal_all will try again
                log.exception("nemesis: healing at the end of the schedule failed")

    def _await_load(self, stop: threading.Event) -> bool:
        """Wait until acknowledgements reach the cluster steadily (condition `acks-flowing`) and
        a read returned records (`reads_seen`, when the run gives it), so the schedule's clock
        starts with the load: a fault into a cluster that serves no client
        tests nothing. Unbounded but for the time limit (`stop`; `choreography.LOAD_BOUND_S` for
        tests without clients); said once it takes long. False: stopped first. A system that
        reports no leaders cannot tell, and is not waited for."""
        if not isinstance(self.ctx.sut, HasLeaders):
            self.schedule_started = time.monotonic()
            return True
        started = time.monotonic()
        step = {"wait_until": "acks-flowing", "poll": 0.5}
        bound = choreography.LOAD_BOUND_S
        self._wait_until({**step, "timeout": bound, "say_after": choreography.LOAD_TIMEOUT_S}, stop)
        self._after = None  # the first fault's own waits say what it struck into
        self._await_reads(stop, started)
        if stop.is_set() or self._closing:
            return False
        log.info("nemesis: the load flows after %.1f s; the schedule starts", time.monotonic() - started)
        self.schedule_started = time.monotonic()
        return True

    def _await_reads(self, stop: threading.Event, started: float) -> None:
        """Wait until a client's read returned records too (`reads_seen`): consumer-group members
        read only once their group assigned them partitions, which took a Kafka group under load
        longer than the load's first acknowledgements (10 s, and the first fault struck into
        members that had read nothing); verdict power wants a read before the first fault."""
        said = False
        while (
            self.reads_seen is not None and not self.reads_seen() and not stop.is_set() and not self._closing
        ):
            if not said and time.monotonic() - started >= choreography.LOAD_TIMEOUT_S:
                said = True
                log.warning("nemesis: no read returned records yet: waiting for one until the time limit")
            stop.wait(0.5)

    def execute(self, step: dict[str, Any], stop_event: threading.Event | None = None) -> bool:
        """Run one step; False when the schedule cannot go on: a required condition was not met
        (it is said in `unreached`)."""
        stop = stop_event or threading.Event()
        if "wait" in step:
            stop.wait(float(step["wait"]))
        elif "heal" in step:
            which = step["heal"]
            self.heal(None if which in ("all", True) else str(which))
        elif "wait_until" in step:
            self._wait_until(step, stop)
            seen = self._after or {}
            if step.get("required") and seen.get("timed_out") and not stop.is_set():
                self.note_unreached(
                    f"{_step_text(step)}: not met within {float(step.get('timeout', 60)):g} s"
                )
                return False
        elif step.get("do") == "heal":
            self.heal(step.get("fault"))
        elif step.get("do") in ("start", "resume"):
            self._start_or_resume(step)
        elif "do" in step and (pattern := _pattern(step)) is not None:
            choreography.play(self, pattern, step, stop)
        elif "do" in step:
            self.apply(step)
        return True

    def note_unreached(self, why: str) -> None:
        """A scripted schedule (not the random one, whose patterns end at will) missed its state."""
        if self.scripted:
            log.warning("nemesis: the schedule did not reach its state: %s", why)
            self.unreached.append(why)

    # --- what a pattern's sequence asks of its stage (nemesis.choreography.Stage) ---------------

    @property
    def closing(self) -> bool:
        return self._closing

    def timing(self) -> Timing:
        lag_ms = self.config.replica_lag_time_max_ms
        return Timing(session_s=self._session_s(), lag_s=lag_ms / 1000)

    def next_id(self, prefix: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{prefix}-{self._counter}"

    def heal_active(self, active: Active) -> None:
        """Heal one fault a sequence applied, unless something healed it already."""
        with self._lock:
            if active.id in self._active:
                self._heal_one(active)

    def wait_until(self, step: dict[str, Any], stop: threading.Event) -> dict[str, Any]:
        """Wait for a condition; what it saw (with `timed_out` when it was not met)."""
        self._wait_until(step, stop)
        return dict(self._after or {})

    def journal(self, type_: str, f: str, value: dict[str, Any], error: str | None = None) -> None:
        self._journal(type_, f, value, error)

    def apply(self, step: dict[str, Any]) -> Active | None:
        package = lookup(str(step["do"]))
        if package is None:
            raise BadInput(f"unknown fault {step['do']!r}")
        request = {k: v for k, v in step.items() if k not in ("do", "pick")}
        after, self._after = self._after, None
        if after is not None:
            request["after"] = after
            if step.get("target") == "follower" and after.get("follower") and _same_partition(after, step):
                # "the follower" right after a condition about a follower is the one it found
                step = {**step, "target": after["follower"]}
        with self._lock:
            if self._closing:
                return None
            self._counter += 1
            fault_id = f"{package.name}-{self._counter}"
            self._journal("invoke", package.f, {**request, "fault_id": fault_id})
            pick = random.Random(int(step.get("pick", 0)))
            try:
                active = package.apply(self.ctx, dict(step), pick, fault_id)
            except NoTarget as e:
                self.ledger.cross_out(fault_id)
                self._journal("fail", package.f, {**request, "fault_id": fault_id}, error=str(e))
                return None
            except Exception as e:
                self._journal("info", package.f, {**request, "fault_id": fault_id}, error=_text(e))
                raise
            active.started = time.monotonic()
            if package.name in ("bandwidth", "delay"):
                self._touched_qdisc = True
            self._last_nodes = list(active.nodes)
            self._started_alone -= set(active.nodes)
            done = {**active.value, "fault_id": fault_id}
            nothing = package.did_nothing(active.value)
            if nothing is not None:
                done["did_nothing"] = nothing
                what = f"{package.name} {' '.join(active.nodes)}".strip()
                if step.get("required"):  # the step is what the schedule needs: it did not happen
                    self.note_unreached(f"{what}: {nothing}")
                else:
                    log.info("nemesis: %s: %s", what, nothing)
            if "pattern" in step:  # a part of a pattern says so in its completion too
                done["pattern"] = {k: v for k, v in step["pattern"].items() if k in ("id", "name", "part")}
            self._journal("ok", package.f, done)
            if package.name == "restart":
                self.ready.watch(package.name, fault_id, list(active.nodes))
            if active.heal is not None:
                self._active[fault_id] = active
            else:
                self.ledger.cross_out(fault_id)
            return active

    def heal(self, kind: str | None = None) -> None:
        """Heal the active faults (of one kind, e.g. "partition", or all of them)."""
        with self._lock:
            chosen = [a for a in self._active.values() if kind is None or a.kind == kind or a.heal_f == kind]
            for active in sorted(chosen, key=_heal_rank):
                self._heal_one(active)

    def _heal_one(self, active: Active) -> bool:
        assert active.heal is not None
        request = {"fault": active.kind, "fault_id": active.id, "nodes": active.nodes}
        self._journal("invoke", active.heal_f, request)
        try:
            value = active.heal()
        except Exception as e:  # noqa: BLE001 - the next heal must still run
            log.warning("healing %s failed: %s", active.id, e)
            self._journal("info", active.heal_f, request, error=_text(e))
            return False
        self._active.pop(active.id, None)
        self.ledger.cross_out(active.id)
        self._journal("ok", active.heal_f, {"fault": active.kind, **value, "fault_id": active.id})
        self.ready.watch(active.kind, active.id, list(active.nodes))
        return True

    def _heal_part(self, active: Active, part: list[str]) -> None:
        """Start (or resume) `part` of a fault's nodes: journaled as its heal op naming those nodes
        and the `remaining` ones, on which the fault stays in force (its window stays open)."""
        rest = [n for n in active.nodes if n not in part]
        request = {"fault": active.kind, "fault_id": active.id, "nodes": part, "remaining": rest}
        self._journal("invoke", active.heal_f, request)
        try:
            value = active.heal_part(part)
            self._started_alone.update(part)
        except Exception as e:
            self._journal("info", active.heal_f, request, error=_text(e))
            raise
        self._journal(
            "ok", active.heal_f, {"fault": active.kind, **value, "fault_id": active.id, "remaining": rest}
        )

    def _start_or_resume(self, step: dict[str, Any]) -> None:
        kinds = ("kill", "lose-unsynced", "corrupt") if step["do"] == "start" else ("pause",)
        wanted: set[str] | None = None
        if "target" in step:
            from nemesis import targets

            topic, partition = self.ctx.topic_partition(step)
            pick = random.Random(int(step.get("pick", 0)))
            names = self.ctx.names
            if step["target"] in ("one", "minority", "majority"):  # of the brokers held down
                names = sorted({n for a in self._active.values() if a.kind in kinds for n in a.nodes})
            wanted = set(
                targets.resolve(step["target"], names, self.ctx.sut, pick, topic, partition) if names else ()
            )
            if not wanted:
                self._nothing_to_start(step)
                return
        with self._lock:
            chosen = [
                a
                for a in self._active.values()
                if a.kind in kinds and (wanted is None or set(a.nodes) & wanted)
            ]
            healed: set[str] = set()
            for active in chosen:
                part = [n for n in active.nodes if wanted is None or n in wanted]
                if len(part) < len(active.nodes) and active.heal_nodes is not None:
                    # one follower of a power cut of all: the others stay down until a later step
                    self._heal_part(active, part)
                    healed.update(part)
                else:
                    healed.update(active.nodes)
                    self._heal_one(active)
            rest = sorted((wanted or set()) - healed - self._started_alone)
            if wanted:
                self._last_nodes = sorted(wanted)
            if rest and step["do"] == "start":  # start brokers this nemesis did not kill
                self._journal("invoke", "start", {"nodes": rest})
                try:
                    for name in rest:
                        start_node(self.ctx, self.ctx.node(name))
                except Exception as e:
                    self._journal("info", "start", {"nodes": rest}, error=_text(e))
                    raise
                self._journal("ok", "start", {"nodes": rest})

    def _nothing_to_start(self, step: dict[str, Any]) -> None:
        """A start (or resume) whose target names no node now: journaled as a `fail` (nothing
        happened); a required one is the schedule's `unreached`."""
        request = {k: v for k, v in step.items() if k not in ("do", "pick", "required")}
        why = f"target {step['target']!r} names no node now"
        self._journal("invoke", str(step["do"]), request)
        self._journal("fail", str(step["do"]), request, error=why)
        if step.get("required"):
            self.note_unreached(f"{_step_text(step)}: {why}")
        else:
            log.info("nemesis: %s: %s", _step_text(step), why)

    def _wait_until(self, step: dict[str, Any], stop: threading.Event) -> None:
        """Poll a condition; what it saw is attached (as `after`) to the next fault's invoke value
        (with `before`: the wait before it, when no fault came between).

        Conditions are not faults, so they get no history op of their own (a report would shade them).
        `timeout` None waits until `stop` (the time limit); `say_after` s without the condition,
        a warning says what it waits for (once), and the detail then carries `waited_s`.
        """
        name = str(step["wait_until"])
        condition = conditions.CONDITIONS[name]
        if step.get("node") == LAST:
            step = {**step, "node": self._last_nodes[0] if self._last_nodes else None}
        timeout = step.get("timeout", 60)
        started = time.monotonic()
        deadline = math.inf if timeout is None else started + float(timeout)
        say_after = step.get("say_after")
        said = False
        detail: dict[str, Any] = {}
        where = _where(step)
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                try:
                    met, detail = condition(self.ctx, step)
                except Exception as e:  # noqa: BLE001 - a cluster in flux: not met yet
                    met, detail = False, {"error": _text(e)}
                waited = time.monotonic() - started
                if said:
                    detail = {**detail, "waited_s": round(waited, 1)}
                if met:
                    log.info("nemesis: condition %s met: %s", name, detail)
                    self._after = self._seen({"condition": name, **detail})
                    return
                if say_after is not None and not said and waited >= float(say_after):
                    said = True
                    log.warning(
                        "nemesis: %s%s not met for %g s (%s): waiting for it%s",
                        name,
                        where,
                        float(say_after),
                        _brief(detail),
                        " until the time limit" if timeout is None else f" for at most {float(timeout):g} s",
                    )
                stop.wait(float(step.get("poll", 0.2)))
        finally:
            conditions.close(self.ctx)
        if stop.is_set():
            log.log(
                logging.WARNING if said else logging.INFO,
                "nemesis: stopped while waiting for %s%s: %s",
                name,
                where,
                detail,
            )
        else:
            # Not news by itself (a pattern's gate that the settings refuse); a scripted schedule
            # that needed it says so in `unreached`.
            log.info("nemesis: condition %s not met within %g s: %s", name, float(timeout), detail)
        self._after = self._seen({"condition": name, "timed_out": True, **detail})

    def _seen(self, after: dict[str, Any]) -> dict[str, Any]:
        """A wait's detail; waits in a row before one fault nest (`before`: the one just before, when neither a fault nor a heal came between), so
        the history shows e.g. that a follower had left the ISR before the load flowed again."""
        if self._after is None:
            return after
        return {**after, "before": {k: v for k, v in self._after.items() if k != "before"}}

    # --- healing everything -----------------------------------------------------------------

    def heal_all(self) -> list[str]:
        """Heal every fault this nemesis (or a crashed predecessor in the same state dir) left.

        Idempotent; returns the problems it could not fix (also logged).
        """
        self._closing = True
        problems: list[str] = []
        with self._lock:
            for active in sorted(self._active.values(), key=_heal_rank):
                if not self._heal_one(active):
                    problems.append(f"could not heal {active.id}")
            by_name: Mapping[str, Node] = {n.name: n for n in self.ctx.nodes}
            for entry in self.ledger.load():
                if entry.get("id") in self._active:
                    continue
                problems += run_recipe(entry, by_name)
            problems += [p for p in self.ctx.parallel(self._clean_node, list(self.ctx.nodes)) if p]
            if not problems:
                self.ledger.clear()
                self.ledger.release()
        for p in problems:
            log.warning("nemesis heal: %s", p)
        return problems

    def _clean_node(self, node: Node) -> str | None:
        """Unhook and delete our chains (and our root qdisc) on one node; the problem, if any.
        A cluster strandline did not start never had any: nothing but its owner's commands runs there."""
        if isinstance(self.ctx.sut, FaultsByCommand):
            return None
        try:
            node.exec(net.remove_argv(), timeout=30, check=False)
            if self._touched_qdisc:
                node.exec(net.qdisc_heal_argv(net.interface_of(node)), timeout=30, check=False)
        except Exception as e:  # noqa: BLE001
            return f"{node.name}: {_text(e)}"
        return None

    def active_faults(self) -> list[dict[str, Any]]:
        """The faults in effect now, for live progress: id, fault, nodes, value, seconds active."""
        with self._lock:
            now = time.monotonic()
            return [{**a.describe(), "seconds": round(now - a.started, 1)} for a in self._active.values()]

    def wait_served(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Until the brokers of every heal so far serve again (journaled as `ready`); False when
        `timeout` s passed or `stop` was set first."""
        return self.ready.wait(timeout, stop)

    def _history_closed(self) -> bool:
        return self.history is None or self.history.closed

    # --- journal ------------------------------------------------------------------------------

    def _journal(self, type_: str, f: str, value: dict[str, Any], error: str | None = None) -> None:
        op: dict[str, Any] = {"process": NEMESIS, "type": type_, "f": f, "value": value}
        if f in HEALS:
            self._after = None  # a wait before a heal belongs to no later fault
        if error is not None:
            op["error"] = error
        if self.history is not None:
            try:
                self.history.append(op)
            except (ValueError, OSError) as e:  # the history was closed (a late heal at teardown)
                log.warning("nemesis op not journaled (%s): %s", e, op)
        log.info("nemesis %s %s %s%s", type_, f, value, f" ({error})" if error else "")


HEALS = ("start", "resume", "heal")
# A condition's `node = "last"`: the (first) node of the last fault applied.
LAST = "last"


def _step_text(step: dict[str, Any]) -> str:
    """'wait_until out-of-isr (node last, t0-0)' / 'do kill follower': a step in a few words."""
    kind = "wait_until" if "wait_until" in step else "do" if "do" in step else next(iter(step), "?")
    what = step.get(kind, "")
    extra = [str(step[k]) for k in ("node", "target", "grudge") if isinstance(step.get(k), str)]
    return f"{kind} {what}" + (f" ({', '.join(extra)})" if extra else "")


def _pattern(step: dict[str, Any]) -> Pattern | None:
    package = lookup(str(step.get("do", "")))
    return pattern_of(step, package.name) if package is not None else None


def _same_partition(after: dict[str, Any], step: dict[str, Any]) -> bool:
    return (after.get("topic", "t0"), after.get("partition", 0)) == (
        step.get("topic", "t0"),
        step.get("partition", 0),
    )


def _where(step: dict[str, Any]) -> str:
    """' on t0-1' for a condition about one partition; '' otherwise."""
    if "topic" in step:
        return f" on {step['topic']}-{step.get('partition', 0)}"
    return f" on {step['node']}" if "node" in step else ""


def _brief(detail: dict[str, Any]) -> str:
    """What a condition saw, short enough for a console line."""
    return ", ".join(f"{k} {v}" for k, v in detail.items() if k not in ("records", "window")) or "nothing yet"


def _heal_rank(active: Active) -> int:
    base = active.kind.split("-")[0] if active.kind.startswith("clock") else active.kind
    return HEAL_ORDER.index(base) if base in HEAL_ORDER else len(HEAL_ORDER)


def _text(e: BaseException) -> str:
    return str(e) or type(e).__name__


def build_nemesis(
    config: TestConfig,
    cluster: ClusterView,
    history: HistoryWriter | None,
    rng: random.Random,
    state_dir: str | Path | None = None,
) -> Nemesis:
    """The nemesis for a test. `state_dir` holds the fault ledger (default: the clusters' state dir)."""
    return Nemesis(config, cluster, history, rng, state_dir)
