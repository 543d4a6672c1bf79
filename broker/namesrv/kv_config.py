"""The name server's key/value configuration (RocketMQ's ``KVConfigManager``), in memory.

Namespaces of string pairs; ``ORDER_TOPIC_CONFIG`` is the one RocketMQ itself reads
(``brokerName:queueNums`` per ordered topic). Not thread-safe: the event loop owns it.
"""

from __future__ import annotations

from rocklet.protocol.names import ORDER_TOPIC_CONFIG

__all__ = ["ORDER_TOPIC_CONFIG", "KVConfigManager"]


class KVConfigManager:
    """Namespace -> key -> value."""

    def __init__(self) -> None:
        self._table: dict[str, dict[str, str]] = {}

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set a value.

        Args:
            namespace: The namespace.
            key: The key.
            value: The value.
        """
        self._table.setdefault(namespace, {})[key] = value

    def get(self, namespace: str, key: str) -> str | None:
        """Read a value.

        Args:
            namespace: The namespace.
            key: The key.

        Returns:
            The value, or ``None``.
        """
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Remove a value (absent keys are fine); an emptied namespace disappears.

        Args:
            namespace: The namespace.
            key: The key.
        """
        entries = self._table.get(namespace)
        if entries is not None:
            entries.pop(key, None)
            if not entries:
                del self._table[namespace]

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """Every pair of a namespace.

        Args:
            namespace: The namespace.

        Returns:
            A copy of its pairs, or ``None`` when it has none.
        """
        entries = self._table.get(namespace)
        return None if entries is None else dict(entries)
