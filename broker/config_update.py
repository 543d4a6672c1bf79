"""What an UPDATE_BROKER_CONFIG body changes, checked before anything is applied.

RocketMQ 4.9.4 (``Configuration.update``) hands the properties to each of its four
config objects, which take the keys they have a setter for, merges into its saved
table only keys that table already holds (every field of the four objects, plus the
keys of the ``-c`` file) and rewrites the file. A key nobody knows is thus accepted
and dropped, unless the file already had it. A value Java cannot parse is dropped
without a word; Rocklet refuses the whole request instead, naming the key.

Each key of a request falls in one of these kinds (:class:`ConfigUpdate`):

- *live*: a Rocklet setting applied at once (:data:`LIVE_KEYS`);
- *restart*: a Rocklet setting (or a TLS key) that takes effect at the next start;
- *reported*: a RocketMQ key Rocklet does not implement: saved and shown by
  GET_BROKER_CONFIG, no effect;
- *ignored*: a key neither knows that the file does not have, as RocketMQ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from rocklet.broker.config import BrokerConfig, ConfigError, property_names, with_overrides
from rocklet.broker.rocketmq_defaults import ROCKETMQ_REPORTED_KEYS, rocketmq_defaults
from rocklet.broker.rocketmq_keys import ROCKETMQ_BROKER_KEYS
from rocklet.broker.tls_keys import SECRET_KEYS, TLS_CONFIG_FILE, TLS_KEYS, USE_TLS

__all__ = ["LIVE_KEYS", "PATH_KEYS", "PATH_REFUSED", "ConfigUpdate", "plan_update", "shown_value"]

#: Settings a running Rocklet broker applies as soon as they are updated.
LIVE_KEYS: Final = frozenset(
    {
        "brokerPermission",
        "slaveReadEnable",
        "enablePropertyFilter",
        "haAllowedSlaves",
        "autoDeleteUnusedStats",
    }
)
#: Keys naming files or directories: a request never changes them. RocketMQ 4.9.4
#: accepts and saves them, so anyone who may update the config can point the broker's
#: next start at other files (RocketMQ 5 blacklists such keys; its 4.9.7 name server
#: refuses its own paths with :data:`PATH_REFUSED`).
PATH_KEYS: Final = frozenset(
    {
        "storePathRootDir",
        "storePathCommitLog",
        "storePathDLedgerCommitLog",
        "readOnlyCommitLogStorePaths",
        "rocketmqHome",
        "brokerConfigPath",
        "aclFile",
        TLS_CONFIG_FILE,
    }
    | {k for k in TLS_KEYS if k.endswith("Path")}
)
#: RocketMQ 4.9.7's remark for an update naming a path.
PATH_REFUSED: Final = "Can not update config path"
#: Rocklet settings whose values are secrets: saved, never logged nor answered.
_SECRET: Final = SECRET_KEYS | {"secretKey"}


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    """An update, checked.

    Attributes:
        config: The configuration with the update applied.
        saved: Key to value text for the configuration file (every accepted key).
        live: Keys applied at once.
        restart: Keys that take effect at the next start.
        reported: RocketMQ keys Rocklet does not implement (no effect).
        ignored: Unknown keys, dropped as RocketMQ drops them.
    """

    config: BrokerConfig
    saved: dict[str, str]
    live: tuple[str, ...]
    restart: tuple[str, ...]
    reported: tuple[str, ...]
    ignored: tuple[str, ...]


def shown_value(key: str, value: str) -> str:
    """A value as it may appear in a log line or an answer (secrets masked)."""
    return "******" if key in _SECRET else value


def _check_like(key: str, value: str, default: str) -> None:
    """Check a RocketMQ-only key's value against the type of its 4.9.4 default."""
    if default in ("true", "false"):
        if value.lower() not in ("true", "false"):
            raise ConfigError(f"invalid value for {key}: {value!r} (expected true or false)")
    elif default.lstrip("-").isdigit():
        try:
            int(value, 10)
        except ValueError:
            raise ConfigError(f"invalid value for {key}: {value!r} (expected a number)") from None


def plan_update(config: BrokerConfig, props: Mapping[str, str]) -> ConfigUpdate:
    """Check an update and work out its new configuration and what it does.

    Args:
        config: The configuration in force.
        props: The request's properties (values trimmed).

    Returns:
        The checked update; nothing has been applied yet.

    Raises:
        ConfigError: A value does not parse or is out of range (the key is named);
            nothing of the request is applied then.
    """
    ours = property_names(BrokerConfig)
    rocketmq = ROCKETMQ_BROKER_KEYS | ROCKETMQ_REPORTED_KEYS
    defaults = rocketmq_defaults()
    typed: dict[str, str] = {}
    extra = dict(config.extra)
    saved: dict[str, str] = {}
    live: list[str] = []
    restart: list[str] = []
    reported: list[str] = []
    ignored: list[str] = []
    for key, value in props.items():
        if key in ours:
            typed[key] = value
            (live if key in LIVE_KEYS else restart).append(key)
        elif key in TLS_KEYS or key == USE_TLS:
            extra[key] = value
            restart.append(key)
        elif key in rocketmq:
            _check_like(key, value, defaults.get(key, ""))
            extra[key] = value
            reported.append(key)
        elif key in config.extra:
            extra[key] = value  # the file has it: RocketMQ's table does too
            reported.append(key)
        else:
            ignored.append(key)
            continue
        saved[key] = value
    try:
        updated = with_overrides(config, typed)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:  # a check outside ConfigError's reach
        raise ConfigError(f"invalid configuration update: {exc}") from None
    updated = dataclasses.replace(updated, extra=extra)
    return ConfigUpdate(
        updated, saved, tuple(live), tuple(restart), tuple(reported), tuple(ignored)
    )
