"""The name server: broker registrations, topic routes and KV configuration."""

from broker.namesrv.kv_config import KVConfigManager
from broker.namesrv.route_info import RouteInfoManager
from broker.namesrv.server import NamesrvServer

__all__ = ["KVConfigManager", "NamesrvServer", "RouteInfoManager"]
