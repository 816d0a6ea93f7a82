"""The HTML report of one run: verdict in plain words, evidence, timeline, replica logs, files.

`write_report(run_dir)` reads only the run directory (test.json, results.json, history.jsonl,
nodes/, cluster-state.json, drain.json), so it works on any stored run, also one cut short. The
result is one self-contained file (inline CSS and SVG, no script, no CDN) that opens offline.
Every value from a history, a log or results.json is escaped by jinja2's autoescape.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from harness import rundir
from harness.report_history import NS, Completed, FaultWindow, HistoryDigest, digest_history, fault_windows
from harness.report_replicas import PartitionLogs, compare, read_partition_logs
from harness.report_svg import latency_chart, rate_chart, replica_chart
from harness.report_text import (
    RunFacts,
    availability,
    availability_text,
    example_title,
    run_facts,
    weak_evidence,
)

log = logging.getLogger(__name__)

# What each anomaly means, for readers of the report (checkers.catalogue has the authoritative list).
DESCRIPTIONS = {
    "lost-write": "An acknowledged send that no read ever returned, although reads reached past its offset.",
    "lost-committed-on-replicas": "An acknowledged record missing from the final log of the partition's leader.",
    "log-divergence": "After the final reads, two replicas hold different records at one offset below both log ends.",
    "inconsistent-offsets": "One topic-partition offset seen with two different values, across acks and reads.",
    "unseen": "Acknowledged, never read, and no read reached its offset: lost or delayed.",
    "duplicate": "One value stored at two offsets.",
    "aborted-read": "A value whose send failed was read.",
    "phantom": "A read value that no send ever carried.",
    "poll-skip": "A process's successive polls of a partition skipped offsets, with no assign between.",
    "nonmonotonic-poll": "A process's successive polls of a partition went back, with no assign between.",
    "nonmonotonic-send": "A process's later send got an earlier offset on one partition.",
}
# Most serious first: the headline speaks of the first present.
SEVERITY = (
    "lost-write",
    "lost-committed-on-replicas",
    "log-divergence",
    "inconsistent-offsets",
    "aborted-read",
    "phantom",
    "unseen",
    "duplicate",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
)
MAX_EXAMPLES_SHOWN = 20  # results.json keeps up to 20; the first EXAMPLES_OPEN are open
EXAMPLES_OPEN = 3
MAX_PARTITIONS_DRAWN = 8


def _catalogue_descriptions() -> dict[str, str]:
    out = dict(DESCRIPTIONS)
    try:
        from checkers import catalogue  # type: ignore[attr-defined]

        for name in dir(catalogue):
            obj = getattr(catalogue, name)
            if isinstance(obj, dict):
                for k, v in obj.items():
                    if isinstance(k, str) and k in out:
                        text = v if isinstance(v, str) else getattr(v, "description", None)
                        if isinstance(text, str) and text:
                            out[k] = text
    except Exception:  # the catalogue is optional here: the built-in texts suffice
        pass
    return out


@dataclass
class ExampleView:
    title: str
    fields: list[tuple[str, str]]
    ops: list[dict[str, Any]]
    replicas: list[tuple[str, str]] = field(default_factory=list)


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


def _refs(example: Any) -> tuple[set[int], set[Any]]:
    """History indices and sent values an example names, whatever the checker called them."""
    indices: set[int] = set()
    values: set[Any] = set()
    if not isinstance(example, dict):
        return indices, values

    def ints(v: Any) -> list[int]:
        if isinstance(v, bool):
            return []
        if isinstance(v, int):
            return [v]
        if isinstance(v, list | tuple):
            return [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
        return []

    for key, v in example.items():
        k = key.lower()
        if k in ("index", "indices") or k.endswith(("_index", "_indices", "-index", "-indices")):
            indices.update(ints(v))
        elif k in ("value", "values", "prev_value"):
            for x in v if isinstance(v, list | tuple) else [v]:
                if isinstance(x, int | str) and not isinstance(x, bool):
                    values.add(x)
                elif isinstance(x, dict):
                    i, vals = _refs(x)
                    indices |= i
                    values |= vals
        elif isinstance(v, dict):
            i, vals = _refs(v)
            indices |= i
            values |= vals
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                i, vals = _refs(x)
                indices |= i
                values |= vals
    return indices, values


def _op_row(op: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": op.get("index"),
        "time": f"{int(op.get('time') or 0) / NS:.3f}",
        "process": op.get("process"),
        "type": op.get("type"),
        "f": op.get("f"),
        "where": f"{op['topic']}-{op.get('partition')}" if op.get("topic") is not None else "",
        "offset": op.get("offset", ""),
        "value": op.get("value", "") if op.get("f") == "send" or op.get("process") == "nemesis" else "",
        "error": op.get("error", ""),
        "records": len(op["records"]) if isinstance(op.get("records"), list) else "",
    }


def _send_row(c: Completed) -> dict[str, Any]:
    return {
        "index": f"{c.invoke_index}→{c.complete_index if c.complete_index is not None else '…'}",
        "time": f"{c.invoke_ns / NS:.3f}→{c.complete_ns / NS:.3f}"
        if c.complete_ns is not None
        else f"{c.invoke_ns / NS:.3f}→never",
        "process": c.process,
        "type": c.type,
        "f": c.f,
        "where": f"{c.topic}-{c.partition}" if c.topic is not None else "",
        "offset": c.offset if c.offset is not None else "",
        "value": c.value,
        "error": c.error or "",
        "records": "",
    }


def _scalar(v: Any) -> str:
    if isinstance(v, list | tuple) and len(v) > 12:
        return ", ".join(map(str, v[:12])) + f", … ({len(v)} in all)"
    if isinstance(v, list | tuple):
        return ", ".join(map(_scalar, v))
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_scalar(x)}" for k, x in v.items()) + "}"
    return str(v)


def _why(results: dict[str, Any] | None, name: str) -> str:
    """The reason checkers/verdict.py gave for this anomaly's effect ("name xN: effect (why)")."""
    for line in (results or {}).get("explanation") or []:
        text = str(line)
        if text.startswith(f"{name} x") and "(" in text and text.endswith(")"):
            return text[text.index("(") + 1 : -1]
    return ""


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""


def _partition_of(example: Any) -> tuple[str, int] | None:
    if not isinstance(example, dict):
        return None
    topic, partition = example.get("topic"), example.get("partition")
    if topic is not None and isinstance(partition, int):
        return (str(topic), partition)
    tp = example.get("topic_partition") or example.get("tp")
    if isinstance(tp, list | tuple) and len(tp) == 2 and isinstance(tp[1], int):
        return (str(tp[0]), tp[1])
    if isinstance(tp, str) and "-" in tp and tp.rsplit("-", 1)[1].isdigit():
        t, p = tp.rsplit("-", 1)
        return (t, int(p))
    return None


def _example_view(
    name: str, example: Any, digest: HistoryDigest, logs: dict[tuple[str, int], PartitionLogs]
) -> ExampleView:
    if not isinstance(example, dict):
        return ExampleView(title=_scalar(example), fields=[("example", _scalar(example))], ops=[])
    fields = [(str(k), _scalar(v)) for k, v in example.items()]
    indices, values = _refs(example)
    rows: list[dict[str, Any]] = []
    covered: set[int] = set()
    for v in sorted(values, key=str):
        c = digest.sends_by_value.get(str(v))
        if c is not None:
            rows.append(_send_row(c))
            covered.add(c.invoke_index)
            if c.complete_index is not None:
                covered.add(c.complete_index)
    for i in sorted(indices - covered):
        op = digest.by_index.get(i)
        if op is not None:
            rows.append(_op_row(op))
    replicas: list[tuple[str, str]] = []
    tp = _partition_of(example)
    offset = example.get("offset")
    if tp is None and values:
        c = digest.sends_by_value.get(str(next(iter(values))))
        if c is not None and c.topic is not None and isinstance(c.partition, int):
            tp = (str(c.topic), c.partition)
            offset = offset if offset is not None else c.offset
    if tp is not None and isinstance(offset, int) and tp in logs:
        for node, r in logs[tp].replicas.items():
            rec = r.records.get(offset)
            if rec is not None:
                text = f"value {rec[0]} (epoch {rec[1]})"
            elif offset >= r.log_end:
                text = f"absent: log ends at {r.log_end}"
            else:
                text = "absent"
            replicas.append((node, f"offset {offset}: {text}"))
    return ExampleView(title=example_title(name, example), fields=fields, ops=rows[:12], replicas=replicas)


def _example_partitions(examples: list[Any], digest: HistoryDigest) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for ex in examples:
        tp = _partition_of(ex)
        if tp is None:
            _i, values = _refs(ex)
            for v in values:
                c = digest.sends_by_value.get(str(v))
                if c is not None and c.topic is not None and isinstance(c.partition, int):
                    tp = (str(c.topic), c.partition)
                    break
        if tp is not None:
            out.add(tp)
    return out


_ROLE_WORDS = {
    "leader": "the leader",
    "controller": "the controller",
    "follower": "follower",
    "followers": "follower",
}


def _who(who: str) -> tuple[str, bool]:
    """'followers n2 n3' -> ('followers n2 and n3', plural); 'leader n1' -> ('the leader n1', False)."""
    words = who.split()
    role = _ROLE_WORDS.get(words[0]) if words else None
    nodes = words[1:] if role else words
    plural = len(nodes) > 1
    names = ", ".join(nodes[:-1]) + f" and {nodes[-1]}" if plural else " ".join(nodes)
    if role:
        role = role + "s" if plural and role == "follower" else role
        return f"{role} {names}".strip(), plural
    return names, plural


def _fault_phrase(w: FaultWindow) -> str:
    phrase = _bare_fault_phrase(w)
    return f"{phrase} (the {w.pattern} pattern)" if w.pattern else phrase


def _bare_fault_phrase(w: FaultWindow) -> str:
    label = w.label
    parts = label.split(" ", 1)
    who, plural = _who(parts[1] if len(parts) > 1 else "")
    verbs = {
        "kill": ("was killed", "were killed"),
        "pause": ("was paused", "were paused"),
        "restart": ("was restarted", "were restarted"),
        "lose-unsynced": ("lost power (unsynced writes dropped)", "lost power (unsynced writes dropped)"),
        "crash": ("crashed", "crashed"),
        "stop": ("was stopped", "were stopped"),
    }
    if w.f in verbs and who:
        return f"{who} {verbs[w.f][1 if plural else 0]} at {w.start_s:.1f} s"
    nouns = {
        "partition": "the network was partitioned",
        "clock": "clocks were skewed",
        "loss": "packets were dropped",
    }
    if w.f in nouns:
        return f"{nouns[w.f]} ({who}) at {w.start_s:.1f} s" if who else f"{nouns[w.f]} at {w.start_s:.1f} s"
    return f"the fault “{label}” at {w.start_s:.1f} s"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _count(anomalies: dict[str, Any], name: str) -> int:
    return int((anomalies.get(name) or {}).get("count", 0))


def _tp_text(tps: set[tuple[str, int]]) -> str:
    names = sorted(f"{t}-{p}" for t, p in tps)
    if not names:
        return ""
    if len(names) > 3:
        return f" on {', '.join(names[:3])} and {len(names) - 3} more partitions"
    return " on " + " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


PROCESS_FAULTS = ("kill", "restart", "lose-unsynced", "pause", "crash", "stop")


def _fault_after(examples: list[Any], digest: HistoryDigest, windows: list[FaultWindow]) -> str:
    """The faults that most plausibly destroyed acknowledged data: process faults after the last ack.

    Up to two are named (the first, and the last one that hit a leader), so the KIP-101 story reads
    "after follower n3 was killed at 16.5 s and the leader n2 was killed at 19.6 s".
    """
    if not windows:
        return ", with no fault injected"
    acks: list[float] = []
    for ex in examples:
        _i, values = _refs(ex)
        for v in values:
            c = digest.sends_by_value.get(str(v))
            if c is not None and c.complete_ns is not None:
                acks.append(c.complete_ns / NS)
    destructive = [w for w in windows if w.f not in ("clock",)] or windows
    last_ack = max(acks) if acks else None
    after = [w for w in destructive if last_ack is None or w.start_s >= last_ack]
    process = [w for w in after if w.f in PROCESS_FAULTS]
    if process:
        leader = [w for w in process if "leader" in w.label]
        chosen = [process[0]]
        if leader and leader[-1] is not process[0]:
            chosen.append(leader[-1])
        elif len(process) > 1 and not leader:
            chosen.append(process[1])
        return " after " + " and ".join(_fault_phrase(w) for w in chosen)
    if after:
        return " after " + _fault_phrase(after[0])
    before = [w for w in destructive if last_ack is not None and w.start_s < last_ack]
    return " after " + _fault_phrase(before[-1] if before else destructive[0])


def _leader_of(examples: list[Any]) -> str | None:
    leaders = {str(e["leader"]) for e in examples if isinstance(e, dict) and e.get("leader")}
    return leaders.pop() if len(leaders) == 1 else None


def headline(
    results: dict[str, Any] | None, digest: HistoryDigest, windows: list[FaultWindow], fatal: set[str]
) -> tuple[str, list[str]]:
    """(verdict word, sentences in plain words) for the top of the report."""
    if results is None:
        return "unchecked", ["This run has not been checked yet: run `strandline check` on this directory."]
    valid = results.get("valid")
    anomalies = {k: v for k, v in (results.get("anomalies") or {}).items() if (v or {}).get("count", 0) > 0}
    sentences: list[str] = []
    order = [*SEVERITY, *sorted(set(anomalies) - set(SEVERITY))]
    if _count(anomalies, "lost-committed-on-replicas") > _count(anomalies, "lost-write"):
        # Lead with the larger loss figure: the headline is the first sentence.
        order.remove("lost-committed-on-replicas")
        order.insert(0, "lost-committed-on-replicas")
    for name in order:
        if name not in anomalies or (fatal and name not in fatal):
            continue
        a = anomalies[name]
        n = int(a.get("count", 0))
        ex = list(a.get("examples") or [])
        where = _tp_text(_example_partitions(ex, digest))
        if name == "lost-write":
            s = f"{_plural(n, 'acknowledged write was', 'acknowledged writes were')} lost{where}{_fault_after(ex, digest, windows)}."
        elif name == "lost-committed-on-replicas":
            leader = _leader_of(ex)
            whose = f"its leader {leader}" if leader else "the leader"
            s = (
                f"{_plural(n, 'acknowledged write was', 'acknowledged writes were')} lost{where}: "
                f"missing from the final log of {whose}{_fault_after(ex, digest, windows)}."
            )
        elif name == "log-divergence":
            s = f"Replicas diverged: {_plural(n, 'offset holds', 'offsets hold')} different records on different replicas{where}."
        elif name == "inconsistent-offsets":
            s = f"{_plural(n, 'offset was', 'offsets were')} seen with two different values{where}."
        elif name == "unseen":
            s = f"{_plural(n, 'acknowledged write was', 'acknowledged writes were')} never read back{where} (lost or delayed)."
        else:
            s = f"{_plural(n, 'case', 'cases')} of {name}{where}: {DESCRIPTIONS.get(name, '').rstrip('.').lower()}."
        sentences.append(s)
    sends = results.get("stats", {}).get("sends", {}) if isinstance(results.get("stats"), dict) else {}
    if valid is True:
        acked = sends.get("ok") if isinstance(sends, dict) else None
        faults = _fault_summary(windows)
        first = "No anomaly found"
        first += f": all {acked} acknowledged writes were read back" if acked else ""
        first += f", through {faults}." if faults else "."
        extra = [s for s in sentences]
        return "valid", [first, *([f"Allowed by these settings: {' '.join(extra)}"] if extra else [])]
    if valid is False:
        return "invalid", sentences or ["The checker judged this run invalid (see the anomalies below)."]
    reasons = results.get("incomplete") or results.get("stats", {}).get("incomplete") or []
    text = "The verdict is unknown: the history or the final reads are incomplete"
    if reasons:
        text += " (" + "; ".join(map(str, reasons[:3])) + ")"
    return "unknown", [text + ".", *sentences]


def _fault_summary(windows: list[FaultWindow]) -> str:
    counts: dict[str, int] = {}
    for w in windows:
        counts[w.f] = counts.get(w.f, 0) + 1
    names = {"partition": "network partition", "clock": "clock fault", "loss": "packet-loss fault"}
    return ", ".join(_plural(n, names.get(f, f), names.get(f, f) + "s") for f, n in counts.items())


def _settings(
    config: dict[str, Any], results: dict[str, Any] | None, facts: RunFacts | None = None
) -> list[tuple[str, str]]:
    c = config
    faults = ", ".join(c.get("nemesis") or []) or "none"
    if c.get("schedule"):
        faults = f"scripted schedule of {len(c['schedule'])} steps"
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
            else facts.load_text(),
        ),
        ("seed", str(c.get("seed", "?"))),
    ]
    if c.get("log_flush_interval_messages"):
        rows.append(("log.flush.interval.messages", str(c["log_flush_interval_messages"])))
    if c.get("leader_election_policy") and c.get("leader_election_policy") != "first-in-isr":
        rows.append(("leader election", str(c["leader_election_policy"])))
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


def _stats_cards(
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
    if isinstance(lat, dict) and lat:
        cards.append(
            ("send latency p50 / p99", " / ".join(f"{lat.get(k, 0):.0f}" for k in ("p50", "p99")) + " ms", "")
        )
    cards.append(("history", f"{digest.ops} ops, {digest.end_ns / NS:.1f} s", ""))
    return cards


def _files(run: Path) -> list[tuple[str, str]]:
    out = []
    for name, what in (
        (rundir.HISTORY, "every operation, one JSON per line"),
        (rundir.RESULTS, "the checker's output"),
        (rundir.TEST_JSON, "the configuration and seed (rerun with --config)"),
        (rundir.HARNESS_LOG, "what the controller did"),
        (rundir.DRAIN, "the final reads"),
        (rundir.CLUSTER_STATE, "leaders, epochs and ISRs at the end"),
        (rundir.OUTCOME, "how the run ended"),
    ):
        if (run / name).exists():
            out.append((name, what))
    nodes = run / rundir.NODES
    if nodes.is_dir():
        for node in sorted(p for p in nodes.iterdir() if p.is_dir()):
            logs = node / "logs"
            for f in sorted(logs.rglob("*")) if logs.is_dir() else []:
                if f.is_file():
                    out.append((str(f.relative_to(run)), f"log of {node.name}"))
    return out


def _fatal_names(results: dict[str, Any] | None) -> set[str]:
    """Anomalies the settings must not show, when results.json says which (else: all present)."""
    if not results:
        return set()
    for key in ("fatal", "violations", "invalid_because", "failing"):
        v = results.get(key)
        if isinstance(v, list):
            return {str(x) for x in v}
    return set()


def build_context(run: Path) -> dict[str, Any]:
    test = rundir.read_json(run / rundir.TEST_JSON) or {}
    config = test.get("config", test) if isinstance(test, dict) else {}
    results = rundir.read_json(run / rundir.RESULTS)
    if not isinstance(results, dict):
        results = None
    outcome = rundir.read_json(run / rundir.OUTCOME)
    state = rundir.read_json(run / rundir.CLUSTER_STATE) or {}
    drain = rundir.read_json(run / rundir.DRAIN)
    anomalies_raw = (results or {}).get("anomalies") or {}
    want_idx: set[int] = set()
    want_val: set[Any] = set()
    for a in anomalies_raw.values():
        for ex in (a or {}).get("examples", [])[:MAX_EXAMPLES_SHOWN]:
            i, v = _refs(ex)
            want_idx |= i
            want_val |= v
    digest = digest_history(run / rundir.HISTORY, want_idx, want_val)
    windows = fault_windows(digest.nemesis)
    logs = read_partition_logs(run / rundir.NODES)
    fatal = _fatal_names(results)
    verdict, sentences = headline(results, digest, windows, fatal)
    cfg = config if isinstance(config, dict) else {}
    facts = run_facts(
        run,
        cfg,
        digest,
        outcome if isinstance(outcome, dict) else None,
        drain if isinstance(drain, dict) else None,
    )
    limit = cfg.get("time_limit")
    avail = availability(
        digest,
        min(float(limit), facts.ran_s) if isinstance(limit, int | float) and facts.cut_short else limit,
    )
    status = outcome.get("status") if isinstance(outcome, dict) else None
    if verdict == "valid" and status not in (None, "completed"):
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
            _sentence(first),
            *sentences[1:],
        ]
        sentences = [x for x in sentences if x]
    acked = ((results or {}).get("stats") or {}).get("sends", {}).get("ok") if results else None
    weak = weak_evidence(avail, acked if isinstance(acked, int) else None) if verdict == "valid" else ""
    if weak:
        sentences.append(weak)
    descriptions = _catalogue_descriptions()

    anomalies: list[AnomalyView] = []
    for name in sorted(anomalies_raw, key=lambda n: (SEVERITY.index(n) if n in SEVERITY else 99, n)):
        a = anomalies_raw[name] or {}
        if int(a.get("count", 0)) <= 0:
            continue
        ex = list(a.get("examples") or [])
        anomalies.append(
            AnomalyView(
                name=name,
                count=int(a.get("count", 0)),
                description=_sentence(descriptions.get(name, "")),
                fatal=(name in fatal)
                if fatal
                else (a.get("effect") == "invalid" or (not a.get("effect") and verdict == "invalid")),
                effect=str(a.get("effect") or ""),
                why=_why(results, name),
                examples=[_example_view(name, e, digest, logs) for e in ex[:MAX_EXAMPLES_SHOWN]],
                more=max(0, len(ex) - MAX_EXAMPLES_SHOWN),
            )
        )

    # Replica pictures: partitions the anomalies name or where replicas disagree, else all (few).
    leaders = _leaders(state)
    affected: set[tuple[str, int]] = set()
    for a in anomalies_raw.values():
        if (a or {}).get("effect") != "allowed":  # an allowed duplicate does not make a picture urgent
            affected |= _example_partitions(list((a or {}).get("examples") or []), digest)
    pictures = []
    for key in sorted(logs):
        marks = compare(logs[key], digest.acked.get(key, {}))
        bad = any(m.divergent or m.missing_acked for m in marks.values())
        pictures.append(
            {
                "name": logs[key].name,
                "affected": bad or key in affected,
                "svg": replica_chart(logs[key], marks, leaders.get(key)),
                "leader": leaders.get(key),
                "state": state_of(state, key),
                "divergent": sorted({o for m in marks.values() for o in m.divergent})[:20],
                "missing": {n: sorted(m.missing_acked)[:20] for n, m in marks.items() if m.missing_acked},
                "missing_count": {n: len(m.missing_acked) for n, m in marks.items() if m.missing_acked},
                "missing_groups": _missing_groups(marks),
                "table": _divergence_table(logs[key], marks, digest.acked.get(key, {})),
            }
        )
    pictures.sort(key=lambda p: (not p["affected"], p["name"]))
    shown = [p for p in pictures if p["affected"]] or pictures[:MAX_PARTITIONS_DRAWN]

    t_end = max(digest.end_ns / NS, 1.0)
    time_limit = config.get("time_limit") if isinstance(config, dict) else None
    load_end = float(time_limit) if isinstance(time_limit, int | float) else None
    return {
        "run_dir": str(run),
        "title": f"{config.get('name', run.parent.name)} {run.name}",
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "verdict": verdict,
        "sentences": sentences,
        "outcome": outcome if isinstance(outcome, dict) else None,
        "settings": _settings(cfg, results, facts),
        "cards": _stats_cards(results, digest, avail),
        "availability": availability_text(avail, cut_short=facts.cut_short),
        "weak": weak,
        "examples_open": EXAMPLES_OPEN,
        "rate_svg": rate_chart(digest.rate, t_end, windows, load_end) if digest.ops else None,
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
        "files": _files(run),
        "problems": [f"line {p.line_no}: {p.reason}" for p in digest.problems[:10]],
        "incomplete": list((results or {}).get("incomplete") or []),
        "drain": drain if isinstance(drain, dict) else None,
        "open_ops": digest.open_at_end,
    }


def _ranges(offsets: list[int], limit: int = 8) -> str:
    """[226, 227, 228, 240] -> '226–228, 240' (the first `limit` runs, then how many more)."""
    runs: list[list[int]] = []
    for o in sorted(offsets):
        if runs and o == runs[-1][1] + 1:
            runs[-1][1] = o
        else:
            runs.append([o, o])
    text = ", ".join(f"{a}–{b}" if b > a else str(a) for a, b in runs[:limit])
    return text + (f", … ({len(runs) - limit} more runs)" if len(runs) > limit else "")


def _missing_groups(marks: dict[str, Any]) -> list[dict[str, Any]]:
    """Acked-but-absent offsets per group of replicas that miss the same ones, as ranges."""
    groups: dict[frozenset[int], list[str]] = {}
    for node, m in marks.items():
        if m.missing_acked:
            groups.setdefault(frozenset(m.missing_acked), []).append(node)
    out = []
    for offsets, nodes in groups.items():
        who = "every replica" if len(nodes) == len(marks) and len(nodes) > 1 else ", ".join(nodes)
        out.append({"who": who, "count": len(offsets), "ranges": _ranges(list(offsets))})
    return out


def _leaders(state: Any) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    parts = state.get("partitions") if isinstance(state, dict) else None
    items = parts.values() if isinstance(parts, dict) else parts if isinstance(parts, list) else []
    for p in items:
        if isinstance(p, dict) and p.get("topic") is not None and isinstance(p.get("partition"), int):
            if p.get("leader") is not None:
                out[(str(p["topic"]), p["partition"])] = str(p["leader"])
    return out


def state_of(state: Any, key: tuple[str, int]) -> str:
    parts = state.get("partitions") if isinstance(state, dict) else None
    items = parts.values() if isinstance(parts, dict) else parts if isinstance(parts, list) else []
    for p in items:
        if isinstance(p, dict) and (str(p.get("topic")), p.get("partition")) == key:
            isr = p.get("isr")
            return f"leader {p.get('leader')}, leader epoch {p.get('leader_epoch')}, ISR {', '.join(map(str, isr)) if isinstance(isr, list) else isr}"
    return ""


def _divergence_table(
    logs: PartitionLogs, marks: Any, acked: dict[int, Any] | None = None
) -> dict[str, Any] | None:
    """The first offsets where replicas disagree or miss acked records: offset × replica values.

    Only the cells that are wrong are red: a value other than the acknowledged one, or (with no ack
    at that offset) other than the value most replicas hold; an absent record only when acked.
    """
    offsets = sorted({o for m in marks.values() for o in (m.divergent | m.missing_acked)})[:12]
    if not offsets:
        return None
    nodes = list(logs.replicas)
    rows = []
    for o in offsets:
        held = {n: logs.replicas[n].records.get(o) for n in nodes}
        reference = _reference_value(o, held, acked or {})
        cells = []
        for n in nodes:
            rec = held[n]
            if rec is None:
                bad = o in marks[n].missing_acked
            elif reference is _NO_REFERENCE:
                bad = o in marks[n].divergent
            else:
                bad = rec[0] != reference
            cells.append({"text": f"{rec[0]} (e{rec[1]})" if rec else "—", "bad": bad})
        rows.append({"offset": o, "cells": cells, "acked": acked.get(o, "") if acked else ""})
    return {"nodes": nodes, "rows": rows}


_NO_REFERENCE = object()


def _reference_value(offset: int, held: dict[str, Any], acked: dict[int, Any]) -> Any:
    """The value an offset should hold: the acked one, else a strict majority's, else none known."""
    if offset in acked:
        return acked[offset]
    counts: dict[Any, int] = {}
    for rec in held.values():
        if rec is not None:
            counts[rec[0]] = counts.get(rec[0], 0) + 1
    ranked = sorted(counts.values(), reverse=True)
    if ranked and (len(ranked) == 1 or ranked[0] > ranked[1]):
        return max(counts, key=lambda v: counts[v])
    return _NO_REFERENCE


_env: jinja2.Environment | None = None


def _environment() -> jinja2.Environment:
    global _env
    if _env is None:
        _env = jinja2.Environment(
            loader=jinja2.PackageLoader("harness", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
    return _env


def render(run: Path) -> str:
    context = build_context(run)
    css = Markup(_environment().loader.get_source(_environment(), "report.css")[0])  # type: ignore[union-attr]
    return _environment().get_template("report.html.j2").render(css=css, **context)


def write_report(run_dir: str | Path) -> Path:
    """Render report.html into the run directory (atomically) and return its path."""
    run = Path(run_dir)
    html = render(run)
    out = run / rundir.REPORT
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    log.info("report written: %s", out)
    return out
