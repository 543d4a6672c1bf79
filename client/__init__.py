"""Asyncio RocketMQ client SDK."""
