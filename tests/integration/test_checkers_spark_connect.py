"""`strandline check --spark-remote sc://...`: the checker's jobs on a Spark Connect server.

The server is started from the pyspark distribution's own script (`sbin/start-connect-server.sh
--wait`, local[2], bound to 127.0.0.1) and stopped afterwards (its process group, which this test
started). The check through it must write the same results.json as the reference checker (which the
local Spark engine equals, tests/integration/test_checkers_spark_engine.py); a server that does not answer
and a malformed URL are one-line errors with exit 4 and 2.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from history.synthetic.generator import generate_ops
from tests.support.checked_runs import make_run

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import pyspark

    home = Path(pyspark.__file__).parent
    tmp = tmp_path_factory.mktemp("spark-connect")
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_PID_DIR": str(tmp),
        # The server's Python workers read the replicas' segments with this project's checkers.
        "PYSPARK_PYTHON": sys.executable,
    }
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen(
        [str(home / "sbin" / "start-connect-server.sh"), "--wait", "--master", "local[2]",
         "--driver-memory", "1g", "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", "spark.ui.enabled=false",
         "--conf", "spark.sql.shuffle.partitions=2"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        up = False
        while time.monotonic() < deadline and not up:
            assert server.poll() is None, (tmp / "server.log").read_text()[-3000:]
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    up = True
            except OSError:
                time.sleep(1)
        assert up, "the Spark Connect server did not open its port"
        yield f"sc://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def check(run: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(run), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_check_through_spark_connect_writes_what_the_reference_writes(remote: str, tmp_path: Path) -> None:
    run = make_run(tmp_path, generate_ops(400, seed=8)[0])
    reference = check(run, "--checker", "reference")
    assert reference.returncode in (0, 1, 3), reference.stderr
    want = json.loads((run / "results.json").read_text())
    out = check(run, "--checker", "spark", "--spark-remote", remote)
    assert out.returncode == reference.returncode, out.stderr[-3000:]
    assert f"checked with Spark ({remote})" in out.stdout
    got = json.loads((run / "results.json").read_text())
    assert got["checker"]["engine"] == "spark"
    assert {k: v for k, v in got.items() if k != "checker"} == {
        k: v for k, v in want.items() if k != "checker"
    }


def test_a_server_that_does_not_answer_and_a_bad_url_are_one_line_errors(tmp_path: Path) -> None:
    run = make_run(tmp_path, generate_ops(40, seed=9)[0])
    silent = check(run, "--checker", "spark", "--spark-remote", f"sc://127.0.0.1:{free_port()}")
    assert silent.returncode == 4 and "does not answer" in silent.stderr, silent.stderr
    assert silent.stderr.strip().count("\n") == 0 and not (run / "results.json").exists()
    bad = check(run, "--checker", "spark", "--spark-remote", "http://127.0.0.1:15002")
    assert bad.returncode == 2 and "bad Spark Connect URL" in bad.stderr, bad.stderr
