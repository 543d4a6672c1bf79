"""Broker and name server: the asyncio remoting server and request processors."""
