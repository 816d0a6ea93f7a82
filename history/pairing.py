"""Operation pairing: an invocation and the next completion of the same process are one operation."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from history.format import NEMESIS_PROCESS, ReadProblem
from history.reader import iter_ops


@dataclass
class HistorySummary:
    """What a quick pass over a history knows: used to decide `unknown` before checking."""

    ops: int = 0
    problems: list[ReadProblem] = field(default_factory=list)
    open_invocations: dict[Any, int] = field(default_factory=dict)  # process -> index of invoke

    @property
    def complete(self) -> bool:
        return not self.problems


def pair_problems(path: str | os.PathLike[str]) -> HistorySummary:
    """Check the invoke/completion discipline: one op at a time per process, no orphan completion."""
    summary = HistorySummary()
    for op in iter_ops(path, problems=summary.problems):
        summary.ops += 1
        process = op["process"]
        if op["type"] == "invoke":
            if process in summary.open_invocations and process != NEMESIS_PROCESS:
                summary.problems.append(
                    ReadProblem(op["index"] + 1, f"process {process} invoked while its op is still open")
                )
            summary.open_invocations[process] = op["index"]
        else:
            if process not in summary.open_invocations and process != NEMESIS_PROCESS:
                summary.problems.append(
                    ReadProblem(op["index"] + 1, f"completion without invocation for process {process}")
                )
            summary.open_invocations.pop(process, None)
    return summary
