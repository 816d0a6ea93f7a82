"""Check one stored run: the history engine, the replica logs, the verdict, the stats -> results.json.

`check_run` reads only the run directory (test.json, history.jsonl, drain.json,
cluster-state.json, nodes/<node>/data/), so a run can be re-checked any time, with either engine.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers.catalogue import EngineResult
from checkers.damage import attribute, damaged_replicas
from checkers.evidence import Found
from checkers.evidence import assemble as assemble_evidence
from checkers.evidence import write as write_evidence
from checkers.evidence_reference import gather
from checkers.power import Asked, Tally, evaluate
from checkers.refusals import describe as describe_refusal
from checkers.refusals import refusals
from checkers.replica_logs import (
    ReplicaFindings,
    ReplicaInputs,
    assigned_nodes,
    check_replica_logs,
    expected_partitions,
)
from checkers.stats import Facts, assemble, history_facts
from checkers.verdict import decide
from foundation.config import TestConfig, load_file, validate
from foundation.errors import BadInput, InfrastructureError
from foundation.run_files import (
    API_VERSIONS,
    CLUSTER_STATE,
    DRAIN,
    EVIDENCE,
    HISTORY,
    NODES,
    REPLICAS_UNAVAILABLE,
    RESULTS,
    TEST_JSON,
)
from history.faults import FaultWindow
from history.format import NEMESIS_PROCESS
from history.reader import iter_ops

log = logging.getLogger(__name__)

ENGINES = ("reference", "spark")
# `auto` picks the reference checker (no JVM to start, fastest on ordinary histories) below this
# size of history.jsonl and Spark above it, where a single Python process would run out of memory.
AUTO_SPARK_BYTES = 512 * 1024 * 1024

# Filled in by each check, for `strandline bench checker`: seconds per part (Spark's: convert,
# spark_start, check, stats, power, replicas, evidence; the reference's: check, stats, evidence, power,
# replicas; both: results).
last_timings: dict[str, float] = {}


def checked_timings() -> dict[str, float]:
    """The last check's seconds per part (`last_timings`), a copy."""
    return dict(last_timings)


def resolve_engine(engine: str, history: Path) -> str:
    """The concrete engine for `auto`: reference for ordinary histories, Spark for big ones."""
    if engine != "auto":
        return engine
    return "spark" if history.stat().st_size >= AUTO_SPARK_BYTES else "reference"


@dataclass
class EngineRun:
    """What one engine found in a run: the history's anomalies, the statistics' facts, the
    replica-log findings (None: not asked for), the nemesis ops (for the damage report) and how to
    get the ops whose lines match some patterns (for the refusals)."""

    result: EngineResult
    facts: Facts
    replicas: ReplicaFindings | None
    nemesis: Iterable[dict[str, Any]]
    ops_matching: Callable[[list[re.Pattern[str]]], Iterable[dict[str, Any]]]
    found: Found  # what evidence.json quotes (`checkers.evidence`)
    # The verdict power's tally and the fault windows it counts in (None: not asked for).
    power: tuple[Tally, list[FaultWindow]] | None = None


def run_engine(
    engine: str,
    history: Path,
    spark_master: str | None,
    spark_remote: str | None = None,
    replicas: ReplicaInputs | None = None,
    power: Asked | None = None,
) -> EngineRun:
    """Run one engine on a run's history (and, with `replicas`, its data dirs; with `power`, the
    verdict power's tally).

    The reference reads the history in Python passes; Spark computes everything from the history's
    Parquet form and the data dirs' rows, and the driver keeps only summaries and the few nemesis
    lines. The Spark engine is imported only when asked for.
    """
    if engine == "reference":
        from checkers.reference import check_history

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
    if engine == "spark":
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

        run = spark_checker.check_run(
            history,
            spark_master=spark_master,
            facts=True,
            spark_remote=spark_remote,
            replicas=replicas,
            power=power,
        )
        assert run.facts is not None
        last_timings.update(
            (k, v) for k, v in spark_checker.last_timings.items() if k not in ("total", "reused_parquet")
        )

        def matching(patterns: list[re.Pattern[str]]) -> Iterable[dict[str, Any]]:
            return ops_matching(get_session(spark_master, None, spark_remote), str(history), patterns)

        return EngineRun(run.result, run.facts, run.replicas, run.nemesis, matching, run.found, run.power)
    raise BadInput(f"unknown checker {engine!r} (one of {', '.join(ENGINES)})")


def load_config(run: Path) -> tuple[TestConfig, list[str]]:
    """The run's TestConfig from test.json; defaults (with a note) when the run has none."""
    path = run / TEST_JSON
    if not path.exists():
        return TestConfig(), [f"no {TEST_JSON}: default settings assumed"]
    return validate(load_file(path)), []


def read_optional_json(path: Path) -> tuple[Any, bool]:
    """(content, present): None content when missing; a damaged file is present with content {}."""
    try:
        return json.loads(path.read_text()), True
    except FileNotFoundError:
        return None, False
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        log.warning("%s: unreadable: %s", path, e)
        return {}, True


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Atomically (temp file + rename), so a reader never sees half a results.json."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def _replicas_unavailable(nodes: Path) -> str | None:
    try:
        return (nodes / REPLICAS_UNAVAILABLE).read_text().strip() or None
    except OSError:
        return None


def check_run(
    run_dir: str | Path,
    engine: str = "spark",
    spark_master: str | None = None,
    *,
    spark_remote: str | None = None,
    replica_logs: bool = True,
    write: bool = True,
) -> dict[str, Any]:
    """Check a run directory and write its results.json; returns the results dict."""
    run = Path(run_dir)
    if not run.is_dir():
        raise BadInput(f"no such run directory: {run}")
    history = run / HISTORY
    if not history.is_file():
        raise BadInput(f"no history to check: {history} is missing")
    if engine not in (*ENGINES, "auto"):
        raise BadInput(f"unknown checker {engine!r} (one of {', '.join(ENGINES)}, auto)")
    engine = resolve_engine(engine, history)
    config, notes = load_config(run)
    last_timings.clear()
    started = time.monotonic()
    spark_master = spark_master or config.spark_master
    spark_remote = spark_remote or os.environ.get("STRANDLINE_SPARK_REMOTE") or None
    state, _ = read_optional_json(run / CLUSTER_STATE)
    unavailable = _replicas_unavailable(run / NODES)
    inputs = None
    if replica_logs and unavailable is None:
        inputs = ReplicaInputs(
            run / NODES,
            final_state=state,
            expected=tuple(expected_partitions(config.topics, config.partitions)),
            replication_factor=config.replication_factor,
            # node nN runs broker N; brokers added during the run hold replicas of the final assignment
            brokers=tuple(sorted({f"n{i}" for i in range(1, config.nodes + 1)} | assigned_nodes(state))),
        )
    asked = Asked.of(config, known=(run / TEST_JSON).exists())
    judged = run_engine(engine, history, spark_master, spark_remote, inputs, asked)
    result, facts, replicas = judged.result, judged.facts, judged.replicas
    engine_seconds = time.monotonic() - started
    judging = time.monotonic()
    power = evaluate(*judged.power, asked) if judged.power is not None else None

    drain, _ = read_optional_json(run / DRAIN)
    verdict = decide(result, replicas, config, drain, replicas_unavailable=unavailable, power=power)
    counts = {name: a["count"] for name, a in verdict["anomalies"].items()}
    stats = assemble(facts, result["stats"], counts, replicas.lost_by_second if replicas else None)
    if replicas is not None:
        stats["replicas"] = replicas.partitions
    nemesis = list(judged.nemesis)
    damaged = damaged_replicas(nemesis)
    damage_notes = attribute(damaged, verdict["anomalies"])
    if damaged:
        stats["damaged_replicas"] = damaged
    unsettled_notes: list[str] = []
    if isinstance(drain, dict):
        stats["drain"] = {
            k: drain.get(k) for k in ("complete", "reason", "seconds", "records", "unsettled") if k in drain
        }
        unsettled = drain.get("unsettled")
        if isinstance(unsettled, dict) and unsettled:
            where = ", ".join(
                f"{tp} (last stable offset {v.get('lso')} < high watermark {v.get('hw')})"
                for tp, v in sorted(unsettled.items())
                if isinstance(v, dict)
            )
            unsettled_notes.append(
                f"drain: transactions never ended on {where}: read_committed consumers cannot read the"
                " committed records above the last stable offset (they count as unseen)"
            )
    results: dict[str, Any] = {
        "valid": verdict["valid"],
        "anomalies": verdict["anomalies"],
        "stats": stats,
        "checker": {
            "engine": engine,
            "seconds": round(time.monotonic() - started, 3),
            "engine_seconds": round(engine_seconds, 3),
            **({"spark_master": spark_remote or spark_master} if engine == "spark" else {}),
        },
        "fatal": verdict["fatal"],
        "incomplete": verdict["incomplete"],
        "explanation": verdict["explanation"],
        "notes": notes + verdict["notes"] + damage_notes + unsettled_notes,
    }
    if power is not None:
        results["power"] = power
    if "replicas_unavailable" in verdict:
        results["replicas_unavailable"] = verdict["replicas_unavailable"]
    if verdict.get("underpowered"):
        results["underpowered"] = True
    refused = refusals(
        config, history, read_optional_json(run / NODES / API_VERSIONS)[0], judged.ops_matching
    )
    if refused:  # the system's answer, not an anomaly: the verdict stays the history's
        results["refused"] = refused
        results["notes"] += [f"refused: {describe_refusal(name, r)}" for name, r in refused.items()]
    if write:
        write_results(run / RESULTS, results)
        write_evidence(
            run / EVIDENCE, assemble_evidence(facts, result["stats"]["ops"], nemesis, judged.found)
        )
    last_timings["results"] = time.monotonic() - judging
    return results


def checked_with(results: dict[str, Any]) -> str:
    """'checked with Spark (local[*]) in 12.3 s': which engine judged the run, for people to read."""
    checker = results.get("checker") or {}
    engine = checker.get("engine")
    name = "Spark" if engine == "spark" else "the reference checker" if engine == "reference" else str(engine)
    where = f" ({checker['spark_master']})" if engine == "spark" and checker.get("spark_master") else ""
    return f"checked with {name}{where} in {checker.get('seconds')} s"


def verdict_word(valid: Any) -> str:
    """valid|invalid|unknown, as the CLI's last line says it."""
    return "valid" if valid is True else "invalid" if valid is False else "unknown"
