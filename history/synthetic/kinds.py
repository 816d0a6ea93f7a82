"""The anomaly kinds the synthetic histories can plant: one list for both ways of making them."""

from __future__ import annotations

# Every kind `history.synthetic.simulate.plant` can plant, in the catalogue's order.
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

# The kinds the streaming generator (`history.synthetic.stream`, the checker benchmark's) plants:
# all but the consumer-group ones.
GROUP_KINDS = ("group-skip", "nonmonotonic-commit")
ANOMALY_KINDS = tuple(kind for kind in PLANTABLE if kind not in GROUP_KINDS)
