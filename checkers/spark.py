"""The Spark checker's entry point: `check_history(path, spark_master=...) -> EngineResult`.

Same result as `checkers.reference.check_history` (compare with `==`), computed by Spark over the
history's Parquet form. A local history is converted once by `checkers.parquet` (Arrow, in this
process, while the Spark JVM starts) and the conversion is cached beside it; a history on any other
filesystem Spark reads (hdfs://, s3a://, ...) is converted by Spark's own JSON reader.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from checkers import cancelled, power_form, spark_power, spark_txn
from checkers.catalogue import EngineResult
from checkers.evidence import Found, example_positions, marked_offsets, wanted
from checkers.parquet import Converted, convert
from checkers.power import Asked, Tally
from checkers.replica_logs import ReplicaFindings, ReplicaInputs
from checkers.spark_engine import ParquetForm, check_parquet, topic_names
from checkers.spark_evidence import find_in_form
from checkers.spark_groups import check_groups, merge_into
from checkers.spark_replicas import Views, judged_replicas
from checkers.spark_session import SMALL_OPS, get_session, size_for
from checkers.spark_stats import nemesis_op, spark_facts
from checkers.stats import Facts
from checkers.stats_form import form_facts
from foundation.errors import BadInput, InfrastructureError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Filled in by each check, for the benchmark: seconds per phase.
last_timings: dict[str, float] = {}

T = TypeVar("T")


def _local_path(history: str | os.PathLike[str]) -> Path | None:
    text = os.fspath(history)
    parsed = urlparse(text)
    if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
        return Path(parsed.path if parsed.scheme == "file" else text)
    return None


def _start(
    master: str | None, memory: str | None, remote: str | None = None
) -> tuple[threading.Thread, dict[str, Any]]:
    """Start (or find) the Spark session in a thread, so the JVM boots while Arrow converts."""
    box: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            box["session"] = get_session(master, memory, remote)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e
        box["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, name="spark-start", daemon=True)
    thread.start()
    return thread, box


def _session(thread: threading.Thread, box: dict[str, Any]) -> SparkSession:
    thread.join()
    if "error" in box:
        e = box["error"]
        if isinstance(e, BadInput | InfrastructureError):
            raise e
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise InfrastructureError(f"Spark did not start: {first} (is Java installed? JAVA_HOME?)") from e
    session: SparkSession = box["session"]
    return session


def check_history(
    history_path: str | os.PathLike[str],
    *,
    spark_master: str | None = None,
    driver_memory: str | None = None,
    reconvert: bool = False,
    **options: Any,
) -> EngineResult:
    """Check one history with Spark; options the reference has no use for are ignored likewise."""
    if options:
        log.debug("spark checker ignores options %s", sorted(options))
    return check(history_path, spark_master=spark_master, driver_memory=driver_memory, reconvert=reconvert)[0]


@dataclass
class SparkRun:
    """What one Spark check found: the history's anomalies, the statistics' facts, the replica-log
    findings, and the few lines the driver keeps (the nemesis ops, from the conversion)."""

    result: EngineResult
    facts: Facts | None
    replicas: ReplicaFindings | None
    nemesis: list[dict[str, Any]]
    found: Found  # what evidence.json quotes (`checkers.evidence`)
    # The verdict power's tally and the fault windows it counts in (with `power`, else None).
    power: tuple[Tally, list[Any]] | None = None


def check(history_path: str | os.PathLike[str], **options: Any) -> tuple[EngineResult, Facts | None]:
    """The anomalies of one history and, with `facts=True`, its statistics' facts (`check_run`'s
    options but `replicas`)."""
    run = check_run(history_path, **options)
    return run.result, run.facts


def check_run(
    history_path: str | os.PathLike[str],
    *,
    spark_master: str | None = None,
    driver_memory: str | None = None,
    reconvert: bool = False,
    facts: bool = False,
    spark_remote: str | None = None,
    replicas: ReplicaInputs | None = None,
    power: Asked | None = None,
) -> SparkRun:
    """Everything a check of one run needs from Spark: the history's anomalies, with `facts` the
    statistics' facts, with `replicas` the replica-log checks of the collected data dirs, with
    `power` the verdict power's tally (checkers/spark_power.py)."""
    last_timings.clear()
    started = time.monotonic()
    thread, box = _start(spark_master, driver_memory, spark_remote)
    local = _local_path(history_path)
    # The driver reads the form itself (Arrow, no Spark job) when it converted it here; a form
    # Spark converted, on a filesystem only Spark reaches, is read by Spark's jobs.
    in_driver = local is not None
    # The pool's exit (waiting for its thread) comes before the stack's (releasing what it keeps).
    with ExitStack() as stack, _beside_pool() as pool:
        if local is not None:
            if not local.is_file():
                raise BadInput(f"no history to check: {local} is missing")
            converted = convert(local, force=reconvert)
            last_timings["convert"] = time.monotonic() - started
            last_timings["reused_parquet"] = float(converted.reused)
            form = _local_form(converted)
        # Without transactions, the form's columns are the verdict power's events: Arrow counts them
        # in the driver (checkers/power_form.py), else Spark's jobs do, after the rules.
        kinds = (form.figures or {}).get("kinds") if in_driver else None
        power_in_driver = power is not None and kinds is not None and "txn" not in kinds

        def statistics() -> Facts:
            counting = time.monotonic()
            stats_facts = (
                form_facts(
                    form.operations_path,
                    max_time=form.max_time,
                    nemesis=form.nemesis or [],
                    ok_sends_in_order=form.ok_sends_in_order,
                    latency=form.latency or [],
                    problems=form.problems,
                )
                if in_driver
                else spark_facts(
                    spark,
                    form.operations_path,
                    max_time=form.max_time,
                    nemesis=form.nemesis or [],
                    ok_sends_in_order=form.ok_sends_in_order,
                    latency=form.latency,
                    problems=form.problems,
                )
            )
            last_timings["stats"] = time.monotonic() - counting
            return stats_facts

        def driver_power() -> tuple[Tally, list[Any]]:
            assert power is not None
            counting = time.monotonic()
            nemesis_ops = [nemesis_op(row) for row in form.nemesis or []]
            tallied = power_form.tally(form.operations_path, form.reads_path, nemesis_ops, power)
            last_timings["power"] = time.monotonic() - counting
            return tallied

        def replica_logs(inputs: ReplicaInputs) -> tuple[ReplicaFindings, Views]:
            judging = time.monotonic()
            judged = stack.enter_context(
                judged_replicas(
                    spark,
                    inputs.nodes_dir,
                    form.operations_path,
                    form.topics if form.topics is not None else topic_names(spark, form),
                    final_state=inputs.final_state,
                    expected=inputs.expected,
                    replication_factor=inputs.replication_factor,
                    brokers=inputs.brokers,
                )
            )
            last_timings["replicas"] = time.monotonic() - judging
            return judged

        # The driver's own passes over a form it converted (Arrow, one core, no Spark job) begin at
        # once, on a second thread: beside Spark's start when the form was found ready, then in the
        # gaps the rules' stages leave on the cores.
        stats_of = _when_asked(pool, statistics) if facts and in_driver else None
        power_of = _when_asked(pool, driver_power) if power_in_driver else None
        spark = _session(thread, box)
        if local is None:
            from checkers.spark_convert import convert_with_spark

            form = convert_with_spark(spark, os.fspath(history_path), reconvert)
            last_timings["convert"] = time.monotonic() - started
        last_timings["spark_start"] = float(box.get("seconds", 0.0))
        size_for(spark, form.ops)
        # A small history's check is the driver planning one query after another (its jobs take a
        # fraction of it): the statistics and the replica logs are planned on the second thread,
        # beside the rules, so both cores work. A big one's jobs fill the cores: one Spark part at a
        # time.
        beside = pool if form.ops < SMALL_OPS else None
        if facts and not in_driver:
            stats_of = _when_asked(beside, statistics)
        judged_of = _when_asked(beside, partial(replica_logs, replicas)) if replicas is not None else None
        result, tallied = _rules(spark, history_path, form, None if power_in_driver else power)
        ruled = time.monotonic()
        stats_facts = stats_of() if stats_of is not None else None
        if power_of is not None:
            tallied = power_of()
        if in_driver and (stats_of is not None or power_of is not None):
            # What the check still waited for the driver's passes after the rules.
            last_timings["beside"] = time.monotonic() - ruled
        findings, views = judged_of() if judged_of is not None else (None, _no_views)
        gathering = time.monotonic()
        anomalies = {**result["anomalies"], **(findings.anomalies if findings is not None else {})}
        marked = marked_offsets(findings.partitions) if findings is not None else {}
        quoted = find_in_form(spark, form, os.fspath(history_path), wanted(anomalies), marked)
        if findings is not None:
            offsets = example_positions(anomalies, quoted.sends)
            for tp, at in marked.items():
                offsets.setdefault(tp, set()).update(at)
            quoted.replicas = views(offsets)
        last_timings["evidence"] = time.monotonic() - gathering
    last_timings["total"] = time.monotonic() - started
    nemesis = [nemesis_op(row) for row in form.nemesis or []]
    return SparkRun(result, stats_facts, findings, nemesis, quoted, tallied)


def _local_form(converted: Converted) -> ParquetForm:
    """The form the driver converted (or found ready), as the Spark check reads it."""
    return ParquetForm(
        str(converted.operations_path),
        str(converted.reads_path),
        converted.ops,
        converted.problems,
        converted.orphans,
        converted.first_orphan,
        converted.figures or None,
        converted.topics,
        converted.max_time,
        converted.nemesis,
        converted.ok_sends_in_order,
        converted.latency,
        str(converted.lines_path),
    )


def _rules(
    spark: SparkSession,
    history_path: str | os.PathLike[str],
    form: ParquetForm,
    power: Asked | None,
) -> tuple[EngineResult, tuple[Tally, list[Any]] | None]:
    """The history's anomalies (and, with `power`, the verdict power's tally by Spark's jobs)."""
    checking = time.monotonic()
    counted = 0.0
    # A history's transactions: their micro-operations, read again from the text (spark_txn.py).
    # The operation kinds the conversion saw (None: not counted, e.g. Spark converted the history).
    kinds = (form.figures or {}).get("kinds")
    txns = spark_txn.prepare(
        spark, os.fspath(history_path), form.operations_path, form.reads_path, form.topics, kinds
    )
    tallied: tuple[Tally, list[Any]] | None = None
    try:
        result = check_parquet(
            spark,
            replace(form, topics=txns.topics) if txns is not None else form,
            (txns.operations, txns.reads) if txns is not None else None,
        )
        # The consumer-group rules read the group operations' own fields (checkers/spark_groups.py).
        merge_into(
            result["anomalies"],
            check_groups(spark, os.fspath(history_path), form.operations_path, form.reads_path, kinds),
        )
        if txns is not None:
            found, figures = spark_txn.judge(spark, txns, form.operations_path, form.reads_path, txns.topics)
            spark_txn.merge_into(result, txns, found, figures)
        if power is not None:
            counting = time.monotonic()
            nemesis_ops = [nemesis_op(row) for row in form.nemesis or []]
            tallied = spark_power.tally(
                spark, form.operations_path, form.reads_path, nemesis_ops, power, txns
            )
            counted = last_timings["power"] = time.monotonic() - counting
    finally:
        if txns is not None:
            txns.unpersist()
    # The rules alone: the power's tally is a part of its own in the breakdown, as the reference's.
    last_timings["check"] = time.monotonic() - checking - counted
    return result, tallied


class Beside:
    """The second thread, for the parts beside Spark's start and the rules."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="spark-beside")
        self.cancelled = threading.Event()

    def submit(self, part: Callable[..., T], *args: Any) -> Future[T]:
        return self.pool.submit(cancelled.on_behalf_of(self.cancelled, partial(part, *args)))


@contextmanager
def _beside_pool() -> Iterator[Beside]:
    """The second thread. On an error (Ctrl-C too) the parts not begun are dropped, and the one
    running stops at its next batch (`checkers.cancelled`): the check reports at once, not after a
    pass over a big history."""
    beside = Beside()
    try:
        yield beside
    except BaseException:
        beside.cancelled.set()
        beside.pool.shutdown(wait=True, cancel_futures=True)
        raise
    beside.pool.shutdown(wait=True)


def _when_asked(pool: Beside | None, part: Callable[[], T]) -> Callable[[], T]:
    """The part's result when asked for: computed then (no pool), or begun now on the pool's thread."""
    return part if pool is None else pool.submit(part).result


def _no_views(_: Any) -> dict[Any, Any]:
    return {}
