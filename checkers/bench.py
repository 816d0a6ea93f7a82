"""What `strandline bench checker` (harness/bench_checker.py) needs from the checkers: the generated
run (`write_run`: a synthetic history with planted anomalies, test.json, drain.json), a measurement
of one command in a fresh process (`measure`: wall time, peak memory of the driver and of the whole
process tree, CPU time), what an engine missed against what was planted (`mismatches`), where two
results.json differ (`differences`), and DuckDB's check of the same history, for comparison only
(`check_with_duckdb`: the same JSON lines and anomaly rules, 2 threads; a development dependency).

Runnable as `python -m checkers.bench duckdb RUN_DIR` to check once with DuckDB and print JSON.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from checkers.spark_cds import SAVING
from foundation.errors import InfrastructureError
from foundation.run_files import DRAIN, HISTORY, TEST_JSON

DUCKDB_THREADS = 2
SAMPLE_S = 0.2


def _duckdb_child(run: str) -> dict[str, Any]:
    """DuckDB's check of a run's history in this process; figures as a dict (run fresh by `measure`)."""
    started = time.monotonic()
    counts = check_with_duckdb(Path(run) / HISTORY, DUCKDB_THREADS)
    return {
        "engine": "duckdb",
        "seconds": time.monotonic() - started,
        "driver_peak": own_peak(),
        "counts": counts,
        "examples": {},
    }


def own_peak() -> int:
    """This process's own peak resident memory (bytes): VmHWM, the high-water mark of its address
    space. Not `ru_maxrss`: Linux carries it over `execve` from the address space replaced, so a
    fresh process spawned by a big one (the bench, after generating a 100,000,000-operation history
    in some 2 GiB) starts with its parent's peak. `ru_maxrss` only where /proc has no answer."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def tree(root: int) -> dict[int, tuple[int, float]]:
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


def measure(command: list[str], what: str) -> dict[str, Any]:
    """Run `command` in a fresh process (its last stdout line is JSON figures), sampling the memory
    and CPU time of its process tree; the figures with `wall` (s), `spawned` (the epoch time it was
    started), `tree_peak` (bytes) and `cpu` (s) added."""
    started, spawned = time.monotonic(), time.time()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            command, stdout=out, stderr=err, text=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable}
        )
        peak = 0
        cpu: dict[int, float] = {}  # pid -> CPU seconds at its last sample
        stop = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not stop.is_set():
                now = tree(proc.pid)
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
    lines = stdout.strip().splitlines()
    try:
        figures: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (stderr or stdout).strip().splitlines()[-5:]
        raise InfrastructureError(f"{what} failed (exit {code}): " + " | ".join(tail)) from None
    figures.update(wall=wall, spawned=spawned, tree_peak=peak or None, cpu=sum(cpu.values()) or None)
    # The machine's first Spark process (per Java, pyspark install and options) writes the class
    # archive later ones start from (`checkers.spark_cds`): once, but its start and end are slower.
    figures["archived"] = SAVING in stderr
    return figures


def mismatches(planted: dict[str, list[dict[str, Any]]], figures: dict[str, Any]) -> list[str]:
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


def differences(got: dict[str, Any], want: dict[str, Any]) -> list[str]:
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


def gib(n: int | None) -> str:
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
    if sys.argv[1:2] != ["duckdb"] or len(sys.argv) != 3:
        sys.exit("usage: python -m checkers.bench duckdb RUN_DIR")
    print(json.dumps(_duckdb_child(sys.argv[2]), default=str))
