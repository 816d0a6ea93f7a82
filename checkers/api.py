"""Check one stored run: the history engine, the replica logs, the verdict, the stats -> results.json.

`check_run` reads only the run directory (test.json, history.jsonl, drain.json,
cluster-state.json, nodes/<node>/data/), so a run can be re-checked any time, with either engine.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from checkers.damage import attribute, damaged_replicas
from checkers.engines import SPARK, Engine, Job, last_timings
from checkers.evidence import assemble as assemble_evidence
from checkers.evidence import write as write_evidence
from checkers.power import Asked, evaluate
from checkers.refusals import describe as describe_refusal
from checkers.refusals import refusals
from checkers.replica_logs import (
    ReplicaInputs,
    assigned_nodes,
    expected_partitions,
)
from checkers.stats import assemble
from checkers.verdict import decide
from foundation.config import TestConfig, load_file, validate
from foundation.errors import BadInput
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

log = logging.getLogger(__name__)


def checked_timings() -> dict[str, float]:
    """The last check's seconds per part (`last_timings`), a copy."""
    return dict(last_timings)


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
    engine: Engine = SPARK,
    spark_master: str | None = None,
    *,
    spark_remote: str | None = None,
    replica_logs: bool = True,
    write: bool = True,
) -> dict[str, Any]:
    """Check a run directory with `engine` (`checkers.engines.engine_named` makes one of a name) and
    write its results.json; returns the results dict."""
    run = Path(run_dir)
    if not run.is_dir():
        raise BadInput(f"no such run directory: {run}")
    history = run / HISTORY
    if not history.is_file():
        raise BadInput(f"no history to check: {history} is missing")
    engine = engine.for_history(history)
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
    judged = engine.run(Job(history, spark_master, spark_remote, inputs, asked))
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
    # Before the check's seconds are taken: with a feature asked for, Spark reads the history's text.
    refused = refusals(
        config, history, read_optional_json(run / NODES / API_VERSIONS)[0], judged.ops_matching
    )
    results: dict[str, Any] = {
        "valid": verdict["valid"],
        "anomalies": verdict["anomalies"],
        "stats": stats,
        "checker": {
            "engine": engine.name,
            "seconds": round(time.monotonic() - started, 3),
            "engine_seconds": round(engine_seconds, 3),
            **engine.where(spark_master, spark_remote),
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
