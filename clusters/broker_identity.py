"""What a system's brokers say about themselves in Kafka Metadata, compared across its nodes.

Kafka's brokers each list every live broker, under ids that differ. Other Kafka-compatible
systems do not: stateless brokers over a shared store may each list only themselves, all under one
id the system picks (tansu: 111), and each name itself the leader of every partition. strandline
takes them as they are: a broker is known by the address it advertises, never by an assumed id,
and what stands out is said once (harness.log, the report's settings) so a reader knows how the
faults' targets were found. A system none of whose brokers advertises a node's address cannot be
tested at all: `unmappable` says what each advertised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Endpoint = str  # "host:port", as a broker advertises itself


@dataclass(frozen=True)
class Listing:
    """One broker node's Metadata answer: who it lists (id, advertised host:port)."""

    node: str
    endpoint: Endpoint  # where the node's broker was asked
    brokers: tuple[tuple[int, Endpoint], ...]


def listing(node: str, endpoint: Endpoint, answer: dict[str, Any]) -> Listing:
    listed = tuple((int(b["node_id"]), f"{b['host']}:{b['port']}") for b in answer.get("brokers") or [])
    return Listing(node, endpoint, listed)


def lists_only_itself(seen: Listing) -> bool:
    return [e for _, e in seen.brokers] == [seen.endpoint]


def said(seen: Listing) -> str:
    """'111 at 10.0.0.1:9092, 112 at ...' (or 'no broker')."""
    return ", ".join(f"{i} at {e}" for i, e in seen.brokers) or "no broker"


def unmappable(seen: Listing, node_of: Callable[[Endpoint], str | None]) -> bool:
    """The node lists brokers, and none of them at a broker node's address: no broker it names
    can ever be found on a node (an advertised wildcard or a name the controller cannot reach)."""
    return bool(seen.brokers) and all(node_of(e) is None for _, e in seen.brokers)


def unmappable_error(listings: Sequence[Listing]) -> str:
    """The one line for a system whose brokers cannot be mapped to its nodes."""
    each = "; ".join(f"{s.node} ({s.endpoint}) advertises {said(s)}" for s in listings)
    return (
        "the brokers cannot be mapped to nodes: none advertises the address and port of a broker "
        f"node in its Metadata ({each}); advertise {{address}}:{{port}} (docs/systems.md, Broker identity)"
    )


def notes(listings: Sequence[Listing], node_of: Callable[[Endpoint], str | None]) -> list[str]:
    """What stands out in the brokers' own listings: one id reported by several nodes; brokers
    that list only themselves. Empty for a Kafka-like system."""
    out = []
    by_id: dict[int, set[str]] = {}
    for seen in listings:
        for broker_id, endpoint in seen.brokers:
            node = node_of(endpoint)
            if node is not None:
                by_id.setdefault(broker_id, set()).add(node)
    for broker_id, nodes in sorted(by_id.items()):
        if len(nodes) > 1:
            out.append(
                f"{_names(nodes)} report the same broker id {broker_id}: brokers are told apart by "
                "the address they advertise"
            )
    alone = [s.node for s in listings if lists_only_itself(s)]
    if len(listings) > 1 and alone:
        who = "each broker lists" if len(alone) == len(listings) else f"{_names(alone)} list"
        out.append(f"{who} only itself in its Metadata: brokers are found by asking each node")
    return out


def self_claims(
    answers: Sequence[tuple[Endpoint, dict[str, Any]]], node_in: Callable[[dict[str, Any], int], str | None]
) -> str | None:
    """Does every broker that answered name itself the leader of every partition it lists (so no
    partition has one leader among the nodes)? The sentence that says so, or None. Needs two
    answers about at least one partition."""
    leaders: dict[tuple[str, int], set[str | None]] = {}
    selves = 0
    for endpoint, answer in answers:
        claimed = []
        for topic in answer.get("topics") or []:
            name = topic.get("name")
            if name is None or topic.get("is_internal") or str(name).startswith("__"):
                continue
            for p in topic.get("partitions") or []:
                leader = int(p.get("leader_id", -1))
                node = node_in(answer, leader) if leader >= 0 else None
                leaders.setdefault((str(name), int(p["partition_index"])), set()).add(node)
                claimed.append(leader >= 0 and _endpoint_of(answer, leader) == endpoint)
        selves += bool(claimed) and all(claimed)
    contested = sorted(f"{t}-{p}" for (t, p), nodes in leaders.items() if len(nodes - {None}) > 1)
    if selves < 2 or not contested or selves < len(answers):
        return None
    shown = ", ".join(contested[:4]) + (f" and {len(contested) - 4} more" if len(contested) > 4 else "")
    return (
        f"every broker names itself the leader of every partition ({shown}): no partition has one "
        'leader among the nodes (metadata.leaders = "any-broker" in the definition says so, and '
        "refuses leader-targeted faults before a run)"
    )


def _endpoint_of(answer: dict[str, Any], broker_id: int) -> Endpoint | None:
    listed = [
        f"{b['host']}:{b['port']}" for b in answer.get("brokers") or [] if int(b["node_id"]) == broker_id
    ]
    return listed[0] if len(listed) == 1 else None


def _names(nodes: Sequence[str] | set[str]) -> str:
    ordered = sorted(nodes, key=lambda n: (len(n), n))
    return ", ".join(ordered[:-1]) + f" and {ordered[-1]}" if len(ordered) > 1 else ordered[0]
