"""The transaction coordinator's rules: Kafka's transaction state machine, sans-IO.

`TxnCoordinator` holds one `TxnMetadata` per transactional id and decides every request: each
method returns a `Decision`: the error for the client and, when the transaction changes, the new
metadata, which the caller must make durable (broker.transactions.state_log, replicated in
`__transaction_state`) before `apply`ing it and answering. Nothing here touches a socket or a log.

States follow Kafka's TransactionState: Empty -> Ongoing (AddPartitionsToTxn / AddOffsetsToTxn)
-> PrepareCommit | PrepareAbort (EndTxn, a timeout, or a new InitProducerId fencing the old
producer) -> CompleteCommit | CompleteAbort once every partition holds its marker -> Ongoing ...

`transaction.version`: with 1 (Kafka before KIP-890 part 2) one producer epoch spans many
transactions, so an EndTxn that arrives late, with the right epoch, ends whatever transaction is
open then. With 2, EndTxn v5+ bumps the epoch with every transaction (the markers carry the new
one, the response hands it to the producer), so a late request of the old epoch is fenced. A client
that sends EndTxn v4 or older gets version 1's rules, as from Kafka 4.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace

from broker.kafka_errors import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    NONE,
    PRODUCER_FENCED,
)

MAX_EPOCH = 32767
TRANSACTION_VERSION_2_END_TXN = 5  # EndTxn v5 carries the bumped epoch back (KIP-890 part 2)


class TxnState(enum.Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"

    @property
    def preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[tuple[str, int]] = frozenset()
    groups: frozenset[str] = frozenset()  # AddOffsetsToTxn: offsets committed with the transaction
    started_ms: float = 0.0  # wall clock, so a new coordinator can time out an open transaction
    last_epoch: int = -1  # the epoch before a KIP-890 bump: a retried EndTxn of it is answered

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "last_epoch": self.last_epoch,
                "timeout_ms": self.timeout_ms,
                "state": self.state.value,
                "partitions": sorted(self.partitions),
                "groups": sorted(self.groups),
                "started_ms": self.started_ms,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, transactional_id: str, data: bytes) -> TxnMetadata:
        d = json.loads(data)
        return cls(
            transactional_id,
            int(d["producer_id"]),
            int(d["producer_epoch"]),
            int(d["timeout_ms"]),
            TxnState(d["state"]),
            frozenset((str(t), int(i)) for t, i in d["partitions"]),
            frozenset(str(g) for g in d["groups"]),
            float(d["started_ms"]),
            int(d.get("last_epoch", -1)),
        )


@dataclass(frozen=True)
class Decision:
    error: int
    new: TxnMetadata | None = None  # persist, then apply, then answer
    markers: bool = False  # after `new` is durable: write its markers, then complete it


@dataclass
class TxnCoordinator:
    transaction_version: int = 2
    max_timeout_ms: int = 900000
    txns: dict[str, TxnMetadata] = field(default_factory=dict)

    def apply(self, meta: TxnMetadata) -> None:
        self.txns[meta.transactional_id] = meta

    def load(self, txns: dict[str, TxnMetadata]) -> None:
        self.txns = dict(txns)

    def unload(self) -> None:
        self.txns.clear()

    # --- InitProducerId -------------------------------------------------------------------------
    def needs_producer_id(self, transactional_id: str) -> bool:
        """True when init_producer_id will need a fresh producer id (unknown id, epoch used up)."""
        meta = self.txns.get(transactional_id)
        return meta is None or meta.producer_epoch >= MAX_EPOCH - 1

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        fresh_producer_id: int | None,
        now_ms: float,
    ) -> Decision:
        """A (re)starting producer: a new epoch fences every older instance of it."""
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return Decision(INVALID_TRANSACTION_TIMEOUT)
        meta = self.txns.get(transactional_id)
        if meta is None:
            assert fresh_producer_id is not None
            new = TxnMetadata(transactional_id, fresh_producer_id, 0, timeout_ms, started_ms=now_ms)
            return Decision(NONE, new)
        if meta.state.preparing:
            return Decision(CONCURRENT_TRANSACTIONS)
        if producer_id >= 0:  # KIP-360: a producer bumping its own epoch names it
            if producer_id != meta.producer_id:
                return Decision(INVALID_PRODUCER_ID_MAPPING)
            if producer_epoch != meta.producer_epoch:
                return Decision(PRODUCER_FENCED)
        if meta.state is TxnState.ONGOING:
            # fence the old producer and abort its transaction; the caller retries once it is done
            return Decision(CONCURRENT_TRANSACTIONS, self._prepare(meta, commit=False, bump=True), True)
        if meta.producer_epoch >= MAX_EPOCH - 1:
            assert fresh_producer_id is not None
            new = replace(meta, producer_id=fresh_producer_id, producer_epoch=0, last_epoch=-1)
        else:
            new = replace(meta, producer_epoch=meta.producer_epoch + 1, last_epoch=-1)
        new = replace(
            new,
            timeout_ms=timeout_ms,
            state=TxnState.EMPTY,
            partitions=frozenset(),
            groups=frozenset(),
            started_ms=now_ms,
        )
        return Decision(NONE, new)

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------
    def _check_producer(self, meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != meta.producer_epoch:
            return PRODUCER_FENCED
        return NONE

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[tuple[str, int]],
        now_ms: float,
        groups: frozenset[str] = frozenset(),
    ) -> Decision:
        meta = self.txns.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error != NONE:
            return Decision(error)
        assert meta is not None
        if meta.state.preparing:
            return Decision(CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            if partitions <= meta.partitions and groups <= meta.groups:
                return Decision(NONE)
            return Decision(
                NONE, replace(meta, partitions=meta.partitions | partitions, groups=meta.groups | groups)
            )
        return Decision(
            NONE,
            replace(meta, state=TxnState.ONGOING, partitions=partitions, groups=groups, started_ms=now_ms),
        )

    def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partition: tuple[str, int]
    ) -> int:
        """AddPartitionsToTxn v4+ with verify_only: is the partition in the open transaction?"""
        meta = self.txns.get(transactional_id)
        error = self._check_producer(meta, producer_id, producer_epoch)
        if error != NONE:
            return error
        assert meta is not None
        if meta.state is not TxnState.ONGOING or partition not in meta.partitions:
            return INVALID_TXN_STATE
        return NONE

    # --- EndTxn ---------------------------------------------------------------------------------
    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool, version: int
    ) -> Decision:
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return Decision(INVALID_PRODUCER_ID_MAPPING)
        bump = self.transaction_version >= 2 and version >= TRANSACTION_VERSION_2_END_TXN
        wanted = (
            (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
            if commit
            else (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
        )
        if bump and producer_epoch == meta.last_epoch and meta.last_epoch >= 0:
            # a retry of the EndTxn that bumped the epoch: answer it, never end another transaction
            if meta.state is wanted[1]:
                return Decision(NONE)
            if meta.state is wanted[0]:
                return Decision(CONCURRENT_TRANSACTIONS)
            return Decision(PRODUCER_FENCED)
        if producer_epoch != meta.producer_epoch:
            return Decision(PRODUCER_FENCED)
        if meta.state is TxnState.ONGOING:
            return Decision(NONE, self._prepare(meta, commit, bump), True)
        if meta.state is wanted[1]:
            return Decision(NONE)  # a retry of an EndTxn that completed
        if meta.state is wanted[0]:
            return Decision(CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.EMPTY and not commit and bump:
            return Decision(NONE)  # version 2 lets a producer abort an empty transaction
        return Decision(INVALID_TXN_STATE)

    @staticmethod
    def _prepare(meta: TxnMetadata, commit: bool, bump: bool) -> TxnMetadata:
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if bump and meta.producer_epoch < MAX_EPOCH - 1:
            return replace(
                meta, state=state, producer_epoch=meta.producer_epoch + 1, last_epoch=meta.producer_epoch
            )
        return replace(meta, state=state)

    def markers_written(self, transactional_id: str, producer_epoch: int) -> Decision:
        """Every marker of the prepared transaction is in place: complete it."""
        meta = self.txns.get(transactional_id)
        if meta is None or not meta.state.preparing or meta.producer_epoch != producer_epoch:
            return Decision(NONE)  # already completed, or superseded
        state = TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        return Decision(NONE, replace(meta, state=state, partitions=frozenset(), groups=frozenset()))

    # --- timeouts -------------------------------------------------------------------------------
    def expired(self, now_ms: float) -> list[TxnMetadata]:
        """Open transactions past their timeout, each prepared to abort with a bumped epoch
        (fencing the producer that abandoned it), as Kafka's coordinator does."""
        return [
            self._prepare(meta, commit=False, bump=True)
            for meta in self.txns.values()
            if meta.state is TxnState.ONGOING and now_ms - meta.started_ms > meta.timeout_ms
        ]

    def preparing(self) -> list[TxnMetadata]:
        """Prepared transactions whose markers are (still) to be written, e.g. after a failover."""
        return [meta for meta in self.txns.values() if meta.state.preparing]
