"""The end-to-end workload's pacer: what it sends on each tick, after a stall too."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from rocklet.benchsuite.measure import filler, read_stamp
from rocklet.benchsuite.peers.base import Sink
from rocklet.benchsuite.plan import REQUEST_BYTES, per_request
from rocklet.benchsuite.workloads import _paced


class _Recorder:
    """A BenchClient that keeps every request's bodies; the pacer only sends."""

    def __init__(self) -> None:
        self.requests: list[list[bytes]] = []

    async def open(self, channel: str, *, create: bool) -> None:
        raise AssertionError("the pacer does not open")

    async def send(self, bodies: Sequence[bytes], tag: str | None = None) -> None:
        self.requests.append(list(bodies))

    async def start_consumer(
        self, sink: Sink, *, from_start: bool, tag: str | None = None, **options: Any
    ) -> None:
        raise AssertionError("the pacer does not consume")

    async def close(self) -> None:
        raise AssertionError("the pacer does not close")


def _clock(readings: list[float]) -> Iterator[float]:
    """The scripted readings, then the last one repeated (the run is over by then)."""
    yield from readings
    while True:
        yield readings[-1]


async def test_a_stall_is_caught_up_in_requests_that_fit_the_limit() -> None:
    """A worker held off the CPU for 1.2 s at 5k msg/s has 6,000 bodies due at once.

    Sent as one request they were 6 MB, over the client's 4 MiB batch limit: the run
    died with InvalidMessageError. They go out as several requests within
    REQUEST_BYTES, every message once and in order.
    """
    client = _Recorder()
    base = filler(1024)
    ticks = _clock([0.0, 0.0, 0.001, 1.201, 1.202, 2.0])
    sent, requests, _, _ = await _paced(
        client, base, rate=5000, seconds=1.5, per_message=False, clock=lambda: next(ticks)
    )
    assert sent == 7500
    assert requests == len(client.requests)
    sizes = [sum(map(len, bodies)) for bodies in client.requests]
    assert max(sizes) <= REQUEST_BYTES
    assert max(map(len, client.requests)) == per_request(len(base))
    seqs = [read_stamp(body)[1] for bodies in client.requests for body in bodies]
    assert seqs == list(range(7500))
    # Ticks of 1, 5, 6,000 (the catch-up: 7 requests), 5 and the last 1,489 (2).
    assert len(client.requests) == 1 + 1 + 7 + 1 + 2


async def test_per_message_mode_sends_each_body_alone() -> None:
    client = _Recorder()
    ticks = _clock([0.0, 0.0, 0.01, 1.0])
    sent, requests, _, _ = await _paced(
        client, filler(64), rate=1000, seconds=0.05, per_message=True, clock=lambda: next(ticks)
    )
    assert sent == 50
    assert requests == 50
    assert all(len(bodies) == 1 for bodies in client.requests)
