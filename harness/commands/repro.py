"""`strandline repro NAME [--system own|kafka] | --list`: reproduce a reported data-loss scenario,
then show the fix holds, on the own broker's variants or on the Kafka releases that had the bug
and fixed it."""

from __future__ import annotations

import argparse
import json
import textwrap

from rich.console import Console

from clusters.kafka_release import DEFAULT_VERSION
from foundation.errors import EXIT_INVALID, EXIT_VALID, BadInput
from harness.repro import Reproduction, lost_text, reproduce
from harness.scenarios import SCENARIOS, Scenario, scenario


def main(args: argparse.Namespace) -> int:
    if args.list or not args.scenario:
        if not args.list:
            raise BadInput("name a scenario (see `strandline repro --list`)")
        listed = [scenario(args.scenario)] if args.scenario else list(SCENARIOS.values())
        width = max(len(s.name) for s in listed)  # the story and settings start where the summary does
        print("\n".join(listing(s, width) for s in listed))
        return EXIT_VALID
    s = scenario(args.scenario)
    system = getattr(args, "system", None) or "own"
    if system == "kafka":
        s.on_kafka()  # exit 2 with the reason before anything starts
    console = Console(stderr=True)
    console.print(f"[bold]repro {s.name}[/]: {s.summary}", highlight=False)
    result = reproduce(
        s,
        seed=args.seed or 0,
        store=args.store,
        console=console,
        checker=getattr(args, "checker", None),
        system=system,
    )
    for line in outcome_lines(result):
        print(line)
    summary = result.summary()
    last = result.unsafe[-1]
    (last.outcome.run_dir.parent / "repro.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"repro {s.name}: {'as expected' if result.as_expected else 'NOT as expected'}")
    return EXIT_VALID if result.as_expected else EXIT_INVALID


def outcome_lines(result: Reproduction) -> list[str]:
    """Both verdicts, each with the release (on Kafka) and the time to it, and the reports."""
    s, last = result.scenario, result.unsafe[-1]
    releases = result.releases()
    affected = f" on Kafka {releases['affected_release']}" if releases else ""
    fixed = f" on Kafka {releases['fixed_release']}" if releases else ""
    lines = []
    if result.reproduced_after_s is not None:
        lines.append(
            f"reproduced{affected} in {result.reproduced_after_s:.0f} s after {len(result.unsafe)} "
            f"attempt(s): {lost_text(last.outcome)}"
        )
    else:
        lines.append(
            f"not reproduced{affected} within {s.budget_on(result.system):.0f} s "
            f"({len(result.unsafe)} attempt(s), last: {last.verdict})"
        )
    lines.append(f"unsafe report: {last.outcome.run_dir / 'report.html'}")
    if result.safe is not None:
        took = f" in {result.safe_after_s:.0f} s" if result.safe_after_s is not None else ""
        lines.append(
            f"safe run{fixed}: {result.safe.verdict} ({lost_text(result.safe.outcome)}){took} "
            f"{result.safe.outcome.run_dir / 'report.html'}"
        )
    return lines


def listing(s: Scenario, width: int) -> str:
    """A scenario as `--list` shows it: the bug, the story, both twins on the own broker, and
    the releases it runs on with `--system kafka` (or why it cannot); `width`: the names' column."""
    indent = " " * (width + 1)
    unsafe = ", ".join(f"{k}={v}" for k, v in s.unsafe.items())
    safe = ", ".join(f"{k}={v}" for k, v in s.safe.items())
    story = textwrap.fill(s.story, width=100, initial_indent=indent, subsequent_indent=indent)
    lines = [
        f"{s.name:<{width}} {s.summary}",
        story,
        f"{indent}unsafe: {unsafe} (invalid) · safe: {safe} (valid)",
    ]
    lines.append(
        textwrap.fill(kafka_line(s), width=100, initial_indent=indent, subsequent_indent=indent + "  ")
    )
    return "\n".join(lines)


def kafka_line(s: Scenario) -> str:
    kafka = s.kafka
    if kafka is None:
        return "real Kafka: not a Kafka bug (own broker only)"
    if kafka.unavailable:
        return f"real Kafka: cannot run here: {kafka.unavailable}"

    def twin(settings: dict[str, object], safe: bool) -> str:
        release = kafka.release(safe) or f"{DEFAULT_VERSION} (default)"
        rest = ", ".join(f"{k}={v}" for k, v in settings.items() if k != "kafka_version")
        return f"Kafka {release}" + (f" {rest}" if rest else "")

    line = (
        f"real Kafka (--system kafka, {kafka.system}): {twin(kafka.unsafe, False)} (invalid) → "
        f"{twin(kafka.safe, True)} (valid)"
    )
    return line + (f"; {kafka.notes}" if kafka.notes else "")
