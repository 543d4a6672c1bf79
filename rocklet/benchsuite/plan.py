"""What a run measures: the systems, the cases of each, and the three profiles.

Every system gets the same matrix (produce, then consume that backlog, for each body
size; then end-to-end latency at a fixed rate), each through its usual client in its
usual fast mode (Rocklet: batches; Redis: an XADD pipeline; RabbitMQ: a confirm
window; rstream: ``send_batch``; NATS: ``publish_async``). Rocklet adds its own variants
(sync and pipelined single sends, N producers and consumers, tag filtering, the pull
consumer, SYNC_FLUSH) and the official C++ client.

A request never carries more than :data:`REQUEST_BYTES`, so 16 KiB bodies go in
smaller batches (RabbitMQ's stream frames are at most 1 MiB by default).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "PROFILES",
    "REQUEST_BYTES",
    "SYSTEMS",
    "Case",
    "Profile",
    "System",
    "build_plan",
    "per_request",
    "select_cases",
]

REQUEST_BYTES: Final = 1024 * 1024
#: Per-message framing allowance when fitting a batch into :data:`REQUEST_BYTES`.
_OVERHEAD: Final = 64
E2E_SIZE: Final = 1024


@dataclass(frozen=True, slots=True)
class Profile:
    """Counts and time caps of one kind of run.

    Attributes:
        name: ``smoke``, ``quick`` or ``full``.
        runs: How many times the whole plan runs (medians are over runs).
        sizes: Body sizes of the produce/consume matrix.
        counts: Messages to produce per size (each case also stops at its time cap).
        produce_s: Time cap of a produce case.
        consume_s: Time cap of a consume case.
        e2e_rate: Messages/s of the latency case.
        e2e_s: Measured seconds of the latency case (after the warm-up).
        e2e_warmup_s: Warm-up seconds left out of the latency percentiles.
        sync_count: Messages of the Rocklet one-at-a-time case.
        processes: N of the N-producers / N-consumers cases.
        cpp_count: Messages per C++ producer case.
        limits: :class:`~rocklet.benchsuite.limits.LimitSettings` fields.
        systems: Systems this profile runs by default.
    """

    name: str
    runs: int
    sizes: tuple[int, ...]
    counts: Mapping[int, int]
    produce_s: float
    consume_s: float
    e2e_rate: int
    e2e_s: float
    e2e_warmup_s: float
    sync_count: int
    processes: int
    cpp_count: int
    limits: Mapping[str, Any] = field(default_factory=dict)
    systems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class System:
    """A client + server pair under test.

    Attributes:
        key: Short name (``redis``).
        title: For tables.
        server: Which server it runs against (several systems can share one).
        client: The worker's client name, or ``cpp`` for the C++ driver.
        batch: Bodies per produce request (capped by :data:`REQUEST_BYTES`).
        inflight: Produce requests outstanding at once.
        peer: Whether it is a peer (the goals compare Rocklet to the best peer).
    """

    key: str
    title: str
    server: str
    client: str
    batch: int
    inflight: int
    peer: bool


SYSTEMS: Final[dict[str, System]] = {
    s.key: s
    for s in (
        System("rocklet", "Rocklet SDK", "rocklet", "rocklet", 256, 4, False),
        System("rocklet-cpp", "Rocklet + C++ client", "rocklet", "cpp", 1, 1, False),
        System("rocklet-sync", "Rocklet SYNC_FLUSH", "rocklet-sync", "rocklet", 256, 4, False),
        System("redis", "Redis Streams", "redis", "redis", 1000, 2, True),
        System("rabbitmq", "RabbitMQ classic", "rabbitmq", "rabbitmq", 100, 8, True),
        System("rabbitmq-stream", "RabbitMQ stream", "rabbitmq", "rabbitmq-stream", 500, 4, True),
        System("nats", "NATS JetStream", "nats", "nats", 1000, 4, True),
    )
}

_ALL: Final = tuple(SYSTEMS)

PROFILES: Final[dict[str, Profile]] = {
    "smoke": Profile(
        "smoke", 1, (1024,), {1024: 2000}, 10.0, 10.0, 200, 0.5, 0.2, 200, 2, 0,
        {"dd_mib": 16, "fsync_seconds": 0.2, "loopback_seconds": 0.2, "echo_seconds": 0.2},
        ("rocklet",),
    ),
    "quick": Profile(
        "quick", 1, (100, 1024, 16384), {100: 50_000, 1024: 50_000, 16384: 8000},
        3.0, 3.0, 5000, 2.0, 1.0, 1000, 4, 2000,
        {"dd_mib": 256, "fsync_seconds": 0.5, "loopback_seconds": 0.5, "echo_seconds": 0.5},
        _ALL,
    ),
    "full": Profile(
        "full", 3, (100, 1024, 16384), {100: 1_000_000, 1024: 1_000_000, 16384: 100_000},
        5.0, 5.0, 5000, 4.0, 1.0, 5000, 4, 6000, {}, _ALL,
    ),
}  # fmt: skip


#: Hard limit of a case's child processes, unless the case needs longer.
CASE_TIMEOUT_S: Final = 120.0

#: What an end-to-end case may spend beyond its warm-up and measured seconds: starting
#: its processes, waiting up to 20 s for the consumer's first message, and draining.
_E2E_SETUP_S: Final = 90.0


@dataclass(frozen=True, slots=True)
class Case:
    """One measurement.

    Attributes:
        key: Unique in a run: ``system/kind/variant/size``.
        system: The :class:`System` key.
        kind: ``produce``, ``consume`` or ``e2e``.
        variant: Which mode (``batch``, ``sync``, ``push``...); the headline is the
            system's ``batch`` produce, ``push``/``main`` consume and ``e2e``.
        label: Human description of the mode.
        size: Body size.
        channel: Topic / stream / queue name.
        job: Worker job (or C++ driver command) without the server address.
        processes: Worker processes running it at once.
        backlog_of: Key of the produce case whose messages this consume reads.
        tag: The tag a consume case filters on (counts come from the producer).
        timeout_s: Hard limit of the child processes.
    """

    key: str
    system: str
    kind: str
    variant: str
    label: str
    size: int
    channel: str
    job: Mapping[str, Any]
    processes: int = 1
    backlog_of: str | None = None
    tag: str | None = None
    timeout_s: float = CASE_TIMEOUT_S


def per_request(size: int) -> int:
    """How many bodies of ``size`` bytes fit in one request of :data:`REQUEST_BYTES`."""
    return max(1, REQUEST_BYTES // (size + _OVERHEAD))


def _batch(system: System, size: int) -> int:
    return min(system.batch, per_request(size))


def _produce(
    system: System, p: Profile, size: int, variant: str, batch: int, inflight: int, **kw: Any
) -> Case:
    channel = kw.pop("channel", f"{system.key.replace('-', '_')}_{variant}_{size}")
    args = {"size": size, "count": kw.pop("count", p.counts.get(size, p.counts[E2E_SIZE]))}
    args |= {"seconds": p.produce_s, "batch": batch, "inflight": inflight} | kw.pop("args", {})
    label = kw.pop("label", f"{batch} per request, {inflight} in flight")
    job = {"client": system.client, "channel": channel, "op": "produce", "create": True}
    return Case(
        f"{system.key}/produce/{variant}/{size}", system.key, "produce", variant, label, size,
        channel, job | {"args": args}, **kw,
    )  # fmt: skip


def _consume(system: System, p: Profile, source: Case, variant: str, label: str, **kw: Any) -> Case:
    args = {"count": 0, "seconds": p.consume_s} | kw.pop("args", {})
    job = {"client": system.client, "channel": source.channel, "op": "consume", "args": args}
    return Case(
        f"{system.key}/consume/{variant}/{source.size}", system.key, "consume", variant, label,
        source.size, source.channel, job, backlog_of=source.key, **kw,
    )  # fmt: skip


def _e2e(
    system: System,
    p: Profile,
    variant: str = "e2e",
    per_message: bool = False,
    rate: int | None = None,
    **consumer: Any,
) -> Case:
    rate = rate or p.e2e_rate
    args = {"size": E2E_SIZE, "rate": rate, "seconds": p.e2e_s}
    args |= {"warmup_s": p.e2e_warmup_s, "per_message": per_message} | consumer
    channel = f"{system.key.replace('-', '_')}_{variant}"
    job = {"client": system.client, "channel": channel, "op": "e2e", "create": True}
    unit = "one request per message" if per_message else "one request per ~1 ms tick"
    label = f"{rate} msg/s, {unit}"
    # ``--e2e-seconds`` may ask for up to an hour: the limit follows the length.
    timeout_s = max(CASE_TIMEOUT_S, p.e2e_warmup_s + p.e2e_s + _E2E_SETUP_S)
    return Case(
        f"{system.key}/e2e/{variant}/{E2E_SIZE}", system.key, "e2e", variant, label, E2E_SIZE,
        channel, job | {"args": args}, timeout_s=timeout_s,
    )  # fmt: skip


def _matrix(system: System, p: Profile, **consumer: Any) -> Iterator[Case]:
    """Each size produced then consumed in the system's usual mode; the latency cases.

    Latency is measured at the profile's rate and at a fifth of it, which the slower
    peers sustain.
    """
    for size in p.sizes:
        source = _produce(system, p, size, "batch", _batch(system, size), system.inflight)
        yield source
        yield _consume(system, p, source, "main", "from the first message", args=consumer)
    yield _e2e(system, p, **consumer)
    yield _e2e(system, p, "e2e_low", rate=p.e2e_rate // 5, **consumer)


def _rocklet_cases(p: Profile) -> Iterator[Case]:
    sdk = SYSTEMS["rocklet"]
    push: dict[str, Any] = {"consumer": "push", "batch": 256}
    yield from _matrix(sdk, p, **push)
    kib = E2E_SIZE
    yield _produce(sdk, p, kib, "sync", 1, 1, count=p.sync_count, label="one at a time")
    single = _produce(sdk, p, kib, "pipelined", 1, 64, label="one per request, 64 in flight")
    yield single
    backlog = _produce(sdk, p, kib, "batch", 256, 4)  # the matrix's 1 KiB case: its topic
    pull: dict[str, Any] = {"consumer": "pull", "batch": 256}
    yield _consume(sdk, p, backlog, "pull", "pull consumer, 8 queues", args=pull)
    n = p.processes
    many = _produce(
        sdk, p, kib, f"{n}procs", 256, 2, processes=n, label=f"{n} producer processes",
        count=p.counts[kib] // n,
    )  # fmt: skip
    yield many
    yield _consume(sdk, p, many, f"{n}procs", f"{n} consumer processes", args=pull, processes=n)
    tags = _produce(
        sdk, p, kib, "tags", 256, 4, args={"tags": ["TagA", "TagB", "TagC", "TagD"]},
        label="4 tags, one per request",
    )  # fmt: skip
    yield tags
    yield _consume(sdk, p, tags, "tagA", "subscribed to TagA (1/4)", args=push, tag="TagA")
    yield _e2e(sdk, p, "e2e_single", per_message=True, **push)


def _cpp_cases(p: Profile) -> Iterator[Case]:
    cpp = SYSTEMS["rocklet-cpp"]
    for threads in (1, 8):
        command = {"op": "load", "topic": "rocklet_batch_1024", "count": p.cpp_count}
        command |= {"threads": threads, "body_size": E2E_SIZE, "group": f"PG_cpp_{threads}"}
        yield Case(
            f"rocklet-cpp/produce/sync{threads}/{E2E_SIZE}", cpp.key, "produce",
            f"sync{threads}", f"send_sync, {threads} thread(s)", E2E_SIZE,
            "rocklet_batch_1024", command,
        )  # fmt: skip
    backlog = f"rocklet/produce/batch/{E2E_SIZE}"
    pull: dict[str, Any] = {"op": "pull", "topic": "rocklet_batch_1024", "group": "CG_cpp_pull"}
    pull["max_num"] = 32
    push: dict[str, Any] = {"op": "push", "topic": "rocklet_batch_1024", "group": "CG_cpp_push"}
    consumers = (("pull", "PullConsumer, 32 per pull", pull), ("push", "PushConsumer", push))
    for variant, label, consumer in consumers:
        yield Case(
            f"rocklet-cpp/consume/{variant}/{E2E_SIZE}", cpp.key, "consume", variant, label,
            E2E_SIZE, "rocklet_batch_1024", consumer, backlog_of=backlog,
        )  # fmt: skip


def _sync_cases(p: Profile) -> Iterator[Case]:
    sync = SYSTEMS["rocklet-sync"]
    kib = E2E_SIZE
    yield _produce(sync, p, kib, "batch", 256, 4)
    yield _produce(sync, p, kib, "pipelined", 1, 64, label="one per request, 64 in flight")
    yield _e2e(sync, p, consumer="push", batch=256)


def build_plan(profile: Profile, systems: tuple[str, ...]) -> list[Case]:
    """Every case of ``systems`` for ``profile``, grouped by server, in run order."""
    cases: list[Case] = []
    if "rocklet" in systems:
        cases += _rocklet_cases(profile)
    if "rocklet-cpp" in systems and profile.cpp_count:
        cases += _cpp_cases(profile)
    if "rocklet-sync" in systems:
        cases += _sync_cases(profile)
    for key in ("redis", "rabbitmq", "rabbitmq-stream", "nats"):
        if key in systems:
            cases += _matrix(SYSTEMS[key], profile)
    return cases


def select_cases(plan: Sequence[Case], patterns: Sequence[str]) -> list[Case]:
    """The cases whose key matches one of ``patterns``, with the cases they read from.

    A consume case keeps the produce case that fills its backlog, so
    ``rocklet/consume/main/1024`` alone still has messages to read.

    Args:
        plan: The whole plan, in run order.
        patterns: Shell-style patterns over case keys (``rocklet/e2e/*``).

    Returns:
        The selected cases, in run order.
    """
    wanted = {c.key for c in plan if any(fnmatch.fnmatchcase(c.key, p) for p in patterns)}
    wanted |= {c.backlog_of for c in plan if c.key in wanted and c.backlog_of}
    return [c for c in plan if c.key in wanted]
