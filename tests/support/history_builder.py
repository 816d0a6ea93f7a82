"""Writing histories by hand, for tests: `b.send(0, 7, offset=3)`, `b.poll(1, [(3, 7)])` ...

`HistoryBuilder` appends ops with consecutive indices and growing times; `write_history` writes
ops as history.jsonl lines (the generator's `generate_ops` histories too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

MS = 1_000_000


class HistoryBuilder:
    """Appends ops with consecutive indices and growing times (1 ms apart unless told)."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.time = 0

    def op(self, **fields: Any) -> int:
        self.time += MS
        index = len(self.ops)
        self.ops.append({"index": index, "time": self.time, **fields})
        return index

    def advance(self, seconds: float) -> None:
        self.time += int(seconds * 1e9)

    def invoke_send(self, process: int, value: int, topic: str = "t0", partition: int = 0) -> int:
        return self.op(
            process=process, type="invoke", f="send", topic=topic, partition=partition, value=value
        )

    def complete_send(
        self,
        process: int,
        value: int,
        outcome: str = "ok",
        offset: int | None = None,
        topic: str = "t0",
        partition: int = 0,
    ) -> int:
        fields: dict[str, Any] = {"topic": topic, "partition": partition, "value": value}
        if outcome == "ok" and offset is not None:
            fields["offset"] = offset
        if outcome in ("fail", "info"):
            fields["error"] = "timed out" if outcome == "info" else "not leader"
        return self.op(process=process, type=outcome, f="send", **fields)

    def send(
        self,
        process: int,
        value: int,
        offset: int | None = None,
        outcome: str = "ok",
        topic: str = "t0",
        partition: int = 0,
    ) -> tuple[int, int]:
        invoke = self.invoke_send(process, value, topic, partition)
        return invoke, self.complete_send(process, value, outcome, offset, topic, partition)

    def invoke_poll(self, process: int) -> int:
        return self.op(process=process, type="invoke", f="poll")

    def complete_poll(
        self,
        process: int,
        records: Sequence[Any] = (),
        outcome: str = "ok",
        topic: str = "t0",
        partition: int = 0,
    ) -> int:
        """`records`: (offset, value) pairs on topic/partition, or full (topic, partition, offset, value)."""
        if outcome != "ok":
            return self.op(process=process, type=outcome, f="poll", error="timed out")
        listed = []
        for r in records:
            t, p, o, v = r if len(r) == 4 else (topic, partition, *r)
            listed.append({"topic": t, "partition": p, "offset": o, "value": v})
        return self.op(process=process, type="ok", f="poll", records=listed)

    def poll(
        self,
        process: int,
        records: Sequence[Any] = (),
        outcome: str = "ok",
        topic: str = "t0",
        partition: int = 0,
    ) -> tuple[int, int]:
        return self.invoke_poll(process), self.complete_poll(process, records, outcome, topic, partition)

    def assign(
        self,
        process: int,
        partitions: Sequence[tuple[str, int]] = (("t0", 0),),
        outcome: str = "ok",
        seek: str = "beginning",
        final: bool = False,
    ) -> tuple[int, int]:
        """`final`: the final drain's assign (its process's reads are the partitions' final logs)."""
        fields: dict[str, Any] = {"partitions": [list(tp) for tp in partitions], "seek": seek}
        if final:
            fields["final"] = True
        invoke = self.op(process=process, type="invoke", f="assign", **fields)
        return invoke, self.op(process=process, type=outcome, f="assign", **fields)

    def subscribe(self, process: int, group: str, topics: Sequence[str] = ("t0",)) -> tuple[int, int]:
        fields = {"group": group, "topics": list(topics)}
        invoke = self.op(process=process, type="invoke", f="subscribe", **fields)
        return invoke, self.op(process=process, type="ok", f="subscribe", **fields)

    def commit(
        self,
        process: int,
        group: str,
        offsets: Sequence[tuple[str, int, int]],
        outcome: str = "ok",
        mode: str = "explicit",
    ) -> tuple[int, int]:
        """`offsets`: (topic, partition, offset) triples."""
        listed = [{"topic": t, "partition": p, "offset": o} for t, p, o in offsets]
        fields: dict[str, Any] = {"group": group, "mode": mode, "offsets": listed}
        invoke = self.op(process=process, type="invoke", f="commit", **fields)
        extra = {"error": "commit failed"} if outcome != "ok" else {}
        return invoke, self.op(process=process, type=outcome, f="commit", **fields, **extra)

    def nemesis(self, f: str, value: Any = None, outcome: str = "ok") -> tuple[int, int]:
        invoke = self.op(process="nemesis", type="invoke", f=f, value=value)
        return invoke, self.op(process="nemesis", type=outcome, f=f, value=value)

    def write(self, path: str | Path) -> Path:
        return write_history(path, self.ops)


def write_history(path: str | Path, ops: list[dict[str, Any]]) -> Path:
    """Write ops as history.jsonl lines, re-numbering `index` in line order."""
    p = Path(path)
    with open(p, "w", encoding="utf-8") as f:
        for i, op in enumerate(ops):
            f.write(json.dumps({**op, "index": i}, separators=(",", ":")) + "\n")
    return p
