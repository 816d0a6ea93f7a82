"""The conversion's pipeline: parse chunks (one thread), pair and link them (this one), write Parquet
(a third; Arrow releases the GIL), so parsing, pairing and writing overlap."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from checkers.parquet_figures import Figures
from checkers.parquet_lines import chunks, nemesis_rows, parse_fast, parse_slow
from checkers.parquet_links import Links, TopicIds, with_columns
from checkers.parquet_pairing import ChunkPairing
from checkers.parquet_schema import NEMESIS_SENTINEL, OPERATIONS_SCHEMA, READS_SCHEMA
from history.format import ReadProblem


class ConversionState:
    """Everything carried from chunk to chunk while converting."""

    def __init__(self) -> None:
        self.pairing = ChunkPairing()
        self.topics = TopicIds()
        self.acks = Links(("index", "offset", "value"))
        self.reads = Links(("offset", "index"))


def link_acks(operations: pa.Table, state: ConversionState) -> pa.Table:
    """Operations with each ack's previous ack of its process on its partition (nonmonotonic-send)."""
    if operations.num_rows == 0:
        return operations
    offset = operations.column("offset")
    ack = pc.and_(
        pc.and_(pc.equal(operations.column("f"), "send"), pc.is_valid(operations.column("value"))),
        pc.and_(
            pc.and_(pc.equal(operations.column("outcome"), "ok"), pc.greater_equal(offset, 0)),
            pc.is_valid(operations.column("tp")),
        ),
    )
    rows = operations.select(["process", "tp", "index", "offset", "value"]).append_column(
        "epoch", pa.repeat(pa.scalar(0, pa.int64()), operations.num_rows)
    )
    return with_columns(operations, state.acks.feed(rows, ack))


def split_chunk(table: pa.Table, state: ConversionState) -> tuple[pa.Table, pa.Table]:
    """The chunk's operations (paired, see ChunkPairing) and its reads (records flattened)."""
    nemesis = pc.fill_null(pc.equal(table.column("process"), NEMESIS_SENTINEL), False)
    client = table.filter(pc.invert(nemesis))
    tp = state.topics.tp(client.column("topic"), client.column("partition"))
    operations, reads_ok, epoch = state.pairing.feed(client, tp)
    operations = link_acks(operations, state)
    take = pc.and_(reads_ok, pc.is_valid(client.column("records")))
    polls = client.filter(take)
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
    # Well-formed reads move the process's position (malformed records are skipped).
    well_formed = pc.and_(pc.and_(pc.is_valid(read_tp), pc.is_valid(offset)), pc.is_valid(value))
    return operations, with_columns(reads, state.reads.feed(reads, well_formed))


@dataclass
class Counts:
    ops: int = 0
    operations: int = 0
    reads: int = 0
    figures: Figures = field(default_factory=Figures)
    topics: list[str] = field(default_factory=list)
    max_time: int | None = None  # the largest `time` of any line
    nemesis: list[list[Any]] = field(default_factory=list)  # nemesis ops (see `nemesis_row`)


def write(history: Path, dest: Path, chunk_bytes: int) -> tuple[Counts, ChunkPairing, list[ReadProblem]]:
    """Parse in one thread (chunks of about `chunk_bytes`), pair in this one, write Parquet in a third."""
    problems: list[ReadProblem] = []
    counts = Counts()
    state = ConversionState()
    queue: Queue[tuple[pa.Table, pa.Table] | None] = Queue(maxsize=2)
    failure: list[BaseException] = []

    def writer() -> None:
        options: dict[str, Any] = {"compression": "snappy", "use_dictionary": ["f", "topic", "outcome"]}
        try:
            with (
                pq.ParquetWriter(dest / "operations.parquet", OPERATIONS_SCHEMA, **options) as ops_out,
                pq.ParquetWriter(dest / "reads.parquet", READS_SCHEMA, **options) as reads_out,
            ):
                while (item := queue.get()) is not None:
                    operations, reads = item
                    if operations.num_rows:
                        ops_out.write_table(operations)
                    if reads.num_rows:
                        reads_out.write_table(reads)
                    counts.operations += operations.num_rows
                    counts.reads += reads.num_rows
                    counts.figures.add_operations(operations)
                    counts.figures.add_reads(reads)
        except BaseException as e:  # handed to the parsing thread, which raises it
            failure.append(e)
            while queue.get() is not None:
                pass

    thread = threading.Thread(target=writer, name="parquet-writer", daemon=True)
    thread.start()
    parsed: Queue[tuple[bytes, int, bool, tuple[pa.Table, list[bytes]] | None] | None] = Queue(maxsize=1)
    done = threading.Event()

    def parser() -> None:
        """Read and parse the next chunk while this thread pairs the previous one."""
        try:
            for chunk, first_line, at_end in chunks(history, chunk_bytes):
                if done.is_set():
                    break
                fast = None if (at_end and not chunk.endswith(b"\n")) else parse_fast(chunk)
                parsed.put((chunk, first_line, at_end, fast))
        finally:
            parsed.put(None)

    reader = threading.Thread(target=parser, name="history-parser", daemon=True)
    reader.start()
    try:
        while (item := parsed.get()) is not None:
            chunk, first_line, at_end, fast = item
            stop = False
            if fast is None:
                table, stop = parse_slow(chunk, first_line, at_end, problems, counts.nemesis)
            else:
                table, nemesis_lines = fast
                counts.nemesis += nemesis_rows(nemesis_lines)
            counts.ops += table.num_rows
            if table.num_rows:
                top = pc.max(table.column("time")).as_py()
                if top is not None and (counts.max_time is None or top > counts.max_time):
                    counts.max_time = top
            queue.put(split_chunk(table, state))
            if stop or failure:
                break
        if not failure:
            queue.put((state.pairing.finish(), READS_SCHEMA.empty_table()))
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
    counts.topics = state.topics.known.to_pylist()
    return counts, state.pairing, problems
