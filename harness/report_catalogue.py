"""What each anomaly means to a reader of the report, and which are the most serious.

The checkers' catalogue (`checkers.catalogue.ANOMALIES`) is the authority on which anomalies exist;
the texts here are shorter, for the report's table. A name this table does not know (an anomaly
added to the checkers later) is described with the catalogue's own text.
"""

from __future__ import annotations

from checkers.catalogue import ANOMALIES

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
    "torn-transaction": "A committed transaction that reached the log only in part: some of its writes were read, others lost.",
    "precommitted-read": "A transaction read its own write (or past it) before it had committed.",
    "G0": "A write cycle: transactions whose records follow each other around a cycle on the partitions.",
    "G1c": "Circular information flow: transactions that, through what they read and wrote, each came before the other.",
}
# Most serious first: the headline speaks of the first present.
SEVERITY = (
    "lost-write",
    "lost-committed-on-replicas",
    "torn-transaction",
    "log-divergence",
    "inconsistent-offsets",
    "aborted-read",
    "precommitted-read",
    "G1c",
    "phantom",
    "unseen",
    "duplicate",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "G0",
)


def description(name: str) -> str:
    """The reader's text for an anomaly: this table's, else the checkers' catalogue's, else ''."""
    if name in DESCRIPTIONS:
        return DESCRIPTIONS[name]
    return next((a.description for a in ANOMALIES if a.name == name), "")


def severity_rank(name: str) -> int:
    return SEVERITY.index(name) if name in SEVERITY else len(SEVERITY)


def sentence(text: str) -> str:
    """'an acked send' -> 'An acked send.'"""
    text = text.strip()
    return (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""
