"""The Spark JVM's class archive for real (checkers/spark_cds.py): the first process that starts
Spark writes it as it ends, the next one starts its JVM with it and gets the same answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

QUERY = """
from checkers.spark_session import get_session
spark = get_session("local[1]", driver_memory="512m")
print("answer", spark.range(1000).selectExpr("sum(id) as s").collect()[0]["s"])
print("options", spark.sparkContext.getConf().get("spark.driver.extraJavaOptions"))
"""


@pytest.mark.slow
def test_written_by_the_first_session_used_by_the_next(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "STRANDLINE_SPARK_CDS": "1"}

    def session() -> str:
        done = subprocess.run(
            [sys.executable, "-c", QUERY], capture_output=True, text=True, env=env, timeout=280, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "answer 499500" in done.stdout
        assert "[warning][cds]" not in done.stdout + done.stderr  # the JVM's CDS chatter stays off
        return done.stdout

    assert "-XX:ArchiveClassesAtExit=" in session()
    archives = list((tmp_path / "strandline").glob("spark-cds-*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 1 << 20
    assert not list((tmp_path / "strandline").glob("*.tmp"))
    assert f"-XX:SharedArchiveFile={archives[0]}" in session()
