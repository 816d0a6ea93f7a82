"""What a workload is, as the generic runner (`workloads.runner`) and the final drain need it.

A workload is an object, not a name tested in every module: its slots' operation streams, how one
slot is made, whether the slots of one process may share a producer, and whether its consumers
(and so the final drain) read committed records only. `workloads.kinds.workload_of` turns the
test's `workload` key into one; the harness's composition root asks it once per run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from foundation.config import TestConfig
from history.journal import Journal
from workloads.clients.base import Driver, Producer
from workloads.generator import SlotGenerator

# How long the slots of one process wait for each other to prepare before the first operation.
PREPARE_TIMEOUT_S = 10.0


class ClientSlot(Protocol):
    """One client slot as the runner drives it (`workloads.queue.Slot`)."""

    gen: SlotGenerator

    def run(
        self,
        stop: threading.Event,
        start: threading.Barrier | None = None,
        opened: Callable[[], bool] | None = None,
    ) -> None: ...


# (config, the slot's generator, the driver, the journal, the shared producer or None) -> a slot
MakeSlot = Callable[[TestConfig, SlotGenerator, Driver, Journal, Producer | None], ClientSlot]


@dataclass(frozen=True)
class Workload:
    """One workload's parts. Module-level functions only: a client worker process receives it pickled."""

    name: str
    generators: Callable[[TestConfig], list[SlotGenerator]]
    make_slot: MakeSlot
    # The slots of one client process may share one producer (the queue's plain sends).
    shares_producer: bool
    # Its consumers read committed records only, so the final drain first waits for open
    # transactions to end and reads up to last stable offsets (the txn workload).
    reads_committed: bool
