"""How far a first fetch of a system's software got (Kafka from Maven Central: some 50 MB), shown
to the person watching: one line every few seconds, not one per downloaded file."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from rich.console import Console

log = logging.getLogger(__name__)

EVERY_S = 3.0


def fetch_progress(console: Console, every: float = EVERY_S) -> Callable[[str], None]:
    last = 0.0

    def show(line: str) -> None:
        nonlocal last
        log.info("%s", line)
        now = time.monotonic()
        if now - last >= every:
            last = now
            console.print(f"    {line}", highlight=False, soft_wrap=True)

    return show
