"""`strandline bench checker`: the command users wait for, `strandline check RUN_DIR`, timed whole.

Generates a run directory of `--ops` operations (`checkers.bench.write_run`: a synthetic history with
planted anomalies, test.json, drain.json; no replica data, as a history from elsewhere) and runs
`strandline check` on it in a fresh Python process (`python -m harness.bench_checker ENGINE RUN`:
the CLI's own `main`, so conversion, Spark's start, the checks, results.json, evidence.json and
report.html are all timed, and the process's start and end too), first without the history's
Parquet form (the check converts it, as for a history from elsewhere), then with it (as after
`strandline run`, whose journal writes it during the load). Beside them, in fresh processes too,
DuckDB's check of the same history (comparison only) and the reference checker's; then a small run
(`--small-ops`, 2,000 operations, with replica data dirs as a real run has) checked twice in one
process: the first check pays for Spark's start, the second is what a campaign's later runs pay.

Prints each one's wall time and ops/s, the process tree's CPU time, the driver's and the tree's
peak memory and the load average, and under each total its breakdown (start and exit of the process,
conversion, Spark's start, the rules, the statistics, the verdict power, the replica logs, the
evidence, results.json, the report).
Exit 1 unless the checker found exactly what was planted and Spark's results.json equals the
reference's (but for `checker`). No figure comes from a cache a user would not have: the Parquet
form is removed before the first check, and the class archive of Spark's JVM is the machine's own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from checkers.bench import (
    DUCKDB_THREADS,
    differences,
    gib,
    measure,
    mismatches,
    own_peak,
    write_run,
)
from checkers.parquet import cache_dir_for
from foundation.errors import EXIT_INVALID, BadInput, InfrastructureError
from foundation.run_files import CLUSTER_STATE, HISTORY, NODES, RESULTS

SMALL_OPS = 2000
# The parts of a check in the order they happen, as the breakdown names them.
PARTS = (
    ("convert", "conversion"),
    ("spark_start", "Spark start"),
    ("check", "rules"),
    ("stats", "statistics"),
    ("power", "verdict power"),
    ("replicas", "replica logs"),
    ("evidence", "evidence"),
    ("results", "verdict and results.json"),
    ("report", "report"),
)


def child(engine: str, run: str, times: int) -> dict[str, Any]:
    """`strandline check RUN --checker ENGINE`, `times` times in this process; figures as a dict."""
    from harness import cli
    from harness.commands import check as check_command

    checks = []
    for _ in range(times):
        started = time.monotonic()
        code = cli.main(["check", run, "--checker", engine])
        checks.append(
            {
                "code": code,
                "seconds": time.monotonic() - started,
                "ended": time.time(),
                "timings": dict(check_command.last_timings),
            }
        )
    results = json.loads((Path(run) / RESULTS).read_text())
    return {
        "engine": engine,
        "checks": checks,
        "driver_peak": own_peak(),
        "counts": {name: a["count"] for name, a in results["anomalies"].items()},
        "examples": {name: a["examples"] for name, a in results["anomalies"].items()},
        "results": results,
    }


def _check(engine: str, run: Path, times: int = 1, in_process: bool = False) -> dict[str, Any]:
    """`child` in a fresh interpreter (or here, `in_process`: the tests' shared Spark session)."""
    if in_process:
        started, spawned = time.monotonic(), time.time()
        figures = json.loads(json.dumps(child(engine, str(run), times), default=str))
        figures.update(wall=time.monotonic() - started, spawned=spawned, tree_peak=None, cpu=None)
        return figures
    return measure([sys.executable, "-m", "harness.bench_checker", engine, str(run), str(times)], engine)


def breakdown(figures: dict[str, Any]) -> str:
    """'= process start and exit 1.9 + conversion 25.0 (Spark start 11.2 beside it) + ...'."""
    check = figures["checks"][0]
    timings = check["timings"]
    parts = []
    # The driver's own passes (statistics, verdict power) that ran beside the rules are shown inside
    # them, with what the check waited for them after the rules ("beside"), so the parts still add up.
    beside = [key for key in ("stats", "power") if key in timings] if "beside" in timings else []
    for key, label in PARTS:
        seconds = timings.get(key)
        if seconds is None or (key == "spark_start" and "convert" in timings) or key in beside:
            continue
        text = f"{label} {seconds:.1f}"
        if key == "convert" and "spark_start" in timings:
            text += f" (Spark start {timings['spark_start']:.1f} beside it)"
        if key == "check" and beside:
            inside = " and ".join(f"{dict(PARTS)[k]} {timings[k]:.1f}" for k in beside)
            text += f" ({inside} beside them) + waiting for those {timings['beside']:.1f}"
        parts.append(text)
    inside = sum(c["seconds"] for c in figures["checks"])
    outside = figures["wall"] - inside
    report = timings.get("report", 0.0)
    share = f"; the report {100 * report / figures['wall']:.0f} % of the total" if "report" in timings else ""
    archived = (
        "; this process wrote Spark's class archive (once per Java, pyspark install and options: its"
        " Spark start and its end are slower than later checks')"
        if figures.get("archived")
        else ""
    )
    return f"= process start and exit {outside:.1f} + " + " + ".join(parts) + f" s{share}{archived}"


def _row(label: str, figures: dict[str, Any], ops: int) -> list[str]:
    load = figures["load"]
    return [
        label,
        f"{figures['wall']:.1f}",
        f"{ops / figures['wall']:,.0f}",
        "n/a" if figures.get("cpu") is None else f"{figures['cpu']:.0f}",
        gib(figures.get("driver_peak")),
        gib(figures.get("tree_peak")),
        f"{load[0]:.1f}-{load[1]:.1f}",
    ]


def write_replicas(run: Path) -> None:
    """Replica data dirs for a synthetic run, as three brokers would leave them after a clean run:
    every node holds each partition's log as the final drain read it, and the cluster state names
    the leaders (so the check reads and judges replica logs as after a real run)."""
    from broker.storage.build import build_batch
    from broker.storage.segment import segment_name
    from history.reader import iter_ops

    logs: dict[tuple[str, int], dict[int, int]] = {}
    for op in iter_ops(run / HISTORY, problems=[]):
        if op.get("f") == "poll" and op.get("type") == "ok":
            for r in op.get("records") or []:
                logs.setdefault((r["topic"], r["partition"]), {}).setdefault(r["offset"], r["value"])
    partitions = []
    for node in ("n1", "n2", "n3"):
        data = run / NODES / node / "data"
        checkpoint = []
        for (topic, partition), records in sorted(logs.items()):
            log_dir = data / f"{topic}-{partition}"
            log_dir.mkdir(parents=True, exist_ok=True)
            end = max(records) + 1
            values = [str(records[o]).encode() if o in records else None for o in range(end)]
            (log_dir / segment_name(0)).write_bytes(build_batch(values, base_offset=0, leader_epoch=1))
            checkpoint.append(f"{topic} {partition} {end}")
            if node == "n1":
                partitions.append(
                    {
                        "topic": topic,
                        "partition": partition,
                        "leader": 1,
                        "isr": [1, 2, 3],
                        "replicas": [1, 2, 3],
                    }
                )
        (data / "replication-offset-checkpoint").write_text(
            f"0\n{len(checkpoint)}\n" + "".join(line + "\n" for line in checkpoint)
        )
    (run / CLUSTER_STATE).write_text(json.dumps({"partitions": partitions}))


def _small_run(args: argparse.Namespace, engine: str, tmp: Path, console: Any, in_process: bool) -> str:
    """The small run's two checks in one process: the first (the process's start and Spark's
    included), the second (what a campaign's later runs pay)."""
    ops = int(getattr(args, "small_ops", SMALL_OPS) or SMALL_OPS)
    run = tmp / "small"
    planted = write_run(run, ops)
    write_replicas(run)
    load = os.getloadavg()[0]
    figures = _check(engine, run, times=2, in_process=in_process)
    first, second = figures["checks"]
    first_s = first["ended"] - figures["spawned"]
    problems = [f"small run: {p}" for p in mismatches(planted.anomalies, figures)]
    for p in problems:
        console.print(f"[red]{p}[/red]")
    start = first["timings"].get("spark_start")
    return (
        f"small run ({planted.ops:,} ops, replica data on 3 nodes), {engine}, load {load:.1f}-"
        f"{os.getloadavg()[0]:.1f}: first check {first_s:.1f} s from the process's start"
        + (f" (Spark start {start:.1f} s)" if start is not None else "")
        + f", second check in the same process {second['seconds']:.1f} s"
        + ("" if not problems else " [red](findings differ from what was planted)[/red]")
        + ("; the process wrote Spark's class archive (once)" if figures.get("archived") else "")
    )


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=False, highlight=False, soft_wrap=True)
    ops = int(args.ops)
    if ops < 1000:
        raise BadInput("--ops must be at least 1000")
    engine = args.checker or "spark"
    if engine not in ("spark", "reference"):
        raise BadInput(f"bench checker: --checker spark or reference, not {engine!r}")
    keep = Path(args.keep) if getattr(args, "keep", None) else None
    in_process = bool(getattr(args, "in_process", False))
    # Without and with the history's Parquet form (--convert: only without, --no-convert: only with).
    forms = [False, True]
    if getattr(args, "convert", False):
        forms = [False]
    elif getattr(args, "no_convert", False) or engine == "reference":
        forms = [True]
    with tempfile.TemporaryDirectory(prefix="strandline-bench-") as tmp_name:
        tmp = Path(tmp_name)
        run = keep or tmp / "run"
        started = time.monotonic()
        planted = write_run(run, ops)
        size = (run / HISTORY).stat().st_size
        console.print(
            f"generated {planted.ops:,} ops ({size / 2**20:,.0f} MiB) in {time.monotonic() - started:.1f} s, "
            f"planted {sum(planted.counts().values())} anomalies: {run}"
        )
        rows: list[tuple[str, dict[str, Any]]] = []
        for present in forms:
            if not present:
                shutil.rmtree(cache_dir_for(run / HISTORY), ignore_errors=True)
            elif not (cache_dir_for(run / HISTORY) / "meta.json").exists():
                from checkers.parquet_journal import ColumnarJournal

                if ColumnarJournal(run / HISTORY).finish() is None:
                    raise InfrastructureError("the history's Parquet form could not be written")
            label = f"{engine}, " + ("with Parquet" if present else "no Parquet")
            rows.append((label, _timed(lambda: _check(engine, run, in_process=in_process))))
        if not getattr(args, "no_duckdb", False):
            try:
                import duckdb  # noqa: F401

                rows.append(
                    (
                        f"duckdb ({DUCKDB_THREADS} threads)",
                        _timed(lambda: measure(_duckdb_command(run), "duckdb")),
                    )
                )
            except ImportError:
                console.print("duckdb is not installed (a dev dependency): no comparison")
        if engine != "reference" and not getattr(args, "no_reference", False):
            rows.append(("reference", _timed(lambda: _check("reference", run, in_process=in_process))))
        small = (
            None if getattr(args, "no_small", False) else _small_run(args, engine, tmp, console, in_process)
        )
    table = Table(title=f"`strandline check`, end to end: {planted.ops:,} ops, {os.cpu_count()} cores")
    for column in ("check", "wall s", "ops/s", "CPU s", "driver peak", "tree peak", "load 1m"):
        table.add_column(column)
    for label, figures in rows:
        table.add_row(*_row(label, figures, planted.ops))
    console.print(table)
    for label, figures in rows:
        if "checks" in figures:
            console.print(f"{label}: {figures['wall']:.1f} s {breakdown(figures)}")
    counts = Table(title="anomalies: planted / found")
    counts.add_column("anomaly")
    counts.add_column("planted")
    for label, _ in rows:
        counts.add_column(label.split(",")[0] if label.startswith(engine) else label.split(" ")[0])
    for name, instances in planted.anomalies.items():
        counts.add_row(name, str(len(instances)), *[str(f["counts"].get(name, "-")) for _, f in rows])
    console.print(counts)
    problems = []
    for label, figures in rows:
        if label.startswith(engine):
            problems += [f"{label}: {p}" for p in mismatches(planted.anomalies, figures)]
        elif label.startswith("duckdb"):
            for p in mismatches(planted.anomalies, figures):
                console.print(f"duckdb: {p} (comparison only)")
        elif label == "reference":
            diff = differences(rows[0][1]["results"], figures["results"])
            if diff:
                problems.append(f"{engine} and reference results.json differ in {', '.join(diff)}")
            else:
                console.print(f"{engine} results.json == reference results.json (but for `checker`)")
    for p in problems:
        console.print(f"[red]{p}[/red]")
    console.print(
        "; ".join(f"{label}: {planted.ops / f['wall']:,.0f} ops/s" for label, f in rows)
        + f"; {engine} driver peak {gib(rows[0][1].get('driver_peak'))}"
    )
    if small is not None:
        console.print(small)
    return EXIT_INVALID if problems else 0


def _timed(check: Any) -> dict[str, Any]:
    """A measurement with the load average before and after it."""
    load = os.getloadavg()[0]
    figures: dict[str, Any] = check()
    figures["load"] = (load, os.getloadavg()[0])
    return figures


def _duckdb_command(run: Path) -> list[str]:
    return [sys.executable, "-m", "checkers.bench", "duckdb", str(run)]


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], sys.argv[2], int(sys.argv[3])), default=str))
