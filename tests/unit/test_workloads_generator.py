"""The generator: the same seed replays the same operations; values are unique; the mix holds."""

from __future__ import annotations

from collections import Counter

from workloads.generator import Op, SlotGenerator, slot_generators, topic_partitions


def _stream(gen: SlotGenerator, n: int, crash_every: int = 0) -> list[tuple[Op, float]]:
    out = []
    for i in range(n):
        if crash_every and i and i % crash_every == 0:
            gen.crashed()
        out.append((gen.next_op(), gen.next_delay(100.0)))
    return out


def test_same_seed_same_operations() -> None:
    a = slot_generators(seed=42, concurrency=4, topics=2, partitions=3)
    b = slot_generators(seed=42, concurrency=4, topics=2, partitions=3)
    for ga, gb in zip(a, b, strict=True):
        assert _stream(ga, 500, crash_every=37) == _stream(gb, 500, crash_every=37)


def test_different_seeds_or_slots_differ() -> None:
    a = _stream(slot_generators(1, 2, 1, 2)[0], 200)
    b = _stream(slot_generators(2, 2, 1, 2)[0], 200)
    c = _stream(slot_generators(1, 2, 1, 2)[1], 200)
    assert a != b
    assert a != c


def test_values_unique_across_slots() -> None:
    gens = slot_generators(seed=7, concurrency=5, topics=1, partitions=2)
    values = [op.value for g in gens for op, _ in _stream(g, 400) if op.kind == "send"]
    assert len(values) == len(set(values)) > 500


def test_first_op_and_op_after_crash_is_assign_from_beginning() -> None:
    gen = slot_generators(seed=3, concurrency=1, topics=1, partitions=4)[0]
    first = gen.next_op()
    assert first.kind == "assign" and first.seek == "beginning" and first.partitions
    for _ in range(20):
        gen.next_op()
    gen.crashed()
    again = gen.next_op()
    assert again.kind == "assign" and again.seek == "beginning"


def test_mix_and_targets() -> None:
    tps = topic_partitions(2, 2)
    gen = SlotGenerator(seed=11, slot=0, concurrency=1, all_partitions=tps)
    ops = [gen.next_op() for _ in range(5000)]
    kinds = Counter(op.kind for op in ops)
    assert 0.5 < kinds["send"] / len(ops) < 0.6
    assert 0.35 < kinds["poll"] / len(ops) < 0.45
    assert {(op.topic, op.partition) for op in ops if op.kind == "send"} == set(tps)
    seeks = Counter(op.seek for op in ops if op.kind == "assign")
    assert seeks["beginning"] and seeks["position"]
    for op in ops:
        if op.kind == "assign":
            assert list(op.partitions) == sorted(set(op.partitions))
            assert set(op.partitions) <= set(tps)


def test_pacing_mean_matches_rate() -> None:
    gen = slot_generators(seed=5, concurrency=10, topics=1, partitions=1)[0]
    delays = [gen.next_delay(200.0) for _ in range(4000)]
    mean = sum(delays) / len(delays)
    assert abs(mean - 10 / 200.0) < 0.005
    assert all(0 <= d <= 2 * 10 / 200.0 for d in delays)
