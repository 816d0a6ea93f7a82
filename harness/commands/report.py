"""`strandline report RUN_DIR`: (re)write report.html of a stored run, and its screenshot."""

from __future__ import annotations

import argparse
import logging

from rich.console import Console

from harness import rundir
from harness.report import write_report
from harness.report.shot import keep_screenshot

log = logging.getLogger(__name__)


def main(args: argparse.Namespace) -> int:
    run = rundir.existing_run_dir(args.run_dir)
    path = write_report(run)
    keep_screenshot(path)
    Console(highlight=False).print(f"report: {path}")
    return 0
