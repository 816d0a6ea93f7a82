"""Who takes the group-coordinator lease (broker.groups.lease): the holder keeps it while it is
registered in the life it took it in; otherwise the lowest registered broker claims the next epoch."""

from __future__ import annotations

from broker.groups.lease import Lease, claim, decode, encode, holder_alive


def test_the_first_claim_is_the_lowest_registered_broker() -> None:
    registrations = {2: 200, 3: 300}
    assert claim(None, registrations, 3) is None
    assert claim(None, registrations, 2) == Lease(2, 200, 1)
    assert claim(None, {}, 1) is None  # not registered (yet): no claim
    assert claim(None, {2: 200}, 1) is None


def test_a_registered_holder_keeps_the_lease_even_when_a_lower_broker_returns() -> None:
    lease = Lease(2, 200, 4, version=3)
    assert holder_alive(lease, {1: 100, 2: 200, 3: 300})
    assert claim(lease, {1: 100, 2: 200, 3: 300}, 1) is None


def test_a_gone_or_restarted_holder_loses_the_lease_to_the_lowest_broker() -> None:
    lease = Lease(1, 100, 4, version=3)
    assert claim(lease, {2: 200, 3: 300}, 2) == Lease(2, 200, 5)  # session expired
    assert claim(lease, {2: 200, 3: 300}, 3) is None
    # Broker 1 restarted: its new registration is not the one that took the lease.
    assert not holder_alive(lease, {1: 150, 2: 200})
    assert claim(lease, {1: 150, 2: 200}, 1) == Lease(1, 150, 5)


def test_the_znode_round_trips_and_junk_is_up_for_claiming() -> None:
    lease = Lease(3, 123456789, 7)
    assert decode(encode(lease), 9) == Lease(3, 123456789, 7, version=9)
    assert decode(b"", 0) is None and decode(b"{}", 0) is None and decode(b"\xff", 0) is None
