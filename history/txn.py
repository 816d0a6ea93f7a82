"""Transactions in the history: an operation `f: "txn"` carries its micro-operations, `mops`.

A transaction's invocation lists what it will do, in order: sends (`{"f": "send", "topic",
"partition", "value"}`) and polls (`{"f": "poll"}`); its completion repeats the list with what
happened: a send acknowledged inside the transaction gains its `offset`, a poll its `records`
(`{"topic", "partition", "offset", "value"}`), a micro-operation that failed its `error`, and one
never reached stays as invoked. The completion's type is the transaction's outcome: `ok` it
committed, `fail` it was aborted (it certainly wrote nothing a read_committed consumer sees),
`info` unknown. Format: docs/history-format.md. Workloads write these lines and checkers read
them through the helpers here, so both sides agree on what a micro-operation is.
"""

from __future__ import annotations

from typing import Any, NamedTuple

TXN = "txn"
MOP_FS = ("send", "poll")


def _is_int(x: Any) -> bool:
    return type(x) is int


def mops_problem(mops: Any) -> str | None:
    """Why a transaction line's `mops` cannot be read (None: they can): a missing or empty list,
    a micro-operation that is not a send or a poll, a send without topic, partition and value."""
    if not isinstance(mops, list) or not mops:
        return "txn without its micro-operations (mops)"
    for i, mop in enumerate(mops):
        if not isinstance(mop, dict) or mop.get("f") not in MOP_FS:
            return f"txn micro-operation {i} is not a send or a poll"
        if mop["f"] == "send" and not (
            isinstance(mop.get("topic"), str) and _is_int(mop.get("partition")) and _is_int(mop.get("value"))
        ):
            return f"txn micro-operation {i}: a send without topic, integer partition and integer value"
    return None


def send_mop(topic: str, partition: int, value: int) -> dict[str, Any]:
    return {"f": "send", "topic": topic, "partition": partition, "value": value}


def poll_mop() -> dict[str, Any]:
    return {"f": "poll"}


class TxnWrite(NamedTuple):
    """One send of a transaction: `offset` when it was acknowledged inside it (else None)."""

    topic: str
    partition: int
    value: int
    offset: int | None


def writes(invocation: dict[str, Any], completion: dict[str, Any] | None) -> list[TxnWrite]:
    """The transaction's sends, in order, with the offsets its completion gives them.

    A completion's micro-operation counts for the invocation's one at the same position only when
    both are the same send (same f and value); otherwise its offset is unknown."""
    done = completion.get("mops") if completion is not None else None
    done = done if isinstance(done, list) else []
    out = []
    for i, mop in enumerate(invocation.get("mops") or []):
        if not isinstance(mop, dict) or mop.get("f") != "send":
            continue
        offset = None
        if i < len(done) and isinstance(done[i], dict) and done[i].get("f") == "send":
            if done[i].get("value") == mop["value"] and _is_int(done[i].get("offset")):
                offset = done[i]["offset"] if done[i]["offset"] >= 0 else None
        out.append(TxnWrite(mop["topic"], mop["partition"], mop["value"], offset))
    return out


def read_records(completion: dict[str, Any]) -> list[Any]:
    """The records of every poll of a completed transaction, in order (one list across its polls,
    so a record's position in it is its place among the transaction's reads). Malformed records
    are left in for the caller to refuse; a poll whose `records` is not a list gives none."""
    out: list[Any] = []
    for mop in completion.get("mops") or []:
        if isinstance(mop, dict) and mop.get("f") == "poll" and isinstance(mop.get("records"), list):
            out.extend(mop["records"])
    return out
