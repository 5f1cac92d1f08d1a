"""Acceptance: ``pip install josefk`` into a fresh virtualenv (no system site-packages),
then a user's test file that asks for ``kafka_broker`` passes with no other set-up.

This checkout's package folders are copied and installed as a user would install
josefk, with pytest and two stock clients; with pip's cache warm the run takes about
20-30 s of work (more on a loaded machine). Needs PyPI (or pip's cache and find-links).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 600
# The README's example, as a user would write it.
USER_TEST = '''\
from confluent_kafka import Consumer, Producer
from kafka import KafkaProducer


def test_kafka_python_and_confluent_kafka(kafka_broker):
    KafkaProducer(bootstrap_servers=kafka_broker).send("t", b"one").get(timeout=10)
    producer = Producer({"bootstrap.servers": kafka_broker})
    producer.produce("t", b"two")
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": kafka_broker, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    assert [m.value() for m in consumer.consume(2, timeout=20)] == [b"one", b"two"]
'''

pytestmark = pytest.mark.timeout(3 * INSTALL_TIMEOUT_S)


def copy_sources(target: Path) -> Path:
    """What a source distribution of this checkout holds: pyproject, README and the
    folders pyproject's ``package-dir`` maps."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    target.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in pyproject["tool"]["setuptools"]["package-dir"].values():
        shutil.copytree(REPO / folder, target / folder, ignore=ignore)
    return target


def clean_env() -> dict[str, str]:
    """This process's environment without what would leak our own installation in."""
    leaks = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS",
             "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS"}
    return {k: v for k, v in os.environ.items() if k not in leaks}


def run(command: list[str], cwd: Path, timeout: float = INSTALL_TIMEOUT_S) -> str:
    done = subprocess.run(command, cwd=cwd, env=clean_env(), capture_output=True, text=True,
                          timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{output}"
    return output


def test_pip_install_then_kafka_broker_just_works(tmp_path: Path) -> None:
    source = copy_sources(tmp_path / "josefk-src")
    venv = tmp_path / "venv"
    # This pip installs into the new environment (pip --python): the same install as the
    # environment's own pip would make, without bootstrapping one into it first.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    python = str(venv / "bin" / "python")
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile",
         "--disable-pip-version-check", str(source), "pytest", "kafka-python",
         "confluent-kafka"], tmp_path)

    where = run([python, "-c", "import josefk.testing.plugin as p; print(p.__file__)"], tmp_path)
    assert Path(where.strip()).is_relative_to(venv), where

    project = tmp_path / "project"
    project.mkdir()
    (project / "test_with_kafka.py").write_text(USER_TEST)
    output = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project,
                 timeout=120)
    assert "1 passed" in output, output
