"""The native pairing and links give the conversion exactly the rows the Arrow ones give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers import parquet_native
from checkers.parquet_pipeline import Converter
from checkers.parquet_schema import OPERATIONS_SCHEMA, READS_SCHEMA
from history.synthetic.generator import generate


def _convert(lines: list[str], per_chunk: int, native: bool) -> dict[str, Any]:
    """Every table and figure of converting `lines`, `per_chunk` lines a chunk."""
    operations: list[pa.Table] = []
    reads: list[pa.Table] = []

    def sink(o: pa.Table, r: pa.Table) -> None:
        operations.append(o)
        reads.append(r)

    with pytest.MonkeyPatch.context() as patch:
        if not native:
            patch.setattr(parquet_native, "available", lambda: False)
        converter = Converter(sink)
        assert isinstance(converter.state.per_process, parquet_native.NativePairing) == native
        groups = [lines[i : i + per_chunk] for i in range(0, len(lines), per_chunk)] or [[]]
        first, start = 1, 0
        for n, group in enumerate(groups):
            chunk = "".join(line + "\n" for line in group).encode()
            if converter.feed(chunk, first, n == len(groups) - 1, start=start):
                break
            first, start = first + len(group), start + len(chunk)
        counts, pairing, problems = converter.finish()
    return {
        "operations": pa.concat_tables([OPERATIONS_SCHEMA.empty_table(), *operations]),
        "reads": pa.concat_tables([READS_SCHEMA.empty_table(), *reads]),
        "orphans": (pairing.orphans, pairing.first_orphan),
        "in_order": counts.ok_sends_in_order,
        "latency": counts.latency,
        "figures": counts.figures.__dict__,
        "problems": [str(p) for p in problems],
    }


def _same(lines: list[str], per_chunk: int) -> dict[str, Any]:
    native, arrow = _convert(lines, per_chunk, True), _convert(lines, per_chunk, False)
    for key in arrow:
        if isinstance(arrow[key], pa.Table):
            assert native[key].equals(arrow[key]), (key, native[key].to_pylist(), arrow[key].to_pylist())
        else:
            assert native[key] == arrow[key], key
    return native


def test_the_native_pairing_is_built_here() -> None:
    """CI builds the crate (`make setup`): the conversion must not lose it unnoticed."""
    assert parquet_native.available()


def _line(index: int, process: Any, type_: str, f: str, **fields: Any) -> str:
    return json.dumps(
        {"index": index, "time": 10 * index, "process": process, "type": type_, "f": f, **fields}
    )


# Every case of the pairing rules: completion, crash, supersede, orphan, open, poll resets (assign,
# a poll completed info, an invocation superseding a poll), reads only of ok poll completions, acks
# linked per process and partition, a failed send, fields of odd types (read line by line: nulls),
# lines the reader refuses (problems), nemesis lines.
CASES = [
    _line(0, 1, "invoke", "send", topic="t", partition=0, value=1),
    _line(1, 2, "invoke", "poll"),
    _line(2, 1, "ok", "send", topic="t", partition=0, value=1, offset=0),
    _line(3, 2, "ok", "poll", records=[{"topic": "t", "partition": 0, "offset": 0, "value": 1}]),
    _line(4, 1, "invoke", "send", topic="t", partition=0, value=2),
    _line(40, "nemesis", "info", "kill", value=None),  # a chunk of nemesis lines alone: no client rows
    _line(41, "nemesis", "info", "start", value=["n1"]),
    _line(5, 1, "ok", "send", topic="t", partition=0, value=2, offset=1),
    _line(6, 2, "invoke", "poll"),
    _line(7, 2, "ok", "poll", records=[{"topic": "t", "partition": 0, "offset": 1, "value": 2}]),
    _line(8, 2, "invoke", "poll"),
    _line(9, 2, "info", "poll"),
    _line(10, 2, "invoke", "poll"),
    _line(11, 2, "ok", "poll", records=[{"topic": "t", "partition": 0, "offset": 0, "value": 1}]),
    _line(12, 3, "ok", "send", topic="t", partition=0, value=9, offset=5),
    _line(13, 3, "info", "crash"),
    _line(14, 4, "invoke", "send", topic="u", partition=1, value=3),
    _line(15, 4, "invoke", "send", topic="u", partition=1, value=4),
    _line(16, 4, "info", "crash"),
    _line(17, 5, "invoke", "assign", partitions=[["t", 0]]),
    _line(18, 5, "ok", "assign"),
    _line(19, 5, "invoke", "poll"),
    _line(20, 5, "invoke", "poll"),
    _line(21, 5, "ok", "poll", records=[{"topic": "t", "partition": 0, "offset": 3, "value": 7}, None]),
    _line(22, 1, "invoke", "send", topic="t", partition=0, value=5),
    _line(23, 1, "fail", "send", topic="t", partition=0, value=5),
    _line(24, 6, "invoke", "send", topic="t", partition=0, value=6),
    _line(25, 6, "ok", "send", topic="t", partition=0, value=6, offset=2, bad_records=True),
    _line(26, "x", "invoke", "send", topic="t", partition=0, value=8),
    _line(27, "x", "ok", "send", topic="t", partition=0, value=8, offset=3),
    _line(28, 7, "invoke", "send", topic="t", partition=0, value=10),
    _line(29, 7, "ok", "send", topic="t", partition="0", value=10, offset=4),
    _line(30, 7, "invoke", "send", topic="t", partition=0, value=11),
    _line(31, 7, "done", "send", topic="t", partition=0, value=11, offset=6),
    _line(32, 8, "invoke", "send", topic="t", partition=0, value=12),
    _line(33, 8, "ok", "send", topic="t", partition=0, value=12, offset=1.5),
    _line(34, 1, "invoke", "send", topic="v", partition=2, value=13),
    _line(35, 1, "ok", "send", topic="v", partition=2, value=13, offset=0),
    _line(36, 9, "invoke", "nope"),
    _line(37, 9, "ok", "nope"),
    _line(38, 1, "invoke", "send", topic="t", partition=0, value=14),
]


@pytest.mark.parametrize("per_chunk", [1, 2, 3, 7, len(CASES)])
def test_every_pairing_case_gives_the_arrow_rows(per_chunk: int) -> None:
    found = _same(CASES, per_chunk)
    assert found["operations"].num_rows > 15 and found["reads"].num_rows >= 4
    assert found["orphans"] == (1, 12)  # the ok at 12 follows no invocation
    assert len(found["problems"]) == 5  # the lines of a string process, an unknown type or f
    assert found["operations"].column("prev_offset").null_count < found["operations"].num_rows


def test_ok_sends_out_of_time_order_are_noticed_as_by_arrow() -> None:
    lines = [
        _line(0, 1, "invoke", "send", topic="t", partition=0, value=1),
        _line(1, 2, "invoke", "send", topic="t", partition=0, value=2),
        json.dumps(
            {"index": 2, "time": 50, "process": 1, "type": "ok", "f": "send", "value": 1, "offset": 0}
        ),
        json.dumps(
            {"index": 3, "time": 40, "process": 2, "type": "ok", "f": "send", "value": 2, "offset": 1}
        ),
    ]
    assert _same(lines, 1)["in_order"] is False
    assert _same(lines[:3], 2)["in_order"] is True


def test_a_generated_history_gives_the_arrow_rows(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    generate(history, ops=3000, seed=7)
    lines = history.read_text().splitlines()
    for per_chunk in (97, 1000):
        found = _same(lines, per_chunk)
        assert found["operations"].num_rows > 1000 and found["reads"].num_rows > 500


_PROCESS = st.one_of(st.integers(0, 3), st.just("p"))
_LINE = st.fixed_dictionaries(
    {
        "time": st.integers(0, 100),
        "process": _PROCESS,
        "type": st.sampled_from(["invoke", "ok", "fail", "info", "done"]),
        "f": st.sampled_from(["send", "poll", "assign", "crash", "commit", "nope"]),
    },
    optional={
        "topic": st.sampled_from(["a", "b", None]),
        "partition": st.one_of(st.integers(0, 1), st.none(), st.just("0")),
        "value": st.one_of(st.integers(0, 5), st.none()),
        "offset": st.one_of(st.integers(-1, 5), st.none(), st.just(1.5)),
        "bad_records": st.booleans(),
        "records": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "topic": st.sampled_from(["a", "b"]),
                    "partition": st.integers(0, 1),
                    "offset": st.integers(0, 5),
                    "value": st.integers(0, 5),
                },
            ),
            max_size=3,
        ),
    },
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=30), st.integers(1, 8))
def test_any_lines_give_the_arrow_rows(lines: list[dict[str, Any]], per_chunk: int) -> None:
    texts = [json.dumps({"index": i, **line}) for i, line in enumerate(lines)]
    _same(texts, per_chunk)
