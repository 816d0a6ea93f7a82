"""`strandline check RUN_DIR`: (re)check a stored run, write results.json, print the verdict.

The last line on stdout is `verdict: valid|invalid|unknown <run-dir>`; the exit code follows it
(0 valid, 1 invalid, 3 unknown; 2 for bad input such as a missing history). report.html is
rewritten from the new results, so it never shows an older verdict than results.json.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from checkers.api import check_run, checked_timings, checked_with, load_config, verdict_word
from checkers.engines import engine_named
from checkers.power import lines as power_lines
from foundation.errors import EXIT_INVALID, EXIT_UNKNOWN, EXIT_VALID, BadInput

log = logging.getLogger(__name__)

EXIT_FOR = {"valid": EXIT_VALID, "invalid": EXIT_INVALID, "unknown": EXIT_UNKNOWN}

# Filled in by each check, for `strandline bench checker`: seconds per part (the check's own parts,
# `checkers.engines.last_timings`, and the report's).
last_timings: dict[str, float] = {}


def summary_lines(results: dict[str, Any]) -> list[str]:
    """A few lines a person reads: counts, anomalies with their effect, what is incomplete."""
    stats = results.get("stats", {})
    sends = stats.get("sends", {})
    lines = [
        f"sends: {sends.get('ok', 0)} ok, {sends.get('fail', 0)} fail, {sends.get('info', 0)} info"
        f"{', ' + str(sends['open']) + ' open' if sends.get('open') else ''}; "
        f"records read: {stats.get('records_read', 0)}; acknowledged then lost: {stats.get('acked_lost', 0)}",
    ]
    for name, a in results.get("anomalies", {}).items():
        if a.get("count"):
            first = a["examples"][0] if a.get("examples") else {}
            lines.append(f"  {name}: {a['count']} ({a.get('effect')}) e.g. {str(first)[:200]}")
    for reason in results.get("incomplete", []):
        lines.append(f"  incomplete: {reason}")
    for note in results.get("notes", [])[:5]:
        lines.append(f"  note: {note}")
    lines += power_lines(results.get("power"))
    lines.append(checked_with(results))
    return lines


def rewrite_report(run: Path) -> str:
    """Rewrite report.html from the new results.json; the line to print (a hint when it failed)."""
    from harness.report import write_report

    try:
        return f"report: {write_report(run)}"
    except Exception as e:  # the verdict stands without a report
        log.info("report failed", exc_info=True)
        return f"report not rewritten ({type(e).__name__}: {e}); try: strandline report {run}"


def main(args: argparse.Namespace) -> int:
    run = Path(args.run_dir)
    if not run.is_dir():
        raise BadInput(f"no such run directory: {run}")
    run = run.resolve()
    # The engine: the flag's, else the run's own test.json's; named here, an object from here on.
    engine = engine_named(args.checker or load_config(run)[0].checker)
    last_timings.clear()
    results = check_run(
        run,
        engine=engine,
        # the flag, else the environment, else the run's own test.json (docs/running.md, "Spark")
        spark_master=getattr(args, "spark_master", None) or os.environ.get("STRANDLINE_SPARK_MASTER"),
        spark_remote=getattr(args, "spark_remote", None),
    )
    last_timings.update(checked_timings())
    console = Console(highlight=False, soft_wrap=True)
    for line in summary_lines(results):
        console.print(line, markup=False)
    started = time.monotonic()
    report = rewrite_report(run)
    last_timings["report"] = time.monotonic() - started
    console.print(report, markup=False)
    word = verdict_word(results["valid"])
    print(f"verdict: {word} {run}", flush=True)
    return EXIT_FOR[word]
