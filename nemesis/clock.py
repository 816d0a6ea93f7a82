"""Clock skew through libfaketime: a live offset file per node, read on every clock call.

The system under test starts each broker with the PyPI `libfaketime` library preloaded and
`FAKETIME_TIMESTAMP_FILE` pointing at a file of its own (`faketime_env` gives the environment);
`FAKETIME_NO_CACHE=1` makes every `time()`/`gettimeofday()` re-read the file, and monotonic clocks
stay real (`FAKETIME_DONT_FAKE_MONOTONIC=1`), so timers keep working while the wall clock jumps.
The nemesis writes offsets such as "+30s" or "-5s" into that file; "+0" is the real time.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from clusters.node import Node

RESET = "+0"


def library_path() -> str:
    """Absolute path of the libfaketime.so shipped in the `libfaketime` wheel."""
    import libfaketime

    return os.path.join(
        os.path.dirname(libfaketime.__file__), "vendor", "libfaketime", "src", "libfaketime.so.1"
    )


@runtime_checkable
class CarriesFaketime(Protocol):
    """A node whose backend installs its own libfaketime (docker image, ssh host software)."""

    faketime_library: str | None


def preload_library(node: object) -> str | None:
    """The libfaketime a broker on `node` preloads (None: not installed on it yet)."""
    if isinstance(node, CarriesFaketime):
        return node.faketime_library
    return library_path()  # a node that shares the controller's files (netns)


def faketime_env(clock_file: str, library: str | None = None) -> dict[str, str]:
    """The environment a broker is started with so that this nemesis can skew its wall clock."""
    return {
        "LD_PRELOAD": library or library_path(),
        "FAKETIME_TIMESTAMP_FILE": clock_file,
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "DONT_FAKE_MONOTONIC": "1",  # the spelling of libfaketime < 0.9.10
    }


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


def wall_clock_argv(python: str, clock_file: str, library: str | None = None) -> list[str]:
    """A command printing the wall clock as a process started like the broker sees it (for tests)."""
    env = [f"{k}={v}" for k, v in faketime_env(clock_file, library).items()]
    return ["env", *env, python, "-c", "import time; print(repr(time.time()))"]
