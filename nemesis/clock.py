"""Clock skew through libfaketime: a live offset file per node, read on every clock call.

The system under test starts each broker with the PyPI `libfaketime` library preloaded and
`FAKETIME_TIMESTAMP_FILE` pointing at a file of its own (`clusters.faketime.faketime_env`);
`FAKETIME_NO_CACHE=1` makes every `time()`/`gettimeofday()` re-read the file, and monotonic clocks
stay real (`FAKETIME_DONT_FAKE_MONOTONIC=1`), so timers keep working while the wall clock jumps.
The nemesis writes offsets such as "+30s" or "-5s" into that file; "+0" is the real time.
"""

from __future__ import annotations

from clusters.node import Node

RESET = "+0"


def offset_text(seconds: float) -> str:
    """libfaketime's relative offset syntax: "+30s", "-5s", "+0"."""
    if seconds == 0:
        return RESET
    return f"{seconds:+g}s"


def write_offset_argv(clock_file: str, offset: str) -> list[str]:
    """Replace the file atomically (libfaketime re-opens it on every call: never show it half-written)."""
    script = 'printf "%s\\n" "$2" > "$1.tmp" && mv -f "$1.tmp" "$1"'
    return ["sh", "-c", script, "sh", clock_file, offset]


def write_offset(node: Node, clock_file: str, offset: str) -> None:
    node.exec(write_offset_argv(clock_file, offset), timeout=15)
