"""`strandline bench checker --ops N [--checker spark|reference] [--keep DIR] [--no-duckdb]
[--no-reference] [--in-process] [--convert]`: the check users run, timed end to end.

Generates a run directory (`history.synthetic.generator`: a history with planted anomalies, test.json,
drain.json; the history's Parquet form as `strandline run`'s journal writes it during the load,
`checkers.parquet_journal`, unless `--convert` leaves the conversion to the check, as for a history
from elsewhere) and checks it exactly as `strandline check` does (`checkers.api.check_run`:
conversion, Spark start, anomalies, statistics, replica logs, results.json), each engine in a
fresh Python process, with the chosen engine (Spark by default) first, then DuckDB (the same JSON
lines, the same anomaly rules, 2 threads; a development dependency, for comparison only) and the
reference checker. Prints each one's wall time, ops/s, the CPU time its process tree used (Python,
JVM and Spark's Python workers: sampled, so it holds on a busy machine where wall time does not)
and peak memory: the Python driver's and the whole process tree's. Exit 1 unless the chosen engine found exactly
what was planted and its results.json equals the reference's (but for `checker`).

The synthetic run has no replica data (`nodes/`): the replica-log part only notes that.
Runnable as `python -m checkers.bench ENGINE RUN_DIR` to check once and print JSON (the child).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from foundation.errors import EXIT_INVALID, BadInput, InfrastructureError
from foundation.run_files import DRAIN, HISTORY, TEST_JSON

DUCKDB_THREADS = 2
SAMPLE_S = 0.2


def _child(engine: str, run: str) -> dict[str, Any]:
    """Check once in this process; figures (and the results) as a dict (run fresh by `_measure`)."""
    started = time.monotonic()
    timings: dict[str, float] = {}
    results: dict[str, Any] = {}
    if engine in ("spark", "reference"):
        from checkers.api import check_run

        # As `strandline check` does, results.json written (each engine's in turn, the last kept).
        results = check_run(run, engine)
        counts = {name: a["count"] for name, a in results["anomalies"].items()}
        examples = {name: a["examples"] for name, a in results["anomalies"].items()}
        if engine == "spark":
            from checkers import spark as spark_checker

            timings = dict(spark_checker.last_timings)
            # Besides Spark's part: imports, the verdict, the statistics assembled, results.json.
            timings["rest"] = time.monotonic() - started - timings.get("total", 0.0)
    elif engine == "duckdb":
        counts = check_with_duckdb(Path(run) / HISTORY, DUCKDB_THREADS)
        examples = {}
    else:
        raise BadInput(f"unknown engine {engine!r}")
    seconds = time.monotonic() - started
    return {
        "engine": engine,
        "seconds": seconds,
        "driver_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "timings": timings,
        "counts": counts,
        "examples": examples,
        "results": results,
    }


def _tree(root: int) -> dict[int, tuple[int, float]]:
    """Resident memory (bytes) and CPU time used so far (user + system, s) of a process and all its
    descendants, by pid (from /proc)."""
    parents: dict[int, int] = {}
    figures: dict[int, tuple[int, float]] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        figures[int(entry)] = (int(fields[21]) * page, (int(fields[11]) + int(fields[12])) / tick)
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    return {pid: figures[pid] for pid in tree if pid in figures}


def _measure(engine: str, run: Path, in_process: bool = False) -> dict[str, Any]:
    """Run `_child` in a fresh interpreter (its last stdout line is the JSON figures), sampling
    the memory of its process tree; `in_process` checks in this process (the tests' shared Spark
    session): same findings, but the memory figures are then this process's."""
    started = time.monotonic()
    if in_process:
        here: dict[str, Any] = json.loads(json.dumps(_child(engine, str(run)), default=str))
        here["wall"] = time.monotonic() - started
        here["tree_peak"] = None
        here["cpu"] = None
        return here
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "checkers.bench", engine, str(run)],
            stdout=out,
            stderr=err,
            text=True,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )
        peak = 0
        cpu: dict[int, float] = {}  # pid -> CPU seconds at its last sample
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                now = _tree(proc.pid)
                peak = max(peak, sum(rss for rss, _ in now.values()))
                cpu.update({pid: seconds for pid, (_, seconds) in now.items()})
                stop.wait(SAMPLE_S)

        sampler = threading.Thread(target=sample, name="tree-rss", daemon=True)
        sampler.start()
        code = proc.wait()
        stop.set()
        sampler.join()
        wall = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if code != 0:
        tail = (stderr or stdout).strip().splitlines()[-5:]
        raise InfrastructureError(f"{engine} check failed: " + " | ".join(tail))
    figures: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    figures["wall"] = wall
    figures["tree_peak"] = peak or None
    figures["cpu"] = sum(cpu.values()) or None
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


def _differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Top-level keys (and stats keys) of results.json where two engines differ (`checker` aside)."""
    out = []
    for key in sorted(set(got) | set(want)):
        if key == "checker" or got.get(key) == want.get(key):
            continue
        if key == "stats" and isinstance(got.get(key), dict) and isinstance(want.get(key), dict):
            out += [
                f"stats.{k}"
                for k in sorted(set(got[key]) | set(want[key]))
                if got[key].get(k) != want[key].get(k)
            ]
        else:
            out.append(key)
    return out


def _gib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**30:.2f} GiB"


def write_run(run: Path, ops: int) -> Any:
    """A run directory with a synthetic history (anomalies planted), test.json and drain.json."""
    from history.synthetic.generator import generate

    run.mkdir(parents=True, exist_ok=True)
    planted = generate(run / HISTORY, ops, seed=ops, topics=2, partitions=3)
    config = {"topics": 2, "partitions": 3, "nodes": 3, "replication_factor": 3, "seed": ops}
    (run / TEST_JSON).write_text(json.dumps({"config": config, "seed": ops}))
    (run / DRAIN).write_text(json.dumps({"complete": True, "reason": "", "records": 0}))
    return planted


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from checkers.parquet import cache_dir_for
    from checkers.parquet_journal import ColumnarJournal

    console = Console(stderr=False)
    ops = int(args.ops)
    if ops < 1000:
        raise BadInput("--ops must be at least 1000")
    engine = args.checker or "spark"
    if engine not in ("spark", "reference"):
        raise BadInput(f"bench checker: --checker spark or reference, not {engine!r}")
    keep = Path(args.keep) if getattr(args, "keep", None) else None
    in_process = bool(getattr(args, "in_process", False))
    engines = [engine]
    if not getattr(args, "no_duckdb", False):
        try:
            import duckdb  # noqa: F401

            engines.append("duckdb")
        except ImportError:
            console.print("duckdb is not installed (a dev dependency): no comparison")
    if engine != "reference" and not getattr(args, "no_reference", False):
        engines.append("reference")
    with tempfile.TemporaryDirectory(prefix="strandline-bench-") as tmp:
        run = keep or Path(tmp) / "run"
        started = time.monotonic()
        planted = write_run(run, ops)
        generated = time.monotonic() - started
        size = (run / HISTORY).stat().st_size
        console.print(
            f"generated {planted.ops:,} ops ({size / 2**20:,.0f} MiB) in {generated:.1f} s, "
            f"planted {sum(planted.counts().values())} anomalies; checking {run} with {', '.join(engines)}"
        )
        shutil.rmtree(cache_dir_for(run / HISTORY), ignore_errors=True)
        if getattr(args, "convert", False):
            console.print("the check converts the history to Parquet itself (--convert)")
        else:
            started = time.monotonic()
            journaled = ColumnarJournal(run / HISTORY).finish()
            if journaled is None:
                raise InfrastructureError("the history's Parquet form could not be written")
            console.print(
                f"the Parquet form written as `strandline run`'s journal writes it during the load "
                f"({time.monotonic() - started:.1f} s, not timed; --convert times it in the check)"
            )
        runs = []
        for name in engines:
            load = os.getloadavg()[0]
            figures = _measure(name, run, in_process)
            figures["load"] = (load, os.getloadavg()[0])
            runs.append(figures)
    table = Table(title=f"checker benchmark, end to end: {planted.ops:,} ops, {os.cpu_count()} cores")
    for column in ("engine", "wall s", "ops/s", "CPU s", "driver peak", "tree peak", "load 1m", "phases"):
        table.add_column(column)
    for r in runs:
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in r["timings"].items() if k != "reused_parquet")
        table.add_row(
            r["engine"],
            f"{r['wall']:.1f}",
            f"{planted.ops / r['wall']:,.0f}",
            "n/a" if r.get("cpu") is None else f"{r['cpu']:.0f}",
            _gib(r["driver_peak"]),
            _gib(r["tree_peak"]),
            f"{r['load'][0]:.1f}-{r['load'][1]:.1f}",
            phases,
        )
    console.print(table)
    counts = Table(title="anomalies: planted / found")
    counts.add_column("anomaly")
    counts.add_column("planted")
    for r in runs:
        counts.add_column(r["engine"])
    for name, instances in planted.anomalies.items():
        counts.add_row(name, str(len(instances)), *[str(r["counts"].get(name, "-")) for r in runs])
    console.print(counts)
    problems = [f"{engine}: {p}" for p in _mismatches(planted.anomalies, runs[0])]
    for r in runs[1:]:
        if r["engine"] == "duckdb":
            for p in _mismatches(planted.anomalies, r):
                console.print(f"duckdb: {p} (comparison only)")
        elif r["engine"] == "reference":
            diff = _differences(runs[0]["results"], r["results"])
            if diff:
                problems.append(f"{engine} and reference results.json differ in {', '.join(diff)}")
            else:
                console.print(f"{engine} results.json == reference results.json (but for `checker`)")
    for p in problems:
        console.print(f"[red]{p}[/red]")
    first = runs[0]
    console.print(
        f"{engine}: {planted.ops / first['wall']:,.0f} ops/s end to end, driver peak "
        f"{_gib(first['driver_peak'])}, process tree peak {_gib(first['tree_peak'])}"
        + "".join(f"; {r['engine']} {planted.ops / r['wall']:,.0f} ops/s" for r in runs[1:])
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
    print(json.dumps(_child(sys.argv[1], sys.argv[2]), default=str))
