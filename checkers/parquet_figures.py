"""The figures besides anomalies (outcome counts, malformed operations), counted while converting."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from checkers.parquet_schema import F_CODES, OUTCOME_CODES


class Figures:
    """The figures the checker reports besides anomalies, counted while converting (cheap here).

    Keys and meanings are the Spark engine's (`checkers.spark_engine.spark_figures` computes the
    same from Parquet for histories Spark converts): `op:<f>:<outcome>` counts, `open` and
    `superseded` invocations, `acked`, `records_read`, and the `malformed:<what>` operations, each
    with its first (smallest) index in `firsts`.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.firsts: dict[str, Any] = {}
        # Every operation kind (`f`) the client operations have: the checks of kinds a history
        # lacks (transactions, consumer groups) then start no Spark job to find that out.
        self.kinds: set[str] = set()

    def _add(self, key: str, n: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def _first(self, key: str, table: pa.Table, mask: pa.Array, by: str, make: Any) -> None:
        mask = pc.fill_null(mask, False)
        n = pc.sum(mask.cast(pa.int64())).as_py() or 0
        if not n:
            return
        self._add(key, n)
        rows = table.filter(mask)
        row = rows.take(pc.sort_indices(rows.column(by)).slice(0, 1)).to_pylist()[0]
        first = make(row)
        best = self.firsts.get(key)
        if best is None or _sort_key(first) < _sort_key(best):
            self.firsts[key] = first

    def add_operations(self, o: pa.Table) -> None:
        if o.num_rows == 0:
            return
        # Grouped and compared by the codes of f and outcome (`f_code` is null where `f` is).
        grouped = o.group_by(["f_code", "outcome_code"]).aggregate([("invoke_index", "count")]).to_pylist()
        for g in grouped:
            kind = None if g["f_code"] is None else F_CODES[g["f_code"]]
            if kind is not None:
                self.kinds.add(kind)
            if kind in ("send", "poll", "assign"):
                outcome_ = OUTCOME_CODES[g["outcome_code"]]
                self._add(f"op:{kind}:{outcome_}", g["invoke_index_count"])
        f, outcome = o.column("f_code"), o.column("outcome_code")
        send_, poll_ = F_CODES.index("send"), F_CODES.index("poll")
        open_, ok_ = OUTCOME_CODES.index("open"), OUTCOME_CODES.index("ok")
        next_index = o.column("next_index")
        self._first(
            "open",
            o,
            pc.is_null(next_index),
            "invoke_index",
            lambda r: {"index": r["invoke_index"], "process": r["process"], "f": r["f"]},
        )
        self._first(
            "superseded",
            o,
            pc.and_(pc.equal(outcome, open_), pc.is_valid(next_index)),
            "next_index",
            lambda r: {"at": r["next_index"], "process": r["process"], "index": r["invoke_index"]},
        )
        send = pc.equal(f, send_)
        self._first(
            "malformed:send", o, pc.and_(send, pc.is_null(o.column("value"))), "invoke_index", _invoke
        )
        is_send = pc.and_(send, pc.is_valid(o.column("value")))
        acked = pc.and_(pc.and_(is_send, pc.equal(outcome, ok_)), pc.greater_equal(o.column("offset"), 0))
        self._first("malformed:ack", o, pc.and_(acked, pc.is_null(o.column("tp"))), "index", _index)
        ok_acks = pc.fill_null(pc.and_(acked, pc.is_valid(o.column("tp"))), False)
        self._add("acked", pc.sum(ok_acks.cast(pa.int64())).as_py() or 0)
        bad_poll = pc.and_(pc.and_(pc.equal(f, poll_), pc.equal(outcome, ok_)), o.column("bad_records"))
        self._first("malformed:poll", o, bad_poll, "index", _index)

    def add_reads(self, r: pa.Table) -> None:
        if r.num_rows == 0:
            return
        well = pc.and_(
            pc.and_(pc.is_valid(r.column("tp")), pc.is_valid(r.column("offset"))),
            pc.is_valid(r.column("value")),
        )
        self._add("records_read", pc.sum(well.cast(pa.int64())).as_py() or 0)
        self._first("malformed:record", r, pc.invert(well), "index", _index)

    def as_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "firsts": self.firsts, "kinds": sorted(self.kinds)}


def _index(row: dict[str, Any]) -> Any:
    return row["index"]


def _invoke(row: dict[str, Any]) -> Any:
    return row["invoke_index"]


def _sort_key(first: Any) -> tuple[Any, ...]:
    return tuple(first.values()) if isinstance(first, dict) else (first,)
