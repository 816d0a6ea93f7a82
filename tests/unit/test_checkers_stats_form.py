"""The statistics' facts counted from the Parquet form with Arrow (checkers/stats_form.py) equal the
reference's pass (`checkers.stats.history_facts`, `==` on every fact): on generated histories with
many fault windows, whose ok sends are in time order or go back in time, one without faults, and a
hand-made one with an open and a superseded invocation, a crash, a window without an ok send, one
that starts between two ok sends of one second, and unreadable lines; read in batches of a few
rows, so every summary is merged across batches.
(Spark's facts are compared with both in tests/integration/test_checkers_spark_engine.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers import stats_form
from checkers.parquet import convert
from checkers.stats import Facts, history_facts
from history.synthetic.generator import generate_ops
from tests.support.history_builder import HistoryBuilder, write_history


def _generated(path: Path, nemesis_rate: float, back_in_time: bool = False) -> None:
    ops, _ = generate_ops(3000, seed=7, plants={"lost-write": 2}, nemesis_rate=nemesis_rate)
    if back_in_time:
        oks = [op for op in ops if op["type"] == "ok" and op["f"] == "send"]
        oks[10]["time"], oks[11]["time"] = oks[11]["time"], oks[10]["time"] - 1
    write_history(path, ops)


def _hand_made(path: Path) -> None:
    b = HistoryBuilder()
    b.send(0, 1, offset=0)
    b.nemesis("pause", ["n2"])  # starts after an ok send of its second: the gap counts from here
    b.advance(0.5)
    b.send(0, 6, offset=1)
    b.nemesis("resume", ["n2"])
    b.nemesis("kill", ["n1"])
    b.invoke_send(1, 2)  # superseded by process 1's next invocation
    b.advance(1.5)
    b.send(1, 3, outcome="fail")
    b.op(process=2, type="invoke", f="poll")
    b.op(process=2, type="info", f="crash")  # a crash completes the poll as info
    b.advance(2.0)
    b.nemesis("start", ["n1"])
    b.send(0, 4, offset=2)
    b.poll(3, [("t0", 0, 0, 1), ("t0", 0, 1, 6), ("t0", 0, 2, 4)])
    b.invoke_send(4, 5)  # never completes
    b.write(path)
    with path.open("a") as f:
        f.write('{"index": "x", "time": 1}\nnot json\n')


def form_facts(path: Path) -> Facts:
    form = convert(path)
    return stats_form.form_facts(
        form.operations_path,
        max_time=form.max_time,
        nemesis=form.nemesis,
        ok_sends_in_order=form.ok_sends_in_order,
        latency=form.latency,
        problems=form.problems,
    )


@pytest.mark.parametrize("kind", ["faults", "back-in-time", "no-faults", "hand-made"])
def test_the_form_facts_equal_the_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(stats_form, "BATCH_ROWS", 97)
    monkeypatch.setattr(stats_form, "COMPACT_AT", 50)
    path = tmp_path / "history.jsonl"
    if kind == "hand-made":
        _hand_made(path)
    else:
        _generated(path, 0.0 if kind == "no-faults" else 0.02, back_in_time=kind == "back-in-time")
    assert convert(path).ok_sends_in_order == (kind != "back-in-time")
    got, reference = form_facts(path), history_facts(path)
    assert got == reference
    assert got.latency_ms["p99"] is not None and got.completed > 0
    if kind in ("faults", "back-in-time"):
        assert len(got.windows) > 5
    if kind == "hand-made":
        assert got.outcomes["send"] == {"ok": 3, "fail": 1, "info": 0, "open": 1}
        assert got.outcomes["poll"]["info"] == 1 and got.problems
        assert got.windows[0]["longest_gap_s"] == 0.502
        window = got.windows[1]  # the kill's: no ok send inside it
        assert window["ops"] == {"ok": 0, "fail": 1, "info": 1}
        assert window["longest_gap_s"] == round(window["end_s"] - window["start_s"], 3)
