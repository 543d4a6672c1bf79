"""Typed request and response headers, one module per request family."""

from protocol.headers.base import Header, wire

__all__ = ["Header", "wire"]
