"""The conversion's per-process work by the native crate (native/src/pairing.rs), line by line.

The pairing (`parquet_pairing`), the acks' and the reads' links (`parquet_links`) and each ok
send's predecessor in time (`parquet_pipeline.link_ok_sends`) are sequential per process: over Arrow
they take a stable sort of every chunk and a dozen passes over it (3.6 of the conversion's 12.4 CPU
seconds on the bench's 10,000,000 operations). The crate walks each chunk's lines once with a map
per process instead, and gives the same rows in the same order; where it was not built
(`available()` is False), `parquet_pipeline.ArrowPairing` does the work.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from checkers.parquet_schema import F_CODE_ARRAY, OPERATIONS_SCHEMA, OUTCOME_CODES, TYPE_CODE_ARRAY
from checkers.parquet_strict import buffer, numbers

_native: ModuleType | None
try:
    from checkers import _native
except ImportError:  # not built: no cargo where strandline was installed
    _native = None

_OUTCOME_NAMES = pa.array(OUTCOME_CODES)


def available() -> bool:
    """Whether the crate was built (`make setup`)."""
    return _native is not None


def _view(column: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> tuple[pa.Array, tuple[int, int, int]]:
    """The column as `type_`, and where its buffers are (validity or 0, data or 0 when all null, offset)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.type != type_:
        array = array.cast(type_)
    valid, data = array.buffers()[:2]
    nulls = array.null_count
    return array, (
        valid.address if valid is not None and nulls else 0,
        data.address if data is not None and nulls < len(array) else 0,
        array.offset,
    )


def _views(columns: list[tuple[pa.Array | pa.ChunkedArray, pa.DataType]]) -> tuple[list[pa.Array], list[Any]]:
    """The arrays (the caller keeps them alive while the crate reads them) and their views."""
    arrays, views = [], []
    for column, type_ in columns:
        array, view = _view(column, type_)
        arrays.append(array)
        views.append(view)
    return arrays, views


def _operations(found: dict[str, Any], topics: pa.Array) -> pa.Table:
    """The crate's operation buffers as `OPERATIONS_SCHEMA` rows (`topics`: names by topic id)."""
    rows = found["rows"]
    i64 = pa.int64()

    def column(key: str) -> pa.Array:
        return numbers(found, key, i64, rows)

    f_code = numbers(found, "f_code", pa.int8(), rows)
    outcome_code = pa.Array.from_buffers(pa.int8(), rows, [None, buffer(found, "outcome_code")])
    columns = {
        "invoke_index": column("invoke_index"),
        "process": column("process"),
        "f": pc.take(F_CODE_ARRAY, f_code),
        "topic": pc.take(topics, numbers(found, "topic_id", pa.int32(), rows)),
        "partition": numbers(found, "partition", pa.int32(), rows),
        "value": column("value"),
        "index": column("index"),
        "time": column("time"),
        "offset": column("offset"),
        "bad_records": pa.Array.from_buffers(pa.bool_(), rows, [None, buffer(found, "bad_records")]),
        "outcome": pc.take(_OUTCOME_NAMES, outcome_code),
        "next_index": column("next_index"),
        "tp": column("tp"),
        "prev_index": column("prev_index"),
        "prev_offset": column("prev_offset"),
        "prev_value": column("prev_value"),
        "f_code": f_code,
        "outcome_code": outcome_code,
        "invoke_time": column("invoke_time"),
        "prev_ok_time": column("prev_ok_time"),
    }
    return pa.table([columns[name] for name in OPERATIONS_SCHEMA.names], schema=OPERATIONS_SCHEMA)


class NativePairing:
    """`parquet_pipeline.PerProcess` by the crate: what `ArrowPairing` does, line by line."""

    def __init__(self) -> None:
        if _native is None:
            raise RuntimeError("the native pairing is not built (make setup)")
        self._pairing = _native.Pairing()
        self._reads = _native.ReadLinks()

    @property
    def orphans(self) -> int:
        return int(self._pairing.orphans)

    @property
    def first_orphan(self) -> int | None:
        return self._pairing.first_orphan

    @property
    def ok_sends_in_order(self) -> bool:
        return bool(self._pairing.ok_sends_in_order)

    def feed(
        self, lines: pa.Table, topic_ids: pa.Array, tp: pa.Array, topics: pa.Array
    ) -> tuple[pa.Table, pa.Array, pa.Array]:
        """(operations completed or superseded, linked; per line: are its records reads; per line:
        its process's position epoch), as `ChunkPairing.feed` and the links give them."""
        i64, i8 = pa.int64(), pa.int8()
        arrays, views = _views(
            [
                (lines.column("index"), i64),
                (lines.column("time"), i64),
                (lines.column("process"), i64),
                (pc.index_in(lines.column("type"), value_set=TYPE_CODE_ARRAY), i8),
                (pc.index_in(lines.column("f"), value_set=F_CODE_ARRAY), i8),
                (topic_ids, pa.int32()),
                (lines.column("partition"), pa.int32()),
                (lines.column("value"), i64),
                (lines.column("offset"), i64),
                (pc.fill_null(lines.column("bad_records"), False), i8),
                (tp, i64),
            ]
        )
        n = lines.num_rows
        found = self._pairing.feed(n, views)
        del arrays  # read: the crate copied what it keeps
        reads = pa.Array.from_buffers(pa.bool_(), n, [None, buffer(found, "reads")])
        return _operations(found, topics), reads, numbers(found, "epoch", i64, n)

    def link_reads(self, reads: pa.Table) -> dict[str, pa.Array]:
        """Each well-formed read's prev_offset and prev_index (`parquet_links.Links` over reads)."""
        i64 = pa.int64()
        names = ("process", "tp", "epoch", "offset", "index", "value")
        arrays, views = _views([(reads.column(name), i64) for name in names])
        n = reads.num_rows
        found = self._reads.feed(n, views)
        del arrays
        return {key: numbers(found, key, i64, n) for key in ("prev_offset", "prev_index")}

    def finish(self, topics: pa.Array) -> pa.Table:
        """The invocations still open at the end of the history."""
        return _operations(self._pairing.finish(), topics)
