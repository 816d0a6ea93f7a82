"""Network partitions as grudges, computed with networkx (after Jepsen's `nemesis` grudges).

A grudge maps each node to the set of nodes whose packets it drops. It is derived from a
*connectivity graph*: an edge means "these two can talk". Every function here is pure: it takes the
node names and a `random.Random`, so a seed gives the same partition on every backend.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

import networkx as nx

from foundation.errors import BadInput

Grudge = dict[str, set[str]]

# The partition shapes accepted by `partition:<shape>` and by scripted steps' "grudge".
SHAPES = (
    "one",
    "halves",
    "majority",
    "ring",
    "bridge",
    "leader",
    "successor",
    "zk-one",
    "zk-leader",
    "zk-all",
)


def from_components(nodes: Iterable[str], components: Iterable[Iterable[str]]) -> Grudge:
    """Everyone drops traffic from every node outside its own component."""
    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    for component in components:
        members = list(component)
        graph.add_edges_from((a, b) for i, a in enumerate(members) for b in members[i + 1 :])
    return from_graph(graph)


def from_graph(graph: nx.Graph) -> Grudge:
    """The complement of the connectivity graph: who drops whom."""
    complement = nx.complement(graph)
    return {str(n): {str(m) for m in complement.neighbors(n)} for n in sorted(graph.nodes)}


def is_partition(grudge: Mapping[str, set[str]]) -> bool:
    """Whether anyone drops anything at all."""
    return any(grudge.values())


def isolate(nodes: Sequence[str], victims: Iterable[str]) -> Grudge:
    """Cut `victims` (together) from everyone else."""
    inside = [n for n in nodes if n in set(victims)]
    outside = [n for n in nodes if n not in set(victims)]
    return from_components(nodes, [inside, outside])


def halves(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Random halves (sizes differ by at most one)."""
    _need(len(nodes) >= 2, "halves", "needs at least 2 nodes")
    shuffled = _shuffled(nodes, rng)
    cut = len(shuffled) // 2
    return from_components(nodes, [shuffled[:cut], shuffled[cut:]])


def majority_minority(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """A random bare majority on one side, the rest on the other."""
    _need(len(nodes) >= 2, "majority", "needs at least 2 nodes")
    shuffled = _shuffled(nodes, rng)
    majority = len(shuffled) // 2 + 1
    return from_components(nodes, [shuffled[:majority], shuffled[majority:]])


def majorities_ring(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Every node sees a majority, and no two nodes see the same majority (symmetric links).

    Nodes sit on a shuffled ring; each sees its neighbours up to the smallest distance that makes a
    majority. This needs at least 4 nodes: with 3, every majority view is the whole cluster.
    """
    n = len(nodes)
    _need(n >= 4, "ring", f"needs at least 4 nodes (got {n}): with fewer, a majority sees everyone")
    ring = _shuffled(nodes, rng)
    majority = n // 2 + 1
    distance = 1
    while 1 + 2 * distance < majority:
        distance += 1
    graph = nx.Graph()
    graph.add_nodes_from(ring)
    for i, a in enumerate(ring):
        for d in range(1, distance + 1):
            graph.add_edge(a, ring[(i + d) % n])
    return from_graph(graph)


def bridge(nodes: Sequence[str], rng: random.Random) -> Grudge:
    """Two halves that cannot talk, and one bridge node that talks to both."""
    _need(len(nodes) >= 3, "bridge", f"needs at least 3 nodes (got {len(nodes)})")
    shuffled = _shuffled(nodes, rng)
    middle = shuffled[len(shuffled) // 2]
    rest = [n for n in shuffled if n != middle]
    cut = len(rest) // 2
    left, right = rest[:cut], rest[cut:]
    graph = nx.Graph()
    graph.add_nodes_from(shuffled)
    for side in (left, right):
        members = [*side, middle]
        graph.add_edges_from((a, b) for i, a in enumerate(members) for b in members[i + 1 :])
    return from_graph(graph)


def cut_from(nodes: Sequence[str], victims: Iterable[str], other: str) -> Grudge:
    """Cut only the links between `victims` and `other` (e.g. brokers and ZooKeeper)."""
    victim_set = set(victims)
    everyone = [*nodes, other] if other not in nodes else list(nodes)
    graph = nx.complete_graph(everyone)
    for v in victim_set:
        if v != other:
            graph.remove_edge(v, other)
    return from_graph(graph)


def to_json(grudge: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Sorted lists, only nodes that drop something: what goes into the history."""
    return {n: sorted(drops) for n, drops in sorted(grudge.items()) if drops}


def components(grudge: Mapping[str, set[str]]) -> list[list[str]]:
    """Groups that can all talk to each other (for a readable history value), when symmetric."""
    graph = nx.Graph()
    graph.add_nodes_from(grudge)
    names = list(grudge)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if b not in grudge[a] and a not in grudge.get(b, set()):
                graph.add_edge(a, b)
    return sorted(sorted(c) for c in nx.find_cliques(graph)) if graph.number_of_nodes() else []


def _shuffled(nodes: Sequence[str], rng: random.Random) -> list[str]:
    out = sorted(nodes)
    rng.shuffle(out)
    return out


def _need(ok: bool, shape: str, why: str) -> None:
    if not ok:
        raise BadInput(f"partition shape {shape!r} {why}")
