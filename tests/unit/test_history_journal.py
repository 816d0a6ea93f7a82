"""The journal: flushed as it happens, torn tails tolerated, bad lines reported by number."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from history.format import HistoryError
from history.pairing import pair_problems
from history.reader import iter_ops
from history.writer import HistoryWriter


def test_writer_assigns_index_and_time(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as writer:
        writer.append({"process": 0, "type": "invoke", "f": "send", "topic": "t", "partition": 0, "value": 1})
        writer.append(
            {"process": 0, "type": "ok", "f": "send", "topic": "t", "partition": 0, "value": 1, "offset": 0}
        )
    ops = list(iter_ops(path))
    assert [op["index"] for op in ops] == [0, 1]
    assert ops[0]["time"] <= ops[1]["time"]
    assert pair_problems(path).complete


def test_torn_last_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text(
        json.dumps({"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll"})
        + "\n"
        + '{"index": 1, "ti'
    )
    problems: list = []
    assert len(list(iter_ops(path, problems=problems))) == 1
    assert problems and problems[0].torn_tail


def test_malformed_middle_line_reports_line_number(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    good = json.dumps({"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "poll"})
    path.write_text(good + "\nnot json\n" + good + "\n")
    with pytest.raises(HistoryError, match=":2:"):
        list(iter_ops(path))
    problems: list = []
    assert len(list(iter_ops(path, problems=problems))) == 2
    assert problems[0].line_no == 2


def test_unknown_f_and_orphan_completion_are_problems(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    lines = [
        {"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "teleport"},
        {"index": 1, "time": 2, "process": 3, "type": "ok", "f": "poll", "records": []},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = pair_problems(path)
    assert not summary.complete
    reasons = " ".join(p.reason for p in summary.problems)
    assert "unknown f" in reasons and "without invocation" in reasons


def test_sigkilled_writer_leaves_every_complete_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    code = (
        "import sys, time\n"
        "from history.writer import HistoryWriter\n"
        "w = HistoryWriter(sys.argv[1])\n"
        "i = 0\n"
        "while True:\n"
        "    w.append({'process': 0, 'type': 'invoke', 'f': 'poll'})\n"
        "    w.append({'process': 0, 'type': 'ok', 'f': 'poll', 'records': []})\n"
        "    i += 1\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=Path(__file__).parents[2])
    deadline = time.monotonic() + 20
    while (not path.exists() or path.stat().st_size < 20000) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    problems: list = []
    ops = list(iter_ops(path, problems=problems))
    assert len(ops) > 100
    assert [op["index"] for op in ops] == list(range(len(ops)))
    assert all(p.torn_tail for p in problems)
