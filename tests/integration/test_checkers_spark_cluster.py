"""`strandline check --spark-master spark://...` on a real Spark standalone cluster.

A master and two workers are started from the pyspark distribution's own launcher (`spark-class
org.apache.spark.deploy.master.Master` / `...worker.Worker`, bound to 127.0.0.1, 1 core and 1 GiB
each); the check must write the same results.json as the local-mode check of the same run (but for
`checker`), and a master that does not answer, a malformed master URL and a missing JVM must be
one-line errors with exit 4, 2 and 4. The cluster is stopped afterwards (by pid: only what this
test started).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
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


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def cluster_env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_WORKER_DIR": str(tmp / "work"),
        "SPARK_NO_DAEMONIZE": "1",
        "PYSPARK_PYTHON": sys.executable,
    }


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = cluster_env(tmp)
    launcher = str(spark_home() / "bin" / "spark-class")
    port, ui = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [launcher, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)],
            env=env, stdout=open(tmp / "master.log", "wb"), stderr=subprocess.STDOUT,
        )
    ]  # fmt: skip
    try:
        for i in range(2):
            procs.append(
                subprocess.Popen(
                    [launcher, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                     "--webui-port", str(free_port()), "--cores", "1", "--memory", "1g",
                     "--work-dir", str(tmp / f"work{i}"), url],
                    env=env, stdout=open(tmp / f"worker{i}.log", "wb"), stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
        deadline = time.monotonic() + 300
        alive = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as r:
                    state = json.load(r)
                alive = sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
                if alive == 2:
                    break
            except OSError:
                pass
            assert all(p.poll() is None for p in procs), (tmp / "master.log").read_text()[-2000:]
            time.sleep(1)
        assert alive == 2, "the workers did not register with the master"
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def check(run: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "check", str(run), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )


def test_a_check_on_a_standalone_cluster_writes_what_local_mode_writes(master: str, tmp_path: Path) -> None:
    run = make_run(tmp_path, generate_ops(400, seed=5)[0])
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "STRANDLINE_SPARK_EXECUTOR_MEMORY": "512m"}
    local = check(run, "--checker", "spark", env=env)
    assert local.returncode in (0, 1, 3), local.stderr[-2000:]
    want = json.loads((run / "results.json").read_text())
    on_cluster = check(run, "--checker", "spark", "--spark-master", master, env=env)
    assert on_cluster.returncode == local.returncode, on_cluster.stderr[-2000:]
    assert f"checked with Spark ({master})" in on_cluster.stdout
    got = json.loads((run / "results.json").read_text())
    assert got["checker"]["spark_master"] == master and want["checker"]["spark_master"] == "local[*]"
    assert {k: v for k, v in got.items() if k != "checker"} == {
        k: v for k, v in want.items() if k != "checker"
    }


def test_a_master_that_does_not_answer_and_a_bad_url_are_one_line_errors(tmp_path: Path) -> None:
    run = make_run(tmp_path, generate_ops(40, seed=6)[0])
    silent = check(run, "--checker", "spark", "--spark-master", f"spark://127.0.0.1:{free_port()}")
    assert silent.returncode == 4, silent.stderr
    assert silent.stderr.strip().count("\n") == 0 and "does not answer" in silent.stderr
    assert not (run / "results.json").exists()
    bad = check(run, "--checker", "spark", "--spark-master", "spark//nowhere")
    assert bad.returncode == 2 and "bad Spark master URL" in bad.stderr, bad.stderr
    assert bad.stderr.strip().count("\n") == 0
    no_java = check(run, "--checker", "spark", env={**os.environ, "JAVA_HOME": str(tmp_path / "no-jdk")})
    assert no_java.returncode == 4 and "Spark needs Java" in no_java.stderr, no_java.stderr
    assert no_java.stderr.strip().count("\n") == 0 and not (run / "results.json").exists()
