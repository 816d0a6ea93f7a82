"""A check's passes beside it stop when the check is cancelled.

The driver's passes over a big form (statistics, verdict power) run on a second thread beside
Spark. When the check ends in an error or Ctrl-C, a pass that has begun would otherwise run to its
end before the check can report (at 100,000,000 operations, up to half a minute): each pass asks
`check()` between its batches, and stops there once its check was cancelled.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_cancelled: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "strandline_check_cancelled", default=None
)


class Cancelled(Exception):
    """The check this pass ran for ended (an error or Ctrl-C): its result is not wanted."""


def check() -> None:
    """Raise Cancelled when the check this pass runs for was cancelled (else nothing: a pass not
    run under `on_behalf_of` is never stopped)."""
    flag = _cancelled.get()
    if flag is not None and flag.is_set():
        raise Cancelled("the check was cancelled")


def on_behalf_of(flag: threading.Event, part: Callable[[], T]) -> Callable[[], T]:
    """`part`, to run on another thread for a check that sets `flag` when it is cancelled."""

    def run() -> T:
        token = _cancelled.set(flag)
        try:
            return part()
        finally:
            _cancelled.reset(token)

    return run
