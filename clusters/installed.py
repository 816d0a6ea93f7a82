"""Software fetched for a system definition, as its kinds (`clusters.software`, and the tansu build
of `clusters.tansu_build`, which `software` lists) hand it back: a module of its own so that no kind
imports the module that lists it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Installed:
    """Software ready on the controller: its folder (None: already on the nodes, at `node_path`)."""

    name: str
    version: str
    folder: Path | None
    node_path: str = ""  # where it is on every node when it ships with them (an image)
