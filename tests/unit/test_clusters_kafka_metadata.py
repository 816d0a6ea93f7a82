"""clusters/kafka_metadata.py asks every broker at once: a refused connection (a killed broker)
and a broker that accepts but never answers (a paused one) give no answer and cost no more than
the grace after the first answer; when none answers before the deadline the error names every
address and why. Of live brokers' answers, a partition's state is the one with the highest leader
epoch (an old view of a broker cut off or just restarted loses), the leader's own between equal
epochs. The answering brokers here are stand-ins on 127.0.0.1 that encode their answers with
kafka-python's protocol classes."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse

from clusters.kafka_metadata import KafkaMetadata, node_answers
from foundation.errors import InfrastructureError

M = MetadataResponse
Partition = M.MetadataResponseTopic.MetadataResponsePartition


@dataclass(frozen=True)
class View:
    """What a stand-in broker believes of partition t0-0, and which broker (id) it is."""

    leader: int = 2
    epoch: int = 7
    isr: tuple[int, ...] = (2, 3)
    me: int = 2


def _answer(api_key: int, version: int, view: View, port: int) -> bytes:
    if api_key == 18:
        versions = [ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=12)]
        return bytes(ApiVersionsResponse(error_code=0, api_keys=versions).encode(version=0))
    partitions = [
        Partition(
            error_code=0,
            partition_index=0,
            leader_id=view.leader,
            leader_epoch=view.epoch,
            replica_nodes=[1, 2, 3],
            isr_nodes=list(view.isr),
            offline_replicas=[],
        )  # fmt: skip
    ]
    topics = [
        M.MetadataResponseTopic(error_code=0, name="t0", is_internal=False, partitions=partitions),
        M.MetadataResponseTopic(error_code=0, name="__consumer_offsets", is_internal=True, partitions=[]),
    ]
    brokers = [
        M.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=port if i == view.me else 1)
        for i in (2, 3)
    ]
    body = M(brokers=brokers, controller_id=3, cluster_id="c", topics=topics)
    return bytes(body.encode(version=version))


class StandInBroker:
    """Answers ApiVersions and Metadata on 127.0.0.1 (a flexible answer's header has a tag byte)."""

    def __init__(self, port: int = 0, view: View = View()) -> None:
        self.server = socket.create_server(("127.0.0.1", port))
        self.port = self.server.getsockname()[1]
        self.view = view
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                try:
                    while True:
                        (size,) = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))
                        frame = conn.recv(size, socket.MSG_WAITALL)
                        api_key, version, correlation = struct.unpack_from(">hhi", frame)
                        header = struct.pack(">i", correlation) + (
                            b"\x00" if api_key == 3 and version >= 9 else b""
                        )
                        answer = header + _answer(api_key, version, self.view, self.port)
                        conn.sendall(struct.pack(">i", len(answer)) + answer)
                except (OSError, struct.error):
                    continue

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def answering() -> Iterator[StandInBroker]:
    broker = StandInBroker()
    yield broker
    broker.close()


@pytest.fixture
def refusing() -> int:
    """A port nothing listens on: the connection is refused at once, as to a killed broker."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        return int(s.getsockname()[1])


@pytest.fixture
def hanging() -> Iterator[int]:
    """A listener that accepts and never answers, as a paused broker."""
    with socket.create_server(("127.0.0.1", 0)) as s:
        yield int(s.getsockname()[1])


def nodes(i: int) -> str:
    return f"n{i}"


def test_a_refused_and_a_silent_broker_are_skipped(
    answering: StandInBroker, refusing: int, hanging: int
) -> None:
    addresses = [f"127.0.0.1:{refusing}", f"127.0.0.1:{hanging}", f"127.0.0.1:{answering.port}"]
    metadata = KafkaMetadata(lambda: addresses, nodes, deadline=10)
    started = time.monotonic()
    assert metadata.partition_state() == {
        ("t0", 0): {"leader": "n2", "leader_epoch": 7, "isr": ["n2", "n3"], "replicas": ["n1", "n2", "n3"]}
    }
    assert time.monotonic() - started < 4  # the silent broker's 5 s answer timeout was not waited for
    assert metadata.registered_brokers() == [2, 3]
    assert metadata.controller() == "n3"
    # what each broker advertised, for the systems to map ids to nodes by address
    assert metadata.endpoints == {2: f"127.0.0.1:{answering.port}", 3: "127.0.0.1:1"}


@pytest.mark.parametrize(
    ("views", "expected"),
    [
        # A broker cut off from the cluster (or just restarted) still says n2 leads in epoch 7; the
        # other knows n3 leads in epoch 8 with ISR [3]: epoch 8 is the state.
        ((View(leader=2, epoch=7, isr=(2, 3), me=2), View(leader=3, epoch=8, isr=(3,), me=3)),
         {"leader": "n3", "leader_epoch": 8, "isr": ["n3"]}),
        # Same epoch, different ISRs (the leader shrank it; a follower has not heard yet): the
        # leader's ISR.
        ((View(leader=2, epoch=7, isr=(2, 3), me=3), View(leader=2, epoch=7, isr=(2,), me=2)),
         {"leader": "n2", "leader_epoch": 7, "isr": ["n2"]}),
    ],
)  # fmt: skip
def test_the_newest_leader_epoch_wins_over_a_live_brokers_old_view(
    views: tuple[View, View], expected: dict[str, object]
) -> None:
    """Whichever broker answers first."""
    brokers = [StandInBroker(view=v) for v in views]
    try:
        for order in (brokers, brokers[::-1]):
            addresses = [f"127.0.0.1:{b.port}" for b in order]
            state = KafkaMetadata(lambda a=addresses: a, nodes, deadline=10).partition_state()  # type: ignore[misc]
            assert state == {("t0", 0): {**expected, "replicas": ["n1", "n2", "n3"]}}
    finally:
        for b in brokers:
            b.close()


def test_no_broker_answering_is_one_error_naming_each_address(refusing: int) -> None:
    metadata = KafkaMetadata(lambda: [f"127.0.0.1:{refusing}"], nodes, deadline=0.5)
    started = time.monotonic()
    with pytest.raises(InfrastructureError, match=f"127.0.0.1:{refusing}: ConnectionRefusedError"):
        metadata.leaders()
    assert time.monotonic() - started >= 0.5  # it kept asking until the deadline


def test_a_broker_that_comes_back_within_the_deadline_answers(refusing: int) -> None:
    late: list[StandInBroker] = []
    timer = threading.Timer(0.4, lambda: late.append(StandInBroker(refusing)))
    timer.start()
    try:
        assert KafkaMetadata(lambda: [f"127.0.0.1:{refusing}"], nodes, deadline=10).controller() == "n3"
    finally:
        timer.join()
        for broker in late:
            broker.close()


def test_node_answers_names_the_brokers_missing_from_its_metadata(
    answering: StandInBroker, refusing: int
) -> None:
    me = f"127.0.0.1:{answering.port}"
    assert node_answers("127.0.0.1", answering.port, [me, "127.0.0.1:1"]) is None
    assert node_answers("127.0.0.1", answering.port, ["10.0.0.1:9092", me]) == (
        f"{me} lists no broker at 10.0.0.1:9092 in its metadata (it lists 2 at {me}, 3 at 127.0.0.1:1)"
    )
    assert "does not answer ApiVersions and Metadata" in str(
        node_answers("127.0.0.1", refusing, ["127.0.0.1:1"])
    )
