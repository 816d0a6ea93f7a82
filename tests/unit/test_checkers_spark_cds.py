"""The Spark JVM's class archive (checkers/spark_cds.py): written once by a session whose process
ends cleanly, used by the next ones, and never left half written for a JVM to map."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from checkers import spark_cds


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("STRANDLINE_SPARK_CDS", raising=False)
    return tmp_path / "strandline"


def test_the_first_session_writes_the_archive_and_the_next_use_it(cache: Path) -> None:
    archive = spark_cds.archive_path("-XX:+UseParallelGC")
    assert archive.parent == cache
    assert archive != spark_cds.archive_path("-XX:+UseSerialGC")  # other options, another archive
    options, writing = spark_cds.java_options(archive)
    assert writing == archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    assert f"-XX:ArchiveClassesAtExit={writing}" in options and "-Xlog:disable" in options
    archive.write_bytes(b"archive")
    options, writing = spark_cds.java_options(archive)
    assert writing is None and f"-XX:SharedArchiveFile={archive}" in options


def test_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRANDLINE_SPARK_CDS", "0")
    assert spark_cds.java_options(spark_cds.archive_path("")) == ("", None)
    assert not cache.exists()


def test_half_written_archives_of_dead_processes_are_removed(cache: Path) -> None:
    archive = spark_cds.archive_path("")
    cache.mkdir(parents=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    left = archive.with_name(f"{archive.name}.{int(dead.stdout)}.tmp")
    left.write_bytes(b"cut")
    alive = archive.with_name(f"{archive.name}.1.tmp")  # pid 1 runs: its file is kept
    alive.write_bytes(b"being written")
    spark_cds.java_options(archive)
    assert not left.exists() and alive.exists()


class _Proc:
    def __init__(self, code: int, writing: Path) -> None:
        self.code, self.writing, self.stdin = code, writing, None

    def wait(self, timeout: float) -> int:
        self.writing.write_bytes(b"dumped" if self.code == 0 else b"cut")
        return self.code


class _Session:
    def __init__(self, proc: _Proc) -> None:
        self.sparkContext: Any = type("Ctx", (), {"_gateway": type("Gw", (), {"proc": proc})()})()
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


@pytest.mark.parametrize("code", [0, 1])
def test_the_archive_is_kept_only_when_the_jvm_exits_cleanly(cache: Path, code: int) -> None:
    archive = spark_cds.archive_path("")
    cache.mkdir(parents=True)
    writing = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    session = _Session(_Proc(code, writing))
    spark_cds._publish(session, writing, archive)  # type: ignore[arg-type]
    assert session.stopped and not writing.exists()
    assert archive.exists() == (code == 0)


def test_only_the_newest_archives_are_kept(cache: Path) -> None:
    cache.mkdir(parents=True)
    for i in range(spark_cds.KEEP + 2):
        old = cache / f"spark-cds-{i:016x}.jsa"
        old.write_bytes(b"old")
        os.utime(old, (1000 + i, 1000 + i))
    archive = spark_cds.archive_path("")
    writing = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    spark_cds._publish(_Session(_Proc(0, writing)), writing, archive)  # type: ignore[arg-type]
    kept = sorted(p.name for p in cache.glob("spark-cds-*.jsa"))
    assert archive.name in kept and len(kept) == spark_cds.KEEP
    assert "spark-cds-0000000000000000.jsa" not in kept and "spark-cds-0000000000000001.jsa" not in kept
