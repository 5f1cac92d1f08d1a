"""Where the ZooKeeper jars of ``kafka_cluster`` come from.

In order: the folder ``JOSEFK_ZOOKEEPER_LIBS`` names; this checkout's
``.cache/zookeeper/libs`` (``make zookeeper-jars``) when josefk runs from its
repository; else ``~/.cache/josefk/zookeeper-<version>/``, downloaded once from Maven
Central: the artifacts ``tools/zookeeper/pom.xml`` resolves, each checked against the
SHA-1 Maven Central publishes beside it and the one pinned here.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ZOOKEEPER_VERSION = "3.8.6"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
DOWNLOAD_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Artifact:
    """One jar of Maven Central, with the SHA-1 it must have."""

    group: str
    name: str
    version: str
    sha1: str

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.version}.jar"

    def url(self, repository: str) -> str:
        path = "/".join([*self.group.split("."), self.name, self.version, self.file_name])
        return f"{repository.rstrip('/')}/{path}"


# ZooKeeper's server, its runtime dependencies and the two "provided" ones its server
# needs (metrics-core, snappy-java): what tools/zookeeper/pom.xml resolves.
ZOOKEEPER_ARTIFACTS = (
    Artifact("org.apache.zookeeper", "zookeeper", ZOOKEEPER_VERSION,
             "763093ac53585129a66f6794b3f56874fc62a149"),
    Artifact("org.apache.zookeeper", "zookeeper-jute", ZOOKEEPER_VERSION,
             "ffa3fc7581f3b79a711bebfd3489b88b581e48c0"),
    Artifact("org.apache.yetus", "audience-annotations", "0.12.0",
             "e0efa60318229590103e31c69ebdaae56d903644"),
    Artifact("commons-io", "commons-io", "2.17.0", "ddcc8433eb019fb48fe25207c0278143f3e1d7e2"),
    Artifact("ch.qos.logback", "logback-classic", "1.3.15",
             "4faf2cb25bcbac28af62a247a956933981c09141"),
    Artifact("ch.qos.logback", "logback-core", "1.3.15",
             "af8ee7714e901a26e7cf5a95ae483cbe2f298330"),
    Artifact("org.slf4j", "slf4j-api", "2.0.13", "80229737f704b121a318bba5d5deacbcf395bc77"),
    Artifact("io.dropwizard.metrics", "metrics-core", "4.1.12.1",
             "cb2f351bf4463751201f43bb99865235d5ba07ca"),
    Artifact("org.xerial.snappy", "snappy-java", "1.1.10.5",
             "ac605269f3598506196e469f1fb0d7ed5c55059e"),
    *(Artifact("io.netty", f"netty-{name}", "4.1.130.Final", sha1) for name, sha1 in (
        ("buffer", "ac7c21d8df92fe99f04dff2e28ff387b8195e6cf"),
        ("codec", "a645e96a5db4c6266f995d0d3d6ad04726e6c87a"),
        ("common", "d4a1809fd03b560c82f7e35228e524fed96926f3"),
        ("handler", "e0593333f454ea57a02c6f4656401506e3deae14"),
        ("resolver", "c22bc6c0a694ce099548b92e88ac58527fe6e9a9"),
        ("transport", "3a25cd7a1c057ed9a1606caa4b693f9c8b5c4b53"),
        ("transport-classes-epoll", "98ae3b61ebe99ff3c94e2e10bf4410b4c55fa2d4"),
        ("transport-native-epoll", "8285f5c35d72a3e1e6c01101b4d7b8dcd9b0cd20"),
        ("transport-native-unix-common", "a29adec03f7dbefdab3b21523a15c35e794f3154"),
    )),
)


class JarsUnavailable(RuntimeError):
    """The ZooKeeper jars are neither here nor obtainable; the message says what to do."""


def checkout_libs() -> Path | None:
    """This repository's ``.cache/zookeeper/libs`` when josefk runs from a checkout of it."""
    root = Path(__file__).resolve().parents[1]
    libs = root / ".cache" / "zookeeper" / "libs"
    if (root / "pyproject.toml").is_file() and any(libs.glob("zookeeper-*.jar")):
        return libs
    return None


def user_cache() -> Path:
    """``$XDG_CACHE_HOME/josefk`` (default ``~/.cache/josefk``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "josefk"


def zookeeper_libs() -> Path:
    """A folder holding ZooKeeper's server jars, downloading them the first time."""
    named = os.environ.get("JOSEFK_ZOOKEEPER_LIBS")
    if named:
        if not any(Path(named).glob("*.jar")):
            raise JarsUnavailable(f"JOSEFK_ZOOKEEPER_LIBS={named} holds no jar")
        return Path(named)
    return checkout_libs() or download(
        ZOOKEEPER_ARTIFACTS, user_cache() / f"zookeeper-{ZOOKEEPER_VERSION}",
        os.environ.get("JOSEFK_MAVEN_REPOSITORY", MAVEN_CENTRAL))


def download(artifacts: tuple[Artifact, ...], target: Path, repository: str) -> Path:
    """Every artifact into ``target`` (unless it is there already), all or nothing.

    The jars go to a temporary folder beside ``target`` that is renamed into place
    once each has been checked, so a broken download never looks complete and two
    processes fetching at once do not clash.
    """
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        for artifact in artifacts:
            fetch_checked(artifact, repository, staging / artifact.file_name)
        try:
            staging.rename(target)
        except OSError:
            if not target.is_dir():  # not merely another process that finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def fetch_checked(artifact: Artifact, repository: str, path: Path) -> None:
    """Download one jar to ``path``; its SHA-1 must equal the published and the pinned one."""
    url = artifact.url(repository)
    published = _get(url + ".sha1").decode("ascii", "replace").split()
    body = _get(url)
    actual = hashlib.sha1(body).hexdigest()
    if not published or published[0].lower() != actual or actual != artifact.sha1:
        raise JarsUnavailable(
            f"{url}: SHA-1 {actual}, but the repository publishes "
            f"{published[0] if published else 'nothing'} and josefk expects {artifact.sha1}")
    path.write_bytes(body)


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            return response.read()
    except (urllib.error.URLError, OSError) as e:
        raise JarsUnavailable(
            f"could not download {url} ({e}); set JOSEFK_ZOOKEEPER_LIBS to a folder holding "
            f"ZooKeeper {ZOOKEEPER_VERSION}'s server jars") from None
