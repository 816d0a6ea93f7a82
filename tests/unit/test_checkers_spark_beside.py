"""The second thread of a Spark check: an error drops the parts not begun."""

from __future__ import annotations

import threading

import pytest

from checkers.spark import _beside_pool


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
