"""The history format: one JSON object per line; what a line must hold to be an op.

Format: docs/history-format.md. Field names are the contract; do not rename them. Workloads and
the nemesis write histories, checkers and the report read them; both sides share these definitions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from history.txn import TXN, mops_problem

OP_TYPES = ("invoke", "ok", "fail", "info")
CLIENT_FS = frozenset({"send", "poll", "assign", "crash", "subscribe", "commit", "rebalance", "txn"})
NEMESIS_PROCESS = "nemesis"


class HistoryError(Exception):
    """A history line that cannot be understood; carries the 1-based line number."""

    def __init__(self, path: str | os.PathLike[str], line_no: int, reason: str):
        super().__init__(f"{path}:{line_no}: {reason}")
        self.path = str(path)
        self.line_no = line_no
        self.reason = reason


@dataclass(frozen=True)
class ReadProblem:
    """Something a reader skipped; the checker turns any of these into an incomplete history."""

    line_no: int
    reason: str
    torn_tail: bool = False


def validate(record: Any) -> str | None:
    """Why a decoded line is not a history op, or None when it is one."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for key in ("index", "time", "process", "type", "f"):
        if key not in record:
            return f"missing field {key!r}"
    if record["type"] not in OP_TYPES:
        return f"unknown type {record['type']!r}"
    process = record["process"]
    if process == NEMESIS_PROCESS:
        return None
    if not isinstance(process, int) or isinstance(process, bool):
        return f"process must be an integer or 'nemesis', got {process!r}"
    if record["f"] not in CLIENT_FS:
        return f"unknown f {record['f']!r} for a client process"
    if record["f"] == TXN:
        return mops_problem(record.get("mops"))
    return None


def encode(op: dict[str, Any]) -> str:
    """An op as the compact JSON object the history writer completes with `index` and `time`."""
    return json.dumps(op, separators=(",", ":"))
