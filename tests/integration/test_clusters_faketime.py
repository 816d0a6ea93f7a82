"""Brokers run under libfaketime: the wall clock follows the clock file, timed waits do not hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusters.faketime import CLOCK_UNSKEWED, faketime_env

pytestmark = pytest.mark.integration

PROBE = """
import asyncio, json, queue, threading, time
def timed(f):
    t = time.monotonic(); f(); return time.monotonic() - t
async def nap(): await asyncio.sleep(0.2)
lock = threading.Lock(); lock.acquire()
def empty_get():
    try: queue.Queue().get(timeout=0.2)
    except queue.Empty: pass
print(json.dumps({
    "wall": time.time(),
    "event": timed(lambda: threading.Event().wait(0.2)),
    "queue": timed(empty_get),
    "lock": timed(lambda: lock.acquire(timeout=0.2)),
    "asyncio": timed(lambda: asyncio.run(nap())),
    "sleep": timed(lambda: time.sleep(0.2)),
}))
"""


@pytest.mark.parametrize("offset,expected", [(CLOCK_UNSKEWED, 0), ("+3600s\n", 3600), ("-3600s\n", -3600)])
def test_wall_clock_follows_the_file_and_timed_waits_return(
    tmp_path: Path, offset: str, expected: int
) -> None:
    import time

    clock = tmp_path / "clock"
    clock.write_text(offset)
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, **faketime_env(str(clock))},
        capture_output=True,
        text=True,
        timeout=30,  # a hang would show here
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout)
    assert abs(probe["wall"] - time.time() - expected) < 60
    for wait in ("event", "queue", "lock", "asyncio", "sleep"):
        assert 0.15 < probe[wait] < 5, (wait, probe[wait])
