"""Histories for the verdict power's agreement tests (both engines' tallies against the reference's)."""

from __future__ import annotations

from tests.support.history_builder import HistoryBuilder


def grouped(b: HistoryBuilder) -> None:
    """Groups, a silent window, events a few ms around window ends, a restart that serves again
    (`ready`) after its heal, a crash, the final drain."""
    b.subscribe(1, "g")
    for second in range(6):
        b.send(0, second, offset=second)
        b.poll(1, [(second, second)])
        b.commit(1, "g", [("t0", 0, second + 1)])
        b.op(process=1, type="invoke", f="rebalance", group="g", revoked=[], assigned=[["t0", 0]])
        b.op(process=1, type="ok", f="rebalance", group="g", revoked=[], assigned=[["t0", 0]])
        if second == 2:
            b.nemesis("kill", {"nodes": ["n2"], "fault_id": "kill-1"})
        if second == 3:
            b.nemesis("start", {"nodes": ["n2"], "fault_id": "kill-1"})
            b.op(process="nemesis", type="invoke", f="ready", value={"fault_id": "kill-1", "nodes": ["n2"]})
        if second == 4:  # its broker serves again a second after its start: recovery counts from here
            b.op(process="nemesis", type="ok", f="ready", value={"fault_id": "kill-1", "nodes": ["n2"]})
        b.advance(1.0)
    b.nemesis("pause", {"nodes": ["n1"], "fault_id": "pause-2"})
    b.advance(3.0)  # silent
    b.nemesis("resume", {"nodes": ["n1"], "fault_id": "pause-2"})
    b.op(process=5, type="invoke", f="crash")
    b.op(process=5, type="info", f="crash", error="killed")
    b.send(0, 99, offset=6)
    b.assign(9, final=True)
    b.poll(9, [(o, o) for o in range(6)])
