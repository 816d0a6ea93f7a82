"""The transactional workload's operation generator: seeded, one stream per client slot.

Jepsen's Kafka transaction workload: each operation is a transaction of one to four
micro-operations, each a send of a unique integer to a random partition or a poll of the
process's assigned partitions, committed, or aborted with probability `abort_p`. As in the queue
workload (whose `SlotGenerator` this extends), a slot's first operation, and its first after a
crash, is an assign of a random set of partitions, and later ones reassign now and then; values
are `slot + concurrency * k`, and the same seed gives every slot the same stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from history.txn import poll_mop, send_mop
from workloads.generator import Op, SlotGenerator, topic_partitions

MAX_MOPS = 4
SEND_WEIGHT = 0.6  # of the micro-operations (the rest are polls)
ASSIGN_WEIGHT = 0.05  # of the operations once assigned (the rest are transactions)


@dataclass
class TxnSlotGenerator(SlotGenerator):
    abort_p: float = 0.1
    seed_prefix: ClassVar[str] = "strandline-txn"

    def next_op(self) -> Op:
        if not self._assigned or self.rng.random() < ASSIGN_WEIGHT:
            return self._assign(first=not self._assigned)
        mops = []
        for _ in range(self.rng.randint(1, MAX_MOPS)):
            if self.rng.random() < SEND_WEIGHT:
                topic, partition = self.rng.choice(self.all_partitions)
                mops.append(send_mop(topic, partition, self.next_value()))
            else:
                mops.append(poll_mop())
        return Op("txn", mops=tuple(mops), abort=self.rng.random() < self.abort_p)


def txn_generators(
    seed: int, concurrency: int, topics: int, partitions: int, abort_p: float
) -> list[TxnSlotGenerator]:
    tps = topic_partitions(topics, partitions)
    return [TxnSlotGenerator(seed, slot, concurrency, tps, abort_p=abort_p) for slot in range(concurrency)]
