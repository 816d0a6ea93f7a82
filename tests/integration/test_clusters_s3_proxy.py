"""strandline's S3 proxy (clusters/s3_proxy.py) in front of a real S3-compatible store (moto's
server), as a real S3 client (boto3, retries off) meets it: requests relay as they are; 503
SlowDown, latency, a reply lost after the store applied the PUT, and a reset, each per its rule and
counted; a rule removed is no fault; the proxy ends on SIGTERM, leaving nothing running."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.s3 import s3_client

pytest.importorskip("boto3")
botocore_exceptions = pytest.importorskip("botocore.exceptions")
moto_server = pytest.importorskip("moto.server")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def store() -> Iterator[str]:
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop()


class Proxy:
    def __init__(self, tmp: Path, upstream: str) -> None:
        self.port = free_port()
        self.rules, self.stats, self.log = tmp / "rules.json", tmp / "stats.json", tmp / "proxy.log"
        self.rules.write_text("{}")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "clusters.s3_proxy", "--listen", f"127.0.0.1:{self.port}",
             "--upstream", upstream, "--rules", str(self.rules), "--stats", str(self.stats)],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.process.poll() is None and time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.1)

    def rule(self, **rule: Any) -> None:
        time.sleep(0.01)  # a new modification time, so the proxy reads the rule again
        self.rules.write_text(json.dumps(rule))

    def injected(self) -> int:
        return int(json.loads(self.stats.read_text())["injected"]) if self.stats.exists() else 0


def test_each_store_fault_is_what_an_s3_client_meets_and_counted(tmp_path: Path, store: str) -> None:
    proxy = Proxy(tmp_path, store)
    try:
        through, direct = s3_client(f"127.0.0.1:{proxy.port}"), s3_client(store)
        through.create_bucket(Bucket="tansu")
        through.put_object(Bucket="tansu", Key="a", Body=b"x" * 70_000)  # relayed as it is
        assert through.get_object(Bucket="tansu", Key="a")["Body"].read() == b"x" * 70_000

        proxy.rule(id="f1", fault="slowdown", methods=["PUT"])
        with pytest.raises(botocore_exceptions.ClientError) as e:
            through.put_object(Bucket="tansu", Key="b", Body=b"b")
        assert e.value.response["Error"]["Code"] == "SlowDown"
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert through.get_object(Bucket="tansu", Key="a")["Body"].read()  # GETs pass: methods = PUT
        assert "Contents" not in direct.list_objects_v2(Bucket="tansu", Prefix="b")  # never reached it
        assert proxy.injected() == 1

        proxy.rule(id="f2", fault="latency", latency_ms=600)
        started = time.monotonic()
        through.head_object(Bucket="tansu", Key="a")
        assert time.monotonic() - started >= 0.6

        proxy.rule(id="f3", fault="drop-reply", methods=["PUT"])
        with pytest.raises(botocore_exceptions.BotoCoreError):
            through.put_object(Bucket="tansu", Key="c", Body=b"applied")
        assert direct.get_object(Bucket="tansu", Key="c")["Body"].read() == b"applied"  # the store has it

        proxy.rule(id="f4", fault="reset")
        with pytest.raises(botocore_exceptions.BotoCoreError):
            through.put_object(Bucket="tansu", Key="d", Body=b"d")
        assert "Contents" not in direct.list_objects_v2(Bucket="tansu", Prefix="d")

        proxy.rule()  # healed: no fault
        through.put_object(Bucket="tansu", Key="e", Body=b"e")
        assert through.get_object(Bucket="tansu", Key="e")["Body"].read() == b"e"
    finally:
        proxy.process.terminate()
        assert proxy.process.wait(timeout=10) is not None
    said = proxy.log.read_text()
    for line in ("f1: slowdown PUT", "f3: drop-reply PUT", "f4: reset PUT", "rule (none): no fault"):
        assert line in said, said
