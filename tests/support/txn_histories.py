"""Synthetic transactional histories with planted anomalies, for the checkers' tests.

A correct Kafka with transactions is simulated, serially: clients run transactions of one to four
sends and polls one at a time, so no two transactions interleave and the background holds no
dependency cycle. Each partition's log holds records (pending until their transaction ends, then
committed or aborted) and a marker per transaction that wrote there; polls read committed records
only, from the process's positions, and stop at a pending record (the last stable offset).
Transactions commit (`ok`), abort (`fail`) or end unknown (`info`: committed or aborted in the log,
and the process is replaced). A final drain reads every partition from the beginning.

Each planted anomaly is a small episode of fresh processes and values, so the planted anomalies
are exactly the anomalies of the history (`Planted` says what each is counted by):

* `aborted-read`: an aborted transaction's record is committed in the log anyway;
* `torn-transaction`: a committed transaction's second record is overwritten in the log by another
  transaction's, which writes one more record after it (so also a `lost-write` and an
  `inconsistent-offsets`);
* `G0`: two committed transactions whose records follow each other in opposite orders on two
  partitions;
* `G1c`: two committed transactions that each read the other's record (a cycle of wr edges alone);
* `G1c-ww`: A's record precedes B's on one partition, and A reads B's record on another (a G1c
  that needs a ww edge: allowed);
* `precommitted-read`: a transaction reads its own record.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.support.history_builder import HistoryBuilder

TXN_PLANTABLE = ("aborted-read", "torn-transaction", "G0", "G1c", "G1c-ww", "precommitted-read")
PENDING, COMMITTED, ABORTED, MARKER = "pending", "committed", "aborted", "marker"
POLL_RECORDS = 5


@dataclass
class TxnPlanted:
    """What a synthetic transactional history holds: anomaly name -> planted instances (each with
    fields its examples carry). `G1c-ww` plants are G1c instances with `wr_only` False."""

    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def note(self, name: str, **instance: Any) -> None:
        self.anomalies.setdefault(name, []).append(instance)

    def counts(self) -> dict[str, int]:
        return {name: len(instances) for name, instances in self.anomalies.items() if instances}


@dataclass
class _Client:
    process: int
    positions: dict[int, int] = field(default_factory=dict)  # part -> next offset to read


class _Simulation:
    def __init__(self, rng: random.Random, partitions: int):
        self.rng = rng
        self.b = HistoryBuilder()
        self.parts = [("t0", p) for p in range(partitions)]
        self.logs: list[list[list[Any]]] = [[] for _ in self.parts]  # [value, state, txn]
        self.process: Callable[[], int] = itertools.count().__next__  # a fresh process
        self.value: Callable[[], int] = itertools.count().__next__  # a fresh value
        self.planted = TxnPlanted()
        self.txn_serial = 0

    def client(self) -> _Client:
        """A fresh process with every partition assigned from the beginning."""
        c = _Client(self.process(), dict.fromkeys(range(len(self.parts)), 0))
        fields = {"partitions": [[t, p] for t, p in self.parts], "seek": "beginning"}
        self.b.op(process=c.process, type="invoke", f="assign", **fields)
        self.b.op(process=c.process, type="ok", f="assign", **fields)
        return c

    # --- one transaction ----------------------------------------------------------------------
    def begin(self, c: _Client, mops: list[dict[str, Any]]) -> dict[str, Any]:
        self.txn_serial += 1
        invoke = {"process": c.process, "type": "invoke", "f": "txn", "mops": mops, "abort": False}
        self.b.op(**invoke)
        return {"invoke": invoke, "serial": self.txn_serial, "done": [dict(m) for m in mops], "parts": set()}

    def send(self, txn: dict[str, Any], i: int, part: int, state: str = PENDING) -> int:
        log = self.logs[part]
        log.append([txn["done"][i]["value"], state, txn["serial"]])
        txn["done"][i]["offset"] = len(log) - 1
        txn["parts"].add(part)
        return len(log) - 1

    def poll(self, txn: dict[str, Any], i: int, c: _Client) -> None:
        records: list[dict[str, Any]] = []
        for part, (topic, partition) in enumerate(self.parts):
            log = self.logs[part]
            position = c.positions[part]
            while position < len(log) and len(records) < POLL_RECORDS:
                value, state, _ = log[position]
                if state == PENDING:
                    break  # the last stable offset
                if state == COMMITTED:
                    records.append(
                        {"topic": topic, "partition": partition, "offset": position, "value": value}
                    )
                position += 1
            c.positions[part] = position
        txn["done"][i]["records"] = records

    def end(self, c: _Client, txn: dict[str, Any], outcome: str, committed: bool) -> None:
        for part in sorted(txn["parts"]):
            for entry in self.logs[part]:
                if entry[2] == txn["serial"] and entry[1] == PENDING:
                    entry[1] = COMMITTED if committed else ABORTED
            self.logs[part].append([None, MARKER, txn["serial"]])
        completion = {**txn["invoke"], "type": outcome, "mops": txn["done"]}
        if outcome != "ok":
            completion["error"] = "aborted" if outcome == "fail" else "timed out"
        self.b.op(**completion)

    def background(self, clients: list[_Client]) -> None:
        """One ordinary transaction by a random client (replaced when it ends info)."""
        k = self.rng.randrange(len(clients))
        c = clients[k]
        mops: list[dict[str, Any]] = []
        for _ in range(self.rng.randint(1, 4)):
            if self.rng.random() < 0.6:
                topic, partition = self.rng.choice(self.parts)
                mops.append({"f": "send", "topic": topic, "partition": partition, "value": self.value()})
            else:
                mops.append({"f": "poll"})
        txn = self.begin(c, mops)
        for i, mop in enumerate(mops):
            if mop["f"] == "send":
                self.send(txn, i, mop["partition"])
            else:
                self.poll(txn, i, c)
        r = self.rng.random()
        outcome = "ok" if r < 0.8 else "fail" if r < 0.92 else "info"
        self.end(
            c, txn, outcome, committed=outcome == "ok" or (outcome == "info" and self.rng.random() < 0.5)
        )
        if outcome == "info":
            clients[k] = self.client()

    # --- planted episodes ---------------------------------------------------------------------
    def _send_mop(self, part: int) -> dict[str, Any]:
        topic, partition = self.parts[part]
        return {"f": "send", "topic": topic, "partition": partition, "value": self.value()}

    def plant_aborted_read(self) -> None:
        c = self.client()
        part = self.rng.randrange(len(self.parts))
        txn = self.begin(c, [self._send_mop(part)])
        self.send(txn, 0, part)
        self.end(c, txn, "fail", committed=True)  # the bug: its abort left the record committed
        self.planted.note("aborted-read", value=txn["done"][0]["value"])

    def plant_torn_transaction(self) -> None:
        a, x = self.client(), self.client()
        p1, p2 = self.rng.sample(range(len(self.parts)), 2)
        txn = self.begin(a, [self._send_mop(p1), self._send_mop(p2)])
        self.send(txn, 0, p1)
        o2 = self.send(txn, 1, p2)
        self.end(a, txn, "ok", committed=True)
        # another transaction's record takes its second record's place, and one more follows it
        other = self.begin(x, [self._send_mop(p2), self._send_mop(p2)])
        self.logs[p2][o2] = [other["done"][0]["value"], PENDING, other["serial"]]
        other["done"][0]["offset"] = o2
        self.send(other, 1, p2)
        self.end(x, other, "ok", committed=True)
        topic, partition = self.parts[p2]
        self.planted.note("torn-transaction", process=a.process, lost=[txn["done"][1]["value"]])
        self.planted.note("lost-write", value=txn["done"][1]["value"])
        self.planted.note("inconsistent-offsets", topic=topic, partition=partition, offset=o2)

    def plant_g0(self) -> None:
        a, b = self.client(), self.client()
        p1, p2 = self.rng.sample(range(len(self.parts)), 2)
        ta = self.begin(a, [self._send_mop(p1), self._send_mop(p2)])
        tb = self.begin(b, [self._send_mop(p1), self._send_mop(p2)])
        self.send(ta, 0, p1)
        self.send(tb, 0, p1)
        self.send(tb, 1, p2)
        self.send(ta, 1, p2)
        self.end(a, ta, "ok", committed=True)
        self.end(b, tb, "ok", committed=True)
        self.planted.note("G0", size=2)

    def _read_of(self, txn: dict[str, Any], i: int, part: int, offset: int, value: int) -> None:
        topic, partition = self.parts[part]
        txn["done"][i]["records"] = [
            {"topic": topic, "partition": partition, "offset": offset, "value": value}
        ]

    def plant_g1c(self) -> None:
        a, b = self.client(), self.client()
        p1, p2 = self.rng.sample(range(len(self.parts)), 2)
        ta = self.begin(a, [self._send_mop(p1), {"f": "poll"}])
        tb = self.begin(b, [self._send_mop(p2), {"f": "poll"}])
        oa, ob = self.send(ta, 0, p1), self.send(tb, 0, p2)
        self._read_of(ta, 1, p2, ob, tb["done"][0]["value"])
        self._read_of(tb, 1, p1, oa, ta["done"][0]["value"])
        self.end(a, ta, "ok", committed=True)
        self.end(b, tb, "ok", committed=True)
        self.planted.note("G1c", size=2, wr_only=True)

    def plant_g1c_ww(self) -> None:
        a, b = self.client(), self.client()
        p1, p2 = self.rng.sample(range(len(self.parts)), 2)
        ta = self.begin(a, [self._send_mop(p1), {"f": "poll"}])
        tb = self.begin(b, [self._send_mop(p1), self._send_mop(p2)])
        self.send(ta, 0, p1)
        self.send(tb, 0, p1)
        ob = self.send(tb, 1, p2)
        self.end(b, tb, "ok", committed=True)
        self._read_of(ta, 1, p2, ob, tb["done"][1]["value"])
        self.end(a, ta, "ok", committed=True)
        self.planted.note("G1c", size=2, wr_only=False)

    def plant_precommitted_read(self) -> None:
        c = self.client()
        part = self.rng.randrange(len(self.parts))
        txn = self.begin(c, [self._send_mop(part), {"f": "poll"}])
        offset = self.send(txn, 0, part)
        value = txn["done"][0]["value"]
        self._read_of(txn, 1, part, offset, value)
        self.end(c, txn, "ok", committed=True)
        self.planted.note("precommitted-read", process=c.process, value=value, offset=offset)

    def drain(self) -> None:
        """A fresh process reads every partition's committed records from the beginning."""
        p = self.process()
        fields = {"partitions": [[t, q] for t, q in self.parts], "seek": "beginning", "final": True}
        self.b.op(process=p, type="invoke", f="assign", **fields)
        self.b.op(process=p, type="ok", f="assign", **fields)
        for part, (topic, partition) in enumerate(self.parts):
            committed = [
                {"topic": topic, "partition": partition, "offset": o, "value": v}
                for o, (v, state, _) in enumerate(self.logs[part])
                if state == COMMITTED
            ]
            for start in range(0, len(committed), 50):
                self.b.op(process=p, type="invoke", f="poll")
                self.b.op(process=p, type="ok", f="poll", records=committed[start : start + 50])


def generate_txn_ops(
    seed: int,
    transactions: int = 60,
    plants: dict[str, int] | None = None,
    partitions: int = 3,
    clients: int = 4,
) -> tuple[list[dict[str, Any]], TxnPlanted]:
    """A transactional history (ops in memory) with `plants` (kind -> count, kinds of
    TXN_PLANTABLE) planted at random points among `transactions` ordinary ones."""
    rng = random.Random(f"strandline-synthetic-txn:{seed}")
    sim = _Simulation(rng, partitions)
    pool = [sim.client() for _ in range(clients)]
    episodes = [kind for kind, n in (plants or {}).items() for _ in range(n)]
    rng.shuffle(episodes)
    at = sorted(rng.randrange(transactions + 1) for _ in episodes)
    for step in range(transactions + 1):
        while at and at[0] == step:
            at.pop(0)
            getattr(sim, "plant_" + episodes.pop(0).replace("-", "_").lower())()
        if step < transactions:
            sim.background(pool)
    sim.drain()
    return sim.b.ops, sim.planted
