"""History (JSON lines) -> Parquet, once: the columnar form the Spark checker reads.

Why not Spark's JSON reader: on two cores it parses a 10-million-op history several times slower
than Arrow's C++ reader, and Spark would then have to explode the poll records on every check.
The conversion streams the history in chunks through `pyarrow.json` (bounded memory: one chunk at a
time) and writes two datasets next to the history, in `<history>.parquet/`:

- `operations.parquet`: one row per client operation: an invocation paired with the next line of
  its process (see `_Pairing`): `invoke_index`, `process`, `f`, `topic`, `partition`, `value` of
  the invocation; `index`, `time`, `offset`, `bad_records` of the completion; `outcome`
  (ok/fail/info/open) and `next_index` (the completing or superseding line); fields of the wrong
  type are null; `tp` (see `_TopicIds`), `f_code` and `outcome_code` (small integers for Spark);
  and on an ack, its process's previous ack on the same partition: `prev_index`, `prev_offset`,
  `prev_value` (see `_Links`);
- `reads.parquet`: one row per record of an ok completion of a poll (`index` and `process` of the
  completion, `pos` in its record list, `topic`, `partition`, `offset`, `value`, `tp`, and `epoch`:
  how many times the process's poll positions were forgotten before it), and on a well-formed
  read, its process's previous read of that partition in the same epoch: `prev_offset`,
  `prev_index`;
- `meta.json`: the source's size and mtime (the cache is reused while they match), the lines
  that could not be read, the figures (`Figures`: outcome counts, malformed operations) and the
  topic names by id.

Parsing (Arrow's threads), pairing and linking (this thread) and writing (another) overlap.

Lines are read exactly as `history.reader.iter_ops` reads them: a chunk that Arrow cannot parse,
or that holds a line `iter_ops` would reject, is re-read line by line in Python with the same rules
and the same problem texts, so both checkers skip the same lines and report the same problems.
The nemesis journals arbitrary JSON in `value` and the string "nemesis" in `process`; those two
fields are renamed in nemesis lines (a byte-level edit of those rare lines) before Arrow sees them.
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from history.format import CLIENT_FS, NEMESIS_PROCESS, OP_TYPES, ReadProblem, validate

log = logging.getLogger(__name__)

FORMAT_VERSION = 6
CHUNK_BYTES = 32 << 20
_NEMESIS_SENTINEL = -(2**62)
_NEMESIS_KEYS = (b'"process":"nemesis"', b'"process": "nemesis"')

RECORD = pa.struct(
    [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("value", pa.int64())]
)
_JSON_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("process", pa.int64()),
        ("type", pa.string()),
        ("f", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("value", pa.int64()),
        ("offset", pa.int64()),
        ("records", pa.list_(RECORD)),
        ("bad_records", pa.bool_()),
    ]
)
READS_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("process", pa.int64()),
        ("pos", pa.int32()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("value", pa.int64()),
        ("epoch", pa.int64()),
        ("tp", pa.int64()),
        ("prev_offset", pa.int64()),
        ("prev_index", pa.int64()),
    ]
)
_PARSE = pj.ParseOptions(explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore")
_READ = pj.ReadOptions(block_size=4 << 20, use_threads=True)
_TYPES = pa.array(OP_TYPES)
_CLIENT_FS = pa.array(sorted(CLIENT_FS))


@dataclass
class Converted:
    """Where the Parquet form of a history is, and what reading and pairing its lines found."""

    directory: Path
    ops: int  # lines read as ops (client and nemesis)
    operations: int
    reads: int
    problems: list[ReadProblem] = field(default_factory=list)
    orphans: int = 0  # completions without an invocation
    first_orphan: int | None = None
    reused: bool = False
    # Outcome counts and malformed operations (see `Figures`): {"counts": {...}, "firsts": {...}}.
    figures: dict[str, Any] = field(default_factory=dict)
    # Topic names by topic id (`tp` >> 32).
    topics: list[str] = field(default_factory=list)
    # The largest `time` of any line (the history's span, for the statistics) and the nemesis ops
    # ([index, time, type, f, value]: a few dozen lines, which the fault windows are paired from).
    max_time: int | None = None
    nemesis: list[list[Any]] = field(default_factory=list)

    @property
    def operations_path(self) -> Path:
        return self.directory / "operations.parquet"

    @property
    def reads_path(self) -> Path:
        return self.directory / "reads.parquet"


def cache_dir_for(history: Path) -> Path:
    """`history.jsonl` -> `history.parquet/` beside it."""
    stem = history.name[: -len(".jsonl")] if history.name.endswith(".jsonl") else history.name
    return history.with_name(stem + ".parquet")


def convert(history: str | os.PathLike[str], dest: Path | None = None, *, force: bool = False) -> Converted:
    """The Parquet form of a local history, converting it unless a fresh cache exists."""
    history = Path(history)
    stat = history.stat()
    dest = dest or cache_dir_for(history)
    cached = _load_meta(dest, stat)
    if cached is not None and not force:
        log.info("reusing %s", dest)
        return cached
    parent = dest.parent if os.access(dest.parent, os.W_OK) else None
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=parent))
    try:
        pool = pa.default_memory_pool()
        # The system allocator: less time in page faults than mimalloc for these big, short-lived
        # buffers (about a fifth less wall time measured on a 2-core machine).
        pa.set_memory_pool(pa.system_memory_pool())
        try:
            counts, pairing, problems = _write(history, tmp)
        finally:
            pa.set_memory_pool(pool)
        meta = {
            "version": FORMAT_VERSION,
            "source_size": stat.st_size,
            "source_mtime_ns": stat.st_mtime_ns,
            "ops": counts.ops,
            "operations": counts.operations,
            "reads": counts.reads,
            "orphans": pairing.orphans,
            "first_orphan": pairing.first_orphan,
            "problems": [[p.line_no, p.reason, p.torn_tail] for p in problems],
            "figures": counts.figures.as_dict(),
            "topics": counts.topics,
            "max_time": counts.max_time,
            "nemesis": counts.nemesis,
        }
        (tmp / "meta.json").write_text(json.dumps(meta))
        if parent is not None:
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
        else:
            dest = tmp  # not writable beside the history: a temporary, uncached conversion
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _from_meta(dest, meta, reused=False)


def _from_meta(dest: Path, meta: dict[str, Any], reused: bool) -> Converted:
    problems = [ReadProblem(int(n), str(r), bool(t)) for n, r, t in meta.get("problems", [])]
    return Converted(
        dest,
        int(meta["ops"]),
        int(meta["operations"]),
        int(meta["reads"]),
        problems,
        int(meta["orphans"]),
        meta["first_orphan"],
        reused,
        meta.get("figures", {}),
        list(meta.get("topics", [])),
        meta.get("max_time"),
        list(meta.get("nemesis", [])),
    )


def _load_meta(dest: Path, stat: os.stat_result) -> Converted | None:
    try:
        meta = json.loads((dest / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if (
        meta.get("version") != FORMAT_VERSION
        or meta.get("source_size") != stat.st_size
        or meta.get("source_mtime_ns") != stat.st_mtime_ns
        or not (dest / "operations.parquet").exists()
        or not (dest / "reads.parquet").exists()
    ):
        return None
    return _from_meta(dest, meta, reused=True)


def _chunks(path: Path, size: int) -> Iterator[tuple[bytes, int, bool]]:
    """(chunk of whole lines, 1-based number of its first line, is it the end of the file)."""
    line_no = 1
    with open(path, "rb") as f:
        rest = b""
        while True:
            buf = f.read(size)
            data = rest + buf if rest else buf
            if not buf:
                if data:
                    yield data, line_no, True
                return
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            chunk, rest = data[:cut], data[cut:]
            yield chunk, line_no, False
            line_no += chunk.count(b"\n")


def _rename_nemesis(chunk: bytes, lines: list[bytes]) -> bytes:
    """Give nemesis lines an integer process and move their free-form `value` out of the way.

    The original nemesis lines are appended to `lines` (the statistics need their values).
    """
    for key in _NEMESIS_KEYS:
        chunk = _rename(chunk, key, lines)
    return chunk


def _rename(chunk: bytes, key: bytes, originals: list[bytes]) -> bytes:
    pos = chunk.find(key)
    if pos < 0:
        return chunk
    pieces: list[bytes] = []
    done = 0
    while pos >= 0:
        start = chunk.rfind(b"\n", 0, pos) + 1
        end = chunk.find(b"\n", pos)
        end = len(chunk) if end < 0 else end
        line = chunk[start:end]
        originals.append(line)
        line = line.replace(key, b'"process":%d' % _NEMESIS_SENTINEL, 1)
        line = line.replace(b'"value":', b'"nemesis_value":')
        pieces.append(chunk[done:start])
        pieces.append(line)
        done = end
        pos = chunk.find(key, end)
    pieces.append(chunk[done:])
    return b"".join(pieces)


def _fast(chunk: bytes) -> tuple[pa.Table, list[bytes]] | None:
    """Arrow's parse of a chunk and its nemesis lines, or None when any line needs the line-by-line
    reader."""
    nemesis_lines: list[bytes] = []
    try:
        table = pj.read_json(
            io.BytesIO(_rename_nemesis(chunk, nemesis_lines)), parse_options=_PARSE, read_options=_READ
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows == 0:
        return table, nemesis_lines
    process = table.column("process")
    nemesis = pc.equal(process, _NEMESIS_SENTINEL)
    ok = pc.and_(
        pc.and_(pc.is_valid(table.column("index")), pc.is_valid(table.column("time"))),
        pc.and_(pc.is_valid(process), pc.is_in(table.column("type"), value_set=_TYPES)),
    )
    ok = pc.and_(ok, pc.or_(nemesis, pc.is_in(table.column("f"), value_set=_CLIENT_FS)))
    ok = pc.and_(ok, pc.or_(nemesis, pc.invert(pc.equal(process, _NEMESIS_SENTINEL))))
    if not pc.all(pc.fill_null(ok, False)).as_py():
        return None
    return table, nemesis_lines


def nemesis_row(op: dict[str, Any]) -> list[Any]:
    """A nemesis op as the conversion keeps it: [index, time, type, f, value] (value as in JSON)."""
    return [op["index"], op["time"], op["type"], op["f"], op.get("value")]


def _nemesis_rows(lines: list[bytes]) -> list[list[Any]]:
    """The nemesis lines of a chunk Arrow parsed (valid JSON: Arrow read them), as nemesis rows."""
    rows = []
    for line in lines:
        op = json.loads(line)
        if isinstance(op, dict) and op.get("process") == NEMESIS_PROCESS:
            rows.append(nemesis_row(op))
    return rows


def _as_int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and -(2**63) <= x < 2**63 else None


def _as_str(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _record(r: Any) -> dict[str, Any]:
    if not isinstance(r, dict):
        r = {}
    partition = _as_int(r.get("partition"))
    return {
        "topic": _as_str(r.get("topic")),
        "partition": partition if partition is not None and -(2**31) <= partition < 2**31 else None,
        "offset": _as_int(r.get("offset")),
        "value": _as_int(r.get("value")),
    }


def _slow(
    chunk: bytes, first_line: int, at_end: bool, problems: list[ReadProblem], nemesis_ops: list[list[Any]]
) -> tuple[pa.Table, bool]:
    """Read a chunk line by line exactly as iter_ops does; (table, stop: a torn tail ended it).

    Nemesis ops are appended to `nemesis_ops` (see `nemesis_row`)."""
    rows: list[dict[str, Any]] = []
    lines = chunk.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    stop = False
    for i, raw in enumerate(lines):
        line_no = first_line + i
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        complete = not (at_end and i == len(lines) - 1 and not chunk.endswith(b"\n"))
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            if not complete:
                log.warning("%d: torn last line ignored (controller crashed mid-write?)", line_no)
                problems.append(ReadProblem(line_no, "torn last line", torn_tail=True))
                stop = True
                break
            problems.append(ReadProblem(line_no, f"malformed JSON ({e.msg})"))
            continue
        reason = validate(record)
        if reason is not None:
            problems.append(ReadProblem(line_no, reason))
            continue
        nemesis = record["process"] == NEMESIS_PROCESS
        if nemesis:
            nemesis_ops.append(nemesis_row(record))
        partition = _as_int(record.get("partition"))
        records = record.get("records")
        rows.append(
            {
                "index": _as_int(record["index"]),
                "time": _as_int(record["time"]),
                "process": _NEMESIS_SENTINEL if nemesis else record["process"],
                "type": record["type"],
                "f": _as_str(record["f"]),
                "topic": None if nemesis else _as_str(record.get("topic")),
                "partition": None if nemesis or partition is None or abs(partition) >= 2**31 else partition,
                "value": None if nemesis else _as_int(record.get("value")),
                "offset": None if nemesis else _as_int(record.get("offset")),
                "records": [_record(r) for r in records]
                if isinstance(records, list) and not nemesis
                else None,
                # Readers take `records or []`: a truthy non-list is a malformed poll.
                "bad_records": bool(records) and not isinstance(records, list) and not nemesis,
            }
        )
    return pa.Table.from_pylist(rows, schema=_JSON_SCHEMA), stop


class _TopicIds:
    """Topic-partition ids (`tp`): one integer for a (topic, partition), for Spark's cheap keys.

    A topic's id is its rank of first appearance in the history; `tp` = id * 2**32 + partition +
    2**31, so distinct (topic, partition) pairs have distinct ids (null where either is null).
    """

    def __init__(self) -> None:
        self.known = pa.array([], pa.string())

    def tp(self, topic: pa.Array | pa.ChunkedArray, partition: pa.Array | pa.ChunkedArray) -> pa.Array:
        ids = pc.index_in(topic, value_set=self.known)
        new = pc.filter(topic, pc.and_(pc.is_null(ids), pc.is_valid(topic)))
        if len(new):
            fresh = pc.unique(new)
            fresh = fresh.combine_chunks() if isinstance(fresh, pa.ChunkedArray) else fresh
            self.known = pa.concat_arrays([self.known, fresh.cast(pa.string())])
            ids = pc.index_in(topic, value_set=self.known)
        high = pc.multiply(ids.cast(pa.int64()), pa.scalar(1 << 32, pa.int64()))
        result = pc.add(high, pc.add(partition.cast(pa.int64()), pa.scalar(1 << 31, pa.int64())))
        return result.combine_chunks() if isinstance(result, pa.ChunkedArray) else result


class _Links:
    """Each eligible row's predecessor: the previous eligible row of its process on its partition.

    This is the per-process sequential part of poll-skip, nonmonotonic-poll (reads; the link also
    needs the same position epoch) and nonmonotonic-send (acks), done once while converting, like
    the pairing: rows come in history order, so a stable sort by (process, tp) after the rows
    carried from earlier chunks (the last one of each process and partition) puts each row right
    after its predecessor.
    """

    def __init__(self, payload: tuple[str, ...]) -> None:
        self.payload = payload
        fields = [("process", pa.int64()), ("tp", pa.int64()), ("epoch", pa.int64())]
        self.schema = pa.schema(fields + [(name, pa.int64()) for name in payload])
        self.carry = self.schema.empty_table()

    def feed(self, rows: pa.Table, eligible: pa.Array) -> dict[str, pa.Array]:
        """For each row of `rows` (columns process, tp, epoch and the payload): prev_<payload>."""
        n = rows.num_rows
        eligible = pc.fill_null(eligible, False)
        if isinstance(eligible, pa.ChunkedArray):
            eligible = eligible.combine_chunks()
        mine = rows.select(list(self.schema.names)).cast(self.schema).filter(eligible)
        k = self.carry.num_rows
        both = pa.concat_tables([self.carry, mine]).combine_chunks()
        m = both.num_rows
        prev: dict[str, pa.Array] = {}
        if m == 0 or mine.num_rows == 0:
            return {f"prev_{name}": pa.nulls(n, pa.int64()) for name in self.payload}
        order = pc.sort_indices(both, sort_keys=[("process", "ascending"), ("tp", "ascending")]).cast(
            pa.int64()
        )
        ordered = both.take(order)
        process, tp, epoch = (ordered.column(c).combine_chunks() for c in ("process", "tp", "epoch"))
        same = pc.and_(
            pc.and_(
                pc.equal(process.slice(1), process.slice(0, m - 1)), pc.equal(tp.slice(1), tp.slice(0, m - 1))
            ),
            pc.equal(epoch.slice(1), epoch.slice(0, m - 1)),
        )
        same = pa.concat_arrays([pa.array([False]), pc.fill_null(same, False)])
        mine_at = pc.take(pc.inverse_permutation(order), _arange(m - k, k))
        for name in self.payload:
            column = ordered.column(name).combine_chunks()
            shifted = pa.concat_arrays([pa.nulls(1, pa.int64()), column.slice(0, m - 1)])
            linked = pc.if_else(same, shifted, pa.scalar(None, pa.int64()))
            prev[f"prev_{name}"] = pc.replace_with_mask(
                pa.nulls(n, pa.int64()), eligible, pc.take(linked, mine_at)
            )
        # The last row of each process and partition (whatever its epoch) is carried on.
        last = pc.or_(
            pc.not_equal(process.slice(0, m - 1), process.slice(1)),
            pc.not_equal(tp.slice(0, m - 1), tp.slice(1)),
        )
        last = pa.concat_arrays([pc.fill_null(last, True), pa.array([True])])
        self.carry = ordered.filter(last)
        return prev


class _State:
    """Everything carried from chunk to chunk while converting."""

    def __init__(self) -> None:
        self.pairing = _Pairing()
        self.topics = _TopicIds()
        self.acks = _Links(("index", "offset", "value"))
        self.reads = _Links(("offset", "index"))


def _with(table: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    for name, column in columns.items():
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


def _link_acks(operations: pa.Table, state: _State) -> pa.Table:
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
    return _with(operations, state.acks.feed(rows, ack))


def _split(table: pa.Table, state: _State) -> tuple[pa.Table, pa.Table]:
    """The chunk's operations (paired, see _Pairing) and its reads (records flattened)."""
    nemesis = pc.fill_null(pc.equal(table.column("process"), _NEMESIS_SENTINEL), False)
    client = table.filter(pc.invert(nemesis))
    tp = state.topics.tp(client.column("topic"), client.column("partition"))
    operations, reads_ok, epoch = state.pairing.feed(client, tp)
    operations = _link_acks(operations, state)
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
    return operations, _with(reads, state.reads.feed(reads, well_formed))


OPERATIONS_SCHEMA = pa.schema(
    [
        ("invoke_index", pa.int64()),
        ("process", pa.int64()),
        ("f", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("value", pa.int64()),
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("offset", pa.int64()),
        ("bad_records", pa.bool_()),
        ("outcome", pa.string()),
        ("next_index", pa.int64()),
        ("tp", pa.int64()),
        ("prev_index", pa.int64()),
        ("prev_offset", pa.int64()),
        ("prev_value", pa.int64()),
        ("f_code", pa.int8()),
        ("outcome_code", pa.int8()),
        ("invoke_time", pa.int64()),
    ]
)
# `f` and `outcome` again as small integers (their index in these), cheaper for Spark to compare.
F_CODES = ("send", "poll", "assign", "crash", "subscribe", "commit", "rebalance")
OUTCOME_CODES = ("ok", "fail", "info", "open")
_TYPE_CODES = pa.array(["invoke", "ok", "fail", "info"])
_F_CODES = pa.array(F_CODES)
INVOKE, OK_, FAIL_, INFO_ = 0, 1, 2, 3
SEND, POLL, ASSIGN, CRASH = 0, 1, 2, 3
_CARRY_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("process", pa.int64()),
        ("type", pa.int8()),
        ("f", pa.int8()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("value", pa.int64()),
        ("offset", pa.int64()),
        ("bad_records", pa.bool_()),
        ("epoch", pa.int64()),
        ("carried", pa.bool_()),
        ("tp", pa.int64()),
    ]
)


def _arange(n: int, start: int = 0) -> pa.Array:
    return pc.add(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), start - 1)


def _neighbour(order: pa.Array, process_sorted: pa.Array, inverse: pa.Array, by: int) -> pa.Array:
    """For each row (in table order), the row of its process's previous (by=1) or next (-1) line."""
    m = len(order)
    if m == 0:
        return pa.array([], pa.int64())
    null = pa.nulls(1, pa.int64())
    order = order.cast(pa.int64())
    if by == 1:
        other, other_proc = pa.concat_arrays([null, order.slice(0, m - 1)]), process_sorted.slice(0, m - 1)
        same = pa.concat_arrays([pa.array([False]), pc.equal(process_sorted.slice(1), other_proc)])
    else:
        other = pa.concat_arrays([order.slice(1), null])
        same = pa.concat_arrays(
            [pc.equal(process_sorted.slice(0, m - 1), process_sorted.slice(1)), pa.array([False])]
        )
    in_sorted = pc.if_else(same, other, pa.scalar(None, pa.int64()))
    return pc.take(in_sorted, inverse)


class _Pairing:
    """Pairs each invocation with the next line of its process, streaming, chunk by chunk.

    This is the reference's operation model (see checkers/reference.py): the next line of the same
    process completes an invocation (`crash` as `info`), supersedes it (an invocation) or, at the
    end, leaves it open. Vectorized per chunk: the chunk's client lines, after the last line of
    each process carried from earlier chunks, are stably sorted by process, which makes each line's
    predecessor and successor in its process neighbours. Also decided here, per line: whether an
    ok line's records are reads (it completes a poll invocation), and how many times its process's
    poll positions were forgotten up to it (its `epoch`): at an assign invocation, at a poll
    completed info, at an invocation superseding a poll.
    """

    def __init__(self) -> None:
        self.carry = _CARRY_SCHEMA.empty_table()
        self.orphans = 0
        self.first_orphan: int | None = None

    def feed(self, lines: pa.Table, tp: pa.Array) -> tuple[pa.Table, pa.Array, pa.Array]:
        """(operations completed or superseded, per line: are its records reads, per line: epoch)."""
        n = lines.num_rows
        own = pa.table(
            {
                "index": lines.column("index"),
                "time": lines.column("time"),
                "process": lines.column("process"),
                "type": pc.index_in(lines.column("type"), value_set=_TYPE_CODES).cast(pa.int8()),
                "f": pc.index_in(lines.column("f"), value_set=_F_CODES).cast(pa.int8()),
                "topic": lines.column("topic"),
                "partition": lines.column("partition"),
                "value": lines.column("value"),
                "offset": lines.column("offset"),
                "bad_records": pc.fill_null(lines.column("bad_records"), False),
                "epoch": pa.nulls(n, pa.int64()),
                "carried": pa.repeat(pa.scalar(False), n),
                "tp": tp,
            },
            schema=_CARRY_SCHEMA,
        )
        both = pa.concat_tables([self.carry, own]).combine_chunks()
        m = both.num_rows
        process = both.column("process").combine_chunks()
        order = pc.sort_indices(process).cast(pa.int64())  # stable: line order within a process
        inverse = pc.inverse_permutation(order)
        process_sorted = pc.take(process, order)
        prev = _neighbour(order, process_sorted, inverse, 1)
        nxt = _neighbour(order, process_sorted, inverse, -1)
        col = {name: both.column(name).combine_chunks() for name in ("type", "f", "index", "carried")}
        type_, f, carried = col["type"], col["f"], col["carried"]
        own_line = pc.invert(carried)
        is_invoke = pc.equal(type_, INVOKE)
        prev_type, prev_f = pc.take(type_, prev), pc.take(f, prev)
        after_invoke = pc.fill_null(pc.equal(prev_type, INVOKE), False)
        after_poll_invoke = pc.and_(after_invoke, pc.fill_null(pc.equal(prev_f, POLL), False))
        crash = pc.equal(f, CRASH)

        # Operations: invocations whose successor is known.
        next_type, next_f = pc.take(type_, nxt), pc.take(f, nxt)
        emit = pc.and_(is_invoke, pc.is_valid(nxt))
        completed = pc.and_(emit, pc.fill_null(pc.not_equal(next_type, INVOKE), False))
        outcome_code = pc.if_else(
            completed,
            pc.if_else(pc.fill_null(pc.equal(next_f, CRASH), False), pa.scalar(INFO_, pa.int8()), next_type),
            pa.scalar(-1, pa.int8()),
        )
        operations = self._operations(both, emit, completed, outcome_code, nxt)

        # Orphans: completions of this chunk whose predecessor is no invocation.
        orphan = pc.and_(
            pc.and_(own_line, pc.invert(is_invoke)), pc.and_(pc.invert(crash), pc.invert(after_invoke))
        )
        orphan_index = pc.filter(col["index"], orphan)
        if len(orphan_index):
            self.orphans += len(orphan_index)
            first = pc.min(orphan_index).as_py()
            if first is not None and (self.first_orphan is None or first < self.first_orphan):
                self.first_orphan = first

        # Reads: the records of an ok completion of a poll invocation.
        reads_ok = pc.and_(
            pc.and_(own_line, pc.equal(type_, OK_)), pc.and_(pc.invert(crash), after_poll_invoke)
        )
        # Position resets, counted per process up to each line.
        info_poll = pc.and_(
            pc.and_(pc.invert(is_invoke), after_poll_invoke), pc.or_(pc.equal(type_, INFO_), crash)
        )
        resets = pc.and_(
            own_line,
            pc.or_(
                pc.or_(pc.and_(is_invoke, pc.equal(f, ASSIGN)), info_poll),
                pc.and_(is_invoke, after_poll_invoke),
            ),
        ).cast(pa.int64())
        resets_sorted = pc.take(resets, order)
        cum = pc.cumulative_sum(resets_sorted)
        positions = _arange(m)
        starts = (
            pa.concat_arrays(
                [
                    pa.array([True]),
                    pc.not_equal(process_sorted.slice(1), process_sorted.slice(0, max(0, m - 1))),
                ]
            )
            if m
            else pa.array([], pa.bool_())
        )
        first_row = (
            pc.cumulative_max(pc.if_else(starts, positions, pa.scalar(0, pa.int64()))) if m else positions
        )
        epoch_sorted = pc.take(both.column("epoch").combine_chunks(), order)
        base = pc.fill_null(pc.take(epoch_sorted, first_row), 0)
        before = pc.subtract(pc.take(cum, first_row), pc.take(resets_sorted, first_row))
        epoch = pc.take(pc.add(base, pc.subtract(cum, before)), inverse)

        # Carry the last line of each process, with its epoch.
        last = pc.invert(pc.is_valid(nxt))
        carry = both.set_column(both.schema.get_field_index("epoch"), "epoch", epoch).filter(last)
        self.carry = carry.set_column(
            carry.schema.get_field_index("carried"), "carried", pa.repeat(pa.scalar(True), carry.num_rows)
        )
        k = len(both) - n  # carried rows come first: the chunk's own lines are the rest, in order
        return operations, reads_ok.slice(k), epoch.slice(k)

    def _operations(self, both, emit, completed, outcome_code, nxt):  # type: ignore[no-untyped-def]
        rows = both.filter(emit)
        nxt = pc.filter(nxt, emit)
        completed = pc.filter(completed, emit)
        none64 = pa.scalar(None, pa.int64())

        def completion(name: str) -> pa.Array:
            return pc.if_else(completed, pc.take(both.column(name).combine_chunks(), nxt), none64)

        outcomes = pa.array(OUTCOME_CODES)
        code = pc.filter(outcome_code, emit)
        outcome_index = pc.if_else(pc.less(code, 0), pa.scalar(3, pa.int8()), pc.subtract(code, 1))
        outcome = pc.take(outcomes, outcome_index)
        return pa.table(
            {
                "invoke_index": rows.column("index"),
                "process": rows.column("process"),
                "f": pc.take(_F_CODES, rows.column("f")),
                "topic": rows.column("topic"),
                "partition": rows.column("partition"),
                "value": rows.column("value"),
                "index": completion("index"),
                "time": completion("time"),
                "offset": completion("offset"),
                "bad_records": pc.fill_null(
                    pc.and_(completed, pc.take(both.column("bad_records").combine_chunks(), nxt)), False
                ),
                "outcome": outcome,
                "next_index": pc.take(both.column("index").combine_chunks(), nxt),
                "tp": rows.column("tp"),
                "prev_index": pa.nulls(rows.num_rows, pa.int64()),
                "prev_offset": pa.nulls(rows.num_rows, pa.int64()),
                "prev_value": pa.nulls(rows.num_rows, pa.int64()),
                "f_code": rows.column("f"),
                "outcome_code": outcome_index.cast(pa.int8()),
                "invoke_time": rows.column("time"),
            },
            schema=OPERATIONS_SCHEMA,
        )

    def finish(self) -> pa.Table:
        """Invocations still open at the end of the history."""
        open_ = self.carry.filter(pc.equal(self.carry.column("type"), INVOKE))
        n = open_.num_rows
        none64 = pa.nulls(n, pa.int64())
        return pa.table(
            {
                "invoke_index": open_.column("index"),
                "process": open_.column("process"),
                "f": pc.take(_F_CODES, open_.column("f")),
                "topic": open_.column("topic"),
                "partition": open_.column("partition"),
                "value": open_.column("value"),
                "index": none64,
                "time": none64,
                "offset": none64,
                "bad_records": pa.repeat(pa.scalar(False), n),
                "outcome": pa.repeat(pa.scalar("open"), n),
                "next_index": none64,
                "tp": open_.column("tp"),
                "prev_index": none64,
                "prev_offset": none64,
                "prev_value": none64,
                "f_code": open_.column("f"),
                "outcome_code": pa.repeat(pa.scalar(3, pa.int8()), n),
                "invoke_time": open_.column("time"),
            },
            schema=OPERATIONS_SCHEMA,
        )


class Figures:
    """The figures the checker reports besides anomalies, counted while converting (cheap here).

    Keys and meanings are the Spark engine's (`checkers.spark_engine.spark_figures` computes the
    same from Parquet for histories Spark converts): `op:<f>:<outcome>` counts, `open` and
    `superseded` invocations, `acked`, `records_read`, and the `malformed:<what>` operations, each
    with its first (smallest) index in `firsts`.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.firsts: dict[str, Any] = {}

    def _add(self, key: str, n: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def _first(self, key: str, table: pa.Table, mask: pa.Array, by: str, make: Any) -> None:
        mask = pc.fill_null(mask, False)
        n = pc.sum(mask.cast(pa.int64())).as_py() or 0
        if not n:
            return
        self._add(key, n)
        rows = table.filter(mask)
        row = rows.take(pc.sort_indices(rows.column(by)).slice(0, 1)).to_pylist()[0]
        first = make(row)
        best = self.firsts.get(key)
        if best is None or _sort_key(first) < _sort_key(best):
            self.firsts[key] = first

    def add_operations(self, o: pa.Table) -> None:
        if o.num_rows == 0:
            return
        grouped = o.group_by(["f", "outcome"]).aggregate([("invoke_index", "count")]).to_pylist()
        for g in grouped:
            if g["f"] in ("send", "poll", "assign"):
                self._add(f"op:{g['f']}:{g['outcome']}", g["invoke_index_count"])
        f, outcome = o.column("f"), o.column("outcome")
        next_index = o.column("next_index")
        self._first(
            "open",
            o,
            pc.is_null(next_index),
            "invoke_index",
            lambda r: {"index": r["invoke_index"], "process": r["process"], "f": r["f"]},
        )
        self._first(
            "superseded",
            o,
            pc.and_(pc.equal(outcome, "open"), pc.is_valid(next_index)),
            "next_index",
            lambda r: {"at": r["next_index"], "process": r["process"], "index": r["invoke_index"]},
        )
        send = pc.equal(f, "send")
        self._first(
            "malformed:send", o, pc.and_(send, pc.is_null(o.column("value"))), "invoke_index", _invoke
        )
        is_send = pc.and_(send, pc.is_valid(o.column("value")))
        acked = pc.and_(pc.and_(is_send, pc.equal(outcome, "ok")), pc.greater_equal(o.column("offset"), 0))
        self._first("malformed:ack", o, pc.and_(acked, pc.is_null(o.column("tp"))), "index", _index)
        ok_acks = pc.fill_null(pc.and_(acked, pc.is_valid(o.column("tp"))), False)
        self._add("acked", pc.sum(ok_acks.cast(pa.int64())).as_py() or 0)
        bad_poll = pc.and_(pc.and_(pc.equal(f, "poll"), pc.equal(outcome, "ok")), o.column("bad_records"))
        self._first("malformed:poll", o, bad_poll, "index", _index)

    def add_reads(self, r: pa.Table) -> None:
        if r.num_rows == 0:
            return
        well = pc.and_(
            pc.and_(pc.is_valid(r.column("tp")), pc.is_valid(r.column("offset"))),
            pc.is_valid(r.column("value")),
        )
        self._add("records_read", pc.sum(well.cast(pa.int64())).as_py() or 0)
        self._first("malformed:record", r, pc.invert(well), "index", _index)

    def as_dict(self) -> dict[str, Any]:
        return {"counts": self.counts, "firsts": self.firsts}


def _index(row: dict[str, Any]) -> Any:
    return row["index"]


def _invoke(row: dict[str, Any]) -> Any:
    return row["invoke_index"]


def _sort_key(first: Any) -> tuple[Any, ...]:
    return tuple(first.values()) if isinstance(first, dict) else (first,)


@dataclass
class _Counts:
    ops: int = 0
    operations: int = 0
    reads: int = 0
    figures: Figures = field(default_factory=Figures)
    topics: list[str] = field(default_factory=list)
    max_time: int | None = None  # the largest `time` of any line
    nemesis: list[list[Any]] = field(default_factory=list)  # nemesis ops (see `nemesis_row`)


def _write(history: Path, dest: Path) -> tuple[_Counts, _Pairing, list[ReadProblem]]:
    """Parse in one thread, pair in this one, write Parquet in a third (Arrow releases the GIL)."""
    problems: list[ReadProblem] = []
    counts = _Counts()
    state = _State()
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
            for chunk, first_line, at_end in _chunks(history, CHUNK_BYTES):
                if done.is_set():
                    break
                fast = None if (at_end and not chunk.endswith(b"\n")) else _fast(chunk)
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
                table, stop = _slow(chunk, first_line, at_end, problems, counts.nemesis)
            else:
                table, nemesis_lines = fast
                counts.nemesis += _nemesis_rows(nemesis_lines)
            counts.ops += table.num_rows
            if table.num_rows:
                top = pc.max(table.column("time")).as_py()
                if top is not None and (counts.max_time is None or top > counts.max_time):
                    counts.max_time = top
            queue.put(_split(table, state))
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
