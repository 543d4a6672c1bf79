"""The name server: broker registrations, topic routes and KV configuration."""

from rocklet.broker.namesrv.configuration import NamesrvConfiguration
from rocklet.broker.namesrv.kv_config import KVConfigManager
from rocklet.broker.namesrv.route_info import RouteInfoManager
from rocklet.broker.namesrv.server import NamesrvServer

__all__ = ["KVConfigManager", "NamesrvConfiguration", "NamesrvServer", "RouteInfoManager"]
