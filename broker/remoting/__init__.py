"""The remoting server shared by the broker and the name server."""

from broker.remoting.context import RequestContext
from broker.remoting.dispatch import Processor, ProcessorRegistry, dispatch
from broker.remoting.server import RemotingServer

__all__ = ["Processor", "ProcessorRegistry", "RemotingServer", "RequestContext", "dispatch"]
