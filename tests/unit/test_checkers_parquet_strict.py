"""The strict native reader of history lines keeps a chunk only as the line-by-line reader reads it."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers import parquet_strict
from checkers.parquet_lines import _JSON_SCHEMA, parse_fast, parse_slow

CLEAN = [
    '{"index":0,"time":5,"process":2,"type":"invoke","f":"send","topic":"t0","partition":1,"value":7}',
    '{"index":1,"time":9,"process":2,"type":"ok","f":"send","topic":"t0","partition":1,"value":7,"offset":3}',
    '{"index":2,"time":11,"process":0,"type":"ok","f":"poll","records":[{"topic":"t0","partition":1,'
    '"offset":3,"value":7},{"topic":"t\\u00e9\\n","partition":0,"offset":9223372036854775807,"value":-1}]}',
    '{"index":3,"time":12,"process":0,"type":"ok","f":"poll","records":[]}',
    '{"index":4,"time":13,"process":1,"type":"ok","f":"assign","partitions":[["t0",0]],"seek":"beginning"}',
    '  {"time":14,"index":5,"process":3,"type":"fail","f":"send","error":{"x":[1,2.5,null,true]}}\r',
    "",
    '{"index":6,"time":15,"process":3,"type":"info","f":"crash","topic":null,"records":null,"bad_records":null}',
    '{"\\u0069ndex":7,"time":16,"process":4,"type":"invoke","f":"poll","v\\u0061lue":2}',
]

# Lines the strict reader must hand to the line-by-line reader (its reading differs from a plain
# typed parse: wrong types become null, or the line is a problem).
ODD = [
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","value":1.0}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","value":"5"}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","value":1e3}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","value":true}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","value":-0}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","value":9223372036854775808}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","partition":2147483648}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","topic":5}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","topic":"a","topic":"b"}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","value":NaN}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","bad_records":true}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"poll","records":[null]}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"poll","records":[{"value":"1"}]}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"poll","records":{"value":1}}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"poll","records":5}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","topic":"\\ud800"}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send"} {"index":21}',
    '{"index":20,"time":1,"process":true,"type":"ok","f":"send"}',
    '{"index":20,"time":1,"process":1,"type":"done","f":"send"}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"txn","mops":[]}',
    '{"index":20,"time":1,"process":1,"type":"ok"}',
    '{"index":null,"time":1,"process":1,"type":"ok","f":"send"}',
    '{"index":20,"time":1.5,"process":1,"type":"ok","f":"send"}',
    '{"index":20,"time":1,"process":1,"type":"ok","f":"send","topic":"tab\there"}',
    "\x0c",
    "[1, 2]",
    '{"index": 9, "time": oops',
]


def _slow(chunk: bytes) -> pa.Table:
    table, stop = parse_slow(chunk, 1, False, [], [])
    assert not stop
    return table


def _same_reading(chunk: bytes) -> bool:
    """Whether the fast path hands the chunk on (False) or reads it as the line-by-line reader does."""
    fast = parse_fast(chunk)
    if fast is None:
        return False
    table, nemesis = fast
    slow = _slow(chunk)
    assert nemesis == []
    assert table.schema == _JSON_SCHEMA
    # Arrow's reader left `bad_records` null where no line has it; the strict reader does the same.
    assert table.column("bad_records").null_count == table.num_rows
    assert slow.column("bad_records").to_pylist() == [False] * slow.num_rows
    names = [n for n in _JSON_SCHEMA.names if n != "bad_records"]
    assert table.select(names).to_pylist() == slow.select(names).to_pylist()
    return True


def test_the_strict_reader_is_built_here() -> None:
    """`make setup` builds it (cargo); without it the conversion would quietly read with Arrow."""
    assert parquet_strict.available()


def test_clean_lines_are_read_as_the_line_by_line_reader_reads_them() -> None:
    assert _same_reading(("\n".join(CLEAN) + "\n").encode())


@pytest.mark.parametrize("line", ODD)
def test_a_line_read_otherwise_sends_its_chunk_to_the_line_by_line_reader(line: str) -> None:
    chunk = "\n".join([*CLEAN[:2], line, CLEAN[2]]) + "\n"
    assert parquet_strict.read(chunk.encode(), _JSON_SCHEMA) is None
    assert parse_fast(chunk.encode()) is None


def test_bad_utf8_sends_its_chunk_to_the_line_by_line_reader() -> None:
    chunk = (
        CLEAN[0] + "\n"
    ).encode() + b'{"index":1,"time":1,"process":1,"type":"ok","f":"send","topic":"\xff"}\n'
    assert parquet_strict.read(chunk, _JSON_SCHEMA) is None


def test_a_bytearray_chunk_with_nemesis_lines_is_read_and_left_as_it_was() -> None:
    nemesis = '{"index":30,"time":2,"process":"nemesis","type":"info","f":"kill","value":{"n":[1.5]}}'
    text = "\n".join([CLEAN[0], nemesis, CLEAN[1]]) + "\n"
    chunk = bytearray(text.encode())
    fast = parse_fast(chunk)
    assert fast is not None and fast[0].column("index").to_pylist() == [0, 1]
    assert fast[1] == [[30, 2, "info", "kill", {"n": [1.5]}]]
    assert chunk == text.encode()


def test_nemesis_lines_are_handed_back_by_place_however_they_are_spelled() -> None:
    """The strict reader tells a nemesis line by its parsed `process`, not by its bytes; a client
    line that only holds the words in a value stays a client line."""
    lines = [
        CLEAN[0],
        '{"index":30,"time":2,"process" :  "nemesis","type":"info","f":"kill","value":[1.5,"x"]}',
        '{"index":31,"time":3,"process":4,"type":"invoke","f":"send","value":9,"note":{"process":"nemesis"}}',
        '{"index":32,"time":4,"type":"info","f":"heal","process":"nemesis"}',
    ]
    chunk = ("\n".join(lines) + "\n").encode()
    found = parquet_strict.read(chunk, _JSON_SCHEMA)
    assert found is not None
    table, spans = found
    assert table.column("index").to_pylist() == [0, 31]
    assert [chunk[start:end].decode() for start, end in spans] == [lines[1], lines[3]]
    fast = parse_fast(chunk)
    assert fast is not None
    assert fast[1] == [[30, 2, "info", "kill", [1.5, "x"]], [32, 4, "info", "heal", None]]
    nemesis_ops: list = []
    parse_slow(chunk, 1, False, [], nemesis_ops)
    assert fast[1] == nemesis_ops


def test_the_arrow_reader_stays_where_the_strict_one_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    chunk = ("\n".join(CLEAN) + "\n").encode()
    strict = parse_fast(chunk)
    monkeypatch.setattr(parquet_strict, "_native", None)
    assert not parquet_strict.available()
    arrow = parse_fast(chunk)
    assert strict is not None and arrow is not None
    assert strict[0].equals(arrow[0])
    assert parse_fast(("\n".join([CLEAN[0], ODD[1]]) + "\n").encode()) is None


_INT = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(2**63, 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)
_TEXT = st.one_of(st.text(max_size=6), st.integers(), st.none())
_RECORD = st.one_of(
    st.fixed_dictionaries({}, optional={"topic": _TEXT, "partition": _INT, "offset": _INT, "value": _INT}),
    st.none(),
    st.integers(),
)
_LINE = st.fixed_dictionaries(
    {
        "index": st.one_of(st.integers(0, 10**12), _INT),
        "time": st.one_of(st.integers(0, 10**12), _INT),
        "process": st.one_of(st.integers(0, 100), _INT),
        "type": st.sampled_from(["invoke", "ok", "fail", "info", "done", 3]),
        "f": st.sampled_from(["send", "poll", "assign", "crash", "commit", "txn", "nope", None]),
    },
    optional={
        "topic": _TEXT,
        "partition": _INT,
        "value": _INT,
        "offset": _INT,
        "records": st.one_of(st.lists(_RECORD, max_size=3), st.none(), st.integers()),
        "error": st.recursive(st.none() | st.floats() | st.text(), lambda c: st.lists(c, max_size=2)),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=6), st.booleans())
def test_any_lines_are_read_as_the_line_by_line_reader_reads_them(
    lines: list[dict[str, Any]], ensure_ascii: bool
) -> None:
    chunk = ("\n".join(json.dumps(line, ensure_ascii=ensure_ascii) for line in lines) + "\n").encode()
    _same_reading(chunk)


_I64 = st.integers(-(2**63), 2**63 - 1)
_CLEAN_RECORD = st.fixed_dictionaries(
    {},
    optional={
        "topic": st.text(max_size=6) | st.none(),
        "partition": st.integers(-(2**31), 2**31 - 1) | st.none(),
        "offset": _I64 | st.none(),
        "value": _I64 | st.none(),
        "extra": st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=3),
    },
)
_CLEAN_LINE = st.fixed_dictionaries(
    {
        "index": _I64,
        "time": _I64,
        "process": _I64,
        "type": st.sampled_from(["invoke", "ok", "fail", "info"]),
        "f": st.sampled_from(["send", "poll", "assign", "crash", "subscribe", "commit", "rebalance"]),
    },
    optional={
        "topic": st.text(max_size=6) | st.none(),
        "partition": st.integers(-(2**31), 2**31 - 1) | st.none(),
        "value": _I64 | st.none(),
        "offset": _I64 | st.none(),
        "records": st.lists(_CLEAN_RECORD, max_size=3) | st.none(),
        "seek": st.floats(allow_nan=False, allow_infinity=False) | st.lists(st.text(max_size=2), max_size=2),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_CLEAN_LINE, min_size=1, max_size=6), st.booleans())
def test_well_typed_lines_are_kept_by_the_strict_reader(
    lines: list[dict[str, Any]], ensure_ascii: bool
) -> None:
    chunk = ("\n".join(json.dumps(line, ensure_ascii=ensure_ascii) for line in lines) + "\n").encode()
    assert _same_reading(chunk)
