"""History lines -> Arrow tables, exactly as `history.reader.iter_ops` reads them.

A chunk of whole lines is parsed by the strict native reader (`checkers.parquet_strict`), or by
Arrow's C++ JSON reader where that was not built (`parse_fast`); a chunk that it cannot parse, or
that holds a line `iter_ops` would reject, is re-read line by line in Python with
the same rules and the same problem texts (`parse_slow`), so both checkers skip the same lines and
report the same problems. The nemesis journals arbitrary JSON in `value` and the string "nemesis"
in `process`: its (rare) lines are left out of the table and read with `json`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from checkers import parquet_strict
from checkers.parquet_schema import NEMESIS_SENTINEL, columns
from history.format import CLIENT_FS, NEMESIS_PROCESS, OP_TYPES, ReadProblem, validate
from history.txn import TXN

log = logging.getLogger(__name__)

_NEMESIS_KEYS = (b'"process":"nemesis"', b'"process": "nemesis"')
_JSON_SCHEMA = pa.schema(
    columns(
        "index",
        "time",
        "process",
        "type",
        "f",
        "topic",
        "partition",
        "value",
        "offset",
        "records",
        "bad_records",
    )
)
_PARSE = pj.ParseOptions(explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore")
_READ = pj.ReadOptions(block_size=4 << 20, use_threads=True)
_TYPES = pa.array(OP_TYPES)
_CLIENT_FS = pa.array(sorted(CLIENT_FS))


Chunk = bytes | bytearray  # a chunk of history lines (`chunks` reads them into bytearrays)


def chunks(path: Path, size: int) -> Iterator[tuple[Chunk, int, bool]]:
    """(chunk of whole lines, 1-based number of its first line, is it the end of the file)."""
    line_no = 1
    with open(path, "rb") as f:
        rest = b""
        while True:
            # Read straight into the chunk, after the torn line the last one left: no copy of it.
            buf = bytearray(len(rest) + size)
            buf[: len(rest)] = rest
            end = len(rest) + f.readinto(memoryview(buf)[len(rest) :])
            if end == len(rest):
                if rest:
                    yield rest, line_no, True
                return
            cut = buf.rfind(b"\n", 0, end) + 1
            if cut == 0:
                rest = bytes(buf[:end])
                continue
            rest = bytes(buf[cut:end])
            del buf[cut:]
            yield buf, line_no, False
            line_no += parquet_strict.count_lines(buf)


# The conversion notes where lines start, one line every LINE_MARK_BYTES of the history (`line_marks`),
# so the few lines a check wants to quote (its examples' operations) are read without a pass.
LINE_MARK_BYTES = 64 << 10
_INDEX_FIELD = re.compile(rb'"index"\s*:\s*(-?[0-9]+)')


def line_marks(chunk: Chunk, start: int) -> list[tuple[int, int]]:
    """(index, byte offset in the history) of the first line at or after every LINE_MARK_BYTES of a
    chunk of whole lines that begins at byte `start` (a line without a readable index is skipped)."""
    marks: list[tuple[int, int]] = []
    for at in range(0, len(chunk), LINE_MARK_BYTES):
        begin = 0 if at == 0 else chunk.find(b"\n", at - 1) + 1
        if begin <= 0 and at > 0:
            break
        end = chunk.find(b"\n", begin)
        found = _INDEX_FIELD.search(chunk, begin, end if end >= 0 else len(chunk))
        if found is not None and (not marks or marks[-1][1] != start + begin):
            marks.append((int(found.group(1)), start + begin))
    return marks


def _nemesis_spans(chunk: Chunk) -> list[tuple[int, int]]:
    """Where the lines that hold a nemesis key are (start, end without the newline), in order."""
    spans: set[tuple[int, int]] = set()
    for key in _NEMESIS_KEYS:
        pos = chunk.find(key)
        while pos >= 0:
            start = chunk.rfind(b"\n", 0, pos) + 1
            end = chunk.find(b"\n", pos)
            end = len(chunk) if end < 0 else end
            spans.add((start, end))
            pos = chunk.find(key, end)
    return sorted(spans)


def _nemesis_rows(lines: list[Chunk]) -> list[list[Any]] | None:
    """The nemesis rows of the lines `_nemesis_spans` found, or None when one is not a nemesis
    op `iter_ops` keeps with an integer index and time (the line-by-line reader then decides)."""
    rows = []
    for line in lines:
        try:
            op = json.loads(line)
        except ValueError:
            return None
        if validate(op) is not None or op["process"] != NEMESIS_PROCESS:
            return None
        if _as_int(op["index"]) is None or _as_int(op["time"]) is None:
            return None
        rows.append(nemesis_row(op))
    return rows


def parse_fast(chunk: Chunk) -> tuple[pa.Table, list[list[Any]]] | None:
    """The chunk's client lines as a table and its nemesis rows (see `nemesis_row`), by the strict
    reader (`checkers.parquet_strict`) or, where it was not built, Arrow's; None when any line
    needs the line-by-line reader. The nemesis's free-form values are read with `json`."""
    if not parquet_strict.available():
        return _parse_arrow(chunk)
    found = parquet_strict.read(chunk, _JSON_SCHEMA)
    if found is None:
        return None
    table, spans = found
    nemesis = _nemesis_rows([chunk[start:end] for start, end in spans])
    return None if nemesis is None else (table, nemesis)


def _parse_arrow(chunk: Chunk) -> tuple[pa.Table, list[list[Any]]] | None:
    """`parse_fast` by Arrow's JSON reader.

    Arrow never sees the nemesis's free-form values, and the pairing never has to filter its lines
    out: they are blanked (Arrow skips blank lines) in the chunk itself while Arrow reads it when it
    is a bytearray (`chunks`), and put back after, else in a copy."""
    spans = _nemesis_spans(chunk)
    lines = [chunk[start:end] for start, end in spans]
    nemesis = _nemesis_rows(lines)
    if nemesis is None:
        return None
    client = chunk
    if spans:
        client = chunk if isinstance(chunk, bytearray) else bytearray(chunk)
        for start, end in spans:
            client[start:end] = b" " * (end - start)
    try:
        table = pj.read_json(pa.BufferReader(client), parse_options=_PARSE, read_options=_READ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    finally:
        if isinstance(chunk, bytearray):
            for (start, end), line in zip(spans, lines, strict=True):
                chunk[start:end] = line
    if table.num_rows == 0:
        return table, nemesis
    process = table.column("process")
    ok = pc.and_(
        pc.and_(pc.is_valid(table.column("index")), pc.is_valid(table.column("time"))),
        pc.and_(pc.is_valid(process), pc.is_in(table.column("type"), value_set=_TYPES)),
    )
    ok = pc.and_(ok, pc.is_in(table.column("f"), value_set=_CLIENT_FS))
    if not pc.all(pc.fill_null(ok, False)).as_py():
        return None
    # A transaction's micro-operations are validated by `history.format.validate` (the line by
    # line reader), which Arrow's schema cannot express.
    if pc.any(pc.equal(table.column("f"), TXN)).as_py():
        return None
    return table, nemesis


def nemesis_row(op: dict[str, Any]) -> list[Any]:
    """A nemesis op as the conversion keeps it: [index, time, type, f, value] (value as in JSON)."""
    return [op["index"], op["time"], op["type"], op["f"], op.get("value")]


def _as_int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63 else None


def _as_str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _as_int32(x: Any) -> int | None:
    """A partition as the form holds it (int32; one out of that range is unreadable there)."""
    n = _as_int(x)
    return n if n is not None and -(2**31) <= n < 2**31 else None


def _record(r: Any) -> dict[str, Any]:
    if not isinstance(r, dict):
        r = {}
    return {
        "topic": _as_str(r.get("topic")),
        "partition": _as_int32(r.get("partition")),
        "offset": _as_int(r.get("offset")),
        "value": _as_int(r.get("value")),
    }


def parse_slow(
    chunk: Chunk, first_line: int, at_end: bool, problems: list[ReadProblem], nemesis_ops: list[list[Any]]
) -> tuple[pa.Table, bool]:
    """Read a chunk line by line exactly as iter_ops does; (table, stop: a torn tail ended it).

    Nemesis ops are appended to `nemesis_ops` (see `nemesis_row`)."""
    rows: list[dict[str, Any]] = []
    lines = bytes(chunk).split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    stop = False
    for i, raw in enumerate(lines):
        line_no = first_line + i
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        complete = not (at_end and i == len(lines) - 1 and not chunk.endswith(b"\n"))
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            if not complete:
                log.warning("%d: torn last line ignored (controller crashed mid-write?)", line_no)
                problems.append(ReadProblem(line_no, "torn last line", torn_tail=True))
                stop = True
                break
            problems.append(ReadProblem(line_no, f"malformed JSON ({e.msg})"))
            continue
        reason = validate(record)
        if reason is not None:
            problems.append(ReadProblem(line_no, reason))
            continue
        nemesis = record["process"] == NEMESIS_PROCESS
        if nemesis:
            nemesis_ops.append(nemesis_row(record))
        records = record.get("records")
        rows.append(
            {
                "index": _as_int(record["index"]),
                "time": _as_int(record["time"]),
                "process": NEMESIS_SENTINEL if nemesis else record["process"],
                "type": record["type"],
                "f": _as_str(record["f"]),
                "topic": None if nemesis else _as_str(record.get("topic")),
                "partition": None if nemesis else _as_int32(record.get("partition")),
                "value": None if nemesis else _as_int(record.get("value")),
                "offset": None if nemesis else _as_int(record.get("offset")),
                "records": [_record(r) for r in records]
                if isinstance(records, list) and not nemesis
                else None,
                # Readers take `records or []`: a truthy non-list is a malformed poll.
                "bad_records": bool(records) and not isinstance(records, list) and not nemesis,
            }
        )
    return pa.Table.from_pylist(rows, schema=_JSON_SCHEMA), stop
