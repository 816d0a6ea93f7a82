"""The `storage` faults on a real netns cluster from a definition with a role of `kind = "s3"`
(moto's S3 server, PyPI `moto[server]`): strandline starts its S3 proxy beside the store and gives
the other roles the proxy's address; each object-store fault (SlowDown, latency, a reply dropped
after the store applied the PUT, a reset) is what a real S3 client (boto3, retries off) meets
through it, is journaled with what the proxy struck, is healed, and nothing is left running after
the cluster is down. The broker role is a stand-in that only holds the proxy's address (this test
is about the store's faults; tansu runs them end to end in test_clusters_tansu.py)."""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.factory import build_cluster
from foundation.config import TestConfig
from foundation.errors import BadInput
from history.writer import HistoryWriter
from nemesis import build_nemesis
from tests.support.s3 import s3_client

pytest.importorskip("boto3")
botocore_exceptions = pytest.importorskip("botocore.exceptions")
pytest.importorskip("moto.server")

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

DEFINITION = """
name = "s3-stand-in"

[roles.storage]
kind = "s3"
port = 5000
start = ["{python}", "-m", "moto.server", "--host", "{address}", "--port", "{port}"]
ready = { kind = "command", command = "curl -sf -X PUT http://{address}:{port}/tansu >/dev/null", timeout = 60 }

[roles.broker]
port = 9092
start = ["sh", "-c", "echo {storage.servers} > {home}/endpoint; exec {python} -m http.server {port} --bind {address}"]
ready = "port"
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("storage")
    path = root / "s3-stand-in.toml"
    path.write_text(DEFINITION)
    config = TestConfig(
        name="s3t",
        system=str(path),
        nodes=1,
        replication_factor=1,
        min_insync=1,
        seed=3,
        nemesis=("storage",),
    )
    cluster = build_cluster(config, root / "work", state_dir=root / "state")
    cluster.up()
    try:
        yield {"config": config, "cluster": cluster, "root": root}
    finally:
        cluster.down()
        store = cluster.sut.node_named("st1")
        assert store.daemon_pid("s3-proxy") is None and store.daemon_pid("storage") is None
        spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
        assert "s3t" not in spaces


def endpoints(env: dict[str, Any]) -> tuple[str, str]:
    """(the proxy, the store itself): the broker role was given the proxy's address."""
    cluster = env["cluster"]
    broker = cluster.sut.node_named("n1")
    given = broker.exec(["cat", f"{cluster.sut.home(broker)}/endpoint"]).stdout.strip()
    store = cluster.sut.node_named("st1")
    return given, f"{store.address}:5000"


def test_the_other_roles_reach_the_store_through_the_proxy(env: dict[str, Any]) -> None:
    proxy, store = endpoints(env)
    assert proxy.endswith(":5001") and proxy.rsplit(":", 1)[0] == store.rsplit(":", 1)[0]
    s3_client(proxy).put_object(Bucket="tansu", Key="k", Body=b"v")
    assert s3_client(store).get_object(Bucket="tansu", Key="k")["Body"].read() == b"v"


def test_each_object_store_fault_is_met_journaled_and_healed(env: dict[str, Any]) -> None:
    proxy_at, store_at = endpoints(env)
    through, direct = s3_client(proxy_at), s3_client(store_at)
    history = HistoryWriter(env["root"] / "storage.jsonl")
    nem = build_nemesis(
        env["config"], env["cluster"], history, random.Random(5), state_dir=env["root"] / "ledger"
    )
    nem.validate()
    meets: dict[str, Any] = {
        "slowdown": lambda: through.put_object(Bucket="tansu", Key="s", Body=b"s"),
        "drop-reply": lambda: through.put_object(Bucket="tansu", Key="d", Body=b"applied"),
        "reset": lambda: through.put_object(Bucket="tansu", Key="r", Body=b"r"),
    }
    for pick, fault in enumerate(("slowdown", "latency", "drop-reply", "reset"), start=1):
        nem.execute({"do": "storage", "fault": fault, "methods": ["PUT"], "latency_ms": 700, "pick": pick})
        if fault == "latency":
            started = time.monotonic()
            through.put_object(Bucket="tansu", Key="l", Body=b"l")
            assert time.monotonic() - started >= 0.7
            through.get_object(Bucket="tansu", Key="l")  # a GET is not delayed: methods = PUT
        else:
            error = (
                botocore_exceptions.ClientError if fault == "slowdown" else botocore_exceptions.BotoCoreError
            )
            with pytest.raises(error) as raised:
                meets[fault]()
            if fault == "slowdown":
                assert raised.value.response["Error"]["Code"] == "SlowDown"  # type: ignore[attr-defined]
        nem.heal()
        through.put_object(Bucket="tansu", Key=f"after-{fault}", Body=b"ok")  # healed: no fault
    assert direct.get_object(Bucket="tansu", Key="d")["Body"].read() == b"applied"  # the store applied it
    assert "Contents" not in direct.list_objects_v2(Bucket="tansu", Prefix="s")
    history.close()
    ops = [json.loads(line) for line in Path(env["root"] / "storage.jsonl").read_text().splitlines()]
    faults = [op for op in ops if op["f"] == "storage" and op["type"] == "ok"]
    assert [op["value"]["fault"] for op in faults] == ["slowdown", "latency", "drop-reply", "reset"]
    assert all(op["value"]["nodes"] == ["st1"] for op in faults)
    heals = [op for op in ops if op["f"] == "heal" and op["type"] == "ok"]
    assert len(heals) == 4 and all(h["value"]["struck"]["st1"]["injected"] >= 1 for h in heals), heals
    assert nem.active_faults() == [] and nem.heal_all() == []


def test_storage_is_refused_for_a_role_not_of_kind_s3(env: dict[str, Any]) -> None:
    history = HistoryWriter(env["root"] / "refused.jsonl")
    nem = build_nemesis(
        env["config"].replace(schedule=({"do": "storage", "fault": "slowdown", "role": "broker"},)),
        env["cluster"], history, random.Random(1), state_dir=env["root"] / "ledger-refused",
    )  # fmt: skip
    with pytest.raises(BadInput, match="role 'broker' is not of kind"):
        nem.validate()
    history.close()
