# The conversion's native part (native/): the strict reader of history lines (src/lib.rs), as
# checkers.parquet_strict uses it.
from typing import Any

def read(chunk: bytes | bytearray, kinds: list[str], fs: list[str]) -> dict[str, Any] | None: ...
def count_lines(chunk: bytes | bytearray) -> int: ...

# The conversion's per-process work (native/src/pairing.rs), as checkers.parquet_native uses it. A
# view is an Arrow column's (validity address or 0, data address or 0, offset).
View = tuple[int, int, int]

class Pairing:
    orphans: int
    first_orphan: int | None
    ok_sends_in_order: bool
    def feed(self, n: int, columns: list[View]) -> dict[str, Any]: ...
    def finish(self) -> dict[str, Any]: ...

class ReadLinks:
    def feed(self, n: int, columns: list[View]) -> dict[str, Any]: ...
