"""History -> Parquet: the lines it keeps and the problems it reports are iter_ops's, to the letter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.parquet import cache_dir_for, convert
from history.reader import iter_ops
from tests.support.history_builder import HistoryBuilder

# Topic-partition ids: topics numbered by first appearance (t1, then t0), * 2**32 + partition + 2**31.
T1_2 = 0 * 2**32 + 2 + 2**31
T0_0 = 1 * 2**32 + 0 + 2**31


def _lines(b: HistoryBuilder) -> list[str]:
    return [json.dumps({**op, "index": i}, separators=(",", ":")) for i, op in enumerate(b.ops)]


def test_operations_and_reads(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 7, offset=3, topic="t1", partition=2)
    b.nemesis("partition", {"grudge": {"n1": ["n2"]}, "value": 3})
    b.poll(1, [("t1", 2, 3, 7), ("t0", 0, 9, 8)])
    b.assign(1)
    b.poll(1, [("t0", 0, 10, 9)])
    b.invoke_send(2, 8)
    b.invoke_send(2, 9)
    path = b.write(tmp_path / "history.jsonl")
    converted = convert(path)
    assert converted.directory == cache_dir_for(path) == tmp_path / "history.parquet"
    # The operation kinds (the Spark check starts no job for transactions or groups it lacks).
    assert converted.figures["kinds"] == ["assign", "poll", "send"]
    assert convert(path).figures["kinds"] == ["assign", "poll", "send"]  # from meta.json
    operations = pq.read_table(converted.operations_path).to_pylist()
    by_invoke = {op["invoke_index"]: op for op in operations}
    assert by_invoke[0] == {
        "invoke_index": 0,
        "process": 0,
        "f": "send",
        "topic": "t1",
        "partition": 2,
        "value": 7,
        "index": 1,
        "time": b.ops[1]["time"],
        "offset": 3,
        "bad_records": False,
        "outcome": "ok",
        "next_index": 1,
        "tp": T1_2,
        "prev_index": None,
        "prev_offset": None,
        "prev_value": None,
        "f_code": 0,  # send
        "outcome_code": 0,  # ok
        "invoke_time": b.ops[0]["time"],
        "prev_ok_time": None,  # the first ok send
    }
    assert by_invoke[10]["outcome"] == "open" and by_invoke[10]["next_index"] == 11  # superseded
    assert by_invoke[11]["outcome"] == "open" and by_invoke[11]["next_index"] is None  # open at the end
    assert sorted(by_invoke) == [0, 4, 6, 8, 10, 11]
    reads = pq.read_table(converted.reads_path).to_pylist()
    assert reads == [
        {
            "index": 5,
            "process": 1,
            "pos": 0,
            "topic": "t1",
            "partition": 2,
            "offset": 3,
            "value": 7,
            "epoch": 0,
            "tp": T1_2,
            "prev_offset": None,
            "prev_index": None,
        },
        {
            "index": 5,
            "process": 1,
            "pos": 1,
            "topic": "t0",
            "partition": 0,
            "offset": 9,
            "value": 8,
            "epoch": 0,
            "tp": T0_0,
            "prev_offset": None,
            "prev_index": None,
        },
        {
            "index": 9,
            "process": 1,
            "pos": 0,
            "topic": "t0",
            "partition": 0,
            "offset": 10,
            "value": 9,
            "epoch": 1,
            "tp": T0_0,
            "prev_offset": None,  # the assign between forgot the position
            "prev_index": None,
        },
    ]
    assert converted.problems == [] and converted.ops == 12 and converted.reads == 3
    assert converted.orphans == 0


def test_bad_lines_are_the_problems_iter_ops_reports(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.poll(1, [(0, 1)])
    lines = _lines(b)
    lines.insert(1, '{"index": 9, "time": oops')
    lines.insert(2, "[1, 2]")
    lines.insert(3, '{"index": 10, "time": 1, "process": true, "type": "ok", "f": "send"}')
    lines.insert(4, '{"index": 11, "time": 1, "process": 3, "type": "done", "f": "send"}')
    lines.insert(5, "")
    lines.insert(
        6, '{"index": 12, "time": 1, "process": "nemesis", "type": "info", "f": "kill", "value": [1]}'
    )
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(lines) + '\n{"index": 13, "ti')
    problems: list = []
    expected = list(iter_ops(path, problems=problems))
    converted = convert(path)
    assert converted.problems == problems
    assert converted.ops == len(expected) == 5
    assert converted.orphans == 0 and converted.reads == 1


def test_the_cache_is_reused_until_the_history_changes(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    path = b.write(tmp_path / "history.jsonl")
    assert not convert(path).reused
    assert convert(path).reused
    with open(path, "a") as f:
        f.write(_lines(b)[0] + "\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))
    again = convert(path)
    assert not again.reused and again.ops == 3


def test_big_chunks_fast_path_matches_iter_ops(tmp_path: Path) -> None:
    """Many chunks (a small chunk size), nemesis lines everywhere: same ops as iter_ops."""
    import checkers.parquet as parquet

    b = HistoryBuilder()
    for i in range(300):
        b.send(i % 5, i, offset=i)
        if i % 7 == 0:
            b.nemesis("kill", {"nodes": ["n1"], "value": i})
        b.poll(10, [(i, i)])
    path = b.write(tmp_path / "history.jsonl")
    old = parquet.CHUNK_BYTES
    parquet.CHUNK_BYTES = 4096
    try:
        converted = convert(path, force=True)
    finally:
        parquet.CHUNK_BYTES = old
    expected = list(iter_ops(path))
    assert converted.ops == len(expected)
    table = pq.read_table(converted.operations_path)
    invocations = [op["index"] for op in expected if op["type"] == "invoke" and op["process"] != "nemesis"]
    assert sorted(table.column("invoke_index").to_pylist()) == invocations
    assert set(table.column("outcome").to_pylist()) == {"ok"}
    assert converted.reads == 300 and converted.orphans == 0
    # Links across chunks: each read follows the process's previous read, each ack its previous ack.
    reads = pq.read_table(converted.reads_path).to_pylist()
    assert [r["prev_offset"] for r in reads] == [None, *list(range(299))]
    acks = sorted(table.filter(pc.equal(table.column("f"), "send")).to_pylist(), key=lambda r: r["offset"])
    assert [a["prev_offset"] for a in acks] == [None] * 5 + list(range(295))
    assert [a["prev_value"] for a in acks] == [None] * 5 + list(range(295))


def test_nemesis_ops_and_the_last_time_are_kept_for_the_statistics(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 7, offset=3)
    b.nemesis("partition", {"grudge": {"n1": ["n2"]}, "fault_id": 4})
    b.nemesis("heal", {"fault_id": 4}, outcome="info")
    b.send(1, 8, offset=4)
    path = b.write(tmp_path / "history.jsonl")
    want = [
        [op["index"], op["time"], op["type"], op["f"], op.get("value")]
        for op in iter_ops(path, problems=[])
        if op["process"] == "nemesis"
    ]
    assert len(want) == 4
    for text in (path.read_text(), path.read_text() + '{"index": 99, "time": "x"}\n'):  # fast, slow path
        path.write_text(text)
        converted = convert(path, force=True)
        assert converted.nemesis == want
        assert converted.max_time == max(op["time"] for op in b.ops)
        assert convert(path).nemesis == want  # from the cache's meta.json


def test_odd_nemesis_lines_are_read_as_iter_ops_reads_them(tmp_path: Path) -> None:
    """Both spellings of the nemesis key in one chunk, a nemesis line without `f` (a problem, not a
    crash), and a client line that holds the key inside its value: the same ops, problems and nemesis
    rows, in history order, as the line-by-line reader."""
    b = HistoryBuilder()
    b.send(0, 7, offset=3)
    b.send(1, 8, offset=4)
    lines = _lines(b)
    lines.insert(1, '{"index": 20, "time": 5, "process": "nemesis", "type": "info", "f": "kill", "value": 1}')
    lines.insert(2, '{"index":21,"time":6,"process":"nemesis","type":"info","f":"heal","value":{"a":[1]}}')
    lines.insert(3, '{"index": 22, "time": 7, "process": "nemesis", "type": "info", "value": 2}')
    lines.insert(
        4,
        '{"index": 23, "time": 8, "process": 4, "type": "invoke", "f": "send", "value": 9,'
        ' "note": {"process":"nemesis"}}',
    )
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(lines) + "\n")
    problems: list = []
    expected = list(iter_ops(path, problems=problems))
    converted = convert(path, force=True)
    assert converted.problems == problems and len(problems) == 1
    assert converted.ops == len(expected)
    want = [
        [op["index"], op["time"], op["type"], op["f"], op.get("value")]
        for op in expected
        if op["process"] == "nemesis"
    ]
    assert converted.nemesis == want and [row[0] for row in want] == [20, 21]
