"""Everything the report template shows, assembled from the cleaned run directory.

`build_context(run)` reads the run directory's small files once (`inputs`: results.json,
test.json, ...; `history` and `replicas`: what the checker wrote into evidence.json), never
the history or the data dirs, and puts together the verdict words, panels, pictures and examples.
It works on any run directory, however the run ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from checkers.refusals import describe as describe_refusal
from foundation import run_files
from harness.report.catalogue import description, sentence, severity_rank
from harness.report.examples import ExampleView, example_partitions, example_view
from harness.report.faults import shaded_windows
from harness.report.headline import headline, setup_headline, why
from harness.report.history import NS, digest_of, read_evidence
from harness.report.inputs import RunInputs, read_inputs
from harness.report.panels import files, settings_rows, stats_cards
from harness.report.pictures import divergence_table, leaders, missing_groups, state_of
from harness.report.power import power_panel
from harness.report.replicas import marks_from_results, partition_logs
from harness.report.svg import latency_chart, rate_chart, replica_chart
from harness.report.text import availability, availability_text, run_facts, weak_evidence

MAX_EXAMPLES_SHOWN = 20  # results.json keeps up to 20; the first EXAMPLES_OPEN are open
EXAMPLES_OPEN = 3
MAX_PARTITIONS_DRAWN = 8


@dataclass
class AnomalyView:
    name: str
    count: int
    description: str
    fatal: bool
    effect: str  # invalid | allowed | unknown (checkers/verdict.py), "" when results.json has none
    why: str  # the verdict rule that applied, from results.json's explanation
    examples: list[ExampleView]
    more: int


def build_context(run: Path) -> dict[str, Any]:
    inputs = read_inputs(run)
    cfg, results, outcome = inputs.config, inputs.results, inputs.outcome
    anomalies_raw: dict[str, Any] = (results or {}).get("anomalies") or {}
    evidence = read_evidence(run / run_files.EVIDENCE)
    digest = digest_of(evidence)
    windows = shaded_windows(digest.nemesis)
    logs = partition_logs(evidence)
    fatal = set(results["fatal"]) if results is not None and "fatal" in results else set()
    verdict, sentences = headline(results, digest, windows, fatal)
    facts = run_facts(run, cfg, digest, outcome, inputs.drain)
    limit = cfg.get("time_limit")
    avail = availability(
        digest,
        min(float(limit), facts.ran_s)
        if isinstance(limit, int | float) and facts.cut_short
        else (limit if isinstance(limit, int | float) else None),
    )
    status = inputs.status
    before_load = outcome is not None and inputs.failed_in_setup and not digest.ops
    heading = ""
    if outcome is not None and before_load:
        verdict, sentences = setup_headline(str(status), outcome["phase"], outcome["reason"])
        heading = "" if verdict == "refused" else "Unknown: the run failed before its load"
    elif verdict == "valid" and status not in (None, "completed"):
        verdict = "unknown"
        sentences = [
            f"The run was {status} before it finished: what it recorded shows no anomaly, "
            "but without its final reads that is not a verdict."
        ]
    if verdict == "unknown" and results is not None and facts.cut_short:
        # The plainest reason first: how far the run got; the checker's reasons follow.
        first = sentences[0].removeprefix("The verdict is unknown: ") if sentences else ""
        sentences = [
            f"The verdict is unknown: the run was {facts.cut_text()}.",
            sentence(first),
            *sentences[1:],
        ]
        sentences = [x for x in sentences if x]
    acked = ((results or {}).get("stats") or {}).get("sends", {}).get("ok")
    weak = weak_evidence(avail, acked if isinstance(acked, int) else None) if verdict == "valid" else ""
    if weak:
        sentences.append(weak)

    anomalies: list[AnomalyView] = []
    for name in sorted(anomalies_raw, key=lambda n: (severity_rank(n), n)):
        a = anomalies_raw[name]
        if a["count"] <= 0:
            continue
        ex = a["examples"]
        anomalies.append(
            AnomalyView(
                name=name,
                count=a["count"],
                description=sentence(description(name)),
                fatal=(name in fatal)
                if fatal
                else (a["effect"] == "invalid" or (not a["effect"] and verdict == "invalid")),
                effect=a["effect"],
                why=why(results, name),
                examples=[example_view(name, e, digest, logs) for e in ex[:MAX_EXAMPLES_SHOWN]],
                more=max(0, len(ex) - MAX_EXAMPLES_SHOWN),
            )
        )

    pictures, shown = _pictures(inputs, anomalies_raw, digest, logs)
    t_end = max(digest.end_ns / NS, 1.0)
    load_end = float(limit) if isinstance(limit, int | float) else None
    return {
        "run_dir": str(run),
        "title": f"{cfg.get('name', run.parent.name)} {run.name}",
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "verdict": verdict,
        "sentences": sentences,
        "heading": heading,
        "before_load": before_load,
        "outcome": outcome,
        "settings": settings_rows(
            cfg, results, facts, ("never started: " + str(status)) if before_load else "", inputs.state
        ),
        "cards": stats_cards(results, digest, avail),
        "power": power_panel(results),
        "availability": availability_text(avail, cut_short=facts.cut_short),
        "weak": weak,
        "examples_open": EXAMPLES_OPEN,
        "rate_svg": rate_chart(digest.rate, t_end, windows, load_end) if digest.ops else None,
        "history_empty": not inputs.history_bytes or (evidence is not None and not digest.ops),
        "latency_svg": latency_chart(digest.latency, t_end, windows, load_end) if digest.latency else None,
        "faults": [
            {
                "label": w.label,
                "colour": w.colour,
                "start": f"{w.start_s:.1f}",
                "end": f"{w.end_s:.1f}" if w.end_s is not None else "never healed",
                "info": w.info,
            }
            for w in windows
        ],
        "anomalies": anomalies,
        "pictures": shown,
        "other_partitions": [p["name"] for p in pictures if p not in shown],
        "no_data_dirs": not logs,
        "cut_short": facts.cut_short,
        "files": files(run),
        "missing": inputs.missing,
        "problems": [f"line {p.line_no}: {p.reason}" for p in digest.problems[:10]],
        "incomplete": list((results or {}).get("incomplete") or []),
        # a defined system whose data dirs are not Kafka segments (docs/systems.md)
        "replicas_unavailable": str((results or {}).get("replicas_unavailable") or ""),
        # features the test asked for that the system refused (idempotence, consumer groups)
        "refused": [describe_refusal(n, r) for n, r in ((results or {}).get("refused") or {}).items()],
        "drain": inputs.drain,
    }


def _pictures(
    inputs: RunInputs, anomalies_raw: dict[str, Any], digest: Any, logs: dict[tuple[str, int], Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every partition's picture, the ones to show): those the anomalies name or where replicas
    disagree, else all (few)."""
    leader_of = leaders(inputs.state)
    affected: set[tuple[str, int]] = set()
    for a in anomalies_raw.values():
        if a["effect"] != "allowed":  # an allowed duplicate does not make a picture urgent
            affected |= example_partitions(a["examples"], digest)
    pictures = []
    for key in sorted(logs):
        marks = marks_from_results(inputs.results, logs[key])
        bad = any(m.divergent or m.missing_acked for m in marks.values())
        pictures.append(
            {
                "name": logs[key].name,
                "affected": bad or key in affected,
                "svg": replica_chart(logs[key], marks, leader_of.get(key)),
                "leader": leader_of.get(key),
                "state": state_of(inputs.state, key),
                "divergent": sorted({o for m in marks.values() for o in m.divergent})[:20],
                "missing": {n: sorted(m.missing_acked)[:20] for n, m in marks.items() if m.missing_acked},
                "missing_count": {n: len(m.missing_acked) for n, m in marks.items() if m.missing_acked},
                "missing_groups": missing_groups(marks),
                "table": divergence_table(logs[key], marks, digest.acked.get(key, {})),
            }
        )
    pictures.sort(key=lambda p: (not p["affected"], p["name"]))
    shown = [p for p in pictures if p["affected"]] or pictures[:MAX_PARTITIONS_DRAWN]
    return pictures, shown
