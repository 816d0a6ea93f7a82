"""`strandline campaign FILE.toml`: a matrix of tests with expected verdicts, summary, index and JUnit."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rich.console import Console

from foundation import run_files
from foundation.errors import EXIT_INVALID, EXIT_VALID, StrandlineError
from harness.analyze import analyze, summary_line
from harness.campaign import Campaign, load_campaign, run_campaign, table
from harness.campaign_table import render


def main(args: argparse.Namespace) -> int:
    campaign = load_campaign(args.file, store=args.store, checker=getattr(args, "checker", None))
    if getattr(args, "spark_master", None):  # the flag wins over the rows' spark_master, as in `run`
        campaign.tests = [
            dataclasses.replace(t, config=t.config.replace(spark_master=args.spark_master))
            for t in campaign.tests
        ]
    store = Path(campaign.tests[0].config.store)
    console = Console(stderr=True)
    console.print(
        f"[bold]campaign {campaign.name}[/]: {len(campaign.tests)} tests, budget {campaign.budget:.0f} s",
        highlight=False,
    )
    out_dir, results = run_campaign(campaign, store, console)
    missed = [r for r in results if not r.as_expected]
    refused = [r for r in results if r.verdict == "refused"]
    underpowered = [r for r in results if r.underpowered]
    for r in results:
        if r.verdict == "refused":
            print(f"--   {r.test.label:<40} refused: {r.reason}")
            continue
        mark = "ok  " if r.as_expected else "MISS"
        why = "  (too little load)" if r.underpowered else ""
        print(f"{mark} {r.test.label:<40} {r.verdict:<8} expected {'|'.join(r.test.expect)}{why}")
    print()
    print(render(table(results)))
    print()
    print(f"campaign: {out_dir / run_files.CAMPAIGN_PAGE}")
    analyze_store(campaign, store, console)
    ran = len(results) - len(refused)
    print(
        f"campaign {campaign.name}: {ran - len(missed)}/{ran} as expected"
        + (f", {len(underpowered)} unknown for too little load" if underpowered else "")
        + (f", {len(refused)} refused (cannot run here)" if refused else "")
    )
    return EXIT_INVALID if missed else EXIT_VALID


def analyze_store(campaign: Campaign, store: Path, console: Console) -> None:
    """`strandline analyze` over the store, in the Spark session the campaign's checks started.

    Its failure is reported in one line and does not change the campaign's verdict.
    """
    console.rule(f"{campaign.name}: analysis of every run in {store}")
    try:
        analysis = analyze(
            store,
            lambda text: console.print(f"analyze: {text}", highlight=False, markup=False, soft_wrap=True),
            master=campaign.tests[0].config.spark_master,
        )
    except StrandlineError as e:
        print(f"analysis: not written: {e}")
        return
    print(summary_line(analysis))
    print(f"analysis: {analysis.page}")
