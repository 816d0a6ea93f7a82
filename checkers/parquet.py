"""History (JSON lines) -> Parquet, once: the columnar form the Spark checker reads.

Why not Spark's JSON reader: on two cores it parses a 10-million-op history several times slower
than Arrow's C++ reader, and Spark would then have to explode the poll records on every check.
The conversion streams the history in chunks through `pyarrow.json` (bounded memory: one chunk at a
time) and writes two datasets next to the history, in `<history>.parquet/`:

- `ops.parquet`: one row per line (`index`, `time`, `process` (null for the nemesis), `nemesis`,
  `type`, `f`, `topic`, `partition`, `value`, `offset`, `records`: how many, `bad_records`: a
  `records` that is neither a list nor empty); fields of the wrong type are null;
- `reads.parquet`: one row per record listed by an `ok` client line (`index` and `process` of the
  line, `pos` in its record list, `topic`, `partition`, `offset`, `value`);
- `meta.json`: the source's size and mtime (the cache is reused while they match), and the lines
  that could not be read.

Lines are read exactly as `workloads.history.iter_ops` reads them: a chunk that Arrow cannot parse,
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
from queue import Queue
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from workloads.history import CLIENT_FS, NEMESIS_PROCESS, OP_TYPES, ReadProblem, _validate

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
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
OPS_SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("time", pa.int64()),
        ("process", pa.int64()),
        ("nemesis", pa.bool_()),
        ("type", pa.string()),
        ("f", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("value", pa.int64()),
        ("offset", pa.int64()),
        ("records", pa.int32()),
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
    ]
)
_PARSE = pj.ParseOptions(explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore")
_READ = pj.ReadOptions(block_size=4 << 20, use_threads=True)
_TYPES = pa.array(OP_TYPES)
_CLIENT_FS = pa.array(sorted(CLIENT_FS))


@dataclass
class Converted:
    """Where the Parquet form of a history is, and what reading the history found."""

    directory: Path
    ops: int
    reads: int
    problems: list[ReadProblem] = field(default_factory=list)
    reused: bool = False

    @property
    def ops_path(self) -> Path:
        return self.directory / "ops.parquet"

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
        ops, reads, problems = _write(history, tmp)
        meta = {
            "version": FORMAT_VERSION,
            "source_size": stat.st_size,
            "source_mtime_ns": stat.st_mtime_ns,
            "ops": ops,
            "reads": reads,
            "problems": [[p.line_no, p.reason, p.torn_tail] for p in problems],
        }
        (tmp / "meta.json").write_text(json.dumps(meta))
        if parent is None:
            # Not writable beside the history: use the temporary directory, uncached.
            return Converted(tmp, ops, reads, problems)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Converted(dest, ops, reads, problems)


def _load_meta(dest: Path, stat: os.stat_result) -> Converted | None:
    try:
        meta = json.loads((dest / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if (
        meta.get("version") != FORMAT_VERSION
        or meta.get("source_size") != stat.st_size
        or meta.get("source_mtime_ns") != stat.st_mtime_ns
        or not (dest / "ops.parquet").exists()
        or not (dest / "reads.parquet").exists()
    ):
        return None
    problems = [ReadProblem(int(n), str(r), bool(t)) for n, r, t in meta.get("problems", [])]
    return Converted(dest, int(meta["ops"]), int(meta["reads"]), problems, reused=True)


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


def _rename_nemesis(chunk: bytes) -> bytes:
    """Give nemesis lines an integer process and move their free-form `value` out of the way."""
    for key in _NEMESIS_KEYS:
        chunk = _rename(chunk, key)
    return chunk


def _rename(chunk: bytes, key: bytes) -> bytes:
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
        line = line.replace(key, b'"process":%d' % _NEMESIS_SENTINEL, 1)
        line = line.replace(b'"value":', b'"nemesis_value":')
        pieces.append(chunk[done:start])
        pieces.append(line)
        done = end
        pos = chunk.find(key, end)
    pieces.append(chunk[done:])
    return b"".join(pieces)


def _fast(chunk: bytes) -> pa.Table | None:
    """Arrow's parse of a chunk, or None when any line needs the line-by-line reader."""
    try:
        table = pj.read_json(io.BytesIO(_rename_nemesis(chunk)), parse_options=_PARSE, read_options=_READ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows == 0:
        return table
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
    return table


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


def _slow(chunk: bytes, first_line: int, at_end: bool, problems: list[ReadProblem]) -> tuple[pa.Table, bool]:
    """Read a chunk line by line exactly as iter_ops does; (table, stop: a torn tail ended it)."""
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
        reason = _validate(record)
        if reason is not None:
            problems.append(ReadProblem(line_no, reason))
            continue
        nemesis = record["process"] == NEMESIS_PROCESS
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
            }
        )
    return pa.Table.from_pylist(rows, schema=_JSON_SCHEMA), stop


def _split(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The ops table (records dropped, nemesis flagged) and the reads table (records flattened)."""
    process = table.column("process")
    nemesis = pc.fill_null(pc.equal(process, _NEMESIS_SENTINEL), False)
    ops = pa.table(
        {
            "index": table.column("index"),
            "time": table.column("time"),
            "process": pc.if_else(nemesis, pa.scalar(None, pa.int64()), process),
            "nemesis": nemesis,
            "type": table.column("type"),
            "f": table.column("f"),
            "topic": table.column("topic"),
            "partition": table.column("partition"),
            "value": table.column("value"),
            "offset": table.column("offset"),
            "records": pc.list_value_length(table.column("records")).cast(pa.int32()),
            "bad_records": pc.fill_null(table.column("bad_records"), False),
        },
        schema=OPS_SCHEMA,
    )
    # Records of every ok client line: the checker decides which lines complete a poll.
    is_read = pc.and_(pc.equal(table.column("type"), "ok"), pc.invert(nemesis))
    polls = table.filter(pc.fill_null(is_read, False))
    records = polls.column("records").combine_chunks()
    if len(records) == 0 or records.null_count == len(records):
        return ops, READS_SCHEMA.empty_table()
    flat = pc.list_flatten(records)
    parents = pc.list_parent_indices(records)
    n = len(flat)
    if n == 0:
        return ops, READS_SCHEMA.empty_table()
    seq = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), n)), 1)
    starts = pc.take(records.offsets.cast(pa.int64()), parents)
    pos = pc.subtract(seq, starts).cast(pa.int32())
    flat_struct = flat if isinstance(flat, pa.StructArray) else flat.combine_chunks()
    reads = pa.table(
        {
            "index": pc.take(polls.column("index"), parents),
            "process": pc.take(polls.column("process"), parents),
            "pos": pos,
            "topic": flat_struct.field("topic"),
            "partition": flat_struct.field("partition"),
            "offset": flat_struct.field("offset"),
            "value": flat_struct.field("value"),
        },
        schema=READS_SCHEMA,
    )
    return ops, reads


def _write(history: Path, dest: Path) -> tuple[int, int, list[ReadProblem]]:
    """Parse in this thread, write Parquet in another (both release the GIL): the two overlap."""
    problems: list[ReadProblem] = []
    counts = [0, 0]
    queue: Queue[tuple[pa.Table, pa.Table] | None] = Queue(maxsize=2)
    failure: list[BaseException] = []

    def writer() -> None:
        options: dict[str, Any] = {"compression": "snappy", "use_dictionary": ["type", "f", "topic"]}
        try:
            with (
                pq.ParquetWriter(dest / "ops.parquet", OPS_SCHEMA, **options) as ops_out,
                pq.ParquetWriter(dest / "reads.parquet", READS_SCHEMA, **options) as reads_out,
            ):
                while (item := queue.get()) is not None:
                    ops, reads = item
                    if ops.num_rows:
                        ops_out.write_table(ops)
                    if reads.num_rows:
                        reads_out.write_table(reads)
                    counts[0] += ops.num_rows
                    counts[1] += reads.num_rows
        except BaseException as e:  # handed to the parsing thread, which raises it
            failure.append(e)
            while queue.get() is not None:
                pass

    thread = threading.Thread(target=writer, name="parquet-writer", daemon=True)
    thread.start()
    try:
        for chunk, first_line, at_end in _chunks(history, CHUNK_BYTES):
            table = None if (at_end and not chunk.endswith(b"\n")) else _fast(chunk)
            stop = False
            if table is None:
                table, stop = _slow(chunk, first_line, at_end, problems)
            queue.put(_split(table))
            if stop or failure:
                break
    finally:
        queue.put(None)
        thread.join()
    if failure:
        raise failure[0]
    return counts[0], counts[1], problems
