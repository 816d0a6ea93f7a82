"""`strandline analyze`: one Spark job over every stored run -> tables and a page, in `<store>/analysis/`.

    <store>/analysis/index.html        the page (plots, campaign trends, slowest and most lossy runs)
    <store>/analysis/runs.parquet      one row per run directory (also runs.csv)
    <store>/analysis/settings.parquet  one row per setting and fault mix (also settings.csv)
    <store>/analysis/nights.parquet    one row per campaign run (also nights.csv)

The runs are read as they are (`harness.analyze.runs`), the tables computed by Spark
(`harness.analyze.spark`), the page drawn from them (`harness.analyze.page`). Everything is written
into a fresh directory that then replaces the old one, so a reader never sees half an analysis.
A campaign runs this at its end, in the Spark session its checks already started.
"""

from __future__ import annotations

import csv
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from foundation.errors import BadInput, InfrastructureError, StrandlineError
from foundation.run_files import ANALYSIS, ANALYSIS_PAGE
from harness.analyze.page import render_page
from harness.analyze.runs import RUN_COLUMNS, read_store
from harness.analyze.spark import HISTORY_COLUMNS, NIGHTS_TABLE, SETTINGS_TABLE, Tables, run_job

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TABLES = (
    ("runs", (*RUN_COLUMNS, *HISTORY_COLUMNS)),
    ("settings", SETTINGS_TABLE),
    ("nights", NIGHTS_TABLE),
)


@dataclass
class Analysis:
    directory: Path  # <store>/analysis
    tables: Tables
    seconds: float

    @property
    def page(self) -> Path:
        return self.directory / ANALYSIS_PAGE


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def write_csv(path: Path, columns: tuple[str, ...], rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])


def write_parquet(path: Path, schema: pa.Schema, rows: list[dict[str, Any]]) -> None:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, compression="zstd")


def spark_session(master: str | None) -> SparkSession:
    """The process's Spark session (a campaign's, or a new one): one-line errors when it cannot start."""
    try:
        from checkers.spark_session import get_session
    except ModuleNotFoundError as e:  # pragma: no cover - pyspark is a dependency
        raise InfrastructureError(f"Spark is not available ({e})") from None
    try:
        return get_session(master)
    except StrandlineError:
        raise
    except Exception as e:
        first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise InfrastructureError(f"Spark did not start: {first} (is Java installed? JAVA_HOME?)") from None


def _replace(new: Path, final: Path) -> None:
    """Swap the fresh analysis in for the old one (two renames; the old one is then removed)."""
    old = final.with_name(f".{ANALYSIS}-old-{os.getpid()}")
    if final.exists():
        os.replace(final, old)
    os.replace(new, final)
    shutil.rmtree(old, ignore_errors=True)


def analyze(
    store: Path, say: Callable[[str], None] = lambda _: None, *, master: str | None = None
) -> Analysis:
    """Analyse every run of `store`; BadInput when there is no store or no run in it."""
    if not store.is_dir():
        raise BadInput(f"no results store at {store} (run a test first, or pass --store DIR)")
    started = time.monotonic()
    data = read_store(store, progress=lambda done, total: say(f"  {done} of {total} run directories read"))
    if not data.runs:
        raise BadInput(f"no run in {store} (no <name>/<stamp>/ directory with a test.json or a history)")
    say(f"{len(data.runs)} runs, {len(data.nights)} campaign runs; starting Spark")
    session = spark_session(master)
    work = store / f".{ANALYSIS}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        try:
            tables = run_job(session, data, say)
        except StrandlineError:
            raise
        except Exception as e:  # Py4J / analysis errors: one line, never a traceback
            first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise InfrastructureError(f"the Spark job failed: {first[:300]}") from e
        say(f"writing the tables and the page into {store / ANALYSIS}")
        for name, columns in TABLES:
            write_csv(work / f"{name}.csv", columns, getattr(tables, name))
            write_parquet(work / f"{name}.parquet", tables.schemas[name], getattr(tables, name))
        files = [f"{name}.{kind}" for name, _ in TABLES for kind in ("csv", "parquet")]
        seconds = time.monotonic() - started
        (work / ANALYSIS_PAGE).write_text(render_page(store, data, tables, files, seconds), encoding="utf-8")
        _replace(work, store / ANALYSIS)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return Analysis(store / ANALYSIS, tables, time.monotonic() - started)


def summary_line(analysis: Analysis) -> str:
    """'12 runs: 5 valid, 4 invalid, 1 unknown, 2 not judged; 6 settings x fault mixes; 3 campaign runs'."""
    runs = analysis.tables.runs
    counts = {v: sum(1 for r in runs if r["verdict"] == v) for v in ("valid", "invalid", "unknown")}
    not_judged = sum(1 for r in runs if not r["verdict"])
    return (
        f"{len(runs)} runs: {counts['valid']} valid, {counts['invalid']} invalid, {counts['unknown']} unknown,"
        f" {not_judged} not judged; {len(analysis.tables.settings)} settings x fault mixes;"
        f" {len(analysis.tables.nights)} campaign runs; in {analysis.seconds:.1f} s"
    )
