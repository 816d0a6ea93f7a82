"""The second thread of a Spark check: an error drops the parts not begun, and the driver's passes
over the form (statistics, verdict power) stop at their next batch (`checkers.cancelled`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkers import cancelled, power_form, stats_form
from checkers.parquet import convert
from checkers.power import Asked
from checkers.spark import _beside_pool
from checkers.spark_stats import nemesis_op
from history.synthetic.generator import generate_ops
from tests.support.history_builder import write_history


def test_an_error_waits_for_the_running_part_only() -> None:
    ran: list[str] = []
    started, release = threading.Event(), threading.Event()

    def running() -> None:
        started.set()
        release.wait(5)
        ran.append("running")

    timer = threading.Timer(0.3, release.set)
    with pytest.raises(KeyboardInterrupt), _beside_pool() as pool:
        pool.submit(running)
        pool.submit(lambda: ran.append("queued"))
        assert started.wait(5)
        timer.start()
        raise KeyboardInterrupt
    assert ran == ["running"]


def test_without_an_error_every_part_runs() -> None:
    ran: list[int] = []
    with _beside_pool() as pool:
        for i in range(3):
            pool.submit(ran.append, i)
    assert ran == [0, 1, 2]


def test_an_error_stops_the_running_pass_at_its_next_batch() -> None:
    started = threading.Event()
    batches: list[int] = []

    def a_long_pass() -> None:
        started.set()
        for i in range(1000):  # 10 s if nothing stops it
            cancelled.check()
            batches.append(i)
            time.sleep(0.01)

    with pytest.raises(KeyboardInterrupt), _beside_pool() as pool:
        running = pool.submit(a_long_pass)
        assert started.wait(5)
        time.sleep(0.1)
        interrupted = time.monotonic()
        raise KeyboardInterrupt
    assert time.monotonic() - interrupted < 1.0
    assert isinstance(running.exception(), cancelled.Cancelled)
    assert 0 < len(batches) < 1000


def test_a_pass_not_run_for_a_check_is_never_stopped() -> None:
    cancelled.check()  # no check's flag on this thread: nothing to stop


def _passes(tmp_path: Path) -> dict[str, Callable[[], Any]]:
    path = tmp_path / "history.jsonl"
    ops, _ = generate_ops(3000, seed=3, plants={"lost-write": 2}, nemesis_rate=0.02)
    write_history(path, ops)
    form = convert(path)
    nemesis = [nemesis_op(row) for row in form.nemesis]
    asked = Asked(rate=100.0, faults=True)
    return {
        "statistics": lambda: stats_form.form_facts(
            form.operations_path,
            max_time=form.max_time,
            nemesis=form.nemesis,
            ok_sends_in_order=form.ok_sends_in_order,
            latency=form.latency,
        ),
        "verdict power": lambda: power_form.tally(form.operations_path, form.reads_path, nemesis, asked),
    }


def test_the_driver_passes_stop_once_their_check_is_cancelled(tmp_path: Path) -> None:
    for name, run in _passes(tmp_path).items():
        flag = threading.Event()
        assert cancelled.on_behalf_of(flag, run)() == run(), name  # not cancelled: the same result
        flag.set()
        with pytest.raises(cancelled.Cancelled):
            cancelled.on_behalf_of(flag, run)()
