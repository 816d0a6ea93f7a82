"""The bench's driver peak is the checking process's own: a fresh process spawned by a big one (the
bench, after generating a long history) does not report its parent's peak as its own."""

from __future__ import annotations

import resource
import sys

from checkers.bench import measure

BIG = 384 << 20  # bytes the spawning process holds, then frees, before it spawns the child


def test_a_fresh_process_peak_is_not_its_parents() -> None:
    held = b"\x01" * BIG  # resident: bytes(...) writes every page
    del held
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 >= BIG
    code = (
        "import json, resource; from checkers.bench import own_peak; "
        "print(json.dumps({'own': own_peak(), 'maxrss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))"
    )
    figures = measure([sys.executable, "-c", code], "test")
    # Linux carries ru_maxrss over execve from the spawning process: the figure this guards against.
    assert figures["maxrss"] >= BIG
    assert figures["own"] < BIG // 2
