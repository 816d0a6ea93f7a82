"""`strandline analyze [--store DIR]`: a Spark job over every stored run -> tables and a page."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.analyze import analyze, summary_line


def main(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    analysis = analyze(
        Path(args.store),
        lambda text: console.print(f"analyze: {text}", highlight=False, markup=False, soft_wrap=True),
    )
    print(summary_line(analysis))
    print(f"analysis: {analysis.page}")
    return 0
