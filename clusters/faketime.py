"""The clock faults' preload: a broker started under libfaketime reads its wall-clock offset from
a file of its own (`clock_file`) that the clock nemesis rewrites; monotonic clocks stay real so
timeouts and timed waits keep working. Only tests with clock faults (`wants_clock`) pay for it.
"""

from __future__ import annotations

from pathlib import Path

from clusters.node import CarriesFaketime, Node
from foundation.config import TestConfig, fault_names

CLOCK_UNSKEWED = "+0\n"  # libfaketime's offset syntax: "+0", "+5s", "-2m" ...
# The faults that move a broker's wall clock (nemesis.packages.clockskew; `skew` is an alias).
CLOCK_FAULTS = frozenset({"clock", "clock-bump", "clock-strobe", "clock-reset", "skew"})


def faketime_library() -> str:
    """The libfaketime shipped by the PyPI `libfaketime` package (built to work with Python)."""
    import libfaketime

    return str(Path(libfaketime.__file__).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1")


def preload_library(node: Node) -> str | None:
    """The libfaketime a broker on `node` preloads (None: not installed on it yet)."""
    if isinstance(node, CarriesFaketime):
        return node.faketime_library
    return faketime_library()  # a node that shares the controller's files (netns)


def faketime_env(clock_file: str, library: str | None = None) -> dict[str, str]:
    """Environment that fakes the wall clock from `clock_file` and leaves monotonic clocks real."""
    return {
        "LD_PRELOAD": library or faketime_library(),
        "FAKETIME_TIMESTAMP_FILE": clock_file,
        "FAKETIME_NO_CACHE": "1",  # re-read the file on every call: a skew applies at once
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "DONT_FAKE_MONOTONIC": "1",  # the older spelling, for older libfaketime builds
    }


def wants_clock(config: TestConfig) -> bool:
    """Does this test skew clocks (`--nemesis all` may)? Only then do brokers run under libfaketime.

    The preload is not free: with FAKETIME_NO_CACHE it re-reads the offset file on every wall-clock
    read and on every timed condition wait, including each wait of Python's GIL, and it reads it
    while holding the GIL's mutex. A broker thread preempted in that read holds up every thread of
    the broker; on a busy machine fault-free runs stalled for seconds (docs/workloads.md, "Rate").
    """
    names = fault_names(config)
    return bool(names & (CLOCK_FAULTS | {"all"})) or any(s.get("do") in CLOCK_FAULTS for s in config.schedule)
