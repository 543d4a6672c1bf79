"""The remoting server shared by the broker and the name server."""

from rocklet.broker.remoting.context import RequestContext
from rocklet.broker.remoting.dispatch import Processor, ProcessorRegistry, dispatch
from rocklet.broker.remoting.server import RemotingServer

__all__ = ["Processor", "ProcessorRegistry", "RemotingServer", "RequestContext", "dispatch"]
