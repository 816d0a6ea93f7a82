"""The checker engines as objects: the name a user gives (`--checker`, test.json) becomes one here,
in `engine_named`, and `checkers.api.check_run` only calls it.

The reference checker reads the history in Python passes; Spark computes everything from the
history's Parquet form and the data dirs' rows, and the driver keeps only summaries and the few
nemesis lines; `auto` is either, by the size of the history. The Spark engine's modules are
imported only when it runs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self

from checkers.catalogue import EngineResult
from checkers.evidence import Found
from checkers.evidence_reference import gather
from checkers.power import Asked, Tally
from checkers.refusals import ERROR_KEY
from checkers.replica_logs import ReplicaFindings, ReplicaInputs, check_replica_logs
from checkers.stats import Facts, history_facts
from foundation.errors import BadInput, InfrastructureError
from history.faults import FaultWindow
from history.format import NEMESIS_PROCESS
from history.reader import iter_ops

ENGINES = ("reference", "spark")
# `auto` picks the reference checker (no JVM to start, fastest on ordinary histories) below this
# size of history.jsonl and Spark above it, where a single Python process would run out of memory.
AUTO_SPARK_BYTES = 512 * 1024 * 1024

# Filled in by each check, for `strandline bench checker`: seconds per part (Spark's: convert,
# spark_start, check, stats, power, replicas, evidence; the reference's: check, stats, evidence, power,
# replicas; both: results).
last_timings: dict[str, float] = {}


@dataclass
class EngineRun:
    """What one engine found in a run: the history's anomalies, the statistics' facts, the
    replica-log findings (None: not asked for), the nemesis ops (for the damage report) and how to
    get the ops whose lines hold an `error` and match some patterns (for the refusals)."""

    result: EngineResult
    facts: Facts
    replicas: ReplicaFindings | None
    nemesis: Iterable[dict[str, Any]]
    ops_matching: Callable[[list[re.Pattern[str]]], Iterable[dict[str, Any]]]
    found: Found  # what evidence.json quotes (`checkers.evidence`)
    # The verdict power's tally and the fault windows it counts in (None: not asked for).
    power: tuple[Tally, list[FaultWindow]] | None = None


@dataclass(frozen=True)
class Job:
    """What an engine checks: a run's history, its replicas' data dirs and the verdict power's
    question (None: not asked for), and the Spark it may use."""

    history: Path
    spark_master: str | None = None
    spark_remote: str | None = None
    replicas: ReplicaInputs | None = None
    power: Asked | None = None


class Engine(Protocol):
    """One checker engine: what `check_run` asks of it."""

    @property
    def name(self) -> str:
        """As the user names it, and as results.json's `checker.engine` says it."""
        ...

    @property
    def reads_parquet(self) -> bool:
        """It reads the history's Parquet form (a run keeps it while the history is written)."""
        ...

    def for_history(self, history: Path) -> Engine:
        """The engine that checks this history (`auto` picks one by its size; the others are it)."""
        ...

    def where(self, spark_master: str | None, spark_remote: str | None) -> dict[str, Any]:
        """Where it ran, for results.json's `checker` (empty when there is nothing to say)."""
        ...

    def run(self, job: Job) -> EngineRun:
        """Check a run's history (and, with `job.replicas`, its data dirs; with `job.power`, the
        verdict power's tally)."""
        ...


class _Fixed:
    """An engine that checks every history itself."""

    def for_history(self, history: Path) -> Self:
        return self


@dataclass(frozen=True)
class Reference(_Fixed):
    """The reference checker: the history in Python passes, the oracle."""

    name: str = "reference"
    reads_parquet: bool = False

    def where(self, spark_master: str | None, spark_remote: str | None) -> dict[str, Any]:
        return {}

    def run(self, job: Job) -> EngineRun:
        from checkers.reference import check_history

        history, replicas, power = job.history, job.replicas, job.power

        def every_op(_: list[re.Pattern[str]]) -> Iterable[dict[str, Any]]:
            return iter_ops(history, problems=[])

        found = None
        started = time.monotonic()
        if replicas is not None:
            found = check_replica_logs(
                replicas.nodes_dir,
                history,
                final_state=replicas.final_state,
                expected=replicas.expected,
                replication_factor=replicas.replication_factor,
                brokers=replicas.brokers,
            )
            last_timings["replicas"] = time.monotonic() - started
        nemesis = (op for op in iter_ops(history, problems=[]) if op["process"] == NEMESIS_PROCESS)
        started = time.monotonic()
        result = check_history(history)
        last_timings["check"] = time.monotonic() - started
        started = time.monotonic()
        facts = history_facts(history)
        last_timings["stats"] = time.monotonic() - started
        started = time.monotonic()
        anomalies = {**result["anomalies"], **(found.anomalies if found is not None else {})}
        quoted = gather(history, anomalies, found)
        last_timings["evidence"] = time.monotonic() - started
        tallied = None
        if power is not None:
            from checkers.power_history import tally_history

            started = time.monotonic()
            tallied = tally_history(history, power)
            last_timings["power"] = time.monotonic() - started
        return EngineRun(result, facts, found, nemesis, every_op, quoted, tallied)


@dataclass(frozen=True)
class Spark(_Fixed):
    """The Spark checker: the history's Parquet form and the data dirs' rows, on a Spark master."""

    name: str = "spark"
    reads_parquet: bool = True

    def where(self, spark_master: str | None, spark_remote: str | None) -> dict[str, Any]:
        return {"spark_master": spark_remote or spark_master}

    def run(self, job: Job) -> EngineRun:
        try:
            from checkers import spark as spark_checker  # type: ignore[import-not-found,unused-ignore]
            from checkers.spark_lines import ops_matching
            from checkers.spark_session import get_session
        except ModuleNotFoundError as e:
            if e.name not in ("checkers.spark", "pyspark"):
                raise
            raise InfrastructureError(
                f"the Spark checker is not available ({e}); use --checker reference"
            ) from None

        history, spark_master, spark_remote = job.history, job.spark_master, job.spark_remote
        run = spark_checker.check_run(
            history,
            spark_master=spark_master,
            facts=True,
            spark_remote=spark_remote,
            replicas=job.replicas,
            power=job.power,
        )
        assert run.facts is not None
        last_timings.update(
            (k, v) for k, v in spark_checker.last_timings.items() if k not in ("total", "reused_parquet")
        )

        def matching(patterns: list[re.Pattern[str]]) -> Iterable[dict[str, Any]]:
            session = get_session(spark_master, None, spark_remote)
            return ops_matching(session, str(history), patterns, words=(ERROR_KEY,))

        return EngineRun(run.result, run.facts, run.replicas, run.nemesis, matching, run.found, run.power)


@dataclass(frozen=True)
class Auto:
    """The reference checker for ordinary histories, Spark for big ones (`AUTO_SPARK_BYTES`)."""

    name: str = "auto"
    reads_parquet: bool = True  # it may pick Spark

    def for_history(self, history: Path) -> Engine:
        return SPARK if history.stat().st_size >= AUTO_SPARK_BYTES else REFERENCE

    def where(self, spark_master: str | None, spark_remote: str | None) -> dict[str, Any]:
        return {}

    def run(self, job: Job) -> EngineRun:
        return self.for_history(job.history).run(job)


REFERENCE, SPARK, AUTO = Reference(), Spark(), Auto()
_NAMED: dict[str, Engine] = {e.name: e for e in (REFERENCE, SPARK, AUTO)}


def engine_named(name: str) -> Engine:
    """The engine a user names (`--checker`, test.json's `checker`); exit 2 for any other name."""
    try:
        return _NAMED[name]
    except KeyError:
        raise BadInput(f"unknown checker {name!r} (one of {', '.join(ENGINES)}, auto)") from None
