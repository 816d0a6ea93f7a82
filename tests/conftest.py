"""Fixtures shared by several test modules. Shared helpers that are not fixtures (recording fakes,
run-directory builders, sshd hosts) live in `tests/support/`; no test module imports another."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The Spark JVM's class archive (checkers/spark_cds.py) is written when a process that started
# Spark ends; the tests' many Spark processes would each pay for that until one had. One test
# (tests/integration/test_checkers_spark_cds.py) writes and uses it for real.
os.environ.setdefault("STRANDLINE_SPARK_CDS", "0")


@pytest.fixture(scope="module")
def scratch(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A work directory for the module, outside pytest's tmp rotation (other sessions prune it)."""
    stem = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    path = Path(tempfile.mkdtemp(prefix=f"sltest-{stem}-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def release() -> Iterator[str]:
    """Apache Kafka's default release, fetched here on a fresh machine from Maven Central (a later
    test finds it in the cache): the modules that run `--system kafka` share it."""
    from clusters import kafka_release

    started = time.monotonic()
    folder = kafka_release.fetch(kafka_release.DEFAULT_VERSION)
    print(f"\nKafka {kafka_release.DEFAULT_VERSION} in {folder} after {time.monotonic() - started:.1f}s")
    yield kafka_release.DEFAULT_VERSION


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A small local Spark session (2 cores, 1 GiB, 2 shuffle partitions), shared by the module."""
    from checkers.spark_session import get_session

    session = get_session("local[2]", driver_memory="1g")
    session.conf.set("spark.sql.shuffle.partitions", "2")
    yield session
