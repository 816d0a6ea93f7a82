"""Small histories of a correct system for the checkers' tests, and anomalies planted into them.

* `simulate(rng)` plays client slots against a correct, in-memory replicated log: random
  interleavings, `info` sends that did or did not write, `fail` sends, values read before their
  send completed, crashed consumers replaced by new processes, re-assigns, nemesis noise, and a
  complete final drain. Its history has no anomaly at all.
* `plant(history, kind, rng)` adds one occurrence of one anomaly kind, cleanly: exactly one more
  of that kind and nothing else (each plant uses fresh processes and, where it must, a topic of its
  own), so a checker must report exactly what was planted.

The histories are Python ops in memory (a few hundred lines), so a property test can plant into
them after the fact; the checker benchmark's millions of lines come from `history.synthetic.stream`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from history.synthetic.builder import MS, HistoryBuilder

Record = tuple[str, int, int, int]  # topic, partition, offset, value


# --- a correct system ----------------------------------------------------------------------------


@dataclass
class Simulated:
    """A simulated history and what is true about it (for planting)."""

    ops: list[dict[str, Any]]
    logs: dict[tuple[str, int], list[int]]  # the true log of each partition
    acked: dict[int, tuple[str, int, int]] = field(default_factory=dict)  # value -> position
    failed: list[int] = field(default_factory=list)  # values whose send failed (never written)
    unwritten_info: list[int] = field(default_factory=list)  # info sends that did not write
    retried: list[int] = field(default_factory=list)  # acked values written twice by a retry
    next_process: int = 0
    next_value: int = 1_000_000  # values for plants (the simulation's are below)
    used_values: set[int] = field(default_factory=set)  # values a plant already used
    used_positions: set[tuple[tuple[str, int], int]] = field(default_factory=set)


@dataclass
class _Slot:
    process: int
    open: dict[str, Any] | None = None
    positions: dict[tuple[str, int], int] | None = None  # None: must assign first


def simulate(
    rng: random.Random, steps: int = 120, slots: int = 3, partitions: int = 2, *, retries: bool = False
) -> Simulated:
    """A history of a correct system: no anomaly of any kind, and a complete final drain.

    With `retries`, some acked sends were written twice by a non-idempotent producer's retry: each
    is one `duplicate` (listed in `Simulated.retried`) and nothing else.
    """
    tps = [("t0", p) for p in range(partitions)]
    logs: dict[tuple[str, int], list[int]] = {tp: [] for tp in tps}
    sim = Simulated(ops=[], logs=logs)
    b = HistoryBuilder()
    value = 0

    def new_process() -> int:
        sim.next_process += 1
        return sim.next_process - 1

    clients = [_Slot(new_process()) for _ in range(slots)]

    def complete(slot: _Slot) -> None:
        op = slot.open
        assert op is not None
        slot.open = None
        if op["f"] == "send":
            fate, v, tp, offset = op["fate"], op["value"], op["tp"], op.get("offset", -1)
            if fate == "ok":
                b.complete_send(slot.process, v, "ok", offset, *tp)
                sim.acked[v] = (tp[0], tp[1], offset)
            elif fate == "fail":
                b.complete_send(slot.process, v, "fail", None, *tp)
                sim.failed.append(v)
            else:
                b.complete_send(slot.process, v, "info", None, *tp)
                if fate == "info-unwritten":
                    sim.unwritten_info.append(v)
        elif op["f"] == "poll":
            if rng.random() < 0.1:
                b.complete_poll(slot.process, outcome="info")
                slot.process, slot.positions = new_process(), None  # crashed: never reused
                return
            assert slot.positions is not None
            records = []
            for tp, position in sorted(slot.positions.items()):
                upto = min(len(logs[tp]), position + rng.randint(0, 4))
                records += [(tp[0], tp[1], o, logs[tp][o]) for o in range(position, upto)]
                slot.positions[tp] = upto
            b.complete_poll(slot.process, records)
        else:  # assign
            if rng.random() < 0.05:
                b.op(process=slot.process, type="info", f="assign", error="timed out")
                slot.process, slot.positions = new_process(), None
                return
            b.op(process=slot.process, type="ok", f="assign")
            slot.positions = op["positions"]

    for _ in range(steps):
        if rng.random() < 0.03:
            b.nemesis(rng.choice(["kill", "pause", "partition"]), {"nodes": ["n1"]}, "ok")
            b.nemesis(rng.choice(["start", "resume", "heal"]), {"nodes": ["n1"]}, "ok")
        slot = rng.choice(clients)
        if slot.open is not None:
            complete(slot)
            continue
        kind = "assign" if slot.positions is None else rng.choice(["send", "send", "poll", "poll", "assign"])
        if kind == "send":
            v, tp = value, rng.choice(tps)
            value += 1
            fate = rng.choice(["ok", "ok", "ok", "fail", "info-written", "info-unwritten"])
            op: dict[str, Any] = {"f": "send", "value": v, "tp": tp, "fate": fate}
            b.invoke_send(slot.process, v, *tp)
            if fate in ("ok", "info-written"):
                if fate == "ok" and retries and rng.random() < 0.1:
                    # The producer's first attempt was written but its answer lost; the retry is
                    # written again and acked: one value at two offsets (expected without idempotence).
                    logs[tp].append(v)
                    sim.retried.append(v)
                    sim.used_values.add(v)  # already a duplicate: no plant may reuse it
                # Written at once: a poll may read it before the send completes.
                op["offset"] = len(logs[tp])
                logs[tp].append(v)
            slot.open = op
        elif kind == "poll":
            b.invoke_poll(slot.process)
            slot.open = {"f": "poll"}
        else:
            chosen = [tp for tp in tps if rng.random() < 0.7] or [rng.choice(tps)]
            b.op(
                process=slot.process,
                type="invoke",
                f="assign",
                partitions=[list(tp) for tp in chosen],
                seek="beginning",
            )
            slot.open = {"f": "assign", "positions": {tp: 0 for tp in chosen}}
    for slot in clients:
        if slot.open is not None:
            complete(slot)
    # The final drain: a fresh process reads every partition from the beginning to its end.
    drainer = new_process()
    b.assign(drainer, tps)
    positions = {tp: 0 for tp in tps}
    while any(positions[tp] < len(logs[tp]) for tp in tps):
        records = []
        for tp in tps:
            upto = min(len(logs[tp]), positions[tp] + rng.randint(1, 8))
            records += [(tp[0], tp[1], o, logs[tp][o]) for o in range(positions[tp], upto)]
            positions[tp] = upto
        b.poll(drainer, records)
    sim.ops = b.ops
    return sim


# --- planting ------------------------------------------------------------------------------------


def _insert(sim: Simulated, rng: random.Random, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Insert each (invoke, completion) pair at random places, the completion after the invoke."""
    for invoke, completion in pairs:
        i = rng.randint(0, len(sim.ops))
        sim.ops.insert(i, invoke)
        j = rng.randint(i + 1, len(sim.ops))
        sim.ops.insert(j, completion)
    for n, op in enumerate(sim.ops):
        op["index"] = n
        op["time"] = (n + 1) * MS


def _fresh_poll(sim: Simulated, records: list[Record]) -> tuple[dict[str, Any], dict[str, Any]]:
    process = sim.next_process
    sim.next_process += 1
    return _fresh_poll_of(process, records)


def _fresh_poll_of(process: int, records: list[Record]) -> tuple[dict[str, Any], dict[str, Any]]:
    listed = [{"topic": t, "partition": p, "offset": o, "value": v} for t, p, o, v in records]
    return (
        {"process": process, "type": "invoke", "f": "poll"},
        {"process": process, "type": "ok", "f": "poll", "records": listed},
    )


def _group_ops(process: int, f: str, **fields: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    base = {"process": process, "f": f, **fields}
    return {**base, "type": "invoke"}, {**base, "type": "ok"}


def _offsets(topic: str, offset: int) -> list[dict[str, Any]]:
    return [{"topic": topic, "partition": 0, "offset": offset}]


def _send_ops(process: int, value: int, topic: str, offset: int) -> tuple[dict[str, Any], dict[str, Any]]:
    base = {"process": process, "f": "send", "topic": topic, "partition": 0, "value": value}
    return {**base, "type": "invoke"}, {**base, "type": "ok", "offset": offset}


def _new_value(sim: Simulated) -> int:
    sim.next_value += 1
    return sim.next_value


def plant(sim: Simulated, kind: str, rng: random.Random, serial: int) -> bool:
    """Plant one `kind` into `sim` (serial: a number unique among this history's plants).

    Returns False when this history cannot host the plant (e.g. no failed send to read).
    """
    written = [(tp, o, v) for tp, log in sim.logs.items() for o, v in enumerate(log)]
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if kind == "phantom":
        pairs.append(_fresh_poll(sim, [(f"tphantom{serial}", 0, 0, _new_value(sim))]))
    elif kind == "aborted-read":
        unused = [v for v in sim.failed if v not in sim.used_values]
        if not unused:
            return False
        v = rng.choice(unused)
        sim.used_values.add(v)
        pairs.append(_fresh_poll(sim, [(f"taborted{serial}", 0, 0, v)]))
    elif kind == "duplicate":
        used = sim.used_values
        candidates = [(tp, o, v) for tp, o, v in written if v not in used]
        if not candidates:
            return False
        _tp, _o, v = rng.choice(candidates)
        used.add(v)
        pairs.append(_fresh_poll(sim, [(f"tdup{serial}", 0, 0, v)]))
    elif kind == "inconsistent-offsets":
        used, positions = sim.used_values, sim.used_positions
        spares = [v for v in sim.unwritten_info if v not in used]
        free = [(tp, o) for tp, o, _v in written if (tp, o) not in positions]
        if not spares or not free:
            return False
        spare, (tp, o) = rng.choice(spares), rng.choice(free)
        used.add(spare)
        positions.add((tp, o))
        pairs.append(_fresh_poll(sim, [(tp[0], tp[1], o, spare)]))
    elif kind in ("poll-skip", "nonmonotonic-poll"):
        long_logs = [(tp, log) for tp, log in sim.logs.items() if len(log) >= 3]
        if not long_logs:
            return False
        tp, log = rng.choice(long_logs)
        a = rng.randrange(len(log) - 2)
        if kind == "poll-skip":
            offsets = [a, a + 2]
        else:
            offsets = [a + 1, a]
        pairs.append(_fresh_poll(sim, [(tp[0], tp[1], o, log[o]) for o in offsets]))
    elif kind == "nonmonotonic-send":
        topic = f"tnonmono{serial}"
        process = sim.next_process
        sim.next_process += 1
        high, low = _new_value(sim), _new_value(sim)
        first, second = _send_ops(process, high, topic, 1), _send_ops(process, low, topic, 0)
        # One process, one op at a time: both sends together, in order.
        i = rng.randint(0, len(sim.ops))
        sim.ops[i:i] = [first[0], first[1], second[0], second[1]]
        pairs.append(_fresh_poll(sim, [(topic, 0, 1, high)]))
        pairs.append(_fresh_poll(sim, [(topic, 0, 0, low)]))
    elif kind in ("group-skip", "nonmonotonic-commit"):
        # A topic and a group of their own, fresh processes, one contiguous episode.
        topic, group = f"tgroup{serial}", f"gplant{serial}"
        episode: list[dict[str, Any]] = []
        if kind == "group-skip":
            skipped, read = _new_value(sim), _new_value(sim)
            for value, offset in ((skipped, 0), (read, 1)):
                episode += _send_ops(sim.next_process, value, topic, offset)
                sim.next_process += 1
            member = sim.next_process
            sim.next_process += 1
            episode += _group_ops(member, "subscribe", group=group, topics=[topic])
            episode += _fresh_poll_of(member, [(topic, 0, 1, read)])
            episode += _group_ops(member, "commit", group=group, mode="explicit", offsets=_offsets(topic, 2))
            episode += _fresh_poll(sim, [(topic, 0, 0, skipped), (topic, 0, 1, read)])
        else:
            for offset in (5, 3):
                member = sim.next_process
                sim.next_process += 1
                episode += _group_ops(member, "subscribe", group=group, topics=[topic])
                episode += _group_ops(
                    member, "commit", group=group, mode="explicit", offsets=_offsets(topic, offset)
                )
        i = rng.randint(0, len(sim.ops))
        sim.ops[i:i] = episode
    elif kind == "lost-write":
        topic = f"tlost{serial}"
        lost, later = _new_value(sim), _new_value(sim)
        for value, offset in ((lost, 0), (later, 1)):
            pairs.append(_send_ops(sim.next_process, value, topic, offset))
            sim.next_process += 1
        pairs.append(_fresh_poll(sim, [(topic, 0, 1, later)]))
    elif kind == "unseen":
        pairs.append(_send_ops(sim.next_process, _new_value(sim), f"tunseen{serial}", 0))
        sim.next_process += 1
    else:
        raise ValueError(f"cannot plant {kind!r}")
    _insert(sim, rng, pairs)
    return True
