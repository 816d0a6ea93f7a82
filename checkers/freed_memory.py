"""Hand memory the driver freed back to the system, between the parts of a check.

Arrow's allocators and glibc's malloc keep freed pages for reuse: after a conversion some 200-400 MiB
that the check's later parts, which allocate differently, never reuse, so the driver's peak would
count them twice. Releasing costs a few milliseconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from functools import cache

import pyarrow as pa

log = logging.getLogger(__name__)


@cache
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release() -> None:
    """Arrow's pools' unused memory, then glibc's free pages (malloc_trim; nothing where there is
    no glibc)."""
    pa.default_memory_pool().release_unused()
    pa.system_memory_pool().release_unused()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
