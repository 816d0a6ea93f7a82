"""The reference checker: pure Python, written to be read. It is the oracle the Spark engine matches.

It streams the history once (`history.reader.iter_ops`), keeping per-value and per-offset maps,
then judges with the rules of `checkers/rules/`, which the Spark engine evaluates too and
docs/checkers.md shows to users.

Terms
-----
* An *operation* is a client invocation plus its completion: the next non-invoke line of the same
  process (`history.pairing`, the one definition every reader shares). A completion with `f` = `crash` completes the open operation as `info`. An invocation
  that never completes is *open*; it counts as `info` (possibly happened). An invocation while the
  process's previous operation is open abandons that one (counted open; the history is `unpaired`),
  and a completion without an invocation is ignored (`unpaired`). Nemesis lines are ignored.
  Fields (`topic`, `partition`, `value`) of a send come from its invocation; `offset` from its `ok`.
* An *ack* is an `ok` send with an integer `offset` >= 0. An `ok` send without one (acks=0) counts
  as `info`: possibly written, never judged.
* A *read* is one record of an `ok` poll: (topic, partition, offset, value), with the poll's
  completion index and process. Records are taken in the order the poll lists them. A record
  without a string topic and integer partition, offset and value is skipped (malformed-op).
* A *sighting* of a value at a position (topic, partition, offset) is an ack or a read of it there;
  its index is the ack's completion index or the read's poll completion index. For each
  (value, position) the first sighting (smallest index) is kept, with its process.
* The *status* of a value is the best outcome over all send operations that carried it
  (ok > info = open > fail). A value no send invocation carried has no status.
* `max_read(tp)` is the largest offset of any read of topic-partition tp; `max_read_index(tp)` the
  smallest poll index that read tp at that offset.

Rules: each anomaly's rule is its module's under `checkers/rules/` (record, rule in prose, its
classification of one row); this pass builds the rows (`checkers.rules.rows`: linked reads and
acks, never-read acks, sighted values and positions, commits and the final log's positions for the
consumer groups, transactions) and evaluates every rule of each row's kind on them
(`checkers.classify`).

* The *final log* of a partition (group-skip): the positions (tp, o) read by the final drain, i.e.
  by processes with an `assign` invocation marked `final: true`, each holding the value of its
  first such read; a history without a marked drain takes every process's reads instead.
* A process is a *member* of group G from its `subscribe` invocation with `group` = G; a *commit*
  of G is an `ok` commit operation of a member (a commit or subscribe without a string group or
  well-formed offsets is ignored); G *returned* a value when any member's read returned it.
* A process's poll *position* on tp is its last read of tp; it is forgotten, for every tp, at each
  `assign` invocation and at each poll that completes `info` or stays open.

Examples: of each anomaly, the `MAX_EXAMPLES` smallest by the catalogue's `order` fields.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeGuard

from checkers import txn_checks
from checkers.catalogue import (
    HISTORY_ANOMALIES,
    MEMBER_COUNTED,
    EngineResult,
    EngineStats,
    OutcomeCounts,
    empty_stats,
)
from checkers.classify import Examples, classify
from checkers.rules import lost_write
from checkers.rules.rows import (
    CommitFloor,
    FinalPosition,
    FirstRead,
    LinkedAck,
    LinkedRead,
    NeverReadAck,
    PositionValues,
    SightedPosition,
    SightedValue,
    ValuePositions,
)
from checkers.txn_checks import TxnRecord
from history.format import NEMESIS_PROCESS, ReadProblem
from history.pairing import CRASH, OPEN, Pairing, ProcessLinks, outcome_of
from history.reader import iter_ops
from history.txn import TXN, read_records
from history.txn import writes as txn_writes

log = logging.getLogger(__name__)

# Status ranks of a value: the best outcome over its send operations.
FAIL, INFO, OK = 0, 1, 2
PENDING = -1  # invoked, not completed yet
_RANK = {"fail": FAIL, "info": INFO, "ok": OK}

Position = tuple[str, int, int]  # topic, partition, offset
TopicPartition = tuple[str, int]


class FirstSightings:
    """key -> {item: (index, process)} of the first sighting, compact while a key has one item."""

    def __init__(self) -> None:
        self._one: dict[Any, tuple[Any, int, Any]] = {}
        self._many: dict[Any, dict[Any, tuple[int, Any]]] = {}

    def add(self, key: Any, item: Any, index: int, process: Any) -> None:
        many = self._many.get(key)
        if many is not None:
            if item not in many or index < many[item][0]:
                many[item] = (index, process)
            return
        one = self._one.get(key)
        if one is None:
            self._one[key] = (item, index, process)
        elif one[0] == item:
            if index < one[1]:
                self._one[key] = (item, index, process)
        else:
            del self._one[key]
            self._many[key] = {one[0]: (one[1], one[2]), item: (index, process)}

    def multiple(self) -> dict[Any, dict[Any, tuple[int, Any]]]:
        """Keys seen with two or more distinct items."""
        return self._many

    def smallest(self) -> dict[Any, Any]:
        """Every key with the smallest item it was seen with."""
        out = {key: one[0] for key, one in self._one.items()}
        out.update({key: min(many) for key, many in self._many.items()})
        return out


def _is_int(x: Any) -> TypeGuard[int]:
    """An integer, and not a bool."""
    return type(x) is int


class _Checker:
    """The state of one streaming pass; `run()` returns the EngineResult."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self.stats: EngineStats = empty_stats()
        self.problems: list[ReadProblem] = []
        self.incomplete: list[str] = []
        self.found = {name: Examples(name) for name in HISTORY_ANOMALIES}
        self.by_members = dict.fromkeys(MEMBER_COUNTED, 0)  # poll anomalies of group members
        self.wr_only = 0  # G1c components holding a cycle of wr edges alone
        self.pairing = Pairing()  # each process's open invocation (history.pairing: the one rule)
        # value -> [rank, first fail index, its process, bits of the outcomes its sends had]
        self.status: dict[int, list[Any]] = {}
        self.acks: list[tuple[int, int, Any, str, int, int, int, int]] = []
        self.first_read: dict[int, tuple[int, int, Any, str, int, int]] = {}  # value -> (index, pos, ...)
        self.positions_of_value = FirstSightings()  # value -> {position: first sighting}
        self.values_at_position = FirstSightings()  # position -> {value: first sighting}
        self.max_read: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (offset, smallest index)
        self.poll_position: ProcessLinks[tuple[int, int]] = ProcessLinks()  # -> (offset, index) read
        self.last_ack: ProcessLinks[tuple[int, int, int]] = ProcessLinks()  # -> (offset, index, value)
        # Consumer groups: a member's group; values each group returned; ok commits per (group, tp)
        # in completion order; the greatest ok commit so far, and its snapshot at each invocation.
        self.group_of: dict[Any, str] = {}
        self.group_returned: dict[str, set[int]] = defaultdict(set)
        self.first_read_at: dict[Position, tuple[int, Any, int]] = {}  # position -> (index, process, value)
        self.final_readers: set[Any] = set()  # the final drain's processes (`final: true` assigns)
        self.final_read_at: dict[Position, tuple[int, Any, int]] = {}  # as first_read_at, theirs only
        self.commits: dict[tuple[str, str, int], list[tuple[int, Any, int]]] = defaultdict(list)
        self.committed: dict[tuple[str, str, int], tuple[int, int]] = {}  # -> (offset, index)
        self.commit_floor: dict[int, dict[tuple[str, str, int], tuple[int, int]]] = {}
        self.malformed_count = 0
        self.first_malformed: tuple[int, str] | None = None
        self.txns: list[TxnRecord] = []
        # reads linked to their process's previous read of the partition (but the next offset's),
        # judged at the end (a transactional history skips markers): each with whether its process
        # was a group member
        self.linked_reads: list[tuple[LinkedRead[Any], bool]] = []

    # --- streaming -------------------------------------------------------------------------------

    def run(self) -> EngineResult:
        for op in iter_ops(self.path, problems=self.problems):
            self.stats["ops"] += 1
            process = op["process"]
            if process == NEMESIS_PROCESS:
                continue
            if op["type"] == "invoke":
                self._invoke(process, op)
            else:
                self._complete(process, op)
        self._finish_open_ops()
        lost = self._judge_acks_and_reads()
        self._judge_linked_reads()
        self._judge_groups()
        if self.txns:
            read_values = set(self.first_read)
            position_value = self.values_at_position.smallest()
            for name, result in txn_checks.judge(self.txns, read_values, lost, position_value).items():
                self.found[name].count = result["count"]
                self.found[name].add_all(result["examples"])
                if "wr_only" in result:
                    self.wr_only = result["wr_only"]
        self._describe_problems()
        anomalies = {name: ex.result() for name, ex in self.found.items()}
        for name, members in self.by_members.items():
            anomalies[name]["members"] = members
        anomalies["G1c"]["wr_only"] = self.wr_only
        return {"anomalies": anomalies, "stats": self.stats, "incomplete": self.incomplete}

    def _invoke(self, process: Any, op: dict[str, Any]) -> None:
        previous = self.pairing.invoke(op)
        if previous is not None:
            self._close(process, previous, OPEN)
        if op["f"] == "assign":
            self.poll_position.forget(process)
            if op.get("final") is True:
                self.final_readers.add(process)
        elif op["f"] == "subscribe":
            group = op.get("group")
            if isinstance(group, str):  # else ignored, as the Spark engine ignores it
                self.group_of[process] = group
        elif op["f"] == "commit":
            self._invoke_commit(process, op)
        elif op["f"] == "send":
            value = op.get("value")
            if not _is_int(value):
                self._malformed(op["index"], "send without an integer value")
                return
            self.status.setdefault(value, [PENDING, None, None, 0])
        elif op["f"] == TXN:
            for write in txn_writes(op, None):
                self.status.setdefault(write.value, [PENDING, None, None, 0])

    def _complete(self, process: Any, op: dict[str, Any]) -> None:
        invocation = self.pairing.complete(op)
        if invocation is not None:
            self._close(process, invocation, outcome_of(op), op)

    def _close(
        self, process: Any, invocation: dict[str, Any], outcome: str, completion: dict[str, Any] | None = None
    ) -> None:
        """Account for one finished (or abandoned: outcome 'open') operation."""
        f = invocation["f"]
        counts: OutcomeCounts | None = {
            "send": self.stats["sends"],
            "poll": self.stats["polls"],
            "assign": self.stats["assigns"],
            TXN: self.stats["txns"],
        }.get(f)
        if counts is not None:
            counts[outcome] += 1  # type: ignore[literal-required]
        if f == "commit":
            floor = self.commit_floor.pop(invocation["index"], None)
            if outcome == "ok" and completion is not None and floor is not None:
                self._commit_ok(process, invocation, completion["index"], floor)
        if f == "send":
            self._close_send(process, invocation, outcome, completion)
        elif f == TXN:
            self._close_txn(process, invocation, outcome, completion)
        elif f == "poll":
            if outcome == "ok" and completion is not None:
                self._reads(process, completion, completion.get("records") or [])
            elif outcome in ("info", OPEN):
                self.poll_position.forget(process)

    def _close_send(
        self, process: Any, invocation: dict[str, Any], outcome: str, completion: dict[str, Any] | None
    ) -> None:
        value = invocation.get("value")
        if not _is_int(value):
            return
        offset = completion.get("offset") if completion is not None else None
        acked = outcome == "ok" and _is_int(offset) and offset >= 0
        rank = INFO if outcome in ("info", "open") or (outcome == "ok" and not acked) else _RANK[outcome]
        self._status(value, rank, completion, process)
        if not acked or not _is_int(offset) or completion is None:
            return
        topic, partition = invocation.get("topic"), invocation.get("partition")
        if not isinstance(topic, str) or not _is_int(partition):
            self._malformed(completion["index"], "ok send without a topic and integer partition")
            return
        index = completion["index"]
        self._ack(
            index, invocation["index"], process, topic, partition, offset, value, int(completion["time"])
        )
        previous = self.last_ack.link(process, (topic, partition), (offset, index, value))
        if previous is not None:
            prev_offset, prev_index, prev_value = previous
            row = LinkedAck(
                index, process, topic, partition, offset, value, prev_index, prev_offset, prev_value
            )
            classify(self.found, LinkedAck, row)

    def _status(self, value: int, rank: int, completion: dict[str, Any] | None, process: Any) -> None:
        """Fold one send's outcome into its value's status (the best over its sends)."""
        status = self.status.setdefault(value, [PENDING, None, None, 0])
        if rank == FAIL and status[0] in (PENDING, FAIL):
            assert completion is not None
            if status[1] is None or completion["index"] < status[1]:
                status[1], status[2] = completion["index"], process
        status[0] = rank if status[0] == PENDING else max(status[0], rank)
        status[3] |= 1 << rank

    def _ack(
        self,
        index: int,
        invoke_index: int,
        process: Any,
        topic: str,
        partition: int,
        offset: int,
        value: int,
        time_ns: int,
    ) -> None:
        """An acknowledged write (a single send's, or a committed transaction's): judged for
        lost-write and unseen, and a sighting of its value at its position."""
        self.stats["acked"] += 1
        self.acks.append((index, invoke_index, process, topic, partition, offset, value, time_ns))
        position = (topic, partition, offset)
        self.positions_of_value.add(value, position, index, process)
        self.values_at_position.add(position, value, index, process)

    def _close_txn(
        self, process: Any, invocation: dict[str, Any], outcome: str, completion: dict[str, Any] | None
    ) -> None:
        """A transaction: its sends count as sends with its outcome (acknowledged when it committed
        and the send got an offset), its polls' records as reads (of no poll position)."""
        index = completion["index"] if completion is not None else invocation["index"]
        writes = txn_writes(invocation, completion)
        for w in writes:
            acked = outcome == "ok" and w.offset is not None
            rank = FAIL if outcome == "fail" else OK if acked else INFO
            self._status(w.value, rank, completion, process)
            if acked and completion is not None:
                assert w.offset is not None
                self._ack(
                    index, invocation["index"], process, w.topic, w.partition, w.offset, w.value,
                    int(completion["time"]),
                )  # fmt: skip
        txn = TxnRecord(index, process, outcome, writes)
        if completion is not None:
            self._reads(process, completion, read_records(completion), txn)
        self.txns.append(txn)

    def _commit_offsets(self, op: dict[str, Any]) -> list[tuple[str, int, int]] | None:
        offsets = op.get("offsets")
        if not isinstance(offsets, list):
            return None
        result = []
        for entry in offsets:
            if type(entry) is not dict:
                return None
            topic, partition, offset = entry.get("topic"), entry.get("partition"), entry.get("offset")
            if not (type(topic) is str and type(partition) is int and type(offset) is int):
                return None
            result.append((topic, partition, offset))
        return result

    def _invoke_commit(self, process: Any, op: dict[str, Any]) -> None:
        """Remember what the group had committed when this commit began (its floor)."""
        group = op.get("group")
        offsets = self._commit_offsets(op)
        if not isinstance(group, str) or offsets is None:
            return  # ignored, as the Spark engine ignores it
        floor = {}
        for topic, partition, _ in offsets:
            key = (group, topic, partition)
            if key in self.committed:
                floor[key] = self.committed[key]
        self.commit_floor[op["index"]] = floor

    def _commit_ok(
        self,
        process: Any,
        invocation: dict[str, Any],
        index: int,
        floor: dict[tuple[str, str, int], tuple[int, int]],
    ) -> None:
        group = invocation["group"]
        for topic, partition, offset in self._commit_offsets(invocation) or []:
            key = (group, topic, partition)
            self.commits[key].append((index, process, offset))
            below = floor.get(key)
            if below is not None:
                row = CommitFloor(index, process, group, topic, partition, offset, below[1], below[0])
                classify(self.found, CommitFloor, row)
            best = self.committed.get(key)
            if best is None or offset > best[0]:
                self.committed[key] = (offset, index)

    def _reads(
        self, process: Any, completion: dict[str, Any], records: Any, txn: TxnRecord | None = None
    ) -> None:
        """The records a poll (or a transaction's polls, `txn`) returned. A transaction's reads are
        sightings and reads like any, but they move no poll position and no group's reads."""
        index = completion["index"]
        if not isinstance(records, list):
            self._malformed(index, "ok poll whose records are not a list")
            return
        for list_pos, record in enumerate(records):
            if type(record) is not dict:
                self._malformed(index, "poll record that is not an object")
                continue
            topic, partition = record.get("topic"), record.get("partition")
            offset, value = record.get("offset"), record.get("value")
            # (type(x) is int: an integer, and not a bool)
            if not (
                type(topic) is str and type(partition) is int and type(offset) is int and type(value) is int
            ):
                self._malformed(index, "poll record without topic, partition, offset and value")
                continue
            self.stats["records_read"] += 1
            if value not in self.first_read:
                self.first_read[value] = (index, list_pos, process, topic, partition, offset)
            position = (topic, partition, offset)
            self.positions_of_value.add(value, position, index, process)
            self.values_at_position.add(position, value, index, process)
            tp = (topic, partition)
            best = self.max_read.get(tp)
            if best is None or offset > best[0] or (offset == best[0] and index < best[1]):
                self.max_read[tp] = (offset, index)
            if txn is not None:
                txn.reads.append((topic, partition, offset, value))
                continue
            group = self.group_of.get(process)
            if group is not None:
                self.group_returned[group].add(value)
            if (topic, partition, offset) not in self.first_read_at:
                self.first_read_at[(topic, partition, offset)] = (index, process, value)
            if process in self.final_readers and (topic, partition, offset) not in self.final_read_at:
                self.final_read_at[(topic, partition, offset)] = (index, process, value)
            previous = self.poll_position.link(process, tp, (offset, index))
            # A read right after its previous one (the next offset) is the normal case: no row.
            if previous is not None and offset != previous[0] + 1:
                prev_offset, prev_index = previous
                row = LinkedRead(index, process, topic, partition, offset, prev_offset, prev_index, None)
                self.linked_reads.append((row, group is not None))

    def _malformed(self, index: int, reason: str) -> None:
        self.malformed_count += 1
        if self.first_malformed is None:
            self.first_malformed = (index, reason)

    def _finish_open_ops(self) -> None:
        still = self.pairing.close_open()
        self.still_open = sorted((op["index"], p, op["f"]) for p, op in still)
        for process, op in still:
            self._close(process, op, OPEN)
        for status in self.status.values():
            if status[0] == PENDING:
                status[0] = INFO
                status[3] |= 1 << INFO

    # --- judging ---------------------------------------------------------------------------------

    def _judge_linked_reads(self) -> None:
        """The linked reads' rules (poll-skip, nonmonotonic-poll), with each row's `skipped`: in a
        history with transactions, offsets have gaps where no client record is (transaction
        markers, aborted records, which read_committed consumers pass over): there only the
        records sighted anywhere strictly between the two reads count."""
        sighted: dict[TopicPartition, list[int]] = defaultdict(list)
        if self.txns:
            for topic, partition, offset in self.values_at_position.smallest():
                sighted[(topic, partition)].append(offset)
            for offsets in sighted.values():
                offsets.sort()
        for row, member in self.linked_reads:
            skipped = row.offset - row.prev_offset - 1
            if self.txns:
                offsets = sighted[(row.topic, row.partition)]
                skipped = bisect.bisect_left(offsets, row.offset) - bisect.bisect_right(
                    offsets, row.prev_offset
                )
            for name in classify(self.found, LinkedRead, replace(row, skipped=skipped)):
                if name in self.by_members:
                    self.by_members[name] += member

    def _judge_acks_and_reads(self) -> set[int]:
        """lost-write, unseen, phantom, aborted-read, duplicate, inconsistent-offsets; returns the
        values of the lost-writes."""
        lost_values: set[int] = set()
        lost_by_second: dict[str, int] = defaultdict(int)
        for index, invoke_index, process, topic, partition, offset, value, time_ns in self.acks:
            if value in self.first_read:
                continue
            best = self.max_read.get((topic, partition))
            row = NeverReadAck(
                index, invoke_index, process, topic, partition, offset, value,
                best[0] if best else None, best[1] if best else None,
            )  # fmt: skip
            if lost_write.RULE.name in classify(self.found, NeverReadAck, row):
                lost_by_second[str(time_ns // 1_000_000_000)] += 1
                lost_values.add(value)
        self.stats["lost_by_second"] = dict(sorted(lost_by_second.items(), key=lambda kv: int(kv[0])))

        several = self.positions_of_value.multiple()
        for value in {**self.status, **self.first_read, **several}:
            status = self.status.get(value)
            bits = status[3] if status is not None else 0
            sighted = SightedValue(
                value in self.first_read,
                bits & 1 << FAIL != 0,
                bits & 1 << INFO != 0,
                bits & 1 << OK != 0,
                value in several,
            )
            classify(self.found, SightedValue, sighted, self._value_examples(value, status, several))

        for (topic, partition, offset), values in self.values_at_position.multiple().items():  # type: ignore[misc]
            shown = sorted(
                ({"value": v, "index": i, "process": proc} for v, (i, proc) in values.items()),
                key=lambda d: d["value"],
            )
            source = PositionValues(min(d["index"] for d in shown), topic, partition, offset, shown)
            classify(self.found, SightedPosition, SightedPosition(True), {PositionValues: lambda s=source: s})
        return lost_values

    def _value_examples(
        self, value: int, status: list[Any] | None, several: dict[Any, dict[Any, tuple[int, Any]]]
    ) -> dict[type, Any]:
        """The example rows of a value's rules, built when a rule holds: its first read (and first
        failed send), and its positions."""

        def first_read() -> FirstRead[Any]:
            index, _list_pos, process, topic, partition, offset = self.first_read[value]
            fail_index, fail_process = (status[1], status[2]) if status is not None else (None, None)
            return FirstRead(index, process, topic, partition, offset, value, fail_index, fail_process)

        def positions() -> ValuePositions[Any]:
            listed = sorted(
                (
                    {"topic": t, "partition": p, "offset": o, "index": i, "process": proc}
                    for (t, p, o), (i, proc) in several[value].items()
                ),
                key=lambda d: (d["topic"], d["partition"], d["offset"]),
            )
            return ValuePositions(min(d["index"] for d in listed), value, listed)

        return {FirstRead: first_read, ValuePositions: positions}

    def _judge_groups(self) -> None:
        """group-skip: positions below a group's commits whose value no member of the group returned."""
        by_tp: dict[TopicPartition, list[tuple[int, int, Any, int]]] = defaultdict(list)
        final_log = self.final_read_at if self.final_readers else self.first_read_at
        for (topic, partition, offset), (index, process, value) in final_log.items():
            by_tp[(topic, partition)].append((offset, index, process, value))
        for (group, topic, partition), commits in self.commits.items():
            returned = self.group_returned.get(group, set())
            # The first commit (by completion index) past each offset: a running maximum.
            past: list[tuple[int, int, Any]] = []  # (offset, index, process), offsets increasing
            for index, process, offset in sorted(commits, key=lambda c: c[0]):
                if not past or offset > past[-1][0]:
                    past.append((offset, index, process))
            past_offsets = [c[0] for c in past]
            for offset, read_index, read_process, value in by_tp.get((topic, partition), []):
                step = bisect.bisect_right(past_offsets, offset)
                past_it: tuple[Any, ...] = past[step] if step < len(past) else (None, None, None)
                committed_offset, index, process = past_it
                row = FinalPosition(
                    index, process, group, topic, partition, offset, value, committed_offset,
                    read_index, read_process, value in returned,
                )  # fmt: skip
                classify(self.found, FinalPosition, row)

    def _describe_problems(self) -> None:
        torn = [p for p in self.problems if p.torn_tail]
        bad = [p for p in self.problems if not p.torn_tail]
        if torn:
            self.incomplete.append(
                f"torn-tail: the history ends with a torn line (line {torn[0].line_no}): the run was cut short"
            )
        if bad:
            self.incomplete.append(
                f"malformed-line: {len(bad)} unreadable history line(s) (first: line {bad[0].line_no}: {bad[0].reason})"
            )
        if self.still_open:
            index, process, f = self.still_open[0]
            self.incomplete.append(
                f"open-invocation: {len(self.still_open)} client operation(s) never completed "
                f"(first: index {index}, process {process}, {f})"
            )
        superseded = self.pairing.superseded
        if superseded:
            index, process, previous = superseded[0]
            self.incomplete.append(
                f"unpaired: {len(superseded)} invocation(s) while the process's previous one was open "
                f"(first: index {index}, process {process}, open since index {previous})"
            )
        # A crash of a process with nothing open completes nothing: not a pairing problem.
        orphans = [op["index"] for op in self.pairing.orphans if op["f"] != CRASH]
        if orphans:
            self.incomplete.append(
                f"unpaired: {len(orphans)} completion(s) without an invocation (first: index {orphans[0]})"
            )
        if self.first_malformed is not None:
            index, reason = self.first_malformed
            self.incomplete.append(
                f"malformed-op: {self.malformed_count} malformed operation(s) (first: index {index}: {reason})"
            )


def check_history(history_path: str | os.PathLike[str] | Path, **options: Any) -> EngineResult:
    """Check one history file; `options` are accepted for engine compatibility and ignored."""
    if options:
        log.debug("reference checker ignores options %s", sorted(options))
    return _Checker(history_path).run()
