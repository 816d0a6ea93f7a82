"""Fault windows: when each fault the nemesis journaled was in force (the one definition).

The nemesis journals a fault as `invoke` then `ok` (it happened), `info` (it may have) or `fail`
(it did not), and its heal as another op carrying the same `fault_id` in its value. A window runs
from the fault's invocation (`invoked_ns`; `applied_ns` is its completion) to the completion of
the `ok` op that healed it (`healed_ns`; None: never healed within the history). Rules:

* an op whose value carries the `fault_id` of an open window heals it (a heal that did not
  complete `ok` leaves the fault in force); a heal of a fault never shown in force is ignored;
* a heal that names `remaining` nodes healed a part of the fault (one broker of several killed
  started alone): the fault stays in force on the rest, and its window stays open;
* histories without ids: `start` heals kill, crash, stop and lose-unsynced; `resume` heals pause;
  `unskew` heals clock; any f starting with `heal` heals every other kind; the heal applies to the
  windows on the nodes it names (all, when either side names none);
* `restart` is over when it completes (a window of no length);
* a fault that `fail`ed opened no window;
* `ready` (after a heal or a restart, same `fault_id`) says when the brokers the heal brought back
  served again (nemesis/ready.py): its invocation sets `ready_awaited`, its `ok` `ready_ns`; it
  opens and heals no window. Histories written before it have none (both stay unset).

The checkers' statistics (per-fault cost) and the report's shading both read windows from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from history.format import NEMESIS_PROCESS

# The f that undoes a kind of fault when the history carries no fault ids.
UNDOES: dict[str, tuple[str, ...]] = {
    "start": ("kill", "crash", "stop", "lose-unsynced"),
    "resume": ("pause",),
    "unskew": ("clock",),
}
INSTANT = frozenset({"restart"})  # one-shot faults: over when they complete
READY = "ready"  # after a heal: the brokers it brought back serve again
_SPECIFIC = frozenset(kind for kinds in UNDOES.values() for kind in kinds)


@dataclass
class FaultWindow:
    """One fault in force: what it was, when it was asked for, applied and healed."""

    f: str
    fault_id: str | None
    invoked_ns: int
    applied_ns: int
    outcome: str  # ok | info (info: it may have happened)
    value: Any  # what the fault did: its request's value updated with its completion's
    healed_ns: int | None = None
    healed_by: str | None = None  # the f of the op that ended it ("restart" for a restart)
    ready_awaited: bool = False  # the nemesis journaled a wait for its brokers to serve again
    ready_ns: int | None = None  # ... and when they did (None: not within the history)

    @property
    def nodes(self) -> list[str]:
        return nodes_of(self.value)


def is_heal(f: str) -> bool:
    return f.startswith("heal") or f in UNDOES


def _fault_id(value: Any) -> str | None:
    if not isinstance(value, dict):
        return None
    found = value.get("fault_id", value.get("id"))
    return str(found) if found else None


def _heals(heal_f: str, window: FaultWindow, targets: list[str]) -> bool:
    """Does an id-less heal end this window? By kind, then by the nodes both name."""
    if heal_f in UNDOES:
        kind = window.f in UNDOES[heal_f]
    else:
        kind = window.f not in _SPECIFIC
    return kind and (not targets or not window.nodes or bool(set(targets) & set(window.nodes)))


def fault_windows(ops: Iterable[dict[str, Any]]) -> list[FaultWindow]:
    """Every fault window of a history (nemesis ops; other ops are skipped), by start time."""
    windows: list[FaultWindow] = []
    open_: list[FaultWindow] = []
    invoked: dict[str, tuple[int, Any]] = {}  # fault_id or f -> (time, request value)
    for op in ops:
        if op.get("process") != NEMESIS_PROCESS:
            continue
        f, t, value = str(op.get("f")), int(op.get("time") or 0), op.get("value")
        fault_id = _fault_id(value)
        if f == READY:
            for w in windows:
                if fault_id is not None and w.fault_id == fault_id:
                    w.ready_awaited = True
                    if op.get("type") == "ok":
                        w.ready_ns = t
            continue
        key = fault_id or f
        if op.get("type") == "invoke":
            invoked[key] = (t, value)
            continue
        start, request = invoked.pop(key, (t, None))
        if isinstance(request, dict) and isinstance(value, dict):
            value = {**request, **value}
        elif value is None:
            value = request
        if op.get("type") not in ("ok", "info"):
            continue  # the fault (or the heal) certainly did not happen
        same = [w for w in open_ if fault_id and w.fault_id == fault_id]
        if same or (fault_id is None and is_heal(f)) or (fault_id and is_heal(f)):
            if op.get("type") == "ok" and not (isinstance(value, dict) and value.get("remaining")):
                ending = same or ([w for w in open_ if _heals(f, w, nodes_of(value))] if not fault_id else [])
                for w in ending:
                    w.healed_ns, w.healed_by = t, f
                open_ = [w for w in open_ if w not in ending]
            continue
        window = FaultWindow(f, fault_id, start, t, str(op.get("type")), value)
        windows.append(window)
        if f in INSTANT:
            window.healed_ns, window.healed_by = t, f
        else:
            open_.append(window)
    return sorted(windows, key=lambda w: w.invoked_ns)


def nodes_of(value: Any) -> list[str]:
    """Node names a nemesis value mentions, whatever its shape (list, dict with nodes, text)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        out: list[str] = []
        for v in value:
            out.extend(nodes_of(v) if isinstance(v, list | tuple | dict) else [str(v)])
        return out
    if isinstance(value, dict):
        for key in ("nodes", "node", "targets", "target"):
            if key in value:
                return nodes_of(value[key])
    return []
