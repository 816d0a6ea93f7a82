"""The history's Parquet form, written while the history is journaled (`strandline run`).

A background thread follows `history.jsonl` as the run appends to it and converts each new stretch
of whole lines (`checkers.parquet_pipeline.Converter`: the same pairing and links, carried from one
stretch to the next), closing row groups as it goes; when the run closes its history, the tail is
converted and the form is published beside the history with the meta.json `checkers.parquet.convert`
reuses (the history's size and mtime). So `strandline check` after a run converts nothing, and a
run of hours pays its conversion in small steps during the load (a few microseconds an operation).

It only reads the history. Anything that goes wrong (a crash, a full disk, the history rewritten)
leaves no meta.json, and the check converts the history as it would have without this (and removes
the half-written form of a follower whose process was killed).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path

from checkers.parquet import JOURNAL_PREFIX, Converted, cache_dir_for, publish
from checkers.parquet_pipeline import Converter, TableWriter

log = logging.getLogger(__name__)

# How often the follower looks for new lines, and the most it converts at once.
INTERVAL_S = 2.0
STRETCH_BYTES = 16 << 20


class ColumnarJournal:
    """Follows a growing history and keeps its Parquet form up to date (see the module docstring)."""

    def __init__(self, history: Path, interval_s: float = INTERVAL_S) -> None:
        self.history = Path(history)
        self.dest = cache_dir_for(self.history)
        self.tmp = Path(tempfile.mkdtemp(prefix=f"{JOURNAL_PREFIX}{os.getpid()}-", dir=self.history.parent))
        self.converter: Converter | None = None
        self.out: TableWriter | None = None
        self.position = 0  # bytes of the history converted so far (whole lines)
        self.line_no = 1
        self.interval_s = interval_s
        self.failed: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> ColumnarJournal:
        """Follow the history in a daemon thread until `finish`."""
        self._thread = threading.Thread(target=self._follow, name="columnar-journal", daemon=True)
        self._thread.start()
        return self

    def _follow(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.catch_up()

    def catch_up(self, final: bool = False) -> None:
        """Convert the whole lines appended since the last call (`final`: the rest, torn or not)."""
        with self._lock:
            if self.failed is not None or (self.converter is not None and self.converter.stopped):
                return
            try:
                self._convert_new(final)
            except Exception as e:  # never the run's problem: the check converts again
                log.warning("the history's Parquet form is left to the check: %s", e)
                self.failed = e

    def _convert_new(self, final: bool) -> None:
        if self.converter is None:
            self.converter = Converter(lambda operations, reads: self._writer().write(operations, reads))
        with open(self.history, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            while self.position < size:
                f.seek(self.position)
                data = f.read(STRETCH_BYTES)
                if not final or self.position + len(data) < size:
                    cut = data.rfind(b"\n") + 1
                    if cut == 0:  # no whole line yet: one longer than a stretch, or still being written
                        data += f.readline()
                        if not data.endswith(b"\n") and not final:
                            return
                        cut = len(data)
                    data = data[:cut]
                at_end = final and self.position + len(data) >= size
                stop = self.converter.feed(data, self.line_no, at_end, start=self.position)
                self.position += len(data)
                self.line_no += data.count(b"\n")
                if stop:
                    return

    def _writer(self) -> TableWriter:
        if self.out is None:
            assert self.converter is not None
            self.out = TableWriter(self.tmp, self.converter.counts)
        return self.out

    def finish(self) -> Converted | None:
        """Stop following, convert the tail and publish the form beside the history (None: not
        published, e.g. a conversion failed; the check then converts the history itself)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.catch_up(final=True)
            if self.failed is not None or self.converter is None:
                return None
            stat = self.history.stat()
            if stat.st_size != self.position and not self.converter.stopped:
                log.warning("the history changed while it was converted; the check converts it again")
                return None
            counts, pairing, problems = self.converter.finish()
            self._writer().close()
            published = publish(self.tmp, self.dest, stat, counts, pairing, problems)
            self.out = None
            return published
        except Exception as e:
            log.warning("the history's Parquet form is left to the check: %s", e)
            return None
        finally:
            if self.out is not None:
                try:
                    self.out.close()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
            shutil.rmtree(self.tmp, ignore_errors=True)
