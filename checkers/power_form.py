"""Verdict power's tally (`checkers.power`) from the history's Parquet form, in the driver with Arrow.

The same events as `checkers.spark_power` (and `checkers.power_history`, the reference's pass),
counted from the form's columns without a Spark job: the form is already paired and coded, so a
tally is two streaming passes over six columns of `operations.parquet` (per kind and second: the
events' count, first and last time; then every event's time in the seconds where an interval of
the rule starts or ends, known once the load's end is) and one over four of `reads.parquet` (the
polls that returned a whole record). Memory stays bounded by a row group and a bit per line.
Spark's two jobs cost seconds of fixed cost even on a small history; these passes read a
1,000,000-operation form in well under a second. A transactional history keeps Spark's tally
(its transactions' events come from the micro-operations only Spark extracts).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers import cancelled, freed_memory
from checkers.parquet_schema import F_CODES, OUTCOME_CODES
from checkers.power import KINDS, NS, Asked, Tally, bound_load, cut_into, intervals
from history.faults import FaultWindow, fault_windows

_OK, _OPEN = OUTCOME_CODES.index("ok"), OUTCOME_CODES.index("open")
_F = {f: F_CODES.index(f) for f in ("send", "poll", "commit", "rebalance", "crash", "txn")}
INVOKED = "invoked"  # client invocations (the load's start)
ISSUED = "issued"  # send and transaction invocations (what the clients issued)
_COLUMNS = ["index", "f_code", "outcome_code", "time", "invoke_time", "offset"]


def column_ints(batch: pa.RecordBatch, name: str, missing: int) -> np.ndarray[Any, Any]:
    """A column as int64 numbers, nulls as `missing`."""
    return np.asarray(pc.fill_null(batch.column(name), missing).to_numpy(zero_copy_only=False), np.int64)


class WholeReads:
    """The completion indices of the polls that returned a whole record (topic-partition, offset
    and value), as one bit per history line between the first and the last of them: a poll is
    looked up in constant time and the set takes an eighth of a byte per line (a 100,000,000-line
    history's: 12 MB). A form whose indices are far apart (not a line's number) keeps them sorted
    instead, and looks each up by binary search."""

    def __init__(self, reads_path: str | Path) -> None:
        source = pq.ParquetFile(reads_path, pre_buffer=False)
        span = _index_span(source)
        self.low, self.high = span if span is not None else (0, -1)
        bitmap = span is not None and span[1] - span[0] <= BITS_PER_READ * max(1, source.metadata.num_rows)
        self.bits = np.zeros((self.high - self.low) // 8 + 1 if bitmap else 0, np.uint8)
        self.sorted: np.ndarray[Any, Any] | None = None if bitmap else np.empty(0, np.int64)
        found = []
        for batch in source.iter_batches(columns=["index", "tp", "offset", "value"]):
            cancelled.check()
            whole = pc.and_(
                pc.and_(pc.is_valid(batch.column("tp")), pc.is_valid(batch.column("offset"))),
                pc.and_(pc.is_valid(batch.column("value")), pc.is_valid(batch.column("index"))),
            )
            index = np.asarray(
                pc.filter(batch.column("index"), whole).to_numpy(zero_copy_only=False), np.int64
            )
            if self.sorted is None:
                at = index - self.low
                np.bitwise_or.at(self.bits, at >> 3, np.left_shift(1, at & 7).astype(np.uint8))
            else:
                found.append(np.unique(index))
        if self.sorted is not None and found:
            self.sorted = np.unique(np.concatenate(found))

    def among(self, values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Which of `values` (indices) are whole reads' polls."""
        if self.sorted is not None:
            if len(self.sorted) == 0:
                return np.zeros(len(values), bool)
            at = np.minimum(np.searchsorted(self.sorted, values), len(self.sorted) - 1)
            return np.asarray(self.sorted[at] == values)
        out = np.zeros(len(values), bool)
        inside = (values >= self.low) & (values <= self.high)
        at = values[inside] - self.low
        out[inside] = (self.bits[at >> 3] >> (at & 7)) & 1 == 1
        return out


# A bitmap is kept while it takes at most a byte per row of reads.parquet (8 lines per row).
BITS_PER_READ = 8


def _index_span(source: pq.ParquetFile) -> tuple[int, int] | None:
    """The smallest and the largest `index` of a reads file, by its row groups' statistics (None:
    no rows, or a group without them)."""
    meta = source.metadata
    low: int | None = None
    high: int | None = None
    column = source.schema_arrow.get_field_index("index")
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        low = int(stats.min) if low is None else min(low, int(stats.min))
        high = int(stats.max) if high is None else max(high, int(stats.max))
    return None if low is None or high is None else (low, high)


def touching(operations_path: str | Path, seconds: list[int]) -> list[int]:
    """The row groups of the operations whose `time` or `invoke_time` may fall in one of `seconds`
    (sorted), by the groups' min/max statistics (a group without them is read)."""
    meta = pq.ParquetFile(operations_path).metadata
    at = (
        {meta.row_group(0).column(j).path_in_schema: j for j in range(meta.num_columns)}
        if meta.num_row_groups
        else {}
    )
    out = []
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        for name in ("time", "invoke_time"):
            stats = group.column(at[name]).statistics
            if stats is None or not stats.has_min_max:
                out.append(i)
                break
            lo, hi = int(float(stats.min) / NS), int(float(stats.max) / NS)
            if bisect_left(seconds, lo) < bisect_right(seconds, hi):
                out.append(i)
                break
    return out


def _events(
    operations_path: str | Path, whole: WholeReads, groups: list[int] | None = None
) -> Iterator[dict[str, np.ndarray[Any, Any]]]:
    """Per batch of the operations (of `groups`, the row groups; None: all): each kind's (and
    INVOKED's, ISSUED's) event times in s."""
    # Not pre-buffered: a pre-buffering reader keeps every row group's columns it read until it ends
    # (at 30,000,000 operations some 300 MiB over the two files); this one holds a batch's.
    source = pq.ParquetFile(operations_path, pre_buffer=False)
    for batch in source.iter_batches(columns=_COLUMNS, row_groups=groups):
        cancelled.check()
        f = column_ints(batch, "f_code", -1)
        outcome = column_ints(batch, "outcome_code", -1)
        has_time = pc.is_valid(batch.column("time")).to_numpy(zero_copy_only=False)
        has_invoked = pc.is_valid(batch.column("invoke_time")).to_numpy(zero_copy_only=False)
        t = column_ints(batch, "time", 0).astype(np.float64) / NS
        invoked = column_ints(batch, "invoke_time", 0).astype(np.float64) / NS
        offset = column_ints(batch, "offset", -1)
        ok = outcome == _OK
        writes = (f == _F["send"]) | (f == _F["txn"])
        polls = (f == _F["poll"]) & ok
        returned = polls & batch.column("index").is_valid().to_numpy(zero_copy_only=False)
        returned[returned] = whole.among(column_ints(batch, "index", 0)[returned])
        yield {
            INVOKED: invoked[has_invoked],
            ISSUED: invoked[has_invoked & writes],
            "write": t[has_time & writes & (outcome >= 0) & (outcome < _OPEN)],
            "acked": t[has_time & (f == _F["send"]) & ok & (offset >= 0)],
            "read": t[has_time & returned],
            "commit": t[has_time & (f == _F["commit"]) & ok],
            "rebalance": t[has_time & (f == _F["rebalance"]) & ok],
            "crash": invoked[has_invoked & (f == _F["crash"])],
        }


def _per_second(times: np.ndarray[Any, Any], into: dict[int, tuple[int, float, float]]) -> None:
    """Add events' (count, first, last) by second (`int(t)`: toward zero, as Spark's cast)."""
    if len(times) == 0:
        return
    seconds = times.astype(np.int64)
    order = np.argsort(seconds, kind="stable")
    seconds, times = seconds[order], times[order]
    starts = np.flatnonzero(np.r_[True, seconds[1:] != seconds[:-1]])
    counts = np.diff(np.r_[starts, len(seconds)])
    lows, highs = np.minimum.reduceat(times, starts), np.maximum.reduceat(times, starts)
    for s, n, lo, hi in zip(
        seconds[starts].tolist(), counts.tolist(), lows.tolist(), highs.tolist(), strict=True
    ):
        if s in into:
            m, a, b = into[s]
            into[s] = (m + n, min(a, lo), max(b, hi))
        else:
            into[s] = (n, lo, hi)


def tally(
    operations_path: str | Path, reads_path: str | Path, nemesis: list[dict[str, Any]], asked: Asked
) -> tuple[Tally, list[FaultWindow]]:
    """The run's tally (see module docstring) and its fault windows (from the nemesis ops)."""
    whole = WholeReads(reads_path)
    out = Tally()
    starts: list[float] = []
    issued: list[float] = []
    for events in _events(operations_path, whole):
        if len(events[INVOKED]):
            starts.append(float(events[INVOKED].min()))
        if len(events[ISSUED]):
            issued.append(float(events[ISSUED].max()))
        for kind in KINDS:
            if len(events[kind]):
                _per_second(events[kind], out.per_second.setdefault(kind, {}))
    windows = fault_windows(nemesis)
    seconds = bound_load(out, starts, issued, windows, asked)
    if seconds:
        spans = intervals(windows, asked, out.load_start, out.load_end)
        cuts = np.asarray(sorted({x for span in spans if span.hi >= span.lo for x in (span.lo, span.hi)}))
        wanted = np.asarray(seconds, np.int64)
        for events in _events(operations_path, whole, touching(operations_path, seconds)):
            for kind in KINDS:
                times = events[kind]
                cut_into(times[np.isin(times.astype(np.int64), wanted)], cuts, out.exact.setdefault(kind, {}))
    for per_kind in out.exact.values():
        for values in per_kind.values():
            if isinstance(values, list):
                values.sort()
    freed_memory.release()  # what the passes' batches and arrays freed
    return out, windows
