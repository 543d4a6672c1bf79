"""The three measurements, written once against :class:`~rocklet.benchsuite.peers.base.BenchClient`.

* :func:`produce`: ``inflight`` concurrent senders, each sending ``batch`` bodies per
  request and awaiting the acknowledgements, until ``count`` bodies or the time cap;
  throughput plus the per-request (send to acknowledgement) latency percentiles.
* :func:`consume`: drain a backlog of ``count`` messages from the start of the
  channel; throughput from the consumer's start to the last body received.
* :func:`end_to_end`: a live consumer, then a producer paced at ``rate`` messages/s
  (the messages due on each ~1 ms tick are sent as one request, without waiting for
  the acknowledgements, so a slow answer does not slow the pace); latency
  is receipt minus the send time stamped in the body, the first second dropped as
  warm-up (the method in BENCHMARKS.md).

Each returns the JSON-able result of one case; the worker adds the client's CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from rocklet.benchsuite.measure import CpuWindow, filler, percentiles, read_stamp, stamped
from rocklet.benchsuite.peers.base import BenchClient
from rocklet.benchsuite.plan import per_request

__all__ = ["consume", "end_to_end", "produce"]

_TICK_S: Final = 0.001
_WARMUP_S: Final = 1.0
_PROBE_SEQ: Final = -1
_READY_TIMEOUT_S: Final = 20.0
_DRAIN_GRACE_S: Final = 2.0


def _window(began: float, ended: float, messages: int) -> dict[str, Any]:
    seconds = max(ended - began, 1e-9)
    return {
        "messages": messages,
        "seconds": round(seconds, 4),
        "rate": round(messages / seconds, 1),
        "began": began,
        "ended": ended,
    }


async def produce(
    client: BenchClient,
    *,
    size: int,
    count: int,
    seconds: float,
    batch: int,
    inflight: int,
    tags: Sequence[str] = (),
    meter: CpuWindow | None = None,
) -> dict[str, Any]:
    """Send up to ``count`` bodies of ``size`` bytes within ``seconds``.

    Args:
        client: An opened client.
        size: Body size in bytes.
        count: Messages wanted.
        seconds: Time cap; what was acknowledged by then is the result.
        batch: Bodies per request.
        inflight: Requests outstanding at once.
        tags: Tags to cycle through, one per request (tag-filtering backlogs).
        meter: Opened and closed around the measured window.

    Returns:
        messages, seconds, rate, ``latency_ms`` per request, and with ``tags`` the
        messages acknowledged per tag (``tag_counts``).
    """
    base = filler(size)
    await client.send([stamped(base, 0)], tags[0] if tags else None)  # connect, routes
    latencies: list[int] = []
    per_tag = dict.fromkeys(tags, 0)
    issued = acked = 0
    deadline = time.monotonic() + seconds

    async def sender() -> None:
        nonlocal issued, acked
        while issued < count and time.monotonic() < deadline:
            n = min(batch, count - issued)
            first, issued = issued, issued + n
            tag = tags[(first // batch) % len(tags)] if tags else None
            bodies = [stamped(base, first + i) for i in range(n)]
            t0 = time.monotonic_ns()
            await client.send(bodies, tag)
            latencies.append(time.monotonic_ns() - t0)
            acked += n
            if tag is not None:
                per_tag[tag] += n

    meter = meter or CpuWindow(None)
    meter.start()
    began = time.monotonic()
    await asyncio.gather(*(sender() for _ in range(inflight)))
    meter.stop()
    result = _window(began, time.monotonic(), acked)
    result["latency_ms"] = _latency(latencies)
    if tags:
        result["tag_counts"] = per_tag
    return result


def _latency(samples: Sequence[int]) -> dict[str, float] | None:
    found = percentiles(samples)
    return None if found is None else found.as_dict()


async def consume(
    client: BenchClient,
    *,
    count: int,
    seconds: float,
    tag: str | None = None,
    meter: CpuWindow | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Receive a backlog of ``count`` messages from the channel's start.

    Args:
        client: An opened client.
        count: Messages expected (the backlog, or the tag's share of it); 0 when the
            client knows where its backlog ends and signals it with an empty batch.
        seconds: Time cap; what arrived by then is the result.
        tag: Only this tag (systems with tags).
        meter: Opened and closed around the measured window.
        **options: Consumer settings for the client.

    Returns:
        messages, seconds, rate.
    """
    received = 0
    last = time.monotonic()
    done = asyncio.Event()

    def sink(bodies: Sequence[bytes]) -> None:
        nonlocal received, last
        if not bodies:  # the client read its whole assignment (see BenchClient)
            done.set()
            return
        received += len(bodies)
        last = time.monotonic()
        if count and received >= count:
            done.set()

    meter = meter or CpuWindow(None)
    meter.start()
    began = time.monotonic()
    await client.start_consumer(sink, from_start=True, tag=tag, **options)
    with contextlib.suppress(TimeoutError):  # the time cap: report what arrived
        await asyncio.wait_for(done.wait(), max(0.0, began + seconds - time.monotonic()))
    meter.stop()
    result = _window(began, last if received else time.monotonic(), received)
    result["expected"] = count
    return result


async def end_to_end(
    client: BenchClient,
    *,
    size: int,
    rate: int,
    seconds: float,
    warmup_s: float = _WARMUP_S,
    per_message: bool = False,
    meter: CpuWindow | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Latency from send to receipt at a fixed ``rate`` for ``seconds`` after a warm-up.

    The messages of the first ``warmup_s`` (1 s by default) are sent and received
    but left out of the percentiles. The messages due on each ~1 ms tick go out as
    one request, or one request each with ``per_message``. ``meter`` is opened and
    closed around the paced sending.

    Returns:
        messages sent and received, the achieved rate, the requests made and
        ``latency_ms``.
    """
    base = filler(size)
    samples: list[int] = []
    arrived = asyncio.Event()
    received = 0
    measure_from = 0

    def sink(bodies: Sequence[bytes]) -> None:
        nonlocal received
        now = time.monotonic_ns()
        for body in bodies:
            sent, seq = read_stamp(body)
            if seq == _PROBE_SEQ:
                arrived.set()
                continue
            received += 1
            if sent >= measure_from:
                samples.append(now - sent)

    await client.start_consumer(sink, from_start=False, **options)
    await _until_delivering(client, base, arrived)
    measure_from = time.monotonic_ns() + int(warmup_s * 1e9)
    meter = meter or CpuWindow(None)
    meter.start()
    paced = await _paced(client, base, rate, seconds + warmup_s, per_message)
    sent_count, requests, began, ended = paced
    meter.stop()
    drained = asyncio.get_running_loop().time() + _DRAIN_GRACE_S
    while received < sent_count and asyncio.get_running_loop().time() < drained:
        arrived.clear()
        await _wait_briefly(arrived)
    result = _window(began, ended, sent_count)
    result |= {
        "received": received,
        "requests": requests,
        "target_rate": rate,
        "latency_ms": _latency(samples),
    }
    return result


async def _until_delivering(client: BenchClient, base: bytes, arrived: asyncio.Event) -> None:
    """Send probes until one comes back: the consumer is subscribed and assigned."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while not arrived.is_set():
        if time.monotonic() > deadline:
            raise TimeoutError("the consumer never received a probe message")
        await client.send([stamped(base, _PROBE_SEQ)])
        await _wait_briefly(arrived)


async def _wait_briefly(event: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), 0.2)


async def _paced(
    client: BenchClient,
    base: bytes,
    rate: int,
    seconds: float,
    per_message: bool,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[int, int, float, float]:
    """Send ``rate`` messages/s for ``seconds``; acknowledgements are not awaited.

    On each tick the messages due by then go out as one request (or, with
    ``per_message``, one request each), in a task of their own: a slow answer
    neither delays the next tick nor hides in the stamps (coordinated omission).
    A tick is a 1 ms sleep, which uvloop's millisecond timers round, so ticks are
    0.2-2 ms apart (~1.4 ms on average); hence the request count in the result.
    After a stall (a process held off the CPU for a second has thousands due at
    once) the catch-up goes out in requests of at most :data:`~rocklet.benchsuite.
    plan.REQUEST_BYTES`: one request of them all would be refused as too large.

    Args:
        client: Where to send.
        base: The body, stamped per message.
        rate: Messages per second.
        seconds: How long to send.
        per_message: One request per message.
        clock: Seconds, monotonic (a test steps it).

    Returns:
        Messages sent, requests made, and the monotonic start and end.
    """
    pending: set[asyncio.Task[None]] = set()
    failures: list[BaseException] = []

    def finished(task: asyncio.Task[None]) -> None:
        pending.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            failures.append(error)

    def launch(bodies: list[bytes]) -> None:
        task = asyncio.ensure_future(client.send(bodies))
        pending.add(task)
        task.add_done_callback(finished)

    step = 1 if per_message else per_request(len(base))
    sent = requests = 0
    began = clock()
    total = int(rate * seconds)
    while sent < total and not failures:
        due = min(total, int((clock() - began) * rate) + 1)
        for first in range(sent, due, step):
            launch([stamped(base, seq) for seq in range(first, min(due, first + step))])
            requests += 1
        sent = max(sent, due)
        await asyncio.sleep(_TICK_S)
    ended = clock()
    if pending:
        await asyncio.wait(pending, timeout=10)
    if failures:
        raise failures[0]
    return sent, requests, began, ended
