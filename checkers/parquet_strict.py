"""A chunk of history lines -> an Arrow table by the strict native reader (`native/`, Rust), or None.

The reader keeps a chunk only when every line but the nemesis's (handed back by place) is a JSON
object whose history fields have exactly their JSON types (see native/src/lib.rs); any other chunk
goes to the line-by-line reader, which decides as `history.reader.iter_ops` does. It takes about a third of the CPU of Arrow's JSON reader,
which it replaces where it was built (`make setup`, with cargo); where it was not, `available()` is
False and the conversion reads with Arrow as before.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from checkers.parquet_schema import RECORD
from history.format import CLIENT_FS, OP_TYPES
from history.txn import TXN

_native: ModuleType | None
try:
    from checkers import _native
except ImportError:  # not built: no cargo where strandline was installed
    _native = None

_KINDS = list(OP_TYPES)
_FS = sorted(CLIENT_FS - {TXN})  # a transaction's micro-operations need the line-by-line reader
_KIND_NAMES = pa.array(_KINDS)
_F_NAMES = pa.array(_FS)


def available() -> bool:
    return _native is not None


def count_lines(chunk: bytes | bytearray) -> int:
    """The chunk's newlines (natively where built: Python counts a byte one by one)."""
    return chunk.count(b"\n") if _native is None else _native.count_lines(chunk)


def read(chunk: bytes | bytearray, schema: pa.Schema) -> tuple[pa.Table, list[tuple[int, int]]] | None:
    """The chunk's client lines as a table of `schema` (the conversion's JSON schema) and where its
    nemesis lines are ((start, end) without the newline), or None when a line needs the line-by-line
    reader. Blank lines are skipped."""
    if _native is None:
        raise RuntimeError("the strict line reader is not built (make setup)")
    found = _native.read(chunk, _KINDS, _FS)
    if found is None:
        return None
    return _table(found, schema), found["nemesis"]


def buffer(found: dict[str, Any], key: str) -> pa.Buffer | None:
    data = found.get(key)  # a column that cannot be null has no validity
    return None if data is None else pa.py_buffer(data)


def numbers(found: dict[str, Any], key: str, type_: pa.DataType, rows: int) -> pa.Array:
    return pa.Array.from_buffers(type_, rows, [buffer(found, f"{key}.valid"), buffer(found, key)])


def _texts(found: dict[str, Any], key: str, rows: int) -> pa.Array:
    buffers = [buffer(found, f"{key}.valid"), buffer(found, f"{key}.offsets"), buffer(found, key)]
    return pa.Array.from_buffers(pa.string(), rows, buffers)


def _named(found: dict[str, Any], key: str, names: pa.Array, rows: int) -> pa.Array:
    codes = pa.Array.from_buffers(pa.int8(), rows, [None, buffer(found, key)])
    return pc.take(names, codes)


def _table(found: dict[str, Any], schema: pa.Schema) -> pa.Table:
    rows, polled = found["rows"], found["records.rows"]
    record = pa.StructArray.from_arrays(
        [
            _texts(found, "records.topic", polled),
            numbers(found, "records.partition", pa.int32(), polled),
            numbers(found, "records.offset", pa.int64(), polled),
            numbers(found, "records.value", pa.int64(), polled),
        ],
        fields=list(RECORD),
    )
    records = pa.ListArray.from_buffers(
        pa.list_(RECORD),
        rows,
        [buffer(found, "records.valid"), buffer(found, "records.offsets")],
        children=[record],
    )
    columns = {
        "index": numbers(found, "index", pa.int64(), rows),
        "time": numbers(found, "time", pa.int64(), rows),
        "process": numbers(found, "process", pa.int64(), rows),
        "type": _named(found, "type", _KIND_NAMES, rows),
        "f": _named(found, "f", _F_NAMES, rows),
        "topic": _texts(found, "topic", rows),
        "partition": numbers(found, "partition", pa.int32(), rows),
        "value": numbers(found, "value", pa.int64(), rows),
        "offset": numbers(found, "offset", pa.int64(), rows),
        "records": records,
        "bad_records": pa.nulls(rows, pa.bool_()),  # as Arrow's reader leaves it: no such field
    }
    return pa.table([columns[name] for name in schema.names], schema=schema)
