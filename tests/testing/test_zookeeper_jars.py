"""Where kafka_cluster's ZooKeeper jars come from: a named folder, or a download from a
Maven repository (here a local HTTP server) checked against published and pinned SHA-1s."""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from josefk.testing.jars import Artifact, JarsUnavailable, download, zookeeper_libs

JAR = b"PK\x03\x04 not really a jar, but bytes with a digest"


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Maven-layout folder served over HTTP: (its URL, its folder)."""
    root = tmp_path / "repo"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def publish(root: Path, artifact: Artifact, body: bytes, sha1: str | None = None) -> None:
    path = root / "org" / "example" / artifact.name / artifact.version / artifact.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    path.with_name(path.name + ".sha1").write_text(
        (sha1 or hashlib.sha1(body).hexdigest()) + "  " + artifact.file_name + "\n")


def thing(sha1: str = hashlib.sha1(JAR).hexdigest()) -> Artifact:
    return Artifact("org.example", "thing", "1.0", sha1)


def test_downloads_once_into_the_target(repository: tuple[str, Path], tmp_path: Path) -> None:
    url, root = repository
    publish(root, thing(), JAR)
    target = tmp_path / "cache" / "zookeeper-x"
    assert download((thing(),), target, url) == target
    assert (target / "thing-1.0.jar").read_bytes() == JAR
    (root / "org").rename(root / "gone")  # a second call must not need the repository
    assert download((thing(),), target, url) == target


def test_a_jar_unlike_its_published_sha1_is_refused(repository: tuple[str, Path],
                                                    tmp_path: Path) -> None:
    url, root = repository
    publish(root, thing(), JAR, sha1="0" * 40)
    target = tmp_path / "cache" / "zookeeper-x"
    with pytest.raises(JarsUnavailable, match="publishes 0000"):
        download((thing(),), target, url)
    assert list((tmp_path / "cache").iterdir()) == []  # nothing half-written left


def test_a_jar_unlike_the_pinned_sha1_is_refused(repository: tuple[str, Path],
                                                 tmp_path: Path) -> None:
    url, root = repository
    tampered = JAR + b" and more"
    publish(root, thing(), tampered)  # consistent with its own .sha1, not with the pin
    with pytest.raises(JarsUnavailable, match="josefk expects"):
        download((thing(),), tmp_path / "cache" / "zookeeper-x", url)


def test_a_missing_artifact_says_what_to_do(repository: tuple[str, Path],
                                                   tmp_path: Path) -> None:
    url, _ = repository
    with pytest.raises(JarsUnavailable, match="JOSEFK_ZOOKEEPER_LIBS"):
        download((thing(),), tmp_path / "cache" / "zookeeper-x", url)


def test_the_environment_names_the_folder(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("JOSEFK_ZOOKEEPER_LIBS", str(tmp_path))
    with pytest.raises(JarsUnavailable, match="holds no jar"):
        zookeeper_libs()
    (tmp_path / "zookeeper-3.8.6.jar").write_bytes(JAR)
    assert zookeeper_libs() == tmp_path
