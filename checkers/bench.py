"""`strandline bench checker --ops N [--checker spark|reference] [--keep FILE] [--no-duckdb] [--in-process]`.

Generates a synthetic history with planted anomalies (`checkers.synthetic`), checks it with the
chosen engine in a fresh Python process (so its peak memory is the checker's own, Spark start-up
included), asserts that exactly the planted anomalies were found (exit 1 otherwise), and prints
ops/s end to end and peak memory of the Python driver and of the Spark JVM. DuckDB (a development
dependency, for comparison only) checks the same history beside it.

Runnable as `python -m checkers.bench ENGINE HISTORY` to check once and print JSON (the child).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from foundation.errors import EXIT_INVALID, BadInput, InfrastructureError

DUCKDB_THREADS = 2


def _child(engine: str, history: str) -> dict[str, Any]:
    """Check once in this process; figures as a dict (run in a fresh process by `_measure`)."""
    started = time.monotonic()
    jvm_peak = None
    timings: dict[str, float] = {}
    if engine == "spark":
        from checkers import spark as spark_checker
        from checkers.spark_session import get_session, jvm_pid, peak_rss_bytes

        result: Any = spark_checker.check_history(history)
        timings = dict(spark_checker.last_timings)
        pid = jvm_pid(get_session())
        jvm_peak = peak_rss_bytes(pid) if pid else None
        counts = {name: a["count"] for name, a in result["anomalies"].items()}
        examples = {name: a["examples"] for name, a in result["anomalies"].items()}
    elif engine == "reference":
        from checkers.reference import check_history

        result = check_history(history)
        counts = {name: a["count"] for name, a in result["anomalies"].items()}
        examples = {name: a["examples"] for name, a in result["anomalies"].items()}
    elif engine == "duckdb":
        counts = check_with_duckdb(history, DUCKDB_THREADS)
        examples = {}
    else:
        raise BadInput(f"unknown engine {engine!r}")
    seconds = time.monotonic() - started
    return {
        "engine": engine,
        "seconds": seconds,
        "driver_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "jvm_peak": jvm_peak,
        "timings": timings,
        "counts": counts,
        "examples": examples,
    }


def _measure(engine: str, history: Path, in_process: bool = False) -> dict[str, Any]:
    """Run `_child` in a fresh interpreter; its last stdout line is the JSON figures.

    `in_process` checks in this process instead (reusing a running Spark session, as the tests
    do): same findings, but the peak memory figures are then this process's.
    """
    started = time.monotonic()
    if in_process:
        # Through JSON, as from a child: the same shapes (string keys) either way.
        here: dict[str, Any] = json.loads(json.dumps(_child(engine, str(history))))
        here["wall"] = time.monotonic() - started
        return here
    proc = subprocess.run(
        [sys.executable, "-m", "checkers.bench", engine, str(history)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise InfrastructureError(f"{engine} check failed: " + " | ".join(tail))
    figures: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    figures["wall"] = wall
    return figures


def _mismatches(planted: dict[str, list[dict[str, Any]]], figures: dict[str, Any]) -> list[str]:
    """What the engine missed or added, against what was planted."""
    problems = []
    for name, instances in planted.items():
        found = figures["counts"].get(name, 0)
        if found != len(instances):
            problems.append(f"{name}: planted {len(instances)}, found {found}")
            continue
        examples = figures["examples"].get(name)
        if examples is None or len(instances) > len(examples):
            continue
        for instance in instances:
            if not any(_matches(instance, e) for e in examples):
                problems.append(f"{name}: planted {instance} not among the examples")
    return problems


def _matches(instance: dict[str, Any], example: dict[str, Any]) -> bool:
    for key, want in instance.items():
        if key in example:
            if example[key] != want:
                return False
        elif key == "value" and "values" in example:
            continue
    return True


def _gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**30:.2f} GiB"


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from checkers.synthetic import generate

    console = Console(stderr=False)
    ops = int(args.ops)
    if ops < 1000:
        raise BadInput("--ops must be at least 1000")
    engine = args.checker or "spark"
    keep = Path(args.keep) if getattr(args, "keep", None) else None
    in_process = bool(getattr(args, "in_process", False))
    with tempfile.TemporaryDirectory(prefix="strandline-bench-") as tmp:
        history = keep or Path(tmp) / "history.jsonl"
        started = time.monotonic()
        planted = generate(history, ops, seed=ops)
        generated = time.monotonic() - started
        size = history.stat().st_size
        console.print(
            f"generated {planted.ops:,} ops ({size / 2**20:,.0f} MiB) in {generated:.1f} s, "
            f"planted {sum(planted.counts().values())} anomalies"
        )
        runs = [_measure(engine, history, in_process)]
        if engine == "spark" and ops >= 1_000_000:
            # Again, from the Parquet form the first check left beside the history.
            again = _measure(engine, history, in_process)
            again["engine"] = "spark, cached parquet"
            runs.append(again)
        if not getattr(args, "no_duckdb", False):
            try:
                import duckdb  # noqa: F401

                runs.append(_measure("duckdb", history))
            except ImportError:
                console.print("duckdb is not installed (a dev dependency): no comparison")
    table = Table(title=f"checker benchmark: {planted.ops:,} ops, {os.cpu_count()} cores")
    for column in ("engine", "seconds", "ops/s", "driver peak", "JVM peak", "phases"):
        table.add_column(column)
    for run in runs:
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in run["timings"].items() if k != "reused_parquet")
        table.add_row(
            run["engine"],
            f"{run['seconds']:.1f}",
            f"{planted.ops / run['seconds']:,.0f}",
            _gib(run["driver_peak"]),
            _gib(run["jvm_peak"]),
            phases,
        )
    console.print(table)
    counts = Table(title="anomalies: planted / found")
    counts.add_column("anomaly")
    counts.add_column("planted")
    for run in runs:
        counts.add_column(run["engine"])
    for name, instances in planted.anomalies.items():
        counts.add_row(name, str(len(instances)), *[str(r["counts"].get(name, "-")) for r in runs])
    console.print(counts)
    problems = _mismatches(planted.anomalies, runs[0])
    for p in problems:
        console.print(f"[red]{engine}: {p}[/red]")
    for run in runs[1:]:
        for p in _mismatches(planted.anomalies, run):
            console.print(
                f"{run['engine']}: {p}" + (" (comparison only)" if run["engine"] == "duckdb" else "")
            )
            if run["engine"] != "duckdb":
                problems.append(p)
    duck = [r for r in runs if r["engine"] == "duckdb"]
    console.print(
        f"{engine}: {planted.ops / runs[0]['seconds']:,.0f} ops/s end to end, "
        f"driver peak {_gib(runs[0]['driver_peak'])}, JVM peak {_gib(runs[0]['jvm_peak'])}"
        + (f"; duckdb {planted.ops / duck[0]['seconds']:,.0f} ops/s" if duck else "")
    )
    return EXIT_INVALID if problems else 0


# The checker's rules in DuckDB SQL, for comparison only (DuckDB is a development dependency).
COLUMNS = (
    "{'index': 'BIGINT', 'time': 'BIGINT', 'process': 'VARCHAR', 'type': 'VARCHAR', 'f': 'VARCHAR', "
    "'topic': 'VARCHAR', 'partition': 'INTEGER', 'value': 'VARCHAR', 'offset': 'BIGINT', "
    "'records': 'STRUCT(topic VARCHAR, \"partition\" INTEGER, \"offset\" BIGINT, value BIGINT)[]'}"
)

STEPS = [
    """CREATE TEMP TABLE lines AS SELECT * FROM read_json({path}, format='newline_delimited',
       columns={columns}, ignore_errors=true)""",
    """CREATE TEMP TABLE ops AS SELECT *,
         lead(type) OVER w AS next_type, lead(f) OVER w AS next_f, lead("index") OVER w AS next_index,
         lead("offset") OVER w AS next_offset, lag(type) OVER w AS prev_type, lag(f) OVER w AS prev_f
       FROM (SELECT "index", TRY_CAST(process AS BIGINT) AS process, type, f, topic, "partition",
                    TRY_CAST(value AS BIGINT) AS value, "offset"
             FROM lines WHERE process <> 'nemesis')
       WINDOW w AS (PARTITION BY process ORDER BY "index")""",
    """CREATE TEMP TABLE operations AS SELECT *,
         CASE WHEN next_type IS NULL OR next_type = 'invoke' THEN 'open'
              WHEN next_f = 'crash' THEN 'info' ELSE next_type END AS outcome
       FROM ops WHERE type = 'invoke'""",
    """CREATE TEMP TABLE sends AS SELECT value, process, topic, "partition", next_index AS "index",
         next_offset AS "offset", (outcome = 'ok' AND next_offset >= 0) AS acked,
         CASE WHEN outcome = 'fail' THEN 0 WHEN outcome = 'ok' AND next_offset >= 0 THEN 2 ELSE 1 END AS rank
       FROM operations WHERE f = 'send' AND value IS NOT NULL""",
    """CREATE TEMP TABLE reads AS SELECT "index", process, pos, r.topic AS topic, r."partition" AS "partition",
         r."offset" AS "offset", r.value AS value
       FROM (SELECT l."index", TRY_CAST(l.process AS BIGINT) AS process, unnest(l.records) AS r,
                    generate_subscripts(l.records, 1) AS pos
             FROM lines l JOIN ops o ON o."index" = l."index"
             WHERE l.type = 'ok' AND l.f <> 'crash' AND o.prev_type = 'invoke' AND o.prev_f = 'poll')""",
    """CREATE TEMP TABLE acks AS SELECT * FROM sends WHERE acked AND topic IS NOT NULL""",
    """CREATE TEMP TABLE status AS SELECT value, max(rank) AS status FROM sends GROUP BY value""",
    """CREATE TEMP TABLE max_read AS SELECT topic, "partition", max("offset") AS m FROM reads GROUP BY ALL""",
    """CREATE TEMP TABLE never_read AS SELECT a.*, m.m FROM acks a
         LEFT JOIN max_read m USING (topic, "partition")
       WHERE NOT EXISTS (SELECT 1 FROM reads r WHERE r.value = a.value)""",
    """CREATE TEMP TABLE sightings AS SELECT value, topic, "partition", "offset", min("index") AS i FROM (
         SELECT value, topic, "partition", "offset", "index" FROM acks
         UNION ALL SELECT value, topic, "partition", "offset", "index" FROM reads) GROUP BY ALL""",
    """CREATE TEMP TABLE resets AS SELECT process,
         CASE WHEN f = 'assign' THEN "index" ELSE next_index END AS reset_at
       FROM operations WHERE f = 'assign' OR (f = 'poll' AND outcome IN ('info', 'open')
         AND next_index IS NOT NULL)""",
    """CREATE TEMP TABLE poll_pairs AS SELECT * FROM (
         SELECT *, lag("offset") OVER (PARTITION BY process, epoch, topic, "partition"
                                       ORDER BY "index", pos) AS prev_offset
         FROM (SELECT *, sum(is_reset) OVER (PARTITION BY process ORDER BY "index", pos
                                            ROWS UNBOUNDED PRECEDING) AS epoch
               FROM (SELECT process, "index", pos, topic, "partition", "offset", 0 AS is_reset FROM reads
                     UNION ALL SELECT process, reset_at, -1, NULL, NULL, NULL, 1 FROM resets))
         WHERE is_reset = 0) WHERE prev_offset IS NOT NULL""",
]

COUNTS = {
    "lost-write": 'SELECT count(*) FROM never_read WHERE m > "offset"',
    "unseen": 'SELECT count(*) FROM never_read WHERE m IS NULL OR m <= "offset"',
    "duplicate": "SELECT count(*) FROM (SELECT value FROM sightings GROUP BY value HAVING count(*) > 1)",
    "inconsistent-offsets": (
        'SELECT count(*) FROM (SELECT 1 FROM sightings GROUP BY topic, "partition", "offset" HAVING count(*) > 1)'
    ),
    "aborted-read": (
        "SELECT count(*) FROM (SELECT DISTINCT value FROM reads) r JOIN status s USING (value) WHERE s.status = 0"
    ),
    "phantom": (
        "SELECT count(*) FROM (SELECT DISTINCT value FROM reads) r "
        "WHERE NOT EXISTS (SELECT 1 FROM status s WHERE s.value = r.value)"
    ),
    "poll-skip": 'SELECT count(*) FROM poll_pairs WHERE "offset" > prev_offset + 1',
    "nonmonotonic-poll": 'SELECT count(*) FROM poll_pairs WHERE "offset" <= prev_offset',
    "nonmonotonic-send": (
        'SELECT count(*) FROM (SELECT "offset" < lag("offset") OVER (PARTITION BY process, topic, "partition" '
        'ORDER BY "index") AS back FROM acks) WHERE back'
    ),
}


def check_with_duckdb(path: str | Path, threads: int = 2) -> dict[str, Any]:
    """Anomaly counts of one history by DuckDB (comparison only: it skips malformed-line bookkeeping)."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads={int(threads)}")
    con.execute("SET preserve_insertion_order=false")
    quoted = "'" + str(path).replace("'", "''") + "'"
    for step in STEPS:
        con.execute(step.format(path=quoted, columns=COLUMNS))
    counts = {}
    for name, sql in COUNTS.items():
        row = con.execute(sql).fetchone()
        counts[name] = int(row[0]) if row else 0
    con.close()
    return counts


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], sys.argv[2])))
