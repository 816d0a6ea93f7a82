"""Creating the test's topics (t0 .. t{n-1}) and waiting until every partition has a leader."""

from __future__ import annotations

import logging
import time
from typing import Any

from kafka.errors import TopicAlreadyExistsError

from foundation.config import TestConfig
from foundation.errors import InfrastructureError
from workloads.generator import topic_partitions

log = logging.getLogger(__name__)

TOPIC_ALREADY_EXISTS = TopicAlreadyExistsError.errno  # Kafka error code 36, as the client names it


def topic_names(config: TestConfig) -> list[str]:
    return [f"t{i}" for i in range(config.topics)]


def _missing_leaders(topics: list[dict[str, Any]], config: TestConfig) -> list[str]:
    """Topic-partitions that are not ready yet: unknown, without a leader, or short of replicas."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for topic in topics:
        for part in topic.get("partitions") or []:
            seen[(str(topic.get("name")), int(part.get("partition_index", part.get("partition", -1))))] = part
    missing = []
    for tp in topic_partitions(config.topics, config.partitions):
        part = seen.get(tp)
        if part is None:
            missing.append(f"{tp[0]}/{tp[1]} unknown")
            continue
        leader = part.get("leader_id", part.get("leader", -1))
        replicas = part.get("replica_nodes", part.get("replicas", []))
        if leader is None or leader < 0 or part.get("error_code", 0) not in (0, None):
            missing.append(f"{tp[0]}/{tp[1]} has no leader")
        elif len(replicas) < config.replication_factor:
            missing.append(f"{tp[0]}/{tp[1]} has {len(replicas)} of {config.replication_factor} replicas")
    return missing


def setup_topics(config: TestConfig, bootstrap: list[str], timeout: float = 60.0) -> None:
    """Create the topics (existing ones are fine) and wait until every partition has a leader."""
    from kafka.admin import KafkaAdminClient

    deadline = time.monotonic() + timeout
    last_error = ""
    admin = None
    while admin is None:
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap, request_timeout_ms=10000, client_id="strandline-setup"
            )
        except Exception as e:
            last_error = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"cannot reach the cluster at {','.join(bootstrap)}: {last_error}"
                ) from None
            time.sleep(0.5)
    try:
        wanted = {
            name: {"num_partitions": config.partitions, "replication_factor": config.replication_factor}
            for name in topic_names(config)
        }
        created = False
        while not created:
            try:
                result = admin.create_topics(wanted, timeout_ms=10000, raise_errors=False)
                errors = [
                    f"{t.get('name')}: error {t.get('error_code')} {t.get('error_message') or ''}".strip()
                    for t in result.get("topics", [])
                    if t.get("error_code", 0) not in (0, TOPIC_ALREADY_EXISTS)
                ]
                if not errors:
                    created = True
                    break
                last_error = "; ".join(errors)
            except Exception as e:
                last_error = f"{type(e).__name__}: {e}"
            if time.monotonic() > deadline:
                raise InfrastructureError(f"cannot create topics {', '.join(wanted)}: {last_error}")
            time.sleep(0.5)
        while True:
            try:
                missing = _missing_leaders(admin.describe_topics(list(wanted)), config)
            except Exception as e:
                missing = [f"{type(e).__name__}: {e}"]
            if not missing:
                log.info("topics ready: %s", ", ".join(wanted))
                return
            if time.monotonic() > deadline:
                raise InfrastructureError(f"topics not ready after {timeout:g} s: {'; '.join(missing[:5])}")
            time.sleep(0.3)
    finally:
        admin.close()
