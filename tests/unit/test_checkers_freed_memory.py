"""What the driver freed goes back to the system (`checkers.freed_memory`): glibc keeps the free
pages between live allocations until told (the conversion leaves some 200-400 MiB so)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from checkers import freed_memory


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and glibc's malloc")
def test_release_hands_back_the_pages_freed_between_live_allocations() -> None:
    blocks = [np.ones(100_000 // 8) for _ in range(2000)]  # 200 MB under malloc's mmap threshold
    kept = blocks[::10]  # live blocks every 1 MB: the free pages between them stay with malloc
    del blocks
    held = _rss_mib()
    freed_memory.release()
    assert held - _rss_mib() > 60  # of the 180 MB freed (about 115 MiB comes back)
    assert all(block[0] == 1 for block in kept)
