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


def test_subscribing_slots_subscribe_first_commit_instead_of_assign_and_share_a_few_groups() -> None:
    from workloads.generator import MAX_GROUPS, group_of, role_of

    gens = slot_generators(seed=9, concurrency=10, topics=2, partitions=2, consume="subscribe")
    for gen in gens:
        first = gen.next_op()
        assert first.kind == "subscribe" and first.topics == ("t0", "t1")
        kinds = {gen.next_op().kind for _ in range(400)}
        assert kinds == {"send", "poll", "commit"}
    groups = [group_of("subscribe", 10, slot) for slot in range(10)]
    assert len(set(groups)) == MAX_GROUPS and min(groups.count(g) for g in set(groups)) >= 2
    assert [role_of("mixed", s) for s in range(4)] == ["assign", "subscribe", "assign", "subscribe"]
    assert group_of("mixed", 4, 1) == group_of("mixed", 4, 3)  # two members: one group
    assert role_of("assign", 1) == "assign"


def test_a_resumed_slot_never_reuses_a_value_and_starts_over() -> None:
    gen = slot_generators(seed=4, concurrency=3, topics=1, partitions=1, consume="subscribe")[2]
    sent = [op.value for op in (gen.next_op() for _ in range(50)) if op.kind == "send"]
    gen.resume(incarnation=1, sends=len(sent))
    assert gen.next_op().kind == "subscribe"
    later = [op.value for op in (gen.next_op() for _ in range(50)) if op.kind == "send"]
    assert later and not set(later) & set(sent) and all(v % 3 == 2 for v in later)
