"""The checkers name the replica that held damaged data, and the losses its damage covers."""

from __future__ import annotations

from checkers.damage import attribute, damaged_replicas

FLIP = {
    "process": "nemesis",
    "type": "ok",
    "f": "corrupt",
    "time": 12_500_000_000,
    "value": {
        "fault_id": "corrupt-3",
        "kind": "bitflip",
        "nodes": ["n2", "n3"],
        "damage": {
            "n2": {
                "kind": "bitflip",
                "damaged": True,
                "topic": "t0",
                "partition": 1,
                "file": "x.log",
                "first_damaged_offset": 40,
            },
            "n3": {"kind": "bitflip", "damaged": False, "reason": "no segment data to damage"},
        },
    },
}
WIPE = {
    "process": "nemesis",
    "type": "ok",
    "f": "corrupt",
    "time": 30_000_000_000,
    "value": {
        "fault_id": "corrupt-5",
        "kind": "wipe",
        "nodes": ["n1"],
        "damage": {"n1": {"kind": "wipe", "damaged": True, "partitions": ["t0-0", "t0-1"]}},
    },
}


def test_each_damaged_replica_is_named_with_where_its_damage_starts() -> None:
    ops = [{"process": 0, "type": "ok", "f": "send"}, {**FLIP, "type": "invoke"}, FLIP, WIPE]
    entries = damaged_replicas(ops)
    assert entries == [
        {
            "node": "n2",
            "kind": "bitflip",
            "fault_id": "corrupt-3",
            "time_s": 12.5,
            "partitions": ["t0-1"],
            "file": "x.log",
            "first_damaged_offset": 40,
        },
        {
            "node": "n1",
            "kind": "wipe",
            "fault_id": "corrupt-5",
            "time_s": 30.0,
            "partitions": ["t0-0", "t0-1"],
        },
    ]


def test_losses_inside_a_damage_are_attributed_to_its_replica() -> None:
    entries = damaged_replicas([FLIP, WIPE])
    anomalies = {
        "lost-write": {
            "count": 3,
            "examples": [
                {"topic": "t0", "partition": 1, "offset": 39},
                {"topic": "t0", "partition": 1, "offset": 41},
                {"topic": "t0", "partition": 0, "offset": 5},
            ],
        },
    }
    notes = attribute(entries, anomalies)
    assert entries[0]["loss_examples_in_damage"] == {"lost-write": 1}
    assert entries[1]["loss_examples_in_damage"] == {"lost-write": 3}
    assert notes[0] == (
        "replica on n2 held damaged data (bitflip, corrupt-3): t0-1 from offset 40 (x.log); "
        "loss examples inside it: lost-write 1"
    )
    assert notes[1].startswith(
        "replica on n1 held damaged data (wipe, corrupt-5): its whole data dir (t0-0, t0-1)"
    )
