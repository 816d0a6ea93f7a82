"""The Maven resolver (clusters/maven.py) without Maven Central: the real `mvn`, pointed by a settings.xml
mirror at a port nothing answers on (refused) or at a listener that never answers (hung).

An unreachable repository is exit 4 with Maven's reason and nothing in the cache; a fetch cut by
Ctrl-C leaves nothing either; a complete folder is reused without running Maven at all.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import maven

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def settings_home(tmp_path: Path, port: int) -> Path:
    """A user home whose ~/.m2 is empty and whose settings.xml sends every request to 127.0.0.1:port."""
    home = tmp_path / "home"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        "<settings><mirrors><mirror><id>nowhere</id><mirrorOf>*</mirrorOf>"
        f"<url>http://127.0.0.1:{port}/maven2</url></mirror></mirrors></settings>"
    )
    return home


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused
    home = settings_home(tmp_path, port)
    monkeypatch.setenv("MAVEN_OPTS", f"-Duser.home={home} -Dmaven.wagon.http.retryHandler.count=0")
    monkeypatch.setenv("STRANDLINE_CACHE", str(tmp_path / "cache"))
    yield tmp_path / "cache"


def test_an_unreachable_repository_is_exit_4_with_the_reason_and_leaves_nothing(offline: Path) -> None:
    with pytest.raises(maven.MavenUnreachable):
        maven.released_versions("org.apache.kafka", "kafka_2.13")
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "kafka", "fetch", "4.4.0"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 4, out.stderr
    said = out.stderr.strip().splitlines()[-1]
    assert said.startswith("strandline kafka: Maven repository unreachable") and "127.0.0.1" in said, said
    assert list((offline / "maven" / "kafka").iterdir()) == []  # no folder, no temporary one


def test_a_fetch_cut_short_leaves_nothing_that_looks_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as hung:  # accepts, never answers
        home = settings_home(tmp_path, hung.getsockname()[1])
        env = {**os.environ, "MAVEN_OPTS": f"-Duser.home={home}", "STRANDLINE_CACHE": str(tmp_path / "cache")}
        fetch = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "kafka", "fetch", "4.4.0"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # a shell that started the tests in the background passed SIGINT on ignored: Ctrl-C's default
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        folder = tmp_path / "cache" / "maven" / "kafka"
        deadline = time.monotonic() + 120
        while not any(folder.glob(".fetch-*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)  # mvn is waiting on the hung repository now
        fetch.send_signal(signal.SIGINT)
        _, err = fetch.communicate(timeout=60)
    assert fetch.returncode == 130, err
    assert list(folder.iterdir()) == []


def test_a_release_maven_central_does_not_have_is_one_line_naming_the_nearest() -> None:
    """Asks Maven Central itself which releases exist (the resolve of 4.4.9 fails, then the list)."""
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "kafka", "fetch", "4.4.9"],
        capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    said = out.stderr.strip().splitlines()[-1]
    assert said.startswith("strandline kafka: Kafka 4.4.9 is not on Maven Central (nearest releases: "), said
    assert "4.4.0" in said
