"""Import kafka-python's codec (``kafka.protocol``, ``kafka.record``, ``kafka.codec``)
without its client, and its admin messages one family at a time.

Any ``import kafka.x`` first runs ``kafka/__init__.py``, which imports kafka-python's
whole client (producer, consumer, admin, its network layer, the assignors): about a
quarter of the broker's import time, none of it used by the broker. Likewise
``kafka/protocol/admin/__init__.py`` imports all eight families of admin messages (~30 ms)
where a first CreateTopics needs one (``kafka.protocol.admin.topics``).
`defer_client_imports` registers such a package in ``sys.modules`` with its real
``__spec__`` and ``__path__`` but without running its ``__init__``, so submodules import as
usual; the first lookup of an attribute the package does not have yet
(``kafka.KafkaProducer``, ``from kafka.protocol.admin import CreateAclsRequest``) runs the
real ``__init__`` in that same module, once, so user code in the same process sees the
package it expects. A package imported already stays as it is.

Every top-level josefk package calls `defer_client_imports` from its ``__init__``, before
any of its modules can import ``kafka``.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
from types import ModuleType
from typing import Any

# Parents first: finding a subpackage's spec imports its parent.
_DEFERRED = ("kafka", "kafka.protocol.admin", "crc32c")
# Deferred packages whose public names are a submodule's: set at once, so that ``from
# crc32c import crc32c`` (josefk, kafka-python) does not run the __init__, which only
# re-exports them and looks its own version up through importlib.metadata (with email,
# zipfile and csv: ~8 ms of the broker's 0.2 s start).
_SEEDS = {"crc32c": "crc32c._crc32c"}


def defer_client_imports() -> None:
    """Register the packages of `_DEFERRED` without running their ``__init__`` (those
    imported already are left alone)."""
    if "kafka" not in sys.modules:
        # The one thing kafka's __init__ does besides importing the client.
        logging.getLogger("kafka").addHandler(logging.NullHandler())
    for name in _DEFERRED:
        if name not in sys.modules and _register_bare(name) and name in _SEEDS:
            _seed(sys.modules[name], _SEEDS[name])


def _seed(package: ModuleType, source: str) -> None:
    try:
        module = importlib.import_module(source)
    except ImportError:  # another layout: the first lookup runs the real __init__
        return
    for attr, value in vars(module).items():
        if not attr.startswith("_"):
            setattr(package, attr, value)


def _register_bare(name: str) -> bool:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent is missing
        return False
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False  # not installed as a package: the import fails where it is used
    package = importlib.util.module_from_spec(spec)
    package.__getattr__ = _run_init_on_first_miss(package)  # type: ignore[method-assign]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)  # as the import system does
    return True


def _run_init_on_first_miss(package: ModuleType) -> Any:
    lock = threading.RLock()  # the broker's thread and a user's thread may race here
    ran = False

    def __getattr__(name: str) -> Any:
        nonlocal ran
        with lock:
            if not ran:
                ran = True
                try:
                    package.__spec__.loader.exec_module(package)  # type: ignore[union-attr]
                except BaseException:
                    ran = False  # as a failed import: the next access tries again
                    raise
                if package.__dict__.get("__getattr__") is __getattr__:
                    del package.__getattr__
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(
                f"module {package.__name__!r} has no attribute {name!r}") from None

    return __getattr__
