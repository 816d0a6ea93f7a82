# The native strict reader of history lines (native/src/lib.rs), as checkers.parquet_strict uses it.
from typing import Any

def read(chunk: bytes | bytearray, kinds: list[str], fs: list[str]) -> dict[str, Any] | None: ...
