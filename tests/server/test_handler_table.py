"""The handler table (`josefk.server.handlers.MODULES`) names, for every api key, the module
whose ``HANDLERS`` serves it, so the broker imports handlers on first use yet serves and
advertises exactly the apis its modules handle."""

from __future__ import annotations

import importlib
import pkgutil

import josefk.server.handlers as handlers
from josefk.protocol.versions import advertised_versions


def _declared() -> dict[int, str]:
    """Api key -> module, from the handler modules' own ``HANDLERS``."""
    declared: dict[int, str] = {}
    for info in pkgutil.walk_packages(handlers.__path__, f"{handlers.__name__}."):
        if info.ispkg:
            continue
        module = importlib.import_module(info.name)
        name = info.name.removeprefix(f"{handlers.__name__}.")
        # A module without HANDLERS is a helper of the handlers beside it.
        for key in getattr(module, "HANDLERS", {}):
            assert int(key) not in declared, (key, name)
            declared[int(key)] = name
    return declared


def test_the_table_names_the_module_of_every_handler() -> None:
    assert dict(handlers.MODULES) == _declared()


def test_handler_resolves_to_the_modules_function() -> None:
    for key, name in handlers.MODULES.items():
        module = importlib.import_module(f"{handlers.__name__}.{name}")
        assert handlers.handler(key) is module.HANDLERS[key]


def test_cluster_only_keys_are_the_controller_apis() -> None:
    from josefk.server.handlers import controller_apis

    assert {int(k) for k in controller_apis.HANDLERS} == handlers.CLUSTER_ONLY_KEYS
    assert advertised_versions(handlers.MODULES).keys() >= handlers.CLUSTER_ONLY_KEYS
