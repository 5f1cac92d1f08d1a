"""Dynamic broker configs at work: Kafka's ``DynamicBrokerConfig`` reconfigurables.

The broker follows the ``brokers`` entities of its entity config store (``<default>``
and its own id; on one broker a file, in a cluster ZooKeeper's ``/config/brokers``,
changed through any broker). On every change it rebuilds its configuration from the
static settings under those two layers and hands the old and the new one to each
part that reads a dynamic key: the open logs (the ``log.*`` defaults topics inherit,
``producer.id.expiration.ms``), the log cleaner, the connection quotas, the listeners'
TLS and SASL settings, the shutdown's recovery threads, and in a cluster the
controller's unclean leader election. Keys read where they are used
(``transaction.partition.verification.enable``) need nothing more; those josefk has no
use for (the other thread counts) are only reported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from josefk.server.config.broker import BrokerConfig
from josefk.server.config.dynamic import BROKERS, DEFAULT, from_persistent, loggable
from josefk.server.config.passwords import NoSecret, PasswordCodec, codec_for
from josefk.server.config.values import ConfigError
from josefk.server.network.quotas import resolve_overrides
from josefk.server.security.listener import listener_security

if TYPE_CHECKING:
    from josefk.server.broker import Broker

logger = logging.getLogger(__name__)

_CLEANER_KEYS = ("log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
                 "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
                 "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms")
NO_SECRET = NoSecret()
_QUOTA_KEYS = ("max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides")


def changed_keys(old: BrokerConfig, new: BrokerConfig) -> dict[str, str]:
    """The dynamic settings that differ between ``old`` and ``new`` (a removed one as
    ""), for the log line."""
    before = {**old.dynamic_default, **old.dynamic_broker}
    after = {**new.dynamic_default, **new.dynamic_broker}
    return {k: after.get(k, "") for k in before.keys() | after.keys()
            if before.get(k) != after.get(k)}


def _differ(old: BrokerConfig, new: BrokerConfig, keys: tuple[str, ...]) -> bool:
    return any(old.values[k] != new.values[k] for k in keys)


def reconfigure_logs(broker: Broker, old: BrokerConfig, new: BrokerConfig) -> None:
    """Every open log under its topic's overrides and the new broker defaults."""
    if (old.default_log_config() == new.default_log_config()
            and old.producer_id_expiration_ms == new.producer_id_expiration_ms):
        return
    configs: dict[str, Any] = {}  # each topic's LogConfig, built once
    for (topic, _), partition in list(broker.partitions.items()):
        if topic not in configs:
            try:
                configs[topic] = broker.log_config_for(topic)
            except ConfigError as e:  # its overrides and the new defaults disagree
                logger.error("topic %s keeps its log configs: %s", topic, e)
                configs[topic] = None
        if configs[topic] is not None:
            partition.log.reconfigure(configs[topic])
        partition.log.producer_state.expiration_ms = new.producer_id_expiration_ms


def reconfigure_recovery_threads(broker: Broker, old: BrokerConfig, new: BrokerConfig
                                 ) -> None:
    """``num.recovery.threads.per.data.dir``: logs closed at once per log dir at shutdown."""
    broker.log_manager.threads_per_dir = new.values["num.recovery.threads.per.data.dir"]


def reconfigure_cleaner(broker: Broker, old: BrokerConfig, new: BrokerConfig) -> None:
    if _differ(old, new, _CLEANER_KEYS):
        broker.log_cleaner.reconfigure(new.values)


def reconfigure_quotas(broker: Broker, old: BrokerConfig, new: BrokerConfig) -> None:
    broker.sockets.config = new
    quotas = broker.sockets.quotas
    if quotas is not None and _differ(old, new, _QUOTA_KEYS):
        # Host names resolve here, on the event loop: overrides are addresses as a rule.
        quotas.reconfigure(new.max_connections, new.max_connections_per_ip,
                           resolve_overrides(new.max_connections_per_ip_overrides))
    if quotas is not None and quotas.rates is not None:
        quotas.rates.reconfigure(new)


def reconfigure_listeners(broker: Broker, old: BrokerConfig, new: BrokerConfig) -> None:
    """New TLS contexts and SASL settings for the connections accepted from now on."""
    if old.listener_overrides == new.listener_overrides and all(
            old.values[k] == new.values[k] for k in new.values
            if k.startswith(("ssl.", "sasl.")) and not k.startswith("ssl.principal")):
        return
    for listener in new.listeners:
        broker.listener_security[listener.name] = listener_security(
            new, listener, broker.security_store.scram_credential)


def reconfigure_unclean_election(broker: Broker, old: BrokerConfig, new: BrokerConfig
                                 ) -> None:
    if (broker.cluster is not None and new.unclean_leader_election_enable
            and not old.unclean_leader_election_enable):
        broker.cluster.on_unclean_default_enabled()


Hook = Callable[["Broker", BrokerConfig, BrokerConfig], None]
HOOKS: tuple[Hook, ...] = (reconfigure_logs, reconfigure_recovery_threads, reconfigure_cleaner,
                           reconfigure_quotas, reconfigure_listeners,
                           reconfigure_unclean_election)


def check_listeners(broker: Broker, new: BrokerConfig) -> None:
    """Build every listener's security under ``new`` (nothing kept); ConfigError if one
    cannot be built (a key store that does not open, a wrong password...)."""
    for listener in new.listeners:
        listener_security(new, listener, broker.security_store.scram_credential)


class BrokerReconfiguration:
    """Keeps ``broker.config`` current with the dynamic broker configs of its store."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.entity = str(broker.node_id)
        broker.entity_configs.subscribe(self._on_change)

    def passwords(self) -> PasswordCodec:
        """How this broker stores and reads dynamic password configs."""
        config = self.broker.config
        return codec_for(config.values, bool(config.zookeeper_connect))

    def layers(self) -> tuple[dict[str, str], dict[str, str]]:
        """The stored cluster-wide defaults and this broker's settings, as applied."""
        store = self.broker.entity_configs
        try:
            passwords = self.passwords()
        except ConfigError as e:
            logger.error("dynamic password configs cannot be read: %s", e)
            passwords = NO_SECRET
        return (from_persistent(store.get(BROKERS, DEFAULT), False, DEFAULT, passwords),
                from_persistent(store.get(BROKERS, self.entity), True, self.entity,
                                passwords))

    def initial(self, config: BrokerConfig) -> BrokerConfig:
        """``config`` under the dynamic settings stored now (at start-up, before the parts
        that read it are built; the log manager already is)."""
        try:
            new = config.with_dynamic(*self.layers())
        except ConfigError as e:
            logger.error("dynamic broker configs could not be applied (%s); starting with "
                         "the static ones", e.name or "invalid")
            return config
        reconfigure_recovery_threads(self.broker, config, new)
        return new

    def _on_change(self, entity_type: str, name: str) -> None:
        if entity_type == BROKERS and name in (DEFAULT, self.entity):
            self.apply()

    def apply(self) -> None:
        """Rebuild the configuration from the store and reconfigure what changed."""
        old = self.broker.config
        try:
            new = old.with_dynamic(*self.layers())
        except ConfigError as e:
            logger.error("dynamic broker configs could not be applied: invalid %s",
                         e.name or "configuration")
            return
        changed = changed_keys(old, new)
        if not changed:
            return
        self.broker.config = new
        logger.info("dynamic broker configs updated: %s", _describe(changed))
        for hook in HOOKS:
            try:
                hook(self.broker, old, new)
            except Exception:
                logger.exception("applying dynamic broker configs (%s) failed",
                                 hook.__name__)


def _describe(changed: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(loggable(changed).items()))
