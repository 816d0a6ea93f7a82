"""Leaders, leader epochs, ISRs, the controller and the live brokers as Kafka's Metadata answer
shows them to clients.

Used by every system that speaks Kafka's protocol without a ZooKeeper the harness reads directly:
Apache Kafka in KRaft mode (clusters/kafka.py) and systems from a definition file
(clusters/defined.py). Faults kill, pause and cut brokers while this is asked, so a question goes
to every broker at once: a broker that refuses the connection (just killed), hangs (paused) or
breaks off gives no answer, and the answers that arrive within GRACE_S of the first one count;
when none answers, the round is tried again with a growing pause until a deadline.

A live broker may still answer with an old view (one cut off from the cluster's metadata, one
just restarted), so a partition's state is taken from the answer with the highest leader epoch,
as a Kafka client keeps the newest leader epoch it has seen (KIP-320); between answers with the
same epoch, the leader's own (the leader keeps the ISR). The requests are encoded and the answers
decoded with kafka-python's protocol classes (generated from Kafka's message schemas). A node's
own readiness is asked of that node alone (`node_answers`), and so is the coordinator of
a group or transactional id (`coordinator_of`, for the nemesis's role targets).

Brokers are known by what they advertise: every answer's broker list (id, host, port) is kept in
`endpoints` and `advertised`, so a system maps ids to its nodes by advertised host and port,
whatever ids the system gives its brokers; an id inside one answer (a leader, a replica, the
controller) is read against that answer's own broker list first, so brokers that each report the
same id (stateless brokers that each list only themselves) still name the node that answered. KRaft's active controller is the leader of the metadata quorum, which
DescribeQuorum names (`quorum_leader`); Metadata's controller id is only some live broker there.
"""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from foundation.errors import InfrastructureError

ASK_DEADLINE_S = 30.0  # how long one question keeps asking the brokers
CONNECT_TIMEOUT_S = 2.0  # a refused connection fails at once; a dropped SYN waits this long
ANSWER_TIMEOUT_S = 5.0  # a paused broker accepts the connection and never answers
GRACE_S = 0.25  # after the first answer, how long the other brokers' answers are waited for
FIRST_PAUSE_S = 0.1  # between rounds in which no broker answered; doubled up to LAST_PAUSE_S
LAST_PAUSE_S = 2.0
CLIENT_ID = "strandline-controller"
# what a broker that is killed, paused, cut off or half-started may answer with
NO_ANSWER = (OSError, ValueError, KeyError, IndexError, EOFError, struct.error)


class KafkaMetadata:
    """Kafka Metadata of the brokers at `bootstrap()` (host:port), asked afresh each time."""

    def __init__(
        self,
        bootstrap: Callable[[], list[str]],
        node_of_broker: Callable[[int], str | None],
        deadline: float = ASK_DEADLINE_S,
        node_of_endpoint: Callable[[str], str | None] | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.node_of_broker = node_of_broker
        self.node_of_endpoint = node_of_endpoint
        self.deadline = deadline
        # broker id -> "host:port" it advertised in the last answer that listed it
        self.endpoints: dict[int, str] = {}
        # "host:port" -> the broker id advertised there (several endpoints may share one id)
        self.advertised: dict[str, int] = {}
        self.last_answers: list[tuple[str, dict[str, Any]]] = []  # the last round's answers

    def _learn(self, answer: dict[str, Any]) -> None:
        for b in answer.get("brokers") or []:
            endpoint = f"{b['host']}:{b['port']}"
            self.endpoints[int(b["node_id"])] = endpoint
            self.advertised[endpoint] = int(b["node_id"])

    def node_in(self, answer: dict[str, Any], broker_id: int) -> str | None:
        """The node a broker id of this answer names: the one at the address the answer lists
        for that id (each answer's own view), else the system's mapping of the id."""
        listed = [
            f"{b['host']}:{b['port']}" for b in answer.get("brokers") or [] if int(b["node_id"]) == broker_id
        ]
        if len(listed) == 1 and self.node_of_endpoint is not None:
            node = self.node_of_endpoint(listed[0])
            if node is not None:
                return node
        return self.node_of_broker(broker_id)

    def close(self) -> None:
        """Nothing stays open between questions (kept for the systems' close())."""

    def ask(self, deadline: float | None = None) -> dict[str, Any]:
        """One Metadata answer (all topics): the first that arrives (see `answers`)."""
        return self.answers(deadline)[0][1]

    def answers(self, deadline: float | None = None) -> list[tuple[str, dict[str, Any]]]:
        """(address, Metadata answer) of every broker that answers in a round, first arrival
        first; raises InfrastructureError naming each address and why when none did before the
        deadline."""
        limit = time.monotonic() + (self.deadline if deadline is None else deadline)
        pause = FIRST_PAUSE_S
        while True:
            answered, why = _ask_every(list(self.bootstrap()))
            if answered:
                for _address, answer in reversed(answered):  # the first answer's view wins
                    self._learn(answer)
                self.last_answers = answered
                return answered
            left = limit - time.monotonic()
            if left <= 0:
                detail = "; ".join(f"{a}: {w}" for a, w in why.items()) or "no broker addresses"
                raise InfrastructureError(f"no broker answered Kafka Metadata ({detail})")
            time.sleep(min(pause, left))
            pause = min(pause * 2, LAST_PAUSE_S)

    def registered_brokers(self) -> list[int]:
        """The brokers the metadata lists now (KRaft leaves out a broker whose session is fenced)."""
        return sorted(int(b["node_id"]) for b in self.ask()["brokers"])

    def wait_brokers(self, wanted: set[int], timeout: float) -> None:
        """Until the metadata lists every broker in `wanted`."""
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        error = ""
        while True:
            try:
                seen = {int(b["node_id"]) for b in self.ask(deadline=0)["brokers"]}
                if wanted <= seen:
                    return
            except InfrastructureError as e:  # not up yet: keep asking
                error = f" (last error: {e})"
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"brokers {sorted(wanted - seen)} are not in the metadata after {timeout:g}s{error}"
                )
            time.sleep(0.5)

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        """Each partition's leader (node name), leader epoch (-1 before Metadata v7) and ISR, from
        the answer that shows the highest leader epoch (the leader's, between equal ones)."""
        newest: dict[tuple[str, int], tuple[tuple[int, bool], dict[str, Any], dict[str, Any]]] = {}
        for address, answer in self.answers():
            answerer = next(
                (int(b["node_id"]) for b in answer["brokers"] if f"{b['host']}:{b['port']}" == address), None
            )
            for topic in answer["topics"]:
                name = topic.get("name")
                if name is None or topic.get("is_internal") or str(name).startswith("__"):
                    continue
                for p in topic["partitions"]:
                    key = (str(name), int(p["partition_index"]))
                    rank = (
                        int(p.get("leader_epoch", -1)),
                        answerer is not None and answerer == p["leader_id"],
                    )
                    if key not in newest or rank > newest[key][0]:
                        newest[key] = (rank, p, answer)
        result: dict[tuple[str, int], dict[str, object]] = {}
        for key, ((epoch, _), p, answer) in newest.items():
            leader = int(p["leader_id"])

            def node(b: int, answer: dict[str, Any] = answer) -> str:
                return self.node_in(answer, b) or str(b)

            result[key] = {
                "leader": self.node_in(answer, leader) if leader >= 0 else None,
                "leader_epoch": epoch,
                "isr": [node(int(b)) for b in p.get("isr_nodes") or []],
                "replicas": [node(int(b)) for b in p.get("replica_nodes") or []],
            }
        return result

    def leaders(self) -> dict[tuple[str, int], str | None]:
        return {tp: s["leader"] for tp, s in self.partition_state().items()}  # type: ignore[misc]

    def controller(self) -> str | None:
        """The broker Metadata names as controller (in KRaft: any live broker, as Kafka reports it)."""
        answer = self.ask()
        controller_id = answer.get("controller_id")
        if controller_id is None or int(controller_id) < 0:
            return None
        return self.node_in(answer, int(controller_id))


class LeadersFromMetadata:
    """HasLeaders for a system whose brokers answer Kafka Metadata: it asks its `metadata`."""

    metadata: KafkaMetadata

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return self.metadata.partition_state()

    def leaders(self) -> dict[tuple[str, int], str | None]:
        return self.metadata.leaders()

    def controller(self) -> str | None:
        """The broker Metadata names as controller (in KRaft: any live broker, as Kafka reports it)."""
        return self.metadata.controller()


# --- one question to every broker ----------------------------------------------------------------


def _ask_every(
    addresses: list[str], ask: Callable[..., dict[str, Any]] | None = None
) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    """Metadata (or `ask(host, port, timeout=...)`) of each address, asked at once: the answers
    that arrived until GRACE_S after the first (first arrival first), and why each other address
    gave none (so far)."""
    arrivals: queue.Queue[tuple[str, dict[str, Any] | None, str]] = queue.Queue()
    question = ask or metadata_of

    def one(address: str) -> None:
        host, _, port = address.rpartition(":")
        try:
            arrivals.put((address, question(host, int(port), timeout=ANSWER_TIMEOUT_S), ""))
        except NO_ANSWER as e:
            arrivals.put((address, None, f"{type(e).__name__} {e}"))

    for address in addresses:  # a paused broker's question ends by its own timeout
        threading.Thread(target=one, args=(address,), name=f"metadata {address}", daemon=True).start()
    answered: list[tuple[str, dict[str, Any]]] = []
    why = dict.fromkeys(addresses, "no answer in time")
    wait_until = time.monotonic() + CONNECT_TIMEOUT_S + ANSWER_TIMEOUT_S + 1.0
    for _ in addresses:
        try:
            address, answer, error = arrivals.get(timeout=max(0.0, wait_until - time.monotonic()))
        except queue.Empty:
            break
        if answer is None:
            why[address] = error
            continue
        del why[address]
        if not answered:
            wait_until = min(wait_until, time.monotonic() + GRACE_S)
        answered.append((address, answer))
    return answered, why


# --- one question to one broker ------------------------------------------------------------------


def metadata_of(
    host: str, port: int, timeout: float = ANSWER_TIMEOUT_S, topics: bool = True
) -> dict[str, Any]:
    """The Metadata answer (as a dict, kafka-python's field names) of the broker at host:port, at
    the highest version both sides know; `topics=False` asks for the brokers only."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    request = MetadataRequest(topics=None if topics else [], allow_auto_topic_creation=False)
    return _ask(host, port, request, MetadataResponse, timeout, "Metadata")


def high_watermark_of(
    host: str, port: int, topic: str, partition: int, timeout: float = ANSWER_TIMEOUT_S
) -> int | None:
    """The partition's high watermark as the broker at host:port answers ListOffsets (latest, read
    uncommitted: what a consumer may read up to); None when that broker does not lead it now."""
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    topics = ListOffsetsRequest.ListOffsetsTopic
    wanted = topics(
        name=topic, partitions=[topics.ListOffsetsPartition(partition_index=partition, timestamp=-1)]
    )
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[wanted])
    answer = _ask(host, port, request, ListOffsetsResponse, timeout, "ListOffsets")
    for t in answer["topics"]:
        for p in t["partitions"]:
            if t["name"] == topic and int(p["partition_index"]) == partition and not p["error_code"]:
                return int(p["offset"])
    return None


def _ask(host: str, port: int, request: Any, response: Any, timeout: float, name: str) -> dict[str, Any]:
    """One request on a fresh connection, at the highest version both sides know."""
    with socket.create_connection((host, port), timeout=min(timeout, CONNECT_TIMEOUT_S)) as sock:
        sock.settimeout(timeout)
        offered = _offered(sock)
        if request.API_KEY not in offered:
            raise ConnectionError(f"the broker offers no {name} API")
        low, high = offered[request.API_KEY]
        version = min(high, request.max_version)
        if version < low:
            raise ConnectionError(f"the broker's {name} versions start at {low}")
        return _exchange(sock, request, response, version, 2)


def offered_apis(host: str, port: int, timeout: float = ANSWER_TIMEOUT_S) -> dict[int, tuple[int, int]]:
    """The APIs (key -> (min, max) version) the broker at host:port lists in ApiVersions: what a
    Kafka-compatible system implements (a feature whose API is missing is one it lacks)."""
    with socket.create_connection((host, port), timeout=min(timeout, CONNECT_TIMEOUT_S)) as sock:
        sock.settimeout(timeout)
        return _offered(sock)


def coordinator_of(host: str, port: int, key: str, key_type: int, timeout: float = 3.0) -> int | None:
    """Kafka's FindCoordinator v1 (key type 0: a group, 1: a transactional id) asked of the broker at
    host:port: the coordinating broker's id, or None when the broker answers with an error (e.g.
    COORDINATOR_NOT_AVAILABLE). One of NO_ANSWER when it does not answer."""
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        request = FindCoordinatorRequest(key=key, key_type=key_type)
        answer = _exchange(sock, request, FindCoordinatorResponse, 1, 1)
    node_id = int(answer["node_id"])
    return None if answer["error_code"] or node_id < 0 else node_id


def _offered(sock: socket.socket) -> dict[int, tuple[int, int]]:
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    answer = _exchange(sock, ApiVersionsRequest(), ApiVersionsResponse, 0, 1)
    if answer["error_code"]:
        raise ConnectionError(f"ApiVersions error code {answer['error_code']}")
    return {int(k["api_key"]): (int(k["min_version"]), int(k["max_version"])) for k in answer["api_keys"]}


def _exchange(
    sock: socket.socket, request: Any, response: Any, version: int, correlation: int
) -> dict[str, Any]:
    request.with_header(correlation_id=correlation, client_id=CLIENT_ID)
    sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
    (size,) = struct.unpack(">i", _read(sock, 4))
    answer = response.decode(_read(sock, size), version=version, header=True)
    if answer.header.correlation_id != correlation:
        raise ConnectionError(f"answer to request {answer.header.correlation_id}, not {correlation}")
    result: dict[str, Any] = answer.to_dict()
    return result


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return bytes(data)


def node_answers(address: str, port: int, brokers: Sequence[str], timeout: float = 5.0) -> str | None:
    """Does the broker at address:port answer ApiVersions and list a broker advertising each of
    `brokers` (host:port) in its Metadata? None when it does, else what is missing (asked of that
    one broker, no other)."""
    try:
        listed = metadata_of(address, port, timeout, topics=False)["brokers"]
    except NO_ANSWER as e:
        return f"{address}:{port} does not answer ApiVersions and Metadata ({type(e).__name__} {e})"
    advertised = {f"{b['host']}:{b['port']}" for b in listed}
    missing = [b for b in brokers if b not in advertised]
    if not missing:
        return None
    said = ", ".join(f"{b['node_id']} at {b['host']}:{b['port']}" for b in listed) or "none"
    return f"{address}:{port} lists no broker at {', '.join(missing)} in its metadata (it lists {said})"


def quorum_leader(addresses: Sequence[str], deadline: float = ASK_DEADLINE_S) -> int | None:
    """The node id of the KRaft metadata quorum's leader (the active controller), as DescribeQuorum
    asked of every controller at `addresses` at once answers it; the highest leader epoch wins (a
    cut-off voter may still name an old leader). None when no controller answered in time or none
    knows a leader."""
    limit = time.monotonic() + deadline
    pause = FIRST_PAUSE_S
    while True:
        answered, _why = _ask_every(list(addresses), _describe_quorum)
        best: tuple[int, int] | None = None
        for _address, answer in answered:
            for topic in answer.get("topics") or []:
                for p in topic.get("partitions") or []:
                    if p.get("error_code") or int(p.get("leader_id", -1)) < 0:
                        continue
                    seen = (int(p.get("leader_epoch", -1)), int(p["leader_id"]))
                    best = seen if best is None or seen > best else best
        if best is not None:
            return best[1]
        if time.monotonic() >= limit:
            return None
        time.sleep(pause)
        pause = min(pause * 2, LAST_PAUSE_S)


def _describe_quorum(host: str, port: int, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
    from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

    topic = DescribeQuorumRequest.TopicData
    request = DescribeQuorumRequest(
        topics=[topic(topic_name="__cluster_metadata", partitions=[topic.PartitionData(partition_index=0)])]
    )
    answer = _ask(host, port, request, DescribeQuorumResponse, timeout, "DescribeQuorum")
    if answer.get("error_code"):
        raise ConnectionError(f"DescribeQuorum error code {answer['error_code']}")
    return answer
