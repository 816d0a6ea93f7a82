"""The conversion's pipeline: parse chunks (one thread), pair and link them (this one), write Parquet
(a third; Arrow releases the GIL), so parsing, pairing and writing overlap."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers import parquet_native
from checkers.parquet_figures import Figures
from checkers.parquet_lines import Chunk, chunks, line_marks, parse_fast, parse_slow
from checkers.parquet_links import Links, TopicIds, tp_of, with_columns
from checkers.parquet_native import NativePairing
from checkers.parquet_pairing import ChunkPairing, Orphans
from checkers.parquet_schema import F_CODES, NEMESIS_SENTINEL, OPERATIONS_SCHEMA, OUTCOME_CODES, READS_SCHEMA
from checkers.timeline import POINTS, LatencySample, Point
from history.format import ReadProblem


class PerProcess(Orphans, Protocol):
    """The conversion's sequential, per-process work, carried from chunk to chunk: the pairing, each
    ack's and each read's link to its process's previous one, each ok send's predecessor in time.
    The native crate's where it was built (`parquet_native.NativePairing`), else Arrow's
    (`ArrowPairing`); both give the same rows in the same order."""

    @property
    def ok_sends_in_order(self) -> bool: ...

    def feed(
        self, lines: pa.Table, topic_ids: pa.Array, tp: pa.Array, topics: pa.Array
    ) -> tuple[pa.Table, pa.Array, pa.Array]:
        """(operations completed or superseded, linked; per line: are its records reads; per line:
        its process's position epoch)."""
        ...

    def link_reads(self, reads: pa.Table) -> dict[str, pa.Array]:
        """Each well-formed read's prev_offset and prev_index."""
        ...

    def finish(self, topics: pa.Array) -> pa.Table:
        """The invocations still open at the end of the history."""
        ...


class ArrowPairing:
    """`PerProcess` over Arrow arrays: `ChunkPairing`, then `link_acks` and `link_ok_sends`; the
    reads' `Links`."""

    def __init__(self) -> None:
        self.pairing = ChunkPairing()
        self.acks = Links(("index", "offset", "value"))
        self.reads = Links(("offset", "index"))
        # The last ok send's completion time so far, and whether those times never went back.
        self.last_ok_time: int | None = None
        self.ok_sends_in_order = True

    @property
    def orphans(self) -> int:
        return self.pairing.orphans

    @property
    def first_orphan(self) -> int | None:
        return self.pairing.first_orphan

    def feed(
        self, lines: pa.Table, topic_ids: pa.Array, tp: pa.Array, topics: pa.Array
    ) -> tuple[pa.Table, pa.Array, pa.Array]:
        operations, reads_ok, epoch = self.pairing.feed(lines, tp)
        return link_ok_sends(link_acks(operations, self), self), reads_ok, epoch

    def link_reads(self, reads: pa.Table) -> dict[str, pa.Array]:
        # Well-formed reads move the process's position (malformed records are skipped).
        tp, offset, value = (reads.column(name) for name in ("tp", "offset", "value"))
        return self.reads.feed(
            reads, pc.and_(pc.and_(pc.is_valid(tp), pc.is_valid(offset)), pc.is_valid(value))
        )

    def finish(self, topics: pa.Array) -> pa.Table:
        return self.pairing.finish()


class ConversionState:
    """Everything carried from chunk to chunk while converting."""

    def __init__(self) -> None:
        self.per_process: PerProcess = NativePairing() if parquet_native.available() else ArrowPairing()
        self.topics = TopicIds()
        self.latency = LatencySample()  # the report's latency sample (checkers.timeline)


_SEND, _OK, _OPEN = F_CODES.index("send"), OUTCOME_CODES.index("ok"), OUTCOME_CODES.index("open")


def sample_latencies(operations: pa.Table, sample: LatencySample) -> None:
    """The chunk's completed sends, in the order of their completions, into the latency sample."""
    send = pc.fill_null(
        pc.and_(
            pc.equal(operations.column("f_code"), _SEND),
            pc.less(operations.column("outcome_code"), _OPEN),
        ),
        False,
    )
    sends = operations.filter(send).select(["index", "time", "invoke_time", "outcome_code"])
    if sends.num_rows == 0:
        return
    sends = sends.take(pc.sort_indices(sends.column("index")))
    ok = pc.equal(sends.column("outcome_code"), _OK)
    done = sends.filter(ok)
    sample.add_ok(done.column("time").to_numpy(), done.column("invoke_time").to_numpy())
    others = sends.filter(pc.invert(ok))
    if others.num_rows and len(sample.other) < POINTS:
        codes = others.column("outcome_code").to_pylist()
        sample.add_others(
            others.column("time").to_numpy(),
            others.column("invoke_time").to_numpy(),
            [OUTCOME_CODES[c] for c in codes],
        )


def link_ok_sends(operations: pa.Table, state: ArrowPairing) -> pa.Table:
    """Each ok send with the completion time of the ok send before it in history order
    (`prev_ok_time`): the statistics' longest gaps without an ok send, summed up without sorting."""
    ok = pc.fill_null(
        pc.and_(
            pc.equal(operations.column("f_code"), _SEND), pc.equal(operations.column("outcome_code"), _OK)
        ),
        False,
    )
    at = pc.indices_nonzero(ok)  # the ok sends' rows, in table order
    if len(at) == 0:
        return operations
    order = pc.sort_indices(pc.take(operations.column("index"), at))  # by completion index
    times = pc.take(operations.column("time"), pc.take(at, order)).combine_chunks()
    before = pa.array([state.last_ok_time], pa.int64())
    prev = pa.concat_arrays([before, times.slice(0, len(times) - 1)])
    went_back = pc.any(pc.less(times, pc.fill_null(prev, times))).as_py()
    if went_back or times.null_count:
        state.ok_sends_in_order = False
    state.last_ok_time = times[len(times) - 1].as_py()
    # Back to table order: the j-th ok row (in table order) is number rank[j] in completion order.
    rank = pc.sort_indices(order)
    prev_by_ok_row = pc.take(prev, rank)
    nth = pc.subtract(pc.cumulative_sum(ok.cast(pa.int64())), 1)
    spread = pc.take(prev_by_ok_row, pc.max_element_wise(nth, 0))
    column = pc.if_else(ok, spread, pa.scalar(None, pa.int64()))
    return with_columns(
        operations,
        {"prev_ok_time": column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column},
    )


def link_acks(operations: pa.Table, state: ArrowPairing) -> pa.Table:
    """Operations with each ack's previous ack of its process on its partition (nonmonotonic-send)."""
    if operations.num_rows == 0:
        return operations
    offset = operations.column("offset")
    # f and outcome by their codes (`f_code` is null where `f` is, `outcome_code` is never null).
    ack = pc.and_(
        pc.and_(pc.equal(operations.column("f_code"), _SEND), pc.is_valid(operations.column("value"))),
        pc.and_(
            pc.and_(pc.equal(operations.column("outcome_code"), _OK), pc.greater_equal(offset, 0)),
            pc.is_valid(operations.column("tp")),
        ),
    )
    rows = operations.select(["process", "tp", "index", "offset", "value"]).append_column(
        "epoch", pa.repeat(pa.scalar(0, pa.int64()), operations.num_rows)
    )
    return with_columns(operations, state.acks.feed(rows, ack))


def split_chunk(table: pa.Table, state: ConversionState) -> tuple[pa.Table, pa.Table]:
    """The chunk's operations (paired, see ChunkPairing) and its reads (records flattened)."""
    # Nemesis lines are only in the tables of chunks read line by line (`parse_fast` takes them out).
    nemesis = pc.equal(table.column("process"), NEMESIS_SENTINEL)
    client = table.filter(pc.invert(pc.fill_null(nemesis, False))) if pc.any(nemesis).as_py() else table
    ids = state.topics.ids(client.column("topic"))
    tp = tp_of(ids, client.column("partition"))
    operations, reads_ok, epoch = state.per_process.feed(client, ids, tp, state.topics.known)
    sample_latencies(operations, state.latency)
    take = pc.and_(reads_ok, pc.is_valid(client.column("records")))
    polls = client.select(["index", "process", "records"]).filter(take)
    epochs = pc.filter(epoch, take)
    records = polls.column("records").combine_chunks()
    if len(records) == 0:
        return operations, READS_SCHEMA.empty_table()
    flat = pc.list_flatten(records)
    n = len(flat)
    if n == 0:
        return operations, READS_SCHEMA.empty_table()
    parents = pc.list_parent_indices(records)
    seq = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)
    starts = pc.take(records.offsets.cast(pa.int64()), parents)
    flat_struct = flat if isinstance(flat, pa.StructArray) else flat.combine_chunks()
    topic, partition = flat_struct.field("topic"), flat_struct.field("partition")
    offset, value = flat_struct.field("offset"), flat_struct.field("value")
    read_tp = state.topics.tp(topic, partition)
    reads = pa.table(
        {
            "index": pc.take(polls.column("index"), parents),
            "process": pc.take(polls.column("process"), parents),
            "pos": pc.subtract(seq, starts).cast(pa.int32()),
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "value": value,
            "epoch": pc.take(epochs, parents),
            "tp": read_tp,
            "prev_offset": pa.nulls(n, pa.int64()),
            "prev_index": pa.nulls(n, pa.int64()),
        },
        schema=READS_SCHEMA,
    )
    return operations, with_columns(reads, state.per_process.link_reads(reads))


@dataclass
class Counts:
    ops: int = 0
    operations: int = 0
    reads: int = 0
    figures: Figures = field(default_factory=Figures)
    topics: list[str] = field(default_factory=list)
    max_time: int | None = None  # the largest `time` of any line
    nemesis: list[list[Any]] = field(default_factory=list)  # nemesis ops (see `nemesis_row`)
    ok_sends_in_order: bool = True  # ok sends' completion times never go back in history order
    line_marks: list[tuple[int, int]] = field(default_factory=list)  # (index, byte offset) of some lines
    latency: list[Point] = field(default_factory=list)  # the report's latency sample


# Min/max statistics only for the columns readers skip row groups by (`checkers.power_form`: index,
# time and invoke_time; the other positions alike): the others' cost a fifth of the writing.
WRITE_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "use_dictionary": ["f", "topic", "outcome"],
    "write_statistics": ["index", "invoke_index", "next_index", "time", "invoke_time"],
}


class TableWriter:
    """The two Parquet files of the form, written table by table; counts what it writes."""

    def __init__(self, dest: Path, counts: Counts) -> None:
        self.counts = counts
        self.operations = pq.ParquetWriter(dest / "operations.parquet", OPERATIONS_SCHEMA, **WRITE_OPTIONS)
        self.reads = pq.ParquetWriter(dest / "reads.parquet", READS_SCHEMA, **WRITE_OPTIONS)

    def write(self, operations: pa.Table, reads: pa.Table) -> None:
        if operations.num_rows:
            self.operations.write_table(operations)
        if reads.num_rows:
            self.reads.write_table(reads)
        self.counts.operations += operations.num_rows
        self.counts.reads += reads.num_rows
        self.counts.figures.add_operations(operations)
        self.counts.figures.add_reads(reads)

    def close(self) -> None:
        self.operations.close()
        self.reads.close()


# parse_fast's answer: the client lines and the nemesis rows (None: read the chunk line by line)
Parsed = tuple[pa.Table, list[list[Any]]] | None


class Converter:
    """The conversion's state from chunk to chunk: chunks of whole lines are fed in history order
    (the last one may end torn), each handed to `sink` as (operations, reads) tables; `finish`
    hands over the operations still open. Used whole (`write`) and as a history grows
    (`checkers.parquet_journal`)."""

    def __init__(self, sink: Callable[[pa.Table, pa.Table], None]) -> None:
        self.sink = sink
        self.problems: list[ReadProblem] = []
        self.counts = Counts()
        self.state = ConversionState()
        self.stopped = False  # a torn line ended the history

    def feed(
        self, chunk: Chunk, first_line: int, at_end: bool, fast: Parsed | bool = True, start: int = 0
    ) -> bool:
        """Convert one chunk that begins at byte `start` of the history (`fast`: Arrow's parse when
        the caller made it; True: parse here). Returns True when a torn last line ends the history."""
        self.counts.line_marks += line_marks(chunk, start)
        if fast is True:
            fast = None if (at_end and not chunk.endswith(b"\n")) else parse_fast(chunk)
        stop = False
        times: list[int] = []
        if fast is None or fast is False:
            table, stop = parse_slow(chunk, first_line, at_end, self.problems, self.counts.nemesis)
        else:
            table, nemesis = fast
            self.counts.nemesis += nemesis
            self.counts.ops += len(nemesis)
            times = [row[1] for row in nemesis]
        self.counts.ops += table.num_rows
        if table.num_rows:
            times.append(pc.max(table.column("time")).as_py())
        top = max((t for t in times if t is not None), default=None)
        if top is not None and (self.counts.max_time is None or top > self.counts.max_time):
            self.counts.max_time = top
        self.sink(*split_chunk(table, self.state))
        self.stopped = stop
        return stop

    def finish(self) -> tuple[Counts, Orphans, list[ReadProblem]]:
        """The operations still open go to the sink; what the conversion found."""
        state = self.state
        self.sink(state.per_process.finish(state.topics.known), READS_SCHEMA.empty_table())
        self.counts.ok_sends_in_order = state.per_process.ok_sends_in_order
        self.counts.topics = state.topics.known.to_pylist()
        self.counts.latency = state.latency.points()
        return self.counts, state.per_process, self.problems


def write(history: Path, dest: Path, chunk_bytes: int) -> tuple[Counts, Orphans, list[ReadProblem]]:
    """Parse in one thread (chunks of about `chunk_bytes`), pair in this one, write Parquet in a third."""
    queue: Queue[tuple[pa.Table, pa.Table] | None] = Queue(maxsize=2)
    failure: list[BaseException] = []
    converter = Converter(lambda operations, reads: queue.put((operations, reads)))

    def writer() -> None:
        try:
            out = TableWriter(dest, converter.counts)
            try:
                while (item := queue.get()) is not None:
                    out.write(*item)
            finally:
                out.close()
        except BaseException as e:  # handed to the parsing thread, which raises it
            failure.append(e)
            while queue.get() is not None:
                pass

    thread = threading.Thread(target=writer, name="parquet-writer", daemon=True)
    thread.start()
    parsed: Queue[tuple[Chunk, int, bool, Parsed, int] | None] = Queue(maxsize=1)
    done = threading.Event()

    def parser() -> None:
        """Read and parse the next chunk while this thread pairs the previous one."""
        start = 0
        try:
            for chunk, first_line, at_end in chunks(history, chunk_bytes):
                if done.is_set():
                    break
                fast = None if (at_end and not chunk.endswith(b"\n")) else parse_fast(chunk)
                parsed.put((chunk, first_line, at_end, fast, start))
                start += len(chunk)
        finally:
            parsed.put(None)

    reader = threading.Thread(target=parser, name="history-parser", daemon=True)
    reader.start()
    try:
        while (item := parsed.get()) is not None:
            chunk, first_line, at_end, fast, start = item
            if converter.feed(chunk, first_line, at_end, fast, start) or failure:
                break
        if not failure:
            found = converter.finish()
    finally:
        done.set()
        while reader.is_alive():  # unblock a parser waiting to hand over a chunk
            try:
                parsed.get(timeout=0.1)
            except Empty:
                pass
        queue.put(None)
        thread.join()
    if failure:
        raise failure[0]
    return found
