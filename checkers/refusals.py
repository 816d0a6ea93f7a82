"""What the system under test refused: features the test asked for (an idempotent producer,
consumer groups) that the system does not implement or answers with an error.

A Kafka-compatible system may lack a feature Kafka has. That is the system's answer, not an anomaly
and not the harness's failure: the operations it refused end `fail` or `info` with the broker's (or
the client's) error, the verdict stays the history's, and results.json says under `refused` what
was refused, how we know (the APIs missing from the brokers' ApiVersions, which the cluster
records in nodes/api-versions.json, and the operations that ended with such an error) and which
history lines show it (docs/results-format.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation.config import TestConfig
from history.reader import iter_ops

MAX_EXAMPLES = 20
# A refusal is in an operation's `error`: only the lines that hold this key can show one.
ERROR_KEY = '"error"'


@dataclass(frozen=True)
class Feature:
    name: str
    apis: Mapping[int, str]  # Kafka's API key -> name: the requests the feature needs
    asked: Callable[[TestConfig], str | None]  # the setting that asks for it (None: not asked)
    refusal: re.Pattern[str]  # how clients word the system's refusal in an operation's error


GROUP_APIS = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
              13: "LeaveGroup", 14: "SyncGroup"}  # fmt: skip
FEATURES = (
    Feature(
        "idempotence",
        {22: "InitProducerId"},
        lambda c: "idempotence = true" if c.idempotence else None,
        # Left out of ApiVersions: kafka-python "does not support the 'InitProducerIdRequest'",
        # librdkafka "Idempotent producer not supported by any of the N connected broker(s)".
        # Offered but refused (an authorization error): kafka-python "Unexpected error in
        # InitProducerIdResponse", librdkafka "Failed to acquire idempotence PID from broker".
        re.compile(
            r"InitProducerId|idempotent producer not supported|idempotence not supported|idempotence PID",
            re.I,
        ),
    ),
    Feature(
        "consumer groups",
        GROUP_APIS,
        lambda c: f"consume = {c.consume}" if c.consume != "assign" else None,
        # kafka-python: "Kafka broker does not support the 'JoinGroupRequest' Kafka protocol"
        re.compile(rf"does not support the '({'|'.join(GROUP_APIS.values())})Request'", re.I),
    ),
    Feature(
        "consumer group protocol (KIP-848)",
        {68: "ConsumerGroupHeartbeat"},
        lambda c: (
            "group_protocol = consumer" if c.group_protocol == "consumer" and c.consume != "assign" else None
        ),
        # the Java client: "The cluster does not support the new CONSUMER group protocol. Set ..."
        re.compile(r"does not support the new CONSUMER group protocol", re.I),
    ),
)


def refusals(
    config: TestConfig,
    history: Path,
    api_versions: Any,
    ops: Callable[[list[re.Pattern[str]]], Iterable[dict[str, Any]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """{feature: {asked, missing_apis, ops, error, examples}} for each feature the test asked for
    and the system refused; {} when it refused nothing (or nothing was asked: then the history is
    not read).

    `ops(patterns)`: the history's ops in order, or at least every one whose line matches one of
    the patterns (Spark hands over just those); by default every op of `history`, read here."""
    asked = {f.name: why for f in FEATURES if (why := f.asked(config)) is not None}
    if not asked:
        return {}
    offered = _offered(api_versions)
    found: dict[str, dict[str, Any]] = {}
    for feature in FEATURES:
        if feature.name not in asked:
            continue
        missing = [] if offered is None else [n for k, n in sorted(feature.apis.items()) if k not in offered]
        found[feature.name] = {
            "asked": asked[feature.name],
            "missing_apis": missing,
            "ops": {"fail": 0, "info": 0},
            "error": "",
            "examples": [],
        }
    features = [f for f in FEATURES if f.name in found]
    candidates = ops([f.refusal for f in features]) if ops is not None else iter_ops(history, problems=[])
    _count_refused_ops(candidates, features, found)
    return {name: r for name, r in found.items() if r["missing_apis"] or sum(r["ops"].values())}


def _offered(api_versions: Any) -> set[int] | None:
    """The API keys nodes/api-versions.json lists (None: the file is missing or unreadable)."""
    if not isinstance(api_versions, dict) or not isinstance(api_versions.get("apis"), dict):
        return None
    try:
        return {int(key) for key in api_versions["apis"]}
    except ValueError:
        return None


def _count_refused_ops(
    ops: Iterable[dict[str, Any]], features: list[Feature], found: dict[str, dict[str, Any]]
) -> None:
    for op in ops:
        if op.get("type") not in ("fail", "info") or not isinstance(op.get("error"), str):
            continue
        for feature in features:
            if feature.refusal.search(op["error"]):
                entry = found[feature.name]
                entry["ops"][op["type"]] += 1
                entry["error"] = entry["error"] or op["error"]
                if len(entry["examples"]) < MAX_EXAMPLES:
                    entry["examples"].append(op.get("index"))


def describe(name: str, refused: Mapping[str, Any]) -> str:
    """One line for notes and the report: what was refused and how we know."""
    parts = []
    if refused.get("missing_apis"):
        parts.append(f"its brokers do not offer {', '.join(refused['missing_apis'])} (ApiVersions)")
    ops = refused.get("ops") or {}
    if sum(ops.values()):
        parts.append(
            f"{ops.get('fail', 0)} operations ended fail and {ops.get('info', 0)} info with its refusal"
            + (f" ({refused['error']})" if refused.get("error") else "")
        )
    return f"{name} ({refused.get('asked')}): {'; '.join(parts)}"
