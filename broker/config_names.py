"""How configuration fields are named and written as RocketMQ properties.

A field of :class:`~rocklet.broker.config.BrokerConfig` or
:class:`~rocklet.broker.config.NamesrvConfig` is read from, and reported under, the
property name RocketMQ uses for the same setting (``flush_interval_commit_log_ms`` is
``flushIntervalCommitLog``); a few names are irregular.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rocklet.broker.config import BrokerConfig, NamesrvConfig

__all__ = ["property_field_table", "property_name", "property_names", "typed_properties"]


#: Property names that are not the field name in camelCase minus its unit suffix.
_IRREGULAR: Final = {
    "broker_ip1": "brokerIP1",
    "broker_ip2": "brokerIP2",
    "check_crc_on_recover": "checkCRCOnRecover",
    "short_polling_time_ms": "shortPollingTimeMills",
    "register_broker_timeout_ms": "registerBrokerTimeoutMills",
    "transaction_timeout_ms": "transactionTimeOut",
}
_UNIT_SUFFIX: Final = re.compile(r"_(ms|hours)$")


def property_name(field_name: str) -> str:
    """The RocketMQ property name of a config field.

    Args:
        field_name: A field of :class:`BrokerConfig` or :class:`NamesrvConfig`.

    Returns:
        E.g. ``flushIntervalCommitLog`` for ``flush_interval_commit_log_ms``.
    """
    if field_name in _IRREGULAR:
        return _IRREGULAR[field_name]
    head, *rest = _UNIT_SUFFIX.sub("", field_name).split("_")
    return head + "".join(part.capitalize() for part in rest)


#: Fields that are not properties: unknown keys, and where the config was read from.
_NOT_PROPERTIES: Final = frozenset({"extra", "config_file"})


def property_field_table(cls: type) -> dict[str, dataclasses.Field[Any]]:
    """A config class's fields by property name (what a properties file may set)."""
    return {
        property_name(f.name): f for f in dataclasses.fields(cls) if f.name not in _NOT_PROPERTIES
    }


def typed_properties(config: BrokerConfig | NamesrvConfig) -> dict[str, str]:
    """The config's fields as property names and text, as ``MixAll.object2Properties``.

    Args:
        config: A broker or name server configuration.

    Returns:
        Property name to text, in field order; unset optional fields, ``extra`` and
        secrets (fields hidden from ``repr``, such as ``secretKey``) left out.
    """
    out: dict[str, str] = {}
    for spec in dataclasses.fields(config):
        value = getattr(config, spec.name)
        if spec.name in _NOT_PROPERTIES or value is None or not spec.repr:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, enum.Enum):
            text = str(value.value)
        else:
            text = str(value)
        out[property_name(spec.name)] = text
    return out


def property_names(cls: type[BrokerConfig] | type[NamesrvConfig]) -> frozenset[str]:
    """The property names a config class reads (every field but ``extra``).

    Args:
        cls: :class:`BrokerConfig` or :class:`NamesrvConfig`.

    Returns:
        E.g. ``brokerClusterName``, ``flushIntervalCommitLog``.
    """
    return frozenset(property_field_table(cls))
