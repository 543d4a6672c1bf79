"""Rocklet: a RocketMQ 4.x compatible broker, name server, asyncio SDK and Spark connector.

The packages under this namespace, bottom layer first: :mod:`rocklet.protocol`
(sans-IO wire format), :mod:`rocklet.transport` (asyncio connections and servers),
:mod:`rocklet.store` (RocketMQ's on-disk store), :mod:`rocklet.broker` (broker and name
server), :mod:`rocklet.client` (the SDK), :mod:`rocklet.spark` (the PySpark connector).
The ``rocklet`` command is :mod:`rocklet.cli`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("rocklet")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
