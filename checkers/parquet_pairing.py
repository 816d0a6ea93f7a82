"""Pairing of a history's client lines into operations, vectorized with Arrow, chunk by chunk."""

from __future__ import annotations

from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from checkers.parquet_schema import (
    F_CODE_ARRAY,
    F_CODES,
    INFO_,
    INVOKE,
    OPERATIONS_SCHEMA,
    OUTCOME_CODES,
    TYPE_CODE_ARRAY,
    TYPE_CODES,
    columns,
)
from history import pairing

# The client lines being paired, and the last line of each process carried to the next chunk;
# `type` and `f` as their codes.
_CARRY_SCHEMA = pa.schema(
    columns(
        "index",
        "time",
        "process",
        ("type", pa.int8()),
        ("f", pa.int8()),
        "topic",
        "partition",
        "value",
        "offset",
        "bad_records",
        "epoch",
        "carried",
        "tp",
    )
)


class _ArrowLogic:
    """`history.pairing.Logic` over Arrow arrays of type and f codes (`TYPE_CODES`, `F_CODES`)."""

    def is_type(self, column: pa.Array, type_: str) -> pa.Array:
        return pc.fill_null(pc.equal(column, TYPE_CODES.index(type_)), False)

    def is_f(self, column: pa.Array, f: str) -> pa.Array:
        return pc.fill_null(pc.equal(column, F_CODES.index(f)), False)

    def exists(self, column: pa.Array) -> pa.Array:
        return pc.is_valid(column)

    def and_(self, a: pa.Array, b: pa.Array) -> pa.Array:
        return pc.and_(a, b)

    def or_(self, a: pa.Array, b: pa.Array) -> pa.Array:
        return pc.or_(a, b)

    def not_(self, a: pa.Array) -> pa.Array:
        return pc.invert(a)


_ARROW = _ArrowLogic()


def arange(n: int, start: int = 0) -> pa.Array:
    return pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), start - 1)


def _neighbour(order: pa.Array, process_sorted: pa.Array, inverse: pa.Array, by: int) -> pa.Array:
    """For each row (in table order), the row of its process's previous (by=1) or next (-1) line."""
    m = len(order)
    if m == 0:
        return pa.array([], pa.int64())
    null = pa.nulls(1, pa.int64())
    order = order.cast(pa.int64())
    if by == 1:
        other, other_proc = pa.concat_arrays([null, order.slice(0, m - 1)]), process_sorted.slice(0, m - 1)
        same = pa.concat_arrays([pa.array([False]), pc.equal(process_sorted.slice(1), other_proc)])
    else:
        other = pa.concat_arrays([order.slice(1), null])
        same = pa.concat_arrays(
            [pc.equal(process_sorted.slice(0, m - 1), process_sorted.slice(1)), pa.array([False])]
        )
    in_sorted = pc.if_else(same, other, pa.scalar(None, pa.int64()))
    return pc.take(in_sorted, inverse)


class Orphans(Protocol):
    """What a pairing found beyond its operations: completions without an invocation."""

    @property
    def orphans(self) -> int: ...

    @property
    def first_orphan(self) -> int | None: ...


class ChunkPairing:
    """Pairs each invocation with the next line of its process, streaming, chunk by chunk.

    This is the reference's operation model (see checkers/reference.py): the next line of the same
    process completes an invocation (`crash` as `info`), supersedes it (an invocation) or, at the
    end, leaves it open. Vectorized per chunk: the chunk's client lines, after the last line of
    each process carried from earlier chunks, are stably sorted by process, which makes each line's
    predecessor and successor in its process neighbours. Also decided here, per line: whether an
    ok line's records are reads (it completes a poll invocation), and how many times its process's
    poll positions were forgotten up to it (its `epoch`): at an assign invocation, at a poll
    completed info, at an invocation superseding a poll.
    """

    def __init__(self) -> None:
        self.carry = _CARRY_SCHEMA.empty_table()
        self.orphans = 0
        self.first_orphan: int | None = None

    def feed(self, lines: pa.Table, tp: pa.Array) -> tuple[pa.Table, pa.Array, pa.Array]:
        """(operations completed or superseded, per line: are its records reads, per line: epoch)."""
        n = lines.num_rows
        own = pa.table(
            {
                "index": lines.column("index"),
                "time": lines.column("time"),
                "process": lines.column("process"),
                "type": pc.index_in(lines.column("type"), value_set=TYPE_CODE_ARRAY).cast(pa.int8()),
                "f": pc.index_in(lines.column("f"), value_set=F_CODE_ARRAY).cast(pa.int8()),
                "topic": lines.column("topic"),
                "partition": lines.column("partition"),
                "value": lines.column("value"),
                "offset": lines.column("offset"),
                "bad_records": pc.fill_null(lines.column("bad_records"), False),
                "epoch": pa.nulls(n, pa.int64()),
                "carried": pa.repeat(pa.scalar(False), n),
                "tp": tp,
            },
            schema=_CARRY_SCHEMA,
        )
        both = pa.concat_tables([self.carry, own]).combine_chunks()
        m = both.num_rows
        process = both.column("process").combine_chunks()
        order = pc.sort_indices(process).cast(pa.int64())  # stable: line order within a process
        inverse = pc.inverse_permutation(order)
        process_sorted = pc.take(process, order)
        prev = _neighbour(order, process_sorted, inverse, 1)
        nxt = _neighbour(order, process_sorted, inverse, -1)
        col = {name: both.column(name).combine_chunks() for name in ("type", "f", "index", "carried")}
        type_, f, carried = col["type"], col["f"], col["carried"]
        own_line = pc.invert(carried)
        is_invoke = _ARROW.is_type(type_, "invoke")
        next_type = pc.take(type_, nxt)
        line = pairing.Neighbours(
            type_, f, pc.take(type_, prev), pc.take(f, prev), next_type, pc.take(f, nxt)
        )

        # Operations: invocations whose successor is known.
        emit = pc.and_(is_invoke, pc.is_valid(nxt))
        completed = pc.and_(is_invoke, pairing.completed(_ARROW, line))
        outcome_code = pc.if_else(
            completed,
            pc.if_else(pairing.completed_by_crash(_ARROW, line), pa.scalar(INFO_, pa.int8()), next_type),
            pa.scalar(-1, pa.int8()),
        )
        operations = self._operations(both, emit, completed, outcome_code, nxt)

        # Orphans: completions of this chunk whose predecessor is no invocation.
        orphan = pc.and_(own_line, pairing.orphan(_ARROW, line))
        orphan_index = pc.filter(col["index"], orphan)
        if len(orphan_index):
            self.orphans += len(orphan_index)
            first = pc.min(orphan_index).as_py()
            if first is not None and (self.first_orphan is None or first < self.first_orphan):
                self.first_orphan = first

        # Reads: the records of an ok completion of a poll invocation.
        reads_ok = pc.and_(own_line, pairing.reads(_ARROW, line))
        # Position resets, counted per process up to each line.
        resets = pc.and_(own_line, pairing.forgets_positions(_ARROW, line)).cast(pa.int64())
        resets_sorted = pc.take(resets, order)
        cum = pc.cumulative_sum(resets_sorted)
        positions = arange(m)
        starts = (
            pa.concat_arrays(
                [
                    pa.array([True]),
                    pc.not_equal(process_sorted.slice(1), process_sorted.slice(0, max(0, m - 1))),
                ]
            )
            if m
            else pa.array([], pa.bool_())
        )
        first_row = (
            pc.cumulative_max(pc.if_else(starts, positions, pa.scalar(0, pa.int64()))) if m else positions
        )
        epoch_sorted = pc.take(both.column("epoch").combine_chunks(), order)
        base = pc.fill_null(pc.take(epoch_sorted, first_row), 0)
        before = pc.subtract(pc.take(cum, first_row), pc.take(resets_sorted, first_row))
        epoch = pc.take(pc.add(base, pc.subtract(cum, before)), inverse)

        # Carry the last line of each process, with its epoch.
        last = pc.invert(pc.is_valid(nxt))
        # (a take of the few last rows: cheaper than filtering every column with a sparse mask)
        carry = both.set_column(both.schema.get_field_index("epoch"), "epoch", epoch).take(
            pc.indices_nonzero(last)
        )
        self.carry = carry.set_column(
            carry.schema.get_field_index("carried"), "carried", pa.repeat(pa.scalar(True), carry.num_rows)
        )
        k = len(both) - n  # carried rows come first: the chunk's own lines are the rest, in order
        return operations, reads_ok.slice(k), epoch.slice(k)

    def _operations(self, both, emit, completed, outcome_code, nxt):  # type: ignore[no-untyped-def]
        rows = both.select(_INVOCATION_COLUMNS).filter(emit)
        nxt = pc.filter(nxt, emit)
        completed = pc.filter(completed, emit)
        none64 = pa.scalar(None, pa.int64())

        def completion(name: str) -> pa.Array:
            return pc.if_else(completed, pc.take(both.column(name).combine_chunks(), nxt), none64)

        outcomes = pa.array(OUTCOME_CODES)
        code = pc.filter(outcome_code, emit)
        outcome_index = pc.if_else(pc.less(code, 0), pa.scalar(3, pa.int8()), pc.subtract(code, 1))
        bad_records = pc.and_(completed, pc.take(both.column("bad_records").combine_chunks(), nxt))
        return _operation_rows(
            rows,
            index=completion("index"),
            time=completion("time"),
            offset=completion("offset"),
            bad_records=pc.fill_null(bad_records, False),
            outcome=pc.take(outcomes, outcome_index),
            next_index=pc.take(both.column("index").combine_chunks(), nxt),
            outcome_code=outcome_index.cast(pa.int8()),
        )

    def finish(self) -> pa.Table:
        """Invocations still open at the end of the history."""
        open_ = self.carry.filter(pc.equal(self.carry.column("type"), INVOKE))
        n = open_.num_rows
        none64 = pa.nulls(n, pa.int64())
        return _operation_rows(
            open_,
            index=none64,
            time=none64,
            offset=none64,
            bad_records=pa.repeat(pa.scalar(False), n),
            outcome=pa.repeat(pa.scalar("open"), n),
            next_index=none64,
            outcome_code=pa.repeat(pa.scalar(OUTCOME_CODES.index("open"), pa.int8()), n),
        )


# The columns of an invocation line that its operation keeps (see `_operation_rows`).
_INVOCATION_COLUMNS = ["index", "time", "process", "f", "topic", "partition", "value", "tp"]


def _operation_rows(invocations: pa.Table, **completion: pa.Array) -> pa.Table:
    """Operations (`OPERATIONS_SCHEMA`) of carry-schema invocation rows and their completions'
    columns (index, time, offset, bad_records, outcome, next_index, outcome_code); the ack links
    (prev_*) are filled in later."""
    none64 = pa.nulls(invocations.num_rows, pa.int64())
    return pa.table(
        {
            "invoke_index": invocations.column("index"),
            "process": invocations.column("process"),
            "f": pc.take(F_CODE_ARRAY, invocations.column("f")),
            "topic": invocations.column("topic"),
            "partition": invocations.column("partition"),
            "value": invocations.column("value"),
            "index": completion["index"],
            "time": completion["time"],
            "offset": completion["offset"],
            "bad_records": completion["bad_records"],
            "outcome": completion["outcome"],
            "next_index": completion["next_index"],
            "tp": invocations.column("tp"),
            "prev_index": none64,
            "prev_offset": none64,
            "prev_value": none64,
            "f_code": invocations.column("f"),
            "outcome_code": completion["outcome_code"],
            "invoke_time": invocations.column("time"),
            "prev_ok_time": none64,
        },
        schema=OPERATIONS_SCHEMA,
    )
