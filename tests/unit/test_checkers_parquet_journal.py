"""The Parquet form written while the history grows (checkers/parquet_journal.py) is the one a
conversion of the finished history writes: the same rows, counts, problems and nemesis ops, and
the check reuses it; whatever goes wrong leaves the conversion to the check."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from checkers import parquet_journal
from checkers.parquet import cache_dir_for, convert
from checkers.parquet_journal import ColumnarJournal
from history.synthetic.generator import generate_ops
from tests.support.history_builder import HistoryBuilder


def rows(path: Path) -> list[dict[str, Any]]:
    """A Parquet file's rows in a fixed order (a stretch's boundary may move open operations)."""
    return sorted(pq.read_table(path).to_pylist(), key=lambda r: json.dumps(r, sort_keys=True))


def lines(seed: int) -> list[bytes]:
    ops, _ = generate_ops(400, seed=seed, plants={"lost-write": 1, "poll-skip": 1})
    out = [json.dumps({**op, "index": i}, separators=(",", ":")).encode() + b"\n" for i, op in enumerate(ops)]
    out.insert(57, b'{"index": 57, "time": oops}\n')  # a malformed line: a problem with its line number
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_written_as_it_grows_equals_converted_at_the_end(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet_journal, "STRETCH_BYTES", 700)  # many stretches, lines cut across them
    history = tmp_path / "grown" / "history.jsonl"
    history.parent.mkdir()
    journal = ColumnarJournal(history)
    rng = random.Random(seed)
    with open(history, "wb") as f:
        for line in lines(seed):
            cut = rng.randrange(len(line) + 1)  # sometimes a line is half written when it looks
            f.write(line[:cut])
            f.flush()
            if rng.random() < 0.1:
                journal.catch_up()
            f.write(line[cut:])
        f.write(b'{"index": 999, "ti')  # the run was cut mid-line: a torn tail
    grown = journal.finish()
    assert grown is not None and not grown.reused

    whole = tmp_path / "whole" / "history.jsonl"
    whole.parent.mkdir()
    whole.write_bytes(history.read_bytes())
    converted = convert(whole)
    assert rows(grown.operations_path) == rows(converted.operations_path)
    assert rows(grown.reads_path) == rows(converted.reads_path)
    for name in ("ops", "operations", "reads", "problems", "orphans", "first_orphan", "figures", "topics"):
        assert getattr(grown, name) == getattr(converted, name), name
    assert grown.nemesis == converted.nemesis and grown.max_time == converted.max_time
    assert [p.torn_tail for p in grown.problems] == [False, True]
    # The check finds it fresh and reuses it.
    assert convert(history).reused


def test_a_changed_or_unreadable_history_is_left_to_the_check(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    history = b.write(tmp_path / "history.jsonl")
    journal = ColumnarJournal(history)
    journal.catch_up()
    history.write_text("")  # rewritten behind its back
    assert journal.finish() is None
    assert not cache_dir_for(history).exists()
    assert not list(tmp_path.glob(".journal-*"))
    assert not convert(history).reused


def test_the_follower_thread_keeps_up_and_stops(tmp_path: Path) -> None:
    b = HistoryBuilder()
    for v in range(50):
        b.send(v % 3, v, offset=v)
    history = b.write(tmp_path / "history.jsonl")
    journal = ColumnarJournal(history, interval_s=0.01).start()
    grown = journal.finish()
    assert grown is not None and grown.operations == 50
    assert convert(history).reused


def test_a_follower_that_fails_midway_leaves_the_whole_conversion_to_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet_journal, "STRETCH_BYTES", 700)
    history = tmp_path / "history.jsonl"
    history.write_bytes(b"".join(lines(3)))
    writes = []

    def write_then_fail(self: Any, operations: Any, reads: Any) -> None:
        writes.append(operations.num_rows)
        if len(writes) == 2:
            raise OSError("no space left on device")

    journal = ColumnarJournal(history)
    monkeypatch.setattr(parquet_journal.TableWriter, "write", write_then_fail)
    journal.catch_up()
    monkeypatch.undo()
    assert isinstance(journal.failed, OSError)
    assert journal.finish() is None
    assert not cache_dir_for(history).exists() and not list(tmp_path.glob(".journal-*"))
    whole = tmp_path / "whole" / "history.jsonl"
    whole.parent.mkdir()
    whole.write_bytes(history.read_bytes())
    checked, reference = convert(history), convert(whole)
    assert not checked.reused
    assert rows(checked.operations_path) == rows(reference.operations_path)
    assert rows(checked.reads_path) == rows(reference.reads_path)


def test_a_run_killed_before_the_form_was_published_is_converted_by_the_check(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_bytes(b"".join(lines(4)))
    journal = ColumnarJournal(history)
    journal.catch_up()  # ... and the process dies here: no finish, the half-written form stays
    (left,) = tmp_path.glob(".journal-*")
    assert not cache_dir_for(history).exists()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    killed = left.rename(tmp_path / f".journal-{int(dead.stdout)}-x")  # as if its run were killed
    converted = convert(history)
    assert not killed.exists() and not list(tmp_path.glob(".journal-*"))  # the check removed it
    assert not converted.reused and converted.ops == len(lines(4)) - 1  # all but the malformed line
    assert [p.line_no for p in converted.problems] == [58]
