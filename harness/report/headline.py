"""The verdict in plain words: the sentences at the top of the report.

The first sentence speaks of the most serious anomaly that counted against the run (or says why
there is no verdict: not checked, refused, failed during set-up, cut short), naming how many
acknowledged writes were lost, where, and after which fault.
"""

from __future__ import annotations

from typing import Any

from checkers.catalogue import BY_NAME
from checkers.evidence import refs
from harness.report.catalogue import description, severity_rank
from harness.report.examples import example_partitions
from harness.report.faults import ShadedWindow
from harness.report.history import NS, HistoryDigest
from harness.report.inputs import SETUP_PHASES as SETUP_PHASE_WORDS


def why(results: dict[str, Any] | None, name: str) -> str:
    """The reason checkers/verdict.py gave for this anomaly's effect ("name xN: effect (why)")."""
    for line in (results or {}).get("explanation") or []:
        text = str(line)
        if text.startswith(f"{name} x") and "(" in text and text.endswith(")"):
            return text[text.index("(") + 1 : -1]
    return ""


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


def _fault_phrase(w: ShadedWindow) -> str:
    phrase = _bare_fault_phrase(w)
    return f"{phrase} (the {w.pattern} pattern)" if w.pattern else phrase


def _bare_fault_phrase(w: ShadedWindow) -> str:
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


def _fault_after(examples: list[Any], digest: HistoryDigest, windows: list[ShadedWindow]) -> str:
    """The faults that most plausibly destroyed acknowledged data: process faults after the last ack.

    Up to two are named (the first, and the last one that hit a leader), so the KIP-101 story reads
    "after follower n3 was killed at 16.5 s and the leader n2 was killed at 19.6 s".
    """
    if not windows:
        return ", with no fault injected"
    acks: list[float] = []
    for ex in examples:
        _i, values = refs(ex)
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
    results: dict[str, Any] | None, digest: HistoryDigest, windows: list[ShadedWindow], fatal: set[str]
) -> tuple[str, list[str]]:
    """(verdict word, sentences in plain words) for the top of the report."""
    if results is None:
        return "unchecked", ["This run has not been checked yet: run `strandline check` on this directory."]
    valid = results.get("valid")
    anomalies = {k: v for k, v in (results.get("anomalies") or {}).items() if (v or {}).get("count", 0) > 0}
    sentences: list[str] = []
    order = sorted(set(anomalies) | set(BY_NAME), key=lambda n: (severity_rank(n), n))
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
        where = _tp_text(example_partitions(ex, digest))
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
            s = f"{_plural(n, 'case', 'cases')} of {name}{where}: {description(name).rstrip('.').lower()}."
        sentences.append(s)
    sends = results.get("stats", {}).get("sends", {}) if isinstance(results.get("stats"), dict) else {}
    if valid is True:
        acked = sends.get("ok") if isinstance(sends, dict) else None
        txns = results.get("stats", {}).get("txns") if isinstance(results.get("stats"), dict) else None
        committed = txns.get("ok") if isinstance(txns, dict) else None
        faults = _fault_summary(windows)
        first = "No anomaly found"
        if committed:
            first += f": every write of the {committed} committed transactions was read back, no aborted one"
        elif acked:
            first += f": all {acked} acknowledged writes were read back"
        first += f", through {faults}." if faults else "."
        extra = [s for s in sentences]
        return "valid", [first, *([f"Allowed by these settings: {' '.join(extra)}"] if extra else [])]
    if valid is False:
        return "invalid", sentences or ["The checker judged this run invalid (see the anomalies below)."]
    power: dict[str, Any] = results["power"] if isinstance(results.get("power"), dict) else {}
    if results.get("underpowered") and power.get("reasons"):
        said = "; ".join(map(str, power["reasons"]))
        return "unknown", [
            f"The verdict is unknown: no anomaly found, but the run tested too little ({said}).",
            *sentences,
        ]
    reasons = results.get("incomplete") or results.get("stats", {}).get("incomplete") or []
    text = "The verdict is unknown: the history or the final reads are incomplete"
    if reasons:
        text += " (" + "; ".join(map(str, reasons[:3])) + ")"
    return "unknown", [text + ".", *sentences]


def _fault_summary(windows: list[ShadedWindow]) -> str:
    counts: dict[str, int] = {}
    for w in windows:
        counts[w.f] = counts.get(w.f, 0) + 1
    names = {"partition": "network partition", "clock": "clock fault", "loss": "packet-loss fault"}
    return ", ".join(_plural(n, names.get(f, f), names.get(f, f) + "s") for f, n in counts.items())


def setup_headline(status: str, phase: str, reason: str) -> tuple[str, list[str]]:
    """(verdict word, sentences) of a run that never reached its load: refused or failed in set-up."""
    reason = reason.strip().rstrip(".") or "no reason was recorded"
    if status == "refused":
        return "refused", [f"The run was refused before any cluster started: {reason}."]
    where = f" ({SETUP_PHASE_WORDS[phase]})" if phase in SETUP_PHASE_WORDS else ""
    return "unknown", [f"The run failed during set-up{where}, before any load: {reason}."]
