"""History (JSON lines) -> Parquet, once: the columnar form the Spark checker reads.

Why not Spark's JSON reader: on two cores it parses a 10-million-op history several times slower
than Arrow's C++ reader, and Spark would then have to explode the poll records on every check.
The conversion streams the history in chunks through `pyarrow.json` (bounded memory: one chunk at a
time) and writes two datasets next to the history, in `<history>.parquet/`:

- `operations.parquet`: one row per client operation: an invocation paired with the next line of
  its process (`checkers.parquet_pairing`): `invoke_index`, `process`, `f`, `topic`, `partition`, `value` of
  the invocation; `index`, `time`, `offset`, `bad_records` of the completion; `outcome`
  (ok/fail/info/open) and `next_index` (the completing or superseding line); fields of the wrong
  type are null; `tp` (`checkers.parquet_links.TopicIds`), `f_code` and `outcome_code` (small integers for Spark);
  and on an ack, its process's previous ack on the same partition: `prev_index`, `prev_offset`,
  `prev_value` (`checkers.parquet_links.Links`);
- `reads.parquet`: one row per record of an ok completion of a poll (`index` and `process` of the
  completion, `pos` in its record list, `topic`, `partition`, `offset`, `value`, `tp`, and `epoch`:
  how many times the process's poll positions were forgotten before it), and on a well-formed
  read, its process's previous read of that partition in the same epoch: `prev_offset`,
  `prev_index`;
- `meta.json`: the source's size and mtime (the cache is reused while they match), the lines
  that could not be read, the figures (`checkers.parquet_figures`: outcome counts, malformed operations) and the
  topic names by id.

This module keeps the cache and its `meta.json`; the work is done by small modules, one job each:
`parquet_schema` (the layout and its codes), `parquet_lines` (lines -> Arrow tables, exactly as
`history.reader.iter_ops` reads them), `parquet_pairing` (invocations paired with completions),
`parquet_links` (topic-partition ids, each row's predecessor), `parquet_figures` (outcome counts,
malformed operations) and `parquet_pipeline` (parsing, pairing and writing overlap in three threads).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from checkers import freed_memory
from checkers.parquet_pairing import Orphans
from checkers.parquet_pipeline import Counts, write
from checkers.parquet_schema import FORMAT_VERSION, LINES, META, cache_name
from checkers.timeline import Point, points_from_json
from history.format import ReadProblem

log = logging.getLogger(__name__)

# The history is read, parsed, paired and written this many bytes at a time, a few chunks in flight:
# 16 MiB converts as fast as 32 and holds some 170 MiB less at its peak.
CHUNK_BYTES = 16 << 20
# The run's follower (`checkers.parquet_journal`) writes the form into `.journal-<pid>-*` beside the
# history until it publishes it; one whose process died (a killed run) is removed by the next check.
JOURNAL_PREFIX = ".journal-"


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
    # Ok sends' completion times never go back in history order (`prev_ok_time` is then their
    # predecessor in time too).
    ok_sends_in_order: bool = False
    # The report's latency sample (`checkers.timeline`), taken while converting.
    latency: list[Point] = field(default_factory=list)

    @property
    def operations_path(self) -> Path:
        return self.directory / "operations.parquet"

    @property
    def reads_path(self) -> Path:
        return self.directory / "reads.parquet"

    @property
    def lines_path(self) -> Path:
        """Where some lines of the history start: JSON [[index, byte offset], ...] (`line_marks`)."""
        return self.directory / LINES


def cache_dir_for(history: Path) -> Path:
    """`history.jsonl` -> `history.parquet/` beside it."""
    return history.with_name(cache_name(history.name))


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
    if parent is not None:
        _forget_dead_journals(history.parent)
    tmp = Path(tempfile.mkdtemp(prefix=".convert-", dir=parent))
    try:
        pool = pa.default_memory_pool()
        # The system allocator: less time in page faults than mimalloc for these big, short-lived
        # buffers (about a fifth less wall time measured on a 2-core machine).
        pa.set_memory_pool(pa.system_memory_pool())
        try:
            counts, pairing, problems = write(history, tmp, CHUNK_BYTES)
        finally:
            pa.set_memory_pool(pool)
            freed_memory.release()  # what the chunks freed (some 200-400 MiB)
        return publish(tmp, dest if parent is not None else None, stat, counts, pairing, problems)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish(
    tmp: Path,
    dest: Path | None,
    stat: os.stat_result,
    counts: Counts,
    pairing: Orphans,
    problems: list[ReadProblem],
) -> Converted:
    """A finished conversion in `tmp`: its meta.json written (naming the source's size and mtime,
    `stat`) and the directory moved to `dest` (None: left where it is, uncached)."""
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
        "ok_sends_in_order": counts.ok_sends_in_order,
        "latency": counts.latency,
    }
    (tmp / LINES).write_text(json.dumps(counts.line_marks))
    (tmp / META).write_text(json.dumps(meta))
    if dest is None:
        return _from_meta(tmp, meta, reused=False)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
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
        bool(meta.get("ok_sends_in_order", False)),
        points_from_json(meta.get("latency")),
    )


def _load_meta(dest: Path, stat: os.stat_result) -> Converted | None:
    try:
        meta = json.loads((dest / META).read_text())
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


def _forget_dead_journals(directory: Path) -> None:
    """Remove the half-written forms of followers whose process no longer runs."""
    for tmp in directory.glob(f"{JOURNAL_PREFIX}*"):
        try:
            pid = int(tmp.name[len(JOURNAL_PREFIX) :].split("-", 1)[0])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass
