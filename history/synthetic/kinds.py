"""The anomaly kinds a synthetic history can hold (`history.synthetic.generator` plants them)."""

from __future__ import annotations

# Every kind the generator can plant, in the catalogue's order.
PLANTABLE = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "aborted-read",
    "phantom",
    "poll-skip",
    "nonmonotonic-poll",
    "group-skip",
    "nonmonotonic-commit",
    "nonmonotonic-send",
)
# What the checker benchmark plants by default: all but the consumer-group kinds.
GROUP_KINDS = ("group-skip", "nonmonotonic-commit")
ANOMALY_KINDS = tuple(kind for kind in PLANTABLE if kind not in GROUP_KINDS)
