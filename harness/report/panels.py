"""The report's panels of facts: the settings, the figures at a glance, the files of the run.

Every figure is shown only when results.json (cleaned by `report.inputs`) or the history holds it;
an absent statistic is left out, never assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foundation import run_files
from harness.report.history import NS, HistoryDigest
from harness.report.text import RunFacts


def settings_rows(
    config: dict[str, Any],
    results: dict[str, Any] | None,
    facts: RunFacts | None = None,
    not_run: str = "",
    state: dict[str, Any] | None = None,
) -> list[tuple[str, str]]:
    """The settings that matter; `not_run` replaces the load line of a run that never reached it;
    `state` (the cluster's final state) adds how its brokers name themselves and lead, where that
    is not Kafka's way."""
    c = config
    nemesis = c.get("nemesis")
    faults = (", ".join(map(str, nemesis)) if isinstance(nemesis, list) else str(nemesis or "")) or "none"
    if c.get("schedule"):
        steps = c["schedule"]
        faults = (
            f"scripted schedule of {len(steps)} steps" if isinstance(steps, list) else "scripted schedule"
        )
    rows = [
        ("system", f"{c.get('system', '?')} on {c.get('backend', '?')}, {c.get('nodes', '?')} nodes"),
        ("truncation", str(c.get("variant", "?"))),
        ("acks", str(c.get("acks", "?"))),
        ("min.insync.replicas", str(c.get("min_insync", "?"))),
        ("replication factor", str(c.get("replication_factor", "?"))),
        ("unclean election", "enabled" if c.get("unclean_election") else "disabled"),
        ("topics × partitions", f"{c.get('topics', '?')} × {c.get('partitions', '?')}"),
        (
            "faults",
            faults
            + (
                f", every {c.get('nemesis_interval')} s" if c.get("nemesis") and not c.get("schedule") else ""
            ),
        ),
        (
            "load",
            f"{c.get('time_limit', '?')} s at {c.get('rate', '?')} ops/s, {c.get('concurrency', '?')} clients ({c.get('client', '?')})"
            if facts is None or not facts.cut_short
            else facts.load_text()
            if not not_run
            else not_run,
        ),
        ("seed", str(c.get("seed", "?"))),
    ]
    if c.get("eligible_leader_replicas"):
        rows.append(("eligible.leader.replicas.enable", "true"))
    if c.get("isr_broker_epoch_check"):
        rows.append(("isr.broker.epoch.check.enable", "true"))
    if c.get("log_flush_interval_messages"):
        rows.append(("log.flush.interval.messages", str(c["log_flush_interval_messages"])))
    if c.get("leader_election_policy") and c.get("leader_election_policy") != "first-in-isr":
        rows.append(("leader election", str(c["leader_election_policy"])))
    for note in (state or {}).get("broker_identity") or []:
        rows.append(("broker identity", str(note)))
    if (state or {}).get("leaderless"):
        rows.append(("partition leaders", str(state["leaderless"])))  # type: ignore[index]
    checker = (results or {}).get("checker") or {}
    if checker:
        secs = checker.get("seconds")
        rows.append(
            (
                "checker",
                f"{checker.get('engine', '?')}"
                + (f" in {float(secs):.1f} s" if isinstance(secs, int | float) else ""),
            )
        )
    return rows


def stats_cards(
    results: dict[str, Any] | None, digest: HistoryDigest, avail: tuple[int, int] | None = None
) -> list[tuple[str, str, str]]:
    """(label, value, css class) cards; losses get class "bad" so they stand out in red."""
    stats = (results or {}).get("stats") or {}
    cards: list[tuple[str, str, str]] = []
    sends = stats.get("sends") if isinstance(stats.get("sends"), dict) else None
    if sends is None:
        sends = {k: digest.counts.get(("send", k), 0) for k in ("ok", "fail", "info")}
    anomalies = (results or {}).get("anomalies") or {}

    def count(name: str) -> int:
        a = anomalies.get(name)
        return int(a.get("count", 0)) if isinstance(a, dict) else 0

    if anomalies:
        for label, name in (
            ("acknowledged, missing on the leader", "lost-committed-on-replicas"),
            ("acknowledged, never read back", "lost-write"),
        ):
            n = count(name)
            unseen = count("unseen") if name == "lost-write" else 0
            if n:
                cards.append((label, f"{n} lost", "bad"))
            elif unseen:
                cards.append((label, f"{unseen} unseen (lost or not yet read)", "warnbox"))
            else:
                cards.append((label, "0", "good"))
    cards.append(
        (
            "sends ok / fail / info",
            f"{sends.get('ok', 0)} / {sends.get('fail', 0)} / {sends.get('info', 0)}",
            "",
        )
    )
    if avail is not None:
        up, total = avail
        cards.append(
            ("seconds with accepted writes", f"{up} of {total} s", "warnbox" if up < total * 0.5 else "")
        )
    polls = stats.get("polls")
    if isinstance(polls, dict):
        cards.append(
            (
                "polls ok / fail / info",
                f"{polls.get('ok', 0)} / {polls.get('fail', 0)} / {polls.get('info', 0)}",
                "",
            )
        )
    if isinstance(stats.get("ops_per_s"), int | float):
        cards.append(("throughput", f"{stats['ops_per_s']:.0f} ops/s", ""))
    lat = stats.get("latency_ms")
    if isinstance(lat, dict) and any(isinstance(lat.get(k), int | float) for k in ("p50", "p99")):
        # A percentile is None (dropped by report.inputs) when the history holds no completed op.
        shown = [f"{lat[k]:.0f}" if isinstance(lat.get(k), int | float) else "—" for k in ("p50", "p99")]
        cards.append(("send latency p50 / p99", " / ".join(shown) + " ms", ""))
    cards.append(("history", f"{digest.ops} ops, {digest.end_ns / NS:.1f} s", ""))
    return cards


def files(run: Path) -> list[tuple[str, str]]:
    out = []
    for name, what in (
        (run_files.HISTORY, "every operation, one JSON per line"),
        (run_files.RESULTS, "the checker's output"),
        (run_files.TEST_JSON, "the configuration and seed (rerun with --config)"),
        (run_files.HARNESS_LOG, "what the controller did"),
        (run_files.DRAIN, "the final reads"),
        (run_files.CLUSTER_STATE, "leaders, epochs and ISRs at the end"),
        (run_files.OUTCOME, "how the run ended"),
    ):
        if (run / name).exists():
            out.append((name, what))
    nodes = run / run_files.NODES
    if nodes.is_dir():
        for node in sorted(p for p in nodes.iterdir() if p.is_dir()):
            logs = node / "logs"
            for f in sorted(logs.rglob("*")) if logs.is_dir() else []:
                if f.is_file():
                    out.append((str(f.relative_to(run)), f"log of {node.name}"))
    return out
