"""`strandline repro NAME | --list`: reproduce a reported data-loss scenario, then show the fix holds."""

from __future__ import annotations

import argparse
import json
import textwrap

from rich.console import Console

from foundation.errors import EXIT_INVALID, EXIT_VALID, BadInput
from harness.repro import lost_text, reproduce
from harness.scenarios import SCENARIOS, scenario


def main(args: argparse.Namespace) -> int:
    if args.list or not args.scenario:
        if not args.list:
            raise BadInput("name a scenario (see `strandline repro --list`)")
        listed = [scenario(args.scenario)] if args.scenario else list(SCENARIOS.values())
        width = max(len(s.name) for s in listed)  # the story and settings start where the summary does
        indent = " " * (width + 1)
        for s in listed:
            unsafe = ", ".join(f"{k}={v}" for k, v in s.unsafe.items())
            safe = ", ".join(f"{k}={v}" for k, v in s.safe.items())
            story = textwrap.fill(s.story, width=100, initial_indent=indent, subsequent_indent=indent)
            print(
                f"{s.name:<{width}} {s.summary}\n{story}\n{indent}unsafe: {unsafe} (invalid) · safe: {safe} (valid)"
            )
        return EXIT_VALID
    s = scenario(args.scenario)
    console = Console(stderr=True)
    console.print(f"[bold]repro {s.name}[/]: {s.summary}", highlight=False)
    result = reproduce(
        s, seed=args.seed or 0, store=args.store, console=console, checker=getattr(args, "checker", None)
    )
    summary = result.summary()
    last = result.unsafe[-1]
    if summary["reproduced"]:
        print(
            f"reproduced in {result.reproduced_after_s:.0f} s after {len(result.unsafe)} attempt(s): {lost_text(last.outcome)}"
        )
    else:
        print(
            f"not reproduced within {s.budget:.0f} s ({len(result.unsafe)} attempt(s), last: {last.verdict})"
        )
    print(f"unsafe report: {last.outcome.run_dir / 'report.html'}")
    if result.safe is not None:
        print(
            f"safe run: {result.safe.verdict} ({lost_text(result.safe.outcome)}) {result.safe.outcome.run_dir / 'report.html'}"
        )
    (last.outcome.run_dir.parent / "repro.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"repro {s.name}: {'as expected' if result.as_expected else 'NOT as expected'}")
    return EXIT_VALID if result.as_expected else EXIT_INVALID
