"""Event-loop stall detector: a thread that reports when the loop stops turning.

A broker whose loop is blocked answers nobody (clients time out, followers drop out of the ISR),
so a stall longer than `threshold` is logged once with the loop thread's stack, to find the cause.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

log = logging.getLogger(__name__)


class LoopWatchdog:
    def __init__(self, threshold: float = 2.0, beat: float = 0.1) -> None:
        self.threshold = threshold
        self.beat = beat
        self._last = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._stopped = threading.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._task = asyncio.get_running_loop().create_task(self._heartbeat())
        threading.Thread(target=self._watch, name="loop-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()
        if self._task is not None:
            self._task.cancel()

    async def _heartbeat(self) -> None:
        while True:
            self._last = time.monotonic()
            await asyncio.sleep(self.beat)

    def _watch(self) -> None:
        reported = False
        while not self._stopped.wait(self.threshold / 4):
            stalled = time.monotonic() - self._last
            if stalled > self.threshold and not reported:
                frame = sys._current_frames().get(self._loop_thread)
                stack = "".join(traceback.format_stack(frame)) if frame is not None else "(no frame)"
                log.warning("event loop stalled for %.1fs; loop thread at:\n%s", stalled, stack)
                reported = True
            elif stalled <= self.threshold and reported:
                log.warning("event loop running again")
                reported = False
