"""Reading a history: stream it line by line, never loading it whole.

A torn last line (a crash mid-write) is the end of the history, with a warning; a malformed line
elsewhere is reported with its line number.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
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
