"""Tasks the broker starts on its loop and nobody awaits.

asyncio holds only a weak reference to a running task: one nobody awaits must be held until it is
done, or it may be collected mid-flight. Every service of the broker that starts such tasks holds
them here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any


class BackgroundTasks:
    """Tasks held until done; `failed` (if given) hears each one's exception."""

    def __init__(self, failed: Callable[[BaseException], None] | None = None) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()
        self._failed = failed

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if self._failed is not None and not task.cancelled():
            error = task.exception()
            if error is not None:
                self._failed(error)

    def cancel_all(self) -> None:
        for task in self._tasks:
            task.cancel()
