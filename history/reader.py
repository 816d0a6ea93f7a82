"""Reading a history: stream it line by line, never loading it whole.

A torn last line (a crash mid-write) is the end of the history, with a warning; a malformed line
elsewhere is reported with its line number.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

from history.format import HistoryError, ReadProblem, validate

log = logging.getLogger(__name__)


def iter_ops(
    path: str | os.PathLike[str], problems: list[ReadProblem] | None = None
) -> Iterator[dict[str, Any]]:
    """Stream the ops of a history. Bad lines are skipped and recorded in `problems`.

    With `problems=None`, a malformed line raises HistoryError (with its line number); a torn last
    line (no trailing newline, not valid JSON) is always tolerated with a warning.
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        line_no = 0
        for line in f:
            line_no += 1
            complete = line.endswith("\n")
            text = line.strip()
            if not text:
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as e:
                if not complete:
                    log.warning(
                        "%s:%d: torn last line ignored (controller crashed mid-write?)", path, line_no
                    )
                    if problems is not None:
                        problems.append(ReadProblem(line_no, "torn last line", torn_tail=True))
                    return
                reason = f"malformed JSON ({e.msg})"
                if problems is None:
                    raise HistoryError(path, line_no, reason) from None
                problems.append(ReadProblem(line_no, reason))
                continue
            reason_or_none = validate(record)
            if reason_or_none is not None:
                if problems is None:
                    raise HistoryError(path, line_no, reason_or_none)
                problems.append(ReadProblem(line_no, reason_or_none))
                continue
            yield record


def ops_at(
    path: str | os.PathLike[str], marks: list[tuple[int, int]], indices: Iterable[int]
) -> dict[int, dict[str, Any]]:
    """The ops of some indices, read where they are rather than by a pass: `marks` are (index, byte
    offset) of line starts in offset order, every few KiB of the history (the checkers' conversion
    notes them). Lines are read as `iter_ops` reads them (an unreadable one is skipped); an index
    the marks do not place (indices out of line order) is looked for by a pass over the history."""
    wanted = set(indices)
    found: dict[int, dict[str, Any]] = {}
    keys = [index for index, _ in marks]
    placed = all(a <= b for a, b in zip(keys, keys[1:], strict=False))
    if placed and marks:
        with open(path, "rb") as f:
            for index in sorted(wanted):
                if index in found:
                    continue
                k = max(0, bisect.bisect_right(keys, index) - 1)
                start = marks[k][1]
                end = marks[k + 1][1] if k + 1 < len(marks) else None
                f.seek(start)
                block = f.read(end - start) if end is not None else f.read()
                for raw in block.split(b"\n"):
                    op = _op_of(raw)
                    if op is not None and op["index"] in wanted:
                        found.setdefault(op["index"], op)
    missing = wanted - set(found)
    if missing:
        for op in iter_ops(path, problems=[]):
            if op["index"] in missing:
                found.setdefault(op["index"], op)
    return found


def _op_of(raw: bytes) -> dict[str, Any] | None:
    """One line as `iter_ops` reads it, or None when it would skip it."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    return record if validate(record) is None else None
