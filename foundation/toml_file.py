"""Reading a TOML file the user wrote (config, campaign, system definition) with one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from foundation.errors import BadInput


def read_toml(path: str | Path, what: str) -> dict[str, Any]:
    """The file's tables; an unreadable or malformed file is `BadInput` naming `what` and the path."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text())
    except OSError as e:
        raise BadInput(f"cannot read {what} {p}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"malformed {what} {p}: {e}") from None
