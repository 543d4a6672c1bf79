"""Storage engine: commitlog, consume queues, index, flush, recovery (RocketMQ layout)."""
