"""Dependency cycles between transactions (G0, G1c), found with networkx from the engine's edges.

Both engines compute the edges (the reference in Python, Spark with DataFrame jobs) and hand them
here, so the cycles, their counts and their examples are one computation:

* a **ww** edge T1 -> T2: on one partition, a record T1 wrote immediately precedes one T2 wrote in
  the partition's order (its offsets, as acknowledged and read, skipping records that no
  transaction of the graph wrote);
* a **wr** edge T1 -> T2: T2 polled a record T1 wrote.

The graph's transactions are those that committed or may have (`ok`, `info`); an aborted one is
no transaction of the history (what was read of it is `aborted-read`). Between two transactions
each kind of edge is kept once, with the smallest (topic, partition, offset) that shows it.

* **G0** (write cycle): a strongly connected component of the ww edges alone. One occurrence per
  component. Kafka does not isolate transactions' writes from each other (two transactions may
  interleave their records on two partitions in opposite orders), so the verdict allows it.
* **G1c** (circular information flow): a strongly connected component of the ww and wr edges that
  holds a wr edge. Cycles that need a ww edge are again Kafka's missing write isolation (a
  transaction may read another that committed after it wrote); a cycle of wr edges alone is
  impossible with read_committed consumers (each wr edge orders the writer's commit before the
  reader's), so `wr_only` counts the components holding one, and only they make a run invalid.

Example: the component's smallest transaction (`index`), its `size`, a shortest `cycle` (through
its smallest transaction for G0 and for a wr-only cycle of G1c, else through its first wr edge)
and the `steps` that make it up, each with the records that show the edge.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import networkx as nx

from checkers.catalogue import AnomalyResult
from checkers.classify import Examples, classify
from checkers.rules.rows import Component, Cycle


@dataclass(frozen=True, order=True)
class Edge:
    """One dependency: `src` -> `dst` of `kind` ww or wr, shown by the records named.

    ww: `src`'s record (`value` at `offset`) immediately precedes `dst`'s (`next_value` at
    `next_offset`) on topic/partition; wr: `dst` polled `src`'s `value` at `offset`."""

    src: int
    dst: int
    kind: str
    topic: str
    partition: int
    offset: int
    value: int
    next_offset: int | None = None
    next_value: int | None = None

    def step(self) -> dict[str, Any]:
        """The edge as a step of an example's cycle: its fields, the ends and kind in the example's
        words (from, to, type)."""
        return {_STEP_NAMES.get(f.name, f.name): getattr(self, f.name) for f in fields(self)}


_STEP_NAMES = {"src": "from", "dst": "to", "kind": "type"}


def keep_first(edges: Iterable[Edge]) -> dict[tuple[int, int, str], Edge]:
    """One edge per (src, dst, kind): the one with the smallest (topic, partition, offset)."""
    best: dict[tuple[int, int, str], Edge] = {}
    for e in edges:
        if e.src == e.dst:
            continue
        key = (e.src, e.dst, e.kind)
        old = best.get(key)
        if old is None or (e.topic, e.partition, e.offset) < (old.topic, old.partition, old.offset):
            best[key] = e
    return best


def _graph(edges: Iterable[Edge]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_edges_from((e.src, e.dst) for e in edges)
    return graph


def _components(graph: nx.DiGraph) -> list[set[int]]:
    """Strongly connected components with a cycle (two or more transactions), smallest first."""
    found = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    return sorted(found, key=min)


def _path(graph: nx.DiGraph, start: int, goal: int, within: set[int]) -> list[int]:
    """A shortest path start ... goal inside `within`, breadth first over sorted successors (so both
    engines' edges give the same path). start == goal: a shortest cycle back to it."""
    parent: dict[int, int] = {}
    seen = {start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(graph.successors(node)):
            if succ not in within:
                continue
            if succ == goal:
                path = [goal]
                back = node
                while back != start:
                    path.append(back)
                    back = parent[back]
                path.append(start)
                return path[::-1]
            if succ not in seen:
                seen.add(succ)
                parent[succ] = node
                queue.append(succ)
    raise AssertionError(f"no path from {start} to {goal} inside a strongly connected component")


def _steps(cycle: list[int], edges: dict[tuple[int, int, str], Edge], prefer: str) -> list[dict[str, Any]]:
    """The edges along a cycle (its last node returns to its first), `prefer`red kind first."""
    other = "ww" if prefer == "wr" else "wr"
    steps = []
    for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
        edge = edges.get((a, b, prefer)) or edges[(a, b, other)]
        steps.append(edge.step())
    return steps


def cycles(edges: Iterable[Edge]) -> dict[str, AnomalyResult]:
    """{"G0": ..., "G1c": ...} (count, examples; G1c also `wr_only`) of the given edges: each
    component of the ww graph and of the whole graph is a `Component` row of the rules."""
    kept = keep_first(edges)
    ww = [e for e in kept.values() if e.kind == "ww"]
    wr = [e for e in kept.values() if e.kind == "wr"]
    found: dict[str, Examples] = {"G0": Examples("G0"), "G1c": Examples("G1c")}

    ww_graph = _graph(ww)
    for component in _components(ww_graph):

        def ww_cycle(component: set[int] = component) -> Cycle[Any]:
            start = min(component)
            cycle = _path(ww_graph, start, start, component)[:-1]
            return Cycle(min(component), len(component), cycle, _steps(cycle, kept, "ww"), False)

        row = Component(min(component), len(component), "ww", 0, False)
        classify(found, Component, row, {Cycle: ww_cycle})

    full = _graph(kept.values())
    wr_graph = _graph(wr)
    wr_cycles = _components(wr_graph)
    wr_only = 0
    for component in _components(full):
        inside = sorted((e.src, e.dst) for e in wr if e.src in component and e.dst in component)
        own = [c for c in wr_cycles if c <= component]

        def full_cycle(component: set[int] = component, inside: Any = inside, own: Any = own) -> Cycle[Any]:
            if own:
                start = min(own[0])
                cycle = _path(wr_graph, start, start, own[0])[:-1]
            else:
                src, dst = inside[0]
                cycle = [src, *_path(full, dst, src, component)[:-1]]
            return Cycle(min(component), len(component), cycle, _steps(cycle, kept, "wr"), bool(own))

        row = Component(min(component), len(component), "all", len(inside), bool(own))
        if "G1c" in classify(found, Component, row, {Cycle: full_cycle}) and own:
            wr_only += 1
    return {
        "G0": found["G0"].result(),
        "G1c": {**found["G1c"].result(), "wr_only": wr_only},
    }
